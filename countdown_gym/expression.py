"""A safe parser and exact evaluator for Countdown answer expressions.

No ``eval``, no recursion: a regex tokenizer, an iterative shunting-yard parser that turns the
expression into postfix (RPN) order, and an evaluator that applies :meth:`Rules.check` to every
operator node, so each intermediate result obeys the rules.

Accepted text: ASCII digits ``0-9``, the operators ``+ - * /``, parentheses, whitespace, and
the aliases ``×`` (times), ``÷`` (divide) and ``−`` (U+2212 minus). An optional trailing
``= N`` states the value; :func:`parse_expression` keeps it as ``claimed`` and the verifier
checks it. Everything else is rejected with an :class:`ExpressionError` carrying a
machine-readable ``reason`` code (see ``docs/verifier.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from countdown_gym.rules import Number, Rules, format_number

MAX_ANSWER_CHARS = 100_000
"""Longer answers are rejected (``answer_too_long``) before any parsing."""
MAX_NUMBER_DIGITS = 15
"""Longer number literals are rejected (``number_too_large``)."""
MAX_DEPTH = 100
"""Deeper parenthesis nesting is rejected (``too_deep``) as soon as it is seen."""
MAX_TOKENS = 20_000
"""More tokens are rejected (``too_many_tokens``)."""

OPERATOR_ALIASES: dict[str, str] = {"×": "*", "÷": "/", "−": "-"}
"""Unicode operator spellings accepted as their ASCII operator."""

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}
_TOKEN = re.compile(r"([0-9]+)|(\*\*|[-+*/()=^×÷−])|([ \t\r\n]+)")

Move = tuple[Number, str, Number, Number]


class ExpressionError(ValueError):
    """An answer that cannot be parsed or evaluated: ``reason`` code, message, position."""

    def __init__(self, reason: str, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.position = position


@dataclass(frozen=True)
class ParsedExpression:
    """An expression in postfix order.

    ``rpn`` holds ints (number literals) and operator strings; ``numbers`` the literals in
    reading order; ``claimed`` the value after a trailing ``=``, or ``None``.
    """

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
    """``(kind, text, position)`` tokens; kind is ``num``, ``op``, ``(``, ``)`` or ``=``.

    Operator aliases are mapped to ASCII. Raises :class:`ExpressionError` on anything else.
    """
    if len(text) > MAX_ANSWER_CHARS:
        raise ExpressionError("answer_too_long", f"answer has {len(text)} characters; the limit is {MAX_ANSWER_CHARS}")
    tokens: list[tuple[str, str, int]] = []
    pos, n = 0, len(text)
    match = _TOKEN.match
    depth = 0
    while pos < n:
        m = match(text, pos)
        if m is None:
            ch = text[pos]
            if ch.isspace():
                pos += 1
                continue
            reason, message = classify_character(ch)
            raise ExpressionError(reason, f"{message} (position {pos})", pos)
        num, op = m.group(1), m.group(2)
        if num is not None:
            tokens.append(("num", num, pos))
        elif op is not None:
            if op == "**" or op == "^":
                raise ExpressionError("power_operator", f"'{op}' (power) is not a Countdown operation (position {pos})", pos)
            op = OPERATOR_ALIASES.get(op, op)
            if op == "(":
                depth += 1
                if depth > MAX_DEPTH:
                    raise ExpressionError("too_deep", f"parentheses nested deeper than {MAX_DEPTH} levels", pos)
            elif op == ")":
                depth -= 1
            tokens.append((op if op in "()=" else "op", op, pos))
        if len(tokens) > MAX_TOKENS:
            raise ExpressionError("too_many_tokens", f"more than {MAX_TOKENS} tokens")
        pos = m.end()
    return tokens


def parse_number_literal(digits: str, pos: int | None = None) -> int:
    """An ASCII digit string as an int, rejecting leading zeros and over-long literals."""
    if len(digits) > MAX_NUMBER_DIGITS:
        raise ExpressionError("number_too_large", f"number literal with {len(digits)} digits (limit {MAX_NUMBER_DIGITS})", pos)
    if len(digits) > 1 and digits[0] == "0":
        raise ExpressionError("leading_zero", f"number {digits!r} has a leading zero", pos)
    return int(digits)


def _parse_claim(tokens: list[tuple[str, str, int]]) -> Number:
    """The value after ``=``: ``N``, ``-N``, ``p/q`` or ``-p/q``."""
    kinds = [k for k, _, _ in tokens]
    texts = [t for _, t, _ in tokens]
    sign = 1
    if kinds[:1] == ["op"] and texts[0] == "-":
        sign, tokens, kinds, texts = -1, tokens[1:], kinds[1:], texts[1:]
    if kinds == ["num"]:
        return sign * parse_number_literal(texts[0], tokens[0][2])
    if kinds == ["num", "op", "num"] and texts[1] == "/":
        q = parse_number_literal(texts[2], tokens[2][2])
        if q == 0:
            raise ExpressionError("malformed_equation", "the stated value divides by zero")
        v = Fraction(parse_number_literal(texts[0], tokens[0][2]), q) * sign
        return v.numerator if v.denominator == 1 else v
    raise ExpressionError("malformed_equation", "after '=' there must be a single number")


def parse_expression(text: str) -> ParsedExpression:
    """Parse an infix expression (optionally ``... = N``) into postfix order, iteratively."""
    tokens = tokenize(text)
    claimed: Number | None = None
    eq = [i for i, t in enumerate(tokens) if t[0] == "="]
    if eq:
        if len(eq) > 1:
            raise ExpressionError("malformed_equation", "more than one '=' in the answer", tokens[eq[1]][2])
        rhs = tokens[eq[0] + 1 :]
        if not rhs:
            raise ExpressionError("malformed_equation", "nothing after '='", tokens[eq[0]][2])
        claimed = _parse_claim(rhs)
        tokens = tokens[: eq[0]]
    if not tokens:
        raise ExpressionError("empty_answer", "the answer contains no expression")

    out: list[int | str] = []
    numbers: list[int] = []
    stack: list[str] = []  # operators and "("
    expect_operand = True
    prev = ""
    for kind, tok, pos in tokens:
        if kind == "num":
            if not expect_operand:
                if prev == ")":
                    raise ExpressionError("implicit_multiplication", f"number after ')' without an operator (position {pos})", pos)
                raise ExpressionError("missing_operator", f"two numbers without an operator between them (position {pos})", pos)
            v = parse_number_literal(tok, pos)
            out.append(v)
            numbers.append(v)
            expect_operand = False
        elif kind == "(":
            if not expect_operand:
                raise ExpressionError("implicit_multiplication", f"'(' after an operand without an operator (position {pos})", pos)
            stack.append("(")
        elif kind == ")":
            if prev == "(":
                raise ExpressionError("empty_parentheses", f"empty parentheses '()' (position {pos})", pos)
            if expect_operand:
                raise ExpressionError("missing_operand", f"operator without a right operand before ')' (position {pos})", pos)
            while stack and stack[-1] != "(":
                out.append(stack.pop())
            if not stack:
                raise ExpressionError("unbalanced_parentheses", f"')' without a matching '(' (position {pos})", pos)
            stack.pop()
        else:  # binary operator
            if expect_operand:
                if tok in "+-" and prev in ("", "(", "op"):
                    raise ExpressionError("unary_operator", f"unary '{tok}' is not allowed; every operator takes two numbers (position {pos})", pos)
                raise ExpressionError("missing_operand", f"operator '{tok}' without a left operand (position {pos})", pos)
            p = _PREC[tok]
            while stack and stack[-1] != "(" and _PREC[stack[-1]] >= p:
                out.append(stack.pop())
            stack.append(tok)
            expect_operand = True
        prev = kind
    if expect_operand:
        raise ExpressionError("missing_operand", "the expression ends with an operator")
    while stack:
        top = stack.pop()
        if top == "(":
            raise ExpressionError("unbalanced_parentheses", "'(' without a matching ')'")
        out.append(top)
    return ParsedExpression(tuple(out), tuple(numbers), claimed)


def evaluate(parsed: ParsedExpression, rules: Rules | None = None) -> tuple[Number, list[Move]]:
    """Exact value and the steps ``(a, op, b, result)`` in evaluation order.

    Every operator node goes through :meth:`Rules.check`; the first illegal one raises an
    :class:`ExpressionError` with the rule's reason code (``division_by_zero``,
    ``non_integer_result``, ``negative_result``, ``zero_result``, ``exceeds_limit``).
    """
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
            raise ExpressionError(
                reason, f"{format_number(a)} {item} {format_number(b)} is not allowed under the {rules.name} rules ({reason})"
            )
        steps.append((a, item, b, r))
        stack.append(r)
    return stack[0], steps


def evaluate_expression(text: str, rules: Rules | None = None) -> Number:
    """Parse and evaluate ``text`` exactly (convenience; raises :class:`ExpressionError`)."""
    return evaluate(parse_expression(text), rules)[0]
