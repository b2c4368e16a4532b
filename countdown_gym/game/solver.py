"""The exhaustive solver, the oracle behind generation, dense rewards and evaluation. A state is a multiset of
numbers; a move replaces ``a`` and ``b`` with ``a op b`` where :meth:`Rules.check` allows it. Reachability is
memoised on the sorted state."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from numbers import Real

from countdown_gym.game.expression import PRECEDENCE, Move
from countdown_gym.game.problem import Problem, play_rules
from countdown_gym.game.reachability import DEADLINE, Q, Reachability, from_q, to_q
from countdown_gym.game.rules import Number, Rules, check_int, describe_value, exact, format_number


def canonical(state: Iterable[Number]) -> tuple[Number, ...]:
    """The order-free form of a state (a sorted tuple)."""
    return tuple(sorted(state))


def legal_moves(state: Sequence[Number], rules: Rules) -> Iterator[tuple[int, int, Move]]:
    """Every legal move from ``state``: ``(i, j, (a, op, b, result))`` with ``a = state[i]``. Per pair ``i < j``:
    ``x + y``, ``x * y``, ``x - y``, ``y - x``, ``x / y``, ``y / x`` (the reversed ones only when ``x != y``)."""
    if not isinstance(rules, Rules):  # None or a preset name: an AttributeError below
        raise TypeError(f"legal_moves() needs rules, a Rules (e.g. Rules.preset('tinyzero')), got {describe_value(rules)}")
    if not all(type(x) is int or type(x) is Fraction for x in state):  # numpy ints: as Python ints, as reachable()
        state = [exact(x) for x in state]
    results = rules.legal_results
    n = len(state)
    for i in range(n):
        for j in range(i + 1, n):
            x, y = state[i], state[j]
            s, d, p, q = results(x, y)
            _, d2, _, q2 = results(y, x) if x != y else (None,) * 4
            for r, op, turned in ((s, "+", 0), (p, "*", 0), (d, "-", 0), (d2, "-", 1), (q, "/", 0), (q2, "/", 1)):
                if r is not None:
                    yield (j, i, (y, op, x, r)) if turned else (i, j, (x, op, y, r))


def apply_move(state: Sequence[Number], i: int, j: int, result: Number) -> tuple[Number, ...]:
    """The state after replacing ``state[i]`` and ``state[j]`` with ``result`` (appended)."""
    return tuple(x for k, x in enumerate(state) if k != i and k != j) + (result,)


def without_pair(state: Sequence[Number], a: Number, b: Number) -> tuple[Number, ...] | None:
    """``state`` minus one ``a`` and one ``b`` (a multiset difference), or ``None`` if either is missing."""
    rest = list(state)
    for x in (a, b):
        try:
            rest.remove(x)
        except ValueError:
            return None
    return tuple(rest)


def successors(state: Sequence[Number], rules: Rules) -> Iterator[tuple[Move, tuple[Number, ...]]]:
    """``(move, next_state)`` for every legal move."""
    for i, j, move in legal_moves(state, rules):
        yield move, apply_move(state, i, j, move[3])


_DEFAULT_RULES = Rules.longproc()
_ORACLES: dict[Rules, Reachability] = {}
_LAST: list = [None, None]  # (rules, oracle) of the last call: skips hashing the Rules


def _oracle(rules: Rules | None) -> Reachability:
    if rules is None:
        rules = _DEFAULT_RULES
    if rules is _LAST[0]:
        return _LAST[1]
    if not isinstance(rules, Rules):  # before the dict look-up: a list was "unhashable type: 'list'"
        raise TypeError(f"rules must be a Rules or None, got {type(rules).__name__}")
    oracle = _ORACLES.get(rules)
    if oracle is None:
        oracle = _ORACLES[rules] = Reachability(rules)
    _LAST[0], _LAST[1] = rules, oracle
    return oracle


def reachable(state: Iterable[Number], target: Number, rules: Rules | None = None, *,
              timeout: float | None = None) -> bool:
    """Whether ``target`` can still be reached from ``state`` (memoised; the win is :meth:`Rules.wins`; an empty
    state reaches nothing). ``timeout``: seconds after which it raises :class:`SolverTimeout` (what was finished stays
    cached, so asking again resumes); without it an unsolvable 7-number TinyZero problem takes seconds."""
    st = tuple(sorted(exact(x) for x in state))  # numpy ints -> int
    if not st:
        return False
    t = exact(target)
    if timeout is None:
        return _oracle(rules).reachable(st, t)
    if isinstance(timeout, bool) or not isinstance(timeout, Real) or not timeout >= 0:  # NaN: no limit at all
        raise ValueError(f"timeout must be a number of seconds >= 0 or None, got {describe_value(timeout)}")
    at = time.monotonic() + (float(timeout) if timeout < 1e300 else math.inf)  # 10**400: no limit, no OverflowError
    outer = getattr(DEADLINE, "at", None)
    DEADLINE.at = at if outer is None else min(outer, at)
    try:
        return _oracle(rules).reachable(st, t)
    finally:
        DEADLINE.at = outer


def is_solvable(numbers: Iterable[int], target: int, rules: Rules | None = None, *, timeout: float | None = None) -> bool:
    """Whether ``(numbers, target)`` has a solution under ``rules`` (``timeout``: :func:`reachable`'s)."""
    return reachable(numbers, target, rules, timeout=timeout)


def clear_cache() -> None:
    """Empty every solver cache."""
    _ORACLES.clear()
    _LAST[0] = _LAST[1] = None


def reachable_values(numbers: Iterable[Number], rules: Rules | None = None) -> frozenset[Number]:
    """Every target the numbers can make under ``rules`` (memoised; cheap for up to 5 numbers)."""
    oracle = _oracle(rules)
    st = tuple(to_q(x) for x in sorted(exact(x) for x in numbers))  # as reachable: checked before sorting
    if not st:
        return frozenset()
    vals: set[Q] = set()
    for part in oracle.rules.answer_parts(st):
        vals |= oracle.values_of(part)
    return frozenset(from_q(v) for v in vals)


def _wrap(expr: str, prec: int, need: int, strict: bool) -> str:
    if prec < need or (strict and prec == need):
        return f"({expr})"
    return expr


def combine(a: tuple[str, int], op: str, b: tuple[str, int], canonical: bool = True) -> tuple[str, int]:
    """``a op b`` of ``(text, precedence)`` pairs, fewest parentheses (``canonical``: ``+`` / ``*`` operands ordered)."""
    p = PRECEDENCE[op]
    right_a, right_b = _wrap(a[0], a[1], p, strict=True), _wrap(b[0], b[1], p, strict=True)
    if canonical and op in "+*" and right_b < right_a:  # one canonical order for commutative operands
        # compare both operands written the same way, so (a, b) and (b, a) give one string
        return f"{_wrap(b[0], b[1], p, strict=False)}{op}{right_a}", p
    return f"{_wrap(a[0], a[1], p, strict=False)}{op}{right_b}", p


def solve(problem: Problem, rules: Rules | None = None, limit: int | None = None) -> list[str]:
    """Distinct solution expressions, e.g. ``["(6-2)*(5-3)", ...]``, each verifying with :func:`countdown_gym.verify`:
    fewest parentheses that keep the steps' order, ``+`` / ``*`` operands in one canonical order (two solutions
    differ only if their trees do). ``limit`` stops early."""
    rules = play_rules(problem, rules, "solve()")
    check_int(limit, "limit", 1, none=True)
    found: dict[str, None] = {}
    oracle = _oracle(rules)
    target = problem.target
    wins = rules.wins

    def rec(items: list[tuple[Number, tuple[str, int]]]) -> bool:
        values = [v for v, _ in items]
        if not oracle.reachable(canonical(values), target):
            return False
        left = len(items)
        for v, e in items:
            if v == target and wins(v, left, target):  # the cheap half of Rules.wins first: this runs per node
                found.setdefault(e[0])
        if limit is not None and len(found) >= limit:
            return True
        for i, j, (_, op, _, r) in legal_moves(values, rules):
            ea, eb = items[i][1], items[j][1]
            rest = [it for k, it in enumerate(items) if k != i and k != j]
            if rec(rest + [(r, combine(ea, op, eb))]):
                return True
        return False

    rec([(x, (format_number(x), 3)) for x in problem.numbers])
    out = list(found)
    return out[:limit] if limit is not None else out


def count_solutions(problem: Problem, rules: Rules | None = None, cap: int | None = None) -> int:
    """Number of distinct solution expressions (at most ``cap`` when given)."""
    check_int(cap, "cap", 1, none=True)  # before solve(), whose message would name "limit"
    return len(solve(problem, rules, limit=cap))


def solution_path(numbers: Sequence[Number], target: Number, rules: Rules | None = None) -> list[Move] | None:
    """One sequence of moves from ``numbers`` that reaches ``target``, or ``None``."""
    rules = rules or Rules.longproc()
    state = tuple(numbers)
    if not reachable(state, target, rules):
        return None
    path: list[Move] = []
    while True:
        if rules.is_won(state, target):
            return path
        for move, nxt in successors(state, rules):
            if reachable(nxt, target, rules):
                path.append(move)
                state = nxt
                break
        else:  # pragma: no cover - reachable() guarantees a successor
            raise AssertionError("reachability cache inconsistent")
