"""Move sequences of a numeric agent in a submission: their JSON form, and the ``<Solution>`` block that the
verifier reads (so a numeric agent is judged exactly like a language model that wrote the same block)."""

from __future__ import annotations

import numbers as _numbers
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from countdown_gym.game.rules import OPERATORS, format_number

NUMBER_TEXT = re.compile(r"-?[0-9]{1,15}(/[0-9]{1,15})?")
"""An exact number written as text in a move: ``"7"``, ``"-3"`` or ``"p/q"``."""


def _move_number(x: Any) -> int | str:
    """An exact number as JSON: an int, or ``"p/q"`` for a non-integer rational."""
    if isinstance(x, bool):
        raise TypeError(f"a move number must be an int or a Fraction, got bool {x!r}")
    if isinstance(x, _numbers.Integral):
        return int(x)
    if isinstance(x, Fraction):
        return x.numerator if x.denominator == 1 else format_number(x)
    if isinstance(x, str) and NUMBER_TEXT.fullmatch(x):
        return x
    raise TypeError(f"a move number must be an int, a Fraction or a 'p/q' string, got {type(x).__name__} {x!r}")


def normalize_move(move: Sequence[Any]) -> list[int | str]:
    """``[a, op, b, result]`` in the submission's JSON form (checks the shape, not the arithmetic)."""
    if isinstance(move, (str, bytes)) or not isinstance(move, Sequence) or len(move) != 4:
        raise TypeError(f"a move must be a sequence (a, op, b, result), got {move!r}")
    a, op, b, r = move
    if op not in OPERATORS:
        raise TypeError(f"a move's operator must be one of {OPERATORS}, got {op!r}")
    return [_move_number(a), op, _move_number(b), _move_number(r)]


def moves_to_solution(moves: Sequence[Sequence[Any]]) -> str:
    """The ``<Solution>`` block of a move sequence, e.g. ``"<Solution>\\n28 + 44 = 72\\n...</Solution>"``.

    The verifier then checks every step (operands available, rules, arithmetic, target), so a
    numeric agent is judged exactly like a language model that wrote the same block.
    """
    lines = []
    for move in moves:
        a, op, b, r = normalize_move(move)
        lines.append(f"{a} {op} {b} = {r}")
    return "<Solution>\n" + "".join(line + "\n" for line in lines) + "</Solution>"
