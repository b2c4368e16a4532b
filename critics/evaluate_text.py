"""Score the text critic against the exact oracle, beside V2: ``python -m critics.evaluate_text``.

:mod:`critics.evaluate`'s state sets with 2-4 numbers; trace states read as trace prefixes (``score_texts``) and
every set as bare states (``score``, what the reward wrappers call), with the throughput of each call. Writes
``results.json`` and ``report.md`` into ``--out``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from countdown_gym import Problem, dataclass_cli, dfs_trace, load_split
from critics import V2_CHECKPOINT, load_critic, metrics
from critics.data import LabelledStates, random_states, start_states, trace_tree
from critics.metrics import EvalOptions, per_size, report_head, write_results
from critics.text_critic import load_text_critic, node_lines, prefix_window


@dataclass
class TextEvalOptions(EvalOptions):
    """Score the text critic against the exact oracle, beside V2."""

    checkpoint: str | None = None
    """Text critic checkpoint directory (default: critics/checkpoints/text)."""
    max_problems: int | None = 300
    """First N problems of the split (None: all)."""
    out: str = "runs/critic-eval-text"
    """Output directory."""


def trace_prefixes(problems: Sequence[Problem], min_size: int = 1) -> tuple[LabelledStates, list[str]]:
    """:func:`critics.data.trace_states` and, for each of its states, the trace text up to the line that creates it
    (its first occurrence in the trace)."""
    rows, texts = [], []
    for p in problems:
        text = dfs_trace(p)
        lines, first_line = text.split("\n"), {}
        for s, line in zip(trace_tree(p).states, node_lines(text), strict=True):
            first_line.setdefault(tuple(sorted(s)), line)  # first occurrences in order: trace_states' states
        for k, line in first_line.items():
            if len(k) >= min_size:
                rows.append((k, p.target, p))
                texts.append(prefix_window(lines, line))
    return LabelledStates.label(rows), texts


def _timed(fn, items: Sequence, targets: Sequence[int]) -> tuple[np.ndarray, dict[str, float]]:
    """``fn(items, targets)`` and its states per wall and per CPU second (on a loaded machine: the fair cost)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(items, targets)
    wall, cpu, n = time.perf_counter() - t, time.process_time() - c, len(items)
    return out, {"states": n, "per_wall_second": n / wall, "per_cpu_second": n / max(cpu, 1e-9)}


def evaluate_text(checkpoint: str | None = None, preset: str = "longproc-0.5k", split: str = "test", max_problems: int | None = 300,
                  rollouts: int = 4, seed: int = 0, start_targets: int = 4, out: str | Path = "runs/critic-eval-text",
                  progress: bool = True) -> dict:
    """The whole comparison; returns the results dict and writes ``results.json`` + ``report.md`` into ``out``."""
    TextEvalOptions(checkpoint=checkpoint, preset=preset, split=split, max_problems=max_problems, rollouts=rollouts,
                    start_targets=start_targets, seed=seed)  # its checks (ValueError)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text, v2 = load_text_critic(checkpoint), load_critic(V2_CHECKPOINT)  # the comparison docs/critics.md reports
    problems = load_split(preset, split)[:max_problems]
    bar = tqdm(total=6, desc="text critic evaluation", disable=not progress)
    trace, prefixes = trace_prefixes(problems, min_size=2)
    sets = {"trace": trace, "random": random_states(problems, rollouts=rollouts, seed=seed, min_size=2)}
    sets["start (4 numbers, random targets 10-50)"] = start_states(problems, start_targets, seed, distinct=True)
    bar.update(1)
    res: dict = {"text_checkpoint": str(text.path), "preset": preset, "split": split, "problems": len(problems),
                 "rollouts": rollouts, "seed": seed, "start_targets": start_targets, "sets": {}, "throughput_states_per_s": {}}
    s, rates = _timed(text.score_texts, prefixes, trace.targets)
    res["sets"]["trace"] = {"text (trace prefix)": per_size(s, trace, overall=False)}
    res["throughput_states_per_s"]["text, score_texts (trace prefixes)"] = rates
    bar.update(1)
    for name, ls in sets.items():
        s, rates = _timed(text.score, ls.states, ls.targets)
        res["sets"].setdefault(name, {})["text (state only)"] = per_size(s, ls, overall=False)
        if name == "trace":
            res["throughput_states_per_s"]["text, score (bare states)"] = rates
        bar.update(1)
    for name, ls in sets.items():
        res["sets"][name]["V2 (shipped)"] = per_size(v2.score(ls.states, ls.targets), ls, overall=False)
        if name == "trace":
            v2._goal_cache.clear()
            res["throughput_states_per_s"]["V2, score"] = _timed(v2.score, ls.states, ls.targets)[1]
    bar.update(1)
    bar.close()
    write_results(res, out, render_report)
    return res


def render_report(res: dict) -> str:
    intro = (f"States of `{res['preset']}/{res['split']}` (first {res['problems']} problems) with 2-4 numbers, "
             "labelled by `countdown_gym.reachable`.")
    lines = report_head(f"Text critic vs V2: {res['text_checkpoint']}", intro,
                        ["state set", "critic", "subset", "n", "reachable", "AUROC", "best acc"], 3)
    for name, by_critic in res["sets"].items():
        for critic, entry in by_critic.items():
            for sub, m in entry.items():
                lines.append(f"| {name} | {critic} | {sub} | {m['n']} | {m['reachable_frac']:.3f} | {m['auroc']:.3f} | {m['best_acc']:.3f} |")
    lines += ["", f"Throughput on the trace states (torch threads: {res['threads']}; per CPU second = states over the "
              "process's CPU time, which a loaded machine does not inflate):", ""]
    lines += [f"* {k}: {v['per_wall_second']:,.0f} states per wall second, {v['per_cpu_second']:,.0f} per CPU second"
              for k, v in res["throughput_states_per_s"].items()]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    metrics.main(TextEvalOptions, lambda o: evaluate_text(o.checkpoint, o.preset, o.split, o.max_problems, o.rollouts,
                                                             o.seed, o.start_targets, o.out),
                    render_report, argv, prog="critics.evaluate_text", description=__doc__.split("\n")[0])


if __name__ == "__main__":
    dataclass_cli.run_script(main)
