"""The immutable :class:`Problem` value."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from countdown_gym.game.expression import MAX_NUMBER_DIGITS, literal_digits
from countdown_gym.game.rules import Rules, check_digits, check_int, describe_value

_METADATA = ("id", "preset", "num_solutions", "search_nodes")


@dataclass(frozen=True)
class Problem:
    """A Countdown puzzle: reach ``target`` from ``numbers`` under ``rules`` (what equality and hashing use); the
    other fields are the generator's metadata."""

    numbers: tuple[int, ...]
    target: int
    rules: Rules = field(default_factory=Rules.longproc)
    id: str | None = field(default=None, compare=False)
    preset: str | None = field(default=None, compare=False)
    num_solutions: int | None = field(default=None, compare=False)
    search_nodes: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.numbers, (str, bytes, Set, Mapping)) or not hasattr(self.numbers, "__iter__"):  # ordered
            raise TypeError(f"Problem.numbers must be a sequence of ints, got {describe_value(self.numbers)}")
        numbers = tuple(check_int(x, "every number", None, error=TypeError) for x in self.numbers)
        if len(numbers) < 1:
            raise ValueError("Problem.numbers must not be empty")
        if any(x < 0 for x in numbers):
            raise ValueError(f"Problem.numbers must be non-negative, got {describe_value(min(numbers))}")
        if any(x >= 10**MAX_NUMBER_DIGITS for x in numbers):  # an answer could not write them
            raise ValueError(f"Problem.numbers must have at most {MAX_NUMBER_DIGITS} digits (the verifier's literal limit)")
        object.__setattr__(self, "numbers", numbers)
        check_digits(check_int(self.target, "Problem.target", None, error=TypeError), "Problem.target")
        if not isinstance(self.rules, Rules):
            raise TypeError(f"Problem.rules must be a Rules, got {type(self.rules).__name__}")

    def __repr__(self) -> str:
        n = len(self.numbers)  # bounded: refusals quote it (64: the most numbers an environment plays)
        numbers = self.numbers if n <= 64 else f"({', '.join(map(str, self.numbers[:64]))}, ... {n} numbers)"
        return f"Problem(numbers={numbers}, target={self.target}, rules={self.rules.name})"

    @functools.cached_property
    def literal_digits(self) -> int:
        """The longest number literal an answer or a line of this game may write
        (:func:`~countdown_gym.game.expression.literal_digits`)."""
        return literal_digits(self.numbers, self.target)

    @property
    def key(self) -> tuple[tuple[int, ...], int]:
        """Order-free identity (sorted numbers, target): used to keep splits disjoint."""
        return (tuple(sorted(self.numbers)), self.target)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the frozen splits' line format)."""
        d: dict[str, Any] = {"numbers": list(self.numbers), "target": self.target, "rules": self.rules.to_dict()}
        return d | {k: getattr(self, k) for k in _METADATA if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Problem:
        """Inverse of :meth:`to_dict`; ``rules`` may be a dict, a preset name or absent."""
        if not isinstance(d, dict) or "numbers" not in d or "target" not in d:
            raise ValueError(f"a problem needs 'numbers' and 'target', got {describe_value(d)}")
        rules = d.get("rules")
        if rules is None:
            rules = Rules.longproc()
        elif isinstance(rules, str):
            rules = Rules.preset(rules)
        elif isinstance(rules, dict):
            rules = Rules.from_dict(rules)
        else:
            raise ValueError(f"a problem's 'rules' must be a dict, a preset name or absent, got {describe_value(rules)}")
        meta = {k: int(v) if isinstance(v := d.get(k), np.integer) else v for k in _METADATA}
        for k in ("num_solutions", "search_nodes"):
            check_int(meta[k], f"a problem's {k!r}", none=True)
        if not (meta["id"] is None or isinstance(meta["id"], str) or type(meta["id"]) is int):  # a dataset's int id stays
            raise ValueError(f"a problem's 'id' must be a str, an int or absent, got {describe_value(meta['id'])}")
        if not (meta["preset"] is None or isinstance(meta["preset"], str)):
            raise ValueError(f"a problem's 'preset' must be a str or absent, got {describe_value(meta['preset'])}")
        for k in ("id", "num_solutions", "search_nodes"):  # JSON refuses to write an int of over 4,300 digits
            if type(meta[k]) is int:
                check_digits(meta[k], f"a problem's {k!r}")
        return cls(d["numbers"], d["target"], rules, **meta)


def play_rules(problem: Any, rules: Any, caller: str) -> Rules:
    """The rules ``caller`` plays ``problem`` by: ``rules``, else the problem's own; ``TypeError`` for a
    non-``Problem`` or for rules that are neither a ``Rules`` nor ``None`` (a preset name failed deep inside)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"{caller} needs a Problem, got {type(problem).__name__}")
    if rules is not None and not isinstance(rules, Rules):
        raise TypeError(f"rules must be a Rules or None, got {type(rules).__name__}")
    return rules or problem.rules
