"""The project's own tiny causal LM for Countdown: tokenizer, model config, save / load.

Tokenizer: every integer ``0..1999`` is one token (longer digit runs split greedily: ``"2401"`` -> ``"240" "1"``),
as are every printable ASCII character and the answer tags (``<answer>``, ``<Solution>``, ``<think>`` and their
closing forms); special tokens ``<pad> <bos> <eos> <unk>``, ``<bos>`` prepended to every text;
``decode(encode(text), skip_special_tokens=True) == text`` for any ASCII text.
Model: a Llama-style decoder (rotary positions: left padding cannot shift them), or ``arch="gpt2"`` (learned
absolute positions).
"""

from __future__ import annotations

import json
import string
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from countdown_gym import dataclass_cli
from countdown_gym.data.splits import SPLIT_SPEC

MAX_NUMBER_TOKEN = 1999
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
TAG_TOKENS = ("<answer>", "</answer>", "<Solution>", "</Solution>", "<think>", "</think>")
# Numbers 1000..1999 first (four digits starting with 1), then 1..999 without a leading zero,
# then any single character (a lone digit such as the "0" of "07" included).
_PIECE = r"1[0-9]{3}|[1-9][0-9]{0,2}|[\s\S]"

SHIPPED_CHECKPOINT = Path(__file__).resolve().parents[1] / "checkpoints" / "countdown-tiny-lm"


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The number-aware tokenizer (deterministic: the same vocabulary every time)."""
    pieces = (*SPECIAL_TOKENS, *map(str, range(MAX_NUMBER_TOKEN + 1)), *string.printable)  # \r \x0b \x0c included
    vocab = {piece: i for i, piece in enumerate(dict.fromkeys(pieces))}  # the digits once, as numbers
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(_PIECE), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                                   unk_token="<unk>", padding_side="left", clean_up_tokenization_spaces=False,
                                   model_max_length=1024)


@dataclass
class SplitRun:
    """The options every language-model script shares (``llm_sft.py``, ``llm_eval.py``, ``llm_expert_iteration.py``)."""

    preset: str = "longproc-0.5k"  # frozen split preset
    seed: int = 0
    threads: int = 1  # torch CPU threads
    max_turns: int = 16  # multi-turn: the turn budget of an episode

    def __post_init__(self) -> None:
        dataclass_cli.check_choice(self, "preset", sorted(SPLIT_SPEC))
        dataclass_cli.check_min(self, 1, "threads", "max_turns")


@dataclass
class TinyLMConfig:
    """Size of the tiny model (``arch``: ``"llama"`` or ``"gpt2"``); the defaults are the shipped model's."""

    arch: str = "llama"  # ``llama`` (RMSNorm, SwiGLU, rotary positions) or ``gpt2`` (learned absolute positions)
    hidden: int = 128  # width of the residual stream (a multiple of --heads)
    layers: int = 4  # decoder layers
    heads: int = 4  # attention heads
    intermediate: int = 384  # width of the feed-forward layers
    max_positions: int = 512  # longest sequence in tokens (prompt and completion)
    dropout: float = 0.0  # attention (llama) or every (gpt2) dropout probability

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "gpt2"):
            raise ValueError(f"unknown arch {self.arch!r}; choose 'llama' or 'gpt2'")
        dataclass_cli.check_min(self, 1, "hidden", "layers", "heads", "intermediate", "max_positions")
        if self.hidden % self.heads:
            raise ValueError(f"--hidden ({self.hidden}) must be a multiple of --heads ({self.heads})")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


def build_model(cfg: TinyLMConfig, tokenizer: PreTrainedTokenizerFast) -> PreTrainedModel:
    """A freshly initialised causal LM of ``cfg``'s size for ``tokenizer``'s vocabulary."""
    common = {"vocab_size": len(tokenizer), "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
              "pad_token_id": tokenizer.pad_token_id, "tie_word_embeddings": True}
    if cfg.arch == "llama":
        return LlamaForCausalLM(LlamaConfig(
            hidden_size=cfg.hidden, intermediate_size=cfg.intermediate, num_hidden_layers=cfg.layers,
            num_attention_heads=cfg.heads, num_key_value_heads=cfg.heads, max_position_embeddings=cfg.max_positions,
            attention_dropout=cfg.dropout, rope_theta=10000.0, **common))
    if cfg.arch == "gpt2":
        return GPT2LMHeadModel(GPT2Config(
            n_embd=cfg.hidden, n_layer=cfg.layers, n_head=cfg.heads, n_inner=cfg.intermediate, n_positions=cfg.max_positions,
            resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout, **common))
    raise ValueError(f"unknown arch {cfg.arch!r}; choose 'llama' or 'gpt2'")  # an arch changed after construction


def save_pretrained(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, path: str | Path, meta: dict | None = None) -> Path:
    """Save model (safetensors) + config + tokenizer files, and ``meta`` as ``training.json``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    if meta is not None:
        (path / "training.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return path


def check_model_path(name: str) -> None:
    """Exit naming ``--model`` when ``name`` is a local path that is missing or holds no saved model (a hub id passes)."""
    if name.startswith((".", "/", "~")) and not Path(name).exists():
        raise SystemExit(f"--model {name}: no such directory")
    if Path(name).exists() and not (Path(name) / "config.json").is_file():
        raise SystemExit(f"--model {name}: no config.json there (not a saved Hugging Face model directory)")


def short_error(exc: BaseException) -> str:
    """The first sentence of an error's message (at most 120 characters; transformers' run to many lines)."""
    text = str(exc).strip().splitlines()
    return (text[0].split(". ")[0][:120] if text else "") or type(exc).__name__


def load_causal_lm(name: str, **kwargs: Any) -> tuple[PreTrainedModel, Any]:
    """``(model, tokenizer)`` of any Hugging Face causal LM (local path or hub id); ``kwargs`` go to
    ``from_pretrained``. A bad path or a model that cannot load exits with a message, not a traceback."""
    from transformers import AutoTokenizer

    check_model_path(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    except Exception as exc:  # noqa: BLE001 - no tokenizer files, a torn safetensors, a config.json that is a list...
        raise SystemExit(f"cannot load model {name!r}: {short_error(exc)}") from None
    return model, tokenizer


def detect_interaction(model: str) -> str:
    """The interaction a saved model was trained for: ``llm_sft.py``'s ``training.json``, or the ``options.json`` of
    the GRPO run a ``final`` / ``best`` / ``checkpoint-N`` folder belongs to; ``single-pass`` when neither says."""
    path = Path(model)
    for f, key in ((path / "training.json", "sft_config"), (path.parent / "options.json", None)):
        if f.is_file():
            try:
                data = json.loads(f.read_text())
            except ValueError:
                continue
            data = data.get(key, {}) if key else data
            if isinstance(data, dict) and data.get("interaction") in ("single-pass", "multi-turn"):
                return data["interaction"]
    return "single-pass"


def load_pretrained(path: str | Path | None = None, dtype: torch.dtype = torch.float32):
    """``(model, tokenizer)`` from a saved directory (``None``: the shipped checkpoint)."""
    from transformers import AutoTokenizer

    path = Path(path) if path is not None else SHIPPED_CHECKPOINT
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"no model at {path} (expected config.json, model.safetensors, tokenizer files)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except ValueError:  # transformers' error for a folder without tokenizer files (a traceback in the scripts)
        raise FileNotFoundError(f"no tokenizer at {path} (expected config.json, model.safetensors, tokenizer files)") from None
    except Exception as exc:  # noqa: BLE001 - e.g. a config.json that is a JSON list
        raise ValueError(f"{path}: the saved model does not load ({short_error(exc)})") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
    except Exception as exc:  # noqa: BLE001 - a torn model.safetensors, an unknown model_type, no weights file...
        raise ValueError(f"{path}: the saved model does not load ({short_error(exc)})") from None
    model.eval()
    return model, tokenizer


def derive_position_ids(model: Any) -> Any:
    """Make the backbone derive ``position_ids`` from the attention mask (``cumsum(attention_mask) - 1``, as
    ``generate()`` numbers left-padded prompts) when a full-sequence call gives none, as TRL's log-probability pass
    does: with absolute position embeddings (GPT-2) the two passes would disagree otherwise."""
    backbone = model.base_model
    if getattr(backbone, "_countdown_position_fix", False):
        return model
    original = backbone.forward

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids", args[0] if args else None)
        past = kwargs.get("past_key_values")
        fresh = past is None or (hasattr(past, "get_seq_length") and past.get_seq_length() == 0)
        if kwargs.get("position_ids") is None and mask is not None and ids is not None and mask.dim() == 2 and fresh and mask.shape[1] == ids.shape[1]:
            kwargs["position_ids"] = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
        return original(*args, **kwargs)

    backbone.forward = types.MethodType(forward, backbone)
    backbone._countdown_position_fix = True
    return model
