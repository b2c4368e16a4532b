"""The numeric baseline's policy for MaskablePPO (``PerActionPolicy``: one network shared by every action's feature
row, so what is learned about a move carries over to any slot pair), its single-env observation wrapper
(``MoveFeatures``) and :func:`load_model` (also for a model saved when this module had another name)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from baselines.sb3.features import (
    canonical_moves,
    child_shape,
    feature_size,
    log_limit,
    row_size,
    state_features,
)
from countdown_gym.envs.actions import decode_action, move_results, num_actions
from countdown_gym.game.rules import Rules


class MoveFeatures(gym.ObservationWrapper):
    """Observation: ``(n_actions * F,)`` float32, row ``a`` describing action ``a`` (see :func:`move_rows`);
    rational rules (``tinyzero``) get the lookahead-1 layout from a per-move Python loop."""

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
        self.log_limit = log_limit(self.rules)
        size = feature_size(self.m, lookahead, log_ratios, children)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(size,), dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        base = self.env.unwrapped
        state = tuple(base.state)
        target = base.problem.target
        if self.rules.integer_only:
            return state_features([state], [target], observation[-1:], self.m, self.rules, self.lookahead,
                                  self.log_ratios, self.children).reshape(-1)
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
            i, j, _ = decode_action(a, self.m)
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
    """Max over consecutive segments of rows (0 for an empty segment); tied maxima share the gradient, as with
    ``scatter_reduce(..., "amax")`` (in 80% of its time on CPU; ``torch.segment_reduce`` alone gives each the whole)."""

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
    """One trunk over every action's row; logits from each row, the value from their mean. With ``children`` a shared
    network embeds each legal child of the :func:`child_rows` block, max-pooled per parent move, and the trunk
    reads each action's row with the pooled vector of its canonical twin."""

    def __init__(self, n_actions: int, dim: int, hidden: int, activation: str = "tanh", children: bool = False,
                 child_hidden: int | None = None) -> None:
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
        x = torch.cat([rows, self.pooled_children(features)[:, self.twin]], dim=-1) if self.child_dims else rows
        return self.trunk(x), rows[..., :1]

    def _pool(self, h: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return (h * legal).sum(1) / legal.sum(1).clamp(min=1.0)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return self.score(self._rows(features)[0]).squeeze(-1)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self._pool(*self._rows(features))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, legal = self._rows(features)
        return self.score(h).squeeze(-1), self._pool(h, legal)


class PerActionPolicy(MaskableActorCriticPolicy):
    """Masked actor-critic whose logits come from one network shared by all actions, on :class:`MoveFeatures`
    observations. Policy kwargs: ``hidden`` sizes both networks, ``activation`` (``"tanh"`` or ``"relu"``),
    ``children`` (for ``children=True`` features) adds the pooled child network, ``child_hidden`` its width
    (``None``: ``hidden``)."""

    def __init__(self, *args, hidden: int = 128, activation: str = "tanh", children: bool = False,
                 child_hidden: int | None = None, **kwargs) -> None:
        self.hidden, self.activation, self.with_children = hidden, activation, bool(children)
        self.child_hidden = child_hidden
        super().__init__(*args, **kwargs)

    def _get_constructor_parameters(self) -> dict:
        data = super()._get_constructor_parameters()
        data.update(hidden=self.hidden, activation=self.activation, children=self.with_children,
                    child_hidden=self.child_hidden)
        return data

    def _build_mlp_extractor(self) -> None:
        dim = int(np.prod(self.observation_space.shape))
        self.mlp_extractor = _PerActionExtractor(int(self.action_space.n), dim, self.hidden, self.activation,
                                                 self.with_children, self.child_hidden)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)


LEGACY_MODULES = ("sb3_policy", "baselines.sb3_policy")
"""Where models saved before ``baselines/sb3/`` existed say :class:`PerActionPolicy` lives: a bare ``sb3_policy``
(the scripts' own folder on ``sys.path``) or ``baselines.sb3_policy``."""


def saved_policy_module(path: str | Path) -> str | None:
    """The module that the policy class of the SB3 save ``path`` (``.zip`` optional) names (None if unreadable)."""
    p = Path(path)
    try:
        with zipfile.ZipFile(p if p.suffix == ".zip" or p.is_file() else p.with_suffix(".zip")) as z:
            policy = json.loads(z.read("data")).get("policy_class")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return policy.get("__module__") if isinstance(policy, dict) else None


def load_model(path: str | Path, **kwargs: Any) -> Any:
    """``MaskablePPO.load(path, **kwargs)``; a save whose policy class one of :data:`LEGACY_MODULES` names gets this
    :class:`PerActionPolicy` through SB3's ``custom_objects`` (unless the caller passes a ``policy_class`` there), so
    its pickled class is never looked up."""
    from sb3_contrib import MaskablePPO

    custom = dict(kwargs.pop("custom_objects", None) or {})
    if "policy_class" not in custom and saved_policy_module(path) in LEGACY_MODULES:
        custom["policy_class"] = PerActionPolicy
    return MaskablePPO.load(path, custom_objects=custom, **kwargs)
