"""The reward comparison's answer, recomputed from its committed records alone.

    python baselines/reward_analysis.py                     # rewrite the results of docs/results/reward_comparison.md
                                                            # (and the README's answer line)
    python baselines/reward_analysis.py --check             # recompute and fail if the page differs
    python baselines/reward_analysis.py --auroc             # play the starting model's episodes for the AUROC table

From the records of ``compare_llm_rewards.py`` (``<records>/<arm>-s<seed>.json.gz``; tuning runs' under
``<records>/tuning/``) this writes the page's ``## Results`` section (the protocol above it is kept) and
``<page stem>_forest.png``, by the statistics the page's protocol names.
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baselines.analysis.protocol import QUICK, SEEDS, VARIANTS, expand_seeds, run_record
from baselines.analysis.uncertainty import binomial_se, finite_number, seed_spread
from baselines.lm.grpo_model import ROOT
from countdown_gym import dataclass_cli
from countdown_gym.dataclass_cli.strict import duplicate_key
from countdown_gym.runkit.runs import read_options, save_figure

PAGE = ROOT / "docs" / "results" / "reward_comparison.md"
RESULTS_HEADING = "## Results"
AUROC_FILE = "dense_term_auroc.json"


@dataclass
class Options:
    """Recompute the reward comparison's results from its records."""

    page: str = str(PAGE)  # The Markdown page whose ``## Results`` section is rewritten.
    records: str = ""  # The records' folder (default: the page's path without ``.md``).
    check: bool = False  # Recompute and exit 1 if the page's results differ from what the records give.
    auroc: bool = False  # Play the starting model's episodes for the dense terms' AUROC (dense_term_auroc.json) first.
    auroc_samples: int = 4  # --auroc: sampled episodes per validation problem.
    tuning_runs: str = ""  # A folder of finished llm_grpo.py tuning runs: their records go to <records>/tuning/ first.

    def __post_init__(self) -> None:
        dataclass_cli.check_min(self, 1, "auroc_samples")
        if not self.auroc:
            dataclass_cli.check_unused(self, "--auroc off", only=("auroc_samples",))
        if not Path(self.page).parent.is_dir():  # was 'No such file or directory: <page stem>_forest.part.png.tmp'
            raise ValueError(f"--page {self.page}: no such folder {Path(self.page).parent}")
        if self.tuning_runs and not Path(self.tuning_runs).is_dir():  # was "Not a directory" (exit 1) from iterdir
            raise ValueError(f"--tuning-runs {self.tuning_runs}: no such folder")
        if not self.records:
            self.records = str(Path(self.page).with_suffix(""))
        if not (self.tuning_runs or self.auroc or Path(self.records).is_dir()):  # else every result would be erased
            raise ValueError(f"--records {self.records}: no such folder (default: the --page path without .md)")


def write_record(path: str | Path, record: dict[str, Any]) -> Path:
    """``record`` as gzip-compressed JSON, whole or not at all (mtime 0: the same record gives the same bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with (dataclass_cli.written_aside(path) as tmp, tmp.open("wb") as raw,
          gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f):
        f.write((json.dumps(record, sort_keys=True) + "\n").encode())
    return path


def read_records(folder: str | Path, needs: Sequence[str] = ("test_outcomes", "seconds_per_step", "steps")) -> list[dict[str, Any]]:
    """Every ``*.json.gz`` / ``*.json`` record directly in ``folder``, sorted by arm and seed; each must hold ``needs``,
    one record a run (arm and seed), all of the same test problems (``problem_ids_sha256`` and length)."""
    out, problems, runs = [], {}, {}
    for p in sorted(Path(folder).glob("*.json*")):
        if p.name == AUROC_FILE or not (p.name.endswith(".json") or p.name.endswith(".json.gz")):
            continue
        rec = read_record(p)
        if missing := [k for k in needs if k not in rec or rec[k] in ("", [])]:
            raise SystemExit(f"{p}: a record of this analysis needs {', '.join(map(repr, missing))} (not empty)")
        out.append(rec)
        if "test_outcomes" in rec:  # an analysis' record (a tuning run's has none): one a run, of the same problems
            if (first := runs.setdefault((rec["arm"], rec["seed"]), p.name)) != p.name:
                raise SystemExit(f"{p}: a second record of arm {rec['arm']!r} seed {rec['seed']} (the first: {first}); "
                                 "keep one")
            problems.setdefault((len(rec["test_outcomes"]), rec.get("problem_ids_sha256")), []).append(p.name)
            if rec.get("start_outcomes") and len(rec["start_outcomes"]) != len(rec["test_outcomes"]):
                raise SystemExit(f"{p}: {len(rec['start_outcomes'])} start_outcomes for {len(rec['test_outcomes'])} "
                                 "test_outcomes (one each per test problem); fix or delete the record")
    if len(problems) > 1:
        raise SystemExit(f"{folder}: the records were tested on different problems: " + "; ".join(
            f"{n} outcomes in {', '.join(names[:3])}{f' and {len(names) - 3} more' if len(names) > 3 else ''} "
            f"({f'problem_ids_sha256 {digest:.12}...' if digest else 'no problem_ids_sha256'})"
            for (n, digest), names in problems.items()))
    rank = {a: i for i, a in enumerate(VARIANTS)}  # the protocol's arms first, in its order
    return sorted(out, key=lambda r: (rank.get(r["arm"], len(VARIANTS)), r["arm"], int(r["seed"])))


def read_record(path: Path) -> dict[str, Any]:
    """One record (``.json.gz`` or ``.json``): a JSON object with at least ``arm`` and ``seed``, every field of
    :data:`FIELDS` it holds of its kind; else exits naming the file (and the field)."""
    try:
        rec = json.loads(raw := gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
        if twice := duplicate_key(raw, rec):  # not strict_json: NaN is refused below where the analysis reads, kept elsewhere
            raise ValueError(twice)
    except (ValueError, EOFError, OSError, zlib.error, RecursionError) as exc:  # not JSON, a cut-off or corrupt gzip
        raise SystemExit(f"{path}: not a JSON record ({exc})") from None
    if not isinstance(rec, dict):
        raise SystemExit(f"{path}: a record needs at least 'arm' (a string) and 'seed' (an integer), not a JSON "
                         f"{type(rec).__name__}")
    for key, (ok, want) in FIELDS.items():
        if (key in rec or key in ("arm", "seed")) and not ok(rec.get(key)):
            raise SystemExit(f"{path}: {key!r} must be {want}, got {json.dumps(rec.get(key))[:80]}; fix or delete the record")
    return rec


def _bits(x: Any) -> bool:
    return (x.strip("01") == "") if isinstance(x, str) else isinstance(x, list) and all(v in (0, 1) and not isinstance(v, float) for v in x)


FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "arm": (lambda x: isinstance(x, str) and x != "", "a string (the arm)"),
    "seed": (lambda x: isinstance(x, int) and not isinstance(x, bool), "an integer"),
    **dict.fromkeys(("test_outcomes", "start_outcomes"), (_bits, "a string of 0s and 1s, one per test problem (or a list "
                                                             "of 0, 1, true and false)")),
    "problem_ids_sha256": (lambda x: x is None or isinstance(x, str), "a string"),
    "seconds_per_step": (lambda x: x is None or finite_number(x), "a number of seconds >= 0 (or null)"),
    "steps": (lambda x: finite_number(x) and float(x).is_integer(), "a count of steps >= 0"),
    "frac_reward_zero_std": (lambda x: isinstance(x, list) and all(finite_number(v, high=1) for v in x), "a list of fractions in [0, 1]"),
    "validation": (lambda x: isinstance(x, list) and all(
        isinstance(r, dict) and finite_number(r.get("step")) and finite_number(r.get("greedy_success"), high=1)
        and finite_number(r.get("problems", 0)) and float(r.get("problems", 0)).is_integer() for r in x),
        "a list of rows, each with a 'step' >= 0 and a 'greedy_success' in [0, 1] (and 'problems' a count)"),
    "options": (lambda x: isinstance(x, dict) and finite_number(x.get("learning_rate"), low=1e-300),
                "an object of the run's options, with its 'learning_rate' (a number > 0)"),
}
"""The fields of a record the analysis reads: a test of the value and what it must be (:func:`read_record`)."""


def outcomes(text: str | Sequence[Any]) -> np.ndarray:
    """Per-problem outcomes as a 0/1 array, from a ``"0110..."`` string or a list of booleans / 0 and 1."""
    if isinstance(text, str):
        return np.frombuffer(text.encode(), dtype=np.uint8) - ord("0")
    return np.asarray([int(bool(x)) for x in text], dtype=np.uint8)


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """``mean(a) - mean(b)`` with Welch's t test (two-sided) and its 95% confidence interval; two values a side."""
    from scipy.stats import ttest_ind

    diff = float(np.mean(a) - np.mean(b))
    if seed_spread(a) == seed_spread(b) == 0:  # no spread: scipy's t is undefined; a[0] - b[0] has no mean's rounding
        diff = float(a[0] - b[0])
        return {"difference": diff, "p": 1.0 if diff == 0 else 0.0, "low": diff, "high": diff}
    test = ttest_ind(a, b, equal_var=False)
    ci = test.confidence_interval(0.95)
    return {"difference": diff, "p": float(test.pvalue), "low": float(ci.low), "high": float(ci.high)}


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values, in the order given."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, ps[i] * (len(ps) - rank)))
        out[i] = running
    return out


def bootstrap_differences(arms: dict[str, np.ndarray], base: str, resamples: int = 10_000,
                          seed: int = 0) -> dict[str, tuple[float, float]]:
    """The percentile 95% interval of ``mean(arm) - mean(base)`` for every arm but ``base``, by a two-level
    bootstrap: the test problems resampled jointly for all arms (multinomial weights), then the seeds resampled
    within each arm. ``arms``: arm -> a 0/1 array of shape (seeds, problems)."""
    rng = np.random.default_rng(seed)
    n = next(iter(arms.values())).shape[1]
    draws: dict[str, list[np.ndarray]] = {a: [] for a in arms}
    for start in range(0, resamples, 1000):
        b = min(1000, resamples - start)
        w = rng.multinomial(n, np.full(n, 1.0 / n), size=b).T / n  # (problems, b)
        for arm, x in arms.items():
            per_run = x.astype(np.float64) @ w  # (seeds, b): each run's success on the resampled problems
            pick = rng.integers(0, x.shape[0], size=(x.shape[0], b))
            draws[arm].append(np.take_along_axis(per_run, pick, axis=0).mean(axis=0))
    joined = {a: np.concatenate(d) for a, d in draws.items()}
    return {a: (float(np.percentile(joined[a] - joined[base], 2.5)), float(np.percentile(joined[a] - joined[base], 97.5)))
            for a in arms if a != base}


def analyse(records: list[dict[str, Any]], base: str = "sparse", page: Path = PAGE) -> dict[str, Any]:
    """Per-arm figures, every arm against ``base`` (fractions) and the seeds an arm ``page``'s comparison expects."""
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_arm.setdefault(r["arm"], []).append(r)
    arms = {}
    for arm, recs in by_arm.items():
        x = np.stack([outcomes(r["test_outcomes"]) for r in recs])
        rates = x.mean(axis=1)
        zero = [float(np.mean(r["frac_reward_zero_std"])) for r in recs if r.get("frac_reward_zero_std")]
        timed = [r["seconds_per_step"] for r in recs if r["seconds_per_step"] is not None]  # None: a resume timed no step
        arms[arm] = {
            "seeds": [int(r["seed"]) for r in recs], "outcomes": x, "rates": rates.tolist(),
            "mean": float(rates.mean()), "se": seed_spread(rates.tolist(), "se"), "sd": seed_spread(rates.tolist(), "std"),
            "start": float(np.mean([outcomes(r["start_outcomes"]).mean() for r in recs if r.get("start_outcomes")] or [np.nan])),
            "seconds_per_step": float(np.mean(timed)) if timed else float("nan"),
            "steps": float(np.mean([r["steps"] for r in recs])),
            "zero_spread": float(np.mean(zero)) if zero else float("nan"),
            "validation": validation_means(recs), "problems": int(x.shape[1]),
            "validation_problems": int(recs[0]["validation"][0].get("problems", 0)) if recs[0].get("validation") else 0,
        }
    quick = Path(page).stem == QUICK["name"]  # compare_llm_rewards.py --quick's page
    out: dict[str, Any] = {"arms": arms, "comparisons": {}, "protocol_seeds": len(expand_seeds(QUICK["seeds"] if quick else SEEDS)),
                           "quick": quick}
    if base in arms and len(arms[base]["rates"]) >= 2:
        others = [a for a in arms if a != base and len(arms[a]["rates"]) >= 2]
        tests = {a: welch(arms[a]["rates"], arms[base]["rates"]) for a in others}
        for a, p in zip(others, holm([tests[a]["p"] for a in others]), strict=True):
            tests[a]["p_holm"] = p
        boot = bootstrap_differences({a: arms[a]["outcomes"] for a in [base, *others]}, base) if others else {}
        for a in others:
            tests[a]["boot_low"], tests[a]["boot_high"] = boot[a]
        out["comparisons"] = tests
    return out


def validation_means(recs: list[dict[str, Any]]) -> dict[int, float]:
    """Mean greedy validation success over the runs at every step all of them evaluated."""
    per = [{int(float(row["step"])): float(row["greedy_success"]) for row in r.get("validation", [])} for r in recs]
    common = set.intersection(*(set(d) for d in per)) if per else set()
    return {s: float(np.mean([d[s] for d in per])) for s in sorted(common)}


def verdict(t: dict[str, float]) -> str:
    if t["p_holm"] < 0.05:
        return "**helps**" if t["difference"] > 0 else "**hurts**"
    return "no difference found"


def answer_line(result: dict[str, Any]) -> str:
    """The comparison's answer in one line (the README quotes it as this prints it)."""
    arms, tests = result["arms"], result["comparisons"]
    if not tests:
        return "Dense rewards against sparse: no comparison yet (each arm needs two seeds)."
    fewest, want = min(len(v["rates"]) for v in arms.values()), result["protocol_seeds"]
    status = ("quick version, " if result["quick"] else "") + (
        f"interim, {fewest} of {want} seeds an arm" if fewest < want else f"{fewest} seeds an arm")
    parts = ", ".join(f"{a} {100 * t['difference']:+.1f} [{100 * t['low']:+.1f}, {100 * t['high']:+.1f}]" for a, t in tests.items())
    found = [f"{a} {verdict(t).strip('*')}" for a, t in tests.items() if t["p_holm"] < 0.05]
    reading = "; ".join(found) if found else "no dense arm differs from sparse at Holm-adjusted p < 0.05"
    return (f"Dense rewards against sparse ({status}): {parts} points of test greedy success (95% CI, Welch); "
            f"{reading}.")


def tuning_lines(folder: Path) -> list[str]:
    """The learning-rate tuning table from ``<records>/tuning`` (final validation greedy success per seed)."""
    recs = read_records(folder, ("options", "validation")) if folder.is_dir() else []
    if not recs:
        return []
    if bad := [r for r in recs if "problems" not in r["validation"][-1]]:  # the count the table states
        raise SystemExit(f"{folder}: the tuning record of seed {bad[0]['seed']} needs 'problems' in its last validation row")
    by_lr: dict[float, list[tuple[int, float]]] = {}
    for r in recs:
        by_lr.setdefault(float(r["options"]["learning_rate"]), []).append((int(r["seed"]), float(r["validation"][-1]["greedy_success"])))
    mean = {lr: np.mean([v for _, v in runs]) for lr, runs in by_lr.items()}
    ranked = sorted(mean, key=lambda lr: -mean[lr])  # stable: of equal means, the first seen, as max() picks
    best, n = ranked[0], int(recs[0]["validation"][-1]["problems"])
    lines = ["### Tuning (validation only)", "",
             f"`sparse`, 30 steps, final greedy success on the {n} validation problems of every run (records in "
             "`tuning/`); no run looked at the test split.", "",
             "| learning rate | per seed | mean ± SE over seeds |", "| --- | --- | --- |"]
    for lr in sorted(by_lr):
        xs = [v for _, v in sorted(by_lr[lr])]
        per = ", ".join(f"s{s} {100 * v:.1f}%" for s, v in sorted(by_lr[lr]))
        mark = " (chosen)" if lr == best else ""
        lines.append(f"| {f'{lr:.0e}'.replace('e-0', 'e-')}{mark} | {per} | {100 * np.mean(xs):.1f}% ± {f'{100 * seed_spread(xs):.1f}' if len(xs) > 1 else 'undefined (one seed)'} |")
    lead = f"The highest mean is {100 * (mean[best] - mean[ranked[1]]):.1f} points above the next" if len(ranked) > 1 else (
        "One learning rate was tried")
    return [*lines, "", f"{lead}; one run's "
            f"binomial SE on {n} problems is {100 * binomial_se(float(mean[best]), n):.1f} points, so the pick is the "
            "protocol's rule applied, not a settled ranking.", ""]


def results_lines(result: dict[str, Any], folder: Path, page: Path) -> list[str]:
    """The page's ``## Results`` section."""
    arms, tests = result["arms"], result["comparisons"]
    counts = {a: len(v["rates"]) for a, v in arms.items()}
    lines = [RESULTS_HEADING, ""]
    if not arms:
        lines += ["No run has finished yet.", ""]
    else:
        want, whose = result["protocol_seeds"], "the quick version's" if result["quick"] else "the protocol's"
        lines += [f"Written by `python baselines/reward_analysis.py` from {sum(counts.values())} records "
                  f"({', '.join(f'{a}: {n}' for a, n in counts.items())} seeds)."
                  + (f" **Interim**: {whose} answer needs {want} seeds in every arm." if min(counts.values()) < want else ""), "",
                  f"**{answer_line(result)}**", ""]
        first = next(iter(arms.values()))
        lines += [f"Test greedy success, final models, {first['problems']:,} test problems (the starting model: "
                  + (f"{100 * first['start']:.1f}%):" if np.isfinite(first["start"]) else "not recorded):"), "",
                  "| arm | seeds | mean ± SE over seeds | SD over seeds | s / step | steps | groups without reward spread |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for a, v in arms.items():
            se, sd = (f"± {100 * v['se']:.1f}", f"{100 * v['sd']:.1f}") if len(v["rates"]) > 1 else ("(SE undefined: one seed)", "undefined")
            zero = f"{100 * v['zero_spread']:.0f}%" if np.isfinite(v["zero_spread"]) else "not recorded"
            timed = f"{v['seconds_per_step']:.2f}" if np.isfinite(v["seconds_per_step"]) else "not recorded"
            lines.append(f"| `{a}` | {len(v['rates'])} | {100 * v['mean']:.1f}% {se} | {sd} | "
                         f"{timed} | {v['steps']:.0f} | {zero} |")
        lines.append("")
        if tests:
            lines += ["Against `sparse` (points; Welch's t, Holm over the "
                      f"{len(tests)} comparison{'s' if len(tests) > 1 else ''}; the bootstrap resamples the test problems too, so it also "
                      "counts which problems the split holds and is wider):", "",
                      "| arm - sparse | difference | 95% CI (Welch) | p | p (Holm) | 95% CI (bootstrap) | reading |",
                      "| --- | --- | --- | --- | --- | --- | --- |"]
            for a, t in tests.items():
                lines.append(f"| `{a}` | {100 * t['difference']:+.1f} | [{100 * t['low']:+.1f}, {100 * t['high']:+.1f}] | "
                             f"{t['p']:.3f} | {t['p_holm']:.3f} | [{100 * t['boot_low']:+.1f}, {100 * t['boot_high']:+.1f}] | {verdict(t)} |")
            lines += ["", f"![differences against sparse]({page.stem}_forest.png)", ""]
        steps = sorted(set.intersection(*(set(v["validation"]) for v in arms.values())))
        if steps:
            lines += [f"Validation greedy success ({first['validation_problems']} validation problems), mean over seeds:", "",
                      "| arm | " + " | ".join(f"step {s}" for s in steps) + " |", "| --- |" + " --- |" * len(steps)]
            for a, v in arms.items():
                lines.append(f"| `{a}` | " + " | ".join(f"{100 * v['validation'][s]:.1f}%" for s in steps) + " |")
            lines.append("")
    if (au := read_options(folder, AUROC_FILE)) is not None:  # one error naming a damaged file
        terms = au.get("terms")
        if not (all(finite_number(au.get(k)) for k in ("episodes", "problems", "moves", "temperature", "solved")) and "clipo_note" in au
                and isinstance(terms, dict) and all(isinstance(v, dict) and finite_number(v.get("per_move"), high=1)
                                                    and finite_number(v.get("per_episode"), high=1) for v in terms.values())):
            raise SystemExit(f"{folder / AUROC_FILE}: not what --auroc writes (episodes, problems, moves, temperature, solved, "
                             "clipo_note and terms' per_move and per_episode AUROC); run --auroc again or delete it")
        lines += [f"Dense terms as predictors of an episode's success: AUROC of each move's term against the episode's "
                  f"outcome, {au['episodes']} episodes of the starting model sampled at T = {au['temperature']:g} on the "
                  f"{au['problems']} validation problems ({au['moves']} moves; {100 * au['solved']:.1f}% of episodes solved):", "",
                  "| term | AUROC, per move | AUROC, the episode's mean term |", "| --- | --- | --- |"]
        for term, v in au["terms"].items():
            lines.append(f"| `{term}` | {v['per_move']:.3f} | {v['per_episode']:.3f} |")
        lines += ["", f"`clipo` has no per-move term: {au['clipo_note']}", ""]
    return [*lines, *tuning_lines(folder / "tuning")]


def forest_plot(result: dict[str, Any], path: Path) -> None:
    """Each arm's difference from sparse with its Welch and bootstrap 95% intervals."""
    tests = result["comparisons"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(tests)[::-1]
    fig, ax = plt.subplots(figsize=(6.8, 0.7 * len(names) + 1.8))
    for i, a in enumerate(names):
        t = tests[a]
        ax.plot([100 * t["boot_low"], 100 * t["boot_high"]], [i - 0.12] * 2, color="0.6", lw=1.5,
                label="bootstrap 95%" if i == 0 else None)
        ax.errorbar(100 * t["difference"], i, xerr=[[100 * (t["difference"] - t["low"])], [100 * (t["high"] - t["difference"])]],
                    fmt="o", color="C0", capsize=4, label="Welch 95% CI" if i == 0 else None)
        ax.annotate(f"p(Holm) {t['p_holm']:.2f}", (100 * max(t["high"], t["boot_high"]), i), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(names)), [f"{a} (n={len(result['arms'][a]['rates'])})" for a in names])
    ax.set_xlabel("test greedy success, arm - sparse (points)")
    n_base = len(result["arms"]["sparse"]["rates"])
    ax.set_title(f"Dense rewards against sparse (n={n_base}), {result['arms']['sparse']['problems']:,} test problems", fontsize=10)
    ax.margins(x=0.25)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def render(page: Path, folder: Path) -> tuple[dict[Path, Any], dict[str, Any]]:
    """The files a write of ``page`` makes from the records in ``folder`` (path -> text, or the forest plot's writer),
    the page last, and :func:`analyse`'s result; an earlier write a kill cut short is finished first."""
    dataclass_cli.finish_together(page)  # its page (and the head kept of it) first
    result = analyse(read_records(folder), page=page)
    try:
        text = page.read_text(encoding="utf-8") if page.is_file() else ""
    except UnicodeDecodeError as exc:  # was a traceback
        raise SystemExit(f"{page} is not UTF-8 text (byte {exc.start}); fix it or name another --page") from None
    head = text.split(f"\n{RESULTS_HEADING}\n")[0].rstrip("\n") if text else f"# {page.stem}"
    files: dict[Path, Any] = {}
    if result["comparisons"]:
        files[page.with_name(f"{page.stem}_forest.png")] = lambda part: forest_plot(result, part)
    if page.resolve() == PAGE.resolve() and README.is_file():
        files[README] = with_answer(README.read_text(encoding="utf-8"), answer_line(result))
    files[page] = head + "\n\n" + "\n".join(results_lines(result, folder, page)).rstrip("\n") + "\n"
    return files, result


README = ROOT / "README.md"
ANSWER_MARK = "<!-- reward comparison answer: baselines/reward_analysis.py writes the next line -->"


def with_answer(readme: str, line: str) -> str:
    """``readme`` with the line after :data:`ANSWER_MARK` replaced by ``line`` (unchanged without the mark)."""
    head, mark, tail = readme.partition(ANSWER_MARK + "\n")
    return head + mark + line + "\n" + tail.split("\n", 1)[1] if mark else readme


def write_page(page: str | Path, folder: str | Path) -> str:
    """Rewrite ``page``'s results and its forest plot from the records in ``folder`` (and, for the project's page,
    the README's answer line), all or none; returns the results text."""
    page, folder = Path(page), Path(folder)
    files, result = render(page, folder)
    dataclass_cli.write_together(files)
    return files[page].split(f"\n{RESULTS_HEADING}\n", 1)[-1] + "\n" + answer_line(result)


def main(argv: list[str] | None = None) -> None:
    opts = dataclass_cli.parse(Options, argv, prog="reward_analysis.py", description=__doc__.split("\n")[0])
    page, folder = Path(opts.page), Path(opts.records)
    if opts.tuning_runs:
        for run in sorted(p for p in Path(opts.tuning_runs).iterdir() if (p / "summary.json").is_file()):
            print(f"record: {write_record(folder / 'tuning' / f'{run.name}.json.gz', run_record(run))}")
    if opts.auroc:
        from baselines.lm.dense_term_auroc import write_auroc

        write_auroc(folder / AUROC_FILE, samples=opts.auroc_samples)
    if opts.check:
        files, result = render(page, folder)  # checked as an earlier write a kill cut short meant to leave the files
        stale = [str(p) for p, text in files.items() if isinstance(text, str)  # the plot's bytes are matplotlib's
                 and not (p.is_file() and p.read_text(encoding="utf-8") == text)]
        if stale:
            print(f"{', '.join(stale)}: differ from what the records in {folder} give; run without --check to rewrite them")
            sys.exit(1)
        print(f"{page}: matches the {sum(len(a['rates']) for a in result['arms'].values())} records in {folder}")
        return
    print(write_page(page, folder))


if __name__ == "__main__":
    dataclass_cli.run_script(main)
