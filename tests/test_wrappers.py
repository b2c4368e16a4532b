"""Dense-reward wrappers (oracle, critic, CLIPO group) on Countdown-v0, CountdownText-v0 and a toy env."""

from __future__ import annotations

import copy
import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import countdown_gym  # noqa: F401  (registers the environments)
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules
from countdown_gym.game.solver import reachable, solution_path, successors
from countdown_gym.rewards.terms import perfect_moves, potential_shaping, reachability, reachable_moves, scored_moves
from countdown_gym.rewards.variants import get_variant
from countdown_gym.wrappers import (
    CLIPOGroupReward,
    ContrastiveCriticReward,
    OracleReward,
    Trajectory,
    TransitionsMissingError,
)

LONGPROC = Rules.longproc()
PUZZLE = Problem(numbers=(6, 2, 5, 3), target=8)  # (6-2)*(5-3); 6+2 leads to [5, 3, 8], a dead end


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one torch thread is much faster on a shared machine."""
    try:
        import torch
    except ImportError:  # the oracle tests need no torch
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def record(state, move, next_state, target=8, valid=True, reason="ok") -> dict[str, Any]:
    return {"state": state, "move": move, "next_state": next_state, "target": target,
            "valid": valid, "reason": reason, "rules": LONGPROC}


# ---- a minimal env emitting DESIGN-shaped records (for protocol corner cases) -----------------


class ToyEnv(gym.Env):
    """Actions: 0 think (no move), 1 first legal move on a solution path if any (else the first legal
    move), 2 answer correctly (ends, success), 3 answer wrongly (ends), 4 an invalid move line."""

    metadata = {"render_modes": []}

    def __init__(self, problems=(PUZZLE,), report_transitions=True, report_problem=True):
        self.problems = list(problems)
        self.report_transitions, self.report_problem = report_transitions, report_problem
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(5)

    def _info(self, transitions, success=None):
        info: dict[str, Any] = {"state": self.state}
        if self.report_problem:
            info["problem"] = self.problem
        if self.report_transitions:
            info["transitions"] = transitions
        if success is not None:
            info["is_success"] = success
        return info

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if options and options.get("problem") is not None:
            self.problem = options["problem"]
        else:
            self.problem = self.problems[int(self.np_random.integers(len(self.problems)))]
        self.state = self.problem.numbers
        return np.zeros(1, np.float32), self._info([])

    def step(self, action):
        a, t = int(action), []
        if a == 1 and len(self.state) > 1:
            moves = list(successors(self.state, LONGPROC))
            good = [m for m in moves if reachable(m[1], self.problem.target, LONGPROC)]
            move, nxt = (good or moves)[0]
            t = [record(self.state, move, nxt, self.problem.target)]
            self.state = nxt
        elif a == 4:
            t = [record(self.state, (1, "+", 1, 3), None, self.problem.target, False, "arithmetic_error")]
        if a in (2, 3):
            success = a == 2
            return np.ones(1, np.float32), float(success), True, False, self._info(t, success)
        return np.zeros(1, np.float32), 0.0, False, False, self._info(t)


class FakeCritic:
    """score = 1 if reachable else -0.5 (a stand-in with a known answer); counts batched calls."""

    def __init__(self):
        self.calls = 0

    def score(self, states, targets):
        self.calls += 1
        return np.array([1.0 if reachable(s, t) else -0.5 for s, t in zip(states, targets, strict=True)])


def make_countdown(**kw):
    return gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)], **kw)


def make_text(**kw):
    return gym.make("CountdownText-v0", prompt="compact", problems=[((6, 2, 5, 3), 8)], **kw)


def act(env, a, op, b) -> int:
    """The Countdown-v0 action for ``a op b`` in the current state."""
    state = list(env.unwrapped.state)
    i = state.index(a)
    j = next(k for k, x in enumerate(state) if x == b and k != i)
    return env.unwrapped.encode_action(i, j, op)


# ---- pure terms ---------------------------------------------------------------------------------


def test_oracle_terms_on_known_states():
    good = record((6, 2, 5, 3), (6, "-", 2, 4), (5, 3, 4))
    dead = record((6, 2, 5, 3), (6, "+", 2, 8), (5, 3, 8))
    bad = record((6, 2, 5, 3), (6, "-", 2, 5), None, valid=False, reason="arithmetic_error")
    last = record((4, 2), (4, "*", 2, 8), (8,))
    assert perfect_moves([good, dead, bad, last]) == [1.0, 0.0, 0.0, 1.0]
    assert reachable_moves([good, dead, bad, last]) == [1.0, -1.0, -1.0, 1.0]
    assert get_variant("oracle-perfect").move_values([good], scale=0.25).tolist() == [0.25]
    assert get_variant("oracle-reachable").move_values([dead], scale=0.25).tolist() == [-0.25]
    assert reachability([(5, 3, 4), (5, 3, 8), None], [8, 8, 8], LONGPROC) == [1.0, 0.0, 0.0]


def test_oracle_terms_use_the_transition_rules():
    # 7 / 2 is illegal under LongProc rules but fine under TinyZero's: (7/2)*2 = 7
    t = {**record((7, 2, 2), (7, "/", 2, 3.5), None, target=7), "rules": Rules.tinyzero()}
    from fractions import Fraction

    t["next_state"], t["move"] = (2, Fraction(7, 2)), (7, "/", 2, Fraction(7, 2))
    assert perfect_moves([t]) == [1.0]


def test_term_argument_errors():
    with pytest.raises(ValueError, match="missing key"):
        perfect_moves([{"state": (1, 2)}])
    with pytest.raises(ValueError, match="dict"):
        reachable_moves([[1, 2]])
    with pytest.raises(ValueError, match="gamma"):
        potential_shaping(0.0, 1.0, gamma=1.5)
    with pytest.raises(ValueError, match="scale"):
        OracleReward(make_countdown(), scale=float("nan"))


def test_potential_shaping_formula():
    assert potential_shaping(1.0, 1.0, 0.9) == pytest.approx(-0.1)
    assert potential_shaping(1.0, 0.0, 0.9) == -1.0
    assert potential_shaping(0.0, 1.0, 1.0) == 1.0


def test_critic_term_batches_and_scores_invalid_moves_lowest():
    critic = FakeCritic()
    ts = [record((6, 2, 5, 3), (6, "-", 2, 4), (5, 3, 4)), record((6, 2, 5, 3), (6, "+", 2, 8), (5, 3, 8)),
          record((6, 2, 5, 3), (6, "-", 2, 5), None, valid=False)]
    assert get_variant("critic").move_values(ts, critic, scale=2.0).tolist() == [2.0, -1.0, -2.0]
    assert critic.calls == 1
    assert scored_moves([], critic) == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_critic_nan_or_inf_is_an_error_not_a_reward(bad):
    """A critic scoring NaN / inf made the reward NaN / inf (additive and shaping); now a ValueError naming the state."""

    class Broken:
        def score(self, states, targets):
            return np.full(len(states), bad)

    for potential in (False, True):
        env = ContrastiveCriticReward(gym.make("Countdown-v0", problems=[((21, 16, 17, 26), 46)]), Broken(),
                                      potential=potential)
        env.reset(seed=0)
        with pytest.raises(ValueError, match="critic.score returned .* a reward term must be finite"):
            env.step(0)  # 21 + 16


# ---- OracleReward on both envs ------------------------------------------------------------------


@pytest.mark.parametrize("mode,expected", [("perfect", [1.0, 0.0]), ("reachable", [1.0, -1.0])])
def test_oracle_wrapper_on_countdown(mode, expected):
    env = OracleReward(make_countdown(), mode=mode, scale=1.0)
    env.reset(seed=0)
    _, r, *_, info = env.step(act(env, 6, "-", 2))  # [5, 3, 4]: still reachable
    assert info["reward_terms"] == {"sparse": 0.0, "oracle": expected[0]} and r == expected[0]
    _, r, *_, info = env.step(act(env, 5, "+", 3))  # [4, 8]: 8 is unreachable from {4, 8}
    assert info["reward_terms"]["oracle"] == expected[1] and r == expected[1]


def test_oracle_wrapper_solution_path_gets_every_step():
    env = OracleReward(make_countdown(), scale=0.5)
    env.reset(seed=0)
    total, terms = 0.0, []
    for a, op, b, _ in solution_path(PUZZLE.numbers, PUZZLE.target):
        _, r, terminated, _, info = env.step(act(env, a, op, b))
        total += r
        terms.append(info["reward_terms"])
    assert terminated and total == pytest.approx(1.0 + 3 * 0.5)
    assert terms[-1] == {"sparse": 1.0, "oracle": 0.5}


@pytest.mark.parametrize("mode,expected", [("perfect", [1.0, 0.0, 0.0, 0.0]), ("reachable", [1.0, -1.0, 0.0, -1.0])])
def test_oracle_wrapper_on_text_env(mode, expected):
    env = OracleReward(make_text(), mode=mode)
    env.reset(seed=0)
    lines = ["6-2=4 [5,3,4]", "6+2=8 [5,3,8]", "Thinking about it.", "6-2=5"]
    for line, want in zip(lines, expected, strict=True):
        _, r, *_, info = env.step(line)
        assert info["reward_terms"]["oracle"] == want, (line, info["transitions"])
        assert r == want
    _, r, terminated, _, info = env.step("<answer>(6-2)*(5-3)</answer>")
    assert terminated and r == 1.0 and info["reward_terms"] == {"sparse": 1.0, "oracle": 0.0}


def test_text_env_deeper_and_backtracking_lines():
    env = OracleReward(make_text(), mode="reachable")
    env.reset(seed=0)
    _, _, _, _, info = env.step("6-2=4 [5,3,4]")
    _, _, _, _, info = env.step(" 5+3=8 [4,8]")  # depth 1: from [5, 3, 4], a dead end
    assert info["reward_terms"]["oracle"] == -1.0
    _, _, _, _, info = env.step(" 5-3=2 [4,2]")  # back to depth 1, on the solution path
    assert info["reward_terms"]["oracle"] == 1.0


# ---- potential-based shaping ---------------------------------------------------------------------


def _discounted_sum(terms, gamma):
    return sum(gamma**t * f for t, f in enumerate(terms))


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_oracle_shaping_telescopes_on_countdown(gamma):
    env = OracleReward(gym.make("Countdown-v0", preset="longproc-0.5k"), potential=True, gamma=gamma, scale=2.0)
    rng = np.random.default_rng(0)
    for episode in range(20):
        _, info = env.reset(seed=episode)
        phi0 = 2.0 * reachability([info["state"]], [info["problem"].target], info["problem"].rules)[0]
        shaped, done = [], False
        while not done:
            a = int(rng.choice(np.flatnonzero(info["action_mask"])))
            _, r, terminated, truncated, info = env.step(a)
            shaped.append(info["reward_terms"]["oracle_shaping"])
            assert r == pytest.approx(info["reward_terms"]["sparse"] + shaped[-1])
            done = terminated or truncated
        assert terminated
        # terminal potential is 0: the discounted sum is -Phi(s_0), whatever the play
        assert _discounted_sum(shaped, gamma) == pytest.approx(-phi0)


def test_shaping_telescopes_when_truncated():
    gamma = 0.8
    env = OracleReward(make_countdown(max_steps=1), potential=True, gamma=gamma)
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(act(env, 6, "-", 2))
    assert truncated and not terminated
    # truncation is not a terminal state: F = gamma * Phi(s_1) - Phi(s_0) = 0.8 * 1 - 1
    assert info["reward_terms"]["oracle_shaping"] == pytest.approx(gamma * 1.0 - 1.0)


def test_shaping_on_text_env_with_idle_and_invalid_lines():
    gamma = 0.9
    env = OracleReward(make_text(), potential=True, gamma=gamma)
    env.reset(seed=0)
    lines = ["Let me think.", "6+2=8 [5,3,8]", "8-5=4", "6-2=4 [5,3,4]", "<answer>(6-2)*(5-3)</answer>"]
    phis = [1.0]
    shaped = []
    for line in lines:
        _, _, terminated, _, info = env.step(line)
        shaped.append(info["reward_terms"]["oracle_shaping"])
        phis.append(reachability([info["state"]], [8], LONGPROC)[0])
    assert terminated
    assert shaped[0] == pytest.approx(gamma - 1.0)  # no move: F = (gamma - 1) * Phi(s)
    assert shaped[1] == pytest.approx(-1.0)  # into the dead end [5, 3, 8]
    assert _discounted_sum(shaped, gamma) == pytest.approx(-1.0)  # = gamma^T * 0 - Phi(s_0)


def test_critic_shaping_telescopes_with_a_fake_critic():
    gamma = 0.95
    env = ContrastiveCriticReward(make_countdown(), critic=FakeCritic(), potential=True, gamma=gamma, scale=0.5)
    env.reset(seed=0)
    shaped = []
    for a, op, b in [(6, "+", 2), (8, "-", 5), (3, "+", 3)]:
        _, _, terminated, _, info = env.step(act(env, a, op, b))
        shaped.append(info["reward_terms"]["critic_shaping"])
    assert terminated
    # Phi(s_0) = 0.5 * 1.0; Phi([5, 3, 8]) = 0.5 * -0.5
    assert shaped[0] == pytest.approx(gamma * -0.25 - 0.5)
    assert _discounted_sum(shaped, gamma) == pytest.approx(-0.5)


def test_shaping_without_problem_in_reset_info_starts_at_first_move():
    env = OracleReward(ToyEnv(report_problem=False), potential=True, gamma=1.0)
    env.reset(seed=0)
    _, _, _, _, info = env.step(0)  # no move and no known state yet
    assert info["reward_terms"]["oracle_shaping"] == 0.0
    _, _, _, _, info = env.step(1)
    assert info["reward_terms"]["oracle_shaping"] == 0.0  # reachable -> reachable


# ---- the critic wrapper ----------------------------------------------------------------------------


def test_critic_wrapper_additive_on_both_envs():
    for env in (ContrastiveCriticReward(make_countdown(), critic=FakeCritic(), scale=0.1),
                ContrastiveCriticReward(make_text(), critic=FakeCritic(), scale=0.1)):
        env.reset(seed=0)
        move = act(env, 6, "+", 2) if env.unwrapped.spec.id == "Countdown-v0" else "6+2=8 [5,3,8]"
        _, r, *_, info = env.step(move)
        assert info["reward_terms"] == {"sparse": 0.0, "critic": pytest.approx(-0.05)}
        assert r == pytest.approx(-0.05)


def test_critic_wrapper_caches_scores_exactly():
    critic = FakeCritic()
    env = ContrastiveCriticReward(make_countdown(), critic=critic)
    for _ in range(3):
        env.reset(seed=0)
        _, _, _, _, info = env.step(act(env, 6, "-", 2))
        assert info["reward_terms"]["critic"] == 1.0
    assert critic.calls == 1
    scores = env.scorer.score([(5, 3, 4), (5, 3, 8), (5, 3, 4)], [8, 8, 8])
    assert scores.tolist() == [1.0, -0.5, 1.0] and critic.calls == 2


def test_critic_cache_overflow_keeps_every_score():
    # a step mixing a cached state with a new one, when the new one overflows the cache
    env = ContrastiveCriticReward(make_text(action_mode="token_str"), critic=FakeCritic(), scale=0.1)
    env.scorer.max_size = 1
    env.reset(seed=0)
    env.step("6-2=4 [5,3,4]\n")
    _, r, *_, info = env.step("6-2=4 [5,3,4]\n6+2=8 [5,3,8]\n")  # [5, 3, 4] cached, [5, 3, 8] new
    assert len(info["transitions"]) == 2
    assert info["reward_terms"]["critic"] == pytest.approx(0.1 * 1.0 + 0.1 * -0.5) and r == pytest.approx(0.05)


def test_critic_wrapper_with_shipped_checkpoint():
    critics = pytest.importorskip("critics")
    if not (critics.SHIPPED_CHECKPOINT / "config.json").is_file():
        pytest.skip("no shipped critic checkpoint in this tree")
    env = ContrastiveCriticReward(make_countdown(), critics.load_state_critic())
    env.reset(seed=0)
    _, r, *_, info = env.step(act(env, 6, "-", 2))
    assert -1.0 <= info["reward_terms"]["critic"] <= 1.0 and r == info["reward_terms"]["critic"]
    text = ContrastiveCriticReward(make_text(), critic=env.critic, potential=True)
    text.reset(seed=0)
    _, _, _, _, info = text.step("6-2=4 [5,3,4]")
    assert np.isfinite(info["reward_terms"]["critic_shaping"])


def _tiny_checkpoint(tmp_path, version):
    torch = pytest.importorskip("torch")
    from critics.models import ModelConfig, build_model, save_checkpoint

    torch.manual_seed(0)
    cfg = ModelConfig(version=version, hidden=16, depth=1, goal_hidden=16, out_dim=8, value_dim=4, fourier=2)
    return save_checkpoint(build_model(cfg), cfg, tmp_path / version)


def test_critic_wrapper_loads_a_checkpoint_directory(tmp_path):
    path = _tiny_checkpoint(tmp_path, "v2")
    for make, move in ((make_countdown, None), (make_text, "6-2=4 [5,3,4]")):
        from critics import load_state_critic

        env = ContrastiveCriticReward(make(), load_state_critic(path), scale=0.5)
        env.reset(seed=0)
        _, r, *_, info = env.step(move if move is not None else act(env, 6, "-", 2))
        expected = 0.5 * float(env.critic.score([(5, 3, 4)], [8])[0])
        assert info["reward_terms"]["critic"] == pytest.approx(expected) and r == pytest.approx(expected)
        assert -0.5 <= expected <= 0.5


def test_critic_wrapper_checkpoint_errors(tmp_path):
    critics = pytest.importorskip("critics")
    with pytest.raises(critics.CheckpointError, match="not found"):
        critics.load_state_critic(tmp_path / "nope")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"format": "something-else"}))
    (bad / "model.safetensors").write_bytes(b"")
    with pytest.raises(critics.CheckpointError, match="format"):
        critics.load_state_critic(bad)
    with pytest.raises(critics.CheckpointError, match="V2"):
        critics.load_state_critic(_tiny_checkpoint(tmp_path, "v1"))
    with pytest.raises(ValueError, match="score"):
        ContrastiveCriticReward(make_countdown(), critic=object())
    with pytest.raises(ValueError, match=r"load_state_critic\(path\)"):
        ContrastiveCriticReward(make_countdown(), tmp_path)
    critic = critics.load_state_critic(_tiny_checkpoint(tmp_path, "v2"))
    too_many = ContrastiveCriticReward(gym.make("Countdown-v0", preset="hard"), critic)
    with pytest.raises(ValueError, match="at most 4 numbers"):
        too_many.reset(seed=0)


# ---- composition and bad input ---------------------------------------------------------------------


@pytest.mark.parametrize("make", [make_countdown, make_text])
def test_stacked_wrappers_keep_every_term(make):
    env = OracleReward(ContrastiveCriticReward(make(), critic=FakeCritic(), scale=0.1), mode="reachable")
    env = OracleReward(env, potential=True, gamma=0.9)
    env.reset(seed=0)
    move = act(env, 6, "+", 2) if env.unwrapped.spec.id == "Countdown-v0" else "6+2=8 [5,3,8]"
    _, r, _, _, info = env.step(move)
    terms = info["reward_terms"]
    assert set(terms) == {"sparse", "critic", "oracle", "oracle_shaping"}
    assert terms["critic"] == pytest.approx(-0.05) and terms["oracle"] == -1.0
    assert terms["oracle_shaping"] == pytest.approx(-1.0)
    assert r == pytest.approx(sum(terms.values()))


def test_same_key_twice_is_an_error_and_key_resolves_it():
    env = OracleReward(OracleReward(make_countdown()))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="same key"):
        env.step(act(env, 6, "-", 2))
    env = OracleReward(OracleReward(make_countdown()), mode="reachable", key="oracle_reachable")
    env.reset(seed=0)
    _, _, _, _, info = env.step(act(env, 6, "-", 2))
    assert info["reward_terms"] == {"sparse": 0.0, "oracle": 1.0, "oracle_reachable": 1.0}


def test_env_without_transitions_gives_a_clear_error():
    env = OracleReward(ToyEnv(report_transitions=False))
    env.reset(seed=0)
    with pytest.raises(TransitionsMissingError, match=r"info\['transitions'\]"):
        env.step(1)
    with pytest.raises(TransitionsMissingError, match="OracleReward"):
        env.step(0)
    cart = ContrastiveCriticReward(gym.make("CartPole-v1"), critic=FakeCritic())
    cart.reset(seed=0)
    with pytest.raises(TransitionsMissingError, match="CartPole-v1"):
        cart.step(0)


def test_wrapper_argument_errors():
    with pytest.raises(ValueError, match="mode"):
        OracleReward(make_countdown(), mode="optimal")
    with pytest.raises(ValueError, match="gamma"):
        OracleReward(make_countdown(), potential=True, gamma=-0.1)
    with pytest.raises(ValueError, match="key"):
        OracleReward(make_countdown(), key="sparse")


def test_numpy_scale_and_gamma_are_accepted():
    # values read from a numpy config / sweep array are numbers too
    env = OracleReward(make_countdown(), scale=np.float32(0.5), potential=True, gamma=np.float32(0.75))
    assert (env.scale, env.gamma) == (0.5, 0.75) and type(env.scale) is float
    assert OracleReward(make_countdown(), scale=np.int64(2)).scale == 2.0
    assert get_variant("oracle-perfect").move_values([record((4, 2), (4, "*", 2, 8), (8,))], scale=np.float32(0.5))[0] == 0.5
    with pytest.raises(ValueError, match="gamma"):
        OracleReward(make_countdown(), potential=True, gamma=np.float64(1.5))
    with pytest.raises(ValueError, match="scale"):
        OracleReward(make_countdown(), scale=np.bool_(True))
    with pytest.raises(ValueError, match="scale"):
        OracleReward(make_countdown(), scale=10**400)


def test_invalid_move_in_penalty_mode():
    env = OracleReward(make_countdown(invalid_action="penalty"), mode="reachable", potential=False)
    env.reset(seed=0)
    masked = int(np.flatnonzero(env.unwrapped.action_masks() == 0)[0])
    _, r, terminated, _, info = env.step(masked)
    assert terminated and info["reward_terms"] == {"sparse": -1.0, "oracle": -1.0} and r == -2.0


# ---- CLIPO group wrapper -------------------------------------------------------------------------


def trainer_factory(**kwargs):
    """``dim_in -> CLIPOTrainer`` with ``kwargs`` (what ``CLIPOGroupReward(trainer=...)`` calls)."""
    import functools

    clipo = pytest.importorskip("critics.clipo")
    return functools.partial(clipo.CLIPOTrainer, **kwargs)


def scripted_embed(table):
    return lambda traj: table[traj.index]


def test_clipo_group_shares_the_puzzle_on_countdown():
    fns = [lambda: gym.make("Countdown-v0", preset="longproc-0.5k")] * 6
    env = CLIPOGroupReward(fns, group_size=3, embed_fn=lambda t: np.zeros(4), trainer=trainer_factory(dim_out=4))
    _, info = env.reset(seed=1)
    problems = list(info["problem"])
    assert problems[0] == problems[1] == problems[2] and problems[3] == problems[4] == problems[5]
    assert problems[0] != problems[3]


def _play_group(env, plans):
    """Step a CLIPO group env with per-member action lists (Countdown-v0 moves as (a, op, b))."""
    history = []
    for t in range(max(len(p) for p in plans)):
        actions = []
        for i, plan in enumerate(plans):
            sub = env.envs[i].unwrapped
            if t < len(plan):
                a, op, b = plan[t]
                state = list(sub.state)
                ii = state.index(a)
                jj = next(k for k, x in enumerate(state) if x == b and k != ii)
                actions.append(sub.encode_action(ii, jj, op))
            else:
                actions.append(0)
        history.append(env.step(np.array(actions)))
    return history


def test_clipo_rewards_on_countdown_group():
    torch = pytest.importorskip("torch")
    from critics.clipo import CLIPOTrainer, clipo_loss, clipo_rewards

    win = [(6, "-", 2), (5, "-", 3), (4, "*", 2)]
    lose = [(6, "+", 2), (5, "+", 3), (8, "+", 8)]
    table = {0: [1.0, 0.1, 0.0, 0.0], 1: [1.0, -0.1, 0.0, 0.0], 2: [0.0, 0.0, 1.0, 0.0], 3: [0.0, 0.3, 0.9, 0.3]}
    trainer = CLIPOTrainer(dim_in=4, dim_out=16, kind="supcon", temperature=0.5)
    fns = [lambda: OracleReward(make_countdown())] * 4
    env = CLIPOGroupReward(fns, group_size=4, embed_fn=scripted_embed(table), trainer=trainer)
    env.reset(seed=0)
    before = copy.deepcopy(trainer)
    *_, (obs, rewards, terminated, truncated, info) = _play_group(env, [win, win, lose, win])
    assert terminated.all()
    emb = np.array([table[i] for i in range(4)])
    with torch.no_grad():
        z = before.head(torch.tensor(emb, dtype=torch.float32))
    expected = clipo_rewards(clipo_loss(z, [1, 1, 0, 1], [0] * 4, "supcon", 0.5), [1, 1, 0, 1], [0] * 4).numpy()
    np.testing.assert_allclose(info["clipo"], expected, atol=1e-6)
    assert info["clipo"][2] == 0.0 and all(-0.5 <= info["clipo"][i] < 0 for i in (0, 1, 3))
    # the two close correct rollouts beat the outlier correct rollout 3 (near the incorrect one)
    assert info["clipo"][0] > info["clipo"][3] and info["clipo"][1] > info["clipo"][3]
    np.testing.assert_allclose(rewards, [1 + 1 + expected[0], 1 + 1 + expected[1], 0.0, 1 + 1 + expected[3]])
    assert info["reward_terms"]["clipo"].tolist() == pytest.approx(expected.tolist())
    assert info["reward_terms"]["oracle"].tolist() == [1.0, 1.0, 0.0, 1.0]
    assert info["clipo_correct"].tolist() == [True, True, False, True]
    assert env.last_group_stats["anchors"] == 3.0 and trainer.steps_done == 1


def test_clipo_degenerate_group_gets_zero():
    win = [(6, "-", 2), (5, "-", 3), (4, "*", 2)]
    env = CLIPOGroupReward([make_countdown] * 3, group_size=3, embed_fn=lambda t: np.arange(4.0) + t.index,
                           trainer=trainer_factory(dim_out=8))
    env.reset(seed=0)
    *_, (_, rewards, terminated, _, info) = _play_group(env, [win, win, win])  # all correct
    assert terminated.all() and info["clipo"].tolist() == [0.0, 0.0, 0.0] and rewards.tolist() == [1.0, 1.0, 1.0]


def test_clipo_group_hold_protocol_and_autoreset():
    problems = [PUZZLE, Problem(numbers=(4, 2), target=8)]
    table = {0: [1.0, 0.0], 1: [0.9, 0.1], 2: [0.0, 1.0]}
    seen: list[Trajectory] = []

    def embed(traj):
        seen.append(traj)
        return table[traj.index]

    env = CLIPOGroupReward([lambda: ToyEnv(problems)] * 3, group_size=3, embed_fn=embed,
                           trainer=trainer_factory(dim_out=4))
    env.reset(seed=3)
    # member 0 answers at once; member 1 makes a move then answers; member 2 thinks twice then fails
    obs, r, te, tr, info = env.step(np.array([2, 1, 0]))
    assert r.tolist() == [0.0, 0.0, 0.0] and not te.any()
    # member 0's answer is a real decision (kept in the policy loss); its reward is held
    assert info["clipo_waiting"].tolist() == [False, False, False] and info["is_success"][0]
    assert info["reward_terms"]["sparse"][0] == 0.0
    obs, r, te, tr, info = env.step(np.array([4, 2, 0]))  # member 0's action is ignored; member 1 answers
    assert info["clipo_waiting"].tolist() == [True, False, False] and not te.any()
    assert info["transitions"][0] == [] and len(info["transitions"][1]) == 0
    assert env.action_masks()[:2].all()
    obs, r, te, tr, info = env.step(np.array([0, 0, 3]))  # the group ends: everyone reports now
    assert te.tolist() == [True, True, True]
    # members 0 and 1 were held: their actions on this step were ignored, their rewards arrive 2 and 1 steps late
    assert info["clipo_waiting"].tolist() == [True, True, False]
    assert info["clipo_held_steps"].tolist() == [2, 1, 0]
    assert r[0] == pytest.approx(1.0 + info["clipo"][0]) and r[2] == 0.0 and info["clipo"][0] < 0
    assert [len(t.actions) for t in sorted(seen, key=lambda t: t.index)] == [1, 2, 3]
    assert seen[0].correct and not seen[-1].correct
    assert len(seen[1].transitions) == 1  # the move member 1 made
    obs, r, te, tr, info = env.step(np.array([0, 0, 0]))  # next-step autoreset: a new shared puzzle
    assert r.tolist() == [0.0, 0.0, 0.0] and not te.any()
    assert len({p for p in info["problem"]}) == 1
    assert all(len(env._trajectories[i].actions) == 0 for i in range(3))


def test_clipo_embedding_shape_errors():
    env = CLIPOGroupReward([lambda: ToyEnv()] * 3, group_size=3, embed_fn=lambda t: np.zeros((2, 3)),
                           trainer=trainer_factory())
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*1-D vector"):
        env.step(np.array([2, 0, 0]))
    sizes = iter([3, 4])
    env = CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=lambda t: np.zeros(next(sizes)),
                           trainer=trainer_factory())
    env.reset(seed=0)
    with pytest.raises(ValueError, match="length 3"):
        env.step(np.array([2, 2]))
    from critics.clipo import CLIPOTrainer

    env = CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=lambda t: np.zeros(5),
                           trainer=CLIPOTrainer(dim_in=6, dim_out=4))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="length 6"):
        env.step(np.array([2, 0]))
    env = CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=lambda t: [float("nan")] * 3,
                           trainer=trainer_factory())
    env.reset(seed=0)
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([2, 0]))



@pytest.mark.parametrize("out", [[float("nan"), 0.0], [float("inf"), 0.0], [0.0], None])
def test_clipo_trainer_output_is_checked(out):
    """A trainer's NaN / inf reward reached the reward; a wrong count failed deep in zip() or float()."""

    class Scripted:
        last_stats: dict = {}

        def step(self, embeddings, correct, group_ids):
            return out

    env = CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=lambda t: np.zeros(3), trainer=Scripted())
    env.reset(seed=0)
    with pytest.raises(ValueError, match="trainer's step returned .* expected 2 finite rewards"):
        env.step(np.array([2, 3]))


def test_clipo_action_batch_of_the_wrong_length_is_refused():
    """3 actions for 2 envs were taken with the extra one dropped; 1 action failed with an IndexError."""
    env = CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=lambda t: np.zeros(3),
                           trainer=trainer_factory())
    env.reset(seed=0)
    for bad in (np.array([0, 0, 0]), np.array([0])):
        with pytest.raises(ValueError, match=r"one action per env \(2\), got"):
            env.step(bad)
    # one str for a text group was played one character per env; None / an int failed inside gymnasium
    text = CLIPOGroupReward([make_text] * 3, group_size=3, embed_fn=lambda t: np.zeros(3), trainer=trainer_factory())
    text.reset(seed=0)
    for bad in ("6-2", None, 0):
        with pytest.raises(ValueError, match=r"one action per env \(3\), got"):
            text.step(bad)
    assert text.envs[0].unwrapped.completion == ""


def test_clipo_group_argument_errors():
    with pytest.raises(ValueError, match="multiple of group_size"):
        CLIPOGroupReward([lambda: ToyEnv()] * 5, group_size=2, embed_fn=lambda t: np.zeros(2), trainer=trainer_factory())
    with pytest.raises(ValueError, match="group_size"):
        CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=1, embed_fn=lambda t: np.zeros(2), trainer=trainer_factory())
    with pytest.raises(TypeError, match="embed_fn"):
        CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=None, trainer=trainer_factory())
    shared = ToyEnv()  # was played by both members, two turns per step on one game
    for fns in ([lambda: shared] * 2, [lambda: shared, lambda: OracleReward(shared)]):
        with pytest.raises(ValueError, match="one environment for two members"):
            CLIPOGroupReward(fns, group_size=2, embed_fn=lambda t: np.zeros(2), trainer=trainer_factory())
    for bad in (None, "", "sparse"):  # None / '' became the term's key; 'sparse' failed only when a group finished
        with pytest.raises(ValueError, match="key must be a non-empty string other than 'sparse'"):
            CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=lambda t: np.zeros(2),
                             trainer=trainer_factory(), key=bad)
    with pytest.raises(TypeError, match="trainer must be a CLIPO trainer"):
        CLIPOGroupReward([lambda: ToyEnv()] * 2, group_size=2, embed_fn=lambda t: np.zeros(2), trainer={"dim_out": 4})
    env = CLIPOGroupReward([lambda: ToyEnv(report_problem=False)] * 2, group_size=2, embed_fn=lambda t: np.zeros(2),
                           trainer=trainer_factory())
    with pytest.raises(ValueError, match="'problem'"):
        env.reset(seed=0)
    for bad in ("problem", 5, [("problem", PUZZLE)]):  # dict()'s 'update sequence' ValueError / TypeError; pairs taken
        with pytest.raises(ValueError, match="reset options must be a dict or None"):
            env.reset(options=bad)


def test_clipo_group_on_text_env():
    fns = [lambda: OracleReward(make_text())] * 3
    env = CLIPOGroupReward(fns, group_size=3, embed_fn=lambda t: np.array([len(t.transitions), 1.0, t.index]),
                           trainer=trainer_factory(dim_out=8))
    obs, info = env.reset(seed=0)
    assert isinstance(obs[0], str)
    steps = [("6-2=4 [5,3,4]", "6-2=4 [5,3,4]", "6+2=8 [5,3,8]"),
             ("<answer>(6-2)*(5-3)</answer>", " 5-3=2 [4,2]", "<answer>6+2</answer>"),
             ("", "<answer>(6-2)*(5-3)</answer>", "")]
    for acts in steps:
        obs, r, te, tr, info = env.step(acts)
    assert te.all()
    assert info["clipo_correct"].tolist() == [True, True, False]
    assert info["reward_terms"]["sparse"].tolist() == [1.0, 1.0, 0.0]
    assert info["clipo"][2] == 0.0 and (info["clipo"][:2] <= 0).all()


def test_wrappers_over_longproc_search_traces():
    """Full reference DFS traces (with backtracking) through CountdownText-v0: shaping telescopes to -1."""
    from countdown_gym import dfs_trace, load_split

    problems = [p for p in load_split("longproc-0.5k", "test")[:10] if len(dfs_trace(p).splitlines()) < 100][:3]
    assert problems
    for p in problems:
        env = OracleReward(gym.make("CountdownText-v0", problems=[p]), potential=True, gamma=1.0)
        env = OracleReward(env, mode="perfect")
        env.reset(seed=0)
        shaped, perfect, good_moves = 0.0, 0.0, 0
        for line in dfs_trace(p).splitlines():
            _, _, terminated, truncated, info = env.step(line)
            shaped += info["reward_terms"]["oracle_shaping"]
            perfect += info["reward_terms"]["oracle"]
            good_moves += sum(t["valid"] and reachable(t["next_state"], p.target) for t in info["transitions"])
            if terminated or truncated:
                break
        assert terminated and info["reward_terms"]["sparse"] == 1.0
        assert shaped == pytest.approx(-1.0)
        assert perfect == good_moves > 0


def test_named_wrappers_refuse_a_non_bool_potential_and_a_bad_key():
    for make in (lambda **kw: OracleReward(gym.make("Countdown-v0"), **kw),
                 lambda **kw: ContrastiveCriticReward(gym.make("Countdown-v0"), critic=FakeCritic(), **kw)):
        for bad in ("no", "False", 1, None):  # "no" / "False" / 1 chose shaping, None the additive term
            with pytest.raises(ValueError, match="potential must be a bool"):
                make(potential=bad)
        for bad in ("", 0, "sparse"):  # '' / 0 became the default key, which TermReward refuses
            with pytest.raises(ValueError, match="key must be a non-empty string"):
                make(key=bad)
        assert make(potential=np.bool_(True)).key.endswith("_shaping") and make(key="k").key == "k"


def test_wrappers_pass_check_env_and_are_recorded_in_the_spec():
    from gymnasium.utils.env_checker import check_env

    env = OracleReward(gym.make("Countdown-v0", invalid_action="penalty"), potential=True, gamma=0.9)
    with pytest.warns(UserWarning, match="different from the unwrapped"):
        check_env(env, skip_render_check=True)
    remade = gym.make(env.spec)
    assert isinstance(remade, OracleReward) and remade.potential and remade.gamma == 0.9
    text = ContrastiveCriticReward(make_text(), critic=FakeCritic())
    with pytest.warns(UserWarning, match="different from the unwrapped"):
        check_env(text, skip_render_check=True)
