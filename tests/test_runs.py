"""The run kit of the training scripts (countdown_gym/runkit/runs.py): run directory, options, metrics log, curves, stop."""

from __future__ import annotations

import csv
import doctest
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
from no_hang import no_hang

from countdown_gym.runkit import runs
from countdown_gym.runkit.runs import MetricsLog, Panel, StopRequest, plot_curves, prepare_run, truncate_rows


@dataclass
class Opts:
    lr: float = 1e-3
    steps: int = 10
    out: str = ""


def test_module_doctest() -> None:
    result = doctest.testmod(runs)
    assert result.attempted and not result.failed  # an example that is gone tests nothing


def test_prepare_run_refuses_a_fresh_start_over_a_kept_run(tmp_path: Path) -> None:
    out = prepare_run(tmp_path / "r", "--out", Opts(), resume=False)
    assert json.loads((out / "options.json").read_text()) == {"lr": 1e-3, "steps": 10, "out": ""}
    with pytest.raises(SystemExit, match="holds a run already: --resume continues it; to start over use another --out"):
        prepare_run(tmp_path / "r", "--out", Opts(), resume=False)
    assert prepare_run(tmp_path / "r", "--out", Opts(steps=20), resume=True, may_change=("steps",)) == out
    assert json.loads((out / "options.json").read_text())["steps"] == 20  # what runs now is recorded


def test_prepare_run_markers_and_resume_check(tmp_path: Path) -> None:
    (tmp_path / "r" / "checkpoints").mkdir(parents=True)
    (tmp_path / "r" / "checkpoints" / "model_64_steps.zip").write_bytes(b"")
    with pytest.raises(SystemExit, match="holds a run already"):  # a checkpoint without options.json counts too
        prepare_run(tmp_path / "r", "--run-name", Opts(), resume=False, markers=("checkpoints/model_*_steps.zip",))
    prepare_run(tmp_path / "r", "--out", Opts(), resume=True)
    with pytest.raises(SystemExit, match=r"--resume: .* was trained with --lr 0.001 \(now 0.01\); resume with the same"):
        prepare_run(tmp_path / "r", "--out", Opts(lr=1e-2), resume=True)
    # a --resume that finds no checkpoint starts afresh: its options are not compared
    prepare_run(tmp_path / "r", "--out", Opts(lr=1e-2), resume=True, resuming=False)


def test_prepare_run_reads_older_options_and_waits_for_every_process(tmp_path: Path) -> None:
    out = tmp_path / "r"
    out.mkdir()
    (out / "options.json").write_text(json.dumps({"lr": 1e-3, "out": ""}))  # saved before --steps existed
    with pytest.raises(SystemExit, match=r"was trained with --steps 10 \(now 20\)"):
        prepare_run(out, "--out", Opts(steps=20), resume=True, saved_as=lambda saved: {"steps": 10, **saved})
    calls: list[str] = []
    prepare_run(out, "--out", Opts(), resume=True, saved_as=lambda saved: {"steps": 10, **saved},
                barrier=lambda: calls.append("wait"), write=False)  # another process of a distributed run
    assert calls == ["wait", "wait"] and json.loads((out / "options.json").read_text()) == {"lr": 1e-3, "out": ""}
    prepare_run(out, "--out", Opts(), resume=True, saved_as=lambda saved: None)  # nothing to compare
    assert json.loads((out / "options.json").read_text())["steps"] == 10


def test_resume_over_another_scripts_run_says_so(tmp_path: Path) -> None:
    """critics.train --resume over a run whose options.json llm_sft.py wrote said 'was trained with --steps 6000 (now
    4), --batch-size 16 (now 256), ...', as if the flags were at fault; with no checkpoint of its own there, it wrote
    its options.json over the other's and trained into that directory."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "options.json").write_text(json.dumps({"lr": 2e-3, "out": "", "fresh_problems": 1, "init_from": "",
                                                  "dead_ends": [0], "probe": 1}))
    with pytest.raises(SystemExit, match=r"--resume: .*r holds another script's run: its options.json has 'fresh_problems', "
                       r"'init_from', 'dead_ends' and 1 more, which this script does not take; use another --out or delete"):
        prepare_run(out, "--out", Opts(), resume=True)
    (out / "options.json").write_text(json.dumps({"lr": 1e-3, "steps": 10, "out": "", "gone": 1}))
    prepare_run(out, "--out", Opts(), resume=True)  # this script's older run, an option since removed: resumed
    other = json.dumps({"lr": 2e-3, "out": "", "fresh_problems": 1})
    (out / "options.json").write_text(other)
    with pytest.raises(SystemExit, match="holds another script's run"):  # --resume, no checkpoint: was written over
        prepare_run(out, "--out", Opts(), resume=True, resuming=False)
    assert (out / "options.json").read_text() == other


def test_run_directory_that_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit, match="--out .*file/run: cannot write there"):
        prepare_run(tmp_path / "file" / "run", "--out", Opts(), resume=False)


def test_metrics_log_appends_and_truncates_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    log = MetricsLog(path)
    log.append({"step": 1, "loss": 0.5, "val": ""})
    log.append({"step": 2, "loss": 0.25, "val": 0.5})
    log.append({"step": 3, "loss": 0.125, "val": "", "extra": 7})  # a new column rewrites the header once
    rows = list(csv.DictReader(path.open()))
    assert [r["step"] for r in rows] == ["1", "2", "3"] and rows[2]["extra"] == "7" and rows[0]["extra"] == ""
    again = MetricsLog(path, resume_step=2)  # resumed from the checkpoint of step 2: step 3 is redone
    assert again.rows == [{"step": 1, "loss": 0.5, "val": "", "extra": ""}, {"step": 2, "loss": 0.25, "val": 0.5, "extra": ""}]
    assert [r["step"] for r in csv.DictReader(path.open())] == ["1", "2"]
    again.append({"step": 3, "loss": 0.1, "val": "", "extra": 1})
    assert [r["step"] for r in csv.DictReader(path.open())] == ["1", "2", "3"]
    assert [r["step"] for r in again.rows] == [1, 2, 3]
    MetricsLog(path)  # a fresh run: a fresh log
    assert not path.exists()
    path.write_bytes(b"\xef\xbb\xbfstep,loss\n1,0.5\n9,0.25\n")  # saved by a spreadsheet: a byte-order mark
    assert MetricsLog(path, resume_step=2).rows == [{"step": 1, "loss": 0.5}]  # was: no "step" column, step 9 kept


def test_metrics_log_jsonl_and_no_write(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    log = MetricsLog(path)
    for s in (50, 100, 150):
        log.append({"step": s, "loss": 1.0 / s})
    assert MetricsLog(path, resume_step=100).rows == [{"step": 50, "loss": 0.02}, {"step": 100, "loss": 0.01}]
    assert len(path.read_text().splitlines()) == 2
    quiet = MetricsLog(tmp_path / "other.csv", write=False)
    quiet.append({"step": 1})
    assert quiet.rows == [{"step": 1}] and not (tmp_path / "other.csv").exists()


@pytest.mark.parametrize("name", ["metrics.csv", "log.jsonl"])
def test_metrics_log_reads_the_log_once_on_resume(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume read the whole log twice (to truncate it, then again for its rows): a long run's log, twice."""
    log = MetricsLog(tmp_path / name)
    for s in (1, 2, 3):
        log.append({"step": s, "loss": 1 / s})
    reads: list[Path] = []
    read = runs._rows_upto
    monkeypatch.setattr(runs, "_rows_upto", lambda path, *a: reads.append(path) or read(path, *a))
    assert [r["step"] for r in MetricsLog(tmp_path / name, resume_step=2).rows] == [1, 2] and len(reads) == 1
    assert [r["step"] for r in MetricsLog(tmp_path / name, resume_step=2, write=False).rows] == [1, 2] and len(reads) == 2


def test_truncate_rows_of_a_foreign_csv(tmp_path: Path) -> None:
    path = tmp_path / "progress.csv"
    path.write_text("time/total_timesteps,loss\n64,1\n128,2\n,3\n192,4\n")
    truncate_rows(path, 128, "time/total_timesteps")
    assert path.read_text().splitlines() == ["time/total_timesteps,loss", "64,1", "128,2", ",3"]
    truncate_rows(tmp_path / "missing.csv", 1)  # nothing to do


def test_a_fifo_or_folder_in_a_run_is_refused_never_opened(tmp_path: Path) -> None:
    out = prepare_run(tmp_path / "r", "--out", Opts(), resume=False)
    (out / "options.json").unlink()
    os.mkfifo(out / "options.json")  # once blocked every script's --resume for ever
    with no_hang(), pytest.raises(SystemExit, match=r"options.json is a FIFO, not the run's options \(a regular file\); fix"):
        prepare_run(out, "--out", Opts(), resume=True)
    (out / "options.json").unlink()
    (out / "options.json").symlink_to("/dev/null")
    with no_hang(), pytest.raises(SystemExit, match=r"options.json is a special file, not the run's options"):
        runs.read_options(out)
    (out / "options.json").unlink()
    (out / "options.json").mkdir()
    with pytest.raises(SystemExit, match=r"options.json is a folder, not the run's options"):
        runs.read_options(out)
    os.mkfifo(out / "metrics.csv")
    with no_hang(), pytest.raises(SystemExit, match=r"metrics.csv is not a file \(a FIFO\)"):
        MetricsLog(out / "metrics.csv", resume_step=3)
    with no_hang():
        truncate_rows(out / "metrics.csv", 3)  # not a regular file: left alone, never opened
    os.mkfifo(out / "summary.json.tmp")  # a stale temporary name: removed, not written through
    with no_hang():
        runs.write_text_atomic(out / "summary.json", "{}\n")
    assert (out / "summary.json").read_text() == "{}\n" and not (out / "summary.json.tmp").exists()


def test_options_with_a_key_twice_are_refused_naming_the_file_and_the_key(tmp_path: Path) -> None:
    """A key twice in options.json was read last-wins: a --resume compared against a value the file also contradicts."""
    out = prepare_run(tmp_path / "r", "--out", Opts(), resume=False)
    (out / "options.json").write_text('{"lr": 0.001, "steps": 10, "lr": 0.5, "out": ""}\n')
    with pytest.raises(SystemExit, match=r"r/options.json: key 'lr' appears twice in one object; fix or delete it"):
        runs.read_options(out)
    with pytest.raises(SystemExit, match=r"options.json: key 'lr' appears twice in one object"):
        prepare_run(out, "--out", Opts(), resume=True)
    (out / "options.json").write_text('{"lr": 0.001, "steps": 10, "out": "a:b"}\n')  # a colon in a value: no key twice
    assert runs.read_options(out) == {"lr": 0.001, "steps": 10, "out": "a:b"}


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    """A .run.lock link (planted in a shared folder) was opened through: its target was emptied and given the pid."""
    (tmp_path / "r").mkdir()
    (tmp_path / "precious.txt").write_text("data\n")
    (tmp_path / "r" / runs.LOCK_FILE).symlink_to(tmp_path / "precious.txt")
    with pytest.raises(SystemExit, match=r"\.run\.lock is a link, not a lock file; delete it"):
        prepare_run(tmp_path / "r", "--out", Opts(), resume=False)
    assert (tmp_path / "precious.txt").read_text() == "data\n"


def test_a_log_that_is_not_utf8_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "progress.csv"
    path.write_bytes(b"time/total_timesteps\n64\n\xff\xfe\n")
    with pytest.raises(SystemExit, match=r"progress.csv is not UTF-8 text \(byte 24\)"):
        truncate_rows(path, 64, "time/total_timesteps")
    with pytest.raises(SystemExit, match=r"progress.csv is not UTF-8 text"):
        MetricsLog(path, step="time/total_timesteps", resume_step=64, write=False)
    path.write_bytes(b"\0" * 200_000)  # what a crash may leave: NUL bytes, valid UTF-8 (was a csv.Error traceback)
    with pytest.raises(SystemExit, match=r"progress.csv is not CSV \(field larger than field limit"):
        truncate_rows(path, 64, "time/total_timesteps")
    log = tmp_path / "log.jsonl"  # a middle line not UTF-8: its byte was replaced by U+FFFD and written back
    log.write_bytes(b'{"step": 1}\n{"step": 2, "x": "\xff"}\n{"step": 3}\n{"step": 4, "x": "\xc3')
    with pytest.raises(SystemExit, match=r"log.jsonl: line 2 is not JSON \('utf-8' codec can't decode byte 0xff"):
        truncate_rows(log, 3)
    assert b"\xff" in log.read_bytes()
    log.write_bytes(b'{"step": 1}\n' + b"[" * 100_000 + b'\n{"step": 3}\n')  # was a RecursionError traceback
    with pytest.raises(SystemExit, match=r"log.jsonl: line 2 is not JSON \(maximum recursion depth"):
        truncate_rows(log, 3)
    log.write_bytes(b'{"step": 1}\n{"step": 2, "x": "\xc3')  # a torn last line, cut inside a character: dropped
    assert truncate_rows(log, 3) == [('{"step": 1}', {"step": 1})] and log.read_bytes() == b'{"step": 1}\n'


def test_plot_curves(tmp_path: Path) -> None:
    rows = [{"step": s, "loss": 1 / s, "ok": "" if s % 5 else s / 100} for s in range(1, 40)]
    plot_curves(rows, tmp_path / "c.png", [Panel("loss", {"loss": "train"}, log=True, smooth=True),
                                           Panel("success", {"ok": "greedy", "missing": "x"}, percent=True)], title="t")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_an_interrupted_plot_keeps_the_old_curves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torn_savefig) -> None:
    """Every run's curves.png was saved in place: a kill mid-save left a torn PNG; now the old one stays."""

    png, panels = tmp_path / "curves.png", [Panel("loss", {"loss": "train"})]
    plot_curves([{"step": 1, "loss": 0.5}], png, panels)
    old = png.read_bytes()

    torn_savefig()
    with pytest.raises(KeyboardInterrupt):
        plot_curves([{"step": 1, "loss": 0.4}], png, panels)
    assert png.read_bytes() == old and not list(tmp_path.glob("*.tmp"))


def test_stop_request_first_signal_asks_second_interrupts(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert "SIGTERM: stopping after this step" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before


def test_run_commands_stops_starting_runs_at_the_first_stop_request_and_passes_sigterm_on(tmp_path: Path) -> None:
    """Three 30 s commands, two at a time: a SIGTERM half a second in starts no third one, reaches the two running
    (they end at once, -15), and run_commands says it was stopped."""
    import sys
    import threading
    import time

    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    started, ended = [], []
    before = signal.getsignal(signal.SIGTERM)  # another library may have set one
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    t0 = time.monotonic()
    stopped = runs.run_commands([(sleeper, tmp_path / f"{i}.log") for i in range(3)], 2, started=started.append,
                                ended=lambda i, code: ended.append((i, code)))
    assert stopped and started == [0, 1] and sorted(ended) == [(0, -signal.SIGTERM), (1, -signal.SIGTERM)]
    assert time.monotonic() - t0 < 20 and signal.getsignal(signal.SIGTERM) is before
    assert runs.run_commands([([sys.executable, "-c", "print('hi')"], tmp_path / "hi.log")], 1) is False
    assert (tmp_path / "hi.log").read_text() == "hi\n"
    os.mkfifo(tmp_path / "fifo.log")
    with no_hang(), pytest.raises(SystemExit, match="fifo.log is a FIFO, not a log file"):
        runs.run_commands([([sys.executable, "-c", "pass"], tmp_path / "fifo.log")], 1)


def test_run_named_says_how_each_run_of_a_comparison_ended(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare_rewards.py and compare_llm_rewards.py each spelled these status words, which codes fail, and the
    error naming the failed runs."""
    import sys

    commands = [([sys.executable, "-c", f"raise SystemExit({code})"], tmp_path / f"{code}.log") for code in (0, 130, 3)]
    done: list[int] = []
    with pytest.raises(SystemExit, match=r"run\(s\) three failed"):
        runs.run_named(commands, ["zero", "stopped", "three"], 3, done=done.append)
    said = sorted(line for line in capsys.readouterr().out.splitlines() if not line.startswith("start "))
    assert said == ["stopped: stopped", f"three: FAILED (exit 3, see {tmp_path / '3.log'})", "zero: done"] and done == [0]


HOLDER = """
import sys, time
from dataclasses import dataclass
from countdown_gym.runkit.runs import prepare_run

@dataclass
class Opts:
    lr: float = 1e-3
    steps: int = 10
    out: str = ""

prepare_run(sys.argv[1], "--out", Opts(), resume=True)
print("holding", flush=True)
time.sleep(120)
"""


def test_a_second_process_training_into_a_held_directory_is_refused_until_the_first_is_gone(tmp_path: Path) -> None:
    """Two processes on one run directory would mix their checkpoints and logs. The holder's lock goes with it,
    SIGKILL included, so the next start resumes there; one process may prepare its own directory again."""
    import subprocess
    import sys

    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(SystemExit, match=rf"in use: another process \(pid {holder.pid}\) is training into it"):
            prepare_run(out, "--out", Opts(), resume=True)
        assert prepare_run(out, "--out", Opts(), resume=True, write=False) == out  # another rank's check
    finally:
        holder.kill()
        holder.wait()
    assert prepare_run(out, "--out", Opts(), resume=True) == out
    assert prepare_run(out, "--out", Opts(), resume=True) == out  # held by this process already
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / runs.LOCK_FILE).mkdir()
    with pytest.raises(SystemExit, match="is a folder, not a lock file"):
        prepare_run(tmp_path / "odd", "--out", Opts(), resume=False)


def test_a_torn_last_csv_row_is_dropped_like_a_torn_json_line(tmp_path: Path) -> None:
    """A kill during an append left '10,0.05' as '1': the CSV branch kept it as the row of step 1 (a JSONL log drops
    such a line), so a resume from step 5 kept a step that never ran."""
    path = tmp_path / "metrics.csv"
    path.write_text("step,success\r\n5,0.25\r\n1", encoding="utf-8")
    assert [r for _, r in truncate_rows(path, 100)] == [{"step": 5, "success": 0.25}]
    assert path.read_bytes() == b"step,success\r\n5,0.25\r\n"


def test_run_commands_stops_the_running_commands_when_a_callback_fails(tmp_path: Path) -> None:
    """The comparison's ended() writes a run's record; one that raised left the other runs going unattended, their
    process gone. Now they get a SIGTERM (a training script saves a checkpoint) and are waited for."""
    import sys
    import time

    pid_file = tmp_path / "pid"
    sleeper = [sys.executable, "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(30)"]
    quick = [sys.executable, "-c", f"import os, time\nwhile not os.path.exists({str(pid_file)!r}): time.sleep(0.01)"]

    def ended(i: int, code: int) -> None:
        raise SystemExit("the record could not be written")

    t0 = time.monotonic()
    with pytest.raises(SystemExit, match="record could not be written"):
        runs.run_commands([(sleeper, tmp_path / "0.log"), (quick, tmp_path / "1.log")], 2, ended=ended)
    assert time.monotonic() - t0 < 20
    with pytest.raises(ProcessLookupError):  # ended and reaped, not left sleeping
        os.kill(int(pid_file.read_text()), 0)


def test_options_that_are_a_dangling_link_are_refused_not_read_as_no_run(tmp_path: Path) -> None:
    """A dangling options.json link read as no options: --resume went on unchecked and replaced it."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "options.json").symlink_to(tmp_path / "moved.json")
    with pytest.raises(SystemExit, match=r"options.json: cannot read it \(No such file or directory\); fix or delete"):
        prepare_run(out, "--out", Opts(), resume=True)
    assert (out / "options.json").is_symlink()


def test_a_held_run_directory_leaves_no_unclosed_file_at_exit(tmp_path: Path) -> None:
    """Each held lock file was left for the interpreter to collect: one ResourceWarning per run at exit."""
    import subprocess
    import sys

    code = f"from countdown_gym.runkit.runs import hold_directory; hold_directory(__import__('pathlib').Path({str(tmp_path)!r}), 'x')"
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "ResourceWarning" not in done.stderr, done.stderr
