"""Compare GRPO reward variants from the same starting model at equal steps (or equal wall-clock) and seeds.

    python baselines/compare_llm_rewards.py          # the seed paper's comparison, multi-turn, 5 variants x 3 seeds
    python baselines/compare_llm_rewards.py --interaction single-pass --variants sparse,oracle,critic,clipo --seeds 0
    python baselines/compare_llm_rewards.py --variants sparse,critic --seeds 0,1,2,3,4 --steps 1000 --max-minutes 4.5 --jobs 10

Each (variant, seed) is one ``baselines/llm_grpo.py`` run (a subprocess; ``--jobs`` at a time, one
CPU thread each) with identical options except ``--rewards``; with ``--max-minutes`` each trains for that long
(run them all at once, so that they share the machine alike: scripts/gpu_compare.sh does so on a GPU). Afterwards the starting model and
every final model are evaluated on the frozen *test* split (greedy success; with ``--test-samples``
also sampled success and pass@k at the rollout temperature). Writes ``<results>/llm_grpo_rewards_multiturn.md`` (``llm_grpo_rewards.md`` for
single-pass: a table of mean ± SE over seeds, the command, a plain reading of the differences
against their standard errors, and every pair of variants tested paired by seed), the ``.png`` beside it (validation success vs step per variant, mean ± SE
over seeds as a shaded band) and its points in ``<stem>_curves.csv`` (``--replot`` redraws the figure from them). Finished runs of the
same options are reused and interrupted ones resume from their last checkpoint, so re-running is
cheap; a test result is reused only for the same model and test settings.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from baselines.lm.grpo_model import DEFAULT_MODEL, DEFAULT_TURN_MODEL, ROOT
from baselines.lm.grpo_options import RESUMABLE_CHANGES
from baselines.lm.grpo_options import Options as GRPOOptions
from baselines.uncertainty import binomial_se, seed_spread
from countdown_gym import dataclass_cli
from countdown_gym.runkit.runs import write_text_atomic

VARIANTS = ("sparse", "oracle-reachable", "oracle-perfect", "critic", "clipo")
"""The seed paper's comparison: sparse, the oracle (reachable: +/- per move), the paper's perfect-move oracle,
the learned contrastive critic, and CLIPO (dense terms summed into the outcome reward)."""
STEP_SUFFIX = "@step"
"""A variant ending in ``@step`` (``oracle-reachable@step``) runs ``--rewards oracle-reachable --step-credit``: the same dense terms credited
per turn (docs/step_credit.md) instead of summed into the outcome reward."""
DEFAULT_VARIANTS = (*VARIANTS, "oracle-reachable" + STEP_SUFFIX)


_GRPO = GRPOOptions()  # llm_grpo.py's defaults, except the number of steps and the validation samples


@dataclass
class Options:
    """Compare GRPO reward variants from the same starting model at equal steps and seeds."""

    model: str = ""
    """Starting model (default: the shipped model of --interaction)."""
    interaction: Literal["multi-turn", "single-pass"] = "multi-turn"
    max_turns: int = _GRPO.max_turns
    """Multi-turn: the turn budget."""
    preset: str = _GRPO.preset
    prompt_style: str = _GRPO.prompt_style
    variants: tuple[str, ...] = DEFAULT_VARIANTS
    """Comma-separated --rewards values; a '@step' suffix adds --step-credit (multi-turn)."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Comma-separated seeds."""
    steps: int = 20
    """GRPO steps of every run (with --max-minutes: the most)."""
    max_minutes: float = 0.0
    """Equal wall-clock instead of equal steps: every run trains for this many minutes (llm_grpo.py --max-minutes), at
    most --steps steps; run the variants side by side (--jobs) so that they share the machine alike. 0 = equal steps."""
    prompts_per_step: int = _GRPO.prompts_per_step
    num_generations: int = _GRPO.num_generations
    max_completion_length: int = _GRPO.max_completion_length
    learning_rate: float = _GRPO.learning_rate
    temperature: float = _GRPO.temperature
    eval_interval: int = 10
    eval_problems: int = _GRPO.eval_problems
    """Validation problems during training."""
    eval_samples: int = 0
    test_problems: int = 1000
    """Test problems for the final table (0 = all)."""
    test_samples: int = 0
    jobs: int = 2
    """Runs in parallel (one thread each)."""
    runs_dir: str = str(ROOT / "runs" / "compare_llm")
    results_dir: str = str(ROOT / "docs" / "results")
    train_pass_rates: str = _GRPO.train_pass_rates
    """llm_grpo.py --train-pass-rates for every run: auto (the model's own file), none (every training problem), or a file."""
    extra_args: str = ""
    """More llm_grpo.py flags for every run, e.g. '--beta 0.01'."""
    replot: bool = False
    """Redraw the figure from the <stem>_curves.csv in --results-dir (no run, no evaluation; the same --interaction and
    --eval-problems)."""

    def __post_init__(self) -> None:
        if not self.model:
            self.model = DEFAULT_TURN_MODEL if self.interaction == "multi-turn" else DEFAULT_MODEL
        dataclass_cli.check_min(self, 1, "steps", "jobs", "prompts_per_step", "max_completion_length", "max_turns")


def parse_args(argv: list[str] | None = None) -> Options:
    """:class:`Options` from the command line (``countdown_gym.dataclass_cli``): bad input is a usage error (exit code 2)."""
    return dataclass_cli.parse(Options, argv, prog="compare_llm_rewards.py", description=__doc__.split("\n")[0])


def run_command(args: Options, variant: str, seed: int) -> list[str]:
    """The ``llm_grpo.py`` command of one run."""
    return [
        sys.executable, str(ROOT / "baselines" / "llm_grpo.py"),
        "--model", args.model, "--interaction", args.interaction, "--max-turns", str(args.max_turns),
        "--preset", args.preset, "--prompt-style", args.prompt_style, "--rewards", variant.removesuffix(STEP_SUFFIX),
        *(["--step-credit"] if variant.endswith(STEP_SUFFIX) else []), "--seed", str(seed), "--steps", str(args.steps),
        *(["--max-minutes", f"{args.max_minutes:g}"] if args.max_minutes else []),
        "--prompts-per-step", str(args.prompts_per_step), "--num-generations", str(args.num_generations),
        "--max-completion-length", str(args.max_completion_length), "--learning-rate", str(args.learning_rate),
        "--temperature", str(args.temperature), "--eval-interval", str(args.eval_interval),
        "--eval-problems", str(args.eval_problems), "--eval-samples", str(args.eval_samples),
        "--train-pass-rates", args.train_pass_rates, "--test-eval", "false",  # the test evaluation below, cached per model
        "--output-dir", str(run_path(args, variant, seed)), "--threads", "1", "--resume", "--quiet",
        *shlex.split(args.extra_args),
    ]


def run_path(args: Options, variant: str, seed: int) -> Path:
    return Path(args.runs_dir) / f"{variant.replace('+', '-').replace(STEP_SUFFIX, '-step')}-s{seed}"


def finished(args: Options, variant: str, seed: int) -> bool:
    """The run has its summary at ``args.steps`` (or stopped by ``--max-minutes``) and was made with this command's
    options (else it runs: ``--resume`` continues it, or refuses a run of other options)."""
    from baselines.llm_grpo import parse_options

    path = run_path(args, variant, seed)
    s, saved = path / "summary.json", path / "options.json"
    if not (s.exists() and saved.exists()):
        return False
    summary = json.loads(s.read_text())
    if not (summary.get("last", {}).get("step") == args.steps or (args.max_minutes and summary.get("stopped_by_time_limit"))):
        return False
    return not dataclass_cli.changed_options(
        json.loads(saved.read_text()), parse_options(run_command(args, variant, seed)[2:]), RESUMABLE_CHANGES
    )


def check_run_options(args: Options) -> None:
    """Every variant's ``llm_grpo.py`` command parsed and checked as its runs will check it, before any run starts: a
    bad variant or flag stops here with one message instead of one failed run per seed."""
    from baselines.llm_grpo import parse_options

    for v in args.variants:
        try:
            parse_options(run_command(args, v, args.seeds[0])[2:])
        except SystemExit as exc:
            if exc.code in (0, None):
                raise
            why = exc.code if isinstance(exc.code, str) else "the error above"
            raise SystemExit(f"compare_llm_rewards.py: the runs of variant {v!r} would be refused: {why}") from None


def launch_all(args: Options, runs: list[tuple[str, int]]) -> None:
    """Run every unfinished (variant, seed), ``args.jobs`` at a time; logs in ``<run>/stdout.log``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    todo = [(v, s) for v, s in runs if not finished(args, v, s)]
    running: list[tuple[str, int, subprocess.Popen[bytes], Any]] = []
    while todo or running:
        while todo and len(running) < args.jobs:
            v, s = todo.pop(0)
            path = run_path(args, v, s)
            path.mkdir(parents=True, exist_ok=True)
            (path / "test.json").unlink(missing_ok=True)  # the final model changes: its test result too
            log = (path / "stdout.log").open("ab")
            print(f"start {v} seed {s} -> {path}", flush=True)
            running.append((v, s, subprocess.Popen(run_command(args, v, s), stdout=log, stderr=subprocess.STDOUT, env=env), log))
        time.sleep(5)
        for item in list(running):
            v, s, proc, log = item
            if proc.poll() is not None:
                log.close()
                running.remove(item)
                status = "done" if proc.returncode == 0 else f"FAILED (exit {proc.returncode}, see {run_path(args, v, s)}/stdout.log)"
                print(f"{v} seed {s}: {status}", flush=True)
                if proc.returncode != 0:
                    raise SystemExit(f"run {v} seed {s} failed; fix it and re-run (finished runs are kept)")


def test_eval(args: Options, model_path: str, cache: Path) -> dict[str, Any]:
    """Greedy / sampled test success of one model (cached in ``cache`` with the settings it was made with)."""
    cached = cached_test_eval(args, cache)
    if cached is not None:
        return cached
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from baselines.lm.callbacks import evaluate_policy, evaluate_turns
    from baselines.lm.generation import Sampling
    from baselines.lm.grpo_data import first_problems
    from baselines.lm.grpo_model import load_model_and_tokenizer
    from countdown_gym.data.splits import load_split
    from countdown_gym.game.text_format import trainer_prompt

    torch.set_num_threads(1)
    model, tok = load_model_and_tokenizer(model_path)
    if torch.cuda.is_available():
        model.to("cuda")
    problems = first_problems(load_split(args.preset, "test"), args.test_problems, "--test-problems",
                              f"test problems of {args.preset}")
    with torch.no_grad():
        if args.interaction == "multi-turn":
            row = evaluate_turns(model, tok, problems, max_turns=args.max_turns, samples=args.test_samples,
                                 sampling=Sampling(temperature=args.temperature), batch_size=256, seed=12345)
        else:
            row = evaluate_policy(
                model, tok, problems, [trainer_prompt(p, args.prompt_style, tok) for p in problems],
                max_new_tokens=args.max_completion_length, samples=args.test_samples, sampling=Sampling(temperature=args.temperature),
                batch_size=64, seed=12345,
            )
    write_text_atomic(cache, json.dumps({**row, "settings": test_settings(args)}, indent=2) + "\n")
    return row


def test_settings(args: Options) -> dict[str, Any]:
    """What a test evaluation depends on besides the model."""
    names = ("preset", "prompt_style", "test_problems", "test_samples", "temperature", "max_completion_length",
             "interaction", "max_turns")  # and the device (float sums in another order)
    return {**{name: getattr(args, name) for name in names}, "device": device_name()}


def device_name() -> str:
    """Where the runs and the test evaluations ran: the GPU's name, or ``CPU``."""
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"


def cached_test_eval(args: Options, cache: Path) -> dict[str, Any] | None:
    """The row in ``cache`` when it was made with the current test settings, else None."""
    if not cache.exists():
        return None
    row = json.loads(cache.read_text())
    return row if row.pop("settings", None) == test_settings(args) else None


def summarise(variant: str, per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and SE over seeds of the test greedy success, and the seeds' mean of the other figures."""
    xs = [float(x["greedy_success"]) for x in per_seed]
    mean = sum(xs) / len(xs)
    n = int(per_seed[0]["problems"])
    se = seed_spread(xs) if len(xs) > 1 else binomial_se(mean, n)
    row: dict[str, Any] = {"variant": variant, "mean": mean, "se": se, "per_seed": xs}
    for key in ("val_first", "val_last", "s_per_step", "steps"):
        row[key] = sum(float(x[key]) for x in per_seed) / len(per_seed)
    return row


def training_minutes(runs_dir: Path, this_call: float) -> float:
    """Training wall time of the runs over every call that trained (kept in ``<runs>/timing.json``): a re-run
    that reuses finished runs reports the time they took, not its own few seconds."""
    path = runs_dir / "timing.json"
    total = json.loads(path.read_text())["train_minutes"] if path.exists() else 0.0
    if this_call > 0.5:  # this call trained
        total += this_call
        write_text_atomic(path, json.dumps({"train_minutes": round(total, 1)}) + "\n")
    return total


def _critical(df: int) -> float:
    """The two-sided 95% critical value of Student's t with ``df`` degrees of freedom (normal's 1.96 for large df)."""
    from scipy.stats import t

    return float(t.ppf(0.975, df)) if df > 0 else 1.96


def reading(rows: list[dict[str, Any]], start: dict[str, Any], n: int) -> list[str]:
    """Plain sentences: each variant against the starting model and against sparse, judged at the 95% level.

    Against the starting model: the seeds' SE combined with the start's binomial SE, normal critical value.
    Against ``sparse`` (same test problems, so seed-to-seed variation is the noise): Student's t with
    ``seeds_a + seeds_b - 2`` degrees of freedom (2.78 x SE for 3 + 3 seeds), not 2 x SE:
    with three seeds a standard error is itself uncertain.
    """
    out = ["Reading:", ""]
    by = {r["variant"]: r for r in rows}
    for r in rows:
        d = r["mean"] - start["greedy_success"]
        se = math.hypot(r["se"], binomial_se(start["greedy_success"], n))
        verdict = "a real gain" if d > 1.96 * se else "a real drop" if d < -1.96 * se else "within noise"
        out.append(f"- `{r['variant']}` vs the starting model: {100 * d:+.1f} points (1.96 SE = {196 * se:.1f}): {verdict}.")
        if r["variant"] != "sparse" and "sparse" in by:
            s = by["sparse"]
            d = r["mean"] - s["mean"]
            se = math.hypot(r["se"], s["se"])
            k = _critical(len(r["per_seed"]) + len(s["per_seed"]) - 2) if len(r["per_seed"]) > 1 else 1.96
            verdict = "better" if d > k * se else "worse" if d < -k * se else "no significant difference"
            out.append(f"- `{r['variant']}` vs `sparse`: {100 * d:+.1f} points ({k:.2f} SE = {100 * k * se:.1f}): {verdict}.")
    return out


def paired_across_seeds(rows: list[dict[str, Any]], seeds: list[int]) -> list[str]:
    """Every pair of variants, paired by seed (a seed draws the same first prompts and the same start in every variant):
    the mean of the per-seed differences in test greedy success with its SE, Student's paired t test (two-sided), and
    Holm's step-down adjustment of the p values over all the pairs. Needs two seeds or more."""
    from itertools import combinations

    from scipy.stats import ttest_rel

    if len(seeds) < 2:
        return []
    tests = []
    for a, b in combinations(rows, 2):
        d = [x - y for x, y in zip(a["per_seed"], b["per_seed"], strict=True)]
        mean, se = sum(d) / len(d), seed_spread(d)
        p = float(ttest_rel(a["per_seed"], b["per_seed"]).pvalue) if se > 0 else (1.0 if mean == 0 else 0.0)
        tests.append([a["variant"], b["variant"], mean, se, p])
    order = sorted(range(len(tests)), key=lambda i: tests[i][4])
    running = 0.0
    for rank, i in enumerate(order):  # Holm: the k-th smallest p times (m - k), kept monotone
        running = max(running, min(1.0, tests[i][4] * (len(tests) - rank)))
        tests[i].append(running)
    lines = [
        f"Paired across seeds ({', '.join(map(str, seeds))}): for each pair, the per-seed differences of test greedy "
        "success, Student's paired t test (two-sided) and the p value after Holm's adjustment for the "
        f"{len(tests)} comparison{'s' if len(tests) > 1 else ''}.",
        "",
        "| A | B | A - B (points), mean ± SE | p | p (Holm) | at 0.05 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for a, b, mean, se, p, holm in tests:
        verdict = "**significant**" if holm < 0.05 else "significant before adjustment" if p < 0.05 else "no"
        lines.append(f"| `{a}` | `{b}` | {100 * mean:+.1f} ± {100 * se:.1f} | {p:.3f} | {holm:.3f} | {verdict} |")
    return lines


def plot(args: Options, runs: list[tuple[str, int]], path: Path) -> Path:
    """Validation greedy success vs GRPO step: each variant's mean over seeds, a band of the SE over seeds; the
    points go to ``<stem>_curves.csv`` beside the PNG (``--replot`` redraws from them)."""
    import csv

    rows = []
    for v, s in runs:
        csv_path = run_path(args, v, s) / "metrics.csv"
        if csv_path.exists():
            rows += [(v, s, int(r["step"]), 100 * float(r["greedy_success"])) for r in csv.DictReader(csv_path.open())]
    return draw(args, rows, path)


def draw(args: Options, rows: list, path: Path) -> Path:
    from baselines.reward_curves import plot_curves

    return plot_curves(rows, path, title=f"GRPO on Countdown ({args.interaction}): validation success by reward",
                       xlabel="GRPO step", ylabel=f"greedy success (%), first {args.eval_problems} validation problems",
                       spread="se")


def results_png(args: Options) -> Path:
    stem = "llm_grpo_rewards" if args.interaction == "single-pass" else "llm_grpo_rewards_multiturn"
    return Path(args.results_dir) / f"{stem}.png"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.replot:
        from baselines.reward_curves import curves_path, read_curves

        png = results_png(args)
        print(f"wrote {draw(args, read_curves(curves_path(png)), png)}")
        return
    variants, seeds = list(args.variants), list(args.seeds)
    runs = [(v, s) for s in seeds for v in variants]
    check_run_options(args)
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    launch_all(args, runs)
    train_minutes = training_minutes(Path(args.runs_dir), (time.perf_counter() - t0) / 60)
    evals = [(args.model, Path(args.runs_dir) / "start_test.json")]
    evals += [(str(run_path(args, v, s) / "final"), run_path(args, v, s) / "test.json") for v in variants for s in seeds]
    todo = [(m, c) for m, c in evals if cached_test_eval(args, c) is None]
    if todo:
        print(f"test evaluation of {len(todo)} model(s), {args.jobs} at a time", flush=True)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx) as pool:
            list(pool.map(test_eval, [args] * len(todo), [m for m, _ in todo], [c for _, c in todo]))
    start = test_eval(args, args.model, Path(args.runs_dir) / "start_test.json")
    rows = []
    for v in variants:
        per_seed = []
        for s in seeds:
            path = run_path(args, v, s)
            res = test_eval(args, str(path / "final"), path / "test.json")
            summ = json.loads((path / "summary.json").read_text())
            per_seed.append({**res, "val_first": summ["first"]["greedy_success"], "val_last": summ["last"]["greedy_success"],
                             "s_per_step": summ.get("seconds_per_step", float("nan")),
                             "steps": summ.get("steps", summ["last"]["step"])})
        rows.append(summarise(v, per_seed))
    n = int(start["problems"])
    results = Path(args.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    stem = results_png(args).stem
    plot(args, runs, results_png(args))
    cmd = "python baselines/compare_llm_rewards.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    weights = Path(args.model) / "model.safetensors"
    sha = hashlib.sha256(weights.read_bytes()).hexdigest() if weights.is_file() else "n/a (hub model)"
    mode = (f"multi-turn (CountdownMultiTurn-v0, at most {args.max_turns} turns)" if args.interaction == "multi-turn"
            else f"single-pass, prompt style `{args.prompt_style}`, max {args.max_completion_length} completion tokens")
    lines = [
        f"# GRPO reward variants on Countdown ({Path(args.model).name}, {args.interaction}, {device_name()})",
        "",
        f"Command: `{cmd.strip()}` ({train_minutes:.0f} min of training wall time on {device_name()}, "
        f"{args.jobs} run(s) in parallel, one CPU thread each). Starting weights: `model.safetensors` SHA-256 `{sha}`.",
        "",
        f"Every run starts from `{Path(args.model).name}` with the same options and seeds ({', '.join(map(str, seeds))}): "
        + (f"{args.max_minutes:g} minutes of training each (equal wall-clock; at most {args.steps} steps) "
           if args.max_minutes else f"{args.steps} GRPO steps ")
        + f"of {args.prompts_per_step} prompts x {args.num_generations} rollouts, "
        f"lr {args.learning_rate}, temperature {args.temperature}, {mode}, preset `{args.preset}`, training prompts: "
        f"{'every training problem' if args.train_pass_rates == 'none' else 'filtered by pass rate (' + args.train_pass_rates + ')'}. "
        f"Test = the first {n} problems of the frozen test split, greedy (one greedy episode per problem). "
        "Nothing was tuned on the test split.",
        "Weights: sparse 1.0 (+ format 0.1, constant in multi-turn) in every variant; oracle / oracle-perfect / critic add "
        "0.5 x their mean per-move term; clipo adds the CLIPO reward (lambda 0.2, floor -0.5). See docs/llm_grpo.md.",
        "",
        "| model | test greedy, mean ± SE over seeds | per seed | val greedy start -> end | steps (mean) | s/step |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| starting model | {100 * start['greedy_success']:.1f}% ± {100 * binomial_se(start['greedy_success'], n):.1f} (binomial) | | | | |",
    ]
    for r in rows:
        lines.append(
            f"| GRPO `{r['variant']}` | **{100 * r['mean']:.1f}% ± {100 * r['se']:.1f}** | "
            f"{', '.join(f'{100 * x:.1f}%' for x in r['per_seed'])} | {100 * r['val_first']:.1f}% -> {100 * r['val_last']:.1f}% | "
            f"{r['steps']:.0f} | {r['s_per_step']:.2f} |"
        )
    lines += [
        "",
        f"SE over seeds = standard deviation of the seeds' test success / sqrt(seeds) (with one seed: the binomial SE "
        f"sqrt(p(1-p)/{n})). A difference is called real below when it passes the 95% level: 1.96 SE against the "
        "starting model, Student's t (df = seeds + seeds - 2) against `sparse`. Several variants are compared at "
        "once, so one call at the edge of its threshold is weak evidence.",
        "",
        *reading(rows, start, n),
        "",
        *paired_across_seeds(rows, seeds),
        "",
        f"![validation success vs step]({stem}.png)",
        "",
    ]
    (results / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
