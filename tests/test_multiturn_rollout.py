"""Multi-turn rollouts of causal LMs (countdown_gym.integrations.trl_rollout) and GRPO on them with TRL."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from baselines import llm_grpo  # noqa: E402
from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, load_pretrained, save_pretrained  # noqa: E402
from countdown_gym import Problem, Rules, load_split  # noqa: E402
from countdown_gym.game.solver import reachable  # noqa: E402
from countdown_gym.game.turn_format import turn_prompt  # noqa: E402
from countdown_gym.game.turn_game import replay_turns  # noqa: E402
from countdown_gym.game.turn_trace import conversation, turn_trace  # noqa: E402
from countdown_gym.integrations import trl_rollout  # noqa: E402
from countdown_gym.integrations.trl import sparse_reward  # noqa: E402
from countdown_gym.integrations.trl_rollout import (  # noqa: E402
    conversation_ids,
    make_rollout_func,
    play_episodes,
    rollout_dataset,
    rollout_outputs,
    rollout_task,
)

TURN_MODEL = Path(llm_grpo.DEFAULT_TURN_MODEL)


def _tiny(seed: int = 0):
    torch.manual_seed(seed)
    tok = build_tokenizer()
    return build_model(TinyLMConfig(hidden=32, layers=2, heads=2, intermediate=64, max_positions=512), tok), tok


def _turn_model():
    if not (TURN_MODEL / "model.safetensors").exists():
        pytest.skip("the shipped multi-turn model is not built")
    return load_pretrained(TURN_MODEL)


def test_conversation_ids_mask_exactly_the_agent_turns() -> None:
    tok = build_tokenizer()
    p = Problem((21, 16, 17, 26), 46)
    conv = conversation(p, turn_trace(p))
    ids, mask = conversation_ids(tok, conv)
    assert len(ids) == len(mask) and ids[0] == tok.bos_token_id
    agent = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert agent == "".join(text + "\n" for role, text in conv if role == "agent")
    assert tok.decode(ids, skip_special_tokens=True) == "".join(text + "\n" for _, text in conv)
    with pytest.raises(ValueError, match="starts with the environment"):
        conversation_ids(tok, [("agent", "21+16")])


def test_cached_engine_equals_plain_generate_and_its_logprobs_are_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = _turn_model() if TURN_MODEL.exists() else _tiny()
    problems = load_split("longproc-0.5k", "validation")[:12]
    fast = play_episodes(model, tok, problems, greedy=True, max_turns=8, batch_size=5)
    monkeypatch.setattr(trl_rollout, "make_decoder", lambda *a, **k: None)  # the transformers.generate path
    slow = play_episodes(model, tok, problems, greedy=True, max_turns=8, batch_size=5)
    for a, b in zip(fast, slow, strict=True):
        assert a.turns == b.turns and a.completion_ids == b.completion_ids and a.env_mask == b.env_mask
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    monkeypatch.undo()
    torch.manual_seed(1)
    sampled = play_episodes(model, tok, problems[:4], temperature=1.0, max_turns=6)
    for r in sampled:
        ids = torch.tensor([r.prompt_ids + r.completion_ids])
        with torch.no_grad():
            logp = model(ids).logits.log_softmax(-1)[0]
        start = len(r.prompt_ids)
        for k, (t, m, lp) in enumerate(zip(r.completion_ids, r.env_mask, r.logprobs, strict=True)):
            if m:  # a model token: sampled at temperature 1 from the model's own distribution
                assert lp == pytest.approx(float(logp[start + k - 1, t]), abs=1e-4)


def test_rollout_layout_env_tokens_and_replay() -> None:
    model, tok = _tiny()
    problems = load_split("longproc-0.5k", "validation")[:6]
    torch.manual_seed(0)
    rollouts = play_episodes(model, tok, problems, temperature=1.0, max_turns=4, max_turn_tokens=5)
    for r in rollouts:
        assert len(r.completion_ids) == len(r.env_mask) == len(r.logprobs) == len(r.turn_index)
        assert r.completion_ids[-1] == tok.eos_token_id and r.env_mask[-1] == 0
        assert all((k >= 0) == bool(m) for k, m in zip(r.turn_index, r.env_mask, strict=True))
        assert all(lp == 0.0 for lp, m in zip(r.logprobs, r.env_mask, strict=True) if not m)
        env_text = tok.decode([t for t, m in zip(r.completion_ids, r.env_mask, strict=True) if not m], skip_special_tokens=True)
        for reply in r.replay.replies:
            assert reply in env_text
        assert r.replay.turns_played == len(r.turns) <= 4
        again = replay_turns(r.problem, r.turns, max_turns=4)
        assert (again.solved, again.replies) == (r.replay.solved, r.replay.replies)
    out = rollout_outputs(rollouts)
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "turn_index", "turn_replay"}


@pytest.mark.parametrize(("name", "value"), [("batch_size", 2.5), ("batch_size", True), ("max_turn_tokens", 0),
                                           ("max_turn_tokens", -1), ("max_turn_tokens", 4.0)])
def test_play_episodes_refuses_sizes_that_are_not_positive_ints(name, value) -> None:
    """batch_size=2.5 / True failed inside torch.zeros, max_turn_tokens=0 / -1 inside the engine's buffers."""
    model, tok = _tiny()
    with pytest.raises(ValueError, match=f"{name} must be a positive int"):
        play_episodes(model, tok, load_split("longproc-0.5k", "validation")[:2], greedy=True, **{name: value})


def test_play_episodes_refuses_stats_that_are_not_a_dict() -> None:
    """stats=True played every episode, then raised AttributeError: 'bool' object has no attribute 'update'."""
    model, tok = _tiny()
    with pytest.raises(TypeError, match="stats must be a dict .* got bool True"):
        play_episodes(model, tok, load_split("longproc-0.5k", "validation")[:2], greedy=True, stats=True)


@pytest.mark.parametrize(("max_length", "error"), [(0, "max_length must be a positive int"), (-5, "positive int"),
                                                   (513, "passes the model's max_position_embeddings")])
def test_play_episodes_refuses_a_length_limit_it_cannot_keep(max_length, error) -> None:
    """max_length=0 silently meant the model's limit, -5 played no turn at all, and a limit past the model's
    positions ran past them (a GPT-2's learned positions: an IndexError inside its embedding)."""
    model, tok = _tiny()
    with pytest.raises(ValueError, match=error):
        play_episodes(model, tok, load_split("longproc-0.5k", "validation")[:2], greedy=True, max_length=max_length)


@pytest.mark.parametrize("generate", [False, True])
def test_an_episode_stays_within_max_length_when_a_reply_is_longer_than_the_margin(generate, monkeypatch) -> None:
    """An error reply listing six 4-digit numbers is 44 tokens, past REPLY_MARGIN (32): at T = 1 episodes ran up to 5
    tokens past max_length (a model of learned positions would index past them in training)."""
    model, tok = _turn_model()
    if generate:
        monkeypatch.setattr(trl_rollout, "make_decoder", lambda *a, **k: None)
    problem = Problem((1234, 5678, 9012, 3456, 7890, 1357), 9999)
    torch.manual_seed(0)
    for max_length in (168, 182, 217, 224):
        for r in play_episodes(model, tok, [problem] * 16, max_length=max_length, temperature=1.0, batch_size=16):
            assert len(r.prompt_ids) + len(r.completion_ids) <= max_length


@pytest.mark.parametrize("kwargs", [{"max_length": 40}, {"max_turn_tokens": 10**4}])
def test_play_episodes_refuses_a_prompt_with_no_room_for_a_turn(kwargs) -> None:
    """A prompt too long for max_length, or a turn budget past it, gave episodes of no turn (unsolved, no error:
    every GRPO reward 0); max_turn_tokens=10**9 first allocated the engine's turn buffers that wide (killed)."""
    model, tok = _tiny()
    with pytest.raises(ValueError, match="no room for a turn of .* pass max_length"):
        play_episodes(model, tok, load_split("longproc-0.5k", "validation")[:2], greedy=True, **kwargs)


@pytest.mark.parametrize("problems", [[((1, 2), 3)], "abc", (p for p in load_split("longproc-0.5k", "test")[:2])])
def test_rollouts_refuse_problems_that_are_not_a_list_of_problems(problems) -> None:
    """A (numbers, target) pair or a str raised AttributeError deep in text_format, and a generator of problems a
    ValueError from zip() (the prompts had used it up)."""
    model, tok = _tiny()
    with pytest.raises(TypeError, match="problems must be a sequence of Problem"):
        play_episodes(model, tok, problems, greedy=True)
    with pytest.raises(TypeError, match="problems must be a sequence of Problem"):
        make_rollout_func(problems)


@pytest.mark.parametrize(("problem", "error"), [(Problem((5, 3), 5, Rules.classic()), "won before a move"),
                                                (Problem((7,), 9), "at least 2 numbers")])
def test_rollouts_refuse_problems_the_environment_refuses(problem, error) -> None:
    """Played as episodes that could never be won (reward 0 for a puzzle already solved), as CountdownMultiTurn-v0
    and the tool adapter refuse them."""
    model, tok = _tiny()
    with pytest.raises(ValueError, match=error):
        play_episodes(model, tok, [problem], greedy=True, max_turns=2)
    with pytest.raises(ValueError, match=error):
        make_rollout_func([problem])


def test_rollouts_stop_at_a_dead_end_when_asked() -> None:
    """play_episodes(stop_at_dead_end=True): the shipped model's sampled episodes that lose the target end on the
    move that lost it (its reply ends "dead end", then EOS), and the replay says so; the same draws without the
    option play on past it."""
    model, tok = _turn_model()
    problems = load_split("longproc-0.5k", "train")[:16]
    torch.manual_seed(0)
    stopped = play_episodes(model, tok, problems, temperature=0.5, max_turns=16, stop_at_dead_end=True)
    ends = [r for r in stopped if r.replay.dead_end]
    assert ends and all(r.replay.replies[-1].endswith(" dead end") and not r.solved and r.replay.truncated for r in ends)
    for r in ends:
        assert r.completion_ids[-1] == tok.eos_token_id and r.replay.turns_played == len(r.turns)
        last = r.replay.transitions[-1]
        assert last["valid"] and not reachable(last["next_state"], r.problem.target, r.problem.rules)
        again = replay_turns(r.problem, r.turns, max_turns=17)  # the same turns without the option: the game goes on
        assert not again.dead_end and not again.truncated and again.replies[-1] == r.replay.replies[-1].removesuffix(" dead end")
    torch.manual_seed(0)
    whole = play_episodes(model, tok, problems, temperature=0.5, max_turns=16)
    torch.manual_seed(0)
    patient = play_episodes(model, tok, problems, temperature=0.5, max_turns=16, stop_at_dead_end=4)
    for r in (r for r in patient if r.replay.dead_end):  # four turns in a row ended in lost states
        lost = [not reachable(s, r.problem.target, r.problem.rules) for s in _states_after_turns(r)]
        assert lost[-4:] == [True] * 4 and (len(lost) == 4 or not lost[-5])
    tokens = [sum(len(r.completion_ids) for r in rs) for rs in (stopped, patient, whole)]
    assert tokens[0] < tokens[1] < tokens[2]


def _states_after_turns(r: Any) -> list[tuple]:
    """The state each turn of a rollout ended in (a refused or unreadable turn leaves it as it was)."""
    state, states = tuple(r.problem.numbers), []
    by_turn = {t["turn"]: t for t in r.replay.transitions if t["valid"]}
    for i in range(r.replay.turns_played):
        if i in by_turn:
            state = by_turn[i]["next_state"]
        states.append(state)
    return states


def test_rollout_func_refuses_unknown_and_chat_prompts() -> None:
    problems = load_split("longproc-0.5k", "train")[:3]
    func = make_rollout_func(problems)
    with pytest.raises(KeyError, match="not the turn prompt"):
        func(["Numbers: [1,2] Target: 3\n"], None)
    with pytest.raises(TypeError, match="environment_factory"):
        func([[{"role": "user", "content": "hi"}]], None)
    ds = rollout_dataset(problems)
    assert ds.column_names == ["prompt", "numbers", "target"] and ds[0]["numbers"] == list(problems[0].numbers)


@pytest.mark.parametrize("knob", [{"min_p": 0.1}, {"repetition_penalty": 1.2}, {"generation_kwargs": {"top_k": 3}}])
def test_rollout_func_refuses_sampling_knobs_it_would_ignore(knob) -> None:
    """A GRPOConfig's min_p, repetition_penalty or generation_kwargs were silently left out of the rollouts' sampling
    (TRL applies them to its own generation), so the run sampled otherwise than configured."""
    from trl import GRPOConfig

    problems = load_split("longproc-0.5k", "train")[:2]
    args = GRPOConfig(output_dir="/tmp/unused", use_cpu=True, report_to=[], **knob)
    trainer = types.SimpleNamespace(args=args, model=None, accelerator=None, processing_class=None)
    with pytest.raises(ValueError, match=f"temperature, top_p and top_k only; the trainer's {next(iter(knob))}="):
        make_rollout_func(problems)([turn_prompt(problems[0])], trainer)


def test_rollout_func_refuses_problems_it_cannot_tell_apart_by_prompt() -> None:
    from countdown_gym import Problem, Rules

    longproc, tinyzero = Problem((6, 2, 5, 3), 8, Rules.longproc()), Problem((6, 2, 5, 3), 8, Rules.tinyzero())
    with pytest.raises(ValueError, match="have one 'compact' turn prompt"):  # the compact prompt leaves the rules out
        make_rollout_func([longproc, tinyzero])
    make_rollout_func([longproc, tinyzero], prompt_style="instruct")
    make_rollout_func([longproc, longproc])  # the same problem twice is no ambiguity


def test_rollout_task_pairs_the_dataset_with_its_rollout_function() -> None:
    problems = load_split("longproc-0.5k", "train")[:3]
    dataset, func = rollout_task(problems, max_turns=6, prompt_style="instruct")
    assert dataset["prompt"] == [turn_prompt(p, "instruct", 6) for p in problems]
    assert dataset["prompt"] != rollout_dataset(problems, prompt_style="instruct")["prompt"]  # the budget is in the prompt
    with pytest.raises(KeyError, match="not the turn prompt"):  # the prompt of another budget is refused
        func([turn_prompt(problems[0], "instruct", 16)], None)


def test_grpo_on_multi_turn_rollouts_masks_the_environment_and_rewards_the_verdict() -> None:
    """Two real GRPO steps of TRL on multi-turn rollouts: environment tokens have zero loss weight and the
    reward is the environment's verdict of the moves played."""
    from trl import GRPOConfig, GRPOTrainer

    model, tok = _turn_model()
    seen: list[dict[str, Any]] = []
    rewards: list[tuple[list[float], list[float]]] = []

    pool = load_split("longproc-0.5k", "train")[:40]
    greedy = play_episodes(model, tok, pool, greedy=True, max_turns=8)
    solved = [r.problem for r in greedy if r.solved][:3]
    assert solved, "the shipped multi-turn model solves some of the first 40 training problems greedily"
    problems = solved + [r.problem for r in greedy if not r.solved][:1]  # groups that mostly succeed, one that fails
    by_prompt = {turn_prompt(p): p for p in problems}

    def verdict_reward(prompts, completions, completion_ids=None, **kwargs):
        got = sparse_reward(prompts, completions, completion_ids, **kwargs)
        # independently of the rollout's own bookkeeping: the model's tokens, cut into turns, played from scratch
        again = []
        for prompt, ids, index in zip(prompts, completion_ids, kwargs["turn_index"], strict=True):
            turns = [tok.decode([t for t, j in zip(ids, index, strict=True) if j == k], skip_special_tokens=True).split("\n")[0]
                     for k in sorted({j for j in index if j >= 0})]
            again.append(replay_turns(by_prompt[prompt], turns, max_turns=8).reward)
        rewards.append((got, again))
        return got

    class Recording(GRPOTrainer):
        def _compute_loss(self, model, inputs):
            seen.append({k: v.detach().clone() if hasattr(v, "detach") else v for k, v in inputs.items()})
            return super()._compute_loss(model, inputs)

    config = GRPOConfig(output_dir="/tmp/unused", max_steps=2, per_device_train_batch_size=8, num_generations=4,
                        max_completion_length=256, learning_rate=1e-4, use_cpu=True, bf16=False, report_to=[],
                        logging_steps=1, save_strategy="no", temperature=0.3, seed=0)
    trainer = Recording(model=model, reward_funcs=[verdict_reward], args=config, train_dataset=rollout_dataset(problems),
                        processing_class=tok, rollout_func=make_rollout_func(problems, max_turns=8))
    trainer.train()
    assert len(seen) == 2 and len(rewards) == 2
    assert any(r > 0 for got, _ in rewards for r in got) and any(r == 0 for got, _ in rewards for r in got)
    for batch, (got, again) in zip(seen, rewards, strict=True):
        assert got == again  # the reward is the environment's verdict of the moves the model wrote
        mask = batch["completion_mask"] * batch["tool_mask"]
        ids = batch["completion_ids"]
        for row in range(ids.shape[0]):
            trained = tok.decode(ids[row][mask[row].bool()].tolist())
            assert "[" not in trained and "=" not in trained  # replies ("= 8 [14,6,8]") never get loss weight
            assert mask[row].sum() < batch["completion_mask"][row].sum()  # there were environment tokens


def test_llm_grpo_multi_turn_run_writes_its_files(tmp_path: Path) -> None:
    model, tok = _tiny()
    save_pretrained(model, tok, tmp_path / "model", meta={"sft_config": {"interaction": "multi-turn"}})
    out = tmp_path / "run"
    opts = llm_grpo.Options(model=str(tmp_path / "model"), steps=2, prompts_per_step=2, num_generations=4, max_turns=4,
                            eval_interval=1, eval_problems=4, eval_samples=2, output_dir=str(out), save_steps=1,
                            train_problems=16, quiet=True, rewards="oracle", test_problems=6)
    assert llm_grpo.GRPORun.of(opts).multi_turn  # from the model's training.json
    summary = llm_grpo.train(opts)
    assert summary["first"]["step"] == 0 and summary["last"]["step"] == 2
    assert json.loads((out / "options.json").read_text())["interaction"] == "multi-turn"
    held_out = json.loads((out / "held_out.json").read_text())  # the first 6 test problems, played at the start and the end
    assert held_out["ids"] == [str(p.id) for p in load_split("longproc-0.5k", "test")[:6]]
    assert len(held_out["start"]) == len(held_out["end"]) == 6 and held_out["result"] == summary["test"]
    assert summary["test"]["problems"] == 6 and "## Test" in (out / "README.md").read_text()
    logs = [json.loads(line) for line in (out / "train_log.jsonl").open()]
    step_logs = [x for x in logs if "reward" in x]
    assert len(step_logs) == 2 and "rewards/oracle_reachable_reward/mean" in step_logs[0]
    assert "interaction: `multi-turn`" in (out / "README.md").read_text()
    profile = summary["step_profile"]  # where a step's time goes (baselines/lm/callbacks.py), also in the run card
    assert profile["generation"] > 0 and profile["rewards"] > 0 and profile["train_forward"] > 0
    parts = sum(v for k, v in profile.items() if k != "step")
    assert parts == pytest.approx(profile["step"], rel=1e-6)
    assert "## Time per step" in (out / "README.md").read_text()
