"""Compact search traces, line-per-move completions for small models (``docs/DESIGN.md``, ``docs/tiny_lm.md``):
``<depth spaces><a><op><b>=<c> [n1,n2,...]`` (the set: the numbers not used, then ``c``; a smaller depth
backtracks), then a ``<Solution>`` block or ``<answer>expr</answer>``. The search is a solver-guided DFS in a fixed
scan order (pairs ``i < j``, larger operand first, ``+ - * /``, non-negative integer results): a two-number state
writes its moves until one hits, a larger one at most ``dead_ends[depth]`` probed dead ends before the first move
that keeps the target reachable.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from countdown_gym.game.problem import Problem, play_rules
from countdown_gym.game.rules import OPERATORS, Rules, check_bool, check_int, describe_value
from countdown_gym.game.solver import combine, reachable
from countdown_gym.game.text_format import format_compact_line, format_equation
from countdown_gym.game.trace import pick_pairs

CompactMove = tuple[int, str, int, int]


@dataclass(frozen=True)
class CompactTraceConfig:
    """How a compact trace is written.

    Attributes:
        dead_ends: Per depth (0 = initial numbers; beyond the tuple, its last entry) the most dead-end moves written
            before the move that keeps the target reachable. ``(0,)``: the shipped tiny model's data.
        probe: Moves (first in scan order) written below a dead end before backtracking; a two-number state always
            enumerates its leaves.
        dead_end_rate: The chance, drawn per state from the trace's seed, that a state writes its dead ends at all.
        show_state: Append `` [n1,n2,...]`` (the number set after the move) to every line.
        answer: ``"solution"`` (a ``<Solution>`` block) or ``"answer"`` (``<answer>expr</answer>``).
        leaves: ``"enumerate"`` writes a two-number state's moves until one hits; ``"direct"`` only the hit (with
            ``probe=0`` a dead end is one move and its backtrack: the multi-turn model's data).
    """

    dead_ends: tuple[int, ...] = (0,)
    probe: int = 1
    dead_end_rate: float = 1.0
    show_state: bool = True
    answer: str = "solution"
    leaves: str = "enumerate"

    def __post_init__(self) -> None:
        if isinstance(self.dead_ends, str) or not self.dead_ends or not all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 0 for k in self.dead_ends):
            raise ValueError(f"dead_ends must be a non-empty tuple of ints >= 0, got {describe_value(self.dead_ends)}")
        check_int(self.probe, "probe")
        rate = self.dead_end_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            raise ValueError(f"dead_end_rate must be a number in [0, 1], got {describe_value(rate)}")
        check_bool(self.show_state, "show_state")  # a truthy "no" showed the states
        if self.answer not in ("solution", "answer"):
            raise ValueError(f"answer must be 'solution' or 'answer', got {describe_value(self.answer)}")
        if self.leaves not in ("enumerate", "direct"):
            raise ValueError(f"leaves must be 'enumerate' or 'direct', got {describe_value(self.leaves)}")


def _moves(state: Sequence[int], rules: Rules) -> list[tuple[CompactMove, tuple[int, ...]]]:
    """Legal moves with a non-negative integer result, in the trace's scan order."""
    out = []
    for a, b, left in pick_pairs(state):
        if a < b:
            a, b = b, a
        for op, c in zip(OPERATORS, rules.legal_results(a, b), strict=True):
            if isinstance(c, int) and c >= 0:
                out.append(((a, op, b, c), (*left, c)))
    return out


@dataclass
class _Writer:
    target: int
    rules: Rules
    config: CompactTraceConfig
    lines: list[str]
    rng: random.Random | None
    """Draws of ``config.dead_end_rate``; None when the rate is 1 (nothing to draw)."""

    def __post_init__(self) -> None:  # the moves of _moves: the rules' moves with a non-negative integer result
        sign = "positive" if self.rules.sign == "positive" else "nonnegative"
        self.move_rules = self.rules.replace(integer_only=True, sign=sign)

    def write(self, depth: int, move: CompactMove, nxt: tuple[int, ...]) -> None:
        self.lines.append(format_compact_line(depth, *move, nxt if self.config.show_state else None))

    def keeps_target(self, state: tuple[int, ...]) -> bool:
        return reachable(state, self.target, self.move_rules)

    def leaf(self, state: tuple[int, ...], depth: int) -> CompactMove | None:
        """The last moves of a two-number state (all tried, or only the hit: ``config.leaves``); the hit, if any."""
        direct = self.config.leaves == "direct"
        for move, nxt in _moves(state, self.rules):
            if not direct or move[3] == self.target:
                self.write(depth, move, nxt)
            if move[3] == self.target:
                return move
        return None

    def probe(self, state: tuple[int, ...], depth: int, budget: int) -> None:
        """A shallow look below a dead end: first moves only, leaves enumerated."""
        if len(state) == 2:
            self.leaf(state, depth)
        elif budget > 0 and (moves := _moves(state, self.rules)):  # fewer than 2 numbers: no moves
            move, nxt = moves[0]
            self.write(depth, move, nxt)
            self.probe(nxt, depth + 1, budget - 1)

    def solve(self, state: tuple[int, ...], depth: int) -> list[CompactMove]:
        """Write the search below ``state`` (which keeps the target reachable); the winning path."""
        if len(state) == 2:
            move = self.leaf(state, depth)
            if move is None:  # pragma: no cover - reachable() guarantees a hit
                raise AssertionError("reachability and move scan disagree")
            return [move]
        limit = self.config.dead_ends[min(depth, len(self.config.dead_ends) - 1)]
        if limit and self.rng is not None and self.rng.random() >= self.config.dead_end_rate:
            limit = 0
        dead: list[tuple[CompactMove, tuple[int, ...]]] = []
        for move, nxt in _moves(state, self.rules):
            if self.keeps_target(nxt):
                for dmove, dnxt in dead[-limit:] if limit else []:
                    self.write(depth, dmove, dnxt)
                    self.probe(dnxt, depth + 1, self.config.probe)
                self.write(depth, move, nxt)
                return [move, *self.solve(nxt, depth + 1)]
            dead.append((move, nxt))
        raise AssertionError("reachability and move scan disagree")  # pragma: no cover


def _solution_text(path: list[CompactMove], numbers: tuple[int, ...], answer: str) -> str:
    if answer == "solution":
        body = "\n".join(format_equation(*move) for move in path)
        return f"<Solution>\n{body}\n</Solution>"
    exprs: list[tuple[int, tuple[str, int]]] = [(x, (str(x), 3)) for x in numbers]  # (value, (text, precedence))
    for a, op, b, c in path:
        ia = next(k for k, e in enumerate(exprs) if e[0] == a)
        ea = exprs.pop(ia)
        ib = next(k for k, e in enumerate(exprs) if e[0] == b)
        eb = exprs.pop(ib)
        exprs.append((c, combine(ea[1], op, eb[1], canonical=False)))
    return f"<answer>{exprs[0][1][0]}</answer>"


def compact_trace(
    problem: Problem,
    rules: Rules | None = None,
    config: CompactTraceConfig | None = None,
    shuffle_seed: int | None = None,
    seed: int | None = None,
) -> str:
    """The compact search trace of ``problem`` and its final answer.

    ``shuffle_seed`` permutes the numbers first (:func:`shuffled`; use the same order in the prompt); ``seed`` seeds
    the ``dead_end_rate`` draws (default ``shuffle_seed``, else 0). ``ValueError`` when no solution has only
    non-negative integer intermediates.
    """
    rules = play_rules(problem, rules, "compact_trace()")
    config = config or CompactTraceConfig()
    numbers = problem.numbers if shuffle_seed is None else shuffled(problem, shuffle_seed).numbers
    if len(numbers) < 2:
        raise ValueError(f"compact traces need at least two numbers, got {numbers}")
    if not rules.use_all:
        raise ValueError("compact traces are written for rules with use_all=True")
    if not reachable(numbers, problem.target, rules):
        raise ValueError(f"no solution: {problem!r} is not solvable under rules {rules.name!r}")
    draw_seed = shuffle_seed if seed is None else seed
    draws = random.Random(f"dead_end_rate:{0 if draw_seed is None else draw_seed}") if config.dead_end_rate < 1.0 else None
    w = _Writer(problem.target, rules, config, [], draws)
    if not w.keeps_target(numbers):
        raise ValueError(f"{problem!r} has no solution with non-negative integer intermediates")
    path = w.solve(numbers, 0)
    return "\n".join(w.lines) + "\n" + _solution_text(path, numbers, config.answer) + "\n"


def shuffled(problem: Problem, seed: int) -> Problem:
    """The same puzzle with its numbers in a seeded random order (a data augmentation)."""
    nums = list(problem.numbers)
    random.Random(seed).shuffle(nums)
    return Problem(tuple(nums), problem.target, problem.rules, id=problem.id, preset=problem.preset)


def compact_trace_stats(problems: Sequence[Problem], config: CompactTraceConfig | None = None) -> dict[str, float]:
    """Mean / max number of move lines and characters of the traces of ``problems`` (the i-th drawn with ``seed=i``)."""
    lines, chars = [], []
    for i, p in enumerate(problems):
        t = compact_trace(p, config=config, seed=i)
        body = t.split("<")[0]
        lines.append(body.count("\n"))
        chars.append(len(t))
    n = max(len(lines), 1)
    return {
        "problems": len(lines),
        "mean_lines": sum(lines) / n,
        "max_lines": max(lines, default=0),
        "mean_chars": sum(chars) / n,
        "max_chars": max(chars, default=0),
    }
