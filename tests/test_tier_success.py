"""baselines/tier_success.py: success per difficulty tier of re-verified submissions."""

from __future__ import annotations

from pathlib import Path

import pytest

from baselines.tier_success import main, tier_scores
from countdown_gym.data.difficulty import TIERS

SUBMISSIONS = Path(__file__).resolve().parents[1] / "leaderboard" / "submissions"


def test_tier_scores_of_the_solver_and_a_random_agent():
    solver = tier_scores(SUBMISSIONS / "exhaustive-solver.longproc-0.5k.test.jsonl")
    assert sum(solver["tiers"][t]["problems"] for t in TIERS) == 1000
    assert all(solver["tiers"][t]["first"] == solver["tiers"][t]["problems"] for t in TIERS)
    ppo = tier_scores(SUBMISSIONS / "maskableppo-sparse.longproc-0.5k.test.jsonl")
    rates = [ppo["tiers"][t]["first"] / ppo["tiers"][t]["problems"] for t in TIERS]
    assert rates[0] > rates[1] > rates[2]
    assert sum(ppo["tiers"][t]["first"] for t in TIERS) == 498  # the leaderboard's pass@1 0.498


def test_main_writes_the_table(tmp_path, capsys):
    out = tmp_path / "t.md"
    assert main(["--submissions", str(SUBMISSIONS / "exhaustive-solver.longproc-0.5k.test.jsonl"), "--out", str(out),
                 "--no-progress"]) == 0
    assert "| exhaustive-solver | longproc-0.5k / test | 1 | first answer | 100.0%" in out.read_text()
    assert "flat" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no such file"):
        main(["--submissions", str(tmp_path / "missing.jsonl")])
    for flag in ("--out", "--plot"):  # was 'Is a directory: <path>.tmp' after scoring every file
        with pytest.raises(SystemExit, match=f"{flag} .* is a folder; name a file"):
            main(["--submissions", str(SUBMISSIONS / "exhaustive-solver.longproc-0.5k.test.jsonl"), flag, str(tmp_path)])


def test_metric_thirds_summary(capsys):
    ppo = str(SUBMISSIONS / "maskableppo-sparse.longproc-0.5k.test.jsonl")
    assert main(["--submissions", ppo, "--metric", "num_solutions", "--summary", "--no-progress"]) == 0
    assert "num_solutions: first-answer success falls across the thirds for 1 of 1 files" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--metric"):
        main(["--submissions", ppo, "--metric", "length"])


def test_an_interrupted_write_keeps_the_old_table_and_chart(tmp_path, monkeypatch):
    """--out and --plot were written in place: Ctrl-C (or a full disk) mid-write left a torn table or PNG; a --plot
    in a missing folder failed after the table was written. Now each file is whole or the old one."""
    from matplotlib.figure import Figure

    solver = str(SUBMISSIONS / "exhaustive-solver.longproc-0.5k.test.jsonl")
    out, png = tmp_path / "t.md", tmp_path / "new" / "t.png"
    assert main(["--submissions", solver, "--out", str(out), "--plot", str(png), "--no-progress"]) == 0
    old = {p: p.read_bytes() for p in (out, png)}

    def torn(self, fname, **_):
        Path(fname).write_bytes(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", torn)
    with pytest.raises(KeyboardInterrupt):
        main(["--submissions", solver, "--plot", str(png), "--no-progress"])
    monkeypatch.setattr(Path, "write_text", lambda self, text, **_: torn(None, self))
    with pytest.raises(KeyboardInterrupt):
        main(["--submissions", solver, "--out", str(out), "--no-progress"])
    assert {p: p.read_bytes() for p in (out, png)} == old
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["new", "t.md", "t.png"]
