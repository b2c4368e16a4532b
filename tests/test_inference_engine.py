"""The multi-turn rollout engine (countdown_gym.inference.engine) and its decoders.

- Greedy episodes are token for token those of the engine it replaced: ``data/turn_model_greedy_test500.json``
  holds, for the first 500 test problems, the turns and a hash of the completion ids that the previous engine
  (one Hugging Face forward per token, at commit 2d86480) produced with the shipped multi-turn model.
- Sampled tokens carry the log-probability of the sampling distribution (checked against a plain forward pass of
  the whole episode), and their frequencies follow it (a chi-square test).
- The direct decoder computes what the Hugging Face forward computes, for Llama and Qwen2 shapes (grouped-query
  attention, QKV biases), and refilling, compacting and reading the turns every k steps change nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from no_hang import no_hang  # noqa: E402

from baselines.lm.tiny_lm import build_tokenizer, load_pretrained  # noqa: E402
from countdown_gym import Problem, load_split  # noqa: E402
from countdown_gym.game.turn_game import replay_turns  # noqa: E402
from countdown_gym.inference.decoders import DirectDecoder, HFDecoder, make_decoder  # noqa: E402
from countdown_gym.inference.engine import REPLY_MARGIN, Episode, Sampler, draw  # noqa: E402
from countdown_gym.integrations.trl_rollout import play_episodes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TURN_MODEL = ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm-turns"
GOLDEN = Path(__file__).parent / "data" / "turn_model_greedy_test500.json"


@pytest.fixture(scope="module")
def turn_model():
    return load_pretrained(TURN_MODEL)


def _digest(ids: list[int]) -> str:
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]


def _assert_golden(rollouts, golden) -> None:
    for i, (r, g) in enumerate(zip(rollouts, golden, strict=True)):
        assert r.turns == g["turns"], f"problem {i}: turns differ"
        assert _digest(r.completion_ids) == g["ids"], f"problem {i}: completion ids differ"
        assert r.solved == g["solved"]


def test_greedy_episodes_equal_the_previous_engine_on_500_test_problems(turn_model) -> None:
    model, tok = turn_model
    golden = json.loads(GOLDEN.read_text())
    problems = load_split("longproc-0.5k", "test")[: len(golden)]
    rollouts = play_episodes(model, tok, problems, greedy=True, batch_size=256)
    _assert_golden(rollouts, golden)
    assert sum(r.solved for r in rollouts) == sum(g["solved"] for g in golden) == 61
    for r in rollouts:  # each episode's replay is read off the live game: what playing its turns again gives
        assert r.replay == replay_turns(r.problem, r.turns)


@pytest.mark.parametrize(("decoder", "n", "batch_size", "look_every"), [("direct", 24, 5, 1), ("direct", 24, 64, 12),
                                                                        ("hf", 12, 12, 1), ("hf", 12, 5, 5)])
def test_refill_compaction_and_look_interval_change_nothing(turn_model, decoder, n, batch_size, look_every) -> None:
    model, tok = turn_model
    golden = json.loads(GOLDEN.read_text())[:n]
    problems = load_split("longproc-0.5k", "test")[:n]
    rollouts = play_episodes(model, tok, problems, greedy=True, batch_size=batch_size, decoder=decoder,
                             look_every=look_every)
    _assert_golden(rollouts, golden)


def test_graphed_steps_change_nothing(turn_model) -> None:
    """The direct decoder's graph path (static buffers, cache lengths rounded up to GRAPH_BUCKET), run eagerly on
    the CPU as it is on CUDA but for the capture, with the turns read once a turn as on a GPU: the same episodes,
    and the engine counts its steps and looks."""
    model, tok = turn_model
    golden = json.loads(GOLDEN.read_text())[:48]
    problems = load_split("longproc-0.5k", "test")[:48]
    stats: dict = {}
    rollouts = play_episodes(model, tok, problems, greedy=True, batch_size=32, decoder="direct", look_every=12,
                             graphs=True, stats=stats)
    _assert_golden(rollouts, golden)
    assert 0 < stats["turns"] <= sum(len(r.turns) for r in rollouts)  # the turns the model wrote ("give up" apart)
    assert stats["steps"] > stats["looks"] > 0 and stats["play_s"] >= 0
    assert stats["graphs"] > 0  # the static-buffer steps ran


def test_a_look_interval_past_the_turn_budget_without_peeking_ends(turn_model, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an accelerator with peek_from=0, look_every=10**9 stepped every row, turns long ended, 10**9 times before
    playing them (a hang, its cache growing); now a look comes at most max_turn_tokens steps after the last."""
    from countdown_gym.integrations import trl_rollout

    class NoPeek(trl_rollout.Engine):  # what the engine does off the CPU with peek_from=0
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.peek_from = 0

    monkeypatch.setattr(trl_rollout, "Engine", NoPeek)
    model, tok = turn_model
    stats: dict = {}
    with no_hang(60):
        play_episodes(model, tok, load_split("longproc-0.5k", "test")[:1], max_turns=2, greedy=True, look_every=10**9,
                      peek_from=0, stats=stats)
    assert stats["steps"] == 12 * stats["looks"]


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (8, 2)])
def test_one_query_attention_is_sdpa(heads, kv_heads) -> None:
    """The decode attention the direct decoder runs on CUDA, computed here on the CPU against SDPA."""
    import torch.nn.functional as F

    from countdown_gym.inference.decoders import one_query_attention

    g = torch.Generator().manual_seed(0)
    rows, length, d = 6, 40, 16
    q = torch.randn(rows, heads, 1, d, generator=g, dtype=torch.float64)
    cache = torch.randn(2, rows, kv_heads, 64, d, generator=g, dtype=torch.float64)
    k, v = cache[0][:, :, :length], cache[1][:, :, :length]  # views of a longer cache, as the decoder reads it
    ends = torch.tensor([0, 5, 17, 39, 22, 1])
    mask = (torch.arange(length)[None, :] <= ends[:, None])[:, None, None, :]
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=heads != kv_heads)
    assert torch.allclose(one_query_attention(q, k, v, mask), want, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graphs_match_eager_steps(turn_model) -> None:
    model, tok = turn_model
    model = model.to("cuda")
    problems = load_split("longproc-0.5k", "test")[:64]
    eager = play_episodes(model, tok, problems, greedy=True, batch_size=64, graphs=False)
    graphed = play_episodes(model, tok, problems, greedy=True, batch_size=64, graphs=True)
    assert sum(a.turns == b.turns for a, b in zip(eager, graphed, strict=True)) >= 60  # float32 on a GPU: near-ties


def _teacher_forced(model, rollout, sampler: Sampler) -> list[float]:
    ids = torch.tensor([rollout.prompt_ids + rollout.completion_ids])
    with torch.no_grad():
        logp = sampler.log_probs(model(ids).logits[0])
    start = len(rollout.prompt_ids)
    return [float(logp[start + k - 1, t]) for k, (t, m) in enumerate(zip(rollout.completion_ids, rollout.env_mask,
                                                                           strict=True)) if m]


@pytest.mark.parametrize(("decoder", "knobs"), [("direct", {"temperature": 1.0}),
                                                ("direct", {"temperature": 0.7, "top_k": 20, "top_p": 0.9}),
                                                ("hf", {"temperature": 0.7, "top_k": 20, "top_p": 0.9})])
def test_sampled_tokens_carry_the_sampling_distributions_log_probability(turn_model, decoder, knobs) -> None:
    model, tok = turn_model
    problems = load_split("longproc-0.5k", "validation")[:12]
    torch.manual_seed(0)
    rollouts = play_episodes(model, tok, problems, batch_size=6, max_turns=8, decoder=decoder, **knobs)
    sampler = Sampler(**knobs)
    for r in rollouts:
        recorded = [lp for lp, m in zip(r.logprobs, r.env_mask, strict=True) if m]
        assert recorded == pytest.approx(_teacher_forced(model, r, sampler), abs=2e-4)
        assert all(lp > float("-inf") for lp in recorded)  # no token outside the top-k / top-p set


def test_sampled_first_moves_follow_the_models_distribution(turn_model) -> None:
    """3,000 one-turn episodes of one problem: the first tokens' counts against the model's probabilities."""
    model, tok = turn_model
    p = Problem((37, 14, 29, 6), 46)
    torch.manual_seed(0)
    n = 3000
    rollouts = play_episodes(model, tok, [p] * n, max_turns=1, batch_size=1000)
    first = torch.tensor([r.completion_ids[0] for r in rollouts])
    ids = torch.tensor([rollouts[0].prompt_ids])
    with torch.no_grad():
        probs = model(ids).logits[0, -1].float().softmax(-1)
    top = probs.argsort(descending=True)[:8]
    expected = probs[top] * n
    keep = expected >= 20
    observed = torch.stack([(first == t).sum() for t in top]).float()
    other_e, other_o = n - expected[keep].sum(), n - observed[keep].sum()
    chi2 = float((((observed[keep] - expected[keep]) ** 2) / expected[keep]).sum() + (other_o - other_e) ** 2 / other_e)
    dof = int(keep.sum())
    from scipy.stats import chi2 as chi2_dist

    assert chi2_dist.sf(chi2, dof) > 1e-3, (chi2, dof)


@pytest.mark.parametrize(("decoder", "knobs"), [("direct", {"greedy": True}), ("direct", {"top_k": 5, "top_p": 0.9}),
                                                ("hf", {"greedy": True}), ("hf", {}), ("generate", {"greedy": True}),
                                                ("generate", {})])
def test_nan_logits_are_an_error_not_episodes(turn_model, decoder, knobs, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model computing NaN: greedy episodes of garbage turns with NaN log-probabilities came back as results, and
    sampling indexed one past the vocabulary (an IndexError here, a device-side assert on CUDA); sampling through
    generate() was a RuntimeError inside torch.multinomial."""
    import copy

    from countdown_gym.integrations import trl_rollout

    model, tok = turn_model
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.model.norm.weight[0] = float("nan")
    if decoder == "generate":
        monkeypatch.setattr(trl_rollout, "make_decoder", lambda *a, **k: None)
    problems = load_split("longproc-0.5k", "test")[:3]
    with pytest.raises(ValueError, match="logits are NaN or infinite"):
        play_episodes(broken, tok, problems, decoder="auto" if decoder == "generate" else decoder, **knobs)
    with pytest.raises(ValueError, match="logits are NaN or infinite"):  # dividing by it overflows the logits
        play_episodes(model, tok, problems, temperature=1e-45)


@pytest.mark.parametrize("knobs", [{"temperature": float("inf")}, {"top_k": 2.5}, {"top_k": True}, {"top_p": None},
                                   {"top_p": "0.5"}, {"greedy": "no"}])
def test_sampler_refuses_knobs_that_sample_wrongly(knobs) -> None:
    """temperature=inf made masked (-inf) logits NaN, top_k=True sampled top-1, top_k=2.5 failed inside topk,
    top_p=None or "0.5" was a TypeError comparing it ('<' not supported ...), greedy="no" played greedily."""
    with pytest.raises(ValueError, match="temperature|top_k|top_p must be a number|greedy must be a bool"):
        Sampler(**knobs)


@pytest.mark.parametrize("top_p", [0.25, 0.5, 0.75, 0.9])
def test_top_p_keeps_what_transformers_keeps_at_ties(top_p) -> None:
    """Tied logits whose mass reaches top_p exactly (four at 0.25, 0.5 / 0.25 / 0.25): a token after the smallest
    set reaching top_p was kept (three of four at top_p=0.5); now the set is transformers' TopPLogitsWarper's."""
    from transformers.generation.logits_process import TopPLogitsWarper

    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 1.0, -1e9], [0.0, 3.0, 1.0, 2.0]]).log_softmax(-1)
    logits[1] = torch.tensor([0.5, 0.25, 0.25, 0.0]).log()
    kept = Sampler(top_p=top_p).log_probs(logits) > float("-inf")
    hf = TopPLogitsWarper(top_p)(None, logits.clone()) > float("-inf")
    assert kept.sum(-1).tolist() == hf.sum(-1).tolist()  # as many (which of tied tokens: the sort's choice)
    probs = logits.exp()
    assert (probs.masked_fill(~kept, 2.0).min(-1).values >= probs.masked_fill(kept, -1.0).max(-1).values).all()


def test_draw_follows_each_rows_probabilities_and_never_draws_a_zero() -> None:
    """200,000 draws of three rows (one with zeros at both ends and inside, one certain, one unnormalised by a
    float32 rounding): each index's frequency against its probability (a chi-square test)."""
    from scipy.stats import chi2 as chi2_dist

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0],
                          [0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
                          [0.1, 0.1, 0.1, 0.1, 0.1, 0.5 - 1e-6]])
    torch.manual_seed(0)
    n = 200_000
    got = torch.cat([draw(probs.repeat(1000, 1)).view(1000, 3) for _ in range(n // 1000)])  # [n, 3]
    for row in range(3):
        counts = torch.bincount(got[:, row], minlength=6).double()
        p = probs[row].double() / probs[row].double().sum()
        assert (counts[p == 0] == 0).all()
        live = p > 0
        if live.sum() > 1:
            chi2 = float(((counts[live] - n * p[live]) ** 2 / (n * p[live])).sum())
            assert chi2_dist.sf(chi2, int(live.sum()) - 1) > 1e-3, (row, chi2)


def _tiny(config_cls, model_cls, tok=None, **kw):
    tok = tok or build_tokenizer()
    torch.manual_seed(0)
    config = config_cls(vocab_size=len(tok), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, max_position_embeddings=512, pad_token_id=tok.pad_token_id,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **kw)
    model = model_cls(config).double().eval()  # float64: no near-tie can flip between two exact computations
    with torch.no_grad():
        model.lm_head.weight.mul_(40)  # peaked distributions: the random model writes turns and ends them
    return model, tok


def _qwen2(tok=None):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return _tiny(Qwen2Config, Qwen2ForCausalLM, tok, num_key_value_heads=2, tie_word_embeddings=False)


def _llama_gqa():
    from transformers import LlamaConfig, LlamaForCausalLM

    return _tiny(LlamaConfig, LlamaForCausalLM, num_key_value_heads=1, attention_bias=True)


@pytest.mark.parametrize("build", [_qwen2, _llama_gqa])
def test_direct_decoder_computes_the_hugging_face_forward(build) -> None:
    model, tok = build()
    assert DirectDecoder.supports(model)
    problems = load_split("longproc-0.5k", "validation")[:12]
    direct = play_episodes(model, tok, problems, greedy=True, max_turns=6, batch_size=5, decoder="direct")
    hf = play_episodes(model, tok, problems, greedy=True, max_turns=6, batch_size=5, decoder="hf")
    assert any(len(r.turns) > 1 for r in direct)
    for a, b in zip(direct, hf, strict=True):
        assert (a.turns, a.completion_ids, a.env_mask) == (b.turns, b.completion_ids, b.env_mask)
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-9)


def test_decoder_choice() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = build_tokenizer()
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=128))
    assert not DirectDecoder.supports(gpt2)
    assert isinstance(make_decoder(gpt2, 2, 128), HFDecoder)
    with pytest.raises(ValueError, match="direct decoder runs llama, qwen2"):
        make_decoder(gpt2, 2, 128, direct=True)
    qwen, _ = _qwen2()
    assert isinstance(make_decoder(qwen, 2, 128), DirectDecoder)
    with pytest.raises(ValueError, match="decoder must be one of"):
        play_episodes(qwen, tok, [Problem((1, 2), 3)], decoder="fast")
    with pytest.raises(ValueError, match="batch_size"):
        play_episodes(qwen, tok, [Problem((1, 2), 3)], batch_size=0)
    for bad in ({"look_every": "2"}, {"look_every": -5}, {"peek_from": -1}, {"peek_from": "4"}):  # -5: taken as 1
        with pytest.raises(ValueError, match="look_every must be a positive int|peek_from must be an int >= 0"):
            play_episodes(qwen, tok, [Problem((1, 2), 3)], **bad)
    assert play_episodes(qwen, tok, []) == []


def _tiny_gpt2():
    """The project's tokenizer and a small seeded GPT-2 (learned absolute positions), sharpened to decide turns."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = build_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=64, n_layer=2, n_head=4, n_positions=512,
                                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)).double().eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(40)
    return tok, model


def _engine_matches_generate(model, tok, problems, monkeypatch: pytest.MonkeyPatch) -> None:
    """Greedy episodes through the engine's decoder and through the generate() fallback agree token for token."""
    from countdown_gym.integrations import trl_rollout

    fast = play_episodes(model, tok, problems, greedy=True, max_turns=5, batch_size=3)
    monkeypatch.setattr(trl_rollout, "make_decoder", lambda *a, **k: None)
    slow = play_episodes(model, tok, problems, greedy=True, max_turns=5, batch_size=3)
    for a, b in zip(fast, slow, strict=True):
        assert (a.turns, a.completion_ids) == (b.turns, b.completion_ids)
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-9)


def test_gpt2_episodes_through_the_hugging_face_decoder_match_generate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model with learned absolute positions: the per-row positions of the HF decoder are the real tokens'."""
    tok, model = _tiny_gpt2()
    problems = load_split("longproc-0.5k", "validation")[:8]
    _engine_matches_generate(model, tok, problems, monkeypatch)


def test_generate_path_ignores_the_models_generation_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generate() fallback took the knobs the call leaves unset from the model's generation config (here a
    repetition penalty and a ban on repeated bigrams), so its episodes and log-probabilities were not the engine's."""
    tok, model = _tiny_gpt2()
    model.generation_config.repetition_penalty, model.generation_config.no_repeat_ngram_size = 3.0, 2
    problems = load_split("longproc-0.5k", "validation")[:6]
    _engine_matches_generate(model, tok, problems, monkeypatch)
    assert model.generation_config.repetition_penalty == 3.0  # the model's own config is left as it was


def test_generate_path_keeps_a_turns_tokens_equal_to_the_pad_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tokenizer whose pad token is one the model writes (no pad token: pad falls back to EOS or id 0): the
    generate() path dropped those tokens from a turn that ran to its budget, and shifted the log-probabilities
    of the tokens after them onto the wrong positions."""
    from countdown_gym.integrations import trl_rollout

    model, tok = _qwen2()
    problems = load_split("longproc-0.5k", "validation")[:6]
    fast = play_episodes(model, tok, problems, greedy=True, max_turns=3, max_turn_tokens=8, batch_size=3)
    assert fast[0].turn_index.count(0) == 8  # a first turn that ran to its budget
    tok.pad_token = tok.convert_ids_to_tokens(fast[0].completion_ids[3])  # a token inside it
    monkeypatch.setattr(trl_rollout, "make_decoder", lambda *a, **k: None)
    slow = play_episodes(model, tok, problems, greedy=True, max_turns=3, max_turn_tokens=8, batch_size=3)
    for a, b in zip(fast, slow, strict=True):
        assert (a.turns, a.completion_ids) == (b.turns, b.completion_ids)
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-9)


def test_a_turn_ends_at_any_token_holding_a_newline() -> None:
    """A vocabulary with a newline token and others holding one ("\\n\\n", ".\\n": Qwen's, Llama 3's): a turn ended
    only at the bare newline, so the model wrote on past "\\n\\n" into the environment's line, tokens trained on."""
    tok = build_tokenizer()
    tok.add_tokens(["\n\n"])
    nn = tok.convert_tokens_to_ids("\n\n")
    model, tok = _qwen2(tok)
    problem = load_split("longproc-0.5k", "validation")[:1]
    first = play_episodes(model, tok, problem, greedy=True, max_turns=1, max_turn_tokens=8).pop().completion_ids
    with torch.no_grad():  # the model now writes "\\n\\n" where it wrote the turn's second token
        w = model.lm_head.weight
        w[[nn, first[1]]] = w[[first[1], nn]]
    for r in play_episodes(model, tok, problem * 2, greedy=True, max_turns=4, max_turn_tokens=8):
        assert r.completion_ids[:2] == first[:1] + [nn] and r.turns[0] == tok.decode(first[:1])
        for k in range(len(r.turns)):
            ids = [t for t, i in zip(r.completion_ids, r.turn_index, strict=True) if i == k]
            assert all("\n" not in tok.decode([t]) for t in ids[:-1])  # a newline only in a turn's last token


def test_a_reply_of_reply_margin_tokens_is_kept_whole_at_the_length_limit() -> None:
    """At max_length = prompt + a whole turn + REPLY_MARGIN an episode played the turn, then cut its 32-token reply
    to 31 to leave room for the closing EOS: a turn is played only when its reply and the EOS fit too."""
    played = []
    for limit in range(62, 67):
        e = Episode(Problem((1, 2, 3), 6), "x", list(range(20)), 4)
        if e.room_for_a_turn(12, limit):
            e.add([5] * 12, model=True)
            e.add_reply(list(range(REPLY_MARGIN)), limit)
            assert e.completion[12:] == list(range(REPLY_MARGIN)) and 20 + len(e.completion) + 1 <= limit
            played.append(limit)
    assert played == [65, 66]


@pytest.mark.parametrize("generate", [False, True])
def test_a_turn_ends_at_any_eos_of_the_models_generation_config(generate, monkeypatch: pytest.MonkeyPatch) -> None:
    """Qwen2.5-Instruct's generation config lists two EOS ids ([151645, 151643]; generate() stops at either): a turn
    ended only at the tokenizer's own, so the model wrote on past the other one."""
    from countdown_gym.integrations import trl_rollout

    model, tok = _qwen2()
    problem = load_split("longproc-0.5k", "validation")[:1]
    first = play_episodes(model, tok, problem, greedy=True, max_turns=1, max_turn_tokens=8).pop().completion_ids
    model.generation_config.eos_token_id = [tok.eos_token_id, first[1]]
    if generate:
        monkeypatch.setattr(trl_rollout, "make_decoder", lambda *a, **k: None)
    r = play_episodes(model, tok, problem, greedy=True, max_turns=4, max_turn_tokens=8).pop()
    assert r.turn_index[:3] == [0, 0, -1] and r.completion_ids[:2] == first[:2]
    assert r.turns == [tok.decode(first[:2]), "give up"]


def test_the_stop_ids_are_read_once_per_tokenizer_and_again_when_its_vocabulary_grows() -> None:
    """Every GRPO step's rollout decoded the whole vocabulary again to find the tokens holding a newline."""
    from countdown_gym.integrations import trl_rollout

    tok = build_tokenizer()
    first = trl_rollout._stop_ids(tok)
    assert trl_rollout._STOPS[tok][1] == (tuple(first[0]), first[1])
    tok.add_tokens(["\n\n"])
    assert tok.convert_tokens_to_ids("\n\n") in trl_rollout._stop_ids(tok)[0]
