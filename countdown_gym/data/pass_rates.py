"""Pass-rate files, one ``{"id", "samples", "correct"}`` per line: ``baselines/llm_eval.py --pass-rates`` writes
one (:func:`pass_rates_text`), ``baselines/llm_grpo.py --train-pass-rates`` keeps the problems whose rate lies
strictly between two bounds (DAPO's dynamic sampling, done once, offline).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from countdown_gym.dataclass_cli.strict import strict_json
from countdown_gym.game.problem import Problem


def pass_rates_text(problems: Sequence[Problem], correct: Sequence[Sequence[bool]]) -> str:
    """The file's text: one row per problem (``correct[i]``: each sample's success)."""
    return "".join(json.dumps({"id": p.id, "samples": len(ok), "correct": sum(ok)}) + "\n"
                   for p, ok in zip(problems, correct, strict=True))


def filter_by_pass_rate(problems: Sequence[Problem], path: str | Path, low: float, high: float) -> list[Problem]:
    """The problems whose pass rate in ``path`` lies strictly between ``low`` and ``high``, in order; a malformed
    row, an unknown problem or a problem's second row is a ``SystemExit`` naming the line."""
    ids = {p.id for p in problems}
    rates: dict[str, float] = {}
    lines: dict[str, int] = {}
    with open(path, "rb") as f:  # strict_json of bytes: a line that is not UTF-8 is a ValueError naming the line
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = strict_json(line)  # a key twice or 100,000 '[' too
                pid, samples, correct = str(row["id"]), row["samples"], row["correct"]
                if not all(type(x) is int for x in (samples, correct)):  # not int(): 2.9 -> 2, true -> 1, inf raised
                    raise TypeError("samples and correct must be whole numbers")
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{path}:{n}: expected {{'id', 'samples', 'correct'}}, got {line.strip()[:80].decode(errors='replace')!r} ({exc})") from None
            if pid not in ids:
                raise SystemExit(f"{path}:{n}: problem {pid!r} is not in the training split of this preset")
            if pid in lines:  # two rates of one problem: which one holds?
                raise SystemExit(f"{path}:{n}: problem {pid!r} has a row already (line {lines[pid]})")
            lines[pid] = n
            if samples < 1 or not 0 <= correct <= samples:
                raise SystemExit(f"{path}:{n}: need 0 <= correct <= samples and samples >= 1, got {correct}/{samples}")
            rates[pid] = correct / samples
    kept = [p for p in problems if p.id in rates and low < rates[p.id] < high]
    if not kept:
        raise SystemExit(f"{path}: no problem has a pass rate strictly between {low} and {high}")
    return kept
