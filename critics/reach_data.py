"""Exactly labelled states of every size for the critic: ``(state, goal)`` pairs over a goal range.

The trace tables of :mod:`critics.data` cover the states a DFS trace stands on, labelled from the
trace alone. This module covers *every* state the critic is asked about: each start number set
(4 numbers), all states one move below it (3 numbers) and all states two moves below (2 numbers),
plus 1-number states. For each state :func:`countdown_gym.game.solver.reachable_values` gives every
value it can make, so a state carries its exact label for *every* goal of the range
``[goal_min, goal_max]`` (a bit row): no hindsight guess, no negative sampling.

Start sets are the train split's numbers plus random number sets of the preset's value range;
number sets of the validation and test splits are refused (:func:`build_reach_table` raises).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from countdown_gym import Rules, load_split
from countdown_gym.data.generator import get_config
from countdown_gym.game.solver import reachable_values, successors
from critics.data import cached_npz


@dataclass
class ReachTable:
    """States of sizes 1..max_numbers (sorted, 0-padded) and their reachable goals as a bool matrix."""

    max_numbers: int
    goal_range: tuple[int, int]
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
        mix = np.array([w if k + 1 < len(self._by_size) and len(self._by_size[k + 1]) else 0.0
                        for k, w in enumerate(size_mix)], dtype=np.float64)
        if mix.sum() <= 0:
            raise ValueError(f"no states of the sizes weighted by {list(size_mix)}")
        sizes = rng.choice(len(mix), size=batch, p=mix / mix.sum()) + 1
        out = np.empty(batch, dtype=np.int64)
        for k in np.unique(sizes):
            m = sizes == k
            pool = self._by_size[k]
            out[m] = pool[rng.integers(0, len(pool), int(m.sum()))]
        return out

    def save(self, path: str | Path) -> None:
        meta = np.array(json.dumps({"max_numbers": self.max_numbers, "goal_range": list(self.goal_range)}))
        np.savez_compressed(path, meta=meta, states=self.states, sizes=self.sizes, labels=self.labels)

    @classmethod
    def load(cls, path: str | Path) -> ReachTable:
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
            return cls(meta["max_numbers"], tuple(meta["goal_range"]), z["states"], z["sizes"], z["labels"])


def start_sets(preset: str = "longproc-0.5k", extra: int = 0, seed: int = 0, max_train: int = 0) -> list[tuple[int, ...]]:
    """The train split's number sets (its first ``max_train`` if > 0) plus ``extra`` random number sets
    of the preset's size and value range that no validation or test problem uses."""
    cfg = get_config(preset)
    train = load_split(preset, "train")
    if max_train > 0:
        train = train[:max_train]
    held = {tuple(sorted(p.numbers)) for s in ("validation", "test") for p in load_split(preset, s)}
    out, seen = [], set()
    for p in train:
        key = tuple(sorted(p.numbers))
        if key not in seen and key not in held:
            seen.add(key)
            out.append(key)
    rng = random.Random(seed)
    added = 0
    while added < extra:
        n = rng.randint(cfg.min_numbers, cfg.max_numbers)
        key = tuple(sorted(rng.randint(cfg.min_value, cfg.max_value) for _ in range(n)))
        if key in seen or key in held:
            continue
        seen.add(key)
        out.append(key)
        added += 1
    return out


def build_reach_table(
    starts: Iterable[Sequence[int]],
    rules: Rules | None = None,
    max_numbers: int = 4,
    goal_range: tuple[int, int] = (10, 50),
    forbidden: set[tuple[int, ...]] | None = None,
    singles: int = 2000,
    progress: bool = False,
) -> ReachTable:
    """Every distinct state within two moves of each start set, plus the 1-number states ``1..singles``,
    each with its reachable goals in ``goal_range`` (exact, :func:`reachable_values`).

    ``forbidden`` number sets (sorted tuples; by default those of the longproc-0.5k validation and
    test splits) raise ``ValueError``, and so do sets longer than ``max_numbers`` and rules with
    fractions (the table holds integer states).
    """
    rules = rules or Rules.longproc()
    if not rules.integer_only:
        raise ValueError(f"critic training tables hold integer states; rules {rules.name!r} allow fractions")
    if not rules.use_all:
        raise ValueError(f"critic training data needs use_all rules; {rules.name!r} lets numbers go unused")
    if forbidden is None:
        forbidden = {tuple(sorted(p.numbers)) for s in ("validation", "test") for p in load_split("longproc-0.5k", s)}
    lo, hi = goal_range
    starts = [tuple(sorted(int(x) for x in s)) for s in starts]
    it: Iterable[tuple[int, ...]] = starts
    if progress:
        from tqdm import tqdm

        it = tqdm(starts, desc="labelling states", unit="start")
    seen: set[tuple[int, ...]] = set()
    rows: list[tuple[int, ...]] = []

    def add(state: tuple[int, ...]) -> bool:
        if state in seen:
            return False
        seen.add(state)
        rows.append(state)
        return True

    for s in it:
        if s in forbidden:
            raise ValueError(f"start set {list(s)} belongs to a held-out split; it must not be used for training")
        if not 2 <= len(s) <= max_numbers:
            raise ValueError(f"start set {list(s)} has {len(s)} numbers; the critic takes 2..{max_numbers}")
        frontier = [s] if add(s) else []
        while frontier:
            nxt = []
            for state in frontier:
                if len(state) <= 2:
                    continue
                for _, child in successors(state, rules):
                    c = tuple(sorted(child))
                    if add(c):
                        nxt.append(c)
            frontier = nxt
    for v in range(1, singles + 1):
        add((v,))
    goals = np.arange(lo, hi + 1)
    states = np.zeros((len(rows), max_numbers), dtype=np.int64)
    sizes = np.zeros(len(rows), dtype=np.int64)
    labels = np.zeros((len(rows), len(goals)), dtype=bool)
    for i, st in enumerate(rows):
        states[i, : len(st)] = st
        sizes[i] = len(st)
        vals = reachable_values(st, rules)
        for v in vals:
            if type(v) is int and lo <= v <= hi:
                labels[i, v - lo] = True
    return ReachTable(max_numbers, (lo, hi), states, sizes, labels)


def cached_reach_table(preset: str = "longproc-0.5k", extra: int = 0, seed: int = 0,
                       goal_range: tuple[int, int] = (10, 50), cache_dir: str | Path | None = None,
                       progress: bool = True, max_train: int = 0) -> ReachTable:
    """:func:`build_reach_table` over :func:`start_sets`, cached as ``.npz`` in ``cache_dir``."""
    rules = get_config(preset).rules

    def build() -> ReachTable:
        held = {tuple(sorted(p.numbers)) for s in ("validation", "test") for p in load_split(preset, s)}
        return build_reach_table(start_sets(preset, extra, seed, max_train), rules, 4, goal_range, held, progress=progress)

    key = ["reach", preset, extra, seed, list(goal_range), max_train, 1]
    return cached_npz(cache_dir, "reach", key, rules, ReachTable.load, build)
