"""Rules: presets, validation, and the legality of single moves."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from countdown_gym import OPERATORS, Rules
from countdown_gym.game.rules import format_number, normalize


def test_presets() -> None:
    lp = Rules.longproc()
    assert (lp.name, lp.integer_only, lp.sign, lp.value_limit, lp.use_all) == ("longproc", True, "nonnegative", 2000, True)
    assert Rules() == lp
    pos = Rules.longproc_positive()
    assert (pos.name, pos.integer_only, pos.sign, pos.value_limit, pos.use_all) == ("longproc_positive", True, "positive", 2000, True)
    tz = Rules.tinyzero()
    assert (tz.integer_only, tz.sign, tz.value_limit, tz.use_all) == (False, "any", None, True)
    cl = Rules.classic()
    assert (cl.integer_only, cl.sign, cl.value_limit, cl.use_all) == (True, "positive", None, False)
    for name in ("longproc", "longproc_positive", "tinyzero", "classic"):
        assert Rules.preset(name).name == name
    with pytest.raises(ValueError, match="unknown rules preset"):
        Rules.preset("nope")
    assert OPERATORS == ("+", "-", "*", "/")


def test_validation() -> None:
    with pytest.raises(ValueError, match="sign"):
        Rules(sign="negative")  # type: ignore[arg-type]
    for bad in (0, -5, True, 2.5):
        with pytest.raises(ValueError, match="value_limit"):
            Rules(value_limit=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown Rules fields"):
        Rules.from_dict({"name": "x", "colour": "red"})


@pytest.mark.parametrize("make", [Rules.preset, lambda v: Rules(sign=v), lambda v: Rules(value_limit=v),
                                  lambda v: Rules.from_dict({v: 1, 2: 3})])
def test_a_refusal_quotes_a_bounded_piece_of_the_value(make) -> None:
    """A 1 MB preset name or sign was quoted whole (a 1 MB message, through verl's compute_score too); mixed-type
    unknown fields raised sorted()'s TypeError."""
    with pytest.raises(ValueError) as err:
        make("x" * 1_000_000)
    assert len(str(err.value)) < 300


def test_a_numpy_array_is_no_sign_or_preset_name() -> None:
    """np.array(['any']) (a parquet list cell) was kept as Rules.sign (unhashable, not JSON); a longer array raised
    numpy's 'truth value ... is ambiguous'; Rules.preset raised getattr's TypeError."""
    for bad in (np.array(["any"]), np.array(["any", "any"])):
        with pytest.raises(ValueError, match="Rules.sign must be"):
            Rules(sign=bad)
        with pytest.raises(ValueError, match="unknown rules preset"):
            Rules.preset(bad)
    assert Rules(sign=np.str_("any")).sign == "any"


def test_value_object() -> None:
    r = Rules.longproc()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.sign = "any"  # type: ignore[misc]
    assert hash(r) == hash(Rules.longproc())
    assert r.replace(value_limit=None) == Rules(value_limit=None)
    for preset in (Rules.longproc(), Rules.longproc_positive(), Rules.tinyzero(), Rules.classic()):
        assert Rules.from_dict(preset.to_dict()) == preset


def test_legacy_longproc_record_reads_as_the_positive_rules() -> None:
    # records written when "longproc" meant strictly positive intermediates keep that meaning
    from countdown_gym import Problem
    from countdown_gym.game.rules import LEGACY_LONGPROC

    old = {"name": "longproc", "integer_only": True, "sign": "positive", "value_limit": 2000, "use_all": True}
    assert LEGACY_LONGPROC.to_dict() == old
    assert Rules.from_dict(old) == Rules.longproc_positive()
    assert Problem.from_dict({"numbers": [24, 24, 10, 21], "target": 21, "rules": old}).rules == Rules.longproc_positive()
    assert Rules.from_dict({**old, "value_limit": 100}).name == "longproc"  # other custom records stay as written


def test_check_ok_and_types() -> None:
    r = Rules.longproc()
    assert r.check(21, "+", 16) == (37, "ok")
    assert r.check(21, "-", 16) == (5, "ok")
    assert r.check(21, "*", 16) == (336, "ok")
    res, reason = r.check(48, "/", 6)
    assert (res, reason) == (8, "ok") and type(res) is int
    assert r.apply(7, "/", 2) is None


@pytest.mark.parametrize(
    ("rules", "a", "op", "b", "reason"),
    [
        (Rules.longproc(), 7, "/", 0, "division_by_zero"),
        (Rules.tinyzero(), 7, "/", 0, "division_by_zero"),
        (Rules.longproc(), 7, "/", 2, "non_integer_result"),
        (Rules.longproc(), 3, "-", 5, "negative_result"),
        (Rules.longproc_positive(), 5, "-", 5, "zero_result"),
        (Rules.classic(), 5, "-", 5, "zero_result"),
        (Rules.longproc(), 50, "*", 40, "exceeds_limit"),  # exactly 2000 is over (>= limit)
        (Rules.longproc(), 1000, "+", 1000, "exceeds_limit"),
        (Rules.longproc(), 3, "^", 2, "unknown_operator"),
        (Rules.longproc(), 3, "**", 2, "unknown_operator"),
    ],
)
def test_check_reasons(rules: Rules, a: int, op: str, b: int, reason: str) -> None:
    assert rules.check(a, op, b) == (None, reason)


def test_limit_boundary_and_signs() -> None:
    r = Rules.longproc()
    assert r.check(1999, "+", 0) == (1999, "ok")
    assert r.check(5, "-", 5) == (0, "ok")  # LongProc keeps a 0 (its generator writes 24 - 24 = 0)
    assert r.check(0, "*", 7) == (0, "ok") and r.check(0, "/", 7) == (0, "ok")
    assert r.check(7, "/", 0) == (None, "division_by_zero")
    assert r.check(3, "-", 5) == (None, "negative_result")
    assert Rules.longproc_positive().check(5, "-", 5) == (None, "zero_result")
    anysign = r.replace(sign="any")
    assert anysign.check(3, "-", 5) == (-2, "ok")


def test_rational_rules_are_exact() -> None:
    tz = Rules.tinyzero()
    assert tz.check(7, "/", 2) == (Fraction(7, 2), "ok")
    half, _ = tz.check(1, "/", 3)
    whole, _ = tz.check(half, "*", 3)
    assert whole == 1 and type(whole) is int
    assert tz.check(3, "-", 5) == (-2, "ok")
    assert tz.check(10**30, "*", 10**30) == (10**60, "ok")


def test_normalize_and_format() -> None:
    assert normalize(Fraction(6, 3)) == 2 and type(normalize(Fraction(6, 3))) is int
    assert normalize(Fraction(1, 3)) == Fraction(1, 3)
    assert format_number(37) == "37"
    assert format_number(Fraction(7, 2)) == "7/2"
    assert format_number(Fraction(-7, 2)) == "-7/2"
    assert format_number(Fraction(8, 2)) == "4"
    assert format_number(np.int64(5)) == "5"  # was "5/1": numpy ints have a numerator and a denominator too


def test_rules_fields_are_type_checked() -> None:
    # a truthy string must not silently mean True (e.g. rules read from a hand-written config)
    with pytest.raises(TypeError, match="Rules.integer_only must be a bool"):
        Rules(integer_only="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Rules.use_all must be a bool"):
        Rules.from_dict({"use_all": "false"})
    import numpy as np

    assert Rules(integer_only=np.bool_(False)) == Rules(integer_only=False)  # numpy bools are bools
    limited = Rules.from_dict({"value_limit": np.int64(2000)})  # numpy ints are ints (a parquet / pandas column)
    assert limited == Rules() and type(limited.value_limit) is int and limited.to_dict() == Rules().to_dict()
    with pytest.raises(TypeError, match="Rules.name must be a str"):
        Rules(name=3)  # type: ignore[arg-type]
    for bad in (None, 5, [1, 2]):
        with pytest.raises(ValueError, match="needs a dict"):
            Rules.from_dict(bad)  # type: ignore[arg-type]


def test_a_rules_name_is_bounded() -> None:
    """A 10 MB name was accepted, and the verifier quotes it: a 10 MB message for one refused line."""
    from countdown_gym import Problem, verify

    with pytest.raises(ValueError, match=r"Rules.name must have at most 80 characters, got str 'xxx") as info:
        Rules(name="x" * 10**7)
    assert len(str(info.value)) < 200
    p = Problem((1, 2), 3, Rules(name="x" * 80, sign="positive"))
    assert len(verify(p, "1 - 2 = -1").message) < 300


def test_problem_from_dict_errors_name_the_field() -> None:
    from countdown_gym import Problem

    with pytest.raises(ValueError, match="'rules' must be a dict, a preset name or absent"):
        Problem.from_dict({"numbers": [1, 2], "target": 3, "rules": 7})
    with pytest.raises(TypeError, match="Problem.numbers must be a sequence of ints"):
        Problem.from_dict({"numbers": 5, "target": 3})
    for unordered in ({1: "a", 2: "b"}, {1, 2}, frozenset({1, 2})):  # a dict's keys were taken silently
        with pytest.raises(TypeError, match="Problem.numbers must be a sequence of ints"):
            Problem(unordered, 3)  # type: ignore[arg-type]
    assert Problem.from_dict({"numbers": [1, 2], "target": 3}).numbers == (1, 2)


@pytest.mark.parametrize("field, value, message", [
    ("id", [1, 2], "'id' must be a str, an int or absent, got list"),
    ("id", True, "'id' must be a str, an int or absent, got bool"),
    ("preset", 5, "'preset' must be a str or absent, got int"),
    ("num_solutions", "many", "'num_solutions' must be an int >= 0 or None, got str"),
    ("search_nodes", -3, "'search_nodes' must be an int >= 0 or None, got int"),
    pytest.param("id", 10**5000, "'id' must have at most 640 digits", id="huge-id"),  # json.dumps raised later
    pytest.param("search_nodes", 10**5000, "'search_nodes' must have at most 640 digits", id="huge-count"),
])
def test_problem_from_dict_refuses_metadata_of_the_wrong_type(field, value, message) -> None:
    """A problem's metadata loaded whatever it held (an 'id' [1, 2], a 'preset' 5, a 'num_solutions' 'many')."""
    import numpy as np

    from countdown_gym import Problem

    with pytest.raises(ValueError, match=message):
        Problem.from_dict({"numbers": [1, 2], "target": 3, field: value})
    kept = Problem.from_dict({"numbers": [1, 2], "target": 3, "id": 7, "preset": "p", "num_solutions": np.int64(2)})
    assert (kept.id, kept.preset, type(kept.num_solutions)) == (7, "p", int)  # a dataset's own int id stays


def test_problem_numbers_stay_within_the_verifiers_literal_limit() -> None:
    # an answer must be able to write every number, so every solver expression verifies
    from countdown_gym import Problem, solve, verify

    p = Problem((10**15 - 1, 1), 10**15, rules=Rules.longproc().replace(value_limit=None))
    assert verify(p, solve(p)[0]).correct
    with pytest.raises(ValueError, match="at most 15 digits"):
        Problem((10**15, 1), 10**15 + 1)


def test_a_problems_refusal_and_repr_quote_a_bounded_piece_of_its_numbers() -> None:
    """A negative number among 200,000 was refused with all 200,000 quoted; the repr (in the environments' and
    traces' refusals) wrote every number and a 1 MB rules name."""
    from countdown_gym import Problem

    with pytest.raises(ValueError, match=r"non-negative, got int -1$"):
        Problem([3] * 200_000 + [-1], 5)
    assert len(repr(Problem([3] * 200_000, 5, Rules(name="x" * 80)))) < 1500
    assert repr(Problem([3] * 64, 5)) == f"Problem(numbers={(3,) * 64}, target=5, rules=longproc)"  # as before


def test_a_target_or_value_limit_python_cannot_write_is_refused() -> None:
    """A 5,000-digit target or value limit was accepted: Problem's and Rules' repr, every prompt and the envs'
    messages then raised Python's int->str digit-limit ValueError. Now at most 640 digits, which str() always writes."""
    import sys

    from countdown_gym import Problem
    from countdown_gym.game.text_format import build_prompt
    from countdown_gym.game.turn_format import tool_prompt, turn_prompt

    for huge in (10**5000, -(10**5000), 10**640):
        with pytest.raises(ValueError, match=r"Problem.target must have at most 640 digits, got an int of about"):
            Problem((1, 2), huge)
        with pytest.raises(ValueError, match="Problem.target must have at most 640 digits"):
            Problem.from_dict({"numbers": [1, 2], "target": huge})
        with pytest.raises(ValueError, match="Rules.value_limit must have at most 640 digits"):
            Rules(value_limit=huge)
    with pytest.raises(ValueError, match="Rules.value_limit must have at most 640 digits"):
        Rules.from_dict({"value_limit": 10**5000})
    longest = 10**640 - 1
    p = Problem((6, 2), -longest, Rules(sign="any", value_limit=longest))
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # the lowest limit Python allows: every text of the problem is still written
    try:
        texts = [repr(p), repr(p.rules), build_prompt(p, "tinyzero"), turn_prompt(p, "instruct"), tool_prompt(p)]
    finally:
        sys.set_int_max_str_digits(old)
    assert all(str(longest) in t for t in texts)


def test_check_computes_exactly_or_refuses_a_non_number() -> None:
    """Rules.check took numpy ints as they were (np.int64(2**62) * 4 wrapped around to 0 with a warning) and floats
    into its exact arithmetic (1.5 + 2 was (3.5, 'ok'); NaN a ValueError from inside Fraction)."""
    free = Rules(sign="any", value_limit=None)
    assert free.check(np.int64(2**62), "*", np.int64(4)) == (2**64, "ok")
    assert free.legal_results(np.int32(2**30), np.int32(4))[2] == 2**32
    assert Rules.tinyzero().check(np.int64(6), "/", 4) == (Fraction(3, 2), "ok")
    for a in (1.5, 2.0, float("nan"), True, np.bool_(True), "2", None):
        with pytest.raises(TypeError, match="a Countdown number must be an int or a Fraction, got"):
            Rules().check(a, "+", 2)
        with pytest.raises(TypeError, match="a Countdown number must be an int or a Fraction, got"):
            Rules.tinyzero().legal_results(2, a)


def test_problem_errors_describe_a_value_too_long_to_print() -> None:
    from countdown_gym import Problem

    huge = 10**5000  # the messages were Python's int->str digit-limit ValueError, naming nothing
    with pytest.raises(TypeError, match="Problem.numbers must be a sequence of ints, got int <a number of over"):
        Problem.from_dict({"numbers": huge, "target": 3})
    with pytest.raises(ValueError, match="'rules' must be a dict, a preset name or absent, got int <a number of over"):
        Problem.from_dict({"numbers": [1, 2], "target": 3, "rules": huge})
    with pytest.raises(ValueError, match="needs 'numbers' and 'target', got int <a number of over"):
        Problem.from_dict(huge)  # type: ignore[arg-type]
