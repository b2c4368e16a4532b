"""LongProc-format DFS traces: exact lines for a known example, parsing back, Current State."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from countdown_gym import Problem, Rules, dfs_trace, generate, parse_trace, search_nodes, verify
from countdown_gym.envs.text_episode import replay_completion
from countdown_gym.game.trace import TraceParseError

P = Problem((21, 16, 17, 26), 46)

# The line shapes of LongProc's reference search (REFERENCE.md) for its documented example.
EXPECTED = """\
# Search Procedure
Initial number set: [21, 16, 17, 26], target: 46. Options for choosing two numbers: [(21, 16), (21, 17), (21, 26), (16, 17), (16, 26), (17, 26)].
 |- Pick two numbers (21, 16) (numbers left: [17, 26]). Try possible operations.
  |- Try 21 + 16 = 37. Add 37 to the number set. Current number set: [37, 17, 26], target: 46. Options for choosing two numbers: [(37, 17), (37, 26), (17, 26)].
   |- Pick two numbers (37, 17) (numbers left: [26]). Try possible operations.
    |- Try 37 + 17 = 54. Add 54 to the number set. Current number set: [54, 26], target: 46, just two numbers left.
     |- Try 54 + 26 = 80. Evaluate 80 != 46, drop this branch.
     |- Try 54 - 26 = 28. Evaluate 28 != 46, drop this branch.
     |- Try 54 * 26 = 1404. Evaluate 1404 != 46, drop this branch.
     |- Try 54 / 26 = 2.1. 2.1 is a decimal, drop this branch.
    |- Try 37 - 17 = 20. Add 20 to the number set. Current number set: [20, 26], target: 46, just two numbers left.
     |- Try 26 + 20 = 46. Evaluate 46 == 46, target found!

Now we have found the target, let's trace back the solution:
Final step: 26 + 20 = 46
The step before: 37 - 17 = 20
The first step: 21 + 16 = 37

Output the solution in the required format:
<Solution>
21 + 16 = 37
37 - 17 = 20
26 + 20 = 46
</Solution>
"""


def test_known_example_exact() -> None:
    assert dfs_trace(P) == EXPECTED
    assert search_nodes(P) == 8  # its Try lines


def test_pruning_lines() -> None:
    t = dfs_trace(Problem((40, 60, 2), 20))
    assert "  |- Try 60 * 40 = 2400. 2400 exceeds the maximum intermediate result, drop this branch.\n" in t
    assert "  |- Try 60 / 40 = 1.5. 1.5 is a decimal, drop this branch.\n" in t
    t = dfs_trace(Problem((8, 5, 0), 40))
    assert "   |- Try 13 / 0 (invalid operation). drop this branch.\n" in t
    t = dfs_trace(Problem((5, 5, 3), 3))  # LongProc's rules keep the 0 and search below it
    assert "  |- Try 5 - 5 = 0. Add 0 to the number set. Current number set: [0, 3], target: 3, just two numbers left.\n" in t
    t = dfs_trace(Problem((5, 5, 3), 3, rules=Rules.longproc_positive()))
    assert "  |- Try 5 - 5 = 0. 0 is not positive, drop this branch.\n" in t


def test_current_state_suffix() -> None:
    annotated = dfs_trace(P, current_state=True)
    lines = annotated.split("\n\nNow we have found")[0].splitlines()[1:]
    suffix = re.compile(r" ### Current State: \[([^\]]*)\]$")
    states = []
    for line in lines:
        m = suffix.search(line)
        assert m, line
        states.append(m.group(1))
    assert states[:4] == ["21, 16, 17, 26", "21, 16, 17, 26", "37, 17, 26", "37, 17, 26"]
    assert states[4] == "54, 26"  # after "Try 37 + 17 = 54 ... Add 54"
    assert states[-1] == "46"  # the target found
    stripped = "\n".join(suffix.sub("", line) for line in annotated.splitlines())
    assert stripped + "\n" == EXPECTED
    assert parse_trace(annotated) == parse_trace(EXPECTED)


def _check_round_trip(p: Problem) -> None:
    rules = p.rules
    trace = dfs_trace(p)
    init, target, steps = parse_trace(trace)
    assert init == p.numbers and target == p.target
    assert len(steps) == search_nodes(p)
    known_states = {init}
    for s in steps:
        assert s.state in known_states, s
        a, op, b, c = s.move
        left = Counter(s.state)
        left.subtract((a, b))
        assert min(left.values(), default=0) >= 0, s
        result, reason = rules.check(a, op, b)
        if s.outcome == "dropped":
            assert result is None
            continue
        assert result == c
        assert Counter(s.next_state) == left + Counter([c])
        if s.outcome == "added":
            known_states.add(s.next_state)
    if rules.use_all:
        assert steps[-1].outcome == "found" and steps[-1].next_state == (p.target,)
    else:  # the search stops as soon as the target appears in the number set
        assert p.target in steps[-1].next_state
    assert verify(p, trace).correct


@pytest.mark.parametrize("preset", ["longproc-0.5k", "tinyzero", "hard"])
def test_parse_trace_round_trip(preset: str) -> None:
    for p in generate(preset, 12 if preset != "hard" else 4, seed=5):
        _check_round_trip(p)


def test_round_trip_other_rules() -> None:
    _check_round_trip(Problem((8, 5, 0), 40))
    _check_round_trip(Problem((24, 24, 10, 21), 21))  # needs 24 - 24 = 0
    _check_round_trip(Problem((5, 5, 3), 3, rules=Rules.longproc_positive()))
    _check_round_trip(Problem((3, 5, 2), -4, rules=Rules.tinyzero()))
    _check_round_trip(Problem((30, 75, 2, 9), 98, rules=Rules.tinyzero()))
    _check_round_trip(Problem((25, 4, 9, 7), 100, rules=Rules.classic()))
    _check_round_trip(Problem((25, 4, 9, 7), 29, rules=Rules.classic()))


def test_negative_and_rational_numbers_in_traces() -> None:
    p = Problem((3, 5, 2, 7), 5, rules=Rules.tinyzero())
    trace = dfs_trace(p)
    assert "Try 3 - 5 = -2. Add -2 to the number set." in trace and "Add 5/3 to the number set" in trace
    _, _, steps = parse_trace(trace)
    assert any(isinstance(x, int) and x < 0 for s in steps for x in s.state)
    assert verify(p, trace).correct


def test_integer_rules_with_negatives_try_b_over_a() -> None:
    # (4 - 25) / 7 = -3: with a negative number, the smaller one can be the whole dividend
    p = Problem((7, 4, 25), -3, rules=Rules.longproc().replace(sign="any", value_limit=7))
    trace = dfs_trace(p)
    assert "Try -21 / 7 = -3." in trace and verify(p, trace).correct
    _check_round_trip(p)


def test_problems_needing_no_move() -> None:
    # the <Solution> block would be empty, which verify() rejects as empty_answer
    for p in (Problem((9, 12), 9, rules=Rules.classic()), Problem((9,), 9)):
        with pytest.raises(ValueError, match="needs no move"):
            dfs_trace(p)
    with pytest.raises(ValueError, match="no solution"):
        dfs_trace(Problem((9,), 8))


def test_errors() -> None:
    with pytest.raises(ValueError, match="no solution"):
        dfs_trace(Problem((1, 1, 1, 1), 24))
    with pytest.raises(TraceParseError):
        parse_trace("hello")
    with pytest.raises(TraceParseError):  # a look-alike digit is not a number
        parse_trace(EXPECTED.replace("  |- Try 21 + 16", "  |- Try \uff12\uff11 + 16"))
    with pytest.raises(TraceParseError) as e:
        parse_trace(EXPECTED.replace("  |- Try 21 + 16", "  |- Tri 21 + 16"))
    assert e.value.line_no == 3


def test_the_traces_refuse_a_problem_or_rules_of_another_type() -> None:
    """dfs_trace / search_nodes / compact_trace(problem, rules='tinyzero') raised AttributeError ('str' object has no
    attribute 'is_won'), and of a (numbers, target) pair AttributeError ('tuple' has no 'rules')."""
    from countdown_gym.game.compact_trace import compact_trace

    p = Problem((1, 2), 3)
    for write in (dfs_trace, search_nodes, compact_trace):
        with pytest.raises(TypeError, match="rules must be a Rules or None, got str"):
            write(p, rules="tinyzero")
        with pytest.raises(TypeError, match=r"needs a Problem, got tuple"):
            write(((1, 2), 3))


def test_an_unsolvable_problem_is_refused_before_the_search() -> None:
    """dfs_trace of six 1s and target 999 searched its whole tree (20 s; minutes from 7 numbers) before its
    ValueError; the solver answers first."""
    from no_hang import no_hang

    with no_hang(5), pytest.raises(ValueError, match="no solution"):
        dfs_trace(Problem((1,) * 7, 999))


@pytest.mark.parametrize("trace", [None, b"Initial number set: [1, 2], target: 3, just two numbers left."])
def test_parse_trace_names_a_trace_that_is_no_str(trace):
    with pytest.raises(TypeError, match="parse_trace.. needs the trace as a str, got"):  # was AttributeError / TypeError
        parse_trace(trace)


def test_dfs_trace_refuses_a_current_state_that_is_no_bool():
    with pytest.raises(TypeError, match="current_state must be a bool, got str 'no'"):  # was read as True
        dfs_trace(Problem((1, 2, 3, 4), 10), current_state="no")


def test_a_trace_whose_values_pass_15_digits_reads_back() -> None:
    problem = Problem((99999999, 99999999, 3), 3333333266666667, Rules.preset("classic"))
    init, target, steps = parse_trace(dfs_trace(problem))  # a TraceParseError: "number literal with 16 digits"
    assert (init, target) == (problem.numbers, problem.target) and any(s.move[3] == 9999999800000001 for s in steps)


def test_a_decimal_past_float_precision_is_written_within_a_twentieth():
    """228292483004686692190512 / 18881722 was written 12090660110591962.0 (a float's rounding; the value is
    ...962.54), which the text env's checker reads as an arithmetic error."""
    problem = Problem((97589704, 30425418, 18881722, 76886671), 574484284409796, Rules.classic().replace(use_all=False))
    trace = dfs_trace(problem)
    assert "228292483004686692190512 / 18881722 = 12090660110591962.5." in trace
    assert all(t["valid"] for t in replay_completion(problem, trace).transitions)


@pytest.mark.parametrize("field", ["answer", "leaves"])
def test_a_bad_compact_trace_option_is_quoted_bounded(field) -> None:
    """A 1 MB option value was quoted whole."""
    from countdown_gym.game.compact_trace import CompactTraceConfig

    with pytest.raises(ValueError, match=f"{field} must be") as err:
        CompactTraceConfig(**{field: "x" * 1_000_000})
    assert len(str(err.value)) < 300
