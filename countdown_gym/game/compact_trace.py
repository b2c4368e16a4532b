"""Compact search traces: short, line-per-move completions for small language models.

The format (``docs/DESIGN.md``, "Compact search format"): one move per line,

    <depth spaces><a><op><b>=<c> [n1,n2,...]

where ``depth`` is the number of moves already made on the current path and the bracketed list
is the number set after the move (the numbers not used, in their order, then ``c``). A line
with a smaller depth than the line before it backtracks. After the search comes the final
answer: a ``<Solution>`` block of ``a op b = c`` lines (default) or ``<answer>expr</answer>``.

The search written here is a *pruned, solver-guided depth-first search* (documented in
``docs/tiny_lm.md``):

* at every state the moves are scanned in a fixed order: pairs ``(i < j)`` in the state's
  order, the larger operand first, operations ``+ - * /``, only legal moves whose result is a
  non-negative integer;
* with two numbers left every such move is written in that order until one reaches the target
  (a dead branch writes them all), so each leaf shows its own checks;
* with three or more numbers left, the moves before the first one that keeps the target
  reachable are dead ends: at most ``dead_ends[depth]`` of them are written, each followed by a
  shallow look below it (``probe`` moves deep, leaves enumerated) and a backtrack; then the
  first reachable move is taken.

So every trace ends in a correct solution, shows honest failed attempts and backtracking, and
stays short (see :func:`compact_trace_stats`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, Rules, format_number
from countdown_gym.game.solver import reachable

CompactMove = tuple[int, str, int, int]


@dataclass(frozen=True)
class CompactTraceConfig:
    """How a compact trace is written.

    Attributes:
        dead_ends: For each depth (0 = initial numbers) the most dead-end moves written before
            the search takes a move that keeps the target reachable; depths beyond the tuple use
            its last entry. Leaves (two numbers left) always enumerate. The default ``(0,)`` (the
            solution path with enumerated leaves) is what the shipped tiny model was trained on;
            ``(1, 0)`` adds one dead end and a backtrack at the initial numbers.
        probe: How many further moves (first in scan order) are written below a dead end before
            backtracking; a probed state with two numbers left always enumerates its leaf moves.
        dead_end_rate: The chance that a state writes its dead ends at all (drawn per state from
            the trace's seed). The default 1.0 always writes them, so with ``dead_ends=(2, 0)``
            nearly every trace opens with a failed move; 0.5 opens half of them with the good
            move and half with failed ones.
        show_state: Append `` [n1,n2,...]`` (the number set after the move) to every line.
        answer: ``"solution"`` for a ``<Solution>`` block, ``"answer"`` for ``<answer>expr</answer>``.
        leaves: ``"enumerate"`` writes every move of a two-number state in scan order until one hits
            the target (each leaf shows its own checks); ``"direct"`` writes only the hitting move,
            so the search judges a two-number state instead of trying it out (with ``probe=0``,
            a dead end is then one move and its backtrack: the multi-turn model's data).
    """

    dead_ends: tuple[int, ...] = (0,)
    probe: int = 1
    dead_end_rate: float = 1.0
    show_state: bool = True
    answer: str = "solution"
    leaves: str = "enumerate"

    def __post_init__(self) -> None:
        if not self.dead_ends or any(not isinstance(k, int) or k < 0 for k in self.dead_ends):
            raise ValueError(f"dead_ends must be a non-empty tuple of ints >= 0, got {self.dead_ends!r}")
        if not isinstance(self.probe, int) or self.probe < 0:
            raise ValueError(f"probe must be an int >= 0, got {self.probe!r}")
        if not isinstance(self.dead_end_rate, (int, float)) or not 0.0 <= self.dead_end_rate <= 1.0:
            raise ValueError(f"dead_end_rate must be a number in [0, 1], got {self.dead_end_rate!r}")
        if self.answer not in ("solution", "answer"):
            raise ValueError(f"answer must be 'solution' or 'answer', got {self.answer!r}")
        if self.leaves not in ("enumerate", "direct"):
            raise ValueError(f"leaves must be 'enumerate' or 'direct', got {self.leaves!r}")


def _state_text(state: Sequence[Number]) -> str:
    return "[" + ",".join(format_number(x) for x in state) + "]"


def _moves(state: Sequence[int], rules: Rules) -> list[tuple[CompactMove, tuple[int, ...]]]:
    """Legal moves with a non-negative integer result, in the trace's scan order."""
    out = []
    n = len(state)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = state[i], state[j]
            if a < b:
                a, b = b, a
            left = tuple(x for k, x in enumerate(state) if k != i and k != j)
            for op in ("+", "-", "*", "/"):
                c = rules.apply(a, op, b)
                if c is None or not isinstance(c, int) or c < 0:
                    continue
                out.append(((a, op, b, c), left + (c,)))
    return out


@dataclass
class _Writer:
    target: int
    rules: Rules
    config: CompactTraceConfig
    lines: list[str]
    rng: random.Random | None
    """Draws of ``config.dead_end_rate``; None when the rate is 1 (nothing to draw)."""

    def write(self, depth: int, move: CompactMove, nxt: tuple[int, ...]) -> None:
        a, op, b, c = move
        text = " " * depth + f"{a}{op}{b}={c}"
        if self.config.show_state:
            text += " " + _state_text(nxt)
        self.lines.append(text)

    def keeps_target(self, state: tuple[int, ...]) -> bool:
        if self.rules.integer_only and self.rules.sign != "any":
            return reachable(state, self.target, self.rules)
        return _integer_reachable(state, self.target, self.rules)

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
        if len(state) < 2:
            return
        if len(state) == 2:
            self.leaf(state, depth)
            return
        if budget <= 0:
            return
        moves = _moves(state, self.rules)
        if moves:
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
        body = "\n".join(f"{a} {op} {b} = {c}" for a, op, b, c in path)
        return f"<Solution>\n{body}\n</Solution>"
    exprs: list[tuple[int, str, int]] = [(x, str(x), 3) for x in numbers]
    prec = {"+": 1, "-": 1, "*": 2, "/": 2}
    for a, op, b, c in path:
        ia = next(k for k, e in enumerate(exprs) if e[0] == a)
        ea = exprs.pop(ia)
        ib = next(k for k, e in enumerate(exprs) if e[0] == b)
        eb = exprs.pop(ib)
        p = prec[op]
        left = ea[1] if ea[2] >= p else f"({ea[1]})"
        right = eb[1] if eb[2] > p else f"({eb[1]})"
        exprs.append((c, f"{left}{op}{right}", p))
    return f"<answer>{exprs[0][1]}</answer>"


def compact_trace(
    problem: Problem,
    rules: Rules | None = None,
    config: CompactTraceConfig | None = None,
    shuffle_seed: int | None = None,
    seed: int | None = None,
) -> str:
    """The compact search trace of ``problem`` followed by its final answer.

    ``shuffle_seed`` (optional) permutes the numbers first, as :func:`shuffled` does; the
    trace then scans the permuted order (use the same permutation in the prompt). ``seed`` seeds
    the draws of ``config.dead_end_rate`` (default: ``shuffle_seed``, else 0), so a trace is a
    function of its arguments.
    Raises ``ValueError`` when the problem has no solution whose intermediate results are all
    non-negative integers (the only numbers the format writes).
    """
    rules = rules or problem.rules
    config = config or CompactTraceConfig()
    numbers = tuple(problem.numbers)
    if shuffle_seed is not None:
        numbers = shuffled(problem, shuffle_seed).numbers
    if any(not isinstance(x, int) for x in numbers):
        raise ValueError(f"compact traces need integer numbers, got {numbers}")
    if len(numbers) < 2:
        raise ValueError(f"compact traces need at least two numbers, got {numbers}")
    if not rules.use_all:
        raise ValueError("compact traces are written for rules with use_all=True")
    if not reachable(numbers, problem.target, rules):
        raise ValueError(f"no solution: {problem!r} is not solvable under rules {rules.name!r}")
    draws = _draws(shuffle_seed if seed is None else seed) if config.dead_end_rate < 1.0 else None
    w = _Writer(problem.target, rules, config, [], draws)
    if not w.keeps_target(numbers):
        raise ValueError(f"{problem!r} has no solution with non-negative integer intermediates")
    path = w.solve(numbers, 0)
    return "\n".join(w.lines) + "\n" + _solution_text(path, numbers, config.answer) + "\n"


def _draws(seed: int | None) -> random.Random:
    return random.Random(f"dead_end_rate:{0 if seed is None else seed}")


def _integer_reachable(state: tuple[int, ...], target: int, rules: Rules) -> bool:
    if len(state) == 1:
        return state[0] == target
    return any(_integer_reachable(nxt, target, rules) for _, nxt in _moves(state, rules))


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
