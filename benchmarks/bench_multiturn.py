"""Turns per second of the multi-turn game, replaying solver episodes (one command).

    python benchmarks/bench_multiturn.py            # prints the table, writes docs/benchmarks_multiturn.md

Episodes: the turn traces (``turn_trace``: solver paths, and with ``dead_ends=(1, 0)`` backtracking ``undo``
turns) of the 1,000 ``longproc-0.5k`` test problems, played through ``replay_turns`` and through
``CountdownMultiTurn-v0`` (``reset`` with the problem, then one ``step`` per turn); the best of ``--repeats``.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

from _common import ROOT, best_time, check_writable, write_report

from countdown_gym import load_split
from countdown_gym.dataclass_cli import check_min, parse, run_script
from countdown_gym.envs.multiturn import CountdownMultiTurnEnv
from countdown_gym.game.compact_trace import CompactTraceConfig
from countdown_gym.game.turn_game import replay_turns
from countdown_gym.game.turn_trace import turn_trace

TARGET = 20_000


@dataclass
class Options:
    repeats: int = 5  # timed repeats (the fastest is reported)
    out: str = str(ROOT / "docs" / "benchmarks_multiturn.md")

    def __post_init__(self) -> None:
        check_min(self, 1, "repeats")


def main(argv: list[str] | None = None) -> None:
    args = parse(Options, argv, description=__doc__.split("\n")[0])
    check_writable(args.out, "--out")
    problems = load_split("longproc-0.5k", "test")
    rows = []
    for name, config in (("solver paths, dead_ends=(0,)", CompactTraceConfig()),
                         ("with backtracking, dead_ends=(1, 0)", CompactTraceConfig(dead_ends=(1, 0)))):
        episodes = [(p, turn_trace(p, config=config, seed=i)) for i, p in enumerate(problems)]
        n = sum(len(t) for _, t in episodes)
        longest = max(len(t) for _, t in episodes)
        env = CountdownMultiTurnEnv(problems=problems, max_turns=longest)

        def replay(episodes=episodes, longest=longest) -> None:
            for p, turns in episodes:
                replay_turns(p, turns, max_turns=longest)

        def gym_steps(episodes=episodes, env=env) -> None:
            for p, turns in episodes:
                env.reset(options={"problem": p})
                for t in turns:
                    env.step(t)

        rows.append(f"| {name} | {len(episodes)} | {n:,} | {n / best_time(replay, args.repeats):,.0f} | "
                    f"{n / best_time(gym_steps, args.repeats):,.0f} |")
    text = "\n".join([
        "# Multi-turn game throughput",
        "",
        f"Made by `python benchmarks/bench_multiturn.py` (best of {args.repeats} runs, one process, Python "
        f"{platform.python_version()}, {platform.machine()}). Target: >= {TARGET:,} turns/s replaying solver episodes.",
        "",
        "| episodes | count | turns | `replay_turns` turns/s | `CountdownMultiTurn-v0` step turns/s |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ])
    print(text)
    write_report(args.out, text)


if __name__ == "__main__":
    run_script(main)
