"""Batched generation with Hugging Face ``generate()`` or vLLM (:func:`vllm_engine` / :func:`generate_vllm`), drawn as
:class:`Sampling` says (a knob it leaves out is the plain distribution, whatever the model's generation config says);
:func:`generate` tokenizes, left-pads, stops and decodes as TRL does."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from tqdm import tqdm


@dataclass(frozen=True)
class Sampling:
    """How sampled completions are drawn (``generate(sampling=None)`` is greedy)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    min_p: float | None = None
    repetition_penalty: float = 1.0  # also greedy (1.0: none, whatever the model's generation config says)

    def __post_init__(self) -> None:  # the messages name the flags of llm_eval.py and llm_grpo.py
        if not 0 < self.temperature < float("inf"):  # inf: generate() drew uniformly, the multi-turn engine refuses it
            raise ValueError(f"--temperature must be > 0 and finite, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"--top-p must be in (0, 1], got {self.top_p}")

    @classmethod
    def of_rollouts(cls, config: Any) -> Sampling:
        """The sampling of a GRPO run's rollouts: the fields of its TRL ``GRPOConfig``."""
        return cls(temperature=config.temperature, top_p=config.top_p, top_k=config.top_k or 0, min_p=config.min_p,
                   repetition_penalty=config.repetition_penalty)

    def generate_kwargs(self, do_sample: bool) -> dict[str, Any]:
        """``generate()`` keyword arguments of a sampled (``do_sample``) or greedy pass."""
        kwargs: dict[str, Any] = {"do_sample": do_sample, "repetition_penalty": self.repetition_penalty}
        if do_sample:
            kwargs.update(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)
            if self.min_p is not None:
                kwargs["min_p"] = self.min_p
        return kwargs

    def episode_kwargs(self) -> dict[str, Any]:
        """The sampling arguments of ``countdown_gym.integrations.trl_rollout.play_episodes`` (multi-turn)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}


def prompt_token_ids(processing_class: Any, prompts: Sequence[Any]) -> list[list[int]]:
    """Token ids of the prompts exactly as TRL's ``GRPOTrainer`` tokenizes them for generation."""
    if prompts and not isinstance(prompts[0], str):  # conversational: lists of chat messages
        out = processing_class.apply_chat_template(
            conversation=list(prompts), add_generation_prompt=True, tokenize=True, return_dict=True
        )
        return [list(ids) for ids in out["input_ids"]]
    return [list(ids) for ids in processing_class(text=list(prompts))["input_ids"]]


def prompt_ids(tokenizer: Any, prompts: Sequence[Any]) -> list[list[int]]:
    """Token ids of the prompts as TRL tokenizes them (no second BOS after a chat template's text)."""
    if prompts and not isinstance(prompts[0], str):
        return prompt_token_ids(tokenizer, prompts)
    bos = getattr(tokenizer, "bos_token", None)
    templated = bool(getattr(tokenizer, "chat_template", None) and bos)
    return [list(tokenizer(p, add_special_tokens=not (templated and p.startswith(bos)))["input_ids"]) for p in prompts]


def stop_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every token id that ends a completion: the model's generation config's EOS and the tokenizer's."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompts: Sequence[Any], *, max_new_tokens: int, sampling: Sampling | None = None,
             num_return_sequences: int = 1, batch_size: int = 64, progress: bool = False,
             desc: str = "generate") -> tuple[list[list[str]], int]:
    """``num_return_sequences`` completions per prompt (text or chat messages) and the number of tokens generated;
    ``sampling=None``: greedy. ``batch_size`` counts sequences."""
    ids = prompt_ids(tokenizer, prompts)
    eos_ids = stop_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    device = next(model.parameters()).device
    knobs = (sampling or Sampling()).generate_kwargs(do_sample=sampling is not None)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths together: less padding
    per_batch = max(1, batch_size // max(num_return_sequences, 1))
    out: list[list[str]] = [[] for _ in ids]
    generated = 0
    bar = tqdm(total=len(ids), desc=desc, disable=not progress, leave=False)
    left_padded = functools.partial(torch.nn.utils.rnn.pad_sequence, batch_first=True, padding_side="left")  # as TRL
    for start in range(0, len(order), per_batch):
        idx = order[start : start + per_batch]
        input_ids = left_padded([torch.tensor(ids[i], dtype=torch.long) for i in idx], padding_value=pad)
        mask = left_padded([torch.ones(len(ids[i]), dtype=torch.long) for i in idx])
        width = input_ids.shape[1]
        seqs = model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device), max_new_tokens=max_new_tokens,
                              num_return_sequences=num_return_sequences, pad_token_id=pad, eos_token_id=eos_ids, **knobs)
        for r, c in enumerate(seqs[:, width:].cpu().tolist()):
            cut = next((k + 1 for k, t in enumerate(c) if t in eos_ids), len(c))
            generated += cut
            out[idx[r // num_return_sequences]].append(tokenizer.decode(c[:cut], skip_special_tokens=True))
        bar.update(len(idx))
    bar.close()
    return out, generated


def vllm_engine(model_path: str, dtype: str, seed: int, max_model_len: int) -> Any:
    """One vLLM engine for every pass of a run (a second engine in the same process would not fit in memory)."""
    try:
        from vllm import LLM
    except ImportError:
        raise SystemExit("--backend vllm needs vLLM (a CUDA machine and pip install 'countdown-gym[vllm]'); use --backend hf") from None
    return LLM(model=model_path, dtype=dtype, seed=seed, max_model_len=max_model_len)


def generate_vllm(llm: Any, tokenizer, prompts: list[str], n: int, sampling: Sampling | None, max_new_tokens: int,
                  seed: int) -> tuple[list[list[str]], int]:
    """Completions and their token count with a vLLM engine, as :func:`generate` draws them."""
    from vllm import SamplingParams

    knobs = sampling or Sampling()
    inputs = [{"prompt_token_ids": ids} for ids in prompt_ids(tokenizer, prompts)]
    params = SamplingParams(n=n, temperature=knobs.temperature if sampling else 0.0, top_p=knobs.top_p,
                            top_k=knobs.top_k or -1, min_p=knobs.min_p or 0.0, repetition_penalty=knobs.repetition_penalty,
                            max_tokens=max_new_tokens, seed=seed)
    results = llm.generate(inputs, params, use_tqdm=False)
    return [[o.text for o in r.outputs] for r in results], sum(len(o.token_ids) for r in results for o in r.outputs)


@contextmanager
def evaluating(model: Any, seed: int | None = None) -> Iterator[None]:
    """Play without gradients, in eval mode, on a forked RNG (seeded with ``seed`` when given)."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    was_training = getattr(model, "training", False)
    if model is not None:
        model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            if seed is not None:
                torch.manual_seed(seed)
            yield
    finally:
        if model is not None:
            model.train(was_training)
