"""The GRPO trainer's loss on the model's own tokens (baselines/lm/grpo_trainer.py) against TRL's own path:
log-probabilities, entropies, the step's loss and its gradients, on the shipped multi-turn model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from baselines.lm.grpo_trainer import regroup_by_length, trim_padding, without_flat_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TURN_MODEL = ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm-turns"


def _trainer(tmp_path: Path, loss_type: str = "dapo", micro: int = 4, accumulation: int = 4, fp32_head: bool = False) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig

    from baselines.lm.grpo_trainer import CountdownGRPOTrainer
    from baselines.lm.tiny_lm import derive_position_ids, load_pretrained

    if not (TURN_MODEL / "model.safetensors").exists():
        pytest.skip("the shipped multi-turn model is missing")
    model, tok = load_pretrained(TURN_MODEL)
    tok.padding_side = "left"
    config = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=micro, gradient_accumulation_steps=accumulation,
                        num_generations=4, max_completion_length=48, use_cpu=True, bf16=False, report_to=[],
                        loss_type=loss_type, temperature=0.7, seed=0, save_strategy="no",
                        cast_lm_head_to_fp32=fp32_head)
    data = Dataset.from_list([{"prompt": "Numbers: [1,2] Target: 3\n"}] * 16)
    trainer = CountdownGRPOTrainer(model=derive_position_ids(model), reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                                   args=config, train_dataset=data, processing_class=tok)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = accumulation
    return trainer


def _batch(rows: int, vocab: int, seed: int = 0) -> dict[str, Any]:
    """A step's completions as TRL holds them: left-padded prompts, right-padded completions of unequal lengths
    padded to the longest, the environment's tokens marked 0 in ``tool_mask``, one advantage per row."""
    g = torch.Generator().manual_seed(seed)
    prompt_len, width = 7, 40
    prompt_ids = torch.randint(3, vocab, (rows, prompt_len), generator=g)
    prompt_mask = torch.ones(rows, prompt_len, dtype=torch.long)
    completion_ids = torch.randint(3, vocab, (rows, width), generator=g)
    completion_mask = torch.zeros(rows, width, dtype=torch.long)
    for i in range(rows):
        prompt_mask[i, : int(torch.randint(0, 3, (1,), generator=g))] = 0  # left padding
        completion_mask[i, : int(torch.randint(5, width - 4, (1,), generator=g))] = 1  # right padding; the last 4 always
    prompt_ids = prompt_ids.masked_fill(prompt_mask == 0, 0)
    completion_ids = completion_ids.masked_fill(completion_mask == 0, 0)
    tool_mask = (torch.rand(rows, width, generator=g) < 0.3).long().masked_fill(completion_mask == 0, 1)
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "tool_mask": tool_mask,
            "advantages": torch.randn(rows, generator=g),
            "num_items_in_batch": (completion_mask * tool_mask).sum()}


def _grads(model: Any) -> list[Any]:
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def _assert_same_gradients(got: list[Any], want: list[Any], within: float = 1e-5) -> None:
    """Equal up to float32 summation order: each parameter's gradient within ``within`` (1e-5) of its norm."""
    for g, w in zip(got, want, strict=True):
        assert float((g - w).norm()) <= within * max(float(w.norm()), 1e-3), (float((g - w).norm()), float(w.norm()))


@pytest.mark.parametrize(("fp32_head", "chunked"), [(False, False), (True, False), (False, True), (True, True)])
def test_model_tokens_are_scored_as_trl_scores_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fp32_head: bool,
                                                     chunked: bool) -> None:
    """Log-probabilities and entropies on the positions the loss counts equal TRL's fused LM head (and their
    gradients), with the head under autocast or cast to float32, its logits whole or through TRL's chunked kernel
    (as for a large vocabulary); every other position is 0."""
    from trl import GRPOTrainer

    from baselines.lm import grpo_trainer

    if chunked:
        monkeypatch.setattr(grpo_trainer, "SMALL_LOGITS", 0)
        calls = []
        kernel = grpo_trainer.chunked_kernel()
        monkeypatch.setattr(grpo_trainer, "chunked_kernel", lambda: calls.append(1) or kernel)
    trainer = _trainer(tmp_path, fp32_head=fp32_head)
    model = trainer.model
    b = _batch(6, model.config.vocab_size)
    ids = torch.cat([b["prompt_ids"], b["completion_ids"]], 1)
    attn = torch.cat([b["prompt_mask"], b["completion_mask"]], 1)
    width = b["completion_ids"].size(1)
    scored = b["completion_mask"] * b["tool_mask"]
    weights = torch.randn(scored.shape, generator=torch.Generator().manual_seed(1))

    model.zero_grad()
    trl_logps, trl_entropy, _ = GRPOTrainer._get_per_token_logps_and_entropies(trainer, model, ids, attn, width, compute_entropy=True)
    ((trl_logps * scored * weights).sum() + (trl_entropy * scored).sum()).backward()
    trl_grads = _grads(model)

    model.zero_grad()
    trainer._scored_tokens = scored
    logps, entropy, _ = trainer._get_per_token_logps_and_entropies(model, ids, attn, width, compute_entropy=True)
    trainer._scored_tokens = None
    ((logps * scored * weights).sum() + (entropy * scored).sum()).backward()

    on = scored.bool()
    assert on.sum() > 10 and (~on & b["completion_mask"].bool()).sum() > 10
    torch.testing.assert_close(logps[on], trl_logps[on], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy[on], trl_entropy[on], atol=1e-5, rtol=1e-5)
    assert (logps[~on] == 0).all() and (entropy[~on] == 0).all()
    _assert_same_gradients(_grads(model), trl_grads)
    assert not chunked or calls


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_a_steps_loss_and_gradient_are_trls_with_rows_regrouped_and_trimmed(tmp_path: Path, loss_type: str) -> None:
    """Four micro-batches through TRL's loss as TRL splits them, against the same rows regrouped by length, cut to
    their own width and scored on the model's tokens: the same summed loss and the same gradient."""
    from trl import GRPOTrainer
    from trl.trainer.utils import split_tensor_dict

    trainer = _trainer(tmp_path, loss_type)
    model = trainer.model
    step = _batch(16, model.config.vocab_size, seed=2)
    as_trl = split_tensor_dict(step, 4)

    model.zero_grad()
    trl_loss = sum(GRPOTrainer._compute_loss(trainer, model, mb) for mb in as_trl)
    trl_loss.backward()
    trl_grads = _grads(model)

    ours = [trim_padding(mb) for mb in regroup_by_length(as_trl)]
    widths = [mb["completion_ids"].size(1) for mb in ours]
    assert widths == sorted(widths, reverse=True) and widths[-1] < step["completion_ids"].size(1)
    model.zero_grad()
    loss = sum(trainer._compute_loss(model, mb) for mb in ours)
    loss.backward()

    torch.testing.assert_close(loss, trl_loss, atol=1e-5, rtol=1e-5)
    _assert_same_gradients(_grads(model), trl_grads)


@pytest.mark.parametrize(("loss_type", "rounding"), [("dapo", 0.0), ("cispo", 0.0), ("dapo", 7e-5)])
def test_rows_without_advantage_are_left_out_and_the_step_is_trls(tmp_path: Path, loss_type: str, rounding: float) -> None:
    """A step with two groups of equal rewards, whose advantages are 0 or of rounding size (TRL's: the rounding error
    of the group's mean over std + 1e-4): those rows are left out of the micro-batches, which stay four. The summed
    loss and the gradient are TRL's over every row: the same up to float32 summation order where the advantages are
    0, and within FLAT_ADVANTAGE (1e-3) of the gradient's norm where they are of rounding size."""
    from trl import GRPOTrainer
    from trl.trainer.utils import split_tensor_dict

    trainer = _trainer(tmp_path, loss_type)
    assert trainer._flat_rows_add_nothing()
    model = trainer.model
    step = _batch(16, model.config.vocab_size, seed=3)
    flat = torch.tensor([0, 1, 2, 3, 8, 9, 10, 11])  # two groups of four whose rewards were all equal
    step["advantages"][flat] = rounding * torch.tensor([1.0, 1.0, 1.0, 1.0, -0.5, -0.5, -0.5, -0.5])
    as_trl = split_tensor_dict(step, 4)

    model.zero_grad()
    trl_loss = sum(GRPOTrainer._compute_loss(trainer, model, mb) for mb in as_trl)
    trl_loss.backward()
    trl_grads = _grads(model)

    ours = [trim_padding(mb) for mb in regroup_by_length(as_trl, drop_flat=True)]
    assert [len(mb["advantages"]) for mb in ours] == [2, 2, 2, 2]
    assert all(float(a.abs().min()) > 1e-3 for a in (mb["advantages"] for mb in ours))
    model.zero_grad()
    loss = sum(trainer._compute_loss(model, mb) for mb in ours)
    loss.backward()

    within = 1e-3 if rounding else 1e-5
    torch.testing.assert_close(loss, trl_loss, atol=within, rtol=within)
    _assert_same_gradients(_grads(model), trl_grads, within=within)


def test_flat_rows_stay_where_the_loss_counts_them(tmp_path: Path) -> None:
    """grpo's per-micro-batch mean and a KL term count every row: no row is left out there; nor when too few rows
    would be left for the step's micro-batches (or none is flat)."""
    assert not _trainer(tmp_path / "grpo", "grpo")._flat_rows_add_nothing()
    kl = _trainer(tmp_path / "kl", "dapo")
    kl.beta = 0.04
    assert not kl._flat_rows_add_nothing()
    step = _batch(8, 50)
    step["advantages"][:6] = 0.0
    assert without_flat_rows(step, min_rows=4) is step
    assert len(without_flat_rows(step, min_rows=2)["advantages"]) == 2
    step["advantages"] = torch.ones(8)
    assert without_flat_rows(step, min_rows=1) is step
    per_token = _batch(4, 50)
    per_token["advantages"] = torch.zeros(4, 40)
    per_token["advantages"][1, 5] = 0.5  # a row with one credited token keeps its place
    assert without_flat_rows(per_token, min_rows=1)["advantages"].shape == (1, 40)


def test_regrouping_keeps_every_row_whole_and_trimming_keeps_every_counted_token() -> None:
    batches = [_batch(4, 50, seed=s) for s in range(3)]
    for b in batches:
        b["labels"] = [f"row{int(x)}" for x in b["advantages"].mul(1000).round()]  # a list field travels with its rows
    step = batches[0]["num_items_in_batch"]
    out = regroup_by_length(batches)
    assert [len(b["labels"]) for b in out] == [4, 4, 4] and all(b["num_items_in_batch"] is step for b in out)
    before = {(tuple(r.tolist()), lab) for b in batches for r, lab in zip(b["completion_ids"], b["labels"], strict=True)}
    after = {(tuple(r.tolist()), lab) for b in out for r, lab in zip(b["completion_ids"], b["labels"], strict=True)}
    assert before == after
    lengths = [int(n) for b in out for n in b["completion_mask"].sum(1)]
    assert lengths == sorted(lengths, reverse=True)
    for b in out:
        cut = trim_padding(b)
        assert cut["completion_mask"].sum() == b["completion_mask"].sum()
        assert cut["completion_ids"].size(1) == int(b["completion_mask"].sum(1).max())
        assert cut["prompt_ids"] is b["prompt_ids"] and cut["tool_mask"].shape == cut["completion_ids"].shape


def test_trls_own_path_where_the_head_is_not_plain(tmp_path: Path) -> None:
    """A soft-capped LM head (or a wrapped model, or no scored positions given) goes through TRL's fused head."""
    trainer = _trainer(tmp_path)
    model = trainer.model
    assert trainer._plain_head(model) is model.lm_head
    model.config.final_logit_softcapping = 30.0
    try:
        assert trainer._plain_head(model) is None
    finally:
        model.config.final_logit_softcapping = None
    b = _batch(2, model.config.vocab_size)
    ids = torch.cat([b["prompt_ids"], b["completion_ids"]], 1)
    attn = torch.cat([b["prompt_mask"], b["completion_mask"]], 1)
    with torch.no_grad():  # TRL's log-probability pass: no scored positions set, every completion token scored
        logps, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, attn, b["completion_ids"].size(1))
    assert (logps[b["completion_mask"].bool()] != 0).all()


def test_the_policy_trained_is_the_policy_that_sampled(tmp_path: Path) -> None:
    """A real GRPO step on multi-turn rollouts (two micro-batches, regrouped): the loss's log-probabilities of the
    model's tokens are the ones the rollout engine sampled them with (``sampling_per_token_logps``)."""
    from trl import GRPOConfig

    from baselines.lm.grpo_trainer import CountdownGRPOTrainer
    from baselines.lm.tiny_lm import derive_position_ids, load_pretrained
    from countdown_gym import load_split
    from countdown_gym.integrations.trl import sparse_reward
    from countdown_gym.integrations.trl_rollout import rollout_task

    if not (TURN_MODEL / "model.safetensors").exists():
        pytest.skip("the shipped multi-turn model is missing")
    model, tok = load_pretrained(TURN_MODEL)
    tok.padding_side = "left"
    problems = load_split("longproc-0.5k", "train")[:4]
    compared: list[float] = []

    class Checking(CountdownGRPOTrainer):
        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
            out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            self._last = out[0].detach()
            return out

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            loss = super()._compute_loss(model, inputs)
            scored = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
            compared.append(float((self._last[scored] - inputs["sampling_per_token_logps"][scored]).abs().max()))
            return loss

    config = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=8, gradient_accumulation_steps=2,
                        num_generations=4, max_completion_length=256, learning_rate=1e-5, use_cpu=True, bf16=False,
                        report_to=[], save_strategy="no", temperature=0.5, seed=0)
    dataset, rollout_func = rollout_task(problems, max_turns=6)
    trainer = Checking(model=derive_position_ids(model), reward_funcs=[sparse_reward], args=config,
                       train_dataset=dataset, processing_class=tok, rollout_func=rollout_func)
    trainer.train()
    assert len(compared) == 2 and max(compared) < 1e-4, compared
