"""Solver-measured difficulty of a problem, three difficulty tiers, and the shipped labels of the frozen splits.

:func:`measure` computes a :class:`Difficulty` with the solver and the reference DFS
(:func:`countdown_gym.game.trace.search_nodes`); :func:`difficulty` returns the shipped label of a frozen-split
problem (``countdown_gym/data/<preset>/<split>.difficulty.jsonl``, checked against
:data:`LABELS_SHA256`) and measures any other problem once per process. :func:`tier` maps a problem to
``"easy"``, ``"medium"`` or ``"hard"`` by its reference-DFS search size (:data:`TIER_THRESHOLDS`, chosen per
preset so that each test split falls into about equal thirds); ``load_split(preset, split, tier=...)``
keeps one tier. The split files themselves are never touched (their SHA-256 are checked as before).

``countdown-gym difficulty`` (or ``python -m countdown_gym.data.difficulty``) re-measures every split and
compares with the shipped labels; ``--write`` rewrites them and prints their new hashes. See
``docs/difficulty.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from countdown_gym.data.splits import SPLIT_SPEC, SPLITS, load_split, split_path
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number
from countdown_gym.game.solver import legal_moves, reachable, solve
from countdown_gym.game.trace import search_nodes

TIERS: tuple[str, ...] = ("easy", "medium", "hard")
"""The difficulty tiers, easiest first."""

TIER_METRIC = "search_nodes"
"""The :class:`Difficulty` field the tiers are cut on (larger = harder)."""

TIER_THRESHOLDS: dict[str, tuple[int, int]] = {
    "longproc-0.5k": (60, 281),
    "tinyzero": (97, 859),
    "hard": (493, 4936),
}
"""Per preset ``(a, b)``: ``easy`` when ``search_nodes <= a``, ``medium`` when ``a < search_nodes <= b``, else
``hard``. The 1/3 and 2/3 quantiles of ``search_nodes`` on the preset's test split (printed by
``countdown-gym difficulty``). Problems of no preset use :data:`DEFAULT_TIER_PRESET`'s."""

DEFAULT_TIER_PRESET = "longproc-0.5k"

LABELS_SHA256: dict[str, dict[str, str]] = {
    "longproc-0.5k": {
        "train": "bd214a1887bce6dcece5d201e2571a84df6462c4e88a1bcfba8c256ff9862bcf",
        "validation": "256e041ef6794f960e4e6352d0458c3e699b80464c4c8d33eaafc38c0f4a0562",
        "test": "7ca450afc3994349912d9d7d0af42fe126e320ed6774159b350aa676463fd0cc",
    },
    "tinyzero": {
        "train": "bb38bf9f7450ec3ad429531a7ee96b7813f0f4a98efc908ee4986dde0e501716",
        "validation": "cb228b6e3ace65b3a3db858823e9f717a1112bae090bd23455f01c03196a489c",
        "test": "aa3e23045e3b723e9ad93230ea854c33ffcb87303c77bafe9e220d8adcaedb6c",
    },
    "hard": {
        "train": "41e3e54e954002bb72934ff9205a37d57dbdd07d1bd42c03a9aa81c66557c01a",
        "validation": "9eb468f5b260a109eebf4ca998e9f19ce8be6a3542b567ee4792ad6203b4f395",
        "test": "16228d407caa1a201cabc653288787db1aa431f4f361df36540d28bd648d3260",
    },
}
"""SHA-256 of each shipped labels file (printed by ``countdown-gym difficulty --write``)."""


@dataclasses.dataclass(frozen=True)
class Difficulty:
    """Solver-measured difficulty of one problem.

    Attributes:
        num_solutions: Distinct solution expressions (:func:`countdown_gym.solve`; 0 when unsolvable).
        search_nodes: Moves the reference DFS tries before it reaches the target (its ``Try`` lines,
            :func:`countdown_gym.game.trace.search_nodes`): the length of the LongProc search trace.
        first_wrong_depth: Moves already made when the reference DFS first makes a legal move after which
            the target is unreachable (0 = its very first move goes wrong); ``None`` when its first path
            leads straight to the target, or when the problem is unsolvable.
        wrong_moves: Legal moves of the reference DFS from a state that could still reach the target into
            one that cannot (the dead ends it enters before the solution).
        good_first_moves: Legal first moves after which the target is still reachable.
        legal_first_moves: Legal first moves.
        solution: One solution expression (the first of :func:`countdown_gym.solve`), ``None`` when unsolvable.
    """

    num_solutions: int
    search_nodes: int
    first_wrong_depth: int | None
    wrong_moves: int
    good_first_moves: int
    legal_first_moves: int
    solution: str | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the labels files' line format, without ``id``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Difficulty:
        """Inverse of :meth:`to_dict` (extra keys such as ``id`` are ignored)."""
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})



def measure(problem: Problem) -> Difficulty:
    """Measure ``problem``'s difficulty with the solver and the reference DFS (no cache; see :func:`difficulty`)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"measure() needs a Problem, got {type(problem).__name__}")
    rules, target = problem.rules, problem.target
    solutions = solve(problem)
    start = list(problem.numbers)
    firsts = [(i, j, m) for i, j, m in legal_moves(start, rules)]
    good = 0
    for i, j, m in firsts:
        rest = [x for k, x in enumerate(start) if k != i and k != j] + [m[3]]
        good += reachable(rest, target, rules)
    first_wrong: list[int] = []
    wrong = [0]
    dead = [-1]  # depth of the dead end the search is inside (-1: none); every state above it can reach the target

    def visit(depth: int, state: list[Number], nxt: list[Number]) -> None:
        if 0 <= dead[0] < depth:  # still below the dead end's move: nothing to check
            return
        dead[0] = -1
        if not reachable(nxt, target, rules):
            wrong[0] += 1
            dead[0] = depth
            if not first_wrong:
                first_wrong.append(depth)

    nodes = search_nodes(problem, visit=visit) if solutions else search_nodes(problem)
    return Difficulty(
        num_solutions=len(solutions),
        search_nodes=nodes,
        first_wrong_depth=first_wrong[0] if first_wrong and solutions else None,
        wrong_moves=wrong[0],
        good_first_moves=good,
        legal_first_moves=len(firsts),
        solution=solutions[0] if solutions else None,
    )


@lru_cache(maxsize=1 << 16)
def _measured(numbers: tuple[int, ...], target: int, rules: Any) -> Difficulty:
    return measure(Problem(numbers, target, rules))


def labels_path(preset: str, split: str) -> Path:
    """Where the shipped labels of a frozen split live (beside the split file)."""
    return split_path(preset, split).with_name(f"{split}.difficulty.jsonl")


class LabelsIntegrityError(RuntimeError):
    """A shipped labels file does not match its recorded SHA-256, or not its split."""


@cache
def split_labels(preset: str, split: str) -> tuple[Difficulty, ...]:
    """The shipped :class:`Difficulty` of every problem of a frozen split, in split order (hash-checked)."""
    problems = _split_problems(preset, split)
    path = labels_path(preset, split)
    if not path.is_file():
        raise FileNotFoundError(f"difficulty labels missing: {path} (rebuild with: countdown-gym difficulty --write)")
    data = path.read_bytes()
    expected = LABELS_SHA256.get(preset, {}).get(split)
    actual = hashlib.sha256(data).hexdigest()
    if expected != actual:
        raise LabelsIntegrityError(f"{path} has SHA-256 {actual}, expected {expected}: the file was modified")
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    if [r.get("id") for r in rows] != [p.id for p in problems]:
        raise LabelsIntegrityError(f"{path} does not list the problems of {preset}/{split} in order")
    return tuple(Difficulty.from_dict(r) for r in rows)


@cache
def _split_problems(preset: str, split: str) -> tuple[Problem, ...]:
    return tuple(load_split(preset, split))


def _shipped(problem: Problem) -> Difficulty | None:
    """The shipped label of a frozen-split problem (found by its id ``<preset>/<split>/<index>``), else ``None``."""
    parts = (problem.id or "").rsplit("/", 2)
    if len(parts) != 3 or parts[0] not in SPLIT_SPEC or parts[1] not in SPLITS or not parts[2].isdigit():
        return None
    problems = _split_problems(parts[0], parts[1])
    k = int(parts[2])
    if k >= len(problems) or problems[k] != problem or problems[k].id != problem.id:
        return None
    return split_labels(parts[0], parts[1])[k]


def difficulty(problem: Problem) -> Difficulty:
    """The :class:`Difficulty` of ``problem``: the shipped label of a frozen-split problem, else measured once.

    Example:
        >>> difficulty(load_split("longproc-0.5k", "test")[0]).num_solutions
        15
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"difficulty() needs a Problem, got {type(problem).__name__}")
    shipped = _shipped(problem)
    if shipped is not None:
        return shipped
    return _measured(problem.numbers, problem.target, problem.rules)


def check_tier(name: str) -> str:
    """``name`` if it is one of :data:`TIERS`, else a ``ValueError``."""
    if name not in TIERS:
        raise ValueError(f"unknown tier {name!r}; choose one of {list(TIERS)}")
    return name


def tier(item: Problem | Difficulty, preset: str | None = None) -> str:
    """The tier (``"easy"``, ``"medium"``, ``"hard"``) of a problem or of its :class:`Difficulty`.

    The thresholds are those of ``preset``, else of the problem's own preset, else of
    :data:`DEFAULT_TIER_PRESET`.
    """
    if isinstance(item, Problem):
        preset = preset or item.preset
        item = difficulty(item)
    elif not isinstance(item, Difficulty):
        raise TypeError(f"tier() needs a Problem or a Difficulty, got {type(item).__name__}")
    preset = preset if preset in TIER_THRESHOLDS else DEFAULT_TIER_PRESET
    low, high = TIER_THRESHOLDS[preset]
    value = getattr(item, TIER_METRIC)
    return "easy" if value <= low else "medium" if value <= high else "hard"


@cache
def split_tiers(preset: str, split: str) -> tuple[str, ...]:
    """The tier of every problem of a frozen split, in split order."""
    return tuple(tier(d, preset) for d in split_labels(preset, split))


def tier_thresholds(values: Sequence[int]) -> tuple[int, int]:
    """The 1/3 and 2/3 quantiles (lower values) of ``values``: the cut points of about equal thirds."""
    s = sorted(values)
    if not s:
        raise ValueError("no values to cut into tiers")
    return s[(len(s) - 1) // 3], s[(2 * len(s) - 1) // 3]


def _labels_bytes(problems: Sequence[Problem]) -> bytes:
    from tqdm import tqdm

    lines = []
    for p in tqdm(problems, desc="measuring", leave=False):
        lines.append(json.dumps({"id": p.id, **measure(p).to_dict()}, separators=(",", ":")) + "\n")
    return "".join(lines).encode("utf-8")


@dataclasses.dataclass
class DifficultyOptions:
    """Re-measure the difficulty labels of every frozen split (several minutes) and compare them with the shipped
    files; print each test split's tier cut points. Nothing is written unless --write is given.

    Exit codes: 0 the labels reproduce (or --write wrote them); 1 some labels differ; 2 usage error."""

    write: bool = False
    """rewrite the labels files and print their new hashes"""
    presets: tuple[str, ...] = tuple(SPLIT_SPEC)
    """presets to measure (separate or comma-separated names; default: all)"""

    def __post_init__(self) -> None:
        if not self.presets:
            raise ValueError(f"--presets names no preset; choose from {sorted(SPLIT_SPEC)}")
        unknown = [p for p in self.presets if p not in SPLIT_SPEC]
        if unknown:
            raise ValueError(f"--presets: unknown presets {unknown}; choose from {sorted(SPLIT_SPEC)}")


def main(argv: list[str] | None = None) -> int:
    """``countdown-gym difficulty``: re-measure every frozen split; compare with the shipped labels, or ``--write`` them."""
    from countdown_gym.dataclass_cli import run

    return run(DifficultyOptions, argv, _difficulty, prog="countdown-gym difficulty")


def _difficulty(args: DifficultyOptions) -> int:  # pragma: no cover - maintenance command (minutes of solver time)
    presets = list(args.presets)
    hashes: dict[str, dict[str, str]] = {}
    differ = []
    for preset in presets:
        hashes[preset] = {}
        for split in SPLITS:
            data = _labels_bytes(load_split(preset, split))
            hashes[preset][split] = hashlib.sha256(data).hexdigest()
            if args.write:
                labels_path(preset, split).write_bytes(data)
            elif LABELS_SHA256.get(preset, {}).get(split) != hashes[preset][split]:
                differ.append(f"{preset}/{split}")
            if split == "test":
                rows = [json.loads(line) for line in data.decode().splitlines()]
                cut = tier_thresholds([r[TIER_METRIC] for r in rows])
                print(f"{preset}: {TIER_METRIC} cut points of the test split (1/3, 2/3 quantiles): {cut}; "
                      f"TIER_THRESHOLDS has {TIER_THRESHOLDS.get(preset)}", flush=True)
    if args.write:
        print(json.dumps(hashes, indent=4))
        return 0
    if differ:
        print(f"these labels do not match the shipped files: {', '.join(differ)}")
        return 1
    print(f"the labels of all {sum(map(len, hashes.values()))} splits reproduce their recorded SHA-256")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
