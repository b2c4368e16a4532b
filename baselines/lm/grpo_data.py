"""The problems and prompts of a GRPO run (``baselines/llm_grpo.py``).

:func:`run_problems` applies the pass-rate filter (``countdown_gym.data.pass_rates``), ``--train-problems`` and
``--curriculum`` to the training split (:func:`held_out_problems`: the test problems of ``--test-eval``);
:func:`run_inputs` makes the trainer's dataset of them (and the multi-turn
rollout function), and the single-pass validation prompts (``text_format.trainer_prompt``, as TRL takes them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from baselines.lm.grpo_options import GRPOPlan
from countdown_gym.game.problem import Problem


def first_problems(problems: list[Problem], n: int, flag: str, what: str) -> list[Problem]:
    """The first ``n`` of ``problems`` (0: all); asking for more than there are prints a note that all are used."""
    if n > len(problems):
        print(f"note: {flag} {n} is more than the {len(problems)} {what}; all {len(problems)} are used")
    return problems[: n or None]


VALIDATION_SEED = 20261129
"""The seed of the run's validation subset (:func:`validation_subset`): fixed, the same in every run and every seed, so
that runs are validated, tuned and their ``best/`` chosen on the same problems."""


def validation_subset(problems: list[Problem], n: int, seed: int = VALIDATION_SEED) -> list[Problem]:
    """``n`` problems drawn at random (without replacement, ``seed``) from a validation split, in split order; all of
    them for ``n`` = 0 or ``n`` >= the split (the split's first problems are the shipped model's best part:
    docs/results/llm_grpo_settings.md, so a run is not validated on the first ``n``)."""
    import random

    if n == 0 or n >= len(problems):
        if n > len(problems):
            print(f"note: --eval-problems {n} is more than the {len(problems)} validation problems; all are used")
        return list(problems)
    keep = sorted(random.Random(seed).sample(range(len(problems)), n))
    return [problems[i] for i in keep]


def run_problems(plan: GRPOPlan) -> tuple[list[Problem], list[Problem]]:
    """The problems of a run: the training problems in the order it draws them (filtered by ``plan.pass_rates``, cut
    to ``--train-problems``, ordered by ``--curriculum``) and ``--eval-problems`` validation problems drawn at random
    with the fixed :data:`VALIDATION_SEED` (:func:`validation_subset`)."""
    from countdown_gym.data.splits import load_split

    opts = plan.options
    problems = load_split(opts.preset, "train")
    validation = validation_subset(load_split(opts.preset, "validation"), opts.eval_problems)
    if plan.pass_rates is not None:
        from countdown_gym.data.pass_rates import filter_by_pass_rate

        problems = filter_by_pass_rate(problems, plan.pass_rates, opts.min_pass_rate, opts.max_pass_rate)
    problems = first_problems(problems, opts.train_problems, "--train-problems",
                              "training problems" + (" that pass the pass-rate filter" if plan.pass_rates is not None else ""))
    if opts.curriculum == "staged":  # the prompts in schedule order; the GRPOConfig turns the shuffling off
        from countdown_gym.data.curriculum import Curriculum

        draws = opts.steps * opts.prompts_per_step
        try:
            problems = Curriculum.staged(draws, problems).sequence(draws, seed=opts.seed)
        except ValueError as exc:
            raise SystemExit(f"--curriculum staged: {exc}") from None
    return problems, validation


def held_out_problems(plan: GRPOPlan) -> list[Problem]:
    """The first ``--test-problems`` problems of the preset's test split, which ``--test-eval`` plays at the start and
    the end."""
    from countdown_gym.data.splits import load_split

    return first_problems(load_split(plan.options.preset, "test"), plan.options.test_problems, "--test-problems",
                          f"test problems of {plan.options.preset}")


def held_out_test(plan: GRPOPlan, tokenizer: Any, path: Any, *, write: bool = True, verbose: bool = True) -> Any:
    """The run's :class:`~baselines.lm.held_out.HeldOutTest` (its held-out problems, played as the run plays), keeping
    its outcomes in ``path``; the reward comparison builds the same one to play the start once for all its runs."""
    if plan.tools:  # played through tool calls, as TRL's tool loop plays them
        from baselines.lm.tool_play import ToolHeldOutTest as HeldOutTest
    else:
        from baselines.lm.held_out import HeldOutTest

    opts = plan.options
    problems = held_out_problems(plan)
    turns = opts.max_turns if plan.multi_turn or plan.tools else None  # an episode's turn budget (single-pass: none)
    return HeldOutTest(problems, tokenizer=tokenizer, path=path, max_turns=turns,
                       prompts=None if turns else single_pass_prompts(plan, problems, tokenizer),
                       max_new_tokens=opts.max_completion_length, batch_size=opts.eval_batch_size,
                       settings={"model": plan.model, "prompt_style": opts.prompt_style, "chat_template": opts.chat_template},
                       write=write, verbose=verbose)


def single_pass_prompts(plan: GRPOPlan, problems: list[Problem], tokenizer: Any) -> list[Any]:
    """The prompts of ``problems`` as TRL takes them (``text_format.trainer_prompt``, the run's style and template)."""
    from countdown_gym.game.text_format import trainer_prompt

    return [trainer_prompt(p, plan.options.prompt_style, tokenizer, plan.options.chat_template) for p in problems]


@dataclass(frozen=True)
class RunInputs:
    """What the trainer and the validation are given: the ``train_dataset`` (single-pass: ``prompt`` and ``problem``,
    Problem.to_dict JSON, columns; tools: ``trl_env.make_dataset`` rows), its ``rollout_func`` (multi-turn: episodes of ``CountdownMultiTurn-v0``;
    single-pass: None, TRL generates from the prompts) and the validation prompts (single-pass; multi-turn
    validation plays episodes from the problems)."""

    dataset: Any
    rollout_func: Any
    val_prompts: list[Any]


def run_inputs(plan: GRPOPlan, problems: list[Problem], validation: list[Problem], tokenizer: Any) -> RunInputs:
    """The :class:`RunInputs` of a run's training and validation problems."""
    opts = plan.options
    if plan.multi_turn:
        from countdown_gym.integrations.trl_rollout import rollout_task

        dataset, rollout_func = rollout_task(problems, max_turns=opts.max_turns, max_turn_tokens=opts.max_turn_tokens,
                                             prompt_style=opts.prompt_style,
                                             stop_at_dead_end=opts.dead_end_patience if opts.stop_at_dead_end else 0)
        return RunInputs(dataset, rollout_func, [])
    if plan.tools:  # TRL's tool loop resets a CountdownToolEnv with each row (the trainer's environment_factory)
        from countdown_gym.integrations.trl_env import make_dataset

        return RunInputs(make_dataset(problems), None, [])
    from datasets import Dataset

    prompts = single_pass_prompts(plan, problems, tokenizer)
    rows = [{"prompt": prompt, "problem": json.dumps(p.to_dict(), separators=(",", ":"))} for p, prompt in zip(problems, prompts, strict=True)]
    return RunInputs(Dataset.from_list(rows), None, single_pass_prompts(plan, validation, tokenizer))
