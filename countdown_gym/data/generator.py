"""Seeded generation of solvable problems: :class:`GeneratorConfig` and :data:`PRESETS`. Methods: ``"reject"``
(uniform numbers and target, kept if solvable: uniform over solvable pairs; default up to 4 numbers) and
``"construct"`` (random legal moves to the end, kept if the value is in range; default from 5 numbers). Difficulty
filters (solution count, reference-DFS size) allow curricula.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Literal

from countdown_gym.game.expression import MAX_NUMBER_DIGITS
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules, check_digits, describe_value, format_number
from countdown_gym.game.solver import apply_move, count_solutions, legal_moves, reachable
from countdown_gym.game.trace import search_nodes


@dataclass(frozen=True)
class GeneratorConfig:
    """Ranges (inclusive), rules and difficulty filters of a problem family."""

    name: str = "custom"
    min_numbers: int = 4
    max_numbers: int = 4
    min_value: int = 1
    max_value: int = 49
    min_target: int = 10
    max_target: int = 50
    rules: Rules = field(default_factory=Rules.longproc)
    min_solutions: int | None = None
    max_solutions: int | None = None
    min_search_nodes: int | None = None
    max_search_nodes: int | None = None
    method: Literal["auto", "reject", "construct"] = "auto"
    max_attempts: int = 1_000_000

    def __post_init__(self) -> None:
        def bad(msg: str) -> None:
            raise ValueError(f"GeneratorConfig({self.name!r}): {msg}")

        def is_int(x: Any) -> bool:
            return isinstance(x, int) and not isinstance(x, bool)

        if not isinstance(self.name, str):
            bad(f"name must be a str, got {self.name!r}")
        for f in dataclasses.fields(self):  # every message below may write them
            if is_int(getattr(self, f.name)):
                check_digits(getattr(self, f.name), f"GeneratorConfig({self.name!r}): {f.name}")
        for what in ("min_numbers", "max_numbers", "min_value", "max_value", "min_target", "max_target", "max_attempts"):
            if not is_int(getattr(self, what)):
                bad(f"{what} must be an int, got {getattr(self, what)!r}")
        for what in ("min_solutions", "max_solutions", "min_search_nodes", "max_search_nodes"):
            value = getattr(self, what)
            if value is not None and (not is_int(value) or value < 0):
                bad(f"{what} must be a non-negative int or None, got {value!r}")
        if 0 in (self.max_solutions, self.max_search_nodes):  # no problem passes: each drawn is solved and needs a move
            bad("max_solutions and max_search_nodes must be >= 1 (every problem drawn has a solution and a move)")
        if not isinstance(self.rules, Rules):
            bad(f"rules must be a Rules (e.g. Rules.preset('tinyzero')), got {describe_value(self.rules)}")
        if self.max_attempts < 1:
            bad(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not 2 <= self.min_numbers <= self.max_numbers:
            bad(f"need 2 <= min_numbers <= max_numbers, got {self.min_numbers}..{self.max_numbers}")
        if self.max_numbers > 8:
            bad("at most 8 numbers are supported")
        if not 0 <= self.min_value <= self.max_value:
            bad(f"need 0 <= min_value <= max_value, got {self.min_value}..{self.max_value}")
        if self.max_value >= 10**MAX_NUMBER_DIGITS:
            bad(f"max_value must have at most {MAX_NUMBER_DIGITS} digits (Problem.numbers' limit), got {self.max_value}")
        if self.min_target > self.max_target:
            bad(f"need min_target <= max_target, got {self.min_target}..{self.max_target}")
        lowest, limit = self.rules.result_range()  # a move's result r is legal iff lowest <= r < limit
        reach = (2 * self.max_value + 2) ** self.max_numbers  # bounds |numerator| of every value the moves reach
        # a target among the numbers is never drawn either
        if self.max_target < max(lowest, -reach) or self.min_target > min(limit - 1, reach):
            bad(f"no target in {self.min_target}..{self.max_target} can be reached under the rules {self.rules}")
        for what in ("solutions", "search_nodes"):
            lo, hi = getattr(self, f"min_{what}"), getattr(self, f"max_{what}")
            if lo is not None and hi is not None and lo > hi:
                bad(f"min_{what} > max_{what}")
        if self.min_solutions is not None and self.min_solutions > most_solutions(self.max_numbers):
            bad(f"min_solutions: a problem of at most {self.max_numbers} numbers has at most "
                f"{most_solutions(self.max_numbers)} solutions (one per sequence of moves), got {self.min_solutions}")
        if self.method not in ("auto", "reject", "construct"):
            bad(f"method must be 'auto', 'reject' or 'construct', got {self.method!r}")

    def replace(self, **changes: Any) -> GeneratorConfig:
        return dataclasses.replace(self, **changes)

    @property
    def resolved_method(self) -> str:
        return self.method if self.method != "auto" else "reject" if self.max_numbers <= 4 else "construct"


def most_solutions(n: int) -> int:
    """A bound on a problem's solution count: the number of move sequences from ``n`` numbers (6 results a pair)."""
    total, paths = 0, 1
    for k in range(n, 1, -1):
        paths *= 3 * k * (k - 1)
        total += paths
    return total


PRESETS: dict[str, GeneratorConfig] = {
    "longproc-0.5k": GeneratorConfig(name="longproc-0.5k"),
    "tinyzero": GeneratorConfig(name="tinyzero", min_numbers=3, max_numbers=4, min_value=1, max_value=100,
                                min_target=1, max_target=100, rules=Rules.tinyzero()),
    "hard": GeneratorConfig(name="hard", min_numbers=5, max_numbers=6, min_value=1, max_value=100, min_target=100,
                            max_target=999),
}
"""Built-in problem families: ``longproc-0.5k`` (the seed papers' ranges), ``tinyzero``, ``hard``."""


def get_config(preset_or_config: str | GeneratorConfig) -> GeneratorConfig:
    """A preset by name, or the config itself."""
    if isinstance(preset_or_config, GeneratorConfig):
        return preset_or_config
    if isinstance(preset_or_config, str) and preset_or_config in PRESETS:
        return PRESETS[preset_or_config]
    raise ValueError(f"unknown preset {preset_or_config!r}; choose one of {sorted(PRESETS)} or pass a GeneratorConfig")


def _construct_target(numbers: list[int], rules: Rules, rng: random.Random) -> int | None:
    state = tuple(numbers)
    while len(state) > 1:
        moves = list(legal_moves(state, rules))
        if not moves:
            return None
        i, j, (_, _, _, r) = rng.choice(moves)
        state = apply_move(state, i, j, r)
        if rules.may_leave(1) and rng.random() < 0.25:  # numbers may go unused: stop early at times
            break
    value = state[-1]
    return value if isinstance(value, int) else None


def _outside(value: int, lo: int | None, hi: int | None) -> bool:
    return (lo is not None and value < lo) or (hi is not None and value > hi)


def _passes_filters(p: Problem, cfg: GeneratorConfig) -> tuple[bool, int | None, int | None]:
    nsol = nodes = None
    if cfg.min_solutions is not None or cfg.max_solutions is not None:
        nsol = count_solutions(p, cap=None if cfg.max_solutions is None else cfg.max_solutions + 1)
        if _outside(nsol, cfg.min_solutions, cfg.max_solutions):
            return False, nsol, nodes
    if cfg.min_search_nodes is not None or cfg.max_search_nodes is not None:
        nodes = search_nodes(p)
        if _outside(nodes, cfg.min_search_nodes, cfg.max_search_nodes):
            return False, nsol, nodes
    return True, nsol, nodes


def iter_problems(preset_or_config: str | GeneratorConfig, seed: int) -> Iterator[Problem]:
    """An endless, deterministic stream of distinct solvable problems that need at least one move."""
    cfg = get_config(preset_or_config)
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise TypeError(f"seed must be an int, got {describe_value(seed)}")
    seed = int(seed)
    if seed < 0:  # random.Random(-s) draws what random.Random(s) does: two streams, one set of problems
        raise ValueError(f"seed must be >= 0, got {format_number(seed)}")
    try:
        stem = f"{cfg.name}-{seed}-"
    except ValueError:  # str() refuses it
        raise ValueError(f"seed must have at most {sys.get_int_max_str_digits()} digits (the problems' ids write it)") from None
    rng = random.Random(seed)
    method = cfg.resolved_method
    seen: set[tuple[tuple[int, ...], int]] = set()
    attempts = 0
    index = 0
    while True:
        attempts += 1
        if attempts > cfg.max_attempts:
            raise RuntimeError(f"preset {cfg.name!r}: no new solvable problem in {cfg.max_attempts} draws; "
                               "the ranges or filters admit too few problems")
        k = rng.randint(cfg.min_numbers, cfg.max_numbers)
        numbers = [rng.randint(cfg.min_value, cfg.max_value) for _ in range(k)]
        if method == "reject":
            target = rng.randint(cfg.min_target, cfg.max_target)
            if not reachable(numbers, target, cfg.rules):
                continue
        else:
            t = _construct_target(numbers, cfg.rules, rng)
            if t is None or not cfg.min_target <= t <= cfg.max_target:
                continue
            target = t
        if cfg.rules.is_won(numbers, target):
            continue  # solved before any move: nothing to play, no trace to write
        p = Problem(tuple(numbers), target, cfg.rules, preset=cfg.name)
        if p.key in seen:
            continue
        ok, nsol, nodes = _passes_filters(p, cfg)
        if not ok:
            continue
        seen.add(p.key)
        attempts = 0
        yield dataclasses.replace(p, id=f"{stem}{index}", num_solutions=nsol, search_nodes=nodes)
        index += 1


def take(stream: Iterator[Problem], n: int) -> list[Problem]:
    """The first ``n`` problems of ``stream`` (``ValueError`` unless ``n`` is an int >= 0)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    return list(itertools.islice(stream, n))


def generate(preset_or_config: str | GeneratorConfig, n: int, seed: int = 0) -> list[Problem]:
    """``n`` distinct solvable problems, the same for the same seed."""
    return take(iter_problems(preset_or_config, seed), n)
