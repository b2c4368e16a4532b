"""A reward variant defined here, outside the package, works unchanged everywhere the package's own do.

Adding a variant is one registry entry and its term function (``EVEN`` and ``even_results`` below):
nothing else is edited, yet Countdown-v0's wrapper, the SB3 vector env and comparison, the GRPO reward functions,
per-step credit, verl's ``compute_score``, the TRL tool env, the verifiers rubrics and the leaderboard take it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import pytest

import countdown_gym  # noqa: F401  (registers the environments)
from countdown_gym.rewards.variants import (
    RewardVariant,
    check_reward_variant,
    get_variant,
    register_variant,
    unregister_variant,
    variant_names,
)


def even_results(transitions: Sequence[Mapping[str, Any]], scorer: Any = None) -> list[float]:
    """1 for a valid move whose result is even, else 0: the term function."""
    return [1.0 if t["valid"] and t["move"][3] % 2 == 0 else 0.0 for t in transitions]


EVEN = RewardVariant("even-results", "1 per valid move whose result is even", ("step", "text"), weight=0.3,
                     move_term=even_results)
"""The registry entry."""

PROBLEM = {"numbers": [6, 2, 5, 3], "target": 8}
SOLUTION = "6-2=4 [5,3,4]\n 5-3=2 [4,2]\n  4*2=8 [8]\n<answer>(6-2)*(5-3)</answer>"  # results 4, 2, 8: all even
ODD = "6-2=4 [5,3,4]\n 5-4=1 [3,1]\n<answer>3+1</answer>"  # results 4, 1: one of two even


@pytest.fixture
def even() -> Iterator[RewardVariant]:
    register_variant(EVEN)
    try:
        yield EVEN
    finally:
        unregister_variant(EVEN.name)


def test_registered_by_name_and_gone_when_removed(even: RewardVariant) -> None:
    assert get_variant("even-results") is even
    assert "even-results" in variant_names("step") and "even-results" in variant_names("text")
    assert check_reward_variant("even-results") == "even-results"  # a leaderboard submission may name it
    assert check_reward_variant("sparse+even-results") == "sparse+even-results"
    with pytest.raises(ValueError, match="already a name"):
        register_variant(even)
    unregister_variant(even.name)
    with pytest.raises(ValueError, match="unknown reward variant 'even-results'"):
        get_variant("even-results")
    register_variant(even)


@pytest.mark.parametrize("weight", [float("nan"), True, "0.3"])
def test_a_variant_weight_that_is_no_finite_number_is_refused(weight) -> None:
    """True was read as weight 1, and "0.3" raised math.isfinite's TypeError, which names no variant."""
    with pytest.raises(ValueError, match="reward variant 'bad': weight must be a finite number"):
        RewardVariant("bad", "a bad weight", ("text",), weight=weight, move_term=even_results)


def test_countdown_wrapper_and_the_sb3_flag(even: RewardVariant) -> None:
    env = even.wrap(gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)]), scale=0.5)
    env.reset(seed=0)
    u = env.unwrapped
    _, reward, *_, info = env.step(u.encode_action(0, 1, "-"))  # 6 - 2 = 4
    assert info["reward_terms"] == {"sparse": 0.0, "even-results": 0.5} and reward == 0.5
    pytest.importorskip("sb3_contrib")
    from baselines import sb3_ppo

    args = sb3_ppo.parse_args(["--reward", "even-results", "--scale", "0.5"])
    wrapped = sb3_ppo.wrap_reward(gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)]), args)
    wrapped.reset(seed=0)
    assert wrapped.step(u.encode_action(0, 1, "-"))[4]["reward_terms"]["even-results"] == 0.5


def test_sb3_vector_env_adds_the_same_term(even: RewardVariant) -> None:
    pytest.importorskip("sb3_contrib")
    import numpy as np

    from baselines.sb3.vec_env import CountdownSB3VecEnv
    from countdown_gym.game.problem import Problem

    vec = CountdownSB3VecEnv(1, "even-results", 0.5, problems=[Problem((6, 2, 5, 3), 8)])
    vec.seed(0)
    vec.reset()
    action = gym.make("Countdown-v0").unwrapped.encode_action(0, 1, "-")  # 6 - 2 = 4, the same action table
    vec.step_async(np.array([action]))
    _, reward, _, _ = vec.step_wait()
    assert reward[0] == pytest.approx(0.5)


def test_grpo_reward_functions(even: RewardVariant) -> None:
    from baselines.lm.grpo_config import reward_terms, run_rewards
    from baselines.lm.grpo_options import GRPORun, Options

    plan = GRPORun.of(Options(rewards="even-results"))
    weights = reward_terms(plan.options)
    assert weights["even-results"] == 0.3 and weights["sparse"] == 1.0 and weights["format"] == 0.1
    rewards = run_rewards(plan, None, 0)
    funcs = rewards.funcs
    assert rewards.clipo is None and rewards.step_credit is None and len(funcs) == len(weights)
    fn = funcs[list(weights).index("even-results")]
    assert fn.__name__ == "even_results_reward"
    got = fn(["p", "p"], [SOLUTION, ODD], None, numbers=[PROBLEM["numbers"]] * 2, target=[8, 8])
    assert got == [1.0, 0.5]


def test_step_credit(even: RewardVariant) -> None:
    from baselines.lm.grpo_config import reward_terms
    from baselines.lm.step_credit import split_reward_spec, turn_rewards
    from countdown_gym.envs.text import replay_completion
    from countdown_gym.game.problem import Problem

    scalar, per_step = split_reward_spec(reward_terms(SimpleNamespace(rewards="even-results")))
    assert per_step == {"even-results": 0.3} and scalar["even-results"] == 0.0
    moves = replay_completion(Problem((6, 2, 5, 3), 8), ODD).transitions  # results 4 (even), 1 (odd)
    assert turn_rewards([[moves[:1], moves[1:]], [moves]], per_step) == [[0.3, 0.0], [0.3]]


def test_verl_compute_score(even: RewardVariant) -> None:
    from countdown_gym.integrations.verl import compute_score

    out = compute_score("countdown_gym/longproc-0.5k", ODD, PROBLEM, dense="even-results")
    assert out["even-results"] == 0.5 and out["score"] == pytest.approx(out["sparse"] + 0.3 * 0.5)
    assert compute_score("x", SOLUTION, PROBLEM, dense=["even-results"], weights={"even-results": 2.0})["score"] == 3.0
    pytest.importorskip("torch")
    from critics.verl_reward import compute_score as with_critic  # the same compute_score, the critic loaded on demand

    assert with_critic("x", ODD, PROBLEM, dense="even-results") == out


def test_trl_tool_env_and_verifiers_rubrics(even: RewardVariant) -> None:
    from countdown_gym.integrations.trl_env import CountdownToolEnv, variant_reward

    env = CountdownToolEnv()
    env.reset(**PROBLEM)
    env.move(6, "-", 2)  # 4: even
    env.move(5, "-", 4)  # 1: odd
    reward = variant_reward("even-results")
    assert reward.__name__ == "even_results" and reward([None], environments=[env]) == [0.5]
    pytest.importorskip("verifiers")
    from countdown_gym.integrations.verifiers_env import dense_terms, rubric

    assert "even-results" in dense_terms(("sparse",)) and "even-results" in dense_terms(("sparse", "format"))
    funcs = {f.__name__: f for f in rubric(lambda **kw: 0.0, ("sparse",), lambda c, i: env.replay).funcs}
    assert funcs["even_results"](None, {}) == 0.5


def test_the_sb3_comparison_runs_every_step_variant(even: RewardVariant) -> None:
    from baselines.compare_rewards import Options

    assert Options().variants == list(variant_names("step")) and "even-results" in Options().variants


def test_a_needed_scorer_without_score_is_refused_by_the_registry_itself() -> None:
    """``critic.wrap(env, scorer=5)`` was accepted and failed with an AttributeError at the first step; every consumer
    (the wrapper, SB3, verl, verifiers) now gets the one check of ``RewardVariant.need``."""
    env = gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)])
    for name in ("critic", "critic-potential", "text-critic"):
        with pytest.raises(ValueError, match=r"needs a .*critic passed in with a score\(states, targets\) method.*got int"):
            get_variant(name).need(5)
    with pytest.raises(ValueError, match=r"with a score\(states, targets\) method.*got int"):
        get_variant("critic").wrap(env, scorer=5)
    assert get_variant("clipo").need(len) is len  # CLIPO's trainer object computes its term: no score method needed


@pytest.mark.parametrize("bad", [float("nan"), None, float("inf")])
def test_a_term_that_is_not_a_finite_number_is_named(bad) -> None:
    """A registered variant whose term gave NaN, None (read as NaN) or inf made the step's reward and a completion's
    score NaN / inf silently; the registry now names the variant."""
    broken = RewardVariant("broken", "gives no number", ("step", "text"), move_term=lambda ts, scorer=None: [bad] * len(ts))
    scored = RewardVariant("broken-score", "gives no number", ("text",), score=lambda replay: bad)
    env = broken.wrap(gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)]))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="the reward 'broken' gave .* a term is one finite number"):
        env.step(env.unwrapped.encode_action(0, 1, "-"))
    with pytest.raises(ValueError, match="the reward 'broken-score' gave"):
        scored.completion_score(SimpleNamespace(transitions=[]))
    shaped = RewardVariant("broken-phi", "a potential with no number", ("step",),
                           potential=lambda states, targets, rules, scorer=None: [bad] * len(states))
    env = shaped.wrap(gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)]))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="the reward 'broken-phi' gave"):  # TermReward's own potential skipped it
        env.step(env.unwrapped.encode_action(0, 1, "-"))


def test_a_transition_that_is_no_dict_is_named_by_its_type() -> None:
    """Its message showed the repr whole before cutting it: an int past 4300 digits raised Python's digit-limit
    error instead."""
    from countdown_gym.rewards.terms import perfect_moves

    for bad in (10**5000, "state"):
        with pytest.raises(ValueError, match=r"a transition record must be a dict \(see docs/DESIGN.md\), got (int|str) "):
            perfect_moves([bad])


def test_term_reward_names_a_variant_given_by_name():
    from countdown_gym.rewards.variants import TermReward

    with pytest.raises(TypeError, match=r"TermReward needs a RewardVariant \(get_variant\(name\)\), got str"):
        TermReward(gym.make("Countdown-v0"), "oracle-perfect")  # was AttributeError: no attribute 'move_term'


@pytest.mark.parametrize("scale", [float("nan"), "0.5"])
def test_move_values_and_potentials_refuse_a_scale_that_is_no_finite_number(scale):
    with pytest.raises(ValueError, match="scale must be a finite number, got"):  # NaN gave NaN rewards, silently
        get_variant("oracle-perfect").move_values([], scale=scale)
    with pytest.raises(ValueError, match="scale must be a finite number, got"):
        get_variant("oracle-potential").potentials([(1, 2)], [3], countdown_gym.Rules(), scale=scale)
