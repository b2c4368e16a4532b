"""``ContrastiveCriticReward``: dense reward from a learned contrastive critic (``critics/``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from countdown_gym.rules import Number, Rules
from countdown_gym.wrappers.base import DenseRewardWrapper
from countdown_gym.wrappers.terms import Scorer, critic_potentials, critic_terms


def load_scorer(checkpoint: str | Path | None) -> Scorer:
    """``critics.load_critic(checkpoint)``; ``critics.CheckpointError`` for a missing or incompatible checkpoint."""
    try:
        from critics import CheckpointError, load_critic
    except ImportError as e:  # torch / safetensors not installed
        raise ImportError(
            f"ContrastiveCriticReward needs the critics extra ({e}); install it with "
            "pip install -e '.[critics]' -c constraints/cpu.txt"
        ) from e
    critic = load_critic(checkpoint)  # CheckpointError (a ValueError) names a missing / broken checkpoint
    if getattr(critic, "version", "v2") != "v2":
        raise CheckpointError(
            f"ContrastiveCriticReward scores (state, target) pairs and needs a V2 critic checkpoint; "
            f"{checkpoint} holds a {critic.version} critic"
        )
    return critic


class CachedScorer:
    """A critic's ``score`` memoised per ``(state, target)`` (the critic is deterministic, so this is exact).

    States repeat a lot across episodes; one batched critic call scores only the pairs not seen
    before. The cache is cleared when it holds ``max_size`` entries.
    """

    def __init__(self, critic: Scorer, max_size: int = 1 << 17) -> None:
        self.critic = critic
        self.max_size = max_size
        self._cache: dict[tuple[tuple[Number, ...], Number], float] = {}

    def score(self, states: Sequence[Sequence[Number]], targets: Sequence[Number]) -> np.ndarray:
        keys = [(tuple(s), t) for s, t in zip(states, targets, strict=True)]
        todo = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if todo:
            if len(self._cache) + len(todo) > self.max_size:
                self._cache.clear()
                todo = list(dict.fromkeys(keys))  # the pairs cached before are gone too
            scores = np.asarray(self.critic.score([k[0] for k in todo], [k[1] for k in todo]), dtype=np.float64)
            if scores.shape != (len(todo),):
                raise ValueError(f"critic.score returned shape {scores.shape} for {len(todo)} states")
            self._cache.update(zip(todo, scores.tolist(), strict=True))
        return np.array([self._cache[k] for k in keys], dtype=np.float64)


class ContrastiveCriticReward(DenseRewardWrapper, gym.utils.RecordConstructorArgs):
    """Adds a learned critic's dense reward to Countdown-v0 or CountdownText-v0.

    The critic scores a state against the target: the cosine similarity of their embeddings, in
    ``[-1, 1]`` (higher = more likely that the target is still reachable).

    * Additive (``potential=False``): ``scale * score(next_state, target)`` per move (from
      :func:`~countdown_gym.wrappers.terms.critic_terms`); an invalid move gets ``-scale``.
    * Potential-based (``potential=True``): ``F = gamma * Phi(s') - Phi(s)`` per step with
      ``Phi(s) = scale * score(s, target)`` and ``Phi = 0`` once the episode terminates (a
      truncated step keeps ``Phi(s')``).

    Args:
        env: the environment to wrap.
        checkpoint: a critic checkpoint directory (``config.json`` + ``model.safetensors``);
            ``None`` loads the shipped V2 checkpoint.
        scale, potential, gamma, key: see :class:`~countdown_gym.wrappers.base.DenseRewardWrapper`
            (``key`` defaults to ``"critic"`` or ``"critic_shaping"``).
        critic: an already loaded critic (anything with ``score(states, targets)``) to share one
            model between many environments; overrides ``checkpoint``.
    """

    default_key = "critic"

    def __init__(
        self,
        env: gym.Env,
        checkpoint: str | Path | None = None,
        scale: float = 1.0,
        potential: bool = False,
        gamma: float = 1.0,
        key: str | None = None,
        critic: Scorer | None = None,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, checkpoint=checkpoint, scale=scale, potential=potential, gamma=gamma, key=key, critic=critic
        )
        super().__init__(env, scale=scale, potential=potential, gamma=gamma, key=key)
        if critic is not None and not callable(getattr(critic, "score", None)):
            raise TypeError(f"critic must have a score(states, targets) method, got {type(critic).__name__}")
        self.critic: Scorer = critic if critic is not None else load_scorer(checkpoint)
        self.scorer = CachedScorer(self.critic)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        limit = getattr(getattr(self.critic, "config", None), "max_numbers", None)
        state = info.get("state")
        if limit is not None and state is not None and len(state) > limit:
            raise ValueError(
                f"ContrastiveCriticReward: the critic ({getattr(self.critic, 'path', None)}) scores states of at most "
                f"{limit} numbers, but this episode starts from {len(state)} numbers {list(state)}; "
                f"use a critic trained with max_numbers >= {len(state)}"
            )
        return obs, info

    def step_terms(self, transitions: Sequence[Mapping[str, Any]]) -> list[float]:
        return critic_terms(self.scorer, transitions, self.scale)

    def potential_of(self, state: tuple[Number, ...], target: Number, rules: Rules) -> float:
        return self.scale * float(critic_potentials(self.scorer, [state], [target])[0])
