"""The README's promises run: every ```python block executes (each in a fresh interpreter, from the repo root),
and every `python ...` / `countdown-gym ...` command it names exists with the flags it shows (`--help`).

A block preceded by ``<!-- skip-test: why -->`` is skipped with that reason (for a block that needs a trained
run or minutes of work); keep such blocks rare."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SKIP = re.compile(r"<!--\s*skip-test:\s*(.*?)\s*-->")
BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", flags=re.S | re.M)
# commands the test suite runs for real (not through --help): the test runner itself
RUN_ELSEWHERE = {("-m", "pytest")}


def env() -> dict[str, str]:
    """This checkout first on the path, so the README is checked against the code beside it."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(line, code, skip reason or None)`` for every ```python block."""
    blocks = []
    for m in BLOCK.finditer(text):
        if m.group(1) != "python":
            continue
        before = text[: m.start()].rstrip().rsplit("\n", 1)[-1]
        skip = SKIP.fullmatch(before.strip())
        blocks.append((text.count("\n", 0, m.start()) + 1, m.group(2), skip.group(1) if skip else None))
    return blocks


def commands(text: str) -> list[str]:
    """Every `python ...` or `countdown-gym ...` command of the README: lines of shell blocks (after `&&`) and
    inline code spans."""
    found = []
    for m in BLOCK.finditer(text):
        if m.group(1) in ("bash", "sh", "shell", ""):
            for line in m.group(2).replace("\\\n", " ").splitlines():
                found += [part.strip() for part in line.split("&&")]
    code_free = BLOCK.sub("", text)
    found += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", code_free)]
    return [c for c in found if re.match(r"(python|countdown-gym) \S", c)]


def help_call(command: str) -> tuple[list[str], list[str]]:
    """The ``--help`` invocation that shows a command's options, and the flags the command uses."""
    words = shlex.split(command.split(" #")[0])
    if words[0] == "countdown-gym":  # the console script is countdown_gym.cli:main, as `python -m countdown_gym`
        words = ["python", "-m", "countdown_gym", *words[1:]]
    head = words[:3] if words[1] == "-m" else words[:2]
    rest = words[len(head):]
    while rest and re.fullmatch(r"[a-z][a-z_-]*", rest[0]):  # subcommands: `splits`, `export`, `score`
        head.append(rest.pop(0))
    flags = [w.split("=")[0] for w in rest if w.startswith("--")]
    return [sys.executable, *head[1:], "--help"], flags


README_TEXT = README.read_text(encoding="utf-8")


def test_the_readme_has_blocks_and_commands_to_check() -> None:
    assert len(python_blocks(README_TEXT)) >= 3
    assert any(c.startswith("python baselines/llm_grpo.py") for c in commands(README_TEXT))
    skipped = [(line, why) for line, _, why in python_blocks(README_TEXT) if why is not None]
    assert all(why for _, why in skipped), "a skip-test comment gives its reason"
    assert len(skipped) <= 1, f"keep skipped README blocks rare: {skipped}"


def test_command_parsing() -> None:
    text = "```bash\npip install x && python a.py --b 1\n```\nsee `countdown-gym export --format jsonl` and `ls`\n"
    assert commands(text) == ["python a.py --b 1", "countdown-gym export --format jsonl"]
    call, flags = help_call("countdown-gym export --format {hf,parquet}")
    assert call == [sys.executable, "-m", "countdown_gym", "export", "--help"] and flags == ["--format"]
    assert help_call("python -m critics.train --steps=3")[0][1:] == ["-m", "critics.train", "--help"]
    text = "<!-- skip-test: needs a trained run -->\n```python\nx = 1\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == [(2, "x = 1\n", "needs a trained run"), (5, "y = 2\n", None)]


@pytest.mark.parametrize("line, code, skip", python_blocks(README_TEXT),
                         ids=[f"line{line}" for line, _, _ in python_blocks(README_TEXT)])  # fmt: skip
def test_readme_python_block_runs(line: int, code: str, skip: str | None) -> None:
    if skip is not None:
        pytest.skip(f"README.md line {line}: {skip}")
    r = subprocess.run([sys.executable, "-"], input=code, cwd=ROOT, env=env(), capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, f"README.md block at line {line} failed:\n{r.stderr[-3000:]}"


def _help_targets() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    calls: dict[tuple[str, ...], set[str]] = {}
    for command in commands(README_TEXT):
        call, flags = help_call(command)
        if tuple(call[1:3]) in RUN_ELSEWHERE:
            continue
        calls.setdefault(tuple(call), set()).update(flags)
    return [(call, tuple(sorted(flags))) for call, flags in calls.items()]


@pytest.mark.parametrize("call, flags", _help_targets(), ids=[" ".join(c[1:-1]) for c, _ in _help_targets()])
def test_readme_command_exists_with_its_flags(call: tuple[str, ...], flags: tuple[str, ...]) -> None:
    r = subprocess.run(list(call), cwd=ROOT, env=env(), capture_output=True, text=True, timeout=300)
    shown = " ".join(call[1:])
    assert r.returncode == 0, f"`{shown}` failed:\n{r.stderr[-3000:]}"
    missing = [f for f in flags if not re.search(rf"{re.escape(f)}\b", r.stdout)]
    assert not missing, f"`{shown}` does not list {missing}"
