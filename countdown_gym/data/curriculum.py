"""Curriculum sampling over the difficulty tiers (:func:`countdown_gym.data.difficulty.tier`): a fixed schedule, or
adaptive to the recent success per tier that every environment reports back (``gymnasium.make("Countdown-v0",
curriculum=Curriculum())``). Draws use the caller's numpy generator; subprocess vector envs adapt a copy each.
"""
from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from countdown_gym.data.difficulty import TIERS, check_tier, tier
from countdown_gym.data.splits import split_problems
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import check_finite, describe_value, format_number

MODES = ("fixed", "adaptive")
Schedule = Sequence[tuple[int, Mapping[str, float]]]
"""``[(from_draw, {tier: weight}), ...]``: a fixed schedule, ``from_draw`` increasing from 0."""


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {describe_value(value)}")


class Curriculum:
    """Draws problems tier by tier.

    Args:
        problems: The pool; ``None``: the frozen ``split`` of ``preset`` (tiered by the shipped labels).
        mode: ``"fixed"``: the weights of the last ``schedule`` step reached apply. ``"adaptive"``: the frontier
            (the easiest tier whose success over its last ``window`` episodes is below ``promote_at``) gets
            ``1 - review`` of the draws, the easier tiers share ``review``; all mastered: all tiers equally.
        schedule: ``[(from_draw, {tier: weight}), ...]`` (``mode="fixed"``; :meth:`staged` builds the usual one).
        tier_preset: Whose thresholds tier the problems (default: each problem's own preset).
    """

    def __init__(self, problems: Sequence[Problem] | None = None, *, preset: str = "longproc-0.5k",
                 split: str = "train", mode: str = "adaptive", schedule: Schedule | None = None, window: int = 50,
                 promote_at: float = 0.6, review: float = 0.2, tier_preset: str | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
        if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= sys.maxsize:  # a deque's
            raise ValueError(f"window must be an int in 1..{sys.maxsize}, got {describe_value(window)}")
        for name, value in (("promote_at", promote_at), ("review", review)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {describe_value(value)}")
        if problems is None:
            pool = split_problems(preset, split)
            self.description = f"{preset}/{split} curriculum ({mode})"
        else:
            if isinstance(problems, (str, bytes, Problem)) or not isinstance(problems, Sequence):
                raise ValueError(f"problems must be a sequence of Problem, got {type(problems).__name__}")
            pool = tuple(problems)
            bad = next((p for p in pool if not isinstance(p, Problem)), None)
            if bad is not None:
                raise ValueError(f"problems must all be Problem values, got {describe_value(bad)}")
            self.description = f"curriculum over {len(pool)} problems ({mode})"
        if not pool:
            raise ValueError("a curriculum needs at least one problem")
        self.problems: tuple[Problem, ...] = pool
        self.tiers: tuple[str, ...] = tuple(tier(p, tier_preset) for p in pool)
        self._index = {t: np.array([i for i, x in enumerate(self.tiers) if x == t], dtype=np.int64) for t in TIERS}
        self._present = tuple(t for t in TIERS if len(self._index[t]))
        self._tier_of = {(p.numbers, p.target): t for p, t in zip(pool, self.tiers, strict=True)}
        self.mode = mode
        self.schedule = self._check_schedule(schedule) if mode == "fixed" else None
        if mode == "adaptive" and schedule is not None:
            raise ValueError("schedule is for mode='fixed'; the adaptive mode sets its weights from the agent's success")
        self.window, self.promote_at, self.review = window, float(promote_at), float(review)
        self.draws = 0
        self._results: dict[str, deque[bool]] = {t: deque(maxlen=window) for t in TIERS}
        self.episodes = dict.fromkeys(TIERS, 0)

    @classmethod
    def staged(cls, total_draws: int, problems: Sequence[Problem] | None = None, **kwargs: Any) -> Curriculum:
        """A fixed curriculum in three stages of ``total_draws / 3`` draws: easy; easy + medium; all three tiers."""
        if isinstance(total_draws, bool) or not isinstance(total_draws, int) or total_draws < 3:
            raise ValueError(f"total_draws must be an int >= 3, got {total_draws!r}")
        third = total_draws // 3
        schedule = [(0, {"easy": 1.0}), (third, {"easy": 1.0, "medium": 1.0}),
                    (2 * third, {"easy": 1.0, "medium": 1.0, "hard": 1.0})]
        return cls(problems, mode="fixed", schedule=schedule, **kwargs)

    def _check_schedule(self, schedule: Schedule | None) -> tuple[tuple[int, dict[str, float]], ...]:
        if not schedule:
            raise ValueError("mode='fixed' needs a schedule: [(from_draw, {tier: weight}), ...] starting at draw 0")
        out = []
        last = -1
        for step in schedule:
            if not isinstance(step, (tuple, list)) or len(step) != 2 or not isinstance(step[1], Mapping):
                raise ValueError(f"a schedule step is (from_draw, {{tier: weight}}), got {describe_value(step)}")
            start, weights = step
            if isinstance(start, bool) or not isinstance(start, int) or start <= last:
                raise ValueError(f"schedule draws must be increasing ints from 0, got {describe_value(start)} after {last}")
            # inf: inf / inf = NaN probabilities at the draw; a str "1_0" is no weight
            w = {check_tier(t): check_finite(v, f"schedule weight of {t!r}", non_negative=True) for t, v in weights.items()}
            empty = [t for t, v in w.items() if v > 0 and t not in self._present]
            if empty:
                raise ValueError(f"the schedule draws from tiers {empty}, but the pool has no such problem")
            if not 0 < sum(w.values()) < math.inf:  # 1e308 + 1e308: a NaN share at the draw
                raise ValueError(f"schedule step at draw {format_number(start)}: the weights' sum must be positive and finite")
            out.append((start, w))
            last = start
        if out[0][0] != 0:
            raise ValueError(f"the schedule must start at draw 0, got {out[0][0]}")
        return tuple(out)

    def success_rates(self) -> dict[str, float | None]:
        """Each tier's success rate over its last ``window`` episodes (``None`` before its first)."""
        return {t: (sum(r) / len(r) if r else None) for t, r in self._results.items()}

    def frontier(self) -> str | None:
        """Adaptive: the easiest tier not mastered yet (``None`` once all are)."""
        for t in self._present:
            r = self._results[t]
            if len(r) < self.window or sum(r) / len(r) < self.promote_at:
                return t
        return None

    def weights(self) -> dict[str, float]:
        """The probability of each tier for the next draw (sums to 1)."""
        if self.mode == "fixed":
            assert self.schedule is not None
            w = next(w for start, w in reversed(self.schedule) if start <= self.draws)
        else:
            front = self.frontier()
            if front is None:
                w = dict.fromkeys(self._present, 1.0)
            else:
                below = self._present[: self._present.index(front)]
                w = {front: 1.0 - self.review if below else 1.0}
                w.update(dict.fromkeys(below, self.review / len(below) if below else 0.0))
        total = sum(w.values())
        return {t: w.get(t, 0.0) / total for t in TIERS}

    def sample_index(self, rng: np.random.Generator) -> int:
        """The pool index of the next problem (one draw)."""
        return int(self.sample_indices(rng, 1)[0])

    def sample_indices(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` pool indices drawn with the current weights (one weights evaluation per call)."""
        if not isinstance(rng, np.random.Generator):  # a seed: an AttributeError, a negative n numpy's ValueError
            raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {describe_value(rng)}")
        _check_count("n", n)
        w = self.weights()
        p = np.array([w[t] for t in TIERS])
        tiers = rng.choice(len(TIERS), size=n, p=p)
        out = np.empty(n, dtype=np.int64)
        for k, t in enumerate(TIERS):
            rows = np.flatnonzero(tiers == k)
            if len(rows):
                idx = self._index[t]
                out[rows] = idx[rng.integers(len(idx), size=len(rows))]
        self.draws += n
        return out

    def sample(self, rng: np.random.Generator) -> Problem:
        """The next problem."""
        return self.problems[self.sample_index(rng)]

    def update(self, problem: Problem, success: bool) -> None:
        """Record one finished episode (problems outside the pool, e.g. from ``reset(options=...)``, are ignored)."""
        if not isinstance(success, (bool, np.bool_)):  # a reward of 0.1 or the str "no" is truthy: no success
            raise TypeError(f"success must be a bool, got {describe_value(success)}")
        if not isinstance(problem, Problem):  # a pool index or a (numbers, target) pair: an AttributeError below
            raise TypeError(f"problem must be a Problem, got {describe_value(problem)}")
        t = self._tier_of.get((problem.numbers, problem.target))
        if t is not None:
            self._results[t].append(bool(success))
            self.episodes[t] += 1

    def state(self) -> dict[str, Any]:
        """Draws, episodes, recent success rates and current weights per tier (for logging)."""
        return {"draws": self.draws, "episodes": dict(self.episodes), "success": self.success_rates(),
                "weights": self.weights()}

    def sequence(self, n: int, seed: int = 0) -> list[Problem]:
        """The next ``n`` draws as a list (a fixed schedule played ahead, e.g. an ordered training dataset)."""
        _check_count("n", n)  # -1 was silently no draw
        _check_count("seed", seed)  # -1: numpy's ValueError
        rng = np.random.default_rng(seed)
        return [self.sample(rng) for _ in range(n)]

    def __repr__(self) -> str:
        counts = {t: int(len(self._index[t])) for t in TIERS}
        return f"Curriculum({self.description}, tiers={counts}, draws={self.draws})"
