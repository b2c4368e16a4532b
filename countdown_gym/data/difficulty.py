"""Solver-measured difficulty of a problem (:func:`measure`), the shipped labels of the frozen splits as
:class:`Difficulty` records (:func:`difficulty`; files, hashes and cut points: :mod:`countdown_gym.data.labels`), and
the tiers (:func:`tier`: ``"easy"``, ``"medium"``, ``"hard"`` by reference-DFS search size, cut per preset into
about equal thirds of its test split). ``countdown-gym difficulty`` re-measures them; ``docs/difficulty.md``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import Any

from countdown_gym.data.labels import (
    LABELS_SHA256,
    TIER_METRIC,
    TIER_THRESHOLDS,
    TIERS,
    LabelsIntegrityError,
    check_tier,
    label_rows,
    labels_path,
    metric_tier,
    split_tiers,
)
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS, split_problems
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number
from countdown_gym.game.solver import reachable, solve, successors
from countdown_gym.game.trace import search_nodes

__all__ = [
    "LABELS_SHA256", "TIERS", "TIER_METRIC", "TIER_THRESHOLDS", "Difficulty", "LabelsIntegrityError", "check_tier",
    "difficulty", "labels_path", "measure", "split_labels", "split_tiers", "tier", "tier_thresholds",
]


@dataclasses.dataclass(frozen=True)
class Difficulty:
    """Solver-measured difficulty of one problem.

    Attributes:
        num_solutions: Distinct solution expressions (:func:`countdown_gym.solve`; 0 when unsolvable).
        search_nodes: Moves the reference DFS tries before it reaches the target (its ``Try`` lines).
        first_wrong_depth: Moves made when the reference DFS first makes a legal move that loses the target (0: its
            first move); ``None`` when its first path wins, or the problem is unsolvable.
        wrong_moves: Legal moves of the reference DFS from a winnable state into a lost one.
        good_first_moves: Legal first moves after which the target is still reachable.
        legal_first_moves: Legal first moves.
        solution: The first of :func:`countdown_gym.solve`, ``None`` when unsolvable.
    """

    num_solutions: int
    search_nodes: int
    first_wrong_depth: int | None
    wrong_moves: int
    good_first_moves: int
    legal_first_moves: int
    solution: str | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the labels files' line format, without ``id``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Difficulty:
        """Inverse of :meth:`to_dict` (extra keys such as ``id`` are ignored)."""
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})


def measure(problem: Problem) -> Difficulty:
    """Measure ``problem``'s difficulty with the solver and the reference DFS (no cache; see :func:`difficulty`)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"measure() needs a Problem, got {type(problem).__name__}")
    rules, target = problem.rules, problem.target
    solutions = solve(problem)
    firsts = [nxt for _, nxt in successors(problem.numbers, rules)]
    wrong: list[int] = []  # the depth of each move of the reference DFS from a winnable state into a lost one
    dead = -1  # depth of the dead end the search is inside (-1: none); every state above it can reach the target

    def visit(depth: int, state: list[Number], nxt: list[Number]) -> None:
        nonlocal dead
        if 0 <= dead < depth:  # still below the dead end's move: nothing to check
            return
        dead = -1
        if not reachable(nxt, target, rules):
            wrong.append(depth)
            dead = depth

    nodes = search_nodes(problem, visit=visit) if solutions else search_nodes(problem)
    return Difficulty(num_solutions=len(solutions), search_nodes=nodes,
                      first_wrong_depth=wrong[0] if wrong and solutions else None, wrong_moves=len(wrong),
                      good_first_moves=sum(reachable(nxt, target, rules) for nxt in firsts),
                      legal_first_moves=len(firsts), solution=solutions[0] if solutions else None)


@lru_cache(maxsize=1 << 16)
def _measured(numbers: tuple[int, ...], target: int, rules: Any) -> Difficulty:
    return measure(Problem(numbers, target, rules))


@cache
def split_labels(preset: str, split: str) -> tuple[Difficulty, ...]:
    """The shipped :class:`Difficulty` of every problem of a frozen split, in split order (hash-checked)."""
    rows = label_rows(preset, split)
    if [r.get("id") for r in rows] != [p.id for p in split_problems(preset, split)]:
        raise LabelsIntegrityError(f"{labels_path(preset, split)} does not list the problems of {preset}/{split} in order")
    return tuple(Difficulty.from_dict(r) for r in rows)


def _shipped(problem: Problem) -> Difficulty | None:
    """The shipped label of a frozen-split problem (found by its id ``<preset>/<split>/<index>``), else ``None``."""
    parts = (problem.id if isinstance(problem.id, str) else "").rsplit("/", 2)  # a row's own id may be any value
    if len(parts) != 3 or parts[0] not in SPLIT_SPEC or parts[1] not in SPLITS or not parts[2].isascii() \
            or not parts[2].isdigit() or len(parts[2]) > 9:  # int() refuses "²" and a 5,000-digit index
        return None
    problems = split_problems(parts[0], parts[1])
    k = int(parts[2])
    if k >= len(problems) or problems[k] != problem or problems[k].id != problem.id:
        return None
    return split_labels(parts[0], parts[1])[k]


def difficulty(problem: Problem) -> Difficulty:
    """The :class:`Difficulty` of ``problem``: the shipped label of a frozen-split problem, else measured once."""
    if not isinstance(problem, Problem):
        raise TypeError(f"difficulty() needs a Problem, got {type(problem).__name__}")
    shipped = _shipped(problem)
    if shipped is not None:
        return shipped
    return _measured(problem.numbers, problem.target, problem.rules)


def tier(item: Problem | Difficulty, preset: str | None = None) -> str:
    """The tier of a problem or its :class:`Difficulty`, by the thresholds of ``preset``, else the problem's own
    preset, else :data:`~countdown_gym.data.labels.DEFAULT_TIER_PRESET`."""
    if preset is not None and preset not in TIER_THRESHOLDS:  # a typo would silently cut by the default's thresholds
        raise ValueError(f"no tier thresholds for preset {preset!r}; choose one of {sorted(TIER_THRESHOLDS)}")
    if isinstance(item, Problem):
        preset = preset or item.preset
        item = difficulty(item)
    elif not isinstance(item, Difficulty):
        raise TypeError(f"tier() needs a Problem or a Difficulty, got {type(item).__name__}")
    return metric_tier(getattr(item, TIER_METRIC), preset)


def tier_thresholds(values: Sequence[int]) -> tuple[int, int]:
    """The 1/3 and 2/3 quantiles (lower values) of ``values``: the cut points of about equal thirds."""
    s = sorted(values)
    if not s:
        raise ValueError("no values to cut into tiers")
    return s[(len(s) - 1) // 3], s[(2 * len(s) - 1) // 3]
