"""What both critic training scripts share (``critics.train``, ``critics.train_text``): the common options, the run
directory, the learning-rate schedule, the training loop (logging, checkpoints, ``--time-limit``, Ctrl-C) and
the command line."""

from __future__ import annotations

import json
import math
import random
import shlex
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from tqdm import tqdm

from countdown_gym import dataclass_cli
from countdown_gym.data.splits import SPLIT_SPEC
from countdown_gym.dataclass_cli import EXIT_INTERRUPTED
from countdown_gym.runkit.runs import MetricsLog, StopRequest, prepare_run
from critics.models import ConfigDict


@dataclass
class CommonTrainOptions(ConfigDict):
    """The options of every critic training run (each field is a flag)."""

    preset: str = "longproc-0.5k"  # preset whose train split (and rules) the critic learns from
    hindsight: float = 0.5  # fraction of V2 rows whose goal is a value reached below the state
    dead_per_row: int = 2  # dead-end states (same trace) per own-target row for the goal -> state term
    dead_same_size: float = 0.5  # fraction of them with the row's state size (the rest: any dead-end line)
    hard_weight: float = 1.0  # weight of the goal -> state term (0 = plain InfoNCE)
    # optimisation
    steps: int = 6000
    time_limit: float = 0.0  # minutes of wall time for the whole invocation (data included); 0 = none
    batch_size: int = 256
    lr: float = 2e-3
    weight_decay: float = 1e-4
    warmup: int = 300  # steps of linear warm-up, then a cosine decay to 5% of --lr
    grad_clip: float = 1.0  # gradient norm clip (0 = none)
    seed: int = 0
    threads: int = 1  # torch threads
    # bookkeeping
    out: str = "runs/critic-v2"  # the run directory (checkpoint, log.jsonl, options.json, plots)
    checkpoint_every: int = 1000
    log_every: int = 50  # a log.jsonl row (the means since the last row) every this many steps

    def __post_init__(self) -> None:
        dataclass_cli.check_min(self, 1, "steps", "batch_size", "checkpoint_every", "log_every", "threads")
        dataclass_cli.check_min(self, 0, "warmup", "time_limit", "weight_decay", "dead_per_row", "lr", "seed")
        dataclass_cli.check_choice(self, "preset", sorted(SPLIT_SPEC))
        for name in ("hindsight", "dead_same_size"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(self, name)}")


def start_run(cfg: CommonTrainOptions, *, markers: Collection[str], resume: bool = False, resuming: bool = False,
              may_change: Collection[str] = (), resumable: bool = True) -> tuple[Path, np.random.Generator]:
    """Seed ``random``, torch and the returned numpy generator, set torch's threads and prepare ``cfg.out``
    (:func:`~countdown_gym.runkit.runs.prepare_run`; ``markers``: the files that show it keeps a run)."""
    torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    out = prepare_run(cfg.out, "--out", cfg, resume=resume, resuming=resuming, may_change=may_change,
                      markers=("log.jsonl", *markers), resumable=resumable)
    return out, rng


def lr_factor(step: int, warmup: int, steps: int) -> float:
    """The learning rate of ``step`` as a fraction of the base: linear warm-up, then a cosine decay to 0.05."""
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(steps - warmup, 1)
    return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))


@dataclass
class Progress:
    """Where a run stands; a checkpoint keeps it, so that a resumed run logs and times as if it never stopped."""

    step: int  # steps done
    end: int  # where this invocation stops (--steps, or earlier: --stop-after, the time limit, Ctrl-C)
    t_start: float  # time.perf_counter() when this invocation started (--time-limit counts from it)
    t0: float  # time.perf_counter() minus the training time of the steps done
    sums: dict[str, float] = field(default_factory=dict)  # the logged values summed since the last log row
    count: int = 0  # steps since the last log row
    stopped: str = ""  # "time_limit" or "ctrl_c" when the loop ended before `end`

    def train_seconds(self) -> float:  # of the steps done, earlier invocations included
        return time.perf_counter() - self.t0


LossFn = Callable[[], tuple[torch.Tensor, dict[str, float]]]  # one batch's loss and the values it logs


def run_steps(cfg: CommonTrainOptions, model: torch.nn.Module, optim: torch.optim.Optimizer, loss_fn: LossFn,
              run: Progress, log: MetricsLog, save: Callable[[Progress], None], *, base_lrs: Sequence[float],
              stop: StopRequest, tracker: Any = None, desc: str = "critic", progress: bool = True) -> None:
    """Train from ``run.step`` to ``run.end`` (group ``i``'s learning rate ``base_lrs[i] * lr_factor(step)``), logging
    every ``log_every`` steps and calling ``save(run)`` every ``checkpoint_every``; the time limit or Ctrl-C ends the
    loop after the step (``run.end`` set to it, ``run.stopped`` saying why). The model is left in eval mode."""
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    bar = tqdm(range(run.step, run.end), initial=run.step, total=cfg.steps, desc=desc, disable=not progress)
    for step in bar:
        factor = lr_factor(step, cfg.warmup, cfg.steps)
        for group, base in zip(optim.param_groups, base_lrs, strict=True):
            group["lr"] = base * factor
        loss, info = loss_fn()
        optim.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optim.step()
        run.step = step + 1
        for k, v in {"loss": loss.item(), **info}.items():
            run.sums[k] = run.sums.get(k, 0.0) + v
        run.count += 1
        if run.step % cfg.log_every == 0 or run.step == cfg.steps:
            row = {"step": run.step, **{k: v / run.count for k, v in run.sums.items()}, "lr": base_lrs[0] * factor,
                   "seconds": round(run.train_seconds(), 1)}
            log.append(row)
            if tracker is not None:
                tracker.log({k: v for k, v in row.items() if k not in ("step", "seconds")}, run.step)
            bar.set_postfix({k: f"{row[k]:.3f}" for k in ("loss", "acc", "hard_acc") if k in row})
            run.sums, run.count = {}, 0
        if run.step == run.end:
            break
        if cfg.time_limit > 0 and time.perf_counter() - run.t_start > 60 * cfg.time_limit:
            run.stopped = "time_limit"
        elif stop.requested:
            run.stopped = "ctrl_c"
        elif run.step % cfg.checkpoint_every == 0:
            model.eval()
            save(run)
            model.train()
        if run.stopped:
            run.end = run.step
            break
    bar.close()
    model.eval()


def command_line(prog: str) -> str:
    """The command that started this process, for a checkpoint's record (``python -m critics.train ...``)."""
    return f"python -m {prog} " + shlex.join(sys.argv[1:])


Options = TypeVar("Options", bound=CommonTrainOptions)


def main(options: type[Options], train: Callable[[Options], Path], argv: Sequence[str] | None, *, prog: str,
         description: str, resumable: bool) -> None:
    """Parse ``argv``, ``train`` and print a summary; a run stopped by Ctrl-C exits with 130."""
    cfg = dataclass_cli.parse(options, argv, prog=f"python -m {prog}", description=description)
    try:
        out = train(cfg)
    except ValueError as e:  # e.g. a preset whose problems hold more numbers than the critic takes
        raise SystemExit(f"error: {e}") from None
    meta = json.loads((out / "config.json").read_text())
    if "stopped_by_ctrl_c_at_step" in meta:
        then = "continues with --resume" if resumable else "holds the weights of that step"
        print(f"stopped by Ctrl-C at step {meta['step']}; the checkpoint in {out} {then}")
        raise SystemExit(EXIT_INTERRUPTED)
    print(f"done: {meta['step']} steps x batch {cfg.batch_size}: {meta['train_seconds']} s of training, "
          f"{meta.get('total_seconds', '?')} s in all (data {meta['data_seconds']} s) "
          f"({meta['parameters']:,} parameters); checkpoint in {out}")
