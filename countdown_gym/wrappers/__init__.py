"""Gymnasium wrappers that add a dense reward to Countdown-v0 and CountdownText-v0 (``docs/rewards.md``).

* :class:`OracleReward` -- exact reachability from the solver (modes ``perfect`` / ``reachable``);
* :class:`ContrastiveCriticReward` -- a learned contrastive critic's score (pass the critic: any
  :class:`~countdown_gym.rewards.terms.Scorer`, e.g. ``critics.load_state_critic()``);
* :class:`CLIPOGroupReward` -- a vector of environments in groups sharing a puzzle, with the CLIPO reward at the
  end of each episode (pass the trainer: any :class:`GroupTrainer`, e.g. ``critics.clipo.CLIPOTrainer``).

The first two are the registry's oracle and critic variants (:mod:`countdown_gym.rewards.variants`); any variant
wraps an environment with ``get_variant(name).wrap(env, ...)``, a :class:`~countdown_gym.rewards.wrapper.TermReward`.
Each adds its term to the reward and reports it in ``info["reward_terms"]`` next to ``"sparse"``; ``potential=True``
turns the per-step wrappers into potential-based shaping.
"""

from countdown_gym.rewards.wrapper import TermReward, TransitionsMissingError
from countdown_gym.wrappers.clipo import CLIPOGroupReward, GroupTrainer, Trajectory
from countdown_gym.wrappers.named import ContrastiveCriticReward, OracleReward

__all__ = [
    "CLIPOGroupReward", "ContrastiveCriticReward", "GroupTrainer", "OracleReward", "TermReward", "Trajectory",
    "TransitionsMissingError",
]
