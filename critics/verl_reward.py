"""verl reward with the learned critic: ``countdown_gym.integrations.verl.compute_score`` plus a loaded critic
(``countdown_gym`` never imports ``critics``). For the ``critic`` dense term point verl at this file::

    custom_reward_function.path=$(python -c "import critics.verl_reward as m; print(m.__file__)")
    custom_reward_function.name=compute_score
    +custom_reward_function.reward_kwargs.dense=[critic]
    # optional, another V2 checkpoint directory (default: the shipped one):
    +custom_reward_function.reward_kwargs.critic_checkpoint=/path/to/checkpoint
"""

from __future__ import annotations

import functools

from countdown_gym.integrations.verl import with_scorers
from critics import load_state_critic

critic_for = functools.cache(load_state_critic)
"""The critic of a checkpoint directory (``None`` = the shipped one), loaded once per process."""


compute_score = with_scorers({"critic": critic_for})
"""verl's reward function: the package's ``compute_score`` with the critic loaded when ``dense`` asks for it."""

__all__ = ["compute_score", "critic_for"]
