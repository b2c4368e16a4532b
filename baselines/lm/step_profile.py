"""Where a GRPO step's time goes (:class:`StepProfile`): generation, rewards, TRL's log-prob passes, the training
forward, and the rest (backward pass, optimizer update, TRL's book-keeping; validation is not counted).

:meth:`StepProfile.attach` times the trainer's own methods on the instance: ``_generate``, ``_calculate_rewards`` and
``_get_per_token_logps_and_entropies`` (without gradients: the log-prob pass; with: the loss's forward).
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from typing import Any

from transformers import TrainerCallback

PARTS = ("generation", "rewards", "logprob_pass", "train_forward", "backward_update_other")
"""The parts of a step, in the order they happen."""


class StepProfile(TrainerCallback):
    """Seconds per GRPO step, by part."""

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
