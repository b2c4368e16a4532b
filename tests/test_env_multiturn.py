"""CountdownMultiTurn-v0, its game (turn_game), grammar (turn_format) and turn traces (turn_trace)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import countdown_gym  # noqa: F401  (registers the environments)
from countdown_gym import Problem, Rules, load_split, verify
from countdown_gym.envs.multiturn import CountdownMultiTurnEnv
from countdown_gym.game.compact_trace import CompactTraceConfig
from countdown_gym.game.turn_format import format_move, parse_turn, tool_prompt, turn_prompt
from countdown_gym.game.turn_game import UNDO_MOVE, TurnEpisode, replay_turns, turn_replay
from countdown_gym.game.turn_trace import conversation, turn_trace
from countdown_gym.rewards.terms import perfect_moves, reachable_moves
from countdown_gym.wrappers import OracleReward

P = Problem((21, 16, 17, 26), 46)


def _env(**kw) -> CountdownMultiTurnEnv:
    env = CountdownMultiTurnEnv(problems=[P], **kw)
    env.reset(seed=0)
    return env


def test_every_reply_form_and_the_winning_reward() -> None:
    env = _env(render_mode="ansi")
    assert env.step("21+16") [0] == "= 37 [17,26,37]"
    assert env.step("26 + 17 = 43")[0] == "= 43 [37,43]"
    obs, reward, terminated, truncated, info = env.step("43+37")
    assert (obs, reward, terminated, truncated) == ("= 80 [80] miss", 0.0, False, False)  # a dead end, not the end
    assert env.step("undo")[0] == "undone [37,43]"
    assert env.step("UNDO")[0] == "undone [17,26,37]"
    assert env.step("26-17")[0] == "= 9 [37,9]"
    obs, reward, terminated, truncated, info = env.step("37+9")
    assert (obs, reward, terminated, truncated) == ("= 46 [46] solved", 1.0, True, False)
    assert info["is_success"] and info["verdict"].correct
    assert reward == verify(P, "<Solution>\n21 + 16 = 37\n26 - 17 = 9\n37 + 9 = 46\n</Solution>").reward
    assert env.render() == env.transcript() and env.transcript().startswith("Numbers: [21,16,17,26] Target: 46\n21+16\n")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("undo")


def test_give_up_and_turn_limit() -> None:
    env = _env()
    obs, reward, terminated, truncated, info = env.step("give up")
    assert (obs, reward, terminated, truncated, info["is_success"]) == ("gave up [21,16,17,26]", 0.0, True, False, False)
    env = _env(max_turns=2)
    env.step("21+16")
    obs, reward, terminated, truncated, _ = env.step("hello")
    assert obs == "error malformed [17,26,37] turn limit" and (reward, terminated, truncated) == (0.0, False, True)


def test_a_dead_end_stops_the_episode_only_when_asked() -> None:
    """stop_at_dead_end: the legal move that loses the target ends the episode (truncated, reward 0, the reply says
    so); a refused move or a move that keeps the target reachable does not, and a win is a win."""
    ep = TurnEpisode(P, stop_at_dead_end=True)
    results = [ep.play("21+16"), ep.play("99+1")]  # 37 [17,26,37]: 26-17 = 9, 37+9 = 46 still; then a refused move
    assert [r.reply for r in results] == ["= 37 [17,26,37]", "error operand_unavailable [17,26,37]"] and not ep.done
    results.append(ep.play("26+17"))  # [37,43]: 46 is out of reach
    assert results[-1].reply == "= 43 [37,43] dead end"
    assert (results[-1].reward, results[-1].terminated, results[-1].truncated, ep.done, ep.dead_end) == (0.0, False, True, True, True)
    replay = turn_replay(ep, results)
    assert (replay.dead_end, replay.truncated, replay.solved, replay.turns_played, replay.invalid_turns) == (True, True, False, 3, 1)
    plain = replay_turns(P, ["21+16", "99+1", "26+17", "undo"])  # without the option the game goes on
    assert not plain.dead_end and plain.replies[2] == "= 43 [37,43]" and plain.replies[3] == "undone [17,26,37]"
    win = TurnEpisode(P, stop_at_dead_end=True)
    assert [win.play(t).reply for t in ("21+16", "26-17", "37+9")][-1] == "= 46 [46] solved" and win.verdict.correct
    assert not win.dead_end


def test_a_dead_end_patience_lets_an_undo_within_it_play_on() -> None:
    """stop_at_dead_end=k: the episode stops after k turns in a row that end in a lost state; an undo back to a
    state that reaches the target starts the count again."""
    ep = TurnEpisode(P, stop_at_dead_end=3)
    replies = [ep.play(t).reply for t in ("21+16", "26+17", "hello", "undo")]  # lost for 2 turns, then undone
    assert replies[-1] == "undone [17,26,37]" and not ep.done
    replies = [ep.play(t).reply for t in ("26+17", "43+37", "undo")]  # lost for 3 turns: the undo to [37,43] ends it
    assert replies == ["= 43 [37,43]", "= 80 [80] miss", "undone [37,43] dead end"] and ep.done and ep.dead_end
    assert TurnEpisode(P, stop_at_dead_end=1).stop_at_dead_end == TurnEpisode(P, stop_at_dead_end=True).stop_at_dead_end == 1
    for bad in (-1, 1.5):
        with pytest.raises(ValueError, match="stop_at_dead_end"):
            TurnEpisode(P, stop_at_dead_end=bad)


@pytest.mark.parametrize(("turn", "reason"), [
    ("hello", "malformed"),
    ("", "empty_turn"),
    ("   ", "empty_turn"),
    ("99+1", "operand_unavailable"),
    ("21+21", "operand_unavailable"),  # one 21 only
    ("21/16", "non_integer_result"),
    ("16-21", "negative_result"),
    ("26*21*17", "malformed"),
    ("21^2", "malformed"),
    ("04+21", "malformed"),  # the verifier's literal rules: no leading zero
    ("\uff12\uff11+16", "malformed"),  # full-width digits
    ("21+16=38", "arithmetic_error"),
    ("undo", "nothing_to_undo"),
    ("x" * 10_000_000, "turn_too_long"),
])
def test_bad_turns_are_refused_with_a_reason_and_change_nothing(turn: str, reason: str) -> None:
    env = _env()
    obs, reward, terminated, truncated, info = env.step(turn)
    assert obs == f"error {reason} [21,16,17,26]" and (reward, terminated, truncated) == (0.0, False, False)
    assert info["state"] == (21, 16, 17, 26) and info["valid"] is False and info["reason"] == reason
    assert info["invalid_turns"] == 1
    for t in info["transitions"]:  # a refused move is recorded, never applied
        assert t["valid"] is False and t["next_state"] is None


def test_out_of_range_results_and_non_string_actions() -> None:
    env = CountdownMultiTurnEnv(problems=[((1999, 2, 3, 4), 10)])
    env.reset(seed=0)
    assert env.step("1999+2")[0] == "error exceeds_limit [1999,2,3,4]"
    with pytest.raises(ValueError, match="must be a str"):
        env.step(42)
    with pytest.raises(ValueError, match="must be a str .*, got int <a number of over 4300 digits>"):
        env.step(10**5000)  # the message's repr raised Python's int->str digit limit instead
    with pytest.raises(ValueError, match="one line"):
        env.step("1999+2\n3+4")
    with pytest.raises(ValueError, match="max_turns"):
        CountdownMultiTurnEnv(max_turns=0)
    with pytest.raises(ValueError, match="prompt"):
        CountdownMultiTurnEnv(prompt="nosuch")
    with pytest.raises(TypeError):
        parse_turn(None)  # type: ignore[arg-type]


def test_transition_records_keep_the_contract_and_undo_is_a_transition() -> None:
    ep = TurnEpisode(P)
    move = ep.play("21+16").transitions[0]
    assert move == {"state": (21, 16, 17, 26), "move": (21, "+", 16, 37), "next_state": (17, 26, 37), "target": 46,
                    "valid": True, "reason": "ok", "rules": P.rules, "turn": 0}
    back = ep.play("undo").transitions[0]
    assert back["move"] == UNDO_MOVE and back["state"] == (17, 26, 37) and back["next_state"] == (21, 16, 17, 26)
    assert ep.play("what").transitions == []  # an unreadable turn states no move
    assert perfect_moves([move]) == [1.0] and reachable_moves([back]) == [1.0]


def test_check_env_seeding_and_vector_env() -> None:
    check_env(gym.make("CountdownMultiTurn-v0").unwrapped)
    a, b = gym.make("CountdownMultiTurn-v0"), gym.make("CountdownMultiTurn-v0")
    assert [a.reset(seed=s)[0] for s in range(5)] == [b.reset(seed=s)[0] for s in range(5)]
    envs = gym.make_vec("CountdownMultiTurn-v0", num_envs=3, vectorization_mode="sync")
    obs, _ = envs.reset(seed=0)
    assert len(obs) == 3 and all(o.startswith("Numbers: [") for o in obs)
    obs, rewards, terminated, truncated, _ = envs.step(("undo", "undo", "give up"))
    assert list(terminated) == [False, False, True]
    envs.close()


def test_the_oracle_wrapper_works_unchanged() -> None:
    env = OracleReward(CountdownMultiTurnEnv(problems=[P]), mode="reachable", scale=0.5)
    env.reset(seed=0)
    _, r1, *_ , i1 = env.step("21+16")   # valid, target still reachable
    _, r2, *_ , i2 = env.step("26*17")   # valid, [37, 442]: 46 is out of reach
    _, r3, *_ , i3 = env.step("99+1")    # refused
    assert (r1, r2, r3) == (0.5, -0.5, -0.5)
    assert i1["reward_terms"]["oracle"] == 0.5 and i3["reward_terms"]["oracle"] == -0.5


def test_instruct_prompt_names_the_rules_and_the_grammar() -> None:
    text = turn_prompt(P, "instruct", max_turns=16)
    assert "46" in text and "[21,16,17,26]" in text and "undo" in text and "16 turns" in text
    env = CountdownMultiTurnEnv(problems=[P], prompt="instruct")
    assert env.reset(seed=0)[0] == text.rstrip("\n")


def test_the_prompts_state_the_win_of_the_rules() -> None:
    """Under classic rules a result equal to the target wins with numbers left over (the game answers 'solved');
    the instruct and tool prompts said only 'the last number is the target'."""
    classic = Problem((25, 50, 75, 100, 3, 6), 100 + 3, Rules.classic())
    for text in (turn_prompt(classic, "instruct"), tool_prompt(classic)):
        assert "'solved' when a result is the target" in text
    assert "'solved' when the last number is the target" in turn_prompt(P, "instruct")
    assert "'solved' when the last number is the target" in tool_prompt(P)
    ep = TurnEpisode(classic)
    assert ep.play("100+3").marks == ("solved",)


@pytest.mark.parametrize("config", [CompactTraceConfig(), CompactTraceConfig(dead_ends=(1, 0)),
                                    CompactTraceConfig(dead_ends=(4, 3), probe=0, leaves="direct")])
def test_turn_traces_replay_to_solved(config: CompactTraceConfig) -> None:
    for i, p in enumerate(load_split("longproc-0.5k", "test")[:200]):
        turns = turn_trace(p, config=config, seed=i)
        replay = replay_turns(p, turns, max_turns=len(turns))
        assert replay.solved and replay.turns_played == len(turns) and replay.invalid_turns == 0
    conv = conversation(P, turn_trace(P))
    assert [role for role, _ in conv[:3]] == ["env", "agent", "env"] and conv[-1][1].endswith("solved")


def test_direct_leaves_judge_a_two_number_state_instead_of_trying_it() -> None:
    """``leaves="direct"``: no missed final move is played; every dead end is one move and its undo."""
    direct = CompactTraceConfig(dead_ends=(4, 3), probe=0, leaves="direct")
    for i, p in enumerate(load_split("longproc-0.5k", "test")[:100]):
        turns = turn_trace(p, config=direct, seed=i)
        replay = replay_turns(p, turns, max_turns=len(turns))
        assert "miss" not in " ".join(replay.replies)
        assert all(t != "undo" or turns[k - 1] != "undo" for k, t in enumerate(turns))  # never two undos in a row
        assert len(turns) <= 3 + 2 * (4 + 3)
        plain = turn_trace(p, config=CompactTraceConfig(dead_ends=(4, 3), probe=0), seed=i)
        assert len(turns) <= len(plain)
    with pytest.raises(ValueError, match="leaves"):
        CompactTraceConfig(leaves="all")


def test_a_fraction_operand_has_one_reading() -> None:
    from fractions import Fraction

    assert format_move(72, "/", Fraction(9, 2)) == "72/(9/2)"
    assert parse_turn("72/(9/2)") == parse_turn(format_move(72, "/", Fraction(9, 2)))
    assert parse_turn("72/(9/2)").b == Fraction(9, 2)
    for ambiguous in ("72/9/2", "9/2*2", "(9/2*2"):
        assert parse_turn(ambiguous).reason == "malformed"
    assert parse_turn("9/2 = 9/2").stated == Fraction(9, 2)  # a stated result needs no parentheses
    env = CountdownMultiTurnEnv(problems=[Problem((9, 71, 2, 72), 55, Rules.tinyzero())])
    env.reset(seed=0)
    assert env.step("9/2")[0] == "= 9/2 [71,72,9/2]"
    assert env.step("72/(9/2)")[0] == "= 16 [71,16]"


@pytest.mark.parametrize("bad", [{"max_turns": 0}, {"max_turns": -3}, {"max_turns": 2.5}, {"max_turns": True},
                                 {"max_turn_chars": 0}])
def test_a_turn_episode_refuses_a_budget_below_one(bad: dict) -> None:
    """TurnEpisode(max_turns=0) was accepted and every move ended the game ('turn limit'); 2.5 compared as a float."""
    with pytest.raises(ValueError, match=f"{next(iter(bad))} must be a positive int"):
        TurnEpisode(P, **bad)


@pytest.mark.parametrize("bad", ["2", None, 1.0, -1])
def test_a_turn_episode_refuses_a_dead_end_option_not_a_bool_or_int(bad) -> None:
    """stop_at_dead_end='2' was read as 2 (int() of the text) and None was a raw TypeError from int()."""
    with pytest.raises(ValueError, match="stop_at_dead_end must be a bool or an int >= 0"):
        TurnEpisode(P, stop_at_dead_end=bad)


def test_every_layer_checks_a_turn_budget_alike() -> None:
    """TurnEpisode wrote its own check ('must be an int >= 1', numpy ints refused) beside the envs' check_budget
    ('must be a positive int'); the game now owns the one check that the envs and adapters import."""
    import numpy as np

    from countdown_gym.envs import options
    from countdown_gym.game import turn_game

    assert options.check_budget is turn_game.check_budget
    assert TurnEpisode(P, max_turns=np.int64(3)).max_turns == 3
    for make in (lambda: TurnEpisode(P, max_turns=0), lambda: CountdownMultiTurnEnv(max_turns=0)):
        with pytest.raises(ValueError, match=r"^max_turns must be a positive int \(at most \d+\), got int 0$"):
            make()


def test_max_prompt_chars_must_hold_every_reply_not_only_the_prompt() -> None:
    """max_prompt_chars=60 held the 45-character prompt of (1000,)*5, then a 63-character reply fell outside the
    observation space; reset now refuses it, naming the replies' length."""
    problem = ((1000,) * 5, 1)
    env = CountdownMultiTurnEnv(problems=[problem], max_prompt_chars=60, max_turns=1)
    with pytest.raises(ValueError, match=r"replies .* may reach \d+ characters, more than max_prompt_chars=60"):
        env.reset(seed=0)
    env = CountdownMultiTurnEnv(problems=[problem], max_prompt_chars=80, max_turns=1)
    assert env.observation_space.contains(env.reset(seed=0)[0])
    assert env.observation_space.contains(obs := env.step("1+1")[0]) and len(obs) == 63


@pytest.mark.parametrize("rules", ["longproc", "classic", "tinyzero"])
def test_no_reply_outgrows_the_bound_reset_checks(rules: str) -> None:
    """Random turns (moves on the numbers in play, errors, undos) never write a reply longer than longest_reply."""
    import random

    from countdown_gym.envs.multiturn import longest_reply
    rng = random.Random(0)
    longest = 0
    for numbers in [(1, 1, 999), (999, 999, 999, 999), (3, 7, 1000, 1, 9)]:
        problem = Problem(numbers, 24, Rules.preset(rules))
        bound = longest_reply(problem, problem.rules)
        for _ in range(50):
            ep = TurnEpisode(problem, max_turns=6)
            while not ep.done:
                state = ep.state
                a, b = rng.sample(state, 2) if len(state) > 1 else (1, 1)
                turn = rng.choice(["undo", "1+1", "x"] + [format_move(a, rng.choice("+-*/"), b)] * 6)
                longest = max(longest, len(reply := ep.play(turn).reply))
                assert len(reply) <= bound, (reply, bound)
    assert longest > 40


def test_a_tool_operand_too_long_for_str_is_a_malformed_turn() -> None:
    """tool_turn('move', 10**5000, '+', 2) (verl's tool call, or TRL's move with [10**5000]) raised Python's int->str
    digit-limit ValueError from _operand_text's str(); it is now text the grammar refuses."""
    from countdown_gym.game.turn_format import tool_turn

    huge = 10**5000
    for a, op, b in ((huge, "+", 2), (6, huge, 2), (6, "+", [huge])):
        turn = tool_turn("move", a, op, b)
        assert len(turn) < 100 and parse_turn(turn).reason == "malformed", turn
    assert tool_turn("move", 6, "+", 2.0) == "6+2"


def test_a_budget_no_prompt_or_array_takes_is_refused() -> None:
    """max_turns=10**5000 was accepted and the instruct prompt raised Python's int->str digit limit writing it (as
    did check_budget's and stop_at_dead_end's own messages for -(10**5000)); 2**64 fits no int64 step counter."""
    with pytest.raises(ValueError, match="max_turns must be a positive int .*, got int <a number of over 4300 digits>"):
        CountdownMultiTurnEnv(max_turns=10**5000, prompt="instruct")
    for kwargs in ({"max_turns": 2**64}, {"max_turn_chars": -(10**5000)}):
        with pytest.raises(ValueError, match=f"{next(iter(kwargs))} must be a positive int"):
            TurnEpisode(P, **kwargs)
    with pytest.raises(ValueError, match="stop_at_dead_end must be a bool or an int >= 0, got int <a number of over"):
        TurnEpisode(P, stop_at_dead_end=-(10**5000))
    assert TurnEpisode(P, max_turns=2**63 - 1).max_turns == 2**63 - 1


def test_a_turn_episode_refuses_a_problem_or_rules_of_another_type() -> None:
    """TurnEpisode(problem, rules="tinyzero") raised AttributeError ('str' has no 'check') at the first move, and a
    (numbers, target) pair AttributeError ('tuple' has no 'rules')."""
    with pytest.raises(TypeError, match="rules must be a Rules or None, got str"):
        TurnEpisode(P, rules="tinyzero")
    with pytest.raises(TypeError, match="TurnEpisode needs a Problem, got tuple"):
        TurnEpisode(((21, 16, 17, 26), 46))
    with pytest.raises(TypeError, match="rules must be a Rules or None"):
        replay_turns(P, ["21+16"], rules="tinyzero")


def test_replay_turns_refuses_one_str_for_its_list_of_turns() -> None:
    """replay_turns(P, "21+16") played each character as a turn: five malformed turns, an unsolved replay."""
    with pytest.raises(TypeError, match="turns must be a sequence of turns, got one str"):
        replay_turns(P, "21+16")


def test_a_solve_through_values_past_15_digits_is_scored_and_its_numbers_stay_writable() -> None:
    """Under rules with no value limit a move's result may pass 15 digits: the next turn can write it, and the solve
    is scored as one (it was read as malformed, and the win scored 0)."""
    ep = TurnEpisode(Problem((99999999, 99999999, 3), 3333333266666667, Rules.preset("classic")), max_turns=4)
    assert ep.play("99999999 * 99999999").reply == "= 9999999800000001 [3,9999999800000001]"
    res = ep.play("9999999800000001 / 3")
    assert res.terminated and res.reward == 1.0 and ep.verdict.correct
    assert TurnEpisode(ep.problem, max_turns=2).play("1" * 40 + " + 3").reason == "malformed"  # still refused
