"""Countdown-v0: API conformance, masks against Rules.check, rewards, errors."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from rule_variants import RULE_VARIANTS

import countdown_gym  # noqa: F401  (registers the envs)
from countdown_gym import GeneratorConfig, Problem, Rules, solution_path
from countdown_gym.envs.actions import move_results
from countdown_gym.envs.countdown import (
    CountdownEnv,
    InvalidActionError,
    decode_action,
    encode_action,
    num_actions,
)
from countdown_gym.envs.problem_source import ProblemSpec, make_problem_source
from countdown_gym.game.rules import OPERATORS
from countdown_gym.game.solver import legal_moves


def slots_for(state: tuple, a, b) -> tuple[int, int]:
    """Slot indices of operands ``a`` and ``b`` (distinct) in ``state``."""
    i = state.index(a)
    j = next(k for k, x in enumerate(state) if x == b and k != i)
    return i, j


def play_random(env: CountdownEnv, rng: np.random.Generator, episodes: int):
    """Yield every (state, info) the env passes through under random legal play."""
    for _ in range(episodes):
        _, info = env.reset(seed=int(rng.integers(1 << 30)))
        yield info
        done = False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            if len(legal) == 0:
                break
            _, _, term, trunc, info = env.step(int(rng.choice(legal)))
            done = term or trunc
            yield info


def expected_mask(state: tuple, rules: Rules, m: int) -> np.ndarray:
    mask = np.zeros(num_actions(m), dtype=np.int8)
    for a in range(num_actions(m)):
        i, j, op = decode_action(a, m)
        if i < len(state) and j < len(state) and rules.check(state[i], op, state[j])[0] is not None:
            mask[a] = 1
    return mask


# ---- registration and API conformance ------------------------------------------------------


def test_registered_ids_and_entry_points():
    assert gym.spec("Countdown-v0").entry_point == "countdown_gym.envs.countdown:CountdownEnv"
    assert gym.spec("Countdown-v0").max_episode_steps is None
    assert gym.spec("CountdownText-v0").entry_point == "countdown_gym.envs.text:CountdownTextEnv"
    env = gym.make("countdown_gym:Countdown-v0")
    assert isinstance(env.unwrapped, CountdownEnv)
    env.close()


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"preset": "tinyzero"}, {"preset": "hard", "split": "validation"}, {"rules": "classic", "split": "test"}],
)
def test_check_env_passes_without_warnings(kwargs):
    env = gym.make("Countdown-v0", invalid_action="penalty", render_mode="ansi", **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_spaces_and_observation_encoding():
    env = CountdownEnv(problems=[((21, 16, 17, 26), 46)])
    assert env.action_space.n == 48 and env.observation_space.shape == (10,)
    obs, info = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs in env.observation_space
    np.testing.assert_array_equal(obs[:4], np.float32([21 / 2000, 16 / 2000, 17 / 2000, 26 / 2000]))
    np.testing.assert_array_equal(obs[4:8], 1.0)
    assert obs[8] == np.float32(46 / 2000) and obs[9] == 0.0
    obs, *_ , info = env.step(env.encode_action(0, 1, "+"))
    assert info["state"] == (17, 26, 37)
    np.testing.assert_array_equal(obs[:4], np.float32([17 / 2000, 26 / 2000, 37 / 2000, 0]))
    np.testing.assert_array_equal(obs[4:8], [1, 1, 1, 0])
    assert obs[9] == np.float32(1 / 3)
    assert CountdownEnv(preset="hard").observation_space.shape == (14,)
    assert CountdownEnv(preset="hard").action_space.n == 120


def test_action_encoding_roundtrip_and_formula():
    for m in range(2, 7):
        seen = set()
        for i in range(m):
            for j in range(m):
                if i == j:
                    continue
                for o, op in enumerate(OPERATORS):
                    a = encode_action(i, j, op, m)
                    h = max(i, j)
                    assert a == (h * (h - 1) + 2 * min(i, j) + (i > j)) * 4 + o
                    assert encode_action(i, j, o, m) == a
                    assert decode_action(a, m) == (i, j, op)
                    seen.add(a)
        assert seen == set(range(num_actions(m)))
    assert [decode_action(4 * p, 4)[:2] for p in range(6)] == [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)]


def test_determinism_per_seed():
    def run(seed):
        env = CountdownEnv()
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(5):
            obs, info = env.reset(seed=seed if not out else None)
            out.append((info["problem"], obs.tobytes()))
            done = False
            while not done:
                obs, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
                out.append((obs.tobytes(), r, term))
                done = term or trunc
        return out

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_replaced_np_random_decides_the_next_problems():
    # the pool draws are buffered; a generator set by the caller must still decide the very next resets
    a, b = CountdownEnv(), CountdownEnv()
    a.reset(seed=1)
    b.reset(seed=2)
    a.np_random, b.np_random = np.random.default_rng(7), np.random.default_rng(7)
    assert [a.reset()[1]["problem"] for _ in range(3)] == [b.reset()[1]["problem"] for _ in range(3)]


# ---- masks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("rules", [*RULE_VARIANTS, Rules.tinyzero()], ids=lambda r: r.name)
def test_masks_match_rules_check_on_random_states(rules):
    rng = np.random.default_rng(0)
    numbers = rng.integers(0 if rules.sign != "positive" else 1, 60, size=(150, 4))
    problems = [(tuple(int(x) for x in row), int(rng.integers(1, 100))) for row in numbers]
    if not rules.use_all:
        problems = [(n, t) for n, t in problems if t not in n]
    env = CountdownEnv(problems=problems, rules=rules)
    checked = 0
    for info in play_random(env, rng, episodes=150):
        state = info["state"]
        mask = info["action_mask"]
        assert mask.dtype == np.int8
        np.testing.assert_array_equal(mask, expected_mask(state, rules, 4))
        np.testing.assert_array_equal(env.action_masks(), mask.astype(bool))
        # the solver's legal moves are the mask's moves (up to the order of + and * operands)
        from_mask = set()
        for a in np.flatnonzero(mask):
            i, j, op = decode_action(int(a), 4)
            x, y = state[i], state[j]
            from_mask.add((min(x, y), op, max(x, y)) if op in "+*" else (x, op, y))
        from_solver = {
            (min(x, y), op, max(x, y)) if op in "+*" else (x, op, y) for _, _, (x, op, y, _) in legal_moves(state, rules)
        }
        assert from_mask == from_solver
        checked += 1
    assert checked > 300


def test_move_results_equal_rules_check_on_extreme_pairs():
    values = [0, 1, 2, 3, 6, 7, -1, -6, 12, 1999, 2000, 2001, -2000, 4000, 10**9]
    for rules in [*RULE_VARIANTS, Rules.tinyzero()]:
        for x in values:
            for y in values:
                res = move_results((x, y), rules, 2)
                for a in range(num_actions(2)):
                    i, j, op = decode_action(a, 2)
                    assert res[a] == rules.check((x, y)[i], op, (x, y)[j])[0], (rules.name, x, op, y)


# ---- rewards and episode ends -----------------------------------------------------------------


@pytest.mark.parametrize(
    "preset,split,rules",
    [("longproc-0.5k", "test", None), ("tinyzero", "test", None), ("hard", "test", None), ("longproc-0.5k", "test", "classic")],
)
def test_following_solution_path_wins(preset, split, rules):
    env = CountdownEnv(preset=preset, split=split, rules=rules)
    for problem in env.source.pool[:25]:
        path = solution_path(problem.numbers, problem.target, env.rules)
        assert path is not None
        _, info = env.reset(options={"problem": (problem.numbers, problem.target)})
        reward = 0.0
        for k, (a, op, b, r) in enumerate(path):
            i, j = slots_for(info["state"], a, b)
            _, reward, term, trunc, info = env.step(env.encode_action(i, j, op))
            (tr,) = info["transitions"]
            assert tr["move"] == (a, op, b, r) and tr["valid"] and tr["next_state"] == info["state"]
            assert term == (k == len(path) - 1) and not trunc
        assert reward == 1.0 and info["is_success"]


def test_use_all_semantics():
    # use_all: making the target early with numbers left neither wins nor ends the episode
    env = CountdownEnv(problems=[((2, 3, 5, 7), 5)])
    env.reset(seed=0)
    _, r, term, trunc, info = env.step(env.encode_action(0, 1, "+"))
    assert (r, term, trunc) == (0.0, False, False) and info["state"] == (5, 7, 5)
    # not use_all: the target appearing wins at once
    env = CountdownEnv(problems=[((2, 3, 7, 11), 5)], rules="classic")
    env.reset(seed=0)
    _, r, term, trunc, info = env.step(env.encode_action(0, 1, "+"))
    assert (r, term, trunc) == (1.0, True, False) and info["is_success"]
    # one number left and not the target: terminated, reward 0
    env = CountdownEnv(problems=[((2, 3), 7)])
    env.reset(seed=0)
    _, r, term, _, info = env.step(env.encode_action(0, 1, "+"))
    assert (r, term, info["is_success"], info["dead_end"]) == (0.0, True, False, False)


def test_dead_end_terminates_with_zero_reward():
    env = CountdownEnv(problems=[((1, 1, 4001), 4002)])
    env.reset(seed=0)
    _, r, term, trunc, info = env.step(env.encode_action(0, 1, "+"))
    assert info["state"] == (4001, 2)
    assert (r, term, trunc, info["dead_end"]) == (0.0, True, False, True)
    assert info["action_mask"].sum() == 0


def test_max_steps_truncates():
    env = CountdownEnv(problems=[((21, 16, 17, 26), 46)], max_steps=1)
    env.reset(seed=0)
    _, r, term, trunc, _ = env.step(env.encode_action(0, 1, "+"))
    assert (r, term, trunc) == (0.0, False, True)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_transition_record_shape():
    env = CountdownEnv(problems=[((21, 16, 17, 26), 46)])
    _, info = env.reset(seed=0)
    assert info["transitions"] == [] and info["problem"] == Problem((21, 16, 17, 26), 46)
    _, _, _, _, info = env.step(env.encode_action(0, 1, "+"))
    assert info["transitions"] == [
        {
            "state": (21, 16, 17, 26),
            "move": (21, "+", 16, 37),
            "next_state": (17, 26, 37),
            "target": 46,
            "valid": True,
            "reason": "ok",
            "rules": Rules.longproc(),
        }
    ]
    assert set(info) == {"action_mask", "transitions", "problem", "state", "is_success", "dead_end"}


def test_rational_rules_keep_exact_fractions():
    env = CountdownEnv(problems=[((3, 2, 4), 6)], rules="tinyzero")
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.encode_action(0, 1, "/"))
    from fractions import Fraction

    assert info["state"] == (4, Fraction(3, 2))
    _, r, term, _, info = env.step(env.encode_action(0, 1, "*"))
    assert info["state"] == (6,) and r == 1.0 and term


# ---- masked actions --------------------------------------------------------------------------


def test_masked_action_raises_on_request_and_leaves_state():
    env = CountdownEnv(problems=[((21, 16, 17, 26), 46)], invalid_action="raise")
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="non_integer_result") as err:
        env.step(env.encode_action(0, 1, "/"))
    assert isinstance(err.value, ValueError) and "invalid_action='penalty'" in str(err.value)
    _, _, _, _, info = env.step(env.encode_action(0, 1, "+"))  # the episode goes on
    with pytest.raises(InvalidActionError, match="empty_slot"):
        env.step(env.encode_action(0, 3, "+"))


def test_masked_action_penalty_mode():
    env = CountdownEnv(problems=[((21, 16, 17, 26), 46)], invalid_action="penalty", invalid_penalty=-0.5)
    obs0, _ = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(env.encode_action(1, 0, "-"))
    assert (r, term, trunc) == (-0.5, True, False)
    np.testing.assert_array_equal(obs, obs0)
    (tr,) = info["transitions"]
    assert tr == {
        "state": (21, 16, 17, 26),
        "move": (16, "-", 21, None),
        "next_state": None,
        "target": 46,
        "valid": False,
        "reason": "negative_result",
        "rules": Rules.longproc(),
    }
    env.reset(seed=0)
    env.step(env.encode_action(0, 1, "+"))
    *_, info = env.step(env.encode_action(3, 0, "*"))
    assert info["transitions"][0]["reason"] == "empty_slot" and info["transitions"][0]["move"] == (None, "*", 17, None)


# ---- problems, options, rendering ----------------------------------------------------------


def test_reset_option_problem_makes_groups_play_the_same_puzzle():
    envs = [CountdownEnv() for _ in range(4)]
    p = Problem((21, 16, 17, 26), 46)
    obs = [e.reset(seed=k, options={"problem": p})[0] for k, e in enumerate(envs)]
    assert all(np.array_equal(o, obs[0]) for o in obs)
    assert envs[0].reset(options={"problem": ([21, 16, 17, 26], 46)})[1]["problem"] == p


def test_problem_spec_is_the_one_value_of_the_problem_arguments():
    import gymnasium as gym

    from countdown_gym.envs.multiturn import CountdownMultiTurnEnv
    from countdown_gym.envs.text import CountdownTextEnv
    from countdown_gym.envs.vector import CountdownVectorEnv

    spec = ProblemSpec(split="test", rules="longproc")
    assert spec.resolve() is make_problem_source(split="test", rules="longproc")  # resolved once per process
    for env in (CountdownEnv(problem_spec=spec), CountdownVectorEnv(2, spec), CountdownTextEnv(spec),
                CountdownMultiTurnEnv(problem_spec=spec), gym.make("Countdown-v0", split="test", rules="longproc").unwrapped):
        assert env.source.description == "longproc-0.5k/test"
    with pytest.raises(ValueError, match="not both"):
        CountdownEnv(problem_spec=spec, split="train")
    with pytest.raises(TypeError, match="Countdown-v0 got unexpected keyword arguments \\['colour'\\]"):
        CountdownEnv(colour="red")
    with pytest.raises(ValueError, match="problem_spec must be a ProblemSpec"):
        CountdownEnv("longproc-0.5k")  # type: ignore[arg-type]


def test_problem_sources():
    assert make_problem_source().description == "longproc-0.5k/train"
    src = make_problem_source(problems=[{"numbers": [1, 2, 3], "target": 6}, ((4, 5), 9)])
    assert src.max_numbers == 3 and len(src.pool) == 2
    cfg = GeneratorConfig(name="tiny", min_numbers=3, max_numbers=3, max_value=9, min_target=1, max_target=20)
    env = CountdownEnv(config=cfg)
    _, info = env.reset(seed=1)
    assert info["problem"].preset == "tiny" and env.max_numbers == 3
    again = CountdownEnv(config=cfg)
    assert again.reset(seed=1)[1]["problem"] == info["problem"]
    gen = CountdownEnv(preset="longproc-0.5k", split="generate")
    _, info = gen.reset(seed=0)
    assert len(info["problem"].numbers) == 4
    assert CountdownEnv(problems=[((1, 2), 3)], max_numbers=4).observation_space.shape == (10,)


def test_problem_dicts_with_numpy_ints_and_bad_dicts():
    # a pandas / parquet row holds numpy ints: accepted as in (numbers, target) pairs
    row = {"numbers": np.array([6, 2, 5, 3]), "target": np.int64(8)}
    env = CountdownEnv(problems=[row])
    assert env.reset(seed=0, options={"problem": row})[1]["problem"] == Problem((6, 2, 5, 3), 8)
    for bad in ({"numbers": [1, 2], "target": "x"}, {"numbers": [1, 2.5], "target": 3}):
        with pytest.raises(ValueError, match="bad problem"):
            CountdownEnv(problems=[bad])
        with pytest.raises(ValueError, match="bad problem"):
            env.reset(options={"problem": bad})


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"preset": "nope"}, "unknown preset"),
        ({"split": "dev"}, "unknown split"),
        ({"preset": "tinyzero", "problems": [((1, 2), 3)]}, "not both"),
        ({"config": "longproc-0.5k"}, "GeneratorConfig"),
        ({"rules": "nope"}, "unknown rules preset"),
        ({"rules": 3}, "rules must be"),
        ({"problems": []}, "empty"),
        ({"problems": [((5,), 5)]}, "at least 2 numbers"),
        ({"problems": [((1, 2, 3), 3)], "rules": "classic"}, "already one of the numbers"),
        ({"problems": [((1, 2, 3), 6), ((1, 2), 3)], "max_numbers": 2}, "smaller than"),
        ({"problems": [Problem((1, 2), 3), Problem((1, 2), 3, Rules.tinyzero())]}, "different rules"),
        ({"problems": ["abc"]}, "a problem must be"),
        ({"problems": {"numbers": [1, 2], "target": 3}}, "problems must be a list of problems, got dict"),  # was "got str"
        ({"invalid_action": "ignore"}, "invalid_action"),
        ({"invalid_penalty": float("nan")}, "invalid_penalty"),
        ({"max_steps": 0}, "max_steps"),
        ({"value_scale": -1}, "value_scale"),
        ({"value_scale": 10**400}, "value_scale"),  # past float range: was an OverflowError from math.isfinite
        ({"invalid_penalty": -(10**400)}, "invalid_penalty"),
        ({"value_scale": np.complex128(5)}, "value_scale"),  # was accepted, its imaginary part dropped with a warning
        ({"render_mode": "rgb"}, "render_mode"),
    ],
)
def test_bad_arguments_give_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CountdownEnv(**kwargs)


def test_a_value_limit_past_float_range_scales_by_the_largest_float():
    """Rules allow a value_limit of up to 4300 digits; the default value_scale was an OverflowError past 1e308."""
    from countdown_gym.envs.vector import CountdownVectorEnv

    rules = Rules(name="huge", value_limit=10**400)
    for env in (CountdownEnv(rules=rules, problems=[((21, 16, 17, 26), 46)]),
                CountdownVectorEnv(2, rules=rules, problems=[((21, 16, 17, 26), 46)])):
        assert env.value_scale == np.finfo(np.float64).max
        assert np.isfinite(env.reset(seed=0)[0]).all()


def test_bad_calls_give_clear_errors():
    env = CountdownEnv(problems=[((21, 16, 17, 26), 46)])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    for bad in (48, -1, 1.5, "3", True):
        with pytest.raises(ValueError, match="action must be"):
            env.step(bad)
    for bad in (10**5000, [10**5000]):  # the message's repr raised Python's int->str digit limit instead
        with pytest.raises(ValueError, match=r"action must be an int in 0\.\.47, got .*<a number of over 4300 digits>"):
            env.step(bad)
    for call in (lambda: env.encode_action(10**5000, 1, "+"), lambda: env.encode_action(0, 1, 10**5000),
                 lambda: env.decode_action(10**5000)):  # encode_action / decode_action's repr raised it too
        with pytest.raises(ValueError, match=r"must be .*, got int <a number of over 4300 digits>"):
            call()
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"problems": []})
    for bad in (["problem"], 5, "problem", 10**5000):  # not a dict: was an AttributeError / TypeError, or a letter-by-
        with pytest.raises(ValueError, match="reset options must be a dict or None, got "):  # letter list; an int
            env.reset(options=bad)  # past 4300 digits: the digit-limit ValueError of its repr
    with pytest.raises(ValueError, match="only 4 slots"):
        env.reset(options={"problem": ((1, 2, 3, 4, 5), 6)})
    for bad in ({25, 50, 75}, {1: 0, 2: 0}):  # was played as tuple(set): {2, 2, 3} silently became (2, 3)
        with pytest.raises(ValueError, match="must be a sequence of ints"):
            env.reset(options={"problem": (bad, 100)})
    with pytest.raises(ValueError, match="plays under"):
        env.reset(options={"problem": Problem((1, 2), 3, Rules.tinyzero())})
    with pytest.raises(ValueError, match="i == j"):
        env.encode_action(1, 1, "+")
    with pytest.raises(ValueError, match="unknown operator"):
        env.encode_action(0, 1, "^")
    env.step(np.int64(0))  # numpy ints are accepted
    env.step(np.array(0))
    assert CountdownEnv(problems=[((1, 2), 3)], max_numbers=np.int64(3)).max_numbers == 3
    assert CountdownEnv(preset="tinyzero", max_numbers=6).max_numbers == 6  # its source is memoised: 6.0 found it
    with pytest.raises(ValueError, match="max_numbers must be an int >= 2 or None, got 6.0"):
        CountdownEnv(preset="tinyzero", max_numbers=6.0)
    with pytest.raises(ValueError, match="above the supported 64"):  # not 4e10 actions built in a hang
        CountdownEnv(problems=[((1, 2), 3)], max_numbers=100_000)
    with pytest.raises(ValueError, match="69 numbers; at most 64"):
        CountdownEnv(problems=[(tuple(range(1, 70)), 5)])


def test_huge_values_saturate_the_observation():
    # a target (or number, without a value limit) too large for a float encodes as +-1, not OverflowError
    env = CountdownEnv(problems=[((1, 2), 3)])
    obs, info = env.reset(seed=0, options={"problem": ((1, 2), 10**400)})
    assert obs[-2] == 1.0 and info["problem"].target == 10**400
    env = CountdownEnv(problems=[((10**15 - 1, 2), 3)], rules=Rules.longproc().replace(value_limit=None))
    obs, _ = env.reset(seed=0)
    assert obs[0] == 1.0 and env.observation_space.contains(obs)


def test_render_ansi_and_human(capsys):
    env = CountdownEnv(problems=[((21, 16, 17, 26), 46)], render_mode="ansi")
    env.reset(seed=0)
    env.step(env.encode_action(0, 1, "+"))
    text = env.render()
    assert "target 46" in text and "21 + 16 = 37" in text and "[17, 26, 37]" in text
    human = CountdownEnv(problems=[((21, 16, 17, 26), 46)], render_mode="human")
    human.reset(seed=0)
    human.step(human.encode_action(0, 1, "+"))
    assert "21 + 16 = 37" in capsys.readouterr().out


def test_maskable_ppo_trains_on_the_registered_env(tmp_path):
    pytest.importorskip("sb3_contrib")
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.logger import configure

    torch.set_num_threads(1)
    env = gym.make("Countdown-v0")
    model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=1, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), []))  # SB3's default logger makes a /tmp/SB3-<date> folder per run
    model.learn(64)
    assert get_action_masks(model.get_env()).shape == (1, 48)


@pytest.mark.parametrize("env_id", ["Countdown-v0", "CountdownText-v0", "CountdownMultiTurn-v0"])
def test_a_start_state_without_a_legal_move_is_refused_as_the_vector_env_does(env_id):
    env = gym.make(env_id).unwrapped
    with pytest.raises(ValueError, match="no legal first move"):
        env.reset(seed=0, options={"problem": ((4001, 2), 3)})
    with pytest.raises(ValueError, match="no legal first move"):
        gym.make(env_id, problems=[((21, 16, 17, 26), 46), ((4001, 2), 5)])


def test_the_registered_default_passes_gymnasiums_own_checker():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("Countdown-v0").unwrapped
    assert env.invalid_action == "penalty"
    check_env(env)  # it takes masked actions: they end the episode with the penalty, they do not raise
    env.reset(seed=0, options={"problem": ((21, 16, 17, 26), 46)})
    _, r, terminated, _, info = env.step(env.encode_action(0, 1, "/"))
    assert (r, terminated, info["transitions"][0]["reason"]) == (-1.0, True, "non_integer_result")


def test_rgb_array_frames_and_sb3_make_vec_env():
    import numpy as np
    from stable_baselines3.common.env_util import make_vec_env

    env = gym.make("Countdown-v0", render_mode="rgb_array", problems=[((21, 16, 17, 26), 46)]).unwrapped
    env.reset(seed=0)
    first = env.render()
    assert first.shape == (96, 128, 3) and first.dtype == np.uint8
    assert (first == (210, 40, 40)).all(axis=-1).any()  # the target line
    for move in ((0, 1, "+"), (1, 0, "-"), (0, 1, "+")):  # 21+16=37 -> [17,26,37], 26-17=9 -> [37,9], 37+9=46
        *_, info = env.step(env.encode_action(*move))
    assert info["is_success"] and (env.render() == (40, 160, 60)).all(axis=-1).any()  # green: solved
    venv = make_vec_env("Countdown-v0", n_envs=2)  # asks for render_mode="rgb_array"
    assert venv.reset().shape[0] == 2


def test_pickle_round_trip_mid_episode():
    """A pickled Countdown-v0 (its shared StateCache holds lambdas) loads and plays on exactly as the original."""
    import pickle

    env = gym.make("Countdown-v0", problems=[((21, 16, 17, 26), 46)])
    env.reset(seed=3)
    env.step(encode_action(0, 1, "+", 4))
    copy = pickle.loads(pickle.dumps(env))
    for action in (encode_action(1, 2, "+", 4), encode_action(0, 1, "+", 4)):  # 26 + 37, then 17 + 63 = 80
        one, two = env.step(action), copy.step(action)
        assert one[1:4] == two[1:4] and (one[0] == two[0]).all() and one[4]["state"] == two[4]["state"]
    assert one[4]["state"] == (80,) and one[2]
    assert copy.reset(seed=9)[1]["problem"] == env.reset(seed=9)[1]["problem"]


def test_rgb_frame_of_a_number_past_float_range():
    """A result above float range (rules without a value limit) made render() raise OverflowError; it is a full bar."""
    rules = Rules(name="unbounded", integer_only=True, sign="any", value_limit=None, use_all=True)
    env = CountdownEnv(problems=[((10**15 - 1,) * 22, 5)], rules=rules, render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(21):  # multiply the running product by one more number: (10**15 - 1) ** 22 > 1e308
        env.step(env.encode_action(0, len(env.state) - 1, "*"))
    assert env.state[0] > 10**309
    frame = env.render()
    assert frame.shape == (96, 128, 3) and (frame[4:60, 2] == (60, 90, 200)).all()  # a full-height bar (above the target line)


def test_a_bad_problems_message_never_fails_to_write_it() -> None:
    """to_problem wrote the rejected object with repr(): a 5,000-digit int in it raised Python's digit-limit error
    instead of the message, and a (numbers, target) pair of a million numbers was written whole."""
    from countdown_gym.envs.problem_source import to_problem

    with pytest.raises(ValueError, match=r"bad problem dict .*<a number of over 4300 digits>.*target must be an int"):
        to_problem({"numbers": [1, 2], "target": "x", "note": 10**5000})
    with pytest.raises(ValueError, match=r"^bad problem list \[\[0, 1, 2, 3, 4, 5, \.\.\.\], 'q'\]: ") as e:
        to_problem([list(range(10**6)), "q"])
    assert len(str(e.value)) < 300
