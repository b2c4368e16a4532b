"""verify(): answer forms, every bad input from the issue, regression tests, property tests."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from countdown_gym import (
    REASONS,
    ExpressionError,
    Problem,
    Rules,
    Verdict,
    dfs_trace,
    evaluate_expression,
    extract_answer,
    generate,
    load_split,
    parse_expression,
    solve,
    verify,
)
from countdown_gym.envs.text_checker import LineChecker
from countdown_gym.game.expression import MAX_DEPTH, tokenize
from countdown_gym.game.solver import apply_move, legal_moves, solution_path
from countdown_gym.game.text_format import format_equation
from countdown_gym.game.turn_format import format_move
from countdown_gym.game.turn_game import TurnEpisode

P = Problem((21, 16, 17, 26), 46)
GOOD = "21 + 16 - 17 + 26"
TZ = Rules.tinyzero()


def check(completion, problem: Problem = P, rules: Rules | None = None) -> Verdict:
    v = verify(problem, completion, rules)
    assert isinstance(v, Verdict)
    assert v.reason in REASONS, v.reason
    assert v.correct == (v.reason == "ok")
    assert v.message
    return v


# ---- accepted forms ------------------------------------------------------------------------------


def test_answer_tag_correct() -> None:
    v = check(f"<think>let me try</think>\n<answer>{GOOD}</answer>")
    assert v.correct and v.reward == 1.0
    assert v.answer_format == "answer_tag"
    assert v.value == 46
    assert v.numbers_used == (16, 17, 21, 26)
    assert v.steps == ((21, "+", 16, 37), (37, "-", 17, 20), (20, "+", 26, 46))


def test_tinyzero_style_spaces_and_newlines() -> None:
    assert check("<answer> (21 + 16) - (17 - 26 + 26) + 26 - 26 </answer>").reason == "number_reused"
    assert check("<answer>\n  (21 + 16)\n - 17 + 26\n</answer>").correct


def test_trailing_equals() -> None:
    assert check(f"<answer>{GOOD} = 46</answer>").correct
    assert check(f"<answer>{GOOD} = 45</answer>").reason == "arithmetic_error"
    assert check(f"<answer>{GOOD} = </answer>").reason == "malformed_equation"
    assert check(f"<answer>{GOOD} = 46 = 46</answer>").reason == "malformed_equation"
    assert check(f"<answer>{GOOD} = 4 6</answer>").reason == "malformed_equation"
    assert check("<answer>= 46</answer>").reason == "empty_answer"


def test_plain_last_line() -> None:
    v = check(f"I think the answer is below.\n{GOOD}\n\n   \n")
    assert v.correct and v.answer_format == "plain"
    assert check(f"{GOOD}\nSo the answer is 46.").reason == "invalid_character"
    assert check(f"{GOOD} = 46").correct


def test_operator_aliases() -> None:
    assert check("<answer>(26 − 21) × 16 ÷ (17 − 16 + 16 − 16)</answer>").reason == "number_reused"
    p = Problem((6, 2, 5, 3), 8)
    assert check("<answer>(6 − 2) × (5 − 3)</answer>", p).correct
    assert check("<answer>6 ÷ 2 + 5 × 3 − 10</answer>", p).reason == "foreign_number"


def test_solution_block_correct_and_operand_order() -> None:
    assert check("<Solution>\n21 + 16 = 37\n37 - 17 = 20\n26 + 20 = 46\n</Solution>").correct
    v = check("<Solution>\n16 + 21 = 37\n\n37 - 17 = 20\n20 + 26 = 46\n</Solution>")
    assert v.correct and v.answer_format == "solution_block"
    assert v.steps[-1] == (20, "+", 26, 46)
    assert v.numbers_used == (16, 17, 21, 26)


def test_solution_block_errors() -> None:
    def block(*lines: str) -> str:
        return "<Solution>\n" + "\n".join(lines) + "\n</Solution>"

    assert check(block("21 + 16 = 37", "37 - 17 = 20", "20 + 26 = 47")).reason == "arithmetic_error"
    assert check(block("21 + 16 = 37", "37 - 17 = 20")).reason == "unused_numbers"
    assert check(block("21 + 16 = 37", "37 - 17 = 20", "20 * 26 = 520")).reason == "wrong_value"
    assert check(block("21 + 16 = 37", "37 - 16 = 21", "21 + 26 = 47")).reason == "number_reused"
    assert check(block("21 + 99 = 120")).reason == "foreign_number"
    assert check(block("21 + 16 = 37", "37 + 37 = 74")).reason == "number_reused"
    assert check(block("16 - 21 = -5")).reason == "negative_result"
    assert check(block("21 / 16 = 1")).reason == "non_integer_result"
    assert check(block("Step 1: 21 + 16 = 37")).reason == "malformed_step"  # docs/verifier.md: any other line
    assert check(block("21 ^ 2 = 441")).reason == "power_operator"  # the <answer> code for the same thing
    assert check(block("21 ** 2 = 441")).reason == "power_operator"
    assert check(block("21\u00a0+ 16 = 37", "37\u3000- 17 = 20", "20 + 26 = 46")).correct  # Unicode spaces, as in <answer>
    assert check(block("21 + 16 + 17 = 54")).reason == "malformed_step"
    assert check(block("(21 + 16) = 37")).reason == "malformed_step"
    assert check(block("21 + １6 = 37")).reason == "non_ascii_digit"
    assert check(block("021 + 16 = 37")).reason == "leading_zero"
    assert check("<Solution>\n\n</Solution>").reason == "empty_answer"
    assert check(block("21 × 16 = 336", "336 + 17 = 353", "353 − 26 = 327")).reason == "wrong_value"


def test_solution_block_rational_rules() -> None:
    p = Problem((7, 2, 4), 14, rules=TZ)
    assert check("<Solution>\n7 / 2 = 7/2\n7/2 * 4 = 14\n</Solution>", p).correct
    assert check("<Solution>\n7 / 2 = 3\n3 * 4 = 12\n</Solution>", p).reason == "arithmetic_error"
    q = Problem((3, 5, 2), -4, rules=TZ)
    assert check("<Solution>\n3 - 5 = -2\n-2 * 2 = -4\n</Solution>", q).correct


def test_trace_solution_verifies() -> None:
    for p in generate("longproc-0.5k", 25, seed=3):
        assert check(dfs_trace(p), p).correct
        assert check(dfs_trace(p, current_state=True), p).correct
    for p in generate("tinyzero", 10, seed=3):
        assert check(dfs_trace(p), p).correct


# ---- which block counts ------------------------------------------------------------------------------


def test_first_closed_block_counts() -> None:
    # the answer is committed at the first closing tag; what follows is never read
    assert check(f"<answer>21 + 16</answer> wait <answer>{GOOD}</answer>").reason == "unused_numbers"
    assert check(f"<answer>{GOOD}</answer> hmm <answer>21 + 16</answer>").correct
    assert check(f"<answer>{GOOD}</answer> hmm <answer>21 + 16").correct
    sol = "<Solution>\n21 + 16 = 37\n37 - 17 = 20\n26 + 20 = 46\n</Solution>"
    assert check(f"<answer>21 + 16</answer>{sol}").reason == "unused_numbers"
    assert check(f"{sol}<answer>21 + 16</answer>").correct
    assert check(f"{sol}<answer>21 + 16</answer>").answer_format == "solution_block"
    # before the first closing tag, the last opening tag starts the block
    assert check(f"<answer>21 + 16\n<answer>{GOOD}</answer>").correct
    assert check(f"<Solution>\n21 + 16 = 37\n<answer>{GOOD}</answer>").answer_format == "answer_tag"
    assert check(f"<answer>{GOOD}</Solution>").reason == "unclosed_tag"


def test_verifier_and_text_env_agree_on_several_blocks() -> None:
    from countdown_gym.envs.text import replay_completion

    sol = "<Solution>\n21 + 16 = 37\n37 - 17 = 20\n26 + 20 = 46\n</Solution>"
    bad = "<answer>21 + 16 + 17 - 26</answer>"
    for text in (
        f"{bad}\n<answer>{GOOD}</answer>\n",
        f"<answer>{GOOD}</answer>\nActually <answer>21 + 16",
        f"<answer>{GOOD}</answer> {bad}",
        f"{sol}\n{bad}\n",
        f"{bad}{sol}",
        f"<think>I write <answer> </answer> at the end</think>\n<answer>{GOOD}</answer>",
    ):
        assert check(text) == replay_completion(P, text).verdict, text


def test_tag_case_variants_and_nesting() -> None:
    assert check(f"<Answer>{GOOD}</Answer>").correct
    assert check(f"<ANSWER>{GOOD}</ANSWER>").correct
    assert check(f"<answer><answer>{GOOD}</answer></answer>").correct


def test_unclosed_and_unopened_tags() -> None:
    assert check(f"<answer>{GOOD}").reason == "unclosed_tag"
    assert check(f"{GOOD}</answer>").reason == "no_answer"
    assert check("<Solution>\n21 + 16 = 37").reason == "unclosed_tag"


def test_empty_inputs() -> None:
    assert check("").reason == "no_answer"
    assert check("  \n\n ").reason == "no_answer"
    assert check("<answer></answer>").reason == "empty_answer"
    assert check("<answer>   </answer>").reason == "empty_answer"
    assert check(None).reason == "invalid_input"
    assert check(12).reason == "invalid_input"
    assert check(f"<answer>{GOOD}</answer>".encode()).correct


def test_bad_arguments_raise_type_error() -> None:
    with pytest.raises(TypeError):
        verify((21, 16, 17, 26), GOOD)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        verify(P, GOOD, rules="longproc")  # type: ignore[arg-type]


# ---- every bad input listed in the issue -----------------------------------------------------------------

BAD = [
    ("<answer>__import__('os').system('rm -rf /')</answer>", "invalid_character"),
    ("<answer>eval('21+16-17+26')</answer>", "invalid_character"),
    ("<answer>21 + 16 - 17 + 26; import os</answer>", "invalid_character"),
    ("<answer>[x for x in ()]</answer>", "invalid_character"),
    ("<answer>21 ** 2</answer>", "power_operator"),
    ("<answer>21 ^ 2</answer>", "power_operator"),
    ("<answer>99999999999999999999999 * 21</answer>", "number_too_large"),
    ("<answer>" + "9" * 5000 + "</answer>", "number_too_large"),
    ("<answer>21 / (16 - 16)</answer>", "number_reused"),
    ("<answer>21 + 16 - 17 + 26 + 5</answer>", "foreign_number"),
    ("<answer>21 + 21 + 16 - 17</answer>", "number_reused"),
    ("<answer>２1 + 16 - 17 + 26</answer>", "non_ascii_digit"),
    ("<answer>٢1 + 16 - 17 + 26</answer>", "non_ascii_digit"),
    ("<answer>21² + 16</answer>", "non_ascii_digit"),
    ("<answer>2l + 16 - 17 + 26</answer>", "invalid_character"),
    ("<answer>21 ＋ 16 - 17 + 26</answer>", "invalid_character"),
    ("<answer>-21 + 16 + 17 + 26</answer>", "unary_operator"),
    ("<answer>21 + (-16) + 17 + 26</answer>", "unary_operator"),
    ("<answer>21 * + 16</answer>", "unary_operator"),
    ("<answer>21 * / 16</answer>", "missing_operand"),
    ("<answer>21 + 16 -</answer>", "missing_operand"),
    ("<answer>* 21</answer>", "missing_operand"),
    ("<answer>21(16 - 17)</answer>", "implicit_multiplication"),
    ("<answer>(21 + 16)(26 - 17)</answer>", "implicit_multiplication"),
    ("<answer>(21 + 16)26</answer>", "implicit_multiplication"),
    ("<answer>21 16</answer>", "missing_operator"),
    ("<answer>21 + ()</answer>", "empty_parentheses"),
    ("<answer>(21 + 16</answer>", "unbalanced_parentheses"),
    ("<answer>21 + 16)</answer>", "unbalanced_parentheses"),
    ("<answer>21.0 + 16 - 17 + 26</answer>", "decimal_number"),
    ("<answer>021 + 16 - 17 + 26</answer>", "leading_zero"),
    ("<answer>(21 + 16) * (17 - 26)</answer>", "negative_result"),
    ("<answer>21 - (26 - 16) - 17 + 16</answer>", "number_reused"),
    ("<answer>(21 * 16) * (26 - 17)</answer>", "exceeds_limit"),
    ("<answer>21 / 16 * 17 * 26</answer>", "non_integer_result"),
    ("<answer>(21 - 21)</answer>", "number_reused"),
    ("<answer>21 + 16 + 17 + 26</answer>", "wrong_value"),
    ("<answer>21 + 16 + 17</answer>", "unused_numbers"),
]


@pytest.mark.parametrize(("completion", "reason"), BAD)
def test_bad_inputs(completion: str, reason: str) -> None:
    assert check(completion).reason == reason


def test_division_by_zero_and_zero_result() -> None:
    p = Problem((5, 5, 3), 3, rules=Rules.longproc().replace(sign="any"))
    assert check("<answer>3 / (5 - 5)</answer>", p).reason == "division_by_zero"
    q = Problem((5, 5, 3), 3, rules=Rules.longproc_positive())
    assert check("<answer>3 + (5 - 5)</answer>", q).reason == "zero_result"
    assert check("<Solution>\n5 - 5 = 0\n3 + 0 = 3\n</Solution>", q).reason == "zero_result"
    lp = Problem((5, 5, 3), 3)  # LongProc's rules keep a 0 intermediate
    assert check("<answer>3 + (5 - 5)</answer>", lp).correct
    assert check("<Solution>\n5 - 5 = 0\n3 + 0 = 3\n</Solution>", lp).correct
    assert check("<answer>3 / (5 - 5)</answer>", lp).reason == "division_by_zero"
    assert check("<answer>(5 - 5) / 3</answer>", Problem((5, 5, 3), 0)).correct  # a 0 target too


def test_nested_parentheses_fast_no_recursion_error() -> None:
    for depth in (10_000, 100_000):
        t = time.perf_counter()
        v = check("<answer>" + "(" * depth + "21" + ")" * depth + "</answer>")
        assert time.perf_counter() - t < 0.5
        assert v.reason in ("too_deep", "answer_too_long")
    ok = "(" * MAX_DEPTH + "21 + 16 - 17 + 26" + ")" * MAX_DEPTH
    assert check(f"<answer>{ok}</answer>").correct
    assert check("<answer>" + "(" * 10_000 + "</answer>").reason == "too_deep"



DEEP = "(" * (MAX_DEPTH + 1)


@pytest.mark.parametrize("text, reason, position", [
    ("01+" + DEEP + "1" + ")" * (MAX_DEPTH + 1), "leading_zero", 0),  # was too_deep: the error's position lookup re-lexed
    ("1 1" + DEEP, "missing_operator", 2),
    (DEEP + "1", "too_deep", MAX_DEPTH),
    (DEEP + "1^2", "power_operator", MAX_DEPTH + 2),  # '^' (the slow lexer) was too_deep, '**' power_operator
    (DEEP + "1**2", "power_operator", MAX_DEPTH + 2),
    (DEEP + "1 x", "invalid_character", MAX_DEPTH + 3),  # the characters are checked first, then the grammar
])
def test_too_deep_hides_no_earlier_error_and_both_lexers_agree(text: str, reason: str, position: int) -> None:
    """The grammar reports its first error in reading order, too_deep included; a character the lexer refuses
    (letters, '^', '**') is reported before any grammar error, on the fast and the slow lexer alike."""
    with pytest.raises(ExpressionError) as e:
        parse_expression(text)
    assert (e.value.reason, e.value.position) == (reason, position)
    assert f"position {position}" in e.value.message
    assert check(f"<answer>{text}</answer>").reason == reason

GARBAGE = {
    "letters": lambda: "x" * 10_000_000,
    "angle_brackets": lambda: "<" * 10_000_000,
    "open_tags": lambda: "<answer>" * 1_000_000,
    "close_tags": lambda: "</answer>" * 1_000_000,
    "half_tags": lambda: "<answer" * 1_000_000,
    "one_long_expression": lambda: "1+" * 5_000_000,
    "many_lines": lambda: "\n".join(["21 + 16"] * 1_000_000),
    "huge_solution_block": lambda: "<Solution>\n" + "21 + 16 = 37\n" * 500_000 + "</Solution>",
    "open_parens": lambda: "<answer>" + "(" * 5_000_000 + "</answer>",
    "random_unicode": lambda: "".join(map(chr, range(32, 0x3000))) * 800,
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_ten_megabytes_of_garbage_is_fast(kind: str) -> None:
    garbage = GARBAGE[kind]()
    assert len(garbage) >= 5_000_000
    t = time.perf_counter()
    v = check(garbage)
    assert time.perf_counter() - t < 1.0
    assert not v.correct


def test_huge_number_allowed_by_rules_stays_exact() -> None:
    p = Problem((10**14, 10**14, 1), 10**28 + 1, rules=TZ)
    assert check("<answer>100000000000000 * 100000000000000 + 1</answer>", p).correct


# ---- regression tests for bugs reported in other verifiers ----------------------------------------------


def test_regression_duplicates_rejected() -> None:
    p = Problem((3, 5, 7), 15, rules=TZ)
    assert check("<answer>5 * 3</answer>", p).reason == "unused_numbers"
    assert check("<answer>5 + 5 + 5</answer>", p).reason == "number_reused"
    assert check("<answer>3 * 5 + 7 - 7</answer>", p).reason == "number_reused"
    q = Problem((5, 5, 7), 17, rules=TZ)
    assert check("<answer>5 + 5 + 7</answer>", q).correct


def test_regression_foreign_numbers_rejected() -> None:
    p = Problem((3, 5, 7), 15, rules=TZ)
    assert check("<answer>3 * 5 + 7 - 7 + 0</answer>", p).reason in ("number_reused", "foreign_number")
    assert check("<answer>3 * 5 * 1 + 7 - 7</answer>", p).reason in ("number_reused", "foreign_number")
    assert check("<answer>(3 + 5 + 7) * 1</answer>", p).reason == "foreign_number"
    assert check("<answer>2 * 7 + 1</answer>", p).reason == "foreign_number"


def test_regression_no_integer_truncation() -> None:
    # 15 / 2 = 7.5: a truncating verifier would accept it for target 7
    p = Problem((15, 2), 7, rules=TZ)
    v = check("<answer>15 / 2</answer>", p)
    assert v.reason == "wrong_value" and v.value == Fraction(15, 2)
    assert check("<answer>15 / 2</answer>", Problem((15, 2), 7)).reason == "non_integer_result"
    # rational intermediates are exact, not floats: (1/3)*3 == 1 exactly
    q = Problem((1, 3, 3), 1, rules=TZ)
    assert check("<answer>1 / 3 * 3</answer>", q).correct
    r = Problem((10, 3, 3), 10, rules=TZ)
    assert check("<answer>10 / 3 * 3</answer>", r).correct
    # a value within 1e-6 of the target is still wrong
    s = Problem((1000001, 1000000, 1), 1, rules=TZ)
    assert check("<answer>1000001 / 1000000 * 1</answer>", s).reason == "wrong_value"


# ---- the expression module ----------------------------------------------------------------------------


def test_expression_module_api() -> None:
    assert evaluate_expression("(6-2)*(5-3)") == 8
    assert evaluate_expression("7/2*2", TZ) == 7
    parsed = parse_expression("1 + 2 * 3 = 7")
    assert parsed.rpn == (1, 2, 3, "*", "+") and parsed.claimed == 7 and parsed.numbers == (1, 2, 3)
    assert parse_expression("(1 + 2) * 3").rpn == (1, 2, "+", 3, "*")
    assert parse_expression("8 - 3 - 2").rpn == (8, 3, "-", 2, "-")
    assert parse_expression("8 / 4 / 2").rpn == (8, 4, "/", 2, "/")
    with pytest.raises(ExpressionError) as e:
        evaluate_expression("7/2")
    assert e.value.reason == "non_integer_result"
    assert [k for k, _, _ in tokenize("(1×2)")] == ["(", "num", "op", "num", ")"]


def test_extract_answer() -> None:
    ex = extract_answer("a <answer>1+2</answer> b")
    assert (ex.answer_format, ex.text) == ("answer_tag", "1+2")
    ex = extract_answer("x\n1+2\n")
    assert (ex.answer_format, ex.text) == ("plain", "1+2")


# ---- property tests ----------------------------------------------------------------------------------

_PROBLEMS = generate("longproc-0.5k", 40, seed=11) + generate("tinyzero", 20, seed=11)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_PROBLEMS), st.data())
def test_property_every_solver_solution_verifies(problem: Problem, data: st.DataObject) -> None:
    solutions = solve(problem, limit=50)
    assert solutions
    expr = data.draw(st.sampled_from(solutions))
    assert verify(problem, f"<answer>{expr}</answer>").correct
    assert verify(problem, f"thinking...\n{expr}").correct


def _mutations(expr: str) -> list[str]:
    """Every one-token mutation: change a number or an operator, delete or duplicate a number."""
    toks = [t for _, t, _ in tokenize(expr)]
    out = []
    for i, t in enumerate(toks):
        if t.isdigit():
            v = int(t)
            for nv in {v + 1, max(v - 1, 0), v * 2, 1, 100}:
                if nv != v:
                    out.append(toks[:i] + [str(nv)] + toks[i + 1 :])
        elif t in "+-*/":
            for o in "+-*/":
                if o != t:
                    out.append(toks[:i] + [o] + toks[i + 1 :])
    return [" ".join(m) for m in out]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_PROBLEMS), st.data())
def test_property_value_or_multiset_changing_mutation_rejected(problem: Problem, data: st.DataObject) -> None:
    expr = data.draw(st.sampled_from(solve(problem, limit=20)))
    rules = problem.rules
    original = sorted(problem.numbers)
    for mutated in _mutations(expr):
        parsed = parse_expression(mutated)
        try:
            value = evaluate_expression(mutated, rules)
        except ExpressionError:
            value = None
        v = verify(problem, f"<answer>{mutated}</answer>")
        if sorted(parsed.numbers) != original or value != problem.target:
            assert not v.correct, (problem, expr, mutated, v)
        else:
            assert v.correct, (problem, expr, mutated, v)


_ALPHABET = st.sampled_from(list("0123456789+-*/()= \n×÷−.^x<>") + ["<answer>", "</answer>", "<Solution>", "</Solution>", "**", "21", "16", "17", "26", "٣", "２"])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_ALPHABET, max_size=60).map("".join)))
def test_property_never_raises_on_any_text(text: str) -> None:
    for problem in (P, Problem((21, 16, 17, 26), 46, rules=TZ)):
        v = check(text, problem)
        if v.correct:  # anything accepted really solves the puzzle
            assert v.value == problem.target and sorted(v.numbers_used) == sorted(problem.numbers)


def test_one_line_rule_for_plain_answers_and_solution_blocks() -> None:
    p = Problem((21, 16, 17, 26), 46)
    # str.splitlines everywhere: U+2028 ends a line in a plain answer as it does in a <Solution> block
    assert verify(p, "I think 21 + 16\u2028(21 + 16) + (26 - 17)").correct
    assert verify(p, "<Solution>\n21 + 16 = 37\u202826 - 17 = 9\n37 + 9 = 46\n</Solution>").correct


@pytest.mark.parametrize("rules", ["tinyzero", 0])
def test_evaluate_expression_names_rules_that_are_no_rules(rules):
    with pytest.raises(TypeError, match="rules must be a Rules or None"):  # was an AttributeError; 0 read as the default
        evaluate_expression("1+2", rules)


@pytest.mark.parametrize("text", [b"1+2", None, 12])
def test_parse_expression_names_text_that_is_no_str(text):
    with pytest.raises(TypeError, match="an expression must be a str, got"):  # was re's or len()'s TypeError
        parse_expression(text)


def test_extract_answer_never_raises_on_a_completion_that_is_no_str():
    assert extract_answer(None).reason == extract_answer({"a": 1}).reason == "invalid_input"  # was AttributeError
    assert extract_answer(b"<answer>1+2</answer>").text == "1+2"  # was TypeError, as verify() reads bytes


def test_a_game_whose_own_numbers_need_more_than_15_digits_can_write_them() -> None:
    """Past 15 digits a literal is refused, unless the problem's target or the values its moves reach are longer."""
    problem = Problem((10**14, 10**14), 10**28, Rules.preset("classic"))
    assert verify(problem, f"<answer>100000000000000 * 100000000000000 = {10**28}</answer>").correct
    assert verify(problem, f"<Solution>\n100000000000000 * 100000000000000 = {10**28}\n</Solution>").correct
    assert verify(problem, "<answer>100000000000000 * 100000000000000 = " + "1" * 40 + "</answer>").reason == "number_too_large"
    shipped = [p for preset in ("longproc-0.5k", "tinyzero", "hard") for split in ("train", "validation", "test")
               for p in load_split(preset, split)]
    assert {p.literal_digits for p in shipped} == {15}  # every shipped problem: as before


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_solver_path_wins_in_every_judge_under_any_rules_and_number_size(data) -> None:
    """verify (a <Solution> block, an <answer> with '= target'), the turn game and the line checker all accept the
    solver's path, numbers of up to 15 digits included (a 16-digit result was refused by all four)."""
    rules = Rules(integer_only=data.draw(st.booleans()), sign=data.draw(st.sampled_from(["positive", "nonnegative", "any"])),
                  value_limit=data.draw(st.sampled_from([None, 2000, 10**20])), use_all=data.draw(st.booleans()))
    scale = data.draw(st.sampled_from([100, 10**8, 10**15 - 1]))
    numbers = tuple(data.draw(st.lists(st.integers(1, scale), min_size=2, max_size=4)))
    state, target = numbers, None
    for _ in range(len(numbers) - 1 if rules.use_all else data.draw(st.integers(1, len(numbers) - 1))):
        moves = list(legal_moves(state, rules))
        if not moves:
            return
        i, j, move = data.draw(st.sampled_from(moves))
        state, target = apply_move(state, i, j, move[3]), move[3]
    if not isinstance(target, int) or rules.is_won(numbers, target):
        return
    problem = Problem(numbers, target, rules)
    path = solution_path(numbers, target, rules)
    block = "".join(format_equation(*m) + "\n" for m in path)
    assert verify(problem, f"<Solution>\n{block}</Solution>").correct
    assert verify(problem, f"<answer>{solve(problem, limit=1)[0]} = {target}</answer>").correct
    game, checker = TurnEpisode(problem, max_turns=len(path)), LineChecker(problem)
    results = [game.play(format_move(a, op, b)) for a, op, b, _ in path]
    assert results[-1].terminated and results[-1].reward == 1.0, [r.reply for r in results]
    assert all(checker.check(format_equation(*m))[0].valid for m in path)
