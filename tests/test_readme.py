"""The README's promises run: every ```python block executes (each in a fresh interpreter, from the repo root),
and every `python ...` / `countdown-gym ...` command of README.md and docs/*.md exists with the flags it shows
(`--help`).

A block preceded by ``<!-- skip-test: why -->`` is skipped with that reason (for a block that needs a trained
run or minutes of work); keep such blocks rare."""

from __future__ import annotations

import importlib.util
import json
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
    """Every `python ...` or `countdown-gym ...` command of a page: lines of shell blocks (after `&&`, without
    leading `VAR=value` settings) and inline code spans."""
    found = []
    for m in BLOCK.finditer(text):
        if m.group(1) in ("bash", "sh", "shell", ""):
            for line in m.group(2).replace("\\\n", " ").splitlines():
                found += [part.strip() for part in line.split("&&")]
    code_free = BLOCK.sub("", text)
    found += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", code_free)]
    found = [re.sub(r"^([A-Z_]+=\S* )+", "", c) for c in found]  # OMP_NUM_THREADS=1 python ...
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
    text = "```bash\npip install x && OMP_NUM_THREADS=1 python a.py --b 1\n```\nsee `countdown-gym export --format jsonl`, `ls`\n"
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


HELP_RUNNER = """
import contextlib, io, json, os, runpy, sys
calls, out = json.loads(sys.argv[1]), []
for argv in calls:  # as `python -m mod ... --help` or `python script.py ... --help` would run, one after the other
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            if argv[0] == "-m":
                sys.argv = argv[1:]
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv, sys.path[0] = argv[:], os.path.dirname(os.path.abspath(argv[0]))
                runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException as exc:  # noqa: BLE001 - reported, not raised: the next command still runs
        code, _ = 1, stderr.write(f"{type(exc).__name__}: {exc}")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    out.append({"argv": argv, "code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()[-2000:]})
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""


def help_targets(pages: list[Path]) -> dict[tuple[str, ...], dict[str, set[str]]]:
    """``{--help call: {page: flags the page uses}}`` over the pages, leaving out the test runner, ``python -c``
    snippets and modules of libraries that are not installed here (verl)."""
    calls: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for page in pages:
        for command in commands(page.read_text(encoding="utf-8")):
            call, flags = help_call(command)
            if tuple(call[1:3]) in RUN_ELSEWHERE or call[1] == "-c":
                continue
            if call[1] == "-m" and importlib.util.find_spec(call[2].split(".")[0]) is None:
                continue
            calls.setdefault(tuple(call), {}).setdefault(str(page.relative_to(ROOT)), set()).update(flags)
    return calls


def test_documented_commands_exist_with_their_flags(tmp_path: Path) -> None:
    """Every `python ...` / `countdown-gym ...` command of README.md and docs/*.md: its script or module runs with
    --help, and lists every flag the command uses (the logs in docs/results/ keep their commands as they were
    run, so they are not checked). All in one interpreter, so the libraries load once."""
    targets = help_targets([README, *sorted((ROOT / "docs").glob("*.md"))])
    assert any(call[1:3] == (str(Path("baselines") / "llm_grpo.py"), "--help") for call in targets)
    argvs = [list(call[1:]) for call in targets]
    out = tmp_path / "help.json"
    r = subprocess.run([sys.executable, "-c", HELP_RUNNER, json.dumps(argvs), str(out)], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    problems = []
    for result, (call, pages) in zip(json.loads(out.read_text()), targets.items(), strict=True):
        shown = " ".join(call[1:-1])
        if result["code"] != 0:
            problems.append(f"`{shown} --help` failed ({', '.join(pages)}): {result['stderr'][-1500:]}")
            continue
        for page, flags in pages.items():
            missing = [f for f in sorted(flags) if not re.search(rf"{re.escape(f)}\b", result["stdout"])]
            if missing:
                problems.append(f"{page}: `{shown}` does not list {missing}")
    assert not problems, "\n".join(problems)


def results_rows(text: str) -> list[tuple[str, str]]:
    """``(result, where)`` for every row of the README's results table."""
    section = text.split("\n## Results", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return [(cells[1], cells[2]) for cells in rows[2:]]  # below the header and its --- line


def test_every_figure_of_the_results_table_is_in_the_file_it_links() -> None:
    """Each decimal (and each thousands-grouped count) of a result cell appears in the files its row links to, so
    the table quotes what its command or log printed rather than a number written from memory."""
    rows = results_rows(README_TEXT)
    assert len(rows) >= 5
    problems = []
    for result, where in rows:
        targets = [ROOT / link for link in re.findall(r"\]\(([^)#]+)", where)]
        text = "".join(p.read_text(encoding="utf-8") for p in targets if p.is_file())
        assert text, f"a results row links to no readable file: {where}"
        figures = re.findall(r"\d{1,3}(?:,\d{3})+|\d+\.\d+%?", result)
        problems += [f"{figure} ({where})" for figure in figures if figure not in text]
    assert not problems, f"figures of the README's results table not in the files they cite: {problems}"


def test_the_default_run_figure_is_its_committed_record() -> None:
    """The README quotes seed 0 of the default GRPO run as the run printed it; the record of that run (its held-out
    test comparison) is committed with the reward comparison."""
    import gzip

    with gzip.open(ROOT / "docs/results/reward_comparison/sparse-s0.json.gz") as f:
        test = json.load(f)["test"]
    p = test["p_value"]
    printed = (
        f"start {test['start']:.1%} ± {test['start_se']:.1%} -> final {test['end']:.1%} ± {test['end_se']:.1%}; "
        f"difference {100 * test['difference']:+.1f} points ± {100 * test['difference_se']:.1f} (paired SE), "
        f"{test['gained']} problems gained, {test['lost']} lost, McNemar p {'< 0.001' if p < 0.001 else f'= {p:.3f}'}"
    )
    assert printed in " ".join(README_TEXT.split())
