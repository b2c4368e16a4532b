"""How a GRPO run is set up from its ``GRPORun``: compute plan, ``GRPOConfig``, reward functions, start-up checks, and
:func:`dry_run`, which prints it all loading no weights."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baselines.lm.grpo_model import ROOT, read_tokenizer
from baselines.lm.grpo_options import GRPORun, Options
from countdown_gym import dataclass_cli


def check_vllm_available() -> None:
    """Raise a clear error when ``--use-vllm`` is asked for but vLLM cannot be imported."""
    if importlib.util.find_spec("vllm") is None:
        raise SystemExit(
            "--use-vllm needs vLLM, which is not installed. vLLM is CUDA-only and an optional extra: "
            "pip install 'countdown-gym[vllm]' on a GPU machine, or drop --use-vllm to generate with transformers."
        )


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass(frozen=True)
class ComputePlan:
    """Where and how a run computes: its process layout and the micro-batches of a step (``baselines/lm/gpu_plan.py``)."""

    layout: Any  # A ``gpu_plan.Layout``
    per_process: int  # completions each process trains on per step
    micro: int
    grad_accum: int
    sequence_tokens: int
    max_tokens: int  # the token budget the micro-batch was chosen from (0: set by --micro-batch-size)


def plan_compute(run: GRPORun, shape: Any = None) -> ComputePlan:
    """The :class:`ComputePlan` of ``run`` on this machine (or on ``--gpu-memory-gb`` GPUs); ``shape``: the model's
    (read when a GPU budget has to be derived and it is None)."""
    import torch

    from baselines.lm import gpu_plan

    opts = run.options
    planned = bool(opts.gpu_memory_gb) and not torch.cuda.is_available()  # a dry run for GPUs this machine lacks
    if planned and not opts.dry_run:
        raise SystemExit("--gpu-memory-gb without a GPU here: it plans a GPU run only with --dry-run")
    cuda = planned or torch.cuda.is_available()
    supported = planned or gpu_plan.bf16_supported()  # a planned GPU is taken to be an A100/H100-class one
    bf16 = cuda and supported if opts.bf16 is None else opts.bf16
    if bf16 and not cuda:
        raise SystemExit("--bf16 needs a GPU; this machine has none (use --no-bf16 or leave it on auto)")
    try:
        processes, strategy = gpu_plan.launcher_strategy({**os.environ, "WORLD_SIZE": str(world_size())})
    except gpu_plan.PlanError as exc:
        raise SystemExit(f"process layout: {exc}") from None
    layout = gpu_plan.Layout(processes=processes, strategy=strategy, bf16=bf16,
                             gpu_memory=gpu_plan.gpu_memory(opts.gpu_memory_gb) if cuda else None)
    completions = opts.prompts_per_step * opts.num_generations
    if completions % processes:
        raise SystemExit(f"prompts_per_step * num_generations = {completions} completions per step must be divisible by "
                         f"the number of processes ({processes})")
    per_process = completions // processes
    seq = opts.max_prompt_length + completion_tokens(run)
    budget = 0
    if opts.micro_batch_size is not None:
        micro = per_process if not opts.micro_batch_size else min(opts.micro_batch_size, per_process)
        if per_process % micro:
            raise SystemExit(f"--micro-batch-size {opts.micro_batch_size} must divide the {per_process} completions of "
                             "a step on each process")
    else:
        budget = opts.max_tokens_per_micro_batch
        if not budget:
            if layout.on_gpu and shape is None:
                shape = model_shape_or_exit(run.model)
            budget = gpu_plan.tokens_budget(shape, layout, **memory_args(run, layout)) if layout.on_gpu \
                else gpu_plan.CPU_MICRO_BATCH * seq
        micro = gpu_plan.micro_batch(per_process, seq, budget)
    return ComputePlan(layout=layout, per_process=per_process, micro=micro, grad_accum=per_process // micro,
                   sequence_tokens=seq, max_tokens=budget)


def model_shape_or_exit(name: str) -> Any:
    """``gpu_plan.model_shape(name)``, or a one-line exit when the model's config cannot be read."""
    from baselines.lm import gpu_plan

    try:
        return gpu_plan.model_shape(name)
    except gpu_plan.PlanError as exc:
        raise SystemExit(f"--model: {exc}") from None


def completion_tokens(run: GRPORun) -> int:
    """The longest completion of a rollout: ``--max-completion-length``, which the multi-turn rollout does not honour;
    its episode's is ``--max-turns`` x (``--max-turn-tokens`` + a reply: the engine's ``REPLY_MARGIN``) + the EOS
    (an estimate: error replies listing many long numbers pass the margin; the model's positions bound it always)."""
    from countdown_gym.inference.engine import REPLY_MARGIN

    opts = run.options
    return opts.max_turns * (opts.max_turn_tokens + REPLY_MARGIN) + 1 if run.multi_turn else opts.max_completion_length


def memory_args(run: GRPORun, layout: Any) -> dict[str, Any]:
    """The arguments ``gpu_plan.training_memory`` / ``tokens_budget`` take from the run."""
    opts = run.options
    colocated = opts.use_vllm and opts.vllm_mode == "colocate" and layout.on_gpu
    return dict(weight_bytes=2 if opts.model_dtype == "bfloat16" else 4,
                sequence_tokens=opts.max_prompt_length + completion_tokens(run),
                completion_tokens=completion_tokens(run), gradient_checkpointing=opts.gradient_checkpointing,
                reference_model=opts.beta > 0,
                vllm_share=opts.vllm_gpu_memory_utilization * layout.gpu_memory if colocated else 0.0)


def grpo_config_kwargs(run: GRPORun, compute: ComputePlan | None = None) -> dict[str, Any]:
    """The keyword arguments of the run's ``GRPOConfig``, micro-batched as ``compute`` (default: :func:`plan_compute`) says."""
    from trl import GRPOConfig

    compute = compute or plan_compute(run)
    opts = run.options
    weights = reward_terms(opts)
    if opts.step_credit:  # the dense terms are credited per turn (baselines/lm/step_credit.py), not added to the scalar reward
        from baselines.lm.step_credit import split_reward_spec

        weights = split_reward_spec(weights)[0]
    kwargs: dict[str, Any] = dict(
        opts.grpo_fields(),  # the options GRPOConfig takes as they are (Options marks them with grpo(...))
        output_dir=str(run.run_dir),
        per_device_train_batch_size=compute.micro,
        gradient_accumulation_steps=compute.grad_accum,
        lr_scheduler_type="constant",
        reward_weights=[weights[name] for name in weights],
        data_seed=opts.seed,
        shuffle_dataset=opts.curriculum == "none",
        logging_steps=1,
        save_strategy="steps" if opts.save_steps else "no",
        save_steps=opts.save_steps or opts.steps,
        save_total_limit=2,
        report_to=[n.strip() for n in opts.report_to.split(",") if n.strip()],
        use_cpu=not compute.layout.on_gpu,
        bf16=compute.layout.bf16,
    )
    # always stated, so TRL's default (on) does not apply unasked; newer transformers names it activation_checkpointing
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    kwargs[checkpointing] = opts.gradient_checkpointing
    if run.tools:  # the game's turn budget, and room for a few free numbers() calls
        kwargs["max_tool_calling_iterations"] = opts.max_turns + 4
    if opts.vllm_server_base_url:
        kwargs["vllm_server_base_url"] = opts.vllm_server_base_url
    if opts.use_vllm:
        kwargs["vllm_max_model_length"] = opts.max_prompt_length + opts.max_completion_length
    if clash := [k for k in opts.extra if k in kwargs]:  # --extra sets only the fields the run leaves to TRL
        flags = {f.metadata.get("grpo") or f.name: f.name for f in dataclasses.fields(opts)}
        named = ", ".join(f"{k} (--{flags[k].replace('_', '-')})" if k in flags else k for k in clash)
        dataclass_cli.usage_error(f"--extra sets {named}, which the run sets from its options; use the option")
    kwargs.update(opts.extra)
    return kwargs


def shown(key: str, value: Any) -> Any:
    """A GRPOConfig value as a dry run prints it: enums by value, the output directory relative to the project."""
    if key == "output_dir" and Path(value).is_relative_to(ROOT):
        return str(Path(value).relative_to(ROOT))
    return getattr(value, "value", value)


def estimate_memory(run: GRPORun, compute: ComputePlan, shape: Any) -> dict[str, float]:
    """``gpu_plan.training_memory`` of the run (generate() holds the rollouts without vLLM, or the validation batch)."""
    from baselines.lm import gpu_plan

    opts = run.options
    rows = max(opts.eval_batch_size, 0 if opts.use_vllm else compute.per_process)
    return gpu_plan.training_memory(shape, compute.layout, micro=compute.micro, generation_rows=rows,
                                    **memory_args(run, compute.layout))


def build_grpo_config(run: GRPORun, compute: ComputePlan | None = None, *, on_this_machine: bool = True) -> Any:
    """The TRL ``GRPOConfig`` of a run (:func:`grpo_config_kwargs`); ``on_this_machine=False`` (a dry run planning GPUs
    this machine lacks) builds it for the CPU, which checks every other field."""
    from trl import GRPOConfig

    compute = compute or plan_compute(run)
    kwargs = grpo_config_kwargs(run, compute)
    launcher: dict[str, str] = {}
    if not on_this_machine:  # no distributed start-up either: the launcher's variables only gave the layout
        kwargs.update(use_cpu=True, bf16=False, generation_batch_size=compute.per_process * compute.layout.processes)
        launcher = {k: os.environ.pop(k) for k in list(os.environ)
                    if k in ("WORLD_SIZE", "RANK", "LOCAL_RANK") or k.startswith(("ACCELERATE_USE_", "ACCELERATE_DEEPSPEED_"))}
    try:
        return GRPOConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"invalid GRPO configuration (check --extra and the options): {exc}") from None
    finally:
        os.environ.update(launcher)


def reward_terms(opts: Options) -> dict[str, float]:
    """Term -> weight of the run: the monitored terms (weight 0) plus the chosen variant."""
    from baselines.lm.rewards import monitored, parse_reward_spec

    return {**monitored(), **parse_reward_spec(opts.rewards)}


@dataclass(frozen=True)
class RunRewards:
    """TRL's reward functions in the order of :func:`reward_terms`, the CLIPO reward (or None) and the per-turn credit
    of ``--step-credit`` (or None)."""

    funcs: list[Any]
    clipo: Any
    step_credit: Any


def run_rewards(run: GRPORun, tokenizer: Any, hidden_size: int) -> RunRewards:
    """The :class:`RunRewards` of ``--rewards`` and ``--step-credit`` (the registry's functions; the critics loaded, the
    CLIPO head built on the policy's ``hidden_size``)."""
    from baselines.lm.rewards import CLIPOReward, load_needs
    from countdown_gym.integrations.trl import reward_function
    from countdown_gym.rewards.variants import get_variant

    opts = run.options
    weights = reward_terms(opts)
    clipo = None
    if any(get_variant(name).needs == "clipo" for name in weights):
        from critics.clipo import CLIPOTrainer

        head = CLIPOTrainer(dim_in=hidden_size, lam=opts.clipo_lambda, warmup_steps=opts.clipo_warmup_steps, seed=opts.seed)
        clipo = CLIPOReward(head, tokenizer, opts.num_generations)
    given = load_needs(list(weights), {"clipo": clipo})
    funcs = [reward_function(name, given) for name in weights]
    credit = None
    if opts.step_credit:  # the dense terms credited to the turns that earned them, out of the scalar reward
        from baselines.lm.step_credit import StepCredit, reward_scorers, split_reward_spec

        credit = StepCredit.of(split_reward_spec(weights)[1], opts.step_credit_gamma, scorers=reward_scorers(funcs))
    return RunRewards(funcs, clipo, credit)


def check_start_up(run: GRPORun, compute: ComputePlan, tokenizer: Any = None) -> bool:
    """The checks of ``compat.py`` on the process layout and the tokenizer (read when not given); returns whether the
    tokenizer was checked (one this machine cannot read is checked when the model loads)."""
    from baselines.lm.compat import check_layout, check_tokenizer, check_tool_tokenizer

    check_layout(compute.layout.strategy)
    tokenizer = tokenizer or read_tokenizer(run.model)
    if tokenizer is None:
        return False
    if run.tools:
        check_tool_tokenizer(tokenizer, run.model)
    else:  # multi-turn prompts are plain text: the EOS alone matters
        opts = run.options
        check_tokenizer(tokenizer, run.model, "compact" if run.multi_turn else opts.prompt_style, opts.chat_template)
    return True


def dry_run(run: GRPORun) -> dict[str, Any]:
    """Print the effective GRPOConfig, process layout, micro-batches and memory per process of ``run`` (the model's
    config and tokenizer only)."""
    import torch

    from baselines.lm import gpu_plan
    from countdown_gym.inference.engine import REPLY_MARGIN

    opts = run.options
    shape = model_shape_or_exit(run.model)
    compute = plan_compute(run, shape)
    tokenizer_checked = check_start_up(run, compute)
    here = compute.layout.on_gpu == torch.cuda.is_available()
    config = build_grpo_config(run, compute, on_this_machine=here)  # the checks of a real run
    fields = grpo_config_kwargs(run, compute)
    if here:
        fields = {k: getattr(config, k) for k in fields}
    fields["generation_batch_size"] = compute.micro * compute.grad_accum * compute.layout.processes
    memory = estimate_memory(run, compute, shape)
    completions = opts.prompts_per_step * opts.num_generations
    lines = [
        "llm_grpo dry run: nothing loaded, nothing written",
        f"model: {run.model} ({shape.parameters / 1e6:,.1f} M parameters, {shape.layers} layers, hidden "
        f"{shape.hidden}, vocab {shape.vocab}; config from {shape.source})",
        f"interaction: {opts.interaction}, " + ("TRL's tool loop" if run.tools else f"prompt style {opts.prompt_style}")
        + f", rewards {opts.rewards}, preset {opts.preset}",
        "tokenizer: " + ("EOS and chat template checked" if tokenizer_checked else
                         "not checked (not readable here; a run checks it before its model loads)"),
        f"process layout: {compute.layout.describe()}",
        "generation: " + (f"vLLM {opts.vllm_mode}" + (f", {opts.vllm_gpu_memory_utilization:.0%} of each GPU"
                                                      if opts.vllm_mode == "colocate" else "") +
                          f", max model length {compute.sequence_tokens}" if opts.use_vllm else "transformers generate()"),
        f"step: {opts.prompts_per_step} prompts x {opts.num_generations} completions = {completions}; "
        f"{compute.per_process} per process in micro-batches of {compute.micro} (gradient accumulation {compute.grad_accum}), "
        f"sequences of at most {opts.max_prompt_length} + {completion_tokens(run)} tokens"
        + (f" (multi-turn: {opts.max_turns} turns x ({opts.max_turn_tokens} + {REPLY_MARGIN} reply tokens) + EOS, not "
           "--max-completion-length)" if run.multi_turn else "")
        + (f"; micro-batch budget {compute.max_tokens} tokens" if compute.max_tokens else ""),
        "GRPOConfig:",
        *(f"  {k} = {shown(k, v)!r}" for k, v in sorted(fields.items())),
        "memory per process (estimate, baselines/lm/gpu_plan.py):",
        *gpu_plan.format_memory(memory, compute.layout.gpu_memory),
    ]
    print("\n".join(lines), flush=True)
    return {"compute": compute, "memory": memory, "config": fields, "shape": shape, "tokenizer_checked": tokenizer_checked}
