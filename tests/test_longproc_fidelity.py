"""Fidelity to LongProc: its rules (a 0 intermediate is allowed) and its traces, byte for byte.

The data (``tests/data/longproc/``, Apache-2.0, see its README) holds LongProc's 600 countdown
problems with the solutions its generator returns and the SHA-256 of each trace its generator
(``build_countdown_demonstration``) writes, plus the same digests for this package's frozen
``longproc-0.5k`` test split.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from countdown_gym import Problem, Rules, dfs_trace, is_solvable, load_split, solve, verify
from countdown_gym.game.trace import parse_trace

DATA = json.loads((Path(__file__).parent / "data" / "longproc" / "longproc_countdown.json").read_text(encoding="utf-8"))
PROBLEMS = DATA["problems"]

# LongProc problems that have no solution without a 0 intermediate
NEED_ZERO = [((24, 24, 10, 21), 21), ((14, 9, 14, 20), 20), ((48, 9, 48, 34), 34)]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _block(lines: list[str]) -> str:
    return "<Solution>\n" + "\n".join(lines) + "\n</Solution>"


def test_the_data_is_longprocs_600_problems() -> None:
    assert len(PROBLEMS) == 600
    assert [sum(p["id"].startswith(f"countdown_{lv}/") for p in PROBLEMS) for lv in ("0.5k", "2k", "8k")] == [200] * 3
    assert len(DATA["longproc_0.5k_test_traces"]) == 1000


@pytest.mark.parametrize("level", ["0.5k", "2k", "8k"])
def test_dfs_trace_is_byte_identical_to_longprocs_generator(level: str) -> None:
    differ = []
    for item in PROBLEMS:
        if item["id"].startswith(f"countdown_{level}/"):
            trace = dfs_trace(Problem(tuple(item["nums"]), item["target"], Rules.longproc()))
            if _sha(trace) != item["trace_sha256"]:
                differ.append(item["id"])
            # the trace's <Solution> block is LongProc's
            assert trace.endswith(_block(item["solution"]) + "\n"), item["id"]
    assert differ == []


def test_dfs_trace_matches_longproc_on_the_frozen_test_split() -> None:
    test = load_split("longproc-0.5k", "test")
    digests = DATA["longproc_0.5k_test_traces"]
    assert [d["id"] for d in digests] == [p.id for p in test]
    assert all(p.rules == Rules.longproc() for p in test)
    differ = [p.id for p, d in zip(test, digests, strict=True) if _sha(dfs_trace(p)) != d["trace_sha256"]]
    assert differ == []


def test_positive_rules_differ_from_longproc() -> None:
    # the strictly positive variant drops the 0 that LongProc keeps: its traces are not LongProc's
    # (the counts are quoted in docs/trace_format.md)
    positive = Rules.longproc_positive()
    differ = unsolvable = 0
    for item in PROBLEMS:
        p = Problem(tuple(item["nums"]), item["target"], positive)
        if not is_solvable(p.numbers, p.target, positive):
            unsolvable += 1
        elif _sha(dfs_trace(p)) != item["trace_sha256"]:
            differ += 1
    assert (differ, unsolvable) == (57, len(NEED_ZERO))
    digests = {d["id"]: d["trace_sha256"] for d in DATA["longproc_0.5k_test_traces"]}
    test = load_split("longproc-0.5k", "test")
    assert sum(_sha(dfs_trace(p, positive)) != digests[p.id] for p in test) == 149


def test_every_longproc_reference_solution_verifies() -> None:
    for item in PROBLEMS:
        p = Problem(tuple(item["nums"]), item["target"])
        for lines in (item["solution"], item["dataset_solution"]):
            v = verify(p, _block(lines))
            assert v.correct, (item["id"], lines, v.reason)


@pytest.mark.parametrize(("numbers", "target"), NEED_ZERO)
def test_problems_that_need_a_zero(numbers: tuple[int, ...], target: int) -> None:
    p = Problem(numbers, target)
    assert is_solvable(numbers, target, Rules.longproc())
    assert not is_solvable(numbers, target, Rules.longproc_positive())
    solutions = solve(p)
    assert solutions and all(verify(p, f"<answer>{s}</answer>").correct for s in solutions)
    item = next(i for i in PROBLEMS if (tuple(i["nums"]), i["target"]) == (numbers, target))
    assert any(line.endswith("= 0") for line in item["solution"])  # LongProc's own answer uses the 0
    assert verify(p, _block(item["solution"])).correct
    strict = verify(Problem(numbers, target, Rules.longproc_positive()), _block(item["solution"]))
    assert not strict.correct and strict.reason == "zero_result"
    trace = dfs_trace(p)
    assert _sha(trace) == item["trace_sha256"] and verify(p, trace).correct
    _, _, steps = parse_trace(trace)
    assert any(0 in (s.next_state or ()) for s in steps)
    with pytest.raises(ValueError, match="not solvable"):
        dfs_trace(Problem(numbers, target, Rules.longproc_positive()))
