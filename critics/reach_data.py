"""Exactly labelled states of every size for ``--objective reach``: each start number set (validation and test sets
refused), every state one and two moves below it and 1-number states, each with a bit row of the goals it reaches
(:func:`countdown_gym.game.solver.reachable_values`)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from countdown_gym import Rules
from countdown_gym.data.generator import get_config
from countdown_gym.game.solver import reachable_values, successors
from critics.data import NpzTable, cached_npz, draw_by_size, heldout_sets, train_split


@dataclass
class ReachTable(NpzTable):
    """States of sizes 1..max_numbers (sorted, 0-padded) and their reachable goals as a bool matrix."""

    states: np.ndarray  # int64 [N, max_numbers]
    sizes: np.ndarray  # int64 [N]
    labels: np.ndarray  # bool [N, G]: labels[i, g] = goal_min + g is reachable from states[i]

    def __post_init__(self) -> None:
        self._by_size = [np.flatnonzero(self.sizes == k) for k in range(self.max_numbers + 1)]

    @property
    def goals(self) -> np.ndarray:
        return np.arange(self.goal_range[0], self.goal_range[1] + 1, dtype=np.int64)

    def stats(self) -> dict[str, int | float]:
        out: dict[str, int | float] = {"reach_states": len(self.sizes)}
        for k in range(1, self.max_numbers + 1):
            m = self.sizes == k
            out[f"reach_size_{k}"] = int(m.sum())
            out[f"reach_size_{k}_positive_frac"] = round(float(self.labels[m].mean()), 4) if m.any() else 0.0
        return out

    def sample(self, batch: int, rng: np.random.Generator, size_mix: Sequence[float]) -> np.ndarray:
        """``batch`` state indexes; ``size_mix[k-1]`` is the relative chance of a ``k``-number state."""
        return draw_by_size(self._by_size, size_mix, batch, rng)


def start_sets(preset: str = "longproc-0.5k", extra: int = 0, seed: int = 0, max_train: int = 0) -> list[tuple[int, ...]]:
    """The train split's number sets (its first ``max_train`` if > 0) plus ``extra`` random number sets
    of the preset's size and value range that no validation or test problem uses."""
    cfg = get_config(preset)
    held = heldout_sets(preset)
    seen = dict.fromkeys(k for k in (tuple(sorted(p.numbers)) for p in train_split(preset, max_train)) if k not in held)
    rng = random.Random(seed)
    target = len(seen) + extra
    while len(seen) < target:
        n = rng.randint(cfg.min_numbers, cfg.max_numbers)
        key = tuple(sorted(rng.randint(cfg.min_value, cfg.max_value) for _ in range(n)))
        if key not in held:
            seen.setdefault(key)
    return list(seen)


def build_reach_table(starts: Iterable[Sequence[int]], rules: Rules | None = None, max_numbers: int = 4,
                      goal_range: tuple[int, int] = (10, 50), forbidden: set[tuple[int, ...]] | None = None,
                      singles: int = 2000, progress: bool = False) -> ReachTable:
    """Every distinct state within two moves of each start set, plus the 1-number states ``1..singles``,
    each with its reachable goals in ``goal_range`` (exact, :func:`reachable_values`).

    ``ValueError`` for a ``forbidden`` number set (default: those of longproc-0.5k's validation and test
    splits), a set longer than ``max_numbers`` and rules with fractions (the table holds integers).
    """
    rules = rules or Rules.longproc()
    if not rules.integer_only:
        raise ValueError(f"critic training tables hold integer states; rules {rules.name!r} allow fractions")
    if not rules.use_all:
        raise ValueError(f"critic training data needs use_all rules; {rules.name!r} lets numbers go unused")
    forbidden = heldout_sets() if forbidden is None else forbidden
    lo, hi = goal_range
    starts = [tuple(sorted(int(x) for x in s)) for s in starts]
    rows: dict[tuple[int, ...], None] = {}  # every state once, in order of discovery
    for s in tqdm(starts, desc="labelling states", unit="start", disable=not progress):
        if s in forbidden:
            raise ValueError(f"start set {list(s)} belongs to a held-out split; it must not be used for training")
        if not 2 <= len(s) <= max_numbers:
            raise ValueError(f"start set {list(s)} has {len(s)} numbers; the critic takes 2..{max_numbers}")
        level = [s]
        while level := [c for c in dict.fromkeys(level) if c not in rows]:  # the new states, one move deeper each round
            rows.update(dict.fromkeys(level))
            level = [tuple(sorted(c)) for st in level if len(st) > 2 for _, c in successors(st, rules)]
    rows.update(dict.fromkeys((v,) for v in range(1, singles + 1)))
    states = np.zeros((len(rows), max_numbers), dtype=np.int64)
    labels = np.zeros((len(rows), hi - lo + 1), dtype=bool)
    for i, st in enumerate(rows):
        states[i, : len(st)] = st
        labels[i, [v - lo for v in reachable_values(st, rules) if type(v) is int and lo <= v <= hi]] = True
    return ReachTable(max_numbers, (lo, hi), states, np.array([len(st) for st in rows], dtype=np.int64), labels)


def cached_reach_table(preset: str = "longproc-0.5k", extra: int = 0, seed: int = 0,
                       goal_range: tuple[int, int] = (10, 50), cache_dir: str | Path | None = None,
                       progress: bool = True, max_train: int = 0, max_numbers: int = 4) -> ReachTable:
    """:func:`build_reach_table` over :func:`start_sets`, cached as ``.npz`` in ``cache_dir``."""
    rules = get_config(preset).rules
    key = ["reach", preset, extra, seed, list(goal_range), max_train, 1] + ([max_numbers] if max_numbers != 4 else [])
    return cached_npz(cache_dir, "reach", key, rules, ReachTable.load,
                      lambda: build_reach_table(start_sets(preset, extra, seed, max_train), rules, max_numbers, goal_range,
                                                heldout_sets(preset), progress=progress))
