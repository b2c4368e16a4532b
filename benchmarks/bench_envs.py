"""Environment throughput: Countdown-v0 vs CartPole-v1, the batched env vs SyncVectorEnv, text replay.

Run ``python benchmarks/bench_envs.py`` (about a minute; ``--quick`` for a smoke run). It prints a
table and writes ``docs/benchmarks_envs.md``. Sections:

1. Single env: ``gymnasium.make("Countdown-v0")`` (default source: the ``longproc-0.5k`` train
   split) playing uniformly random *legal* actions, next to ``gymnasium.make("CartPole-v1")``
   playing random actions, in alternating rounds of the same process.
2. Batched: ``CountdownVectorEnv`` with ``--num-envs`` (1,024) envs next to Gymnasium's
   ``SyncVectorEnv`` of the same env (``make_vec(..., vectorization_mode="sync")`` with the same
   SAME_STEP autoreset), random legal actions, alternating rounds.
3. Text: ``CountdownText-v0`` lines/s when replaying ``dfs_trace`` outputs through
   ``countdown_gym.envs.text.replay_completion`` ("not available" if that module is missing).

Timing counts only the time spent inside the environments (``reset`` / ``step`` /
``replay_completion``); the random agent's action choice is drawn outside the timed calls.
Each figure is the median over rounds; ratios are medians of per-round ratios, which cancels
most of the drift of a shared machine.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import countdown_gym  # noqa: E402
from countdown_gym import dfs_trace, load_split  # noqa: E402
from countdown_gym.dataclass_cli import check_min, parse  # noqa: E402
from countdown_gym.envs.vector import CountdownVectorEnv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
clock = time.perf_counter


# ---- section 1: single env ---------------------------------------------------------------------


def run_countdown(seconds: float, seed: int) -> float:
    """Steps/s of Countdown-v0 under random legal play (resets included in the env time)."""
    env = gym.make("Countdown-v0")
    rng = np.random.default_rng(seed)
    uniforms = rng.random(1 << 20).tolist()
    k = 0
    t0 = clock()
    _, info = env.reset(seed=seed)
    spent = clock() - t0
    steps = 0
    while spent < seconds:
        legal = info["action_mask"].nonzero()[0]
        action = int(legal[int(uniforms[k] * len(legal))])
        k = (k + 1) & ((1 << 20) - 1)
        t0 = clock()
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            _, info = env.reset()
        spent += clock() - t0
        steps += 1
    env.close()
    return steps / spent


def run_cartpole(seconds: float, seed: int) -> float:
    """Steps/s of CartPole-v1 under random play (resets included in the env time)."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    actions = (rng.random(1 << 20) < 0.5).astype(int).tolist()
    k = 0
    t0 = clock()
    env.reset(seed=seed)
    spent = clock() - t0
    steps = 0
    while spent < seconds:
        action = actions[k]
        k = (k + 1) & ((1 << 20) - 1)
        t0 = clock()
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
        spent += clock() - t0
        steps += 1
    env.close()
    return steps / spent


# ---- section 2: batched ----------------------------------------------------------------------


def run_vector(make: Callable[[], gym.vector.VectorEnv], seconds: float, seed: int) -> float:
    """Env steps/s (batch steps x num_envs) of a vector env under random legal play."""
    envs = make()
    rng = np.random.default_rng(seed)
    _, info = envs.reset(seed=seed)
    spent, batches = 0.0, 0
    while spent < seconds or batches < 3:
        mask = info["action_mask"]
        actions = (rng.random(mask.shape) * mask).argmax(axis=1)
        t0 = clock()
        _, _, _, _, info = envs.step(actions)
        spent += clock() - t0
        batches += 1
    envs.close()
    return batches * envs.num_envs / spent


# ---- section 3: CountdownText-v0 replay (hook) -------------------------------------------------


def run_text_replay(seconds: float, n_problems: int) -> tuple[float | None, str]:
    """Lines/s of ``replay_completion`` over DFS traces, or ``(None, reason)`` without text.py."""
    try:
        from countdown_gym.envs.text import replay_completion
    except ImportError as e:  # the text env has not landed
        return None, f"not available ({e})"
    problems = load_split("longproc-0.5k", "test")[:n_problems]
    traces = [dfs_trace(p) for p in problems]
    lines = 0
    spent = 0.0
    k = 0
    while spent < seconds or k < len(problems):
        p, trace = problems[k % len(problems)], traces[k % len(problems)]
        t0 = clock()
        replay = replay_completion(p, trace)
        spent += clock() - t0
        lines += replay.num_lines
        k += 1
    mean_lines = lines / k
    return lines / spent, f"{k} replays of {len(problems)} longproc-0.5k test traces, {mean_lines:.0f} lines each on average"


# ---- driver ------------------------------------------------------------------------------------


def alternate(
    rounds: int, first: Callable[[int], float], second: Callable[[int], float], label: str
) -> tuple[list[float], list[float]]:
    """``rounds`` alternating measurements ``first(r)``, ``second(r)`` (``r`` = round, for seeds)."""
    a, b = [], []
    for r in range(rounds):
        a.append(first(r))
        b.append(second(r))
        print(f"  {label} round {r + 1}/{rounds}: {a[-1]:,.0f} vs {b[-1]:,.0f} steps/s", flush=True)
    return a, b


@dataclass
class Options:
    seconds: float = 3.0
    """Timed seconds per measurement."""
    rounds: int = 3
    """Alternating rounds per comparison."""
    warmup: float = 10.0
    """Seconds of Countdown-v0 play before the rounds."""
    num_envs: int = 1024
    seed: int = 0
    out: str = str(ROOT / "docs" / "benchmarks_envs.md")
    quick: bool = False
    """A smoke run (short, small batch, no report file)."""

    def __post_init__(self) -> None:
        check_min(self, 1, "rounds", "num_envs")
        check_min(self, 0, "seconds", "warmup")


def main(argv: list[str] | None = None) -> None:
    args = parse(Options, argv, description=__doc__.split("\n")[0])
    if args.quick:
        args.seconds, args.rounds, args.num_envs, args.warmup = 0.3, 1, 64, 0.3
    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    print("1. single env: a cold round, a warm-up, then alternating rounds", flush=True)
    cold_cd = run_countdown(args.seconds, args.seed + 1000)
    cold_cp = run_cartpole(args.seconds, args.seed + 1000)
    print(f"  cold: {cold_cd:,.0f} vs {cold_cp:,.0f} steps/s", flush=True)
    run_countdown(args.warmup, args.seed + 2000)
    cd, cp = alternate(
        args.rounds,
        lambda r: run_countdown(args.seconds, args.seed + r),
        lambda r: run_cartpole(args.seconds, args.seed + r),
        "Countdown-v0 vs CartPole-v1",
    )
    single_ratio = statistics.median(x / y for x, y in zip(cd, cp, strict=True))

    n = args.num_envs
    print(f"2. batched, {n} envs", flush=True)

    def native() -> gym.vector.VectorEnv:
        return CountdownVectorEnv(n)

    def sync() -> gym.vector.VectorEnv:
        return gym.make_vec(
            "Countdown-v0", num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
        )

    nat, syn = alternate(
        args.rounds,
        lambda r: run_vector(native, args.seconds, args.seed + r),
        lambda r: run_vector(sync, args.seconds, args.seed + r),
        "CountdownVectorEnv vs SyncVectorEnv",
    )
    vec_ratio = statistics.median(x / y for x, y in zip(nat, syn, strict=True))

    print("3. CountdownText-v0 replay", flush=True)
    text_rate, text_note = run_text_replay(args.seconds * args.rounds, n_problems=50 if not args.quick else 5)

    load_end = os.getloadavg()
    med = statistics.median
    rows = [
        ("Countdown-v0 (random legal actions)", f"{med(cd):,.0f} steps/s", f"{single_ratio:.2f}x CartPole-v1"),
        ("CartPole-v1 (random actions)", f"{med(cp):,.0f} steps/s", "1.00x"),
        (
            "Countdown-v0, first round (cold memo)",
            f"{cold_cd:,.0f} steps/s",
            f"{cold_cd / cold_cp:.2f}x CartPole-v1 ({cold_cp:,.0f} steps/s)",
        ),
        (f"CountdownVectorEnv, {n} envs", f"{med(nat):,.0f} steps/s", f"{vec_ratio:.1f}x SyncVectorEnv"),
        (f"SyncVectorEnv(Countdown-v0), {n} envs", f"{med(syn):,.0f} steps/s", "1.0x"),
        (
            "CountdownText-v0 replay of DFS traces",
            f"{text_rate:,.0f} lines/s" if text_rate is not None else "not available",
            text_note,
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print()
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>18}  {note}")
    targets = (
        f"single env >= CartPole: {'met' if single_ratio >= 1 else 'NOT met'}; "
        f"batched >= 20x sync: {'met' if vec_ratio >= 20 else 'NOT met'}"
    )
    print(targets)
    if args.quick:
        return

    cmd = " ".join(["python benchmarks/bench_envs.py", *(sys.argv[1:] if argv is None else argv)])
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    per_round = "\n".join(
        [
            f"- Countdown-v0 steps/s per round: {', '.join(f'{x:,.0f}' for x in cd)}",
            f"- CartPole-v1 steps/s per round: {', '.join(f'{x:,.0f}' for x in cp)}",
            f"- CountdownVectorEnv steps/s per round: {', '.join(f'{x:,.0f}' for x in nat)}",
            f"- SyncVectorEnv steps/s per round: {', '.join(f'{x:,.0f}' for x in syn)}",
        ]
    )
    report = f"""# Environment throughput

Measured by `{cmd}` on {started}
({platform.machine()}, {os.cpu_count()} CPU cores shared with other jobs; load average
{load_start[0]:.1f} at the start and {load_end[0]:.1f} at the end; Python {platform.python_version()},
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
alternating rounds make the ratios the figures to compare.
"""
    Path(args.out).write_text(report, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
