"""Trainer callbacks of a GRPO run: validation (``metrics.csv``, ``train_log.jsonl``, ``success.png``, ``best/``),
CLIPO head checkpoints, stop requests, the time limit, the run card, and :class:`StepProfile`: where a step's time
goes (generation, rewards, TRL's log-prob pass, the loss's forward, and the rest: backward, update, book-keeping)."""

from __future__ import annotations

import functools
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from baselines.lm.evaluation import Play, evaluate
from baselines.lm.generation import Sampling
from baselines.lm.tiny_lm import save_pretrained
from countdown_gym.dataclass_cli import written_aside
from countdown_gym.runkit.runs import MetricsLog, Panel, read_options, write_text_atomic

EVAL_FIELDS = ("step", "problems", "greedy_success", "greedy_invalid_frac", "sampled_success", "pass_at_k", "samples",
               "sampled_invalid_frac", "mean_completion_tokens", "eval_seconds", "tokens_per_s")

SUCCESS_PANELS = (Panel("validation success", {"greedy_success": "greedy", "sampled_success": "sampled (mean)",
                                                 "pass_at_k": "pass@k"}, percent=True),)
"""``success.png``: validation success vs GRPO step (greedy, sampled, pass@k when present)."""


class ValidationCallback(TrainerCallback):
    """Validate at the start, every ``eval_interval`` steps and at the end (``baselines.lm.evaluation``: greedy, and
    ``samples`` drawn as ``sampling`` says); write CSV/PNG. A validation whose greedy success beats every
    earlier one saves the model to ``output_dir/best`` with ``best/validation.json``."""

    BEST_DIR = "best"

    def __init__(self, problems: Sequence[Any], prompts: Sequence[Any], tokenizer: Any, output_dir: str | Path, *,
                 how: Play | None = None, eval_interval: int = 20, samples: int = 4, sampling: Sampling | None = None,
                 seed: int = 0, verbose: bool = True, resume_step: int | None = None, write: bool = True) -> None:
        """``how``: how the model plays (``GRPORun.eval_play``; single-pass plays ``prompts``); ``resume_step``: the logs
        drop their rows after it; ``write``: this process writes the files."""
        self.problems, self.prompts, self.tokenizer, self.how = list(problems), list(prompts), tokenizer, how or Play()
        self.dir, self.sampling, self.eval_interval, self.samples = Path(output_dir), sampling or Sampling(), eval_interval, samples
        self.seed, self.verbose = seed, verbose
        self.metrics = MetricsLog(self.dir / "metrics.csv", resume_step=resume_step, write=write)
        self.train_log = MetricsLog(self.dir / "train_log.jsonl", resume_step=resume_step, write=write)
        self.rows: list[dict[str, Any]] = self.metrics.rows
        self.evaluated: set[int] = {int(r["step"]) for r in self.rows}
        """Steps validated so far, on every process (only the main process keeps ``rows``)."""
        self.since = 0
        """The first row :meth:`best` compares: a resumed run whose ``best/`` holds the model of a validation after
        ``resume_step`` (dropped from the log, redone) compares only its own rows, so that ``best/`` is replaced."""
        saved = read_options(self.dir / self.BEST_DIR, "validation.json") if resume_step is not None else None
        if saved is not None and type(saved.get("step")) is not int:  # one error naming a damaged file
            raise SystemExit(f"{self.dir / self.BEST_DIR / 'validation.json'} names no validation step; fix or delete it")
        if saved is not None and saved["step"] > resume_step:
            self.since = len(self.rows)
        self.step_gen_tokens: list[float] = []
        self.reporters: Sequence[Any] = ()
        """The report_to integration callbacks each validation row is logged to (:func:`attach_reporting`)."""

    def _evaluate(self, model: Any, step: int, event: tuple[Any, Any, Any] | None = None) -> None:
        from accelerate import PartialState
        from accelerate.utils import gather_object

        if step in self.evaluated:  # the same answer on every process, or the gather below would hang
            return
        self.evaluated.add(step)
        state = PartialState()
        idx = list(range(state.process_index, len(self.problems), state.num_processes))
        part = evaluate(model, self.tokenizer, [self.problems[i] for i in idx], self.how,
                        prompts=None if self.how.max_turns is not None else [self.prompts[i] for i in idx],
                        samples=self.samples, sampling=self.sampling, seed=self.seed + step).row()
        parts = gather_object([part]) if state.num_processes > 1 else [part]
        if not state.is_main_process:
            return
        row = {"step": step, **_merge(parts)}
        self.metrics.append({k: row[k] for k in EVAL_FIELDS if k in row})
        self.metrics.plot(self.dir / "success.png", SUCCESS_PANELS, xlabel="GRPO step", title=f"GRPO validation ({self.dir.name})")
        if event is not None:
            logs = {f"eval_{k}": float(v) for k, v in row.items() if k != "step" and isinstance(v, (int, float))}
            for cb in self.reporters:
                cb.on_log(*event, logs=logs)
        if self.best() is self.rows[-1]:
            with written_aside(self.dir / self.BEST_DIR) as best:  # the new best whole, or the one before
                save_pretrained(model, self.tokenizer, best)
                (best / "validation.json").write_text(json.dumps(row, indent=2) + "\n")
        if self.verbose:
            extra = f", sampled {row['sampled_success']:.1%}, pass@{self.samples} {row['pass_at_k']:.1%}" if self.samples else ""
            print(
                f"[step {step}] validation ({row['problems']} problems): greedy {row['greedy_success']:.1%}{extra}; "
                f"{row['tokens_per_s']:.0f} generated tokens/s",
                flush=True,
            )

    def best(self) -> dict[str, Any] | None:
        """The row of the saved best model: highest greedy success, earliest on ties (None before any validation
        since :attr:`since`)."""
        if len(self.rows) <= self.since:
            return None
        return max(self.rows[self.since:], key=lambda r: (float(r["greedy_success"]), -int(r["step"])))

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._evaluate(model, state.global_step, (args, state, control))

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.eval_interval and state.global_step % self.eval_interval == 0:
            self._evaluate(model, state.global_step, (args, state, control))

    on_train_end = on_train_begin

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        if "completions/mean_length" in logs:  # TRL's mean over the step's whole generation batch
            batch = args.per_device_train_batch_size * args.world_size * args.steps_per_generation
            self.step_gen_tokens.append(float(logs["completions/mean_length"]) * batch)
        self.train_log.append({"step": state.global_step, **logs})

    def summary(self, profile: StepProfile | None = None) -> dict[str, Any]:
        """First and last validation rows; seconds per step (``profile``: the run's step timing) and generation
        throughput."""
        out: dict[str, Any] = {}
        if self.rows:
            out["first"], out["last"] = _numeric(self.rows[0]), _numeric(self.rows[-1])
            out["best"] = _numeric(self.best() or {})
            out["eval_tokens_per_s"] = sum(float(r["tokens_per_s"]) for r in self.rows) / len(self.rows)
        if profile is not None and profile.steps:
            out["steps_timed"] = profile.steps
            out["seconds_per_step"] = profile.totals["step"] / profile.steps
            if self.step_gen_tokens:
                out["rollout_tokens_per_step"] = sum(self.step_gen_tokens) / len(self.step_gen_tokens)
                out["rollout_tokens_per_s_of_step"] = out["rollout_tokens_per_step"] / out["seconds_per_step"]
        return out


def _merge(parts: Sequence[dict[str, float]]) -> dict[str, Any]:
    n = sum(p["problems"] for p in parts)
    row: dict[str, Any] = {"problems": n, "samples": parts[0]["samples"]}
    for key in ("greedy_success", "greedy_invalid_frac", "sampled_success", "pass_at_k", "sampled_invalid_frac", "mean_completion_tokens"):
        if key in parts[0]:
            row[key] = sum(p[key] * p["problems"] for p in parts) / max(n, 1)
    row["eval_seconds"] = max(p["eval_seconds"] for p in parts)
    row["tokens_per_s"] = sum(p["generated_tokens"] for p in parts) / max(row["eval_seconds"], 1e-9)
    return row


def _numeric(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        try:
            out[k] = int(v) if k in ("step", "problems", "samples") else float(v)
        except (TypeError, ValueError):
            out[k] = v
    return out


def attach_reporting(trainer: Any, validation: ValidationCallback, output_dir: str | Path) -> None:
    """Log the validation rows to the trainer's report_to integrations too; TensorBoard writes to
    ``<output_dir>/tensorboard``."""
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK, TensorBoardCallback

    from countdown_gym.runkit.tracking import TENSORBOARD_DIR

    kinds = tuple(INTEGRATION_TO_CALLBACK.values())
    validation.reporters = [cb for cb in trainer.callback_handler.callbacks if isinstance(cb, kinds)]
    for cb in validation.reporters:
        if isinstance(cb, TensorBoardCallback) and cb.logging_dir is None:
            cb.logging_dir = str(Path(output_dir) / TENSORBOARD_DIR)


class ClipoCheckpointCallback(TrainerCallback):
    """Save the CLIPO head (and its optimizer) into every checkpoint directory as ``clipo_head.pt``."""

    FILENAME = "clipo_head.pt"

    def __init__(self, clipo_trainer: Any) -> None:
        self.clipo = clipo_trainer

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self.clipo.save(Path(args.output_dir) / f"checkpoint-{state.global_step}" / self.FILENAME)


class StopRequestCallback(TrainerCallback):
    """Ctrl-C or SIGTERM (a ``runs.StopRequest``) ends training after the current step, with a checkpoint."""

    def __init__(self, stop: Any) -> None:
        self.stop = stop

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.stop.requested:
            control.should_save = True
            control.should_training_stop = True


class TimeLimitCallback(TrainerCallback):
    """End training after the first step that ends past ``minutes`` of wall time; ``stopped_at``: that step (or None)."""

    def __init__(self, minutes: float) -> None:
        self.seconds = 60.0 * minutes
        self.stopped_at: int | None = None
        self._start: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._start is not None and time.perf_counter() - self._start >= self.seconds and state.global_step < state.max_steps:
            self.stopped_at = state.global_step
            control.should_training_stop = True


class RunCardCallback(TrainerCallback):
    """Write the run directory's ``README.md`` (``render(global_step)``) at every checkpoint, after TRL's generic
    model card, and at the end."""

    def __init__(self, path: str | Path, render: Any) -> None:
        self.path, self.render = Path(path), render

    def write(self, step: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, self.render(step))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self.write(state.global_step)

    on_train_end = on_save


PARTS = ("generation", "rewards", "logprob_pass", "train_forward", "backward_update_other")
"""The parts of a step, in the order they happen."""


class StepProfile(TrainerCallback):
    """Seconds per GRPO step, by part; :meth:`attach` times the trainer's own methods on the instance (validation, after
    ``on_step_end``, is not counted)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.steps = 0
        self._current: dict[str, float] = defaultdict(float)
        self._t0: float | None = None

    def attach(self, trainer: Any) -> None:
        """Time ``trainer``'s generation, rewards and log-prob passes (bound on the instance)."""
        self._wrap(trainer, "_generate", lambda: "generation")
        self._wrap(trainer, "_calculate_rewards", lambda: "rewards")
        import torch

        self._wrap(trainer, "_get_per_token_logps_and_entropies",
                   lambda: "train_forward" if torch.is_grad_enabled() else "logprob_pass")

    def _wrap(self, trainer: Any, name: str, part_of: Any) -> None:
        method = getattr(trainer, name, None)
        if method is None:
            return  # an older or newer TRL without this method: that part is counted in the rest

        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            part = part_of()
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._current[part] += time.perf_counter() - t0

        setattr(trainer, name, timed)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._t0 is None:
            return
        total = time.perf_counter() - self._t0
        timed = sum(self._current.values())
        self._current["backward_update_other"] = max(total - timed, 0.0)
        for part, seconds in self._current.items():
            self.totals[part] += seconds
        self.totals["step"] += total
        self.steps += 1
        self._current = defaultdict(float)
        self._t0 = None

    def summary(self) -> dict[str, float]:
        """Mean seconds per step of each part and of the whole step (empty before the first step)."""
        if not self.steps:
            return {}
        return {part: self.totals.get(part, 0.0) / self.steps for part in (*PARTS, "step")}
