"""The solver's reachability search (behind :func:`countdown_gym.game.solver.reachable`), memoised and exact.

``t`` is reachable from ``S`` iff ``S`` splits into parts with values ``a`` and ``b`` such that ``a op b = t`` is
legal: for each value of the smaller part we solve for ``b`` and ask the larger part (a set lookup up to three
numbers, else recursively). Rationals are ``int`` or reduced ``(p, q)`` pairs; results equal :meth:`Rules.check`'s.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from functools import lru_cache
from math import gcd

from countdown_gym.game.rules import Number, Rules

Q = int | tuple[int, int]
CACHE_CAP = 1 << 20
"""Entries per cache (per Rules) before it is emptied; the value-set and split caches hold ``CACHE_CAP // 32``."""


def to_q(x: Number) -> Q:
    if type(x) is int:
        return x
    x = Fraction(x)
    return x.numerator if x.denominator == 1 else (x.numerator, x.denominator)


def from_q(x: Q) -> Number:
    return x if type(x) is int else Fraction(*x)


def _mk(p: int, q: int) -> Q:
    if q < 0:
        p, q = -p, -q
    g = gcd(p, q)
    if g != 1:
        p //= g
        q //= g
    return p if q == 1 else (p, q)


def _pq(x: Q) -> tuple[int, int]:
    return (x, 1) if type(x) is int else x


def _add(a: Q, b: Q) -> Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bq + bp * aq, aq * bq)


def _sub(a: Q, b: Q) -> Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bq - bp * aq, aq * bq)


def _mul(a: Q, b: Q) -> Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bp, aq * bq)


def _div(a: Q, b: Q) -> Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bq, aq * bp)


class Reachability:
    """Memoised reachability under one :class:`Rules` value (internal rationals: :data:`Q`); one per rules value."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.integer_only = rules.integer_only
        self.within = rules.within_bounds
        low, high = rules.result_range()
        self.free = low == -math.inf and high == math.inf
        self.values: dict[tuple[Q, ...], frozenset[Q]] = {}
        self.exact: dict[tuple[tuple[Q, ...], Q], bool] = {}
        self.splits: dict[tuple[Q, ...], list[tuple[tuple[Q, ...], tuple[Q, ...]]]] = {}
        self.reach: dict[tuple[tuple[Number, ...], Number], bool] = {}

    def ok(self, r: Q) -> bool:
        """Whether ``r`` may be a move's result (:meth:`Rules.within_bounds`; integrality is the caller's)."""
        if self.free:
            return True
        return self.within(r if type(r) is int else Fraction(*r))

    def pair(self, a: Q, b: Q) -> list[Q]:
        """Every legal ``a op b`` and ``b op a``."""
        if type(a) is int and type(b) is int:
            c = [a + b, a * b, a - b, b - a]
            for x, y in ((a, b), (b, a)):
                if y:
                    if x % y == 0:
                        c.append(x // y)
                    elif not self.integer_only:
                        c.append(_mk(x, y))
            if self.integer_only and not self.free:  # only ints: the rules' check, with no conversion
                within = self.within
                return [r for r in c if within(r)]
        else:  # a non-integer operand (tuples are never zero)
            c = [_add(a, b), _mul(a, b), _sub(a, b), _sub(b, a)]
            for x, y in ((a, b), (b, a)):
                if y != 0:
                    r = _div(x, y)
                    if type(r) is int or not self.integer_only:
                        c.append(r)
        if self.free:
            return c
        ok = self.ok
        return [r for r in c if ok(r)]

    def split(self, state: tuple[Q, ...]) -> list[tuple[tuple[Q, ...], tuple[Q, ...]]]:
        """Distinct ``(A, B)`` splits into non-empty parts with ``len(A) <= len(B)`` (checking the deadline)."""
        out = self.splits.get(state)
        if out is None:
            seen: set[tuple[Q, ...]] = set()
            out = []
            table = len(state) <= SPLIT_TABLE_MAX
            every = 1024 if table else 1  # a long state's split costs O(n) on its own
            for k, (ia, ib) in enumerate(_split_table(len(state)) if table else _iter_splits(len(state))):
                if not k % every:
                    check_deadline()
                a = tuple(state[i] for i in ia)
                if a not in seen:
                    seen.add(a)
                    out.append((a, tuple(state[i] for i in ib)))
            if len(self.splits) >= CACHE_CAP // 32:
                self.splits.clear()
            self.splits[state] = out
        return out

    def values_of(self, state: tuple[Q, ...]) -> frozenset[Q]:
        """Every value an expression over *all* of ``state`` can take."""
        out = self.values.get(state)
        if out is None:
            if len(state) == 1:
                out = frozenset(state)
            else:
                acc: set[Q] = set()
                pair = self.pair
                for a_part, b_part in self.split(state):
                    check_deadline()
                    vb = self.values_of(b_part)
                    for a in self.values_of(a_part):
                        for b in vb:
                            acc.update(pair(a, b))
                out = frozenset(acc)
            if len(self.values) >= CACHE_CAP // 32:
                self.values.clear()
            self.values[state] = out
        return out

    def makes(self, part: tuple[Q, ...], value: Q) -> bool:
        """Whether an expression over all of ``part`` can equal ``value``."""
        if len(part) == 1:
            return part[0] == value
        if len(part) <= 3:
            return value in self.values_of(part)
        return self.exact_of(part, value)

    def exact_of(self, state: tuple[Q, ...], t: Q) -> bool:
        """Whether an expression over all of ``state`` (>= 2 numbers) equals ``t``."""
        key = (state, t)
        res = self.exact.get(key)
        if res is None:
            res = self._exact(state, t)
            if len(self.exact) >= CACHE_CAP:
                self.exact.clear()
            self.exact[key] = res
        return res

    def _exact(self, state: tuple[Q, ...], t: Q) -> bool:
        if not self.ok(t):
            return False
        ints = all(type(x) is int for x in state)
        if ints and self.integer_only and type(t) is not int:
            return False  # integer moves on integers never make a fraction
        whole_t = type(t) is int
        fast = ints and whole_t
        div_ok = whole_t or not self.integer_only  # a division may result in t
        makes = self.makes
        for a_part, b_part in self.split(state):
            check_deadline()  # nothing half-done is cached
            for a in self.values_of(a_part):
                if fast and type(a) is int:
                    cands = {t - a, a - t, a + t}  # a + b = t, a - b = t, b - a = t
                    if a:
                        if t % a == 0:
                            cands.add(t // a)  # a * b = t
                        elif not self.integer_only:
                            cands.add(_mk(t, a))
                        cands.add(t * a)  # b / a = t
                        if t:
                            if a % t == 0:
                                cands.add(a // t)  # a / b = t
                            elif not self.integer_only:
                                cands.add(_mk(a, t))
                else:
                    cands = {_sub(t, a), _sub(a, t), _add(a, t)}
                    if a != 0:
                        cands.add(_div(t, a))
                        if div_ok:
                            cands.add(_mul(t, a))
                            if t != 0:
                                cands.add(_div(a, t))
                if a == 0 and t == 0 and self.values_of(b_part):
                    return True  # 0 * b = 0 for any b
                for b in cands:
                    if makes(b_part, b):
                        return True
        return False

    def reachable(self, state: tuple[Number, ...], target: Number) -> bool:
        """Reachability from a sorted, non-empty state (memoised on ``(state, target)``)."""
        key = (state, target)
        res = self.reach.get(key)
        if res is not None:
            return res
        st = tuple(to_q(x) for x in state)
        t = to_q(target)
        res = any(check_deadline() or (part[0] == t if len(part) == 1 else self.exact_of(part, t))
                  for part in self.rules.answer_parts(st))  # the deadline per part: 2**n parts without use_all
        if len(self.reach) >= CACHE_CAP:
            self.reach.clear()
        self.reach[key] = res
        return res


SPLIT_TABLE_MAX = 16
"""States of at most this many numbers keep their index splits in a table; longer ones enumerate them lazily."""


@lru_cache(maxsize=SPLIT_TABLE_MAX + 1)
def _split_table(n: int) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    return tuple(_iter_splits(n))


def _iter_splits(n: int) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The index splits ``(A, B)`` of ``range(n)`` with ``len(A) <= len(B)`` (half-and-half splits once)."""
    for mask in range(1, (1 << n) - 1):
        k = mask.bit_count()
        if 2 * k > n or (2 * k == n and not mask & 1):
            continue
        yield tuple(i for i in range(n) if mask >> i & 1), tuple(i for i in range(n) if not mask >> i & 1)


class SolverTimeout(TimeoutError):
    """:func:`~countdown_gym.game.solver.reachable` ran past its ``timeout`` (the answer is unknown)."""


DEADLINE = threading.local()
"""``at``: the ``time.monotonic()`` past which this thread's current solver call gives up (unset: never)."""


def check_deadline() -> None:
    """Raise :class:`SolverTimeout` when this thread's solver call is past its deadline (:data:`DEADLINE`)."""
    at = getattr(DEADLINE, "at", None)
    if at is not None and time.monotonic() > at:
        raise SolverTimeout("the solver ran out of time")
