"""GRPO on Countdown with TRL: sparse, oracle, critic and CLIPO rewards (CleanRL style, one file).

    python baselines/llm_grpo.py                                  # shipped tiny model, CPU, < 10 min
    python baselines/llm_grpo.py --rewards oracle --steps 200
    python baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero \\
        --max-completion-length 1024 --use-vllm --vllm-mode colocate
    accelerate launch baselines/llm_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero

Every field of :class:`Options` is a command-line flag (``--field-name``). Rewards are the TRL
reward functions of ``countdown_gym.integrations.trl`` (variants and CLIPO: ``baselines/llm_rewards.py``); validation (greedy + sampled) runs every
``--eval-interval`` steps (``baselines/llm_callbacks.py``) and writes ``metrics.csv`` and
``success.png`` into the output directory. ``docs/llm_grpo.md`` has the details.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import shlex
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # `python baselines/llm_grpo.py`: put the repository root, not this folder, on sys.path
    sys.path[0] = str(ROOT)

from countdown_gym import dataclass_cli  # noqa: E402

DEFAULT_MODEL = str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm")
DEFAULT_TURN_MODEL = str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm-turns")
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
    (baselines/gpu_plan.py, from the model's config); on the CPU, 32 completions."""
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
    """torch CPU threads (this machine has 2 cores; the comparison runs two jobs of one thread each)."""
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
    medium for the second, all tiers for the last (countdown_gym.curriculum.Curriculum.staged, docs/difficulty.md)."""
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
        from countdown_gym.splits import SPLIT_SPEC

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
    from baselines.llm_rewards import parse_reward_spec
    from countdown_gym.splits import SPLIT_SPEC
    from countdown_gym.text_format import PROMPT_STYLES
    from countdown_gym.turn_format import TURN_PROMPT_STYLES

    if not opts.temperature > 0:
        raise SystemExit(f"--temperature must be > 0, got {opts.temperature}")
    try:
        dataclass_cli.check_choice(opts, "interaction", INTERACTIONS)
        styles = TURN_PROMPT_STYLES if interaction(opts) == "multi-turn" else PROMPT_STYLES
        for name, allowed in (("prompt_style", styles), ("preset", sorted(SPLIT_SPEC)), ("vllm_mode", ("colocate", "server")),
                              ("model_dtype", MODEL_DTYPES), ("loss_type", LOSS_TYPES), ("scale_rewards", SCALE_REWARDS),
                              ("curriculum", ("none", "staged"))):
            dataclass_cli.check_choice(opts, name, allowed)
        dataclass_cli.check_min(opts, 1, "steps", "prompts_per_step", "max_completion_length", "max_prompt_length", "threads", "eval_batch_size",
                                "max_turns", "max_turn_tokens")
        dataclass_cli.check_min(opts, 0, "learning_rate", "beta", "eval_interval", "eval_problems", "eval_samples",
                                "save_steps", "train_problems", "max_tokens_per_micro_batch", "gpu_memory_gb")
        if opts.micro_batch_size is not None:
            dataclass_cli.check_min(opts, 0, "micro_batch_size")
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if opts.num_generations < 2:
        raise SystemExit(f"--num-generations must be >= 2 (GRPO compares completions within a group), got {opts.num_generations}")
    if not 0.0 <= opts.min_pass_rate < opts.max_pass_rate <= 1.0:
        raise SystemExit(f"need 0 <= --min-pass-rate < --max-pass-rate <= 1, got {opts.min_pass_rate} and {opts.max_pass_rate}")
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
        from baselines.compat import check_critic_fits

        check_critic_fits(opts.preset)
    if opts.step_credit:
        from baselines.step_credit import STEP_TERMS, split_reward_spec

        if interaction(opts) != "multi-turn":
            raise SystemExit("--step-credit credits the turns of multi-turn rollouts: it needs --interaction multi-turn")
        if not split_reward_spec(parse_reward_spec(opts.rewards))[1]:
            raise SystemExit(f"--step-credit needs a dense term ({', '.join(STEP_TERMS)}) in --rewards, got {opts.rewards!r}")
        if not 0.0 <= opts.step_credit_gamma <= 1.0:
            raise SystemExit(f"--step-credit-gamma must be in [0, 1], got {opts.step_credit_gamma}")


def check_report_to(report_to: str) -> None:
    """``--report-to`` names only logging integrations transformers knows and this machine has."""
    from countdown_gym.integrations.tracking import report_to_names

    try:
        report_to_names(report_to)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def check_vllm_available() -> None:
    """Raise a clear error when ``--use-vllm`` is asked for but vLLM cannot be imported."""
    if importlib.util.find_spec("vllm") is None:
        raise SystemExit(
            "--use-vllm needs vLLM, which is not installed. vLLM is CUDA-only and an optional extra: "
            "pip install 'countdown-gym[vllm]' on a GPU machine, or drop --use-vllm to generate with transformers."
        )


def interaction(opts: Options) -> str:
    """The run's interaction, ``--interaction auto`` resolved (see :class:`Options`)."""
    if opts.interaction != "auto":
        return opts.interaction
    if opts.prompt_style in ("longproc", "tinyzero"):
        return "single-pass"
    if not opts.model:
        return "multi-turn"
    from baselines.tiny_lm import detect_interaction

    return detect_interaction(opts.model)


def model_name(opts: Options) -> str:
    """``--model``, or the shipped model of the run's interaction."""
    if opts.model:
        return opts.model
    return DEFAULT_TURN_MODEL if interaction(opts) == "multi-turn" else DEFAULT_MODEL


def run_dir(opts: Options) -> Path:
    if opts.output_dir:
        return Path(opts.output_dir)
    tag = opts.rewards.replace(",", "_").replace("=", "").replace("+", "-")
    mode = "-turns" if interaction(opts) == "multi-turn" else ""
    credit = "-step" if opts.step_credit else ""
    return ROOT / "runs" / "llm_grpo" / f"{opts.preset}{mode}-{tag}{credit}-s{opts.seed}"


# --- model, prompts, dataset ------------------------------------------------------------------


def derive_position_ids(model: Any) -> Any:
    """Make the backbone derive ``position_ids`` from the attention mask when none are given.

    ``generate()`` numbers left-padded prompts from their first real token, but TRL's
    log-probability pass calls the model without ``position_ids``; with absolute position
    embeddings (GPT-2) the two passes would disagree. After this patch a full-sequence call
    without ``position_ids`` uses ``cumsum(attention_mask) - 1``, exactly what ``generate()`` uses.
    """
    backbone = model.base_model
    if getattr(backbone, "_countdown_position_fix", False):
        return model
    original = backbone.forward

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids", args[0] if args else None)
        past = kwargs.get("past_key_values")
        fresh = past is None or (hasattr(past, "get_seq_length") and past.get_seq_length() == 0)
        if kwargs.get("position_ids") is None and mask is not None and ids is not None and mask.dim() == 2 and fresh and mask.shape[1] == ids.shape[1]:
            kwargs["position_ids"] = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
        return original(*args, **kwargs)

    backbone.forward = types.MethodType(forward, backbone)
    backbone._countdown_position_fix = True
    return model


def check_model(name: str) -> None:
    """Exit with a clear message when ``--model`` cannot be a model (the shipped one missing, a bad local path)."""
    from baselines.tiny_lm import check_model_path

    if name in (DEFAULT_MODEL, DEFAULT_TURN_MODEL) and not Path(name).exists():
        raise SystemExit(
            f"the shipped model is missing at {name}; build it with python baselines/llm_sft.py "
            "(see docs/llm_grpo.md) or pass --model"
        )
    check_model_path(name)


def load_model_and_tokenizer(name: str, dtype: Any = None) -> tuple[Any, Any]:
    """A causal LM and its tokenizer (pad token set, left padding), from a local path or hub id."""
    from baselines.tiny_lm import load_causal_lm

    check_model(name)
    model, tokenizer = load_causal_lm(name, **({"dtype": dtype} if dtype is not None else {}))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return derive_position_ids(model), tokenizer


def make_prompt(problem: Any, style: str, tokenizer: Any, chat_template: bool = True) -> str | list[dict[str, str]]:
    """The prompt of ``problem`` in ``style`` (``text_format.build_prompt``): a string, or chat messages
    (``text_format.chat_messages``) when the tokenizer has a chat template (and ``chat_template``); compact
    stays plain text."""
    from countdown_gym.text_format import build_prompt, chat_messages

    if style != "compact" and chat_template and getattr(tokenizer, "chat_template", None):
        return chat_messages(problem, style)  # tinyzero: TinyZero's instruct template, the assistant turn started
    return build_prompt(problem, style)


def build_dataset(problems: list[Any], style: str, tokenizer: Any, chat_template: bool = True) -> Any:
    """A ``datasets.Dataset`` with ``prompt`` and ``problem`` (Problem.to_dict JSON) columns."""
    from datasets import Dataset

    rows = [
        {"prompt": make_prompt(p, style, tokenizer, chat_template), "problem": json.dumps(p.to_dict(), separators=(",", ":"))}
        for p in problems
    ]
    return Dataset.from_list(rows)


PASS_RATES_FILE = "train_pass_rates.jsonl"


def pass_rates_file(opts: Options) -> Path | None:
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


# --- GRPO configuration -----------------------------------------------------------------------


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass(frozen=True)
class RunPlan:
    """Where and how a run computes: its process layout and the micro-batches of a step (``baselines/gpu_plan.py``)."""

    layout: Any
    """A ``gpu_plan.Layout``."""
    per_process: int
    """Completions each process trains on per step."""
    micro: int
    grad_accum: int
    sequence_tokens: int
    """Longest sequence of a micro-batch: the prompt and completion budgets."""
    max_tokens: int
    """The token budget the micro-batch was chosen from (0: set by --micro-batch-size)."""


def plan_run(opts: Options, shape: Any = None) -> RunPlan:
    """The :class:`RunPlan` of ``opts`` on this machine (or on ``--gpu-memory-gb`` GPUs): bf16 where the GPU has it,
    the micro-batch from ``--micro-batch-size`` or from the memory budget (the model's config is read, ``shape``,
    only when a GPU budget has to be derived)."""
    import torch

    from baselines import gpu_plan

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
        raise SystemExit(
            f"prompts_per_step * num_generations = {completions} completions per step must be divisible by the "
            f"number of processes ({processes})"
        )
    per_process = completions // processes
    seq = opts.max_prompt_length + opts.max_completion_length
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
                shape = model_shape_or_exit(model_name(opts))
            budget = gpu_plan.tokens_budget(shape, layout, **memory_args(opts, layout)) if layout.on_gpu \
                else gpu_plan.CPU_MICRO_BATCH * seq
        micro = gpu_plan.micro_batch(per_process, seq, budget)
    return RunPlan(layout=layout, per_process=per_process, micro=micro, grad_accum=per_process // micro,
                   sequence_tokens=seq, max_tokens=budget)


def model_shape_or_exit(name: str) -> Any:
    """``gpu_plan.model_shape(name)``, or a one-line exit when the model's config cannot be read."""
    from baselines import gpu_plan

    try:
        return gpu_plan.model_shape(name)
    except gpu_plan.PlanError as exc:
        raise SystemExit(f"--model: {exc}") from None


def memory_args(opts: Options, layout: Any) -> dict[str, Any]:
    """The arguments ``gpu_plan.training_memory`` / ``tokens_budget`` take from the options (the micro-batch apart)."""
    colocated = opts.use_vllm and opts.vllm_mode == "colocate" and layout.on_gpu
    return dict(weight_bytes=2 if opts.model_dtype == "bfloat16" else 4,
                sequence_tokens=opts.max_prompt_length + opts.max_completion_length,
                completion_tokens=opts.max_completion_length, gradient_checkpointing=opts.gradient_checkpointing,
                reference_model=opts.beta > 0,
                vllm_share=opts.vllm_gpu_memory_utilization * layout.gpu_memory if colocated else 0.0)


def grpo_config_kwargs(opts: Options, output_dir: Path | None = None, plan: RunPlan | None = None) -> dict[str, Any]:
    """The keyword arguments of the run's ``GRPOConfig``, micro-batched as ``plan`` says (default: :func:`plan_run`)."""
    from trl import GRPOConfig

    from baselines.llm_rewards import MONITORED, parse_reward_spec

    plan = plan or plan_run(opts)
    micro = plan.micro
    bf16 = plan.layout.bf16
    cuda = plan.layout.on_gpu
    weights = {**MONITORED, **parse_reward_spec(opts.rewards)}
    if opts.step_credit:  # the dense terms are credited per turn (StepCreditGRPOTrainer), not added to the scalar reward
        from baselines.step_credit import split_reward_spec

        weights = split_reward_spec(weights)[0]
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir or run_dir(opts)),
        max_steps=opts.steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=plan.grad_accum,
        num_generations=opts.num_generations,
        max_completion_length=opts.max_completion_length,
        learning_rate=opts.learning_rate,
        lr_scheduler_type="constant",
        beta=opts.beta,
        temperature=opts.temperature,
        loss_type=opts.loss_type,
        scale_rewards=opts.scale_rewards,
        reward_weights=[weights[name] for name in weights],
        seed=opts.seed,
        data_seed=opts.seed,
        shuffle_dataset=opts.curriculum == "none",
        logging_steps=1,
        save_strategy="steps" if opts.save_steps else "no",
        save_steps=opts.save_steps or opts.steps,
        save_total_limit=2,
        report_to=[n.strip() for n in opts.report_to.split(",") if n.strip()],
        use_cpu=not cuda,
        bf16=bf16,
        disable_tqdm=opts.quiet,
        use_vllm=opts.use_vllm,
        vllm_mode=opts.vllm_mode,
        vllm_gpu_memory_utilization=opts.vllm_gpu_memory_utilization,
    )
    # always stated, so TRL's default (on) does not apply unasked; newer transformers names it activation_checkpointing
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    kwargs[checkpointing] = opts.gradient_checkpointing
    if opts.vllm_server_base_url:
        kwargs["vllm_server_base_url"] = opts.vllm_server_base_url
    if opts.use_vllm:
        kwargs["vllm_max_model_length"] = opts.max_prompt_length + opts.max_completion_length
    kwargs.update(opts.extra)
    return kwargs


def shown(key: str, value: Any) -> Any:
    """A GRPOConfig value as a dry run prints it: enums by value, the output directory relative to the project."""
    if key == "output_dir" and Path(value).is_relative_to(ROOT):
        return str(Path(value).relative_to(ROOT))
    return getattr(value, "value", value)


def estimate_memory(opts: Options, plan: RunPlan, shape: Any) -> dict[str, float]:
    """``gpu_plan.training_memory`` of the run: its micro-batch, and generate() holding the rollouts (without vLLM)
    or the validation batch."""
    from baselines import gpu_plan

    rows = max(opts.eval_batch_size, 0 if opts.use_vllm else plan.per_process)
    return gpu_plan.training_memory(shape, plan.layout, micro=plan.micro, generation_rows=rows,
                                    **memory_args(opts, plan.layout))


def build_grpo_config(opts: Options, output_dir: Path | None = None, plan: RunPlan | None = None, *,
                      on_this_machine: bool = True) -> Any:
    """The TRL ``GRPOConfig`` of a run (one optimizer step per generation batch; :func:`grpo_config_kwargs`).

    ``on_this_machine=False`` (a dry run planning GPUs this machine lacks): the config is built with the CPU in
    place of the GPU, which checks every other field.
    """
    from trl import GRPOConfig

    plan = plan or plan_run(opts)
    kwargs = grpo_config_kwargs(opts, output_dir, plan)
    launcher: dict[str, str] = {}
    if not on_this_machine:  # no distributed start-up either: the launcher's variables only gave the layout
        kwargs.update(use_cpu=True, bf16=False, generation_batch_size=plan.per_process * plan.layout.processes)
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
    from baselines.llm_rewards import MONITORED, parse_reward_spec

    return {**MONITORED, **parse_reward_spec(opts.rewards)}


def build_reward_funcs(opts: Options, tokenizer: Any, hidden_size: int) -> tuple[list[Any], Any]:
    """The TRL reward functions in the order of ``reward_terms(opts)``, and the CLIPO reward (or None)."""
    from baselines.llm_rewards import CLIPOReward, shipped_critic_reward
    from countdown_gym.integrations.trl import REWARD_FUNCTIONS

    funcs: list[Any] = []
    clipo = None
    for name in reward_terms(opts):
        if name in REWARD_FUNCTIONS:
            funcs.append(REWARD_FUNCTIONS[name])
        elif name == "critic":
            funcs.append(shipped_critic_reward())
        elif name == "text_critic":
            from baselines.llm_rewards import TextCriticReward

            funcs.append(TextCriticReward())
        elif name == "clipo":
            from critics.clipo import CLIPOTrainer

            head = CLIPOTrainer(dim_in=hidden_size, lam=opts.clipo_lambda, warmup_steps=opts.clipo_warmup_steps, seed=opts.seed)
            clipo = CLIPOReward(head, tokenizer, opts.num_generations)
            funcs.append(clipo)
        else:  # pragma: no cover - parse_reward_spec only returns known terms
            raise ValueError(f"unknown reward term {name!r}")
    return funcs, clipo


def last_checkpoint(out: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(out)) if out.is_dir() else None


# --- run card ---------------------------------------------------------------------------------


def command_line(opts: Options) -> str:
    """The shell command that repeats the run (every option that differs from its default)."""
    from countdown_gym.dataclass_cli import to_argv

    return shlex.join(["python", "baselines/llm_grpo.py", *to_argv(opts, skip=("resume", "dry_run"))])


def _percent(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) else "-"


def run_card(opts: Options, rows: list[dict[str, Any]], step: int) -> str:
    """The run directory's README.md: what was run, how to repeat it, validation so far (``rows``:
    :class:`ValidationCallback` rows, numbers)."""
    weights = ", ".join(f"{k} {w:g}" for k, w in reward_terms(opts).items() if w)
    lines = [
        f"# GRPO run `{run_dir(opts).name}`",
        "",
        "Written by `baselines/llm_grpo.py` at every checkpoint and at the end of training.",
        "",
        f"- starting model: `{model_name(opts)}`",
        f"- interaction: `{interaction(opts)}`" + (f" (at most {opts.max_turns} turns of {opts.max_turn_tokens} tokens)"
                                                    if interaction(opts) == "multi-turn" else ""),
        f"- rewards: `{opts.rewards}` (term weights: {weights}; see docs/llm_grpo.md)",
        f"- split preset `{opts.preset}`, prompt style `{opts.prompt_style}`",
        f"- {opts.steps} steps of {opts.prompts_per_step} prompts x {opts.num_generations} completions, "
        f"learning rate {opts.learning_rate:g}, beta {opts.beta:g}, temperature {opts.temperature:g}, "
        f"at most {opts.max_completion_length} completion tokens, loss `{opts.loss_type}`, seed {opts.seed}",
        f"- trained steps so far: {step}",
        "",
        "Repeat it (add `--resume` to continue from the newest checkpoint in this directory):",
        "",
        "```bash",
        command_line(opts),
        "```",
        "",
        "## Validation",
        "",
    ]
    if rows:
        samples = rows[0].get("samples") or 0
        lines += [
            f"First {rows[0]['problems']} problems of the `{opts.preset}` validation split; greedy = one greedy "
            f"completion per problem" + (f", sampled = mean success of {samples} samples at T = {opts.temperature:g}, "
                                         f"pass@{samples} = any of them." if samples else "."),
            "",
            "| step | greedy | sampled | pass@k | greedy completions with an invalid step | mean completion tokens |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            cells = [_percent(r.get(key)) for key in ("greedy_success", "sampled_success", "pass_at_k", "greedy_invalid_frac")]
            lines.append(f"| {r['step']} | {' | '.join(cells)} | {r['mean_completion_tokens']:.0f} |")
        lines += ["", "![validation success vs step](success.png)", ""]
    else:
        lines += ["No validation yet.", ""]
    lines += [
        "## Files",
        "",
        "| file | content |",
        "| --- | --- |",
        "| `options.json` | every option of the run |",
        "| `metrics.csv`, `success.png` | one row per validation, and the plot of success vs step |",
        "| `train_log.jsonl` | TRL's per-step logs, one reward column per term, `replay/*` diagnostics |",
        "| `checkpoint-N/` | model, optimizer and RNG state (the last two are kept) |",
        "| `final/` | the trained model, loadable with `--model` (after the run ends) |",
        "| `best/` | the model with the highest greedy validation success so far (the start included); "
        "`best/validation.json` says at which step |",
        "",
    ]
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


RESUMABLE_CHANGES = ("steps", "resume", "quiet", "threads", "eval_interval", "eval_batch_size", "save_steps", "report_to",
                     "output_dir", "micro_batch_size", "max_tokens_per_micro_batch", "gpu_memory_gb", "dry_run")
"""Options a ``--resume`` may change (micro-batches change the memory, not the step); any other difference from the
run's ``options.json`` is an error."""


def read_tokenizer(name: str) -> Any:
    """The tokenizer of ``name`` (small files, no weights); None when it cannot be read here."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError):
        return None


def check_start_up(opts: Options, plan: RunPlan, tokenizer: Any = None) -> bool:
    """The compatibility checks of ``baselines/compat.py`` that need more than the options: the process layout and
    the tokenizer (read when not given). Returns whether the tokenizer was checked (a dry run for a hub model this
    machine cannot reach goes on without it; a run stops when its model loads)."""
    from baselines.compat import check_layout, check_tokenizer

    check_layout(plan.layout.strategy)
    tokenizer = tokenizer or read_tokenizer(model_name(opts))
    if tokenizer is None:
        return False
    single_pass = interaction(opts) == "single-pass"  # multi-turn prompts are plain text: the EOS alone matters
    check_tokenizer(tokenizer, model_name(opts), opts.prompt_style if single_pass else "compact", opts.chat_template)
    return True


def dry_run(opts: Options) -> dict[str, Any]:
    """Print what a run of ``opts`` would do and need, loading nothing heavy (the model's config, its tokenizer when
    readable): the effective GRPOConfig, the process layout, the micro-batches and the memory per process."""
    import torch

    from baselines import gpu_plan

    opts = dataclasses.replace(opts, interaction=interaction(opts))
    shape = model_shape_or_exit(model_name(opts))
    plan = plan_run(opts, shape)
    tokenizer_checked = check_start_up(opts, plan)
    here = plan.layout.on_gpu == torch.cuda.is_available()
    config = build_grpo_config(opts, run_dir(opts), plan, on_this_machine=here)  # the checks of a real run
    fields = grpo_config_kwargs(opts, run_dir(opts), plan)
    if here:
        fields = {k: getattr(config, k) for k in fields}
    fields["generation_batch_size"] = plan.micro * plan.grad_accum * plan.layout.processes
    memory = estimate_memory(opts, plan, shape)
    completions = opts.prompts_per_step * opts.num_generations
    lines = [
        "llm_grpo dry run: nothing loaded, nothing written",
        f"model: {model_name(opts)} ({shape.parameters / 1e6:,.1f} M parameters, {shape.layers} layers, hidden "
        f"{shape.hidden}, vocab {shape.vocab}; config from {shape.source})",
        f"interaction: {opts.interaction}, prompt style {opts.prompt_style}, rewards {opts.rewards}, preset {opts.preset}",
        "tokenizer: " + ("EOS and chat template checked" if tokenizer_checked else
                         "not checked (not readable here; a run checks it before its model loads)"),
        f"process layout: {plan.layout.describe()}",
        "generation: " + (f"vLLM {opts.vllm_mode}" + (f", {opts.vllm_gpu_memory_utilization:.0%} of each GPU"
                                                      if opts.vllm_mode == "colocate" else "") +
                          f", max model length {plan.sequence_tokens}" if opts.use_vllm else "transformers generate()"),
        f"step: {opts.prompts_per_step} prompts x {opts.num_generations} completions = {completions}; "
        f"{plan.per_process} per process in micro-batches of {plan.micro} (gradient accumulation {plan.grad_accum}), "
        f"sequences of at most {opts.max_prompt_length} + {opts.max_completion_length} tokens"
        + (f"; micro-batch budget {plan.max_tokens} tokens" if plan.max_tokens else ""),
        "GRPOConfig:",
        *(f"  {k} = {shown(k, v)!r}" for k, v in sorted(fields.items())),
        "memory per process (estimate, baselines/gpu_plan.py):",
        *gpu_plan.format_memory(memory, plan.layout.gpu_memory),
    ]
    print("\n".join(lines), flush=True)
    return {"plan": plan, "memory": memory, "config": fields, "shape": shape, "tokenizer_checked": tokenizer_checked}


def train(opts: Options) -> dict[str, Any]:
    """Run GRPO; returns the first and last validation rows and timing figures."""
    import torch
    from accelerate import PartialState
    from trl import GRPOTrainer

    from baselines.llm_callbacks import (
        ROLLOUT_SAMPLING,
        ClipoCheckpointCallback,
        RunCardCallback,
        StopRequestCallback,
        ValidationCallback,
        attach_reporting,
    )
    from countdown_gym.splits import load_split
    from countdown_gym.stop_request import StopRequest

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
    saved = out / "options.json"
    if resume_from is not None and saved.is_file():  # only ever continue a run of the same configuration
        before = json.loads(saved.read_text())
        before.setdefault("interaction", "single-pass")  # runs saved before the multi-turn mode existed
        if before["interaction"] == "auto":
            before["interaction"] = interaction(dataclasses.replace(
                opts, **{k: before[k] for k in ("model", "prompt_style") if k in before}, interaction="auto"))
        changed = dataclass_cli.changed_options(before, opts, RESUMABLE_CHANGES)
        if changed:
            raise SystemExit(f"--resume: {out} holds a run with other options ({', '.join(changed)}); use another --output-dir")
    dataclass_cli.output_dir(out, f"--output-dir {out}")
    main_process = PartialState().is_main_process  # with several processes, one writes the run's files
    if resume_from is None and main_process:  # a fresh start: no validation rows or logs of an earlier run here
        for stale in ("metrics.csv", "train_log.jsonl"):
            if (out / stale).is_file():
                print(f"not resuming: removing the earlier run's {out / stale}", flush=True)
                (out / stale).unlink()
    if main_process:
        (out / "options.json").write_text(json.dumps(dataclasses.asdict(opts), indent=2) + "\n")
    PartialState().wait_for_everyone()

    if plan.layout.on_gpu and main_process:  # the estimate --dry-run prints, as a warning (it may be pessimistic)
        from baselines.gpu_plan import GB

        peak = estimate_memory(opts, plan, model_shape_or_exit(model_name(opts)))["total"]
        if peak > plan.layout.gpu_memory:
            print(f"warning: the estimated peak memory per process, {peak / GB:.1f} GB, exceeds the GPU's "
                  f"{plan.layout.gpu_memory / GB:.1f} GB (--dry-run shows the parts)", flush=True)
    config = build_grpo_config(opts, out, plan)
    # float32 weights and optimizer state by default, as TRL loads a model id; --bf16 autocasts the compute.
    # Weights in bf16 (what from_pretrained picks for a bf16 hub config) would round away updates of lr ~1e-6.
    dtype = opts.model_dtype if opts.model_dtype == "auto" else getattr(torch, opts.model_dtype)
    model, tokenizer = load_model_and_tokenizer(model_name(opts), dtype)
    train_problems = load_split(opts.preset, "train")
    rates_file = pass_rates_file(opts)
    if rates_file is not None:
        train_problems = filter_by_pass_rate(train_problems, rates_file, opts.min_pass_rate, opts.max_pass_rate)
    if opts.train_problems:
        train_problems = train_problems[: opts.train_problems]
    if opts.curriculum == "staged":  # the prompts in schedule order; build_grpo_config turns the shuffling off
        from countdown_gym.curriculum import Curriculum

        draws = opts.steps * opts.prompts_per_step
        try:
            train_problems = Curriculum.staged(draws, train_problems).sequence(draws, seed=opts.seed)
        except ValueError as exc:
            raise SystemExit(f"--curriculum staged: {exc}") from None
    if not opts.quiet:
        kept = f" with a pass rate in ({opts.min_pass_rate}, {opts.max_pass_rate}) in {rates_file}" if rates_file else ""
        print(f"training on {len(train_problems)} problems{kept}", flush=True)
    val_problems = load_split(opts.preset, "validation")
    if opts.eval_problems:
        val_problems = val_problems[: opts.eval_problems]
    multi_turn = interaction(opts) == "multi-turn"
    rollout_func = None
    if multi_turn:
        from countdown_gym.integrations.trl_rollout import make_rollout_func, rollout_dataset

        dataset = rollout_dataset(train_problems, max_turns=opts.max_turns, prompt_style=opts.prompt_style)
        rollout_func = make_rollout_func(train_problems, max_turns=opts.max_turns, max_turn_tokens=opts.max_turn_tokens,
                                         prompt_style=opts.prompt_style)
    else:
        dataset = build_dataset(train_problems, opts.prompt_style, tokenizer, opts.chat_template)
    funcs, clipo = build_reward_funcs(opts, tokenizer, model.config.get_text_config().hidden_size)
    validation = ValidationCallback(
        problems=val_problems,
        prompts=[] if multi_turn else [make_prompt(p, opts.prompt_style, tokenizer, opts.chat_template) for p in val_problems],
        tokenizer=tokenizer,
        output_dir=out,
        eval_interval=opts.eval_interval,
        samples=opts.eval_samples,
        temperature=opts.temperature,
        max_new_tokens=opts.max_completion_length,
        batch_size=opts.eval_batch_size,
        seed=opts.seed,
        verbose=not opts.quiet,
        sampling={k: getattr(config, k) for k in ROLLOUT_SAMPLING},  # as the rollouts draw
        max_turns=opts.max_turns if multi_turn else None,
    )
    callbacks: list[Any] = [validation]
    if clipo is not None:
        callbacks.append(ClipoCheckpointCallback(clipo.clipo))
    callbacks.append(RunCardCallback(out / "README.md", lambda step: run_card(opts, validation.rows, step)))
    trainer_class: Any = GRPOTrainer
    credit: dict[str, Any] = {}
    if opts.step_credit:
        from baselines.step_credit import StepCreditGRPOTrainer, split_reward_spec
        from countdown_gym.integrations.trl import CriticReward

        trainer_class = StepCreditGRPOTrainer
        credit = {"step_weights": split_reward_spec(reward_terms(opts))[1], "step_gamma": opts.step_credit_gamma,
                  "critic": next((f.critic for f in funcs if type(f) is CriticReward), None)}
    trainer = trainer_class(
        model=model,
        reward_funcs=funcs,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=callbacks,
        rollout_func=rollout_func,
        **credit,
    )
    attach_reporting(trainer, validation, out)
    if clipo is not None:
        clipo.bind(trainer)
        head_state = Path(resume_from or "") / ClipoCheckpointCallback.FILENAME
        if resume_from and not head_state.is_file():
            raise SystemExit(f"--resume: {head_state} is missing (a save cut short?); a fresh CLIPO head would change the "
                             f"reward mid-run: delete {resume_from} to resume from the checkpoint before it")
        if resume_from:
            clipo.clipo.load_state_dict(torch.load(head_state, map_location="cpu", weights_only=True))
    start = time.perf_counter()
    with StopRequest() as stop:  # the first Ctrl-C: finish the step, save a checkpoint, stop
        trainer.add_callback(StopRequestCallback(stop))
        trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.perf_counter() - start
    if stop.requested:
        print(f"stopped by Ctrl-C at step {trainer.state.global_step}; --resume continues from "
              f"{out / f'checkpoint-{trainer.state.global_step}'}")
        return {"interrupted": True, "step": trainer.state.global_step, "output_dir": str(out)}
    trainer.save_model(str(out / "final"))
    if clipo is not None and main_process:
        clipo.clipo.save(out / "final" / ClipoCheckpointCallback.FILENAME)
    summary = validation.summary()
    summary.update(train_seconds=seconds, output_dir=str(out), best_dir=str(out / validation.BEST_DIR),
                   train_problems=len(train_problems),
                   train_pass_rates=str(rates_file) if rates_file else None)
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
        raise SystemExit(130)  # stopped by Ctrl-C; train() said where the checkpoint is
    first, last = summary.get("first"), summary.get("last")
    if first and last:
        n = int(first["problems"])

        def se(p: float) -> str:  # the binomial standard error of a success rate on n problems
            return f"± {math.sqrt(max(p * (1 - p), 0.0) / max(n, 1)):.1%}"

        print(
            f"validation success (greedy, first {n} validation problems, {interaction(opts)}): start "
            f"{first['greedy_success']:.1%} {se(first['greedy_success'])} (step {first['step']}) -> final "
            f"{last['greedy_success']:.1%} {se(last['greedy_success'])} (step {last['step']})"
        )
        best = summary.get("best")
        if best:
            print(f"best validation success (greedy): {best['greedy_success']:.1%} at step {best['step']}, "
                  f"saved in {summary['best_dir']}")
        if "sampled_success" in last:
            print(
                f"validation success (sampled, T={opts.temperature}, {opts.eval_samples}/problem): "
                f"start {first['sampled_success']:.1%} -> final {last['sampled_success']:.1%}; "
                f"pass@{opts.eval_samples} {first['pass_at_k']:.1%} -> {last['pass_at_k']:.1%}"
            )
    if summary.get("seconds_per_step"):
        print(f"seconds per GRPO step: {summary['seconds_per_step']:.2f}; "
              f"generated tokens/s (validation generate): {summary.get('eval_tokens_per_s', 0):.0f}")
    print(f"total {time.perf_counter() - t0:.0f} s; outputs in {summary['output_dir']}")


if __name__ == "__main__":
    main()
