"""The line checker of CountdownText-v0 (:class:`LineChecker`): every completed reasoning line checked against the
search tree actually reachable so far, with transition records (``docs/DESIGN.md``), a :class:`LineCheck` verdict
and the reason codes of :data:`INVALID_REASONS`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from countdown_gym.game.expression import literal_limit
from countdown_gym.game.line_grammar import DROP_OUTCOMES, ParsedLine, parse_line
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, Rules, normalize, transition_record
from countdown_gym.game.solver import without_pair

INVALID_REASONS: dict[str, str] = {
    "operand_unavailable": "an operand is not in the number set the line branches from",
    "arithmetic_error": "the written result differs from the exact result",
    "division_by_zero": "a division by zero stated as a move",
    "non_integer_result": "a non-integer result under integer rules",
    "negative_result": "a negative result under positive or non-negative rules",
    "zero_result": "a zero result under positive rules (longproc_positive, classic; longproc allows 0)",
    "exceeds_limit": "a result at or above the rules' limit",
    "unknown_operator": "an operator outside + - * /",
    "wrong_drop": "the line drops a branch for a reason that does not hold",
    "state_mismatch": "a stated number set (current set, numbers left, annotation) is not the real one",
    "target_mismatch": "a stated target is not the problem's target",
    "wrong_evaluation": "an Evaluate / Add claim does not match the move's result or the target",
    "numbers_left": "the line evaluates the final number while other numbers are still unused",
    "bad_depth": "the line's indentation / depth matches no node of the current search path",
    "parent_invalid": "the line continues below a line that was invalid",
    "not_in_search": "a trace-back line restates a move the search never made",
    "wrong_problem": "the 'Initial number set' line does not state the problem",
    "options_mismatch": "the listed options are not the pairs of the number set",
    "malformed": "a claim on the line could not be read",
}
"""Reason codes of invalid lines (besides :meth:`Rules.check`'s, which are included)."""

_RE_SOLUTION_TAG = re.compile(r"(</?(?:Solution|solution|SOLUTION)>)")
_PERMISSIVE = Rules(name="exact", integer_only=False, sign="any", value_limit=None, use_all=True)


@dataclass
class _Node:
    """One state of the current search path. ``level``: LongProc indent of its ``Try`` lines."""

    level: int
    state: tuple[Number, ...]  # for an untrusted node: its nearest trusted ancestor's state
    trusted: bool
    size: int  # how many numbers the node holds (known even when untrusted)

    def child(self, state: tuple[Number, ...], trusted: bool = True) -> _Node:
        """The node below this one: ``state``, or (untrusted) this node's state with one number fewer."""
        size = len(state) if trusted else max(self.size - 1, 1)
        return _Node(self.level + (2 if size > 2 else 1), state, trusted, size)


@dataclass(frozen=True)
class LineCheck:
    """The verdict on one completed line: ``valid`` with a reason code (``"ok"`` when valid)."""

    line_no: int
    text: str
    kind: str
    valid: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"line_no": self.line_no, "text": self.text, "kind": self.kind, "valid": self.valid, "reason": self.reason}


def _same(xs: Sequence[Number], ys: Sequence[Number]) -> bool:
    return len(xs) == len(ys) and sorted(xs) == sorted(ys)


def _options_ok(p: ParsedLine, state: Sequence[Number]) -> bool:
    """Whether the line's listed options (if any) are the pairs of ``state``."""
    pairs = sorted(tuple(sorted((state[i], state[j]))) for i in range(len(state)) for j in range(i + 1, len(state)))
    return p.options is None or sorted(tuple(sorted(x)) for x in p.options) == pairs


class LineChecker:
    """Checks reasoning lines against the search tree reachable from the problem's numbers (the rules in
    :class:`~countdown_gym.envs.text.CountdownTextEnv`'s docstring), keeping the current search path as a stack of
    nodes; below an invalid LongProc / compact line an untrusted node makes the lines under it ``parent_invalid``."""

    def __init__(self, problem: Problem, rules: Rules | None = None) -> None:
        self.problem = problem
        self.rules = rules or problem.rules
        self.target = problem.target
        self.initial: tuple[Number, ...] = tuple(normalize(x) for x in problem.numbers)
        self.stack: list[_Node] = [_Node(2 if len(self.initial) > 2 else 1, self.initial, True, len(self.initial))]
        self.in_solution = False
        self.line_no = 0
        self.moves_made: set[tuple[Number, str, Number, Number]] = set()

    @property
    def state(self) -> tuple[Number, ...]:
        """The number set the search stands on (the deepest trusted state of the path)."""
        return self.stack[-1].state

    def _record(self, state, p: ParsedLine, next_state, reason: str) -> dict[str, Any]:
        return transition_record(state, (p.a, p.op, p.b, p.c), next_state, self.target, reason, self.rules,
                                 line_no=self.line_no, in_solution=self.in_solution)

    def _move(self, state, p: ParsedLine, prepend: bool) -> tuple[tuple[Number, ...] | None, str]:
        """``(next_state, "ok")`` if ``p``'s move is legal from ``state`` and exact, else ``(None, reason)``."""
        rest = without_pair(state, p.a, p.b)
        if rest is None:
            return None, "operand_unavailable"
        result, reason = self.rules.check(p.a, p.op, p.b)
        if result is None:
            return None, reason
        if p.c is None or result != p.c:
            return None, "arithmetic_error"
        return ((result,) + rest if prepend else rest + (result,)), "ok"

    def _find_level(self, level: int) -> int | None:
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k].level <= level:
                return k if self.stack[k].level == level else None
        return None

    def _annotation_ok(self, p: ParsedLine, after: Sequence[Number]) -> bool:
        return p.annotation is None or _same(p.annotation, after)

    def check(self, line: str) -> tuple[LineCheck, list[dict[str, Any]]]:
        """Check one completed line (without its newline): its :class:`LineCheck` and transitions."""
        transitions: list[dict[str, Any]] = []
        if "olution>" in line and "=" in line:  # <Solution> / </Solution> sharing a line with steps
            segments = [x for x in _RE_SOLUTION_TAG.split(line) if x.strip()]
        else:
            segments = [line]
        kind, reason = "blank", "ok"
        for segment in segments:
            with literal_limit(self.problem.literal_digits):
                p = parse_line(segment)
            r = self._dispatch(p, transitions)
            if kind in ("blank", "solution_open", "solution_close") or (reason == "ok" and r != "ok"):
                kind = p.kind
            if reason == "ok":
                reason = r
        check = LineCheck(self.line_no, line, kind, reason == "ok", reason)
        self.line_no += 1
        return check, transitions

    def _dispatch(self, p: ParsedLine, out: list[dict[str, Any]]) -> str:
        kind = p.kind
        if kind in ("blank", "header", "answer", "think", "text"):  # not moves; only unreadable claims count
            return "ok" if p.malformed is None else "malformed"
        if kind == "solution_open":
            self.in_solution = True
            del self.stack[1:]
            return "ok"
        if kind == "solution_close":
            self.in_solution = False
            return "ok"
        if kind == "initial":
            return self._initial(p)
        if kind == "pick":
            return self._pick(p)
        if kind == "traceback":
            return self._traceback(p)
        if kind == "try":
            return self._try(p, out)
        return self._equation(p, out, compact=kind == "compact" and not self.in_solution)  # or a plain equation

    def _initial(self, p: ParsedLine) -> str:
        if p.malformed is not None:
            return "malformed"
        if p.numbers is None or not _same(p.numbers, self.initial):
            return "wrong_problem"
        if p.target != self.target:
            return "target_mismatch"
        if not _options_ok(p, self.initial):
            return "options_mismatch"
        if not self._annotation_ok(p, self.initial):
            return "state_mismatch"
        del self.stack[1:]
        return "ok"

    def _pick(self, p: ParsedLine) -> str:
        k = self._find_level(p.indent + 1)
        if k is None:
            return "bad_depth"
        node = self.stack[k]
        if not node.trusted:
            return "parent_invalid"
        if p.malformed is not None:
            return "malformed"
        rest = without_pair(node.state, p.a, p.b)
        if rest is None:
            return "operand_unavailable"
        if (p.numbers is not None and not _same(p.numbers, rest)) or not self._annotation_ok(p, node.state):
            return "state_mismatch"
        del self.stack[k + 1 :]
        return "ok"

    def _traceback(self, p: ParsedLine) -> str:
        if p.a is None:  # a move with an unreadable number (04, 1/0)
            return "malformed"
        result, reason = self.rules.check(p.a, p.op, p.b)
        if result is None:
            return reason
        if result != p.c:
            return "arithmetic_error"
        return "ok" if (p.a, p.op, p.b, p.c) in self.moves_made else "not_in_search"

    def _try_claims(self, p: ParsedLine, state: tuple[Number, ...], nxt: tuple[Number, ...]) -> str:
        """The claims a legal, exact Try line from ``state`` to ``nxt`` makes about its outcome and annotation."""
        c = nxt[0]
        if p.outcome == "add":
            if p.added != c:
                return "wrong_evaluation"
            if p.numbers is not None and not _same(p.numbers, nxt):
                return "state_mismatch"
            if p.target is not None and p.target != self.target:
                return "target_mismatch"
            if not _options_ok(p, nxt):
                return "options_mismatch"
        elif p.outcome in ("found", "missed"):
            if p.target != self.target:
                return "target_mismatch"
            if p.evaluated != c or (c == self.target) != (p.outcome == "found"):
                return "wrong_evaluation"
            if len(nxt) > 1 and (p.outcome == "missed" or not self.rules.wins(c, len(nxt), self.target)):
                return "numbers_left"
        return "ok" if self._annotation_ok(p, state if p.outcome == "missed" else nxt) else "state_mismatch"

    def _try(self, p: ParsedLine, out: list[dict[str, Any]]) -> str:
        k = self._find_level(p.indent)
        node = self.stack[k] if k is not None else self.stack[-1]
        if k is None:
            reason = "bad_depth"
        elif not node.trusted:
            reason = "parent_invalid"
        elif p.malformed is not None:
            reason = "malformed"
        elif p.outcome in DROP_OUTCOMES:
            reason = self._drop(p, node.state)
            if reason == "ok":  # a correctly pruned branch: no move was made
                del self.stack[k + 1 :]
                return "ok"
        else:
            nxt, reason = self._move(node.state, p, prepend=True)
            if nxt is not None and (reason := self._try_claims(p, node.state, nxt)) == "ok":
                del self.stack[k + 1 :]
                if p.outcome != "missed":
                    self.stack.append(node.child(nxt))
                self.moves_made.add((p.a, p.op, p.b, p.c))
                out.append(self._record(node.state, p, nxt, "ok"))
                return "ok"
        if k is not None:
            del self.stack[k + 1 :]
            if p.outcome in ("add", "found", "bare"):  # the text goes below this line: keep it untrusted
                self.stack.append(node.child(node.state, trusted=False))
        out.append(self._record(node.state, p, None, reason))
        return reason

    def _drop(self, p: ParsedLine, state: tuple[Number, ...]) -> str:
        """Whether a pruning claim holds: operands available, the move really breaks that rule."""
        if without_pair(state, p.a, p.b) is None:
            return "operand_unavailable"
        if not self._annotation_ok(p, state):
            return "state_mismatch"
        _, reason = self.rules.check(p.a, p.op, p.b)
        expected = {"decimal": ("non_integer_result",), "exceeds": ("exceeds_limit",),
                    "not_positive": ("zero_result", "negative_result"), "invalid_op": ("division_by_zero",)}[p.outcome]
        if reason not in expected:
            return "wrong_drop"
        if p.c is not None:
            raw, _ = _PERMISSIVE.check(p.a, p.op, p.b)
            tolerance = 0.05 if p.outcome == "decimal" else 0  # LongProc writes decimals to one place
            if raw is None or abs(raw - p.c) > tolerance + 1e-12:
                return "arithmetic_error"
        return "ok"

    def _equation(self, p: ParsedLine, out: list[dict[str, Any]], compact: bool) -> str:
        """A compact line (its node found by depth; its listed numbers must be the new state) or a plain equation (on
        the deepest trusted state). A made state is pushed; a compact line that fails leaves an untrusted node."""
        if compact and p.indent >= len(self.stack):
            out.append(self._record(self.state, p, None, "bad_depth"))
            return "bad_depth"
        k = p.indent if compact else max(i for i, n in enumerate(self.stack) if n.trusted)  # plain: the last trusted
        node = self.stack[k]
        del self.stack[k + 1 :]
        nxt, reason = None, "parent_invalid" if not node.trusted else "malformed"
        if node.trusted and p.malformed is None:
            nxt, reason = self._move(node.state, p, prepend=False)
        if nxt is not None and ((compact and p.numbers is not None and not _same(p.numbers, nxt))
                                or not self._annotation_ok(p, nxt)):
            nxt, reason = None, "state_mismatch"
        if nxt is not None:
            self.stack.append(node.child(nxt))
            self.moves_made.add((p.a, p.op, p.b, p.c))
        elif compact:
            self.stack.append(node.child(node.state, trusted=False))
        out.append(self._record(node.state, p, nxt, reason))
        return reason
