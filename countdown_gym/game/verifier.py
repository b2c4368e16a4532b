"""Final-answer verification, ``verify(problem, completion) -> Verdict``: find the answer (the ``<answer>`` or
``<Solution>`` block closed first, else the last non-empty line), parse it without ``eval``, check every step with
:meth:`Rules.check` and the numbers as an exact multiset. Never raises on a completion; linear in its length.
Reason codes: ``docs/verifier.md``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from countdown_gym.game.expression import (
    MAX_ANSWER_CHARS,
    OPERATOR_ALIASES,
    ExpressionError,
    Move,
    classify_character,
    evaluate,
    literal_limit,
    parse_expression,
    parse_value,
)
from countdown_gym.game.problem import Problem, play_rules
from countdown_gym.game.rules import Number, Rules, describe_value, format_number

REASONS: dict[str, str] = {
    "ok": "correct answer",
    "invalid_input": "the completion is neither a string nor a list of chat messages",
    "no_answer": "no final answer found",
    "unclosed_tag": "the last answer block is opened but never closed",
    "empty_answer": "the answer block is empty",
    "answer_too_long": "the answer exceeds the length limit",
    "too_many_tokens": "the answer has too many tokens",
    "invalid_character": "a character outside digits, + - * / ( ) = and spaces",
    "non_ascii_digit": "a digit that is not ASCII 0-9 (look-alike)",
    "decimal_number": "a decimal point",
    "power_operator": "'**' or '^'",
    "unary_operator": "a unary + or -",
    "implicit_multiplication": "a number or '(' directly after ')' or a number",
    "missing_operator": "two numbers without an operator",
    "missing_operand": "an operator without an operand",
    "empty_parentheses": "'()'",
    "unbalanced_parentheses": "parentheses do not match",
    "too_deep": "parentheses nested too deeply",
    "number_too_large": "a number literal with too many digits",
    "leading_zero": "a number literal with a leading zero",
    "malformed_equation": "a malformed '= N' part",
    "malformed_step": "a <Solution> line that is not 'a op b = c'",
    "foreign_number": "a number that is not in the puzzle",
    "number_reused": "a number used more often than available",
    "division_by_zero": "division by zero",
    "non_integer_result": "a non-integer intermediate result under integer rules",
    "negative_result": "a negative intermediate result under positive or non-negative rules (longproc)",
    "zero_result": "a zero intermediate result under positive rules (longproc_positive, classic; not longproc)",
    "exceeds_limit": "an intermediate result at or above the rules' limit",
    "arithmetic_error": "a stated result differs from the computed one",
    "unused_numbers": "not every number was used (rules require all)",
    "wrong_value": "the answer's value is not the target",
}
"""Every reason code a :class:`Verdict` can carry, with a one-line description."""

ANSWER_TAG = "answer_tag"
SOLUTION_BLOCK = "solution_block"
PLAIN = "plain"


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one completion: ``correct``, ``reason`` (a key of :data:`REASONS`), ``message``, the
    checked ``steps`` ``(a, op, b, result)``, ``answer_format`` (``"answer_tag"``, ``"solution_block"``, ``"plain"``
    or ``None``), the exact ``value`` (``None`` if not computed) and ``numbers_used`` (sorted): an expression's
    every literal, a step list's puzzle numbers before its first error."""

    correct: bool
    reason: str
    message: str
    steps: tuple[Move, ...] = ()
    answer_format: str | None = None
    value: Number | None = None
    numbers_used: tuple[Number, ...] = ()

    @property
    def reward(self) -> float:
        """1.0 for a correct answer, else 0.0."""
        return 1.0 if self.correct else 0.0


_TAG_NAMES = {"answer": ("answer", "Answer", "ANSWER"), "solution": ("solution", "Solution", "SOLUTION")}
_OPEN_TAGS = tuple((kind, f"<{v}>") for kind, vs in _TAG_NAMES.items() for v in vs)
_CLOSE_TAGS = {kind: tuple(f"</{v}>" for v in vs) for kind, vs in _TAG_NAMES.items()}
FINAL_ANSWER_TAGS: tuple[str, ...] = tuple(t for tags in _CLOSE_TAGS.values() for t in tags)
"""The closing tags that end a final answer; the text after the first of them is never read."""
_FINAL_ANSWER_RE = re.compile("|".join(map(re.escape, FINAL_ANSWER_TAGS)))


def final_answer_end(text: str) -> int:
    """Index just past the first of :data:`FINAL_ANSWER_TAGS` in ``text``, or -1 (nothing after it is read)."""
    if "<" not in text:
        return -1
    m = _FINAL_ANSWER_RE.search(text)  # one scan; the leftmost tag is also the one ending first
    return -1 if m is None else m.end()


@dataclass(frozen=True)
class Extraction:
    """Where the final answer is: its ``answer_format`` and ``text``, or a failure reason."""

    answer_format: str | None
    text: str | None
    reason: str = "ok"
    message: str = ""


def extract_answer(completion: str) -> Extraction:
    """Find the final answer in ``completion`` (linear scans). The first closing tag (any case) commits it; before
    it, the last opening tag starts the block, which runs to the closing tag of its kind (never closed:
    ``unclosed_tag``). No tags: the last non-empty line. Only closing tags: ``no_answer``."""
    if not isinstance(completion, str):  # never raises: bytes and chat messages as verify() reads them
        text = completion_text(completion)
        if text is None:
            return Extraction(None, None, "invalid_input", f"the completion must be a str or a list of chat messages, "
                              f"got {describe_value(completion)}")
        completion = text
    cut = final_answer_end(completion)
    if cut >= 0:
        completion = completion[:cut]
    start, kind = -1, ""
    for k, tag in _OPEN_TAGS:
        i = completion.rfind(tag)
        if i > start:
            start, kind, body = i, k, i + len(tag)
    if start >= 0:
        fmt, tag = (ANSWER_TAG, "<answer>") if kind == "answer" else (SOLUTION_BLOCK, "<Solution>")
        ends = [i for i in (completion.find(c, body) for c in _CLOSE_TAGS[kind]) if i >= 0]
        if not ends:
            return Extraction(fmt, None, "unclosed_tag", f"the last {tag} block is never closed")
        return Extraction(fmt, completion[body : min(ends)])
    if cut >= 0:
        return Extraction(None, None, "no_answer", "a closing tag without an opening tag; no answer block")
    stripped = completion.rstrip()
    if not stripped:
        return Extraction(None, None, "no_answer", "the completion is empty")
    return Extraction(PLAIN, stripped.splitlines()[-1])  # lines split as in a <Solution> block (str.splitlines)


def _multiset_problem(used: Counter, available: Counter) -> tuple[str, str] | None:
    for x, k in used.items():
        if available[x] == 0:
            return "foreign_number", f"{format_number(x)} is not one of the puzzle's numbers"
        if k > available[x]:
            return "number_reused", f"{format_number(x)} is used {k} times but available {available[x]} time(s)"
    return None


def _verify_expression(problem: Problem, text: str, rules: Rules, fmt: str) -> Verdict:
    try:
        parsed = parse_expression(text)
    except ExpressionError as e:
        return Verdict(False, e.reason, e.message, answer_format=fmt)
    numbers_used = tuple(sorted(parsed.numbers))
    if numbers_used == tuple(sorted(problem.numbers)):
        left: Counter = Counter()  # the common case: exactly the puzzle's numbers
    else:
        used, available = Counter(parsed.numbers), Counter(problem.numbers)
        bad = _multiset_problem(used, available)
        if bad:
            return Verdict(False, bad[0], bad[1], answer_format=fmt, numbers_used=numbers_used)
        left = available - used
    try:
        value, steps = evaluate(parsed, rules)
    except ExpressionError as e:
        return Verdict(False, e.reason, e.message, answer_format=fmt, numbers_used=numbers_used)
    return _final(problem, rules, fmt, tuple(steps), value, numbers_used, left, parsed.claimed)


def _final(problem: Problem, rules: Rules, fmt: str, steps: tuple[Move, ...], value: Number,
           numbers_used: tuple[Number, ...], left: Counter, claimed: Number | None = None) -> Verdict:
    def no(reason: str, message: str) -> Verdict:
        return Verdict(False, reason, message, steps, fmt, value, numbers_used)

    if claimed is not None and claimed != value:
        return no("arithmetic_error", f"the answer states {format_number(claimed)} but evaluates to {format_number(value)}")
    unused = sum(left.values()) if left else 0
    if not rules.wins(value, 1 + unused, problem.target):  # the answer's value, beside the numbers it left unused
        if not rules.may_leave(unused):
            return no("unused_numbers", f"numbers not used: {sorted(left.elements())}; every number must be used once")
        return no("wrong_value", f"the answer evaluates to {format_number(value)}, not the target {format_number(problem.target)}")
    return Verdict(True, "ok", f"reaches {format_number(problem.target)}", steps, fmt, value, numbers_used)


_NUM_INT = r"(-?[0-9]+)"
_NUM_RAT = r"(-?[0-9]+(?:/[0-9]+)?)"
_STEP_INT = re.compile(rf"{_NUM_INT}[ \t]*([-+*/])[ \t]*{_NUM_INT}[ \t]*=[ \t]*{_NUM_INT}")
_STEP_RAT = re.compile(rf"{_NUM_RAT}[ \t]*([-+*/])[ \t]*{_NUM_RAT}[ \t]*=[ \t]*{_NUM_RAT}")
_ALLOWED_STEP_CHARS = frozenset("0123456789+-*/=() \t")
_ALIAS_TABLE = str.maketrans(OPERATOR_ALIASES)


def _verify_solution_block(problem: Problem, text: str, rules: Rules) -> Verdict:
    fmt = SOLUTION_BLOCK
    if len(text) > MAX_ANSWER_CHARS:
        return Verdict(False, "answer_too_long", f"answer has {len(text)} characters; the limit is {MAX_ANSWER_CHARS}", answer_format=fmt)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return Verdict(False, "empty_answer", "the <Solution> block has no lines", answer_format=fmt)
    pattern = _STEP_INT if rules.integer_only else _STEP_RAT
    initial = Counter(problem.numbers)
    state = Counter(initial)
    seen = set(initial)
    steps: list[Move] = []
    value: Number | None = None

    def no(reason: str, message: str) -> Verdict:
        left = state if value is not None else initial
        used = tuple(sorted((initial - left).elements()))
        return Verdict(False, reason, message, tuple(steps), fmt, value, used)

    for k, line in enumerate(lines, 1):
        line = " ".join(line.translate(_ALIAS_TABLE).split())  # any Unicode space is a space, as in <answer>
        if "^" in line or "**" in line:
            return no("power_operator", f"line {k}: '**' and '^' are not Countdown operations")
        for ch in line:
            if ch not in _ALLOWED_STEP_CHARS:
                reason, message = classify_character(ch)
                if reason == "invalid_character":  # letters, '%', ...: the line is not 'a op b = c'
                    return no("malformed_step", f"line {k} is not 'a op b = c': {message}")
                return no(reason, f"line {k}: {message}")
        m = pattern.fullmatch(line)
        if m is None:
            return no("malformed_step", f"line {k} is not 'a op b = c': {line[:80]!r}")
        try:
            a, b, c = (parse_value(m.group(g), "malformed_step") for g in (1, 3, 4))
        except ExpressionError as e:
            return no(e.reason, f"line {k}: {e.message}")
        op = m.group(2)
        need = Counter((a, b))
        for x, cnt in need.items():
            if state[x] < cnt:
                if x not in seen:
                    return no("foreign_number", f"line {k}: {format_number(x)} is neither a puzzle number nor an earlier result")
                return no("number_reused", f"line {k}: {format_number(x)} is not available any more (already used)")
        r, reason = rules.check(a, op, b)
        if r is None:
            return no(reason, f"line {k}: {format_number(a)} {op} {format_number(b)} is not allowed under the {rules.name} rules ({reason})")
        if r != c:
            return no("arithmetic_error", f"line {k}: {format_number(a)} {op} {format_number(b)} = {format_number(r)}, not {format_number(c)}")
        state -= need
        state[r] += 1
        seen.add(r)
        steps.append((a, op, b, r))
        value = r
    assert value is not None
    final_left = Counter(state)
    final_left[value] -= 1
    used = tuple(sorted((initial - state).elements()))
    return _final(problem, rules, fmt, tuple(steps), value, used, +final_left)


def message_field(obj: Any, name: str) -> Any:
    """``obj[name]`` of a mapping, ``obj.name`` of a message object (OpenAI's or ``verifiers``' pydantic messages)."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def is_chat_messages(value: Any) -> bool:
    """True for a non-empty list or tuple of chat messages: mappings (or message objects) with a string ``role``."""
    if not isinstance(value, (list, tuple)) or not value:
        return False
    for m in value:  # one pass, plain dicts on the fast path (a 1 MB list of messages takes a few ms)
        role = m.get("role") if type(m) is dict else None if isinstance(m, (str, bytes)) else message_field(m, "role")
        if not isinstance(role, str):
            return False
    return True


def message_content(message: Any) -> str:
    """The text of one chat message: its ``content`` string, or its text parts' ``text`` strings joined; any other
    content counts as ``""`` (never ``str()``-ed, so tags inside a dict's repr are not read)."""
    content = message_field(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        texts = []
        for part in content:
            if type(part) is dict:  # the fast path
                kind, text = part.get("type"), part.get("text")
            elif isinstance(part, str):
                continue
            else:
                kind, text = message_field(part, "type"), message_field(part, "text")
            if (kind or "text") == "text" and isinstance(text, str):
                texts.append(text)
        return "".join(texts)
    return ""


def completion_text(completion: str | Sequence[Any]) -> str | None:
    """The text :func:`verify` judges: a string, or the last assistant message's (``""`` if none); else ``None``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (bytes, bytearray)):
        return bytes(completion).decode("utf-8", errors="replace")
    if is_chat_messages(completion):
        for message in reversed(completion):
            if message_field(message, "role") == "assistant":
                return message_content(message)
        return ""
    return None


def verify(problem: Problem, completion: str | Sequence[Any], rules: Rules | None = None) -> Verdict:
    """Check the final answer in ``completion`` (a string, or chat messages: :func:`completion_text`) against
    ``problem`` under ``rules`` (default the problem's). Never raises on a bad completion; a non-``Problem`` or
    non-``Rules`` argument is a ``TypeError``."""
    rules = play_rules(problem, rules, "verify()")
    text = completion_text(completion)
    if text is None:
        return Verdict(False, "invalid_input", f"the completion must be a str or a list of chat messages "
                       f"({{'role': ..., 'content': ...}}), got {describe_value(completion)}")
    if not text and not isinstance(completion, (str, bytes, bytearray)):
        return Verdict(False, "no_answer", "the conversation has no assistant message with text")
    ex = extract_answer(text)
    if ex.text is None:
        return Verdict(False, ex.reason, ex.message, answer_format=ex.answer_format)
    if not ex.text.strip() and ex.answer_format != SOLUTION_BLOCK:
        return Verdict(False, "empty_answer", "the answer block is empty", answer_format=ex.answer_format)
    with literal_limit(problem.literal_digits):
        if ex.answer_format == SOLUTION_BLOCK:
            return _verify_solution_block(problem, ex.text, rules)
        return _verify_expression(problem, ex.text, rules, ex.answer_format)
