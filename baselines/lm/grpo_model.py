"""The policy of a GRPO run (``baselines/llm_grpo.py``): the shipped models, its position-ids patch, its tokenizer.

``DEFAULT_MODEL`` / ``DEFAULT_TURN_MODEL`` are the shipped models a run starts from without ``--model``
(``grpo_options.GRPORun`` picks one); :func:`load_model_and_tokenizer` loads the policy (patched by
:func:`derive_position_ids`, so TRL's log-probabilities see the positions ``generate()`` used).
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm")
DEFAULT_TURN_MODEL = str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm-turns")


def derive_position_ids(model: Any) -> Any:
    """Make the backbone derive ``position_ids`` from the attention mask when none are given.

    ``generate()`` numbers left-padded prompts from their first real token, but TRL's
    log-probability pass calls the model without ``position_ids``; with absolute position
    embeddings (GPT-2) the two passes would disagree. After this patch a full-sequence call
    without ``position_ids`` uses ``cumsum(attention_mask) - 1``, exactly what ``generate()`` uses.
    """
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
    from baselines.lm.tiny_lm import load_causal_lm

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
