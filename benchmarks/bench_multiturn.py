"""Turns per second of the multi-turn game, replaying solver episodes (one command).

    python benchmarks/bench_multiturn.py            # prints the table, writes docs/benchmarks_multiturn.md

Episodes: the turn traces (``countdown_gym.game.turn_trace.turn_trace``, solver paths with enumerated
leaves and backtracking ``undo`` turns) of the 1,000 ``longproc-0.5k`` test problems, with
``dead_ends=(0,)`` and ``(1, 0)``. Each is played through :func:`countdown_gym.game.turn_game.replay_turns`
and through ``CountdownMultiTurn-v0`` (``reset`` with the problem, then one ``step`` per turn). The
best of ``--repeats`` timings is reported (the machine is shared).
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path

from countdown_gym import load_split
from countdown_gym.dataclass_cli import check_min, parse
from countdown_gym.envs.multiturn import CountdownMultiTurnEnv
from countdown_gym.game.compact_trace import CompactTraceConfig
from countdown_gym.game.turn_game import replay_turns
from countdown_gym.game.turn_trace import turn_trace

ROOT = Path(__file__).resolve().parents[1]

TARGET = 20_000


def best_rate(fn, turns: int, repeats: int) -> float:
    """Turns per second of the fastest of ``repeats`` runs of ``fn``."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return turns / best


@dataclass
class Options:
    repeats: int = 5
    """Timed repeats (the fastest is reported)."""
    out: str = str(ROOT / "docs" / "benchmarks_multiturn.md")

    def __post_init__(self) -> None:
        check_min(self, 1, "repeats")


def main(argv: list[str] | None = None) -> None:
    args = parse(Options, argv, description=__doc__.split("\n")[0])
    problems = load_split("longproc-0.5k", "test")
    rows = []
    for name, config in (("solver paths, dead_ends=(0,)", CompactTraceConfig()),
                         ("with backtracking, dead_ends=(1, 0)", CompactTraceConfig(dead_ends=(1, 0)))):
        episodes = [(p, turn_trace(p, config=config, seed=i)) for i, p in enumerate(problems)]
        n = sum(len(t) for _, t in episodes)
        longest = max(len(t) for _, t in episodes)

        def replay(episodes=episodes, longest=longest) -> None:
            for p, turns in episodes:
                replay_turns(p, turns, max_turns=longest)

        env = CountdownMultiTurnEnv(problems=problems, max_turns=longest)

        def gym_steps(episodes=episodes, env=env) -> None:
            for p, turns in episodes:
                env.reset(options={"problem": p})
                for t in turns:
                    env.step(t)

        rows.append((name, len(episodes), n, best_rate(replay, n, args.repeats), best_rate(gym_steps, n, args.repeats)))
    lines = [
        "# Multi-turn game throughput",
        "",
        "Made by `python benchmarks/bench_multiturn.py` (best of "
        f"{args.repeats} runs, one process, Python {platform.python_version()}, {platform.machine()}). Target: "
        f">= {TARGET:,} turns/s replaying solver episodes.",
        "",
        "| episodes | count | turns | `replay_turns` turns/s | `CountdownMultiTurn-v0` step turns/s |",
        "| --- | --- | --- | --- | --- |",
        *[f"| {name} | {count} | {n:,} | {r:,.0f} | {g:,.0f} |" for name, count, n, r, g in rows],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
