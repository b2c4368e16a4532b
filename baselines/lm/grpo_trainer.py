"""The GRPO trainer of a run: :class:`CountdownGRPOTrainer` (its docstring lists a step), and the bookkeeping its loss
uses to score only the model's own tokens and skip padding and rows without signal (``tests/test_grpo_trainer.py``
checks them against TRL's own path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trl import GRPOTrainer

from baselines.lm.step_credit import StepCredit
from countdown_gym.rewards.terms import Scorer

GROUPING_FREE_LOSSES = ("grpo", "sapo", "dr_grpo", "dapo", "cispo")
"""TRL loss types whose step loss does not depend on how the rows are split into micro-batches (not ``bnpo``)."""

MULTIMODAL_KEYS = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "spatial_shapes", "image_sizes",
                   "num_images", "num_tiles", "token_type_ids", "mm_token_type_ids", "image_position_ids")
LOGIT_SCALES = ("logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")
SMALL_LOGITS = 2**25
"""Scored tokens x vocabulary up to which the LM head's logits are computed whole (128 MB in float32); above it,
TRL's chunked kernel scores the same tokens without holding the logits."""
KERNEL_CHUNK = 32768
"""Vocabulary entries per tile of TRL's chunked kernel (TRL's own choice for its fused LM head)."""
FLAT_LOSSES = ("dapo", "cispo")
"""TRL loss types to which a row with a zero advantage adds nothing (without a KL term)."""
FLAT_ADVANTAGE = 1e-3
"""A row whose every advantage is under this fraction of the step's largest is left out of the loss's passes."""


def trim_padding(batch: dict[str, Any]) -> dict[str, Any]:
    """``batch`` without the trailing completion columns that are padding in every row; every per-token tensor of
    the completion's width is cut alike."""
    mask = batch.get("completion_mask")
    if mask is None or mask.ndim != 2 or any(batch.get(k) is not None for k in MULTIMODAL_KEYS):
        return batch
    width = mask.size(1)
    used = mask.any(dim=0).nonzero()
    keep = int(used.max()) + 1 if used.numel() else 1
    if keep >= width:
        return batch
    import torch

    return {k: v[:, :keep] if isinstance(v, torch.Tensor) and v.ndim >= 2 and v.size(1) == width
            and not k.startswith("prompt") else v for k, v in batch.items()}


def _is_row_field(value: Any) -> bool:
    """Whether a field of TRL's batch has one entry per row (not absent, not a step-wide scalar)."""
    import torch

    return value is not None and not (isinstance(value, torch.Tensor) and value.ndim == 0)


def _take_rows(batch: dict[str, Any], rows: Any) -> dict[str, Any]:
    """``batch`` with only ``rows`` (a 1-D index tensor), in that order; step-wide fields as they are."""
    picked = rows.tolist()
    return {k: v if not _is_row_field(v) else v[rows.to(v.device)] if hasattr(v, "device") else [v[j] for j in picked]
            for k, v in batch.items()}


def _split_rows(batch: dict[str, Any], parts: int) -> list[dict[str, Any]]:
    """``batch`` cut into ``parts`` consecutive micro-batches whose sizes differ by at most one row (slices)."""
    rows = len(next(v for v in batch.values() if _is_row_field(v)))
    bounds = [rows * i // parts for i in range(parts + 1)]
    return [{k: v[a:b] if _is_row_field(v) else v for k, v in batch.items()} for a, b in zip(bounds, bounds[1:], strict=False)]


def without_flat_rows(batch: dict[str, Any], min_rows: int) -> dict[str, Any]:
    """``batch`` without the rows whose every advantage is under :data:`FLAT_ADVANTAGE` of the largest (a group
    whose rewards are all equal: its advantage is rounding error); as it is when fewer than ``min_rows`` would be left."""
    import torch

    adv = batch["advantages"].abs()
    size = adv if adv.ndim == 1 else adv.amax(dim=1)
    keep = (size > FLAT_ADVANTAGE * size.max()).nonzero().flatten()
    if len(keep) < min_rows or len(keep) == len(size):
        return batch
    return _take_rows(batch, keep.to(torch.long))


def regroup_by_length(batches: list[dict[str, Any]], drop_flat: bool = False) -> list[dict[str, Any]]:
    """The rows of one step's micro-batches regrouped longest first (stable) into as many micro-batches; ``drop_flat``:
    first leave out the rows without advantage (:func:`without_flat_rows`)."""
    import torch

    merged: dict[str, Any] = {}
    for key, first in batches[0].items():
        values = [b[key] for b in batches]
        if not _is_row_field(first):
            merged[key] = first  # a step-wide scalar (num_items_in_batch) or an absent field
        elif isinstance(first, torch.Tensor):
            merged[key] = torch.cat(values, dim=0)
        else:
            merged[key] = [x for v in values for x in v]
    if drop_flat:
        merged = without_flat_rows(merged, min_rows=len(batches))
    order = torch.sort(merged["completion_mask"].sum(dim=1), descending=True, stable=True).indices
    return _split_rows(_take_rows(merged, order), len(batches))


class CountdownGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` as a Countdown run uses it. One optimizer step, in this order:

    1. **generate**: multi-turn episodes (``rollout_func``; environment tokens carry ``tool_mask`` 0), TRL's tool loop
       (``environment_factory``) or single-pass ``generate()``.
    2. **reward**: the weighted sum of the ``--rewards`` functions (a tool loop's own ``get_reward()`` column is
       logged at weight 0).
    3. **advantage**: TRL's group-normalised one, plus with ``step_credit`` each turn's advantage on its tokens.
    4. **loss** per micro-batch: :meth:`_prepare_inputs` regroups rows by length where the loss allows, drops flat
       rows where they add nothing and trims padding; :meth:`_get_per_token_logps_and_entropies` runs the LM head on
       the model's own tokens only (``completion_mask * tool_mask``).
    5. **update**: one optimizer step per generation batch (constant learning rate).

    Where a condition does not hold (PEFT, multimodal or wrapped models, scaled logits, passes without gradients)
    TRL's own path runs.
    """

    _scored_tokens: Any = None
    """While the loss's forward runs: ``completion_mask * tool_mask`` of its micro-batch, the positions scored."""

    def __init__(self, *args: Any, step_credit: StepCredit | None = None, **kwargs: Any) -> None:
        """TRL's arguments, and ``step_credit`` (it needs the multi-turn ``rollout_func``)."""
        if step_credit is not None and kwargs.get("rollout_func") is None:
            raise ValueError("per-step credit needs the multi-turn rollout_func "
                             "(countdown_gym.integrations.trl_rollout.make_rollout_func): it returns turn_index and turn_replay")
        self.step_credit = step_credit
        super().__init__(*args, **kwargs)
        factory = kwargs.get("environment_factory")
        if factory is not None:  # step 2: the environment's own reward column, logged at weight 0
            self.reward_weights[self.reward_func_names.index(type(factory()).__name__)] = 0.0

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """TRL's rollouts, rewards and advantages; with ``step_credit``, per-token advantages."""
        output = super()._generate_and_score_completions(inputs)
        if self.step_credit is not None:
            from accelerate.utils import gather_object

            mode = "train" if self.model.training else "eval"
            groups = self.num_generations if mode == "train" else self.num_generations_eval
            metrics = self.step_credit.add_turn_advantages(output, inputs, groups, gather_object,
                                                           self.accelerator.process_index)
            for name, value in metrics.items():
                self._metrics[mode][name].append(value)
        return output

    def _prepare_inputs(self, generation_batch: Any) -> dict[str, Any]:
        """TRL's micro-batch; at a fresh generation batch, the micro-batches regrouped and trimmed."""
        training = self.model.training
        every = self.args.steps_per_generation * self.num_iterations
        fresh = training and (self._step % every == 0 or self._buffered_inputs is None)
        inputs = super()._prepare_inputs(generation_batch)
        if not training:
            return trim_padding(inputs)
        if fresh:
            batches = self._buffered_inputs
            if self._grouping_free() and len(batches) > 1 and all("completion_mask" in b for b in batches):
                batches = regroup_by_length(batches, drop_flat=self._flat_rows_add_nothing())
            self._buffered_inputs = [trim_padding(b) for b in batches]
            inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
        return inputs

    def _grouping_free(self) -> bool:
        """Whether the step's loss and gradient are the same however its rows are grouped into micro-batches."""
        args = self.args
        return (self.loss_type in GROUPING_FREE_LOSSES and self.num_iterations == 1
                and args.steps_per_generation == args.gradient_accumulation_steps
                and getattr(self, "top_entropy_quantile", 1.0) >= 1.0
                and not getattr(self, "_entropy_bonus_enabled", False))

    def _flat_rows_add_nothing(self) -> bool:
        """Whether flat rows add nothing (:data:`FLAT_LOSSES`) and micro-batches may differ in size (one process)."""
        return self.loss_type in FLAT_LOSSES and self.beta == 0.0 and self.accelerator.num_processes == 1

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
        """TRL's loss, with the positions it counts held for :meth:`_get_per_token_logps_and_entropies`."""
        mask = inputs["completion_mask"]
        if inputs.get("tool_mask") is not None:
            mask = mask * inputs["tool_mask"]
        self._scored_tokens = mask
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._scored_tokens = None

    def _plain_head(self, model: Any) -> Any:
        """The model's LM head when this class can score it itself (a plain, unscaled ``nn.Linear``); else None."""
        from accelerate.utils import is_peft_model
        from torch import nn

        if is_peft_model(model) or self.accelerator.unwrap_model(model) is not model:
            return None
        config = getattr(model, "config", None)
        if config is None or config.get_text_config() is not config or getattr(config, "final_logit_softcapping", None):
            return None
        if any(getattr(config, name, None) not in (None, 1, 1.0) for name in LOGIT_SCALES):
            return None
        head = model.get_output_embeddings()
        return head if isinstance(head, nn.Linear) and hasattr(model, "base_model") else None

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                                           batch_size: int | None = None, compute_entropy: bool = False,
                                           compute_aux_loss: bool = False, **extra: Any) -> tuple[Any, Any, Any]:
        scored = self._scored_tokens
        plain = scored is not None and not compute_aux_loss and all(v is None for v in extra.values())
        head = self._plain_head(model) if plain else None
        if head is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss, **extra)
        # large logits: TRL's kernel, which never holds them all
        kernel = chunked_kernel() if int(scored.sum()) * head.weight.shape[0] > SMALL_LOGITS else None
        import torch
        import torch.nn.functional as F  # noqa: N812

        with self.accelerator.autocast():
            hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        keep = scored.bool()
        states = hidden[:, -logits_to_keep - 1:-1][keep]  # the position before each scored token predicts it
        labels = input_ids[:, -logits_to_keep:][keep]
        weight, bias = head.weight, head.bias
        context = self.accelerator.autocast()
        if self.args.cast_lm_head_to_fp32:  # as TRL's fused head: outside autocast
            states, weight, bias = states.float(), weight.float(), None if bias is None else bias.float()
            context = torch.autocast(states.device.type, enabled=False)
        entropy = None
        with context:
            if kernel is not None:
                outputs = ("log_probs", "entropy") if compute_entropy else ("log_probs",)
                per_token, entropy = kernel.apply(states, weight, bias, labels, self.temperature,
                                                  KERNEL_CHUNK, None, 1.0, outputs)[:2]
            else:
                logits = F.linear(states, weight, bias)
        if kernel is None:
            log_probs = (logits.float() / self.temperature).log_softmax(dim=-1)
            per_token = log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
            if compute_entropy:
                entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
        logps = per_token.new_zeros(keep.shape).masked_scatter(keep, per_token)
        entropies = None if entropy is None else entropy.new_zeros(keep.shape).masked_scatter(keep, entropy)
        return logps, entropies, None


def chunked_kernel() -> Any:
    """TRL's chunked log-probability kernel (in every TRL the ``llm`` extra allows: trl>=1.16)."""
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    return ChunkedLogProbFunction


def StepCreditGRPOTrainer(*args: Any, step_weights: Mapping[str, float], step_gamma: float = 1.0,  # noqa: N802
                          critic: Scorer | None = None, scorers: Mapping[str, Scorer] | None = None, **kwargs: Any) -> Any:
    """``CountdownGRPOTrainer`` with per-step credit (:meth:`StepCredit.of`); it needs the multi-turn ``rollout_func``."""
    credit = StepCredit.of(step_weights, step_gamma, critic, scorers)
    return CountdownGRPOTrainer(*args, step_credit=credit, **kwargs)


__all__ = ["CountdownGRPOTrainer", "StepCreditGRPOTrainer", "regroup_by_length", "trim_padding", "without_flat_rows"]
