"""``OracleReward``: dense reward from the exact solver (the seed paper's oracle critic)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from countdown_gym.game.rules import Number, Rules
from countdown_gym.rewards.terms import ORACLE_MODES, oracle_potential, oracle_term
from countdown_gym.rewards.wrappers.base import DenseRewardWrapper


class OracleReward(DenseRewardWrapper, gym.utils.RecordConstructorArgs):
    """Adds the oracle's dense reward to Countdown-v0 or CountdownText-v0.

    Additive (``potential=False``), per move, from :func:`~countdown_gym.rewards.terms.oracle_term`:

    * ``mode="perfect"`` (the seed paper's oracle): ``+scale`` for a valid move that keeps the
      target reachable (a move on a solution path), ``0`` otherwise;
    * ``mode="reachable"``: ``+scale`` for such a move, ``-scale`` for an invalid move or a move
      into a dead end.

    Potential-based (``potential=True``): ``F = gamma * Phi(s') - Phi(s)`` per step with
    ``Phi(s) = scale * [target reachable from s]`` and ``Phi = 0`` once the episode terminates (a
    truncated step keeps ``Phi(s')``); ``mode`` is then unused. Set ``gamma`` to the agent's
    discount factor.

    The term is added to the reward and reported in ``info["reward_terms"]`` under ``key``
    (default ``"oracle"``, or ``"oracle_shaping"`` with ``potential=True``).

    Example:
        >>> import gymnasium as gym, countdown_gym
        >>> env = OracleReward(gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)]))
        >>> _, info = env.reset(seed=0)
        >>> _, r, *_, info = env.step(env.unwrapped.encode_action(0, 1, "-"))  # 6 - 2 = 4
        >>> info["reward_terms"]
        {'sparse': 0.0, 'oracle': 1.0}
    """

    default_key = "oracle"

    def __init__(
        self,
        env: gym.Env,
        mode: str = "perfect",
        scale: float = 1.0,
        potential: bool = False,
        gamma: float = 1.0,
        key: str | None = None,
    ) -> None:
        if mode not in ORACLE_MODES:
            raise ValueError(f"OracleReward mode must be one of {ORACLE_MODES}, got {mode!r}")
        gym.utils.RecordConstructorArgs.__init__(self, mode=mode, scale=scale, potential=potential, gamma=gamma, key=key)
        super().__init__(env, scale=scale, potential=potential, gamma=gamma, key=key)
        self.mode = mode

    def step_terms(self, transitions: Sequence[Mapping[str, Any]]) -> list[float]:
        return [oracle_term(t, self.mode, self.scale) for t in transitions]

    def potential_of(self, state: tuple[Number, ...], target: Number, rules: Rules) -> float:
        return self.scale * oracle_potential(state, target, rules)
