"""Contrastive critics for Countdown: a learned score of "can the target still be reached?".

``load_critic()`` returns the shipped numerical critic (``critics/checkpoints/v5``: the paper's V2
architecture with pools over one- and two-move descendants, trained on states of 1-4 numbers under today's
``Rules.longproc()``; see ``docs/critics.md``);
``Critic.score(states, targets)`` is the cosine similarity of each state's embedding and its
target's embedding, in ``[-1, 1]`` (higher = more likely reachable).

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

from critics.clipo import CLIPOHead, CLIPOTrainer, clipo_loss, clipo_rewards, mean_pool  # noqa: F401
from critics.models import (
    CheckpointError,
    ModelConfig,
    NumericalCriticV1,
    NumericalCriticV2,
    load_checkpoint,
    pack_sets,
    save_checkpoint,
)

SHIPPED_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "v5"
"""Directory of the checkpoint that ``load_critic()`` loads by default: a V2-architecture critic with one-move
and two-move pools, trained on states of every size (1-4 numbers) under today's ``Rules.longproc()``
(``docs/critics.md``)."""
V4_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "v4"
"""The previous default (the same training data, no two-move pool), kept for reproductions; faster per state."""
V3_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "v3"
"""The previous default (trained on states of 1-4 numbers when ``longproc`` meant strictly positive
intermediates), kept for reproductions."""
V2_CHECKPOINT = Path(__file__).resolve().parent / "checkpoints" / "v2"
"""The earlier shipped checkpoint (trained on DFS-trace states of 1-3 numbers), kept for reproductions."""


class Critic:
    """A loaded numerical critic, ready for batched, gradient-free scoring on CPU."""

    def __init__(self, model: NumericalCriticV1 | NumericalCriticV2, meta: dict[str, Any], path: Path | None = None) -> None:
        self.model = model.eval()
        self.meta = meta
        self.path = path
        self.config: ModelConfig = model.cfg
        self._goal_cache: dict[float, np.ndarray] = {}

    @property
    def version(self) -> str:
        return self.config.version

    def __repr__(self) -> str:
        return f"Critic(version={self.version!r}, path={str(self.path) if self.path else None!r})"

    # ---- embeddings ---------------------------------------------------------------------------
    @torch.no_grad()
    def embed_states(self, states: Sequence[Sequence[int]], initial: Sequence[Sequence[int]] | None = None) -> np.ndarray:
        """L2-normalised state embeddings ``[N, out_dim]`` (V1 also needs the initial numbers)."""
        values, mask = pack_sets(states, self.config.max_numbers)
        v, m = torch.from_numpy(values), torch.from_numpy(mask)
        if isinstance(self.model, NumericalCriticV2):
            return self.model.embed_states(v, m).numpy()
        if initial is None:
            raise ValueError("a V1 critic scores (initial numbers, state) pairs: pass initial=[...] for every state")
        if len(initial) != len(states):
            raise ValueError(f"got {len(states)} states but {len(initial)} initial number sets")
        iv, im = pack_sets(initial, self.config.max_numbers)
        return self.model.embed_state_actions(torch.from_numpy(iv), torch.from_numpy(im), v, m).numpy()

    @torch.no_grad()
    def embed_targets(self, targets: Sequence[int]) -> np.ndarray:
        """L2-normalised goal embeddings ``[N, out_dim]`` of single target values (cached)."""
        keys = [_target_key(t, i) for i, t in enumerate(targets)]
        todo = sorted({k for k in keys if k not in self._goal_cache})
        if todo:
            t = torch.tensor(todo, dtype=torch.float64)
            if isinstance(self.model, NumericalCriticV2):
                emb = self.model.embed_goals(t).numpy()
            else:  # a V1 goal is a number set; a target is the one-number set [target]
                mask = torch.zeros(len(todo), self.config.max_numbers)
                mask[:, 0] = 1.0
                vals = torch.zeros(len(todo), self.config.max_numbers, dtype=torch.float64)
                vals[:, 0] = t
                emb = self.model.embed_goals(vals, mask).numpy()
            self._goal_cache.update(zip(todo, emb, strict=True))
        if not keys:
            return np.zeros((0, self.config.out_dim), dtype=np.float32)
        return np.stack([self._goal_cache[k] for k in keys])

    # ---- scores -------------------------------------------------------------------------------
    def score(
        self,
        states: Sequence[Sequence[int]],
        targets: Sequence[int],
        initial: Sequence[Sequence[int]] | None = None,
        batch_size: int = 8192,
    ) -> np.ndarray:
        """Cosine similarity of each state and its target, ``float32 [N]`` in ``[-1, 1]``.

        ``states[i]`` is a number set (any order), ``targets[i]`` its target. A V1 critic also
        needs ``initial[i]``, the puzzle's starting numbers.
        """
        if isinstance(states, (str, bytes)) or isinstance(targets, (str, bytes)):
            raise TypeError("states must be a sequence of number sets and targets a sequence of ints")
        if len(states) != len(targets):
            raise ValueError(f"got {len(states)} states but {len(targets)} targets")
        out = np.empty(len(states), dtype=np.float32)
        for lo in range(0, len(states), batch_size):
            hi = lo + batch_size
            s = self.embed_states(states[lo:hi], None if initial is None else initial[lo:hi])
            g = self.embed_targets(targets[lo:hi])
            out[lo:hi] = np.clip((s * g).sum(1), -1.0, 1.0)
        return out

    def probability(self, states: Sequence[Sequence[int]], targets: Sequence[int], **kw: Any) -> np.ndarray:
        """P(target reachable) from the score through the checkpoint's logistic calibration.

        The calibration (``sigmoid(a * score + b)``) is fitted on validation-split states by
        ``python -m critics.train``; a checkpoint without one raises ``ValueError``.
        """
        cal = self.meta.get("calibration")
        if not cal:
            raise ValueError(f"checkpoint {self.path} has no 'calibration' entry in its config.json")
        z = cal["a"] * self.score(states, targets, **kw).astype(np.float64) + cal["b"]
        return 1.0 / (1.0 + np.exp(-z))


def _target_key(t: Any, i: int) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
        raise TypeError(f"target {i} must be an int, got {type(t).__name__} {t!r}")
    return float(t)


def load_critic(path: str | Path | None = None) -> Critic:
    """Load a critic checkpoint directory (``config.json`` + ``model.safetensors``).

    ``None`` loads the shipped checkpoint (:data:`SHIPPED_CHECKPOINT`, ``checkpoints/v5``). A missing or incompatible checkpoint raises
    :class:`CheckpointError` naming the file and the problem.
    """
    d = SHIPPED_CHECKPOINT if path is None else Path(path)
    model, meta = load_checkpoint(d)
    return Critic(model, meta, d)


def load_state_critic(path: str | Path | None = None) -> Critic:
    """:func:`load_critic` for the dense rewards, which score ``(state, target)`` pairs: a V2 critic only.

    What ``ContrastiveCriticReward``, the SB3 baseline's critic rewards and verl's ``dense=critic``
    take (``None`` = the shipped checkpoint). :class:`CheckpointError` for a missing or broken
    checkpoint, or one holding a critic of another version (V1 scores ``(initial, state)`` pairs).
    """
    critic = load_critic(path)
    if critic.version != "v2":
        raise CheckpointError(
            f"the dense critic rewards score (state, target) pairs and need a V2 critic checkpoint; "
            f"{critic.path} holds a {critic.version} critic"
        )
    return critic


__all__ = [
    "SHIPPED_CHECKPOINT",
    "V2_CHECKPOINT",
    "V3_CHECKPOINT",
    "V4_CHECKPOINT",
    "CheckpointError",
    "Critic",
    "ModelConfig",
    "NumericalCriticV1",
    "NumericalCriticV2",
    "load_checkpoint",
    "load_critic",
    "load_state_critic",
    "save_checkpoint",
]
