"""The reward comparison: a tiny run writes the table and the figure, reuses finished runs, and
refuses to mix runs of other settings."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")
from baselines import compare_rewards  # noqa: E402

TINY = ["--num-envs", "4", "--n-steps", "16", "--batch-size", "32", "--n-epochs", "1", "--hidden", "8",
        "--eval-limit", "10", "--eval-every", "32", "--eval-problems", "10"]


def test_compare_writes_table_and_figure_and_reuses_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--variants", "sparse", "oracle-perfect", "--seeds", "0", "1", "--total-timesteps", "64",
            "--workers", "1", "--out", str(tmp_path), *TINY]
    compare_rewards.main(argv)
    table = (tmp_path / "sb3_rewards.md").read_text()
    assert (tmp_path / "sb3_rewards.png").stat().st_size > 0
    rows = [line for line in table.splitlines() if line.startswith("| sparse") or line.startswith("| oracle-perfect")]
    assert len(rows) == 2
    assert any(word in rows[1] for word in ("within seed noise", "better", "worse"))
    assert "64 environment steps per run" in table and "sb3_baseline.md" in table
    png = (tmp_path / "sb3_rewards.png").read_bytes()
    assert (tmp_path / "sb3_rewards_curves.csv").read_text().startswith("variant,seed,step,success\n")
    compare_rewards.main(["--out", str(tmp_path), "--eval-problems", "10", "--replot"])  # redrawn from sb3_rewards_curves.csv alone: the same figure
    assert (tmp_path / "sb3_rewards.png").read_bytes() == png
    mtime = (tmp_path / "runs" / "sparse-s0" / "result.json").stat().st_mtime
    compare_rewards.main(argv)  # finished runs are reused, not retrained
    assert (tmp_path / "runs" / "sparse-s0" / "result.json").stat().st_mtime == mtime
    with pytest.raises(SystemExit, match="other settings"):
        compare_rewards.main([*argv, "--hidden", "16"])
    with pytest.raises(SystemExit, match="more than --total-timesteps 32"):  # never report a 64-step run as 32
        compare_rewards.main([*argv[:7], "32", *argv[8:]])


def test_versus_calls_a_difference_only_beyond_two_standard_errors() -> None:
    assert compare_rewards.versus([0.78, 0.81, 0.86], [0.804, 0.805, 0.842]) == "+0.000 (within seed noise)"
    assert compare_rewards.versus([0.90, 0.91, 0.92], [0.50, 0.51, 0.52]) == "+0.400 (better)"
    assert compare_rewards.versus([0.50, 0.51, 0.52], [0.90, 0.91, 0.92]) == "-0.400 (worse)"
    sparse = [0.5, 0.6]
    assert compare_rewards.versus(sparse, sparse) == ""
    assert compare_rewards.versus([0.9], [0.1]) == "+0.800 (one seed: noise unknown)"  # not "within seed noise"
    assert compare_rewards.versus([0.9], [0.1, 0.12, 0.11]) == "+0.790 (one seed: noise unknown)"
    assert compare_rewards.versus([0.6, 0.6], [0.5, 0.5]) == "+0.100 (better)"  # no spread at all: a real difference
    assert compare_rewards.versus([0.5, 0.5], [0.5, 0.5]) == "+0.000 (within seed noise)"
    # a difference of 0.00255 with 2 SE 0.00269 was rounded to 0.003 before the comparison: called "better"
    assert compare_rewards.versus([0.10255, 0.10445], [0.1, 0.1019]) == "+0.003 (within seed noise)"


def test_bad_flags_are_usage_errors_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--seeds", "0", "--total-timesteps", "64", "--workers", "1", "--out", str(tmp_path / "c"), *TINY]
    for argv, said in ((["--variants", "sparse", "no-such-reward", *base], "--variants must be among"),  # not --reward
                       (["--variants", "sparse", *base, "--n-epochs", "zero"], "--n-epochs"),
                       (["--variants", "sparse", *base, "--workers", "0"], "--workers"),
                       (["--variants", "sparse", "sparse", *base], "must not repeat"),  # two runs in one folder at once
                       (["--variants", "sparse", *base, "--seeds", "1", "1"], "must not repeat"),
                       (["--variants", "sparse", *base, "--seeds=-1"], "--seed must be in [0, 2**31)")):  # a failed run
        with pytest.raises(SystemExit) as exc:
            compare_rewards.main(argv)
        assert exc.value.code == 2 and said in capsys.readouterr().err
    for flag in (["--seed", "5"], ["--output_dir=x"], ["--no-resume"]):  # every run would share it: seeds all the same
        with pytest.raises(SystemExit, match=f"{flag[0]} would override what the comparison sets for each run"):
            compare_rewards.main(["--variants", "sparse", *base, *flag])
    assert not (tmp_path / "c").exists()  # nothing was started


def test_ctrl_c_stops_the_comparison_with_one_line_and_starts_no_more_runs(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) while the first of two runs trains: it saves a
    checkpoint or stops before training (each one line), the second never starts, exit code 130, no traceback
    anywhere (it was a KeyboardInterrupt traceback, and the queued runs still ran)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    argv = [sys.executable, str(root / "baselines" / "compare_rewards.py"), "--variants", "sparse", "oracle-perfect",
            "--seeds", "0", "--total-timesteps", "1000000", "--workers", "1", "--out", str(tmp_path), *TINY]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "runs" / "sparse-s0" / "options.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=120)
    log = (tmp_path / "runs" / "sparse-s0.log").read_text()
    assert p.returncode == 130 and "Traceback" not in err + log, err + log
    assert "stopped at" in log or "interrupted" in log, log
    assert "start sparse-s0" in out and "oracle-perfect" not in out and not (tmp_path / "runs" / "oracle-perfect-s0").exists()


def test_a_bad_reference_file_is_refused_before_any_run(tmp_path: Path) -> None:
    """--reference was read after every run had trained: a missing, malformed or FIFO file failed (a traceback, or a
    blocked read) at the end."""
    import os

    base = ["--variants", "sparse", "--seeds", "0", "--total-timesteps", "64", "--out", str(tmp_path / "c"), *TINY]
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "no_command.json").write_text('{"a": {"rate": 0.5}}')
    (tmp_path / "text.json").write_text("rate 0.5")
    (tmp_path / "nan.json").write_text('{"a": {"rate": NaN, "command": "x"}}')  # was a row "| reference: a | nan |"
    (tmp_path / "twice.json").write_text('{"a": {"rate": 0.9, "command": "x", "rate": 0.5}}')  # was read last-wins
    os.mkfifo(tmp_path / "fifo.json")
    for name in ("missing.json", "list.json", "no_command.json", "text.json", "nan.json", "twice.json", "fifo.json"):
        with pytest.raises(SystemExit, match=f"--reference {tmp_path / name}: not a readable JSON file"):
            compare_rewards.main([*base, "--reference", str(tmp_path / name)])
    assert not (tmp_path / "c").exists()  # nothing was started


def _finished_sparse_run(tmp_path: Path) -> None:
    """runs/sparse-s0 as a finished run leaves it (reused: nothing trains)."""
    import json

    run = tmp_path / "runs" / "sparse-s0"
    run.mkdir(parents=True)
    (run / "curve.csv").write_text("steps,validation_success,seconds\n32,0.25,0.1\n")
    (run / "result.json").write_text(json.dumps({
        "run": "sparse-s0", "reward": "sparse", "seed": 0, "total_timesteps": 64, "success_rate": 0.25, "eval_split": "test",
        "eval_problems": 10, "train_seconds": 1.0, "env_steps_per_second": 64.0}))


def test_one_seed_has_no_std_in_the_table(tmp_path: Path) -> None:
    """One seed a variant showed "± 0.000", a spread it cannot measure (finished runs are reused: nothing trains)."""

    _finished_sparse_run(tmp_path)
    compare_rewards.main(["--variants", "sparse", "--seeds", "0", "--total-timesteps", "64", "--out", str(tmp_path), *TINY])
    assert "| sparse | 0.250 (one seed: std undefined) | 0.250 |" in (tmp_path / "sb3_rewards.md").read_text()


def test_a_damaged_result_of_a_finished_run_is_one_error_naming_it(tmp_path: Path) -> None:
    """A cut-off or hand-edited runs/<run>/result.json was a JSONDecodeError traceback before any run started."""
    run = tmp_path / "runs" / "sparse-s0"
    run.mkdir(parents=True)
    (run / "result.json").write_text('{"run": "sparse-s0", "rew')
    with pytest.raises(SystemExit, match=r"sparse-s0/result.json is not JSON"):
        compare_rewards.main(["--variants", "sparse", "--seeds", "0", "--total-timesteps", "64", "--out", str(tmp_path), *TINY])


@pytest.mark.parametrize(("key", "value"), [("success_rate", float("nan")), ("success_rate", "0.25"), ("success_rate", 2.0),
                                            ("success_rate", None), ("train_seconds", None), ("total_timesteps", "64"),
                                            ("reward", "critic"), ("env_steps_per_second", float("inf")),
                                            ("train_seconds", 10**400)])  # past a float: an OverflowError in the table
def test_a_hand_edited_result_of_a_finished_run_is_one_error_naming_it(tmp_path: Path, key: str, value: object) -> None:
    """A finished run's result.json with a success_rate NaN, "0.25", missing or a train_seconds null was a traceback
    from statistics.mean after every run; 2.0, another reward's result or Infinity steps/s went into the table."""
    import json

    _finished_sparse_run(tmp_path)
    path = tmp_path / "runs" / "sparse-s0" / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    with pytest.raises(SystemExit, match=r"sparse-s0/result.json is not a result of run sparse-s0"):
        compare_rewards.main(["--variants", "sparse", "--seeds", "0", "--total-timesteps", "64", "--out", str(tmp_path), *TINY])


def test_an_interrupted_table_write_keeps_the_old_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sb3_rewards.md was written in place: a kill mid-write left a torn table; now the old one stays."""

    _finished_sparse_run(tmp_path)
    argv = ["--variants", "sparse", "--seeds", "0", "--total-timesteps", "64", "--out", str(tmp_path), *TINY]
    compare_rewards.main(argv)
    old = (tmp_path / "sb3_rewards.md").read_text()
    write = Path.write_text

    def torn(self: Path, text: str, *a, **k) -> int:
        if ".md" not in self.name:
            return write(self, text, *a, **k)
        write(self, text[:20], *a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(KeyboardInterrupt):
        compare_rewards.main(argv)
    assert (tmp_path / "sb3_rewards.md").read_text() == old and not list(tmp_path.glob("*.tmp"))
