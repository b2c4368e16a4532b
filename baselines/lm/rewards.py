"""The GRPO baseline's rewards beyond the registry (:mod:`countdown_gym.rewards.variants`): the critics a variant
``needs`` (:data:`LOADERS`) and CLIPO's TRL reward function (:class:`CLIPOReward`); ``docs/llm_grpo.md`` explains them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from importlib import import_module
from typing import Any

from countdown_gym.integrations.trl import completion_replays, log_metrics
from countdown_gym.rewards.variants import (  # noqa: F401  (re-exported)
    TEXT_VARIANT_WEIGHTS,
    get_variant,
    monitored,
    parse_reward_spec,
)

VARIANTS = TEXT_VARIANT_WEIGHTS
"""Named reward variants (the ``text`` ones of ``countdown_gym.rewards.variants``): term -> weight."""


LOADERS: dict[str, Callable[[], Any]] = {"critic": lambda: import_module("critics").load_critic(),
                                         "text_critic": lambda: import_module("critics.text_critic").load_text_critic()}
"""The shipped critics a reward variant ``needs``, by kind (CLIPO is built by the run: ``run_rewards``)."""


def load_needs(names: Iterable[str], given: dict[str, Any] | None = None) -> dict[str, Any]:
    """``given`` plus, loaded, every scorer the variants ``names`` need that it lacks."""
    out = dict(given or {})
    for name in names:
        need = get_variant(name, "text").needs
        if need in LOADERS and out.get(need) is None:
            out[need] = LOADERS[need]()
    return out


__all__ = ["LOADERS", "VARIANTS", "CLIPOReward", "load_needs", "monitored", "parse_reward_spec"]


class CLIPOReward:
    """The CLIPO contrastive reward as a TRL reward function: ``max(-lambda * L_CL, -0.5)`` for correct anchors in groups
    with >= 2 correct and >= 1 incorrect rollout, else 0.

    Each completion's last hidden state (a no-grad forward of the policy) is mean-pooled over its tokens, then one
    ``critics.clipo.CLIPOTrainer`` step over the whole generation batch gives the rewards (from the loss before the
    head's update); groups are ``num_generations`` consecutive rows, gathered over processes. Call :meth:`bind` with
    the trainer before training.
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

        from baselines.lm.generation import evaluating, prompt_token_ids
        from critics.clipo import mean_pool

        if self.model is None:
            raise RuntimeError("CLIPOReward is not bound to a model: call .bind(trainer) after building the trainer")
        prompt_ids = prompt_token_ids(self.processing_class, prompts)
        pad = self.processing_class.pad_token_id or 0
        device = next(self.model.parameters()).device
        padded = functools.partial(torch.nn.utils.rnn.pad_sequence, batch_first=True)  # right padding: positions 0..len-1
        chunks = []
        with evaluating(self.model):
            for start in range(0, len(prompt_ids), self.forward_batch_size):
                end = start + self.forward_batch_size
                rows = list(zip(prompt_ids[start:end], completion_ids[start:end], strict=True))
                ids = padded([torch.tensor([*p, *c], dtype=torch.long) for p, c in rows], padding_value=pad)
                attn = padded([torch.ones(len(p) + len(c), dtype=torch.long) for p, c in rows])
                cmask = padded([torch.tensor([0] * len(p) + [1] * len(c), dtype=torch.long) for p, c in rows])
                pos = (attn.cumsum(-1) - 1).clamp(min=0)
                out = self.model(input_ids=ids.to(device), attention_mask=attn.to(device), position_ids=pos.to(device),
                                 output_hidden_states=True)
                chunks.append(mean_pool(out.hidden_states[-1].float(), cmask.to(device)))
        return torch.cat(chunks, dim=0)

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Sequence[Sequence[int]], **kwargs: Any) -> list[float]:
        import torch

        correct = torch.tensor([r.verdict.correct for r in completion_replays(completions, kwargs)], dtype=torch.bool)
        emb = self.embed(prompts, completion_ids)
        n_local = emb.shape[0]
        multi = self.accelerator is not None and self.accelerator.num_processes > 1
        if multi:
            emb = self.accelerator.gather(emb.contiguous())
            correct = self.accelerator.gather(correct.long().to(emb.device)).cpu().bool()  # NCCL has no bool
        if emb.shape[0] % self.num_generations:
            raise ValueError(f"the generation batch ({emb.shape[0]} rows) is not a whole number of groups of {self.num_generations}")
        group_ids = torch.arange(emb.shape[0]) // self.num_generations
        rewards = self.clipo.step(emb, correct, group_ids).detach().float().reshape(-1)
        if multi:
            from accelerate.utils import broadcast

            rewards = broadcast(rewards.to(emb.device).contiguous(), from_process=0).cpu()
            start = self.accelerator.process_index * n_local
            rewards = rewards[start : start + n_local]
        rewards = rewards.cpu()
        log_metrics(kwargs, {"clipo/active_frac": float((rewards != 0).float().mean()),
                             **{f"clipo/{k}": v for k, v in getattr(self.clipo, "last_stats", {}).items()}})
        return [float(x) for x in rewards]
