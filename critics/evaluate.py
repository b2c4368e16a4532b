"""Score a critic against the exact oracle: ``python -m critics.evaluate``.

``trace``, ``random`` and ``start`` states of a frozen split's problems (default: longproc-0.5k *test*), labelled by
:func:`countdown_gym.reachable`, per state size: AUROC, best-threshold accuracy, ECE after a logistic map fitted on
the validation split, the first-move rate, a goal-embedding PCA and CPU throughput (``report.md`` and PNGs in
``--out``). Any scorer of ``(states, targets)`` works too: ``evaluate(score_fn=...)``, or :func:`state_sets` +
:func:`set_metrics` + :func:`first_move`.
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from countdown_gym import Rules, dataclass_cli, load_split
from countdown_gym.data.generator import get_config
from countdown_gym.game.solver import successors
from critics import load_critic, metrics
from critics.data import LabelledStates, random_states, start_states, trace_states
from critics.metrics import EvalOptions, expected_calibration_error, figure, fit_logistic, per_size, report_head


@dataclass
class Options(EvalOptions):
    """Score a critic against the exact oracle."""

    val_problems: int = 200
    """Validation problems for the calibration fit."""
    lookahead: bool = False
    """One-ply lookahead: score each state by the max of the critic's scores of its one-move children."""

    def __post_init__(self) -> None:
        super().__post_init__()
        dataclass_cli.check_min(self, 1, "val_problems")


def plot_reliability(table: list[dict], ece: float, path: Path, title: str) -> None:
    with figure(path, (4.5, 4.5)) as ax:
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect")
        mids = [(r["lo"] + r["hi"]) / 2 for r in table]
        ax.bar(mids, [r["accuracy"] for r in table], width=0.09, alpha=0.7, label="fraction reachable")
        ax.plot([r["confidence"] for r in table], [r["accuracy"] for r in table], "o-", color="C3", label="bin mean")
        ax.set(xlabel="predicted P(reachable)", ylabel="observed fraction reachable", title=f"{title}\nECE = {ece:.3f}")
        ax.legend(loc="upper left", fontsize=8)


def goal_embedding_pca(critic, values: Sequence[int]) -> np.ndarray:
    """2-D PCA coordinates of the goal embeddings of ``values``."""
    emb = critic.embed_targets(list(values)).astype(np.float64)
    emb -= emb.mean(0)
    _, _, vt = np.linalg.svd(emb, full_matrices=False)
    return emb @ vt[:2].T


def parity_probe(critic, values: Sequence[int]) -> float:
    """Leave-one-out accuracy of a least-squares linear odd/even classifier on the goal embeddings' top-2 PCA plane
    (0.5 = no parity structure; near 1 = the paper's V1 failure, a parity partition)."""
    xy = goal_embedding_pca(critic, values)
    X = np.concatenate([xy, np.ones((len(xy), 1))], 1)
    y = np.array([1.0 if v % 2 else -1.0 for v in values])
    correct = 0
    for i in range(len(values)):
        m = np.arange(len(values)) != i
        w = np.linalg.lstsq(X[m], y[m], rcond=None)[0]
        correct += int(np.sign(X[i] @ w) == y[i])
    return correct / len(values)


def plot_goal_pca(critic, values: Sequence[int], path: Path, title: str) -> None:
    xy = goal_embedding_pca(critic, values)
    vals = np.array(values)
    with figure(path, (5.5, 4.5)) as ax:
        for parity, marker in ((0, "o"), (1, "^")):
            m = vals % 2 == parity
            sc = ax.scatter(xy[m, 0], xy[m, 1], c=vals[m], cmap="viridis", marker=marker, s=28,
                            vmin=vals.min(), vmax=vals.max(), label="even" if parity == 0 else "odd")
        for v, (x, y) in zip(vals, xy, strict=True):
            if v % 5 == 0:
                ax.annotate(str(v), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.figure.colorbar(sc, ax=ax, label="goal value")
        ax.set(xlabel="PC 1", ylabel="PC 2", title=title)
        ax.legend(fontsize=8)


ScoreFn = Callable[[Sequence[tuple[int, ...]], Sequence[int]], np.ndarray]
"""Any scorer: a batch of states (number sets) and their targets -> one score each (higher = more
likely reachable). A loaded :class:`critics.Critic` is turned into one by :func:`as_score_fn`."""


def as_score_fn(scorer) -> ScoreFn:
    """A :data:`ScoreFn` from a V2 critic, or a callable as it is (V1 needs initial numbers: :func:`score_states`)."""
    if callable(scorer):
        return scorer
    if getattr(scorer, "version", "v2") == "v1":
        raise ValueError("a V1 critic scores (initial numbers, state) pairs; use score_states(critic, labelled_states)")
    return lambda states, targets: scorer.score(states, targets)


def lookahead_score_fn(scorer, rules=None) -> ScoreFn:
    """One-ply lookahead over a V2 critic or a :data:`ScoreFn`: a state scores the *max of its one-move children's
    scores* (legal moves of ``rules``, default ``Rules.longproc()``); a 1-number state keeps its own score, a state
    without a legal move scores -1. Reported beside the plain critic, never in its place (it uses the move rules)."""
    base = as_score_fn(scorer)
    rules = rules or Rules.longproc()

    def score(states: Sequence[tuple[int, ...]], targets: Sequence[int]) -> np.ndarray:
        index: dict[tuple[tuple[int, ...], int], int] = {}
        kids: list[list[int]] = []
        for st, t in zip(states, targets, strict=True):
            children = [tuple(sorted(c)) for _, c in successors(tuple(st), rules)] if len(st) > 1 else [tuple(st)]
            kids.append([index.setdefault((c, int(t)), len(index)) for c in dict.fromkeys(children)])
        pairs = list(index)
        child_scores = np.asarray(base([c for c, _ in pairs], [t for _, t in pairs]), dtype=np.float64) if pairs else np.zeros(0)
        return np.array([child_scores[k].max() if k else -1.0 for k in kids], dtype=np.float64)

    score.__name__ = f"lookahead({getattr(scorer, 'path', None) or getattr(scorer, '__name__', 'scorer')})"
    return score


def score_states(scorer, ls) -> np.ndarray:
    """Scores of the labelled states ``ls`` by a critic (V1 gets the initial numbers) or a :data:`ScoreFn`."""
    if not callable(scorer) and scorer.version == "v1":
        return scorer.score(ls.states, ls.targets, initial=ls.initial)
    scores = np.asarray(as_score_fn(scorer)(ls.states, ls.targets), dtype=np.float64)
    if scores.shape != (len(ls.states),):
        raise ValueError(f"the scorer returned shape {scores.shape} for {len(ls.states)} states")
    return scores


def throughput(scorer, ls, repeats: int = 3, n: int = 50_000) -> float:
    """States per second of the scorer on up to ``n`` states (best of ``repeats``; a critic's target cache cold)."""
    k = n // max(len(ls.states), 1) + 1
    big = LabelledStates((ls.states * k)[:n], (ls.targets * k)[:n], np.tile(ls.labels, k)[:n], (ls.initial * k)[:n])
    clear = getattr(scorer, "_goal_cache", {}).clear  # timeit's setup: before each repeat
    return len(big.states) / min(timeit.repeat(lambda: score_states(scorer, big), clear, number=1, repeat=repeats))


def calibration(scorer, preset: str = "longproc-0.5k", problems: int = 200) -> dict:
    """The logistic score -> P(reachable) map ``{"a", "b", "fitted_on"}`` fitted on validation trace states."""
    val = trace_states(load_split(preset, "validation")[:problems], min_size=2)
    a, b = fit_logistic(score_states(scorer, val), val.labels)
    fitted_on = f"{preset}/validation[:{problems}] trace states with 2-4 numbers (start states included)"
    return {"a": a, "b": b, "fitted_on": fitted_on}


def state_sets(problems, rollouts: int = 4, seed: int = 0, start_targets: int = 4) -> dict:
    """The labelled state sets of the evaluation: ``trace``, ``random`` and ``start`` (see the module doc)."""
    return {"trace": trace_states(problems), "random": random_states(problems, rollouts=rollouts, seed=seed),
            "start": start_states(problems, targets=start_targets, seed=seed)}


def set_metrics(scorer, sets: dict, calibration: tuple[float, float] | None = None, out: Path | None = None,
                split: str = "test") -> dict:
    """Per state set: :func:`per_size` of the scorer's scores (with the ECE of the logistic ``calibration`` on the
    2-3 number states and, if ``out`` is given, a reliability diagram)."""
    res: dict = {}
    for name, ls in sets.items():
        scores = score_states(scorer, ls)
        entry = per_size(scores, ls)
        if "sizes_2_3" in entry and calibration is not None:
            mid = np.array([2 <= len(s) <= 3 for s in ls.states])
            probs = 1 / (1 + np.exp(-(calibration[0] * scores[mid].astype(np.float64) + calibration[1])))
            ece, table = expected_calibration_error(probs, ls.labels[mid])
            entry["sizes_2_3"]["ece"] = ece
            if out is not None:
                plot_reliability(table, ece, out / f"reliability_{name}.png", f"{name} states (2-3 numbers), {split} split")
        res[name] = entry
    return res


def first_move(scorer, problems) -> dict:
    """How often the scorer's best first move keeps the target reachable.

    Every distinct state one legal move from each start is scored and the highest taken (ties: the first in
    :func:`countdown_gym.legal_moves` order). ``random``: the mean rate of a uniformly random legal move;
    ``best_possible``: the fraction of problems with any such move.
    """
    problems = list(problems)
    moves = [[tuple(sorted(c)) for _, c in successors(p.numbers, p.rules)] for p in problems]
    kids = [list(dict.fromkeys(m)) for m in moves]
    flat = LabelledStates.label((c, p.target, p) for p, ks in zip(problems, kids, strict=True) for c in ks)
    scores = score_states(scorer, flat)
    hits, best, rand, k = [], [], [], 0
    for m, ks in zip(moves, kids, strict=True):
        y = flat.labels[k : k + len(ks)]
        ok = dict(zip(ks, y, strict=True))
        rand.append(float(np.mean([ok[c] for c in m])) if m else 0.0)
        hits.append(bool(ks) and bool(y[int(np.argmax(scores[k : k + len(ks)]))]))
        best.append(bool(y.any()))
        k += len(ks)
    return {"problems": len(kids), "critic_best_move_keeps_reachable": float(np.mean(hits)),
            "random_move_keeps_reachable": float(np.mean(rand)), "best_possible": float(np.mean(best))}


def evaluate(checkpoint: str | None = None, preset: str = "longproc-0.5k", split: str = "test",
             max_problems: int | None = None, rollouts: int = 4, seed: int = 0, out: str | Path = "runs/critic-eval",
             val_problems: int = 200, progress: bool = True, score_fn: ScoreFn | None = None, name: str | None = None,
             start_targets: int = 4, lookahead: bool = False) -> dict:
    """Run the whole evaluation; returns the results dict and writes report + PNGs into ``out``.

    ``score_fn`` (``name``: its label) is scored instead of ``checkpoint`` (no goal-embedding plot and parity probe
    without ``embed_targets``); ``lookahead`` scores through :func:`lookahead_score_fn`.
    """
    Options(checkpoint=checkpoint, preset=preset, split=split, max_problems=max_problems, rollouts=rollouts,  # its checks
            start_targets=start_targets, seed=seed, val_problems=val_problems, lookahead=lookahead)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if score_fn is None:
        scorer = load_critic(checkpoint)
        label, version = str(scorer.path), scorer.version
    else:
        if not callable(score_fn):
            raise TypeError(f"score_fn must be a function of (states, targets), got {type(score_fn).__name__}")
        scorer, label, version = score_fn, name or getattr(score_fn, "__name__", "score_fn"), "score_fn"
    if lookahead:
        scorer = lookahead_score_fn(scorer, get_config(preset).rules)
        label, version = f"{label} + one-ply lookahead (max over the one-move children's scores)", f"{version}+lookahead"
    problems = load_split(preset, split)[:max_problems]
    stages = tqdm(total=4, desc="critic evaluation (label, calibrate, score, first move)", disable=not progress)
    t0 = time.perf_counter()
    sets = state_sets(problems, rollouts, seed, start_targets)
    label_time = time.perf_counter() - t0
    stages.update(1)
    res: dict = {"checkpoint": label, "version": version, "preset": preset, "split": split, "problems": len(problems),
                 "rollouts": rollouts, "start_targets": start_targets, "seed": seed,
                 "labelling_seconds": round(label_time, 1), "calibration": calibration(scorer, preset, val_problems)}
    stages.update(1)
    res["sets"] = set_metrics(scorer, sets, (res["calibration"]["a"], res["calibration"]["b"]), out, split)
    stages.update(1)
    res["first_move"] = first_move(scorer, problems)
    stages.update(1)
    stages.close()
    if hasattr(scorer, "embed_targets"):
        values = list(range(1, 101))
        plot_goal_pca(scorer, values, out / "goal_pca.png", f"goal embeddings (critic {scorer.version}), targets 1-100")
        res["parity_probe_loo_acc"] = parity_probe(scorer, values)
    res["throughput_states_per_s"] = throughput(scorer, sets["trace"])
    res["throughput_start_states_per_s"] = throughput(scorer, sets["start"], n=10_000)
    metrics.write_results(res, out, render_report)
    return res


def render_report(res: dict) -> str:
    intro = (f"States of `{res['preset']}/{res['split']}` ({res['problems']} problems), labelled by exact "
             "reachability (`countdown_gym.reachable`), reported per state size. `trace`: every distinct state "
             "of each problem's DFS trace, with its target; `random`: states along random legal-move rollouts; "
             f"`start`: each problem's 4 numbers with {res['start_targets']} random targets in 10-50 "
             "(the problem's own target is always reachable).")
    lines = report_head(f"Critic evaluation: {res['checkpoint']} ({res['version']})", intro,
                        ["state set", "subset", "n", "reachable", "AUROC", "best acc", "ECE (logistic)"], 2)
    for name, entry in res["sets"].items():
        for sub, m in entry.items():
            if sub == "all" and len(entry) == 2:
                continue  # one state size: its row says it all
            ece = f"{m['ece']:.3f}" if "ece" in m else ""
            what = sub.replace("size_", "").replace("sizes_2_3", "2-3").replace("all", "all sizes")
            what = what + (" numbers" if what[0].isdigit() else "")
            auc = "n/a (one class)" if np.isnan(m["auroc"]) else f"{m['auroc']:.4f}"
            lines.append(f"| {name} | {what} | {m['n']} | {m['reachable_frac']:.3f} | {auc} | {m['best_acc']:.4f} | {ece} |")
    fm, cal = res["first_move"], res["calibration"]
    lines += ["", f"Best first move by the score keeps the target reachable in "
              f"**{fm['critic_best_move_keeps_reachable']:.3f}** of {fm['problems']} problems (a uniformly random "
              f"legal move: {fm['random_move_keeps_reachable']:.3f}; possible: {fm['best_possible']:.3f})."]
    lines += ["", f"Calibration map P = sigmoid({cal['a']:.3f} * score + {cal['b']:.3f}), fitted on "
                  f"{cal['fitted_on']}."]
    if "parity_probe_loo_acc" in res:
        lines.append(f"Parity in the goal-embedding PCA plane (targets 1-100, leave-one-out linear probe on PC1-2; "
                     f"0.5 = none): {res['parity_probe_loo_acc']:.3f}.")
    lines += [
        f"Batched CPU throughput: {res['throughput_states_per_s']:,.0f} states/s on the trace states (mostly 1-2 "
        f"numbers), {res['throughput_start_states_per_s']:,.0f} states/s on the 4-number start states (torch threads: "
        f"{res['threads']}).",
        "",
        "Plots: `reliability_trace.png`, `reliability_random.png`" + (", `goal_pca.png`." if "parity_probe_loo_acc" in res else "."),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    metrics.main(Options, lambda o: evaluate(o.checkpoint, o.preset, o.split, o.max_problems, o.rollouts, o.seed, o.out,
                                                o.val_problems, start_targets=o.start_targets, lookahead=o.lookahead),
                    render_report, argv, prog="critics.evaluate", description=__doc__.split("\n")[0])


if __name__ == "__main__":
    dataclass_cli.run_script(main)
