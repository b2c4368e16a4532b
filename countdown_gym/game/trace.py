"""LongProc-format depth-first search traces, and a parser that reads them back.

The writer follows LongProc's reference search (pairs ``i < j``, each swapped so ``a >= b``, ``+ - * /``, the new
number prepended, indentation ``" " * depth + "|- "``); under :meth:`Rules.longproc` it writes byte for byte what
LongProc's ``build_countdown_demonstration`` does. Other rules add lines of their own (``docs/trace_format.md``).
``current_state=True`` ends every line in ``### Current State: [..]``, the set the search stands on after it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from countdown_gym.game.expression import MAX_NUMBER_DIGITS, literal_digits, literal_limit
from countdown_gym.game.line_grammar import DROP_OUTCOMES, parse_line
from countdown_gym.game.problem import Problem, play_rules
from countdown_gym.game.rules import Number, Rules, check_bool, describe_value, format_number
from countdown_gym.game.solver import reachable


def format_list(xs: list[Number] | tuple[Number, ...]) -> str:
    """``[37, 17, 26]``: a number set as the traces write it."""
    return "[" + ", ".join(format_number(x) for x in xs) + "]"


def _indent(level: int) -> str:
    return "" if level == 0 else " " * level + "|- "


def pick_pairs(nums: Sequence[Number]) -> Iterator[tuple[Number, Number, list[Number]]]:
    """``(a, b, numbers left)`` for each pair of positions ``i < j``, in the searches' scan order."""
    for i in range(len(nums)):
        for j in range(i + 1, len(nums)):
            yield nums[i], nums[j], [x for k, x in enumerate(nums) if k != i and k != j]


def _options(nums: list[Number]) -> str:
    return "[" + ", ".join(f"({format_number(a)}, {format_number(b)})" for a, b, _ in pick_pairs(nums)) + "]"


def _ops(a: Number, b: Number, rules: Rules) -> list[tuple[Number, str, Number]]:
    ops = [(a, "+", b), (a, "-", b), (a, "*", b), (a, "/", b)]
    if rules.sign == "any" and a != b:
        ops.append((b, "-", a))
    if (not rules.integer_only or rules.sign == "any") and a != b:  # with negatives, b / a may be whole: -21 / 7
        ops.append((b, "/", a))
    return ops


Visit = Callable[[int, list[Number], list[Number]], None]
"""``visit(depth, state, next_state)``: called for every legal move the reference DFS makes."""
_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


@dataclass
class _Search:
    """The reference DFS; it writes its lines (``write``) or only counts its ``Try`` lines in ``tries``."""

    target: int
    rules: Rules
    current_state: bool = False
    write: bool = True
    visit: Visit | None = None
    lines: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    tries: int = 0

    def emit(self, text: str, state: list[Number]) -> None:
        self.lines.append(f"{text} ### Current State: {format_list(state)}" if self.current_state else text)

    def node(self, nums: list[Number], depth: int, moves: int = 0) -> bool:
        """Search below ``nums`` (already announced); True when the target was found."""
        level = depth + 1 if len(nums) > 2 else depth
        for a, b, left in pick_pairs(nums):
            if self.write and len(nums) > 2:
                self.emit(f"{_indent(level)}Pick two numbers ({format_number(a)}, {format_number(b)}) "
                          f"(numbers left: {format_list(left)}). Try possible operations.", nums)
            if a < b:
                a, b = b, a
            for x, op, y in _ops(a, b, self.rules):
                if self.try_move(nums, x, op, y, left, level + 1, moves):
                    return True
        return False

    def try_move(self, parent: list[Number], a: Number, op: str, b: Number, left: list[Number], depth: int,
                 moves: int) -> bool:
        self.tries += 1
        result, reason = self.rules.check(a, op, b)
        nums = None if result is None else [result, *left]
        if nums is not None and self.visit is not None:
            self.visit(moves, parent, nums)
        if self.write:
            text, state = self._try_line(parent, a, op, b, reason, nums)
            self.emit(f"{_indent(depth)}Try {text}", state)
        if nums is None:
            return False
        if self.rules.wins(result, len(nums), self.target) or (len(nums) > 1 and self.node(nums, depth, moves + 1)):
            return True
        if self.write:
            self.path.pop()
        return False

    def _try_line(self, parent: list[Number], a: Number, op: str, b: Number, reason: str,
                  nums: list[Number] | None) -> tuple[str, list[Number]]:
        """A ``Try`` line's text after ``Try `` and the state it annotates; a legal move's equation joins the path."""
        fa, fb = format_number(a), format_number(b)
        if reason == "division_by_zero":
            return f"{fa} / {fb} (invalid operation). drop this branch.", parent
        if reason == "non_integer_result":
            q = Fraction(a) / Fraction(b)
            if abs(q) < 4096:  # LongProc's float formatting, within 1e-12 of the value here
                dec = f"{float(q):.1f}"
            else:  # a float drifts past the 0.05 a one-place decimal may be off by (and overflows past 1e308)
                r = round(q * 10)
                dec = f"{'-' * (r < 0)}{abs(r) // 10}.{abs(r) % 10}"
            return f"{fa} / {fb} = {dec}. {dec} is a decimal, drop this branch.", parent
        raw = format_number(_ARITHMETIC[op](Fraction(a), b))
        eq = f"{fa} {op} {fb} = {raw}"
        if reason == "exceeds_limit":
            return f"{eq}. {raw} exceeds the maximum intermediate result, drop this branch.", parent
        if nums is None:  # zero_result, negative_result
            return f"{eq}. {raw} is not positive, drop this branch.", parent
        self.path.append(eq)
        if len(nums) == 1:
            if self.rules.wins(nums[0], 1, self.target):
                return f"{eq}. Evaluate {raw} == {self.target}, target found!", nums
            return f"{eq}. Evaluate {raw} != {self.target}, drop this branch.", parent
        two = len(nums) == 2
        tail = ", just two numbers left." if two else f". Options for choosing two numbers: {_options(nums)}."
        return (f"{eq}. Add {raw} to the number set. Current number set: {format_list(nums)}, "
                f"target: {self.target}{tail}"), nums


def _solution_block(path: list[str]) -> str:
    last = len(path) - 1
    names = ["Final step" if k == 0 else "The first step" if k == last else "The step before" for k in range(len(path))]
    back = "\n".join(f"{name}: {eq}" for name, eq in zip(names, reversed(path), strict=True))
    return (f"Now we have found the target, let's trace back the solution:\n{back}\n\n"
            "Output the solution in the required format:\n<Solution>\n" + "\n".join(path) + "\n</Solution>\n")


def dfs_trace(problem: Problem, rules: Rules | None = None, current_state: bool = False) -> str:
    """The LongProc-style DFS trace of ``problem`` and its ``<Solution>``; ``ValueError`` if unsolvable or moveless."""
    rules = play_rules(problem, rules, "dfs_trace()")
    current_state = check_bool(current_state, "current_state", TypeError)  # a truthy "no" annotated every line
    nums: list[Number] = list(problem.numbers)
    if rules.is_won(nums, problem.target):  # the <Solution> block would be empty, which verify() rejects
        raise ValueError(f"{problem!r} needs no move (the target is already one of the numbers); there is no search to write")
    if not reachable(nums, problem.target, rules):  # asked first: the search would try its whole tree (minutes)
        raise ValueError(f"no solution: {problem!r} is not solvable under rules {rules.name!r}")
    s = _Search(problem.target, rules, current_state)
    tail = f". Options for choosing two numbers: {_options(nums)}." if len(nums) >= 3 else ", just two numbers left."
    s.emit(f"Initial number set: {format_list(nums)}, target: {problem.target}{tail}", nums)
    if not s.node(nums, 0):  # pragma: no cover - reachable() guarantees a hit
        raise AssertionError("reachability and the reference search disagree")
    return "# Search Procedure\n" + "\n".join(s.lines) + "\n\n" + _solution_block(s.path)


def search_nodes(problem: Problem, rules: Rules | None = None, visit: Visit | None = None) -> int:
    """How many moves the reference DFS tries before it finds the target (its ``Try`` lines); ``visit`` is called
    for every legal move, in order (``depth``: moves made on the path; ``next_state``: ``[result] + rest``)."""
    rules = play_rules(problem, rules, "search_nodes()")
    if rules.is_won(problem.numbers, problem.target):
        return 0
    s = _Search(problem.target, rules, write=False, visit=visit)
    if len(problem.numbers) > 1:
        s.node(list(problem.numbers), 0)
    return s.tries


@dataclass(frozen=True)
class TraceStep:
    """One ``Try`` line read back; ``outcome``: ``added``, ``found``, ``missed`` or ``dropped`` (no ``next_state``)."""

    line_no: int
    state: tuple[Number, ...]
    move: tuple[Number, str, Number, Number | None]
    next_state: tuple[Number, ...] | None
    outcome: str


class TraceParseError(ValueError):
    """A trace line that does not fit the format; ``line_no`` is 0-based within the trace."""

    def __init__(self, line_no: int, line: str, why: str) -> None:
        super().__init__(f"line {line_no}: {why}: {line[:120]!r}")
        self.line_no = line_no


def parse_trace(trace: str) -> tuple[tuple[Number, ...], int, list[TraceStep]]:
    """Read a DFS trace back: ``(initial numbers, target, steps)``, one :class:`TraceStep` per ``Try`` line, its
    ``state`` rebuilt from the tree (not trusted from the text), ``next_state`` ``[result] + numbers left``. The
    solution block is ignored; :class:`TraceParseError` on a malformed line."""
    if not isinstance(trace, str):  # None, bytes: an AttributeError / TypeError from splitlines below
        raise TypeError(f"parse_trace() needs the trace as a str, got {describe_value(trace)}")
    init: tuple[Number, ...] | None = None
    target: int | None = None
    steps: list[TraceStep] = []
    stack: list[tuple[int, tuple[Number, ...]]] = []  # (level of a node's Try lines, its state)
    left_at: dict[int, tuple[Number, ...]] = {}  # the numbers left by the last Pick line of each level
    digits = MAX_NUMBER_DIGITS
    for no, raw in enumerate(trace.splitlines()):
        if raw.startswith(("Now we have found the target", "<Solution>")):
            break
        with literal_limit(digits):  # after the initial line: the literals its game needs
            p = parse_line(raw)
        if p.kind in ("blank", "header"):
            continue
        if init is None:
            if p.kind != "initial":
                raise TraceParseError(no, raw, "expected 'Initial number set: ...'")
            init, target = p.numbers, p.target
            digits = literal_digits(init, target)
            stack.append((2 if len(init) > 2 else 1, init))
            continue
        if p.kind == "pick" and p.numbers is not None:
            left_at[p.indent + 1] = p.numbers
            continue
        if p.kind != "try" or p.a is None:
            raise TraceParseError(no, raw, p.malformed or "not a Pick, Try or Initial line")
        level = p.indent
        while stack and stack[-1][0] > level:
            stack.pop()
        if not stack or stack[-1][0] != level:
            raise TraceParseError(no, raw, f"indent {level} does not match the search tree")
        state = stack[-1][1]
        if len(state) > 2 and level not in left_at:
            raise TraceParseError(no, raw, "Try line without a Pick line")
        if p.outcome in DROP_OUTCOMES:
            move = (p.a, p.op, p.b, None if p.outcome == "decimal" else p.c)
            steps.append(TraceStep(no, state, move, None, "dropped"))
            continue
        nxt = (p.c, *(left_at[level] if len(state) > 2 else ()))
        outcome = p.outcome if p.outcome in ("found", "missed") else "added"
        steps.append(TraceStep(no, state, (p.a, p.op, p.b, p.c), nxt, outcome))
        if outcome == "added":
            stack.append((level + 2 if len(nxt) > 2 else level + 1, nxt))
    if init is None or target is None:
        raise TraceParseError(0, trace[:120], "no 'Initial number set' line")
    return init, target, steps
