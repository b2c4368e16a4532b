"""The exploit corpus, `countdown-gym audit` and the reward-hack table of docs/verifier.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from countdown_gym import Problem, Rules, verify
from countdown_gym.cli import main as cli_main
from countdown_gym.cli.audit import (
    AuditError,
    Outcome,
    corpus_path,
    load_exploits,
    main,
    run_audit,
    summarize,
    summarize_exploits,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from peer_rewards import reasoning_gym_reward, tinyzero_reward  # noqa: E402

REWARDS = '''
import time

def hang_on_power(completion, numbers, target):
    if "**" in completion:
        while True:
            time.sleep(1)
    return 1.0 if "21 + 16 - 17 + 26" in completion else 0.0

def raises(completion, numbers, target):
    raise ZeroDivisionError("boom")

def exits(completion, numbers, target):
    raise SystemExit(3)

def nan(completion, numbers, target):
    return float("nan")

def text(completion, numbers, target):
    return "1.0"

def infinite(completion, numbers, target):
    return float("inf")

def allocates(completion, numbers, target):
    return float(len(bytearray(3 * 2**30)))

def accept_all(completion, numbers, target):
    print("noise")
    return 1.0

not_callable = 3
'''


@pytest.fixture
def rewards(tmp_path: Path) -> Path:
    path = tmp_path / "audit_rewards.py"
    path.write_text(REWARDS)
    return path


def test_corpus_covers_the_hacks_and_this_verifier_gives_each_row_its_recorded_reason() -> None:
    rows = load_exploits()
    cats = {r.category for r in rows}
    assert {"power", "factorial", "root", "floor_division", "concatenation", "reused_number", "foreign_number",
            "unicode_digit", "several_answers", "text_after_answer", "huge_number", "empty_answer", "control"} <= cats
    assert any(r.completion.endswith("<answer>9**9**9**9</answer>") for r in rows)
    for r in rows:
        assert (r.verdict == "accept") == (r.category == "control"), r.id
        for rules in (Rules.longproc(), Rules.tinyzero()):
            v = verify(Problem(r.numbers, r.target, rules), r.completion)
            assert v.correct == (r.verdict == "accept"), (r.id, rules.name, v.reason)
        assert verify(Problem(r.numbers, r.target), r.completion).reason == r.reason, r.id


def test_the_committed_table_matches_a_fresh_run_of_this_verifier() -> None:
    doc = (ROOT / "docs" / "verifier.md").read_text(encoding="utf-8")
    table = doc.split("<!-- exploit-table:start")[1].split("<!-- exploit-table:end -->")[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[2:]  # below the --- line
    col = header.index("countdown-gym")
    committed = {r[0].split(" (")[0].strip("*"): r[col].strip("*") for r in body}
    outcomes = run_audit("countdown_gym.cli.audit:verify_reward")
    fresh = {r.category: r.cell() for r in summarize(outcomes)}
    fresh["all exploits"] = summarize_exploits(outcomes).cell()
    assert committed == fresh
    assert fresh["all exploits"] == f"0/{sum(r.verdict == 'reject' for r in load_exploits())}"


def test_a_hanging_call_is_cut_at_the_time_limit_and_the_audit_goes_on(rewards: Path) -> None:
    rows = [r for r in load_exploits() if r.id in ("power-01", "power-02", "control-01")]
    out = run_audit(f"{rewards}:hang_on_power", rows, timeout=1.0)
    assert [o.status for o in out] == ["ok", "hung", "hung"]  # control first in the file, then the two powers
    assert out[0].reward == 1.0
    out = run_audit(f"{rewards}:hang_on_power", [rows[1], rows[0]], timeout=1.0)
    assert [o.status for o in out] == ["hung", "ok"]  # a fresh worker answers after a hang


def test_raising_and_memory_hungry_rewards_are_findings(rewards: Path) -> None:
    rows = load_exploits()[:2]
    out = run_audit(f"{rewards}:raises", rows, timeout=5)
    assert {o.status for o in out} == {"raised"} and "ZeroDivisionError: boom" in out[0].error
    out = run_audit(f"{rewards}:allocates", rows[:1], timeout=5, memory_mb=256)
    assert out[0].status == "raised" and "MemoryError" in out[0].error
    for fn, shown in (("nan", "nan"), ("text", "'1.0'"), ("infinite", "inf")):  # no reward, never accepted
        out = run_audit(f"{rewards}:{fn}", rows[:1], timeout=5)
        assert out[0].status == "raised" and out[0].error == f"returned {shown}, not a finite number", out[0]
    out = run_audit(f"{rewards}:exits", rows, timeout=5)  # in the warm-up call too: rows raised, not a dead worker
    assert {o.status for o in out} == {"raised"} and "SystemExit: 3" in out[0].error


def test_cli_exit_codes(rewards: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["audit", "countdown_gym.cli.audit:verify_reward", "--no-progress", "--check"]) == 0
    out = capsys.readouterr().out
    assert "exploits accepted: 0/65" in out and "correct controls accepted: 7/7" in out and "noise" not in out
    assert main([f"{rewards}:accept_all", "--no-progress"]) == 0
    assert main([f"{rewards}:accept_all", "--no-progress", "--check"]) == 1
    assert "power-01" in capsys.readouterr().out
    for bad in (["no_such_module_xyz:fn"], [f"{rewards}:not_callable"], [f"{rewards}:missing"], ["nocolon"],
                ["countdown_gym.cli.audit:verify_reward", "--timeout", "0"]):
        assert main(bad) == 2, bad
        assert "usage: countdown-gym audit" in capsys.readouterr().err
    assert main([]) == 2  # no REWARD_FN
    assert "usage: countdown-gym audit" in capsys.readouterr().err
    broken = rewards.parent / "broken_rewards.py"
    broken.write_text("import no_such_dependency_xyz\n")
    assert main([f"{broken}:fn", "--no-progress"]) == 1
    assert "No module named 'no_such_dependency_xyz'" in capsys.readouterr().err


def test_out_of_range_limits_are_usage_errors_not_tracebacks(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--timeout", "3e6"], ["--timeout", "1e308"], ["--memory-mb", "99999999999999"]):
        assert main(["countdown_gym.cli.audit:verify_reward", "--no-progress", *bad]) == 2, bad
        err = capsys.readouterr().err
        assert "usage: countdown-gym audit" in err and "Traceback" not in err, err
    with pytest.raises(ValueError, match="at most"):
        run_audit("countdown_gym.cli.audit:verify_reward", load_exploits()[:1], timeout=1e308)


def test_a_huge_memory_cap_is_no_cap(rewards: Path) -> None:
    out = run_audit(f"{rewards}:accept_all", load_exploits()[:1], timeout=30, memory_mb=2**30)
    assert out[0].status == "ok" and out[0].reward == 1.0


def test_an_unwritable_json_path_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:2]) + "\n")
    for path in ("/dev/full", str(tmp_path / "ro" / "x.json")):
        if path != "/dev/full":
            (tmp_path / "ro").mkdir()
            (tmp_path / "ro" / "x.json").mkdir()  # a folder where the file should be, checked before the audit
        code = main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--corpus", str(corpus), "--json", path])
        err = capsys.readouterr().err
        assert code in (1, 2) and "Traceback" not in err and "--json" in err, err
        assert err.strip().count("\n") <= 2


def test_a_json_fifo_nobody_reads_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(corpus_path().read_text().splitlines()[:2]) + "\n")
    os.mkfifo(tmp_path / "out.json")  # opening it for writing would wait for a reader forever
    code = main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--corpus", str(corpus), "--json",
                 str(tmp_path / "out.json")])
    assert code == 1 and "a FIFO that nothing reads" in capsys.readouterr().err


def test_a_fifo_corpus_is_refused_without_opening_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(AuditError, match="a FIFO, not a regular file"):
        load_exploits(fifo)
    assert main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--corpus", str(fifo)]) == 1
    assert "FIFO" in capsys.readouterr().err
    with pytest.raises(AuditError, match="a folder"):
        load_exploits(tmp_path)


def test_a_malformed_corpus_is_refused_by_line(tmp_path: Path) -> None:
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"id": "a", "category": "x", "numbers": [1, 2], "target": 3, "completion": "1+2", '
                   '"verdict": "maybe", "reason": "ok"}\n')
    with pytest.raises(AuditError, match="c.jsonl:1"):
        load_exploits(bad)
    bad.write_text(bad.read_text().replace('"maybe"', '"reject"').replace('"ok"', '["ok"]'))  # a list: unhashable
    with pytest.raises(AuditError, match="c.jsonl:1: .*reason a verifier code"):
        load_exploits(bad)


def test_tinyzero_restatement() -> None:
    nums, target = [2, 5, 7], 39
    assert tinyzero_reward("<think>x</think>\n<answer>2**5 + 7</answer>", nums, target) == 1.0
    assert tinyzero_reward("<answer>2*5 + 7</answer>", nums, target) == 0.1  # wrong value: the format score
    assert tinyzero_reward("<answer>2**5 + 7</answer>\nthat is all", nums, target) == 0.0  # only the last line is read
    assert tinyzero_reward("<answer>2**5 + 7 + 1</answer>", nums, target) == 0.1  # numbers differ
    assert tinyzero_reward("<answer>1</answer><answer>7 + 2**5</answer>", nums, target) == 1.0  # the last tag


def test_reasoning_gym_peer() -> None:
    pytest.importorskip("reasoning_gym")
    assert reasoning_gym_reward("<answer>3! * 4 + 7</answer>", [3, 4, 7], 31) == 1.0
    assert reasoning_gym_reward("<answer>3 * 4 + 7</answer>", [3, 4, 7], 31) == 0.05
    assert reasoning_gym_reward("no answer", [3, 4, 7], 31) == 0.01


def test_a_deep_or_surrogate_corpus_row_is_refused_by_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = ('{"id": "a", "category": "%s", "numbers": [1, 2], "target": 3, "completion": "<answer>1 + 2</answer>", '
           '"verdict": "accept", "reason": "ok"}\n')
    bad = tmp_path / "c.jsonl"
    for text, needle in (("[" * 100_000 + "\n", "nested too deeply"), (row % "\\ud800", "surrogates not allowed"),
                         (row % 'arith", "category": "other', "appears twice")):  # was read last-wins: 'other'
        bad.write_text(text)
        with pytest.raises(AuditError, match="c.jsonl:1: not a corpus row"):
            load_exploits(bad)
        assert main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--corpus", str(bad)]) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err and needle in err and err.count("\n") == 1, err


def test_ctrl_c_while_the_worker_starts_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT is ignored while the worker process starts (so that the worker inherits it ignored); a Ctrl-C in that
    window reaches the audit once it is over, instead of being dropped."""
    import multiprocessing.context
    import signal

    start = multiprocessing.context.SpawnProcess.start

    def start_and_press_ctrl_c(self):
        os.kill(os.getpid(), signal.SIGINT)  # lands while SIGINT is ignored
        return start(self)

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", start_and_press_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        run_audit("countdown_gym.cli.audit:verify_reward", load_exploits()[:1])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not multiprocessing.active_children()  # the worker started in the window was stopped



PRESS_WHILE_STARTING = """
import multiprocessing.context, os, signal, threading, time
from countdown_gym.cli.audit import load_exploits, run_audit

start = multiprocessing.context.SpawnProcess.start

def start_and_keep_pressing(self):
    start(self)

    def press():
        for _ in range(300):
            if not self.is_alive():
                return
            os.kill(self.pid, signal.SIGINT)
            time.sleep(0.01)

    threading.Thread(target=press, daemon=True).start()

multiprocessing.context.SpawnProcess.start = start_and_keep_pressing
print(*[o.status for o in run_audit("countdown_gym.cli.audit:verify_reward", load_exploits()[:3])])
"""


def test_a_ctrl_c_that_reaches_the_worker_while_it_starts_is_ignored_there() -> None:
    """Ctrl-C goes to the whole process group: the worker must not die of it (with a traceback of its own) while it
    imports. In a fresh process (the first worker also starts multiprocessing's resource tracker, which unblocked
    SIGINT), SIGINT is sent to the worker every 10 ms from the moment it exists until it is ready."""
    import subprocess

    r = subprocess.run([sys.executable, "-c", PRESS_WHILE_STARTING], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert (r.returncode, r.stdout.split(), "Traceback" in r.stderr) == (0, ["ok"] * 3, False), r.stderr


def test_ctrl_c_during_the_audit_keeps_the_earlier_json_file(tmp_path: Path, monkeypatch, capsys) -> None:
    """--json was emptied when the audit started: a Ctrl-C during the calls left an empty file where the earlier
    results were; now it is written aside and renamed once whole."""
    import json

    import countdown_gym.cli.audit as audit_mod

    path = tmp_path / "outcomes.jsonl"
    path.write_text("earlier\n")

    def pressed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(audit_mod, "run_audit", pressed)
    assert main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--json", str(path)]) == 130
    assert path.read_text() == "earlier\n" and sorted(p.name for p in tmp_path.iterdir()) == ["outcomes.jsonl"]
    ex = load_exploits()[0]
    monkeypatch.setattr(audit_mod, "run_audit", lambda *a, **k: [Outcome(ex, "ok", reward=0.0)])
    assert main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--json", str(path)]) == 0
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [ex.id]


def test_a_json_file_the_disk_cannot_hold_is_removed_not_left_torn(tmp_path: Path, monkeypatch, capsys) -> None:
    """A full disk while the rows are written left a torn --json file (half its lines); now it is removed, and the
    error says so."""
    import errno

    import countdown_gym.cli.audit as audit_mod

    opened = audit_mod._open_output

    class Fills:
        def __init__(self, path: str) -> None:
            self.f = opened(path)

        def writelines(self, lines) -> None:
            self.f.write(next(iter(lines)))
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(audit_mod, "_open_output", Fills)
    path = tmp_path / "outcomes.jsonl"
    assert main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--json", str(path)]) == 1
    err = capsys.readouterr().err
    assert "No space left on device (the partial file is removed)" in err and not path.exists()
    # a link (such as /dev/stdout) is never removed: only the file the audit itself created or emptied
    target = tmp_path / "target.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert main(["countdown_gym.cli.audit:verify_reward", "--no-progress", "--json", str(link)]) == 1
    assert link.is_symlink() and "partial file is removed" not in capsys.readouterr().err
