"""Rules as the one home of move legality and of the win: legal_results, within_bounds, wins, is_won, answer_parts."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from countdown_gym import OPERATORS, Rules

VARIANTS = [
    Rules.longproc(),
    Rules.longproc_positive(),
    Rules.tinyzero(),
    Rules.classic(),
    Rules(name="nonneg500", sign="nonnegative", value_limit=500),
    Rules(name="rational-bounded", integer_only=False, sign="positive", value_limit=50, use_all=False),
]
VALUES = [-7, -1, 0, 1, 2, 3, 6, 7, 24, 499, 500, 1999, 2000, 4001, Fraction(1, 2), Fraction(-3, 2), Fraction(7, 3)]


@pytest.mark.parametrize("rules", VARIANTS, ids=lambda r: r.name)
def test_legal_results_and_within_bounds_agree_with_check(rules: Rules) -> None:
    for x, y in itertools.product(VALUES, repeat=2):
        expected = tuple(rules.check(x, op, y)[0] for op in OPERATORS)
        assert rules.legal_results(x, y) == expected, (x, y)
        for op in OPERATORS:
            r, reason = rules.check(x, op, y)
            if r is not None:
                assert rules.within_bounds(r)
            elif reason in ("negative_result", "zero_result", "exceeds_limit"):
                raw = {"+": x + y, "-": x - y, "*": x * y, "/": Fraction(x) / Fraction(y) if y else None}[op]
                assert not rules.within_bounds(raw), (x, op, y)


def test_wins_and_is_won() -> None:
    lp, cl = Rules.longproc(), Rules.classic()
    assert lp.wins(24, 1, 24) and not lp.wins(24, 2, 24) and not lp.wins(23, 1, 24)
    assert cl.wins(24, 1, 24) and cl.wins(24, 3, 24) and not cl.wins(23, 3, 24)
    assert type(lp.wins(24, 1, 24)) is bool
    assert lp.is_won((24,), 24) and not lp.is_won((24, 1), 24) and not lp.is_won((), 24)
    assert cl.is_won((1, 24), 24) and not cl.is_won((1, 23), 24)
    assert lp.may_leave(0) and not lp.may_leave(1) and cl.may_leave(3)
    # elementwise on numpy arrays (the vector env's batch)
    values, left = np.array([24, 24, 23]), np.array([1, 2, 1])
    assert lp.wins(values, left, 24).tolist() == [True, False, False]
    assert cl.wins(values, left, np.array([24, 24, 24])).tolist() == [True, True, False]


def test_answer_parts() -> None:
    assert list(Rules.longproc().answer_parts((1, 2, 2))) == [(1, 2, 2)]
    parts = list(Rules.classic().answer_parts((1, 2, 2)))
    assert parts == [(1,), (2,), (1, 2), (2, 2), (1, 2, 2)]
