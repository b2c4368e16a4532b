"""Multi-turn rollouts of any Hugging Face causal LM, and TRL's ``rollout_func`` built on them.

For models without a tool-calling chat template: the model writes one turn (up to a newline), the game
(:class:`~countdown_gym.game.turn_game.TurnEpisode`) answers its reply line, appended as tokens, until the episode
ends. A rollout is one token stream ``prompt | turn | reply | ... | <eos>``; the environment's tokens have
``env_mask = 0``, so TRL trains only on the model's. :func:`play_episodes` plays them (the GRPO baseline, its
validation and evaluation); :func:`make_rollout_func` wraps it for ``trl.GRPOTrainer(rollout_func=...)``.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from countdown_gym.envs.problem_source import check_playable
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import describe_value
from countdown_gym.game.turn_format import TURN_END, line, transcript, turn_prompt
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS, TurnReplay, check_budget, turn_replay
from countdown_gym.inference.decoders import make_decoder
from countdown_gym.inference.engine import PEEK_FROM, REPLY_MARGIN, Engine, Episode, Sampler, TextCache, play_turn

DEFAULT_MAX_TURN_TOKENS = 12
"""Token budget of one agent turn (``37-29`` is 3 tokens for the embedded model)."""


@dataclass
class TurnRollout:
    """One multi-turn episode as tokens: ``completion_ids`` (the model's and the environment's tokens after the
    prompt), and per token ``env_mask`` (1: the model's), ``logprobs`` (the sampling log-probability; 0.0 for the
    environment's) and ``turn_index`` (the model token's agent turn; -1 for the environment's); ``replay``: the game.
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
        return transcript(text for pair in zip(self.turns, self.replay.replies, strict=False) for text in pair)


def turn_prompts(problems: Sequence[Problem], style: str, max_turns: int) -> list[str]:
    """The first message of each problem's episode (the dataset's ``prompt`` column, the rollout function's keys);
    ``TypeError`` unless ``problems`` is a sequence (a list, not a generator) of :class:`Problem`; ``ValueError`` for
    one ``CountdownMultiTurn-v0`` refuses (:func:`check_playable`: one number, won before a move, no legal move)."""
    if isinstance(problems, str) or not isinstance(problems, Sequence) or not all(isinstance(p, Problem) for p in problems):
        raise TypeError(f"problems must be a sequence of Problem, got {describe_value(problems)}")
    for p in problems:
        check_playable(p, len(p.numbers))
    return [turn_prompt(p, style, max_turns) for p in problems]


_STOPS: weakref.WeakKeyDictionary[Any, tuple[Any, tuple[tuple[int, ...], bool]]] = weakref.WeakKeyDictionary()
""":func:`_stop_ids` per tokenizer, with the vocabulary size and EOS it was read for (a rollout per GRPO step)."""


def _stop_ids(tokenizer: Any) -> tuple[list[int], bool]:
    """Token ids that end a turn, and whether a newline is one token of its own (else ``stop_strings`` is used):
    then every token holding one (``"\\n\\n"``, ``".\\n"``) ends a turn too. Read once per tokenizer (the whole
    vocabulary is decoded), again if its size or EOS changes."""
    eos = tokenizer.eos_token_id
    key = (len(tokenizer), eos)
    if (cached := _STOPS.get(tokenizer)) is not None and cached[0] == key:
        return list(cached[1][0]), cached[1][1]
    eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    nl = tokenizer(TURN_END, add_special_tokens=False)["input_ids"]
    if len(nl) == 1 and tokenizer.decode(nl) == TURN_END:
        backend = getattr(tokenizer, "backend_tokenizer", None)  # a fast tokenizer's: 7x batch_decode's speed
        pieces = (backend.decode_batch if backend else tokenizer.batch_decode)([[i] for i in range(len(tokenizer))])
        ids, newline_token = [i for i, piece in enumerate(pieces) if TURN_END in piece] + eos_ids, True
    else:
        ids, newline_token = eos_ids, False
    with contextlib.suppress(TypeError):  # a tokenizer that cannot be weakly referenced is read each time
        _STOPS[tokenizer] = (key, (tuple(ids), newline_token))
    return ids, newline_token


def play_episodes(model: Any, tokenizer: Any, problems: Sequence[Problem], *, max_turns: int = DEFAULT_MAX_TURNS,
                  max_turn_tokens: int = DEFAULT_MAX_TURN_TOKENS, max_length: int | None = None, greedy: bool = False,
                  temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, batch_size: int = 256,
                  prompt_style: str = "compact", decoder: str = "auto", look_every: int | None = None,
                  peek_from: int = PEEK_FROM, graphs: bool | None = None, stats: dict[str, float] | None = None,
                  stop_at_dead_end: bool | int = False) -> list[TurnRollout]:
    """Play one multi-turn episode of each problem with ``model``, ``batch_size`` at a time (the engine of
    :mod:`countdown_gym.inference.engine`).

    A turn ends at a newline (or after ``max_turn_tokens`` tokens); the model's EOS plays what it wrote, then ``give
    up``. ``max_length`` (default and at most: the model's position limit) bounds prompt plus completion (an episode
    about to pass it is truncated; a prompt with no room for one turn is a ``ValueError``). Sampling: ``temperature`` / ``top_p`` / ``top_k``, or ``greedy``. ``decoder``:
    ``direct`` (Llama / Qwen2 from their weights), ``hf`` (the model's forward) or ``auto``. ``look_every``: decode
    steps between reads of the finished turns (default: 1 on the CPU, ``max_turn_tokens`` on an accelerator);
    ``peek_from``: from this many steps after a look, look as soon as no row writes (0: never). ``graphs``: CUDA
    graphs of the direct decoder (default: on CUDA). ``stats`` receives the engine's counters. ``stop_at_dead_end``:
    stop after a move that loses the target (an int k: after k such turns in a row; ``TurnEpisode``).
    """
    batch_size = check_budget("batch_size", batch_size, allow_none=False)
    max_turn_tokens = check_budget("max_turn_tokens", max_turn_tokens, allow_none=False)
    look_every = check_budget("look_every", look_every)
    if isinstance(peek_from, bool) or not isinstance(peek_from, Integral) or peek_from < 0:
        raise ValueError(f"peek_from must be an int >= 0 (0: never), got {describe_value(peek_from)}")
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {', '.join(DECODERS)}, got {decoder!r}")
    if stats is not None and not isinstance(stats, dict):  # else an AttributeError once every episode was played
        raise TypeError(f"stats must be a dict (it receives the engine's counters) or None, got {describe_value(stats)}")
    sampler = Sampler(greedy=greedy, temperature=temperature, top_p=top_p, top_k=top_k or 0)
    stop, newline_token = _stop_ids(tokenizer)
    eos = tokenizer.eos_token_id if isinstance(tokenizer.eos_token_id, int) else None
    own = getattr(getattr(model, "generation_config", None), "eos_token_id", None)  # generate() stops at these too
    ends = frozenset(i for i in [eos, *(own if isinstance(own, list) else [own])] if isinstance(i, int))
    stop += sorted(ends.difference(stop))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos or 0)
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    limit = check_budget("max_length", max_length) or positions or 4096
    if positions and limit > positions:
        raise ValueError(f"max_length={limit} passes the model's max_position_embeddings ({positions})")
    prompts = turn_prompts(problems, prompt_style, max_turns)
    episodes = [Episode(p, prompt, list(tokenizer(prompt)["input_ids"]), max_turns, stop_at_dead_end=stop_at_dead_end)
                for p, prompt in zip(problems, prompts, strict=True)]
    for e in episodes:
        if not e.room_for_a_turn(max_turn_tokens, limit):
            raise ValueError(f"no room for a turn of {e.problem}: its prompt of {len(e.prompt_ids)} tokens, a turn of "
                             f"max_turn_tokens={max_turn_tokens}, {REPLY_MARGIN} reply tokens and the EOS pass max_length={limit}")
    texts = TextCache(tokenizer)
    was_training = model.training
    model.eval()
    try:
        dec = (make_decoder(model, min(batch_size, len(episodes)), limit, direct=DECODERS[decoder], graphs=graphs)
               if newline_token and episodes else None)
        if dec is not None:
            every = look_every or (1 if dec.device.type == "cpu" else max_turn_tokens)
            engine = Engine(dec, texts, sampler=sampler, stop=stop, eos=ends, pad=pad, max_turn_tokens=max_turn_tokens,
                            limit=limit, look_every=every, peek_from=peek_from)
            engine.run(episodes)
            if stats is not None:
                stats.update(engine.stats, graphs=getattr(dec, "captured", 0))
        else:
            _play_with_generate(model, tokenizer, texts, episodes, sampler=sampler, stop=stop, newline_token=newline_token,
                                pad=pad, eos=ends, max_turn_tokens=max_turn_tokens, limit=limit, batch_size=batch_size)
    finally:
        model.train(was_training)
    for e in episodes:
        if eos is not None and e.completion[-1:] != [eos]:
            e.add([eos], model=False)
    return [TurnRollout(e.problem, e.prompt, e.prompt_ids, e.completion, e.mask, e.logprobs, e.turn_index, e.turns,
                        turn_replay(e.game, e.results)) for e in episodes]


DECODERS = {"auto": None, "direct": True, "hf": False}
"""``play_episodes(decoder=...)``: the value passed to :func:`~countdown_gym.inference.decoders.make_decoder`."""


def _finite_logits(temperature: float, ids: Any, scores: Any) -> Any:
    """``scores``, unless they or ``scores / temperature`` (what sampling reads) hold a NaN or +inf: a ValueError then,
    as the engine's (``generate()`` failed inside ``torch.multinomial`` on them)."""
    if bool((scores.isnan() | (scores / temperature).isposinf()).any()):
        raise ValueError("the model's logits are NaN or infinite (or a temperature so small that dividing by it "
                         "overflows them)")
    return scores


def _play_with_generate(model: Any, tokenizer: Any, texts: TextCache, episodes: list[Episode], *, sampler: Sampler,
                        stop: list[int], newline_token: bool, pad: int, eos: frozenset[int], max_turn_tokens: int,
                        limit: int, batch_size: int) -> None:
    """Turn by turn with ``generate()``, re-reading each conversation: for tokenizers with no newline token of its
    own (a turn then ends at the ``stop_strings`` newline) and models whose forward takes no KV cache. It samples
    as the engine does, whatever the model's generation config says."""
    import torch
    from torch.nn.utils.rnn import pad_sequence
    from transformers import GenerationConfig

    gen_kwargs: dict[str, Any] = {"max_new_tokens": max_turn_tokens, "pad_token_id": pad, "eos_token_id": stop or None,
                                  "output_scores": True, "return_dict_in_generate": True}
    if not newline_token:
        gen_kwargs.update(stop_strings=[TURN_END], tokenizer=tokenizer)
    if sampler.greedy:
        gen_kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
    else:
        gen_kwargs.update(do_sample=True, temperature=sampler.temperature, top_p=sampler.top_p, top_k=sampler.top_k,
                          logits_processor=[functools.partial(_finite_logits, sampler.temperature)])
    stop_set = frozenset(stop)  # every generated token is looked up (a chat vocabulary: thousands of stop ids)
    device = next(model.parameters()).device
    own, model.generation_config = model.generation_config, GenerationConfig()  # none of the model's own knobs
    try:
        for start in range(0, len(episodes), batch_size):
            chunk = episodes[start : start + batch_size]
            while True:
                for e in chunk:  # room for one more turn and its reply, or the episode is cut here
                    if not e.game.done and not e.room_for_a_turn(max_turn_tokens, limit):
                        e.game.done = True
                active = [e for e in chunk if not e.game.done]
                if not active:
                    break
                seqs = [torch.tensor(e.prompt_ids + e.completion) for e in active]
                ids = pad_sequence(seqs, batch_first=True, padding_value=pad, padding_side="left")
                mask = pad_sequence([torch.ones_like(s) for s in seqs], batch_first=True, padding_side="left")
                width = ids.shape[1]
                with torch.no_grad():
                    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), **gen_kwargs)
                new = out.sequences[:, width:].tolist()
                logps = torch.stack(out.scores, dim=1).float().log_softmax(-1) if out.scores else None
                for i, e in enumerate(active):
                    toks = new[i]
                    end = next((k + 1 for k, t in enumerate(toks) if t in stop_set), None)
                    if end is None and not newline_token:  # a multi-character token holding the newline
                        end = next((k + 1 for k in range(len(toks)) if TURN_END in tokenizer.decode(toks[: k + 1])), None)
                    toks = toks[:end]  # no end: the budget's tokens, none of them padding
                    lp = [float(logps[i, k, t]) for k, t in enumerate(toks)] if logps is not None else [0.0] * len(toks)
                    e.add_reply(texts.ids_many([play_turn(e, texts, toks, lp, eos)])[0], limit)
    finally:
        model.generation_config = own


def conversation_ids(tokenizer: Any, conversation: Sequence[tuple[str, str]]) -> tuple[list[int], list[int]]:
    """``(ids, model_mask)`` of a conversation (``[("env", prompt), ("agent", turn), ("env", reply), ...]``,
    as :func:`countdown_gym.game.turn_trace.conversation` gives) in the token layout of :func:`play_episodes`:
    the prompt with the tokenizer's special tokens, then each message and its newline; ``model_mask`` is 1
    on the agent's tokens (what supervised training learns), 0 elsewhere."""
    (role, prompt), rest = conversation[0], conversation[1:]
    if role != "env":
        raise ValueError(f"a conversation starts with the environment's prompt, got a {role!r} message")
    ids = list(tokenizer(line(prompt))["input_ids"])
    mask = [0] * len(ids)
    for role, text in rest:
        piece = tokenizer(line(text), add_special_tokens=False)["input_ids"]
        ids += piece
        mask += [1 if role == "agent" else 0] * len(piece)
    return ids, mask


def make_rollout_func(problems: Sequence[Problem], *, max_turns: int = DEFAULT_MAX_TURNS,
                      max_turn_tokens: int = DEFAULT_MAX_TURN_TOKENS, prompt_style: str = "compact",
                      batch_size: int = 256,
                      stop_at_dead_end: bool | int = False) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """A ``rollout_func`` for ``trl.GRPOTrainer``: plays each prompt's problem as a multi-turn episode
    (:func:`play_episodes`, sampling with the trainer's ``temperature``, ``top_p`` and ``top_k``; a ``min_p``,
    ``repetition_penalty`` or ``generation_kwargs`` is a ``ValueError``).

    Each prompt must be ``turn_prompt(problem, prompt_style, max_turns)`` of one of ``problems``
    (:func:`rollout_dataset`). Returns TRL's ``prompt_ids``, ``completion_ids``, ``logprobs`` and ``env_mask``, plus
    ``turn_replay`` (each rollout's :class:`~countdown_gym.game.turn_game.TurnReplay`) and ``turn_index``.
    """
    by_prompt: dict[str, Problem] = {}
    for prompt, problem in zip(turn_prompts(problems, prompt_style, max_turns), problems, strict=True):
        if by_prompt.setdefault(prompt, problem) != problem:
            raise ValueError(f"{by_prompt[prompt]} and {problem} have one {prompt_style!r} turn prompt, so a rollout "
                             "could not tell which it plays; pass problems whose prompts differ (prompt_style='instruct' "
                             "states the rules)")

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
        knobs = [f"{k}={getattr(args, k)!r}" for k in unsampled_knobs({k: getattr(args, k, off[0]) for k, off in UNSAMPLED_KNOBS.items()})]
        if knobs:
            raise ValueError(f"the multi-turn rollout samples with temperature, top_p and top_k only; the trainer's "
                             f"{', '.join(knobs)} would be ignored")
        model = trainer.accelerator.unwrap_model(trainer.model)
        rollouts = play_episodes(
            model, trainer.processing_class, chosen, max_turns=max_turns, max_turn_tokens=max_turn_tokens,
            temperature=args.temperature, top_p=args.top_p, top_k=args.top_k or 0, batch_size=batch_size,
            prompt_style=prompt_style, stop_at_dead_end=stop_at_dead_end,
        )
        return rollout_outputs(rollouts)

    return rollout_func


UNSAMPLED_KNOBS = {"min_p": (None, 0.0), "repetition_penalty": (1.0,), "generation_kwargs": (None, {})}
"""Sampling fields of TRL's ``GRPOConfig`` the rollout function cannot honour, and their values that change nothing."""


def unsampled_knobs(values: Mapping[str, Any]) -> list[str]:
    """The :data:`UNSAMPLED_KNOBS` that ``values`` (GRPOConfig fields by name) set to something that would matter."""
    return [k for k, off in UNSAMPLED_KNOBS.items() if values.get(k, off[0]) not in off]


def rollout_outputs(rollouts: Sequence[TurnRollout]) -> dict[str, list[Any]]:
    """The dict a TRL ``rollout_func`` returns for ``rollouts``."""
    return {"prompt_ids": [r.prompt_ids for r in rollouts], "completion_ids": [r.completion_ids for r in rollouts],
            "logprobs": [r.logprobs for r in rollouts], "env_mask": [r.env_mask for r in rollouts],
            "turn_index": [r.turn_index for r in rollouts], "turn_replay": [r.replay for r in rollouts]}


def rollout_dataset(problems: Sequence[Problem], *, max_turns: int = DEFAULT_MAX_TURNS, prompt_style: str = "compact") -> Any:
    """A ``datasets.Dataset`` with the ``prompt`` column :func:`make_rollout_func` expects, plus ``numbers`` and ``target``."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": turn_prompts(problems, prompt_style, max_turns),
                              "numbers": [[int(x) for x in p.numbers] for p in problems],
                              "target": [int(p.target) for p in problems]})


def rollout_task(problems: Sequence[Problem],
                 **options: Any) -> tuple[Any, Callable[[list[Any], Any], dict[str, list[Any]]]]:
    """The ``train_dataset`` and the ``rollout_func`` of a multi-turn ``GRPOTrainer`` on ``problems``:
    :func:`rollout_dataset` and :func:`make_rollout_func` (``options``: its keywords), with one turn budget and
    prompt style, so that the rollout function finds each of the dataset's prompts."""
    rollout_func = make_rollout_func(problems, **options)
    dataset = rollout_dataset(problems, max_turns=options.get("max_turns", DEFAULT_MAX_TURNS),
                              prompt_style=options.get("prompt_style", "compact"))
    return dataset, rollout_func
