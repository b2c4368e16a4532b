"""``TermReward``: the Gymnasium wrapper of a registered reward variant (built by ``RewardVariant.wrap``).

It adds the variant's per-move term (:data:`~countdown_gym.rewards.terms.MoveTerm`) or, for a
shaping variant, ``gamma * Phi(s') - Phi(s)`` with the variant's
:data:`~countdown_gym.rewards.terms.Potential`, times ``scale``, and reports it in
``info["reward_terms"]`` under the variant's name. A scorer (critic) the variant needs is passed
in, memoised per ``(state, target)``, and checked against the episode's size at ``reset``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from countdown_gym.game.rules import Number, Rules
from countdown_gym.rewards.terms import MoveTerm, Potential, check_scorer_fits
from countdown_gym.rewards.wrappers.base import DenseRewardWrapper
from countdown_gym.rewards.wrappers.critic import CachedScorer


class TermReward(DenseRewardWrapper):
    """Adds one term to Countdown-v0 or CountdownText-v0: additive (``move_term``) or shaping (``potential``).

    Args:
        env: the environment to wrap.
        key: the term's key in ``info["reward_terms"]`` (the variant's name).
        move_term: the per-move term, for an additive variant.
        potential: the potential, for a shaping variant (exactly one of the two is given).
        scorer: the critic the term scores with, when the variant needs one.
        scale, gamma: see :class:`~countdown_gym.rewards.wrappers.base.DenseRewardWrapper`.
    """

    def __init__(self, env: gym.Env, key: str, move_term: MoveTerm | None = None, potential: Potential | None = None,
                 scorer: Any = None, scale: float = 1.0, gamma: float = 1.0) -> None:
        if (move_term is None) == (potential is None):
            raise ValueError(f"TermReward {key!r} needs exactly one of move_term (additive) or potential (shaping)")
        super().__init__(env, scale=scale, potential=potential is not None, gamma=gamma, key=key)
        self.move_term, self.potential_fn = move_term, potential
        self.critic = scorer
        self.scorer = None if scorer is None else CachedScorer(scorer)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        if self.critic is not None and info.get("state") is not None:
            check_scorer_fits(self.critic, info["state"], f"reward {self.key!r}")
        return obs, info

    def step_terms(self, transitions: Sequence[Mapping[str, Any]]) -> list[float]:
        assert self.move_term is not None
        return [self.scale * float(x) for x in self.move_term(transitions, self.scorer)]

    def potential_of(self, state: tuple[Number, ...], target: Number, rules: Rules) -> float:
        assert self.potential_fn is not None
        return self.scale * float(self.potential_fn([state], [target], rules, self.scorer)[0])
