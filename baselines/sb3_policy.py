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

``MoveFeatures`` is the single-env observation wrapper over the same function.
``PerActionPolicy`` scores every row with one shared network, so what is learned about a move
carries over to the same move in any slot pair.
"""

from __future__ import annotations

from functools import cache

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from countdown_gym.envs.countdown import action_table, move_results, num_actions
from countdown_gym.rules import OPERATORS, Rules

LOOKAHEADS = (1, 2)
EXTRA_COLUMNS = {1: 0, 2: 3}
"""Feature columns each lookahead adds after the lookahead-1 row."""


def row_size(max_numbers: int, lookahead: int = 1, log_ratios: bool = False) -> int:
    """Length of one action's feature row."""
    if lookahead not in LOOKAHEADS:
        raise ValueError(f"lookahead must be one of {LOOKAHEADS}, got {lookahead!r}")
    return 4 + 3 * (max_numbers - 2) + 2 + EXTRA_COLUMNS[lookahead] + (max_numbers - 1) * bool(log_ratios)


@cache
def _pair_slots(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slots ``i``, ``j`` of each ordered pair (action order) and the ``m - 2`` other slots, ascending."""
    first, second, _ = action_table(m)
    n_ops = len(OPERATORS)
    pi = np.array(first[::n_ops], dtype=np.int64)
    pj = np.array(second[::n_ops], dtype=np.int64)
    other = np.array([[k for k in range(m) if k not in (i, j)] for i, j in zip(pi, pj, strict=True)], dtype=np.int64)
    return pi, pj, other.reshape(len(pi), m - 2)


def _bounds(rules: Rules) -> tuple[float, float]:
    lo = {"positive": 1, "nonnegative": 0}.get(rules.sign, -np.inf)
    hi = np.inf if rules.value_limit is None else rules.value_limit
    return lo, hi


def batch_move_results(vals: np.ndarray, count: np.ndarray, rules: Rules) -> tuple[np.ndarray, np.ndarray]:
    """``(results, legal)`` of every action from each state, both ``(..., n_actions)``.

    ``vals`` is ``(..., M)`` int64 (slot values, the first ``count`` present), ``count`` its
    leading shape. Integer-only rules; agrees with :func:`countdown_gym.envs.countdown.move_results`.
    """
    if not rules.integer_only:
        raise ValueError(f"batched move features need integer_only rules, got {rules.name!r}")
    m = vals.shape[-1]
    pi, pj, _ = _pair_slots(m)
    x, y = vals[..., pi], vals[..., pj]
    present = (pi < count[..., None]) & (pj < count[..., None])
    safe = np.where(y == 0, 1, y)
    q, rem = np.divmod(x, safe)
    res = np.stack([x + y, x - y, x * y, q], axis=-1)
    lo, hi = _bounds(rules)
    ok = (res >= lo) & (res < hi) & present[..., None]
    ok[..., 3] &= (y != 0) & (rem == 0)
    shape = (*vals.shape[:-1], 4 * len(pi))
    return res.reshape(shape), ok.reshape(shape)


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
    the target and progress columns (always the last two).
    """
    vals = np.asarray(vals, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    n, m = vals.shape
    f = row_size(m, lookahead, log_ratios)
    log_limit = float(np.log1p(rules.value_limit or 2000))
    t = np.asarray(target, dtype=np.float64)
    t = np.where(t == 0, 1.0, t)[:, None]
    pi, pj, other = _pair_slots(m)
    res, legal = batch_move_results(vals, count, rules)  # (n, A)
    a = res.shape[1]
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
    # the numbers each pair leaves, largest first (absent slots last)
    left = vals[:, other]  # (n, P, M-2)
    left_present = other[None] < count[:, None, None]
    order = np.argsort(np.where(left_present, -left, np.iinfo(np.int64).max), axis=-1, kind="stable")
    left = np.take_along_axis(left, order, axis=-1)
    left_present = np.take_along_axis(left_present, order, axis=-1)
    left = np.repeat(left, 4, axis=1).astype(np.float64)  # (n, A, M-2): one copy per operator
    left_present = np.repeat(left_present, 4, axis=1)
    tt = t[:, :, None]
    rows[..., 4 : 4 + 3 * (m - 2) : 3] = left_present
    rows[..., 5 : 5 + 3 * (m - 2) : 3] = np.where(left_present, ratio(left, tt), 0.0)
    rows[..., 6 : 6 + 3 * (m - 2) : 3] = np.where(left_present, logv(left), 0.0)
    if lookahead == 2:
        # afterstate of each action: the numbers left (largest first), then the result
        after = np.zeros((n, a, m), dtype=np.int64)
        after[..., : m - 2] = np.where(left_present, left, 0).astype(np.int64)
        after_count = np.broadcast_to(count[:, None] - 1, (n, a))
        slot = np.arange(m)
        rows_idx = np.arange(n)[:, None]
        acts = np.arange(a)[None, :]
        after[rows_idx, acts, after_count - 1] = np.where(legal, res, 0)
        after[slot[None, None, :] >= after_count[..., None]] = 0
        res2, legal2 = batch_move_results(after, after_count, rules)  # (n, A, A)
        legal2 &= legal[..., None]
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


class MoveFeatures(gym.ObservationWrapper):
    """Observation: ``(n_actions * F,)`` float32, row ``a`` describing action ``a`` (see :func:`move_features`).

    Integer-only rules use :func:`move_features`; rational rules (``tinyzero``) use a per-move
    Python loop with the same lookahead-1 layout.
    """

    def __init__(self, env: gym.Env, lookahead: int = 1, log_ratios: bool = False) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.m = base.max_numbers
        self.rules: Rules = base.rules
        if not self.rules.integer_only and (lookahead != 1 or log_ratios):
            raise ValueError("lookahead > 1 and log_ratios need integer_only rules")
        self.lookahead, self.log_ratios = lookahead, log_ratios
        self.n_actions = num_actions(self.m)
        self.row = row_size(self.m, lookahead, log_ratios)
        self.log_limit = float(np.log1p(self.rules.value_limit or 2000))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(self.n_actions * self.row,), dtype=np.float32)
        pi, pj, _ = _pair_slots(self.m)
        self._pairs = [(int(i), int(j)) for i, j in zip(pi, pj, strict=True) for _ in OPERATORS]

    def observation(self, observation: np.ndarray) -> np.ndarray:
        base = self.env.unwrapped
        state = tuple(base.state)
        target = base.problem.target
        if self.rules.integer_only:
            vals = np.zeros((1, self.m), dtype=np.int64)
            vals[0, : len(state)] = state
            rows = move_features(vals, np.array([len(state)]), np.array([target]), np.array([observation[-1]]),
                                 self.rules, self.lookahead, self.log_ratios)
            return rows.reshape(-1)
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


class _PerActionExtractor(nn.Module):
    """One trunk over every action's row; logits from each row, the value from their mean."""

    def __init__(self, n_actions: int, row: int, hidden: int, activation: str = "tanh") -> None:
        super().__init__()
        self.n_actions, self.row = n_actions, row
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = hidden
        act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
        self.trunk = nn.Sequential(nn.Linear(row, hidden), act(), nn.Linear(hidden, hidden), act())
        self.score = nn.Linear(hidden, 1)

    def _rows(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = features.view(-1, self.n_actions, self.row)
        return self.trunk(rows), rows[..., :1]

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
    ``activation`` (``"tanh"`` or ``"relu"``) is their non-linearity.
    """

    def __init__(self, *args, hidden: int = 128, activation: str = "tanh", **kwargs) -> None:
        self.hidden, self.activation = hidden, activation
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        n = int(self.action_space.n)
        dim = int(np.prod(self.observation_space.shape))
        if dim % n:
            raise ValueError(f"PerActionPolicy needs MoveFeatures observations: {dim} features do not split into {n} actions")
        self.mlp_extractor = _PerActionExtractor(n, dim // n, self.hidden, self.activation)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
