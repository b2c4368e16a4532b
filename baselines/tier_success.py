"""Success per difficulty tier of leaderboard submissions (``llm_eval.py`` writes one of a whole split), re-verified.

    python baselines/tier_success.py --submissions leaderboard/submissions/*.longproc-0.5k.test.jsonl \
        --out docs/results/difficulty_tiers.md --plot docs/results/difficulty_tiers.png

Every answer is re-verified (the leaderboard's ``score_answer``) and grouped by the problem's tier. Per file and tier:
the first answer's success and, with several answers a problem, the mean of all (per-sample), each with its SE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baselines.analysis.uncertainty import binomial_se
from countdown_gym import dataclass_cli
from countdown_gym.data.difficulty import TIER_METRIC, TIER_THRESHOLDS, TIERS, tier
from countdown_gym.runkit.runs import save_figure, write_text_atomic


@dataclass
class Options:
    """Success per difficulty tier of submission files, re-verified."""

    submissions: list[str] = field(default_factory=list)
    """Submission JSONL files (``countdown-gym-submission`` format, a whole split), separate or comma-separated."""
    out: str = ""  # Also write the Markdown table here.
    plot: str = ""  # Also draw a bar chart (first-answer success per tier and file) here (PNG).
    metric: str = "tier"
    """``tier``: the package's tiers; or one label (search_nodes, num_solutions, wrong_moves, first_wrong_depth,
    good_first_share) to cut the file's problems into thirds by rank on it instead (harder third last), to compare
    labels."""
    summary: bool = False
    """Print only, per file, whether its first-answer success falls across the thirds (for --metric comparisons)."""
    progress: bool = True


METRICS: dict[str, Any] = {
    "search_nodes": lambda d: d.search_nodes,
    "num_solutions": lambda d: -d.num_solutions,
    "wrong_moves": lambda d: d.wrong_moves,
    "first_wrong_depth": lambda d: -(d.first_wrong_depth if d.first_wrong_depth is not None else 99),
    "good_first_share": lambda d: -d.good_first_moves / max(d.legal_first_moves, 1),
}
"""Larger = harder, for ``--metric`` (no first wrong move counts as the easiest)."""


def tier_scores(path: str | Path, metric: str = "tier") -> dict[str, Any]:
    """Per tier: problems, first-answer successes and mean per-sample success of one submission file."""
    from countdown_gym.data.difficulty import difficulty
    from countdown_gym.leaderboard.score import score_answer
    from countdown_gym.leaderboard.submission import read_submission

    sub = read_submission(path)
    out: dict[str, Any] = {"agent": sub.header.get("agent", Path(path).stem), "preset": sub.preset, "split": sub.split,
                           "k": max(len(pa.texts) for pa in sub.answers),
                           "tiers": {t: {"problems": 0, "first": 0, "per_sample": 0.0} for t in TIERS}}
    thirds: dict[str, str] = {}  # with a --metric label: each problem's third of the file by rank on it
    if metric != "tier":
        order = sorted((pa.problem for pa in sub.answers), key=lambda p: METRICS[metric](difficulty(p)))
        thirds = {p.id: TIERS[min(3 * r // len(order), 2)] for r, p in enumerate(order)}
    for pa in sub.answers:
        seen = {text: score_answer(pa.problem, text).correct for text in dict.fromkeys(pa.texts)}  # each text once
        results = [seen[text] for text in pa.texts]
        row = out["tiers"][thirds[pa.problem.id] if thirds else tier(pa.problem, sub.preset)]
        row["problems"] += 1
        row["first"] += results[0]
        row["per_sample"] += sum(results) / len(results)
    return out


def _cell(successes: float, n: int) -> str:
    return f"{successes / n:.1%} ± {binomial_se(successes / n, n):.1%}" if n else "-"


def _falls(r: dict[str, Any], key: str) -> str:
    """``yes`` when the success ``key`` (as shown, to 0.1%) falls strictly from easy to hard, ``flat``, or ``no``."""
    rates = [round(r["tiers"][t][key] / max(r["tiers"][t]["problems"], 1), 3) for t in TIERS]
    return "flat" if len(set(rates)) == 1 else "yes" if all(a > b for a, b in zip(rates, rates[1:], strict=False)) else "no"


def markdown(results: list[dict[str, Any]]) -> str:
    """The table: one row per file (first answer, and per-sample when a file has several answers per problem)."""
    lines = ["| agent | preset / split | answers per problem | measure | " + " | ".join(TIERS) + " | falls easy -> hard |",
             "| --- | --- | ---: | --- | " + " | ".join("---:" for _ in TIERS) + " | --- |"]
    for r in results:
        kinds = [("first answer", "first")] + ([("per-sample", "per_sample")] if r["k"] > 1 else [])
        for label, key in kinds:
            cells = [_cell(r["tiers"][t][key], r["tiers"][t]["problems"]) for t in TIERS]
            lines.append(f"| {r['agent']} | {r['preset']} / {r['split']} | {r['k']} | {label} | " + " | ".join(cells)
                         + f" | {_falls(r, key)} |")
    sizes = {(r["preset"], r["split"]): [r["tiers"][t]["problems"] for t in TIERS] for r in results}
    notes = [f"Problems per tier ({', '.join(TIERS)}): " + "; ".join(f"{p}/{s} {n}" for (p, s), n in sizes.items()) + "."]
    notes += [f"Tier cut points on `{TIER_METRIC}` for {p}: easy <= {TIER_THRESHOLDS[p][0]} < medium <= {TIER_THRESHOLDS[p][1]} < hard."
              for p in sorted({r["preset"] for r in results})]
    return "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"


def summary(results: list[dict[str, Any]], metric: str) -> str:
    """One line: the files whose first-answer success falls strictly across the thirds (and those that do not)."""
    falls = [r["agent"] for r in results if _falls(r, "first") == "yes"]
    other = [r["agent"] for r in results if _falls(r, "first") == "no"]
    return (f"{metric}: first-answer success falls across the thirds for {len(falls)} of {len(falls) + len(other)} "
            f"files" + (f" (not for: {', '.join(other)})" if other else "") + "\n")


def plot(results: list[dict[str, Any]], path: str | Path) -> None:
    """Grouped bars: first-answer success per tier, one group per file, with standard-error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(results) + 2), 4))
    x = np.arange(len(results))
    width = 0.8 / len(TIERS)
    for k, t in enumerate(TIERS):
        n = np.array([r["tiers"][t]["problems"] for r in results])
        p = np.array([r["tiers"][t]["first"] for r in results]) / np.maximum(n, 1)
        ax.bar(x + (k - 1) * width, p, width, yerr=[binomial_se(q, m) for q, m in zip(p, n, strict=True)], capsize=2, label=t)
    ax.set_xticks(x, [r["agent"] for r in results], rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="success of the first answer", xlabel="agent (re-verified submission)", ylim=(0, 1),
           title=f"Success per difficulty tier (tiers cut on {TIER_METRIC})")
    ax.legend(title="tier")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    opts = dataclass_cli.parse(Options, argv)
    if opts.metric != "tier" and opts.metric not in METRICS:
        raise SystemExit(f"--metric must be tier or one of {sorted(METRICS)}, got {opts.metric!r}")
    if not opts.submissions:
        raise SystemExit("--submissions: give at least one submission file")
    missing = [s for s in opts.submissions if not Path(s).is_file()]
    if missing:
        raise SystemExit(f"--submissions: no such file: {', '.join(missing)}")
    if folder := next((f"--{k} {v}" for k, v in (("out", opts.out), ("plot", opts.plot)) if v and Path(v).is_dir()), None):
        raise SystemExit(f"{folder} is a folder; name a file")  # before the files are scored, not after
    from tqdm import tqdm

    from countdown_gym.leaderboard.submission import SubmissionError

    results = []
    for path in tqdm(opts.submissions, desc="files", disable=not opts.progress):
        try:
            results.append(tier_scores(path, opts.metric))
        except SubmissionError as exc:
            raise SystemExit(f"{path}: not a valid submission: {exc.reason}") from None
    table = summary(results, opts.metric) if opts.summary else markdown(results)
    print(table)
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(opts.out, table)
    if opts.plot:
        Path(opts.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(results, opts.plot)
    return 0


if __name__ == "__main__":
    dataclass_cli.run_script(main)
