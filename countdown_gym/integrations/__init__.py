"""Adapters for RL trainers outside the package, and the trajectory scores they share.

* :mod:`countdown_gym.integrations.verl` -- a verl-compatible ``compute_score`` and the problem
  encoding used by ``scripts/export_verl.py``.
* :mod:`countdown_gym.integrations.trl` -- TRL reward functions; :mod:`~countdown_gym.integrations.verifiers_env`
  -- ``verifiers`` environments (``countdown_gym.load_environment``);
  :mod:`~countdown_gym.integrations.reasoning_gym` -- a reasoning-gym dataset (``docs/integrations.md``).
* :mod:`countdown_gym.runkit.tracking` -- experiment logging of the training scripts
  (``--report-to``: TensorBoard and every tracker of ``transformers``' ``report_to``).

The functions below turn one :class:`~countdown_gym.envs.text.Replay` (a completion replayed
through CountdownText-v0) into the per-completion terms every trainer integration uses: the TRL
reward functions (:mod:`countdown_gym.integrations.trl`) and verl's ``compute_score``. The per-move terms
themselves live in :mod:`countdown_gym.rewards.terms`; here they are only averaged over the moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from countdown_gym.rewards.terms import Scorer, critic_terms, oracle_term

SCORE_TERMS: tuple[str, ...] = ("sparse", "format", "oracle", "oracle_perfect", "critic")
"""Per-completion terms computable from a replay alone (``critic`` also needs a critic)."""


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else 0.0


def sparse_score(replay: Any) -> float:
    """1.0 if the final answer is correct, else 0.0."""
    return 1.0 if replay.verdict.correct else 0.0


WELL_FORMED_REASONS: frozenset[str] = frozenset(
    {
        "ok", "foreign_number", "number_reused", "division_by_zero", "non_integer_result", "negative_result",
        "zero_result", "exceeds_limit", "arithmetic_error", "unused_numbers", "wrong_value",
    }
)
"""Verdict reasons of an answer that parsed (right or wrong); every other reason is a syntax failure."""

TAGGED_FORMATS: frozenset[str] = frozenset({"answer_tag", "solution_block"})


def format_score(replay: Any) -> float:
    """1.0 if the final answer is in an ``<answer>`` tag or a ``<Solution>`` block and parses, else 0.0.

    A parsed answer may still be wrong (wrong value, reused number...): that is the sparse term's job.
    An untagged last line does not count, so a completion cannot earn the format term by accident.
    """
    v = replay.verdict
    return 1.0 if v.answer_format in TAGGED_FORMATS and v.reason in WELL_FORMED_REASONS else 0.0


def oracle_score(replay: Any, mode: str = "reachable") -> float:
    """Mean of :func:`oracle_term` (``mode``) over the completion's moves; 0.0 without moves.

    ``"reachable"`` is in ``[-1, 1]`` (+1 per valid move that keeps the target reachable, -1 per
    other move); ``"perfect"`` (the seed paper's oracle) is the fraction of perfect moves.
    """
    return _mean([oracle_term(t, mode) for t in replay.transitions])


def critic_score(replay: Any, critic: Scorer) -> float:
    """Mean of the critic's per-move scores (:func:`critic_terms`, -1 per invalid move); 0.0 without moves."""
    return _mean(critic_terms(critic, replay.transitions)) if replay.transitions else 0.0


def score_terms(replay: Any, terms: Sequence[str] = SCORE_TERMS, critic: Scorer | None = None) -> dict[str, float]:
    """The requested per-completion terms of ``replay`` by name (see :data:`SCORE_TERMS`)."""
    out: dict[str, float] = {}
    for name in terms:
        if name == "sparse":
            out[name] = sparse_score(replay)
        elif name == "format":
            out[name] = format_score(replay)
        elif name == "oracle":
            out[name] = oracle_score(replay, "reachable")
        elif name == "oracle_perfect":
            out[name] = oracle_score(replay, "perfect")
        elif name == "critic":
            if critic is None:
                raise ValueError("the 'critic' term needs a critic (critics.load_critic())")
            out[name] = critic_score(replay, critic)
        else:
            raise ValueError(f"unknown score term {name!r}; terms: {list(SCORE_TERMS)}")
    return out


__all__ = [
    "SCORE_TERMS",
    "TAGGED_FORMATS",
    "WELL_FORMED_REASONS", "critic_score", "format_score", "oracle_score", "score_terms", "sparse_score"]
