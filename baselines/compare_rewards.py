"""Compare reward variants for MaskablePPO on Countdown-v0 at equal environment steps.

    python baselines/compare_rewards.py --total-timesteps 80000 --seeds 0 1 2 --workers 2

Runs ``baselines/sb3_ppo.py`` for every (reward variant, seed), ``--workers`` at a time (other flags go to every run),
then writes ``sb3_rewards.md`` and ``sb3_rewards.png`` into ``--out``. Finished runs are reused; each run's output goes
to ``runs/<variant>-s<seed>.log``.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from baselines.analysis.uncertainty import finite_number, seed_spread
from countdown_gym import dataclass_cli
from countdown_gym.rewards.variants import variant_names
from countdown_gym.runkit.runs import not_regular, read_options, run_named, write_text_atomic

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _own_result(result: dict[str, object], name: str, variant: str, seed: int) -> bool:
    """Whether ``result`` names run ``name`` (its reward and seed) and holds the numbers the table reads: a
    ``success_rate`` in [0, 1], finite numbers >= 0 of the steps, seconds, steps/s and problems."""
    nums = [result.get(k) for k in ("success_rate", "total_timesteps", "train_seconds", "env_steps_per_second",
                                    "eval_problems")]
    return ((result.get("run"), result.get("reward"), result.get("seed")) == (name, variant, seed)
            and isinstance(result.get("eval_split"), str)
            and finite_number(nums[0], high=1) and all(finite_number(x) for x in nums[1:]))


def run_arguments(variant: str, seed: int, steps: int, out: str, extra: list[str]) -> tuple[list[str], dict | None]:
    """The ``sb3_ppo.py`` arguments of one run, and its result when it has finished already; ``ValueError`` when its
    folder holds a run of other settings or of a larger budget."""
    from baselines import sb3_ppo

    name = f"{variant}-s{seed}"
    run_dir = Path(out) / "runs" / name
    argv = ["--reward", variant, "--seed", str(seed), "--total-timesteps", str(steps), "--output-dir",
            str(Path(out) / "runs"), "--run-name", name, "--no-progress", "--resume", *extra]
    old = sb3_ppo.saved_options(run_dir)
    if old is not None:  # only ever resume or reuse a run of the same configuration
        changed = dataclass_cli.changed_options(old, sb3_ppo.parse_args(argv), ("total_timesteps", "resume", "progress"))
        if changed:
            raise ValueError(f"{run_dir} holds a run with other settings ({', '.join(changed)}); use another --out")
        if old.get("total_timesteps", 0) > steps:  # its result and curve would be reported as this smaller budget
            raise ValueError(f"{run_dir} holds a run of {old['total_timesteps']} steps, more than --total-timesteps {steps}; "
                             "use another --out")
    result = read_options(run_dir, "result.json")  # one error naming a damaged file
    if result is not None and not _own_result(result, name, variant, seed):
        raise ValueError(f"{run_dir / 'result.json'} is not a result of run {name} (its run, reward and seed, a success_rate "
                         "in [0, 1], numbers >= 0 of the steps, seconds, steps/s and problems); fix or delete it")
    return argv, result if result is not None and result.get("total_timesteps", 0) >= steps else None


def run_all(jobs: list[tuple[str, int]], args: Options, extra: list[str]) -> list[dict] | None:
    """Every (variant, seed)'s result, running the unfinished ones (``sb3_ppo.py`` processes, ``--workers`` at a time,
    output in ``runs/<run>.log``); None when Ctrl-C stopped them (each saved a checkpoint: the same command resumes)."""
    runs = Path(args.out) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    try:
        checked = [run_arguments(v, s, args.total_timesteps, args.out, extra) for v, s in jobs]  # all before any run
    except ValueError as exc:
        raise SystemExit(f"compare_rewards.py: {exc}") from None
    todo = [i for i, (_, result) in enumerate(checked) if result is None]
    script = str(Path(__file__).with_name("sb3_ppo.py"))
    commands = [([sys.executable, script, *checked[i][0]], runs / f"{jobs[i][0]}-s{jobs[i][1]}.log") for i in todo]
    if run_named(commands, [log.stem for _, log in commands], args.workers):
        return None
    return [result or read_options(runs / f"{v}-s{s}", "result.json")
            for (v, s), (_, result) in zip(jobs, checked, strict=True)]


def plot(out: Path, val_problems: int, preset: str, results: list[dict] | None = None) -> Path:
    """``sb3_rewards.png`` from the runs' ``curve.csv`` (``results`` None: redrawn from ``sb3_rewards_curves.csv``)."""
    from baselines.analysis.reward_curves import draw

    logs = None if results is None else [(r["reward"], int(r["seed"]), out / "runs" / r["run"] / "curve.csv") for r in results]
    return draw(out / "sb3_rewards.png", logs, "steps", "validation_success",
                title=f"MaskablePPO on Countdown-v0 ({preset}): validation success by reward", xlabel="environment steps",
                ylabel=f"validation success ({val_problems} problems, greedy)", spread="std")


def versus(rates: list[float], sparse: list[float] | None) -> str:
    """``rates`` against the sparse variant's: the mean difference and whether it exceeds 2 standard errors
    (no verdict with one seed on either side: its noise is unknown)."""
    if not sparse or rates is sparse:
        return ""
    exact = statistics.mean(rates) - statistics.mean(sparse)  # compared unrounded: 0.00255 is within 2 SE of 0.00269
    diff = round(exact, 3) + 0.0  # + 0.0: no "-0.000"
    if min(len(rates), len(sparse)) < 2:
        return f"{diff:+.3f} (one seed: noise unknown)"
    se = math.hypot(seed_spread(rates), seed_spread(sparse))
    if abs(exact) <= 2 * se:
        return f"{diff:+.3f} (within seed noise)"
    return f"{diff:+.3f} ({'better' if exact > 0 else 'worse'})"


@dataclass
class Options:
    """Train MaskablePPO once per reward variant and seed, and tabulate the results; other flags go to sb3_ppo."""

    variants: list[str] = field(default_factory=lambda: list(variant_names("step")))  # sb3_ppo.py --reward values.
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])  # Seeds per variant.
    total_timesteps: int = 80_000  # Environment steps per run.
    workers: int = 2  # Runs at a time.
    out: str = "docs/results"  # Directory of the runs, sb3_rewards.md and the curves.
    reference: str = ""  # JSON file {name: {"rate": x, "command": "..."}} of reference agents to list in the table.
    replot: bool = False  # Redraw sb3_rewards.png from the sb3_rewards_curves.csv in --out (no run).

    def __post_init__(self) -> None:
        if self.replot:
            dataclass_cli.check_unused(self, "--replot (it redraws the figure only)", skip=("replot", "out"))
        dataclass_cli.check_min(self, 1, "total_timesteps", "workers")
        if not self.variants or not self.seeds:
            raise ValueError("--variants and --seeds need at least one value each")
        if bad := [v for v in self.variants if v not in variant_names("step")]:  # sb3_ppo's check would name --reward
            raise ValueError(f"--variants must be among {list(variant_names('step'))}, got {bad[0]!r}")
        if len(set(self.variants)) < len(self.variants) or len(set(self.seeds)) < len(self.seeds):
            raise ValueError(f"--variants and --seeds must not repeat a value (each run has one folder), got {self.variants} "
                             f"and {self.seeds}")


def main(argv: list[str] | None = None) -> int:
    prog = "python baselines/compare_rewards.py"
    args, extra = dataclass_cli.parse_known(Options, argv, prog=prog, description=__doc__.split("\n\n")[0])
    from baselines import sb3_ppo

    out = Path(args.out)
    run_args = sb3_ppo.parse_args(extra)
    if args.replot:
        try:  # of sb3_ppo's flags, the figure reads these two
            dataclass_cli.check_unused(run_args, "--replot (it redraws the figure only)", skip=("eval_problems", "preset"))
        except ValueError as exc:
            dataclass_cli.usage_error(str(exc), prog=prog)
        print(f"wrote {plot(out, run_args.eval_problems, run_args.preset)}")
        return 0
    for variant in args.variants:  # every run's command line is checked before any run starts
        for seed in {min(args.seeds), max(args.seeds)}:  # sb3_ppo checks a seed against its range alone
            sb3_ppo.parse_args([*extra, "--reward", variant, "--seed", str(seed)])
    per_run = ("--reward", "--seed", "--output-dir", "--run-name", "--progress", "--resume")  # run_arguments sets them
    if clash := [a for a in extra if a.split("=")[0].replace("_", "-").replace("--no-", "--") in per_run]:
        raise SystemExit(f"compare_rewards.py: {clash[0]} would override what the comparison sets for each run "
                         "(--variants, --seeds, --out): drop it")
    try:  # so is --reference, read before the runs rather than after them
        if args.reference and (kind := not_regular(args.reference)):  # a FIFO would block the read
            raise ValueError(f"it is {kind}")
        refs = dataclass_cli.strict_json(Path(args.reference).read_bytes()) if args.reference else {}
        ref_rows = [f"| reference: {name} | {ref['rate']:.3f} | | | |" for name, ref in refs.items()]
        ref_commands = [f"* {name}: `{ref['command']}`" for name, ref in refs.items()]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SystemExit(f"--reference {args.reference}: not a readable JSON file of {{name: {{\"rate\": x, \"command\": "
                         f"\"...\"}}}} ({type(exc).__name__}: {exc})") from None
    out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    t0 = time.time()
    results = run_all([(v, s) for v in args.variants for s in args.seeds], args, extra)
    if results is None:
        return dataclass_cli.EXIT_INTERRUPTED
    wall = time.time() - t0
    load_after = os.getloadavg()
    plot(out, run_args.eval_problems, run_args.preset, results)

    command = "python baselines/compare_rewards.py " + " ".join(argv if argv is not None else sys.argv[1:])
    first = results[0]
    per_run = statistics.mean(r["train_seconds"] for r in results)
    longest = max(r["train_seconds"] for r in results)
    threads = run_args.threads  # of every run
    lines = [
        "# MaskablePPO on Countdown-v0: reward variants",
        "",
        f"Command: `{command.strip()}`  ",
        f"Budget: {args.total_timesteps} environment steps per run, seeds {args.seeds}, "
        f"{'one run' if args.workers == 1 else f'{args.workers} runs'} at a time "
        f"({threads} torch thread{'s' if threads > 1 else ''} each). Wall-clock time of this invocation: {wall / 60:.1f} min "
        f"for {len(results)} runs (finished runs are reused); training {per_run:.0f} s per run on average, "
        f"{longest:.0f} s the longest. Load average (1, 5, 15 min) "
        f"at the start {', '.join(f'{x:.2f}' for x in load_before)}, at the end {', '.join(f'{x:.2f}' for x in load_after)} "
        f"on {os.cpu_count()} CPUs.  ",
        f"Features: lookahead {first.get('lookahead', 1)}, log ratios {first.get('log_ratios', False)}, "
        f"children {first.get('children', False)}; environment: {first.get('vec_env', 'dummy')}.  ",
        f"Evaluation: greedy with action masks on the frozen `{first['eval_split']}` split "
        f"({first['eval_problems']} problems).",
        "",
        f"| reward | {first['eval_split']} success (mean ± std) | per seed | vs sparse | env steps/s (per run) |",
        "| --- | --- | --- | --- | --- |",
    ]
    by_variant = {v: [r["success_rate"] for r in results if r["reward"] == v] for v in args.variants}
    for variant, rates in by_variant.items():
        speed = statistics.mean(r["env_steps_per_second"] for r in results if r["reward"] == variant)
        spread = f"± {seed_spread(rates, 'std'):.3f}" if len(rates) > 1 else "(one seed: std undefined)"
        lines.append(f"| {variant} | {statistics.mean(rates):.3f} {spread} | "
                     + ", ".join(f"{x:.3f}" for x in rates) + f" | {versus(rates, by_variant.get('sparse'))} | {speed:.0f} |")
    lines += ref_rows
    if refs:
        lines += ["", "Reference rows, each measured by:", "", *ref_commands]
    lines += ["", "\"vs sparse\": the difference of the means, called a difference only when it exceeds twice its "
              "standard error (sqrt(s1²/n1 + s2²/n2)) over seeds."]
    lines += ["", "![learning curves](sb3_rewards.png)", "",
              "How the baseline works, its speed and its limits: "
              f"[docs/sb3_baseline.md]({os.path.relpath(DOCS / 'sb3_baseline.md', out.resolve())}).", ""]
    write_text_atomic(out / "sb3_rewards.md", "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    dataclass_cli.run_script(main)
