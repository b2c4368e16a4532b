"""The reward-comparison figures: title, labelled axes, error bars over seeds, and a redraw from their CSV alone."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
ROOT = Path(__file__).resolve().parents[1]
from baselines.reward_curves import curves_path, figure, plot_curves, read_curves  # noqa: E402

ROWS = [("sparse", 0, 0, 10.0), ("sparse", 1, 0, 12.0), ("sparse", 0, 10, 20.0), ("sparse", 1, 10, 24.0),
        ("oracle", 0, 0, 10.0), ("oracle", 0, 10, 15.0)]  # fmt: skip


def test_figure_has_title_labels_and_error_bars_over_seeds() -> None:
    fig = figure(ROWS, title="T", xlabel="step", ylabel="success (%)", spread="se")
    ax = fig.axes[0]
    assert ax.get_title() == "T" and ax.get_xlabel() == "step" and "mean ± SE over seeds" in ax.get_ylabel()
    bars = ax.containers
    assert [c.get_label() for c in bars] == ["sparse (2 seeds)", "oracle (1 seed)"]
    line, _caps, (segments,) = bars[0].lines
    assert list(line.get_ydata()) == [11.0, 22.0]
    se = [math.sqrt(2) / math.sqrt(2), math.sqrt(8) / math.sqrt(2)]  # sample std / sqrt(seeds)
    assert [s[1][1] - s[0][1] for s in segments.get_segments()] == pytest.approx([2 * x for x in se])
    std = figure(ROWS, title="T", xlabel="x", ylabel="y", spread="std").axes[0]
    assert "mean ± std over seeds" in std.get_ylabel()
    with pytest.raises(ValueError, match="spread"):
        figure(ROWS, title="T", xlabel="x", ylabel="y", spread="iqr")  # type: ignore[arg-type]


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
    from baselines.reward_curves import write_curves

    write_curves(tmp_path / "llm_grpo_rewards_curves.csv", ROWS)
    cmp.main(["--results-dir", str(tmp_path), "--interaction", "single-pass", "--replot", "--runs-dir", str(tmp_path / "none")])
    assert (tmp_path / "llm_grpo_rewards.png").stat().st_size > 0 and not (tmp_path / "none").exists()
