"""CountdownText-v0 and replay_completion: checks of every line form, budgets, modes, errors."""

import functools
import random
import re

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import countdown_gym  # noqa: F401  (registers the environments)
from countdown_gym import GeneratorConfig, Problem, Rules, dfs_trace, generate, parse_trace, solve, verify
from countdown_gym.envs.text import (
    INVALID_REASONS,
    CountdownTextEnv,
    LineChecker,
    Replay,
    TextEpisode,
    replay_completion,
)
from countdown_gym.game.line_grammar import parse_line
from countdown_gym.game.text_format import CHARSET, format_compact_line
from countdown_gym.game.trace import TraceParseError

P = Problem((21, 16, 17, 26), 46)
LONGPROC = generate("longproc-0.5k", 40, seed=11)
TINYZERO = generate("tinyzero", 25, seed=11)


@functools.cache
def _trace(problem: Problem, current_state: bool = False) -> str:
    return dfs_trace(problem, current_state=current_state)


SHORT = min(LONGPROC[:10], key=lambda p: len(_trace(p)))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


# ---- environment API ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["line", "token_str"])
def test_check_env_text_modes(mode):
    check_env(gym.make("CountdownText-v0", action_mode=mode, prompt="compact").unwrapped)


def test_check_env_token_mode(tiny_tokenizer):
    env = gym.make("CountdownText-v0", action_mode="token", tokenizer=tiny_tokenizer, prompt="compact", render_mode="ansi")
    check_env(env.unwrapped)


def test_gymnasium_make_and_spaces():
    env = gym.make("CountdownText-v0", prompt="tinyzero")
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    assert obs.startswith("A conversation") and obs.endswith("<think>")
    assert info["transitions"] == [] and info["state"] == info["problem"].numbers
    obs, reward, terminated, truncated, info = env.step("x" * 10)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.action_space.contains("21 + 16 = 37") and not env.action_space.contains("a\nb")
    env.close()


def test_determinism_per_seed():
    a, b = CountdownTextEnv(), CountdownTextEnv()
    for seed in (0, 1, 2):
        oa, _ = a.reset(seed=seed)
        ob, _ = b.reset(seed=seed)
        assert oa == ob and a.problem == b.problem
    seen = {CountdownTextEnv().reset(seed=s)[1]["problem"] for s in range(6)}
    assert len(seen) > 1


@pytest.mark.parametrize("source", [{"split": "test"}, {"problems": [((1, 2), 3), ((2, 3), 5), ((3, 4), 7)]}])
def test_a_seed_draws_the_same_problems_in_every_env(source):
    # the text envs indexed a pool with rng.integers, Countdown-v0 with its 64 uniforms: other problems per seed
    from countdown_gym.envs import CountdownEnv, CountdownMultiTurnEnv

    envs = [CountdownEnv(**source), CountdownTextEnv(**source), CountdownMultiTurnEnv(**source)]
    for seed in (0, 1, 2):
        draws = [[env.reset(seed=seed)[1]["problem"]] + [env.reset()[1]["problem"] for _ in range(70)] for env in envs]
        assert draws[0] == draws[1] == draws[2], seed


def test_reset_with_a_fixed_problem():
    env = CountdownTextEnv(prompt="compact")
    obs, info = env.reset(seed=0, options={"problem": ((21, 16, 17, 26), 46)})
    assert obs == "Numbers: [21,16,17,26] Target: 46\n" and info["problem"] == P


# ---- DFS traces ----------------------------------------------------------------------------


@pytest.mark.parametrize("current_state", [False, True])
def test_every_dfs_trace_replays_clean(current_state):
    for problem in LONGPROC + TINYZERO:
        trace = _trace(problem, current_state)
        r = replay_completion(problem, trace)
        assert isinstance(r, Replay)
        assert r.invalid_steps == 0 and r.invalid_lines == [], (problem, r.invalid_lines[:2])
        assert r.verdict.correct and r.reward == 1.0 and r.step_rewards[-1] == 1.0
        assert r.num_lines == len(r.step_rewards) == len(trace.rstrip("\n").splitlines())
        try:
            steps = parse_trace(trace)[2]
        except TraceParseError:  # the trace reader does not take negative operands (rational rules)
            continue
        moved = [s for s in steps if s.next_state is not None]
        assert len(r.transitions) == len(moved) + len(r.verdict.steps)  # search moves + <Solution> lines
        for t, s in zip(r.transitions, moved, strict=False):
            assert t["valid"] and t["line_no"] == s.line_no
            assert sorted(t["state"]) == sorted(s.state) and sorted(t["next_state"]) == sorted(s.next_state)


def test_classic_rules_traces_replay_clean():
    config = GeneratorConfig(name="classic-test", rules=Rules.classic())
    problems = [p for p in generate(config, 15, seed=2) if p.target not in p.numbers]
    for problem in problems:
        r = replay_completion(problem, _trace(problem, True))
        assert r.invalid_steps == 0 and not r.invalid_lines and r.reward == 1.0


def test_env_line_mode_matches_replay():
    problem = SHORT
    trace = _trace(problem, True)
    env = CountdownTextEnv(problems=[problem], render_mode="ansi")
    env.reset(seed=0)
    transitions, rewards = [], []
    for line in trace.splitlines():
        obs, reward, terminated, truncated, info = env.step(line)
        transitions += info["transitions"]
        rewards.append(reward)
        if terminated or truncated:
            break
    r = replay_completion(problem, trace)
    assert terminated and not truncated and info["is_success"] and info["verdict"].correct
    assert env.observation_space.contains(obs)
    assert rewards == r.step_rewards and transitions == r.transitions
    assert env.completion == trace.rstrip("\n") + "\n" and obs.endswith(env.completion)
    assert "terminated: ok" in env.render()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("more")


def test_human_render_prints_each_line(capsys):
    env = CountdownTextEnv(problems=[P], prompt="compact", render_mode="human")
    env.reset(seed=0)
    env.step("21 + 16 = 38")
    env.step("<answer>21+16-17+26</answer>")
    out = capsys.readouterr().out
    assert "   0 | 21 + 16 = 38   <-- invalid: arithmetic_error" in out and "terminated: ok" in out
    quiet = CountdownTextEnv(problems=[P])
    quiet.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert quiet.render() is None


def test_transition_record_shape():
    t = replay_completion(P, dfs_trace(P)).transitions[0]
    assert set(t) == {"state", "move", "next_state", "target", "valid", "reason", "rules", "line_no", "in_solution"}
    assert t["state"] == (21, 16, 17, 26) and t["move"] == (21, "+", 16, 37) and not t["in_solution"]
    assert t["next_state"] == (37, 17, 26) and t["target"] == 46 and t["rules"] == P.rules


# ---- corrupted traces ----------------------------------------------------------------------


def _corrupt(trace: str, rng: random.Random, kind: str, problem: Problem | None = None):
    """A trace with one line changed: (lines, index of the changed line, expected reason)."""
    lines = trace.splitlines()
    cands = [(k, parse_line(x)) for k, x in enumerate(lines) if "|- Try" in x]
    cands = [(k, p) for k, p in cands if p.outcome in ("add", "missed")]
    rng.shuffle(cands)
    # a line off the solution path, so the trace-back lines stay right
    if kind == "consumed":  # lines below the root, where some puzzle number is used up
        states = {t["line_no"]: t["state"] for t in replay_completion(problem, trace).transitions}
        cands = [(k, p) for k, p in cands if set(problem.numbers) - set(states[k])]
    k, p = next((k, p) for k, p in cands if not any("target found" in x for x in _subtree(lines, k)))
    line = lines[k]
    if kind == "arithmetic":
        new = line.replace(f" = {p.c}.", f" = {p.c + 1}.", 1)
        reason = "arithmetic_error"
    elif kind == "unavailable":
        ghost = 1999
        new = line.replace(f"Try {p.a} ", f"Try {ghost} ", 1)
        reason = "operand_unavailable"
    elif kind == "consumed":  # an operand swapped for a puzzle number the path already used
        used_up = sorted(set(problem.numbers) - set(states[k]))
        new = line.replace(f"Try {p.a} ", f"Try {used_up[0]} ", 1)
        reason = "operand_unavailable"
    elif kind == "current_set":  # a swapped number in the claimed set
        m = re.search(r"Current number set: \[([^\]]*)\]", line)
        if m is None:
            return _corrupt(trace, rng, "evaluate")
        nums = m[1].split(", ")
        nums[-1] = str(int(nums[-1]) + 3)
        new = line.replace(m[0], f"Current number set: [{', '.join(nums)}]")
        reason = "state_mismatch"
    else:  # evaluate: claim the target was found
        if p.outcome != "missed":
            return _corrupt(trace, rng, "arithmetic")
        new = line.replace("!=", "==", 1).replace("drop this branch.", "target found!")
        reason = "wrong_evaluation"
    assert new != line
    lines[k] = new
    return lines, k, reason


def _subtree(lines: list[str], k: int) -> list[str]:
    out = []
    for x in lines[k + 1 :]:
        if not x.strip() or _indent(x) <= _indent(lines[k]):
            break
        out.append(x)
    return out


@pytest.mark.parametrize("kind", ["arithmetic", "unavailable", "consumed", "current_set", "evaluate"])
def test_corrupted_traces_are_flagged_at_the_line(kind):
    rng = random.Random(kind)
    for problem in LONGPROC[:20] + TINYZERO[:10]:
        lines, k, reason = _corrupt(_trace(problem), rng, kind, problem)
        r = replay_completion(problem, "\n".join(lines))
        bad = r.invalid_lines
        assert bad and bad[0].line_no == k and bad[0].reason == reason, (problem, k, lines[k], bad[:2])
        subtree = set(range(k + 1, k + 1 + len(_subtree(lines, k))))
        assert all(c.line_no in subtree and c.reason == "parent_invalid" for c in bad[1:])
        first = [t for t in r.transitions if not t["valid"]][0]
        assert first["line_no"] == k and first["reason"] == reason and first["next_state"] is None
        assert r.verdict.correct  # the <Solution> block is still right


def test_invalid_line_does_not_advance_the_state():
    checker = LineChecker(P)
    check, (t,) = checker.check("  |- Try 21 + 16 = 38. Add 38 to the number set.")
    assert not check.valid and t["reason"] == "arithmetic_error" and checker.state == (21, 16, 17, 26)
    check, (t,) = checker.check("    |- Try 38 + 17 = 55. Add 55 to the number set.")
    assert t["reason"] == "parent_invalid" and t["state"] == (21, 16, 17, 26)
    check, (t,) = checker.check("  |- Try 21 + 16 = 37. Add 37 to the number set. Current number set: [37, 17, 26], target: 46.")
    assert check.valid and t["valid"] and checker.state == (37, 17, 26)


def test_plain_equations_continue_from_the_last_trusted_state():
    """After an invalid Try (or compact) line every later plain equation was parent_invalid, though info['state']
    showed the trusted numbers; docs/text_env.md: plain equations continue from the last trusted state."""
    for wrong in ("  |- Try 21 + 16 = 38. Add 38 to the number set.", "  21+16=38 [17,26,38]", "21+16=38 [17,26,38]"):
        checker = LineChecker(P)
        assert checker.check(wrong)[0].reason in ("arithmetic_error", "bad_depth")
        assert checker.state == (21, 16, 17, 26)
        for line, after in (("21 + 16 = 37", (17, 26, 37)), ("37 - 17 = 20", (26, 20)), ("26 + 20 = 46", (46,))):
            check, (t,) = checker.check(line)
            assert check.valid and t["valid"] and checker.state == after, (wrong, line, check.reason)


def test_zero_drop_holds_only_under_positive_rules():
    # "0 is not positive" is a correct pruning under longproc_positive, a wrong one under longproc
    line = "  |- Try 5 - 5 = 0. 0 is not positive, drop this branch."
    assert LineChecker(Problem((5, 5, 3), 3, rules=Rules.longproc_positive())).check(line)[0].reason == "ok"
    check, (t,) = LineChecker(Problem((5, 5, 3), 3)).check(line)
    assert check.reason == "wrong_drop" and not t["valid"]
    add = "  |- Try 5 - 5 = 0. Add 0 to the number set. Current number set: [0, 3], target: 3, just two numbers left."
    check, (t,) = LineChecker(Problem((5, 5, 3), 3)).check(add)
    assert check.valid and t["valid"] and sorted(t["next_state"]) == [0, 3]


@pytest.mark.parametrize(
    "line, reason",
    [
        ("  |- Try 21 / 16 = 1.3. 1.3 is a decimal, drop this branch.", "ok"),
        ("  |- Try 21 / 16 = 1.9. 1.9 is a decimal, drop this branch.", "arithmetic_error"),
        ("  |- Try 26 / 13 = 2.0. 2.0 is a decimal, drop this branch.", "operand_unavailable"),
        ("  |- Try 21 - 16 = 5. 5 is not positive, drop this branch.", "wrong_drop"),
        ("  |- Try 26 * 21 = 546. 546 exceeds the maximum intermediate result, drop this branch.", "wrong_drop"),
        ("  |- Try 21 + 16 = 37. Evaluate 37 != 46, drop this branch.", "numbers_left"),
        ("  |- Try 21 + 16 = 37. Add 37 to the number set. Current number set: [37, 17, 26], target: 45.", "target_mismatch"),
        ("  |- Try 21 + 16 = 37. Add 36 to the number set.", "wrong_evaluation"),
        ("  |- Try 21 + 16 = 37. Add 37 to the number set. Current number set: [37, 17, 26], target: 46. "
         "Options for choosing two numbers: [(37, 17)].", "options_mismatch"),
        ("  |- Try 21 + 16 = 37. Add 37 to the number set. ### Current State: [37, 17]", "state_mismatch"),
        ("    |- Try 21 + 16 = 37. Add 37 to the number set.", "bad_depth"),
        (" |- Pick two numbers (21, 21) (numbers left: [17, 26]). Try possible operations.", "operand_unavailable"),
        (" |- Pick two numbers (21, 16) (numbers left: [17]). Try possible operations.", "state_mismatch"),
        ("Initial number set: [21, 16, 17, 25], target: 46.", "wrong_problem"),
        ("Final step: 20 + 26 = 46", "not_in_search"),
        ("Final step: 20 + 26 = 47", "arithmetic_error"),
        ("Final step: 04 + 26 = 30", "malformed"),  # was a TypeError from Rules.check(None, '+', None)
        ("The first step: 1/0 + 16 = 20", "malformed"),
    ],
)
def test_line_checks(line, reason):
    check, transitions = LineChecker(P).check(line)
    assert check.reason == reason and check.valid == (reason == "ok")
    assert reason == "ok" or reason in INVALID_REASONS
    if parse_line(line).kind in ("pick", "initial", "traceback") or reason == "ok":
        assert transitions == []
    else:
        assert len(transitions) == 1 and not transitions[0]["valid"] and transitions[0]["reason"] == reason


def test_rules_reasons_are_passed_through():
    checker = LineChecker(Problem((4, 4, 9), 1, rules=Rules.longproc_positive()))
    assert checker.check("4 - 4 = 0")[0].reason == "zero_result"
    assert checker.check("9 / 4 = 2")[0].reason == "non_integer_result"
    assert checker.check("9 - 40 = -31")[0].reason == "operand_unavailable"
    assert LineChecker(Problem((4, 4, 9), 1)).check("4 - 4 = 0")[0].reason == "ok"  # LongProc's rules keep a 0


# ---- compact format ------------------------------------------------------------------------


def _compact_completion(problem: Problem) -> str:
    """The DFS search as compact lines (its moves, read from a replay of the trace), then a <Solution> block."""
    search, solution = _trace(problem).split("<Solution>\n")
    lines = [
        format_compact_line(len(problem.numbers) - len(t["state"]), *t["move"], state=t["next_state"])
        for t in replay_completion(problem, search).transitions
    ]
    return "\n".join(lines) + "\n<Solution>\n" + solution


def test_compact_traces_with_backtracking_replay_clean():
    for problem in LONGPROC[:15] + TINYZERO[:10]:
        text = _compact_completion(problem)
        r = replay_completion(problem, text)
        assert r.invalid_steps == 0 and not r.invalid_lines and r.reward == 1.0, r.invalid_lines[:2]
        assert len(r.transitions) == text.count("=")


def test_shipped_compact_traces_replay_clean():
    from countdown_gym.game.compact_trace import CompactTraceConfig, compact_trace

    configs = (CompactTraceConfig(), CompactTraceConfig(show_state=False, answer="answer"), CompactTraceConfig(dead_ends=(3, 2), probe=3))
    for problem in LONGPROC[:20]:
        for config in configs:
            r = replay_completion(problem, compact_trace(problem, config=config))
            assert r.invalid_steps == 0 and not r.invalid_lines and r.reward == 1.0, (problem, config)


def test_compact_hallucinations():
    text = "\n".join(
        [
            "21+16=37 [17,26,37]",  # 0 ok
            " 37+17=54 [26,54]",  # 1 ok
            "  54-26=28 [28]",  # 2 ok, a leaf
            " 37-17=21 [26,21]",  # 3 arithmetic error
            "  26-21=5 [5]",  # 4 below an invalid line
            " 37-17=20 [26,20]",  # 5 ok (backtracked)
            "  20+26=46 [46]",  # 6 ok
            "    46+1=47",  # 7 skips a depth
            "99+1=100",  # 8 unavailable at the root
            "21+17=38 [38,26]",  # 9 wrong state claim
            "<answer>21+16-17+26</answer>",
        ]
    )
    r = replay_completion(P, text)
    reasons = {c.line_no: c.reason for c in r.invalid_lines}
    assert reasons == {3: "arithmetic_error", 4: "parent_invalid", 7: "bad_depth", 8: "operand_unavailable", 9: "state_mismatch"}
    assert r.invalid_steps == 5 and r.verdict.correct and r.reward == 1.0
    valid = [t for t in r.transitions if t["valid"]]
    assert valid[-1]["state"] == (26, 20) and valid[-1]["next_state"] == (46,)


# ---- answer-only and free reasoning -----------------------------------------------------------


def test_solution_block_only():
    r = replay_completion(P, "<Solution>\n21 + 16 = 37\n37 - 17 = 20\n20 + 26 = 46\n</Solution>")
    assert [t["valid"] for t in r.transitions] == [True] * 3 and r.reward == 1.0
    assert all(t["in_solution"] for t in r.transitions)
    assert r.transitions[-1]["next_state"] == (46,) and r.step_rewards == [0.0, 0.0, 0.0, 0.0, 1.0]
    r = replay_completion(P, "<Solution>\n21 + 16 = 37\n37 - 16 = 21\n21 + 26 = 47\n</Solution>")
    assert [t["reason"] for t in r.transitions] == ["ok", "operand_unavailable", "operand_unavailable"]
    assert r.invalid_steps == 2 and not r.verdict.correct and r.reward == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "<Solution> 21 + 16 = 37\n37 - 17 = 20\n20 + 26 = 46 </Solution>",
        "<Solution>21 + 16 = 37\n37 - 17 = 20\n20 + 26 = 46</Solution>\nignored",
        "<Solution>\r\n21 + 16 = 37\r\n37 - 17 = 20\r\n20 + 26 = 46\r\n</Solution>\r\n",
    ],
)
def test_solution_tags_sharing_lines_and_crlf(text):
    r = replay_completion(P, text)
    assert [t["move"][3] for t in r.transitions] == [37, 20, 46] and r.invalid_steps == 0
    assert r.reward == 1.0 and len(r.step_rewards) == r.num_lines


def test_answer_only():
    for problem in TINYZERO[:8] + LONGPROC[:8]:
        expr = solve(problem, limit=1)[0]
        r = replay_completion(problem, f"<answer>{expr}</answer>")
        assert r.transitions == [] and r.reward == 1.0 and r.num_lines == 1
    r = replay_completion(P, "<answer>21 + 16 + 17 - 26</answer>\n<answer>21+16-17+26</answer>")
    assert r.reward == 0.0 and r.num_lines == 1  # the episode ends at the first final answer


def test_tinyzero_think_block():
    text = (
        "<think>\nI will combine the numbers one by one.\n21 + 16 = 37\n37 - 17 = 20\n"
        "Step 3: 20 + 26 = 46\n</think>\n<answer>(21 + 16 - 17) + 26</answer>"
    )
    r = replay_completion(P, text)
    assert [t["move"] for t in r.transitions] == [(21, "+", 16, 37), (37, "-", 17, 20), (20, "+", 26, 46)]
    assert r.invalid_steps == 0 and r.reward == 1.0


def test_no_final_answer_and_budgets():
    r = replay_completion(P, "21 + 16 = 37\nhmm")
    assert r.verdict.reason and not r.verdict.correct and r.reward == 0.0 and not r.truncated
    r = replay_completion(P, dfs_trace(P), line_budget=5)
    assert r.truncated and r.num_lines == 5 and r.reward == 0.0 and r.step_rewards == [0.0] * 5
    with pytest.raises(ValueError, match="line_budget"):
        replay_completion(P, "x", line_budget=0)
    with pytest.raises(TypeError, match="Problem"):
        replay_completion((21, 16), "x")


def test_episode_chunks_are_line_agnostic():
    trace = dfs_trace(P, current_state=True)
    rng = random.Random(0)
    ep = TextEpisode(P)
    pos, transitions = 0, []
    while pos < len(trace) and not ep.done:
        n = rng.randint(1, 40)
        transitions += ep.feed(trace[pos : pos + n]).transitions
        pos += n
    assert ep.terminated and transitions == replay_completion(P, trace).transitions
    assert ep.text == trace  # the line holding </Solution> is complete with its newline


# ---- env budgets and modes -------------------------------------------------------------------


def test_line_and_char_budgets():
    env = CountdownTextEnv(max_lines=3, problems=[P])
    env.reset(seed=0)
    out = [env.step("thinking")[1:4] for _ in range(3)]
    assert out[-1] == (0.0, False, True) and out[0] == (0.0, False, False)
    env = CountdownTextEnv(max_completion_chars=50, problems=[P], prompt="compact")
    obs, _ = env.reset(seed=0)
    _, _, terminated, truncated, info = env.step("x" * 60)
    assert truncated and not terminated and len(env.completion) == 50 and info["verdict"] is not None


def test_token_str_mode_and_token_budget():
    env = CountdownTextEnv(action_mode="token_str", max_tokens=5, problems=[P], prompt="compact")
    env.reset(seed=0)
    results = [env.step(piece) for piece in ["21", "+", "16", "=37", "\n"]]
    info = results[3][4]
    assert info["transitions"] == [] and results[4][4]["transitions"][0]["valid"]
    assert results[4][3] and not results[3][3]  # truncated on the 5th token


def test_token_str_final_answer_mid_line():
    env = CountdownTextEnv(action_mode="token_str", problems=[P], prompt="tinyzero")
    env.reset(seed=0)
    for piece in ["<answer>", "21+16", "-17+26", "</answer>"]:
        obs, reward, terminated, truncated, info = env.step(piece)
    assert terminated and reward == 1.0 and info["is_success"] and obs.endswith("</answer>")


@pytest.fixture(scope="module")
def tiny_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    corpus = [dfs_trace(p) for p in LONGPROC[:5]] + ["<answer>1+2</answer> <think> Numbers: Target:"]
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(corpus, trainer)
    return tok


def test_token_mode(tiny_tokenizer):
    eos = tiny_tokenizer.token_to_id("<eos>")
    problem = SHORT
    env = CountdownTextEnv(action_mode="token", tokenizer=tiny_tokenizer, eos_token_id=eos, problems=[problem])
    obs, info = env.reset(seed=0)
    prompt_ids = list(obs["token_ids"])
    assert env.observation_space.contains(obs) and env.action_space.n == tiny_tokenizer.get_vocab_size()
    trace = _trace(problem, True)
    ids = tiny_tokenizer.encode(trace).ids
    transitions = []
    for k, token in enumerate(ids):  # noqa: B007  (k is read after the loop)
        obs, reward, terminated, truncated, info = env.step(np.int64(token))
        transitions += info["transitions"]
        if terminated or truncated:
            break
    assert terminated and reward == 1.0 and info["invalid_steps"] == 0
    assert transitions == replay_completion(problem, trace).transitions
    assert list(obs["token_ids"]) == prompt_ids + ids[: k + 1]
    assert trace.startswith(env.completion) and obs["text"].endswith(env.completion)
    assert env.observation_space.contains(obs)


def test_token_mode_multibyte_characters(tiny_tokenizer):
    env = CountdownTextEnv(action_mode="token", tokenizer=tiny_tokenizer, problems=[P], prompt="compact")
    env.reset(seed=0)
    text = "21 + 16 = 37\nnow \u00e9 \u4e2d\u6587 \u2713\n37 - 17 = 20\n"
    for token in tiny_tokenizer.encode(text).ids:
        obs, _, _, _, info = env.step(token)
    assert env.completion == text and info["invalid_steps"] == 0 and info["num_lines"] == 3
    assert obs["text"].endswith("now \u00e9 \ufffd\ufffd \u2713\n37 - 17 = 20\n")  # CJK is outside CHARSET


def test_token_mode_eos_ends_the_episode(tiny_tokenizer):
    eos = tiny_tokenizer.token_to_id("<eos>")
    env = CountdownTextEnv(action_mode="token", tokenizer=tiny_tokenizer, eos_token_id=eos, problems=[P], prompt="compact")
    env.reset(seed=0)
    for token in tiny_tokenizer.encode("21 + 16 = 37\n21+16-17+26").ids:
        env.step(token)
    obs, reward, terminated, truncated, info = env.step(eos)
    assert terminated and reward == 1.0 and info["verdict"].answer_format == "plain"
    assert [t["valid"] for t in info["transitions"]] == []  # the last line is an expression, not a move


def test_transformers_tokenizer(tiny_tokenizer):
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tiny_tokenizer, eos_token="<eos>")
    env = CountdownTextEnv(action_mode="line", tokenizer=tok, problems=[P], max_tokens=12)
    obs, _ = env.reset(seed=0)
    n = len(obs["token_ids"])
    obs, _, _, truncated, info = env.step("21 + 16 = 37")
    assert len(obs["token_ids"]) == n + info["num_tokens"] and info["transitions"][0]["valid"]
    assert env.tokenizer.eos_token_id == tok.eos_token_id
    while not truncated:
        _, _, _, truncated, info = env.step("thinking")
    assert info["num_tokens"] >= 12


def test_token_mode_follows_the_tokenizers_clean_up():
    """decode() with clean_up_tokenization_spaces drops the space in " !=" (a lone "▁" token here)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    text = "So , let 's search .\n" + _trace(P, True)
    pieces = []
    for word, _ in pre_tokenizers.Metaspace().pre_tokenize_str(text):
        pieces += ["\u2581", word[1:]] if word in ("\u2581!=", "\u2581's") else [word]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(["<unk>", "<eos>", *pieces]))}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.decoder = decoders.Metaspace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<eos>", clean_up_tokenization_spaces=True)
    ids = [vocab[w] for w in pieces]
    full = tok.decode(ids)
    assert full.startswith("So, let's search.\n") and " !=" not in full and "!=" in full
    env = CountdownTextEnv(action_mode="token", tokenizer=tok, problems=[P], prompt="compact")
    env.reset(seed=0)
    transitions, invalid = [], []
    for token in ids:
        _, reward, terminated, truncated, info = env.step(token)
        transitions += info["transitions"]
        invalid += info["invalid_lines"]
    replay = replay_completion(P, full)
    assert terminated and env.completion == full and transitions == replay.transitions
    assert invalid == [c.to_dict() for c in replay.invalid_lines] and reward == replay.reward
    for budget in (3, 8, 40):  # the last token of the budget releases all its text
        env = CountdownTextEnv(action_mode="token", tokenizer=tok, problems=[P], prompt="compact", max_tokens=budget)
        env.reset(seed=0)
        for token in ids[:budget]:
            *_, truncated, _ = env.step(token)
        assert truncated and env.completion == tok.decode(ids[:budget])


def test_out_of_charset_text_is_kept_but_masked():
    env = CountdownTextEnv(problems=[P], prompt="compact")
    env.reset(seed=0)
    obs, *_ = env.step("21 + 16 = 37 \u4e2d")
    assert "\u4e2d" in env.completion and "\u4e2d" not in obs and env.observation_space.contains(obs)
    assert set(obs) <= set(CHARSET)


# ---- bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"action_mode": "word"}, "action_mode"),
        ({"prompt": "chat"}, "prompt"),
        ({"action_mode": "token"}, "tokenizer"),
        ({"max_tokens": 10}, "max_tokens"),
        ({"max_lines": 0}, "max_lines"),
        ({"max_completion_chars": -1}, "max_completion_chars"),
        ({"render_mode": "nosuch"}, "render_mode"),
        ({"prompt": "compact", "prompt_kwargs": {"current_state": True}}, "prompt_kwargs"),
        ({"prompt_kwargs": {"currentstate": True}}, "unknown prompt_kwargs"),  # not a TypeError at reset
        ({"prompt_kwargs": {"example": ((6, 2, 5, 3), 8)}}, "must be a Problem"),  # not an AttributeError
        # not ~10 s and an 80M-character prompt at every reset (a 7-number example: minutes, gigabytes)
        ({"prompt_kwargs": {"example": Problem((25, 50, 75, 100, 3, 6), 952)}}, "DFS search makes more than 1024"),
        # these were taken here, then every reset raised
        ({"prompt_kwargs": {"current_state": "no"}}, r"prompt_kwargs\['current_state'\] must be a bool"),
        ({"prompt_kwargs": {"example": Problem((1, 2), 4)}}, r"prompt_kwargs\['example'\]: no solution"),
        ({"rules": "classic", "prompt_kwargs": {"example": Problem((1, 2), 2)}}, r"prompt_kwargs\['example'\]: .* needs no move"),
        ({"preset": "nope"}, "preset"),
        ({"tokenizer": object()}, "tokenizer"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CountdownTextEnv(**kwargs)


def test_bad_actions_and_calls(tiny_tokenizer):
    env = CountdownTextEnv(problems=[P])
    with pytest.raises(RuntimeError, match="reset"):
        env.step("x")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one line"):
        env.step("a\nb")
    with pytest.raises(ValueError, match="str"):
        env.step(3)
    with pytest.raises(ValueError, match="must be a str, got int <a number of over 4300 digits>"):
        env.step(10**5000)  # the message's repr raised Python's int->str digit limit instead
    with pytest.raises(ValueError, match="option"):
        env.reset(options={"problme": P})
    tok_env = CountdownTextEnv(action_mode="token", tokenizer=tiny_tokenizer, problems=[P])
    tok_env.reset(seed=0)
    with pytest.raises(ValueError, match="token action"):
        tok_env.step(10**6)
    with pytest.raises(ValueError, match="token action must be an int in .*<a number of over 4300 digits>"):
        tok_env.step(10**5000)
    with pytest.raises(ValueError, match="eos_token_id must be an int in .*<a number of over 4300 digits>"):
        CountdownTextEnv(action_mode="token", tokenizer=tiny_tokenizer, eos_token_id=10**5000)
    with pytest.raises(ValueError, match="token action"):
        tok_env.step(np.array([1, 2]))
    tok_env.step(np.array([5]))  # shape (1,), as Countdown-v0 accepts
    assert tok_env.num_tokens == 1
    str_env = CountdownTextEnv(action_mode="token_str", tokenizer=tiny_tokenizer, problems=[P])
    str_env.reset(seed=0)
    with pytest.raises(ValueError, match=r"lone surrogate \('\\ud83d' at index 1\)"):  # half an emoji from JSON
        str_env.step("a\ud83d")  # was the tokenizers library's 'TextInputSequence must be str' TypeError
    assert str_env.num_tokens == 0 and str_env.completion == ""
    with pytest.raises(ValueError, match="eos_token_id"):
        CountdownTextEnv(action_mode="token", tokenizer=tiny_tokenizer, eos_token_id=10**6)
    with pytest.raises(ValueError, match="eos_token_id"):
        CountdownTextEnv(eos_token_id=0)
    with pytest.raises(ValueError, match="max_prompt_chars"):
        CountdownTextEnv(problems=[P], max_prompt_chars=100).reset(seed=0)
    env = CountdownTextEnv(problems=[P], max_prompt_chars=60, prompt="compact")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="max_prompt_chars"):  # a refused reset keeps the running episode whole
        env.reset(options={"problem": Problem(tuple(range(10**14, 10**14 + 4)), 5)})
    assert env.problem == P and str(P.target) in env.prompt and env.step("21+16=37 [17,26,37]\n")[1] == 0.0


# ---- vector environments ---------------------------------------------------------------------


@pytest.mark.parametrize("mode, kwargs", [("sync", {}), ("async", {"shared_memory": False})])
def test_make_vec(mode, kwargs):
    envs = gym.make_vec("CountdownText-v0", num_envs=2, vectorization_mode=mode, vector_kwargs=kwargs, prompt="compact")
    try:
        obs, info = envs.reset(seed=0)
        assert all(o.startswith("Numbers: [") for o in obs)
        obs, reward, terminated, truncated, info = envs.step(("21 + 16 = 37", "<answer>1</answer>"))
        assert list(terminated) == [False, True] and list(reward) == [0.0, 0.0]
        assert obs[0].endswith("21 + 16 = 37\n") and info["transitions"][0][0]["reason"] == "operand_unavailable"
    finally:
        envs.close()


def test_leading_zero_move_is_an_invalid_step_as_the_verifier_rejects_it() -> None:
    p = Problem((6, 2, 5, 3), 8)
    text = "<Solution>\n6 - 2 = 04\n5 - 3 = 2\n4 * 2 = 8\n</Solution>\n"
    r = replay_completion(p, text)
    assert verify(p, text).reason == "leading_zero"
    assert r.verdict.reason == "leading_zero"
    assert r.transitions[0]["reason"] == "malformed" and r.invalid_steps == 2
    assert replay_completion(p, text.replace("04", "4")).invalid_steps == 0


def test_a_line_whose_result_passes_15_digits_is_checked_not_malformed():
    checker = LineChecker(Problem((99999999, 99999999, 3), 3333333266666667, Rules.preset("classic")))
    for line in ("99999999 * 99999999 = 9999999800000001", "9999999800000001 / 3 = 3333333266666667"):
        check, (t,) = checker.check(line)
        assert check.valid and t["valid"], (line, check.reason)  # the first was read as malformed (16 digits)
    assert checker.check("3333333266666667 + " + "1" * 40 + " = 1")[0].reason == "malformed"


def test_a_line_closing_the_answer_is_read_up_to_the_tag_however_it_was_chunked():
    """A token ending at '</answer>' ended the line there, while the same text in one chunk was checked to its
    newline: 'Try 5 / 3 = 1.7. </answer>1.7 is a decimal, drop this branch.' gave a valid drop or an invalid move."""
    p = Problem((7, 2, 3), 5)
    trace = dfs_trace(p)
    dec = next(line for line in trace.splitlines() if "is a decimal" in line)
    line = dec.replace(". ", ". </answer>", 1)
    cut = line.index("</answer>") + len("</answer>")
    runs = []
    for chunks in ([line + "\n"], [line[:cut], line[cut:] + "\n"]):
        env = gym.make("CountdownText-v0", problems=[p], action_mode="token_str")
        env.reset(seed=0)
        env.step(trace[: trace.index(dec)])
        records = []
        for c in chunks:  # the first chunk of the second way ends the episode
            _, _, terminated, _, info = env.step(c)
            records += [(t["line_no"], t["reason"]) for t in info["transitions"]]
            if terminated:
                break
        runs.append(records)
    assert runs[0] == runs[1] and runs[0][-1][1] == "non_integer_result"
    assert replay_completion(p, trace[: trace.index(dec)] + line).transitions[-1]["reason"] == "non_integer_result"
