"""The policy of a GRPO run: the shipped models a run starts from without ``--model``, and
:func:`load_model_and_tokenizer` (patched by ``tiny_lm.derive_position_ids``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm")
DEFAULT_TURN_MODEL = str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm-turns")


def check_model(name: str) -> None:
    """Exit with a clear message when ``--model`` cannot be a model (the shipped one missing, a bad local path)."""
    from baselines.lm.tiny_lm import check_model_path

    if name in (DEFAULT_MODEL, DEFAULT_TURN_MODEL) and not Path(name).exists():
        raise SystemExit(
            f"the shipped model is missing at {name}; build it with python baselines/llm_sft.py "
            "(see docs/llm_grpo.md) or pass --model"
        )
    check_model_path(name)


def load_model_and_tokenizer(name: str, dtype: Any = None) -> tuple[Any, Any]:
    """A causal LM and its tokenizer (pad token set, left padding), from a local path or hub id."""
    from baselines.lm.tiny_lm import derive_position_ids, load_causal_lm

    check_model(name)
    model, tokenizer = load_causal_lm(name, **({"dtype": dtype} if dtype is not None else {}))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return derive_position_ids(model), tokenizer


def read_tokenizer(name: str) -> Any:
    """The tokenizer of ``name`` (small files, no weights); None when it cannot be read here."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError):
        return None
