"""The rules of a Countdown game: the one home of every rule variant, of move legality and of the win.

Implementations of Countdown silently disagree on what an intermediate result may be. A
:class:`Rules` value makes each choice explicit, and its methods are the one implementation of
the rules every part of the package (solver, generator, verifier, traces, environments, wrappers,
leaderboard) calls:

* legality of a move: :meth:`Rules.check` (with a reason code), :meth:`Rules.apply`,
  :meth:`Rules.legal_results` (the four results of an ordered pair) and
  :meth:`Rules.within_bounds` (the sign and limit rules on a result);
* the win: :meth:`Rules.wins` (a value in a state of ``left`` numbers), :meth:`Rules.is_won`
  (a whole state), :meth:`Rules.may_leave` (numbers left unused) and :meth:`Rules.answer_parts`
  (which sub-multisets of the numbers an answer may be built from).

The batched numpy kernel of the vector env (``countdown_gym.envs.move_kernel``) is the one
other form of legality, kept for speed and tested against :meth:`Rules.legal_results` move by move.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

Number = int | Fraction
"""A value in a Countdown state: an ``int``, or a ``Fraction`` under rational rules."""

OPERATORS: tuple[str, ...] = ("+", "-", "*", "/")
Sign = Literal["positive", "nonnegative", "any"]


@dataclass(frozen=True)
class Rules:
    """What an intermediate result may be, and when a game is won.

    Attributes:
        name: A label stored with problems and submissions.
        integer_only: Division must be exact (``7 / 2`` is illegal). ``False`` allows any
            rational intermediate, computed exactly with :class:`fractions.Fraction`.
        sign: ``"positive"`` (every result > 0), ``"nonnegative"`` (>= 0; what LongProc's
            trace generator and verifier do: ``5 - 5 = 0`` is kept) or ``"any"``.
        value_limit: Every result must be strictly below this value (LongProc drops a branch
            whose result is >= 2000). ``None`` for no limit.
        use_all: The final expression must use every number exactly once. If ``False``, any
            sub-multiset of the numbers may be used (each at most once), and reaching the target
            with numbers left over wins.
    """

    name: str = "longproc"
    integer_only: bool = True
    sign: Sign = "nonnegative"
    value_limit: int | None = 2000
    use_all: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"Rules.name must be a str, got {type(self.name).__name__} {self.name!r}")
        for flag in ("integer_only", "use_all"):  # a truthy "false" must not silently mean True
            value = getattr(self, flag)
            if isinstance(value, np.bool_):  # e.g. read back from a parquet / pandas column
                object.__setattr__(self, flag, bool(value))
            elif not isinstance(value, bool):
                raise TypeError(f"Rules.{flag} must be a bool, got {type(value).__name__} {value!r}")
        if self.sign not in ("positive", "nonnegative", "any"):
            raise ValueError(f"Rules.sign must be 'positive', 'nonnegative' or 'any', got {self.sign!r}")
        if self.value_limit is not None and (
            not isinstance(self.value_limit, int) or isinstance(self.value_limit, bool) or self.value_limit < 1
        ):
            raise ValueError(f"Rules.value_limit must be a positive int or None, got {self.value_limit!r}")
        lo, hi = self.result_range()
        object.__setattr__(self, "_lo", lo)  # not fields: read by the hot legality checks below
        object.__setattr__(self, "_hi", hi)

    # ---- presets -------------------------------------------------------------------------
    @classmethod
    def longproc(cls) -> Rules:
        """LongProc's rules as its code applies them: all numbers once, integer results in ``0..1999``.

        LongProc's prompt asks for positive intermediates, but its trace generator
        (``build_countdown_demonstration``) keeps a 0 (``24 - 24 = 0``) and its verifier accepts
        one; only negative, fractional and >= 2000 results are pruned. :func:`~countdown_gym.dfs_trace`
        under these rules writes its traces byte for byte.
        """
        return cls()

    @classmethod
    def longproc_positive(cls) -> Rules:
        """The rules LongProc's prompt states: as :meth:`longproc` but every result must be > 0.

        These were the rules named ``longproc`` in earlier versions of this package; a stored record of them
        (``name="longproc"``, ``sign="positive"``) reads back as these (:meth:`from_dict`).
        """
        return cls(name="longproc_positive", sign="positive")

    @classmethod
    def tinyzero(cls) -> Rules:
        """TinyZero's: all numbers once, any exact rational intermediate, exact final value."""
        return cls(name="tinyzero", integer_only=False, sign="any", value_limit=None, use_all=True)

    @classmethod
    def classic(cls) -> Rules:
        """The television game: positive integers, no limit, numbers may be left unused."""
        return cls(name="classic", integer_only=True, sign="positive", value_limit=None, use_all=False)

    @classmethod
    def preset(cls, name: str) -> Rules:
        """A preset by name: ``longproc``, ``longproc_positive``, ``tinyzero`` or ``classic``."""
        presets = {
            "longproc": cls.longproc,
            "longproc_positive": cls.longproc_positive,
            "tinyzero": cls.tinyzero,
            "classic": cls.classic,
        }
        if name not in presets:
            raise ValueError(f"unknown rules preset {name!r}; choose one of {sorted(presets)}")
        return presets[name]()

    def replace(self, **changes: Any) -> Rules:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rules:
        """Inverse of :meth:`to_dict`.

        A record of the strictly positive rules under their old name (:data:`LEGACY_LONGPROC`,
        written by earlier versions) reads back as :meth:`longproc_positive`: a stored record keeps
        meaning the rules it was written under.
        """
        if not isinstance(data, dict):
            raise ValueError(f"Rules.from_dict needs a dict of Rules fields, got {type(data).__name__} {data!r:.100}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown Rules fields: {sorted(unknown)}")
        rules = cls(**data)
        if rules == LEGACY_LONGPROC:
            return cls.longproc_positive()
        return rules

    # ---- arithmetic ----------------------------------------------------------------------
    def result_range(self) -> tuple[float, float]:
        """``(lo, hi)``: the bounds the sign and limit rules put on a move's result.

        An integer result ``r`` passes them iff ``lo <= r < hi``; a fraction ``p / q`` in lowest
        terms (``q > 1``, rational rules) iff ``lo <= p`` and ``p / q < hi``. ``lo`` is ``1``
        (``sign="positive"``), ``0`` (``"nonnegative"``) or ``-inf`` (``"any"``); ``hi`` is
        ``value_limit`` or ``inf``. The one home of these bounds: :meth:`check`'s reason codes,
        the solver, the generator, the environments' masks and the batched kernels
        (``countdown_gym.move_kernel``) all agree with it.

        Example:
            >>> Rules.longproc().result_range(), Rules.classic().result_range()
            ((0, 2000), (1, inf))
        """
        lo = 1 if self.sign == "positive" else 0 if self.sign == "nonnegative" else -math.inf
        hi = math.inf if self.value_limit is None else self.value_limit
        return lo, hi

    def apply(self, a: Number, op: str, b: Number) -> Number | None:
        """``a op b`` if it is a legal move under these rules, else ``None``."""
        result, _ = self.check(a, op, b)
        return result

    def check(self, a: Number, op: str, b: Number) -> tuple[Number | None, str]:
        """``(result, "ok")`` for a legal move, else ``(None, reason_code)``.

        Reason codes: ``unknown_operator``, ``division_by_zero``, ``non_integer_result``,
        ``negative_result``, ``zero_result``, ``exceeds_limit``.
        """
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op == "/":
            if b == 0:
                return None, "division_by_zero"
            r = Fraction(a) / Fraction(b)
            if r.denominator == 1:
                r = r.numerator
            elif self.integer_only:
                return None, "non_integer_result"
        else:
            return None, "unknown_operator"
        if isinstance(r, Fraction) and r.denominator == 1:
            r = r.numerator
        if self.within_bounds(r):
            return r, "ok"
        if r < 0 and self.sign != "any":
            return None, "negative_result"
        if r == 0:
            return None, "zero_result"
        return None, "exceeds_limit"

    def within_bounds(self, r: Number) -> bool:
        """Whether a move's result ``r`` passes the sign and limit rules (:meth:`result_range`).

        Integrality is a rule of division alone (:meth:`check`); this is the rest of a move's legality.
        """
        if type(r) is int:
            return self._lo <= r < self._hi  # type: ignore[attr-defined]
        r = Fraction(r)
        if r.denominator == 1:
            return self._lo <= r.numerator < self._hi  # type: ignore[attr-defined]
        return self._lo <= r.numerator and r < self._hi  # type: ignore[attr-defined]  # p / q > 0 iff p > 0

    def legal_results(self, x: Number, y: Number) -> tuple[Number | None, Number | None, Number | None, Number | None]:
        """``(x + y, x - y, x * y, x / y)``: each the move's result where :meth:`check` allows it, else ``None``.

        Integer operands under ``integer_only`` rules take an inlined path (tested equal to :meth:`check`);
        anything else asks :meth:`check` itself.

        Example:
            >>> Rules.longproc().legal_results(6, 4)
            (10, 2, 24, None)
        """
        if not (self.integer_only and type(x) is int and type(y) is int):
            return tuple(self.check(x, op, y)[0] for op in OPERATORS)  # type: ignore[return-value]
        lo, hi = self._lo, self._hi  # type: ignore[attr-defined]
        s, d, p = x + y, x - y, x * y
        q = x // y if y != 0 and x % y == 0 else None
        return (
            s if lo <= s < hi else None,
            d if lo <= d < hi else None,
            p if lo <= p < hi else None,
            q if q is not None and lo <= q < hi else None,
        )

    # ---- the win -------------------------------------------------------------------------
    def may_leave(self, unused: Any) -> Any:
        """Whether a won game may leave ``unused`` numbers unused: only none under ``use_all``.

        Works elementwise on numpy arrays (returns a bool array there).
        """
        return (unused == 0) | (not self.use_all)

    def wins(self, value: Any, left: Any, target: Any) -> Any:
        """Whether ``value``, one of the ``left`` numbers of a state, wins the game: it equals the
        target and the other ``left - 1`` numbers may stay unused (:meth:`may_leave`).

        A move wins iff its result wins in the state it makes. Works elementwise on numpy arrays
        (the vector env's batch), else returns a ``bool``.

        Example:
            >>> Rules.longproc().wins(24, 2, 24), Rules.classic().wins(24, 2, 24)
            (False, True)
        """
        return (value == target) & self.may_leave(left - 1)

    def is_won(self, values: Sequence[Number], target: Number) -> bool:
        """Whether the state ``values`` is won: one of its numbers wins (:meth:`wins`).

        Under ``use_all`` rules: the last number left equals the target; otherwise the target is
        among the numbers.
        """
        left = len(values)
        return any(self.wins(v, left, target) for v in values)

    def answer_parts(self, numbers: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
        """The sub-multisets of ``numbers`` a winning answer may use all of: ``numbers`` itself under
        ``use_all``, else every distinct non-empty sub-multiset (in order of the bit masks of its positions).

        The solver searches these parts; the items may be any hashable values.
        """
        numbers = tuple(numbers)
        if self.use_all:
            yield numbers
            return
        seen: set[tuple[Any, ...]] = set()
        for mask in range(1, 1 << len(numbers)):
            part = tuple(x for i, x in enumerate(numbers) if mask >> i & 1)
            if part not in seen:  # without use_all, any numbers may stay unused
                seen.add(part)
                yield part


LEGACY_LONGPROC = Rules(name="longproc", sign="positive")
"""The rules named ``longproc`` in earlier versions (strictly positive intermediates), as stored
records (split files, saved problems) spell them. :meth:`Rules.from_dict` reads this record as
:meth:`Rules.longproc_positive`; the frozen ``longproc-0.5k`` and ``hard`` split files carry it."""


def normalize(x: Number) -> Number:
    """An ``int`` for whole values, else the ``Fraction`` itself."""
    if type(x) is int:  # the common case, before an isinstance check against Fraction's ABC
        return x
    if isinstance(x, Fraction) and x.denominator == 1:
        return x.numerator
    return x


def format_number(x: Number) -> str:
    """``"37"`` or ``"3/2"``: the package's text form of a number."""
    if type(x) is int:
        return str(x)
    x = normalize(x)
    return str(x) if isinstance(x, int) else f"{x.numerator}/{x.denominator}"


def transition_record(state: Sequence[Number], move: tuple[Any, ...], next_state: Sequence[Number] | None,
                      target: Number, reason: str, rules: Rules, **extra: Any) -> dict[str, Any]:
    """One entry of ``info["transitions"]`` (the record every environment emits, ``docs/DESIGN.md``): ``valid`` is
    ``reason == "ok"``, and an invalid move has no ``next_state``; ``extra`` keys (``line_no``, ...) come last."""
    valid = reason == "ok"
    return {"state": state, "move": move, "next_state": next_state if valid else None, "target": target,
            "valid": valid, "reason": reason, "rules": rules, **extra}
