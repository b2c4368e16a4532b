"""The numeric baseline's observation features and per-action policy for MaskablePPO.

:func:`move_features` turns a batch of Countdown-v0 states into one feature row per action,
describing what that move would make, computed with numpy over the whole batch.
``lookahead`` fixes how far the features look, and nothing looks further (no solver, no
reachability, no search):

* ``lookahead=1`` (the original features): the move's result relative to the target and the
  numbers it leaves, i.e. the afterstate one rules-checked move ahead, as the action mask is;
* ``lookahead=2``: also, over every legal next move from that afterstate (two moves ahead):
  whether one of them makes the target exactly, how close the closest next result gets to the
  target, and whether the afterstate has a legal move at all. With three numbers left this makes
  the rest of the game exact; from four numbers it does not decide whether the target can still
  be reached (that needs a third move).

``log_ratios=True`` adds one more encoding of the same afterstate: ``log(x / T) / 4`` for its
result and each number left, under which the sums and products that make the target lie on
simple planes (a re-encoding, no further look ahead).

``children=True`` (with ``lookahead=2``) gives the same two-moves-ahead view raw instead of
summarised: after the action rows comes one small row per legal next move from each move's
afterstate, describing the numbers that next move would leave (:func:`child_features`). The
policy pools over them with a learned network (``PerActionPolicy(children=True)``), so it has to
learn the last move's arithmetic itself; the features still look no further than two moves.
Swapped ``+`` and ``*`` moves make the same afterstate, so children are listed once per
:func:`canonical_moves` move (36 parents x 18 children for four numbers).

``MoveFeatures`` is the single-env observation wrapper over the same function.
``PerActionPolicy`` scores every row with one shared network, so what is learned about a move
carries over to the same move in any slot pair.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from countdown_gym.envs.actions import action_table, move_results, num_actions
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
    """``(parent moves, children per parent, columns per child)`` of :func:`child_features`."""
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
def _pair_slots(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slots ``i``, ``j`` of each ordered pair (action order) and the ``m - 2`` other slots, ascending."""
    pi, pj = pair_slots(m)
    other = np.array([[k for k in range(m) if k not in (i, j)] for i, j in zip(pi, pj, strict=True)], dtype=np.int64)
    return pi, pj, other.reshape(len(pi), m - 2)


def move_features(
    vals: np.ndarray,
    count: np.ndarray,
    target: np.ndarray,
    progress: np.ndarray,
    rules: Rules,
    lookahead: int = 1,
    log_ratios: bool = False,
) -> np.ndarray:
    """Feature rows ``(n, n_actions, row_size(M, lookahead, log_ratios))`` float32 of ``n`` states.

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
    return _move_rows(_moves(vals, count, rules, lookahead), target, progress, rules, lookahead, log_ratios)


class _Moves(NamedTuple):
    """Every move from a batch of states and, for ``depth=2``, every move after it; computed once."""

    count: np.ndarray  # (n,) numbers in each state
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
        return _Moves(count, res, legal, left, left_present, None, None, None, None)
    after, after_count = _afterstates(left, left_present, res, legal, count)
    res2, legal2 = batch_moves(after, after_count, rules, results=True)
    return _Moves(count, res, legal, left, left_present, after, after_count, res2, legal2 & legal[..., None])


def _move_rows(
    moves: _Moves, target: np.ndarray, progress: np.ndarray, rules: Rules, lookahead: int, log_ratios: bool
) -> np.ndarray:
    """:func:`move_features` of precomputed moves."""
    res, legal = moves.res, moves.legal
    n, a = res.shape
    m = moves.left.shape[-1] + 2
    f = row_size(m, lookahead, log_ratios)
    log_limit = _log_limit(rules)
    t = np.asarray(target, dtype=np.float64)
    t = np.where(t == 0, 1.0, t)[:, None]
    rows = np.zeros((n, a, f), dtype=np.float64)

    def ratio(x: np.ndarray, tt: np.ndarray) -> np.ndarray:
        return np.minimum(x / tt, 4.0) / 4.0

    def logv(x: np.ndarray) -> np.ndarray:
        return np.minimum(np.log1p(np.maximum(x, 0)) / log_limit, 1.0)

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
        rows[..., base : base + m - 1] = np.where(both > 0, lr, 0.0)
    rows[~legal] = 0.0
    rows[..., -2] = logv(t)
    rows[..., -1] = np.asarray(progress, dtype=np.float64)[:, None]
    return rows.astype(np.float32)


def observation_features(
    vals: np.ndarray,
    count: np.ndarray,
    target: np.ndarray,
    progress: np.ndarray,
    rules: Rules,
    lookahead: int = 1,
    log_ratios: bool = False,
    children: bool = False,
) -> np.ndarray:
    """Flat observations ``(n, feature_size(M, lookahead, log_ratios, children))`` float32.

    Every action's :func:`move_features` row, then, with ``children``, the
    :func:`child_features` block, flattened.
    """
    feature_size(np.shape(vals)[1], lookahead, log_ratios, children)  # checks the combination
    moves = _moves(vals, count, rules, 2 if children else lookahead)
    rows = _move_rows(moves, target, progress, rules, lookahead, log_ratios)
    n = rows.shape[0]
    if not children:
        return rows.reshape(n, -1)
    kids = _child_rows(moves, target, rules)
    return np.concatenate([rows.reshape(n, -1), kids.reshape(n, -1)], axis=-1)


def _log_limit(rules: Rules) -> float:
    return float(np.log1p(rules.value_limit or 2000))


def _numbers_left(vals: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numbers each action leaves, largest first (absent slots last), and which are present: ``(n, A, M-2)``."""
    _, _, other = _pair_slots(vals.shape[1])
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


def child_features(vals: np.ndarray, count: np.ndarray, target: np.ndarray, rules: Rules) -> np.ndarray:
    """The moves after each move: ``(n, P, C, K)`` float32, ``(P, C, K) = child_shape(M)``.

    Parents are the :func:`canonical_moves` (a swapped ``+`` or ``*`` makes the same afterstate);
    children are the canonical moves on the parent's afterstate (numbers left largest first, then
    the result). A child row: legal; for each of the ``M - 2`` numbers the child move would leave
    (largest first): present, ``min(x / T, 4) / 4``, ``clip(log(x / T) / 4, -1, 1)`` (-1 if
    ``x <= 0``), ``x == T``; then ``min(log(T) / log(1 + L), 1)`` (exact, so that ``x * y == T``
    is a plane in the log-ratio columns). Children of an illegal parent, and illegal children,
    are all-zero rows. Nothing here looks further than two moves.
    """
    return _child_rows(_moves(vals, count, rules, 2), target, rules)


def _child_rows(moves: _Moves, target: np.ndarray, rules: Rules) -> np.ndarray:
    """:func:`child_features` of precomputed two-deep moves."""
    n, _, m = moves.after.shape
    parents, _ = canonical_moves(m)
    kids = _child_moves(m)
    after, after_count = moves.after[:, parents], moves.after_count[:, parents]
    res2, legal2 = moves.res2[:, parents][..., kids], moves.legal2[:, parents][..., kids]  # (n, P, C)
    _, _, other = _pair_slots(m)
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
        logr = np.where(x > 0, np.clip(np.log(x / t) / 4.0, -1.0, 1.0), -1.0)
    per = np.stack([here, np.minimum(x / t, 4.0) / 4.0, logr, nums == tgt], axis=-1)  # (n, P, C, M-2, 4)
    per = np.where(here[..., None], per, 0.0)
    out = np.zeros((n, len(parents), len(kids), 2 + 4 * (m - 2)), dtype=np.float32)
    out[..., 0] = legal2
    out[..., 1:-1] = per.reshape(*legal2.shape, -1)
    out[..., -1] = np.where(legal2, np.minimum(np.log(np.maximum(t[..., 0], 1.0)) / _log_limit(rules), 1.0), 0.0)
    return out


class MoveFeatures(gym.ObservationWrapper):
    """Observation: ``(n_actions * F,)`` float32, row ``a`` describing action ``a`` (see :func:`move_features`).

    Integer-only rules use :func:`move_features`; rational rules (``tinyzero``) use a per-move
    Python loop with the same lookahead-1 layout.
    """

    def __init__(self, env: gym.Env, lookahead: int = 1, log_ratios: bool = False, children: bool = False) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.m = base.max_numbers
        self.rules: Rules = base.rules
        if not self.rules.integer_only and (lookahead != 1 or log_ratios or children):
            raise ValueError("lookahead > 1, log_ratios and children need integer_only rules")
        self.lookahead, self.log_ratios, self.children = lookahead, log_ratios, children
        self.n_actions = num_actions(self.m)
        self.row = row_size(self.m, lookahead, log_ratios)
        self.log_limit = _log_limit(self.rules)
        size = feature_size(self.m, lookahead, log_ratios, children)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(size,), dtype=np.float32)
        pi, pj, _ = _pair_slots(self.m)
        self._pairs = [(int(i), int(j)) for i, j in zip(pi, pj, strict=True) for _ in OPERATORS]

    def observation(self, observation: np.ndarray) -> np.ndarray:
        base = self.env.unwrapped
        state = tuple(base.state)
        target = base.problem.target
        if self.rules.integer_only:
            vals = np.zeros((1, self.m), dtype=np.int64)
            vals[0, : len(state)] = state
            obs = observation_features(vals, np.array([len(state)]), np.array([target]), np.array([observation[-1]]),
                                       self.rules, self.lookahead, self.log_ratios, self.children)
            return obs.reshape(-1)
        return self._python_rows(state, target, float(observation[-1])).reshape(-1)

    def _num(self, x: float, target: float) -> tuple[float, float]:
        return min(x / target, 4.0) / 4.0, min(float(np.log1p(max(x, 0.0))) / self.log_limit, 1.0)

    def _python_rows(self, state: tuple, target: object, progress: float) -> np.ndarray:
        t = float(target) or 1.0
        rows = np.zeros((self.n_actions, self.row), dtype=np.float32)
        rows[:, -2] = min(float(np.log1p(t)) / self.log_limit, 1.0)
        rows[:, -1] = progress
        for a, r in enumerate(move_results(state, self.rules, self.m)):
            if r is None:
                continue
            i, j = self._pairs[a]
            row = rows[a]
            row[0] = 1.0
            row[1], row[2] = self._num(float(r), t)
            row[3] = float(r == target)
            left = sorted((float(x) for k, x in enumerate(state) if k not in (i, j)), reverse=True)
            for k, x in enumerate(left):
                row[4 + 3 * k] = 1.0
                row[5 + 3 * k], row[6 + 3 * k] = self._num(x, t)
        return rows


class _SegmentMax(torch.autograd.Function):
    """Max over consecutive segments of rows (0 for an empty segment); tied maxima share the gradient.

    The same values and gradients as ``scatter_reduce(..., "amax")``, in about 80% of its time on CPU.
    ``torch.segment_reduce`` alone is faster still but gives every tied row the full gradient.
    """

    @staticmethod
    def forward(ctx, rows: torch.Tensor, owner: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        pooled = torch.segment_reduce(rows, "max", lengths=counts, unsafe=True)
        pooled = pooled.masked_fill((counts == 0)[:, None], 0.0)
        ctx.save_for_backward(rows, owner, pooled)
        return pooled

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        rows, owner, pooled = ctx.saved_tensors
        hit = (rows == pooled.index_select(0, owner)).to(rows.dtype)
        ties = torch.zeros_like(pooled).index_add_(0, owner, hit).clamp(min=1.0)
        return grad.index_select(0, owner) * hit / ties.index_select(0, owner), None, None


class _PerActionExtractor(nn.Module):
    """One trunk over every action's row; logits from each row, the value from their mean.

    With ``children`` the observation ends in the :func:`child_features` block: a shared network
    embeds each legal child, the embeddings are max-pooled per parent move, and the trunk reads
    each action's row with the pooled vector of its canonical twin.
    """

    def __init__(
        self, n_actions: int, dim: int, hidden: int, activation: str = "tanh", children: bool = False,
        child_hidden: int | None = None,
    ) -> None:
        super().__init__()
        self.n_actions = n_actions
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = hidden
        act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
        self.child_dims = None
        kid_size = 0
        if children:
            m = next((k for k in range(2, 64) if num_actions(k) == n_actions), None)
            if m is None:
                raise ValueError(f"{n_actions} actions is not a Countdown-v0 action space")
            self.child_dims = child_shape(m)
            kid_size = int(np.prod(self.child_dims))
            self.register_buffer("twin", torch.as_tensor(canonical_moves(m)[1]), persistent=False)
            kid_width = child_hidden or hidden
            self.child_net = nn.Sequential(
                nn.Linear(self.child_dims[2], kid_width), act(), nn.Linear(kid_width, kid_width), act()
            )
        if (dim - kid_size) % n_actions or dim <= kid_size:
            raise ValueError(
                f"PerActionPolicy needs MoveFeatures observations: {dim} features do not split into {n_actions} "
                f"action rows{' and the child block' if children else ''}"
            )
        self.row = (dim - kid_size) // n_actions
        pooled = (child_hidden or hidden) if children else 0
        self.trunk = nn.Sequential(nn.Linear(self.row + pooled, hidden), act(), nn.Linear(hidden, hidden), act())
        self.score = nn.Linear(hidden, 1)

    def pooled_children(self, features: torch.Tensor) -> torch.Tensor:
        """``(batch, parents, width)``: the max of each canonical parent's embedded legal children (0 if none)."""
        parents, per_parent, columns = self.child_dims
        kids = features[:, self.n_actions * self.row :].reshape(-1, columns)
        legal = kids[:, 0] > 0
        emb = self.child_net(kids[legal])  # only the legal children, grouped by parent in order
        owner = torch.div(legal.nonzero().squeeze(1), per_parent, rounding_mode="floor")
        pooled = _SegmentMax.apply(emb, owner, legal.view(-1, per_parent).sum(1))
        return pooled.view(features.shape[0], parents, -1)

    def _rows(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = features.shape[0]
        rows = features[:, : self.n_actions * self.row].reshape(b, self.n_actions, self.row)
        x = rows
        if self.child_dims:
            x = torch.cat([rows, self.pooled_children(features)[:, self.twin]], dim=-1)
        return self.trunk(x), rows[..., :1]

    def _pool(self, h: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return (h * legal).sum(1) / legal.sum(1).clamp(min=1.0)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        h, _ = self._rows(features)
        return self.score(h).squeeze(-1)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        h, legal = self._rows(features)
        return self._pool(h, legal)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, legal = self._rows(features)
        return self.score(h).squeeze(-1), self._pool(h, legal)


class PerActionPolicy(MaskableActorCriticPolicy):
    """Masked actor-critic whose logits come from one network shared by all actions.

    Needs :class:`MoveFeatures` observations. ``hidden`` (policy kwarg) sizes both networks,
    ``activation`` (``"tanh"`` or ``"relu"``) is their non-linearity, ``children``
    (for ``children=True`` features) adds the pooled child network, ``child_hidden`` its width
    (``None``: ``hidden``).
    """

    def __init__(
        self, *args, hidden: int = 128, activation: str = "tanh", children: bool = False,
        child_hidden: int | None = None, **kwargs
    ) -> None:
        self.hidden, self.activation, self.with_children = hidden, activation, bool(children)
        self.child_hidden = child_hidden
        super().__init__(*args, **kwargs)

    def _get_constructor_parameters(self) -> dict:
        data = super()._get_constructor_parameters()
        data.update(hidden=self.hidden, activation=self.activation, children=self.with_children,
                    child_hidden=self.child_hidden)
        return data

    def _build_mlp_extractor(self) -> None:
        n = int(self.action_space.n)
        dim = int(np.prod(self.observation_space.shape))
        self.mlp_extractor = _PerActionExtractor(
            n, dim, self.hidden, self.activation, self.with_children, self.child_hidden
        )

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)


LEGACY_MODULE = "sb3_policy"
"""The bare module name that models saved before ``baselines`` was a package refer to (their pickled policy class)."""


def load_model(path: str | Path, **kwargs: Any) -> Any:
    """``MaskablePPO.load(path, **kwargs)``, also for a model saved before ``baselines`` became a package.

    New saves name this module ``baselines.sb3.policy``; older ones name a bare ``sb3_policy``, which is
    registered as an alias of this module (the same module object) before loading.
    """
    from sb3_contrib import MaskablePPO

    sys.modules.setdefault(LEGACY_MODULE, sys.modules[__name__])
    return MaskablePPO.load(path, **kwargs)
