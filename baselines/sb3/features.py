"""The numeric baseline's observation features for MaskablePPO: one row per action, numpy over a batch of states.

Each row describes what its move would make, and nothing looks further than ``lookahead`` moves (no solver, no
reachability, no search): ``lookahead=1`` the move's result and the numbers it leaves (the afterstate, as the action
mask sees it); ``lookahead=2`` also, over the legal next moves from that afterstate, whether one makes the target,
how close the closest gets, and whether one exists (exact with three numbers left, not from four).
``log_ratios=True`` re-encodes the afterstate as ``log(x / T) / 4`` (sums and products that make the target lie on
planes). ``children=True`` (lookahead 2) gives those next moves raw instead, one small row each
(:func:`child_rows`, once per :func:`canonical_moves` parent: 36 x 18 for four numbers), for the policy to pool
with a learned network. :class:`baselines.sb3.policy.MoveFeatures` wraps one env with them;
``baselines/sb3/vec_env.py`` computes them for a vector of games.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

import numpy as np

from countdown_gym.envs.actions import action_table, num_actions
from countdown_gym.envs.move_kernel import batch_moves, pair_slots
from countdown_gym.game.rules import OPERATORS, Rules

LOOKAHEADS = (1, 2)
EXTRA_COLUMNS = {1: 0, 2: 3}
"""Feature columns each lookahead adds after the lookahead-1 row."""


def row_size(max_numbers: int, lookahead: int = 1, log_ratios: bool = False) -> int:
    """Length of one action's feature row."""
    if lookahead not in LOOKAHEADS:
        raise ValueError(f"lookahead must be one of {LOOKAHEADS}, got {lookahead!r}")
    return 4 + 3 * (max_numbers - 2) + 2 + EXTRA_COLUMNS[lookahead] + (max_numbers - 1) * bool(log_ratios)


def feature_size(max_numbers: int, lookahead: int = 1, log_ratios: bool = False, children: bool = False) -> int:
    """Length of the flat observation: every action's row, then (``children``) the child block."""
    if children and lookahead != 2:
        raise ValueError("children rows look two moves ahead: they need lookahead=2")
    size = num_actions(max_numbers) * row_size(max_numbers, lookahead, log_ratios)
    if children:
        parents, per_parent, columns = child_shape(max_numbers)
        size += parents * per_parent * columns
    return size


def child_shape(max_numbers: int) -> tuple[int, int, int]:
    """``(parent moves, children per parent, columns per child)`` of :func:`child_rows`."""
    m = max_numbers
    return len(canonical_moves(m)[0]), len(_child_moves(m)), 2 + 4 * (m - 2)


@cache
def canonical_moves(max_numbers: int) -> tuple[np.ndarray, np.ndarray]:
    """``(canonical, twin)``: the actions that are not the swapped copy of a commutative move
    (``+`` and ``*`` with ``i < j``, every ``-`` and ``/``), and for every action the position in
    ``canonical`` of the move that makes the same afterstate."""
    first, second, ops = action_table(max_numbers)
    index = {(i, j, op): a for a, (i, j, op) in enumerate(zip(first, second, ops, strict=True))}
    canonical = [a for a, (i, j, op) in enumerate(zip(first, second, ops, strict=True)) if op in "-/" or i < j]
    position = {a: k for k, a in enumerate(canonical)}
    twin = [position.get(a, position.get(index[(j, i, op)])) for a, (i, j, op) in enumerate(zip(first, second, ops, strict=True))]
    return np.array(canonical, dtype=np.int64), np.array(twin, dtype=np.int64)


@cache
def _child_moves(max_numbers: int) -> np.ndarray:
    """The canonical moves on the first ``M - 1`` slots (all an afterstate holds), as action indices."""
    first, second, _ = action_table(max_numbers)
    canonical, _ = canonical_moves(max_numbers)
    return np.array([a for a in canonical if first[a] < max_numbers - 1 and second[a] < max_numbers - 1], dtype=np.int64)


@cache
def other_slots(m: int) -> np.ndarray:
    """For each ordered pair of slots ``i``, ``j`` (action order), the ``m - 2`` other slots, ascending."""
    pairs = list(zip(*pair_slots(m), strict=True))
    return np.array([[k for k in range(m) if k not in pair] for pair in pairs], dtype=np.int64).reshape(len(pairs), m - 2)


class _Moves(NamedTuple):
    """Every move from a batch of states and, for ``depth=2``, every move after it; computed once."""

    res: np.ndarray  # (n, A) each move's result
    legal: np.ndarray  # (n, A)
    left: np.ndarray  # (n, A, M-2) the numbers each move leaves, largest first
    left_present: np.ndarray  # (n, A, M-2)
    after: np.ndarray | None  # (n, A, M) each move's afterstate: numbers left, then the result
    after_count: np.ndarray | None  # (n, A)
    res2: np.ndarray | None  # (n, A, A) the results of the moves from each afterstate
    legal2: np.ndarray | None  # (n, A, A) legal, and only under a legal move


def _moves(vals: np.ndarray, count: np.ndarray, rules: Rules, depth: int) -> _Moves:
    vals = np.asarray(vals, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    res, legal = batch_moves(vals, count, rules, results=True)
    left, left_present = _numbers_left(vals, count)
    if depth < 2:
        return _Moves(res, legal, left, left_present, None, None, None, None)
    after, after_count = _afterstates(left, left_present, res, legal, count)
    res2, legal2 = batch_moves(after, after_count, rules, results=True)
    return _Moves(res, legal, left, left_present, after, after_count, res2, legal2 & legal[..., None])


def move_rows(
    moves: _Moves, target: np.ndarray, progress: np.ndarray, rules: Rules, lookahead: int, log_ratios: bool
) -> np.ndarray:
    """Feature rows ``(n, n_actions, row_size(M, lookahead, log_ratios))`` float32 of ``n`` states' precomputed moves.

    Row layout (``L`` = the rules' value limit or 2000, ``T`` = target, ``r`` = the move's
    result): legal; ``min(r / T, 4) / 4``; ``min(log(1 + r) / log(1 + L), 1)``; ``r == T``; for
    each of the ``M - 2`` slots the move leaves (numbers left, largest first): present,
    ``min(x / T, 4) / 4``, ``min(log(1 + x) / log(1 + L), 1)``; ``min(log(1 + T) / log(1 + L), 1)``;
    the fraction of moves made (``progress``). With ``lookahead=2`` three more columns, over the
    legal moves from the afterstate: some next result equals ``T``; ``min(|r' - T| / T, 1)`` of
    the closest next result ``r'`` (1 if none); the afterstate has a legal move. With
    ``log_ratios`` ``M - 1`` more: ``clip(log(x / T) / 4, -1, 1)`` for the result, then each
    number left as above (0 if absent or ``x <= 0``). Masked actions have an all-zero row but for
    the target and progress columns (the last two of the row).
    """
    res, legal = moves.res, moves.legal
    n, a = res.shape
    m = moves.left.shape[-1] + 2
    f = row_size(m, lookahead, log_ratios)
    limit = log_limit(rules)
    t = np.asarray(target, dtype=np.float64)
    t = np.where(t == 0, 1.0, t)[:, None]
    rows = np.zeros((n, a, f), dtype=np.float64)

    def ratio(x: np.ndarray, tt: np.ndarray) -> np.ndarray:
        return np.minimum(x / tt, 4.0) / 4.0

    def logv(x: np.ndarray) -> np.ndarray:
        return np.minimum(np.log1p(np.maximum(x, 0)) / limit, 1.0)

    r = res.astype(np.float64)
    rows[..., 0] = 1.0
    rows[..., 1] = ratio(r, t)
    rows[..., 2] = logv(r)
    rows[..., 3] = res == np.asarray(target)[:, None]
    left, left_present = moves.left.astype(np.float64), moves.left_present
    tt = t[:, :, None]
    rows[..., 4 : 4 + 3 * (m - 2) : 3] = left_present
    rows[..., 5 : 5 + 3 * (m - 2) : 3] = np.where(left_present, ratio(left, tt), 0.0)
    rows[..., 6 : 6 + 3 * (m - 2) : 3] = np.where(left_present, logv(left), 0.0)
    if lookahead == 2:
        res2, legal2 = moves.res2, moves.legal2
        hit = (legal2 & (res2 == np.asarray(target)[:, None, None])).any(-1)
        gap = np.where(legal2, np.minimum(np.abs(res2 - np.asarray(target)[:, None, None]) / t[:, :, None], 1.0), 1.0)
        base = 4 + 3 * (m - 2)
        rows[..., base] = hit
        rows[..., base + 1] = gap.min(-1)
        rows[..., base + 2] = legal2.any(-1)
    if log_ratios:
        base = 4 + 3 * (m - 2) + EXTRA_COLUMNS[lookahead]
        both = np.concatenate([r[..., None], np.where(left_present, left, 0.0)], axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.clip(np.log(both / t[:, :, None]) / 4.0, -1.0, 1.0)
        rows[..., base : base + m - 1] = np.where((both > 0) & (t[:, :, None] > 0), lr, 0.0)  # a target < 0: NaN
    rows[~legal] = 0.0
    rows[..., -2] = logv(t)
    rows[..., -1] = np.asarray(progress, dtype=np.float64)[:, None]
    return rows.astype(np.float32)


def observation_features(vals: np.ndarray, count: np.ndarray, target: np.ndarray, progress: np.ndarray, rules: Rules,
                         lookahead: int = 1, log_ratios: bool = False, children: bool = False) -> np.ndarray:
    """Flat observations ``(n, feature_size(M, lookahead, log_ratios, children))`` float32: every action's
    :func:`move_rows` row, then, with ``children``, the :func:`child_rows` block."""
    feature_size(np.shape(vals)[1], lookahead, log_ratios, children)  # checks the combination
    moves = _moves(vals, count, rules, 2 if children else lookahead)
    rows = move_rows(moves, target, progress, rules, lookahead, log_ratios)
    n = rows.shape[0]
    if not children:
        return rows.reshape(n, -1)
    kids = child_rows(moves, target, rules)
    return np.concatenate([rows.reshape(n, -1), kids.reshape(n, -1)], axis=-1)


def state_features(states: Sequence[Sequence[int]], targets: Sequence[int], progress: np.ndarray, max_numbers: int,
                   rules: Rules, lookahead: int, log_ratios: bool, children: bool = False) -> np.ndarray:
    """Flat move-feature observations (:func:`observation_features`) of the integer
    ``states`` (not read back from the observation, whose values saturate past ``value_scale``)."""
    vals = np.zeros((len(states), max_numbers), dtype=np.int64)
    for k, s in enumerate(states):
        vals[k, : len(s)] = s
    return observation_features(vals, np.array([len(s) for s in states]), np.array(targets, dtype=np.int64), progress,
                                rules, lookahead, log_ratios, children)


def log_limit(rules: Rules) -> float:
    return float(np.log1p(rules.value_limit or 2000))


def _numbers_left(vals: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numbers each action leaves, largest first (absent slots last), and which are present: ``(n, A, M-2)``."""
    other = other_slots(vals.shape[1])
    left = vals[:, other]  # (n, P, M-2)
    left_present = other[None] < count[:, None, None]
    order = np.argsort(np.where(left_present, -left, np.iinfo(np.int64).max), axis=-1, kind="stable")
    left = np.take_along_axis(left, order, axis=-1)
    left_present = np.take_along_axis(left_present, order, axis=-1)
    return np.repeat(left, len(OPERATORS), axis=1), np.repeat(left_present, len(OPERATORS), axis=1)


def _afterstates(
    left: np.ndarray, left_present: np.ndarray, res: np.ndarray, legal: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each action's afterstate ``(n, A, M)`` (numbers left largest first, then the result) and its count."""
    n, a = res.shape
    m = left.shape[-1] + 2
    after = np.zeros((n, a, m), dtype=np.int64)
    after[..., : m - 2] = np.where(left_present, left, 0).astype(np.int64)
    after_count = np.broadcast_to(count[:, None] - 1, (n, a))
    after[np.arange(n)[:, None], np.arange(a)[None, :], np.maximum(after_count - 1, 0)] = np.where(legal, res, 0)
    after[np.arange(m)[None, None, :] >= after_count[..., None]] = 0
    return after, after_count


def child_rows(moves: _Moves, target: np.ndarray, rules: Rules) -> np.ndarray:
    """The moves after each move of two-deep moves: ``(n, P, C, K)`` float32, ``(P, C, K) = child_shape(M)``.

    Parents are the :func:`canonical_moves` (a swapped ``+`` or ``*`` makes the same afterstate);
    children are the canonical moves on the parent's afterstate (numbers left largest first, then
    the result). A child row: legal; for each of the ``M - 2`` numbers the child move would leave
    (largest first): present, ``min(x / T, 4) / 4``, ``clip(log(x / T) / 4, -1, 1)`` (-1 if
    ``x <= 0``), ``x == T``; then ``min(log(T) / log(1 + L), 1)`` (exact, so that ``x * y == T``
    is a plane in the log-ratio columns). Children of an illegal parent, and illegal children,
    are all-zero rows. Nothing here looks further than two moves.
    """
    n, _, m = moves.after.shape
    parents, _ = canonical_moves(m)
    kids = _child_moves(m)
    after, after_count = moves.after[:, parents], moves.after_count[:, parents]
    res2, legal2 = moves.res2[:, parents][..., kids], moves.legal2[:, parents][..., kids]  # (n, P, C)
    other = other_slots(m)
    slots = other[kids // len(OPERATORS)]  # (C, M-2)
    nums = np.concatenate([after[:, :, slots], res2[..., None]], axis=-1)  # (n, P, C, M-1)
    present = slots[None, None] < after_count[..., None, None]
    here = np.concatenate([present, np.ones_like(present[..., :1])], axis=-1)
    order = np.argsort(np.where(here, -nums, np.iinfo(np.int64).max), axis=-1, kind="stable")[..., : m - 2]
    nums = np.take_along_axis(nums, order, axis=-1)
    here = np.take_along_axis(here, order, axis=-1) & legal2[..., None]
    tgt = np.asarray(target, dtype=np.int64)[:, None, None, None]
    t = np.where(tgt == 0, 1, tgt).astype(np.float64)
    x = nums.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        logr = np.where((x > 0) & (t > 0), np.clip(np.log(x / t) / 4.0, -1.0, 1.0), -1.0)
    per = np.stack([here, np.minimum(x / t, 4.0) / 4.0, logr, nums == tgt], axis=-1)  # (n, P, C, M-2, 4)
    per = np.where(here[..., None], per, 0.0)
    out = np.zeros((n, len(parents), len(kids), 2 + 4 * (m - 2)), dtype=np.float32)
    out[..., 0] = legal2
    out[..., 1:-1] = per.reshape(*legal2.shape, -1)
    out[..., -1] = np.where(legal2, np.minimum(np.log(np.maximum(t[..., 0], 1.0)) / log_limit(rules), 1.0), 0.0)
    return out
