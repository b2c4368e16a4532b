"""Can the run's validation problems rank its checkpoints? The check behind ``best/`` against ``final/``.

    python scripts/checkpoint_ranking.py --runs runs/tune/*-s10[01]   # GRPO run directories with checkpoint-15 and final/

A GRPO run validates on 200 problems drawn at random from the validation split (``grpo_data.validation_subset``)
and saves the checkpoint that scores best there as ``best/``. This script plays the starting model, each run's
``checkpoint-15`` and its ``final/`` greedily on all 500 validation problems, and compares the pick made on the 200
with the ranking on the 300 others, which chose nothing: if the 200 ranked checkpoints reliably, their pick would
also score best on the 300. No test problem is played. Prints a Markdown table and writes ``--out`` (JSON: each
model's 500 outcomes in split order as a 0/1 string).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from countdown_gym import dataclass_cli
from countdown_gym.runkit.runs import write_text_atomic


@dataclass
class Options:
    """Can the run's validation problems rank its checkpoints?"""

    runs: tuple[str, ...] = ()
    """GRPO run directories (each with options.json, checkpoint-15 and final/)."""
    out: str = "checkpoint_ranking.json"
    """Where the per-model outcomes go (JSON)."""

    def __post_init__(self) -> None:
        if not self.runs:
            raise ValueError("--runs: name at least one GRPO run directory")


def play(path: str, problems: list[Any]) -> list[bool]:
    from baselines.lm.evaluation import Play, greedy_solved
    from baselines.lm.grpo_model import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(path)
    return greedy_solved(model, tok, problems, Play(max_turns=16, batch_size=256))


def main() -> None:
    args = dataclass_cli.parse(Options, prog="checkpoint_ranking.py", description=__doc__.split("\n")[0])
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from baselines.analysis.protocol import bits
    from baselines.lm.grpo_data import validation_subset
    from baselines.lm.grpo_model import DEFAULT_TURN_MODEL
    from countdown_gym.data.splits import load_split

    torch.set_num_threads(1)
    problems = load_split("longproc-0.5k", "validation")
    chosen = {p.id for p in validation_subset(problems, 200)}
    inside = [i for i, p in enumerate(problems) if p.id in chosen]
    outside = [i for i, p in enumerate(problems) if p.id not in chosen]
    start = play(DEFAULT_TURN_MODEL, problems)
    rows, record = [], {"start": bits(start)}
    for run in map(Path, args.runs):
        models = {0: start, 15: play(str(run / "checkpoint-15"), problems), 30: play(str(run / "final"), problems)}
        record[run.name] = {str(k): bits(v) for k, v in models.items() if k}
        sub = {k: sum(v[i] for i in inside) / len(inside) for k, v in models.items()}
        rest = {k: sum(v[i] for i in outside) / len(outside) for k, v in models.items()}
        pick = max(sub, key=lambda k: (sub[k], -k))  # as best/ picks: highest, earliest on ties
        diff = [int(models[pick][i]) - int(models[30][i]) for i in inside]
        mean = sum(diff) / len(diff)
        se = math.sqrt(sum((d - mean) ** 2 for d in diff) / (len(diff) - 1) / len(diff))
        rows.append((run.name, sub, rest, pick, max(rest, key=lambda k: (rest[k], -k)), mean, se))
    write_text_atomic(args.out, json.dumps(record, indent=1) + "\n")
    print("| run | 200 chosen: step 0 / 15 / 30 | 300 others: step 0 / 15 / 30 | best/ (200) | best on the 300 | best/ - final on the 200 (paired SE) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, sub, rest, pick, rest_best, mean, se in rows:
        fmt = " / ".join(f"{100 * sub[k]:.1f}" for k in (0, 15, 30)), " / ".join(f"{100 * rest[k]:.1f}" for k in (0, 15, 30))
        print(f"| {name} | {fmt[0]} | {fmt[1]} | step {pick} | step {rest_best} | {100 * mean:+.1f} ({100 * se:.1f}) |")
    agree = sum(r[3] == r[4] for r in rows)
    print(f"\nthe 200 problems' pick is also the best on the other 300 in {agree} of {len(rows)} runs")


if __name__ == "__main__":
    dataclass_cli.run_script(main)
