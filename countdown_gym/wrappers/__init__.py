"""Gymnasium wrappers that add a dense reward to Countdown-v0 and CountdownText-v0 (``docs/rewards.md``):
:class:`OracleReward` (exact reachability), :class:`ContrastiveCriticReward` (a learned critic's score) and
:class:`CLIPOGroupReward` (groups sharing a puzzle, CLIPO at each episode's end). Any registry variant wraps an
environment with ``get_variant(name).wrap(env)``, a :class:`TermReward`; each reports its term in
``info["reward_terms"]``.
"""

from countdown_gym.rewards.wrapper import TermReward, TransitionsMissingError
from countdown_gym.wrappers.clipo import CLIPOGroupReward, GroupTrainer, Trajectory
from countdown_gym.wrappers.named import ContrastiveCriticReward, OracleReward

__all__ = [
    "CLIPOGroupReward", "ContrastiveCriticReward", "GroupTrainer", "OracleReward", "TermReward", "Trajectory",
    "TransitionsMissingError",
]
