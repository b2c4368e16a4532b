"""The numeric baseline's observation features and per-action policy for MaskablePPO.

``MoveFeatures`` turns a Countdown-v0 state into one feature row per action, describing what
that move would make (its result relative to the target and the numbers it would leave), all
computed one rules-checked move ahead, as the action mask is; no solver is consulted.
``PerActionPolicy`` scores every row with one shared network, so what is learned about a move
carries over to the same move in any slot pair.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from countdown_gym.envs.countdown import move_results, num_actions


class MoveFeatures(gym.ObservationWrapper):
    """Observation: ``(n_actions * F,)`` float32, row ``a`` describing action ``a``.

    Row layout (``M`` = max numbers, ``L`` = the rules' value limit or 2000, ``T`` = target):
    legal; ``min(r / T, 4) / 4``; ``log(1 + r) / log(1 + L)``; ``r == T`` for the move's result
    ``r``; then for each of the ``M - 2`` numbers the move leaves (largest first): present,
    ``min(x / T, 4) / 4``, ``log(1 + x) / log(1 + L)``; then ``log(1 + T) / log(1 + L)`` and the
    fraction of moves made. Masked actions have an all-zero row but for the last two entries.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.m = base.max_numbers
        self.n_actions = num_actions(self.m)
        self.row = 4 + 3 * (self.m - 2) + 2
        self.log_limit = float(np.log1p(base.rules.value_limit or 2000))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(self.n_actions * self.row,), dtype=np.float32)
        from countdown_gym.envs.countdown import decode_action

        self._pairs = [decode_action(a, self.m)[:2] for a in range(self.n_actions)]

    def _num(self, x: float, target: float) -> tuple[float, float]:
        return min(x / target, 4.0) / 4.0, min(float(np.log1p(max(x, 0.0))) / self.log_limit, 1.0)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        base = self.env.unwrapped
        state = tuple(base.state)
        target = base.problem.target
        t = float(target) or 1.0
        rows = np.zeros((self.n_actions, self.row), dtype=np.float32)
        rows[:, -2] = min(float(np.log1p(t)) / self.log_limit, 1.0)
        rows[:, -1] = observation[-1]
        for a, r in enumerate(move_results(state, base.problem.rules, self.m)):
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
        return rows.reshape(-1)


class _PerActionExtractor(nn.Module):
    """One trunk over every action's row; logits from each row, the value from their mean."""

    def __init__(self, n_actions: int, row: int, hidden: int) -> None:
        super().__init__()
        self.n_actions, self.row = n_actions, row
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = hidden
        self.trunk = nn.Sequential(nn.Linear(row, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
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

    Needs :class:`MoveFeatures` observations. ``hidden`` (policy kwarg) sizes both networks.
    """

    def __init__(self, *args, hidden: int = 128, **kwargs) -> None:
        self.hidden = hidden
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        n = int(self.action_space.n)
        dim = int(np.prod(self.observation_space.shape))
        if dim % n:
            raise ValueError(f"PerActionPolicy needs MoveFeatures observations: {dim} features do not split into {n} actions")
        self.mlp_extractor = _PerActionExtractor(n, dim // n, self.hidden)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
