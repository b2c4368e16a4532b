"""The action encoding of ``Countdown-v0`` and its vector env, ``slot[i] op slot[j]`` <-> ``4 * pair_index(i, j) +
op_index``, and the result of every action of a state (:func:`move_results`)."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from countdown_gym.game.rules import OPERATORS, Number, Rules, describe_value


def num_actions(max_numbers: int) -> int:
    """``max_numbers * (max_numbers - 1) * 4``: ordered slot pairs times operators."""
    return max_numbers * (max_numbers - 1) * len(OPERATORS)


def check_index(value: Any, n: int, name: str) -> int:
    """``value`` as an int in ``0..n - 1`` (a Python or numpy int, not a bool); else ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < n:
        raise ValueError(f"{name} must be an int in 0..{n - 1}, got {describe_value(value)}")
    return int(value)


def _op_index(op: str | int) -> int:
    if isinstance(op, str):
        if op not in OPERATORS:
            raise ValueError(f"unknown operator {op!r:.80}; choose one of {OPERATORS}")
        return OPERATORS.index(op)
    if isinstance(op, (int, np.integer)) and not isinstance(op, bool) and 0 <= op < len(OPERATORS):
        return int(op)
    raise ValueError(f"operator must be one of {OPERATORS} or an index 0..{len(OPERATORS) - 1}, got {describe_value(op)}")


def encode_action(i: int, j: int, op: str | int, max_numbers: int) -> int:
    """The action index of ``slot[i] op slot[j]``: ``4 * pair + op_index``, ``pair = h * (h - 1) + 2 * min(i, j) +
    (i > j)``, ``h = max(i, j)`` (the ``k * (k - 1)`` pairs within the first ``k`` slots come first, whatever
    ``max_numbers`` is), ``op_index`` the position of ``op`` (or an index) in ``("+", "-", "*", "/")``; ``ValueError``
    for bad slots or operators."""
    i, j = check_index(i, max_numbers, "slot i"), check_index(j, max_numbers, "slot j")
    if i == j:
        raise ValueError(f"a move needs two different slots, got i == j == {i}")
    h, lo = max(i, j), min(i, j)
    return (h * (h - 1) + 2 * lo + int(i > j)) * len(OPERATORS) + _op_index(op)


def decode_action(a: int, max_numbers: int) -> tuple[int, int, str]:
    """``(i, j, op)`` of action index ``a`` (inverse of :func:`encode_action`)."""
    pair, op = divmod(check_index(a, num_actions(max_numbers), "action"), len(OPERATORS))
    h = (1 + math.isqrt(1 + 4 * pair)) // 2
    lo, swapped = divmod(pair - h * (h - 1), 2)
    i, j = (h, lo) if swapped else (lo, h)
    return i, j, OPERATORS[op]


@cache
def action_table(max_numbers: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]]:
    """``(I, J, OP)``: slot ``i``, slot ``j`` and operator of every action index."""
    rows = [decode_action(a, max_numbers) for a in range(num_actions(max_numbers))]
    return tuple(r[0] for r in rows), tuple(r[1] for r in rows), tuple(r[2] for r in rows)


def masked_move(
    state: tuple[Number, ...], i: int, j: int, op: str, rules: Rules
) -> tuple[Number | None, Number | None, str]:
    """The operands ``(x, y)`` (``None`` for an empty slot) of a masked action and why it is masked: ``"empty_slot"``
    or :meth:`Rules.check`'s code."""
    x = state[i] if i < len(state) else None
    y = state[j] if j < len(state) else None
    return x, y, "empty_slot" if x is None or y is None else rules.check(x, op, y)[1]


def move_results(state: tuple[Number, ...], rules: Rules, max_numbers: int) -> list[Number | None]:
    """The result of every action from ``state``, indexed by action; ``None`` for a masked one (an empty slot, or
    :meth:`Rules.check` rejects it)."""
    results: list[Number | None] = [None] * num_actions(max_numbers)
    first, second, _ = action_table(max_numbers)
    n_ops = len(OPERATORS)
    for a in range(0, n_ops * len(state) * (len(state) - 1), n_ops):  # the actions on the first len(state) slots
        results[a : a + n_ops] = rules.legal_results(state[first[a]], state[second[a]])
    return results
