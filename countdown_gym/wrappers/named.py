"""``OracleReward`` and ``ContrastiveCriticReward``: the registry's oracle and critic variants as
:class:`~countdown_gym.rewards.variants.TermReward` wrappers under their first names and keys (``oracle`` /
``critic``, ``..._shaping`` with ``potential=True``); their values are the variants' (``docs/rewards.md``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from countdown_gym.rewards.terms import Scorer
from countdown_gym.rewards.variants import TermReward, get_variant

ORACLE_MODES: tuple[str, ...] = ("perfect", "reachable")
"""``OracleReward``'s modes: the variants ``oracle-perfect`` and ``oracle-reachable``."""


def _key(potential: bool, key: str | None, name: str) -> str:
    """The term's key: ``key``, else ``name`` / ``name_shaping``; ``ValueError`` for a ``potential`` not a bool."""
    if not isinstance(potential, (bool, np.bool_)):
        raise ValueError(f"potential must be a bool, got {type(potential).__name__} {potential!r:.40}")
    return key if key is not None else f"{name}_shaping" if potential else name  # a bad key: TermReward's error


class OracleReward(TermReward, gym.utils.RecordConstructorArgs):
    """Adds the oracle's dense reward to Countdown-v0 or CountdownText-v0: per move, ``+scale`` for a valid move that
    keeps the target reachable, else 0 (``mode="perfect"``) or ``-scale`` (``"reachable"``); ``potential=True``:
    shaping with ``Phi(s) = scale * [target reachable from s]``. Key ``"oracle"`` / ``"oracle_shaping"``."""

    def __init__(self, env: gym.Env, mode: str = "perfect", scale: float = 1.0, potential: bool = False,
                 gamma: float = 1.0, key: str | None = None) -> None:
        if mode not in ORACLE_MODES:
            raise ValueError(f"OracleReward mode must be one of {ORACLE_MODES}, got {mode!r}")
        gym.utils.RecordConstructorArgs.__init__(self, mode=mode, scale=scale, potential=potential, gamma=gamma, key=key)
        variant = get_variant("oracle-potential" if potential else f"oracle-{mode}")
        super().__init__(env, variant, scale=scale, gamma=gamma, key=_key(potential, key, "oracle"))
        self.mode = mode


class ContrastiveCriticReward(TermReward, gym.utils.RecordConstructorArgs):
    """Adds a critic's dense reward (``critic``: a :class:`~countdown_gym.rewards.terms.Scorer`) to Countdown-v0 or
    CountdownText-v0: per move ``scale * score(next_state, target)``, ``-scale`` if invalid; ``potential=True``:
    shaping with ``Phi(s) = scale * score(s, target)``. Key ``"critic"`` / ``"critic_shaping"``."""

    def __init__(self, env: gym.Env, critic: Scorer, scale: float = 1.0, potential: bool = False,
                 gamma: float = 1.0, key: str | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, critic=critic, scale=scale, potential=potential, gamma=gamma, key=key)
        variant = get_variant("critic-potential" if potential else "critic")
        super().__init__(env, variant, critic, scale=scale, gamma=gamma, key=_key(potential, key, "critic"))
