"""Adapters for RL trainers outside the package.

* :mod:`countdown_gym.integrations.verl` -- a verl-compatible ``compute_score`` and the problem
  encoding used by ``scripts/export_verl.py``.
* :mod:`countdown_gym.integrations.trl` -- TRL reward functions; :mod:`~countdown_gym.integrations.verifiers_env`
  -- ``verifiers`` environments (``countdown_gym.load_environment``);
  :mod:`~countdown_gym.integrations.reasoning_gym` -- a reasoning-gym dataset (``docs/integrations.md``).
* :mod:`countdown_gym.runkit.tracking` -- experiment logging of the training scripts
  (``--report-to``: TensorBoard and every tracker of ``transformers``' ``report_to``).

Every reward they compute is a variant of the registry, asked for by name
(:func:`~countdown_gym.rewards.variants.score_terms`, ``get_variant(name).completion_score``); the outcome scores
are also here under their earlier home.
"""

from __future__ import annotations

from typing import Any

from countdown_gym.rewards.terms import TAGGED_FORMATS, WELL_FORMED_REASONS, format_score, sparse_score
from countdown_gym.rewards.variants import REWARD_VARIANTS, score_terms


def __getattr__(name: str) -> Any:
    """``SCORE_TERMS``: the variants a completion's replay scores (read from the registry when asked)."""
    if name == "SCORE_TERMS":
        return tuple(n for n, v in REWARD_VARIANTS.items() if "text" in v.kinds and v.per_completion)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SCORE_TERMS", "TAGGED_FORMATS", "WELL_FORMED_REASONS", "format_score", "score_terms", "sparse_score"]
