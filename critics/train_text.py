"""Train the text critic: ``python -m critics.train_text`` (every field of :class:`TextTrainConfig` is a flag).

V2's pairs and loss on text states: a node read as the trace text up to the line that creates it, or (``--render``)
as the bare state of :func:`~critics.text_critic.render_state`. ``--out`` receives the checkpoint (every
``--checkpoint-every`` steps and at the end: a loadable text critic, ``train_state.pt`` and ``previous/`` for
``--resume``, as ``critics.train`` keeps them), ``log.jsonl`` and ``loss.png``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from countdown_gym import Problem, dataclass_cli, dfs_trace
from countdown_gym.runkit.runs import Panel, StopRequest
from critics import train_loop
from critics.data import TraceTable, build_table, training_problems
from critics.losses import v2_loss
from critics.models import count_parameters
from critics.text_critic import (
    DEFAULT_LM,
    TextCritic,
    TextCriticConfig,
    TextCriticModel,
    build_text_critic,
    node_lines,
    prefix_window,
    read_text_weights,
    render_state,
    save_text_critic,
)


@dataclass
class TextTrainConfig(train_loop.CommonTrainOptions):
    """Everything a text-critic training run depends on (each field is a CLI flag)."""

    # model
    lm: str = str(DEFAULT_LM)  # saved causal LM directory whose weights start the state tower
    model: TextCriticConfig = field(default_factory=TextCriticConfig)
    """The text critic's architecture (critics.text_critic.TextCriticConfig)."""
    # data
    train_problems: int = 2000  # first N problems of the train split (the table holds every node of their traces)
    render: float = 0.25  # fraction of rows whose states are written as bare states (render_state) instead of trace text
    # optimisation (the shared options' defaults are the numerical critic's)
    steps: int = 600
    batch_size: int = 32
    lm_lr: float = 3e-4  # the LM when fine-tuned (--lr: the head and the goal tower)
    warmup: int = 30
    # bookkeeping
    out: str = "runs/critic-text"
    checkpoint_every: int = 200
    log_every: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        dataclass_cli.check_min(self, 1, "train_problems")
        dataclass_cli.check_min(self, 0, "lm_lr")
        if not 0.0 <= self.render <= 1.0:
            raise ValueError(f"--render must be in [0, 1], got {self.render}")
        if not self.model.finetune:
            dataclass_cli.check_unused(self, "--no-finetune (the LM stays frozen)", only=("lm_lr",))


@dataclass
class TextTraces:
    """A :class:`TraceTable` plus the trace text of every trace and the line that creates every node."""

    table: TraceTable
    lines: list[list[str]]
    node_line: np.ndarray  # int64 [N]: the line of its trace's text that puts the search on the node

    def node_text(self, node: int, render: bool = False) -> str:
        t = int(self.table.node_trace[node])
        if render:
            k = int(self.table.node_sizes[node])
            return render_state([int(x) for x in self.table.node_states[node][:k]], int(self.table.target[t]))
        return prefix_window(self.lines[t], int(self.node_line[node]))


def build_text_traces(problems: list[Problem], progress: bool = True) -> TextTraces:
    """Trace ``problems`` (test-split problems are refused by :func:`critics.data.build_table`)."""
    table = build_table(problems, progress=progress)
    counts = np.bincount(table.node_trace, minlength=len(problems))
    lines, node_line = [], []
    for t, p in enumerate(problems):
        text = dfs_trace(p)
        nl = node_lines(text)
        if len(nl) != counts[t]:  # the table and the text must describe the same search tree
            raise AssertionError(f"trace of {p!r}: {len(nl)} node lines but {counts[t]} table nodes")
        lines.append(text.split("\n"))
        node_line.extend(nl)
    return TextTraces(table, lines, np.array(node_line, dtype=np.int64))


def text_loss(model: TextCriticModel, critic: TextCritic, data: TextTraces, cfg: TextTrainConfig,
              rng: np.random.Generator) -> tuple[torch.Tensor, dict[str, float]]:
    """V2's loss (:func:`critics.losses.v2_loss`) on text states."""
    b = data.table.sample_v2(cfg.batch_size, rng, "reachable", cfg.hindsight, cfg.dead_per_row, (0.1, 0.3, 0.6),
                             cfg.dead_same_size)
    rendered = rng.random(cfg.batch_size) < cfg.render  # a row's state and its dead ends are written the same way
    texts = [data.node_text(int(n), bool(r)) for n, r in zip(b["state"], rendered, strict=True)]
    rows = np.flatnonzero(b["dead_valid"]) if cfg.hard_weight > 0 and cfg.dead_per_row > 0 else np.zeros(0, np.int64)
    for r in rows:
        texts += [data.node_text(int(n), bool(rendered[r])) for n in b["dead"][r]]
    emb = model.embed_tokens(*critic.tokenize(texts))
    d = emb[cfg.batch_size :].reshape(len(rows), cfg.dead_per_row, -1) if len(rows) else None
    return v2_loss(emb[: cfg.batch_size], b["goal"], model.embed_goals, rows, d, cfg.model.temperature, cfg.hard_weight)


LOSS_PANELS = (Panel("contrastive loss", {"loss": "loss"}),)  # loss.png


def train(cfg: TextTrainConfig, progress: bool = True) -> Path:
    """Run (or resume) training; returns the run directory (a loadable text-critic checkpoint)."""
    t_start = time.perf_counter()
    resuming = train_loop.will_resume(cfg)
    out, rng = train_loop.start_run(cfg, resuming=resuming)
    model, tok = build_text_critic(cfg.model, cfg.lm, seed=cfg.seed)
    resumed = (train_loop.resume(out, lambda d: (model, read_text_weights(d, model)), cfg)  # fail fast
               if resuming else None)
    critic = TextCritic(model, tok)  # shares the model: tokenizes the way scoring will
    t_data = time.perf_counter()
    data = build_text_traces(training_problems(cfg.preset, max_train=cfg.train_problems), progress=progress)
    data_seconds = time.perf_counter() - t_data
    groups = [{"params": [p for n, p in model.named_parameters() if not n.startswith("lm.")], "lr": cfg.lr}]
    if cfg.model.finetune:
        groups.append({"params": list(model.lm.parameters()), "lr": cfg.lm_lr})
    optim = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
    recorded = cfg.to_dict()
    if Path(cfg.lm).resolve().is_relative_to(DEFAULT_LM.parents[2]):  # inside the repository: no machine's paths
        recorded["lm"] = Path(cfg.lm).resolve().relative_to(DEFAULT_LM.parents[2]).as_posix()
    extra: dict[str, Any] = {"train_config": recorded, "data": data.table.stats(), "data_seconds": round(data_seconds, 1),
                             "parameters": count_parameters(model),
                             "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)}
    run, log = train_loop.restore(cfg, out, model, optim, rng, t_start, resumed)

    def save(r: train_loop.Progress) -> None:
        meta = {**extra, "step": r.step, "train_seconds": round(r.train_seconds(), 1)}
        train_loop.write_checkpoint(out, lambda: save_text_critic(model, tok, out, meta), optim, r, rng,
                                    r.train_seconds())

    with StopRequest() as stop:  # Ctrl-C: stop after this step and save it
        train_loop.run_steps(cfg, model, optim, lambda: text_loss(model, critic, data, cfg, rng), run, log, save,
                             base_lrs=[g["lr"] for g in groups], stop=stop, desc="text critic", progress=progress)
    if train_loop.saved_to_resume(cfg, run, extra, save):
        return out
    extra.update({"threads": cfg.threads, "total_seconds": round(run.total_seconds(), 1),
                  "command": train_loop.command_line("critics.train_text")})
    save(run)
    if log.rows:
        log.plot(out / "loss.png", LOSS_PANELS, title="text critic training loss")
    return out


def main(argv: list[str] | None = None) -> None:
    train_loop.main(TextTrainConfig, train, argv, prog="critics.train_text",
                    description="Train the text critic (the seed paper's architecture A).")


if __name__ == "__main__":
    dataclass_cli.run_script(main)
