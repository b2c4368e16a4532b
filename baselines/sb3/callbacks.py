"""The SB3 side of ``sb3_ppo.py``'s runs: its logger (:func:`training_logger`), the validation curve
(:class:`ValidationCurve`), the Ctrl-C stop (:class:`StopAfterUpdate`) and whole checkpoints (:func:`save_atomic`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback

from countdown_gym.dataclass_cli import written_aside
from countdown_gym.runkit.runs import MetricsLog, Panel, StopRequest


def save_atomic(model: Any, path: Path) -> Path:
    """``model.save`` to ``<path>.tmp``, then renamed to ``path``: a kill mid-save never leaves a torn zip. A folder at
    ``path`` (where no file can be saved) exits naming it."""
    if not path.is_symlink() and path.is_dir():
        raise SystemExit(f"cannot save {path}: it is a folder; remove it (--resume continues from the newest checkpoint)")
    with written_aside(path) as tmp, open(tmp, "wb") as f:
        model.save(f)
        f.flush()
        os.fsync(f.fileno())
    return path


class AtomicCheckpoints(CheckpointCallback):
    """SB3's ``CheckpointCallback`` with each ``model_N_steps.zip`` written by :func:`save_atomic`."""

    def _on_step(self) -> bool:
        if self.n_calls % self.save_freq == 0:
            save_atomic(self.model, Path(self._checkpoint_path(extension="zip")))
        return True


def training_logger(folder: Path, resume: bool, report_to: str = "tensorboard", config: dict | None = None) -> Any:
    """SB3 logger to ``progress.csv`` and the ``--report-to`` integrations (TensorBoard by SB3's own writer, in
    ``folder``; the others through :class:`countdown_gym.runkit.tracking.Tracker`); on resume the CSV is
    continued, not overwritten."""
    from stable_baselines3.common.logger import CSVOutputFormat, KVWriter, Logger, make_output_format

    from countdown_gym.runkit.tracking import TENSORBOARD, Tracker, report_to_names

    class TrackerOutput(KVWriter):
        def __init__(self, names: list[str]) -> None:
            self.tracker = Tracker(names, folder, config=config)

        def write(self, key_values: dict, key_excluded: dict, step: int = 0) -> None:
            self.tracker.log({k.replace("/", "_", 1) if k.startswith("eval/") else k: v for k, v in key_values.items()}, step)

        def close(self) -> None:
            self.tracker.close()

    class ContinuedCSV(CSVOutputFormat):
        def __init__(self, filename: Path) -> None:
            if not (resume and filename.exists() and filename.stat().st_size):
                super().__init__(str(filename))
                return
            self.file = filename.open("r+")
            self.keys = self.file.readline().rstrip("\n").split(",")
            self.separator, self.quotechar = ",", '"'
            self.file.seek(0, 2)

    folder.mkdir(parents=True, exist_ok=True)
    names = report_to_names(report_to)
    outputs = [ContinuedCSV(folder / "progress.csv")]
    if TENSORBOARD in names:
        outputs.append(make_output_format("tensorboard", str(folder)))
    if [n for n in names if n != TENSORBOARD]:
        outputs.append(TrackerOutput([n for n in names if n != TENSORBOARD]))
    return Logger(str(folder), outputs)


class ValidationCurve(BaseCallback):
    """Every ``eval_every`` steps (0: never): ``evaluate(model)`` (a success rate) as a row of ``curve`` with the
    training seconds of the whole run so far, ``curve.png`` beside it, and ``eval/validation_success`` logged."""

    def __init__(self, evaluate: Callable[[Any], float], curve: MetricsLog, eval_every: int, start_steps: int) -> None:
        super().__init__()
        self.evaluate, self.curve, self.every = evaluate, curve, eval_every or 1 << 62
        self.next_eval = (start_steps // self.every + 1) * self.every
        self.eval_seconds = 0.0
        self.t0 = time.time()

    def _on_training_start(self) -> None:
        rows = self.curve.rows  # a resumed run's seconds continue from the kept rows' (training time of the whole run)
        self.t0 = time.time() - (float(rows[-1]["seconds"]) if rows else 0.0)

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_eval:
            t = time.time()
            rate = self.evaluate(self.model)
            self.eval_seconds += time.time() - t
            self.curve.append({"steps": self.num_timesteps, "validation_success": round(rate, 4),
                               "seconds": round(time.time() - self.t0, 1)})
            panel = Panel("validation success", {"validation_success": "greedy"}, percent=True, ylim=(0, 100))
            self.curve.plot(self.curve.path.with_suffix(".png"), (panel,), xlabel="environment steps")
            self.logger.record("eval/validation_success", rate)  # written with the rollout's metrics
            self.next_eval += self.every
        return True


class StopAfterUpdate(BaseCallback):
    """Ctrl-C / SIGTERM (``stop``): finish the rollout being collected and its update, then stop before the next
    rollout."""

    def __init__(self, stop: StopRequest) -> None:
        super().__init__()
        self.stop = stop
        self.fresh = True

    def _on_rollout_start(self) -> None:
        self.fresh = True

    def _on_step(self) -> bool:
        if self.fresh and self.stop.requested:
            return False
        self.fresh = False
        return True
