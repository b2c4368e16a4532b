"""The shipped difficulty labels of the frozen splits, ``countdown_gym/data/<preset>/<split>.difficulty.jsonl`` (one
``{"id", <Difficulty fields>}`` per line, in split order, pinned by :data:`LABELS_SHA256`), and the tiers cut on
them (:func:`metric_tier`, the one rule of the cut).
"""
from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

TIERS: tuple[str, ...] = ("easy", "medium", "hard")
"""The difficulty tiers, easiest first."""

TIER_METRIC = "search_nodes"
"""The :class:`~countdown_gym.data.difficulty.Difficulty` field the tiers are cut on (larger = harder)."""

TIER_THRESHOLDS: dict[str, tuple[int, int]] = {"longproc-0.5k": (60, 281), "tinyzero": (97, 859), "hard": (493, 4936)}
"""Per preset ``(a, b)``: ``easy`` up to ``a`` search nodes, ``medium`` up to ``b``, else ``hard`` (the 1/3 and 2/3
quantiles on the preset's test split)."""

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


class LabelsIntegrityError(RuntimeError):
    """A shipped labels file does not match its recorded SHA-256, or not its split."""


def read_pinned(path: Path, expected: str, error: type[Exception], missing: str) -> bytes:
    """The bytes of a shipped file; ``FileNotFoundError(missing)`` if absent, ``error`` unless their SHA-256 is
    ``expected``."""
    if not path.is_file():
        raise FileNotFoundError(missing)
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise error(f"{path} has SHA-256 {actual}, expected {expected}: the file was modified")
    return data


def labels_path(preset: str, split: str) -> Path:
    """Where the shipped labels of a frozen split live (beside the split file)."""
    if split not in LABELS_SHA256.get(preset, {}):
        raise ValueError(f"no difficulty labels for {preset}/{split}; available: "
                         f"{sorted(f'{p}/{s}' for p, splits in LABELS_SHA256.items() for s in splits)}")
    return Path(str(resources.files("countdown_gym") / "data")) / preset / f"{split}.difficulty.jsonl"


def label_rows(preset: str, split: str) -> list[dict[str, Any]]:
    """The rows of a frozen split's labels file, in split order, after checking the file's SHA-256."""
    path = labels_path(preset, split)
    data = read_pinned(path, LABELS_SHA256[preset][split], LabelsIntegrityError,
                       f"difficulty labels missing: {path} (rebuild with: countdown-gym difficulty --write)")
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def check_tier(name: str) -> str:
    """``name`` if it is one of :data:`TIERS`, else a ``ValueError``."""
    if name not in TIERS:
        raise ValueError(f"unknown tier {name!r}; choose one of {list(TIERS)}")
    return name


def metric_tier(value: int, preset: str | None = None) -> str:
    """The tier of a :data:`TIER_METRIC` value under ``preset``'s cut points (else :data:`DEFAULT_TIER_PRESET`'s)."""
    low, high = TIER_THRESHOLDS[preset if preset in TIER_THRESHOLDS else DEFAULT_TIER_PRESET]
    return "easy" if value <= low else "medium" if value <= high else "hard"


@cache
def split_tiers(preset: str, split: str) -> tuple[str, ...]:
    """The tier of every problem of a frozen split, in split order."""
    return tuple(metric_tier(row[TIER_METRIC], preset) for row in label_rows(preset, split))
