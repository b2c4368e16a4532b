"""Train a numerical critic: ``python -m critics.train`` (every field of :class:`TrainConfig` is a flag).

The run directory (``--out``) receives, every ``checkpoint_every`` steps and at the end, ``model.safetensors`` +
``config.json`` (``critics.load_critic(out)``), ``train_state.pt`` (for ``--resume``), ``log.jsonl``, ``loss.png``
(the paper's figure 4) and ``similarity.png`` (figure 5: 16 states against 16 goals); the logged values also go to
``--report-to`` (TensorBoard in ``<out>/tensorboard`` by default). The losses: ``docs/critics.md``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from countdown_gym import dataclass_cli
from countdown_gym.data.generator import get_config
from countdown_gym.runkit.runs import Panel, StopRequest
from countdown_gym.runkit.tracking import Tracker, report_to_names
from critics import load_critic, train_loop
from critics.data import TraceTable, cached_table
from critics.evaluate import calibration
from critics.growth import load_grown
from critics.losses import info_nce, reach_sigmoid_loss, v2_loss
from critics.metrics import figure
from critics.models import (
    CheckpointError,
    ModelConfig,
    NumericalCriticV1,
    NumericalCriticV2,
    build_model,
    count_parameters,
    load_checkpoint,
    pack_sets,
    save_checkpoint,
)
from critics.reach_data import ReachTable, cached_reach_table


@dataclass
class TrainConfig(train_loop.CommonTrainOptions):
    """Everything a training run depends on (each field is a CLI flag)."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The critic's architecture (critics.models.ModelConfig; --logit-bias is also on with --objective reach or both)."""
    # objective
    objective: str = "trace"
    """``trace`` (InfoNCE on DFS-trace states), ``reach`` (sigmoid loss on exactly labelled states of every size,
    critics/reach_data.py) or ``both`` (their sum, the reach term weighted)."""
    reach_weight: float = 1.0  # weight of the reach term with --objective both
    reach_extra: int = 8000  # random start sets added to the train split's for the reach table
    reach_sizes: tuple[float, ...] = (0.1, 0.3, 0.3, 0.3)  # reach rows: relative chance of a 1/2/3/4-number state
    # data
    max_train_problems: int = 0  # use only the first N train-split problems (0 = all; for quick runs and tests)
    extra_problems: int = 8000  # generated problems added to the train split (never test/validation keys)
    data_seed: int = 1
    goal_min: int = 10  # hindsight goals are reached values in [goal_min, goal_max]
    goal_max: int = 50
    positives: str = "reachable"  # "reachable" (states on the path to the target) or "all" (every trace state)
    size_small: float = 0.1  # hindsight rows: relative chance of a 1-number state
    size_mid: float = 0.3  # ... of a 2-number state
    size_large: float = 0.6  # ... of a 3-number state
    cache_dir: str = "runs/cache"  # trace tables are cached here ("" = no cache)
    # bookkeeping
    init_from: str = ""  # start from this checkpoint's weights (same model flags, a wider --child-dim, or an added --grandchild-dim: the same function to start; fresh optimizer and schedule); "" = random init
    calibrate: bool = True  # fit the score -> probability map on validation states at the end
    report_to: str = "tensorboard"  # also log to: none, all, or a comma-separated list of transformers' integrations

    def __post_init__(self) -> None:
        super().__post_init__()
        dataclass_cli.check_choice(self, "objective", ["trace", "reach", "both"])
        if self.objective != "trace" and self.model.version != "v2":
            raise ValueError(f"--objective {self.objective} trains a V2 critic (state vs target); V1 takes --objective trace")
        if len(self.reach_sizes) != 4 or min(self.reach_sizes) < 0 or sum(self.reach_sizes) <= 0:
            raise ValueError(f"--reach-sizes takes 4 non-negative weights (1..4 numbers), got {self.reach_sizes}")
        dataclass_cli.check_choice(self, "positives", ["reachable", "all"])
        if self.goal_min > self.goal_max:
            raise ValueError("--goal-min must be <= --goal-max")
        dataclass_cli.check_min(self, 0, "max_train_problems", "extra_problems", "reach_weight", "size_small", "size_mid", "size_large")
        report_to_names(self.report_to)  # a ValueError naming --report-to

    def model_config(self) -> ModelConfig:
        """The architecture trained: ``model``, with the logit bias the reach objective's sigmoid loss needs."""
        reach = self.model.version == "v2" and self.objective != "trace"
        return dataclasses.replace(self.model, logit_bias=self.model.logit_bias or reach)


DESCRIPTION = "Train a numerical contrastive critic."


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """A :class:`TrainConfig` from command-line flags (one per field, ``countdown_gym.dataclass_cli``)."""
    return dataclass_cli.parse(TrainConfig, argv, prog="python -m critics.train", description=DESCRIPTION)


def _sets(states: np.ndarray, sizes: np.ndarray, max_numbers: int) -> tuple[torch.Tensor, torch.Tensor]:
    """0-padded number-set rows and their sizes -> ``(values float64, mask float32)``."""
    mask = (torch.arange(max_numbers)[None, :] < torch.from_numpy(sizes)[:, None]).float()
    return torch.from_numpy(states.astype(np.float64)), mask


def _nodes(table: TraceTable, nodes: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return _sets(table.node_states[nodes], table.node_sizes[nodes], table.max_numbers)


def trace_loss(model: NumericalCriticV2, table: TraceTable, cfg: TrainConfig,
               rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
    """V2's loss (:func:`critics.losses.v2_loss`) on a batch of DFS-trace states."""
    sizes = (cfg.size_small, cfg.size_mid, cfg.size_large)
    b = table.sample_v2(cfg.batch_size, rng, cfg.positives, cfg.hindsight, cfg.dead_per_row, sizes, cfg.dead_same_size)
    s = model.embed_states(*_nodes(table, b["state"]))
    rows = np.flatnonzero(b["dead_valid"]) if cfg.hard_weight > 0 and cfg.dead_per_row > 0 else np.zeros(0, np.int64)
    d = None
    if len(rows):
        d = model.embed_states(*_nodes(table, b["dead"][rows].reshape(-1))).reshape(len(rows), cfg.dead_per_row, -1)
    return v2_loss(s, b["goal"], model.embed_goals, rows, d, cfg.model.temperature, cfg.hard_weight)


def reach_loss(model: NumericalCriticV2, table: ReachTable, cfg: TrainConfig, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
    """Sigmoid loss of a batch of exactly labelled states (sizes drawn by ``reach_sizes``) against every goal."""
    idx = table.sample(cfg.batch_size, rng, cfg.reach_sizes)
    s = model.embed_states(*_sets(table.states[idx], table.sizes[idx], table.max_numbers))
    g = model.embed_goals(torch.from_numpy(table.goals.astype(np.float64)))
    loss = reach_sigmoid_loss(s, g, torch.from_numpy(table.labels[idx]), cfg.model.temperature, model.logit_bias)
    return loss, {"reach": loss.item()}


def v1_loss(model: NumericalCriticV1, table: TraceTable, cfg: TrainConfig, rng: np.random.Generator) -> tuple[torch.Tensor, dict]:
    b = table.sample_v1(cfg.batch_size, rng)
    iv = torch.from_numpy(table.initial[b["trace"]].astype(np.float64))
    sa = model.embed_state_actions(iv, (iv > 0).float(), *_nodes(table, b["state"]))
    _, first, inv = np.unique(table.node_states[b["goal_node"]], axis=0, return_index=True, return_inverse=True)
    g = model.embed_goals(*_nodes(table, b["goal_node"][first]))
    inv_t = torch.from_numpy(inv.reshape(-1))
    loss = info_nce(sa, g, inv_t, cfg.model.temperature)
    return loss, {"nce": loss.item(), "acc": float(((sa @ g.T).argmax(1) == inv_t).float().mean())}


LOSS_PANELS = (Panel("contrastive loss", {"loss": "loss"}, smooth=True),)
"""``loss.png`` (the paper's figure 4): the logged loss and its moving mean."""


def _state(table: TraceTable, node: int) -> tuple[int, ...]:
    return tuple(int(x) for x in table.node_states[node][: table.node_sizes[node]])


def _similarity_rows(table: TraceTable | ReachTable, cfg: TrainConfig, rng: np.random.Generator) -> list[tuple]:
    """Up to 16 ``(state, goal)`` rows with distinct goals: a state and a goal value (V2), or two trace nodes (V1)."""
    rows: dict[Any, tuple[Any, Any]] = {}  # by goal
    for _ in range(200):  # bounded: a tiny training set may hold fewer than 16 distinct goals
        if isinstance(table, ReachTable):
            for i in table.sample(64, rng, cfg.reach_sizes):
                free = [int(g) for g in table.goals[table.labels[i]] if int(g) not in rows]
                if free and len(rows) < 16:
                    goal = free[int(rng.integers(len(free)))]
                    rows[goal] = (tuple(int(x) for x in table.states[i][: table.sizes[i]]), goal)
        elif cfg.model.version == "v2":
            b = table.sample_v2(64, rng, "reachable", 0.0, 0)
            for node, goal in zip(b["state"], b["goal"], strict=True):
                if len(rows) < 16:
                    rows.setdefault(int(goal), (_state(table, node), int(goal)))
        else:
            b = table.sample_v1(64, rng)
            for node, goal in zip(b["state"], b["goal_node"], strict=True):
                if len(rows) < 16:
                    rows.setdefault(_state(table, goal), (int(node), int(goal)))
        if len(rows) == 16:
            break
    return list(rows.values())


@torch.no_grad()
def plot_similarity(model, table: TraceTable | ReachTable, cfg: TrainConfig, path: Path, seed: int = 12345) -> None:
    """The paper's figure 5: cosine similarity of 16 states vs the distinct goals of the same 16 rows."""
    rows = _similarity_rows(table, cfg, np.random.default_rng(seed))
    states, goals = [r[0] for r in rows], [r[1] for r in rows]
    if cfg.model.version == "v1":
        init = torch.from_numpy(table.initial[table.node_trace[states]].astype(np.float64))
        s = model.embed_state_actions(init, (init > 0).float(), *_nodes(table, np.array(states)))
        g = model.embed_goals(*_nodes(table, np.array(goals)))
        states, goals = [_state(table, n) for n in states], [list(_state(table, n)) for n in goals]
    else:
        v, m = pack_sets(states, table.max_numbers)
        s = model.embed_states(torch.from_numpy(v), torch.from_numpy(m))
        g = model.embed_goals(torch.tensor(goals, dtype=torch.float64))
    with figure(path, (7, 6)) as ax:
        im = ax.imshow((s @ g.T).numpy(), cmap="viridis", vmin=-1, vmax=1)
        ax.set_xticks(range(len(goals)), [str(x) for x in goals], rotation=90, fontsize=7)
        ax.set_yticks(range(len(states)), [str(list(x)) for x in states], fontsize=7)
        title = f"cosine similarity, one batch of {len(states)} (critic {cfg.model.version})"
        ax.set(xlabel="goal", ylabel="state", title=title)
        ax.figure.colorbar(im, ax=ax)


def _save(model, optim, cfg: TrainConfig, out: Path, run: train_loop.Progress, rng: np.random.Generator,
          extra: dict) -> None:
    """The checkpoint at ``run.step`` (:func:`~critics.train_loop.write_checkpoint`)."""
    meta = {"train_config": cfg.to_dict(), "step": run.step, "parameters": count_parameters(model), **extra}
    train_loop.write_checkpoint(out, lambda: save_checkpoint(model, cfg.model_config(), out, meta), optim, run, rng,
                                extra.get("train_seconds", 0.0))


RESUME_FREE_FIELDS = train_loop.RESUME_FREE_FIELDS | {"calibrate", "cache_dir", "report_to"}
"""``TrainConfig`` fields a resumed run may change: they do not change the weights."""


def _loader(cfg: TrainConfig) -> train_loop.Loader:
    """Reads a checkpoint of the run and exits if ``cfg`` differs from its own record of the options (runs made before
    options.json was written have only this one)."""
    def load(d: Path) -> tuple[NumericalCriticV1 | NumericalCriticV2, dict[str, Any]]:
        loaded, meta = load_checkpoint(d)
        changed = dataclass_cli.changed_options(meta.get("train_config", {}), cfg, RESUME_FREE_FIELDS)
        if changed:
            raise SystemExit(f"error: --resume: {d} was trained with {'; '.join(changed)}; resume with the same flags "
                             "or use a new --out")
        return loaded, meta

    return load


def _init_checkpoint(cfg: TrainConfig) -> NumericalCriticV1 | NumericalCriticV2:
    """The critic of ``cfg.init_from``, loaded and checked against ``cfg``'s model flags (grown into a throwaway model
    built from them, :func:`~critics.growth.load_grown`), so that a bad ``--init-from`` fails before the run directory
    is written."""
    try:
        loaded, _ = load_checkpoint(cfg.init_from)
    except CheckpointError as e:
        raise SystemExit(f"error: --init-from: {e}") from None
    try:
        load_grown(build_model(cfg.model_config()), loaded)
    except ValueError:
        diff = {k: (v, getattr(loaded.cfg, k)) for k, v in cfg.model_config().to_dict().items() if getattr(loaded.cfg, k) != v}
        raise SystemExit(f"error: --init-from {cfg.init_from}: its model differs from these flags (flag, checkpoint): {diff}") from None
    return loaded


def train(cfg: TrainConfig, progress: bool = True) -> Path:
    """Run (or resume) training; returns the run directory."""
    t_start = time.perf_counter()
    resuming = train_loop.will_resume(cfg)
    init = _init_checkpoint(cfg) if cfg.init_from and not resuming else None  # before --out is written; start_run seeds after it
    out, rng = train_loop.start_run(cfg, resuming=resuming, may_change=RESUME_FREE_FIELDS)
    resumed = train_loop.resume(out, _loader(cfg), cfg) if resuming else None  # before the data: fail fast

    t_data = time.perf_counter()
    goals, cache, max_train = (cfg.goal_min, cfg.goal_max), cfg.cache_dir or None, cfg.max_train_problems
    table: TraceTable | None = None
    rtable: ReachTable | None = None
    if cfg.objective != "reach" or cfg.model.version == "v1":
        table = cached_table(cfg.preset, cfg.extra_problems, cfg.data_seed, cfg.model.max_numbers, goals, cache, progress,
                             max_train)
    if cfg.objective != "trace" and cfg.model.version == "v2":
        rtable = cached_reach_table(cfg.preset, cfg.reach_extra, cfg.data_seed, goals, cache, progress, max_train,
                                    cfg.model.max_numbers)
    data_seconds = time.perf_counter() - t_data
    model = build_model(cfg.model_config())
    if init is not None:
        load_grown(model, init)  # the checkpoint's function, possibly with a wider or an added pool to train
    optim = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    run, log = train_loop.restore(cfg, out, model, optim, rng, t_start, resumed)

    def loss_fn() -> tuple[torch.Tensor, dict]:
        if cfg.model.version == "v1":
            return v1_loss(model, table, cfg, rng)
        if cfg.objective == "trace":
            return trace_loss(model, table, cfg, rng)
        if cfg.objective == "reach":
            return reach_loss(model, rtable, cfg, rng)
        loss, info = trace_loss(model, table, cfg, rng)
        r, rinfo = reach_loss(model, rtable, cfg, rng)
        return loss + cfg.reach_weight * r, {**info, **rinfo}

    stats = {**(table.stats() if table is not None else {}), **(rtable.stats() if rtable is not None else {})}
    extra = {"data": stats, "data_seconds": round(data_seconds, 1), "rules": get_config(cfg.preset).rules.to_dict()}

    def save(r: train_loop.Progress) -> None:
        _save(model, optim, cfg, out, r, rng, {**extra, "train_seconds": r.train_seconds()})

    with StopRequest() as stop, Tracker(cfg.report_to, out, config=cfg.to_dict()) as tracker:  # Ctrl-C: stop after this step
        train_loop.run_steps(cfg, model, optim, loss_fn, run, log, save, base_lrs=[cfg.lr], stop=stop, tracker=tracker,
                             desc=f"critic {cfg.model.version}", progress=progress)
    if train_loop.saved_to_resume(cfg, run, extra, save):
        return out
    extra.update({"train_seconds": round(run.train_seconds(), 1), "threads": cfg.threads, "steps_done": run.end,
                  "command": train_loop.command_line("critics.train")})
    _save(model, optim, cfg, out, run, rng, extra)
    if cfg.calibrate:
        extra["calibration"] = calibration(load_critic(out), cfg.preset)
    extra["total_seconds"] = round(run.total_seconds(), 1)  # every invocation of the run
    _save(model, optim, cfg, out, run, rng, extra)
    if log.rows:
        log.plot(out / "loss.png", LOSS_PANELS, title="critic training loss")
    plot_similarity(model, table if table is not None else rtable, cfg, out / "similarity.png")
    return out


def main(argv: list[str] | None = None) -> None:
    train_loop.main(TrainConfig, train, argv, prog="critics.train", description=DESCRIPTION)


if __name__ == "__main__":
    dataclass_cli.run_script(main)
