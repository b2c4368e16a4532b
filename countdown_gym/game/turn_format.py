"""The turn grammar of the multi-turn game: what an agent may say, what the environment answers.

The one home of the multi-turn text forms (``CountdownMultiTurn-v0``, the TRL and verl
adapters and the embedded model's turn traces all read and write them through this module).

An **agent turn** is one line (surrounding white space and one trailing newline ignored,
keywords in any case):

* a move ``a op b`` with ``op`` one of ``+ - * /`` (``37-29``, ``37 - 29``), optionally with
  its result ``a op b = c`` (a stated result must be exact: ``arithmetic_error`` otherwise);
  numbers follow the verifier's literal rules (ASCII digits, no leading zero, ``-7``); a
  fraction operand (rational rules) is written in parentheses, ``72/(9/2)``, so that a turn has
  one reading (``72/9/2`` is ``malformed``); a stated result may be written ``= 9/2``;
* ``undo``: take back the last move (the way back of a search);
* ``give up``: end the episode unsolved.

The **environment's reply** is one line, always ending with the number set now in play, in
the order the compact traces use (the numbers not used, in their order, then the result):

==================================  ===================================================
``= 8 [14,6,8]``                    the move was applied; its result, the numbers now
``= 46 [46] solved``                the target is reached: the episode ends
``= 16 [16] miss``                  one number left and it is not the target: ``undo``
``undone [37,14,29,6]``             the last move was taken back
``error operand_unavailable [..]``  nothing applied; a reason code (:data:`TURN_ERRORS`,
                                    or a :meth:`Rules.check` code)
``gave up [..]``                    the episode ends unsolved
``turn limit [..]``                 the turn budget is spent: the episode is truncated
==================================  ===================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from countdown_gym.game.line_grammar import parse_number
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import OPERATORS, Number, format_number, normalize
from countdown_gym.game.text_format import compact_prompt, describe_rules

TURN_KINDS: tuple[str, ...] = ("move", "undo", "give_up", "invalid")

TURN_ERRORS: dict[str, str] = {
    "empty_turn": "the turn holds no text",
    "turn_too_long": "the turn is longer than the environment's max_turn_chars",
    "malformed": "the turn is not 'a op b', 'a op b = c', 'undo' or 'give up'",
    "operand_unavailable": "an operand is not in the current number set",
    "arithmetic_error": "the stated result differs from the exact result",
    "nothing_to_undo": "'undo' with no move to take back",
}
"""Reason codes of turns the environment refuses (besides :meth:`Rules.check`'s codes)."""

TURN_PROMPT_STYLES: tuple[str, ...] = ("compact", "instruct")

_OPERAND = r"-?[0-9]+|\(-?[0-9]+(?:/[0-9]+)?\)"
_NUM = r"\(?-?[0-9]+(?:/[0-9]+)?\)?"
_RE_MOVE = re.compile(rf"({_OPERAND})\s*([-+*/])\s*({_OPERAND})(?:\s*=\s*({_NUM}))?")
_RE_UNDO = re.compile(r"undo\.?", re.IGNORECASE)
_RE_GIVE_UP = re.compile(r"give\s+up\.?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Turn:
    """One parsed agent turn: ``kind`` in :data:`TURN_KINDS`; a move's operands, operator and
    stated result (``None`` when not written); ``reason`` a :data:`TURN_ERRORS` code when invalid."""

    kind: str
    a: Number | None = None
    op: str | None = None
    b: Number | None = None
    stated: Number | None = None
    reason: str = "ok"


def parse_turn(text: str, max_chars: int = 200) -> Turn:
    """The :class:`Turn` an agent's text states. Never raises for a ``str``; a ``TypeError`` for anything else."""
    if not isinstance(text, str):
        raise TypeError(f"a turn must be a str, got {type(text).__name__} {text!r:.80}")
    if len(text) > max_chars:
        return Turn("invalid", reason="turn_too_long")
    body = text.strip()
    if not body:
        return Turn("invalid", reason="empty_turn")
    m = _RE_MOVE.fullmatch(body)
    if m is not None:
        try:
            a, b = parse_number(m.group(1)), parse_number(m.group(3))
            stated = None if m.group(4) is None else parse_number(m.group(4))
        except ValueError:
            return Turn("invalid", reason="malformed")
        return Turn("move", a, m.group(2), b, stated)
    if _RE_UNDO.fullmatch(body):
        return Turn("undo")
    if _RE_GIVE_UP.fullmatch(body):
        return Turn("give_up")
    return Turn("invalid", reason="malformed")


def format_state(state: Sequence[Number]) -> str:
    """``[14,6,8]``: a number set as the replies write it."""
    return "[" + ",".join(format_number(x) for x in state) + "]"


def format_move(a: Number, op: str, b: Number) -> str:
    """``37-29``: a move as an agent turn (the form the embedded model writes); a fraction in
    parentheses, ``72/(9/2)``."""
    if op not in OPERATORS:
        raise ValueError(f"unknown operator {op!r}; choose one of {OPERATORS}")
    return f"{_operand(a)}{op}{_operand(b)}"


def _operand(x: Number) -> str:
    x = normalize(x)
    return format_number(x) if isinstance(x, int) else f"({format_number(x)})"


def reply_moved(result: Number, state: Sequence[Number], outcome: str = "") -> str:
    """``= 8 [14,6,8]``, with `` solved`` or `` miss`` when ``outcome`` says so."""
    return f"= {format_number(result)} {format_state(state)}" + (f" {outcome}" if outcome else "")


def reply_status(word: str, state: Sequence[Number]) -> str:
    """``undone [..]``, ``gave up [..]``, ``turn limit [..]`` or ``error <reason> [..]``."""
    return f"{word} {format_state(state)}"


def turn_prompt(problem: Problem, style: str = "compact", max_turns: int | None = None) -> str:
    """The first message of a multi-turn episode.

    ``"compact"`` is the embedded model's one line (``Numbers: [37,14,29,6] Target: 46``);
    ``"instruct"`` explains the rules and the turn grammar to an instruction-following model.
    """
    if style == "compact":
        return compact_prompt(problem)
    if style != "instruct":
        raise ValueError(f"unknown turn prompt style {style!r}; choose one of {list(TURN_PROMPT_STYLES)}")
    budget = f" You have at most {max_turns} turns." if max_turns is not None else ""
    return (
        f"Countdown: reach the target {problem.target} from the numbers {format_state(problem.numbers)}. "
        f"Rules: {describe_rules(problem.rules)}\n"
        "Play one move per turn: write only 'a op b' with two numbers you have and op one of + - * /, e.g. "
        f"'{format_move(*_example_move(problem))}'. The game computes the result and answers '= result [numbers now]'. "
        "It answers 'solved' when the last number is the target, and 'miss' when the last number is not "
        "the target. Write 'undo' to take back your last move, 'give up' to stop. An illegal move is "
        f"answered 'error <reason> [numbers]' and changes nothing.{budget}\n"
    )


def _example_move(problem: Problem) -> tuple[Number, str, Number]:
    a, b = sorted(problem.numbers[:2], reverse=True)
    return a, "+", b
