"""GRPO on Countdown with TRL: sparse, oracle, critic and CLIPO rewards (CleanRL style: the options and the flow of a run).

    python baselines/llm_grpo.py                                  # shipped tiny model, CPU, < 10 min
    python baselines/llm_grpo.py --rewards oracle-reachable --steps 200
    python baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero \\
        --max-completion-length 1024 --use-vllm --vllm-mode colocate
    accelerate launch baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero
    python baselines/llm_grpo.py --interaction tools --model Qwen/Qwen2.5-1.5B-Instruct --use-vllm  # TRL's tool loop

Every field of :class:`Options` (``baselines/lm/grpo_options.py``) is a command-line flag (``--field-name``). Rewards are the TRL
reward functions of ``countdown_gym.integrations.trl`` (variants and CLIPO: ``baselines/lm/rewards.py``);
validation (greedy + sampled as the rollouts sample) runs every ``--eval-interval`` steps
(``baselines/lm/callbacks.py``) and writes ``metrics.csv`` and ``success.png`` into the output directory.
This file holds the flow of a run; the parts are modules named by their job: ``grpo_options.py`` (the options and
the plan they resolve to), ``grpo_model.py`` (model, position-ids patch), ``grpo_data.py`` (problems, pass-rate filter, curriculum, trainer inputs),
``grpo_config.py`` (process layout, GRPOConfig, rewards, dry run), ``held_out.py`` (the test split before and after),
``tool_play.py`` (``--interaction tools``: validation and the test played through tool calls),
``run_card.py`` (the run's README.md);
the run directory follows ``countdown_gym.runkit.runs``. ``docs/llm_grpo.md`` has the details.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

from baselines.lm.checkpoints import CompletionMarker, last_complete_checkpoint
from baselines.lm.grpo_config import (
    build_grpo_config,
    build_reward_funcs,
    check_start_up,
    check_vllm_available,
    dry_run,
    estimate_memory,
    model_shape_or_exit,
    plan_run,
    trainer_class_of,
)
from baselines.lm.grpo_data import held_out_test, run_inputs, run_problems
from baselines.lm.grpo_model import (  # noqa: F401  (DEFAULT_*: the shipped models, named here for scripts)
    DEFAULT_MODEL,
    DEFAULT_TURN_MODEL,
    load_model_and_tokenizer,
)
from baselines.lm.grpo_options import RESUMABLE_CHANGES, GRPOPlan, Options, resumed_options
from baselines.lm.run_card import run_card, summary_lines
from countdown_gym import dataclass_cli
from countdown_gym.runkit import runs


def parse_options(argv: list[str] | None = None) -> Options:
    """:class:`Options` from the command line (``countdown_gym.dataclass_cli``: a bad value is a usage error), checked
    as a run checks them (:meth:`GRPOPlan.of`: the checks that read files or load libraries)."""
    opts = dataclass_cli.parse(Options, argv, description=__doc__.split("\n")[0])
    GRPOPlan.of(opts)
    return opts


def train(opts: Options) -> dict[str, Any]:
    """Run GRPO; returns the first and last validation rows, the held-out test figures and timing figures."""
    import torch
    from accelerate import PartialState

    from baselines.lm.callbacks import (
        ClipoCheckpointCallback,
        RunCardCallback,
        StopRequestCallback,
        TimeLimitCallback,
        attach_reporting,
    )
    from baselines.lm.generation import Sampling
    from baselines.lm.step_profile import StepProfile
    from countdown_gym.runkit.runs import StopRequest

    plan = GRPOPlan.of(opts)  # checked, "auto" resolved: options.json records what runs
    opts = plan.options
    if opts.use_vllm:
        check_vllm_available()
    compute = plan_run(plan)
    check_start_up(plan, compute)  # before anything is written or loaded
    torch.set_num_threads(opts.threads)
    out = plan.run_dir
    resume_from = last_complete_checkpoint(out) if opts.resume else None  # a save cut short is passed over
    if opts.resume and resume_from is None:
        print(f"--resume: no checkpoint in {out}; starting from scratch", flush=True)
    state = PartialState()
    main_process = state.is_main_process  # with several processes, one writes the run's files
    # a --resume over any checkpoint, torn ones too, compares the options: a fresh start never overwrites another run
    resuming = resume_from is not None or (opts.resume and any(Path(out).glob("checkpoint-*")))
    runs.prepare_run(out, "--output-dir", opts, resume=opts.resume, resuming=resuming,
                     may_change=RESUMABLE_CHANGES, markers=("checkpoint-*", "metrics.csv"),
                     saved_as=partial(resumed_options, opts), write=main_process, barrier=state.wait_for_everyone)

    if compute.layout.on_gpu and main_process:  # the estimate --dry-run prints, as a warning (it may be pessimistic)
        from baselines.lm.gpu_plan import GB

        peak = estimate_memory(plan, compute, model_shape_or_exit(plan.model))["total"]
        if peak > compute.layout.gpu_memory:
            print(f"warning: the estimated peak memory per process, {peak / GB:.1f} GB, exceeds the GPU's "
                  f"{compute.layout.gpu_memory / GB:.1f} GB (--dry-run shows the parts)", flush=True)
    config = build_grpo_config(plan, compute)
    # float32 weights and optimizer state by default, as TRL loads a model id; --bf16 autocasts the compute.
    # Weights in bf16 (what from_pretrained picks for a bf16 hub config) would round away updates of lr ~1e-6.
    dtype = opts.model_dtype if opts.model_dtype == "auto" else getattr(torch, opts.model_dtype)
    model, tokenizer = load_model_and_tokenizer(plan.model, dtype)
    train_problems, val_problems = run_problems(plan)
    if not opts.quiet:
        kept = f" with a pass rate in ({opts.min_pass_rate}, {opts.max_pass_rate}) in {plan.pass_rates}" if plan.pass_rates else ""
        print(f"training on {len(train_problems)} problems{kept}", flush=True)
    inputs = run_inputs(plan, train_problems, val_problems, tokenizer)
    funcs, clipo = build_reward_funcs(plan, tokenizer, model.config.get_text_config().hidden_size)
    sampling = Sampling.of_rollouts(config)  # the sampled validation draws as the rollouts draw
    turns = opts.max_turns if plan.multi_turn or plan.tools else None  # an episode's turn budget (single-pass: none)
    if plan.tools:  # validation played through tool calls, as TRL's tool loop plays them
        from baselines.lm.tool_play import ToolValidationCallback as ValidationCallback
    else:
        from baselines.lm.callbacks import ValidationCallback
    validation = ValidationCallback(
        problems=val_problems, prompts=inputs.val_prompts, sampling=sampling,
        tokenizer=tokenizer, output_dir=out, eval_interval=opts.eval_interval, samples=opts.eval_samples,
        max_new_tokens=opts.max_completion_length, batch_size=opts.eval_batch_size, seed=opts.seed, verbose=not opts.quiet,
        max_turns=turns, write=main_process,
        resume_step=int(Path(resume_from).name.rsplit("-", 1)[1]) if resume_from else None,  # checkpoint-N
    )
    profile = StepProfile()  # first, so that its step ends before the validation callback evaluates
    callbacks: list[Any] = [profile, validation]
    if clipo is not None:
        callbacks.append(ClipoCheckpointCallback(clipo.clipo))
    trainer_class, credit = trainer_class_of(plan, funcs)
    trainer = trainer_class(model=model, reward_funcs=funcs, args=config, train_dataset=inputs.dataset, processing_class=tokenizer,
                            callbacks=callbacks, rollout_func=inputs.rollout_func, **credit)
    attach_reporting(trainer, validation, out)
    test_result: dict[str, Any] = {}  # the held-out comparison, on the card once the run has it
    card = RunCardCallback(out / "README.md", lambda step: run_card(plan, validation.rows, step, profile.summary(),
                                                                    test_result or None))
    trainer.add_callback(card)
    profile.attach(trainer)
    if clipo is not None:
        clipo.bind(trainer)
        head_state = Path(resume_from or "") / ClipoCheckpointCallback.FILENAME
        if resume_from and not head_state.is_file():
            raise SystemExit(f"--resume: {head_state} is missing (a save cut short?); a fresh CLIPO head would change the "
                             f"reward mid-run: delete {resume_from} to resume from the checkpoint before it")
        if resume_from:
            clipo.clipo.load_state_dict(torch.load(head_state, map_location="cpu", weights_only=True))
    test = None
    if opts.test_eval:  # the start on held-out problems (a resumed run, or a comparison's, reads it from held_out.json)
        test = held_out_test(plan, tokenizer, out / "held_out.json", write=main_process, verbose=not opts.quiet)
        test.start(model)
    time_limit = TimeLimitCallback(opts.max_minutes) if opts.max_minutes > 0 else None
    if time_limit is not None:
        trainer.add_callback(time_limit)
    start = time.perf_counter()
    with StopRequest() as stop:  # the first Ctrl-C / SIGTERM: finish the step, save a checkpoint, stop
        trainer.add_callback(StopRequestCallback(stop))
        trainer.add_callback(CompletionMarker())  # last: a checkpoint is marked complete once every file is written
        trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.perf_counter() - start
    if stop.requested:
        print(f"stopped at step {trainer.state.global_step}; --resume continues from "
              f"{out / f'checkpoint-{trainer.state.global_step}'}")
        return {"interrupted": True, "step": trainer.state.global_step, "output_dir": str(out)}
    trainer.save_model(str(out / "final"))
    if clipo is not None and main_process:
        clipo.clipo.save(out / "final" / ClipoCheckpointCallback.FILENAME)
    summary = validation.summary()
    summary["steps"] = trainer.state.global_step
    if time_limit is not None and time_limit.stopped_at is not None:
        summary["stopped_by_time_limit"] = True
        print(f"stopped at step {trainer.state.global_step} of {opts.steps}: --max-minutes {opts.max_minutes:g} reached", flush=True)
    if test is not None:
        test_result.update(test.end(trainer.model))
        summary["test"] = test_result
    summary.update(interaction=opts.interaction, step_profile=profile.summary(), train_seconds=seconds, output_dir=str(out), best_dir=str(out / validation.BEST_DIR),
                   train_problems=len(train_problems), train_pass_rates=str(plan.pass_rates) if plan.pass_rates else None)
    if main_process:  # the other processes hold no validation rows
        runs.write_text_atomic(out / "summary.json", json.dumps(summary, indent=2) + "\n")
        if test is not None:  # the card of the end (written at on_train_end) with the held-out comparison added
            card.write(trainer.state.global_step)
    return summary


def main(argv: list[str] | None = None) -> None:
    opts = dataclass_cli.parse(Options, argv, description=__doc__.split("\n")[0])
    if opts.dry_run:
        dry_run(GRPOPlan.of(opts))
        return
    t0 = time.perf_counter()
    summary = train(opts)
    if summary.get("interrupted"):
        raise SystemExit(runs.INTERRUPTED_EXIT_CODE)  # stopped by Ctrl-C / SIGTERM; train() said where the checkpoint is
    for line in summary_lines(opts, summary):
        print(line)
    print(f"total {time.perf_counter() - t0:.0f} s; outputs in {summary['output_dir']}")


if __name__ == "__main__":
    main()
