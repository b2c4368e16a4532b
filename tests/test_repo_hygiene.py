"""Repository-level checks: lint, packaging metadata, and the README's promises."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_core_install_is_light_and_runs_the_leaderboard() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = [d.split(">")[0].split("=")[0].split("<")[0].strip() for d in meta["project"]["dependencies"]]
    # no torch: jsonschema, tqdm and disarm (Unicode's confusables, one compiled wheel without dependencies) for the
    # leaderboard, tyro (pure Python) for the script options (dataclass_cli)
    assert sorted(deps) == ["disarm", "gymnasium", "jsonschema", "numpy", "tqdm", "tyro"]


def test_ci_runs_the_readme_test_command_in_a_fresh_virtual_environment() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    (ci,) = [line for line in script.splitlines() if line.startswith("pip install -e ")]  # then pip check, .ci/package
    assert ci.endswith("&& python -m pytest"), ci
    assert f"```bash\n{ci}\n```" in (ROOT / "README.md").read_text(), "README and .ci/run must name the same test command"
    venv = script.index("python3 -m venv ")  # nothing installed on the machine can hide an undeclared dependency
    assert venv < script.index('source "$venv/bin/activate"') < script.index(ci)


def test_torch_pinned_in_the_same_resolve() -> None:
    assert (ROOT / "constraints" / "cpu.txt").read_text().split() == ["torch==2.13.0"]
    readme = (ROOT / "README.md").read_text()
    assert readme.count("-c constraints/cpu.txt") >= 2
