"""GRPO on Countdown with TRL: sparse, oracle, critic and CLIPO rewards (CleanRL style: the options and the flow of a run).

    python baselines/llm_grpo.py                                  # shipped tiny model, CPU, < 10 min
    python baselines/llm_grpo.py --rewards oracle-reachable --steps 200
    python baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero \\
        --max-completion-length 1024 --use-vllm --vllm-mode colocate
    accelerate launch baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero
    python baselines/llm_grpo.py --interaction tools --model Qwen/Qwen2.5-1.5B-Instruct --use-vllm  # TRL's tool loop

Every field of :class:`Options` (``baselines/lm/grpo_options.py``) is a flag (``--field-name``). :func:`train` holds
the flow of a run: it resolves the options once into the run's parts, made by modules named by their job
(``grpo_options``, ``grpo_config``, ``grpo_model``, ``grpo_data``, ``held_out``, ``tool_play``, ``callbacks``,
``run_card`` in ``baselines/lm/``), and hands them to ``grpo_trainer.CountdownGRPOTrainer``, whose docstring says what
one step does. Validation writes ``metrics.csv`` and ``success.png`` into the run directory; ``docs/llm_grpo.md``
has the details.
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
    check_start_up,
    check_vllm_available,
    dry_run,
    estimate_memory,
    model_shape_or_exit,
    plan_compute,
    run_rewards,
)
from baselines.lm.grpo_data import run_problems
from baselines.lm.grpo_model import (  # noqa: F401  (DEFAULT_*: the shipped models, named here for scripts)
    DEFAULT_MODEL,
    DEFAULT_TURN_MODEL,
    load_model_and_tokenizer,
)
from baselines.lm.grpo_options import RESUMABLE_CHANGES, GRPORun, Options, resumed_options
from baselines.lm.run_card import run_card, summary_lines
from countdown_gym import dataclass_cli
from countdown_gym.runkit import runs


def parse_options(argv: list[str] | None = None) -> Options:
    """:class:`Options` from the command line (a bad value is a usage error), checked as a run checks them."""
    opts = dataclass_cli.parse(Options, argv, description=__doc__.split("\n")[0])
    GRPORun.of(opts)
    return opts


def train(opts: Options) -> dict[str, Any]:
    """Run GRPO (the flow of the module docstring); returns the first and last validation rows, the held-out test
    figures and timing figures."""
    import torch
    from accelerate import PartialState

    from baselines.lm.callbacks import (
        ClipoCheckpointCallback,
        RunCardCallback,
        StepProfile,
        StopRequestCallback,
        TimeLimitCallback,
        ValidationCallback,
        attach_reporting,
    )
    from baselines.lm.generation import Sampling
    from baselines.lm.grpo_trainer import CountdownGRPOTrainer
    from baselines.lm.held_out import held_out_test
    from countdown_gym.runkit.runs import StopRequest

    run = GRPORun.of(opts)  # checked, "auto" resolved: options.json records what runs
    opts = run.options
    if opts.use_vllm:
        check_vllm_available()
    compute = plan_compute(run)
    check_start_up(run, compute)  # before anything is written or loaded
    config = build_grpo_config(run, compute)
    state = PartialState()
    main_process = state.is_main_process  # with several processes, one writes the run's files
    if compute.layout.on_gpu and main_process:  # the estimate --dry-run prints, as a warning (it may be pessimistic)
        from baselines.lm.gpu_plan import GB

        peak = estimate_memory(run, compute, model_shape_or_exit(run.model))["total"]
        if peak > compute.layout.gpu_memory:
            print(f"warning: the estimated peak memory per process, {peak / GB:.1f} GB, exceeds the GPU's "
                  f"{compute.layout.gpu_memory / GB:.1f} GB (--dry-run shows the parts)", flush=True)
    sampling = Sampling.of_rollouts(config)  # the sampled validation draws as the rollouts draw
    out = run.run_dir
    resume_from = last_complete_checkpoint(out) if opts.resume else None  # a save cut short is passed over
    if opts.resume and resume_from is None:
        print(f"--resume: no checkpoint in {out}; starting from scratch", flush=True)
    elif resume_from is not None:
        print(f"resumed from {resume_from} at step {Path(resume_from).name.removeprefix('checkpoint-')}", flush=True)
    torch.set_num_threads(opts.threads)
    # float32 weights and optimizer state by default, as TRL loads a model id; --bf16 autocasts the compute.
    # Weights in bf16 (what from_pretrained picks for a bf16 hub config) would round away updates of lr ~1e-6.
    model, tokenizer = load_model_and_tokenizer(run.model, opts.model_dtype if opts.model_dtype == "auto" else getattr(torch, opts.model_dtype))
    rewards = run_rewards(run, tokenizer, model.config.get_text_config().hidden_size)
    problems = run_problems(run)
    if not opts.quiet:
        kept = f" with a pass rate in ({opts.min_pass_rate}, {opts.max_pass_rate}) in {run.pass_rates}" if run.pass_rates else ""
        print(f"training on {len(problems.train)} problems{kept}", flush=True)
    # a --resume over any checkpoint, torn ones too, compares the options, so a fresh start never overwrites a run
    resuming = resume_from is not None or (opts.resume and any(Path(out).glob("checkpoint-*")))
    runs.prepare_run(out, "--output-dir", opts, resume=opts.resume, resuming=resuming,
                     may_change=RESUMABLE_CHANGES, markers=("checkpoint-*", "metrics.csv"),
                     saved_as=partial(resumed_options, opts), write=main_process, barrier=state.wait_for_everyone)

    # the trainer's inputs: multi-turn episodes (rollout_func), TRL's tool loop (environment_factory), or prompts
    rollout_func = environment_factory = None
    val_prompts: list[Any] = []  # single-pass: the prompts of the validation and test problems as TRL takes them
    test_prompts: list[Any] | None = None
    if run.tools:  # TRL's tool loop resets a CountdownToolEnv with each row
        from countdown_gym.integrations.trl_env import CountdownToolEnv, make_dataset

        dataset, environment_factory = make_dataset(problems.train), partial(CountdownToolEnv, max_turns=opts.max_turns)
    elif run.multi_turn:  # the episodes of CountdownMultiTurn-v0, one move per model turn
        from countdown_gym.integrations.trl_rollout import rollout_task

        dataset, rollout_func = rollout_task(problems.train, max_turns=opts.max_turns, max_turn_tokens=opts.max_turn_tokens,
                                             prompt_style=opts.prompt_style,
                                             stop_at_dead_end=opts.dead_end_patience if opts.stop_at_dead_end else 0)
    else:  # single-pass: prompt and problem (Problem.to_dict JSON) columns
        from datasets import Dataset

        from countdown_gym.game.text_format import trainer_prompt

        train_prompts, val_prompts, test_prompts = ([trainer_prompt(p, opts.prompt_style, tokenizer, opts.chat_template) for p in ps]
                                                    for ps in (problems.train, problems.validation, problems.test))
        dataset = Dataset.from_list([{"prompt": prompt, "problem": json.dumps(p.to_dict(), separators=(",", ":"))}
                                     for p, prompt in zip(problems.train, train_prompts, strict=True)])
    test = None  # the start and the end on held-out problems (a resumed run, or a comparison's, reads the start back)
    if opts.test_eval:
        test = held_out_test(run, tokenizer, out / "held_out.json", problems.test, test_prompts, write=main_process,
                             verbose=not opts.quiet)

    # the callbacks: step timing, validation, CLIPO head checkpoints, time limit, run card; the trainer
    validation = ValidationCallback(
        problems.validation, val_prompts, tokenizer, out, how=run.eval_play, sampling=sampling, eval_interval=opts.eval_interval,
        samples=opts.eval_samples, seed=opts.seed, verbose=not opts.quiet, write=main_process,
        resume_step=int(Path(resume_from).name.rsplit("-", 1)[1]) if resume_from else None,  # checkpoint-N
    )
    profile = StepProfile()  # first, so that its step ends before the validation callback evaluates
    callbacks: list[Any] = [profile, validation]
    if rewards.clipo is not None:
        callbacks.append(ClipoCheckpointCallback(rewards.clipo.clipo))
    time_limit = TimeLimitCallback(opts.max_minutes) if opts.max_minutes > 0 else None
    test_result: dict[str, Any] = {}  # the held-out comparison, on the card once the run has it
    card = RunCardCallback(out / "README.md", lambda step: run_card(run, validation.rows, step, profile.summary(), test_result or None))
    trainer = CountdownGRPOTrainer(model=model, reward_funcs=rewards.funcs, args=config, train_dataset=dataset,
                                   processing_class=tokenizer, callbacks=callbacks, rollout_func=rollout_func,
                                   environment_factory=environment_factory, step_credit=rewards.step_credit)
    attach_reporting(trainer, validation, out)
    trainer.add_callback(card)
    profile.attach(trainer)
    if rewards.clipo is not None:
        rewards.clipo.bind(trainer)
        head_state = Path(resume_from or "") / ClipoCheckpointCallback.FILENAME
        if resume_from and not head_state.is_file():
            raise SystemExit(f"--resume: {head_state} is missing (a save cut short?); a fresh CLIPO head would change the "
                             f"reward mid-run: delete {resume_from} to resume from the checkpoint before it")
        if resume_from:
            rewards.clipo.clipo.load_state_dict(torch.load(head_state, map_location="cpu", weights_only=True))
    if test is not None:
        test.start(model)
    if time_limit is not None:
        trainer.add_callback(time_limit)

    start = time.perf_counter()
    with StopRequest() as stop:  # the first Ctrl-C / SIGTERM: finish the step, save a checkpoint, stop
        trainer.add_callback(StopRequestCallback(stop))
        trainer.add_callback(CompletionMarker())  # last: a checkpoint is marked complete once every file is written
        trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.perf_counter() - start
    step = trainer.state.global_step
    if stop.requested:
        print(f"stopped at step {step}; --resume continues from {out / f'checkpoint-{step}'}")
        return {"interrupted": True, "step": step, "output_dir": str(out)}

    # the run's end: the final model, the held-out comparison, the summary
    trainer.save_model(str(out / "final"))
    if rewards.clipo is not None and main_process:
        rewards.clipo.clipo.save(out / "final" / ClipoCheckpointCallback.FILENAME)
    summary = validation.summary(profile)
    summary["steps"] = step
    if time_limit is not None and time_limit.stopped_at is not None:
        summary["stopped_by_time_limit"] = True
        print(f"stopped at step {step} of {opts.steps}: --max-minutes {opts.max_minutes:g} reached", flush=True)
    if test is not None:
        test_result.update(test.end(trainer.model))
        summary["test"] = test_result
    summary.update(interaction=opts.interaction, step_profile=profile.summary(), train_seconds=seconds, output_dir=str(out),
                   best_dir=str(out / validation.BEST_DIR), train_problems=len(problems.train),
                   train_pass_rates=str(run.pass_rates) if run.pass_rates else None)
    if main_process:  # the other processes hold no validation rows
        if test is not None:  # the card of the end (written at on_train_end) with the held-out comparison added
            card.write(step)
        runs.write_text_atomic(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> None:
    opts = dataclass_cli.parse(Options, argv, description=__doc__.split("\n")[0])
    if opts.dry_run:
        dry_run(GRPORun.of(opts))
        return
    t0 = time.perf_counter()
    summary = train(opts)
    if summary.get("interrupted"):
        raise SystemExit(dataclass_cli.EXIT_INTERRUPTED)  # stopped by Ctrl-C / SIGTERM; train() said where the checkpoint is
    for line in summary_lines(opts, summary):
        print(line)
    print(f"total {time.perf_counter() - t0:.0f} s; outputs in {summary['output_dir']}")


if __name__ == "__main__":
    dataclass_cli.run_script(main)
