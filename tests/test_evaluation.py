"""baselines/lm/evaluation.py: the one evaluator of language models (records, rates and their SEs, the validation row)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("transformers")

from baselines.lm.evaluation import Evaluation, Play, Record, completion_records, evaluate, greedy_solved  # noqa: E402
from countdown_gym import Problem  # noqa: E402
from countdown_gym.game.text_format import compact_prompt  # noqa: E402

P = Problem((37, 14, 29, 6), 46)
SOLVED = "<Solution>\n37 - 14 = 23\n29 - 6 = 23\n23 + 23 = 46\n</Solution>\n"
WRONG_MOVE = "37-29=9 [14,6,9]\n"


def _record(solved: bool, invalid: bool = False) -> Record:
    return Record(solved, invalid, "", "")


def test_completions_are_judged_by_the_rewards_verdict() -> None:
    (solved,), (wrong,) = completion_records([P, P], [[SOLVED], [WRONG_MOVE]])
    assert solved.solved and not solved.invalid and solved.answer == SOLVED and solved.turns is None
    assert not wrong.solved and wrong.invalid


def test_rates_and_their_standard_errors() -> None:
    ev = Evaluation([_record(True), _record(False, True), _record(False), _record(True)],
                    sampled=[[_record(True), _record(False)], [_record(False)] * 2, [_record(False, True)] * 2,
                             [_record(True)] * 2],
                    greedy_tokens=40, greedy_seconds=1.0, sampled_tokens=60, sampled_seconds=1.0)
    rates = ev.rates()
    assert rates["problems"] == 4 and rates["samples"] == ev.samples == 2
    assert rates["greedy_success"] == 0.5 and rates["greedy_invalid_frac"] == 0.25
    assert rates["greedy_success_se"] == pytest.approx(math.sqrt(0.5 * 0.5 / 4))  # the binomial SE, as the held-out test's
    assert rates["sampled_success_se"] == pytest.approx(math.sqrt(0.6875 / 3 / 4))  # shares .5, 0, 0, 1
    assert rates["sampled_success"] == pytest.approx(0.375) and rates["pass_at_k"] == 0.5
    assert rates["sampled_invalid_frac"] == 0.25
    row = ev.row()
    assert not any(k.endswith("_se") for k in row)
    assert row["mean_completion_tokens"] == pytest.approx(100 / 12) and row["tokens_per_s"] == 50.0
    greedy_only = Evaluation([_record(True)], greedy_tokens=3, greedy_seconds=0.5).row()
    assert "pass_at_k" not in greedy_only and "sampled_success" not in greedy_only and greedy_only["samples"] == 0


def test_single_pass_play_needs_one_prompt_per_problem() -> None:
    with pytest.raises(ValueError, match="one prompt per problem"):
        greedy_solved(None, None, [P, P], Play(), prompts=["x"])
    with pytest.raises(ValueError, match="samples must be an int >= 0, got -1"):  # was played as one sample each
        evaluate(None, None, [P], Play(), prompts=["x"], samples=-1)


def test_greedy_play_leaves_the_model_and_its_rng_as_they_were() -> None:
    import torch

    from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer

    tok = build_tokenizer()
    model = build_model(TinyLMConfig(hidden=32, layers=1, heads=2, intermediate=64), tok)
    model.train()
    problems = [P, Problem((3, 5, 2, 6), 8)]
    torch.manual_seed(1)
    before = torch.get_rng_state()
    ev = evaluate(model, tok, problems, Play(max_new_tokens=4, batch_size=2),
                  prompts=[compact_prompt(p) for p in problems], samples=2, seed=3)
    assert model.training and torch.equal(torch.get_rng_state(), before)
    assert len(ev.greedy) == 2 and [len(rs) for rs in ev.sampled] == [2, 2]
    again = evaluate(model, tok, problems, Play(max_new_tokens=4, batch_size=2),
                     prompts=[compact_prompt(p) for p in problems], samples=2, seed=3)
    assert [r.answer for rs in again.sampled for r in rs] == [r.answer for rs in ev.sampled for r in rs]
    assert greedy_solved(model, tok, problems, Play(max_new_tokens=4),
                         prompts=[compact_prompt(p) for p in problems]) == [r.solved for r in ev.greedy]
