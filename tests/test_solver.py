"""The solver (oracle): solutions verify, reachability agrees with brute force, caching."""

from __future__ import annotations

import random
from fractions import Fraction
from functools import cache

import pytest

from countdown_gym import Problem, Rules, generate, legal_moves, verify
from countdown_gym.game.solver import (
    apply_move,
    canonical,
    clear_cache,
    count_solutions,
    is_solvable,
    reachable,
    reachable_values,
    solution_path,
    solve,
    successors,
)

RULES = {
    "longproc": Rules.longproc(),
    "tinyzero": Rules.tinyzero(),
    "classic": Rules.classic(),
    "longproc_positive": Rules.longproc_positive(),
    "any_int": Rules.longproc().replace(sign="any", value_limit=None),
    "low_limit": Rules.longproc().replace(value_limit=40),
    "rational_positive": Rules.tinyzero().replace(sign="positive", value_limit=100),
    "rational_subset": Rules.tinyzero().replace(use_all=False, sign="nonnegative"),
    "any_subset_limit": Rules.longproc().replace(sign="any", value_limit=30, use_all=False),
}


# ---- a brute-force reference: play every legal move -------------------------------------------------


@cache
def brute_reachable(state: tuple, target, rules: Rules) -> bool:
    if rules.use_all:
        if len(state) == 1:
            return state[0] == target
    elif target in state:
        return True
    return any(brute_reachable(canonical(nxt), target, rules) for _, nxt in successors(state, rules))


@cache
def brute_values(state: tuple, rules: Rules) -> frozenset:
    out = set(state) if len(state) == 1 or not rules.use_all else set()
    for _, nxt in successors(state, rules):
        out |= brute_values(canonical(nxt), rules)
    return frozenset(out)


def _random_state(rng: random.Random, rules: Rules) -> tuple:
    k = rng.randint(1, 4)
    nums = []
    for _ in range(k):
        if not rules.integer_only and rng.random() < 0.15:
            nums.append(Fraction(rng.randint(1, 9), rng.randint(2, 4)))
        else:
            nums.append(rng.randint(0, 12))
    return tuple(nums)


@pytest.mark.parametrize("name", sorted(RULES))
def test_reachable_agrees_with_brute_force(name: str) -> None:
    rules = RULES[name]
    rng = random.Random(name)
    clear_cache()
    for _ in range(25 if rules.integer_only else 8):
        state = _random_state(rng, rules)
        values = brute_values(canonical(state), rules)
        assert reachable_values(state, rules) == values, state
        targets = list(range(-5, 45)) + [Fraction(1, 2), Fraction(-7, 3)] + sorted(values, key=float)[:5]
        for t in targets:
            assert reachable(state, t, rules) == brute_reachable(canonical(state), t, rules), (state, t)


def test_is_solvable_on_random_four_number_problems() -> None:
    rng = random.Random(4)
    rules = Rules.longproc()
    for _ in range(60):
        nums = tuple(rng.randint(1, 49) for _ in range(4))
        t = rng.randint(10, 50)
        assert is_solvable(nums, t) == brute_reachable(canonical(nums), t, rules)


def test_fraction_states_under_integer_rules_follow_rules_check() -> None:
    # not produced by integer problems, but reachable() must still mirror Rules.check
    rules = Rules.longproc()
    for state, t in [((Fraction(1, 2), 3), Fraction(7, 2)), ((Fraction(1, 2), Fraction(3, 2)), 2), ((Fraction(3, 2), 3), 2)]:
        assert reachable(state, t, rules) == brute_reachable(canonical(state), t, rules)


def test_edge_cases() -> None:
    assert not reachable([], 5)
    assert reachable([5], 5) and not reachable([5], 6)
    assert reachable([5000], 5000)  # nothing to play: no move, no limit check
    assert reachable((Fraction(7, 2), 2), 7, Rules.tinyzero())
    assert reachable([1, 2, 3, 4], 24)
    assert not reachable([1, 1, 1, 1], 24)
    assert reachable([3, 100], 100, Rules.classic())  # target already present
    assert is_solvable((21, 16, 17, 26), 46)
    assert is_solvable((4, 4), 0)  # LongProc keeps a 0
    assert not is_solvable((4, 4), 0, Rules.longproc_positive())
    assert is_solvable((0, 7, 9), 0)


# ---- solutions ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["longproc-0.5k", "tinyzero"])
def test_solutions_verify_and_are_distinct(preset: str) -> None:
    for p in generate(preset, 15, seed=21):
        sols = solve(p)
        assert sols and len(sols) == len(set(sols))
        for s in sols:
            v = verify(p, f"<answer>{s}</answer>")
            assert v.correct, (p, s, v)


def test_solve_classic_rules_subset_answers_verify() -> None:
    p = Problem((25, 50, 75, 100, 3, 6), 952, rules=Rules.classic())
    sols = solve(p, limit=5)
    assert len(sols) == 5
    for s in sols:
        assert verify(p, s).correct, s


def test_solve_limit_and_count() -> None:
    p = Problem((21, 16, 17, 26), 46)
    all_sols = solve(p)
    assert solve(p, limit=1) == all_sols[:1]
    assert count_solutions(p) == len(all_sols)
    assert count_solutions(p, cap=2) == min(2, len(all_sols))
    with pytest.raises(ValueError, match="limit"):
        solve(p, limit=0)
    for bad in (1.5, "2", True):
        with pytest.raises(ValueError, match="limit must be a positive int"):
            solve(p, limit=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a Problem"):
        solve(((6, 2, 5, 3), 8))  # type: ignore[arg-type]
    assert solve(Problem((1, 1, 1, 1), 24)) == []


def test_solve_canonical_forms() -> None:
    sols = solve(Problem((6, 2, 5, 3), 8))
    assert "(6-2)*(5-3)" in sols or "(5-3)*(6-2)" in sols
    assert all(" " not in s for s in sols)


def test_solve_one_string_per_tree() -> None:
    # (a, b) and (b, a) under + or * used to give two strings for one tree: 4*9*(1*8) and 1*8*(4*9)
    sols = solve(Problem((4, 1, 8, 9), 288))
    assert not ("4*9*(1*8)" in sols and "1*8*(4*9)" in sols)
    sols = solve(Problem((1, 8, 2, 2), 13, rules=Rules.tinyzero()))
    assert not ("1+2+(2+8)" in sols and "2+8+(1+2)" in sols)
    assert count_solutions(Problem((4, 1, 8, 9), 288)) == len(solve(Problem((4, 1, 8, 9), 288)))


def test_solution_path() -> None:
    rules = Rules.longproc()
    for p in generate("longproc-0.5k", 10, seed=2):
        path = solution_path(p.numbers, p.target)
        assert path is not None
        state = list(p.numbers)
        for a, op, b, r in path:
            assert rules.apply(a, op, b) == r
            state.remove(a)
            state.remove(b)
            state.append(r)
        assert state == [p.target]
    assert solution_path((1, 1, 1, 1), 24) is None


def test_legal_moves_and_solution_path_of_numpy_numbers() -> None:
    """reachable() takes numpy ints; legal_moves passed them on to the moves, so under rational rules a Fraction
    built of numpy ints failed to hash (TypeError from fractions) and under integer rules the moves held np.int64."""
    np = pytest.importorskip("numpy")
    assert {m[3] for _, _, m in legal_moves(np.array([3, 5]), Rules.tinyzero())} == {8, 15, -2, 2, Fraction(3, 5),
                                                                                   Fraction(5, 3)}
    path = solution_path(np.array([3, 5, 7]), 2, Rules.tinyzero())
    assert path is not None and all(type(x) in (int, Fraction) for a, _, b, r in path for x in (a, b, r))
    assert verify(Problem((3, 5, 7), 2, Rules.tinyzero()), "<Solution>\n" + "\n".join(
        f"{a} {op} {b} = {r}" for a, op, b, r in path) + "\n</Solution>").correct


def test_legal_moves_and_successors() -> None:
    moves = list(legal_moves((6, 3), Rules.longproc()))
    assert [m for _, _, m in moves] == [(6, "+", 3, 9), (6, "*", 3, 18), (6, "-", 3, 3), (6, "/", 3, 2)]
    moves = list(legal_moves((3, 6), Rules.longproc()))
    assert [(i, j) for i, j, _ in moves] == [(0, 1), (0, 1), (1, 0), (1, 0)]
    assert apply_move((1, 2, 3, 4), 0, 2, 4) == (2, 4, 4)
    nxt = dict(successors((2, 3), Rules.tinyzero()))
    assert nxt[(2, "/", 3, Fraction(2, 3))] == (Fraction(2, 3),)
    assert len(nxt) == 6  # + * and both orders of - and /


def test_reachable_values_refuses_a_float_as_reachable_does() -> None:
    """reachable_values read 0.1 as its exact binary fraction (3602879701896397/36028797018963968) where reachable
    refuses a float; both now take ints, numpy ints and Fractions only."""
    for ask in (lambda s: reachable_values(s), lambda s: reachable(s, 1)):
        with pytest.raises(TypeError):
            ask((0.1, 2))
    assert reachable_values((Fraction(1, 2), 2), RULES["tinyzero"]) >= {Fraction(5, 2), 4, 1}


def test_the_solver_refuses_a_bool_or_a_float_as_a_number() -> None:
    """reachable([True, 2], 3) read True as 1 (True), reachable([1.5, 2], 3) raised 'float' object cannot be
    interpreted as an integer; both now name the bad number, as Rules.check does (numpy ints stay welcome)."""
    import numpy as np

    from countdown_gym.game.solver import legal_moves, reachable_values

    for call in (lambda: reachable([True, 2], 3), lambda: reachable([1, 2], True), lambda: reachable([1.5, 2], 3),
                 lambda: list(legal_moves([True, 2], Rules.longproc())), lambda: reachable_values([2.0, 2])):
        with pytest.raises(TypeError, match="a Countdown number must be an int or a Fraction, got (bool|float)"):
            call()
    assert reachable(np.array([1, 2]), np.int64(3)) and reachable_values([np.int64(2), 2]) >= {4, 0, 1}


@pytest.mark.parametrize("timeout", ["1", [1], True, 1j])
def test_a_timeout_that_is_no_number_is_named(timeout):
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0 or None"):  # was Python's TypeError
        reachable([3, 4, 5], 12, timeout=timeout)


def test_a_timeout_past_float_range_is_no_limit():
    assert reachable([3, 4, 5], 12, timeout=10**400) and is_solvable([3, 4], 12, timeout=10**400)  # was OverflowError


@pytest.mark.parametrize("rules", [None, "tinyzero"])
def test_legal_moves_names_rules_that_are_no_rules(rules):
    with pytest.raises(TypeError, match="legal_moves.. needs rules, a Rules"):  # was an AttributeError
        list(legal_moves([1, 2, 3], rules))


@pytest.mark.parametrize("call", [lambda r: reachable([1, 2], 3, r), lambda r: reachable_values([1, 2], r),
                                  lambda r: solution_path([1, 2], 3, r)])
def test_unhashable_rules_are_named(call):
    with pytest.raises(TypeError, match="rules must be a Rules or None, got dict"):  # was "unhashable type: 'dict'"
        call({"name": "tinyzero"})


def test_count_solutions_names_its_own_bad_cap():
    with pytest.raises(ValueError, match="cap must be a positive int or None, got int 0"):  # was "limit must be ..."
        count_solutions(Problem((1, 2, 3), 6), cap=0)


def test_reachable_values_refuses_a_non_number_as_reachable_does() -> None:
    """[1, 'x'] raised sorted()'s "'<' not supported between instances of 'str' and 'int'"."""
    import numpy as np

    from countdown_gym.game.solver import reachable_values

    with pytest.raises(TypeError, match="a Countdown number must be an int or a Fraction, got str 'x'"):
        reachable_values([1, "x"])
    assert reachable_values([np.int64(3), 2]) == reachable_values([2, 3])
