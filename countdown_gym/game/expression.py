"""A safe parser and exact evaluator for answer expressions: no ``eval``, no recursion (a regex tokenizer, an
iterative shunting-yard parser to postfix order, :meth:`Rules.check` on every operator node).

Accepted: ASCII digits, ``+ - * /``, parentheses, whitespace and the aliases ``×``, ``÷``, ``−``; an optional
trailing ``= N`` is kept as ``claimed``. Anything else raises :class:`ExpressionError` with a ``reason`` code
(``docs/verifier.md``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction

from countdown_gym.game.rules import MAX_DIGITS, Number, Rules, describe_value, format_number, normalize

MAX_ANSWER_CHARS = 100_000
"""Longer answers are rejected (``answer_too_long``) before any parsing."""
MAX_NUMBER_DIGITS = 15
"""Longer number literals are rejected (``number_too_large``), unless the game judged needs more (:func:`literal_limit`)."""
_LITERAL_DIGITS: ContextVar[int] = ContextVar("literal_digits", default=MAX_NUMBER_DIGITS)
_SHORT = 10**MAX_NUMBER_DIGITS
_DEFAULT_LITERALS = nullcontext()
MAX_DEPTH = 100
"""Deeper parenthesis nesting is rejected (``too_deep``) where the grammar reaches it."""
MAX_TOKENS = 50_000
"""More tokens are rejected (``too_many_tokens``)."""

OPERATOR_ALIASES: dict[str, str] = {"×": "*", "÷": "/", "−": "-"}
"""Unicode operator spellings accepted as their ASCII operator."""

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
_TOKEN = re.compile(r"([0-9]+)|(\*\*|[-+*/()=^×÷−])|(\s+)|(.)", re.DOTALL)

Move = tuple[Number, str, Number, Number]
"""``(a, op, b, result)``: one arithmetic step."""


class ExpressionError(ValueError):
    """An answer that cannot be parsed or evaluated: ``reason`` code, message, position."""

    def __init__(self, reason: str, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.position = position


@dataclass(frozen=True)
class ParsedExpression:
    """An expression in postfix order: ``rpn`` (int literals and operators), ``numbers`` (the literals in reading
    order), ``claimed`` (the value after a trailing ``=``, or ``None``)."""

    rpn: tuple[int | str, ...]
    numbers: tuple[int, ...]
    claimed: Number | None = None


def classify_character(ch: str) -> tuple[str, str]:
    """Reason code and message for a character the grammar does not allow."""
    if ch.isnumeric():
        return "non_ascii_digit", f"{ch!r} (U+{ord(ch):04X}) is not an ASCII digit; write numbers with 0-9"
    if ch == ".":
        return "decimal_number", "decimal points are not allowed; write exact expressions with integers"
    return "invalid_character", f"character {ch!r} (U+{ord(ch):04X}) is not allowed in an expression"


def tokenize(text: str) -> list[tuple[str, str, int]]:
    """``(kind, text, position)`` tokens (kind ``num``, ``op``, ``(``, ``)``, ``=``); :class:`ExpressionError` at the
    first character the grammar does not allow (its errors, ``too_deep`` included, are :func:`parse_expression`'s)."""
    if len(text) > MAX_ANSWER_CHARS:
        raise ExpressionError("answer_too_long", f"answer has {len(text)} characters; the limit is {MAX_ANSWER_CHARS}")
    tokens: list[tuple[str, str, int]] = []
    for m in _TOKEN.finditer(text):
        num, op, bad, pos = m[1], m[2], m[4], m.start()
        if bad is not None:
            reason, message = classify_character(bad)
            raise ExpressionError(reason, f"{message} (position {pos})", pos)
        if num is not None:
            tokens.append(("num", num, pos))
        elif op is not None:
            if op == "**" or op == "^":
                raise ExpressionError("power_operator", f"'{op}' (power) is not a Countdown operation (position {pos})", pos)
            op = OPERATOR_ALIASES.get(op, op)
            tokens.append((op if op in "()=" else "op", op, pos))
        if len(tokens) > MAX_TOKENS:
            raise ExpressionError("too_many_tokens", f"more than {MAX_TOKENS} tokens")
    return tokens


def literal_digits(numbers: Iterable[Number], target: int) -> int:
    """The longest literal a game of ``numbers`` -> ``target`` may need: :data:`MAX_NUMBER_DIGITS`, or the digits of
    its target or of ``prod(2 * n + 2)`` (above every numerator and denominator its moves reach) when longer, at most
    :data:`~countdown_gym.game.rules.MAX_DIGITS`. Every shipped preset's problems: 15."""
    reach = 1
    for n in numbers:
        reach *= 2 * abs(int(n)) + 2
    bound = max(abs(target), reach)
    return MAX_NUMBER_DIGITS if bound < _SHORT else min(MAX_DIGITS, math.ceil(bound.bit_length() * math.log10(2)) + 1)


def literal_limit(digits: int) -> AbstractContextManager[None]:
    """``with literal_limit(problem.literal_digits):`` literals of up to ``digits`` digits are read (never fewer than
    :data:`MAX_NUMBER_DIGITS`), so a game's own numbers stay writable."""
    return _literals(digits) if digits > MAX_NUMBER_DIGITS else _DEFAULT_LITERALS


@contextmanager
def _literals(digits: int) -> Iterator[None]:
    token = _LITERAL_DIGITS.set(digits)
    try:
        yield
    finally:
        _LITERAL_DIGITS.reset(token)


def parse_number_literal(digits: str, pos: int | None = None) -> int:
    """An ASCII digit string as an int, rejecting leading zeros and over-long literals (:func:`literal_limit`)."""
    if len(digits) > (limit := _LITERAL_DIGITS.get()):
        raise ExpressionError("number_too_large", f"number literal with {len(digits)} digits (limit {limit})", pos)
    if len(digits) > 1 and digits[0] == "0":
        raise ExpressionError("leading_zero", f"number {digits!r} has a leading zero", pos)
    return int(digits)


_ALLOWED = re.compile(r"[0-9+\-*/()= \t\r\n]*")
_FAST_TOKEN = re.compile(r"[0-9]+|[-+*/()=]")


def _lex(text: str) -> list[str]:
    """Token strings with aliases mapped to ASCII: :func:`tokenize`'s, with a fast path for plain ASCII answers."""
    if len(text) > MAX_ANSWER_CHARS or "**" in text or _ALLOWED.fullmatch(text) is None:
        return [t for _, t, _ in tokenize(text)]  # aliases, or the precise error of the first bad character
    toks = _FAST_TOKEN.findall(text)
    if len(toks) > MAX_TOKENS:
        raise ExpressionError("too_many_tokens", f"more than {MAX_TOKENS} tokens")
    return toks


_VALUE = re.compile(r"(-)? ?([0-9]+)(?: ?/ ?([0-9]+))?")


def parse_value(text: str, reason: str) -> Number:
    """``N``, ``-N``, ``p/q`` or ``-p/q`` (tokens may be spaced) as an exact number, literals as
    :func:`parse_number_literal` reads them; an :class:`ExpressionError` of ``reason`` for anything else."""
    m = _VALUE.fullmatch(text)
    if m is None:
        raise ExpressionError(reason, f"expected a single number, got {text[:40]!r}")
    v: Number = parse_number_literal(m[2])
    if m[3] is not None:
        q = parse_number_literal(m[3])
        if q == 0:
            raise ExpressionError(reason, f"{text[:40]!r} divides by zero")
        v = normalize(Fraction(v, q))
    return -v if m[1] else v


class _Fail(Exception):
    def __init__(self, index: int | None, reason: str, message: str) -> None:
        super().__init__(message)
        self.index, self.reason, self.message = index, reason, message


def parse_expression(text: str) -> ParsedExpression:
    """Parse an infix expression (optionally ``... = N``) into postfix order, iteratively."""
    if not isinstance(text, str):  # bytes: a TypeError from re, None: one from len()
        raise TypeError(f"an expression must be a str, got {describe_value(text)}")
    toks = _lex(text)
    claimed: Number | None = None
    if "=" in toks:
        eq = toks.index("=")
        rhs = toks[eq + 1 :]
        if "=" in rhs:
            raise ExpressionError("malformed_equation", "more than one '=' in the answer")
        if not rhs:
            raise ExpressionError("malformed_equation", "nothing after '='")
        claimed = parse_value(" ".join(rhs), "malformed_equation")
        toks = toks[:eq]
    if not toks:
        raise ExpressionError("empty_answer", "the answer contains no expression")
    try:
        rpn, numbers = _shunting_yard(toks)
    except _Fail as f:
        pos = None
        if f.index is not None:
            pos = [p for _, _, p in tokenize(text)][f.index]
            message = f"{f.message} (position {pos})"
        else:
            message = f.message
        raise ExpressionError(f.reason, message, pos) from None
    return ParsedExpression(tuple(rpn), tuple(numbers), claimed)


def _shunting_yard(toks: list[str]) -> tuple[list[int | str], list[int]]:
    out: list[int | str] = []
    numbers: list[int] = []
    stack: list[str] = []  # operators and "("
    expect_operand = True
    prev = ""  # "", "num", "(", ")" or "op"
    depth = 0
    prec = PRECEDENCE
    for i, tok in enumerate(toks):
        if "0" <= tok[0] <= "9":
            if not expect_operand:
                if prev == ")":
                    raise _Fail(i, "implicit_multiplication", "number after ')' without an operator")
                raise _Fail(i, "missing_operator", "two numbers without an operator between them")
            try:
                v = parse_number_literal(tok)
            except ExpressionError as e:
                raise _Fail(i, e.reason, e.message) from None
            out.append(v)
            numbers.append(v)
            expect_operand = False
            prev = "num"
        elif tok == "(":
            if not expect_operand:
                raise _Fail(i, "implicit_multiplication", "'(' after an operand without an operator")
            depth += 1
            if depth > MAX_DEPTH:
                raise _Fail(i, "too_deep", f"parentheses nested deeper than {MAX_DEPTH} levels")
            stack.append("(")
            prev = "("
        elif tok == ")":
            if prev == "(":
                raise _Fail(i, "empty_parentheses", "empty parentheses '()'")
            if expect_operand:
                raise _Fail(i, "missing_operand", "operator without a right operand before ')'")
            while stack and stack[-1] != "(":
                out.append(stack.pop())
            if not stack:
                raise _Fail(i, "unbalanced_parentheses", "')' without a matching '('")
            stack.pop()
            depth -= 1
            prev = ")"
        else:  # binary operator
            if expect_operand:
                if tok in "+-" and prev in ("", "(", "op"):
                    raise _Fail(i, "unary_operator", f"unary '{tok}' is not allowed; every operator takes two numbers")
                raise _Fail(i, "missing_operand", f"operator '{tok}' without a left operand")
            p = prec[tok]
            while stack and stack[-1] != "(" and prec[stack[-1]] >= p:
                out.append(stack.pop())
            stack.append(tok)
            expect_operand = True
            prev = "op"
    if expect_operand:
        raise _Fail(None, "missing_operand", "the expression ends with an operator")
    while stack:
        top = stack.pop()
        if top == "(":
            raise _Fail(None, "unbalanced_parentheses", "'(' without a matching ')'")
        out.append(top)
    return out, numbers


def evaluate(parsed: ParsedExpression, rules: Rules | None = None) -> tuple[Number, list[Move]]:
    """Exact value and the steps ``(a, op, b, result)`` in evaluation order; the first node :meth:`Rules.check`
    refuses raises :class:`ExpressionError` with its reason code."""
    rules = rules or Rules.longproc()
    stack: list[Number] = []
    steps: list[Move] = []
    for item in parsed.rpn:
        if isinstance(item, int):
            stack.append(item)
            continue
        b = stack.pop()
        a = stack.pop()
        r, reason = rules.check(a, item, b)
        if r is None:
            raise ExpressionError(reason, f"{format_number(a)} {item} {format_number(b)} is not allowed under the "
                                          f"{rules.name} rules ({reason})")
        steps.append((a, item, b, r))
        stack.append(r)
    return stack[0], steps


def evaluate_expression(text: str, rules: Rules | None = None) -> Number:
    """Parse and evaluate ``text`` exactly (convenience; raises :class:`ExpressionError`)."""
    if rules is not None and not isinstance(rules, Rules):  # a preset name: an AttributeError at the first operator
        raise TypeError(f"rules must be a Rules or None, got {describe_value(rules)}")
    return evaluate(parse_expression(text), rules)[0]
