"""Per-step credit for multi-turn GRPO (baselines/lm/step_credit.py): the estimator on hand-computed cases, and two
real GRPO steps of CountdownGRPOTrainer(step_credit=...) on the shipped tiny model's multi-turn rollouts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from baselines.lm.rewards import monitored, parse_reward_spec  # noqa: E402
from baselines.lm.step_credit import (  # noqa: E402
    StepCredit,
    group_step_advantages,
    returns_to_go,
    split_reward_spec,
    token_advantages,
    turn_rewards,
)
from countdown_gym import Rules, load_split  # noqa: E402
from countdown_gym.integrations.trl import CriticReward, format_reward, oracle_reward, sparse_reward  # noqa: E402
from countdown_gym.rewards.terms import format_score  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm"


def _record(state: tuple[int, ...], nxt: tuple[int, ...] | None, target: int = 8) -> dict[str, Any]:
    return {"state": state, "move": (3, "+", 5, 8), "next_state": nxt, "target": target, "valid": nxt is not None,
            "reason": "ok" if nxt is not None else "operand_unavailable", "rules": Rules.longproc()}


GOOD = _record((3, 5), (8,))      # reaches the target: oracle reachable +1, perfect 1
BAD = _record((3, 5), (15,))      # a dead end: reachable -1, perfect 0
INVALID = _record((3, 5), None)   # refused move: reachable -1, perfect 0, critic -1


class LastNumberCritic:
    """A scorer whose score is the last number of the state / 100 (0.08 for (8,), 0.15 for (15,)); counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def score(self, states: Any, targets: Any) -> np.ndarray:
        self.calls += 1
        return np.array([s[-1] / 100 for s in states], dtype=np.float64)


# --- the estimator on hand-computed cases --------------------------------------------------------


def test_split_reward_spec_moves_the_dense_terms_out_of_the_scalar_reward() -> None:
    weights = {**monitored(), **parse_reward_spec("critic")}  # what llm_grpo's reward_terms gives
    scalar, per_step = split_reward_spec(weights)
    assert list(scalar) == list(weights)  # same terms, same order: reward_weights line up with the reward functions
    assert scalar == {"sparse": 1.0, "format": 0.1, "oracle-perfect": 0.0, "oracle-reachable": 0.0, "critic": 0.0}
    assert per_step == {"critic": 0.5}
    scalar, per_step = split_reward_spec(parse_reward_spec("sparse=1,oracle-reachable=0.25,oracle-perfect=0.5,clipo=1"))
    assert scalar == {"sparse": 1.0, "oracle-reachable": 0.0, "oracle-perfect": 0.0, "clipo": 1.0}
    assert per_step == {"oracle-reachable": 0.25, "oracle-perfect": 0.5}
    assert split_reward_spec(parse_reward_spec("sparse"))[1] == {}


def test_turn_rewards_weight_and_sum_each_turns_terms() -> None:
    critic = LastNumberCritic()
    episodes = [[[GOOD], [], [BAD, INVALID]], [[INVALID]], []]
    got = turn_rewards(episodes, {"oracle-reachable": 0.5, "oracle-perfect": 0.25, "critic": 2.0}, critic)
    # GOOD: 0.5*1 + 0.25*1 + 2*0.08; BAD: 0.5*(-1) + 0 + 2*0.15; INVALID: 0.5*(-1) + 0 + 2*(-1)
    expected = [[0.91, 0.0, -0.2 - 2.5], [-2.5], []]
    assert [len(r) for r in got] == [3, 1, 0]
    for row, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(row, want, atol=1e-12)
    assert critic.calls == 1  # the whole batch in one critic call
    assert turn_rewards(episodes, {"oracle-reachable": 1.0}) == [[1.0, 0.0, -2.0], [-1.0], []]
    with pytest.raises(ValueError, match="non-zero weight"):
        turn_rewards(episodes, {"oracle-reachable": 0.0})
    with pytest.raises(ValueError, match="supports the terms"):
        turn_rewards(episodes, {"sparse": 1.0})
    with pytest.raises(ValueError, match="needs a critic"):
        turn_rewards(episodes, {"critic": 1.0})


def test_returns_to_go() -> None:
    np.testing.assert_allclose(returns_to_go([1.0, 0.0, -1.0]), [0.0, -1.0, -1.0])
    np.testing.assert_allclose(returns_to_go([1.0, 0.0, -1.0], 0.5), [0.75, -0.5, -1.0])  # 1 + 0.5 * (0 + 0.5 * -1)
    np.testing.assert_allclose(returns_to_go([2.0, 3.0], 0.0), [2.0, 3.0])
    assert returns_to_go([], 0.9).shape == (0,)
    for bad in (1.5, "0.5", None):  # "0.5" and None were numpy's / float()'s TypeError
        with pytest.raises(ValueError, match="gamma"):
            returns_to_go([1.0], bad)


def test_leave_one_out_baseline_per_group_and_turn_index() -> None:
    returns = [
        [3.0, 1.0], [1.0], [2.0, 2.0, 5.0],   # group 1: turn 2 reached by one rollout only
        [-1.0, -1.0], [], [1.0],              # group 2: a rollout without turns
    ]
    got = group_step_advantages(returns, 3)
    expected = [
        [3 - (1 + 2) / 2, 1 - 2], [1 - (3 + 2) / 2], [2 - (3 + 1) / 2, 2 - 1, 0.0],
        [-1 - 1, 0.0], [], [1 - (-1)],
    ]
    assert [len(a) for a in got] == [2, 1, 3, 2, 0, 1]
    for a, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, want, atol=1e-12)
    # the leave-one-out advantages of one turn index of one group sum to 0 (n/(n-1) times the centred returns)
    assert got[0][0] + got[1][0] + got[2][0] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="whole number of groups"):
        group_step_advantages(returns, 4)


def test_step_advantages_two_groups_unequal_turns_gamma_below_one() -> None:
    episodes = [
        [[GOOD], [BAD]], [[INVALID]],                 # group 1: r = [1, -1] and [-1]
        [[], [GOOD]], [[GOOD], [GOOD], [GOOD]],      # group 2: r = [0, 1] and [1, 1, 1]
    ]
    rewards = turn_rewards(episodes, {"oracle-reachable": 1.0})
    got = group_step_advantages([returns_to_go(r, 0.5) for r in rewards], 2)
    # returns-to-go (gamma 0.5): [0.5, -1], [-1]; [0.5, 1], [1.75, 1.5, 1]
    expected = [[0.5 - (-1), 0.0], [-1 - 0.5], [0.5 - 1.75, 1 - 1.5], [1.75 - 0.5, 1.5 - 1, 0.0]]
    for a, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, want, atol=1e-12)


def test_token_advantages_put_each_turns_advantage_on_its_tokens() -> None:
    outcome = torch.tensor([0.5, -0.5])
    step = [np.array([1.0, -1.0]), np.array([2.0])]
    turn_index = [[0, 0, -1, 1, 1, -1], [0, -1]]
    got = token_advantages(outcome, step, turn_index, width=7)
    assert got.shape == (2, 7) and got.dtype == torch.float32
    torch.testing.assert_close(got, torch.tensor([[1.5, 1.5, 0.5, -0.5, -0.5, 0.5, 0.5],
                                                  [1.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5]]))
    with pytest.raises(ValueError, match="played 1 turns"):
        token_advantages(outcome, [np.array([1.0]), np.array([2.0])], [[0, 1], [0]], width=4)
    with pytest.raises(ValueError, match="padded width"):
        token_advantages(outcome, step, turn_index, width=5)


def test_module_import_does_not_import_trl_and_the_trainer_refuses_bad_setups() -> None:
    code = "import sys, baselines.lm.step_credit; assert 'trl' not in sys.modules and 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    from baselines.lm.grpo_trainer import StepCreditGRPOTrainer

    with pytest.raises(ValueError, match="rollout_func"):
        StepCreditGRPOTrainer(model=None, step_weights={"oracle-reachable": 0.5})
    with pytest.raises(ValueError, match="non-zero weight"):
        StepCreditGRPOTrainer(model=None, step_weights={}, rollout_func=lambda p, t: {})
    with pytest.raises(ValueError, match="gamma"):
        StepCreditGRPOTrainer(model=None, step_weights={"oracle-reachable": 0.5}, step_gamma=2.0, rollout_func=lambda p, t: {})


# --- two real GRPO steps ---------------------------------------------------------------------------


@pytest.fixture
def one_thread() -> Any:
    """One torch thread: the tiny model is latency-bound, and more threads on a shared CPU only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_two_grpo_steps_credit_each_turns_dense_terms_to_its_tokens(tmp_path: Path, one_thread: None) -> None:
    """CountdownGRPOTrainer with StepCredit and the multi-turn rollout_func: the loss sees (B, T) advantages equal to TRL's
    group-normalised outcome advantage plus each turn's leave-one-out advantage on that turn's tokens."""
    import dataclasses

    from trl import GRPOConfig

    from baselines.lm.grpo_trainer import CountdownGRPOTrainer
    from baselines.lm.tiny_lm import derive_position_ids, load_pretrained
    from countdown_gym.integrations.trl_rollout import make_rollout_func, rollout_dataset
    from critics import load_critic

    if not (TINY_MODEL / "model.safetensors").exists():
        pytest.skip("the shipped tiny model is missing")
    model, tok = load_pretrained(TINY_MODEL)
    model = derive_position_ids(model)
    tok.padding_side = "left"
    critic = load_critic()
    problems = load_split("longproc-0.5k", "train")[:8]
    weights = parse_reward_spec("oracle-reachable+critic")  # sparse 1, format 0.1, oracle-reachable 0.5, critic 0.5
    scalar, per_step = split_reward_spec(weights)
    assert per_step == {"oracle-reachable": 0.5, "critic": 0.5} and scalar["sparse"] == 1.0 and scalar["format"] == 0.1
    funcs = {"sparse": sparse_reward, "format": format_reward, "oracle-reachable": oracle_reward,
             "critic": CriticReward(critic)}
    gamma, groups = 0.9, 4
    generated: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
    seen: list[dict[str, Any]] = []

    def _copy(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in d.items()}

    class Recording(CountdownGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            generated.append(([dict(x) for x in inputs], _copy(out)))
            return out

        def _compute_loss(self, model, inputs):
            seen.append(_copy(inputs))
            return super()._compute_loss(model, inputs)

    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    config = GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=8, num_generations=groups,
                        max_completion_length=256, learning_rate=1e-4, use_cpu=True, bf16=False, report_to=[],
                        logging_steps=1, save_strategy="no", temperature=1.0, seed=0,
                        reward_weights=[scalar[name] for name in weights], **{checkpointing: False})
    # three tokens per turn: the single-pass model's lines start with a move ("32-1=31 [..."), cut to "32-1"
    trainer = Recording(model=model, reward_funcs=[funcs[name] for name in weights], args=config,
                        train_dataset=rollout_dataset(problems, max_turns=6), processing_class=tok,
                        rollout_func=make_rollout_func(problems, max_turns=6, max_turn_tokens=3),
                        step_credit=StepCredit.of(per_step, gamma, critic))
    trainer.train()
    assert len(generated) == 2 and len(seen) == 2

    differing_turns = outcome_nonzero = 0
    for (inputs, out), batch in zip(generated, seen, strict=True):
        replays = [x["turn_replay"] for x in inputs]
        # the outcome part is TRL's own: (r - group mean) / (group std + 1e-4) of the scalar reward, sparse + 0.1 format
        r = torch.tensor([(1.0 if rep.solved else 0.0) + 0.1 * format_score(rep) for rep in replays]).view(-1, groups)
        want_outcome = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)
        torch.testing.assert_close(out["outcome_advantages"], want_outcome)
        outcome_nonzero += int((want_outcome != 0).any())
        rewards = turn_rewards([rep.turn_transitions for rep in replays], per_step, critic)
        step = group_step_advantages([returns_to_go(r, gamma) for r in rewards], groups)
        adv, index = out["advantages"], out["turn_index"]
        assert adv.shape == out["completion_ids"].shape and adv.dim() == 2
        for i, x in enumerate(inputs):
            n = len(x["turn_index"])
            assert index[i, :n].tolist() == list(x["turn_index"]) and (index[i, n:] == -1).all()
            for k in sorted(set(x["turn_index"]) - {-1}):
                on_turn = adv[i][index[i] == k]
                torch.testing.assert_close(on_turn, torch.full_like(on_turn, float(want_outcome[i] + step[i][k])))
            off = index[i] == -1
            torch.testing.assert_close(adv[i][off], torch.full_like(adv[i][off], float(want_outcome[i])))
            turns = sorted(set(x["turn_index"]) - {-1})
            values = {round(float(adv[i][index[i] == k][0]), 6) for k in turns}
            if len(values) > 1:  # tokens of different turns carry different advantages ...
                differing_turns += 1
                assert len({rewards[i][k] for k in turns}) > 1  # ... because the turns earned different terms
        # what the loss saw: the same (B, T) rows, shuffled; environment tokens have zero loss weight
        assert batch["advantages"].shape == batch["completion_ids"].shape
        mask = batch["completion_mask"] * batch["tool_mask"]
        real = batch["completion_mask"].bool()
        assert (mask[real & (batch["turn_index"] == -1)] == 0).all()
        assert (mask[real & (batch["turn_index"] >= 0)] == 1).all()
        assert (mask == 0).any() and (mask == 1).any()
        for row in range(batch["completion_ids"].shape[0]):
            j = next(j for j in range(out["completion_ids"].shape[0])
                     if torch.equal(out["completion_ids"][j], batch["completion_ids"][row])
                     and torch.equal(out["prompt_ids"][j], batch["prompt_ids"][row]))
            torch.testing.assert_close(batch["advantages"][row], out["advantages"][j])
    assert differing_turns > 0 and outcome_nonzero > 0
    logs = [x for x in trainer.state.log_history if "step_credit/step_advantage_abs_mean" in x]
    assert len(logs) == 2 and logs[0]["step_credit/step_advantage_abs_mean"] > 0
