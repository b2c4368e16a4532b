"""The exhaustive solver: the oracle behind generation, dense rewards and evaluation.

A *state* is a multiset of numbers; a *move* replaces two of them, ``a`` and ``b``, with
``a op b`` when :meth:`Rules.check` allows it. Reachability of the target from a state is
memoised on the sorted state, so the oracle critic and the text environment can ask it on every
step.
"""

from __future__ import annotations

import math
import operator
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from functools import lru_cache
from math import gcd

from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, Rules, format_number

Move = tuple[Number, str, Number, Number]
"""``(a, op, b, result)``: one arithmetic step."""


def canonical(state: Iterable[Number]) -> tuple[Number, ...]:
    """The order-free form of a state (a sorted tuple)."""
    return tuple(sorted(state))


def legal_moves(state: Sequence[Number], rules: Rules) -> Iterator[tuple[int, int, Move]]:
    """Every legal move from ``state``: ``(i, j, (a, op, b, result))`` with ``a = state[i]``.

    Both operand orders are tried for ``-`` and ``/`` (the rules decide which are legal);
    ``+`` and ``*`` are tried once per pair.
    """
    n = len(state)
    if rules.integer_only and all(type(x) is int for x in state):
        yield from _int_legal_moves(state, rules)
        return
    for i in range(n):
        for j in range(i + 1, n):
            x, y = state[i], state[j]
            for op in ("+", "*"):
                r = rules.apply(x, op, y)
                if r is not None:
                    yield i, j, (x, op, y, r)
            for op in ("-", "/"):
                r = rules.apply(x, op, y)
                if r is not None:
                    yield i, j, (x, op, y, r)
                if x != y:
                    r = rules.apply(y, op, x)
                    if r is not None:
                        yield j, i, (y, op, x, r)


def _int_legal_moves(state: Sequence[int], rules: Rules) -> Iterator[tuple[int, int, Move]]:
    """:func:`legal_moves` for integers under integer rules: same moves, same order, no Fractions."""
    n = len(state)
    low, high = rules.result_range()

    def ok(r: int) -> bool:
        return low <= r < high

    for i in range(n):
        for j in range(i + 1, n):
            x, y = state[i], state[j]
            r = x + y
            if ok(r):
                yield i, j, (x, "+", y, r)
            r = x * y
            if ok(r):
                yield i, j, (x, "*", y, r)
            r = x - y
            if ok(r):
                yield i, j, (x, "-", y, r)
            if x != y and ok(-r):
                yield j, i, (y, "-", x, -r)
            if y and x % y == 0 and ok(x // y):
                yield i, j, (x, "/", y, x // y)
            if x != y and x and y % x == 0 and ok(y // x):
                yield j, i, (y, "/", x, y // x)


def apply_move(state: Sequence[Number], i: int, j: int, result: Number) -> tuple[Number, ...]:
    """The state after replacing ``state[i]`` and ``state[j]`` with ``result`` (appended)."""
    return tuple(x for k, x in enumerate(state) if k != i and k != j) + (result,)


def successors(state: Sequence[Number], rules: Rules) -> Iterator[tuple[Move, tuple[Number, ...]]]:
    """``(move, next_state)`` for every legal move."""
    for i, j, move in legal_moves(state, rules):
        yield move, apply_move(state, i, j, move[3])


# ---- reachability: target-directed subset search ------------------------------------------------
#
# A sequence of moves that ends in one number is an expression tree over the whole multiset whose
# every node is a legal move, and every such tree can be played as moves. So ``t`` is reachable
# from ``S`` (all numbers used) iff ``S`` splits into two non-empty parts ``A | B`` with values
# ``a`` of ``A`` and ``b`` of ``B`` such that ``a op b = t`` (either operand order) is legal. We
# enumerate the value set of the *smaller* part (memoised per sub-multiset) and, for each ``a``,
# solve ``a op b = t`` for ``b`` (at most six candidates) and ask whether the larger part can make
# ``b``: a set lookup for parts of up to three numbers, else the same search recursively.
# Without ``use_all``, ``t`` is reachable iff some sub-multiset makes it.
#
# Internally a rational is an ``int`` or a reduced pair ``(p, q)`` with ``q > 1`` (hashing and
# arithmetic on pairs is several times faster than on ``Fraction``); the public functions
# convert at the boundary. Results equal :meth:`Rules.check`'s exactly (tested against a
# brute-force move search).

_Q = int | tuple[int, int]
_CACHE_CAP = 1 << 20
"""Entries per cache (per Rules) before it is emptied: (state, target) answers and exact-split
answers; the value-set and split caches hold ``_CACHE_CAP // 32`` sub-multisets."""


def _to_q(x: Number) -> _Q:
    if type(x) is int:
        return x
    x = Fraction(x)
    return x.numerator if x.denominator == 1 else (x.numerator, x.denominator)


def _from_q(x: _Q) -> Number:
    return x if type(x) is int else Fraction(*x)


def _mk(p: int, q: int) -> _Q:
    if q < 0:
        p, q = -p, -q
    g = gcd(p, q)
    if g != 1:
        p //= g
        q //= g
    return p if q == 1 else (p, q)


def _pq(x: _Q) -> tuple[int, int]:
    return (x, 1) if type(x) is int else x


def _add(a: _Q, b: _Q) -> _Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bq + bp * aq, aq * bq)


def _sub(a: _Q, b: _Q) -> _Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bq - bp * aq, aq * bq)


def _mul(a: _Q, b: _Q) -> _Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bp, aq * bq)


def _div(a: _Q, b: _Q) -> _Q:
    (ap, aq), (bp, bq) = _pq(a), _pq(b)
    return _mk(ap * bq, aq * bp)


class _Oracle:
    """Memoised reachability under one :class:`Rules` value (internal rationals: :data:`_Q`)."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.integer_only = rules.integer_only
        self.low, self.high = rules.result_range()
        self.free = self.low == -math.inf and self.high == math.inf
        self.values: dict[tuple[_Q, ...], frozenset[_Q]] = {}
        self.exact: dict[tuple[tuple[_Q, ...], _Q], bool] = {}
        self.splits: dict[tuple[_Q, ...], list[tuple[tuple[_Q, ...], tuple[_Q, ...]]]] = {}
        self.reach: dict[tuple[tuple[Number, ...], Number], bool] = {}
        self.hits = 0
        self.misses = 0

    def ok(self, r: _Q) -> bool:
        """Whether ``r`` may be a move's result (sign and limit; integrality is the caller's)."""
        if self.free:
            return True
        if type(r) is int:
            return self.low <= r < self.high
        p, q = r  # p / q in lowest terms, q > 1: the sign rule looks at p (Rules.result_range)
        return self.low <= p and p < self.high * q

    def pair(self, a: _Q, b: _Q) -> list[_Q]:
        """Every legal ``a op b`` and ``b op a``."""
        if type(a) is int and type(b) is int:
            c = [a + b, a * b, a - b, b - a]
            if b:
                if a % b == 0:
                    c.append(a // b)
                elif not self.integer_only:
                    c.append(_mk(a, b))
            if a:
                if b % a == 0:
                    c.append(b // a)
                elif not self.integer_only:
                    c.append(_mk(b, a))
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

    def split(self, state: tuple[_Q, ...]) -> list[tuple[tuple[_Q, ...], tuple[_Q, ...]]]:
        """Distinct ``(A, B)`` splits into non-empty parts with ``len(A) <= len(B)``."""
        out = self.splits.get(state)
        if out is None:
            seen: set[tuple[_Q, ...]] = set()
            out = []
            for ia, ib in _split_indices(len(state)):
                a = tuple(state[i] for i in ia)
                if a not in seen:
                    seen.add(a)
                    out.append((a, tuple(state[i] for i in ib)))
            if len(self.splits) >= _CACHE_CAP // 32:
                self.splits.clear()
            self.splits[state] = out
        return out

    def values_of(self, state: tuple[_Q, ...]) -> frozenset[_Q]:
        """Every value an expression over *all* of ``state`` can take."""
        out = self.values.get(state)
        if out is None:
            if len(state) == 1:
                out = frozenset(state)
            else:
                acc: set[_Q] = set()
                pair = self.pair
                for a_part, b_part in self.split(state):
                    vb = self.values_of(b_part)
                    for a in self.values_of(a_part):
                        for b in vb:
                            acc.update(pair(a, b))
                out = frozenset(acc)
            if len(self.values) >= _CACHE_CAP // 32:
                self.values.clear()
            self.values[state] = out
        return out

    def makes(self, part: tuple[_Q, ...], value: _Q) -> bool:
        """Whether an expression over all of ``part`` can equal ``value``."""
        if len(part) == 1:
            return part[0] == value
        if len(part) <= 3:
            return value in self.values_of(part)
        return self.exact_of(part, value)

    def exact_of(self, state: tuple[_Q, ...], t: _Q) -> bool:
        """Whether an expression over all of ``state`` (>= 2 numbers) equals ``t``."""
        key = (state, t)
        res = self.exact.get(key)
        if res is None:
            res = self._exact(state, t)
            if len(self.exact) >= _CACHE_CAP:
                self.exact.clear()
            self.exact[key] = res
        return res

    def _exact(self, state: tuple[_Q, ...], t: _Q) -> bool:
        if not self.ok(t):
            return False
        deadline = getattr(_DEADLINE, "at", None)
        ints = all(type(x) is int for x in state)
        if ints and self.integer_only and type(t) is not int:
            return False  # integer moves on integers never make a fraction
        whole_t = type(t) is int
        fast = ints and whole_t
        div_ok = whole_t or not self.integer_only  # a division may result in t
        makes = self.makes
        for a_part, b_part in self.split(state):
            if deadline is not None and time.monotonic() > deadline:
                raise SolverTimeout("the solver ran out of time")  # nothing half-done is cached
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
            self.hits += 1
            return res
        self.misses += 1
        st = tuple(_to_q(x) for x in state)
        t = _to_q(target)
        if self.rules.use_all:
            res = st[0] == t if len(st) == 1 else self.exact_of(st, t)
        else:
            res = t in st or any(self.exact_of(sub, t) for sub in _sub_multisets(st, 2))
        if len(self.reach) >= _CACHE_CAP:
            self.reach.clear()
        self.reach[key] = res
        return res


@lru_cache(maxsize=16)
def _split_indices(n: int) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    out = []
    for mask in range(1, (1 << n) - 1):
        k = bin(mask).count("1")
        if 2 * k > n or (2 * k == n and not mask & 1):
            continue
        out.append((tuple(i for i in range(n) if mask >> i & 1), tuple(i for i in range(n) if not mask >> i & 1)))
    return tuple(out)


def _sub_multisets(state: tuple[_Q, ...], min_size: int) -> Iterator[tuple[_Q, ...]]:
    n = len(state)
    seen: set[tuple[_Q, ...]] = set()
    for mask in range(1, 1 << n):
        if bin(mask).count("1") < min_size:
            continue
        sub = tuple(x for i, x in enumerate(state) if mask >> i & 1)
        if sub not in seen:
            seen.add(sub)
            yield sub


_DEFAULT_RULES = Rules.longproc()
_ORACLES: dict[Rules, _Oracle] = {}
_LAST: list = [None, None]  # (rules, oracle) of the last call: skips hashing the Rules


def _oracle(rules: Rules | None) -> _Oracle:
    if rules is None:
        rules = _DEFAULT_RULES
    if rules is _LAST[0]:
        return _LAST[1]
    oracle = _ORACLES.get(rules)
    if oracle is None:
        if not isinstance(rules, Rules):
            raise TypeError(f"rules must be a Rules or None, got {type(rules).__name__}")
        oracle = _ORACLES[rules] = _Oracle(rules)
    _LAST[0], _LAST[1] = rules, oracle
    return oracle


def _reachable(state: tuple[Number, ...], target: Number, rules: Rules) -> bool:
    """Reachability from a sorted, non-empty state (memoised)."""
    return _oracle(rules).reachable(state, target)


class SolverTimeout(TimeoutError):
    """:func:`reachable` / :func:`is_solvable` ran past their ``timeout`` (the answer is unknown)."""


_DEADLINE = threading.local()
"""``at``: the ``time.monotonic()`` past which this thread's current solver call gives up (unset: never)."""


def reachable(state: Iterable[Number], target: Number, rules: Rules | None = None, *,
              timeout: float | None = None) -> bool:
    """Whether ``target`` can still be reached from ``state`` (memoised).

    Under ``use_all`` rules the target must be the last number left; otherwise it may appear
    at any point. An empty state reaches nothing. ``timeout``: seconds after which the search gives up with
    :class:`SolverTimeout` (checked between the splits of a state, so it stops within milliseconds of it; what
    was finished stays cached, so asking again resumes). Without it the search runs to the end: seconds for an
    unsolvable 7-number problem under TinyZero's rules, far longer for 8 numbers.
    """
    st = tuple(sorted(x if isinstance(x, Fraction) else operator.index(x) for x in state))  # numpy ints -> int
    if not st:
        return False
    t = target if isinstance(target, Fraction) else operator.index(target)
    if timeout is None:
        return _oracle(rules).reachable(st, t)
    outer = getattr(_DEADLINE, "at", None)
    _DEADLINE.at = time.monotonic() + timeout if outer is None else min(outer, time.monotonic() + timeout)
    try:
        return _oracle(rules).reachable(st, t)
    finally:
        _DEADLINE.at = outer


def is_solvable(numbers: Iterable[int], target: int, rules: Rules | None = None, *, timeout: float | None = None) -> bool:
    """Whether the puzzle ``(numbers, target)`` has a solution under ``rules`` (default LongProc); ``timeout`` as in
    :func:`reachable`."""
    return reachable(numbers, target, rules, timeout=timeout)


def cache_info() -> dict[str, int]:
    """Hit/miss counts and size of the ``(state, target)`` reachability caches (all rules)."""
    oracles = list(_ORACLES.values())
    return {
        "hits": sum(o.hits for o in oracles),
        "misses": sum(o.misses for o in oracles),
        "size": sum(len(o.reach) for o in oracles),
        "maxsize": _CACHE_CAP,
    }


def clear_cache() -> None:
    """Empty every solver cache."""
    _ORACLES.clear()
    _LAST[0] = _LAST[1] = None


def reachable_values(numbers: Iterable[Number], rules: Rules | None = None) -> frozenset[Number]:
    """Every target the numbers can make under ``rules`` (memoised; cheap for up to 5 numbers)."""
    oracle = _oracle(rules)
    st = tuple(_to_q(x) for x in sorted(numbers))
    if not st:
        return frozenset()
    if oracle.rules.use_all:
        vals: frozenset[_Q] | set[_Q] = oracle.values_of(st)
    else:
        vals = set()
        for sub in _sub_multisets(st, 1):
            vals |= oracle.values_of(sub)
    return frozenset(_from_q(v) for v in vals)


# ---- solutions as expressions ----------------------------------------------------------------

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def _wrap(expr: str, prec: int, need: int, strict: bool) -> str:
    if prec < need or (strict and prec == need):
        return f"({expr})"
    return expr


def _combine(a: tuple[str, int], op: str, b: tuple[str, int]) -> tuple[str, int]:
    p = _PREC[op]
    right_a, right_b = _wrap(a[0], a[1], p, strict=True), _wrap(b[0], b[1], p, strict=True)
    if op in "+*" and right_b < right_a:  # one canonical order for commutative operands
        # compare both operands written the same way, so (a, b) and (b, a) give one string
        return f"{_wrap(b[0], b[1], p, strict=False)}{op}{right_a}", p
    return f"{_wrap(a[0], a[1], p, strict=False)}{op}{right_b}", p


def solve(problem: Problem, rules: Rules | None = None, limit: int | None = None) -> list[str]:
    """Distinct solution expressions, e.g. ``["(6-2)*(5-3)", ...]``.

    Expressions are written with the fewest parentheses that keep the evaluation order of the
    steps (a same-precedence right operand is always parenthesised), and the operands of ``+``
    and ``*`` in one canonical order, so two solutions differ only if their expression trees do.
    Every expression verifies with :func:`countdown_gym.verify`. ``limit`` stops early.
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"solve() needs a Problem, got {type(problem).__name__}")
    rules = rules or problem.rules
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    found: dict[str, None] = {}
    target = problem.target

    def rec(items: list[tuple[Number, tuple[str, int]]]) -> bool:
        values = [v for v, _ in items]
        if not _reachable(canonical(values), target, rules):
            return False
        if not rules.use_all:
            for v, e in items:
                if v == target:
                    found.setdefault(e[0])
        elif len(items) == 1 and values[0] == target:
            found.setdefault(items[0][1][0])
        if limit is not None and len(found) >= limit:
            return True
        for i, j, (_, op, _, r) in legal_moves(values, rules):
            ea, eb = items[i][1], items[j][1]
            rest = [it for k, it in enumerate(items) if k != i and k != j]
            if rec(rest + [(r, _combine(ea, op, eb))]):
                return True
        return False

    rec([(x, (format_number(x), 3)) for x in problem.numbers])
    out = list(found)
    return out[:limit] if limit is not None else out


def count_solutions(problem: Problem, rules: Rules | None = None, cap: int | None = None) -> int:
    """Number of distinct solution expressions (at most ``cap`` when given)."""
    return len(solve(problem, rules, limit=cap))


def solution_path(
    numbers: Sequence[Number], target: Number, rules: Rules | None = None
) -> list[Move] | None:
    """One sequence of moves from ``numbers`` that reaches ``target``, or ``None``."""
    rules = rules or Rules.longproc()
    state = tuple(numbers)
    if not reachable(state, target, rules):
        return None
    path: list[Move] = []
    while True:
        if not rules.use_all and target in state:
            return path
        if rules.use_all and len(state) == 1:
            return path
        for move, nxt in successors(state, rules):
            if reachable(nxt, target, rules):
                path.append(move)
                state = nxt
                break
        else:  # pragma: no cover - reachable() guarantees a successor
            raise AssertionError("reachability cache inconsistent")
