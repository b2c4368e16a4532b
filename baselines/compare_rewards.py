"""Compare reward variants for MaskablePPO on Countdown-v0 at equal environment steps.

    python baselines/compare_rewards.py --total-timesteps 100000 --seeds 0 1 2 --workers 2

Runs ``baselines/sb3_ppo.py`` for every (reward variant, seed) pair, each in its own process
(``--workers`` at a time, one torch thread each), then writes into ``--out``:

* ``sb3_rewards.md``: test success per variant (mean ± std over seeds, each seed's value), the
  random and solver reference agents, the command and the budget;
* ``sb3_rewards.png``: validation success vs environment steps, mean ± std band per variant.

Finished runs are reused (their ``result.json`` is kept), so an interrupted comparison resumes.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

DEFAULT_VARIANTS = ["sparse", "oracle-perfect", "oracle-reachable", "oracle-potential", "critic"]


def run_one(variant: str, seed: int, steps: int, out: str, extra: list[str]) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import sb3_ppo

    name = f"{variant}-s{seed}"
    done = Path(out) / "runs" / name / "result.json"
    if done.exists():
        result = json.loads(done.read_text())
        if result.get("total_timesteps", 0) >= steps:
            return result
    argv = ["--reward", variant, "--seed", str(seed), "--total-timesteps", str(steps), "--output-dir",
            str(Path(out) / "runs"), "--run-name", name, "--no-progress", "--resume", *extra]
    return sb3_ppo.main(argv)


def read_curve(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return np.array([int(r["steps"]) for r in rows]), np.array([float(r["validation_success"]) for r in rows])


def plot(results: list[dict], out: Path, variants: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant in variants:
        curves = []
        for r in results:
            if r["reward"] != variant:
                continue
            steps, values = read_curve(out / "runs" / r["run"] / "curve.csv")
            curves.append((steps, values))
        if not curves:
            continue
        n = min(len(c[0]) for c in curves)
        steps = curves[0][0][:n]
        stack = np.stack([c[1][:n] for c in curves])
        mean, std = stack.mean(0), stack.std(0)
        ax.plot(steps, mean, marker="o", markersize=3, label=f"{variant} (n={len(curves)})")
        ax.fill_between(steps, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("validation success (200 problems, greedy)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("MaskablePPO on Countdown-v0 (longproc-0.5k): reward variants")
    fig.tight_layout()
    fig.savefig(out / "sb3_rewards.png", dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="docs/results")
    parser.add_argument("--reference", default="", help="JSON file with reference-agent success rates to list in the table")
    args, extra = parser.parse_known_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    jobs = [(v, s) for v in args.variants for s in args.seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(run_one, v, s, args.total_timesteps, str(out), extra) for v, s in jobs]
        results = [f.result() for f in futures]
    wall = time.time() - t0
    plot(results, out, args.variants)

    command = "python baselines/compare_rewards.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        "# MaskablePPO on Countdown-v0: reward variants",
        "",
        f"Command: `{command.strip()}`  ",
        f"Budget: {args.total_timesteps} environment steps per run, seeds {args.seeds}, "
        f"{args.workers} runs at a time (one torch thread each). Training time summed over the {len(results)} runs: "
        f"{sum(r['train_seconds'] for r in results) / 60:.1f} min, i.e. {sum(r['train_seconds'] for r in results) / 60 / args.workers:.1f} min "
        f"of wall-clock at {args.workers} runs at a time on this 2-core CPU (this invocation: {wall / 60:.1f} min, finished runs are reused).  ",
        f"Evaluation: greedy with action masks on the frozen `{results[0]['eval_split']}` split "
        f"({results[0]['eval_problems']} problems).",
        "",
        "| reward | test success (mean ± std) | per seed | env steps/s (per run) |",
        "| --- | --- | --- | --- |",
    ]
    for variant in args.variants:
        rs = [r for r in results if r["reward"] == variant]
        rates = [r["success_rate"] for r in rs]
        sd = statistics.stdev(rates) if len(rates) > 1 else 0.0
        speed = statistics.mean(r["env_steps_per_second"] for r in rs)
        lines.append(f"| {variant} | {statistics.mean(rates):.3f} ± {sd:.3f} | "
                     + ", ".join(f"{x:.3f}" for x in rates) + f" | {speed:.0f} |")
    if args.reference:
        for name, rate in json.loads(Path(args.reference).read_text()).items():
            lines.append(f"| reference: {name} | {rate:.3f} | | |")
    lines += ["", "![learning curves](sb3_rewards.png)", ""]
    (out / "sb3_rewards.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
