"""Command lines a careless or hostile user types: each is one usage-error line and exit code 2, reported before any
work is done, never a traceback, never a silent acceptance. One parsing layer (countdown_gym.dataclass_cli) and one
usage-error form for every command."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from countdown_gym.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
SOLVER = str(ROOT / "baselines" / "reference_agents.py") + ":SolverPolicy"
META = ["--agent", "a", "--authors", "a", "--model", "m", "--method", "m", "--reward-variant", "none", "--no-progress",
        "--preset", "tinyzero", "--split", "validation"]  # fmt: skip


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    lines = err.splitlines()
    prog = "countdown-gym " + (" ".join(argv[:2]) if argv[0] == "leaderboard" else argv[0])
    assert lines[0].startswith(f"usage: {prog} ") and f"\n{prog}: error: " in err, err  # the one form
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize(("flags", "needle"), [
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--wrapper", "os:getcwd"], "cannot wrap Countdown-v0"),
    (["--wrapper", "gymnasium.wrappers:TimeLimit", "--wrapper-kwargs", '{"nope": 1}'], "unexpected keyword argument 'nope'"),
    (["--wrapper", "operator:truth"], "not a Gymnasium environment"),
])  # fmt: skip
def test_submit_refuses_a_bad_seed_or_wrapper_before_playing(tmp_path, capsys, flags, needle):
    out = tmp_path / "x.jsonl"
    start = time.perf_counter()
    usage_error(["leaderboard", "submit", "--policy", SOLVER, "--out", str(out), *META, *flags], capsys, needle)
    assert time.perf_counter() - start < 20 and not out.exists()  # nothing was played (the split takes longer)


def test_submit_to_an_existing_folder_fails_before_playing_and_leaves_nothing(tmp_path, capsys):
    folder = tmp_path / "taken"
    folder.mkdir()
    usage_error(["leaderboard", "submit", "--policy", "os:getcwd", "--out", str(folder), *META], capsys,
                "is not a file")  # os:getcwd would fail at the first episode: exit 1, not 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # no taken.tmp
    from countdown_gym.leaderboard import write_submission

    with pytest.raises(IsADirectoryError):  # the writer itself never leaves its temporary file behind
        write_submission(folder, completions=["<answer>1</answer>"] * 200, preset="tinyzero", split="validation",
                         agent="a", authors="a", model="m", model_size="0", method="m", reward_variant="none",
                         compute="-", command="-")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_submit_to_an_unwritable_folder_fails_before_playing_and_a_full_disk_is_one_line(tmp_path, capsys, monkeypatch):
    """A read-only --out folder, or a disk full when the file is written, was a traceback after the whole split was
    played; now the folder is refused before any episode (2) and a failed write is one error line (1)."""
    import errno
    import os

    from countdown_gym.leaderboard import write

    (tmp_path / "ro").mkdir()
    access = os.access  # as if read-only (root may write anywhere a permission bit would forbid)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != tmp_path / "ro" and access(p, mode, **kw))
    policy = str(ROOT / "baselines" / "reference_agents.py") + ":RandomLegalPolicy"
    usage_error(["leaderboard", "submit", "--policy", policy, "--out", str(tmp_path / "ro" / "new" / "x.jsonl"), *META],
                capsys, f"the folder {tmp_path / 'ro'} is not writable")

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(write, "read_submission", full)  # the disk fills as the file is written
    out = tmp_path / "x.jsonl"
    assert main(["leaderboard", "submit", "--policy", policy, "--out", str(out), *META]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"countdown-gym leaderboard submit: error: No space left on device: {out}"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro"]


def test_audit_refuses_bad_options_before_the_audit(tmp_path, capsys):
    fn = "countdown_gym.cli.audit:verify_reward"
    usage_error(["audit", fn, "--json", str(tmp_path / "missing" / "out.jsonl")], capsys, "does not exist")
    usage_error(["audit", fn, "--json", str(tmp_path)], capsys, "is a folder")
    usage_error(["audit", fn, "--threshold", "nan"], capsys, "not a finite number")
    usage_error(["audit", fn, "--threshold", "inf"], capsys, "not a finite number")
    usage_error(["audit", fn, "--memory-mb", "-5"], capsys, "--memory-mb must be >= 0")
    usage_error(["audit", fn, "--timeout", "0"], capsys, "--timeout must be > 0")


def test_difficulty_and_export_refuse_what_they_would_ignore(tmp_path, capsys):
    usage_error(["difficulty", "--presets", ""], capsys, "--presets names no preset")
    usage_error(["difficulty", "--presets", "nope"], capsys, "unknown presets ['nope']")
    usage_error(["difficulty", "--presets", "tinyzero,tinyzero"], capsys, "--presets names a preset twice")  # measured it twice
    usage_error(["export", "--format", "jsonl", "--interaction", "tool", "--out", str(tmp_path)], capsys,
                "--interaction tool applies to --format verl only")
    usage_error(["export", "--format", "jsonl", "--out", ""], capsys, "--out is empty")  # not the current folder
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_one_usage_error_form(command, capsys):
    argv = [command, "submit"] if command == "leaderboard" else [command]
    err = usage_error([*argv, "--no-such-flag"], capsys)
    assert err.rstrip().endswith(f"For full helptext, run countdown-gym {' '.join(argv)} --help")


def test_scripts_parse_through_dataclass_cli():
    """No command or script builds an argparse parser of its own: one layer, one help layout, one error form."""
    offenders = [str(p.relative_to(ROOT)) for folder in ("countdown_gym", "baselines", "critics", "benchmarks", "scripts")
                 for p in (ROOT / folder).rglob("*.py") if "import argparse" in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_console_script_usage_error_is_one_line_per_part_and_exit_2():
    r = subprocess.run([sys.executable, "-m", "countdown_gym", "leaderboard", "submit", "--seed", "x"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "countdown-gym leaderboard submit: error: " in r.stderr


@pytest.mark.parametrize(("script", "argv", "needle"), [
    ("bench_envs", ["--seconds", "0"], "--seconds must be > 0"),  # was a ZeroDivisionError after the first rounds
    ("bench_rollouts", ["--devices", "tpu"], "--devices takes cpu, cuda or cuda:N"),  # was torch's RuntimeError
    ("bench_reasoning_gym", ["--preset", "nope"], "unknown preset 'nope'"),  # was the dataset's ValueError traceback
    ("bench_reasoning_gym", ["--split", "nope"], "unknown split 'nope'"),
    # were every client's error ("invalid literal for int() with base 10: '8000/x'") after the clients had started
    *(("bench_server", ["--url", url], "--url must be http://HOST:PORT") for url in (
        "http://127.0.0.1:8000/x", "127.0.0.1:8000", "https://127.0.0.1:8000", "http://127.0.0.1", "http://h:port",
        "http://h:99999", "http://u@h:8000", "http://h:8000/?q")),
])
def test_benchmark_scripts_refuse_bad_options_as_usage_errors(script, argv, needle, monkeypatch, capsys):
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    with pytest.raises(SystemExit) as exc:
        importlib.import_module(script).main(argv)
    assert exc.value.code == 2 and needle in capsys.readouterr().err

def test_an_interrupted_benchmark_report_keeps_the_old_one(tmp_path, monkeypatch):
    """bench_core, bench_envs, bench_multiturn, bench_rollouts --json and exploit_table wrote their report in place
    (bench_envs, bench_multiturn and exploit_table a committed doc): Ctrl-C or a full disk mid-write left it torn."""
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench, out = importlib.import_module("bench_multiturn"), tmp_path / "report.md"
    out.write_text("the old report\n")

    def torn(self, text, *args, **kwargs):
        Path.write_bytes(self, text[:10].encode())
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(KeyboardInterrupt):
        bench.main(["--repeats", "1", "--out", str(out)])
    assert out.read_text() == "the old report\n" and [p.name for p in tmp_path.iterdir()] == ["report.md"]


@pytest.mark.parametrize(("script", "argv", "work"), [("bench_multiturn", [], "load_split"), ("bench_envs", [], "run_single"),
                                                     ("bench_rollouts", ["--json"], "measure"),
                                                     ("bench_rollouts", ["--profile"], "measure")])
def test_a_benchmark_report_that_cannot_be_written_fails_before_the_run(script, argv, work, monkeypatch):
    """bench_core, bench_envs and bench_multiturn found a --out they could not write (bench_rollouts a --profile)
    only after the whole measurement (minutes)."""
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module(script)
    monkeypatch.setattr(bench, work, lambda *a, **k: pytest.fail("measured before checking the report's path"))
    with pytest.raises(SystemExit, match="/proc/nope/r.md: cannot write there"):
        bench.main([*(argv or ["--out"]), "/proc/nope/r.md"])


def test_bench_server_reads_a_url_with_a_trailing_slash(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from bench_server import Options

    assert Options(url="http://127.0.0.1:8000/").url == "http://127.0.0.1:8000"
    assert Options(url="http://[::1]:8000").url == "http://[::1]:8000"


# ---- Ctrl-C ------------------------------------------------------------------------------------------------------


def _interrupt_when_working(argv: list[str], tmp_path: Path) -> tuple[int, str]:
    """Run ``python -m countdown_gym *argv``, send SIGINT to its process group (as Ctrl-C in a terminal does) once
    it has written its first progress output, and return its exit code and stderr."""
    import os
    import signal

    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err:
        p = subprocess.Popen([sys.executable, "-m", "countdown_gym", *argv], stdout=subprocess.DEVNULL, stderr=err,
                             cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + 120
        while p.poll() is None and not err_path.stat().st_size and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        os.killpg(p.pid, signal.SIGINT)
        code = p.wait(60)
    return code, err_path.read_text()


@pytest.mark.parametrize("argv", [["leaderboard", "score", "--dir", "{tmp}/lb"], ["splits"],
                                  ["export", "--format", "jsonl", "--out", "{tmp}/export"],
                                  ["audit", "{tmp}/slow.py:reward"]])
def test_ctrl_c_is_one_line_and_exit_code_130(argv, tmp_path):
    import shutil

    shutil.copytree(ROOT / "leaderboard", tmp_path / "lb")
    # a reward function slow enough that Ctrl-C lands while the audit works (the shipped verifier ends in under a second)
    (tmp_path / "slow.py").write_text("import time\n\ndef reward(completion, numbers, target):\n    time.sleep(0.2)\n    return 0.0\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, err = _interrupt_when_working(argv, tmp_path)
    assert code == 130 and "Traceback" not in err, err
    assert err.rstrip().endswith(f"countdown-gym {' '.join(argv[:2]) if argv[0] == 'leaderboard' else argv[0]}: interrupted")


def test_ctrl_c_during_check_is_one_line(monkeypatch, capsys):
    import countdown_gym.leaderboard.__main__ as lb

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lb, "score_directory", interrupted)
    assert main(["leaderboard", "check", "--dir", str(ROOT / "leaderboard")]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "countdown-gym leaderboard check: interrupted"


@contextlib.contextmanager
def closed_stderr():
    """Standard error a pipe whose reader left (``2>&1 | head -0``)."""
    read, write = os.pipe()
    os.close(read)
    with open(write, "w") as stream, contextlib.redirect_stderr(stream):
        try:
            yield
        finally:  # what the stream still buffers goes nowhere when it closes
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, write)
            os.close(null)


@pytest.mark.parametrize("argv", [["bogus"], ["leaderboard", "bogus"], ["leaderboard", "check", "--bad"],
                                  *([name, "--bad"] for name in COMMANDS)])
def test_an_error_line_into_a_closed_pipe_exits_141(argv, capsys):
    """A usage error whose line could not be written (stderr a closed pipe) was a BrokenPipeError traceback (lost)
    and exit code 1; it is 141, as for standard output."""
    with closed_stderr():
        assert main(argv) == 141


def test_serve_usage_error_into_a_closed_pipe_exits_141():
    """``countdown-gym serve --bad 2>&1 | head -0``: exit code 141, as a closed standard output gives."""
    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run([sys.executable, "-m", "countdown_gym", "serve", "--bad"], stdout=write, stderr=write,
                           cwd=ROOT, timeout=120)
    finally:
        os.close(write)
    assert r.returncode == 141


def test_ctrl_c_with_stderr_closed_is_still_130(monkeypatch, capsys):
    import countdown_gym.leaderboard.__main__ as lb

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lb, "score_directory", interrupted)
    with closed_stderr():
        assert main(["leaderboard", "check", "--dir", str(ROOT / "leaderboard")]) == 130


@pytest.mark.parametrize("command", ["splits", "difficulty"])
def test_write_where_the_data_folder_cannot_be_written_is_one_line_and_1(command, tmp_path, monkeypatch, capsys):
    """``splits --write`` / ``difficulty --write`` in a package folder that cannot be written (a read-only install;
    here a file where the folder should be) was an OSError traceback; now one error line and exit code 1."""
    import countdown_gym.cli.difficulty as difficulty
    import countdown_gym.cli.splits as splits
    from countdown_gym.game.problem import Problem

    (tmp_path / "data").write_text("a file, not a folder")
    problems = [Problem((6, 2, 5, 3), 8, id="tinyzero/test/0")]
    monkeypatch.setattr(splits, "SPLIT_SPEC", {"tinyzero": None})
    monkeypatch.setattr(splits, "build_splits", lambda preset: {"test": problems})
    monkeypatch.setattr(splits, "split_path", lambda preset, split: tmp_path / "data" / f"{split}.jsonl")
    monkeypatch.setattr(difficulty, "load_split", lambda preset, split: problems)
    monkeypatch.setattr(difficulty, "labels_path", lambda preset, split: tmp_path / "data" / f"{split}.jsonl")
    assert main([command, "--write", *(["--presets", "tinyzero"] if command == "difficulty" else [])]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(f"countdown-gym {command}: error: "), err
    assert str(tmp_path / "data") in err, err


def test_difficulty_labels_that_differ_are_an_error_line_on_stderr(monkeypatch, capsys):
    """``countdown-gym difficulty`` printed 'these labels do not match the shipped files' on standard output, with
    no 'error:' form (so ``> out.txt`` hid it); now the one error-line form on stderr, exit code 1."""
    import countdown_gym.cli.difficulty as difficulty
    from countdown_gym.game.problem import Problem

    monkeypatch.setattr(difficulty, "load_split", lambda preset, split: [Problem((6, 2, 5, 3), 8, id="tinyzero/x/0")])
    assert main(["difficulty", "--presets", "tinyzero"]) == 1
    out, err = capsys.readouterr()
    assert "do not match" not in out
    assert err.splitlines()[-1] == ("countdown-gym difficulty: error: these labels do not match the shipped files: "
                                    "tinyzero/train, tinyzero/validation, tinyzero/test"), err  # after the progress bars


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_submit_refuses_an_sb3_model_that_is_not_a_file_without_opening_it(kind, tmp_path, capsys):
    import os

    model = {"device": Path("/dev/zero"), "folder": tmp_path}.get(kind, tmp_path / "model.zip")
    if kind == "fifo":
        os.mkfifo(model)  # loading it would wait for a writer forever
    start = time.perf_counter()
    usage_error(["leaderboard", "submit", "--sb3", str(model), "--out", str(tmp_path / "x.jsonl"), *META], capsys,
                "not a saved model (a .zip file)")
    assert time.perf_counter() - start < 20


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["leaderboard", "--help"], ["audit", "--help"],
                                  ["leaderboard", "check", "--dir", str(ROOT / "leaderboard")]])
def test_standard_output_that_cannot_be_written_is_one_error_line(argv, tmp_path):
    """``> /dev/full`` was a traceback (OSError) from print; a pipe the reader closed (``| head``) exits quietly with
    141 (128 + SIGPIPE, as a shell reports a Unix tool stopped so), not 0: a run cut short is no success."""
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "countdown_gym", *argv], stdout=full, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert r.stderr.strip().endswith("error: cannot write to standard output: No space left on device"), r.stderr
    p = subprocess.Popen([sys.executable, "-m", "countdown_gym", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=ROOT)
    p.stdout.close()  # the reader is gone before the first line
    err = p.stderr.read().decode()
    assert p.wait(120) == 141 and "Traceback" not in err and "Exception ignored" not in err, err


def _tear_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Path.write_text from now on writes ten characters and is interrupted (Ctrl-C mid-write)."""
    def torn(self, text, *args, **kwargs):
        Path.write_bytes(self, text[:10].encode())
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", torn)


def test_interrupted_script_outputs_keep_the_old_ones(tmp_path, monkeypatch):
    """scripts/check_floors.py's versions.txt and scripts/checkpoint_ranking.py's --out were written in place: Ctrl-C
    or a full disk mid-write left them torn."""
    import importlib
    import types

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    floors, ranking = importlib.import_module("check_floors"), importlib.import_module("checkpoint_ranking")
    versions, out = tmp_path / "versions.txt", tmp_path / "ranking.json"
    versions.write_text("the old versions\n")
    out.write_text("the old ranking\n")
    monkeypatch.setattr(floors.subprocess, "run", lambda *a, **k: types.SimpleNamespace(stdout="numpy==1.26.0\n", returncode=0))
    monkeypatch.setattr(ranking, "play", lambda path, problems: [i % 3 == 0 for i in range(len(problems))])
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
    monkeypatch.setattr(sys, "argv", ["checkpoint_ranking.py", "--runs", str(tmp_path / "a"), str(tmp_path / "b"),
                                      "--out", str(out)])
    _tear_writes(monkeypatch)
    assert floors.main(["--out", str(tmp_path)]) == 130
    with pytest.raises(KeyboardInterrupt):
        ranking.main()
    assert versions.read_text() == "the old versions\n" and out.read_text() == "the old ranking\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "ranking.json", "versions.txt"]
