"""The metrics of a critic against the exact oracle (AUROC, best-threshold accuracy, logistic calibration and its
ECE, per state size) and what ``critics.evaluate`` and ``critics.evaluate_text`` share: options, reports, plots."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch

from countdown_gym import dataclass_cli
from countdown_gym.data.splits import SPLIT_SPEC
from countdown_gym.runkit.runs import save_figure, write_text_atomic


@dataclass
class EvalOptions:
    """The states a critic is scored on and where the report goes (the options of ``critics.evaluate`` and
    ``critics.evaluate_text``)."""

    checkpoint: str | None = None
    """Checkpoint directory (default: the shipped critic)."""
    preset: str = "longproc-0.5k"
    """Preset whose frozen split holds the problems."""
    split: Literal["train", "validation", "test"] = "test"
    max_problems: int | None = None
    """First N problems of the split (None: all)."""
    rollouts: int = 4
    """Random rollouts per problem."""
    start_targets: int = 4
    """Random targets per problem for the 4-number start set."""
    seed: int = 0
    threads: int = 1
    """Torch threads."""
    out: str = "runs/critic-eval"
    """Output directory."""

    def __post_init__(self) -> None:
        dataclass_cli.check_choice(self, "preset", sorted(SPLIT_SPEC))
        if self.max_problems is not None and self.max_problems < 1:
            raise ValueError(f"--max-problems must be >= 1 (or left out for all), got {self.max_problems}")
        dataclass_cli.check_min(self, 1, "rollouts", "start_targets", "threads")


def checked(scores: np.ndarray, labels: np.ndarray, what: str = "scores") -> tuple[np.ndarray, np.ndarray]:
    """``(scores as float64, labels as bool)``; ``ValueError`` unless both are 1-D of one length, the scores finite
    and the labels booleans or 0/1 (the input checks of every metric here)."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels)
    if s.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"{what} and labels must be 1-D arrays of one length, got shapes {s.shape} and {y.shape}")
    if not np.isfinite(s).all():
        raise ValueError(f"{what} must be finite, got {s[~np.isfinite(s)][0]} at index {np.flatnonzero(~np.isfinite(s))[0]}")
    if y.dtype != bool and not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels must be booleans or 0/1, got the values {np.unique(y)[:6].tolist()}")
    return s, y.astype(bool)


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties count one half); ``nan`` if only one class is present."""
    scores, labels = checked(scores, labels)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    neg, pos = np.sort(scores[~labels]), scores[labels]  # a positive wins over each negative below it, half over a tie
    twice_wins = np.searchsorted(neg, pos, "left") + np.searchsorted(neg, pos, "right")
    return float(twice_wins.sum() / 2 / (n_pos * n_neg))


def best_threshold_accuracy(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """``(accuracy, threshold)``: the best accuracy of ``score >= threshold`` over all thresholds (``nan`` for none)."""
    scores, labels = checked(scores, labels)
    if not len(scores):
        return float("nan"), float("nan")
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], labels[order]
    # predicting the top k as positive: correct = positives in top k + negatives below
    tp = np.concatenate([[0], np.cumsum(y)])
    neg_below = (~y).sum() - np.concatenate([[0], np.cumsum(~y)])
    correct = tp + neg_below
    valid = np.concatenate([[True], s[1:] != s[:-1], [True]])  # cut only between distinct scores
    k = int(np.argmax(np.where(valid, correct, -1)))
    thr = float(s[k - 1]) if k > 0 else max(float(s[0]) + 1e-6, float(np.nextafter(s[0], np.inf)))  # above them all
    return float(correct[k] / len(s)), thr


def fit_logistic(scores: np.ndarray, labels: np.ndarray, iters: int = 100) -> tuple[float, float]:
    """``(a, b)`` of ``P = sigmoid(a * score + b)`` by Newton's method (a little L2 for stability)."""
    x, y = checked(scores, labels)
    y = y.astype(np.float64)
    w = np.zeros(2)
    X = np.stack([x, np.ones_like(x)], 1)
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(X @ w)))
        g = X.T @ (p - y) + 1e-6 * w
        H = (X * (p * (1 - p))[:, None]).T @ X + 1e-6 * np.eye(2)
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, bins: int = 10) -> tuple[float, list[dict]]:
    """ECE over equal-width probability bins, and the per-bin table for the reliability diagram."""
    probs, labels = checked(probs, labels, "probabilities")
    if not (np.all((probs >= 0) & (probs <= 1)) and isinstance(bins, int) and bins >= 1):
        raise ValueError(f"probabilities must lie in [0, 1] and bins be an int >= 1, got bins={bins!r}")
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(probs, edges[1:-1]), 0, bins - 1)
    ece, table = 0.0, []
    for b in range(bins):
        m = idx == b
        if not m.any():
            continue
        conf, acc = float(probs[m].mean()), float(labels[m].mean())
        ece += m.mean() * abs(conf - acc)
        table.append({"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": int(m.sum()), "confidence": conf, "accuracy": acc})
    return float(ece), table


def separation(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """How well ``scores`` separate reachable from unreachable states: count, reachable fraction, AUROC, best accuracy."""
    acc, thr = best_threshold_accuracy(scores, labels)
    return {"n": len(labels), "reachable_frac": float(np.mean(labels)) if len(labels) else float("nan"),
            "auroc": auroc(scores, labels), "best_acc": acc, "threshold": thr}


def per_size(scores: np.ndarray, ls, overall: bool = True) -> dict[str, dict]:
    """:func:`separation` of the labelled states ``ls`` by state size (``size_<k>``), of the 2-3 number states
    (``sizes_2_3``, when the set holds other sizes too) and, with ``overall``, of all of them (``all``)."""
    sizes = np.array([len(s) for s in ls.states])
    entry = {"all": separation(scores, ls.labels)} if overall else {}
    for k in sorted(set(sizes.tolist())):
        entry[f"size_{k}"] = separation(scores[sizes == k], ls.labels[sizes == k])
    mid = (sizes >= 2) & (sizes <= 3)
    if mid.any() and len(set(sizes.tolist())) > 1:
        entry["sizes_2_3"] = separation(scores[mid], ls.labels[mid])
    return entry


@contextmanager
def figure(path: str | Path, size: tuple[float, float]) -> Iterator[Any]:
    """Matplotlib axes (Agg backend) whose figure is saved to ``path`` (dpi 120, whole or not at all) and closed on exit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    try:
        yield ax
        fig.tight_layout()
        save_figure(fig, path)
    finally:
        plt.close(fig)


def write_results(res: dict, out: str | Path, render: Callable[[dict], str]) -> None:
    """Add the torch threads to ``res``, then write ``results.json`` and ``report.md`` (``render(res)``) in ``out``,
    each whole or not at all."""
    res["threads"] = torch.get_num_threads()
    write_text_atomic(Path(out, "report.md"), render(res))
    write_text_atomic(Path(out, "results.json"), json.dumps(res, indent=2) + "\n")


def report_head(title: str, intro: str, columns: Sequence[str], text_columns: int) -> list[str]:
    """The first lines of a ``report.md``: ``# title``, the ``intro`` paragraph and the header of its Markdown
    table (the first ``text_columns`` columns left-aligned, the numbers right-aligned)."""
    align = ["---"] * text_columns + ["---:"] * (len(columns) - text_columns)
    return [f"# {title}", "", intro, "", "| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]


Options = TypeVar("Options", bound=EvalOptions)


def main(options: type[Options], evaluate: Callable[[Options], dict], render: Callable[[dict], str],
         argv: Sequence[str] | None, *, prog: str, description: str) -> None:
    """An evaluation's command line: parse ``argv`` into ``options``, set torch's threads, ``evaluate`` them and
    print the report (``render``); a missing checkpoint or a bad option is ``error: ...``."""
    opts = dataclass_cli.parse(options, argv, prog=f"python -m {prog}", description=description)
    torch.set_num_threads(opts.threads)
    try:
        res = evaluate(opts)
    except (ValueError, OSError) as e:  # a CheckpointError is a ValueError
        raise SystemExit(f"error: {e}") from None
    print(render(res))
    print(f"wrote {opts.out}/report.md")
