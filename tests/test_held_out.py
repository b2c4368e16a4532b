"""The held-out test figures of a GRPO run (``baselines/lm/held_out.py``): the paired comparison of start and end."""

from __future__ import annotations

import math

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
