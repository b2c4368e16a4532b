"""Problems of any number beyond the frozen splits: :func:`fresh_problems`, the seeded generator under the splits'
play rules (:data:`~countdown_gym.data.splits.SPLIT_RULES`) minus every frozen validation and test problem of any
preset (:func:`held_out_keys`; train problems may appear). Ids read ``<preset>/generated-<seed>/<index>``;
``docs/datasets.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import cache

from countdown_gym.data.generator import GeneratorConfig, get_config, iter_problems, take
from countdown_gym.data.splits import SPLIT_RULES, SPLIT_SPEC, load_split
from countdown_gym.game.problem import Problem

GENERATED = "generated"
"""The split name of generated problems (their ids read ``<preset>/generated-<seed>/<index>``)."""

HELD_OUT_SPLITS: tuple[str, ...] = ("validation", "test")
"""The frozen splits whose problems the generated stream never emits."""


@cache
def held_out_keys() -> frozenset[tuple[tuple[int, ...], int]]:
    """The (sorted numbers, target) keys of every preset's frozen validation and test problems."""
    return frozenset(p.key for preset in SPLIT_SPEC for split in HELD_OUT_SPLITS for p in load_split(preset, split))


def fresh_config(preset: str) -> GeneratorConfig:
    """The generator config of ``preset`` under the rules its frozen splits are played by."""
    if preset not in SPLIT_SPEC:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(SPLIT_SPEC)}")
    return get_config(preset).replace(rules=SPLIT_RULES[preset])


def fresh_problems(preset: str, seed: int = 0, config: GeneratorConfig | None = None) -> Iterator[Problem]:
    """An endless, deterministic stream of distinct solvable problems of ``preset``, none held out; ``config``
    replaces the preset's generator config (the problems keep ``preset``)."""
    cfg = fresh_config(preset) if config is None else config
    if not isinstance(cfg, GeneratorConfig):
        raise TypeError(f"config must be a GeneratorConfig, got {type(cfg).__name__}")
    excluded = held_out_keys()
    stream = (p for p in iter_problems(cfg, seed) if p.key not in excluded)
    for index, p in enumerate(stream):
        yield dataclasses.replace(p, id=f"{preset}/{GENERATED}-{seed}/{index}", preset=preset)


def generate_fresh(preset: str, n: int, seed: int = 0, config: GeneratorConfig | None = None) -> list[Problem]:
    """The first ``n`` problems of :func:`fresh_problems` (``ValueError`` for a negative ``n``)."""
    return take(fresh_problems(preset, seed, config), n)
