"""Adapters for RL trainers outside the package: TRL (:mod:`~countdown_gym.integrations.trl` reward functions,
:mod:`~countdown_gym.integrations.trl_env` tools, :mod:`~countdown_gym.integrations.trl_rollout` multi-turn rollouts),
verl (:mod:`~countdown_gym.integrations.verl`), ``verifiers`` (:mod:`~countdown_gym.integrations.verifiers_env`) and
reasoning-gym (:mod:`~countdown_gym.integrations.reasoning_gym`); guide: ``docs/integrations.md``.

Every reward they compute is a variant of the registry, asked for by name (:func:`score_terms`); the outcome
scores are also here under their earlier home.
"""

from __future__ import annotations

from countdown_gym.rewards.terms import TAGGED_FORMATS, WELL_FORMED_REASONS, format_score, sparse_score
from countdown_gym.rewards.variants import score_terms

__all__ = ["TAGGED_FORMATS", "WELL_FORMED_REASONS", "format_score", "score_terms", "sparse_score"]
