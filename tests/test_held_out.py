"""The held-out test figures of a GRPO run (``baselines/lm/held_out.py``): the paired comparison of start and end."""

from __future__ import annotations

import math
from typing import Any

import pytest

from baselines.lm.held_out import paired_difference


def test_paired_difference_of_known_outcomes() -> None:
    start = [1, 1, 0, 0, 0, 1, 0, 0, 0, 0]
    end = [1, 0, 1, 1, 1, 1, 0, 0, 0, 1]  # 4 problems gained, 1 lost
    got = paired_difference([bool(x) for x in start], [bool(x) for x in end])
    assert got["problems"] == 10 and got["gained"] == 4 and got["lost"] == 1
    assert got["start"] == pytest.approx(0.3) and got["end"] == pytest.approx(0.6)
    assert got["start_se"] == pytest.approx(math.sqrt(0.3 * 0.7 / 10))
    assert got["difference"] == pytest.approx(0.3)
    assert got["difference_se"] == pytest.approx(math.sqrt(4.1 / 9 / 10))  # sum of (d - 0.3)^2 = 4.1 over n - 1 = 9
    assert got["p_value"] == pytest.approx(12 / 32)  # two-sided binomial test of 4 against 1: P(X <= 1) + P(X >= 4)


def test_paired_difference_without_change_and_of_mismatched_outcomes() -> None:
    same = paired_difference([True, False, True], [True, False, True])
    assert same["difference"] == 0.0 and same["difference_se"] == 0.0 and same["p_value"] == 1.0
    with pytest.raises(ValueError, match="same problems"):
        paired_difference([True], [True, False])
    with pytest.raises(ValueError, match="same problems"):
        paired_difference([], [])


def test_a_saved_start_is_reused_only_for_the_same_problems_and_play(tmp_path, monkeypatch) -> None:
    """Regression: held_out.json of a multi-turn run with 12-token turns was read back by a run with 5-token turns (the
    settings left out --max-turn-tokens, and whether the turns are tool calls): its start came from another play."""
    from baselines.lm import held_out
    from baselines.lm.grpo_options import GRPORun, Options
    from countdown_gym.game.problem import Problem

    played: list[Any] = []
    monkeypatch.setattr(held_out, "greedy_solved", lambda model, tok, problems, how, **k: played.append(how) or [True, False])
    problems, path = [Problem((1, 2), 3, id="t/0"), Problem((2, 2), 4, id="t/1")], tmp_path / "held_out.json"

    def start(problems: list[Problem] = problems, **options: Any) -> list[bool]:
        run = GRPORun.of(Options(interaction="multi-turn", output_dir=str(tmp_path), **options))
        test = held_out.held_out_test(run, None, path, problems, None, verbose=False)
        test.start(None)
        return test.outcomes["start"]

    assert start(max_turn_tokens=12) == [True, False] and len(played) == 1 and played[0].max_turn_tokens == 12
    assert start(max_turn_tokens=12, eval_batch_size=7) == [True, False] and len(played) == 1  # read back
    start(max_turn_tokens=5)
    start(max_turn_tokens=5, prompt_style="instruct")
    start(max_turn_tokens=5, prompt_style="instruct", max_turns=8)
    start(problems[:1], max_turn_tokens=5, prompt_style="instruct", max_turns=8)
    assert [(h.max_turn_tokens, h.prompt_style, h.max_turns) for h in played[1:]] == [
        (5, "compact", 16), (5, "instruct", 16), (5, "instruct", 8), (5, "instruct", 8)]
    path.write_text('{"ids": ["t/0"')  # a damaged file: one error naming it
    with pytest.raises(SystemExit, match="held_out.json is not JSON"):
        start()


@pytest.mark.parametrize("start", [["1", "0"], [True], [2, 0], None, [True, None]])
def test_a_saved_start_of_other_values_is_one_error_naming_the_file(tmp_path, monkeypatch, start: Any) -> None:
    """A held_out.json whose 'start' was not one boolean per problem was read back: ["1", "0"] made the start 100% and
    the difference 0.5 against an end of [True, True] (end - start 0), [True] a ValueError after training."""
    import json

    from baselines.lm import held_out
    from baselines.lm.grpo_options import GRPORun, Options
    from countdown_gym.game.problem import Problem

    monkeypatch.setattr(held_out, "greedy_solved", lambda *a, **k: [True, False])
    problems, path = [Problem((1, 2), 3, id="t/0"), Problem((2, 2), 4, id="t/1")], tmp_path / "held_out.json"
    test = held_out.held_out_test(GRPORun.of(Options(output_dir=str(tmp_path))), None, path, problems, ["a", "b"], verbose=False)
    test.start(None)
    path.write_text(json.dumps({**json.loads(path.read_text()), "start": start}))
    with pytest.raises(SystemExit, match="held_out.json: 'start' must be a list of 2 true/false"):
        test.start(None)
