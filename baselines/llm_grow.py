"""Grow a saved Llama-style model deeper without changing what it computes (block expansion, LLaMA Pro).

    python baselines/llm_grow.py --model baselines/checkpoints/countdown-tiny-lm-turns --out runs/turns_deep8

After each layer of ``--model`` comes a copy of it with its attention ``o_proj`` and MLP ``down_proj`` zeroed, which
adds nothing to the residual stream (docs/tiny_lm.md).
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from baselines.lm.grpo_model import DEFAULT_TURN_MODEL
from baselines.lm.tiny_lm import load_pretrained, save_pretrained
from countdown_gym import dataclass_cli
from countdown_gym.runkit.runs import read_options


@dataclass
class GrowOptions:
    """Grow a saved Llama-style model deeper, computing the same function (block expansion)."""

    model: str = DEFAULT_TURN_MODEL  # the saved model to grow (config.json, model.safetensors and tokenizer files)
    out: str = "runs/grown"  # where the grown model is written (must not exist yet)
    every: int = 1  # insert a zeroed copy after every ``every``-th layer (1: twice the layers)

    def __post_init__(self) -> None:
        dataclass_cli.check_min(self, 1, "every")


def expand_blocks(model: torch.nn.Module, every: int = 1) -> torch.nn.Module:
    """A deeper copy of a Llama-style causal LM: after every ``every``-th decoder layer, a copy of that layer
    with ``o_proj`` and ``down_proj`` zeroed, so the new model computes what ``model`` computes."""
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not all(hasattr(lay, "self_attn") and hasattr(lay, "mlp") for lay in layers):
        raise ValueError(f"block expansion needs a Llama-style model (model.layers of attention + MLP blocks); "
                         f"got {type(model).__name__}")
    grown = copy.deepcopy(model)
    new_layers, sources = [], []
    for i, layer in enumerate(grown.model.layers):
        new_layers.append(layer)
        sources.append(i)
        if (i + 1) % every == 0:
            extra = copy.deepcopy(layer)
            for proj in (extra.self_attn.o_proj, extra.mlp.down_proj):
                for tensor in (proj.weight, proj.bias):
                    if tensor is not None:
                        torch.nn.init.zeros_(tensor)
            new_layers.append(extra)
            sources.append(i)
    for idx, layer in enumerate(new_layers):
        layer.self_attn.layer_idx = idx  # the KV cache slot of each layer
    grown.model.layers = torch.nn.ModuleList(new_layers)
    grown.config.num_hidden_layers = len(new_layers)
    if getattr(grown.config, "layer_types", None) is not None:
        grown.config.layer_types = [grown.config.layer_types[i] for i in sources]  # a copy attends as its source
    return grown


def grow(opts: GrowOptions) -> Path:
    """Write the grown model of ``opts.model`` to ``opts.out``; returns ``opts.out``."""
    src, out = Path(opts.model), Path(opts.out)
    if out.exists():
        raise SystemExit(f"--out {out} exists; choose a new directory")
    meta = read_options(src, "training.json") or {}  # one error naming a damaged file
    try:
        model, tokenizer = load_pretrained(src)
    except FileNotFoundError:
        raise SystemExit(f"--model {src}: no saved model there (expected config.json and model.safetensors)") from None
    except ValueError as exc:  # a folder that holds no loadable model
        raise SystemExit(f"--model {exc}") from None
    try:
        grown = expand_blocks(model, opts.every)
    except ValueError as exc:
        raise SystemExit(f"--model {src}: {exc}") from None
    layers, params, grown_params = model.config.num_hidden_layers, model.num_parameters(), grown.num_parameters()
    summary = (f"{layers} -> {grown.config.num_hidden_layers} layers, "
               f"{params / 1e6:.2f}M -> {grown_params / 1e6:.2f}M parameters")
    meta["grown_from"] = {"model": str(src), "every": opts.every, "layers": layers, "params": params,
                          "method": "block expansion (zeroed o_proj and down_proj)"}
    meta["model_config"] = grown.config.to_diff_dict()
    meta["params"] = grown_params
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    save_pretrained(grown, tokenizer, tmp, meta)
    for name in ("generation_config.json", "train_pass_rates.jsonl"):
        if (src / name).is_file():
            shutil.copy2(src / name, tmp / name)
    (tmp / "README.md").write_text(
        f"# Grown from {src}\n\n{summary}, by block expansion "
        f"(a copy after every {opts.every} layer(s), its o_proj and down_proj zeroed): it plays as the original.\n\n"
        f"```bash\npython baselines/llm_grow.py --model {src} --out {out} --every {opts.every}\n```\n")
    tmp.rename(out)  # all or nothing: an interrupted run leaves only the .partial directory
    print(f"{src}: {summary}; written to {out}")
    return out


if __name__ == "__main__":
    dataclass_cli.run_script(lambda: grow(dataclass_cli.parse(GrowOptions)))
