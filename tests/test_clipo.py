"""CLIPO head, loss, rewards and trainer on hand-built embeddings."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from critics.clipo import (  # noqa: E402
    CLIPOConfig,
    CLIPOHead,
    CLIPOTrainer,
    clipo_loss,
    clipo_rewards,
    mean_pool,
    valid_anchors,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one torch thread is much faster on a shared machine."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def unit(*v: float) -> list[float]:
    a = np.asarray(v, dtype=np.float64)
    return list(a / np.linalg.norm(a))


def test_head_is_bias_free_and_normalised():
    head = CLIPOHead(16, 8)
    assert all("bias" not in name for name, _ in head.named_parameters())
    z = head(torch.randn(5, 16))
    assert z.shape == (5, 8)
    assert torch.allclose(z.norm(dim=1), torch.ones(5), atol=1e-6)
    mlp = CLIPOHead(16, 8, mlp=True, hidden=32)
    assert all("bias" not in name for name, _ in mlp.named_parameters())
    assert torch.allclose(mlp(torch.randn(3, 16)).norm(dim=1), torch.ones(3), atol=1e-6)


def test_head_rejects_wrong_shape():
    with pytest.raises(ValueError, match=r"\[N, 16\]"):
        CLIPOHead(16)(torch.randn(4, 15))
    with pytest.raises(ValueError, match="dim_in"):
        CLIPOHead(0)


def test_valid_anchors_degenerate_groups():
    correct = [1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0]
    groups = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    # group 0: 2 correct + 1 wrong -> anchors; group 1: one correct; group 2: all correct; group 3: none
    assert valid_anchors(correct, groups).tolist() == [True, True] + [False] * 10


def test_infonce_matches_hand_computation():
    # two correct (0, 1) and one incorrect (2): the positive of each anchor is forced
    z = torch.tensor([unit(1, 0), unit(1, 1), unit(0, 1)], dtype=torch.float32)
    tau = 0.5
    loss = clipo_loss(z, [True, True, False], [7, 7, 7], "infonce", temperature=tau)
    s = (z @ z.T / tau).double()
    for i, p, n in ((0, 1, 2), (1, 0, 2)):
        expected = math.log(math.exp(s[i, p]) + math.exp(s[i, n])) - float(s[i, p])
        assert loss[i].item() == pytest.approx(expected, rel=1e-5)
    assert loss[2].item() == 0.0


def test_supcon_and_softnn_match_hand_computation():
    z = torch.tensor([unit(1, 0, 0), unit(1, 1, 0), unit(1, 0, 1), unit(0, 1, 1)], dtype=torch.float32)
    correct, groups, tau = [1, 1, 1, 0], [0, 0, 0, 0], 0.3
    s = (z @ z.T / tau).double().numpy()
    sup = clipo_loss(z, correct, groups, "supcon", temperature=tau)
    snn = clipo_loss(z, correct, groups, "softnn", temperature=tau)
    for i in range(3):
        others = [j for j in range(4) if j != i]
        pos = [j for j in range(3) if j != i]
        log_den = math.log(sum(math.exp(s[i, j]) for j in others))
        assert sup[i].item() == pytest.approx(-np.mean([s[i, p] - log_den for p in pos]), rel=1e-5)
        assert snn[i].item() == pytest.approx(-(math.log(sum(math.exp(s[i, p]) for p in pos)) - log_den), rel=1e-5)
    assert sup[3].item() == 0.0 and snn[3].item() == 0.0


def test_infonce_positive_is_sampled_among_other_correct():
    z = torch.tensor([unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1), unit(1, 1, 1)], dtype=torch.float32)
    correct, groups, tau = [1, 1, 1, 0], [0, 0, 0, 0], 1.0
    s = (z @ z.T / tau).double().numpy()
    gen = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(50):
        loss = clipo_loss(z, correct, groups, "infonce", temperature=tau, generator=gen)
        log_den = math.log(sum(math.exp(s[0, j]) for j in (1, 2, 3)))
        seen.add(round(log_den - loss[0].item(), 4))  # = s[0, positive]
    assert seen == {round(s[0, 1], 4), round(s[0, 2], 4)}  # never itself, never the incorrect one


def test_reward_sign_and_clipping():
    correct = [1, 1, 0, 0]
    groups = [0, 0, 0, 0]
    loss = torch.tensor([0.5, 10.0, 3.0, 3.0])
    r = clipo_rewards(loss, correct, groups, lam=0.2, floor=-0.5)
    assert r.tolist() == pytest.approx([-0.1, -0.5, 0.0, 0.0])
    # from real embeddings: anchors in [floor, 0], incorrect rollouts exactly 0
    z = torch.nn.functional.normalize(torch.randn(8, 6, generator=torch.Generator().manual_seed(1)), dim=1)
    c = [1, 1, 1, 0, 0, 1, 0, 1]
    r = clipo_rewards(clipo_loss(z, c, [0] * 8), c, [0] * 8)
    assert ((r <= 0) & (r >= -0.5)).all()
    assert all(r[i] == 0 for i in range(8) if not c[i])
    assert any(r[i] < 0 for i in range(8) if c[i])


def test_degenerate_groups_get_zero_reward():
    z = torch.nn.functional.normalize(torch.randn(9, 4, generator=torch.Generator().manual_seed(2)), dim=1)
    correct = [1, 0, 0, 1, 1, 1, 0, 0, 0]  # g0: one correct, g1: all correct, g2: none correct
    groups = ["a", "a", "a", "b", "b", "b", "c", "c", "c"]
    for kind in ("infonce", "supcon", "softnn"):
        loss = clipo_loss(z, correct, groups, kind)
        assert loss.abs().sum() == 0
        assert clipo_rewards(loss, correct, groups).abs().sum() == 0


def _cluster_with_outlier() -> tuple[torch.Tensor, list[int]]:
    # correct 0, 1 close together; correct 2 an outlier near the incorrect ones 3, 4
    z = torch.tensor(
        [unit(1, 0.05, 0), unit(1, -0.05, 0), unit(0.1, 1, 0.3), unit(0, 1, 0.2), unit(0, 1, 0.4)],
        dtype=torch.float32,
    )
    return z, [1, 1, 1, 0, 0]


@pytest.mark.parametrize("kind", ["supcon", "softnn", "infonce"])
def test_close_correct_rollouts_beat_an_outlier(kind):
    z, correct = _cluster_with_outlier()
    groups = [0] * 5
    gen = torch.Generator().manual_seed(3)
    draws = 1 if kind != "infonce" else 200  # InfoNCE samples a positive: compare expectations
    total = torch.zeros(5)
    for _ in range(draws):
        loss = clipo_loss(z, correct, groups, kind, temperature=0.05, generator=gen)
        total += clipo_rewards(loss, correct, groups, lam=0.01, floor=-0.5)
    r = total / draws
    assert r[0] > r[2] and r[1] > r[2]
    assert r[3] == 0 and r[4] == 0


def test_trainer_rewards_use_the_pre_update_loss():
    torch.manual_seed(0)
    x = torch.randn(8, 12)
    correct, groups = [1, 1, 0, 0, 1, 0, 1, 1], [0, 0, 0, 0, 1, 1, 1, 1]
    trainer = CLIPOTrainer(dim_in=12, dim_out=6, kind="infonce")
    head_before = copy.deepcopy(trainer.head)
    gen = torch.Generator()
    gen.set_state(trainer.generator.get_state())
    with torch.no_grad():
        expected = clipo_rewards(clipo_loss(head_before(x), correct, groups, "infonce", 0.05, gen), correct, groups)
    rewards = trainer.step(x, correct, groups)
    assert torch.allclose(rewards, expected, atol=1e-6)
    assert trainer.last_stats["updated"] == 1.0
    changed = any(not torch.equal(a, b) for a, b in zip(head_before.parameters(), trainer.head.parameters(), strict=True))
    assert changed


def test_trainer_warmup_updates_head_but_gives_zero_reward():
    x = torch.randn(6, 10, generator=torch.Generator().manual_seed(4))
    correct, groups = [1, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0]
    trainer = CLIPOTrainer(dim_in=10, dim_out=4, warmup_steps=2, kind="supcon")
    for _ in range(2):
        before = copy.deepcopy(trainer.head.state_dict())
        assert trainer.step(x, correct, groups).abs().sum() == 0
        assert any(not torch.equal(before[k], v) for k, v in trainer.head.state_dict().items())
    assert trainer.step(x, correct, groups).abs().sum() > 0


def test_frozen_head_never_changes():
    x = torch.randn(6, 10, generator=torch.Generator().manual_seed(5))
    correct, groups = [1, 1, 0, 1, 0, 0], [0] * 6
    trainer = CLIPOTrainer(dim_in=10, dim_out=4, freeze=True, kind="supcon")
    before = copy.deepcopy(trainer.head.state_dict())
    r1 = trainer.step(x, correct, groups)
    r2 = trainer.step(x, correct, groups)
    assert all(torch.equal(before[k], v) for k, v in trainer.head.state_dict().items())
    assert torch.equal(r1, r2) and r1.abs().sum() > 0
    assert trainer.last_stats["updated"] == 0.0


def test_trainer_learns_to_cluster_correct_rollouts():
    gen = torch.Generator().manual_seed(6)
    signal = torch.randn(32, generator=gen)

    def batch():
        correct = torch.rand(32, generator=gen) < 0.5
        x = torch.randn(32, 32, generator=gen) + 0.5 * correct[:, None].float() * signal
        return x, correct.tolist(), [i // 8 for i in range(32)]

    trainer = CLIPOTrainer(dim_in=32, dim_out=8, kind="supcon", temperature=0.1, lr=1e-2)
    losses, rewards = [], []
    for _ in range(60):
        x, c, g = batch()
        trainer.step(x, c, g)
        if trainer.last_stats["anchors"]:
            losses.append(trainer.last_stats["loss"])
            rewards.append(trainer.last_stats["reward_mean"])
    assert np.mean(losses[-10:]) < 0.6 * np.mean(losses[:10])
    assert np.mean(rewards[-10:]) > np.mean(rewards[:10])


def test_save_load_roundtrip(tmp_path):
    x = torch.randn(6, 10, generator=torch.Generator().manual_seed(7))
    correct, groups = [1, 1, 0, 1, 0, 0], [0] * 6
    a = CLIPOTrainer(dim_in=10, dim_out=4, warmup_steps=1)
    a.step(x, correct, groups)
    a.save(tmp_path / "clipo.pt")
    b = CLIPOTrainer.load(tmp_path / "clipo.pt")
    assert b.config == a.config and b.steps_done == 1
    assert torch.equal(a.step(x, correct, groups), b.step(x, correct, groups))
    for (ka, va), (kb, vb) in zip(a.head.state_dict().items(), b.head.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)


def test_an_interrupted_save_keeps_the_old_state(tmp_path, monkeypatch):
    """torch.save wrote the state in place (llm_grpo.py's final/ and checkpoints): Ctrl-C or a full disk mid-save
    left a torn file that CLIPOTrainer.load refused; now the old state stays whole."""
    a = CLIPOTrainer(dim_in=10, dim_out=4, warmup_steps=1)
    a.save(tmp_path / "clipo.pt")
    old = (tmp_path / "clipo.pt").read_bytes()

    def torn(obj, f, *args, **kwargs):
        Path(f).write_bytes(old[: len(old) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", torn)
    with pytest.raises(KeyboardInterrupt):
        a.save(tmp_path / "clipo.pt")
    assert [p.name for p in tmp_path.iterdir()] == ["clipo.pt"] and (tmp_path / "clipo.pt").read_bytes() == old


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no CLIPO trainer state"):
        CLIPOTrainer.load(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a CLIPOTrainer state"):
        CLIPOTrainer.load(tmp_path / "junk.pt")
    small = CLIPOTrainer(dim_in=10, dim_out=4)
    with pytest.raises(ValueError, match="dim_in=10"):
        CLIPOTrainer(dim_in=12, dim_out=4).load_state_dict(small.state_dict())
    with pytest.raises(ValueError, match="not a valid CLIPOTrainer state: .* Missing key") as bad:
        CLIPOTrainer(dim_in=10, dim_out=4).load_state_dict({**small.state_dict(), "head": {}})
    assert "\n" not in str(bad.value)  # was torch's message, its newline and tab included


def test_bad_inputs_give_clear_errors():
    trainer = CLIPOTrainer(dim_in=10, dim_out=4)
    with pytest.raises(ValueError, match=r"embeddings must have shape \[N, 10\]"):
        trainer.step(torch.randn(4, 9), [1, 1, 0, 0], [0] * 4)
    with pytest.raises(ValueError, match=r"embeddings must have shape"):
        trainer.step(np.zeros(10), [1], [0])
    with pytest.raises(ValueError, match="correct must be"):
        trainer.step(torch.randn(4, 10), [1, 1, 0], [0] * 4)
    with pytest.raises(ValueError, match="group_ids"):
        trainer.step(torch.randn(4, 10), [1, 1, 0, 0], [0] * 5)
    with pytest.raises(ValueError, match="NaN"):
        trainer.step(torch.full((4, 10), float("nan")), [1, 1, 0, 0], [0] * 4)
    with pytest.raises(ValueError, match="kind"):
        clipo_loss(torch.randn(3, 2), [1, 1, 0], [0] * 3, kind="triplet")
    for tau in (0, float("inf")):
        with pytest.raises(ValueError, match="temperature"):
            clipo_loss(torch.randn(3, 2), [1, 1, 0], [0] * 3, temperature=tau)
    with pytest.raises(ValueError, match="dim_in"):
        CLIPOTrainer()
    with pytest.raises(ValueError, match="kind"):
        CLIPOConfig(dim_in=3, kind="nope")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lam": -1.0}, "lam must be"), ({"lam": float("nan")}, "lam must be"), ({"lam": "0.2"}, "lam must be"),
    ({"floor": 0.5}, "floor must be"), ({"floor": float("nan")}, "floor must be"),
    ({"temperature": "x"}, "temperature must be"),  # was '>' not supported between 'str' and 'int'
    ({"temperature": float("inf")}, "temperature must be"),  # every anchor's loss log(k), whatever the embeddings
    ({"lr": "1e-3"}, "lr must be"), ({"lr": float("inf")}, "lr must be"),  # torch's TypeError; NaN weights
    ({"weight_decay": None}, "weight_decay must be"), ({"seed": None}, "seed must be an int"),  # torch's errors
    ({"freeze": "false"}, "freeze must be a bool"), ({"mlp": "no"}, "mlp must be a bool"),  # both read as True
])
def test_a_bad_reward_setting_is_refused_when_the_trainer_is_made(kwargs, message):
    with pytest.raises(ValueError, match=message):  # lam=-1 passed every warm-up step, then stopped the run
        CLIPOTrainer(dim_in=4, warmup_steps=3, **kwargs)
    loss = torch.ones(3)
    if "lam" in kwargs or "floor" in kwargs:  # NaN gave NaN rewards
        with pytest.raises(ValueError, match=message):
            clipo_rewards(loss, [1, 1, 0], [0] * 3, **kwargs)


def test_nan_embeddings_and_an_empty_batch_are_named():
    with pytest.raises(ValueError, match="NaN or inf"):  # was a NaN loss for the anchors
        clipo_loss(torch.full((3, 2), float("nan")), [1, 1, 0], [0] * 3)
    assert valid_anchors([], []).shape == (0,)  # was 'correct must hold booleans or 0/1 ints, got dtype float64'

def test_lambda_defaults_follow_the_paper():
    assert CLIPOConfig(dim_in=4).reward_lambda == 0.2
    assert CLIPOConfig(dim_in=4, kind="supcon").reward_lambda == 0.2
    assert CLIPOConfig(dim_in=4, kind="softnn").reward_lambda == 1.0
    assert CLIPOConfig(dim_in=4, kind="softnn", lam=0.3).reward_lambda == 0.3


def test_mean_pool_uses_only_masked_positions():
    h = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    mask = torch.tensor([[0, 1, 1, 0], [0, 0, 0, 0]])
    out = mean_pool(h, mask)
    assert torch.allclose(out[0], (h[0, 1] + h[0, 2]) / 2)
    assert torch.equal(out[1], torch.zeros(3))
    with pytest.raises(ValueError, match="mask"):
        mean_pool(h, torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"\[B, T, D\]"):
        mean_pool(h[0], torch.ones(4))
