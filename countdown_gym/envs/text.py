"""``CountdownText-v0``: reasoning text as an MDP, with every move line checked; and the replay helper.

Three layers, one code path:

* :class:`LineChecker` reads completed lines (grammar in :mod:`countdown_gym.text_format`) and
  checks each against the search tree actually reachable so far, emitting transition records.
* :class:`TextEpisode` owns one episode's text: it cuts it into lines, feeds the checker, and
  ends the episode on a final answer (reward from :func:`countdown_gym.verifier.verify`) or a
  budget.
* :class:`CountdownTextEnv` (the Gymnasium env) and :func:`replay_completion` both drive a
  :class:`TextEpisode`; the env adds spaces, prompts and tokenization.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from countdown_gym.curriculum import Curriculum
from countdown_gym.envs.problem_source import ProblemLike, make_problem_source
from countdown_gym.generator import GeneratorConfig
from countdown_gym.problem import Problem
from countdown_gym.rules import Number, Rules, format_number, normalize
from countdown_gym.text_format import (
    CHARSET,
    DROP_OUTCOMES,
    PROMPT_STYLES,
    ParsedLine,
    build_prompt,
    parse_line,
    sanitize,
)
from countdown_gym.trace import format_list
from countdown_gym.verifier import Verdict, final_answer_end, verify

ACTION_MODES: tuple[str, ...] = ("line", "token_str", "token")
"""How an action extends the text: a whole line, a token's text, or a token id."""

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


# ---- the checker -----------------------------------------------------------------------------


@dataclass
class _Node:
    """One state of the current search path. ``level``: LongProc indent of its ``Try`` lines."""

    level: int
    state: tuple[Number, ...]  # for an untrusted node: its nearest trusted ancestor's state
    trusted: bool = True
    size: int = -1  # how many numbers the node holds (known even when untrusted)

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = len(self.state)

    def untrusted_child(self) -> _Node:
        size = max(self.size - 1, 1)
        return _Node(_level_below(self.level, size), self.state, trusted=False, size=size)


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


def _level_below(parent_level: int, child_size: int) -> int:
    return parent_level + (2 if child_size > 2 else 1)


def _without(state: Sequence[Number], a: Number, b: Number) -> tuple[Number, ...] | None:
    """``state`` minus one ``a`` and one ``b`` (multiset), or ``None`` if either is missing."""
    rest = list(state)
    for x in (a, b):
        try:
            rest.remove(x)
        except ValueError:
            return None
    return tuple(rest)


def _same(xs: Sequence[Number], ys: Sequence[Number]) -> bool:
    return len(xs) == len(ys) and sorted(xs) == sorted(ys)


def _pairs_of(state: Sequence[Number]) -> list[tuple[Number, Number]]:
    return sorted(
        tuple(sorted((state[i], state[j]))) for i in range(len(state)) for j in range(i + 1, len(state))
    )


class LineChecker:
    """Checks reasoning lines against the search tree reachable from the problem's numbers.

    The checker keeps the current search path (a stack of states from the initial numbers).
    LongProc ``Try`` / ``Pick`` lines find their node by indentation, compact lines by depth;
    plain equations apply to the deepest state in sequence (inside ``<Solution>`` from the
    initial numbers). A move line is valid when its operands are in the state it branches from,
    :meth:`Rules.check` allows it, the written result is exact, and every claim on the line
    (number sets, target, evaluation, annotation) is true. An invalid line never advances the
    state; below an invalid LongProc / compact line the search path holds an untrusted node, so
    the lines that continue from it are invalid with reason ``parent_invalid``.
    """

    def __init__(self, problem: Problem, rules: Rules | None = None) -> None:
        self.problem = problem
        self.rules = rules or problem.rules
        self.target = problem.target
        self.initial: tuple[Number, ...] = tuple(normalize(x) for x in problem.numbers)
        self.stack: list[_Node] = [_Node(2 if len(self.initial) > 2 else 1, self.initial)]
        self.in_solution = False
        self.line_no = 0
        self.moves_made: set[tuple[Number, str, Number, Number]] = set()

    @property
    def state(self) -> tuple[Number, ...]:
        """The number set the search stands on (the deepest trusted state of the path)."""
        return self.stack[-1].state

    # -- helpers --
    def _record(self, state, p: ParsedLine, next_state, reason: str) -> dict[str, Any]:
        valid = reason == "ok"
        return {
            "state": state,
            "move": (p.a, p.op, p.b, p.c),
            "next_state": next_state if valid else None,
            "target": self.target,
            "valid": valid,
            "reason": reason,
            "rules": self.rules,
            "line_no": self.line_no,
            "in_solution": self.in_solution,
        }

    def _move(self, state, p: ParsedLine, prepend: bool) -> tuple[tuple[Number, ...] | None, str]:
        """``(next_state, "ok")`` if ``p``'s move is legal from ``state`` and exact, else ``(None, reason)``."""
        rest = _without(state, p.a, p.b)
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

    # -- the entry point --
    def check(self, line: str) -> tuple[LineCheck, list[dict[str, Any]]]:
        """Check one completed line (without its newline): its :class:`LineCheck` and transitions."""
        transitions: list[dict[str, Any]] = []
        if "olution>" in line and "=" in line:  # <Solution> / </Solution> sharing a line with steps
            segments = [x for x in _RE_SOLUTION_TAG.split(line) if x.strip()]
        else:
            segments = [line]
        kind, reason = "blank", "ok"
        for segment in segments:
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
        if kind == "compact" and not self.in_solution:
            return self._compact(p, out)
        return self._sequential(p, out)  # equation, or a compact-shaped line inside <Solution>

    def _initial(self, p: ParsedLine) -> str:
        if p.malformed is not None:
            return "malformed"
        if p.numbers is None or not _same(p.numbers, self.initial):
            return "wrong_problem"
        if p.target != self.target:
            return "target_mismatch"
        if p.options is not None and sorted(tuple(sorted(x)) for x in p.options) != _pairs_of(self.initial):
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
        rest = _without(node.state, p.a, p.b)
        if rest is None:
            return "operand_unavailable"
        if (p.numbers is not None and not _same(p.numbers, rest)) or not self._annotation_ok(p, node.state):
            return "state_mismatch"
        del self.stack[k + 1 :]
        return "ok"

    def _traceback(self, p: ParsedLine) -> str:
        result, reason = self.rules.check(p.a, p.op, p.b)
        if result is None:
            return reason
        if result != p.c:
            return "arithmetic_error"
        return "ok" if (p.a, p.op, p.b, p.c) in self.moves_made else "not_in_search"

    def _try_claims(self, p: ParsedLine, nxt: tuple[Number, ...]) -> str:
        """The claims a legal, exact Try line makes about its outcome."""
        c = nxt[0]
        if p.outcome == "add":
            if p.added != c:
                return "wrong_evaluation"
            if p.numbers is not None and not _same(p.numbers, nxt):
                return "state_mismatch"
            if p.target is not None and p.target != self.target:
                return "target_mismatch"
            if p.options is not None and sorted(tuple(sorted(x)) for x in p.options) != _pairs_of(nxt):
                return "options_mismatch"
        elif p.outcome in ("found", "missed"):
            if p.target != self.target:
                return "target_mismatch"
            if p.evaluated != c or (c == self.target) != (p.outcome == "found"):
                return "wrong_evaluation"
            if len(nxt) > 1 and (p.outcome == "missed" or self.rules.use_all):
                return "numbers_left"
        return "ok"

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
            if nxt is not None:
                reason = self._try_claims(p, nxt)
                pushes = p.outcome != "missed"
                if reason == "ok" and not self._annotation_ok(p, nxt if pushes else node.state):
                    reason = "state_mismatch"
                if reason == "ok":
                    del self.stack[k + 1 :]
                    if pushes:
                        self.stack.append(_Node(_level_below(node.level, len(nxt)), nxt))
                    self.moves_made.add((p.a, p.op, p.b, p.c))
                    out.append(self._record(node.state, p, nxt, "ok"))
                    return "ok"
        if k is not None:
            del self.stack[k + 1 :]
            if p.outcome in ("add", "found", "bare"):  # the text goes below this line: keep it untrusted
                self.stack.append(node.untrusted_child())
        out.append(self._record(node.state, p, None, reason))
        return reason

    def _drop(self, p: ParsedLine, state: tuple[Number, ...]) -> str:
        """Whether a pruning claim holds: operands available, the move really breaks that rule."""
        if _without(state, p.a, p.b) is None:
            return "operand_unavailable"
        if not self._annotation_ok(p, state):
            return "state_mismatch"
        _, reason = self.rules.check(p.a, p.op, p.b)
        expected = {
            "decimal": ("non_integer_result",),
            "exceeds": ("exceeds_limit",),
            "not_positive": ("zero_result", "negative_result"),
            "invalid_op": ("division_by_zero",),
        }[p.outcome]
        if reason not in expected:
            return "wrong_drop"
        if p.c is not None:
            raw, _ = _PERMISSIVE.check(p.a, p.op, p.b)
            tolerance = 0.05 if p.outcome == "decimal" else 0  # LongProc writes decimals to one place
            if raw is None or abs(raw - p.c) > tolerance + 1e-12:
                return "arithmetic_error"
        return "ok"

    def _compact(self, p: ParsedLine, out: list[dict[str, Any]]) -> str:
        d = p.indent
        if d >= len(self.stack):
            out.append(self._record(self.state, p, None, "bad_depth"))
            return "bad_depth"
        node = self.stack[d]
        del self.stack[d + 1 :]
        if not node.trusted:
            reason, nxt = "parent_invalid", None
        elif p.malformed is not None:
            reason, nxt = "malformed", None
        else:
            nxt, reason = self._move(node.state, p, prepend=False)
            if nxt is not None and p.numbers is not None and not _same(p.numbers, nxt):
                reason, nxt = "state_mismatch", None
            if nxt is not None and not self._annotation_ok(p, nxt):
                reason, nxt = "state_mismatch", None
        if nxt is not None:
            self.stack.append(_Node(_level_below(node.level, len(nxt)), nxt))
            self.moves_made.add((p.a, p.op, p.b, p.c))
        else:
            self.stack.append(node.untrusted_child())
        out.append(self._record(node.state, p, nxt, reason))
        return reason

    def _sequential(self, p: ParsedLine, out: list[dict[str, Any]]) -> str:
        node = self.stack[-1]
        if not node.trusted:
            reason, nxt = "parent_invalid", None
        elif p.malformed is not None:
            reason, nxt = "malformed", None
        else:
            nxt, reason = self._move(node.state, p, prepend=False)
            if nxt is not None and not self._annotation_ok(p, nxt):
                reason, nxt = "state_mismatch", None
        if nxt is not None:
            self.stack.append(_Node(_level_below(node.level, len(nxt)), nxt))
            self.moves_made.add((p.a, p.op, p.b, p.c))
        out.append(self._record(node.state, p, nxt, reason))
        return reason


# ---- one episode of text -----------------------------------------------------------------------


@dataclass
class StepResult:
    """What one piece of text did: completed lines, transitions, reward and episode end."""

    lines: list[LineCheck] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False


class TextEpisode:
    """One episode's generated text: lines go to a :class:`LineChecker`, the end goes to the verifier.

    ``feed(text)`` appends text (any chunk: a token, a line, several lines) and checks every
    line it completes. The episode *terminates* when a line holds a final-answer closing tag
    (``</answer>``, ``</Solution>``; the rest of that chunk is ignored) or when :meth:`finish`
    is called (end of the completion, e.g. an EOS token); the reward is then
    ``verify(problem, text).reward``. It is *truncated* (reward 0) when ``max_lines`` lines are
    complete or the text reaches ``max_chars`` characters without a final answer.
    """

    def __init__(
        self, problem: Problem, rules: Rules | None = None, *, max_lines: int | None = None, max_chars: int | None = None
    ) -> None:
        self.problem = problem
        self.rules = rules or problem.rules
        self.checker = LineChecker(problem, self.rules)
        self.max_lines = max_lines
        self.max_chars = max_chars
        self._parts: list[str] = []  # completed lines, with their newlines
        self._partial = ""  # the line being written
        self._complete_chars = 0
        self.num_lines = 0
        self.invalid_lines: list[LineCheck] = []
        self.invalid_steps = 0
        self.verdict: Verdict | None = None
        self.terminated = False
        self.truncated = False

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def text(self) -> str:
        """The generated text consumed so far."""
        return "".join(self._parts) + self._partial

    @property
    def num_chars(self) -> int:
        return self._complete_chars + len(self._partial)

    def _line(self, line: str, res: StepResult) -> bool:
        """Check one completed line; True when it ends the episode."""
        check, transitions = self.checker.check(line)
        self.num_lines += 1
        res.lines.append(check)
        res.transitions.extend(transitions)
        self.invalid_steps += sum(not t["valid"] for t in transitions)
        if not check.valid:
            self.invalid_lines.append(check)
        if final_answer_end(line) >= 0:
            self._end(res, terminated=True)
            return True
        if self.max_lines is not None and self.num_lines >= self.max_lines:
            self._end(res, terminated=False)
            return True
        return False

    def _end(self, res: StepResult, terminated: bool) -> None:
        self.verdict = verify(self.problem, self.text, self.rules)
        self.terminated, self.truncated = terminated, not terminated
        res.terminated, res.truncated = self.terminated, self.truncated
        res.reward = self.verdict.reward if terminated else 0.0

    def feed(self, text: str) -> StepResult:
        """Append ``text`` and check the lines it completes."""
        if self.done:
            raise RuntimeError("the episode has ended; start a new one (reset)")
        res = StepResult()
        cut = self.max_chars is not None and self.num_chars + len(text) >= self.max_chars
        if cut:
            text = text[: self.max_chars - self.num_chars]
        buf, pos = self._partial + text, 0
        self._partial = ""
        while (nl := buf.find("\n", pos)) >= 0:
            self._parts.append(buf[pos : nl + 1])
            self._complete_chars += nl + 1 - pos
            line, pos = buf[pos:nl], nl + 1
            if self._line(line, res):
                return res
        tail = buf[pos:]
        if final_answer_end(tail) >= 0:  # a final answer closed mid-line: that line is complete
            self._parts.append(tail)
            self._complete_chars += len(tail)
            if not self._line(tail, res):
                self._end(res, terminated=True)
            return res
        self._partial = tail
        if cut:
            self._end(res, terminated=False)
        return res

    def truncate(self) -> StepResult:
        """End the episode by a budget kept outside (e.g. a token budget): reward 0."""
        if self.done:
            raise RuntimeError("the episode has ended; start a new one (reset)")
        res = StepResult()
        self._end(res, terminated=False)
        return res

    def finish(self) -> StepResult:
        """The completion ended (EOS): check the last partial line and verify the whole text."""
        if self.done:
            raise RuntimeError("the episode has ended; start a new one (reset)")
        res = StepResult()
        if self._partial:
            tail, self._partial = self._partial, ""
            self._parts.append(tail)
            self._complete_chars += len(tail)
            if self._line(tail, res):
                return res
        self._end(res, terminated=True)
        return res


# ---- replay ------------------------------------------------------------------------------------


@dataclass
class Replay:
    """A finished completion replayed line by line through the text environment's checks.

    ``transitions``, ``invalid_steps``, ``step_rewards`` (one per line, the verdict's reward on
    the last) and ``num_lines`` are what the environment produced in ``"line"`` mode;
    ``verdict`` is :func:`~countdown_gym.verifier.verify` of the text the environment consumed
    (the whole completion unless a final answer or the line budget came first).
    ``invalid_lines`` lists every invalid line (non-move lines included); ``truncated`` is True
    when ``line_budget`` cut the completion.
    """

    transitions: list[dict[str, Any]]
    verdict: Verdict
    invalid_steps: int
    step_rewards: list[float]
    num_lines: int
    invalid_lines: list[LineCheck] = field(default_factory=list)
    truncated: bool = False

    @property
    def reward(self) -> float:
        """The episode's total reward (the sum of ``step_rewards``)."""
        return float(sum(self.step_rewards))


def replay_completion(
    problem: Problem, completion: str, *, rules: Rules | None = None, line_budget: int | None = None
) -> Replay:
    """Replay ``completion`` (the text after the prompt) through the environment's line checks.

    Each line is one ``"line"``-mode step; the completion's end counts as EOS (so a completion
    without a closing tag is still verified). ``line_budget`` truncates after that many lines.

    Example:
        >>> from countdown_gym import Problem, dfs_trace
        >>> p = Problem((21, 16, 17, 26), 46)
        >>> r = replay_completion(p, dfs_trace(p))
        >>> r.invalid_steps, r.verdict.correct
        (0, True)
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"replay_completion needs a Problem, got {type(problem).__name__}")
    if not isinstance(completion, str):
        raise TypeError(f"completion must be a str, got {type(completion).__name__}")
    if rules is not None and not isinstance(rules, Rules):
        raise TypeError(f"rules must be a Rules or None, got {type(rules).__name__}")
    _check_budget("line_budget", line_budget)
    ep = TextEpisode(problem, rules, max_lines=line_budget)
    transitions: list[dict[str, Any]] = []
    rewards: list[float] = []
    pieces = completion.split("\n")
    tail = pieces.pop()  # the text after the last newline ("" when the completion ends with one)
    for piece in pieces:
        res = ep.feed(piece + "\n")
        transitions.extend(res.transitions)
        rewards.append(res.reward)
        if ep.done:
            break
    if not ep.done:  # the last line (if unterminated) and the end of the completion: one step
        res = ep.feed(tail) if tail else StepResult()
        if not ep.done:
            more = ep.finish()
            res.transitions += more.transitions
            res.reward += more.reward
        transitions.extend(res.transitions)
        if tail or not rewards:
            rewards.append(res.reward)
        else:
            rewards[-1] += res.reward
    assert ep.verdict is not None
    return Replay(transitions, ep.verdict, ep.invalid_steps, rewards, ep.num_lines, list(ep.invalid_lines), ep.truncated)


def _check_budget(name: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int{' or None' if allow_none else ''}, got {value!r}")


def _render_line(line_no: int, text: str, invalid_reason: str | None) -> str:
    mark = "" if invalid_reason is None else f"   <-- invalid: {invalid_reason}"
    return f"{line_no:4d} | {text}{mark}"


# ---- tokenizers ----------------------------------------------------------------------------------


class _Tokenizer:
    """One interface over a ``transformers`` tokenizer and a raw ``tokenizers.Tokenizer``."""

    def __init__(self, tok: Any, eos_token_id: int | None) -> None:
        if not (hasattr(tok, "encode") and hasattr(tok, "decode")):
            raise ValueError(f"tokenizer must be a Hugging Face tokenizer (with encode/decode), got {type(tok).__name__}")
        self.tok = tok
        self.raw = hasattr(tok, "get_vocab_size") and not hasattr(tok, "convert_ids_to_tokens")
        self.vocab_size = int(tok.get_vocab_size(with_added_tokens=True) if self.raw else len(tok))
        if eos_token_id is None and not self.raw:
            eos_token_id = getattr(tok, "eos_token_id", None)
        self.eos_token_id = eos_token_id
        # transformers' decode may end with ``clean_up_tokenization`` (" ." -> ".", " 's" -> "'s", ...)
        # on the whole text; it is applied to the stream separately (see _Detokenizer)
        self.cleanup = None
        if not self.raw and getattr(tok, "clean_up_tokenization_spaces", False):
            self.cleanup = tok.clean_up_tokenization
            probe = self.encode("a . b ' s")
            plain = self.decode(probe, cleanup=False)
            if " ." in plain and tok.decode(probe, skip_special_tokens=True) == plain:  # e.g. skipped for BPE models
                self.cleanup = None

    def encode(self, text: str) -> list[int]:
        if self.raw:
            return list(self.tok.encode(text, add_special_tokens=False).ids)
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int], cleanup: bool = True) -> str:
        if self.raw or cleanup:
            return self.tok.decode(list(ids), skip_special_tokens=True)
        return self.tok.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


class _Detokenizer:
    """Append-only decoding of a token stream (the incremental scheme of common LLM servers).

    Each new token is decoded together with a few tokens before it (so byte-level BPE pieces
    and SentencePiece spaces come out as in a full decode); text ending in U+FFFD (an
    incomplete UTF-8 character) is held back until a later token completes it. The tokenizer's
    ``clean_up_tokenization`` (if its decode applies it) runs on the decoded stream; it only
    drops a space before punctuation or a contraction (at most 4 characters, never across a
    newline), so text within 3 characters after a space is held back until it can no longer change.
    """

    def __init__(self, tok: _Tokenizer) -> None:
        self.tok = tok
        self.ids: list[int] = []
        self.prefix = 0  # decode window start
        self.read = 0  # tokens before this index are released
        self.pending = ""  # decoded text held back from the clean-up

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        return self._clean(self._release(final=False), final=False)

    def flush(self) -> str:
        return self._clean(self._release(final=True), final=True)

    def _release(self, final: bool) -> str:
        before = self.tok.decode(self.ids[self.prefix : self.read], cleanup=False)
        text = self.tok.decode(self.ids[self.prefix :], cleanup=False)
        if len(text) <= len(before) or (text.endswith("\ufffd") and not final) or not text.startswith(before):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return text[len(before) :]

    def _clean(self, text: str, final: bool) -> str:
        if self.tok.cleanup is None:
            return text
        text = self.pending + text
        cut = len(text)
        while not final and text[cut - 1 : cut] != "\n" and " " in text[max(cut - 3, 0) : cut]:
            cut = text.rindex(" ", 0, cut)
        self.pending = text[cut:]
        return self.tok.cleanup(text[:cut])


# ---- the environment -------------------------------------------------------------------------------


class CountdownTextEnv(gym.Env):
    """Countdown as text generation: one puzzle per episode, the action extends the completion.

    ## Description
    The policy writes reasoning text after a prompt (LongProc, TinyZero or compact style). Every
    completed line that states a move (LongProc ``Try`` lines, plain ``a op b = c`` lines,
    compact ``a+b=c [..]`` lines; grammar in :mod:`countdown_gym.text_format`) is checked
    against the search tree actually reachable so far: operands must be in the state the line
    branches from (LongProc indentation and compact depth may backtrack; plain lines apply in
    sequence, inside ``<Solution>`` from the initial numbers), :meth:`Rules.check` must allow the
    move, the written result must be exact, and every claim on the line (current number set,
    numbers left, target, ``Evaluate``, ``### Current State``) must be true. A wrong or
    hallucinated line is flagged, never trusted: the tracked state does not advance, and lines
    continuing below it are invalid too (``parent_invalid``).

    ## Action space
    Chosen by ``action_mode``:

    * ``"line"`` (default): ``Text(max_line_chars)`` without newlines; the env appends ``"\\n"``
      (one trailing ``"\\n"`` in the action is accepted and dropped).
    * ``"token_str"``: ``Text(max_token_chars, min_length=1)``: a piece of text (one token's
      text) appended verbatim.
    * ``"token"``: ``Discrete(vocab_size)`` token ids; needs ``tokenizer``. Ids are decoded
      append-only (see ``docs/text_env.md``); the tokenizer's EOS id ends the episode.

    Any ``str`` action is accepted in the text modes; characters outside :data:`CHARSET` are
    kept in the completion and shown as U+FFFD in the observation.

    ## Observation space
    Without a tokenizer: ``Text(max_prompt_chars + max_completion_chars, charset=CHARSET)``
    holding prompt + generated text. With a tokenizer: ``Dict({"text": <that Text>,
    "token_ids": Sequence(Discrete(vocab_size), stack=True)})``; ``token_ids`` is the prompt's
    encoding followed by the generated ids (in ``"token"`` mode the actions themselves, in the
    text modes each action's encoding, appended chunk by chunk).

    ## Rewards
    Sparse: 0 on every step, and on the terminating step
    ``verify(problem, completion, rules).reward`` (1.0 for a correct final answer, else 0.0).
    Dense terms come from the wrappers in :mod:`countdown_gym.wrappers`, which read
    ``info["transitions"]``.

    ## Starting state
    A problem from the problem source (``preset`` / ``split`` / ``config`` / ``problems``, see
    :mod:`countdown_gym.envs.problem_source`), or ``reset(options={"problem": ...})``; the
    observation is its prompt.

    ## Episode end
    *Terminated* when a completed line holds ``</answer>`` or ``</Solution>`` (any case variant
    the verifier accepts), or on the EOS token in ``"token"`` mode. *Truncated* (reward 0) when
    ``max_lines`` lines are complete, ``max_tokens`` tokens were generated (token ids with a
    tokenizer, else ``token_str`` actions), or the completion reaches ``max_completion_chars``.

    ## Info
    ``transitions`` (one record per move line completed this step, shape in
    ``docs/DESIGN.md`` plus ``line_no``), ``lines`` (every line completed this step: ``line_no``,
    ``text``, ``kind``, ``valid``, ``reason``), ``invalid_lines`` (the invalid ones),
    ``num_lines``, ``num_invalid_lines``, ``invalid_steps``, ``num_tokens``, ``state`` (the
    tracked number set), ``problem``, ``prompt_style``; at the end ``verdict`` and ``is_success``.

    ## Arguments
    * ``preset``, ``split``, ``config``, ``problems``, ``rules``: the problem source; or ``curriculum``, a
      :class:`~countdown_gym.curriculum.Curriculum` (each finished episode is reported back to it).
    * ``prompt``: ``"longproc"`` (default), ``"tinyzero"`` or ``"compact"``;
      ``prompt_kwargs``: options of the LongProc prompt (``current_state``, ``example``).
    * ``action_mode``: ``"line"``, ``"token_str"`` or ``"token"``; ``tokenizer``: any Hugging
      Face tokenizer (``transformers`` or ``tokenizers``); ``eos_token_id`` overrides its EOS.
    * ``max_lines`` (2048), ``max_tokens`` (None), ``max_completion_chars`` (131072),
      ``max_prompt_chars`` (16384), ``max_line_chars`` (4096), ``max_token_chars`` (64).
    * ``render_mode``: ``"ansi"`` (``render()`` returns the numbered completion, invalid lines
      marked) or ``"human"`` (each step prints the lines it completed).
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(
        self,
        preset: str | None = None,
        *,
        split: str | None = None,
        config: GeneratorConfig | None = None,
        problems: Sequence[ProblemLike] | None = None,
        rules: Rules | str | None = None,
        curriculum: Curriculum | None = None,
        prompt: str = "longproc",
        prompt_kwargs: dict[str, Any] | None = None,
        action_mode: str = "line",
        tokenizer: Any = None,
        eos_token_id: int | None = None,
        max_lines: int | None = 2048,
        max_tokens: int | None = None,
        max_completion_chars: int = 131072,
        max_prompt_chars: int = 16384,
        max_line_chars: int = 4096,
        max_token_chars: int = 64,
        render_mode: str | None = None,
    ) -> None:
        if prompt not in PROMPT_STYLES:
            raise ValueError(f"prompt must be one of {list(PROMPT_STYLES)}, got {prompt!r}")
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {list(ACTION_MODES)}, got {action_mode!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if action_mode == "token" and tokenizer is None:
            raise ValueError("action_mode='token' needs a tokenizer (a Hugging Face tokenizer object)")
        if max_tokens is not None and action_mode == "line" and tokenizer is None:
            raise ValueError("max_tokens in action_mode='line' needs a tokenizer to count tokens; use max_lines")
        for name, value, allow_none in (
            ("max_lines", max_lines, True),
            ("max_tokens", max_tokens, True),
            ("max_completion_chars", max_completion_chars, False),
            ("max_prompt_chars", max_prompt_chars, False),
            ("max_line_chars", max_line_chars, False),
            ("max_token_chars", max_token_chars, False),
        ):
            _check_budget(name, value, allow_none)
        if prompt_kwargs is not None and (prompt != "longproc" or not isinstance(prompt_kwargs, dict)):
            raise ValueError("prompt_kwargs (a dict) is only for prompt='longproc'")
        unknown = set(prompt_kwargs or {}) - {"current_state", "example"}
        if unknown:
            raise ValueError(f"unknown prompt_kwargs {sorted(unknown)}; the LongProc prompt takes 'current_state' and 'example'")
        example = (prompt_kwargs or {}).get("example")
        if example is not None and not isinstance(example, Problem):
            raise ValueError(f"prompt_kwargs['example'] must be a Problem, got {type(example).__name__} {example!r:.80}")
        self.source = make_problem_source(preset=preset, config=config, rules=rules, split=split, problems=problems,
                                          curriculum=curriculum)
        self.rules = self.source.rules
        self.prompt_style = prompt
        self.prompt_kwargs = dict(prompt_kwargs or {})
        self.action_mode = action_mode
        if eos_token_id is not None and tokenizer is None:
            raise ValueError("eos_token_id needs a tokenizer")
        self.tokenizer = None if tokenizer is None else _Tokenizer(tokenizer, eos_token_id)
        eos = None if self.tokenizer is None else self.tokenizer.eos_token_id
        if eos is not None and (isinstance(eos, bool) or not isinstance(eos, (int, np.integer)) or not 0 <= eos < self.tokenizer.vocab_size):
            raise ValueError(f"eos_token_id must be an int in 0..{self.tokenizer.vocab_size - 1}, got {eos!r}")
        self.max_lines, self.max_tokens = max_lines, max_tokens
        self.max_completion_chars, self.max_prompt_chars = max_completion_chars, max_prompt_chars
        self.render_mode = render_mode

        text_space = spaces.Text(max_length=max_prompt_chars + max_completion_chars, charset=CHARSET)
        if self.tokenizer is None:
            self.observation_space = text_space
        else:
            ids = spaces.Sequence(spaces.Discrete(self.tokenizer.vocab_size), stack=True)
            self.observation_space = spaces.Dict({"text": text_space, "token_ids": ids})
        if action_mode == "line":
            self.action_space = spaces.Text(max_length=max_line_chars, min_length=0, charset=CHARSET.replace("\n", ""))
        elif action_mode == "token_str":
            self.action_space = spaces.Text(max_length=max_token_chars, min_length=1, charset=CHARSET)
        else:
            self.action_space = spaces.Discrete(self.tokenizer.vocab_size)

        self.problem: Problem | None = None
        self.prompt = ""
        self.episode: TextEpisode | None = None
        self._obs_prompt = ""
        self._obs_completion = ""
        self._ids = np.zeros(0, dtype=np.int64)  # prompt + generated token ids (first _num_ids)
        self._num_ids = 0
        self._detok: _Detokenizer | None = None
        self.num_tokens = 0

    # -- gymnasium API --
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        problem = self.source.reset_option(options) or self.source.sample(self.np_random)
        prompt = build_prompt(problem, self.prompt_style, **self.prompt_kwargs)
        if len(prompt) > self.max_prompt_chars:  # refused before any state changes
            raise ValueError(
                f"the prompt of {problem} has {len(prompt)} characters, more than max_prompt_chars={self.max_prompt_chars}"
            )
        self.problem, self.prompt = problem, prompt
        self.episode = TextEpisode(self.problem, self.rules, max_lines=self.max_lines, max_chars=self.max_completion_chars)
        self._obs_prompt = sanitize(prompt)
        self._obs_completion = ""
        self.num_tokens = 0
        if self.tokenizer is not None:
            prompt_ids = self.tokenizer.encode(prompt)
            self._ids = np.zeros(max(1024, 2 * len(prompt_ids)), dtype=np.int64)
            self._num_ids = 0
            self._append_ids(prompt_ids)
            self._detok = _Detokenizer(self.tokenizer)
        return self._obs(), self._info(StepResult())

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        if self.episode.done:
            raise RuntimeError("the episode has ended; call reset() before step()")
        text, eos = self._action_text(action)
        res = self.episode.feed(text) if text else StepResult()
        if not self.episode.done:
            if eos:
                more = self.episode.finish()
                res.lines += more.lines
                res.transitions += more.transitions
                res.reward, res.terminated, res.truncated = more.reward, more.terminated, more.truncated
            elif self.max_tokens is not None and self.num_tokens >= self.max_tokens:
                res.truncated = self.episode.truncate().truncated
        if self.episode.done:  # the episode may have ignored text after its final answer
            self._obs_completion = sanitize(self.episode.text)
        else:
            self._obs_completion += sanitize(text)
        obs, info = self._obs(), self._info(res)
        if self.episode.done:
            self.source.episode_end(self.episode.problem, bool(info.get("is_success")))
        if self.render_mode == "human":  # each step prints the lines it completed
            for c in res.lines:
                print(_render_line(c.line_no, c.text, None if c.valid else c.reason))
            if self.episode.done:
                print(self._status())
        return obs, float(res.reward), res.terminated, res.truncated, info

    def _action_text(self, action: Any) -> tuple[str, bool]:
        """The text an action appends, and whether it is the EOS token."""
        tok = self.tokenizer
        if self.action_mode == "token":
            if isinstance(action, np.ndarray) and action.size == 1:  # 0-d or shape (1,), as Countdown-v0 takes
                action = action.reshape(()).item()
            if isinstance(action, bool) or not isinstance(action, (int, np.integer)) or not 0 <= action < tok.vocab_size:
                raise ValueError(f"a token action must be an int in 0..{tok.vocab_size - 1}, got {action!r}")
            action = int(action)
            self.num_tokens += 1
            self._append_ids([action])
            if tok.eos_token_id is not None and action == tok.eos_token_id:
                return self._detok.flush(), True
            if self.max_tokens is not None and self.num_tokens >= self.max_tokens:  # the last token: no text held back
                return self._detok.push(action) + self._detok.flush(), False
            return self._detok.push(action), False
        if not isinstance(action, str):
            raise ValueError(f"a {self.action_mode!r} action must be a str, got {type(action).__name__} {action!r:.80}")
        if self.action_mode == "line":
            if action.endswith("\n"):
                action = action[:-1]
            if "\n" in action:
                raise ValueError(f"a 'line' action must be one line (no newline inside), got {action!r:.80}")
            action += "\n"
        if tok is not None:
            ids = tok.encode(action)
            self._append_ids(ids)
            self.num_tokens += len(ids)
        elif self.action_mode == "token_str":
            self.num_tokens += 1
        return action, False

    def _append_ids(self, ids: Sequence[int]) -> None:
        n = self._num_ids + len(ids)
        if n > len(self._ids):
            grown = np.zeros(max(n, 2 * len(self._ids)), dtype=np.int64)
            grown[: self._num_ids] = self._ids[: self._num_ids]
            self._ids = grown
        self._ids[self._num_ids : n] = ids
        self._num_ids = n

    def _obs(self) -> Any:
        text = self._obs_prompt + self._obs_completion
        if self.tokenizer is None:
            return text
        return {"text": text, "token_ids": self._ids[: self._num_ids].copy()}

    def _info(self, res: StepResult) -> dict[str, Any]:
        ep = self.episode
        info: dict[str, Any] = {
            "transitions": res.transitions,
            "lines": [c.to_dict() for c in res.lines],
            "invalid_lines": [c.to_dict() for c in res.lines if not c.valid],
            "num_lines": ep.num_lines,
            "num_invalid_lines": len(ep.invalid_lines),
            "invalid_steps": ep.invalid_steps,
            "num_tokens": self.num_tokens,
            "state": ep.checker.state,
            "problem": self.problem,
            "prompt_style": self.prompt_style,
        }
        if ep.done:
            info["verdict"] = ep.verdict
            info["is_success"] = bool(ep.verdict is not None and ep.verdict.correct and ep.terminated)
        return info

    @property
    def completion(self) -> str:
        """The generated text of the current episode (exact, not sanitized)."""
        return "" if self.episode is None else self.episode.text

    def _status(self) -> str:
        ep = self.episode
        state = "[" + ", ".join(format_number(x) for x in ep.checker.state) + "]"
        status = f"lines={ep.num_lines} invalid_steps={ep.invalid_steps} state={state}"
        if ep.done:
            status += f" | {'terminated' if ep.terminated else 'truncated'}: {ep.verdict.reason}"
        return status

    def _render_text(self) -> str:
        ep = self.episode
        if ep is None:
            return "(call reset() first)"
        p = self.problem
        head = f"Countdown {format_list(p.numbers)} -> {p.target} ({self.rules.name} rules, {self.prompt_style} prompt)"
        bad = {c.line_no: c.reason for c in ep.invalid_lines}
        lines = ep.text.split("\n")
        if lines and not lines[-1]:
            lines.pop()
        body = [_render_line(k, line, bad.get(k)) for k, line in enumerate(lines)]
        return "\n".join([head, *body, self._status()])

    def render(self) -> str | None:
        """The prompt and the checked lines as text (``"ansi"``), or print them (``"human"``)."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='ansi' or 'human'")
            return None
        if self.render_mode == "ansi":
            return self._render_text()
        print(self._render_text())
        return None
