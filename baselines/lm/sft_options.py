"""The options of a supervised run (``baselines/llm_sft.py``): every field of :class:`SFTConfig` is a ``--flag``;
``RESUME_MAY_CHANGE`` names the ones a ``--resume`` may change."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from baselines.lm.tiny_lm import SplitRun, TinyLMConfig
from countdown_gym import dataclass_cli
from countdown_gym.runkit.tracking import report_to_names

INTERACTIONS = ("single-pass", "multi-turn")


@dataclass
class SFTConfig(SplitRun):
    """Options of ``llm_sft.py`` (every field is a ``--flag``)."""

    out: str = "runs/llm_sft"
    fresh_problems: int = 20000
    """Newly generated problems added to the train split (never validation/test keys)."""
    # model
    init_from: str = ""
    """Start from this saved model (a directory with config.json + model.safetensors, e.g. the
    shipped ``baselines/checkpoints/countdown-tiny-lm``) instead of random weights."""
    model: TinyLMConfig = field(default_factory=TinyLMConfig)
    """The model trained from scratch (without --init-from): ``tiny_lm.TinyLMConfig``, whose defaults are the shipped model's."""
    # trace format
    dead_ends: tuple[int, ...] = (0,)
    probe: int = 1
    dead_end_rate: float = 1.0
    """Chance that a trace writes its dead ends at a state (``CompactTraceConfig.dead_end_rate``)."""
    answer: str = "solution"
    leaves: str = "enumerate"
    """``enumerate``: a two-number state's moves are tried in scan order until one hits; ``direct``: only the
    hit is written (``CompactTraceConfig.leaves``)."""
    interaction: str = "single-pass"
    """single-pass: the completion is the whole compact trace; multi-turn: the trace is played as turns of
    CountdownMultiTurn-v0 (one move per turn, the environment's replies are context, not learned)."""
    episodes: str = ""
    """Multi-turn: a JSONL file of played episodes (``{"numbers", "target", "turns"}`` per line, e.g. the
    solved episodes ``llm_expert_iteration.py`` samples) trained on beside the traces."""
    episodes_share: float = 0.5
    """Multi-turn with ``--episodes``: the share of each batch drawn from the episodes (the rest: traces)."""
    # optimisation
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.01
    warmup_steps: int = 30
    batch_size: int = 16
    max_steps: int = 100000
    max_minutes: float = 36.0
    """Stop (and save) after this much wall time; 0 = no limit."""
    schedule: str = "time"
    """``steps``: cosine over max_steps; ``time``: cosine over max_minutes of wall time (for a
    fixed time budget on a shared machine, whatever the throughput)."""
    grad_clip: float = 1.0
    # evaluation and checkpoints
    eval_every: int = 150
    eval_problems: int = 100
    eval_batch_size: int = 100
    max_new_tokens: int = 200
    checkpoint_every: int = 50
    resume: bool = False
    progress: bool = True
    report_to: str = "tensorboard"
    """Where the loss, learning rate, throughput and validation success are also logged besides ``metrics.csv`` and
    ``curves.png``: none, all, or a comma-separated list of transformers' integrations (tensorboard: ``<out>/tensorboard``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        dataclass_cli.check_choice(self, "schedule", ("steps", "time"))
        dataclass_cli.check_choice(self, "interaction", INTERACTIONS)
        if self.schedule == "time" and not self.max_minutes > 0:
            raise ValueError("--schedule time needs --max-minutes > 0")
        dataclass_cli.check_min(self, 1, "batch_size", "max_steps", "eval_every", "eval_problems", "eval_batch_size",
                                "max_new_tokens", "checkpoint_every")
        dataclass_cli.check_min(self, 0, "fresh_problems", "warmup_steps", "max_minutes", "weight_decay", "grad_clip", "lr")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"--min-lr-ratio must be in [0, 1], got {self.min_lr_ratio}")
        if not 0 <= self.episodes_share <= 1:
            raise ValueError(f"--episodes-share must be in [0, 1], got {self.episodes_share}")
        if self.episodes and self.interaction != "multi-turn":
            raise ValueError("--episodes holds multi-turn episodes: use it with --interaction multi-turn")
        if self.episodes and not Path(self.episodes).is_file():
            raise ValueError(f"--episodes {self.episodes}: no such file")
        if self.init_from and not (Path(self.init_from) / "config.json").is_file():  # before --out is written to
            raise ValueError(f"--init-from {self.init_from}: no saved model there (expected config.json and "
                             "model.safetensors)")
        report_to_names(self.report_to)  # a ValueError naming --report-to


RESUME_MAY_CHANGE = ("out", "resume", "progress", "report_to", "threads", "max_steps", "max_minutes", "eval_every", "eval_problems",
                     "eval_batch_size", "max_new_tokens", "checkpoint_every")
"""The options a ``--resume`` may change; any other differing from the checkpoint's run is refused."""
