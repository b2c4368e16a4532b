"""Frozen train / validation / test problem sets, ``countdown_gym/data/<preset>/<split>.jsonl``, pinned by
:data:`SPLIT_SHA256` (:func:`load_split` refuses a changed file); ``countdown-gym splits`` regenerates them. The
``longproc-0.5k`` and ``hard`` files record the strictly positive generation rules (:data:`SPLIT_GENERATION_RULES`)
and are played under :data:`SPLIT_RULES`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import cache
from importlib import resources
from pathlib import Path

from countdown_gym.data.generator import get_config, iter_problems
from countdown_gym.data.labels import check_tier, read_pinned, split_tiers
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import LEGACY_LONGPROC, Rules

SPLITS = ("train", "validation", "test")

SPLIT_SPEC: dict[str, dict[str, int]] = {
    "longproc-0.5k": {"seed": 20261122, "train": 8000, "validation": 500, "test": 1000},
    "tinyzero": {"seed": 20261122, "train": 2000, "validation": 200, "test": 500},
    "hard": {"seed": 20261122, "train": 4000, "validation": 200, "test": 500},
}
"""Generation seed and size of each split per preset."""

SPLIT_GENERATION_RULES: dict[str, Rules] = {"longproc-0.5k": LEGACY_LONGPROC, "tinyzero": Rules.tinyzero(),
                                             "hard": LEGACY_LONGPROC}
"""The rules each preset's split files were generated under (and record on every line)."""

SPLIT_RULES: dict[str, Rules] = {"longproc-0.5k": Rules.longproc(), "tinyzero": Rules.tinyzero(),
                                  "hard": Rules.longproc()}
"""The rules :func:`load_split` gives each preset's problems (they allow every move the generation rules allow)."""

SPLIT_SHA256: dict[str, dict[str, str]] = {
    "longproc-0.5k": {
        "train": "ac22bdb7723670bf041d17ab66caf9b656923036befcf4052068b784a207e117",
        "validation": "746a35cf1489a9a795fc2c54a8d2da4a65bda397c96a5eb81cb77cb78c77b52f",
        "test": "a7c6d28c43f08133fdcb075d67afb44be560b25e2027045b95c4c792911f578b",
    },
    "tinyzero": {
        "train": "8591167cded9dd09f881cc00934451e452e5ce915a01b34cc866fad38d107e5e",
        "validation": "8ad5e74f66a2913d117d41465a79d9d7be49358e6f9f9078c26f4bc92f9e4e34",
        "test": "904b38b810e5ae37f74ca853c717832d292b3743b90b63a0f25db84a514173d0",
    },
    "hard": {
        "train": "15779b3e394dff3c095f8596a6a12eec42e70b3e1be6392f79529ad2f600fc12",
        "validation": "385e8b7c1434ec7e73617d95959bfa61f6a881e2e7e17cc819129f650d0d2bba",
        "test": "d96c9fd2208d67ce192aea65471fc60fab3f39775a0850d6ad52741d19aae076",
    },
}
"""SHA-256 of each shipped split file (printed by ``countdown-gym splits --write``)."""


class SplitIntegrityError(RuntimeError):
    """A shipped split file does not match its recorded SHA-256."""


def _data_dir() -> Path:
    return Path(str(resources.files("countdown_gym") / "data"))


def split_path(preset: str, split: str) -> Path:
    if preset not in SPLIT_SPEC:
        raise ValueError(f"no frozen splits for preset {preset!r}; available: {sorted(SPLIT_SPEC)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    return _data_dir() / preset / f"{split}.jsonl"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def split_sha256(preset: str, split: str) -> str:
    """The recorded SHA-256 of a shipped split (what submissions must quote)."""
    split_path(preset, split)
    try:
        return SPLIT_SHA256[preset][split]
    except KeyError:
        raise SplitIntegrityError(f"no recorded SHA-256 for {preset}/{split}; rebuild with: python -m countdown_gym splits --write") from None


@cache
def split_problems(preset: str, split: str) -> tuple[Problem, ...]:
    """The frozen ``split`` of ``preset`` as :func:`load_split` reads it, loaded once (a shared tuple)."""
    path = split_path(preset, split)
    data = read_pinned(path, split_sha256(preset, split), SplitIntegrityError, f"split file missing: {path}")
    rules = SPLIT_RULES[preset]
    return tuple(dataclasses.replace(Problem.from_dict(json.loads(line)), rules=rules)
                 for line in data.decode("utf-8").splitlines() if line.strip())


def load_split(preset: str, split: str, tier: str | None = None) -> list[Problem]:
    """The frozen ``split`` of ``preset`` (hash-checked) under :data:`SPLIT_RULES`; with ``tier`` (``"easy"``,
    ``"medium"``, ``"hard"``), only that tier's problems, in split order."""
    problems = list(split_problems(preset, split))
    if tier is None:
        return problems
    check_tier(tier)
    return [p for p, t in zip(problems, split_tiers(preset, split), strict=True) if t == tier]


def tampered_files() -> list[str]:
    """The shipped split files whose bytes on disk differ from their recorded SHA-256 (missing ones too)."""
    bad = []
    for preset, splits in SPLIT_SHA256.items():
        for split, expected in splits.items():
            path = split_path(preset, split)
            if not path.is_file():
                bad.append(f"{path} (missing)")
            elif (actual := file_sha256(path)) != expected:
                bad.append(f"{path} (SHA-256 {actual[:12]}..., recorded {expected[:12]}...)")
    return bad


def build_splits(preset: str) -> dict[str, list[Problem]]:
    """Generate the splits of ``preset`` (disjoint by key) under :data:`SPLIT_GENERATION_RULES`."""
    spec = SPLIT_SPEC[preset]
    config = get_config(preset).replace(rules=SPLIT_GENERATION_RULES[preset])
    stream = iter_problems(config, spec["seed"])  # distinct keys across the whole stream, drawn test first
    return {split: [Problem(p.numbers, p.target, p.rules, id=f"{preset}/{split}/{k}", preset=preset)
                    for k, p in zip(range(spec[split]), stream, strict=False)]
            for split in ("test", "validation", "train")}


def split_bytes(problems: list[Problem]) -> bytes:
    """A split file's exact content: one compact :meth:`Problem.to_dict` JSON object per line."""
    return "".join(json.dumps(p.to_dict(), separators=(",", ":")) + "\n" for p in problems).encode("utf-8")
