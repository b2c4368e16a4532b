"""Dense-reward wrappers for Countdown-v0 and CountdownText-v0, and the pure reward terms they use.

* :class:`OracleReward` -- exact reachability from the solver (modes ``perfect`` / ``reachable``).
* :class:`ContrastiveCriticReward` -- a learned contrastive critic's score (``critics/``).
* :class:`CLIPOGroupReward` -- a vector of environments in groups sharing a puzzle, with the
  CLIPO reward at the end of each episode (``critics/clipo.py``).

Each adds its term to the reward and reports it in ``info["reward_terms"]`` next to ``"sparse"``;
``potential=True`` turns the per-step wrappers into potential-based shaping. Formulas, signs
and scales: ``docs/rewards.md``.
"""

from countdown_gym.wrappers.base import DenseRewardWrapper, TransitionsMissingError
from countdown_gym.wrappers.clipo import CLIPOGroupReward, Trajectory
from countdown_gym.wrappers.critic import ContrastiveCriticReward
from countdown_gym.wrappers.oracle import OracleReward
from countdown_gym.wrappers.terms import (
    critic_potentials,
    critic_terms,
    oracle_potential,
    oracle_term,
    potential_shaping,
)

__all__ = [
    "CLIPOGroupReward",
    "ContrastiveCriticReward",
    "DenseRewardWrapper",
    "OracleReward",
    "Trajectory",
    "TransitionsMissingError",
    "critic_potentials",
    "critic_terms",
    "oracle_potential",
    "oracle_term",
    "potential_shaping",
]
