"""Trajectory scores: one number per completion, from its :class:`~countdown_gym.envs.text.Replay`.

A completion replayed through CountdownText-v0 (its verdict and its transition records) gets the
per-completion terms every text trainer uses: the TRL reward functions
(:mod:`countdown_gym.integrations.trl`), verl's ``compute_score`` and the ``verifiers`` rubrics. The
per-move terms themselves live in :mod:`countdown_gym.rewards.terms`; here they are only averaged
over a completion's moves. Which score a reward variant gives is the registry's business
(:mod:`countdown_gym.rewards.variants`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from countdown_gym.rewards.terms import Scorer, critic_terms, oracle_term


def mean_over_moves(values: Sequence[float]) -> float:
    """The mean of a completion's per-move values; 0.0 for a completion without moves."""
    return float(sum(values) / len(values)) if len(values) else 0.0


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
    return mean_over_moves([oracle_term(t, mode) for t in replay.transitions])


def critic_score(replay: Any, critic: Scorer) -> float:
    """Mean of the critic's per-move scores (:func:`critic_terms`, -1 per invalid move); 0.0 without moves."""
    return mean_over_moves(critic_terms(critic, replay.transitions)) if replay.transitions else 0.0


__all__ = [
    "TAGGED_FORMATS", "WELL_FORMED_REASONS", "critic_score", "format_score", "mean_over_moves", "oracle_score",
    "sparse_score",
]
