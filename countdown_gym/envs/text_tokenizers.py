"""Tokenizer adapters of CountdownText-v0's token modes: one interface over Hugging Face tokenizers, streamed decoding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Tokenizer:
    """One interface over a ``transformers`` tokenizer and a raw ``tokenizers.Tokenizer``."""

    def __init__(self, tok: Any, eos_token_id: int | None) -> None:
        if not (hasattr(tok, "encode") and hasattr(tok, "decode")):
            raise ValueError(f"tokenizer must be a Hugging Face tokenizer (with encode/decode), got {type(tok).__name__}")
        self.tok = tok
        self.raw = hasattr(tok, "get_vocab_size") and not hasattr(tok, "convert_ids_to_tokens")
        self.vocab_size = int(tok.get_vocab_size(with_added_tokens=True) if self.raw else len(tok))
        if eos_token_id is None and not self.raw:
            eos_token_id = getattr(tok, "eos_token_id", None)
        self.eos_token_id = eos_token_id
        # transformers' decode may end with ``clean_up_tokenization`` (" ." -> ".", " 's" -> "'s", ...)
        # on the whole text; it is applied to the stream separately (see Detokenizer)
        self.cleanup = None
        if not self.raw and getattr(tok, "clean_up_tokenization_spaces", False):
            self.cleanup = tok.clean_up_tokenization
            probe = self.encode("a . b ' s")
            plain = self.decode(probe, cleanup=False)
            if " ." in plain and tok.decode(probe, skip_special_tokens=True) == plain:  # e.g. skipped for BPE models
                self.cleanup = None

    def encode(self, text: str) -> list[int]:
        if self.raw:
            return list(self.tok.encode(text, add_special_tokens=False).ids)
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int], cleanup: bool = True) -> str:
        if self.raw or cleanup:
            return self.tok.decode(list(ids), skip_special_tokens=True)
        return self.tok.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


class Detokenizer:
    """Append-only decoding of a token stream (the incremental scheme of common LLM servers).

    Each new token is decoded together with a few tokens before it (so byte-level BPE pieces
    and SentencePiece spaces come out as in a full decode); text ending in U+FFFD (an
    incomplete UTF-8 character) is held back until a later token completes it. The tokenizer's
    ``clean_up_tokenization`` (if its decode applies it) runs on the decoded stream; it only
    drops a space before punctuation or a contraction (at most 4 characters, never across a
    newline), so text within 3 characters after a space is held back until it can no longer change.
    """

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.ids: list[int] = []
        self.prefix = 0  # decode window start
        self.read = 0  # tokens before this index are released
        self.pending = ""  # decoded text held back from the clean-up

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        return self._clean(self._release(final=False), final=False)

    def flush(self) -> str:
        return self._clean(self._release(final=True), final=True)

    def _release(self, final: bool) -> str:
        before = self.tok.decode(self.ids[self.prefix : self.read], cleanup=False)
        text = self.tok.decode(self.ids[self.prefix :], cleanup=False)
        if len(text) <= len(before) or (text.endswith("\ufffd") and not final) or not text.startswith(before):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return text[len(before) :]

    def _clean(self, text: str, final: bool) -> str:
        if self.tok.cleanup is None:
            return text
        text = self.pending + text
        cut = len(text)
        while not final and text[cut - 1 : cut] != "\n" and " " in text[max(cut - 3, 0) : cut]:
            cut = text.rindex(" ", 0, cut)
        self.pending = text[cut:]
        return self.tok.cleanup(text[:cut])
