"""Multi-turn rollouts of any Hugging Face causal LM, and TRL's ``rollout_func`` built on them.

For models without a tool-calling chat template (the embedded model, base models): the model
writes one turn (up to a newline), the environment (:class:`~countdown_gym.turn_game.TurnEpisode`)
answers with its reply line, the reply is appended as tokens, and so on until the episode ends.
Each rollout is one token stream ``prompt | turn | reply | turn | reply ... | <eos>``; the
environment's tokens carry ``env_mask = 0`` so that TRL trains only on the model's own tokens.

:func:`play_episodes` is the engine (used by the GRPO baseline, its validation and evaluation);
:func:`make_rollout_func` wraps it for ``trl.GRPOTrainer(rollout_func=...)``. ``torch`` is
imported inside the functions, so ``import countdown_gym`` stays light.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from countdown_gym.problem import Problem
from countdown_gym.turn_format import turn_prompt
from countdown_gym.turn_game import DEFAULT_MAX_TURNS, TurnEpisode, TurnReplay, replay_turns

DEFAULT_MAX_TURN_TOKENS = 12
"""Token budget of one agent turn (``37-29`` is 3 tokens for the embedded model)."""


@dataclass
class TurnRollout:
    """One multi-turn episode as tokens, with what the environment made of it.

    ``completion_ids`` holds the model's and the environment's tokens after the prompt;
    ``env_mask[i]`` is 1 for a model token, 0 for an environment token; ``logprobs[i]`` is the
    sampling log-probability of a model token (0.0 for environment tokens); ``turn_index[i]`` is
    the agent turn a model token belongs to (-1 for environment tokens).
    """

    problem: Problem
    prompt: str
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    turn_index: list[int]
    turns: list[str]
    replay: TurnReplay

    @property
    def solved(self) -> bool:
        return self.replay.solved

    @property
    def text(self) -> str:
        """The conversation after the prompt: each turn and reply on its own line."""
        return "".join(f"{t}\n{r}\n" for t, r in zip(self.turns, self.replay.replies, strict=False))


def _stop_ids(tokenizer: Any) -> tuple[list[int], bool]:
    """Token ids that end a turn, and whether a newline is one token of its own (else ``stop_strings`` is used)."""
    eos = tokenizer.eos_token_id
    eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    nl = tokenizer("\n", add_special_tokens=False)["input_ids"]
    if len(nl) == 1 and tokenizer.decode(nl) == "\n":
        return [nl[0], *eos_ids], True
    return eos_ids, False


class _Episode:
    """Book-keeping of one episode while it is generated."""

    def __init__(self, problem: Problem, prompt: str, prompt_ids: list[int], max_turns: int) -> None:
        self.problem, self.prompt, self.prompt_ids = problem, prompt, prompt_ids
        self.game = TurnEpisode(problem, max_turns=max_turns)
        self.completion: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.turn_index: list[int] = []
        self.turns: list[str] = []

    def add(self, ids: Sequence[int], model: bool, logprobs: Sequence[float] | None = None) -> None:
        self.completion += ids
        self.mask += [1 if model else 0] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.turn_index += [len(self.turns) if model else -1] * len(ids)


def play_episodes(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_turn_tokens: int = DEFAULT_MAX_TURN_TOKENS,
    max_length: int | None = None,
    greedy: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    batch_size: int = 256,
    prompt_style: str = "compact",
) -> list[TurnRollout]:
    """Play one multi-turn episode of each problem with ``model``, batched turn by turn.

    A turn ends at a newline (or at ``max_turn_tokens`` tokens; the environment then writes the
    newline). The model's EOS ends its conversation: what it wrote before is played, then ``give
    up`` if the episode is still open. ``max_length`` (default: the model's position limit) bounds
    prompt plus completion; an episode about to pass it is truncated. Sampling follows
    ``temperature`` / ``top_p`` / ``top_k`` (``greedy=True``: argmax).
    """
    if temperature <= 0 and not greedy:
        raise ValueError(f"temperature must be > 0 when sampling, got {temperature}")
    stop, newline_token = _stop_ids(tokenizer)
    eos = tokenizer.eos_token_id if isinstance(tokenizer.eos_token_id, int) else None
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    limit = max_length or getattr(model.config, "max_position_embeddings", None) or 4096
    episodes = []
    for p in problems:
        prompt = turn_prompt(p, prompt_style, max_turns)
        episodes.append(_Episode(p, prompt, tokenizer(prompt)["input_ids"], max_turns))
    gen_kwargs: dict[str, Any] = {"max_new_tokens": max_turn_tokens, "pad_token_id": pad, "eos_token_id": stop or None,
                                  "output_scores": True, "return_dict_in_generate": True}
    if not newline_token:
        gen_kwargs.update(stop_strings=["\n"], tokenizer=tokenizer)
    if greedy:
        gen_kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    else:
        gen_kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=top_k)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    cache_arg = _cache_arg(model) if newline_token else None
    try:
        for start in range(0, len(episodes), batch_size):
            chunk = episodes[start : start + batch_size]
            if cache_arg is not None:
                _play_cached(model, tokenizer, chunk, max_turn_tokens=max_turn_tokens, greedy=greedy,
                             temperature=temperature, top_p=top_p, top_k=top_k, stop=stop, pad=pad, eos=eos,
                             limit=limit, device=device, cache_arg=cache_arg)
                continue
            while True:
                for e in chunk:  # room for one more turn and its reply, or the episode is cut here
                    if not e.game.done and len(e.prompt_ids) + len(e.completion) + max_turn_tokens + 32 > limit:
                        e.game.done = True
                active = [e for e in chunk if not e.game.done]
                if not active:
                    break
                _one_turn(model, tokenizer, active, gen_kwargs, device, stop, pad, eos)
    finally:
        model.train(was_training)
    out = []
    for e in episodes:
        if eos is not None and (not e.completion or e.completion[-1] != eos):
            e.add([eos], model=False)
        replay = replay_turns(e.problem, e.turns, max_turns=max_turns)
        out.append(TurnRollout(e.problem, e.prompt, e.prompt_ids, e.completion, e.mask, e.logprobs, e.turn_index,
                               e.turns, replay))
    return out


def _cache_arg(model: Any) -> str | None:
    """The name under which ``model.forward`` takes a KV cache (``past_key_values``, or ``cache`` in newer
    ``transformers``) when it also takes ``position_ids``; ``None`` when it does not."""
    import inspect

    params = inspect.signature(model.forward).parameters
    if "position_ids" not in params:
        return None
    return next((name for name in ("past_key_values", "cache") if name in params), None)


def _pick(logits: Any, greedy: bool, temperature: float, top_p: float, top_k: int) -> tuple[Any, Any]:
    """Next tokens of a batch of logits and their log-probabilities under the sampling distribution."""
    import torch

    if greedy:
        logp = logits.float().log_softmax(-1)
        tok = logp.argmax(-1)
        return tok, logp.gather(-1, tok[:, None])[:, 0]
    scores = logits.float() / temperature
    if top_k and top_k < scores.shape[-1]:
        kth = scores.topk(top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = scores.sort(-1, descending=True)
        probs = sorted_scores.softmax(-1)
        drop = probs.cumsum(-1) - probs > top_p  # keep the smallest set whose mass reaches top_p
        scores = scores.scatter(-1, order, sorted_scores.masked_fill(drop, float("-inf")))
    logp = scores.log_softmax(-1)
    tok = torch.multinomial(logp.exp(), 1)[:, 0]
    return tok, logp.gather(-1, tok[:, None])[:, 0]


def _play_cached(model: Any, tokenizer: Any, batch: list[_Episode], *, max_turn_tokens: int, greedy: bool,
                 temperature: float, top_p: float, top_k: int, stop: list[int], pad: int, eos: int | None,
                 limit: int, device: Any, cache_arg: str) -> None:
    """Play ``batch`` to the end with one KV cache per batch: each turn feeds only the new tokens.

    Rows advance in lock-step: a block of new tokens is left-padded per row and the padding is masked
    out of attention, with positions counted over real tokens only, so every row computes exactly what
    it would alone.
    """
    import torch

    rows = len(batch)
    attn = torch.zeros((rows, 0), dtype=torch.long, device=device)
    cache = _growing_cache()
    stop_t = torch.tensor(stop, device=device)

    def feed(blocks: list[list[int]]) -> Any:
        nonlocal attn
        width = max(max(len(b) for b in blocks), 1)
        ids = torch.full((rows, width), pad, dtype=torch.long, device=device)
        mask = torch.zeros((rows, width), dtype=torch.long, device=device)
        for i, b in enumerate(blocks):
            if b:
                ids[i, width - len(b):] = torch.tensor(b, device=device)
                mask[i, width - len(b):] = 1
        attn = torch.cat([attn, mask], dim=1)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)[:, -width:]
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1,
                        **{cache_arg: cache})
        return out.logits[:, -1, :]

    logits = feed([e.prompt_ids for e in batch])
    while True:
        for e in batch:
            if not e.game.done and len(e.prompt_ids) + len(e.completion) + max_turn_tokens + 32 > limit:
                e.game.done = True
        live = [not e.game.done for e in batch]
        if not any(live):
            return
        writing = list(live)
        toks: list[list[int]] = [[] for _ in batch]
        lps: list[list[float]] = [[] for _ in batch]
        for _ in range(max_turn_tokens):
            tok, lp = _pick(logits, greedy, temperature, top_p, top_k)
            col = []
            for i in range(rows):
                if writing[i]:
                    t = int(tok[i])
                    toks[i].append(t)
                    lps[i].append(float(lp[i]))
                    col.append([t])
                    if bool((stop_t == t).any()):
                        writing[i] = False
                else:
                    col.append([])
            if not any(writing):
                break  # the last column goes in with the replies: one forward less per turn
            logits = feed(col)
            col = [[] for _ in batch]
        logits = feed([c + (_answer(e, tokenizer, toks[i], lps[i], eos) if live[i] else [])
                       for i, (e, c) in enumerate(zip(batch, col, strict=True))])


@functools.cache
def _growing_layer_class() -> type:
    """A KV-cache layer that writes into a buffer doubled when full (``transformers``' ``DynamicLayer`` concatenates
    on every token: quadratic copying over a long multi-turn episode, half the rollout time of the embedded model)."""
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def lazy_initialization(self, key_states: Any, value_states: Any) -> None:
            super().lazy_initialization(key_states, value_states)
            self._kbuf = self._vbuf = None
            self._len = 0

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, w = self._len, key_states.shape[-2]
            if self._kbuf is None or n + w > self._kbuf.shape[-2]:
                cap = max(2 * (n + w), 64)
                kbuf = key_states.new_empty((*key_states.shape[:-2], cap, key_states.shape[-1]))
                vbuf = value_states.new_empty((*value_states.shape[:-2], cap, value_states.shape[-1]))
                if n:
                    kbuf[..., :n, :] = self._kbuf[..., :n, :]
                    vbuf[..., :n, :] = self._vbuf[..., :n, :]
                self._kbuf, self._vbuf = kbuf, vbuf
            self._kbuf[..., n : n + w, :] = key_states
            self._vbuf[..., n : n + w, :] = value_states
            self._len = n + w
            self.keys, self.values = self._kbuf[..., : self._len, :], self._vbuf[..., : self._len, :]
            return self.keys, self.values

    return GrowingLayer


def _growing_cache() -> Any:
    from transformers.cache_utils import Cache

    return Cache(layer_class_to_replicate=_growing_layer_class())


def _answer(e: _Episode, tokenizer: Any, toks: list[int], lps: list[float], eos: int | None) -> list[int]:
    """Record the model's turn ``toks``, play it, and return the environment's reply tokens (also recorded)."""
    text = tokenizer.decode(toks, skip_special_tokens=True)
    ended_by_eos = eos is not None and bool(toks) and toks[-1] == eos
    e.add(toks, model=True, logprobs=lps)
    turn = text.split("\n", 1)[0]
    e.turns.append(turn)
    reply = e.game.play(turn).reply + "\n"
    if not text.endswith("\n") and not ended_by_eos:
        reply = "\n" + reply  # the turn ran out of tokens: the environment closes its line
    if ended_by_eos and not e.game.done:
        e.turns.append("give up")
        reply += e.game.play("give up").reply + "\n"
    ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
    e.add(ids, model=False)
    return ids


def _one_turn(model: Any, tokenizer: Any, batch: list[_Episode], gen_kwargs: dict[str, Any], device: Any,
              stop: list[int], pad: int, eos: int | None) -> None:
    import torch

    seqs = [e.prompt_ids + e.completion for e in batch]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):  # left padding
        ids[i, width - len(s):] = torch.tensor(s)
        mask[i, width - len(s):] = 1
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), **gen_kwargs)
    new = out.sequences[:, width:].tolist()
    logps = torch.stack(out.scores, dim=1).float().log_softmax(-1) if out.scores else None
    for i, e in enumerate(batch):
        toks = new[i]
        end = next((k + 1 for k, t in enumerate(toks) if t in stop), None)
        if end is None and "stop_strings" in gen_kwargs:  # a multi-character token holding the newline
            end = next((k + 1 for k in range(len(toks)) if "\n" in tokenizer.decode(toks[: k + 1])), None)
        toks = toks[:end] if end is not None else [t for t in toks if t != pad] or toks[:1]
        lp = [float(logps[i, k, t]) for k, t in enumerate(toks)] if logps is not None else [0.0] * len(toks)
        _answer(e, tokenizer, toks, lp, eos)


def conversation_ids(tokenizer: Any, conversation: Sequence[tuple[str, str]]) -> tuple[list[int], list[int]]:
    """``(ids, model_mask)`` of a conversation (``[("env", prompt), ("agent", turn), ("env", reply), ...]``,
    as :func:`countdown_gym.turn_trace.conversation` gives) in the token layout of :func:`play_episodes`:
    the prompt with the tokenizer's special tokens, then each message and its newline; ``model_mask`` is 1
    on the agent's tokens (what supervised training learns), 0 elsewhere."""
    (role, prompt), rest = conversation[0], conversation[1:]
    if role != "env":
        raise ValueError(f"a conversation starts with the environment's prompt, got a {role!r} message")
    ids = list(tokenizer(prompt + "\n")["input_ids"])
    mask = [0] * len(ids)
    for role, text in rest:
        piece = tokenizer(text + "\n", add_special_tokens=False)["input_ids"]
        ids += piece
        mask += [1 if role == "agent" else 0] * len(piece)
    return ids, mask


def make_rollout_func(
    problems: Sequence[Problem],
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_turn_tokens: int = DEFAULT_MAX_TURN_TOKENS,
    prompt_style: str = "compact",
    batch_size: int = 256,
) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """A ``rollout_func`` for ``trl.GRPOTrainer``: plays each prompt's problem as a multi-turn episode.

    The dataset's ``prompt`` column must hold ``turn_prompt(problem, prompt_style, max_turns)`` of
    one of ``problems`` (see :func:`rollout_dataset`). Returns TRL's ``prompt_ids``,
    ``completion_ids``, ``logprobs`` and ``env_mask``, plus ``turn_replay`` (each rollout's
    :class:`~countdown_gym.turn_game.TurnReplay`, for the reward functions) and ``turn_index``
    (for per-step credit). Sampling follows the trainer's ``temperature``, ``top_p`` and ``top_k``.
    """
    by_prompt = {turn_prompt(p, prompt_style, max_turns): p for p in problems}

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        chosen = []
        for prompt in prompts:
            if not isinstance(prompt, str):
                raise TypeError("the multi-turn rollout takes plain-text prompts; chat models with a tool template "
                                "use countdown_gym.integrations.trl_env (environment_factory) instead")
            if prompt not in by_prompt:
                raise KeyError(f"prompt {prompt!r:.80} is not the turn prompt of any problem given to make_rollout_func")
            chosen.append(by_prompt[prompt])
        args = trainer.args
        model = trainer.accelerator.unwrap_model(trainer.model)
        rollouts = play_episodes(
            model, trainer.processing_class, chosen, max_turns=max_turns, max_turn_tokens=max_turn_tokens,
            temperature=args.temperature, top_p=args.top_p, top_k=args.top_k or 0, batch_size=batch_size,
            prompt_style=prompt_style,
        )
        return rollout_outputs(rollouts)

    return rollout_func


def rollout_outputs(rollouts: Sequence[TurnRollout]) -> dict[str, list[Any]]:
    """The dict a TRL ``rollout_func`` returns for ``rollouts``."""
    return {
        "prompt_ids": [r.prompt_ids for r in rollouts],
        "completion_ids": [r.completion_ids for r in rollouts],
        "logprobs": [r.logprobs for r in rollouts],
        "env_mask": [r.env_mask for r in rollouts],
        "turn_index": [r.turn_index for r in rollouts],
        "turn_replay": [r.replay for r in rollouts],
    }


def rollout_dataset(problems: Sequence[Problem], *, max_turns: int = DEFAULT_MAX_TURNS, prompt_style: str = "compact") -> Any:
    """A ``datasets.Dataset`` with the ``prompt`` column :func:`make_rollout_func` expects, plus ``numbers`` and ``target``."""
    from datasets import Dataset

    return Dataset.from_dict({
        "prompt": [turn_prompt(p, prompt_style, max_turns) for p in problems],
        "numbers": [[int(x) for x in p.numbers] for p in problems],
        "target": [int(p.target) for p in problems],
    })
