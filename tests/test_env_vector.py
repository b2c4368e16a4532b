"""CountdownVectorEnv: agreement with Countdown-v0, legality against Rules.check, make_vec."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import countdown_gym  # noqa: F401  (registers the envs)
from countdown_gym import Problem, Rules
from countdown_gym.envs.countdown import CountdownEnv, InvalidActionError, decode_action, num_actions
from countdown_gym.envs.move_kernel import batch_moves
from countdown_gym.envs.vector import CountdownVectorEnv

INT_RULES = [
    Rules.longproc(),
    Rules.classic(),
    Rules(name="nonneg", sign="nonnegative", value_limit=500),
    Rules(name="any-int", sign="any", value_limit=None),
    Rules(name="any-limit", sign="any", value_limit=100),
    Rules(name="positive-nolimit-all", sign="positive", value_limit=None, use_all=True),
    Rules(name="huge-limit", sign="positive", value_limit=10**12),
    Rules(name="huge-limit-nonneg", sign="nonnegative", value_limit=2**40),
]


def random_actions(mask: np.ndarray, rng: np.random.Generator, p_masked: float = 0.0) -> np.ndarray:
    """A uniformly random legal action per row (a random, possibly masked one with p_masked)."""
    scores = rng.random(mask.shape) * mask
    acts = scores.argmax(axis=1)
    wild = rng.random(len(mask)) < p_masked
    acts[wild] = rng.integers(mask.shape[1], size=int(wild.sum()))
    return acts


def assert_agrees(venv: CountdownVectorEnv, make_single, steps: int, seed: int, p_masked: float = 0.0) -> int:
    """Step ``venv`` and one single env per slot on the same problems and actions; compare all."""
    rng = np.random.default_rng(seed)
    obs, info = venv.reset(seed=seed)
    singles = [make_single() for _ in range(venv.num_envs)]
    for k, (env, p) in enumerate(zip(singles, venv.current_problems(), strict=True)):
        o, i = env.reset(seed=k, options={"problem": p})
        np.testing.assert_array_equal(o, obs[k])
        np.testing.assert_array_equal(i["action_mask"], info["action_mask"][k])
    episodes = 0
    for _ in range(steps):
        acts = random_actions(info["action_mask"], rng, p_masked)
        obs, rew, term, trunc, info = venv.step(acts)
        problems = venv.current_problems()
        for k, env in enumerate(singles):
            o, r, te, tr, i = env.step(int(acts[k]))
            assert (r, te, tr) == (rew[k], term[k], trunc[k]), k
            if te or tr:
                episodes += 1
                assert info["_final_obs"][k]
                np.testing.assert_array_equal(o, info["final_obs"][k])
                assert i["is_success"] == info["final_info"]["is_success"][k]
                assert i["dead_end"] == info["final_info"]["dead_end"][k]
                o, i = env.reset(options={"problem": problems[k]})
            else:
                assert info.get("_final_obs") is None or not info["_final_obs"][k]
            np.testing.assert_array_equal(o, obs[k])
            np.testing.assert_array_equal(i["action_mask"], info["action_mask"][k])
        np.testing.assert_array_equal(venv.action_masks(), info["action_mask"].astype(bool))
    return episodes


def test_agrees_with_single_env_on_train_split():
    venv = CountdownVectorEnv(32)
    assert assert_agrees(venv, CountdownEnv, steps=60, seed=0) > 100


def test_agrees_in_penalty_mode_with_masked_actions():
    venv = CountdownVectorEnv(24, invalid_action="penalty", invalid_penalty=-0.25)
    assert_agrees(venv, lambda: CountdownEnv(invalid_action="penalty", invalid_penalty=-0.25), steps=50, seed=1, p_masked=0.2)


@pytest.mark.parametrize("rules", INT_RULES, ids=lambda r: r.name)
def test_agrees_under_integer_rule_variants(rules):
    rng = np.random.default_rng(2)
    problems = []
    while len(problems) < 40:
        numbers = tuple(int(x) for x in rng.integers(0 if rules.sign != "positive" else 1, 40, size=rng.integers(2, 5)))
        target = int(rng.integers(1, 60))
        if rules.use_all or target not in numbers:
            problems.append((numbers, target))
    kwargs = {"problems": problems, "rules": rules, "max_numbers": 4}
    venv = CountdownVectorEnv(16, invalid_action="penalty", **kwargs)
    assert_agrees(venv, lambda: CountdownEnv(invalid_action="penalty", **kwargs), steps=40, seed=3, p_masked=0.05)


def test_agrees_with_truncation_and_six_numbers():
    venv = CountdownVectorEnv(16, preset="hard", split="validation", max_steps=3)
    assert_agrees(venv, lambda: CountdownEnv(preset="hard", split="validation", max_steps=3), steps=30, seed=4)


@pytest.mark.parametrize("limit", [1, 3])
def test_max_episode_steps_truncates_as_time_limit(limit):
    # make_vec's max_episode_steps gave truncated=False on a step that ended the episode at the limit (a win at
    # step 3, a masked action at step 1), where gymnasium.make's TimeLimit (and make_vec's "sync" mode) give True
    venv = gym.make_vec("Countdown-v0", num_envs=16, max_episode_steps=limit)
    assert isinstance(venv, CountdownVectorEnv)
    assert assert_agrees(venv, lambda: gym.make("Countdown-v0", max_episode_steps=limit), steps=30, seed=5, p_masked=0.1)


def test_dead_end_and_final_info():
    venv = CountdownVectorEnv(2, problems=[((1, 1, 4001), 4002)])
    venv.reset(seed=0)
    obs, rew, term, trunc, info = venv.step(np.array([0, 0]))  # 1 + 1 = 2 -> [4001, 2]: no legal move
    assert term.all() and not trunc.any() and (rew == 0).all()
    assert info["final_info"]["dead_end"].all()
    assert info["final_obs"][0][:3].tolist() == [1.0, np.float32(2 / 2000), 0.0]  # 4001 saturates at 1
    assert info["action_mask"].sum(axis=1).tolist() == [8, 8]  # the new episode: 1+1, 1-1 (= 0), 1*1, 1/1, both orders


@pytest.mark.parametrize("rules", INT_RULES, ids=lambda r: r.name)
def test_batched_legality_equals_rules_check(rules):
    rng = np.random.default_rng(5)
    venv = CountdownVectorEnv(1, problems=[((1, 2, 3, 4), 5)], rules=rules)
    values = np.array([0, 1, 2, 3, 4, 6, 7, 12, -1, -3, -12, 99, 100, 101, 499, 500, 1999, 2000, 2001, -2000])
    vals = rng.choice(values, size=(400, 4)).astype(venv._dtype)
    count = rng.integers(1, 5, size=400)
    for k in range(400):
        vals[k, count[k] :] = 0
    legal = batch_moves(vals.copy(), count, venv.rules)  # what the vector env masks with
    for k in range(400):
        state = tuple(int(x) for x in vals[k, : count[k]])
        for a in range(num_actions(4)):
            i, j, op = decode_action(a, 4)
            expected = i < len(state) and j < len(state) and rules.check(state[i], op, state[j])[0] is not None
            assert legal[k, a] == expected, (rules.name, state, i, op, j)


def test_record_transitions_match_single_env():
    venv = CountdownVectorEnv(4, problems=[((21, 16, 17, 26), 46)], record_transitions=True)
    single = CountdownEnv(problems=[((21, 16, 17, 26), 46)])
    _, info = venv.reset(seed=0)
    single.reset(seed=0)
    assert info["transitions"][0] == []
    a = single.encode_action(0, 1, "+")
    _, _, _, _, info = venv.step(np.full(4, a))
    *_, sinfo = single.step(a)
    assert all(t == sinfo["transitions"] for t in info["transitions"])


def test_reset_options_and_determinism():
    venv = CountdownVectorEnv(8)
    o1, _ = venv.reset(seed=7)
    o2, _ = venv.reset(seed=7)
    np.testing.assert_array_equal(o1, o2)
    p = Problem((21, 16, 17, 26), 46)
    obs, _ = venv.reset(options={"problem": p})
    assert venv.current_problems() == [p] * 8 and (obs == obs[0]).all()
    group = [((1, 2, 3), 6)] * 4 + [((4, 5), 9)] * 4
    venv.reset(options={"problems": group})
    assert [q.numbers for q in venv.current_problems()] == [(1, 2, 3)] * 4 + [(4, 5)] * 4


def test_errors():
    with pytest.raises(ValueError, match="integer_only"):
        CountdownVectorEnv(2, preset="tinyzero")
    with pytest.raises(ValueError, match="num_envs"):
        CountdownVectorEnv(0)
    with pytest.raises(ValueError, match="overflow"):
        CountdownVectorEnv(2, problems=[((10**6,) * 4, 5)], rules="classic")
    with pytest.raises(ValueError, match="target does not fit"):
        CountdownVectorEnv(2, problems=[((1, 2), 10**30)])
    with pytest.raises(ValueError, match="target does not fit"):
        CountdownVectorEnv(2, problems=[((1, 2), 3)]).reset(seed=0, options={"problem": ((1, 2), 10**30)})
    with pytest.raises(ValueError, match="disagree"):
        CountdownVectorEnv(2, max_steps=2, max_episode_steps=3)
    for bad in (0, 2.0, "2"):  # the error named max_steps
        with pytest.raises(ValueError, match="^max_episode_steps must be a positive int"):
            CountdownVectorEnv(2, max_episode_steps=bad)
    for bad in ("no", None, 1):  # were read as bool(...): "no" recorded the transitions
        with pytest.raises(ValueError, match="record_transitions must be a bool"):
            CountdownVectorEnv(2, record_transitions=bad)
    with pytest.raises(ValueError, match="no legal first move"):  # its mask would be all zero
        CountdownVectorEnv(2, problems=[((21, 16, 17, 26), 46), ((4001, 2), 5)])
    with pytest.raises(ValueError, match="no legal first move"):
        CountdownVectorEnv(2, problems=[((1, 2), 3)]).reset(seed=0, options={"problem": ((4001, 2), 5)})
    venv = CountdownVectorEnv(4, problems=[((21, 16, 17, 26), 46)], invalid_action="raise")
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(4, dtype=int))
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="in 0..47"):
        venv.step(np.full(4, 48))
    with pytest.raises(InvalidActionError, match=r"envs \[0, 1, 2, 3\]"):
        venv.step(np.full(4, venv.single_action_space.n - 1))  # slots (3, 2) '/': 26 / 17
    with pytest.raises(ValueError, match="one int seed"):
        venv.reset(seed=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="one per env"):
        venv.reset(options={"problems": [((1, 2), 3)]})
    with pytest.raises(ValueError, match="unknown reset options"):
        venv.reset(options={"seed": 3})
    with pytest.raises(ValueError, match="reset options must be a dict"):
        venv.reset(options=["problem"])
    for bad in (3, "abc", Problem((1, 2), 3)):  # was a TypeError from list(), or a complaint about 'a'
        with pytest.raises(ValueError, match="'problems' must be a list of 4 problems"):
            venv.reset(options={"problems": bad})
    with pytest.raises(ValueError, match="got int <a number of over 4300 digits>"):  # its repr raised the digit limit
        venv.reset(options={"problems": 10**5000})


def test_make_vec_default_uses_native_env():
    envs = gym.make_vec("Countdown-v0", num_envs=4)
    assert isinstance(envs.unwrapped, CountdownVectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, info = envs.reset(seed=0)
    assert obs.shape == (4, 10) and info["action_mask"].shape == (4, 48)
    envs.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_sync_and_async(mode):
    envs = gym.make_vec("Countdown-v0", num_envs=2, vectorization_mode=mode)
    obs, info = envs.reset(seed=0)
    assert obs.shape == (2, 10) and info["action_mask"].shape == (2, 48)
    rng = np.random.default_rng(0)
    for _ in range(6):
        acts = random_actions(info["action_mask"], rng)  # ignored on a NEXT_STEP autoreset step
        obs, rew, term, trunc, info = envs.step(acts)
        assert obs in envs.observation_space
    envs.close()
