"""The problems of a GRPO run (``baselines/llm_grpo.py``): pass-rate filter, size, curriculum order; its dataset.

Groups whose completions all succeed or all fail give GRPO no signal; :func:`filter_by_pass_rate` keeps the
problems whose sampled pass rate (``llm_eval.py --pass-rates``) lies strictly between two bounds (DAPO's dynamic
sampling done once, offline); :func:`run_problems` applies it, ``--train-problems`` and ``--curriculum``, and
:func:`training_dataset` makes the trainer's dataset (and the multi-turn rollout function) of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baselines.lm.grpo_options import GRPOPlan


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


def run_problems(plan: GRPOPlan) -> tuple[list[Any], list[Any]]:
    """The problems of a run: the training problems in the order it draws them (filtered by ``plan.pass_rates``, cut
    to ``--train-problems``, ordered by ``--curriculum``) and the first ``--eval-problems`` validation problems."""
    from countdown_gym.data.splits import load_split

    opts = plan.options
    problems = load_split(opts.preset, "train")
    validation = load_split(opts.preset, "validation")[: opts.eval_problems or None]
    if plan.pass_rates is not None:
        problems = filter_by_pass_rate(problems, plan.pass_rates, opts.min_pass_rate, opts.max_pass_rate)
    if opts.train_problems:
        problems = problems[: opts.train_problems]
    if opts.curriculum == "staged":  # the prompts in schedule order; the GRPOConfig turns the shuffling off
        from countdown_gym.data.curriculum import Curriculum

        draws = opts.steps * opts.prompts_per_step
        try:
            problems = Curriculum.staged(draws, problems).sequence(draws, seed=opts.seed)
        except ValueError as exc:
            raise SystemExit(f"--curriculum staged: {exc}") from None
    return problems, validation


def training_dataset(plan: GRPOPlan, problems: list[Any], tokenizer: Any) -> tuple[Any, Any]:
    """The ``train_dataset`` of the trainer and its ``rollout_func`` (multi-turn: episodes of
    ``CountdownMultiTurn-v0``; single-pass: None, TRL generates from the prompts)."""
    from baselines.lm.grpo_model import build_dataset

    opts = plan.options
    if not plan.multi_turn:
        return build_dataset(problems, opts.prompt_style, tokenizer, opts.chat_template), None
    from countdown_gym.integrations.trl_rollout import make_rollout_func, rollout_dataset

    dataset = rollout_dataset(problems, max_turns=opts.max_turns, prompt_style=opts.prompt_style)
    return dataset, make_rollout_func(problems, max_turns=opts.max_turns, max_turn_tokens=opts.max_turn_tokens,
                                      prompt_style=opts.prompt_style)
