"""What both critic training scripts share (``critics.train``, ``critics.train_text``): the common options, the run
directory, the learning-rate schedule, the training loop (logging, checkpoints, ``--time-limit``, Ctrl-C), the
resumable checkpoint (``--resume``, ``previous/``) and the command line."""

from __future__ import annotations

import json
import math
import os
import random
import shlex
import shutil
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
from countdown_gym.dataclass_cli import EXIT_INTERRUPTED, not_regular, written_aside
from countdown_gym.runkit.runs import (
    OPTIONS_FILE,
    MetricsLog,
    StopRequest,
    hold_directory,
    holds_run,
    prepare_run,
    write_text_atomic,
)
from critics.models import CheckpointError, ConfigDict


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
    stop_after: int = 0  # end this invocation after this many total steps (0 = at --steps); continue with --resume
    resume: bool = False  # continue the run in --out from its newest complete checkpoint (docs/runs.md)

    def __post_init__(self) -> None:
        dataclass_cli.check_min(self, 1, "steps", "batch_size", "checkpoint_every", "log_every", "threads")
        dataclass_cli.check_min(self, 0, "warmup", "time_limit", "weight_decay", "dead_per_row", "lr", "seed",
                                "stop_after")
        dataclass_cli.check_choice(self, "preset", sorted(SPLIT_SPEC))
        for name in ("hindsight", "dead_same_size"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(self, name)}")

    def end_step(self) -> int:
        """Where this invocation stops: ``--steps``, or ``--stop-after`` when it comes first."""
        return min(self.steps, self.stop_after) if self.stop_after > 0 else self.steps


CHECKPOINT_FILES = ("model.safetensors", "config.json", "train_state.pt")
"""What ``--resume`` reads in ``--out``: the weights and ``config.json`` (both carry the step) and the training state."""
PREVIOUS = "previous"
"""The checkpoint before the last one, kept in ``<out>/previous/`` until the next save is complete."""
RESUME_FREE_FIELDS = frozenset({"out", "resume", "stop_after", "time_limit", "threads", "checkpoint_every", "log_every"})
"""The common options a resumed run may change: they do not change the weights."""


def will_resume(cfg: CommonTrainOptions) -> bool:
    """Whether ``--resume`` has a checkpoint to continue in ``cfg.out``; exits when the directory holds no run at all."""
    out = Path(cfg.out)
    resuming = cfg.resume and any((d / "train_state.pt").exists() for d in (out, out / PREVIOUS))
    if cfg.resume and not resuming and not holds_run(out, (OPTIONS_FILE, "log.jsonl")):
        raise SystemExit(f"error: --resume: {out / 'train_state.pt'} not found (no earlier run in {cfg.out})")
    return resuming


def start_run(cfg: CommonTrainOptions, *, resuming: bool,
              may_change: Collection[str] = RESUME_FREE_FIELDS) -> tuple[Path, np.random.Generator]:
    """Seed ``random``, torch and the returned numpy generator, set torch's threads and prepare ``cfg.out``
    (:func:`~countdown_gym.runkit.runs.prepare_run`; ``resuming``: :func:`will_resume`). Its ``options.json`` is
    written when training starts (:func:`restore`): a start that fails before (a bad ``--lm``) blocks no fresh start."""
    torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    out = prepare_run(cfg.out, "--out", cfg, resume=cfg.resume, resuming=resuming, may_change=may_change,
                      markers=("log.jsonl", *CHECKPOINT_FILES), write=False)
    hold_directory(out, "use another --out")
    if cfg.resume and not resuming:  # said once prepare_run has let it start afresh (not over another script's run)
        if (out / "model.safetensors").exists():  # weights without the optimizer, step and random states
            print(f"--resume: {cfg.out} has model.safetensors but no train_state.pt (nor previous/): not a checkpoint "
                  "that can be continued (a first save cut short?); discarding those weights and starting afresh")
        else:
            print(f"--resume: no checkpoint in {cfg.out} yet, starting afresh")
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
    earlier: float = 0.0  # the wall time of the run's earlier invocations

    def train_seconds(self) -> float:  # of the steps done, earlier invocations included
        return time.perf_counter() - self.t0

    def total_seconds(self) -> float:  # wall time of every invocation of the run
        return self.earlier + time.perf_counter() - self.t_start


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


def _keep_previous(out: Path) -> None:
    """Hard-link (or copy) the current checkpoint into ``<out>/previous/`` before it is overwritten."""
    if not all((out / f).is_file() for f in CHECKPOINT_FILES):
        return
    with written_aside(out / PREVIOUS) as staging:  # previous.tmp, then renamed over the old previous/
        staging.mkdir()
        for f in CHECKPOINT_FILES:
            try:
                os.link(out / f, staging / f)  # the new save replaces the names, so the linked files stay as they are
            except OSError:
                shutil.copy2(out / f, staging / f)


def write_checkpoint(out: Path, write_model: Callable[[], Any], optim: torch.optim.Optimizer, run: Progress,
                     rng: np.random.Generator, elapsed: float) -> None:
    """The checkpoint at ``run.step``: the one before kept in ``previous/``, ``write_model()`` (weights and
    ``config.json``, both carrying the step), then ``train_state.pt``, all a resumed run needs to go on unbroken."""
    _keep_previous(out)
    write_model()
    sums = dict(run.sums)
    with written_aside(out / "train_state.pt") as tmp:  # whole or not at all; its step is checked on resume
        torch.save(
            {"optimizer": optim.state_dict(), "step": run.step, "numpy_rng": rng.bit_generator.state,
             "torch_rng": torch.get_rng_state(), "python_rng": random.getstate(), "elapsed": elapsed,
             "log_accumulator": (sums.pop("loss", 0.0), sums, run.count),
             "total_elapsed": run.total_seconds()},
            tmp,
        )


class TornCheckpoint(SystemExit):
    """A checkpoint left unreadable or mixed by an interrupted save (``--resume`` then uses ``previous/``)."""


Loader = Callable[[Path], tuple[torch.nn.Module, dict[str, Any]]]
"""Reads the weights and ``config.json`` of a checkpoint directory; :class:`~critics.CheckpointError` if they do not."""


def _resume_from(d: Path, load: Loader, cfg: CommonTrainOptions) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The checkpoint and ``train_state.pt`` in ``d``; exits if ``cfg`` cannot continue it."""
    try:
        loaded, meta = load(d)
    except CheckpointError as e:
        raise TornCheckpoint(f"error: --resume: {e}") from None
    if (kind := not_regular(d / "train_state.pt")) is not None:  # a FIFO or a device: never opened (torch.load would block)
        raise TornCheckpoint(f"error: --resume: {d / 'train_state.pt'} is {kind}, not a regular file")
    try:
        st = torch.load(d / "train_state.pt", weights_only=False)
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file: say which one
        raise TornCheckpoint(f"error: --resume: {d / 'train_state.pt'} is not readable ({type(e).__name__}: {e})") from None
    if st.get("step") != meta.get("step"):
        raise TornCheckpoint(f"error: --resume: {d / 'model.safetensors'} is from step {meta.get('step')} but "
                             f"train_state.pt from step {st.get('step')} (interrupted while saving?); the run "
                             "cannot be continued exactly")
    if st["step"] > cfg.end_step():
        raise SystemExit(f"error: --resume: {d} is already at step {st['step']}, past --stop-after {cfg.stop_after}")
    return loaded, st


def resume(out: Path, load: Loader, cfg: CommonTrainOptions) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``(model, train state)`` of the last checkpoint in ``out``, or of ``previous/`` when the last save was interrupted
    (or one of its files is not a regular file: a FIFO or a device is never opened; a folder, where the next save goes,
    exits)."""
    for f in CHECKPOINT_FILES:
        if not_regular(out / f) == "a folder":
            raise SystemExit(f"error: --resume: {out / f} is a folder, where the run saves its checkpoint; remove it and "
                             f"resume again (from {out / PREVIOUS} if the rest of the checkpoint is gone)")
    try:
        loaded, st = _resume_from(out, load, cfg)
        print(f"resumed from {out} at step {st['step']}")
        return loaded, st
    except TornCheckpoint as exc:
        if not (out / PREVIOUS / "config.json").is_file():
            raise
        loaded, st = _resume_from(out / PREVIOUS, load, cfg)
        for f in CHECKPOINT_FILES:  # beside it, then renamed: a FIFO or a link there is replaced, never written through
            with written_aside(out / f) as tmp:
                shutil.copy2(out / PREVIOUS / f, tmp)
        print(f"--resume: the last checkpoint is unusable ({exc}); resumed from {out / PREVIOUS} at step {st['step']}")
        return loaded, st


def restore(cfg: CommonTrainOptions, out: Path, model: torch.nn.Module, optim: torch.optim.Optimizer,
            rng: np.random.Generator, t_start: float, resumed: tuple[Any, dict] | None) -> tuple[Progress, MetricsLog]:
    """The run's :class:`Progress` and its ``log.jsonl``: a fresh run's, or one that puts :func:`resume`'s checkpoint
    (``resumed``) into ``model``, ``optim``, ``rng`` and the global random states (the log's rows after it: redone).
    Training starts: ``cfg`` is written to ``options.json``."""
    write_text_atomic(out / OPTIONS_FILE, json.dumps(cfg.to_dict(), indent=2, default=str) + "\n")
    if resumed is None:
        return Progress(0, cfg.end_step(), t_start, time.perf_counter()), MetricsLog(out / "log.jsonl")
    loaded, st = resumed
    if loaded is not model:  # the text critic's loader reads the weights into the model itself
        model.load_state_dict(loaded.state_dict())
    optim.load_state_dict(st["optimizer"])
    rng.bit_generator.state = st["numpy_rng"]
    torch.set_rng_state(st["torch_rng"])
    if "python_rng" in st:  # absent from older checkpoints
        random.setstate(st["python_rng"])
    elapsed = st.get("elapsed", 0.0)
    earlier = st.get("total_elapsed", elapsed)  # the wall time of the earlier invocations (train time: older runs)
    loss_sum, sums, count = st.get("log_accumulator", (0.0, {}, 0))
    sums = {"loss": loss_sum, **sums} if count else {}
    run = Progress(st["step"], cfg.end_step(), t_start, time.perf_counter() - elapsed, sums, count, earlier=earlier)
    return run, MetricsLog(out / "log.jsonl", resume_step=run.step)


def saved_to_resume(cfg: CommonTrainOptions, run: Progress, extra: dict[str, Any], save: Callable[[Progress], None]) -> bool:
    """After the loop: note in ``extra`` why it stopped early; if it stopped before ``--steps`` but not by the time
    limit (``--stop-after``, Ctrl-C), ``save(run)`` (a checkpoint ``--resume`` continues) and True."""
    if run.stopped:
        extra[f"stopped_by_{run.stopped}_at_step"] = run.end
    if run.end < cfg.steps and run.stopped != "time_limit":
        save(run)
        return True
    return False


def command_line(prog: str) -> str:
    """The command that started this process, for a checkpoint's record (``python -m critics.train ...``)."""
    return f"python -m {prog} " + shlex.join(sys.argv[1:])


Options = TypeVar("Options", bound=CommonTrainOptions)


def main(options: type[Options], train: Callable[[Options], Path], argv: Sequence[str] | None, *, prog: str,
         description: str) -> None:
    """Parse ``argv``, ``train`` and print a summary; a run stopped by Ctrl-C exits with 130."""
    cfg = dataclass_cli.parse(options, argv, prog=f"python -m {prog}", description=description)
    try:
        out = train(cfg)
    except ValueError as e:  # e.g. a preset whose problems hold more numbers than the critic takes
        raise SystemExit(f"error: {e}") from None
    meta = json.loads((out / "config.json").read_text())
    if "stopped_by_ctrl_c_at_step" in meta:
        print(f"stopped by Ctrl-C at step {meta['step']}; the checkpoint in {out} continues with --resume")
        raise SystemExit(EXIT_INTERRUPTED)
    print(f"done: {meta['step']} steps x batch {cfg.batch_size}: {meta['train_seconds']} s of training, "
          f"{meta.get('total_seconds', '?')} s in all (data {meta['data_seconds']} s) "
          f"({meta['parameters']:,} parameters); checkpoint in {out}")
