"""The options of a GRPO run (``baselines/llm_grpo.py``, :class:`Options`) and the run they resolve to
(:class:`GRPORun`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baselines.lm.grpo_model import DEFAULT_MODEL, DEFAULT_TURN_MODEL, ROOT, check_model
from countdown_gym import dataclass_cli

INTERACTIONS = ("auto", "multi-turn", "single-pass", "tools")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")  # TRL's GRPOConfig.loss_type
SCALE_REWARDS = ("group", "batch", "none")
MODEL_DTYPES = ("float32", "bfloat16", "auto")  # --model-dtype, passed to from_pretrained(dtype=...)


def grpo(default: Any, name: str = "") -> Any:
    """A field that TRL's ``GRPOConfig`` takes as it is, under ``name`` (default: the field's own)."""
    return field(default=default, metadata={"grpo": name})


@dataclass
class Options:
    """Every knob of a run; each is a CLI flag. Fields made with :func:`grpo` pass to TRL's ``GRPOConfig`` unchanged."""

    model: str = ""  # causal LM, local path or hub id (default: the shipped tiny model of the interaction)
    interaction: str = "auto"
    """multi-turn: one move per model turn, CountdownMultiTurn-v0 answers (its tokens masked out of the loss);
    single-pass: the whole search and answer in one completion; tools: a chat model plays through TRL's tool loop
    (CountdownToolEnv); auto: single-pass for the longproc / tinyzero prompt styles, else what --model was trained
    for, multi-turn for the default model."""
    max_turns: int = 16  # turn budget of an episode (multi-turn, tools; TRL's max_tool_calling_iterations is this + 4)
    max_turn_tokens: int = 12  # multi-turn: the token budget of one model turn
    stop_at_dead_end: bool = False
    """Multi-turn: a training episode stops after a legal move that puts the target out of reach
    (docs/results/llm_grpo_dead_ends.md); validation and --test-eval play whole episodes."""
    dead_end_patience: int = 1  # with --stop-at-dead-end: the turns in a row an episode may stay lost before it stops
    preset: str = "longproc-0.5k"  # frozen split preset: trains on its train split, validates on its validation split
    prompt_style: str = "compact"  # compact | longproc | tinyzero (single-pass); compact | instruct (multi-turn)
    chat_template: bool = True
    """Wrap longproc/tinyzero prompts as a user message when the tokenizer has a chat template."""
    rewards: str = "sparse"
    """sparse | oracle-reachable | oracle-perfect | critic | clipo | text-critic, '+'-joined, or term=w,..."""
    steps: int = grpo(30, "max_steps")  # GRPO optimizer steps
    max_minutes: float = 0.0
    """Stop after the first step that ends past this much training wall time (then the end of run as at --steps);
    0 = no limit. A resumed run counts its own time again."""
    num_generations: int = grpo(8)  # group size G: completions per prompt
    prompts_per_step: int = 16  # prompts per step (a step generates prompts_per_step * num_generations completions)
    micro_batch_size: int | None = None
    """Completions per forward/backward pass on each process (gradient accumulation keeps the step); 0 = the whole
    step at once; unset: the most --max-tokens-per-micro-batch holds."""
    max_tokens_per_micro_batch: int = 0
    """Token budget of a micro-batch; 0 = derived: on a GPU from its memory (baselines/lm/gpu_plan.py), on the CPU
    32 completions."""
    gpu_memory_gb: float = 0.0
    """GB of each GPU to plan for (0: the visible GPU's); lets --dry-run plan a GPU run anywhere."""
    dry_run: bool = False
    """Check the options, print the GRPOConfig, layout and memory estimate, load no weights, exit 0."""
    max_completion_length: int = grpo(192)  # token budget of a completion (multi-turn: the turns and their replies bound it)
    max_prompt_length: int = 512  # prompt token budget (vLLM's max model length: this + --max-completion-length)
    learning_rate: float = grpo(5e-5)
    """Adam's learning rate (tuned on validation problems: docs/results/reward_comparison.md#tuning-validation-only)."""
    beta: float = grpo(0.0)  # KL coefficient (0: no reference model)
    temperature: float = grpo(0.5)  # sampling temperature of the rollouts (and of the sampled validation)
    loss_type: str = grpo("dapo")  # TRL's loss: grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo or vespo
    scale_rewards: str = grpo("group")  # how TRL scales the advantages: group, batch or none
    seed: int = grpo(0)
    eval_interval: int = 15  # validate every N steps (and at the start and the end); 0 = only start and end
    eval_problems: int = 200
    """Validation problems: N drawn with a fixed seed, the same in every run (grpo_data.validation_subset); they alone
    choose best/; 0 = all."""
    eval_samples: int = 2  # sampled completions per validation problem (sampled success and pass@k); 0 = greedy only
    eval_batch_size: int = 64
    test_eval: bool = True
    """Greedy success on the preset's test split at the start and the end, with standard errors and the paired
    difference (baselines/lm/held_out.py)."""
    test_problems: int = 0  # test problems played by --test-eval (first N of the frozen split; 0 = all)
    output_dir: str = ""  # run directory (default: runs/llm_grpo/<preset>[-turns|-tools]-<rewards>[-step]-s<seed>)
    save_steps: int = 15  # checkpoint every N steps (keeps the last two)
    resume: bool = False  # continue from the last checkpoint in output_dir
    use_vllm: bool = grpo(False)  # generate with vLLM (GPU only; pip install 'countdown-gym[vllm]')
    vllm_mode: str = grpo("colocate")  # colocate (same GPUs) | server (a separate `trl vllm-serve` process)
    vllm_server_base_url: str = ""
    vllm_gpu_memory_utilization: float = grpo(0.3)
    bf16: bool | None = None  # bf16 training (default: on when CUDA is available, always off on CPU)
    model_dtype: str = "float32"
    """dtype of the weights and optimizer state: float32 (--bf16 autocasts) | bfloat16 (half the memory; Adam updates
    at lr ~1e-6 round away) | auto (the checkpoint's)."""
    gradient_checkpointing: bool = False  # recompute activations in the backward pass (less memory, about 20% slower)
    threads: int = 2  # torch CPU threads; a seeded run repeats bit for bit at the same thread count only
    train_problems: int = 0  # use only the first N training problems (0 = all; after the pass-rate filter)
    train_pass_rates: str = "auto"
    """JSONL of sampled pass rates (llm_eval.py --pass-rates): train only on problems whose rate lies strictly
    between min_pass_rate and max_pass_rate; auto: the model directory's train_pass_rates.jsonl for this preset;
    none: every problem."""
    min_pass_rate: float = 0.0
    max_pass_rate: float = 1.0
    curriculum: str = "none"  # none | staged: easy tiers first, all tiers for the last third (docs/difficulty.md)
    clipo_lambda: float = 0.2
    clipo_warmup_steps: int = 0
    step_credit: bool = False
    """Multi-turn: credit the dense terms of --rewards to the turn that earned them (docs/step_credit.md) instead of
    adding their mean to the scalar reward."""
    step_credit_gamma: float = 1.0  # discount of the per-turn return-to-go with --step-credit
    report_to: str = "tensorboard"
    """Where TRL's metrics and the validation rows are also logged: none, all, or a comma-separated list of
    transformers' integrations (tensorboard: <output-dir>/tensorboard)."""
    quiet: bool = grpo(False, "disable_tqdm")  # no progress bar
    extra: dict[str, Any] = field(default_factory=dict)  # more GRPOConfig fields as JSON: --extra '{"top_p": 0.95}'

    def __post_init__(self) -> None:
        from countdown_gym.data.splits import SPLIT_SPEC

        for name, allowed in (("interaction", INTERACTIONS), ("preset", sorted(SPLIT_SPEC)), ("vllm_mode", ("colocate", "server")),
                              ("model_dtype", MODEL_DTYPES), ("loss_type", LOSS_TYPES), ("scale_rewards", SCALE_REWARDS),
                              ("curriculum", ("none", "staged"))):
            dataclass_cli.check_choice(self, name, allowed)
        if not 0 < self.temperature < float("inf"):  # Options built in Python skip the parser's finite check
            raise ValueError(f"--temperature must be > 0 and finite, got {self.temperature}")
        if not 0 <= self.seed < 2**31:  # numpy's seeding (transformers' set_seed) takes [0, 2**32)
            raise ValueError(f"--seed must be in [0, 2**31), got {self.seed}")
        dataclass_cli.check_min(self, 1, "steps", "prompts_per_step", "max_completion_length", "max_prompt_length", "threads",
                                "eval_batch_size", "max_turns", "max_turn_tokens", "dead_end_patience")
        dataclass_cli.check_min(self, 0, "learning_rate", "beta", "eval_interval", "eval_problems", "eval_samples",
                                "save_steps", "train_problems", "test_problems", "max_tokens_per_micro_batch", "gpu_memory_gb",
                                "max_minutes")
        if self.micro_batch_size is not None:
            dataclass_cli.check_min(self, 0, "micro_batch_size")
            if self.max_tokens_per_micro_batch:
                raise ValueError("--max-tokens-per-micro-batch chooses the micro-batch that --micro-batch-size sets: pass one")
        if self.dead_end_patience != 1 and not self.stop_at_dead_end:
            raise ValueError("--dead-end-patience is the wait of --stop-at-dead-end: add --stop-at-dead-end true")
        if self.num_generations < 2:
            raise ValueError(f"--num-generations must be >= 2 (GRPO compares completions within a group), got {self.num_generations}")
        if not 0.0 <= self.min_pass_rate < self.max_pass_rate <= 1.0:
            raise ValueError(f"need 0 <= --min-pass-rate < --max-pass-rate <= 1, got {self.min_pass_rate} and {self.max_pass_rate}")
        if not 0.0 <= self.step_credit_gamma <= 1.0:
            raise ValueError(f"--step-credit-gamma must be in [0, 1], got {self.step_credit_gamma}")

    def grpo_fields(self) -> dict[str, Any]:
        """GRPOConfig field -> value of the fields made with :func:`grpo`."""
        return {f.metadata["grpo"] or f.name: getattr(self, f.name) for f in dataclasses.fields(self) if "grpo" in f.metadata}


RESUMABLE_CHANGES = ("steps", "max_minutes", "resume", "quiet", "threads", "eval_interval", "eval_batch_size", "save_steps", "report_to",
                     "output_dir", "micro_batch_size", "max_tokens_per_micro_batch", "gpu_memory_gb", "dry_run")
"""Options a ``--resume`` may change; any other difference from the run's ``options.json`` is an error."""
PASS_RATES_FILE = "train_pass_rates.jsonl"
"""The pass-rate file ``--train-pass-rates auto`` looks for in a model's directory."""


@dataclass(frozen=True)
class GRPORun:
    """A run's options with what they imply resolved once and checked (:meth:`of`)."""

    options: Options  # the options as they run: ``--interaction auto`` resolved (what ``options.json`` records)
    model: str  # ``--model``, or the shipped model of the interaction
    run_dir: Path
    pass_rates: Path | None  # the pass-rate file that filters the training problems (None: every problem)

    @property
    def multi_turn(self) -> bool:
        return self.options.interaction == "multi-turn"

    @property
    def tools(self) -> bool:
        return self.options.interaction == "tools"

    @property
    def turns(self) -> int | None:
        """An episode's turn budget (multi-turn and tools); None for single-pass."""
        return self.options.max_turns if self.multi_turn or self.tools else None

    @property
    def eval_play(self) -> Any:
        """The ``Play`` (``baselines.lm.evaluation``) of the validation and the held-out test: as the rollouts play,
        ``--eval-batch-size`` at a time."""
        from baselines.lm.evaluation import Play

        opts = self.options
        return Play(max_turns=self.turns, max_new_tokens=opts.max_completion_length, batch_size=opts.eval_batch_size,
                    prompt_style=opts.prompt_style, max_turn_tokens=opts.max_turn_tokens, tools=self.tools)

    @classmethod
    def of(cls, opts: Options) -> GRPORun:
        """Resolve ``opts`` and check it (a clear exit before any model is loaded)."""
        opts = dataclasses.replace(opts, interaction=resolve_interaction(opts.interaction, opts.model, opts.prompt_style))
        model = opts.model or (DEFAULT_TURN_MODEL if opts.interaction == "multi-turn" else DEFAULT_MODEL)
        run = cls(options=opts, model=model, run_dir=default_run_dir(opts), pass_rates=pass_rates_file(opts, model))
        check_run(run)
        return run


def resolve_interaction(interaction: str, model: str, prompt_style: str) -> str:
    """``--interaction`` with ``auto`` resolved (see :class:`Options`)."""
    if interaction != "auto":
        return interaction
    if prompt_style in ("longproc", "tinyzero"):
        return "single-pass"
    if not model:
        return "multi-turn"
    from baselines.lm.tiny_lm import detect_interaction

    return detect_interaction(model)


def default_run_dir(opts: Options) -> Path:
    """``--output-dir``, or ``runs/llm_grpo/<preset>[-turns|-tools]-<rewards>[-step]-s<seed>``."""
    if opts.output_dir:
        return Path(opts.output_dir)
    tag = opts.rewards.replace(",", "_").replace("=", "").replace("+", "-")
    mode = {"multi-turn": "-turns", "tools": "-tools"}.get(opts.interaction, "")
    credit = "-step" if opts.step_credit else ""
    return ROOT / "runs" / "llm_grpo" / f"{opts.preset}{mode}-{tag}{credit}-s{opts.seed}"


def pass_rates_file(opts: Options, model: str) -> Path | None:
    """The pass-rate file of the run (None: every problem); ``auto``: ``model``'s own when its first row names a
    training problem of ``opts.preset``."""
    if opts.train_pass_rates in ("none", ""):
        return None
    if opts.train_pass_rates != "auto":
        return Path(opts.train_pass_rates)
    path = Path(model) / PASS_RATES_FILE
    if not path.is_file():
        return None
    with path.open("rb") as f:  # a first line not UTF-8: a ValueError below
        first = f.readline()
    try:
        pid = str(dataclass_cli.strict_json(first)["id"])  # "id" twice: malformed
    except (ValueError, KeyError, TypeError):
        return path  # malformed: filter_by_pass_rate names the line
    return path if pid.startswith(f"{opts.preset}/train/") else None


def check_run(run: GRPORun) -> None:
    """Usage errors (exit 2) for options that do not fit together (the checks that need the interaction, files or
    libraries); a model that is missing or not a model exits 1."""
    from baselines.lm.rewards import parse_reward_spec
    from countdown_gym.game.text_format import PROMPT_STYLES
    from countdown_gym.game.turn_format import TURN_PROMPT_STYLES
    from countdown_gym.runkit.tracking import report_to_names

    opts = run.options
    check_model(run.model)
    try:
        spec = parse_reward_spec(opts.rewards)
    except ValueError as exc:
        dataclass_cli.usage_error(f"--rewards: {exc}")
    if "critic" in spec:
        from baselines.lm.compat import check_critic_fits

        check_critic_fits(opts.preset)
    if opts.step_credit:
        from baselines.lm.step_credit import split_reward_spec
        from countdown_gym.rewards.variants import step_credit_names

        if not run.multi_turn:
            dataclass_cli.usage_error("--step-credit credits the turns of multi-turn rollouts: it needs --interaction multi-turn")
        if not split_reward_spec(spec)[1]:
            dataclass_cli.usage_error(f"--step-credit needs a dense term ({', '.join(step_credit_names())}) in --rewards, got {opts.rewards!r}")
    if opts.stop_at_dead_end and not run.multi_turn:
        dataclass_cli.usage_error("--stop-at-dead-end stops multi-turn episodes: it needs --interaction multi-turn")
    if run.multi_turn:  # its rollout samples with temperature, top_p and top_k alone (trl_rollout.UNSAMPLED_KNOBS)
        from countdown_gym.integrations.trl_rollout import unsampled_knobs

        if knobs := unsampled_knobs(opts.extra):
            dataclass_cli.usage_error(f"--extra {', '.join(knobs)}: the multi-turn rollout samples with --temperature "
                                      "and GRPOConfig's top_p / top_k only")
    if run.multi_turn and opts.use_vllm:
        dataclass_cli.usage_error("--interaction multi-turn generates with transformers turn by turn; for multi-turn with vLLM "
                         "use --interaction tools (a chat model with a tool-calling template, through TRL's tool loop)")
    if opts.vllm_server_base_url and not (opts.use_vllm and opts.vllm_mode == "server"):
        dataclass_cli.usage_error("--vllm-server-base-url is the address of a `trl vllm-serve` server: it needs --use-vllm "
                                  "--vllm-mode server")
    if run.tools and run.model in (DEFAULT_MODEL, DEFAULT_TURN_MODEL):
        dataclass_cli.usage_error("--interaction tools needs --model: a chat model with a tool-calling template (Qwen2.5, Qwen3, "
                         "Llama 3.1 Instruct...); the shipped tiny models have none")
    if opts.train_pass_rates not in ("auto", "none", "") and not Path(opts.train_pass_rates).is_file():
        dataclass_cli.usage_error(f"--train-pass-rates {opts.train_pass_rates}: no such file")
    if (opts.min_pass_rate, opts.max_pass_rate) != (0.0, 1.0) and run.pass_rates is None:
        dataclass_cli.usage_error(f"--min-pass-rate / --max-pass-rate filter by a pass-rate file, and --train-pass-rates "
                         f"{opts.train_pass_rates} gives none for this model and preset")
    try:  # the logging integrations transformers knows and this machine has; the prompt styles of the interaction
        report_to_names(opts.report_to)
        if not run.tools:  # a tool episode's prompt is the environment's puzzle text (trl_env.tool_prompt)
            dataclass_cli.check_choice(opts, "prompt_style", TURN_PROMPT_STYLES if run.multi_turn else PROMPT_STYLES)
    except ValueError as exc:
        dataclass_cli.usage_error(str(exc))


def resumed_options(opts: Options, saved: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stored options of the run ``opts`` resumes, as today's runs record them (``runs.prepare_run``'s
    ``saved_as``: older runs were single-pass, a saved ``auto`` is resolved); a changed ``--threads`` is said."""
    if saved is None:
        return None
    saved = {"interaction": "single-pass", **saved}
    if saved["interaction"] == "auto":
        saved["interaction"] = resolve_interaction("auto", saved.get("model", opts.model), saved.get("prompt_style", opts.prompt_style))
    if saved.get("threads", opts.threads) != opts.threads:
        print(f"--resume: --threads {opts.threads}, the run so far used {saved['threads']}: the steps from here on "
              "add floats in another order and will not repeat an uninterrupted run bit for bit", flush=True)
    return saved
