"""Experiment tracking for the training scripts: TensorBoard and every tracker ``transformers``' ``report_to`` knows.

    tracker = Tracker("tensorboard,wandb", out, config=asdict(cfg))   # names checked by report_to_names
    tracker.log({"loss": 0.41, "eval_success": 0.2}, step=100)         # TensorBoard tags train/loss, eval/success
    tracker.close()

``--report-to``: ``none``, ``all`` (every integration installed) or a comma-separated list of ``transformers``'
integration names. ``tensorboard`` is written through ``torch.utils.tensorboard`` (the only one without
``transformers``); for the others :class:`Tracker` drives the callbacks a ``Trainer`` would. Event files go to
``<output_dir>/tensorboard/``; ``eval_x`` is logged as ``eval/x``, anything else as ``train/x``.
"""

from __future__ import annotations

import importlib.util
import json
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

TENSORBOARD = "tensorboard"
TENSORBOARD_DIR = "tensorboard"


def _integrations() -> tuple[list[str], list[str]] | None:
    """(known, installed) integration names from ``transformers``; None without transformers."""
    try:
        from transformers.integrations.integration_utils import (
            INTEGRATION_TO_CALLBACK,
            get_available_reporting_integrations,
        )
    except ImportError:
        return None
    return sorted(INTEGRATION_TO_CALLBACK), list(get_available_reporting_integrations())


def report_to_names(report_to: str | Sequence[str]) -> list[str]:
    """The integrations ``--report-to`` names, checked: ``none`` -> [], ``all`` -> every installed one. Raises
    ``ValueError`` (its message starts with ``--report-to``) for an empty list, an unknown name or a missing package."""
    names = [n.strip() for n in (report_to.split(",") if isinstance(report_to, str) else report_to) if n.strip()]
    if not names:
        raise ValueError("--report-to must name an integration, or none")
    if names == ["none"]:
        return []
    found = None if set(names) == {TENSORBOARD} else _integrations()  # the default: no transformers import
    if found is None:  # TensorBoard alone (through torch without transformers)
        other = next((name for name in names if name != TENSORBOARD), None)
        if other is not None and names != ["all"]:
            raise ValueError(f"--report-to {other}: logged through transformers' integrations: pip install "
                             f"'countdown-gym[llm]' (without transformers only {TENSORBOARD} is available)")
        found = [TENSORBOARD], [TENSORBOARD]
    known, installed = found
    if not importlib.util.find_spec("tensorboard"):  # torch's writer needs it (transformers counts tensorboardX too)
        installed = [name for name in installed if name != TENSORBOARD]
    if names == ["all"]:
        return installed
    for name in names:
        if name not in known:
            raise ValueError(f"--report-to: unknown integration {name!r}; use none, all, or a comma-separated list of {known}")
        if name not in installed:
            hint = {"wandb": " (pip install 'countdown-gym[wandb]')", TENSORBOARD: " (pip install tensorboard)"}
            raise ValueError(f"--report-to {name}: the {name} package is not installed{hint.get(name, '')}")
    return names


class Tracker:
    """Scalars of a hand-written training loop, logged to the ``report_to`` integrations (see the module docstring)."""

    def __init__(self, report_to: str | Sequence[str], output_dir: str | Path, *,
                 config: Mapping[str, Any] | None = None, run_name: str | None = None) -> None:
        self.names = report_to_names(report_to)
        self.output_dir = Path(output_dir)
        self.tensorboard_dir = self.output_dir / TENSORBOARD_DIR
        self.config = dict(config or {})
        self.run_name = run_name or self.output_dir.name
        self._writer: Any = None
        self._callbacks: list[Any] = []
        if TENSORBOARD in self.names:  # written here, with or without transformers
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.tensorboard_dir))
            self._writer.add_text("config", f"```\n{json.dumps(self.config, indent=2, default=str)}\n```")
        if others := [name for name in self.names if name != TENSORBOARD]:
            self._start_callbacks(others)

    def _start_callbacks(self, names: list[str]) -> None:
        from transformers import TrainingArguments
        from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
        from transformers.trainer_callback import TrainerControl, TrainerState

        config = {**self.config, "output_dir": str(self.output_dir), "run_name": self.run_name}

        class ScriptArguments(TrainingArguments):  # what the trackers record as the run's config: the script's options
            def to_dict(self) -> dict[str, Any]:
                return dict(config)

        self._args = ScriptArguments(output_dir=str(self.output_dir), run_name=self.run_name, report_to=names)
        self._state, self._control = TrainerState(), TrainerControl()
        for name in names:
            cb = INTEGRATION_TO_CALLBACK[name]()
            cb.on_train_begin(self._args, self._state, self._control)
            self._callbacks.append(cb)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        """Log the numeric values of ``metrics`` at ``step`` (non-numbers and empty strings are skipped)."""
        logs = {k: float(v) for k, v in metrics.items() if isinstance(v, numbers.Real) and not isinstance(v, bool)}
        if not logs:
            return
        if self._writer is not None:
            for k, v in logs.items():  # transformers' tags: eval_x -> eval/x, test_x -> test/x, else train/x
                prefix = next((p for p in ("eval", "test") if k.startswith(p + "_")), None)
                self._writer.add_scalar(f"{prefix}/{k[len(prefix) + 1:]}" if prefix else f"train/{k}", v, step)
            self._writer.flush()
        if self._callbacks:
            self._state.global_step = int(step)
            for cb in self._callbacks:
                cb.on_log(self._args, self._state, self._control, logs=dict(logs))

    def close(self) -> None:
        """Flush and close every integration (idempotent)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        for cb in self._callbacks:
            cb.on_train_end(self._args, self._state, self._control)
        self._callbacks = []

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

