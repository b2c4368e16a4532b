"""The GRPO reward comparison's protocol (``docs/results/reward_comparison.md``): its arms, seeds and ``--quick``
form, and the record one finished run leaves (:func:`run_record`); ``compare_llm_rewards.py`` runs it and
``reward_analysis.py`` answers from the records."""

from __future__ import annotations

import hashlib
import math
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baselines.lm.grpo_model import ROOT
from countdown_gym.runkit.runs import MetricsLog, read_options

VARIANTS = ("sparse", "oracle-perfect", "critic", "clipo")  # the protocol's arms (dense terms added to the outcome)
STEP_SUFFIX = "@step"  # oracle-reachable@step runs --rewards oracle-reachable --step-credit
SEEDS = ("0-10",)  # the protocol's seeds
QUICK = {"variants": ("sparse", "oracle-perfect"), "seeds": ("0-7",), "name": "reward_comparison_quick"}  # --quick


def expand_seeds(seeds: Sequence[str]) -> list[int]:
    """``--seeds`` with its ranges expanded (``0-10`` is 0, 1, ..., 10), in order, without repeats."""
    out: list[int] = []
    for part in seeds:
        lo, sep, hi = part.strip().partition("-")
        try:
            span = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise ValueError(f"--seeds takes integers and ranges such as 0-10, got {part!r}") from None
        if sep and int(hi) < int(lo):
            raise ValueError(f"--seeds: the range {part!r} is empty")
        out += [s for s in span if s not in out]
    return out


def ids_digest(ids: Sequence[str]) -> str:
    """The SHA-256 of a list of problem ids (one per line): records of the same test problems share it."""
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def git_commit() -> str:
    """The code's commit, with ``+changes`` when the code differs from it (``unknown`` outside a git checkout)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "baselines", "countdown_gym", "critics"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def run_record(path: Path) -> dict[str, Any]:
    """What a finished run in ``path`` leaves for the analysis (docs/results/reward_comparison.md): arm, seed, options,
    timing, groups without reward spread, validation rows and, with ``--test-eval``, the test outcomes."""
    import torch

    options, summary, h = (read_options(path, name) for name in ("options.json", "summary.json", "held_out.json"))
    log, metrics = (MetricsLog(path / name, resume_step=math.inf, write=False).rows for name in ("train_log.jsonl", "metrics.csv"))
    try:  # the files read (else one error naming the file above); their figures checked here
        record: dict[str, Any] = {
            "arm": options["rewards"] + (STEP_SUFFIX if options.get("step_credit") else ""), "seed": int(options["seed"]),
            "options": options, "commit": summary.get("commit") or git_commit(),
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU",
            "steps": summary["steps"] if "steps" in summary else summary["last"]["step"],
            "seconds_per_step": summary.get("seconds_per_step"), "train_seconds": summary.get("train_seconds"),
            "stopped_by_time_limit": bool(summary.get("stopped_by_time_limit")),
            "frac_reward_zero_std": [float(r["frac_reward_zero_std"]) for r in log if "frac_reward_zero_std" in r],
            "validation": [{k: float(v) for k, v in row.items() if v != ""} for row in metrics],
        }
        if h is not None:
            record.update(problems=len(h["ids"]), problem_ids_sha256=ids_digest(h["ids"]), first_problem=h["ids"][0],
                          last_problem=h["ids"][-1], test_outcomes=bits(h["end"]), start_outcomes=bits(h["start"]),
                          test=h.get("result"))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise SystemExit(f"{path}: not the files of a finished llm_grpo.py run ({type(exc).__name__}: {exc}); fix or "
                         "delete that run") from None
    return record


def bits(xs: list[bool]) -> str:
    """Outcomes as a ``"0110..."`` string."""
    return "".join("1" if x else "0" for x in xs)
