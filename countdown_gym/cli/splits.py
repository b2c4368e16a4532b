"""``countdown-gym splits [--write]``: regenerate the frozen splits from their spec and check them against their
recorded SHA-256 (:mod:`countdown_gym.data.splits`); ``--write`` rewrites the files and prints the new hashes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys

from tqdm import tqdm

from countdown_gym.data.splits import SPLIT_SHA256, SPLIT_SPEC, build_splits, split_bytes, split_path, tampered_files
from countdown_gym.dataclass_cli import run, written_aside


@dataclasses.dataclass
class SplitsOptions:
    """Regenerate the frozen splits from SPLIT_SPEC and compare them with SPLIT_SHA256. Nothing is written unless
    --write is given.

    Exit codes: 0 every split reproduces and the files on disk match (or --write wrote them); 1 a split file on disk
    differs or a split no longer reproduces; 2 usage error."""

    write: bool = False
    """overwrite countdown_gym/data/ and print the new hashes"""


def main(argv: list[str] | None = None) -> int:
    """``countdown-gym splits``: rebuild every split; check it against the recorded hashes, or ``--write`` it."""
    return run(SplitsOptions, argv, _splits, prog="countdown-gym splits")


def _splits(args: SplitsOptions) -> int:  # pragma: no cover - maintenance command (minutes of generation)
    hashes: dict[str, dict[str, str]] = {}
    for preset in tqdm(SPLIT_SPEC, desc="presets"):
        hashes[preset] = {}
        for split, problems in build_splits(preset).items():
            data = split_bytes(problems)
            hashes[preset][split] = hashlib.sha256(data).hexdigest()
            if args.write:
                path = split_path(preset, split)
                path.parent.mkdir(parents=True, exist_ok=True)
                with written_aside(path) as tmp:  # a split file is whole or the old one
                    tmp.write_bytes(data)
    if args.write:
        print(json.dumps(hashes, indent=4))
        return 0
    tampered = tampered_files()
    if tampered:
        print("countdown-gym splits: error: these split files on disk are not the recorded ones (edited, or converted "
              "line endings):\n  " + "\n  ".join(tampered), file=sys.stderr)
        return 1
    differ = [f"{pr}/{sp}" for pr in hashes for sp in hashes[pr] if SPLIT_SHA256.get(pr, {}).get(sp) != hashes[pr][sp]]
    if differ:
        print(f"countdown-gym splits: error: these splits no longer reproduce from SPLIT_SPEC: {', '.join(differ)}",
              file=sys.stderr)
        return 1
    print(f"all {sum(map(len, hashes.values()))} split files reproduce their recorded SHA-256, and the files on disk match")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
