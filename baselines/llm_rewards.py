"""TRL reward functions for Countdown GRPO, all computed by replaying the completion.

Every function here has TRL's reward signature ``f(prompts, completions, completion_ids, **kwargs)
-> list[float]`` and reads the dataset column ``problem`` (a :meth:`Problem.to_dict` JSON string)
from ``kwargs``; in the multi-turn mode it reads the ``turn_replay`` the rollout function returns
(:func:`countdown_gym.integrations.trl_rollout.make_rollout_func`: the episode as the environment
played it, with the same ``verdict`` and ``transitions``). Each completion is replayed once through CountdownText-v0's
:func:`~countdown_gym.envs.text.replay_completion` (cached per ``(problem, completion)``), so the
verifier verdict, the transition records and the invalid-step count have a single source of truth.

Terms (TRL adds ``weight * term`` over the terms, then normalises within each prompt group):

========================  =====================================================================
``sparse``                1 if the final answer is correct (``verify``), else 0
``format``                1 if the final answer is in an <answer> tag or <Solution> block and parses
                          (right or wrong), else 0
``oracle``                mean over the completion's moves of ``oracle_term(t, "reachable")``:
                          +1 for a valid move that keeps the target reachable, -1 otherwise;
                          0 when the completion states no move. In ``[-1, 1]``.
``oracle_perfect``        the seed paper's perfect-move oracle: mean of ``oracle_term(t, "perfect")``
                          (1 for a valid move on a solution path, else 0). In ``[0, 1]``.
``critic``                mean over moves of ``critic_terms(critic, transitions)``: the shipped
                          contrastive critic's cosine score of each new state vs the target, -1 for
                          an invalid move; 0 without moves. In ``[-1, 1]``.
``text_critic``           the same per-move mean with the text critic (``critics.text_critic``, the seed
                          paper's architecture A) as the scorer. In ``[-1, 1]``.
``clipo``                 CLIPO: ``max(-lambda * L_CL, -0.5)`` for correct anchors in groups with
                          ≥ 2 correct and ≥ 1 incorrect rollout, else 0 (see :class:`CLIPOReward`).
========================  =====================================================================

Weights per reward variant are in :data:`VARIANTS`; ``docs/llm_grpo.md`` explains the choices.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from countdown_gym.envs.text import Replay, replay_completion
from countdown_gym.integrations import critic_score, format_score, oracle_score, sparse_score
from countdown_gym.integrations.verl import DEFAULT_WEIGHTS
from countdown_gym.problem import Problem

TERMS: tuple[str, ...] = ("sparse", "format", "oracle", "oracle_perfect", "critic", "clipo", "text_critic")
"""Every reward term a run can weight."""

MONITORED: dict[str, float] = {"sparse": 0.0, "format": 0.0, "oracle": 0.0, "oracle_perfect": 0.0}
"""Cheap terms always computed and logged (weight 0 unless the variant weights them)."""

_W = DEFAULT_WEIGHTS  # sparse 1, format 0.1, oracle / oracle_perfect / critic 0.5 (shared with verl)
VARIANTS: dict[str, dict[str, float]] = {
    "sparse": {"sparse": _W["sparse"], "format": _W["format"]},
    "oracle": {"sparse": _W["sparse"], "format": _W["format"], "oracle": _W["oracle"]},
    "oracle-perfect": {"sparse": _W["sparse"], "format": _W["format"], "oracle_perfect": _W["oracle_perfect"]},
    "critic": {"sparse": _W["sparse"], "format": _W["format"], "critic": _W["critic"]},
    "clipo": {"sparse": _W["sparse"], "format": _W["format"], "clipo": 1.0},
    "text-critic": {"sparse": _W["sparse"], "format": _W["format"], "text_critic": _W["critic"]},
}
"""Named reward variants: term -> weight. The dense terms are added to the outcome reward."""


def parse_reward_spec(spec: str) -> dict[str, float]:
    """Term weights from a variant name, ``+``-joined variants, and/or explicit ``term=weight`` parts.

    Examples: ``"sparse"``, ``"oracle+clipo"``, ``"sparse=1,oracle=0.25,format=0"``,
    ``"critic,oracle=0.2"`` (a variant, then an override).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"reward spec must be a non-empty string, got {spec!r}; variants: {sorted(VARIANTS)}")
    weights: dict[str, float] = {}
    explicit: dict[str, float] = {}  # term=weight parts override the variants wherever they stand
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        if "=" in part:
            name, _, value = part.partition("=")
            name = name.replace("-", "_")
            if name not in TERMS:
                raise ValueError(f"unknown reward term {name!r} in {spec!r}; terms: {list(TERMS)}")
            try:
                explicit[name] = float(value)
            except ValueError:
                explicit[name] = math.nan
            if not math.isfinite(explicit[name]):
                raise ValueError(f"weight of {name!r} must be a finite number, got {value!r} in {spec!r}")
            continue
        for variant in part.split("+"):
            if variant not in VARIANTS:
                raise ValueError(
                    f"unknown reward variant {variant!r} in {spec!r}; variants: {sorted(VARIANTS)} "
                    f"(or term=weight with terms {list(TERMS)})"
                )
            for name, w in VARIANTS[variant].items():
                weights[name] = max(weights.get(name, 0.0), w)
    weights.update(explicit)
    if not any(w != 0 for w in weights.values()):
        raise ValueError(f"reward spec {spec!r} gives every term weight 0: nothing to learn from")
    return weights


# --- replay (one source of truth) --------------------------------------------------------------


@lru_cache(maxsize=4096)
def problem_from_json(text: str) -> Problem:
    """The :class:`Problem` stored in a dataset's ``problem`` column (JSON of ``Problem.to_dict``)."""
    try:
        return Problem.from_dict(json.loads(text))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the dataset's 'problem' column must hold Problem.to_dict() JSON, got {text!r:.120}: {exc}") from None


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or a list of chat messages (the assistant's content)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return "".join(str(m.get("content", "")) for m in completion if m.get("role", "assistant") == "assistant")
    raise TypeError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}")


@lru_cache(maxsize=8192)
def _replay(problem: Problem, text: str) -> Replay:
    return replay_completion(problem, text)


def replay(problem: Problem | str, completion: Any) -> Replay:
    """Replay one completion (cached: the reward functions of one batch share the work)."""
    if isinstance(problem, str):
        problem = problem_from_json(problem)
    return _replay(problem, completion_text(completion))


def _replays(completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """The replay of each completion: a multi-turn rollout's own ``turn_replay`` (the environment played it
    already), else the completion text replayed through CountdownText-v0."""
    if kwargs.get("turn_replay") is not None:
        replays = kwargs["turn_replay"]
        if len(replays) != len(completions):
            raise ValueError(f"got {len(completions)} completions but {len(replays)} turn replays")
        return list(replays)
    problems = kwargs.get("problem")
    if problems is None:
        raise KeyError("the reward functions need the dataset column 'problem' (Problem.to_dict() JSON per row)")
    if len(problems) != len(completions):
        raise ValueError(f"got {len(completions)} completions but {len(problems)} problems")
    return [replay(p, c) for p, c in zip(problems, completions, strict=True)]


def replay_stats(replays: Sequence[Replay]) -> dict[str, float]:
    """Batch diagnostics: success, answer rate, fraction of completions with an invalid step, moves."""
    n = max(len(replays), 1)
    return {
        "replay/correct_frac": sum(r.verdict.correct for r in replays) / n,
        "replay/format_frac": sum(format_score(r) for r in replays) / n,
        "replay/invalid_frac": sum(r.invalid_steps > 0 for r in replays) / n,
        "replay/mean_moves": sum(len(r.transitions) for r in replays) / n,
    }


def _log(kwargs: Mapping[str, Any], stats: Mapping[str, float]) -> None:
    log_metric = kwargs.get("log_metric")
    if callable(log_metric):
        for k, v in stats.items():
            log_metric(k, v)


# --- the terms --------------------------------------------------------------------------------


def sparse_reward(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any) -> list[float]:
    """1.0 if the replayed final answer is correct, else 0.0; also logs the batch's replay stats."""
    replays = _replays(completions, kwargs)
    _log(kwargs, replay_stats(replays))
    return [sparse_score(r) for r in replays]


def format_reward(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any) -> list[float]:
    """1.0 if the final answer is tagged (``<answer>`` / ``<Solution>``) and parses, else 0.0."""
    return [format_score(r) for r in _replays(completions, kwargs)]


def oracle_reward(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any) -> list[float]:
    """Mean per-move reachability reward (+1 valid and target still reachable, -1 otherwise)."""
    return [oracle_score(r, "reachable") for r in _replays(completions, kwargs)]


def oracle_perfect_reward(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any) -> list[float]:
    """The seed paper's oracle: mean over moves of 1 for a perfect move (valid, on a solution path), else 0."""
    return [oracle_score(r, "perfect") for r in _replays(completions, kwargs)]


class CriticReward:
    """Mean of the learned critic's per-move scores (``critic_terms``); 0 for a completion without moves."""

    __name__ = "critic_reward"

    def __init__(self, critic: Any = None) -> None:
        if critic is None:
            from critics import load_critic

            critic = load_critic()
        self.critic = critic

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any) -> list[float]:
        return [critic_score(r, self.critic) for r in _replays(completions, kwargs)]


class TextCriticReward(CriticReward):
    """:class:`CriticReward` with the text critic (``critics.text_critic.load_text_critic()``) as the scorer."""

    __name__ = "text_critic_reward"

    def __init__(self, critic: Any = None) -> None:
        if critic is None:
            from critics.text_critic import load_text_critic

            critic = load_text_critic()
        super().__init__(critic)


REWARD_FUNCTIONS: dict[str, Callable[..., list[float]]] = {
    "sparse": sparse_reward,
    "format": format_reward,
    "oracle": oracle_reward,
    "oracle_perfect": oracle_perfect_reward,
}
"""The stateless reward functions by term name (``critic``, ``text_critic`` and ``clipo`` need objects)."""


# --- CLIPO ------------------------------------------------------------------------------------


def prompt_token_ids(processing_class: Any, prompts: Sequence[Any]) -> list[list[int]]:
    """Token ids of the prompts exactly as TRL's ``GRPOTrainer`` tokenizes them for generation."""
    if prompts and not isinstance(prompts[0], str):  # conversational: lists of chat messages
        out = processing_class.apply_chat_template(
            conversation=list(prompts), add_generation_prompt=True, tokenize=True, return_dict=True
        )
        return [list(ids) for ids in out["input_ids"]]
    return [list(ids) for ids in processing_class(text=list(prompts))["input_ids"]]


class CLIPOReward:
    """The CLIPO contrastive reward as a TRL reward function.

    For each completion: a no-grad forward of the policy over prompt + completion ids with
    ``output_hidden_states=True``, the last hidden state mean-pooled over the completion tokens
    (``critics.clipo.mean_pool``), then one :class:`critics.clipo.CLIPOTrainer` step over the whole
    generation batch: rewards come from the loss before the head's update. Groups are
    ``num_generations`` consecutive rows of the global batch; when the batch is spread over several
    processes, embeddings and correctness are gathered first, the main process's rewards are
    broadcast, and each process keeps its own slice. TRL adds the returned value to the other
    weighted terms before the group normalisation.

    Call :meth:`bind` with the trainer (its model and accelerator) before training.
    """

    __name__ = "clipo_reward"

    def __init__(self, clipo_trainer: Any, processing_class: Any, num_generations: int, forward_batch_size: int = 32) -> None:
        if num_generations < 2:
            raise ValueError(f"CLIPO needs groups of at least 2 rollouts, got num_generations={num_generations}")
        self.clipo = clipo_trainer
        self.processing_class = processing_class
        self.num_generations = num_generations
        self.forward_batch_size = forward_batch_size
        self.model: Any = None
        self.accelerator: Any = None

    def bind(self, trainer: Any = None, *, model: Any = None, accelerator: Any = None) -> CLIPOReward:
        """Use ``trainer``'s policy and accelerator (or the ``model`` / ``accelerator`` given)."""
        if trainer is not None:
            accelerator = trainer.accelerator
            model = accelerator.unwrap_model(trainer.model)
        if model is None:
            raise ValueError("CLIPOReward.bind needs a trainer or a model")
        self.model, self.accelerator = model, accelerator
        return self

    def embed(self, prompts: Sequence[Any], completion_ids: Sequence[Sequence[int]]) -> Any:
        """Mean-pooled last hidden states over the completion tokens: a float tensor ``[N, hidden]``."""
        import torch

        from critics.clipo import mean_pool

        if self.model is None:
            raise RuntimeError("CLIPOReward is not bound to a model: call .bind(trainer) after building the trainer")
        prompt_ids = prompt_token_ids(self.processing_class, prompts)
        pad = self.processing_class.pad_token_id
        pad = 0 if pad is None else pad
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        chunks = []
        try:
            with torch.no_grad():
                for start in range(0, len(prompt_ids), self.forward_batch_size):
                    rows = [
                        (list(p), list(c))
                        for p, c in zip(
                            prompt_ids[start : start + self.forward_batch_size],
                            completion_ids[start : start + self.forward_batch_size],
                            strict=True,
                        )
                    ]
                    width = max(len(p) + len(c) for p, c in rows)
                    ids = torch.full((len(rows), width), pad, dtype=torch.long)
                    attn = torch.zeros((len(rows), width), dtype=torch.long)
                    cmask = torch.zeros((len(rows), width), dtype=torch.long)
                    for i, (p, c) in enumerate(rows):  # right padding: positions are 0..len-1
                        ids[i, : len(p) + len(c)] = torch.tensor(p + c, dtype=torch.long)
                        attn[i, : len(p) + len(c)] = 1
                        cmask[i, len(p) : len(p) + len(c)] = 1
                    pos = (attn.cumsum(-1) - 1).clamp(min=0)
                    out = self.model(
                        input_ids=ids.to(device),
                        attention_mask=attn.to(device),
                        position_ids=pos.to(device),
                        output_hidden_states=True,
                    )
                    chunks.append(mean_pool(out.hidden_states[-1].float(), cmask.to(device)))
        finally:
            self.model.train(was_training)
        return torch.cat(chunks, dim=0)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Sequence[Sequence[int]], **kwargs: Any) -> list[float]:
        import torch

        correct = torch.tensor([r.verdict.correct for r in _replays(completions, kwargs)], dtype=torch.bool)
        emb = self.embed(prompts, completion_ids)
        n_local = emb.shape[0]
        multi = self.accelerator is not None and self.accelerator.num_processes > 1
        if multi:
            emb = self.accelerator.gather(emb.contiguous())
            correct = self.accelerator.gather(correct.long().to(emb.device)).cpu().bool()  # NCCL has no bool
        if emb.shape[0] % self.num_generations:
            raise ValueError(
                f"the generation batch ({emb.shape[0]} rows) is not a whole number of groups of {self.num_generations}"
            )
        group_ids = torch.arange(emb.shape[0]) // self.num_generations
        rewards = self.clipo.step(emb, correct, group_ids).detach().float().reshape(-1)
        if multi:
            from accelerate.utils import broadcast

            rewards = broadcast(rewards.to(emb.device).contiguous(), from_process=0).cpu()
            start = self.accelerator.process_index * n_local
            rewards = rewards[start : start + n_local]
        rewards = rewards.cpu()
        stats = {"clipo/active_frac": float((rewards != 0).float().mean())}
        stats.update({f"clipo/{k}": v for k, v in getattr(self.clipo, "last_stats", {}).items()})
        _log(kwargs, stats)
        return [float(x) for x in rewards]
