"""The reward terms: pure functions, the one home of every term a reward variant computes, unscaled (the registry,
:mod:`countdown_gym.rewards.variants`, scales them). Shapes: a :data:`MoveTerm` per move of the transition records
(``docs/DESIGN.md``), a :data:`Potential` per state, or a per-completion score of a replay. Formulas:
``docs/rewards.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from countdown_gym.game.rules import Number, Rules, describe_value
from countdown_gym.game.solver import reachable

TRANSITION_KEYS: tuple[str, ...] = ("state", "move", "next_state", "target", "valid")


class Scorer(Protocol):
    """What a critic must offer: ``score(states, targets)``, one float per pair, batched, higher = the target more
    likely reachable; optionally ``config.max_numbers`` (:func:`check_scorer_fits`)."""

    def score(self, states: Sequence[Sequence[int]], targets: Sequence[int]) -> np.ndarray: ...


def check_transition(transition: Any) -> Mapping[str, Any]:
    """``transition`` itself if it has the DESIGN.md shape, else a ``ValueError`` naming what is wrong."""
    if not isinstance(transition, Mapping):
        raise ValueError(f"a transition record must be a dict (see docs/DESIGN.md), got {describe_value(transition)}")
    missing = [k for k in TRANSITION_KEYS if k not in transition]
    if missing:
        raise ValueError(f"transition record is missing key(s) {missing} (see docs/DESIGN.md): {transition!r:.200}")
    if transition["valid"] and transition["next_state"] is None:
        raise ValueError(f"transition record has valid=True but next_state=None: {transition!r:.200}")
    return transition


_REAL = (int, float, np.integer, np.floating)
"""What a gamma may be: a Python or numpy real number (e.g. read from a config array)."""


def check_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, _REAL) or not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
    return float(gamma)


def _rules(transition: Mapping[str, Any]) -> Rules:
    rules = transition.get("rules")
    if rules is None:
        return Rules.longproc()
    if not isinstance(rules, Rules):
        raise ValueError(f"transition['rules'] must be a countdown_gym.Rules, got {type(rules).__name__}")
    return rules


def potential_shaping(phi_s: float, phi_next: float, gamma: float) -> float:
    """Potential-based shaping ``F = gamma * phi_next - phi_s`` (Ng, Harada & Russell 1999)."""
    gamma = check_gamma(gamma)
    return gamma * float(phi_next) - float(phi_s)


def check_scorer_fits(scorer: Any, numbers: Sequence[Number], who: str, where: str = "this episode starts from") -> None:
    """A ``ValueError`` when ``scorer`` (a critic with ``config.max_numbers``) cannot score a state of ``numbers``."""
    limit = getattr(getattr(scorer, "config", None), "max_numbers", None)
    if limit is not None and len(numbers) > limit:
        raise ValueError(f"{who}: the critic ({getattr(scorer, 'path', None)}) scores states of at most {limit} numbers, "
                         f"but {where} {len(numbers)} numbers {list(numbers)}; use a critic trained with max_numbers >= "
                         f"{len(numbers)} or drop the critic term")


class CachedScorer:
    """A deterministic critic's ``score`` memoised per ``(state, target)``, cleared at ``max_size`` entries."""

    def __init__(self, critic: Scorer, max_size: int = 1 << 17) -> None:
        self.critic = critic
        self.max_size = max_size
        self._cache: dict[tuple[tuple[Number, ...], Number], float] = {}

    def score(self, states: Sequence[Sequence[Number]], targets: Sequence[Number]) -> np.ndarray:
        keys = [(tuple(s), t) for s, t in zip(states, targets, strict=True)]
        todo = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if todo:
            if len(self._cache) + len(todo) > self.max_size:
                self._cache.clear()
                todo = list(dict.fromkeys(keys))  # the pairs cached before are gone too
            scores = critic_scores([k[0] for k in todo], [k[1] for k in todo], None, self.critic)
            self._cache.update(zip(todo, scores.tolist(), strict=True))
        return np.array([self._cache[k] for k in keys], dtype=np.float64)


MoveTerm = Callable[[Sequence[Mapping[str, Any]], Any], Sequence[float]]
"""A per-move term: ``(transitions, scorer) -> one unscaled value per move`` (``scorer`` is ``None`` unless
the variant ``needs`` one)."""

Potential = Callable[[Sequence[Sequence[Number]], Sequence[Number], Rules, Any], Sequence[float]]
"""A shaping potential: ``(states, targets, rules, scorer) -> Phi of each state``, unscaled."""


def _keeps_reachable(transition: Mapping[str, Any]) -> bool:
    """Whether the move is valid and the target still reachable from its new state (it lies on a solution path)."""
    t = check_transition(transition)
    return bool(t["valid"]) and reachable(t["next_state"], t["target"], _rules(t))


def perfect_moves(transitions: Sequence[Mapping[str, Any]], scorer: Any = None) -> list[float]:
    """The seed paper's oracle, per move: 1 for a valid move after which the target is still reachable, else 0."""
    return [1.0 if _keeps_reachable(t) else 0.0 for t in transitions]


def reachable_moves(transitions: Sequence[Mapping[str, Any]], scorer: Any = None) -> list[float]:
    """The oracle's +1 / -1 per move: +1 for a valid move that keeps the target reachable, else -1."""
    return [1.0 if _keeps_reachable(t) else -1.0 for t in transitions]


def critic_scores(states: Sequence[Sequence[Number]], targets: Sequence[Number], rules: Rules | None,
                  scorer: Scorer) -> np.ndarray:
    """The critic potential: its score of each ``(state, target)``, in one batched call."""
    if len(states) != len(targets):
        raise ValueError(f"got {len(states)} states but {len(targets)} targets")
    if not len(states):
        return np.zeros(0, dtype=np.float64)
    scores = np.asarray(scorer.score([tuple(s) for s in states], list(targets)), dtype=np.float64)
    if scores.shape != (len(states),):
        raise ValueError(f"critic.score returned shape {scores.shape} for {len(states)} states; expected ({len(states)},)")
    if not np.isfinite(scores).all():
        bad = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise ValueError(f"critic.score returned {scores[bad]} for state {tuple(states[bad])} -> {targets[bad]}; "
                         "a reward term must be finite")
    return scores


def scored_moves(transitions: Sequence[Mapping[str, Any]], scorer: Scorer) -> list[float]:
    """The critic's score of each move's new state (one batched call); -1 for an invalid move."""
    for t in transitions:
        check_transition(t)
    valid = [i for i, t in enumerate(transitions) if t["valid"]]
    scores = critic_scores([transitions[i]["next_state"] for i in valid], [transitions[i]["target"] for i in valid],
                           None, scorer)
    out = [-1.0] * len(transitions)
    for i, s in zip(valid, scores, strict=True):
        out[i] = float(s)
    return out


def reachability(states: Sequence[Sequence[Number] | None], targets: Sequence[Number], rules: Rules | None,
                 scorer: Any = None) -> list[float]:
    """The oracle potential of each state: 1 if the target is reachable from it, else 0 (also for no state)."""
    rules = rules or Rules.longproc()
    return [0.0 if s is None else 1.0 if reachable(s, t, rules) else 0.0 for s, t in zip(states, targets, strict=True)]


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
    """1.0 if the final answer is in an ``<answer>`` tag or a ``<Solution>`` block and parses (right or wrong);
    an untagged last line does not count."""
    v = replay.verdict
    return 1.0 if v.answer_format in TAGGED_FORMATS and v.reason in WELL_FORMED_REASONS else 0.0
