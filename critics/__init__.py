"""Contrastive critics for Countdown: a learned score of "can the target still be reached?".

``load_critic()`` returns the shipped numerical critic (``checkpoints/v5``, ``docs/critics.md``);
``Critic.score(states, targets)`` is the cosine of each state's and its target's embeddings, in ``[-1, 1]``
(higher = more likely reachable).

Example:
    >>> from critics import load_critic
    >>> critic = load_critic()
    >>> critic.score([(20, 26), (80,)], [46, 46]).round(2)
    array([ 0.32, -0.37], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from critics.models import (
    CheckpointError,
    GoalScorer,
    ModelConfig,
    NumericalCriticV1,
    NumericalCriticV2,
    load_checkpoint,
    pack_sets,
)

SHIPPED_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "v5"  # load_critic()'s default (docs/critics.md)
V4_CHECKPOINT = SHIPPED_CHECKPOINT.parent / "v4"  # earlier defaults (v4: no two-move pool, faster), kept
V3_CHECKPOINT = SHIPPED_CHECKPOINT.parent / "v3"  # for the results that name them
V2_CHECKPOINT = SHIPPED_CHECKPOINT.parent / "v2"


class Critic(GoalScorer):
    """A loaded numerical critic, ready for batched, gradient-free scoring on CPU."""

    config: ModelConfig
    model: NumericalCriticV1 | NumericalCriticV2

    @property
    def version(self) -> str:
        return self.config.version

    def __repr__(self) -> str:
        return f"Critic(version={self.version!r}, path={str(self.path) if self.path else None!r})"

    @torch.no_grad()
    def embed_states(self, states: Sequence[Sequence[int]], initial: Sequence[Sequence[int]] | None = None) -> np.ndarray:
        """L2-normalised state embeddings ``[N, out_dim]`` (V1 also needs the initial numbers)."""
        v, m = (torch.from_numpy(a) for a in pack_sets(states, self.config.max_numbers))
        if isinstance(self.model, NumericalCriticV2):
            return self.model.embed_states(v, m).numpy()
        if initial is None:
            raise ValueError("a V1 critic scores (initial numbers, state) pairs: pass initial=[...] for every state")
        if len(initial) != len(states):
            raise ValueError(f"got {len(states)} states but {len(initial)} initial number sets")
        iv, im = (torch.from_numpy(a) for a in pack_sets(initial, self.config.max_numbers))
        return self.model.embed_state_actions(iv, im, v, m).numpy()

    def _embed_goal_values(self, values: torch.Tensor) -> torch.Tensor:
        if isinstance(self.model, NumericalCriticV2):
            return super()._embed_goal_values(values)
        pad = (0, self.config.max_numbers - 1)  # a V1 goal is a number set: here [target], padded
        return self.model.embed_goals(F.pad(values[:, None], pad), F.pad(torch.ones(len(values), 1), pad))

    def score(self, states: Sequence[Sequence[int]], targets: Sequence[int],
              initial: Sequence[Sequence[int]] | None = None, batch_size: int = 8192) -> np.ndarray:
        """Cosine of each number set ``states[i]`` (any order) and its target, ``float32 [N]`` in ``[-1, 1]``; a V1
        critic also needs ``initial[i]``, the puzzle's starting numbers."""
        self._check_pairs(states, targets)
        return self._cosines(lambda lo, hi: self.embed_states(states[lo:hi], None if initial is None else initial[lo:hi]),
                             targets, batch_size)

    def probability(self, states: Sequence[Sequence[int]], targets: Sequence[int], **kw: Any) -> np.ndarray:
        """P(target reachable): ``sigmoid(a * score + b)``, the calibration ``python -m critics.train`` fits on
        validation states; ``ValueError`` for a checkpoint without one."""
        cal = self.meta.get("calibration")
        if not cal:
            raise ValueError(f"checkpoint {self.path} has no 'calibration' entry in its config.json")
        z = cal["a"] * self.score(states, targets, **kw).astype(np.float64) + cal["b"]
        return 1.0 / (1.0 + np.exp(-z))


def load_critic(path: str | Path | None = None) -> Critic:
    """Load a critic checkpoint directory (``None``: the shipped one); :class:`CheckpointError` naming the file and
    the problem for a missing or incompatible one."""
    d = SHIPPED_CHECKPOINT if path is None else path
    model, meta = load_checkpoint(d)
    return Critic(model, meta, Path(d))


def load_state_critic(path: str | Path | None = None) -> Critic:
    """:func:`load_critic` for the dense rewards, which score ``(state, target)`` pairs: a V2 critic only."""
    critic = load_critic(path)
    if critic.version != "v2":
        raise CheckpointError(f"the dense critic rewards score (state, target) pairs and need a V2 critic checkpoint; "
                              f"{critic.path} holds a {critic.version} critic")
    return critic


__all__ = [
    "SHIPPED_CHECKPOINT", "V2_CHECKPOINT", "V3_CHECKPOINT", "V4_CHECKPOINT", "CheckpointError", "Critic", "load_critic",
    "load_state_critic"
]
