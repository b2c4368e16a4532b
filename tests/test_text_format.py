"""The reasoning-line grammar (countdown_gym.game.line_grammar) and the text forms and prompts of countdown_gym.game.text_format."""

from fractions import Fraction

import pytest

from countdown_gym import Problem, Rules, dfs_trace, generate
from countdown_gym.game.line_grammar import LINE_KINDS, TRY_OUTCOMES, parse_line, parse_number, parse_number_list
from countdown_gym.game.text_format import (
    CHARSET,
    PROMPT_STYLES,
    REPLACEMENT_CHAR,
    build_prompt,
    compact_prompt,
    default_example,
    describe_rules,
    format_compact_line,
    format_equation,
    longproc_prompt,
    sanitize,
    tinyzero_prompt,
)

P = Problem((21, 16, 17, 26), 46)


@pytest.mark.parametrize(
    "token, value",
    [("37", 37), ("0", 0), ("-3", -3), ("0.5", Fraction(1, 2)), ("3/2", Fraction(3, 2)), ("(3/2)", Fraction(3, 2)), ("(-7)", -7), ("6/3", 2), ("4.6", Fraction(23, 5))],
)
def test_parse_number(token, value):
    got = parse_number(token)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("token", ["", "x", "3/0", "1e5", "--3", "3 / 2", "04", "-04", "(07)", "3/04", "00", "01.5", "1" * 16])
def test_parse_number_rejects(token):
    with pytest.raises(ValueError):
        parse_number(token)


def test_parse_number_list():
    assert parse_number_list("76, 3, 17") == (76, 3, 17)
    assert parse_number_list("") == ()
    assert parse_number_list("1,-2, 3/4") == (1, -2, Fraction(3, 4))


def test_longproc_lines():
    p = parse_line(
        "Initial number set: [21, 16, 17, 26], target: 46. Options for choosing two numbers: [(21, 16), (21, 17)]."
    )
    assert (p.kind, p.numbers, p.target, p.options) == ("initial", (21, 16, 17, 26), 46, ((21, 16), (21, 17)))
    p = parse_line(" |- Pick two numbers (21, 16) (numbers left: [17, 26]). Try possible operations.")
    assert (p.kind, p.indent, p.a, p.b, p.numbers) == ("pick", 1, 21, 16, (17, 26))
    p = parse_line(
        "  |- Try 21 + 16 = 37. Add 37 to the number set. Current number set: [37, 17, 26], target: 46. "
        "Options for choosing two numbers: [(37, 17), (37, 26), (17, 26)]."
    )
    assert (p.kind, p.indent, p.a, p.op, p.b, p.c, p.outcome, p.added) == ("try", 2, 21, "+", 16, 37, "add", 37)
    assert p.numbers == (37, 17, 26) and p.target == 46 and len(p.options) == 3
    p = parse_line("     |- Try 54 + 26 = 80. Evaluate 80 != 46, drop this branch.")
    assert (p.outcome, p.evaluated, p.target, p.indent) == ("missed", 80, 46, 5)
    p = parse_line("     |- Try 20 + 26 = 46. Evaluate 46 == 46, target found!")
    assert p.outcome == "found"
    assert parse_line("  |- Try 79 / 17 = 4.6. 4.6 is a decimal, drop this branch.").c == Fraction(23, 5)
    assert parse_line("  |- Try 79 / 17 = 4.6. 4.6 is a decimal, drop this branch.").outcome == "decimal"
    assert parse_line("  |- Try 228 * 17 = 3876. 3876 exceeds the maximum intermediate result, drop this branch.").outcome == "exceeds"
    assert parse_line("  |- Try 5 - 5 = 0. 0 is not positive, drop this branch.").outcome == "not_positive"
    p = parse_line("  |- Try 5 / 0 (invalid operation). drop this branch.")
    assert (p.outcome, p.c) == ("invalid_op", None)
    assert parse_line("  |- Try 5 + 3 = 8.").outcome == "bare"
    p = parse_line("     |- Try 46 - 153 = -107. Evaluate -107 != 75, drop this branch.")
    assert (p.a, p.b, p.c, p.evaluated) == (46, 153, -107, -107)
    p = parse_line("     |- Try 153 / 46 = 153/46. Evaluate 153/46 != 75, drop this branch.")
    assert p.c == Fraction(153, 46) and p.outcome == "missed"


def test_state_annotation_is_split_off():
    p = parse_line("  |- Try 21 + 16 = 37. Add 37 to the number set. ### Current State: [37, 17, 26]")
    assert p.kind == "try" and p.annotation == (37, 17, 26) and p.outcome == "add"
    assert parse_line("# Search Procedure ### Current State: [1, 2]").annotation == (1, 2)


def test_every_dfs_line_is_recognised():
    for problem in generate("longproc-0.5k", 5, seed=4) + generate("tinyzero", 5, seed=4):
        for current_state in (False, True):
            for line in dfs_trace(problem, current_state=current_state).splitlines():
                p = parse_line(line)
                assert p.kind in LINE_KINDS and p.malformed is None
                if "|- Try " in line:
                    assert p.kind == "try" and p.outcome in TRY_OUTCOMES and p.outcome != "bare", line
                if "Pick two" in line:
                    assert p.kind == "pick", line
                if current_state and line.startswith((" ", "Initial")):
                    assert p.annotation is not None, line


@pytest.mark.parametrize(
    "line, kind, move",
    [
        ("21 + 16 = 37", "equation", (21, "+", 16, 37)),
        ("Step 2: 37 - 17 = 20", "equation", (37, "-", 17, 20)),
        ("2. 37 - 17 = 20.", "equation", (37, "-", 17, 20)),
        ("- 37 * 2 = 74", "equation", (37, "*", 2, 74)),
        ("-3 + 5 = 2", "equation", (-3, "+", 5, 2)),
        ("3/2 * 4 = 6", "equation", (Fraction(3, 2), "*", 4, 6)),
        ("Final step: 20 + 26 = 46", "traceback", (20, "+", 26, 46)),
        ("The step before: 37 - 17 = 20", "traceback", (37, "-", 17, 20)),
        ("21+16=37", "compact", (21, "+", 16, 37)),
        ("  37-17=20 [26,20]", "compact", (37, "-", 17, 20)),
        ("5--3=8", "compact", (5, "-", -3, 8)),
        ("(3/2)*4=6 [6]", "compact", (Fraction(3, 2), "*", 4, 6)),
    ],
)
def test_move_lines(line, kind, move):
    p = parse_line(line)
    assert p.kind == kind and (p.a, p.op, p.b, p.c) == move


@pytest.mark.parametrize(
    "line, kind",
    [
        ("", "blank"),
        ("   ", "blank"),
        ("# Search Procedure", "header"),
        ("<Solution>", "solution_open"),
        ("</Solution>", "solution_close"),
        ("<answer> (21 + 16) - 17 + 26 </answer>", "answer"),
        ("<think>", "think"),
        ("Now we have found the target, let's trace back the solution:", "text"),
        ("Let's try 21 + 16 = 37 first", "text"),
        ("21 + 16 = 37 = 40 - 3", "text"),
        ("Step 1: 21+16=37", "text"),
    ],
)
def test_other_lines(line, kind):
    assert parse_line(line).kind == kind


def test_compact_depth_and_state():
    p = parse_line("  37-17=20 [26, 20]")
    assert p.indent == 2 and p.numbers == (26, 20)
    assert parse_line("37-17=20").numbers is None


@pytest.mark.parametrize("line", ["\uff16-2=4", "6-2=\u0664", "6 - 2 = \uff14", "  |- Try \uff16 - 2 = 4. Add 4 to the number set."])
def test_non_ascii_digits_are_not_numbers(line):
    # the verifier rejects look-alike digits (non_ascii_digit); a reasoning line must not read them as a move
    assert parse_line(line).kind not in ("try", "equation", "compact")


def test_bad_numbers_never_raise():
    # a move with an unreadable number is still a move (checked as invalid), not free text
    for line, kind in [("3/0 + 1 = 4", "equation"), ("6-2=04 [5,3,4]", "compact"), ("6 - 2 = 04", "equation"),
                       ("Try 06 - 2 = 4. Add 4 to the number set.", "try"), (f"6-2={'4' * 16}", "compact")]:
        p = parse_line(line)
        assert p.kind == kind and p.malformed and p.a is None, line
    assert parse_line("6-2=4 [5,03,4]").malformed  # a leading zero in a claimed set
    p = parse_line("  |- Try 21 + 16 = 37. Add 37 to the number set. Current number set: [37, x], target: 46.")
    assert p.kind == "try" and p.malformed


def test_writers_round_trip():
    for depth, move, state in [
        (0, (21, "+", 16, 37), (17, 26, 37)),
        (2, (Fraction(3, 2), "*", 4, 6), None),
        (1, (5, "-", 8, -3), (-3, 2)),
        (3, (7, "/", 2, Fraction(7, 2)), (Fraction(7, 2),)),
    ]:
        line = format_compact_line(depth, *move, state=state)
        p = parse_line(line)
        assert p.kind == "compact" and p.indent == depth and (p.a, p.op, p.b, p.c) == move and p.numbers == state
    assert format_compact_line(1, 37, "+", 17, 54, (26, 54)) == " 37+17=54 [26,54]"
    p = parse_line(format_equation(Fraction(3, 2), "*", 4, 6))
    assert (p.kind, p.a, p.c) == ("equation", Fraction(3, 2), 6)
    with pytest.raises(ValueError, match="depth"):
        format_compact_line(-1, 1, "+", 2, 3)


def test_charset_and_sanitize():
    assert "\n" in CHARSET and REPLACEMENT_CHAR in CHARSET and "\u00d7" in CHARSET
    assert len(set(CHARSET)) == len(CHARSET)
    assert sanitize("1 + 2 = 3") == "1 + 2 = 3"
    assert sanitize("a\u4e2db\r") == f"a{REPLACEMENT_CHAR}b{REPLACEMENT_CHAR}"


@pytest.mark.parametrize("style", PROMPT_STYLES)
def test_prompts_use_only_the_charset(style):
    for problem in generate("longproc-0.5k", 3, seed=1) + generate("tinyzero", 3, seed=1):
        prompt = build_prompt(problem, style)
        assert sanitize(prompt) == prompt
        assert str(problem.target) in prompt


def test_longproc_prompt_has_a_checked_example():
    prompt = longproc_prompt(P)
    example = default_example(P.rules, P.key)
    assert example != P
    assert dfs_trace(example) in prompt and prompt.endswith("Numbers: [21, 16, 17, 26]\nTarget: 46\n")
    assert "non-negative integer" in prompt and "2000" in prompt
    annotated = longproc_prompt(P, current_state=True)
    assert "### Current State" in annotated and "### Current State" not in prompt
    mine = Problem((10, 4, 3, 2), 19)
    assert dfs_trace(mine) in longproc_prompt(P, example=mine)
    tz = generate("tinyzero", 1, seed=0)[0]
    assert dfs_trace(default_example(tz.rules, tz.key), tz.rules) in longproc_prompt(tz)


def test_tinyzero_and_compact_prompts():
    t = tinyzero_prompt(P)
    assert "Using the numbers [21, 16, 17, 26], create an equation that equals 46" in t and t.endswith("<think>")
    assert compact_prompt(P) == "Numbers: [21,16,17,26] Target: 46\n"


def test_describe_rules():
    assert "a non-negative integer and less than 2000" in describe_rules(Rules.longproc())
    assert "a positive integer and less than 2000" in describe_rules(Rules.longproc_positive())
    assert describe_rules(Rules.tinyzero()).endswith(
        "; intermediate results may be any number (negative numbers and fractions are allowed).")
    assert "must be any number" not in describe_rules(Rules.tinyzero())
    limited = Rules(name="x", integer_only=False, sign="any", value_limit=500)
    assert "every intermediate result must be less than 500 (negative numbers and fractions are allowed)" in \
        describe_rules(limited)
    assert "at most once" in describe_rules(Rules.classic())


def test_build_prompt_errors():
    with pytest.raises(ValueError, match="unknown prompt style"):
        build_prompt(P, "chat")
    with pytest.raises(TypeError, match="Problem"):
        build_prompt((1, 2), "compact")
    with pytest.raises(TypeError, match="no options"):
        build_prompt(P, "tinyzero", current_state=True)


def test_a_compact_operand_past_strs_digit_limit_is_written_as_the_placeholder() -> None:
    """compact_number used str() alone: format_move(10**5000, '+', 2) and a compact line raised Python's digit limit."""
    from countdown_gym.game.text_format import format_compact_line
    from countdown_gym.game.turn_format import format_move

    assert format_move(10**5000, "+", 2).startswith("<a number of over")
    assert "<a number of over" in format_compact_line(0, 10**5000, "+", 2, 10**5000 + 2)



def _refusals():
    from countdown_gym.game.turn_format import format_move, turn_prompt

    p = Problem((1, 2), 3)
    return [parse_number, lambda v: parse_number("1/0" + " " * len(v)), lambda v: build_prompt(p, v),
            lambda v: build_prompt(p, "tinyzero", **{v: 1}), lambda v: format_compact_line(v, 1, "+", 2, 3),
            lambda v: format_move(1, v, 2), lambda v: turn_prompt(p, v)]


@pytest.mark.parametrize("refuse", _refusals())
def test_a_refusal_quotes_a_bounded_piece_of_the_value(refuse) -> None:
    """A 1 MB token, operator, prompt style, option or depth was quoted whole (a 1 MB message)."""
    with pytest.raises((ValueError, TypeError)) as err:
        refuse("x" * 1_000_000)
    assert len(str(err.value)) < 300
