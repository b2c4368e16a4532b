"""``countdown-gym difficulty [--write] [--presets P ...]``: re-measure the difficulty labels of the frozen splits
(several minutes of solver time) and compare them with the shipped files (:mod:`countdown_gym.data.labels`);
``--write`` rewrites them and prints their new hashes. Each test split's tier cut points are printed too."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys

from tqdm import tqdm

from countdown_gym.data.difficulty import measure, tier_thresholds
from countdown_gym.data.labels import LABELS_SHA256, TIER_METRIC, TIER_THRESHOLDS, labels_path
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS, load_split
from countdown_gym.dataclass_cli import run, written_aside


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
        if len(set(self.presets)) < len(self.presets):
            raise ValueError(f"--presets names a preset twice: {list(self.presets)}")


PROG = "countdown-gym difficulty"


def main(argv: list[str] | None = None) -> int:
    """``countdown-gym difficulty``: 0 the labels reproduce (or were written), 1 some differ, 2 usage error."""
    return run(DifficultyOptions, argv, _difficulty, prog=PROG)


def _difficulty(args: DifficultyOptions) -> int:  # pragma: no cover - maintenance command (minutes of solver time)
    hashes: dict[str, dict[str, str]] = {}
    differ = []
    for preset in args.presets:
        hashes[preset] = {}
        for split in SPLITS:
            rows = [{"id": p.id, **measure(p).to_dict()} for p in tqdm(load_split(preset, split), desc="measuring",
                                                                       leave=False)]
            data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode("utf-8")
            hashes[preset][split] = hashlib.sha256(data).hexdigest()
            if args.write:
                with written_aside(labels_path(preset, split)) as tmp:  # whole or the old file
                    tmp.write_bytes(data)
            elif LABELS_SHA256.get(preset, {}).get(split) != hashes[preset][split]:
                differ.append(f"{preset}/{split}")
            if split == "test":
                cut = tier_thresholds([r[TIER_METRIC] for r in rows])
                print(f"{preset}: {TIER_METRIC} cut points of the test split (1/3, 2/3 quantiles): {cut}; "
                      f"TIER_THRESHOLDS has {TIER_THRESHOLDS.get(preset)}", flush=True)
    if args.write:
        print(json.dumps(hashes, indent=4))
        return 0
    if differ:
        print(f"{PROG}: error: these labels do not match the shipped files: {', '.join(differ)}", file=sys.stderr)
        return 1
    print(f"the labels of all {sum(map(len, hashes.values()))} splits reproduce their recorded SHA-256")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
