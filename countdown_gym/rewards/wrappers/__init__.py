"""Dense-reward wrappers for Countdown-v0 and CountdownText-v0, and the pure reward terms they use.

* :class:`OracleReward` -- exact reachability from the solver (modes ``perfect`` / ``reachable``).
* :class:`ContrastiveCriticReward` -- a learned contrastive critic's score (pass the critic:
  any :class:`Scorer`, e.g. ``critics.load_state_critic()``).
* :class:`CLIPOGroupReward` -- a vector of environments in groups sharing a puzzle, with the
  CLIPO reward at the end of each episode (pass the trainer: any :class:`GroupTrainer`, e.g.
  ``critics.clipo.CLIPOTrainer``).

* :class:`TermReward` -- any registered reward variant's term (what ``RewardVariant.wrap`` builds,
  :mod:`countdown_gym.rewards.variants`).

Each adds its term to the reward and reports it in ``info["reward_terms"]`` next to ``"sparse"``;
``potential=True`` turns the per-step wrappers into potential-based shaping. Formulas, signs
and scales: ``docs/rewards.md``.
"""

from countdown_gym.rewards.terms import (
    Scorer,
    critic_potentials,
    critic_terms,
    oracle_potential,
    oracle_term,
    potential_shaping,
)
from countdown_gym.rewards.wrappers.base import DenseRewardWrapper, TransitionsMissingError
from countdown_gym.rewards.wrappers.clipo import CLIPOGroupReward, GroupTrainer, Trajectory
from countdown_gym.rewards.wrappers.critic import ContrastiveCriticReward
from countdown_gym.rewards.wrappers.oracle import OracleReward
from countdown_gym.rewards.wrappers.variant import TermReward

__all__ = [
    "CLIPOGroupReward",
    "ContrastiveCriticReward",
    "DenseRewardWrapper",
    "GroupTrainer",
    "OracleReward",
    "Scorer",
    "TermReward",
    "Trajectory",
    "TransitionsMissingError",
    "critic_potentials",
    "critic_terms",
    "oracle_potential",
    "oracle_term",
    "potential_shaping",
]
