"""Dense-reward wrappers of Countdown-v0 and CountdownText-v0 (``docs/rewards.md``): :class:`OracleReward`,
:class:`ContrastiveCriticReward`, :class:`CLIPOGroupReward`; any registry variant's is ``get_variant(name).wrap(env)``.
"""

from countdown_gym.rewards.variants import TermReward, TransitionsMissingError
from countdown_gym.wrappers.clipo import CLIPOGroupReward, GroupTrainer, Trajectory
from countdown_gym.wrappers.named import ContrastiveCriticReward, OracleReward

__all__ = [
    "CLIPOGroupReward", "ContrastiveCriticReward", "GroupTrainer", "OracleReward", "TermReward", "Trajectory",
    "TransitionsMissingError",
]
