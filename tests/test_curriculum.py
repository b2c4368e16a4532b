"""The curriculum sampler, alone and as the problem source of every environment."""

from __future__ import annotations

from collections import Counter

import gymnasium as gym
import numpy as np
import pytest

import countdown_gym  # noqa: F401  (registers the environments)
from countdown_gym import load_split, tier
from countdown_gym.data.curriculum import Curriculum
from countdown_gym.envs.problem_source import make_problem_source
from countdown_gym.envs.vector import CountdownVectorEnv
from countdown_gym.game.solver import solution_path


def _tiers(cur: Curriculum, idx) -> Counter:
    return Counter(cur.tiers[int(i)] for i in idx)


def test_staged_schedule_follows_the_draw_count():
    cur = Curriculum.staged(300, split="validation")
    rng = np.random.default_rng(0)
    assert set(_tiers(cur, cur.sample_indices(rng, 100))) == {"easy"}
    assert set(_tiers(cur, cur.sample_indices(rng, 100))) == {"easy", "medium"}
    assert set(_tiers(cur, cur.sample_indices(rng, 300))) == {"easy", "medium", "hard"}
    assert cur.draws == 500


def test_fixed_schedule_checks():
    with pytest.raises(ValueError, match="needs a schedule"):
        Curriculum(mode="fixed", split="validation")
    with pytest.raises(ValueError, match="start at draw 0"):
        Curriculum(mode="fixed", split="validation", schedule=[(5, {"easy": 1})])
    with pytest.raises(ValueError, match="unknown tier"):
        Curriculum(mode="fixed", split="validation", schedule=[(0, {"trivial": 1})])
    easy = load_split("longproc-0.5k", "validation", tier="easy")
    with pytest.raises(ValueError, match="no such problem"):
        Curriculum(easy, mode="fixed", schedule=[(0, {"hard": 1})])
    with pytest.raises(ValueError, match="mode"):
        Curriculum(split="validation", mode="random")
    with pytest.raises(ValueError, match="schedule is for mode='fixed'"):
        Curriculum(split="validation", schedule=[(0, {"easy": 1})])
    with pytest.raises(ValueError, match="at least one problem"):
        Curriculum([])


@pytest.mark.parametrize("weight", [float("inf"), float("nan"), -1.0, "1", True, 10**400],  # "1", True: read as 1.0
                         ids=["inf", "nan", "negative", "str", "bool", "int-past-float"])
def test_a_schedule_weight_that_is_no_finite_share_is_refused(weight):
    """An infinite weight was accepted and every draw raised numpy's 'Probabilities contain NaN' (inf / inf)."""
    with pytest.raises(ValueError, match="schedule weight of 'easy' must be a finite number >= 0"):
        Curriculum(mode="fixed", split="validation", schedule=[(0, {"easy": weight, "medium": 1.0})])


def test_adaptive_moves_the_frontier_with_success_and_falls_back():
    cur = Curriculum(split="validation", window=4, promote_at=0.75, review=0.2)
    assert cur.weights() == {"easy": 1.0, "medium": 0.0, "hard": 0.0}
    easy = [p for p, t in zip(cur.problems, cur.tiers, strict=True) if t == "easy"]
    medium = [p for p, t in zip(cur.problems, cur.tiers, strict=True) if t == "medium"]
    for p in easy[:4]:
        cur.update(p, True)
    assert cur.frontier() == "medium"
    assert cur.weights() == pytest.approx({"easy": 0.2, "medium": 0.8, "hard": 0.0})
    for p in medium[:4]:
        cur.update(p, True)
    assert cur.weights() == pytest.approx({"easy": 0.1, "medium": 0.1, "hard": 0.8})
    for p in easy[:2]:  # forgetting the easy tier brings it back as the frontier
        cur.update(p, False)
    assert cur.frontier() == "easy"
    cur.update(countdown_gym.Problem((1, 2), 3), True)  # outside the pool: ignored
    assert sum(cur.episodes.values()) == 10


def test_draws_repeat_with_the_seed():
    a, b = Curriculum(split="validation"), Curriculum(split="validation")
    assert a.sequence(50, seed=3) == b.sequence(50, seed=3)


def _solve_episode(env) -> float:
    _, info = env.reset()
    p = info["problem"]
    reward = 0.0
    for x, op, y, _ in solution_path(p.numbers, p.target, p.rules):
        st = list(env.unwrapped.state)
        i = st.index(x)
        j = next(k for k, v in enumerate(st) if v == y and k != i)
        _, reward, *_ = env.step(env.unwrapped.encode_action(i, j, op))
    return reward


def test_countdown_v0_draws_from_the_curriculum_and_reports_episodes():
    cur = Curriculum(split="validation", window=5, promote_at=1.0, review=0.0)
    env = gym.make("Countdown-v0", curriculum=cur)
    env.reset(seed=0)
    seen = []
    for _ in range(12):
        assert _solve_episode(env) == 1.0
        seen.append(tier(env.unwrapped.problem))
    assert seen[:5] == ["easy"] * 5  # five solved easy problems master the tier (window 5, promote_at 1)
    assert seen[5:10] == ["medium"] * 5
    assert cur.episodes["easy"] >= 5 and cur.success_rates()["easy"] == 1.0


def test_text_and_multiturn_envs_report_to_the_curriculum():
    cur = Curriculum(split="validation")
    env = gym.make("CountdownText-v0", curriculum=cur, prompt="compact")
    env.reset(seed=1)
    p = env.unwrapped.problem
    steps = solution_path(p.numbers, p.target, p.rules)
    lines = ["<Solution>", *(f"{a} {op} {b} = {c}" for a, op, b, c in steps), "</Solution>"]
    for line in lines:
        *_, info = env.step(line + "\n")
    assert info["is_success"] and cur.episodes[tier(p)] == 1

    cur2 = Curriculum(split="validation")
    env2 = gym.make("CountdownMultiTurn-v0", curriculum=cur2, max_turns=2)
    env2.reset(seed=1)
    env2.step("give up")
    assert sum(cur2.episodes.values()) == 1 and cur2.success_rates()[tier(env2.unwrapped.problem)] == 0.0


def test_vector_env_draws_by_weight_and_reports():
    cur = Curriculum.staged(10_000, split="validation")
    envs = CountdownVectorEnv(num_envs=64, curriculum=cur)
    envs.reset(seed=0)
    assert {tier(p) for p in envs.current_problems()} == {"easy"}
    rng = np.random.default_rng(0)
    for _ in range(8):
        mask = envs._legal
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        envs.step(actions)
    assert sum(cur.episodes.values()) > 0


def test_curriculum_source_arguments():
    cur = Curriculum(split="validation")
    src = make_problem_source(curriculum=cur)
    assert src.curriculum is cur and len(src.pool) == len(cur.problems)
    with pytest.raises(ValueError, match="not both"):
        make_problem_source(curriculum=cur, split="test")
    with pytest.raises(ValueError, match="Curriculum"):
        make_problem_source(curriculum=[1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(("rules", "match"), [('{"integer_only": true, "integer_only": false}', "appears twice"),
                                              ("{" * 100_000, "not valid JSON")])
def test_a_rows_rules_json_with_a_key_twice_or_nested_past_the_parser_is_refused(rules: str, match: str) -> None:
    """The TRL, verifiers, verl and reasoning-gym rows read their 'rules' column here: a key twice was last-wins."""
    from countdown_gym.envs.problem_source import problem_from_columns

    with pytest.raises(ValueError, match=match):
        problem_from_columns([1, 2], 3, rules)


def test_a_window_or_share_past_what_a_deque_or_str_takes_is_refused() -> None:
    """window=10**20 raised OverflowError from the deque ('Python int too large to convert to C ssize_t'); a
    5,000-digit window, promote_at or review raised Python's int->str digit limit while writing the message."""
    for kwargs, match in (({"window": 10**20}, "window must be an int in 1..9223372036854775807, got int 1000"),
                          ({"window": 10**5000}, "window must be an int in 1..*, got int <a number of over"),
                          ({"promote_at": 10**5000}, "promote_at must be a number in .0, 1., got int <a number of over")):
        with pytest.raises(ValueError, match=match):
            Curriculum(split="validation", **kwargs)


def test_a_schedule_whose_weights_or_draws_no_float_or_str_takes_is_refused() -> None:
    """An int weight of 10**400 raised OverflowError from float(); weights 1e308 + 1e308 (an infinite sum) were
    accepted and every draw raised numpy's 'Probabilities do not sum to 1'; a draw of -(10**5000) or a step
    (10**5000,) raised Python's int->str digit limit while writing the message."""
    for schedule, match in (([(0, {"easy": 1e308, "medium": 1e308})], "the weights' sum must be positive and finite"),
                            ([(0, {"easy": 1}), (10**5000, {"easy": 0})], "at draw <a number of over .*sum must be"),
                            ([(0, {"easy": 1}), (-(10**5000), {"easy": 1})], "got int <a number of over"),
                            ([(10**5000,)], "a schedule step is .*, got tuple")):
        with pytest.raises(ValueError, match=match):
            Curriculum(mode="fixed", split="validation", schedule=schedule)


def test_an_outcome_that_is_not_a_bool_is_refused() -> None:
    """update(problem, 0.1) or update(problem, "no") counted a success (bool() of a reward or a str)."""
    cur = Curriculum(split="validation", window=4)
    for bad in (0.1, "no", 1, None):
        with pytest.raises(TypeError, match="success must be a bool, got"):
            cur.update(cur.problems[0], bad)
    cur.update(cur.problems[0], np.bool_(True))
    assert sum(cur.episodes.values()) == 1


def test_a_seed_for_the_generator_or_a_negative_count_is_named() -> None:
    cur = Curriculum(split="validation")
    with pytest.raises(TypeError, match="rng must be a numpy Generator"):  # was AttributeError: no attribute 'choice'
        cur.sample(42)
    with pytest.raises(ValueError, match="n must be an int >= 0, got int -1"):  # was numpy's 'negative dimensions'
        cur.sample_indices(np.random.default_rng(0), -1)


def test_an_outcome_for_no_problem_is_refused() -> None:
    cur = Curriculum(split="validation")
    with pytest.raises(TypeError, match="problem must be a Problem, got int 0"):  # was AttributeError: no 'numbers'
        cur.update(0, True)


@pytest.mark.parametrize(("n", "seed", "match"), [(-1, 0, "n must be an int >= 0, got int -1"), ("3", 0, "n must"),
                                                  (2, -1, "seed must be an int >= 0, got int -1")])
def test_a_sequence_of_no_count_or_seed_is_refused(n, seed, match) -> None:
    with pytest.raises(ValueError, match=match):
        Curriculum(split="validation").sequence(n, seed=seed)
