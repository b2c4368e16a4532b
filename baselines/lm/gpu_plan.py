"""GPU planning from a model's config alone (no weights load): its shape, the process layout, micro-batches and
memory per process, for ``llm_grpo.py`` (and its ``--dry-run``) and ``llm_eval.py --dry-run``. The activation bytes
were measured with ``saved_tensors_hooks`` on Qwen2 layers, SDPA (``tests/test_gpu_plan.py`` repeats it)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from countdown_gym.dataclass_cli.strict import strict_json

ROOT = Path(__file__).resolve().parents[2]
MODEL_CONFIGS = ROOT / "baselines" / "model_configs"
GB = 1e9
"""Memory is shown in GB (10^9 bytes), the unit GPUs are sold in (an "80 GB" GPU holds 80-85 GB)."""
HEADROOM = 0.9
"""Share of a GPU's memory a plan may fill (the rest: allocator fragmentation, NCCL buffers, what is not modelled)."""
CUDA_CONTEXT = 1.0 * GB
"""CUDA context and kernels of each process."""
DEEPSPEED_BUCKETS = 2 * 5e8 * 2
"""DeepSpeed's reduce and all-gather buckets: 5e8 elements each (its defaults), 2 bytes an element."""
CPU_MICRO_BATCH = 32
"""Completions per micro-batch on the CPU (measured: 5.5 GB -> 2.2 GB peak for the shipped model, docs/llm_grpo.md)."""


class PlanError(ValueError):
    """A plan that cannot be made (no readable config, an unsupported layout)."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimates need of a causal LM, read from its config."""

    name: str
    source: str  # where the config was read: a local directory, the shipped copy, or the hub
    parameters: int
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_positions: int | None

    @property
    def kv_dim(self) -> int:
        """Width of the keys (and of the values) of one token in one layer."""
        return self.kv_heads * self.head_dim

    def kv_bytes_per_token(self, width: int) -> int:
        """KV cache of one token over all layers at ``width`` bytes an element."""
        return 2 * self.layers * self.kv_dim * width


@functools.lru_cache(maxsize=16)
def model_shape(name: str) -> ModelShape:
    """The :class:`ModelShape` of a local model directory, else ``baselines/model_configs/<hub id>``, else the hub,
    from its config alone (parameters counted on ``meta``); :class:`PlanError` when no config can be read."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    local, shipped = Path(name).expanduser(), MODEL_CONFIGS / name
    if local.is_dir():
        source = where = str(local)
    elif name and not name.startswith((".", "/", "~")) and (shipped / "config.json").is_file():
        source, where = str(shipped), str(shipped.relative_to(ROOT))
    else:
        source, where = name, f"hub: {name}"
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as exc:
        if local.is_dir():  # a damaged config.json of a local model: the advice below would not fit
            raise PlanError(f"{local}: its config.json does not read ({str(exc).strip()[:160]})") from None
        raise PlanError(f"the config of {name!r} could not be read here ({type(exc).__name__}); pass a local model "
                        f"directory, or add baselines/model_configs/{name}/config.json") from None
    text = config.get_text_config()
    heads = getattr(text, "num_attention_heads", None)
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except ValueError:  # transformers builds no causal LM of this config (an encoder-decoder, a vision model...)
        heads = None
    if not heads:
        raise PlanError(f"the config of {name!r} ({config.model_type}) is not a causal LM with attention heads, the "
                        "decoders these estimates model")
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return ModelShape(
        name=name, source=where, parameters=model.num_parameters(), layers=text.num_hidden_layers, hidden=text.hidden_size,
        intermediate=getattr(text, "intermediate_size", None) or 4 * text.hidden_size, heads=heads,
        kv_heads=getattr(text, "num_key_value_heads", None) or heads, head_dim=head_dim, vocab=text.vocab_size,
        max_positions=getattr(text, "max_position_embeddings", None),
    )


@dataclass(frozen=True)
class Layout:
    """How a run is spread: processes (one GPU each), the sharding of the training state, each GPU's memory."""

    processes: int
    strategy: str  # single | ddp | zero1 | zero2 | zero3 (DeepSpeed ZeRO stages) | fsdp
    gpu_memory: float | None  # bytes of each GPU (None: the plan is for the CPU)
    bf16: bool

    @property
    def on_gpu(self) -> bool:
        return self.gpu_memory is not None

    def describe(self) -> str:
        where = f"one GPU of {self.gpu_memory / GB:.0f} GB each" if self.on_gpu else "CPU"
        kind = {"single": "", "ddp": "DDP (every process holds the whole training state)",
                "zero1": "DeepSpeed ZeRO-1 (optimizer state sharded)",
                "zero2": "DeepSpeed ZeRO-2 (optimizer state and gradients sharded)",
                "zero3": "DeepSpeed ZeRO-3", "fsdp": "FSDP"}[self.strategy]
        parts = [f"{self.processes} process{'es' if self.processes > 1 else ''}", kind, where,
                 f"{'bf16' if self.bf16 else 'float32'} compute"]
        return ", ".join(part for part in parts if part)


def launcher_strategy(env: dict[str, str] | None = None) -> tuple[int, str]:
    """``(processes, strategy)`` from the environment ``accelerate launch`` (torchrun, deepspeed) sets."""
    env = dict(os.environ if env is None else env)
    processes = int(env.get("WORLD_SIZE", "1"))
    if env.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return processes, "fsdp"
    if env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        stage = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
        config_file = env.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
        if stage is None and config_file and Path(config_file).is_file():
            try:
                stage = str(strict_json(Path(config_file).read_bytes()).get("zero_optimization", {}).get("stage", ""))
            except (OSError, ValueError, AttributeError) as exc:  # unreadable, not JSON, not an object
                raise PlanError(f"{config_file}: not a readable DeepSpeed JSON config ({exc!s:.160})") from None
        if stage not in ("0", "1", "2", "3"):
            raise PlanError("DeepSpeed without a ZeRO stage (ACCELERATE_DEEPSPEED_ZERO_STAGE or the config file's "
                            "zero_optimization.stage)")
        return processes, "ddp" if stage == "0" else f"zero{stage}"
    return processes, "single" if processes == 1 else "ddp"


def gpu_memory(override_gb: float = 0.0) -> float | None:
    """Bytes of this process's GPU: ``override_gb``, else the first visible GPU's, else None."""
    if override_gb:
        return override_gb * GB
    import torch

    if torch.cuda.is_available():
        return float(torch.cuda.get_device_properties(0).total_memory)
    return None


def bf16_supported() -> bool:
    """Whether this machine's GPU computes in bfloat16."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def micro_batch(per_process: int, sequence_tokens: int, max_tokens: int) -> int:
    """The largest divisor of ``per_process`` (at least 1) whose micro-batch holds at most ``max_tokens`` tokens."""
    fit = max(1, max_tokens // max(sequence_tokens, 1))
    return max(d for d in range(1, per_process + 1) if per_process % d == 0 and d <= fit)


def activation_bytes_per_token(shape: ModelShape, compute: str, *, gradient_checkpointing: bool = False) -> float:
    """Bytes autograd keeps per token for the backward pass, all layers (measured per layer, plus 40); ``compute``:
    ``float32``, ``bfloat16`` or ``autocast`` (float32 weights, bf16 compute). With gradient checkpointing only each
    layer's input is kept."""
    h, i, kv = shape.hidden, shape.intermediate, shape.kv_dim
    per_layer = {"float32": 32 * h + 16 * i + 8 * kv, "bfloat16": 20 * h + 8 * i + 4 * kv,
                 "autocast": 30 * h + 8 * i + 4 * kv}[compute] + 40
    if gradient_checkpointing:
        return shape.layers * h * (2 if compute == "bfloat16" else 4)
    return shape.layers * per_layer


def training_memory(shape: ModelShape, layout: Layout, *, weight_bytes: int, micro: int, sequence_tokens: int,
                    completion_tokens: int, gradient_checkpointing: bool, reference_model: bool,
                    vllm_share: float = 0.0, generation_rows: int = 0) -> dict[str, float]:
    """Estimated bytes per process of a GRPO run, by part; ``total`` is the peak.

    ``weight_bytes``: 4 (float32) or 2 (bfloat16); DeepSpeed keeps bf16 weights and gradients with float32 master
    weights and moments, sharded by stage. ``vllm_share``: bytes of a colocated vLLM engine. ``generation_rows``:
    sequences ``generate()`` holds at once; their KV cache is freed before the backward pass (the peak takes the larger).
    """
    n, p = layout.processes, shape.parameters
    out: dict[str, float] = {}
    if layout.strategy.startswith("zero"):
        stage = int(layout.strategy[-1])
        out["weights"] = 2 * p / (n if stage >= 3 else 1)
        out["gradients"] = 2 * p / (n if stage >= 2 else 1)
        out["optimizer (fp32 master weights + Adam moments)"] = 12 * p / n
        out["DeepSpeed buckets"] = DEEPSPEED_BUCKETS
        compute = "bfloat16" if layout.bf16 else "float32"
    else:
        shard = n if layout.strategy == "fsdp" else 1
        out["weights"] = weight_bytes * p / shard
        out["gradients"] = weight_bytes * p / shard
        out["optimizer (Adam moments)"] = 2 * weight_bytes * p / shard
        if layout.strategy == "ddp":
            out["DDP gradient buckets"] = weight_bytes * p
        if layout.bf16 and weight_bytes == 4:
            out["bf16 copies of the weights (autocast cache)"] = 2 * p / shard
        compute = ("autocast" if weight_bytes == 4 else "bfloat16") if layout.bf16 else ("bfloat16" if weight_bytes == 2 else "float32")
    if reference_model:
        out["reference model (beta > 0)"] = (2 if layout.bf16 else weight_bytes) * p / (n if layout.strategy in ("zero3", "fsdp") else 1)
    tokens = micro * sequence_tokens
    act = tokens * activation_bytes_per_token(shape, compute, gradient_checkpointing=gradient_checkpointing)
    if gradient_checkpointing:  # one layer recomputed with its full activations during the backward pass
        act += tokens * activation_bytes_per_token(shape, compute) / shape.layers
    logits = {"float32": 4, "bfloat16": 2, "autocast": 6}[compute] * 2  # TRL's completion logits and their gradient
    act += micro * completion_tokens * shape.vocab * logits
    out[f"activations ({micro} x {sequence_tokens} tokens)"] = act
    if vllm_share:
        out["vLLM (colocated engine)"] = vllm_share
    if layout.on_gpu:
        out["CUDA context"] = CUDA_CONTEXT
    static = sum(v for k, v in out.items() if not k.startswith("activations"))
    kv = 0.0
    if generation_rows:
        kv = generation_rows * sequence_tokens * shape.kv_bytes_per_token(2 if layout.bf16 else weight_bytes)
        out[f"generation KV cache ({generation_rows} sequences, freed before training)"] = kv
    out["total"] = static + max(act, kv)
    return out


def tokens_budget(shape: ModelShape | None, layout: Layout, *, sequence_tokens: int, **memory: Any) -> int:
    """Tokens a micro-batch may hold in :data:`HEADROOM` of the GPU after the static parts of :func:`training_memory`
    (``memory``: its other arguments); on the CPU :data:`CPU_MICRO_BATCH` sequences."""
    if not layout.on_gpu:
        return CPU_MICRO_BATCH * sequence_tokens
    one = training_memory(shape, layout, micro=1, sequence_tokens=sequence_tokens, **memory)
    act = next(v for k, v in one.items() if k.startswith("activations"))
    free = HEADROOM * layout.gpu_memory - (one["total"] - act)
    return max(0, int(free / act * sequence_tokens))


def generation_memory(shape: ModelShape, width: int, rows: int, sequence_tokens: int) -> dict[str, float]:
    """Bytes of ``generate()``: the weights at ``width`` bytes and the KV cache of ``rows`` sequences."""
    weights = shape.parameters * width
    kv = rows * sequence_tokens * shape.kv_bytes_per_token(width)
    return {"weights": weights, "kv_cache": kv, "total": weights + kv}


def format_memory(parts: dict[str, float], gpu_bytes: float | None) -> list[str]:
    """Lines of a memory table in GB, with the verdict against ``gpu_bytes``."""
    width = max(len(k) for k in parts)
    lines = [f"  {k:<{width}}  {v / GB:8.1f} GB" for k, v in parts.items() if k != "total"]
    lines.append(f"  {'total (peak)':<{width}}  {parts['total'] / GB:8.1f} GB")
    if gpu_bytes:
        spare = gpu_bytes - parts["total"]
        verdict = (f"fits: {spare / GB:.1f} GB ({spare / gpu_bytes:.0%}) of the {gpu_bytes / GB:.0f} GB GPU to spare"
                   if spare >= 0 else f"DOES NOT FIT: {-spare / GB:.1f} GB over the {gpu_bytes / GB:.0f} GB GPU")
        lines.append(f"  {verdict}")
    return lines
