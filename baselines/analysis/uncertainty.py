"""Standard errors of the baselines' figures, one home for the formulas every table and run card quotes."""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Sequence
from typing import Any, Literal


def finite_number(x: Any, low: float = 0.0, high: float = sys.float_info.max) -> bool:  # a figure read back from a file
    return isinstance(x, int | float) and not isinstance(x, bool) and low <= x <= high  # NaN and Infinity fail


def binomial_se(p: float, n: int) -> float:
    """The standard error of a success rate ``p`` measured on ``n`` problems, ``sqrt(p(1 - p) / n)``; 0 for none."""
    if n <= 0:
        return 0.0
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def mean_se(values: Sequence[float]) -> float | None:
    """The standard error of the mean of per-problem values that are not all 0 or 1 (pass@k, a problem's share of
    samples solved); None for fewer than two."""
    if len(values) < 2:
        return None
    return seed_spread(values, "se")


def seed_spread(xs: Sequence[float], kind: Literal["std", "se"] = "se") -> float:
    """The standard deviation (``std``) or the mean's standard error (``se``) of per-seed values; 0 for under two."""
    if len(xs) < 2:
        return 0.0
    sd = statistics.stdev(xs)
    return sd if kind == "std" else sd / math.sqrt(len(xs))
