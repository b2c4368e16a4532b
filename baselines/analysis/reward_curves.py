"""The validation-curve figures of ``compare_rewards.py`` and ``compare_llm_rewards.py``: per reward variant, the
mean over seeds at each evaluation with a band (the seeds' std or SE). Their points go to a CSV beside the PNG, from
which a figure is redrawn alone (each script's ``--replot``)."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from baselines.analysis.uncertainty import seed_spread
from countdown_gym.dataclass_cli import finish_together, write_together, written_aside
from countdown_gym.runkit.runs import save_figure

FIELDS = ("variant", "seed", "step", "success")
Row = tuple[str, int, int, float]


def write_curves(path: str | Path, rows: Iterable[Row]) -> Path:
    """The points of a figure as CSV (``variant, seed, step, success``)."""
    path = Path(path)
    with written_aside(path) as tmp, tmp.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(FIELDS)
        w.writerows((v, s, step, f"{x:.6g}") for v, s, step, x in rows)
    return path


def read_curves(path: str | Path) -> list[Row]:
    """The rows :func:`write_curves` wrote; a missing file, a wrong header or a malformed row is a clear error."""
    path = Path(path)
    finish_together(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: --replot redraws from the curves a full run wrote")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != FIELDS:
            raise ValueError(f"{path}: expected the columns {', '.join(FIELDS)}, got {reader.fieldnames}")
        rows = []
        for r in reader:
            try:
                row = (r["variant"], int(r["seed"]), int(r["step"]), float(r["success"]))
            except (TypeError, ValueError):
                row = None
            if row is None or not math.isfinite(row[3]) or None in r:  # None in r: more fields than the header's
                raise ValueError(f"{path}, line {reader.line_num}: expected a variant, an integer seed and step and a "
                                 f"finite success, got {list(r.values())}")
            rows.append(row)
        return rows


def mean_curve(points: Sequence[tuple[int, int, float]], spread: Literal["std", "se"] = "se") -> tuple[list[float], list[float], list[float]]:
    """Steps, means over seeds and ``spread`` of ``(seed, step, value)`` points: the steps every seed reached, then,
    when the seeds' last steps differ, their last values at the mean of their last steps."""
    by_seed: dict[int, dict[int, float]] = {}
    for seed, step, x in points:
        by_seed.setdefault(seed, {})[step] = x
    common = sorted(set.intersection(*(set(d) for d in by_seed.values()))) if by_seed else []
    cols: list[tuple[float, list[float]]] = [(float(k), [d[k] for d in by_seed.values()]) for k in common]
    lasts = [max(d) for d in by_seed.values()]
    if len(set(lasts)) > 1:
        cols.append((sum(lasts) / len(lasts), [d[max(d)] for d in by_seed.values()]))
    return [k for k, _ in cols], [sum(xs) / len(xs) for _, xs in cols], [seed_spread(xs, spread) for _, xs in cols]


def figure(rows: Sequence[Row], *, title: str, xlabel: str, ylabel: str, spread: Literal["std", "se"] = "se") -> Any:
    """The matplotlib figure: per variant, :func:`mean_curve` of its seeds, with a ``spread`` band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if spread not in ("std", "se"):
        raise ValueError(f"spread must be 'std' or 'se', got {spread!r}")
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for variant in dict.fromkeys(v for v, *_ in rows):
        seeds = len({s for v, s, *_ in rows if v == variant})
        steps, mean, band = mean_curve([(s, step, x) for v, s, step, x in rows if v == variant], spread)
        (line,) = ax.plot(steps, mean, marker="o", markersize=3, label=f"{variant} ({seeds} seed{'s' if seeds > 1 else ''})")
        ax.fill_between(steps, [m - b for m, b in zip(mean, band, strict=True)], [m + b for m, b in zip(mean, band, strict=True)],
                        color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set(title=title, xlabel=xlabel, ylabel=f"{ylabel}\nmean ± {'std' if spread == 'std' else 'SE'} over seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_curves(rows: Sequence[Row], path: str | Path, **kw: Any) -> Path:
    """Draw :func:`figure` to ``path`` (PNG) and write its points to ``<path stem>_curves.csv`` beside it, both or
    neither (``dataclass_cli.write_together``: the CSV last, :func:`read_curves` finishes a write a kill cut short)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    fig = figure(rows, **kw)
    try:
        write_together({path: lambda part: save_figure(fig, part), curves_path(path): lambda part: write_curves(part, rows)})
    finally:
        plt.close(fig)
    return path


def draw(png: str | Path, logs: Iterable[tuple[str, int, Path]] | None, x: str, y: str, scale: float = 1.0,
         **kw: Any) -> Path:
    """:func:`plot_curves` to ``png`` of each run's CSV log ``(variant, seed, path)``: column ``y`` (times ``scale``)
    against column ``x``; ``logs`` None: of the points kept beside ``png`` (a comparison's ``--replot``)."""
    rows: list[Row] = []
    if logs is None:
        try:
            rows = read_curves(curves_path(png))
        except ValueError as exc:
            raise SystemExit(f"--replot: {exc}") from None
    for variant, seed, path in logs or ():
        if path.exists():
            with path.open(newline="") as f:
                try:  # a finite number in both columns of every row, as read_curves reads the points back
                    new = [(variant, seed, int(float(r[x])), scale * float(r[y])) for r in csv.DictReader(f)]
                    if not all(math.isfinite(v) for *_, v in new):
                        raise ValueError(f"{y} is not finite")
                except (KeyError, TypeError, ValueError, OverflowError) as exc:
                    raise SystemExit(f"{path}: every row needs a number in its columns {x} and {y} ({exc})") from None
                rows += new
    return plot_curves(rows, png, **kw)


def curves_path(png: str | Path) -> Path:
    """The CSV of a figure's points: ``<stem>_curves.csv`` beside the PNG."""
    png = Path(png)
    return png.with_name(f"{png.stem}_curves.csv")
