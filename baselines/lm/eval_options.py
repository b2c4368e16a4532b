"""The options of an evaluation (``baselines/llm_eval.py``): every field of :class:`EvalConfig` is a ``--flag``;
:meth:`EvalConfig.resolved` works out ``--interaction auto`` once, from what the model was trained for."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from baselines.lm.tiny_lm import SHIPPED_CHECKPOINT, SplitRun, detect_interaction
from countdown_gym import dataclass_cli
from countdown_gym.data.splits import SPLITS
from countdown_gym.game.text_format import PROMPT_STYLES
from countdown_gym.game.turn_format import TURN_PROMPT_STYLES

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class EvalConfig(SplitRun):
    """Options of ``llm_eval.py`` (every field is a ``--flag``)."""

    model: str = str(SHIPPED_CHECKPOINT)
    """Local directory or hub id of any causal LM."""
    interaction: str = "auto"
    """``single-pass`` (one completion per answer), ``multi-turn`` (one move per turn, CountdownMultiTurn-v0 computes;
    the answer is the ``<Solution>`` block of the moves played) or ``auto``: what the model was trained for (its
    ``training.json`` or its GRPO run's ``options.json``), else single-pass."""
    split: str = "test"
    limit: int = 0
    """Evaluate only N problems (0 = all from ``offset`` on)."""
    offset: int = 0
    """Skip the first N problems of the split."""
    prompt_style: str = "compact"
    """``compact`` (the shipped tiny model), ``longproc`` or ``tinyzero``."""
    chat_template: str = "auto"
    """``auto``: wrap the prompt in the tokenizer's chat template when it has one; ``on`` / ``off``."""
    k: int = 8
    """Sampled completions per problem for pass@k and per-sample success (0 = greedy only)."""
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 320
    batch_size: int = 128
    backend: str = "hf"
    """``hf`` (transformers generate) or ``vllm``."""
    dtype: str = "float32"
    device: str = "auto"
    """Where the model runs (``--backend hf``): ``auto`` (the first GPU when CUDA is available, else the CPU), ``cpu``,
    ``cuda``, ``cuda:1``..."""
    out: str = ""
    """Output path: a leaderboard submission ``.jsonl`` (whole split) or completions JSONL; empty = auto (an existing
    file of that name stops the run before generating)."""
    agent: str = ""
    authors: str = "countdown-gym baselines"
    method: str = "SFT on compact search traces"
    reward_variant: str = "none"
    """The RL reward the model was trained with, recorded in the submission (``none`` for SFT only)."""
    results_json: str = ""
    """Also write the metrics to this JSON file."""
    dry_run: bool = False
    """Load no weights: print the generation settings, the device and an estimate of the memory, then exit 0."""
    pass_rates: str = ""
    """Also write each problem's sampled pass rate to this JSONL (``id``, ``samples``, ``correct``), the input of
    ``llm_grpo.py --train-pass-rates``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        styles = (*PROMPT_STYLES, *(s for s in TURN_PROMPT_STYLES if s not in PROMPT_STYLES))
        for name, allowed in (("split", SPLITS), ("prompt_style", styles),
                              ("chat_template", ("auto", "on", "off")), ("backend", ("hf", "vllm")), ("dtype", DTYPES)):
            dataclass_cli.check_choice(self, name, allowed)
        dataclass_cli.check_choice(self, "interaction", ("auto", "single-pass", "multi-turn"))
        dataclass_cli.check_min(self, 1, "max_new_tokens", "batch_size")
        dataclass_cli.check_min(self, 0, "k", "offset", "limit")
        if not self.temperature > 0:
            raise ValueError(f"--temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.pass_rates and self.k < 1:
            raise ValueError("--pass-rates needs sampled completions (--k >= 1)")

    def resolved(self) -> EvalConfig:
        """This configuration with ``--interaction auto`` resolved: what the model was trained for."""
        if self.interaction != "auto":
            return self
        return dataclasses.replace(self, interaction=detect_interaction(self.model))
