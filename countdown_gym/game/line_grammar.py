"""The reasoning-line grammar, the one home of every line form the text env reads (``docs/text_env.md``):
:func:`parse_line` classifies LongProc DFS and trace-back lines, plain equations, compact lines, tags and free text,
with exact ``int`` / ``Fraction`` numbers (a LongProc decimal is kept as its exact ``Fraction``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from countdown_gym.game.expression import parse_number_literal
from countdown_gym.game.rules import Number, describe_value, normalize

_N = r"-?[0-9]+(?:/[0-9]+)?"
_DEC = r"-?[0-9]+\.[0-9]+"
_NC = r"\(-?[0-9]+(?:/[0-9]+)?\)|-?[0-9]+"  # compact operand: bare integer or parenthesised
_LIST = rf"(?:{_N}(?:\s*,\s*{_N})*)?"
_RE_INT = re.compile(r"-?[0-9]+")
_RE_RATIONAL = re.compile(r"-?[0-9]+/[0-9]+")
_RE_DECIMAL = re.compile(_DEC)


def _int(digits: str) -> int:
    """A signed ASCII integer literal under the verifier's literal rules (no leading zero, digit limit)."""
    if digits[:1] == "-":
        return -parse_number_literal(digits[1:])
    return parse_number_literal(digits)


def parse_number(token: str) -> Number:
    """``"37"``, ``"-3"``, ``"3/2"`` or ``"(3/2)"``, ``"4.6"`` -> an exact number; ``ValueError`` for anything else
    (a zero denominator, a leading zero, too many digits)."""
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
            raise ValueError(f"number {describe_value(token)} has a zero denominator")
        return normalize(Fraction(p, q))
    if _RE_DECIMAL.fullmatch(tok):
        _int(tok.split(".")[0])
        return normalize(Fraction(tok))
    raise ValueError(f"not a number: {describe_value(token)}")


def parse_number_list(text: str) -> tuple[Number, ...]:
    """``"76, 3, 17"`` -> ``(76, 3, 17)``; an empty string -> ``()``."""
    text = text.strip()
    return tuple(parse_number(t) for t in text.split(",")) if text else ()


def _pairs(text: str) -> tuple[tuple[Number, Number], ...]:
    return tuple((parse_number(a), parse_number(b)) for a, b in re.findall(rf"\(({_N}),\s*({_N})\)", text))


LINE_KINDS: tuple[str, ...] = (
    "blank", "text", "header", "initial", "pick", "try", "traceback", "equation", "compact",
    "solution_open", "solution_close", "answer", "think",
)
"""Every ``ParsedLine.kind``."""

TRY_OUTCOMES: tuple[str, ...] = ("add", "found", "missed", "decimal", "exceeds", "not_positive", "invalid_op", "bare")
"""What a ``Try`` line says happened: ``add``, ``found`` / ``missed``, four kinds of pruning, or ``bare`` (none)."""

DROP_OUTCOMES: frozenset[str] = frozenset({"decimal", "exceeds", "not_positive", "invalid_op"})


@dataclass(frozen=True)
class ParsedLine:
    """One line, classified; claims are kept as written, nothing is checked.

    Attributes:
        kind: One of :data:`LINE_KINDS`.
        indent: Leading spaces (the LongProc level, or a compact line's depth).
        a, op, b, c: The move the line states (``c`` is ``None`` when no result is written).
        outcome: For ``try`` lines, one of :data:`TRY_OUTCOMES`.
        numbers: The number set the line claims (initial numbers, numbers left, current set, ``[..]``), or ``None``.
        target, evaluated, added, options: The target, ``Evaluate`` value, ``Add`` value and option pairs written.
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
_DROP_WORDS = (("is a decimal", "decimal"), ("exceeds the maximum", "exceeds"), ("is not positive", "not_positive"))
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
    drop = next((o for words, o in _DROP_WORDS if words in rest), None)
    if m["inv"] is not None:
        outcome = "invalid_op"
    elif drop is not None:
        outcome = drop
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
    return ParsedLine("try", len(m["ind"]), a, m["op"], b, c, outcome, numbers, target, evaluated, added, options,
                      annotation, malformed)


def _eq_line(kind: str, m: re.Match[str], indent: int = 0, numbers=None, annotation=None, malformed=None) -> ParsedLine:
    try:
        a, b, c = parse_number(m["a"]), parse_number(m["b"]), parse_number(m["c"])
    except ValueError as e:  # a move with an unreadable number (04, 3/0): an invalid move, not free text
        return ParsedLine(kind, indent, op=m["op"], numbers=numbers, annotation=annotation, malformed=str(e))
    return ParsedLine(kind, indent, a, m["op"], b, c, numbers=numbers, annotation=annotation, malformed=malformed)


def parse_line(line: str) -> ParsedLine:
    """Classify one line (without its newline); never raises."""
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
            return ParsedLine("pick", len(m["ind"]), parse_number(m["a"]), None, parse_number(m["b"]), numbers=left,
                              annotation=annotation, malformed=malformed or bad)
    if body.startswith("Initial number set"):
        m = _RE_INIT.match(body)
        if m is not None:
            opt = _RE_OPTIONS.search(m["rest"])
            return ParsedLine("initial", indent, numbers=parse_number_list(m["nums"]), target=int(m["t"]),
                              options=None if opt is None else _pairs(opt["opts"]), annotation=annotation,
                              malformed=malformed)
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
