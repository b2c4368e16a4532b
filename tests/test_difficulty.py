"""Difficulty labels of the frozen splits, tiers, and load_split(tier=...)."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

import countdown_gym.data.difficulty as difficulty_mod
from countdown_gym import Problem, Rules, count_solutions, load_split, search_nodes, verify
from countdown_gym.data.difficulty import (
    LABELS_SHA256,
    TIER_THRESHOLDS,
    TIERS,
    Difficulty,
    LabelsIntegrityError,
    difficulty,
    labels_path,
    measure,
    split_labels,
    tier,
    tier_thresholds,
)
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS, tampered_files
from countdown_gym.game.solver import reachable


def _walk_wrong(problem: Problem) -> tuple[int | None, int]:
    """first_wrong_depth and wrong_moves from the reference DFS moves, re-derived from the visit hook."""
    seen: list[tuple[int, bool, bool]] = []
    search_nodes(problem, visit=lambda d, s, n: seen.append((d, reachable(s, problem.target), reachable(n, problem.target))))
    wrong = [d for d, before, after in seen if before and not after]
    return (wrong[0] if wrong else None), len(wrong)


def test_measure_matches_the_solver_and_the_reference_search():
    p = Problem((21, 16, 17, 26), 46)
    d = measure(p)
    assert d.num_solutions == count_solutions(p)
    assert d.search_nodes == search_nodes(p)
    assert (d.first_wrong_depth, d.wrong_moves) == _walk_wrong(p)
    assert verify(p, f"<answer>{d.solution}</answer>").correct
    assert 0 < d.good_first_moves <= d.legal_first_moves


def test_measure_unsolvable_problem():
    d = measure(Problem((1, 1), 7))
    assert d.num_solutions == 0 and d.solution is None and d.first_wrong_depth is None


def test_a_first_path_that_is_right_has_no_wrong_depth():
    d = measure(Problem((3, 4), 7))  # the DFS tries 4 + 3 first
    assert d.search_nodes == 1 and d.first_wrong_depth is None and d.wrong_moves == 0


@pytest.mark.parametrize("preset", sorted(SPLIT_SPEC))
def test_shipped_labels_reproduce(preset):
    problems = load_split(preset, "test")
    labels = split_labels(preset, "test")
    for k in range(0, len(problems), len(problems) // 6):  # a few problems per preset: re-measured
        assert measure(problems[k]) == labels[k]
        assert difficulty(problems[k]) is labels[k]


def test_labels_are_hash_checked_and_splits_untouched(monkeypatch):
    assert tampered_files() == []
    for preset in SPLIT_SPEC:
        for split in SPLITS:
            path = labels_path(preset, split)
            assert hashlib.sha256(path.read_bytes()).hexdigest() == LABELS_SHA256[preset][split]
    monkeypatch.setitem(LABELS_SHA256, "tinyzero", {**LABELS_SHA256["tinyzero"], "test": "0" * 64})
    split_labels.cache_clear()
    try:
        with pytest.raises(LabelsIntegrityError, match="was modified"):
            split_labels("tinyzero", "test")
    finally:
        split_labels.cache_clear()


def test_labels_rows_are_in_split_order():
    rows = [json.loads(line) for line in labels_path("longproc-0.5k", "validation").read_text().splitlines()]
    assert [r["id"] for r in rows] == [p.id for p in load_split("longproc-0.5k", "validation")]


@pytest.mark.parametrize("preset", sorted(SPLIT_SPEC))
def test_tiers_cut_test_splits_into_about_thirds(preset):
    n = len(load_split(preset, "test"))
    sizes = [len(load_split(preset, "test", tier=t)) for t in TIERS]
    assert sum(sizes) == n
    assert all(0.28 * n <= s <= 0.39 * n for s in sizes), sizes
    assert TIER_THRESHOLDS[preset] == tier_thresholds([d.search_nodes for d in split_labels(preset, "test")])


def test_load_split_tier_keeps_split_order_and_tier():
    easy = load_split("longproc-0.5k", "validation", tier="easy")
    everything = load_split("longproc-0.5k", "validation")
    assert easy == [p for p in everything if tier(p) == "easy"]
    lo, _ = TIER_THRESHOLDS["longproc-0.5k"]
    assert all(difficulty(p).search_nodes <= lo for p in easy)
    with pytest.raises(ValueError, match="unknown tier"):
        load_split("longproc-0.5k", "test", tier="trivial")


def test_problems_outside_the_splits_are_measured_once():
    p = Problem((21, 16, 17, 26), 46, id="mine")
    assert difficulty(p) == measure(p)
    assert difficulty(p) is difficulty(Problem((21, 16, 17, 26), 46))
    # a wrong id does not borrow another problem's label
    other = Problem((1, 2, 3, 4), 10, id="longproc-0.5k/test/0")
    assert difficulty(other) == measure(other)


def test_tier_of_a_difficulty_and_of_a_problem_without_preset():
    lo, hi = TIER_THRESHOLDS["longproc-0.5k"]
    d = Difficulty(1, lo, None, 0, 1, 1, "x")
    assert tier(d) == "easy" and tier(Difficulty(1, lo + 1, None, 0, 1, 1, "x")) == "medium"
    assert tier(Difficulty(1, hi + 1, None, 0, 1, 1, "x")) == "hard"
    assert tier(Difficulty(1, hi + 1, None, 0, 1, 1, "x"), "hard") == "easy"  # the hard preset's own cut points
    assert tier(Problem((3, 4), 7, Rules.longproc())) == "easy"
    with pytest.raises(TypeError):
        tier("easy")  # type: ignore[arg-type]


def test_tier_refuses_a_preset_without_thresholds():
    """A misspelt preset ("Hard", or Curriculum(tier_preset=...)) was silently cut by longproc-0.5k's thresholds."""
    d = Difficulty(1, TIER_THRESHOLDS["longproc-0.5k"][1] + 1, None, 0, 1, 1, "x")
    with pytest.raises(ValueError, match="no tier thresholds for preset 'Hard'"):
        tier(d, "Hard")
    assert tier(Problem((3, 4), 7, Rules.longproc(), preset="custom")) == "easy"  # a problem's own preset may be any


def test_a_problem_whose_id_is_no_str_is_measured():
    """An int id (a dataset's own, through Problem.from_dict) raised AttributeError ('int' has no 'rsplit')."""
    assert difficulty(Problem((3, 4), 7, Rules.longproc(), id=5)) == measure(Problem((3, 4), 7, Rules.longproc()))


def test_a_split_like_id_with_an_index_int_refuses_is_measured():
    """An id 'longproc-0.5k/test/²' (str.isdigit, not int()) or with a 5,000-digit index raised ValueError from
    int() in the shipped-label lookup."""
    p = Problem((3, 4), 7, Rules.longproc())
    for index in ("²", "9" * 5000):
        assert difficulty(dataclasses.replace(p, id=f"longproc-0.5k/test/{index}")) == measure(p)


def test_difficulty_rejects_non_problems():
    with pytest.raises(TypeError):
        difficulty((1, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        measure({"numbers": [1, 2], "target": 3})  # type: ignore[arg-type]


def test_cli_lists_the_commands():
    from countdown_gym.cli import USAGE

    assert "difficulty" in USAGE and "export" in USAGE
    assert difficulty_mod.TIER_METRIC == "search_nodes"
