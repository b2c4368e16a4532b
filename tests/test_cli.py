"""The ``countdown-gym`` console script: one exit-code convention (0 success, 1 failure, 2 usage
error) and one help style across its commands; and the built wheel carries ``py.typed``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from countdown_gym.cli import USAGE, main

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [line.split()[0] for line in USAGE.split("commands:")[1].split("\n\n")[0].splitlines() if line.strip()]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's --help and its own usage errors
        return int(e.code or 0)


def test_usage_lists_the_commands_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert {"leaderboard", "splits", "audit"} <= set(COMMANDS)
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "0 success, 1 failure, 2 usage error" in out
    assert main([]) == 2  # a usage error: the usage goes to stderr
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("usage: countdown-gym")
    assert main(["no-such-command"]) == 2
    assert "countdown-gym: error: unknown command 'no-such-command'" in capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_refuses_an_unknown_option_with_2(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: countdown-gym {command}"), out[:200]
    assert _run([command, "--no-such-option"]) == 2
    err = capsys.readouterr().err
    assert "usage: countdown-gym" in err and "error:" in err


@pytest.mark.parametrize("sub", ["score", "check", "submit"])
def test_leaderboard_subcommands_document_the_exit_codes(sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["leaderboard", sub, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: countdown-gym leaderboard {sub}") and "Exit codes: 0" in out


def test_leaderboard_usage_error_is_2_and_failure_is_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", "check", "--dir", str(tmp_path / "nowhere")]) == 2  # no leaderboard there
    assert "countdown-gym leaderboard check: error:" in capsys.readouterr().err
    (tmp_path / "submissions").mkdir()
    assert main(["leaderboard", "check", "--dir", str(tmp_path)]) == 1  # LEADERBOARD.md missing: a failure
    assert "LEADERBOARD.md is missing; run countdown-gym leaderboard score" in capsys.readouterr().err


def test_built_wheel_carries_py_typed_and_the_data(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for pkg in ("countdown_gym", "critics"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=ignore)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w",
                        str(tmp_path / "w")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (wheel,) = (tmp_path / "w").glob("countdown_gym-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"countdown_gym/py.typed", "countdown_gym/data/exploits.jsonl", "countdown_gym/leaderboard/schema.json",
            "countdown_gym/leaderboard/page.css", "countdown_gym/leaderboard/page.js",
            "countdown_gym/cli/dataset_card.md", "countdown_gym/data/longproc-0.5k/test.jsonl"} <= names
