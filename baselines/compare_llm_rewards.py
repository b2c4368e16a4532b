"""Compare GRPO reward arms from the same starting model at equal steps (or equal wall-clock) over many seeds.

    python baselines/compare_llm_rewards.py                  # the protocol of docs/results/reward_comparison.md
    python baselines/compare_llm_rewards.py --seeds 0-5      # a shard of it (another sitting, or machine, takes 6-10)
    python baselines/compare_llm_rewards.py --quick          # sparse against oracle-perfect, 8 seeds, < 90 min on 2 cores
    python baselines/compare_llm_rewards.py --variants sparse,critic --seeds 0-4 --steps 1000 --max-minutes 4.5 --jobs 10

Each (arm, seed) is one ``baselines/llm_grpo.py`` run (``--jobs`` at a time), launched seed by seed across the arms;
its record goes to ``<results-dir>/<name>/<arm>-s<seed>.json.gz``, from which ``baselines/reward_analysis.py`` writes
the page ``<results-dir>/<name>.md``; the validation curves go to ``<name>.png``. Finished runs are reused and
interrupted ones resume.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from baselines.analysis.protocol import QUICK, SEEDS, STEP_SUFFIX, VARIANTS, expand_seeds, run_record
from baselines.lm.grpo_model import DEFAULT_MODEL, DEFAULT_TURN_MODEL, ROOT
from baselines.lm.grpo_options import RESUMABLE_CHANGES
from baselines.lm.grpo_options import Options as GRPOOptions
from countdown_gym import dataclass_cli
from countdown_gym.runkit.runs import read_options, run_named

_GRPO = GRPOOptions()  # llm_grpo.py's defaults


@dataclass
class Options:
    """Compare GRPO reward arms from the same starting model at equal steps and many seeds."""

    model: str = ""  # Starting model (default: the shipped model of --interaction).
    interaction: Literal["multi-turn", "single-pass"] = "multi-turn"
    max_turns: int = _GRPO.max_turns  # Multi-turn: the turn budget.
    preset: str = _GRPO.preset
    prompt_style: str = _GRPO.prompt_style
    variants: tuple[str, ...] = VARIANTS  # Comma-separated --rewards values (the arms); '@step' adds --step-credit.
    seeds: tuple[str, ...] = SEEDS  # Seeds: comma-separated integers and ranges (0-10 is 0, 1, ..., 10).
    quick: bool = False  # Sparse against oracle-perfect, seeds 0-7, page and records in --runs-dir (QUICK).
    steps: int = _GRPO.steps  # GRPO steps of every run (with --max-minutes: the most).
    max_minutes: float = 0.0
    """Equal wall-clock instead of equal steps: every run trains for this many minutes (llm_grpo.py --max-minutes), at
    most --steps steps; run the arms side by side (--jobs) so that they share the machine alike. 0 = equal steps."""
    prompts_per_step: int = _GRPO.prompts_per_step
    num_generations: int = _GRPO.num_generations
    max_completion_length: int = _GRPO.max_completion_length
    learning_rate: float = _GRPO.learning_rate
    temperature: float = _GRPO.temperature
    eval_interval: int = _GRPO.eval_interval
    eval_problems: int = _GRPO.eval_problems  # Validation problems during training (as llm_grpo.py draws them).
    eval_samples: int = 0
    test_problems: int = 1000  # Test problems every run plays greedily at its end (0 = all).
    jobs: int = 2  # Runs in parallel (one thread each).
    runs_dir: str = str(ROOT / "runs" / "compare_llm")
    results_dir: str = str(ROOT / "docs" / "results")
    name: str = "reward_comparison"  # The page <results-dir>/<name>.md and the records' folder <results-dir>/<name>/.
    train_pass_rates: str = _GRPO.train_pass_rates  # llm_grpo.py --train-pass-rates of every run: auto, none or a file.
    extra_args: str = ""  # More llm_grpo.py flags for every run, e.g. '--beta 0.01'.
    replot: bool = False  # Redraw the figure from <name>_curves.csv in --results-dir (no run, no evaluation).

    def __post_init__(self) -> None:
        if self.replot:  # the figure of --results-dir/--name (--quick: of its own), labelled by these two
            dataclass_cli.check_unused(self, "--replot (it redraws the figure only)", skip=(
                "replot", "results_dir", "name", "interaction", "eval_problems", "quick", *("runs_dir",) * self.quick))
        if not self.model:
            self.model = DEFAULT_TURN_MODEL if self.interaction == "multi-turn" else DEFAULT_MODEL
        if self.quick:
            if given := [k for k in (*QUICK, "results_dir") if getattr(self, k) != getattr(Options, k)]:
                flag = f"--{given[0].replace('_', '-')}"
                raise ValueError(f"--quick sets {flag} itself (see its --help); drop {flag} or --quick")
            self.variants, self.seeds, self.name = QUICK["variants"], QUICK["seeds"], QUICK["name"]
            self.results_dir = self.runs_dir
        dataclass_cli.check_min(self, 1, "steps", "jobs", "prompts_per_step", "max_completion_length", "max_turns")
        if not self.variants or len(set(self.variants)) < len(self.variants):
            raise ValueError(f"--variants needs one or more arms, none repeated (each run has one folder), got {','.join(self.variants)!r}")
        self.seed_list  # noqa: B018  (a malformed --seeds is a usage error now)
        for flag in ("runs_dir", "results_dir"):  # a file there was found when the first run's record was written
            if (folder := Path(getattr(self, flag))).exists() and not folder.is_dir():
                raise ValueError(f"--{flag.replace('_', '-')} {folder} is not a folder")
        try:
            shlex.split(self.extra_args)
        except ValueError as exc:  # an unclosed quote
            raise ValueError(f"--extra-args must be llm_grpo.py flags as a shell would split them ({exc}), got {self.extra_args!r}") from None

    @property
    def seed_list(self) -> list[int]:
        """--seeds with its ranges expanded, in order, without repeats."""
        return expand_seeds(self.seeds)

    @property
    def page(self) -> Path:
        return Path(self.results_dir) / f"{self.name}.md"

    @property
    def records(self) -> Path:
        return Path(self.results_dir) / self.name


def parse_args(argv: list[str] | None = None) -> Options:
    """:class:`Options` from the command line (``countdown_gym.dataclass_cli``): bad input is a usage error (exit code 2)."""
    return dataclass_cli.parse(Options, argv, prog="compare_llm_rewards.py", description=__doc__.split("\n")[0])


PASSED = ("model", "interaction", "max_turns", "preset", "prompt_style", "steps", "prompts_per_step", "num_generations",
          "max_completion_length", "learning_rate", "temperature", "eval_interval", "eval_problems", "eval_samples",
          "train_pass_rates", "test_problems")  # the options every run passes on to llm_grpo.py as they are


def run_command(args: Options, variant: str, seed: int) -> list[str]:
    """The ``llm_grpo.py`` command of one run."""
    return [
        sys.executable, str(ROOT / "baselines" / "llm_grpo.py"),
        *(part for name in PASSED for part in (f"--{name.replace('_', '-')}", str(getattr(args, name)))),
        "--rewards", variant.removesuffix(STEP_SUFFIX), *(["--step-credit"] if variant.endswith(STEP_SUFFIX) else []),
        "--seed", str(seed), *(["--max-minutes", f"{args.max_minutes:g}"] if args.max_minutes else []), "--test-eval", "true",
        "--output-dir", str(run_path(args, variant, seed)), "--threads", "1", "--resume", "--quiet", *shlex.split(args.extra_args),
    ]


def run_options(args: Options, variant: str, seed: int) -> GRPOOptions:
    """``llm_grpo.py``'s parsed options of one run (a bad flag exits as that script would)."""
    from baselines.llm_grpo import parse_options

    return parse_options(run_command(args, variant, seed)[2:])


def run_path(args: Options, variant: str, seed: int) -> Path:
    return Path(args.runs_dir) / f"{variant.replace('+', '-').replace(STEP_SUFFIX, '-step')}-s{seed}"


def record_path(args: Options, variant: str, seed: int) -> Path:
    return args.records / f"{run_path(args, variant, seed).name}.json.gz"


def finished(args: Options, variant: str, seed: int) -> bool:
    """The run is done with this command's options (by another sitting or machine too)."""
    return recorded(args, variant, seed) or trained(args, variant, seed)


def recorded(args: Options, variant: str, seed: int) -> bool:
    """A record of this run, made with this command's options (the starting model compared by its path inside its
    checkout, so that a record made in another clone counts), is in the records' folder."""
    from baselines.reward_analysis import read_record

    path = record_path(args, variant, seed)
    if not path.is_file():
        return False
    if not isinstance(saved := read_record(path).get("options"), dict):
        raise SystemExit(f"{path}: a record needs its run's 'options' (a JSON object); fix or delete it")
    now = run_options(args, variant, seed)
    same_budget = (saved.get("steps"), saved.get("max_minutes", 0.0)) == (now.steps, now.max_minutes)
    same_model = portable(saved.get("model", "")) == portable(now.model)
    return same_budget and same_model and not dataclass_cli.changed_options(saved, now, (*RESUMABLE_CHANGES, "model"))


def portable(path: str) -> str:
    """A model path with the checkout's own location taken off (``baselines/checkpoints/<name>`` in every clone)."""
    marker = os.sep + os.path.join("baselines", "checkpoints") + os.sep
    return "baselines/checkpoints/" + path.split(marker, 1)[1] if marker in path else path


def trained(args: Options, variant: str, seed: int) -> bool:
    """The run's directory holds a run of this command's options finished at ``args.steps`` (or by the time limit)."""
    path = run_path(args, variant, seed)
    summary, saved = read_options(path, "summary.json"), read_options(path)  # one error naming a damaged file
    if summary is None or saved is None:
        return False
    if not (summary.get("last", {}).get("step") == args.steps or (args.max_minutes and summary.get("stopped_by_time_limit"))):
        return False
    return not dataclass_cli.changed_options(saved, run_options(args, variant, seed), RESUMABLE_CHANGES)


def check_run_options(args: Options) -> None:
    """Every variant's ``llm_grpo.py`` command checked before any run starts: one message, not one failed run a seed."""
    s, prog = max(args.seed_list), "compare_llm_rewards.py"  # the largest seed: llm_grpo.py's range is [0, 2**31)
    for v in args.variants:
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # llm_grpo.py's usage error: said once, below, as this one's
                opts = run_options(args, v, s)
        except SystemExit as exc:
            if exc.code in (0, None):
                raise
            why = exc.code if isinstance(exc.code, str) else getattr(exc, "message", "the error above")  # UsageError
            dataclass_cli.usage_error(f"the runs of variant {v!r} would be refused: {why}", prog=prog)
        if (opts.rewards, opts.step_credit, opts.seed, opts.steps, opts.output_dir) != (
                v.removesuffix(STEP_SUFFIX), v.endswith(STEP_SUFFIX), s, args.steps, str(run_path(args, v, s))):
            dataclass_cli.usage_error("--extra-args must not set --rewards, --step-credit, --seed, --steps or --output-dir: "
                                      "the comparison sets them for each run", prog=prog)


def launch_all(args: Options, runs: list[tuple[str, int]]) -> bool:
    """Run every unfinished (variant, seed), ``args.jobs`` at a time; logs in ``<run>/stdout.log``. Returns False when
    Ctrl-C stopped them (each running one saved a checkpoint: the same command resumes it)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    todo = [(v, s) for v, s in runs if not finished(args, v, s)]

    def started(i: int) -> None:
        path = run_path(args, *todo[i])
        path.mkdir(parents=True, exist_ok=True)
        start = Path(args.runs_dir) / START_FILE
        if start.is_file() and not (path / "held_out.json").exists():  # the start, played once for every run
            shutil.copyfile(start, path / "held_out.json")

    commands = [(run_command(args, v, s), run_path(args, v, s) / "stdout.log") for v, s in todo]
    return not run_named(commands, [run_path(args, v, s).name for v, s in todo], args.jobs, started=started, env=env,
                         done=lambda i: print(f"record: {write_run_record(args, *todo[i])}", flush=True))


START_FILE = "start_held_out.json"


def play_start(args: Options) -> None:
    """Play the starting model on the test problems once, as every run would at its start, and keep the outcomes in
    ``<runs-dir>/start_held_out.json`` (each run reads them back: ``HeldOutTest.start``)."""
    from baselines.lm.grpo_options import GRPORun

    path = Path(args.runs_dir) / START_FILE
    if path.is_file():
        return
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from baselines.lm.grpo_data import run_problems, trainer_prompts
    from baselines.lm.grpo_model import load_model_and_tokenizer
    from baselines.lm.held_out import held_out_test

    torch.set_num_threads(1)  # as the runs play it
    plan = GRPORun.of(run_options(args, args.variants[0], args.seed_list[0]))
    model, tok = load_model_and_tokenizer(plan.model)
    print(f"test: the starting model plays {args.test_problems or 'all'} test problems once for every run", flush=True)
    problems = run_problems(plan).test
    held_out_test(plan, tok, path, problems, None if plan.turns else trainer_prompts(plan, problems, tok)).start(model)


def write_run_record(args: Options, variant: str, seed: int) -> Path:
    from baselines.reward_analysis import write_record

    return write_record(record_path(args, variant, seed), run_record(run_path(args, variant, seed)))


def plot(args: Options, runs: list[tuple[str, int]] | None = None) -> Path:
    """``<name>.png`` from the runs' ``metrics.csv`` (``runs`` None: redrawn from its ``<name>_curves.csv``)."""
    from baselines.analysis.reward_curves import draw

    logs = None if runs is None else [(v, s, run_path(args, v, s) / "metrics.csv") for v, s in runs]
    return draw(Path(args.results_dir) / f"{args.name}.png", logs, "step", "greedy_success", 100,
                title=f"GRPO on Countdown ({args.interaction}): validation success by reward", xlabel="GRPO step",
                ylabel=f"greedy success (%), {args.eval_problems} validation problems", spread="se")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot:
        print(f"wrote {plot(args)}")
        return 0
    from baselines.reward_analysis import write_page

    runs = [(v, s) for s in args.seed_list for v in args.variants]
    check_run_options(args)
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)
    if not all(finished(args, v, s) for v, s in runs):
        play_start(args)
    for v, s in runs:  # runs finished by an earlier call whose record is missing
        if not record_path(args, v, s).is_file() and trained(args, v, s):
            write_run_record(args, v, s)
    if not launch_all(args, runs):
        return dataclass_cli.EXIT_INTERRUPTED
    plot(args, runs)
    print(write_page(args.page, args.records))
    print(f"records in {args.records}; page {args.page}")
    return 0


if __name__ == "__main__":
    dataclass_cli.run_script(main)
