"""GRPO on Countdown with TRL: sparse, oracle, critic and CLIPO rewards (CleanRL style: the options and the flow of a run).

    python baselines/llm_grpo.py                                  # shipped tiny model, CPU, < 10 min
    python baselines/llm_grpo.py --rewards oracle --steps 200
    python baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero \\
        --max-completion-length 1024 --use-vllm --vllm-mode colocate
    accelerate launch baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero

Every field of :class:`Options` is a command-line flag (``--field-name``). Rewards are the TRL
reward functions of ``countdown_gym.integrations.trl`` (variants and CLIPO: ``baselines/lm/rewards.py``);
validation (greedy + sampled as the rollouts sample) runs every ``--eval-interval`` steps
(``baselines/lm/callbacks.py``) and writes ``metrics.csv`` and ``success.png`` into the output directory.
This file holds the options and the flow of a run; the parts are modules named by their job:
``grpo_model.py`` (model, position-ids patch, prompts), ``grpo_data.py`` (pass-rate filter, curriculum),
``grpo_config.py`` (process layout, GRPOConfig, rewards, dry run), ``run_card.py`` (the run's README.md);
the run directory follows ``countdown_gym.runkit.runs``. ``docs/llm_grpo.md`` has the details.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from baselines.lm.grpo_config import (  # noqa: E402
    build_grpo_config,
    build_reward_funcs,
    check_start_up,
    check_vllm_available,
    dry_run,
    estimate_memory,
    last_checkpoint,
    model_shape_or_exit,
    plan_run,
    run_dir,
    trainer_class_of,
)
from baselines.lm.grpo_data import pass_rates_file, training_dataset, training_problems  # noqa: E402
from baselines.lm.grpo_model import (  # noqa: E402, F401  (DEFAULT_*: the shipped models, named here for scripts)
    DEFAULT_MODEL,
    DEFAULT_TURN_MODEL,
    check_model,
    interaction,
    load_model_and_tokenizer,
    make_prompt,
    model_name,
)
from baselines.lm.run_card import run_card, summary_lines  # noqa: E402
from countdown_gym import dataclass_cli  # noqa: E402
from countdown_gym.runkit import runs  # noqa: E402

INTERACTIONS = ("auto", "multi-turn", "single-pass")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")  # TRL's GRPOConfig.loss_type
SCALE_REWARDS = ("group", "batch", "none")
MODEL_DTYPES = ("float32", "bfloat16", "auto")  # --model-dtype, passed to from_pretrained(dtype=...)


def grpo(default: Any, name: str = "") -> Any:
    """A field of :class:`Options` that TRL's ``GRPOConfig`` takes as it is, under ``name`` (default: the field's own)."""
    return field(default=default, metadata={"grpo": name})


@dataclass
class Options:
    """Every knob of a run; each is a CLI flag (``--prompt-style``, ``--use-vllm`` / ``--no-use-vllm``...).

    The fields made with :func:`grpo` pass to TRL's ``GRPOConfig`` unchanged (:meth:`grpo_fields`).
    """

    model: str = ""
    """Hugging Face causal LM: local path or hub id (default: the shipped tiny Countdown model of the interaction:
    baselines/checkpoints/countdown-tiny-lm-turns for multi-turn, countdown-tiny-lm for single-pass)."""
    interaction: str = "auto"
    """multi-turn: one move per model turn, CountdownMultiTurn-v0 computes and answers (environment tokens are
    masked out of the loss); single-pass: the model writes its whole search and answer in one completion; auto:
    single-pass for the longproc / tinyzero prompt styles, else what --model was trained for (its training.json or
    GRPO options.json), and multi-turn for the default model."""
    max_turns: int = 16
    """Multi-turn: the turn budget of an episode (training rollouts and validation)."""
    max_turn_tokens: int = 12
    """Multi-turn: the token budget of one model turn."""
    preset: str = "longproc-0.5k"
    """Frozen split preset to train on (train split) and validate on (validation split)."""
    prompt_style: str = "compact"
    """compact (the shipped model's format) | longproc | tinyzero (single-pass); compact | instruct (multi-turn)."""
    chat_template: bool = True
    """Wrap longproc/tinyzero prompts as a user message when the tokenizer has a chat template."""
    rewards: str = "sparse"
    """Reward variant(s) / weights: sparse | oracle | oracle-perfect | critic | clipo | text-critic, '+'-joined, or term=w,..."""
    steps: int = grpo(30, "max_steps")
    """GRPO optimizer steps."""
    num_generations: int = grpo(8)
    """Group size G: completions per prompt."""
    prompts_per_step: int = 16
    """Prompts per step (the generation batch is prompts_per_step * num_generations completions)."""
    micro_batch_size: int | None = None
    """Completions per forward/backward pass on each process (gradient accumulation makes up the step's batch;
    the step is unchanged, the peak memory smaller); 0 = the whole step's completions at once; unset: the most
    that --max-tokens-per-micro-batch holds."""
    max_tokens_per_micro_batch: int = 0
    """Memory budget of a micro-batch in tokens (completions x (--max-prompt-length + --max-completion-length));
    0 = derived: on a GPU, what its memory holds after the weights, gradients, optimizer state and the vLLM share
    (baselines/lm/gpu_plan.py, from the model's config); on the CPU, 32 completions."""
    gpu_memory_gb: float = 0.0
    """Memory of each GPU to plan for, in GB (0 = the visible GPU's); lets --dry-run plan a GPU run on any machine."""
    dry_run: bool = False
    """Load no weights: check the options, the tokenizer and the process layout, print the effective GRPOConfig,
    the layout and the estimated memory per process, and exit 0."""
    max_completion_length: int = grpo(192)
    """Token budget of a completion."""
    max_prompt_length: int = 512
    """Token budget of a prompt; with --use-vllm the engine's max model length is this plus --max-completion-length
    (otherwise vLLM reserves KV cache for the model's whole context, 131,072 tokens for Llama-3.1)."""
    learning_rate: float = grpo(5e-5)
    beta: float = grpo(0.0)
    """KL coefficient (TRL's default 0: no reference model)."""
    temperature: float = grpo(0.5)
    """Sampling temperature of the rollouts (and of the sampled validation)."""
    loss_type: str = grpo("dapo")
    """TRL's loss: grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo or vespo."""
    scale_rewards: str = grpo("group")
    """How TRL scales the advantages: group, batch or none."""
    seed: int = grpo(0)
    eval_interval: int = 15
    """Validate every N steps (and at the start and the end); 0 = only start and end."""
    eval_problems: int = 200
    """Validation problems used (first N of the frozen split; 0 = all)."""
    eval_samples: int = 2
    """Sampled completions per validation problem (sampled success and pass@k); 0 = greedy only."""
    eval_batch_size: int = 64
    output_dir: str = ""
    """Run directory (default: runs/llm_grpo/<preset>-<rewards>-s<seed>)."""
    save_steps: int = 15
    """Checkpoint every N steps (keeps the last two)."""
    resume: bool = False
    """Continue from the last checkpoint in output_dir."""
    use_vllm: bool = grpo(False)
    """Generate with vLLM (GPU only; pip install 'countdown-gym[vllm]')."""
    vllm_mode: str = grpo("colocate")
    """colocate (same GPUs) | server (a separate `trl vllm-serve` process)."""
    vllm_server_base_url: str = ""
    vllm_gpu_memory_utilization: float = grpo(0.3)
    bf16: bool | None = None
    """bf16 training (default: on when CUDA is available, always off on CPU)."""
    model_dtype: str = "float32"
    """dtype of the policy's weights and optimizer state: float32 (as TRL loads a model id; --bf16 then autocasts
    the compute) | bfloat16 (half the memory, e.g. a 7B model on 80 GB GPUs, but Adam updates at lr ~1e-6 round
    away) | auto (the checkpoint's own dtype)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, about 20% slower); TRL's own default is on."""
    threads: int = 2
    """torch CPU threads (this machine has 2 cores; the comparison runs two jobs of one thread each). A seeded run
    repeats bit for bit at the same thread count, whatever else loads the machine; another count gives another
    trajectory (the kernels add floats in another order), so the run card's command states it."""
    train_problems: int = 0
    """Use only the first N training problems (0 = all; after the pass-rate filter)."""
    train_pass_rates: str = "auto"
    """JSONL of sampled pass rates of training problems (``llm_eval.py --split train --pass-rates``): train only on
    the problems listed there whose rate lies strictly between min_pass_rate and max_pass_rate. Groups that all
    succeed or all fail give GRPO no signal; this is DAPO's dynamic sampling done once, offline. ``auto``: the
    model directory's ``train_pass_rates.jsonl`` when it has one for this preset (the shipped model does), else
    every problem; ``none``: every problem."""
    min_pass_rate: float = 0.0
    max_pass_rate: float = 1.0
    curriculum: str = "none"
    """none | staged: order the training prompts by difficulty tier, easy for the first third of the run, easy and
    medium for the second, all tiers for the last (countdown_gym.data.curriculum.Curriculum.staged, docs/difficulty.md)."""
    clipo_lambda: float = 0.2
    clipo_warmup_steps: int = 0
    step_credit: bool = False
    """Multi-turn: credit the dense terms of --rewards (oracle, oracle_perfect, critic) to the tokens of the turn that
    earned them (TRL's outcome advantage plus a per-turn leave-one-out advantage of their discounted return-to-go,
    docs/step_credit.md) instead of adding their mean over the moves to the scalar reward."""
    step_credit_gamma: float = 1.0
    """Discount of the per-turn return-to-go with --step-credit (1: a turn is credited with all the turns after it)."""
    report_to: str = "tensorboard"
    """Where TRL's training metrics and the validation rows are also logged: none, all, or a comma-separated list of
    transformers' integrations such as tensorboard,wandb (tensorboard: ``<output-dir>/tensorboard``)."""
    quiet: bool = grpo(False, "disable_tqdm")
    """No progress bar."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Additional GRPOConfig fields as JSON, e.g. --extra '{"top_p": 0.95}'."""

    def __post_init__(self) -> None:
        from countdown_gym.data.splits import SPLIT_SPEC

        for name, allowed in (("interaction", INTERACTIONS), ("preset", sorted(SPLIT_SPEC)), ("vllm_mode", ("colocate", "server")),
                              ("model_dtype", MODEL_DTYPES), ("loss_type", LOSS_TYPES), ("scale_rewards", SCALE_REWARDS),
                              ("curriculum", ("none", "staged"))):
            dataclass_cli.check_choice(self, name, allowed)
        if not self.temperature > 0:
            raise ValueError(f"--temperature must be > 0, got {self.temperature}")
        dataclass_cli.check_min(self, 1, "steps", "prompts_per_step", "max_completion_length", "max_prompt_length", "threads",
                                "eval_batch_size", "max_turns", "max_turn_tokens")
        dataclass_cli.check_min(self, 0, "learning_rate", "beta", "eval_interval", "eval_problems", "eval_samples",
                                "save_steps", "train_problems", "max_tokens_per_micro_batch", "gpu_memory_gb")
        if self.micro_batch_size is not None:
            dataclass_cli.check_min(self, 0, "micro_batch_size")
        if self.num_generations < 2:
            raise ValueError(f"--num-generations must be >= 2 (GRPO compares completions within a group), got {self.num_generations}")
        if not 0.0 <= self.min_pass_rate < self.max_pass_rate <= 1.0:
            raise ValueError(f"need 0 <= --min-pass-rate < --max-pass-rate <= 1, got {self.min_pass_rate} and {self.max_pass_rate}")
        if not 0.0 <= self.step_credit_gamma <= 1.0:
            raise ValueError(f"--step-credit-gamma must be in [0, 1], got {self.step_credit_gamma}")

    def grpo_fields(self) -> dict[str, Any]:
        """The ``GRPOConfig`` fields this run sets as they are: name -> value (the fields made with :func:`grpo`)."""
        return {f.metadata["grpo"] or f.name: getattr(self, f.name) for f in dataclasses.fields(self) if "grpo" in f.metadata}


# --- command line -----------------------------------------------------------------------------


def parse_options(argv: list[str] | None = None) -> Options:
    """:class:`Options` from the command line (``countdown_gym.dataclass_cli``: a bad value is a usage error), then
    :func:`check_options` (the checks that read files or load libraries)."""
    opts = dataclass_cli.parse(Options, argv, description=__doc__.split("\n")[0])
    check_options(opts)
    return opts


def check_options(opts: Options) -> None:
    """Clear errors for inconsistent options (before any model is loaded)."""
    from baselines.lm.rewards import parse_reward_spec
    from countdown_gym.game.text_format import PROMPT_STYLES
    from countdown_gym.game.turn_format import TURN_PROMPT_STYLES

    styles = TURN_PROMPT_STYLES if interaction(opts) == "multi-turn" else PROMPT_STYLES
    try:  # the static checks are Options.__post_init__'s; this one depends on the interaction the model implies
        dataclass_cli.check_choice(opts, "prompt_style", styles)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if opts.train_pass_rates not in ("auto", "none", "") and not Path(opts.train_pass_rates).is_file():
        raise SystemExit(f"--train-pass-rates {opts.train_pass_rates}: no such file")
    if (opts.min_pass_rate, opts.max_pass_rate) != (0.0, 1.0) and pass_rates_file(opts) is None:
        raise SystemExit(f"--min-pass-rate / --max-pass-rate filter by a pass-rate file, and --train-pass-rates "
                         f"{opts.train_pass_rates} gives none for this model and preset")
    check_report_to(opts.report_to)
    if interaction(opts) == "multi-turn" and opts.use_vllm:
        raise SystemExit("--interaction multi-turn generates with transformers turn by turn; --use-vllm is for single-pass")
    check_model(model_name(opts))
    try:
        parse_reward_spec(opts.rewards)
    except ValueError as exc:
        raise SystemExit(f"--rewards: {exc}") from None
    if "critic" in parse_reward_spec(opts.rewards):
        from baselines.lm.compat import check_critic_fits

        check_critic_fits(opts.preset)
    if opts.step_credit:
        from baselines.lm.step_credit import STEP_TERMS, split_reward_spec

        if interaction(opts) != "multi-turn":
            raise SystemExit("--step-credit credits the turns of multi-turn rollouts: it needs --interaction multi-turn")
        if not split_reward_spec(parse_reward_spec(opts.rewards))[1]:
            raise SystemExit(f"--step-credit needs a dense term ({', '.join(STEP_TERMS)}) in --rewards, got {opts.rewards!r}")


def check_report_to(report_to: str) -> None:
    """``--report-to`` names only logging integrations transformers knows and this machine has."""
    from countdown_gym.runkit.tracking import report_to_names

    try:
        report_to_names(report_to)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


# --- the run -----------------------------------------------------------------------------------


RESUMABLE_CHANGES = ("steps", "resume", "quiet", "threads", "eval_interval", "eval_batch_size", "save_steps", "report_to",
                     "output_dir", "micro_batch_size", "max_tokens_per_micro_batch", "gpu_memory_gb", "dry_run")
"""Options a ``--resume`` may change (micro-batches change the memory, not the step); any other difference from the
run's ``options.json`` is an error."""


def check_output_dir(opts: Options, out: Path, resume_from: str | None) -> None:
    """The run kit's checks of ``out`` (``countdown_gym.runkit.runs``): a fresh start over a kept run is refused, a resumed
    run must have the saved options (``RESUMABLE_CHANGES`` apart)."""
    start_over = "use another --output-dir"
    runs.run_directory(out, f"--output-dir {out}")
    runs.check_fresh_start(out, resume=opts.resume, markers=("checkpoint-*", "metrics.csv"), start_over=start_over)
    before = runs.read_options(out)
    if resume_from is not None and before is not None:  # only ever continue a run of the same configuration
        before.setdefault("interaction", "single-pass")  # runs saved before the multi-turn mode existed
        if before["interaction"] == "auto":
            before["interaction"] = interaction(dataclasses.replace(
                opts, **{k: before[k] for k in ("model", "prompt_style") if k in before}, interaction="auto"))
        runs.check_resume(before, opts, RESUMABLE_CHANGES, where=out, start_over=start_over)
        if before.get("threads", opts.threads) != opts.threads:
            print(f"--resume: --threads {opts.threads}, the run so far used {before['threads']}: the steps from here on "
                  "add floats in another order and will not repeat an uninterrupted run bit for bit", flush=True)


def train(opts: Options) -> dict[str, Any]:
    """Run GRPO; returns the first and last validation rows and timing figures."""
    import torch
    from accelerate import PartialState

    from baselines.lm.callbacks import (
        ClipoCheckpointCallback,
        RunCardCallback,
        StopRequestCallback,
        ValidationCallback,
        attach_reporting,
    )
    from baselines.lm.generation import Sampling
    from baselines.lm.step_profile import StepProfile
    from countdown_gym.data.splits import load_split
    from countdown_gym.runkit.runs import StopRequest

    check_options(opts)
    opts = dataclasses.replace(opts, interaction=interaction(opts))  # options.json records what ran, not "auto"
    if opts.use_vllm:
        check_vllm_available()
    plan = plan_run(opts)
    check_start_up(opts, plan)  # before anything is written or loaded
    torch.set_num_threads(opts.threads)
    out = run_dir(opts)
    resume_from = last_checkpoint(out) if opts.resume else None
    if opts.resume and resume_from is None:
        print(f"--resume: no checkpoint in {out}; starting from scratch", flush=True)
    main_process = PartialState().is_main_process  # with several processes, one writes the run's files
    check_output_dir(opts, out, resume_from)
    PartialState().wait_for_everyone()  # every process checked before options.json is written
    if main_process:
        runs.save_options(out, opts)  # what runs ("auto" resolved)
    PartialState().wait_for_everyone()

    if plan.layout.on_gpu and main_process:  # the estimate --dry-run prints, as a warning (it may be pessimistic)
        from baselines.lm.gpu_plan import GB

        peak = estimate_memory(opts, plan, model_shape_or_exit(model_name(opts)))["total"]
        if peak > plan.layout.gpu_memory:
            print(f"warning: the estimated peak memory per process, {peak / GB:.1f} GB, exceeds the GPU's "
                  f"{plan.layout.gpu_memory / GB:.1f} GB (--dry-run shows the parts)", flush=True)
    config = build_grpo_config(opts, out, plan)
    # float32 weights and optimizer state by default, as TRL loads a model id; --bf16 autocasts the compute.
    # Weights in bf16 (what from_pretrained picks for a bf16 hub config) would round away updates of lr ~1e-6.
    dtype = opts.model_dtype if opts.model_dtype == "auto" else getattr(torch, opts.model_dtype)
    model, tokenizer = load_model_and_tokenizer(model_name(opts), dtype)
    train_problems, rates_file = training_problems(opts)
    if not opts.quiet:
        kept = f" with a pass rate in ({opts.min_pass_rate}, {opts.max_pass_rate}) in {rates_file}" if rates_file else ""
        print(f"training on {len(train_problems)} problems{kept}", flush=True)
    val_problems = load_split(opts.preset, "validation")
    if opts.eval_problems:
        val_problems = val_problems[: opts.eval_problems]
    multi_turn = interaction(opts) == "multi-turn"
    dataset, rollout_func = training_dataset(opts, train_problems, tokenizer)
    funcs, clipo = build_reward_funcs(opts, tokenizer, model.config.get_text_config().hidden_size)
    validation = ValidationCallback(
        problems=val_problems,
        prompts=[] if multi_turn else [make_prompt(p, opts.prompt_style, tokenizer, opts.chat_template) for p in val_problems],
        tokenizer=tokenizer, output_dir=out, eval_interval=opts.eval_interval, samples=opts.eval_samples,
        sampling=Sampling.of_rollouts(config),  # the sampled validation draws as the rollouts draw
        max_new_tokens=opts.max_completion_length, batch_size=opts.eval_batch_size, seed=opts.seed, verbose=not opts.quiet,
        max_turns=opts.max_turns if multi_turn else None, write=main_process,
        resume_step=int(Path(resume_from).name.rsplit("-", 1)[1]) if resume_from else None,  # checkpoint-N
    )
    profile = StepProfile()  # first, so that its step ends before the validation callback evaluates
    callbacks: list[Any] = [profile, validation]
    if clipo is not None:
        callbacks.append(ClipoCheckpointCallback(clipo.clipo))
    callbacks.append(RunCardCallback(out / "README.md",
                                     lambda step: run_card(opts, validation.rows, step, profile.summary())))
    trainer_class, credit = trainer_class_of(opts, funcs)
    trainer = trainer_class(model=model, reward_funcs=funcs, args=config, train_dataset=dataset, processing_class=tokenizer,
                            callbacks=callbacks, rollout_func=rollout_func, **credit)
    attach_reporting(trainer, validation, out)
    profile.attach(trainer)
    if clipo is not None:
        clipo.bind(trainer)
        head_state = Path(resume_from or "") / ClipoCheckpointCallback.FILENAME
        if resume_from and not head_state.is_file():
            raise SystemExit(f"--resume: {head_state} is missing (a save cut short?); a fresh CLIPO head would change the "
                             f"reward mid-run: delete {resume_from} to resume from the checkpoint before it")
        if resume_from:
            clipo.clipo.load_state_dict(torch.load(head_state, map_location="cpu", weights_only=True))
    start = time.perf_counter()
    with StopRequest() as stop:  # the first Ctrl-C / SIGTERM: finish the step, save a checkpoint, stop
        trainer.add_callback(StopRequestCallback(stop))
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
    summary.update(step_profile=profile.summary(), train_seconds=seconds, output_dir=str(out), best_dir=str(out / validation.BEST_DIR),
                   train_problems=len(train_problems), train_pass_rates=str(rates_file) if rates_file else None)
    if main_process:  # the other processes hold no validation rows
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> None:
    opts = parse_options(argv)
    if opts.dry_run:
        dry_run(opts)
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
