"""The problems of a GRPO run: :func:`run_problems` loads the preset's splits once and applies the pass-rate filter,
``--train-problems``, ``--curriculum``, ``--eval-problems`` (:func:`validation_subset`) and ``--test-problems``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from baselines.lm.grpo_options import GRPORun
from countdown_gym.game.problem import Problem

VALIDATION_SEED = 20261129
"""The seed of :func:`validation_subset`: every run is validated on the same problems."""


def validation_subset(problems: list[Problem], n: int, seed: int = VALIDATION_SEED) -> list[Problem]:
    """``n`` problems drawn at random (``seed``) from a validation split, in split order; all for ``n`` = 0 or more than
    it holds (its first problems are the shipped model's best part: docs/results/llm_grpo_settings.md)."""
    if n == 0 or n >= len(problems):
        return list(problems)
    return [problems[i] for i in sorted(random.Random(seed).sample(range(len(problems)), n))]


@dataclass(frozen=True)
class RunProblems:
    """The problems of a run: ``train`` in the order it draws them, ``validation`` and ``test``."""

    train: list[Problem]
    validation: list[Problem]
    test: list[Problem]


def run_problems(run: GRPORun) -> RunProblems:
    """The :class:`RunProblems` of a run (asking for more problems than a split holds prints a note)."""
    from countdown_gym.data.splits import load_split

    opts = run.options
    train, validation, test = (load_split(opts.preset, split) for split in ("train", "validation", "test"))
    if run.pass_rates is not None:
        from countdown_gym.data.pass_rates import filter_by_pass_rate

        train = filter_by_pass_rate(train, run.pass_rates, opts.min_pass_rate, opts.max_pass_rate)
    filtered = " that pass the pass-rate filter" if run.pass_rates is not None else ""
    for flag, n, problems, what in (("--train-problems", opts.train_problems, train, f"training problems{filtered}"),
                                    ("--eval-problems", opts.eval_problems, validation, "validation problems"),
                                    ("--test-problems", opts.test_problems, test, f"test problems of {opts.preset}")):
        if n > len(problems):
            print(f"note: {flag} {n} is more than the {len(problems)} {what}; all {len(problems)} are used")
    train, test = train[: opts.train_problems or None], test[: opts.test_problems or None]
    if 0 < opts.eval_problems < len(validation):  # validation_subset, drawn here
        validation = [validation[i] for i in sorted(random.Random(VALIDATION_SEED).sample(range(len(validation)), opts.eval_problems))]
    if opts.curriculum == "staged":  # the prompts in schedule order; the GRPOConfig turns the shuffling off
        from countdown_gym.data.curriculum import Curriculum

        draws = opts.steps * opts.prompts_per_step
        try:
            train = Curriculum.staged(draws, train).sequence(draws, seed=opts.seed)
        except ValueError as exc:
            raise SystemExit(f"--curriculum staged: {exc}") from None
    return RunProblems(train, validation, test)


def trainer_prompts(run: GRPORun, problems: list[Problem], tokenizer: Any) -> list[Any]:
    """Single-pass: the prompts of ``problems`` as TRL takes them."""
    from countdown_gym.game.text_format import trainer_prompt

    return [trainer_prompt(p, run.options.prompt_style, tokenizer, run.options.chat_template) for p in problems]
