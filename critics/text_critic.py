"""The seed paper's text critic (its architecture A): a language model embeds the reasoning text.

The state tower reads the last ``window`` tokens of the trace prefix up to a state with the project's embedded LM
(``baselines/checkpoints/countdown-tiny-lm``; the last token's hidden state and the window's mean, then an MLP); the
goal tower and the objective are V2's (``python -m critics.train_text``). :class:`TextCritic` scores texts or bare
number sets (written by :func:`render_state`: what the reward wrappers call), e.g.
``load_text_critic().score([(20, 26), (80,)], [46, 46])``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from countdown_gym.dataclass_cli import written_aside
from countdown_gym.game.trace import _options, format_list, parse_trace
from countdown_gym.runkit.runs import write_text_atomic
from critics.clipo import mean_pool
from critics.models import (
    CheckpointError,
    ConfigDict,
    GoalScorer,
    ModelConfig,
    NumericalCriticV2,
    SetEncoder,
    _mlp,
    check_sizes,
    check_state,
    check_target,
    read_checkpoint,
    read_safetensors,
    read_weights,
    write_files,
)

TEXT_FORMAT = "countdown-gym-text-critic/1"  # the tag of every text-critic config.json; another is refused

ROOT = Path(__file__).resolve().parent
SHIPPED_TEXT_CHECKPOINT = ROOT / "checkpoints" / "text"  # what load_text_critic() loads by default
DEFAULT_LM = ROOT.parent / "baselines" / "checkpoints" / "countdown-tiny-lm"  # the LM that starts the state tower


@dataclass
class TextCriticConfig(ConfigDict):
    """Architecture of a text critic (saved beside the weights)."""

    window: int = 112  # tokens of the prefix read (the last ones); the 3-number lines are ~146 tokens, 2-number ~108
    head_hidden: int = 256  # MLP width on the pooled LM features
    head_depth: int = 2
    out_dim: int = 128
    temperature: float = 0.1
    value_dim: int = 32  # goal tower (the V2 goal tower: number embedding + MLP)
    fourier: int = 12
    goal_hidden: int = 256
    finetune: bool = True  # False: the LM stays frozen, only the head and the goal tower learn
    NOT_SIZES = ("window",)

    def __post_init__(self) -> None:
        self.check_fields(("window", "head_hidden", "head_depth", "out_dim", "value_dim", "fourier", "goal_hidden"),
                          flags=("finetune",))


def render_state(state: Sequence[Any], target: Any) -> str:
    """A bare number set as the first line of its own LongProc search (what :meth:`TextCritic.score` reads).

    >>> render_state((20, 26), 46)
    'Initial number set: [20, 26], target: 46, just two numbers left.'
    """
    nums = list(state)
    tail = f". Options for choosing two numbers: {_options(nums)}." if len(nums) >= 3 else ", just two numbers left."
    return f"Initial number set: {format_list(nums)}, target: {target}{tail if len(nums) >= 2 else '.'}"


def prefix_window(lines: Sequence[str], line_no: int, context_lines: int = 3) -> str:
    """The trace prefix that ends with line ``line_no`` (``lines`` = the trace split on newlines), from at most
    ``context_lines`` lines before it: enough text for any window of a few hundred tokens."""
    if not 0 <= line_no < len(lines):
        raise ValueError(f"line {line_no} is outside the trace ({len(lines)} lines)")
    return "\n".join(lines[max(0, line_no - context_lines) : line_no + 1])


def node_lines(text: str) -> list[int]:
    """For each node of :func:`critics.data.trace_tree` (same order), the line of ``text`` that creates it."""
    lines = text.split("\n")
    root = next(i for i, line in enumerate(lines) if line.startswith("Initial number set:"))
    _, _, steps = parse_trace(text)
    return [root] + [st.line_no for st in steps if st.next_state is not None]


class TextCriticModel(nn.Module):
    """LM state tower (+ pooled-feature MLP head) and a separate goal tower over target values."""

    def __init__(self, cfg: TextCriticConfig, lm_config: Any) -> None:
        super().__init__()
        from transformers import AutoModel

        self.cfg = cfg
        self.lm = AutoModel.from_config(lm_config)
        self.lm.requires_grad_(cfg.finetune)
        h = lm_config.hidden_size
        self.head = _mlp(2 * h, cfg.head_hidden, cfg.head_depth, cfg.out_dim)
        goal = ModelConfig(max_numbers=1, value_dim=cfg.value_dim, fourier=cfg.fourier, out_dim=cfg.out_dim)
        self.goal_tower = SetEncoder(goal, 1, cfg.goal_hidden, 2)  # V2's goal tower

    def embed_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Left-padded token windows ``[N, W]`` -> L2-normalised state embeddings ``[N, out_dim]``."""
        pos = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.cfg.finetune):
            hs = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos).last_hidden_state
        return F.normalize(self.head(torch.cat([hs[:, -1], mean_pool(hs, attention_mask)], dim=-1)), dim=-1)

    embed_goals = NumericalCriticV2.embed_goals  # V2's, over the same goal tower


def build_text_critic(cfg: TextCriticConfig, lm_dir: str | Path = DEFAULT_LM, seed: int = 0) -> tuple[TextCriticModel, Any]:
    """A new text critic whose state tower starts from the saved causal LM in ``lm_dir``: ``(model, tokenizer)``."""
    from transformers import AutoConfig, AutoTokenizer

    d = Path(lm_dir)
    if not (d / "config.json").is_file() or not (d / "model.safetensors").is_file():
        raise CheckpointError(f"no language model at {d} (expected config.json, model.safetensors and tokenizer files)")
    prefix = "model."  # a *ForCausalLM stores its base model under "model."; the LM head is not used
    weights = read_safetensors(d / "model.safetensors", lambda f: {k: f.get_tensor(k) for k in f.keys()})  # noqa: SIM118
    state = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
    lm_config = fitting_lm_config(lambda: AutoConfig.from_pretrained(str(d)), (d / "config.json", d / "model.safetensors"),
                                  {k: tuple(v.shape) for k, v in state.items()})
    torch.manual_seed(seed)
    model = TextCriticModel(cfg, lm_config)
    model.lm.load_state_dict(state)  # names and shapes checked by fitting_lm_config
    return model, AutoTokenizer.from_pretrained(str(d))


def fitting_lm_config(load: Callable[[], Any], files: tuple[Path, Path], shapes: dict[str, tuple[int, ...]]) -> Any:
    """The config ``load()`` reads from ``files[0]``, once its language model is found to hold exactly the weights of
    ``shapes`` (their names and shapes in ``files[1]``): its layer count first, then every shape of the model built on
    the meta device (nothing allocated). :class:`~critics.CheckpointError` naming the file and the field otherwise:
    a hand-edited size is refused before gigabytes are allocated for it."""
    from transformers import AutoModel

    path, weights = files
    try:
        lm = load()
        layers = len({m.group(1) for k in shapes if (m := re.search(r"\.(\d+)\.", k))})
        if getattr(lm, "num_hidden_layers", None) != layers:
            raise CheckpointError(f"{path}: num_hidden_layers {getattr(lm, 'num_hidden_layers', None)} does not fit the "
                                  f"{layers} layers of the weights in {weights}")
        with torch.device("meta"):
            built = {k: tuple(v.shape) for k, v in AutoModel.from_config(lm).state_dict().items()}
    except CheckpointError:
        raise
    except Exception as e:  # transformers' errors for a config that does not read or build
        raise CheckpointError(f"{path}: not a language-model config that builds: {' '.join(str(e).split())[:300]}") from None
    for k in sorted(built.keys() | shapes.keys()):
        if built.get(k) != shapes.get(k):
            fields = [f"{n} {v}" for n, v in lm.to_dict().items() if type(v) is int and v in (built.get(k) or ())
                      and v not in (shapes.get(k) or ())]
            raise CheckpointError(f"{path}: {', '.join(fields) or 'a size'} does not fit the weights in {weights}: "
                                  f"{k} would be {built.get(k)}, the file holds {shapes.get(k)}")
    return lm


def save_text_critic(model: TextCriticModel, tokenizer: Any, directory: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write ``config.json`` (+ ``extra``), ``model.safetensors`` (LM included; it carries ``extra``'s step, if any),
    ``lm_config.json`` and ``tokenizer/``, each under a temporary name moved into place."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    with written_aside(d / "tokenizer") as tmp:
        tokenizer.save_pretrained(str(tmp))
    write_text_atomic(d / "lm_config.json", model.lm.config.to_json_string())
    meta = {"format": TEXT_FORMAT, "model": model.cfg.to_dict(), **(extra or {})}
    return write_files(d, model, meta)


def read_text_weights(directory: str | Path, model: TextCriticModel) -> dict[str, Any]:
    """Load the weights of the text-critic checkpoint in ``directory`` into ``model`` (``--resume``: no
    ``lm_config.json`` or ``tokenizer/`` read); its ``config.json``. :class:`~critics.CheckpointError` naming the file
    when one is missing, does not read or fit ``model``, or the weights are not of ``config.json``'s step."""
    d, meta, _ = read_checkpoint(directory, TEXT_FORMAT, "text critic", TextCriticConfig, ("model.safetensors",))
    read_weights(d / "model.safetensors", model, meta)
    return meta


def load_text_critic(path: str | Path | None = None) -> TextCritic:
    """Load a text-critic checkpoint directory (``None``: the shipped one); :class:`~critics.CheckpointError` naming
    the file for a missing or incompatible one."""
    from transformers import AutoConfig, AutoTokenizer

    files = ("model.safetensors", "lm_config.json", "tokenizer")
    d, meta, cfg = read_checkpoint(SHIPPED_TEXT_CHECKPOINT if path is None else path, TEXT_FORMAT, "text critic",
                                   TextCriticConfig, files)
    shapes = check_sizes(d / "model.safetensors", cfg)
    lm_config = fitting_lm_config(lambda: AutoConfig.for_model(**json.loads((d / "lm_config.json").read_text(encoding="utf-8"))),
                                  (d / "lm_config.json", d / "model.safetensors"),
                                  {k[3:]: s for k, s in shapes.items() if k.startswith("lm.")})
    model = TextCriticModel(cfg, lm_config)
    read_weights(d / "model.safetensors", model, meta)
    return TextCritic(model, AutoTokenizer.from_pretrained(str(d / "tokenizer")), meta, d)


class TextCritic(GoalScorer):
    """A loaded text critic: batched, gradient-free scoring of texts or number sets on CPU; the same inputs give the
    same scores in any batch up to float32 rounding (left-padded, masked windows; relative rotary positions), not
    bit for bit: a batch's shape can change the last bits."""

    version = "text"
    config: TextCriticConfig

    def __init__(self, model: TextCriticModel, tokenizer: Any, meta: dict[str, Any] | None = None, path: Path | None = None) -> None:
        super().__init__(model, meta, path)
        self.tokenizer = tokenizer
        tokenizer.padding_side = tokenizer.truncation_side = "left"  # tokenize() keeps the last tokens of each text

    def __repr__(self) -> str:
        return f"TextCritic(path={str(self.path) if self.path else None!r}, window={self.config.window})"

    def tokenize(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded ``(input_ids, attention_mask)`` of the last ``window`` tokens of each text."""
        enc = self.tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=self.config.window,
                             padding=True, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    def score_texts(self, texts: Sequence[str], targets: Sequence[int], batch_size: int = 256) -> np.ndarray:
        """Cosine of each text prefix and its target, ``float32 [N]`` in ``[-1, 1]`` (the paper's text critic)."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("texts must be a sequence of strings (one prefix per target)")
        if len(texts) != len(targets):
            raise ValueError(f"got {len(texts)} texts but {len(targets)} targets")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text {i} must be a str, got {type(t).__name__}")
            if not t:  # no token: alone, an error deep in the LM; in a batch, a score of padding
                raise ValueError(f"text {i} is empty; the critic scores a non-empty trace prefix")
        self.embed_targets(targets)  # every new goal in one batch, then cached
        return self._cosines(lambda lo, hi: self.model.embed_tokens(*self.tokenize(texts[lo:hi])), targets, batch_size)

    def score(self, states: Sequence[Sequence[int]], targets: Sequence[int], initial: Any = None, batch_size: int = 256) -> np.ndarray:
        """Cosine of each number set (any order: written sorted by :func:`render_state`, as in training) and its target,
        ``float32 [N]``: the numerical critics' ``score(states, targets)`` (``initial`` ignored, as V2 does)."""
        self._check_pairs(states, targets)
        pairs = enumerate(zip(states, targets, strict=True))
        texts = [render_state(sorted(check_state(i, s)), check_target(i, t)) for i, (s, t) in pairs]
        return self.score_texts(texts, list(targets), batch_size)


__all__ = [
    "DEFAULT_LM", "SHIPPED_TEXT_CHECKPOINT", "TextCritic", "TextCriticConfig", "TextCriticModel",
    "build_text_critic", "load_text_critic", "node_lines", "prefix_window", "read_text_weights", "render_state",
    "save_text_critic"
]
