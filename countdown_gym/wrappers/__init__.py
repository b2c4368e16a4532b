"""Dense-reward wrappers for Countdown-v0 and CountdownText-v0, and the pure reward terms they use.

See ``docs/rewards.md`` for every reward's formula, sign and scale.
"""

from countdown_gym.wrappers.terms import (
    critic_potentials,
    critic_terms,
    oracle_potential,
    oracle_term,
    potential_shaping,
)

__all__ = [
    "critic_potentials",
    "critic_terms",
    "oracle_potential",
    "oracle_term",
    "potential_shaping",
]
