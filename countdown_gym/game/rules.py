"""The rules of a Countdown game: the one home of every rule variant, of move legality and of the win. The vector
env's numpy kernel (``countdown_gym.envs.move_kernel``) is the one other form of legality, tested against
:meth:`Rules.legal_results` move by move."""

from __future__ import annotations

import dataclasses
import itertools
import math
import reprlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral
from typing import Any, Literal

import numpy as np

Number = int | Fraction
"""A value in a Countdown state: an ``int``, or a ``Fraction`` under rational rules."""

OPERATORS: tuple[str, ...] = ("+", "-", "*", "/")
Sign = Literal["positive", "nonnegative", "any"]
MAX_DIGITS = sys.int_info.str_digits_check_threshold
"""640: the most digits of a target or a value limit, so Python's ``str()`` writes it whatever
``sys.set_int_max_str_digits`` allows (0, no limit, or at least 640; the default 4,300)."""


def check_digits(x: int, what: str) -> int:
    """``x``, or ``ValueError`` naming ``what`` when it has more than :data:`MAX_DIGITS` digits."""
    if -(10**MAX_DIGITS) < x < 10**MAX_DIGITS:
        return x
    raise ValueError(f"{what} must have at most {MAX_DIGITS} digits, got an int of about "
                     f"{math.floor(x.bit_length() * math.log10(2)) + 1:,} digits")


def check_bool(value: Any, name: str, error: type[Exception] = ValueError) -> bool:
    """``value`` as a bool (a numpy one too, e.g. read from a parquet column); ``error`` naming ``name`` for anything
    else (a truthy ``"no"``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{name} must be a bool, got {describe_value(value)}")
    return bool(value)


def check_int(value: Any, name: str, low: int | None = 0, *, none: bool = False,
              error: type[Exception] = ValueError) -> int | None:
    """``value`` as an int (not a bool) ``>= low`` (``low=None``: any), or ``None`` when ``none``; ``error`` naming
    ``name`` for anything else."""
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        want = "an int" if low is None else "a positive int" if low == 1 else f"an int >= {low}"
        raise error(f"{name} must be {want}{' or None' if none else ''}, got {describe_value(value)}")
    return value


@dataclass(frozen=True)
class Rules:
    """What an intermediate result may be, and when a game is won.

    Attributes:
        name: A label stored with problems and submissions (at most 80 characters).
        integer_only: Division must be exact; ``False`` allows any rational (exact ``Fraction``).
        sign: ``"positive"`` (> 0), ``"nonnegative"`` (>= 0, LongProc's: ``5 - 5 = 0`` is kept) or ``"any"``.
        value_limit: Every result must be below this (``None``: no limit).
        use_all: The answer uses every number exactly once; ``False``: any sub-multiset, leftovers allowed.
    """

    name: str = "longproc"
    integer_only: bool = True
    sign: Sign = "nonnegative"
    value_limit: int | None = 2000
    use_all: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"Rules.name must be a str, got {describe_value(self.name)}")
        if len(self.name) > 80:  # messages (the verifier's) quote it
            raise ValueError(f"Rules.name must have at most 80 characters, got {describe_value(self.name)}")
        for flag in ("integer_only", "use_all"):  # a truthy "false" must not silently mean True
            object.__setattr__(self, flag, check_bool(getattr(self, flag), f"Rules.{flag}", TypeError))
        if not isinstance(self.sign, str) or self.sign not in ("positive", "nonnegative", "any"):  # no array
            raise ValueError(f"Rules.sign must be 'positive', 'nonnegative' or 'any', got {describe_value(self.sign)}")
        limit = self.value_limit
        if isinstance(limit, np.integer):  # as the flags' np.bool_ above
            limit = int(limit)
            object.__setattr__(self, "value_limit", limit)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)
                                  or check_digits(limit, "Rules.value_limit") < 1):
            raise ValueError(f"Rules.value_limit must be a positive int or None, got {describe_value(limit)}")
        lo, hi = self.result_range()
        object.__setattr__(self, "_lo", lo)  # not fields: read by the hot legality checks below
        object.__setattr__(self, "_hi", hi)

    @classmethod
    def longproc(cls) -> Rules:
        """LongProc's rules as its code applies them: all numbers once, integer results in ``0..1999`` (0 kept)."""
        return cls()

    @classmethod
    def longproc_positive(cls) -> Rules:
        """As :meth:`longproc` but every result > 0 (LongProc's prompt; :data:`LEGACY_LONGPROC` reads back as these)."""
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
        presets = ("classic", "longproc", "longproc_positive", "tinyzero")
        if not isinstance(name, str) or name not in presets:
            raise ValueError(f"unknown rules preset {describe_value(name)}; choose one of {list(presets)}")
        return getattr(cls, name)()

    def replace(self, **changes: Any) -> Rules:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rules:
        """Inverse of :meth:`to_dict`; :data:`LEGACY_LONGPROC` reads back as :meth:`longproc_positive`."""
        if not isinstance(data, dict):
            raise ValueError(f"Rules.from_dict needs a dict of Rules fields, got {describe_value(data)}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown Rules fields: {describe_value(sorted(unknown, key=str))}")
        rules = cls(**data)
        if rules == LEGACY_LONGPROC:
            return cls.longproc_positive()
        return rules

    def result_range(self) -> tuple[float, float]:
        """``(lo, hi)``, the one home of the sign and limit bounds: an integer result passes iff ``lo <= r < hi``, a
        reduced fraction ``p / q`` iff ``lo <= p`` and ``p / q < hi``. ``lo``: 1, 0 or ``-inf``; ``hi``: the limit or
        ``inf``."""
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
        ``negative_result``, ``zero_result``, ``exceeds_limit``. ``TypeError`` unless ``a`` and ``b`` are numbers
        (:func:`exact`).
        """
        if type(a) is not int or type(b) is not int:
            a, b = exact(a), exact(b)
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
            if r.denominator != 1 and self.integer_only:
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
        """Whether a move's result ``r`` passes the sign and limit rules (:meth:`result_range`)."""
        if type(r) is int:
            return self._lo <= r < self._hi  # type: ignore[attr-defined]
        r = Fraction(r)
        if r.denominator == 1:
            return self._lo <= r.numerator < self._hi  # type: ignore[attr-defined]
        return self._lo <= r.numerator and r < self._hi  # type: ignore[attr-defined]  # p / q > 0 iff p > 0

    def legal_results(self, x: Number, y: Number) -> tuple[Number | None, Number | None, Number | None, Number | None]:
        """``(x + y, x - y, x * y, x / y)``, each ``None`` where :meth:`check` refuses it (integers under
        ``integer_only`` rules take an inlined path, tested equal to :meth:`check`)."""
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

    def may_leave(self, unused: Any) -> Any:
        """Whether a won game may leave ``unused`` numbers unused (none under ``use_all``); elementwise on arrays."""
        return (unused == 0) | (not self.use_all)

    def wins(self, value: Any, left: Any, target: Any) -> Any:
        """Whether ``value``, one of the ``left`` numbers of a state, wins: it equals the target and the other
        ``left - 1`` may stay unused. A move wins iff its result wins in the state it makes; elementwise on arrays."""
        return (value == target) & self.may_leave(left - 1)

    def is_won(self, values: Sequence[Number], target: Number) -> bool:
        """Whether the state ``values`` is won: one of its numbers wins (:meth:`wins`)."""
        left = len(values)
        return any(self.wins(v, left, target) for v in values)

    def answer_parts(self, numbers: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
        """The sub-multisets of ``numbers`` (hashable items) a winning answer may use all of: ``numbers`` under
        ``use_all``, else every distinct non-empty one, in bit-mask order of its positions."""
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
"""The strictly positive rules under their earlier name ``longproc``, as the frozen ``longproc-0.5k`` and ``hard``
split files record them; :meth:`Rules.from_dict` reads it as :meth:`Rules.longproc_positive`."""


def normalize(x: Number) -> Number:
    """An ``int`` for whole values, else the ``Fraction`` itself."""
    if type(x) is int:  # the common case, before an isinstance check against Fraction's ABC
        return x
    if isinstance(x, Fraction) and x.denominator == 1:
        return x.numerator
    return x


def exact(x: Any) -> Number:
    """``x`` as the exact arithmetic takes it: an ``int`` (a numpy int as a Python ``int``, which cannot wrap
    around) or a ``Fraction``; ``TypeError`` for a float, a bool or any other type."""
    if type(x) is int or isinstance(x, Fraction):
        return x
    if isinstance(x, Integral) and not isinstance(x, bool):
        return int(x)
    raise TypeError(f"a Countdown number must be an int or a Fraction, got {describe_value(x)}")


def format_number(x: Number) -> str:
    """``"37"`` or ``"3/2"``: the package's text form of a number (a whole ``Fraction`` or a numpy int: ``"4"``); one
    past Python's ``str()`` digit limit (``sys.get_int_max_str_digits()``, 4,300): ``"<a number of over 4300 digits>"``."""
    try:
        return str(x)
    except ValueError:  # str() refuses it: a product of a few hundred puzzle numbers under rules without a limit
        return f"<a number of over {sys.get_int_max_str_digits()} digits>"


class _ShortRepr(reprlib.Repr):
    """``reprlib``'s bounded repr (a few items, two levels deep) without sorting a dict's or set's keys first."""

    def repr_dict(self, x: dict, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in itertools.islice(x.items(), self.maxdict)]
        return "{" + ", ".join(items) + (", ...}" if len(x) > self.maxdict else "}")

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:  # past str()'s digit limit
            return format_number(x)


_SHORT_REPR = _ShortRepr()
_SHORT_REPR.maxlevel, _SHORT_REPR.maxstring, _SHORT_REPR.maxother, _SHORT_REPR.maxlong = 2, 40, 40, 40


def describe_value(value: Any) -> str:
    """The type and the first few items of ``value`` (for an error message), in time and memory independent of its
    size or depth; never raises."""
    try:
        shown = _SHORT_REPR.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__, an int too long to print: the type alone
        shown = "..."
    return f"{type(value).__name__} {shown[:80]}"


def check_finite(value: Any, name: str = "scale", *, positive: bool = False, non_negative: bool = False,
                 default: float | None = None) -> float:
    """``value`` (called ``name``: an option, a reward term's scale or weight) as a float; ``ValueError`` naming it
    unless it is a finite real number (a Python or numpy one, not a bool), > 0 when ``positive``, >= 0 when
    ``non_negative``. With a ``default``, None is taken and gives it."""
    if value is None and default is not None:
        return default
    real = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
    try:
        number = float(value) if real else math.nan
    except OverflowError:  # an int past float range
        number = math.inf
    if not math.isfinite(number) or (positive and number <= 0) or (non_negative and number < 0):
        expected = f"a finite number{' > 0' if positive else ' >= 0' if non_negative else ''}"
        expected += " or None" if default is not None else ""
        raise ValueError(f"{name} must be {expected}, got {describe_value(value)}")
    return number


def transition_record(state: Sequence[Number], move: tuple[Any, ...], next_state: Sequence[Number] | None,
                      target: Number, reason: str, rules: Rules, **extra: Any) -> dict[str, Any]:
    """One entry of ``info["transitions"]`` (the record every environment emits, ``docs/DESIGN.md``): ``valid`` is
    ``reason == "ok"``, and an invalid move has no ``next_state``; ``extra`` keys (``line_no``, ...) come last."""
    valid = reason == "ok"
    return {"state": state, "move": move, "next_state": next_state if valid else None, "target": target,
            "valid": valid, "reason": reason, "rules": rules, **extra}
