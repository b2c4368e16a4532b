"""Environment throughput: Countdown-v0 vs CartPole-v1, the batched env vs SyncVectorEnv, text replay.

Run ``python benchmarks/bench_envs.py`` (about a minute; ``--quick`` for a smoke run). It prints a
table and writes ``docs/benchmarks_envs.md``, whose Method section says what is timed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from _common import ROOT, check_writable, command, machine, now, write_report  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import countdown_gym  # noqa: E402
from countdown_gym import dfs_trace, load_split  # noqa: E402
from countdown_gym.dataclass_cli import check_min, parse, run_script  # noqa: E402
from countdown_gym.envs.text import replay_completion  # noqa: E402
from countdown_gym.envs.vector import CountdownVectorEnv  # noqa: E402

clock = time.perf_counter
med = statistics.median


def run_single(env_id: str, seconds: float, seed: int) -> float:
    """Steps/s of ``gym.make(env_id)`` under random play (legal actions where ``info`` has an action mask);
    only ``reset`` and ``step`` are timed."""
    env = gym.make(env_id)
    uniforms = np.random.default_rng(seed).random(1 << 20).tolist()
    t0 = clock()
    _, info = env.reset(seed=seed)
    spent, steps = clock() - t0, 0
    while spent < seconds:
        u = uniforms[steps & ((1 << 20) - 1)]
        legal = info["action_mask"].nonzero()[0] if "action_mask" in info else range(env.action_space.n)
        t0 = clock()
        _, _, terminated, truncated, info = env.step(int(legal[int(u * len(legal))]))
        if terminated or truncated:
            _, info = env.reset()
        spent += clock() - t0
        steps += 1
    env.close()
    return steps / spent


def run_vector(make: Callable[[], gym.vector.VectorEnv], seconds: float, seed: int) -> float:
    """Env steps/s (batch steps x num_envs) of a vector env under random legal play."""
    envs = make()
    rng = np.random.default_rng(seed)
    _, info = envs.reset(seed=seed)
    spent, batches = 0.0, 0
    while spent < seconds or batches < 3:
        actions = (rng.random(info["action_mask"].shape) * info["action_mask"]).argmax(axis=1)
        t0 = clock()
        _, _, _, _, info = envs.step(actions)
        spent += clock() - t0
        batches += 1
    envs.close()
    return batches * envs.num_envs / spent


def run_text_replay(seconds: float, n_problems: int) -> tuple[float, str]:
    """Lines/s of ``replay_completion`` over DFS traces of test problems, and a note on what was replayed."""
    problems = load_split("longproc-0.5k", "test")[:n_problems]
    traces = [dfs_trace(p) for p in problems]
    lines, spent, k = 0, 0.0, 0
    while spent < seconds or k < len(problems):
        t0 = clock()
        replay = replay_completion(problems[k % len(problems)], traces[k % len(problems)])
        spent += clock() - t0
        lines += replay.num_lines
        k += 1
    note = f"{k} replays of {len(problems)} longproc-0.5k test traces, {lines / k:.0f} lines each on average"
    return lines / spent, note


def alternate(rounds: int, first: Callable[[int], float], second: Callable[[int], float],
              label: str) -> tuple[list[float], list[float]]:
    """``rounds`` alternating measurements ``first(r)``, ``second(r)`` (``r`` = round, for seeds)."""
    a, b = [], []
    for r in range(rounds):
        a.append(first(r))
        b.append(second(r))
        print(f"  {label} round {r + 1}/{rounds}: {a[-1]:,.0f} vs {b[-1]:,.0f} steps/s", flush=True)
    return a, b


@dataclass
class Options:
    seconds: float = 3.0  # timed seconds per measurement
    rounds: int = 3  # alternating rounds per comparison
    warmup: float = 10.0  # seconds of Countdown-v0 play before the rounds
    num_envs: int = 1024
    seed: int = 0
    out: str = str(ROOT / "docs" / "benchmarks_envs.md")
    quick: bool = False  # a smoke run (short, small batch, no report file)

    def __post_init__(self) -> None:
        check_min(self, 1, "rounds", "num_envs")
        check_min(self, 0, "warmup")
        if not self.seconds > 0:  # no step timed: a rate of 0 / 0
            raise ValueError(f"--seconds must be > 0, got {self.seconds}")


def main(argv: list[str] | None = None) -> None:
    args = parse(Options, argv, description=__doc__.split("\n")[0])
    if not args.quick:
        check_writable(args.out, "--out")
    if args.quick:
        args.seconds, args.rounds, args.num_envs, args.warmup = 0.3, 1, 64, 0.3
    started, at_start = now(), machine()

    print("1. single env: a cold round, a warm-up, then alternating rounds", flush=True)
    cold_cd = run_single("Countdown-v0", args.seconds, args.seed + 1000)
    cold_cp = run_single("CartPole-v1", args.seconds, args.seed + 1000)
    print(f"  cold: {cold_cd:,.0f} vs {cold_cp:,.0f} steps/s", flush=True)
    run_single("Countdown-v0", args.warmup, args.seed + 2000)
    cd, cp = alternate(args.rounds, lambda r: run_single("Countdown-v0", args.seconds, args.seed + r),
                       lambda r: run_single("CartPole-v1", args.seconds, args.seed + r), "Countdown-v0 vs CartPole-v1")
    single_ratio = med(x / y for x, y in zip(cd, cp, strict=True))

    n = args.num_envs
    print(f"2. batched, {n} envs", flush=True)
    sync = {"vectorization_mode": "sync", "vector_kwargs": {"autoreset_mode": AutoresetMode.SAME_STEP}}
    nat, syn = alternate(args.rounds, lambda r: run_vector(lambda: CountdownVectorEnv(n), args.seconds, args.seed + r),
                         lambda r: run_vector(lambda: gym.make_vec("Countdown-v0", num_envs=n, **sync), args.seconds,
                                              args.seed + r), "CountdownVectorEnv vs SyncVectorEnv")
    vec_ratio = med(x / y for x, y in zip(nat, syn, strict=True))

    print("3. CountdownText-v0 replay", flush=True)
    text_rate, text_note = run_text_replay(args.seconds * args.rounds, n_problems=5 if args.quick else 50)
    rows = [
        ("Countdown-v0 (random legal actions)", f"{med(cd):,.0f} steps/s", f"{single_ratio:.2f}x CartPole-v1"),
        ("CartPole-v1 (random actions)", f"{med(cp):,.0f} steps/s", "1.00x"),
        ("Countdown-v0, first round (cold memo)", f"{cold_cd:,.0f} steps/s",
         f"{cold_cd / cold_cp:.2f}x CartPole-v1 ({cold_cp:,.0f} steps/s)"),
        (f"CountdownVectorEnv, {n} envs", f"{med(nat):,.0f} steps/s", f"{vec_ratio:.1f}x SyncVectorEnv"),
        (f"SyncVectorEnv(Countdown-v0), {n} envs", f"{med(syn):,.0f} steps/s", "1.0x"),
        ("CountdownText-v0 replay of DFS traces", f"{text_rate:,.0f} lines/s", text_note),
    ]
    width = max(len(r[0]) for r in rows)
    print()
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>18}  {note}")
    targets = (f"single env >= CartPole: {'met' if single_ratio >= 1 else 'NOT met'}; "
               f"batched >= 20x sync: {'met' if vec_ratio >= 20 else 'NOT met'}")
    print(targets)
    if args.quick:
        return
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    named = {"Countdown-v0": cd, "CartPole-v1": cp, "CountdownVectorEnv": nat, "SyncVectorEnv": syn}
    per_round = "\n".join(f"- {k} steps/s per round: {', '.join(f'{x:,.0f}' for x in xs)}" for k, xs in named.items())
    report = f"""# Environment throughput

Measured by `{command("bench_envs.py", argv)}` on {started}
({at_start} at the start and {os.getloadavg()[0]:.1f} at the end;
numpy {np.__version__}, gymnasium {gym.__version__}, countdown-gym {countdown_gym.__version__};
`OMP_NUM_THREADS=1`). {args.rounds} alternating rounds of {args.seconds:g} s per measurement after a
{args.warmup:g} s warm-up; medians shown.

| environment | throughput | relative |
| --- | --- | --- |
{table}

Targets: {targets}. For scale, the batched env also runs {med(nat) / med(cd):.1f}x the steps/s of
the single Countdown-v0 loop of the first row (SyncVectorEnv runs {med(syn) / med(cd):.2f}x: besides
stepping each env it batches every env's info dict).

{per_round}

## Method

* **Single env.** Both environments come from `gymnasium.make` (with its default wrappers).
  Countdown-v0 uses its defaults (problems from the `longproc-0.5k` train split, 8,000 puzzles
  of 4 numbers) and plays a uniformly random legal action read from `info["action_mask"]`;
  CartPole-v1 plays uniformly random actions. Only the time inside `step` / `reset` counts.
  Countdown-v0 memoises per-state legality (masks, observation rows) and per-pair move results,
  so play gets cheaper as the memo fills, as it does over a training run on a fixed problem set.
  The first round runs on an empty memo (reported separately as "cold"); the measured rounds
  follow a {args.warmup:g} s warm-up, and every round plays fresh episodes (its own seed).
* **Batched.** `CountdownVectorEnv({n})` against `gymnasium.make_vec("Countdown-v0",
  num_envs={n}, vectorization_mode="sync", vector_kwargs={{"autoreset_mode":
  AutoresetMode.SAME_STEP}})` (the same autoreset semantics); env steps/s = batch steps x
  {n} / time inside `step`. Actions are random legal ones (`argmax(uniform * mask)` per env).
* **Text.** `replay_completion(problem, dfs_trace(problem))` over longproc-0.5k test
  problems; lines/s = lines replayed / time inside `replay_completion`.
  {text_note}.

The machine is shared, so absolute numbers drift by tens of percent between runs; the
alternating rounds make the ratios the figures to compare; each ratio is the median of per-round ratios.
"""
    write_report(args.out, report)


if __name__ == "__main__":
    run_script(main)
