"""``ContrastiveCriticReward``: dense reward from a learned contrastive critic.

The wrapper takes a loaded critic: any object with ``score(states, targets)``
(:class:`~countdown_gym.rewards.terms.Scorer`). The shipped one is ``critics.load_state_critic()``;
this package never imports ``critics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

import gymnasium as gym
import numpy as np

from countdown_gym.game.rules import Number, Rules
from countdown_gym.rewards.terms import Scorer, check_scorer_fits, critic_potentials, critic_terms
from countdown_gym.rewards.wrappers.base import DenseRewardWrapper


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
      :func:`~countdown_gym.rewards.terms.critic_terms`); an invalid move gets ``-scale``.
    * Potential-based (``potential=True``): ``F = gamma * Phi(s') - Phi(s)`` per step with
      ``Phi(s) = scale * score(s, target)`` and ``Phi = 0`` once the episode terminates (a
      truncated step keeps ``Phi(s')``).

    Args:
        env: the environment to wrap.
        critic: a loaded critic, anything with ``score(states, targets)``
            (:class:`~countdown_gym.rewards.terms.Scorer`): ``critics.load_state_critic()`` for the
            shipped checkpoint, ``critics.load_state_critic(path)`` for another one, or a text
            critic. One critic can be shared by many environments.
        scale, potential, gamma, key: see :class:`~countdown_gym.rewards.wrappers.base.DenseRewardWrapper`
            (``key`` defaults to ``"critic"`` or ``"critic_shaping"``).

    Example:
        >>> import gymnasium as gym, countdown_gym
        >>> from critics import load_state_critic
        >>> env = ContrastiveCriticReward(gym.make("Countdown-v0"), load_state_critic(), scale=0.1)
    """

    default_key = "critic"

    def __init__(
        self,
        env: gym.Env,
        critic: Scorer,
        scale: float = 1.0,
        potential: bool = False,
        gamma: float = 1.0,
        key: str | None = None,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, critic=critic, scale=scale, potential=potential, gamma=gamma, key=key)
        super().__init__(env, scale=scale, potential=potential, gamma=gamma, key=key)
        if not callable(getattr(critic, "score", None)):
            hint = (" (a checkpoint path: load it with critics.load_state_critic(path))"
                    if critic is None or isinstance(critic, (str, bytes, PathLike)) else "")
            raise TypeError(f"critic must have a score(states, targets) method, got {type(critic).__name__}{hint}")
        self.critic: Scorer = critic
        self.scorer = CachedScorer(self.critic)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        if info.get("state") is not None:
            check_scorer_fits(self.critic, info["state"], type(self).__name__)
        return obs, info

    def step_terms(self, transitions: Sequence[Mapping[str, Any]]) -> list[float]:
        return critic_terms(self.scorer, transitions, self.scale)

    def potential_of(self, state: tuple[Number, ...], target: Number, rules: Rules) -> float:
        return self.scale * float(critic_potentials(self.scorer, [state], [target])[0])
