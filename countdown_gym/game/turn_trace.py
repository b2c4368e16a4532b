"""Search traces as multi-turn conversations, the embedded multi-turn model's training data: :func:`turn_trace`
writes the compact search as agent turns (a backtrack becomes ``undo`` turns back to its depth) and
:func:`conversation` plays them through :class:`~countdown_gym.game.turn_game.TurnEpisode` for the replies.
"""

from __future__ import annotations

from collections.abc import Sequence

from countdown_gym.game.compact_trace import CompactTraceConfig, compact_trace
from countdown_gym.game.expression import literal_limit
from countdown_gym.game.line_grammar import parse_line
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules
from countdown_gym.game.turn_format import UNDO, format_move, prompt_message
from countdown_gym.game.turn_game import TurnEpisode


def turn_trace(problem: Problem, rules: Rules | None = None, config: CompactTraceConfig | None = None,
               seed: int | None = None) -> list[str]:
    """The search lines of :func:`~countdown_gym.game.compact_trace.compact_trace` as agent turns (its final answer
    block is no turn; ``ValueError`` as it)."""
    turns: list[str] = []
    depth = 0
    with literal_limit(problem.literal_digits):
        lines = [parse_line(line) for line in compact_trace(problem, rules, config, seed=seed).split("\n")]
    for p in lines:
        if p.kind == "compact":
            turns += [UNDO] * (depth - p.indent)
            turns.append(format_move(p.a, p.op, p.b))
            depth = p.indent + 1
    return turns


def conversation(problem: Problem, turns: Sequence[str], *, rules: Rules | None = None, max_turns: int | None = None,
                 prompt_style: str = "compact") -> list[tuple[str, str]]:
    """``[("env", prompt), ("agent", turn), ("env", reply), ...]``: the turns played (``max_turns`` default
    ``len(turns)``; turns after the episode ends are dropped)."""
    ep = TurnEpisode(problem, rules, max_turns or max(len(turns), 1))
    out = [("env", prompt_message(problem, prompt_style, max_turns))]
    for t, res in zip(turns, ep.play_turns(turns), strict=False):
        out += [("agent", t), ("env", res.reply)]
    return out

