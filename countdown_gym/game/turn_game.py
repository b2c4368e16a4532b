"""The multi-turn game: one agent turn in, its outcome and transition records out. :class:`TurnEpisode` is
``CountdownMultiTurn-v0`` without Gymnasium; :func:`replay_turns` plays a finished list of turns. The game writes no
text: a :class:`TurnResult`'s ``reply`` is its outcome rendered by :mod:`countdown_gym.game.turn_format`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from countdown_gym.game.expression import literal_limit
from countdown_gym.game.problem import Problem, play_rules
from countdown_gym.game.rules import Number, Rules, transition_record
from countdown_gym.game.solver import reachable, without_pair
from countdown_gym.game.text_format import format_equation
from countdown_gym.game.turn_format import parse_turn, render_reply
from countdown_gym.game.verifier import Verdict, describe_value, verify

DEFAULT_MAX_TURNS = 16
UNDO_MOVE = (None, "undo", None, None)
"""The ``move`` of a backtrack's transition record: ``state`` -> the state before the last move."""


def check_budget(name: str, value: Any, allow_none: bool = True) -> int | None:
    """``value`` as an int (or ``None`` when ``allow_none``); ``ValueError`` unless it is an int in
    ``1..sys.maxsize`` (what an array or a prompt takes). The one check of a budget (turns, characters, steps,
    lines) in every layer."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= sys.maxsize:
        raise ValueError(f"{name} must be a positive int{' or None' if allow_none else ''} (at most {sys.maxsize}), "
                         f"got {describe_value(value)}")
    return int(value)


@dataclass
class TurnResult:
    """What one turn did: its outcome (``kind``, ``valid``, ``reason``, ``state`` after it, a move's ``result``, the
    reply's ``marks``), transition records, reward and episode end."""

    kind: str
    valid: bool
    reason: str
    state: tuple[Number, ...]
    result: Number | None = None
    marks: tuple[str, ...] = ()
    transitions: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False

    @property
    def reply(self) -> str:
        """The environment's reply line (:func:`~countdown_gym.game.turn_format.render_reply`)."""
        return render_reply(self.kind, self.valid, self.reason, self.state, self.result, self.marks)


class TurnEpisode:
    """One multi-turn game of ``problem``: a stack of states; ``play(text)`` returns a :class:`TurnResult`.

    A legal move pushes a state, ``undo`` pops it (record ``move = UNDO_MOVE``), an illegal move changes nothing (a
    ``valid=False`` record), an unreadable turn emits no record. It terminates on a win (:meth:`Rules.wins`) or
    ``give up``, and is truncated after ``max_turns`` turns or, with ``stop_at_dead_end=k``, after ``k`` turns in a
    row in a state the solver finds lost (``True`` is 1; a training option). The terminal reward is the
    :func:`verify` reward of the path's moves as a ``<Solution>`` block.
    """

    def __init__(self, problem: Problem, rules: Rules | None = None, max_turns: int = DEFAULT_MAX_TURNS,
                 max_turn_chars: int = 200, *, stop_at_dead_end: bool | int = False) -> None:
        self.rules = play_rules(problem, rules, "TurnEpisode")
        if not isinstance(stop_at_dead_end, (int, np.integer)) or stop_at_dead_end < 0:  # a bool is an int
            raise ValueError(f"stop_at_dead_end must be a bool or an int >= 0, got {describe_value(stop_at_dead_end)}")
        self.problem = problem
        self.stop_at_dead_end = int(stop_at_dead_end)
        self._lost = False  # the current state cannot reach the target (tracked with stop_at_dead_end)
        self._lost_turns = 0
        self.dead_end = False
        """Whether the episode stopped at a dead end (``stop_at_dead_end``)."""
        self.target = problem.target
        self.max_turns = check_budget("max_turns", max_turns, allow_none=False)
        self.max_turn_chars = check_budget("max_turn_chars", max_turn_chars, allow_none=False)
        self.states: list[tuple[Number, ...]] = [tuple(problem.numbers)]
        self.moves: list[tuple[Number, str, Number, Number]] = []
        self.turns = 0
        self.invalid_turns = 0
        self.done = False
        self.terminated = False
        self.verdict: Verdict | None = None

    @property
    def state(self) -> tuple[Number, ...]:
        return self.states[-1]

    def _record(self, state: tuple[Number, ...], move: tuple, nxt: tuple[Number, ...] | None, reason: str) -> dict[str, Any]:
        return transition_record(state, move, nxt, self.target, reason, self.rules, turn=self.turns - 1)

    def solution_text(self) -> str:
        """The moves on the current path as a ``<Solution>`` block (what the verifier judges)."""
        body = "".join(format_equation(*move) + "\n" for move in self.moves)
        return f"<Solution>\n{body}</Solution>"

    def _end(self, res: TurnResult, terminated: bool) -> TurnResult:
        self.done, self.terminated = True, terminated
        self.verdict = verify(self.problem, self.solution_text(), self.rules)
        res.reward = self.verdict.reward if terminated else 0.0
        res.terminated, res.truncated = terminated, not terminated
        return res

    def play(self, text: str) -> TurnResult:
        """Apply one agent turn. ``RuntimeError`` once the episode is over; ``TypeError`` for a non-``str``."""
        if self.done:
            raise RuntimeError("the episode has ended; call reset() before step()")
        with literal_limit(self.problem.literal_digits):
            turn = parse_turn(text, self.max_turn_chars)
        self.turns += 1
        state = self.state
        if turn.kind == "move":
            res = self._move(state, turn.a, turn.op, turn.b, turn.stated)
        elif turn.kind == "undo":
            if len(self.states) == 1:
                res = TurnResult("undo", False, "nothing_to_undo", state,
                                 transitions=[self._record(state, UNDO_MOVE, None, "nothing_to_undo")])
            else:
                self.states.pop()
                self.moves.pop()
                res = TurnResult("undo", True, "ok", self.state, transitions=[self._record(state, UNDO_MOVE, self.state, "ok")])
        elif turn.kind == "give_up":
            return self._end(TurnResult("give_up", True, "ok", state), terminated=True)
        else:
            res = TurnResult("invalid", False, turn.reason, state)
        if not res.valid:
            self.invalid_turns += 1
        if res.terminated:
            return self._end(res, terminated=True)
        if self.stop_at_dead_end and self._lost_for_long(turn.kind, res.valid):
            self.dead_end = True
            res.marks += ("dead_end",)
            return self._end(res, terminated=False)
        if self.turns >= self.max_turns:
            res.marks += ("turn_limit",)
            return self._end(res, terminated=False)
        return res

    def play_turns(self, turns: Sequence[str]) -> list[TurnResult]:
        """:meth:`play` each of ``turns`` in order until the episode ends (the rest are ignored); their results."""
        if isinstance(turns, str):  # else each character is played as a turn
            raise TypeError("turns must be a sequence of turns, got one str (a single turn goes in a list: ['21+16'])")
        return [self.play(text) for text in turns if not self.done]

    def _lost_for_long(self, kind: str, valid: bool) -> bool:
        """Whether this turn ends the ``stop_at_dead_end``-th turn in a row in a lost state."""
        if valid and kind in ("move", "undo"):
            self._lost = not reachable(self.state, self.target, self.rules)
        self._lost_turns = self._lost_turns + 1 if self._lost else 0
        return self._lost_turns >= self.stop_at_dead_end

    def _move(self, state: tuple[Number, ...], a: Number, op: str, b: Number, stated: Number | None) -> TurnResult:
        move = (a, op, b, stated)
        rest = without_pair(state, a, b)
        if rest is None:
            reason, result = "operand_unavailable", None
        else:
            result, reason = self.rules.check(a, op, b)
            if result is not None and stated is not None and stated != result:
                reason = "arithmetic_error"
        if reason != "ok":
            return TurnResult("move", False, reason, state, transitions=[self._record(state, move, None, reason)])
        nxt = (*rest, result)
        self.states.append(nxt)
        self.moves.append((a, op, b, result))
        record = self._record(state, (a, op, b, result), nxt, "ok")
        if self.rules.wins(result, len(nxt), self.target):
            return TurnResult("move", True, "ok", nxt, result, ("solved",), [record], terminated=True)
        return TurnResult("move", True, "ok", nxt, result, ("miss",) if len(nxt) == 1 else (), [record])


@dataclass
class TurnReplay:
    """A finished list of turns played through :class:`TurnEpisode`."""

    transitions: list[dict[str, Any]]
    replies: list[str]
    verdict: Verdict
    solved: bool
    turns_played: int
    invalid_turns: int
    truncated: bool
    turn_transitions: list[list[dict[str, Any]]]
    """The transition records of each turn played (one list per turn: the per-step view)."""
    dead_end: bool = False
    """Stopped after a move that lost the target (``TurnEpisode(stop_at_dead_end=True)``; then ``truncated`` too)."""

    @property
    def reward(self) -> float:
        return 1.0 if self.solved else 0.0

    @property
    def invalid_steps(self) -> int:
        """Refused turns (the name the single-pass replay uses for its invalid move lines)."""
        return self.invalid_turns


def replay_turns(problem: Problem, turns: Sequence[str], *, rules: Rules | None = None,
                 max_turns: int = DEFAULT_MAX_TURNS, max_turn_chars: int = 200) -> TurnReplay:
    """Play ``turns`` in order (:meth:`TurnEpisode.play_turns`; an episode left open is unsolved)."""
    ep = TurnEpisode(problem, rules, max_turns, max_turn_chars)
    return turn_replay(ep, ep.play_turns(turns))


def turn_replay(ep: TurnEpisode, results: Sequence[TurnResult]) -> TurnReplay:
    """The :class:`TurnReplay` of an episode already played (``results``: each :meth:`TurnEpisode.play`'s), as
    :func:`replay_turns` would give it."""
    transitions = [t for res in results for t in res.transitions]
    verdict = ep.verdict if ep.verdict is not None else verify(ep.problem, ep.solution_text(), ep.rules)
    solved = ep.terminated and verdict.correct
    truncated = ep.verdict is not None and not ep.terminated  # the turn limit or a dead end (not a stop from outside)
    return TurnReplay(transitions, [res.reply for res in results], verdict, solved, ep.turns, ep.invalid_turns,
                      truncated, [res.transitions for res in results], ep.dead_end)
