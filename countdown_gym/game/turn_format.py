"""The multi-turn protocol (``docs/multiturn.md``), every text of ``CountdownMultiTurn-v0`` and its tool adapters:
the turn grammar (:func:`parse_turn`: ``a op b``, ``a op b = c``, ``undo``, ``give up``; a fraction operand in
parentheses), the prompts, the replies rendered from the game's outcomes (:func:`render_reply`: ``= 8 [14,6,8]``,
``undone [..]``, ``error <reason> [..]``, ..., the number set in play last), the tool adapters' own replies and a
conversation's layout as text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from countdown_gym.game.line_grammar import parse_number
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import OPERATORS, Number, describe_value, format_number
from countdown_gym.game.text_format import compact_number, compact_prompt, describe_rules, format_state

F = TypeVar("F", bound=Callable[..., Any])

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
    """One parsed agent turn: ``kind`` (``move``, ``undo``, ``give_up``, ``invalid``); a move's operands, operator
    and stated result (``None`` when not written); ``reason`` a :data:`TURN_ERRORS` code when invalid."""

    kind: str
    a: Number | None = None
    op: str | None = None
    b: Number | None = None
    stated: Number | None = None
    reason: str = "ok"


def parse_turn(text: str, max_chars: int = 200) -> Turn:
    """The :class:`Turn` an agent's text states. Never raises for a ``str``; a ``TypeError`` for anything else."""
    if not isinstance(text, str):
        raise TypeError(f"a turn must be a str, got {describe_value(text)}")
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


def format_move(a: Number, op: str, b: Number) -> str:
    """``37-29``: a move as an agent turn; a fraction in parentheses, ``72/(9/2)``."""
    if op not in OPERATORS:
        raise ValueError(f"unknown operator {describe_value(op)}; choose one of {OPERATORS}")
    return f"{compact_number(a)}{op}{compact_number(b)}"


UNDO, GIVE_UP = "undo", "give up"
"""The turns that take back the last move and that end the episode (as tools: ``undo()``, ``give_up()``)."""


REPLY_WORDS: dict[str, str] = {
    "undone": "undone",
    "gave_up": "gave up",
    "solved": "solved",
    "miss": "miss",
    "turn_limit": "turn limit",
    "dead_end": "dead end",
}
"""The words of the replies by outcome code: the head of an undo's and a give-up's reply, and the marks that end one."""


def render_reply(kind: str, valid: bool, reason: str, state: Sequence[Number], result: Number | None = None,
                 marks: Sequence[str] = ()) -> str:
    """The reply line of one turn's outcome (``state``: the numbers in play after it), then the
    :data:`REPLY_WORDS` of ``marks`` in order: ``= 16 [16] miss turn limit``."""
    if not valid:
        head = f"error {reason}"
    elif kind == "move":
        head = f"= {format_number(result)}"
    else:
        head = REPLY_WORDS["undone" if kind == "undo" else "gave_up"]
    return " ".join((head, format_state(state), *(REPLY_WORDS[m] for m in marks)))


def turn_prompt(problem: Problem, style: str = "compact", max_turns: int | None = None) -> str:
    """The first message of an episode with its line end: ``"compact"`` (the embedded model's one line) or
    ``"instruct"`` (the rules and the turn grammar for an instruction-following model)."""
    if style == "compact":
        return compact_prompt(problem)
    if style != "instruct":
        raise ValueError(f"unknown turn prompt style {describe_value(style)}; choose one of {list(TURN_PROMPT_STYLES)}")
    budget = f" You have at most {max_turns} turns." if max_turns is not None else ""
    return (
        _puzzle(problem) +
        "Play one move per turn: write only 'a op b' with two numbers you have and op one of + - * /, e.g. "
        f"'{format_move(*_example_move(problem))}'. The game computes the result and answers '= result [numbers now]'. "
        f"It answers 'solved' when {_win(problem)} is the target, and 'miss' when the last number is not "
        f"the target. Write 'undo' to take back your last move, 'give up' to stop. {_ILLEGAL}{budget}\n"
    )


def prompt_message(problem: Problem, style: str = "compact", max_turns: int | None = None) -> str:
    """The first message of an episode as a conversation holds it: :func:`turn_prompt` without its line end."""
    return turn_prompt(problem, style, max_turns).rstrip(TURN_END)


def tool_prompt(problem: Problem, max_turns: int | None = None) -> str:
    """The puzzle as the first user message of a tool-calling episode (TRL's, verifiers' and verl's tool adapters)."""
    budget = (f" You have at most {max_turns} calls of move, undo and give_up; after that the game ends unsolved."
              if max_turns is not None else "")
    a, _, b = _example_move(problem)
    return (
        _puzzle(problem) +
        "Play with the tools, one move per call: move(a, op, b) combines two numbers you have, with op one of "
        f"+ - * / (e.g. move({a}, \"+\", {b})). The game computes the result and answers "
        f"'= result [numbers now]', ending with 'solved' when {_win(problem)} is the target and 'miss' when "
        "the last number is not. undo() takes back your last move, give_up() stops, numbers() shows the numbers "
        f"in play. {_ILLEGAL}{budget}"
    )


def _win(problem: Problem) -> str:
    """What must be the target to win: the last number, or any result where numbers may stay unused."""
    return "the last number" if problem.rules.use_all else "a result"


_ILLEGAL = "An illegal move is answered 'error <reason> [numbers]' and changes nothing."


def _puzzle(problem: Problem) -> str:
    return (f"Countdown: reach the target {problem.target} from the numbers {format_state(problem.numbers)}. "
            f"Rules: {describe_rules(problem.rules)}\n")


def _example_move(problem: Problem) -> tuple[Number, str, Number]:
    a, b = sorted(problem.numbers[:2], reverse=True)
    return a, "+", b


TOOL_NAMES: tuple[str, ...] = ("move", "undo", "give_up", "numbers")
"""The tools of the tool-calling adapters (``numbers`` shows the state and uses no turn)."""

TOOL_ERRORS: dict[str, str] = {
    "no_episode": "a tool was called before reset()",
    "episode_over": "the episode has ended (solved, given up or out of turns); no call changes it",
    "bad_call": "a call of no known tool, or with arguments that are not a JSON object of the tool's parameters",
}
"""Reason codes of tool calls refused before they reach the game (the game's own codes are in :data:`TURN_ERRORS`)."""

TOOL_DOCS: dict[str, str] = {
    "move": """Combine two of your numbers with one operation; the game computes the result.

Args:
    a: The first operand, a number you have now (e.g. 37; a fraction as a string, e.g. "3/2").
    op: The operation.
    b: The second operand, another number you have now.

Returns:
    The game's reply: '= result [numbers now]' (ending with 'solved' or 'miss' when one number is left), or 'error <reason> [numbers]' when the move is illegal.""",
    "undo": """Take back your last move.

Returns:
    The game's reply: 'undone [numbers now]', or 'error nothing_to_undo [numbers]'.""",
    "give_up": """Stop playing; the episode ends unsolved.

Returns:
    The game's reply: 'gave up [numbers]'.""",
    "numbers": """Show the numbers in play and the target (does not use a turn).

Returns:
    '[numbers now] target T, K turns left'.""",
}
"""What each tool tells the model (Google style; every adapter's JSON schema derives from it via :func:`tool_doc`)."""


def tool_doc(tool: str) -> Callable[[F], F]:
    """A decorator that gives a tool method its :data:`TOOL_DOCS` entry as its docstring (indented as a method's)."""
    first, *rest = TOOL_DOCS[tool].split("\n")
    doc = "\n".join([first, *(f"        {x}" if x else "" for x in rest)]) + "\n        "

    def give(method: F) -> F:
        method.__doc__ = doc
        return method

    return give


def tool_turn(tool: str, a: Any = None, op: Any = None, b: Any = None) -> str:
    """The game turn a tool call states (``move(37, "-", 29)`` -> ``37-29``); ``""`` for a tool that is no turn."""
    if tool != "move":
        return {"undo": UNDO, "give_up": GIVE_UP}.get(tool, "")
    return f"{turn_operand(a)}{_operand_text(op)}{turn_operand(b)}"


def _operand_text(x: Any) -> str:
    """An operand as turn text: integral floats (``6.0`` from a JSON parser) as ints, anything else as
    :func:`format_number` writes it (an int past ``str()``'s digit limit: a placeholder the grammar refuses)."""
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return str(int(x))
    return format_number(x).strip()


def turn_operand(x: Any) -> str:
    """An operand as turn text, a fraction in parentheses (``"5/2"`` -> ``(5/2)``: the grammar's one reading)."""
    t = _operand_text(x)
    return f"({t})" if "/" in t and not t.startswith("(") else t


def numbers_reply(state: Sequence[Number], target: Number, turns_left: int) -> str:
    """The reply of the free ``numbers()`` tool: ``[5,3,4] target 8, 15 turns left``."""
    return f"{format_state(state)} target {format_number(target)}, {turns_left} turns left"


def no_episode_reply() -> str:
    """The reply of a tool called before the episode started."""
    return f"error no_episode: {TOOL_ERRORS['no_episode']}"


def episode_over_reply(state: Sequence[Number], ending: str | None = None) -> str:
    """``error episode_over [8,8] turn limit``: a call after the episode ended (``ending``: a REPLY_WORDS code)."""
    return " ".join(("error episode_over", format_state(state), *([REPLY_WORDS[ending]] if ending else [])))


def bad_call(tool: str, arguments: Any, tools: Collection[str]) -> str | None:
    """Why a tool call cannot be made (no such tool, arguments no JSON object), or ``None``."""
    if tool not in tools:
        return f"unknown tool {tool!r}"
    return None if isinstance(arguments, dict) else "arguments must be a JSON object"


def bad_call_reply(error: Any) -> str:
    """``error bad_call: ..``: the reply of a call the tool loop could not make."""
    return f"error bad_call: {error}"


def trl_call_error(tool: str, error: Any, known: bool) -> str:
    """A failed tool call's message as TRL's tool loop writes it (``{'error': ...}``), for play outside TRL."""
    return str({"error": str(error) if known else f"Tool {tool} not found."})


TURN_END = "\n"
"""What ends an agent turn and every message of a conversation (a model's turn stops at it)."""


def line(text: str) -> str:
    """One message of a conversation as text: the message and its newline."""
    return text + TURN_END


def transcript(messages: Iterable[str]) -> str:
    """A conversation as one text: every message (prompt, turn, reply...) on its own line."""
    return "".join(line(m) for m in messages)


def turn_line(generated: str) -> str:
    """The agent turn in a model's generated text: its first line (a turn ends at a newline)."""
    return generated.split(TURN_END, 1)[0]


def reply_lines(replies: Sequence[str], turn_closed: bool) -> str:
    """Each reply on its own line, after a newline if the turn's line was left open (it ran out of tokens)."""
    return ("" if turn_closed else TURN_END) + transcript(replies)
