"""Reasoning-line grammar and prompt templates: the one home of every text form the text env reads.

:func:`parse_line` classifies one line of generated text. The forms (``docs/text_env.md`` has
examples of each):

* LongProc DFS lines (what :func:`countdown_gym.game.trace.dfs_trace` writes): ``Initial number set``,
  ``Pick two numbers``, ``Try a op b = c. ...`` with its outcome (``Add c to the number set.
  Current number set: [..], target: T. Options ...``, ``Evaluate c == T, target found!``,
  ``Evaluate c != T, drop this branch.``, ``... is a decimal``, ``... exceeds the maximum
  intermediate result``, ``... is not positive``, ``(invalid operation)``); indentation
  ``" " * level + "|- "``; an optional ``### Current State: [..]`` annotation on any line.
* Trace-back lines: ``Final step: a op b = c``, ``The step before: ...``, ``The first step: ...``.
* Plain equations ``a op b = c`` (spaces around the operator and ``=``; optional ``Step 1:``,
  ``1.`` or bullet prefix): ``<Solution>`` lines and free reasoning.
* Compact search lines (``docs/DESIGN.md``): ``<depth spaces>a<op>b=c`` without inner spaces,
  optionally `` [n1,n2,...]`` (the number set after the move). Negative numbers are written
  ``-7``; a non-integer operand or result is written in parentheses, ``(3/2)``.
* Tags: ``<Solution>``, ``</Solution>``, ``<answer>...</answer>``, ``<think>``, ``</think>``.

Everything else is free text. Numbers are exact: ``int`` or :class:`fractions.Fraction`
(``p/q``); a decimal such as ``4.6`` appears only in LongProc's "is a decimal" lines and is
kept as its exact :class:`~fractions.Fraction`.

Prompts: :func:`build_prompt` with style ``"longproc"`` (rules, procedure and an in-context
example made by :func:`~countdown_gym.game.trace.dfs_trace`), ``"tinyzero"`` (``<think>`` /
``<answer>``) or ``"compact"`` (one short line, for small models).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from countdown_gym.game.expression import MAX_NUMBER_DIGITS, parse_number_literal
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, Rules, format_number, normalize
from countdown_gym.game.trace import dfs_trace, format_list

# ---- character set -------------------------------------------------------------------------

REPLACEMENT_CHAR = "\ufffd"
"""Stands for any generated character outside :data:`CHARSET` in an observation."""

CHARSET: str = (
    string.digits
    + string.ascii_letters
    + string.punctuation
    + " \n\t"
    + "".join(chr(c) for c in range(0xA1, 0x100) if c != 0xAD)  # Latin-1 letters and signs (no soft hyphen)
    + "\u2212\u2013\u2014\u2260\u2248\u2264\u2265\u2192\u2190\u2026\u2018\u2019\u201c\u201d\u2713\u2717"
    + REPLACEMENT_CHAR
)
"""Characters of the text spaces: printable ASCII, newline, tab, the printable Latin-1 supplement
(``é ü × ÷ · ° ...``), a few maths / typography symbols (``− – — ≠ ≈ ≤ ≥ → ← … ‘ ’ “ ” ✓ ✗``)
and U+FFFD."""

_CHARSET_SET = frozenset(CHARSET)


def sanitize(text: str) -> str:
    """``text`` with every character outside :data:`CHARSET` replaced by U+FFFD."""
    if _CHARSET_SET.issuperset(text):  # one C-level pass: the common case, on every reply the environments send
        return text
    return "".join(c if c in _CHARSET_SET else REPLACEMENT_CHAR for c in text)


# ---- numbers -------------------------------------------------------------------------------

_N = r"-?[0-9]+(?:/[0-9]+)?"
_DEC = r"-?[0-9]+\.[0-9]+"
_NC = r"\(-?[0-9]+(?:/[0-9]+)?\)|-?[0-9]+"  # compact operand: bare integer or parenthesised
_LIST = rf"(?:{_N}(?:\s*,\s*{_N})*)?"
_RE_INT = re.compile(r"-?[0-9]+")
_RE_RATIONAL = re.compile(r"-?[0-9]+/[0-9]+")
_RE_DECIMAL = re.compile(_DEC)


def _int(digits: str) -> int:
    """A signed ASCII integer literal, held to the verifier's literal rules (no leading zero, at
    most ``MAX_NUMBER_DIGITS`` digits): ``04`` in a move is as invalid as in an answer."""
    body = digits[1:] if digits[:1] == "-" else digits
    if body.isascii() and body.isdigit() and len(body) <= MAX_NUMBER_DIGITS and (body[0] != "0" or len(body) == 1):
        return int(digits)  # the common case, within the rules checked below
    sign = -1 if digits.startswith("-") else 1
    return sign * parse_number_literal(digits.lstrip("-"))


def parse_number(token: str) -> Number:
    """``"37"`` -> 37, ``"-3"`` -> -3, ``"3/2"`` or ``"(3/2)"`` -> Fraction(3, 2), ``"4.6"`` -> Fraction(23, 5).

    Raises ``ValueError`` for anything else (including a zero denominator, a leading zero such
    as ``04``, and integers longer than the verifier's literal limit).
    """
    tok = token.strip()
    if tok.isascii() and tok.isdigit():
        return _int(tok)
    if tok.startswith("(") and tok.endswith(")"):
        tok = tok[1:-1].strip()
    if _RE_INT.fullmatch(tok):
        return _int(tok)
    if _RE_RATIONAL.fullmatch(tok):
        p, q = (_int(x) for x in tok.split("/"))
        if q == 0:
            raise ValueError(f"number {token!r} has a zero denominator")
        return normalize(Fraction(p, q))
    if _RE_DECIMAL.fullmatch(tok):
        _int(tok.split(".")[0])
        return normalize(Fraction(tok))
    raise ValueError(f"not a number: {token!r}")


def parse_number_list(text: str) -> tuple[Number, ...]:
    """``"76, 3, 17"`` -> ``(76, 3, 17)``; an empty string -> ``()``."""
    text = text.strip()
    return tuple(parse_number(t) for t in text.split(",")) if text else ()


def _pairs(text: str) -> tuple[tuple[Number, Number], ...]:
    return tuple((parse_number(a), parse_number(b)) for a, b in re.findall(rf"\(({_N}),\s*({_N})\)", text))


# ---- parsed lines --------------------------------------------------------------------------

LINE_KINDS: tuple[str, ...] = (
    "blank", "text", "header", "initial", "pick", "try", "traceback", "equation", "compact",
    "solution_open", "solution_close", "answer", "think",
)
"""Every ``ParsedLine.kind``."""

TRY_OUTCOMES: tuple[str, ...] = ("add", "found", "missed", "decimal", "exceeds", "not_positive", "invalid_op", "bare")
"""What a ``Try`` line says happened: ``add`` (the search goes into the new set), ``found`` /
``missed`` (last number compared with the target), four kinds of pruning, or ``bare`` (no
outcome written)."""

DROP_OUTCOMES: frozenset[str] = frozenset({"decimal", "exceeds", "not_positive", "invalid_op"})


@dataclass(frozen=True)
class ParsedLine:
    """One line of generated text, classified; claims are kept as written, nothing is checked.

    Attributes:
        kind: One of :data:`LINE_KINDS`.
        indent: Leading spaces: the LongProc level of ``pick`` / ``try`` lines, the depth of
            ``compact`` lines.
        a, op, b, c: The move a ``pick`` (``a``, ``b``), ``try``, ``traceback``, ``equation`` or
            ``compact`` line states; ``c`` is ``None`` when no result is written.
        outcome: For ``try`` lines, one of :data:`TRY_OUTCOMES`.
        numbers: The number set the line claims: ``initial`` numbers, a ``pick``'s numbers left,
            a ``try``'s ``Current number set``, a ``compact`` line's ``[..]``; ``None`` if absent.
        target: The target the line claims, if any.
        evaluated: For ``found`` / ``missed``: the value written after ``Evaluate``.
        added: For ``add``: the value written after ``Add``.
        options: The ``Options for choosing two numbers`` pairs, if written.
        annotation: The ``### Current State: [..]`` set, if written.
        malformed: Why a claim could not be read (``None`` when every claim parsed).
    """

    kind: str
    indent: int = 0
    a: Number | None = None
    op: str | None = None
    b: Number | None = None
    c: Number | None = None
    outcome: str | None = None
    numbers: tuple[Number, ...] | None = None
    target: int | None = None
    evaluated: Number | None = None
    added: Number | None = None
    options: tuple[tuple[Number, Number], ...] | None = None
    annotation: tuple[Number, ...] | None = None
    malformed: str | None = None

    @property
    def states_move(self) -> bool:
        """Whether the line states an arithmetic move (a ``try``, ``equation`` or ``compact`` line)."""
        return self.kind in ("try", "equation", "compact")


_RE_ANNOT = re.compile(r"\s*### Current State: \[(?P<set>[^\]]*)\]\s*$")
_RE_INIT = re.compile(rf"^Initial number set: \[(?P<nums>{_LIST})\], target: (?P<t>-?[0-9]+)(?P<rest>.*)$")
_RE_PICK = re.compile(
    rf"^(?P<ind> *)(?:\|- )?Pick two numbers \((?P<a>{_N}), (?P<b>{_N})\)"
    rf"(?: \(numbers left: \[(?P<left>{_LIST})\]\))?(?P<rest>.*)$"
)
_RE_TRY = re.compile(
    rf"^(?P<ind> *)(?:\|- )?Try (?P<a>{_N}) (?P<op>[-+*/]) (?P<b>{_N})"
    rf"(?: = (?P<c>{_DEC}|{_N})| (?P<inv>\(invalid operation\)))(?P<rest>.*)$"
)
_RE_ADD = re.compile(rf"Add (?P<x>{_N}) to the number set")
_RE_CUR = re.compile(r"Current number set: \[(?P<set>[^\]]*)\], target: (?P<t>-?[0-9]+)")
_RE_OPTIONS = re.compile(r"Options for choosing two numbers: \[(?P<opts>[^\]]*)\]")
_RE_EVAL = re.compile(rf"Evaluate (?P<v>{_N}) (?P<rel>==|!=) (?P<t>-?[0-9]+)")
_EQ = rf"(?P<a>\(?{_N}\)?)\s+(?P<op>[-+*/])\s+(?P<b>\(?{_N}\)?)\s*=\s*(?P<c>\(?{_N}\)?)"
_RE_TRACEBACK = re.compile(rf"^\s*(?:Final step|The step before|The first step):\s*{_EQ}\s*\.?\s*$")
_RE_EQUATION = re.compile(rf"^\s*(?:(?:Step\s*[0-9]+\s*:|[0-9]+[.)])\s*|[-*\u2022]\s+)?{_EQ}\s*\.?\s*$")
_RE_COMPACT = re.compile(
    rf"^(?P<ind> *)(?P<a>{_NC})(?P<op>[-+*/])(?P<b>{_NC})=(?P<c>{_NC})(?:\s*\[(?P<set>[^\]]*)\])?\s*$"
)
_SOLUTION_OPEN = ("<Solution>", "<solution>", "<SOLUTION>")
_SOLUTION_CLOSE = ("</Solution>", "</solution>", "</SOLUTION>")
_ANSWER_TAGS = ("<answer>", "<Answer>", "<ANSWER>", "</answer>", "</Answer>", "</ANSWER>")


def _claim_list(text: str | None, what: str) -> tuple[tuple[Number, ...] | None, str | None]:
    if text is None:
        return None, None
    try:
        return parse_number_list(text), None
    except ValueError:
        return None, f"unreadable {what}: [{text[:60]}]"


def _parse_try(m: re.Match[str], annotation: tuple[Number, ...] | None, malformed: str | None) -> ParsedLine:
    rest = m["rest"]
    try:
        a, b = parse_number(m["a"]), parse_number(m["b"])
        c = None if m["c"] is None else parse_number(m["c"])
    except ValueError as e:  # an unreadable number in the move (04, 3/0): an invalid move
        return ParsedLine("try", len(m["ind"]), op=m["op"], outcome="bare", annotation=annotation, malformed=str(e))
    added = evaluated = target = None
    numbers = options = None
    if m["inv"] is not None:
        outcome = "invalid_op"
    elif "is a decimal" in rest:
        outcome = "decimal"
    elif "exceeds the maximum" in rest:
        outcome = "exceeds"
    elif "is not positive" in rest:
        outcome = "not_positive"
    elif (e := _RE_EVAL.search(rest)) is not None:
        outcome = "found" if e["rel"] == "==" else "missed"
        evaluated, target = parse_number(e["v"]), int(e["t"])
    elif (ad := _RE_ADD.search(rest)) is not None:
        outcome = "add"
        added = parse_number(ad["x"])
        cur = _RE_CUR.search(rest)
        if cur is not None:
            numbers, bad = _claim_list(cur["set"], "number set")
            malformed = malformed or bad
            target = int(cur["t"])
        elif "Current number set" in rest:
            malformed = malformed or "unreadable 'Current number set' claim"
        opt = _RE_OPTIONS.search(rest)
        if opt is not None:
            try:
                options = _pairs(opt["opts"])
            except ValueError:
                malformed = malformed or "unreadable options"
    else:
        outcome = "bare"
    return ParsedLine(
        "try", len(m["ind"]), a, m["op"], b, c, outcome, numbers, target, evaluated, added, options,
        annotation, malformed,
    )


def _eq_line(kind: str, m: re.Match[str], indent: int = 0, numbers=None, annotation=None, malformed=None) -> ParsedLine:
    try:
        a, b, c = parse_number(m["a"]), parse_number(m["b"]), parse_number(m["c"])
    except ValueError as e:  # a move with an unreadable number (04, 3/0): an invalid move, not free text
        return ParsedLine(kind, indent, op=m["op"], numbers=numbers, annotation=annotation, malformed=str(e))
    return ParsedLine(kind, indent, a, m["op"], b, c, numbers=numbers, annotation=annotation, malformed=malformed)


def parse_line(line: str) -> ParsedLine:
    """Classify one line (without its newline); never raises. See the module docstring."""
    line = line.rstrip("\r\n")
    if not line.strip():
        return ParsedLine("blank")
    annotation = malformed = None
    if "### Current State" in line:
        am = _RE_ANNOT.search(line)
        if am is not None:
            annotation, malformed = _claim_list(am["set"], "'### Current State' annotation")
            line = line[: am.start()]
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    try:
        return _classify(line, body, indent, annotation, malformed)
    except ValueError as e:  # a number token that matched a pattern but is not a number (p/0)
        return ParsedLine("text", indent, annotation=annotation, malformed=str(e))


def _classify(line: str, body: str, indent: int, annotation, malformed) -> ParsedLine:
    first = body[:1]
    if first in ("|", "T", "P") and ("Try " in body or "Pick " in body):
        m = _RE_TRY.match(line)
        if m is not None:
            return _parse_try(m, annotation, malformed)
        m = _RE_PICK.match(line)
        if m is not None:
            left, bad = _claim_list(m["left"], "numbers left")
            return ParsedLine(
                "pick", len(m["ind"]), parse_number(m["a"]), None, parse_number(m["b"]), numbers=left,
                annotation=annotation, malformed=malformed or bad,
            )
    if body.startswith("Initial number set"):
        m = _RE_INIT.match(body)
        if m is not None:
            opt = _RE_OPTIONS.search(m["rest"])
            return ParsedLine(
                "initial", indent, numbers=parse_number_list(m["nums"]), target=int(m["t"]),
                options=None if opt is None else _pairs(opt["opts"]), annotation=annotation, malformed=malformed,
            )
    if "<" in body:
        stripped = body.strip()
        if stripped in _SOLUTION_OPEN:
            return ParsedLine("solution_open", annotation=annotation, malformed=malformed)
        if stripped in _SOLUTION_CLOSE:
            return ParsedLine("solution_close", annotation=annotation, malformed=malformed)
        if any(t in body for t in _ANSWER_TAGS):
            return ParsedLine("answer", annotation=annotation, malformed=malformed)
        if "<think>" in body or "</think>" in body:
            return ParsedLine("think", annotation=annotation, malformed=malformed)
    if first == "#":
        return ParsedLine("header", annotation=annotation, malformed=malformed)
    if "=" in body:
        m = _RE_COMPACT.match(line)
        if m is not None:
            numbers, bad = _claim_list(m["set"], "number set")
            return _eq_line("compact", m, len(m["ind"]), numbers, annotation, malformed or bad)
        m = _RE_TRACEBACK.match(line)
        if m is not None:
            return _eq_line("traceback", m, indent, annotation=annotation, malformed=malformed)
        m = _RE_EQUATION.match(line)
        if m is not None:
            return _eq_line("equation", m, indent, annotation=annotation, malformed=malformed)
    return ParsedLine("text", indent, annotation=annotation, malformed=malformed)


# ---- writers -------------------------------------------------------------------------------


def format_equation(a: Number, op: str, b: Number, c: Number) -> str:
    """A plain equation line: ``"21 + 16 = 37"`` (the ``<Solution>`` block's form)."""
    return f"{format_number(a)} {op} {format_number(b)} = {format_number(c)}"


def _compact_number(x: Number) -> str:
    x = normalize(x)
    return str(x) if isinstance(x, int) else f"({format_number(x)})"


def format_compact_line(
    depth: int, a: Number, op: str, b: Number, c: Number, state: Sequence[Number] | None = None
) -> str:
    """A compact search line: ``"  37+17=54 [26,54]"`` (``depth`` leading spaces)."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth must be an int >= 0, got {depth!r}")
    text = " " * depth + f"{_compact_number(a)}{op}{_compact_number(b)}={_compact_number(c)}"
    if state is not None:
        text += " [" + ",".join(format_number(x) for x in state) + "]"
    return text


def format_state_annotation(state: Sequence[Number]) -> str:
    """``" ### Current State: [37, 17, 26]"``: the seed authors' suffix for a line."""
    return f" ### Current State: {format_list(tuple(state))}"


# ---- prompts -------------------------------------------------------------------------------

PROMPT_STYLES: tuple[str, ...] = ("longproc", "tinyzero", "compact")
"""Prompt templates :func:`build_prompt` knows."""

_EXAMPLE_CANDIDATES: tuple[tuple[tuple[int, ...], int], ...] = (
    ((21, 16, 17, 26), 46),
    ((10, 4, 3, 2), 19),
    ((3, 5, 2, 6), 8),
    ((12, 7, 5, 3), 24),
)


def describe_rules(rules: Rules) -> str:
    """The rules in one English paragraph (used by the prompts)."""
    parts = ["Use each of the given numbers exactly once" if rules.use_all else "Use each number at most once"]
    parts.append("combine them with + - * /")
    if rules.integer_only and rules.sign == "positive":
        kind = "a positive integer"
    elif rules.integer_only and rules.sign == "nonnegative":
        kind = "a non-negative integer"
    elif rules.integer_only:
        kind = "an integer"
    elif rules.sign == "positive":
        kind = "a positive number (fractions are allowed)"
    elif rules.sign == "nonnegative":
        kind = "a non-negative number (fractions are allowed)"
    elif rules.value_limit is None:  # nothing to require: say what is allowed
        return ", ".join(parts) + "; intermediate results may be any number (negative numbers and fractions are allowed)."
    else:
        return ", ".join(parts) + (f"; every intermediate result must be less than {rules.value_limit} "
                                   "(negative numbers and fractions are allowed).")
    limit = "" if rules.value_limit is None else f" and less than {rules.value_limit}"
    return ", ".join(parts) + f"; every intermediate result must be {kind}{limit}."


@lru_cache(maxsize=32)
def default_example(rules: Rules, avoid: tuple[tuple[int, ...], int] | None = None) -> Problem:
    """The in-context example of the LongProc prompt: the first fixed candidate solvable under
    ``rules`` (other than ``avoid``, a problem's ``key``)."""
    for numbers, target in _EXAMPLE_CANDIDATES:
        p = Problem(numbers, target, rules)
        if avoid is not None and p.key == avoid:
            continue
        try:
            dfs_trace(p)
        except ValueError:
            continue
        return p
    raise ValueError(f"no built-in in-context example is solvable under rules {rules.name!r}; pass example=")


def _task(problem: Problem) -> str:
    return f"Numbers: {format_list(problem.numbers)}\nTarget: {problem.target}\n"


def longproc_prompt(problem: Problem, *, example: Problem | None = None, current_state: bool = False) -> str:
    """The LongProc-style prompt: rules, the search procedure, one worked example, the task.

    The example's completion is :func:`~countdown_gym.game.trace.dfs_trace` of ``example``
    (default :func:`default_example` under the problem's rules); with ``current_state`` it carries
    ``### Current State`` annotations and the prompt asks for them.
    """
    rules = problem.rules
    if example is None:
        example = default_example(rules, problem.key)
    larger = " Write the larger number first." if rules.integer_only and rules.sign != "any" else ""
    annotate = (
        " End every line of the search with '### Current State: [..]', the number set the search stands on after that line."
        if current_state
        else ""
    )
    return (
        "Countdown: reach the target number by combining the given numbers with arithmetic.\n"
        f"Rules: {describe_rules(rules)}{larger}\n"
        "Search for a solution depth-first and write one line per step, exactly as in the example: pick two "
        "numbers, try the operations in the order + - * /, add each allowed result to the number set and "
        "continue from there; drop a branch that breaks the rules or ends away from the target, and go back "
        "to the last choice." + annotate + " When the target is found, trace the solution back and write it "
        "as a <Solution> block with one line 'a op b = c' per step.\n\n"
        "# Example\n" + _task(example) + dfs_trace(example, rules, current_state=current_state) + "\n"
        "# Task\n" + _task(problem)
    )


def tinyzero_prompt(problem: Problem) -> str:
    """TinyZero's base-model prompt; the completion continues after ``<think>``."""
    numbers = format_list(problem.numbers)
    return (
        "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
        "The assistant first thinks about the reasoning process in the mind and then provides the user with "
        f"the answer.\nUser: Using the numbers {numbers}, create an equation that equals {problem.target}. "
        "You can use basic arithmetic operations (+, -, *, /) and each number can only be used once. "
        "Show your work in <think> </think> tags. And return the final answer in <answer> </answer> tags, "
        "for example <answer> (1 + 2) / 3 </answer>.\nAssistant: Let me solve this step by step.\n<think>"
    )


TINYZERO_SYSTEM = ("You are a helpful assistant. You first thinks about the reasoning process in the mind and then "
                   "provides the user with the answer.")
TINYZERO_ASSISTANT_PREFIX = "Let me solve this step by step.\n<think>"


def chat_messages(problem: Problem, style: str = "longproc", *, prefill: bool = False) -> list[dict[str, str]]:
    """The prompt of ``problem`` as chat messages for an instruction-tuned model.

    ``tinyzero`` follows TinyZero's ``qwen-instruct`` template: its system message and the question as the user
    turn. Other styles: one user message holding :func:`build_prompt`. The messages end with the user's turn, so a
    renderer that opens the assistant turn itself (TRL's ``GRPOTrainer`` and verl render with
    ``add_generation_prompt=True``; verifiers sends them to a chat API) opens it exactly once.

    ``prefill=True`` (``tinyzero`` only) appends TinyZero's started assistant turn
    (:data:`TINYZERO_ASSISTANT_PREFIX`), which only a renderer that *continues* the final message keeps intact
    (``apply_chat_template(..., continue_final_message=True)``, as :func:`render_chat_prompt` does). TRL 1.16's
    ``GRPOTrainer`` does not: it would close that turn and open a second one. For TinyZero's exact pre-filled
    prompt under TRL, pass the text of :func:`render_chat_prompt` as a plain-text ``prompt``.
    """
    if style != "tinyzero":
        return [{"role": "user", "content": build_prompt(problem, style)}]
    question = tinyzero_prompt(problem).split("\nUser: ", 1)[1].split("\nAssistant: ", 1)[0]
    messages = [{"role": "system", "content": TINYZERO_SYSTEM}, {"role": "user", "content": " " + question}]
    if prefill:
        messages.append({"role": "assistant", "content": TINYZERO_ASSISTANT_PREFIX})
    return messages


def render_chat_prompt(problem: Problem, tokenizer: Any, style: str = "tinyzero") -> str:
    """The prompt text a chat model sees: :func:`chat_messages` through ``tokenizer``'s chat template, with the
    assistant turn opened once (``tinyzero``: opened and continued after TinyZero's pre-fill).

    A leading BOS the template writes is left out when the tokenizer adds it itself, so ``tokenizer(text)``
    (what TRL does with a plain-text ``prompt``) holds it once.
    """
    prefill = style == "tinyzero"
    messages = chat_messages(problem, style, prefill=prefill)
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=not prefill,
                                         continue_final_message=prefill)
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos):
        ids = tokenizer("x")["input_ids"]
        if ids and ids[0] == tokenizer.bos_token_id:
            text = text[len(bos):]
    return text


def compact_prompt(problem: Problem) -> str:
    """The one-line prompt for small models: ``"Numbers: [37,14,29,6] Target: 46\\n"``."""
    return "Numbers: [" + ",".join(format_number(x) for x in problem.numbers) + f"] Target: {problem.target}\n"


def build_prompt(problem: Problem, style: str = "longproc", **kwargs: Any) -> str:
    """The prompt of ``problem`` in one of :data:`PROMPT_STYLES` (``kwargs`` go to the style's function)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"build_prompt needs a Problem, got {type(problem).__name__}")
    if style == "longproc":
        return longproc_prompt(problem, **kwargs)
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}; choose one of {list(PROMPT_STYLES)}")
    if kwargs:
        raise TypeError(f"prompt style {style!r} takes no options, got {sorted(kwargs)}")
    return tinyzero_prompt(problem) if style == "tinyzero" else compact_prompt(problem)
