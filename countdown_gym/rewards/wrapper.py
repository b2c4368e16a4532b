"""``TermReward``, what ``RewardVariant.wrap`` builds: it adds a variant's term for each step's
``info["transitions"]`` to the reward and records it in ``info["reward_terms"]`` (``"sparse"``: the env's own).
Additive: ``scale`` times each move's term. Shaping: ``F = gamma * Phi(s') - Phi(s)`` of the numbers held
(``info["state"]``, else the last transition's), ``Phi = 0`` on termination. A critic is memoised and checked
against the episode's size at ``reset``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat

import gymnasium as gym

from countdown_gym.game.rules import Number, Rules, check_finite, describe_value
from countdown_gym.rewards import terms

if TYPE_CHECKING:
    from countdown_gym.rewards.variants import RewardVariant


class TransitionsMissingError(ValueError):
    """The wrapped environment does not report ``info["transitions"]``."""


def env_name(env: gym.Env) -> str:
    """The environment's registered id, else its class name (for error messages)."""
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None and spec.id else type(env.unwrapped).__name__


def step_transitions(info: Mapping[str, Any], who: str, env: gym.Env) -> list[Mapping[str, Any]]:
    """``info["transitions"]`` checked, or a :class:`TransitionsMissingError` naming the problem."""
    if "transitions" not in info:
        raise TransitionsMissingError(f"{who} needs an environment that reports info['transitions'] on every step "
                                      f"(Countdown-v0 or CountdownText-v0, see docs/DESIGN.md); {env_name(env)} "
                                      f"returned info keys {sorted(info)}")
    transitions = info["transitions"]
    if not isinstance(transitions, (list, tuple)):
        raise TransitionsMissingError(f"{who}: info['transitions'] must be a list of transition records, "
                                      f"got {type(transitions).__name__}")
    return [terms.check_transition(t) for t in transitions]


class TermReward(gym.Wrapper):
    """Adds one reward variant's term to Countdown-v0 or CountdownText-v0 (see the module).

    Args:
        variant: A :class:`~countdown_gym.rewards.variants.RewardVariant` with a ``move_term`` or a ``potential``.
        scorer: The critic, when the variant needs one.
        scale: Multiplies the term (or the potential).
        gamma: The shaping discount: set it to the agent's.
        key: The term's key in ``info["reward_terms"]`` (default: the variant's name).
    """

    def __init__(self, env: gym.Env, variant: RewardVariant, scorer: Any = None, scale: float = 1.0,
                 gamma: float = 1.0, key: str | None = None) -> None:
        from countdown_gym.rewards.variants import RewardVariant  # not at the top: variants imports this module

        if not isinstance(variant, RewardVariant):  # a name: an AttributeError below
            raise TypeError(f"TermReward needs a RewardVariant (get_variant(name)), got {describe_value(variant)}")
        if (variant.move_term is None) == (variant.potential is None):
            raise ValueError(f"TermReward needs a variant with exactly one of a move_term (additive) or a potential "
                             f"(shaping); {variant.name!r} has {'both' if variant.move_term else 'neither'}")
        super().__init__(env)
        self.variant = variant
        self.scale = check_finite(scale)
        self.potential = variant.potential is not None
        self.gamma = terms.check_gamma(gamma)
        if key is not None and (not isinstance(key, str) or not key or key == "sparse"):
            raise ValueError(f"key must be a non-empty string other than 'sparse', got {key!r}")
        self.key = key or variant.name
        self.critic = variant.need(scorer)
        self.scorer = None if self.critic is None else terms.CachedScorer(self.critic)
        self._current: tuple[tuple[Number, ...], Number, Rules] | None = None  # (numbers, target, rules) now
        self._phi: float | None = None  # potential of the current numbers

    def potential_of(self, state: tuple[Number, ...], target: Number, rules: Rules) -> float:
        """``Phi(state)`` for the given target and rules."""
        assert self.variant.potential is not None
        return self.scale * float(self.variant.potential([state], [target], rules, self.scorer)[0])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._current, self._phi = None, None
        problem = info.get("problem")
        if problem is not None and hasattr(problem, "numbers") and hasattr(problem, "target"):
            numbers = tuple(info["state"]) if info.get("state") is not None else tuple(problem.numbers)
            self._current = (numbers, problem.target, problem.rules)
        if self.critic is not None and info.get("state") is not None:
            terms.check_scorer_fits(self.critic, info["state"], type(self).__name__)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        transitions = step_transitions(info, type(self).__name__, self.env)
        if self.potential:
            term = self._shaping_term(info, transitions, terminated)
        else:
            term = float(sum(self.variant.move_values(transitions, self.scorer, self.scale)))
        reward_terms = dict(info.get("reward_terms") or {"sparse": float(reward)})
        if self.key in reward_terms:
            raise ValueError(f"info['reward_terms'] already has a {self.key!r} term (two wrappers with the same key); "
                             "pass key='...' to tell them apart")
        reward_terms[self.key] = term
        return obs, float(reward) + term, terminated, truncated, {**info, "reward_terms": reward_terms}

    def _shaping_term(
        self, info: Mapping[str, Any], transitions: Sequence[Mapping[str, Any]], terminated: bool
    ) -> float:
        if self._current is None and transitions:  # env without a problem in its reset info
            first = transitions[0]
            self._current = (tuple(first["state"]), first["target"], first.get("rules") or Rules.longproc())
        if self._current is None:
            return 0.0
        if self._phi is None:
            self._phi = float(self.potential_of(*self._current))
        phi_s = self._phi
        _, target, rules = self._current
        if info.get("state") is not None:  # the env's own record of the numbers it now holds
            numbers = tuple(info["state"])
        elif transitions:
            last = transitions[-1]
            numbers = tuple(last["next_state"] if last["valid"] else last["state"])
        else:
            numbers = self._current[0]
        if numbers != self._current[0]:
            self._current = (numbers, target, rules)
            self._phi = float(self.potential_of(*self._current))
        phi_next = 0.0 if terminated else self._phi
        return terms.potential_shaping(phi_s, phi_next, self.gamma)
