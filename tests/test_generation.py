"""baselines/lm/generation.py: the one batched generation of GRPO validation, llm_eval.py and llm_sft.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from baselines.lm.generation import Sampling, generate, prompt_ids, stop_ids  # noqa: E402
from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer  # noqa: E402
from countdown_gym import Problem  # noqa: E402
from countdown_gym.game.text_format import compact_prompt  # noqa: E402


def _tiny():
    torch.manual_seed(0)
    tok = build_tokenizer()
    return build_model(TinyLMConfig(hidden=32, layers=2, heads=2, intermediate=64, max_positions=256), tok), tok


def test_sampling_of_the_rollouts_is_the_grpo_configs() -> None:
    pytest.importorskip("trl")
    from trl import GRPOConfig

    config = GRPOConfig(output_dir="unused", use_cpu=True, report_to=[], temperature=0.7, top_p=0.9, top_k=5, min_p=0.1,
                        repetition_penalty=1.1)
    assert Sampling.of_rollouts(config) == Sampling(temperature=0.7, top_p=0.9, top_k=5, min_p=0.1, repetition_penalty=1.1)
    assert Sampling.of_rollouts(config).generate_kwargs(True) == {
        "do_sample": True, "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.9, "top_k": 5, "min_p": 0.1}
    assert Sampling().generate_kwargs(False) == {"do_sample": False, "repetition_penalty": 1.0}
    assert Sampling(temperature=0.5).episode_kwargs() == {"temperature": 0.5, "top_p": 1.0, "top_k": 0}
    with pytest.raises(ValueError, match="temperature must be > 0"):
        Sampling(temperature=0)
    with pytest.raises(ValueError, match="temperature must be > 0 and finite"):  # generate() drew uniformly
        Sampling(temperature=float("inf"))
    with pytest.raises(ValueError, match="--top-p must be in"):
        Sampling(top_p=0)


def test_the_models_own_repetition_penalty_does_not_apply() -> None:
    """An Instruct model's generation config (e.g. repetition_penalty 1.05) is overridden as TRL's rollouts override it."""
    model, tok = _tiny()
    prompts = [compact_prompt(Problem((1, 2, 3, 4), 10)), compact_prompt(Problem((25, 14, 38, 30), 31))]
    plain, n = generate(model, tok, prompts, max_new_tokens=16)
    model.generation_config.repetition_penalty = 50.0
    assert generate(model, tok, prompts, max_new_tokens=16) == (plain, n)
    assert generate(model, tok, prompts, max_new_tokens=16, sampling=Sampling(top_k=1), num_return_sequences=2)[0] == [
        g * 2 for g in plain]  # top-k 1 samples the greedy completion


def test_prompt_ids_add_no_second_bos_after_a_chat_template() -> None:
    tok = build_tokenizer()
    plain = compact_prompt(Problem((1, 2, 3, 4), 10))
    assert prompt_ids(tok, [plain]) == [tok(plain)["input_ids"]]
    tok.chat_template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    templated = tok.bos_token + plain
    assert prompt_ids(tok, [templated]) == [tok(templated, add_special_tokens=False)["input_ids"]]
    assert prompt_ids(tok, [templated])[0].count(tok.bos_token_id) == 1


def test_stop_ids_are_the_models_and_the_tokenizers() -> None:
    model, tok = _tiny()
    model.generation_config.eos_token_id = [7, tok.eos_token_id]
    assert stop_ids(model, tok) == sorted({7, tok.eos_token_id})
