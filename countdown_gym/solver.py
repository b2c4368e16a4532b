"""The exhaustive solver: the oracle behind generation, dense rewards and evaluation.

A *state* is a multiset of numbers; a *move* replaces two of them, ``a`` and ``b``, with
``a op b`` when :meth:`Rules.check` allows it. Reachability of the target from a state is
memoised on the sorted state, so the oracle critic and the text environment can ask it on every
step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache

from countdown_gym.problem import Problem
from countdown_gym.rules import Number, Rules, format_number

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


def apply_move(state: Sequence[Number], i: int, j: int, result: Number) -> tuple[Number, ...]:
    """The state after replacing ``state[i]`` and ``state[j]`` with ``result`` (appended)."""
    return tuple(x for k, x in enumerate(state) if k != i and k != j) + (result,)


def successors(state: Sequence[Number], rules: Rules) -> Iterator[tuple[Move, tuple[Number, ...]]]:
    """``(move, next_state)`` for every legal move."""
    for i, j, move in legal_moves(state, rules):
        yield move, apply_move(state, i, j, move[3])


@lru_cache(maxsize=1 << 21)
def _reachable(state: tuple[Number, ...], target: Number, rules: Rules) -> bool:
    if rules.use_all:
        if len(state) == 1:
            return state[0] == target
    elif target in state:
        return True
    return any(_reachable(canonical(nxt), target, rules) for _, nxt in successors(state, rules))


def reachable(state: Iterable[Number], target: Number, rules: Rules | None = None) -> bool:
    """Whether ``target`` can still be reached from ``state`` (memoised).

    Under ``use_all`` rules the target must be the last number left; otherwise it may appear
    at any point. An empty state reaches nothing.
    """
    st = canonical(state)
    if not st:
        return False
    return _reachable(st, target, rules or Rules.longproc())


def is_solvable(numbers: Iterable[int], target: int, rules: Rules | None = None) -> bool:
    """Whether the puzzle ``(numbers, target)`` has a solution under ``rules`` (default LongProc)."""
    return reachable(numbers, target, rules)


def cache_info() -> dict[str, int]:
    """Hit/miss counts of the reachability cache."""
    info = _reachable.cache_info()
    return {"hits": info.hits, "misses": info.misses, "size": info.currsize, "maxsize": info.maxsize or 0}


def clear_cache() -> None:
    _reachable.cache_clear()
    _final_values.cache_clear()


@lru_cache(maxsize=1 << 16)
def _final_values(state: tuple[Number, ...], rules: Rules) -> frozenset[Number]:
    out: set[Number] = set()
    if len(state) == 1 or not rules.use_all:
        out.update(state)
    if len(state) > 1:
        for _, nxt in successors(state, rules):
            out |= _final_values(canonical(nxt), rules)
    return frozenset(out)


def reachable_values(numbers: Iterable[Number], rules: Rules | None = None) -> frozenset[Number]:
    """Every target the numbers can make under ``rules`` (memoised; cheap for up to 5 numbers)."""
    return _final_values(canonical(numbers), rules or Rules.longproc())


# ---- solutions as expressions ----------------------------------------------------------------

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def _wrap(expr: str, prec: int, need: int, strict: bool) -> str:
    if prec < need or (strict and prec == need):
        return f"({expr})"
    return expr


def _combine(a: tuple[str, int], op: str, b: tuple[str, int]) -> tuple[str, int]:
    p = _PREC[op]
    left = _wrap(a[0], a[1], p, strict=False)
    right = _wrap(b[0], b[1], p, strict=True)
    if op in "+*" and right < left:  # one canonical order for commutative operands
        left, right = _wrap(b[0], b[1], p, strict=False), _wrap(a[0], a[1], p, strict=True)
    return f"{left}{op}{right}", p


def solve(problem: Problem, rules: Rules | None = None, limit: int | None = None) -> list[str]:
    """Distinct solution expressions, e.g. ``["(6-2)*(5-3)", ...]``.

    Expressions are written with the fewest parentheses that keep the evaluation order of the
    steps (a same-precedence right operand is always parenthesised), and the operands of ``+``
    and ``*`` in one canonical order, so two solutions differ only if their expression trees do.
    Every expression verifies with :func:`countdown_gym.verify`. ``limit`` stops early.
    """
    rules = rules or problem.rules
    if limit is not None and limit < 1:
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
