"""The batched move kernel: the array form of :meth:`Rules.check` under ``integer_only`` rules, the results and
legality of every Countdown-v0 action of many states (the vector env's masks, the SB3 baseline's move features).

States are ``vals`` ``(..., M)`` integer arrays (slot values, the first ``count`` present); actions are numbered as
in ``Countdown-v0``. Tested action by action against :func:`countdown_gym.envs.actions.move_results`.

Example:
    >>> import numpy as np
    >>> from countdown_gym.game.rules import Rules
    >>> res, legal = batch_moves(np.array([[6, 2, 0]]), np.array([2]), Rules.longproc(), results=True)
    >>> res[0, :4].tolist(), legal[0, :4].tolist()  # 6+2, 6-2, 6*2, 6/2
    ([8, 4, 12, 3], [True, True, True, True])
"""

from __future__ import annotations

from functools import cache

import numpy as np

from countdown_gym.envs.actions import action_table
from countdown_gym.game.rules import OPERATORS, Rules


@cache
def pair_slots(max_numbers: int) -> tuple[np.ndarray, np.ndarray]:
    """Slots ``(i, j)`` of each ordered pair of ``max_numbers`` slots, in action order (int64 arrays)."""
    first, second, _ = action_table(max_numbers)
    pi = np.array(first[:: len(OPERATORS)], dtype=np.int64)
    pj = np.array(second[:: len(OPERATORS)], dtype=np.int64)
    pi.flags.writeable = pj.flags.writeable = False
    return pi, pj


def in_range(r: np.ndarray, rules: Rules) -> np.ndarray:
    """Whether each integer result passes the rules' sign and limit checks (:meth:`Rules.result_range`)."""
    lo, hi = rules.result_range()
    return (r >= lo) & (r < hi)


def batch_moves(
    vals: np.ndarray, count: np.ndarray, rules: Rules, *, results: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The legal-action mask ``(..., n_actions)`` of every state (``vals``: int32 or int64 that ``+ - *`` cannot
    overflow; ``count``: its leading shape), or with ``results=True`` ``(results, legal)``: ``x op y`` (``x // y``
    for ``/``, ``x`` where ``y == 0``), legal or not. ``ValueError`` unless the rules are ``integer_only``.
    """
    if not rules.integer_only:
        raise ValueError(f"the batched move kernel needs integer_only rules, got {rules.name!r}")
    if not isinstance(vals, np.ndarray) or vals.dtype.kind not in "iu":  # a float 6.5 would be played as a number
        raise TypeError(f"vals must be an int array, got {getattr(vals, 'dtype', type(vals).__name__)}")
    pi, pj = pair_slots(vals.shape[-1])
    x = vals[..., pi]
    y = vals[..., pj]  # a fresh copy: made safe for the division below
    present = (pi < count[..., None]) & (pj < count[..., None])
    zero = y == 0
    shape = (*vals.shape[:-1], len(OPERATORS) * len(pi))
    if results:  # one stacked array of results, range-checked at once (fewer large temporaries)
        quotient, remainder = np.divmod(x, np.where(zero, 1, y))
        res = np.stack([x + y, x - y, x * y, quotient], axis=-1)
        legal = in_range(res, rules) & present[..., None]
        legal[..., 3] &= ~zero & (remainder == 0)  # a division by zero is never exact
        return res.reshape(shape), legal.reshape(shape)
    # the mask alone (the vector env, every step): per operator, no result array
    add = in_range(x + y, rules) & present
    sub = in_range(x - y, rules) & present
    mul = in_range(x * y, rules) & present
    y[zero] = 1
    quotient, remainder = np.divmod(x, y)
    remainder[zero] = 1
    exact = remainder == 0
    exact &= present
    exact &= in_range(quotient, rules)
    return np.stack([add, sub, mul, exact], axis=-1).reshape(shape)


def apply_moves(x: np.ndarray, op: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x op y`` elementwise (``op``: operator indices into ``OPERATORS``; ``/`` is ``//``, safe at ``y == 0``)."""
    out = x + y
    sub, mul, div = op == 1, op == 2, op == 3
    out[sub] = x[sub] - y[sub]
    out[mul] = x[mul] * y[mul]
    out[div] = x[div] // np.where(y[div] == 0, 1, y[div])
    return out


__all__ = ["apply_moves", "batch_moves", "in_range", "pair_slots"]
