"""Pure dense-reward functions: the one home of every per-step dense term.

The wrappers in this package and the GRPO baseline both call these functions on the transition
records that Countdown-v0 and CountdownText-v0 put in ``info["transitions"]`` (shape in
``docs/DESIGN.md``). Formulas, signs and scales are documented in ``docs/rewards.md``.

* :func:`oracle_term` -- additive oracle reward from exact reachability (the solver).
* :func:`critic_terms` -- additive reward from a learned critic's score of the new state.
* :func:`potential_shaping` -- ``gamma * Phi(s') - Phi(s)`` (Ng et al. 1999).
* :func:`oracle_potential`, :func:`critic_potentials` -- the potentials used for shaping.

The registry of reward variants (:mod:`countdown_gym.rewards.variants`) takes its terms in two
shapes: a :data:`MoveTerm` ``(transitions, scorer) -> one value per move`` and a :data:`Potential`
``(states, targets, rules, scorer) -> one value per state``; the last section adapts the functions
above to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from countdown_gym.game.rules import Number, Rules
from countdown_gym.game.solver import reachable

ORACLE_MODES: tuple[str, ...] = ("perfect", "reachable")
TRANSITION_KEYS: tuple[str, ...] = ("state", "move", "next_state", "target", "valid")


class Scorer(Protocol):
    """What a critic must offer (``critics.Critic`` and ``critics.text_critic.TextCritic`` satisfy it).

    ``score(states, targets)`` returns one float per ``(state, target)`` pair, batched, higher =
    more likely that the target is still reachable (the shipped critics: a cosine in ``[-1, 1]``).
    :func:`critic_terms`, ``ContrastiveCriticReward`` and the TRL / verl critic rewards call only
    this method. A critic may also have ``config.max_numbers`` (the most numbers a state may
    hold); ``ContrastiveCriticReward`` and verl check episodes against it.
    """

    def score(self, states: Sequence[Sequence[int]], targets: Sequence[int]) -> np.ndarray: ...


def check_transition(transition: Any) -> Mapping[str, Any]:
    """``transition`` itself if it has the DESIGN.md shape, else a ``ValueError`` naming what is wrong."""
    if not isinstance(transition, Mapping):
        raise ValueError(
            f"a transition record must be a dict (see docs/DESIGN.md), got {type(transition).__name__}: {transition!r:.120}"
        )
    missing = [k for k in TRANSITION_KEYS if k not in transition]
    if missing:
        raise ValueError(f"transition record is missing key(s) {missing} (see docs/DESIGN.md): {transition!r:.200}")
    if transition["valid"] and transition["next_state"] is None:
        raise ValueError(f"transition record has valid=True but next_state=None: {transition!r:.200}")
    return transition


_REAL = (int, float, np.integer, np.floating)
"""What a scale or gamma may be: a Python or numpy real number (e.g. read from a config array)."""


def _check_scale(scale: float) -> float:
    try:
        ok = not isinstance(scale, bool) and isinstance(scale, _REAL) and math.isfinite(float(scale))
    except OverflowError:  # an int too large for a float
        ok = False
    if not ok:
        raise ValueError(f"scale must be a finite number, got {scale!r:.60}")
    return float(scale)


def _check_gamma(gamma: float) -> float:
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


def oracle_potential(state: Sequence[Number] | None, target: Number, rules: Rules | None = None) -> float:
    """The oracle potential: ``1.0`` if ``target`` is reachable from ``state`` under ``rules``, else ``0.0``.

    ``state=None`` (no state, e.g. after an invalid move) has potential ``0.0``.
    """
    if state is None:
        return 0.0
    return 1.0 if reachable(state, target, rules or Rules.longproc()) else 0.0


def oracle_term(transition: Mapping[str, Any], mode: str = "perfect", scale: float = 1.0) -> float:
    """The oracle's additive reward for one move.

    * ``"perfect"``: ``scale`` if the move is valid and the target is still reachable from the new
      state (the move lies on a solution path), else ``0``.
    * ``"reachable"``: ``+scale`` if valid and the target is still reachable, ``-scale`` otherwise
      (an invalid move, or a valid move into a dead end).

    Example:
        >>> from countdown_gym.game.rules import Rules
        >>> t = {"state": (6, 2, 5, 3), "move": (6, "-", 2, 4), "next_state": (5, 3, 4),
        ...      "target": 8, "valid": True, "reason": "ok", "rules": Rules.longproc()}
        >>> oracle_term(t), oracle_term(t, "reachable", 0.5)
        (1.0, 0.5)
    """
    if mode not in ORACLE_MODES:
        raise ValueError(f"oracle mode must be one of {ORACLE_MODES}, got {mode!r}")
    scale = _check_scale(scale)
    check_transition(transition)
    good = bool(transition["valid"]) and reachable(transition["next_state"], transition["target"], _rules(transition))
    if mode == "perfect":
        return scale if good else 0.0
    return scale if good else -scale


def potential_shaping(phi_s: float, phi_next: float, gamma: float) -> float:
    """Potential-based shaping ``F = gamma * phi_next - phi_s`` (Ng, Harada & Russell 1999).

    Adding ``F`` to every step's reward leaves the optimal policy unchanged (terminal states must
    have potential 0; the wrappers take care of that).
    """
    gamma = _check_gamma(gamma)
    return gamma * float(phi_next) - float(phi_s)


def critic_potentials(
    critic: Scorer, states: Sequence[Sequence[Number]], targets: Sequence[Number]
) -> np.ndarray:
    """The critic potential of each ``(state, target)``: the critic's score (cosine in ``[-1, 1]``), batched."""
    if len(states) != len(targets):
        raise ValueError(f"got {len(states)} states but {len(targets)} targets")
    if not states:
        return np.zeros(0, dtype=np.float64)
    scores = np.asarray(critic.score([tuple(s) for s in states], list(targets)), dtype=np.float64)
    if scores.shape != (len(states),):
        raise ValueError(
            f"critic.score returned shape {scores.shape} for {len(states)} states; expected ({len(states)},)"
        )
    return scores


def critic_terms(critic: Scorer, transitions: Sequence[Mapping[str, Any]], scale: float = 1.0) -> list[float]:
    """The critic's additive reward for each move: ``scale * score(next_state, target)``.

    Valid moves are scored in one batched call; an invalid move (no new state) gets ``-scale``,
    the lowest value a cosine score can give.
    """
    scale = _check_scale(scale)
    for t in transitions:
        check_transition(t)
    valid = [i for i, t in enumerate(transitions) if t["valid"]]
    scores = critic_potentials(
        critic, [transitions[i]["next_state"] for i in valid], [transitions[i]["target"] for i in valid]
    )
    out = [-scale] * len(transitions)
    for i, s in zip(valid, scores, strict=True):
        out[i] = scale * float(s)
    return out


def check_scorer_fits(scorer: Any, numbers: Sequence[Number], who: str, where: str = "this episode starts from") -> None:
    """A ``ValueError`` when ``scorer`` (a critic with ``config.max_numbers``) cannot score a state of ``numbers``."""
    limit = getattr(getattr(scorer, "config", None), "max_numbers", None)
    if limit is not None and len(numbers) > limit:
        raise ValueError(f"{who}: the critic ({getattr(scorer, 'path', None)}) scores states of at most {limit} numbers, "
                         f"but {where} {len(numbers)} numbers {list(numbers)}; use a critic trained with max_numbers >= "
                         f"{len(numbers)} or drop the critic term")


# --- the shapes the registry takes ----------------------------------------------------------

MoveTerm = Callable[[Sequence[Mapping[str, Any]], Any], Sequence[float]]
"""A per-move term: ``(transitions, scorer) -> one unscaled value per move`` (``scorer`` is ``None`` unless
the variant ``needs`` one)."""

Potential = Callable[[Sequence[Sequence[Number]], Sequence[Number], Rules, Any], Sequence[float]]
"""A shaping potential: ``(states, targets, rules, scorer) -> Phi of each state``, unscaled."""


def perfect_moves(transitions: Sequence[Mapping[str, Any]], scorer: Any = None) -> list[float]:
    """:func:`oracle_term` ``"perfect"`` of each move (a :data:`MoveTerm`)."""
    return [oracle_term(t, "perfect") for t in transitions]


def reachable_moves(transitions: Sequence[Mapping[str, Any]], scorer: Any = None) -> list[float]:
    """:func:`oracle_term` ``"reachable"`` of each move (a :data:`MoveTerm`)."""
    return [oracle_term(t, "reachable") for t in transitions]


def scored_moves(transitions: Sequence[Mapping[str, Any]], scorer: Scorer) -> list[float]:
    """:func:`critic_terms` of each move with ``scorer`` as the critic (a :data:`MoveTerm`)."""
    return critic_terms(scorer, transitions)


def reachability(states: Sequence[Sequence[Number]], targets: Sequence[Number], rules: Rules, scorer: Any = None) -> list[float]:
    """:func:`oracle_potential` of each state (a :data:`Potential`)."""
    return [oracle_potential(s, t, rules) for s, t in zip(states, targets, strict=True)]


def critic_scores(states: Sequence[Sequence[Number]], targets: Sequence[Number], rules: Rules, scorer: Scorer) -> np.ndarray:
    """:func:`critic_potentials` of each state with ``scorer`` as the critic (a :data:`Potential`)."""
    return critic_potentials(scorer, states, targets)
