"""Run the README's quick start (its ```python blocks) against the installed package, from outside the checkout.

    python .ci/quickstart.py README.md

Each block of the "## Quick start" section runs in a fresh interpreter (this one's ``sys.executable``) in an empty
temporary folder, so ``countdown_gym`` is imported from the installed wheel, never from the checkout; then the
package data the docs promise is looked for in the installed packages. Exit 1 on the first failure. Standard library
only: it runs in a virtual environment holding nothing but the wheel and its dependencies.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", flags=re.S | re.M)

PACKAGE_DATA = {
    "countdown_gym": ["data/{preset}/{split}.jsonl", "data/{preset}/{split}.difficulty.jsonl", "data/exploits.jsonl",
                      "leaderboard/schema.json", "leaderboard/page.css", "leaderboard/page.js", "cli/dataset_card.md",
                      "py.typed"],
    "critics": ["checkpoints/README.md", "checkpoints/v5/model.safetensors", "checkpoints/v5/config.json"],
    "baselines": [f"checkpoints/{m}/{f}" for m in ("countdown-tiny-lm", "countdown-tiny-lm-turns")
                  for f in ("README.md", "config.json", "model.safetensors", "tokenizer.json", "training.json")]
                 + ["model_configs/Qwen/Qwen2.5-1.5B-Instruct/config.json"],
}
"""Files each installed package must hold (``{preset}``, ``{split}``: every frozen split)."""

CHECK = """
import countdown_gym, json
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS, load_split
from countdown_gym.data.difficulty import split_labels
from countdown_gym.leaderboard import load_schema
for preset in SPLIT_SPEC:
    for split in SPLITS:
        assert len(load_split(preset, split)) == SPLIT_SPEC[preset][split] == len(split_labels(preset, split))
assert load_schema()["title"]
print("package data: every frozen split and its labels (SHA-256 checked), the submission schema")
"""


def quick_start(readme: Path) -> list[str]:
    """The ```python blocks of the README's "## Quick start" section."""
    text = readme.read_text(encoding="utf-8")
    start = text.index("\n## Quick start")
    end = text.find("\n## ", start + 1)
    return BLOCK.findall(text[start: end if end > 0 else len(text)])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python .ci/quickstart.py README.md", file=sys.stderr)
        return 2
    readme = Path(argv[0]).resolve()
    checkout = readme.parent
    blocks = quick_start(readme)
    if not blocks:
        print(f"{readme}: no ```python block under '## Quick start'", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as here:
        where = subprocess.run([sys.executable, "-c", "import countdown_gym; print(countdown_gym.__file__)"], cwd=here,
                               capture_output=True, text=True, check=True).stdout.strip()
        if Path(where).resolve().is_relative_to(checkout):
            print(f"countdown_gym is imported from the checkout ({where}), not from an installed package", file=sys.stderr)
            return 1
        print(f"countdown_gym from {where}")
        for k, code in enumerate([*blocks, CHECK]):
            print(f"--- quick start block {k + 1} of {len(blocks)}" if k < len(blocks) else "--- package data")
            if subprocess.run([sys.executable, "-c", code], cwd=here, check=False).returncode != 0:
                print(f"quick start block {k + 1} failed", file=sys.stderr)
                return 1
    from countdown_gym.data.splits import SPLIT_SPEC, SPLITS

    missing = []
    for package, patterns in PACKAGE_DATA.items():
        spec = importlib.util.find_spec(package)  # locates the package without importing it (critics needs torch)
        root = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
        for pattern in patterns:
            for name in {pattern.format(preset=p, split=s) for p in SPLIT_SPEC for s in SPLITS}:
                if root is None or not (root / name).is_file():
                    missing.append(f"{package}/{name}")
    if missing:
        print(f"missing from the installed package: {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    print(f"package data: the {sum(map(len, PACKAGE_DATA.values()))} kinds of file of {', '.join(PACKAGE_DATA)} present")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
