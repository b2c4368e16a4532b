"""Test helpers: a tokenizer with the real Qwen2.5-Instruct chat template and a tiny Qwen2 model, built here.

The template is Qwen2.5-Instruct's ``chat_template``, kept in ``tests/data/qwen2_5_chat_template.jinja`` (a copy of
TRL 1.16's ``trl/chat_templates/qwen2_5.jinja``; ``tests/test_chat_prompts.py`` checks they agree where TRL is
installed), so environments without TRL (verl's) use it too. The byte-level BPE vocabulary is trained on the texts
a test renders, so nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parent / "data" / "qwen2_5_chat_template.jinja"

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ASSISTANT_HEADER = "<|im_start|>assistant\n"


def qwen25_template() -> str:
    return TEMPLATE.read_text(encoding="utf-8")


def qwen_tokenizer(corpus: Iterable[str] = (), vocab_size: int = 800) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` with Qwen2.5's special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    texts = list(corpus) or ["Countdown"]
    raw.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  padding_side="left")
    tok.chat_template = qwen25_template()
    return tok


def tiny_qwen2(tokenizer: Any, seed: int = 0) -> Any:
    """A randomly initialised two-layer Qwen2 causal LM over ``tokenizer``'s vocabulary."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=4096, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=None, tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model
