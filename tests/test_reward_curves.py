"""The reward-comparison figures: title, labelled axes, a band over seeds, and a redraw from their CSV alone."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
ROOT = Path(__file__).resolve().parents[1]
from baselines.analysis.reward_curves import curves_path, figure, mean_curve, plot_curves, read_curves  # noqa: E402

ROWS = [("sparse", 0, 0, 10.0), ("sparse", 1, 0, 12.0), ("sparse", 0, 10, 20.0), ("sparse", 1, 10, 24.0),
        ("oracle", 0, 0, 10.0), ("oracle", 0, 10, 15.0)]  # fmt: skip


def test_figure_has_title_labels_and_bands_over_seeds() -> None:
    fig = figure(ROWS, title="T", xlabel="step", ylabel="success (%)", spread="se")
    ax = fig.axes[0]
    assert ax.get_title() == "T" and ax.get_xlabel() == "step" and "mean ± SE over seeds" in ax.get_ylabel()
    assert [line.get_label() for line in ax.lines] == ["sparse (2 seeds)", "oracle (1 seed)"]
    assert list(ax.lines[0].get_ydata()) == [11.0, 22.0]
    se = [math.sqrt(2) / math.sqrt(2), math.sqrt(8) / math.sqrt(2)]  # sample std / sqrt(seeds)
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert max(band) - 22.0 == pytest.approx(se[1]) and 11.0 - min(band) == pytest.approx(se[0])
    std = figure(ROWS, title="T", xlabel="x", ylabel="y", spread="std").axes[0]
    assert "mean ± std over seeds" in std.get_ylabel()
    with pytest.raises(ValueError, match="spread"):
        figure(ROWS, title="T", xlabel="x", ylabel="y", spread="iqr")  # type: ignore[arg-type]


def test_seeds_that_end_at_different_steps_end_in_one_point_at_their_mean_step() -> None:
    """Runs bounded by wall-clock end at different steps: the steps every seed reached, then their last values."""
    rows = [*ROWS[:4], ("sparse", 0, 17, 30.0), ("sparse", 1, 19, 26.0)]
    line = figure(rows, title="T", xlabel="x", ylabel="y").axes[0].lines[0]
    assert list(line.get_xdata()) == [0, 10, 18] and list(line.get_ydata()) == [11.0, 22.0, 28.0]
    assert mean_curve([(0, 0, 1.0), (1, 0, 3.0), (0, 5, 2.0)]) == ([0.0, 2.5], [2.0, 2.5], [1.0, 0.5])
    assert mean_curve([]) == ([], [], [])


def test_a_figure_is_redrawn_from_its_csv_alone(tmp_path: Path) -> None:
    kw = dict(title="T", xlabel="x", ylabel="y", spread="se")
    png = plot_curves(ROWS, tmp_path / "f.png", **kw)
    assert read_curves(curves_path(png)) == ROWS
    first = png.read_bytes()
    plot_curves(read_curves(curves_path(png)), png, **kw)
    assert png.read_bytes() == first
    with pytest.raises(FileNotFoundError, match="--replot"):
        read_curves(tmp_path / "missing_curves.csv")


def test_compare_llm_rewards_replot_draws_without_running(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from baselines import compare_llm_rewards as cmp
    from baselines.analysis.reward_curves import write_curves

    write_curves(tmp_path / "llm_grpo_rewards_curves.csv", ROWS)
    cmp.main(["--results-dir", str(tmp_path), "--interaction", "single-pass", "--name", "llm_grpo_rewards", "--replot"])
    assert (tmp_path / "llm_grpo_rewards.png").stat().st_size > 0


def test_a_malformed_curves_file_is_one_line_on_replot(tmp_path: Path) -> None:
    """A row with a seed not an integer, a missing or extra field, or a nan success was a traceback from deep inside
    (int(), float() of None, statistics' stdev) on --replot."""
    pytest.importorskip("trl")
    from baselines import compare_llm_rewards as cmp

    csv = tmp_path / "llm_grpo_rewards_curves.csv"
    for row in ("sparse,x,1,0.5", "sparse,0,1", "sparse,0,1,0.5,9", "sparse,0,1,nan"):
        csv.write_text(f"variant,seed,step,success\n{row}\nsparse,1,1,0.5\n")
        with pytest.raises(SystemExit, match=f"--replot: {csv}, line 2: expected a variant, an integer seed"):
            cmp.main(["--results-dir", str(tmp_path), "--name", "llm_grpo_rewards", "--replot"])



@pytest.mark.parametrize("log", ["steps,validation_success\n10,0.5\n20,\n", "steps,validation_success\n10,nan\n",
                                 "steps,other\n10,0.5\n", "steps,validation_success\n10,0.5\n20"])
def test_a_run_log_without_a_number_in_a_row_is_one_line(tmp_path: Path, log: str) -> None:
    """A run's curve.csv with an empty cell, a missing column or a cut-off last row was a ValueError / KeyError /
    TypeError traceback after every run; a nan was drawn and written to the points, which --replot then refused."""
    from baselines.analysis.reward_curves import draw

    (tmp_path / "curve.csv").write_text(log)
    with pytest.raises(SystemExit, match=f"{tmp_path / 'curve.csv'}: every row needs a number in its columns steps and "):
        draw(tmp_path / "f.png", [("sparse", 0, tmp_path / "curve.csv")], "steps", "validation_success", title="T",
             xlabel="x", ylabel="y")
    assert not (tmp_path / "f.png").exists()


def test_an_interrupted_redraw_keeps_the_old_figure_and_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torn_savefig) -> None:
    """The CSV and the PNG were written in place: Ctrl-C mid-write left a torn file (a --replot then read half the
    points); now each is whole or the old one, and no temporary file stays."""

    from baselines.analysis.reward_curves import write_curves

    kw = dict(title="T", xlabel="x", ylabel="y")
    png = plot_curves(ROWS, tmp_path / "f.png", **kw)
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def rows_then_ctrl_c():
        yield ROWS[0]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_curves(curves_path(png), rows_then_ctrl_c())

    torn_savefig()
    with pytest.raises(KeyboardInterrupt):
        plot_curves(ROWS, png, **kw)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == old


def test_a_redraw_killed_between_the_figure_and_its_points_is_finished_by_the_next_read(tmp_path: Path,
                                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The CSV and the PNG were replaced one after the other: a kill between them left a figure of other points
    (--replot then drew the old ones over it); now the CSV's rename is journalled and the next read finishes it."""
    import os

    from countdown_gym.dataclass_cli import output as together

    kw = dict(title="T", xlabel="x", ylabel="y")
    png = plot_curves(ROWS, tmp_path / "f.png", **kw)
    real = os.replace

    def killed(src, dst):
        if Path(src).name == "f_curves.part.csv":
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(together.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        plot_curves(ROWS[:2], png, **kw)
    monkeypatch.setattr(together.os, "replace", real)
    assert read_curves(curves_path(png)) == ROWS[:2] and not list(tmp_path.glob("*.part*"))
