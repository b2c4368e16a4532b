"""LongProc-format depth-first search traces, and a parser that reads them back.

The writer follows LongProc's reference search (pairs ``i < j``, each swapped so ``a >= b``, ``+ - * /``, the new
number prepended, indentation ``" " * depth + "|- "``); under :meth:`Rules.longproc` it writes byte for byte what
LongProc's ``build_countdown_demonstration`` does. Other rules add lines of their own (``docs/trace_format.md``).
``current_state=True`` ends every line in ``### Current State: [..]``, the set the search stands on after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from countdown_gym.game.line_grammar import DROP_OUTCOMES, parse_line
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, Rules, format_number, normalize


def format_list(xs: list[Number] | tuple[Number, ...]) -> str:
    """``[37, 17, 26]``: a number set as the traces write it."""
    return "[" + ", ".join(format_number(x) for x in xs) + "]"


def _indent(level: int) -> str:
    return "" if level == 0 else " " * level + "|- "


def _pairs(nums: list[Number]):
    for i in range(len(nums)):
        for j in range(i + 1, len(nums)):
            yield nums[i], nums[j], [x for k, x in enumerate(nums) if k != i and k != j]


def _options(nums: list[Number]) -> str:
    return "[" + ", ".join(f"({format_number(a)}, {format_number(b)})" for a, b, _ in _pairs(nums)) + "]"


def _ops(a: Number, b: Number, rules: Rules) -> list[tuple[Number, str, Number]]:
    ops = [(a, "+", b), (a, "-", b), (a, "*", b), (a, "/", b)]
    if rules.sign == "any" and a != b:
        ops.append((b, "-", a))
    if (not rules.integer_only or rules.sign == "any") and a != b:  # with negatives, b / a may be whole: -21 / 7
        ops.append((b, "/", a))
    return ops


@dataclass
class _Search:
    target: int
    rules: Rules
    current_state: bool
    lines: list[str]
    path: list[str]
    tries: int = 0

    def emit(self, text: str, state: list[Number]) -> None:
        if self.current_state:
            text += f" ### Current State: {format_list(state)}"
        self.lines.append(text)

    def node(self, nums: list[Number], depth: int) -> bool:
        """Search below ``nums`` (already announced); True when the target was found."""
        level = depth + 1 if len(nums) > 2 else depth
        for a, b, left in _pairs(nums):
            if len(nums) > 2:
                self.emit(
                    f"{_indent(level)}Pick two numbers ({format_number(a)}, {format_number(b)}) "
                    f"(numbers left: {format_list(left)}). Try possible operations.",
                    nums,
                )
            if a < b:
                a, b = b, a
            for x, op, y in _ops(a, b, self.rules):
                if self.try_move(nums, x, op, y, left, level + 1):
                    return True
        return False

    def try_move(self, parent: list[Number], a: Number, op: str, b: Number, left: list[Number], depth: int) -> bool:
        self.tries += 1
        ind = _indent(depth)
        fa, fb = format_number(a), format_number(b)
        result, reason = self.rules.check(a, op, b)
        if reason == "division_by_zero":
            self.emit(f"{ind}Try {fa} / {fb} (invalid operation). drop this branch.", parent)
            return False
        if reason == "non_integer_result":
            dec = f"{float(Fraction(a) / Fraction(b)):.1f}"
            self.emit(f"{ind}Try {fa} / {fb} = {dec}. {dec} is a decimal, drop this branch.", parent)
            return False
        raw = normalize(Fraction(a) + b if op == "+" else Fraction(a) - b if op == "-" else Fraction(a) * b if op == "*" else Fraction(a) / b)
        eq = f"{fa} {op} {fb} = {format_number(raw)}"
        if reason == "exceeds_limit":
            self.emit(f"{ind}Try {eq}. {format_number(raw)} exceeds the maximum intermediate result, drop this branch.", parent)
            return False
        if reason in ("zero_result", "negative_result"):
            self.emit(f"{ind}Try {eq}. {format_number(raw)} is not positive, drop this branch.", parent)
            return False
        assert result is not None
        nums = [result] + left
        self.path.append(eq)
        if len(nums) == 1:
            if self.rules.wins(result, 1, self.target):
                self.emit(f"{ind}Try {eq}. Evaluate {format_number(result)} == {self.target}, target found!", nums)
                return True
            self.emit(f"{ind}Try {eq}. Evaluate {format_number(result)} != {self.target}, drop this branch.", parent)
            self.path.pop()
            return False
        tail = (
            "just two numbers left."
            if len(nums) == 2
            else f"Options for choosing two numbers: {_options(nums)}."
        )
        sep = ", " if len(nums) == 2 else ". "
        self.emit(
            f"{ind}Try {eq}. Add {format_number(result)} to the number set. "
            f"Current number set: {format_list(nums)}, target: {self.target}{sep}{tail}",
            nums,
        )
        if self.rules.wins(result, len(nums), self.target):
            return True
        if self.node(nums, depth):
            return True
        self.path.pop()
        return False


def _solution_block(path: list[str]) -> str:
    last = len(path) - 1
    names = ["Final step" if k == 0 else "The first step" if k == last else "The step before" for k in range(len(path))]
    back = "\n".join(f"{name}: {eq}" for name, eq in zip(names, reversed(path), strict=True))
    return (
        "Now we have found the target, let's trace back the solution:\n"
        f"{back}\n\nOutput the solution in the required format:\n<Solution>\n"
        + "\n".join(path)
        + "\n</Solution>\n"
    )


def _run(problem: Problem, rules: Rules | None, current_state: bool) -> _Search:
    rules = rules or problem.rules
    s = _Search(problem.target, rules, current_state, [], [])
    nums: list[Number] = list(problem.numbers)
    if len(nums) >= 3:
        s.emit(f"Initial number set: {format_list(nums)}, target: {problem.target}. Options for choosing two numbers: {_options(nums)}.", nums)
    else:
        s.emit(f"Initial number set: {format_list(nums)}, target: {problem.target}, just two numbers left.", nums)
    s.found = rules.is_won(nums, problem.target) or (len(nums) > 1 and s.node(nums, 0))  # type: ignore[attr-defined]
    return s


def dfs_trace(problem: Problem, rules: Rules | None = None, current_state: bool = False) -> str:
    """The LongProc-style DFS search trace of ``problem``, ending in a ``<Solution>`` block; ``ValueError`` if it is
    unsolvable or needs no move."""
    if (rules or problem.rules).is_won(problem.numbers, problem.target):
        # solved before any move: the <Solution> block would be empty, which verify() rejects
        raise ValueError(f"{problem!r} needs no move (the target is already one of the numbers); there is no search to write")
    s = _run(problem, rules, current_state)
    if not s.found:  # type: ignore[attr-defined]
        raise ValueError(f"no solution: {problem!r} is not solvable under rules {((rules or problem.rules).name)!r}")
    return "# Search Procedure\n" + "\n".join(s.lines) + "\n\n" + _solution_block(s.path)


Visit = Callable[[int, list[Number], list[Number]], None]
"""``visit(depth, state, next_state)``: called for every legal move the reference DFS makes."""


def search_nodes(problem: Problem, rules: Rules | None = None, visit: Visit | None = None) -> int:
    """How many moves the reference DFS tries before it finds the target (its ``Try`` lines); ``visit`` is called
    for every legal move, in order (``depth``: moves made on the path; ``next_state``: ``[result] + rest``)."""
    rules = rules or problem.rules
    nums: list[Number] = list(problem.numbers)
    if rules.is_won(nums, problem.target):
        return 0
    counter = [0]
    if len(nums) > 1:
        _count_tries(nums, problem.target, rules, counter, visit)
    return counter[0]


def _count_tries(nums: list[Number], target: int, rules: Rules, counter: list[int], visit: Visit | None = None,
                 depth: int = 0) -> bool:
    """The search of :class:`_Search` without writing lines: counts ``Try`` lines in ``counter``."""
    check = rules.check
    for a, b, left in _pairs(nums):
        if a < b:
            a, b = b, a
        for x, op, y in _ops(a, b, rules):
            counter[0] += 1
            result, _ = check(x, op, y)
            if result is None:
                continue
            if visit is not None:
                visit(depth, nums, [result] + left)
            if rules.wins(result, len(left) + 1, target):
                return True
            if not left:
                continue
            if _count_tries([result] + left, target, rules, counter, visit, depth + 1):
                return True
    return False


@dataclass(frozen=True)
class TraceStep:
    """One ``Try`` line read back; ``outcome``: ``"added"``, ``"found"``, ``"missed"`` or ``"dropped"`` (then
    ``next_state`` is ``None``)."""

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
    init: tuple[Number, ...] | None = None
    target: int | None = None
    steps: list[TraceStep] = []
    stack: list[tuple[int, tuple[Number, ...]]] = []  # (level of a node's Try lines, its state)
    left_at: dict[int, tuple[Number, ...]] = {}  # the numbers left by the last Pick line of each level
    for no, raw in enumerate(trace.splitlines()):
        if raw.startswith(("Now we have found the target", "<Solution>")):
            break
        p = parse_line(raw)
        if p.kind in ("blank", "header"):
            continue
        if init is None:
            if p.kind != "initial":
                raise TraceParseError(no, raw, "expected 'Initial number set: ...'")
            init, target = p.numbers, p.target
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
