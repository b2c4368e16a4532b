"""Adapters for RL trainers outside the package: TRL (:mod:`~countdown_gym.integrations.trl` reward functions,
:mod:`~countdown_gym.integrations.trl_env` tools, :mod:`~countdown_gym.integrations.trl_rollout` multi-turn rollouts),
verl (:mod:`~countdown_gym.integrations.verl`), ``verifiers`` (:mod:`~countdown_gym.integrations.verifiers_env`) and
reasoning-gym (:mod:`~countdown_gym.integrations.reasoning_gym`); guide: ``docs/integrations.md``.

Every reward they compute is a variant of the registry (:mod:`countdown_gym.rewards.variants`), asked for by name.
"""
