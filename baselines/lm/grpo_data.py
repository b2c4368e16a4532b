"""The training problems of a GRPO run (``baselines/llm_grpo.py``): pass-rate filter, size, curriculum order.

Groups whose completions all succeed or all fail give GRPO no signal; :func:`filter_by_pass_rate` keeps the
problems whose sampled pass rate (``llm_eval.py --pass-rates``) lies strictly between two bounds (DAPO's dynamic
sampling done once, offline); :func:`training_problems` applies it, ``--train-problems`` and ``--curriculum``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baselines.lm.grpo_model import model_name

PASS_RATES_FILE = "train_pass_rates.jsonl"


def pass_rates_file(opts: Any) -> Path | None:
    """The pass-rate file a run filters its training prompts with (None: every problem).

    ``auto`` looks for ``train_pass_rates.jsonl`` in a local model directory and uses it when its first row
    names a training problem of ``opts.preset``.
    """
    if opts.train_pass_rates in ("none", ""):
        return None
    if opts.train_pass_rates != "auto":
        return Path(opts.train_pass_rates)
    path = Path(model_name(opts)) / PASS_RATES_FILE
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as f:
        first = f.readline()
    try:
        pid = str(json.loads(first)["id"])
    except (ValueError, KeyError, TypeError):
        return path  # malformed: filter_by_pass_rate names the line
    return path if pid.startswith(f"{opts.preset}/train/") else None


def filter_by_pass_rate(problems: list[Any], path: str | Path, low: float, high: float) -> list[Any]:
    """The problems whose sampled pass rate in ``path`` lies strictly between ``low`` and ``high``, in split order.

    ``path`` holds one JSON object per line with ``id``, ``samples`` and ``correct`` (``llm_eval.py --pass-rates``).
    Rows naming a problem outside ``problems`` are an error (a file made for another preset or split).
    """
    ids = {p.id for p in problems}
    rates: dict[str, float] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                pid, samples, correct = str(row["id"]), int(row["samples"]), int(row["correct"])
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{path}:{n}: expected {{'id', 'samples', 'correct'}}, got {line.strip()[:80]!r} ({exc})") from None
            if pid not in ids:
                raise SystemExit(f"{path}:{n}: problem {pid!r} is not in the training split of this preset")
            if samples < 1 or not 0 <= correct <= samples:
                raise SystemExit(f"{path}:{n}: need 0 <= correct <= samples and samples >= 1, got {correct}/{samples}")
            rates[pid] = correct / samples
    kept = [p for p in problems if p.id in rates and low < rates[p.id] < high]
    if not kept:
        raise SystemExit(f"{path}: no problem has a pass rate strictly between {low} and {high}")
    return kept


def training_problems(opts: Any) -> tuple[list[Any], Path | None]:
    """The problems a run trains on, in the order it draws them, and the pass-rate file that filtered them."""
    from countdown_gym.data.splits import load_split

    problems = load_split(opts.preset, "train")
    rates_file = pass_rates_file(opts)
    if rates_file is not None:
        problems = filter_by_pass_rate(problems, rates_file, opts.min_pass_rate, opts.max_pass_rate)
    if opts.train_problems:
        problems = problems[: opts.train_problems]
    if opts.curriculum == "staged":  # the prompts in schedule order; the GRPOConfig turns the shuffling off
        from countdown_gym.data.curriculum import Curriculum

        draws = opts.steps * opts.prompts_per_step
        try:
            problems = Curriculum.staged(draws, problems).sequence(draws, seed=opts.seed)
        except ValueError as exc:
            raise SystemExit(f"--curriculum staged: {exc}") from None
    return problems, rates_file


def training_dataset(opts: Any, problems: list[Any], tokenizer: Any) -> tuple[Any, Any]:
    """The ``train_dataset`` of the trainer and its ``rollout_func`` (multi-turn: episodes of
    ``CountdownMultiTurn-v0``; single-pass: None, TRL generates from the prompts)."""
    from baselines.lm.grpo_model import build_dataset, interaction

    if interaction(opts) != "multi-turn":
        return build_dataset(problems, opts.prompt_style, tokenizer, opts.chat_template), None
    from countdown_gym.integrations.trl_rollout import make_rollout_func, rollout_dataset

    dataset = rollout_dataset(problems, max_turns=opts.max_turns, prompt_style=opts.prompt_style)
    return dataset, make_rollout_func(problems, max_turns=opts.max_turns, max_turn_tokens=opts.max_turn_tokens,
                                      prompt_style=opts.prompt_style)
