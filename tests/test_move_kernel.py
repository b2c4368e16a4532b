"""The batched move kernel (``countdown_gym.envs.move_kernel``) and ``Rules.result_range`` against ``Rules.check``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from rule_variants import RULE_VARIANTS

from countdown_gym.envs.actions import action_table, move_results
from countdown_gym.envs.move_kernel import apply_moves, batch_moves, in_range, pair_slots
from countdown_gym.game.rules import OPERATORS, Rules

RULES = RULE_VARIANTS


RATIONAL = [
    Rules.tinyzero(),
    Rules(name="rational_positive", integer_only=False, sign="positive", value_limit=10),
    Rules(name="rational_nonnegative", integer_only=False, sign="nonnegative", value_limit=None),
]


@pytest.mark.parametrize("rules", [*RULES, *RATIONAL], ids=lambda r: r.name)
def test_result_range_agrees_with_check(rules: Rules) -> None:
    lo, hi = rules.result_range()
    for r in range(-30, 2100):
        assert (lo <= r < hi) == (rules.check(r, "+", 0)[0] is not None), r
    if not rules.integer_only:
        for p in range(-40, 80):
            for q in (2, 3, 7):  # in lowest terms with q > 1: p decides the sign
                value = Fraction(p, q)
                if value.denominator == 1:
                    continue
                ok = rules.check(value, "+", 0)[0] is not None
                assert ok == (lo <= value.numerator and value < hi), value


@pytest.mark.parametrize("rules", RULES, ids=lambda r: r.name)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_batch_moves_match_move_results(rules: Rules, dtype: type) -> None:
    rng = np.random.default_rng(0)
    low = -6 if rules.sign == "any" else 0
    for m in (2, 3, 4, 6):
        counts = rng.integers(1, m + 1, size=200)
        vals = np.zeros((200, m), dtype=dtype)
        for k, c in enumerate(counts):
            vals[k, :c] = rng.integers(low, 70, size=c)
        res, legal = batch_moves(vals, counts, rules, results=True)
        assert np.array_equal(batch_moves(vals, counts, rules), legal)
        for k, c in enumerate(counts):
            expected = move_results(tuple(int(v) for v in vals[k, :c]), rules, m)
            assert legal[k].tolist() == [r is not None for r in expected]
            assert all(r is None or r == v for r, v in zip(expected, res[k].tolist(), strict=True))


def test_batch_moves_keep_leading_dimensions_and_apply_moves_agrees() -> None:
    rules = Rules.longproc()
    vals = np.array([[[6, 2, 5, 3], [7, 0, 1, 0]]], dtype=np.int64)
    counts = np.array([[4, 2]])
    res, legal = batch_moves(vals, counts, rules, results=True)
    assert res.shape == legal.shape == (1, 2, 48)
    first, second, ops = action_table(4)
    pi, pj = pair_slots(4)
    assert pi.tolist() == list(first[:: len(OPERATORS)]) and pj.tolist() == list(second[:: len(OPERATORS)])
    a = np.arange(48)
    x, y = vals[0, 0][list(first)], vals[0, 0][list(second)]
    op = np.array([OPERATORS.index(o) for o in ops])
    ok = legal[0, 0]
    assert np.array_equal(apply_moves(x, op, y)[ok], res[0, 0][ok])
    assert not legal[0, 1][a >= 4 * 2].any()  # moves on empty slots


def test_in_range_near_the_dtype_limits() -> None:
    r = np.array([np.iinfo(np.int32).min, -1, 0, 1, 1999, 2000, np.iinfo(np.int32).max], dtype=np.int32)
    assert in_range(r, Rules.longproc()).tolist() == [False, False, True, True, True, False, False]
    assert in_range(r, Rules.longproc_positive()).tolist() == [False, False, False, True, True, False, False]
    assert in_range(r, Rules(name="big", value_limit=2**40)).tolist() == [False, False, True, True, True, True, True]
    with pytest.raises(ValueError, match="integer_only"):
        batch_moves(np.zeros((1, 3), dtype=np.int64), np.array([3]), Rules.tinyzero())


def test_batch_moves_refuses_non_integer_states() -> None:  # a state 6.5 under integer rules: no silent mask
    for vals in (np.array([[6.5, 2.0, 0.0]]), [[6, 2, 0]]):
        for results in (False, True):
            with pytest.raises(TypeError, match="vals must be an int array"):
                batch_moves(vals, np.array([2]), Rules.longproc(), results=results)
