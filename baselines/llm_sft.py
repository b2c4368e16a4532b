"""Pre-train the project's tiny causal LM from scratch on compact search traces (CleanRL style).

    python baselines/llm_sft.py                          # defaults below; see docs/tiny_lm.md
    python baselines/llm_sft.py --max-minutes 5 --out runs/sft-small --hidden 96
    python baselines/llm_sft.py --out runs/sft --resume true   # continue from runs/sft/checkpoint
    python baselines/llm_sft.py --out runs/sft-more --init-from baselines/checkpoints/countdown-tiny-lm

Data: the train split of ``--preset`` plus ``--fresh-problems`` new ones, each example ``compact_prompt(p)`` +
``compact_trace(p)`` with the numbers freshly shuffled; the loss covers completion tokens only. Writes to ``--out``:
``metrics.csv``, ``curves.png``, ``checkpoint/`` (for ``--resume``) and ``final/`` (the model).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import torch
from tqdm import tqdm

from baselines.lm.evaluation import Play, greedy_solved
from baselines.lm.sft_checkpoints import load_checkpoint, load_saved_model, put_back, save_checkpoint, saved_options
from baselines.lm.tiny_lm import SplitRun, TinyLMConfig, build_model, build_tokenizer, save_pretrained
from countdown_gym import dataclass_cli
from countdown_gym.data.generator import iter_problems
from countdown_gym.data.splits import load_split
from countdown_gym.dataclass_cli import strict_json, written_aside
from countdown_gym.game.compact_trace import CompactTraceConfig, compact_trace, shuffled
from countdown_gym.game.problem import Problem
from countdown_gym.game.text_format import compact_prompt
from countdown_gym.game.turn_trace import conversation, turn_trace
from countdown_gym.integrations.trl_rollout import conversation_ids
from countdown_gym.runkit.runs import MetricsLog, Panel, StopRequest, prepare_run
from countdown_gym.runkit.tracking import Tracker, report_to_names


@dataclass
class SFTConfig(SplitRun):
    """Options of ``llm_sft.py`` (every field is a ``--flag``)."""

    out: str = "runs/llm_sft"
    fresh_problems: int = 20000  # newly generated problems added to the train split (never validation/test keys)
    # model
    init_from: str = ""  # Start from this saved model (config.json + model.safetensors) instead of random weights.
    model: TinyLMConfig = field(default_factory=TinyLMConfig)
    """The model trained from scratch (without --init-from): ``tiny_lm.TinyLMConfig``, whose defaults are the shipped model's."""
    # trace format
    dead_ends: tuple[int, ...] = (0,)
    probe: int = 1
    dead_end_rate: float = 1.0  # Chance that a trace writes its dead ends at a state.
    answer: str = "solution"
    leaves: str = "enumerate"
    """``enumerate``: a two-number state's moves are tried in scan order until one hits; ``direct``: only the
    hit is written (``CompactTraceConfig.leaves``)."""
    interaction: str = "single-pass"
    """single-pass: the completion is the whole compact trace; multi-turn: the trace is played as turns of
    CountdownMultiTurn-v0 (one move per turn, the environment's replies are context, not learned)."""
    episodes: str = ""
    """Multi-turn: a JSONL file of played episodes (``{"numbers", "target", "turns"}`` per line, e.g. the
    solved episodes ``llm_expert_iteration.py`` samples) trained on beside the traces."""
    episodes_share: float = 0.5  # multi-turn with ``--episodes``: the share of each batch drawn from the episodes
    # optimisation
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    weight_decay: float = 0.01
    warmup_steps: int = 30
    batch_size: int = 16
    max_steps: int = 100000
    max_minutes: float = 36.0  # stop (and save) after this much wall time; 0 = no limit
    schedule: str = "time"
    """``steps``: cosine over max_steps; ``time``: cosine over max_minutes of wall time (for a
    fixed time budget on a shared machine, whatever the throughput)."""
    grad_clip: float = 1.0
    # evaluation and checkpoints
    eval_every: int = 150  # validate every N steps
    eval_problems: int = 100  # validation problems (the first N of the split)
    eval_batch_size: int = 100
    max_new_tokens: int = 200  # token budget of a validation completion
    checkpoint_every: int = 50  # save checkpoint/ every N steps
    resume: bool = False
    progress: bool = True
    report_to: str = "tensorboard"
    """Where the metrics are also logged: none, all, or a comma-separated list of transformers' integrations
    (tensorboard: ``<out>/tensorboard``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        dataclass_cli.check_choice(self, "schedule", ("steps", "time"))
        dataclass_cli.check_choice(self, "interaction", ("single-pass", "multi-turn"))
        if self.schedule == "time" and not self.max_minutes > 0:
            raise ValueError("--schedule time needs --max-minutes > 0")
        dataclass_cli.check_min(self, 1, "batch_size", "max_steps", "eval_every", "eval_problems", "eval_batch_size",
                                "max_new_tokens", "checkpoint_every")
        dataclass_cli.check_min(self, 0, "fresh_problems", "warmup_steps", "max_minutes", "weight_decay", "grad_clip", "lr")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"--min-lr-ratio must be in [0, 1], got {self.min_lr_ratio}")
        if not 0 <= self.episodes_share <= 1:
            raise ValueError(f"--episodes-share must be in [0, 1], got {self.episodes_share}")
        if self.episodes and self.interaction != "multi-turn":
            raise ValueError("--episodes holds multi-turn episodes: use it with --interaction multi-turn")
        if self.episodes and not Path(self.episodes).is_file():
            raise ValueError(f"--episodes {self.episodes}: no such file")
        if self.init_from and not (Path(self.init_from) / "config.json").is_file():  # before --out is written to
            raise ValueError(f"--init-from {self.init_from}: no saved model there (expected config.json and "
                             "model.safetensors)")
        report_to_names(self.report_to)  # a ValueError naming --report-to


RESUME_MAY_CHANGE = ("out", "resume", "progress", "report_to", "threads", "max_steps", "max_minutes", "eval_every", "eval_problems",
                     "eval_batch_size", "max_new_tokens", "checkpoint_every")
"""The options a ``--resume`` may change; any other differing from the checkpoint's run is refused."""


def trace_config(cfg: SFTConfig) -> CompactTraceConfig:
    """The trace format of ``cfg``; a clear error naming the flags when it is invalid."""
    try:
        return CompactTraceConfig(dead_ends=tuple(cfg.dead_ends), probe=cfg.probe, dead_end_rate=cfg.dead_end_rate, answer=cfg.answer,
                                  leaves=cfg.leaves)
    except ValueError as exc:
        raise SystemExit(f"trace format (--dead-ends, --probe, --dead-end-rate, --answer, --leaves): {exc}") from None


def training_problems(preset: str, fresh_problems: int = 0, seed: int = 0, progress: bool = True) -> list[Problem]:
    """The train split plus ``fresh_problems`` new ones (drawn with ``seed``), none sharing a key with validation/test."""
    held_out = {p.key for s in ("validation", "test") for p in load_split(preset, s)}
    train = [p for p in load_split(preset, "train") if p.key not in held_out]
    seen = held_out | {p.key for p in train}
    fresh: list[Problem] = []
    stream = iter_problems(preset, seed=10_000 + seed)
    bar = tqdm(total=fresh_problems, desc="fresh problems", disable=not progress, leave=False)
    while len(fresh) < fresh_problems:
        p = next(stream)
        if p.key in seen:
            continue
        seen.add(p.key)
        fresh.append(p)
        bar.update(1)
    bar.close()
    return train + fresh


def load_episodes(path: str | Path, preset: str) -> list[tuple[Problem, list[str]]]:
    """The played episodes of a JSONL file (``{"numbers", "target", "turns"}`` per line), under ``preset``'s rules."""
    rules = load_split(preset, "train")[0].rules
    out = []
    with Path(path).open("rb") as f:  # bytes: a line that is not UTF-8 is a ValueError naming it
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = strict_json(line)  # a key twice is refused, not read last-wins
                out.append((Problem(tuple(row["numbers"]), row["target"], rules), [str(t) for t in row["turns"]]))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path} line {n}: not an episode ({exc})") from None
    if not out:
        raise ValueError(f"{path} holds no episodes")
    return out


def make_batch(problems: list[Problem | tuple[Problem, list[str]]], tokenizer, tcfg: CompactTraceConfig,
               rng: random.Random, max_len: int, interaction: str = "single-pass"):
    """Token ids, attention mask and labels (-100 off the completion; multi-turn: off the agent's turns), right-padded.
    Multi-turn: an item ``(problem, turns)`` is a played episode replayed, a problem alone is searched into turns."""
    rows = []
    for item in problems:
        p, played = item if isinstance(item, tuple) else (item, None)
        q = shuffled(p, rng.randrange(1 << 30))
        seed = rng.randrange(1 << 30) if tcfg.dead_end_rate < 1.0 and played is None else None  # none drawn otherwise
        if interaction == "multi-turn":
            turns = played if played is not None else turn_trace(q, config=tcfg, seed=seed)
            ids, model_mask = conversation_ids(tokenizer, conversation(q, turns))
            ids = ids[:max_len]
            rows.append((ids, [t if m else -100 for t, m in zip(ids, model_mask, strict=False)]))
            continue
        ids_p = tokenizer(compact_prompt(q))["input_ids"]  # starts with <bos>
        ids_c = tokenizer(compact_trace(q, config=tcfg, seed=seed), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids = (ids_p + ids_c)[:max_len]
        labels = ([-100] * len(ids_p) + ids_c)[:max_len]
        rows.append((ids, labels))
    pad = partial(torch.nn.utils.rnn.pad_sequence, batch_first=True)  # right padding
    return (pad([torch.tensor(ids) for ids, _ in rows], padding_value=tokenizer.pad_token_id),
            pad([torch.ones(len(ids), dtype=torch.long) for ids, _ in rows]),
            pad([torch.tensor(lab) for _, lab in rows], padding_value=-100))


def pretrained_model(cfg: SFTConfig, tokenizer):
    """The weights of ``cfg.init_from``, checked against ``tokenizer`` and ``--max-positions`` (no random draw)."""
    path = Path(cfg.init_from)  # holds config.json: SFTConfig checked it
    model = load_saved_model(path, SystemExit, "--init-from ")
    if model.get_input_embeddings().num_embeddings != len(tokenizer):
        raise SystemExit(f"--init-from {path}: its vocabulary has {model.get_input_embeddings().num_embeddings} tokens, "
                         f"the project's tokenizer {len(tokenizer)}; only models built with baselines/lm/tiny_lm.py can be continued")
    if model.config.max_position_embeddings < cfg.model.max_positions:
        raise SystemExit(f"--init-from {path}: the model has {model.config.max_position_embeddings} positions, "
                         f"--max-positions is {cfg.model.max_positions}")
    return model


def new_optimizer(model, cfg: SFTConfig) -> torch.optim.Optimizer:
    """The run's AdamW (a resume then loads its state: learning rate and weight decay included)."""
    return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))


def lr_at(step: int, cfg: SFTConfig, elapsed: float = 0.0) -> float:
    """Linear warm-up, then cosine decay to ``min_lr_ratio * lr`` at ``max_steps`` (``schedule="time"``: ``max_minutes``)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "time":
        frac = min(1.0, elapsed / (cfg.max_minutes * 60))
    else:
        frac = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def validation_success(model, tokenizer, problems: list[Problem], cfg: SFTConfig) -> float:
    """Greedy success rate on ``problems`` (multi-turn: episodes solved)."""
    turns = cfg.interaction == "multi-turn"
    how = Play(max_turns=cfg.max_turns if turns else None, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.eval_batch_size)
    solved = greedy_solved(model, tokenizer, problems, how, prompts=None if turns else [compact_prompt(p) for p in problems])
    return sum(solved) / max(len(solved), 1)


CURVES = (Panel("train loss (completion tokens)", {"loss": "train loss"}, log=True),
          Panel("validation greedy success", {"val_success": "greedy"}, ylim=(0, 1)))  # curves.png


def train(cfg: SFTConfig) -> dict:
    """Run SFT; returns a summary (params, tokens/s, final validation success, paths)."""
    torch.set_num_threads(cfg.threads)
    tcfg = trace_config(cfg)
    ckpt = Path(cfg.out) / "checkpoint"
    resumed = load_checkpoint(ckpt, partial(new_optimizer, cfg=cfg)) if cfg.resume else None  # every file read back: a torn one is passed over
    found = resumed[0] if resumed else None
    tokenizer = build_tokenizer()
    model = pretrained_model(cfg, tokenizer) if cfg.init_from and resumed is None else None
    out = prepare_run(cfg.out, "--out", cfg, resume=cfg.resume, resuming=found is not None, may_change=RESUME_MAY_CHANGE,
                      markers=("checkpoint*/trainer_state.pt", "metrics.csv"), saved_as=partial(saved_options, found),
                      start_over="start a new --out (with --init-from for a fresh optimiser)")  # before the data: fails fast
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    problems = training_problems(cfg.preset, cfg.fresh_problems, cfg.seed, cfg.progress)
    try:
        episodes = load_episodes(cfg.episodes, cfg.preset) if cfg.episodes else []
    except (OSError, ValueError) as exc:  # a cut-off line, a row without "turns"...
        raise SystemExit(f"--episodes: {exc}") from None
    val = load_split(cfg.preset, "validation")[: cfg.eval_problems]
    step = 0
    if found is None and cfg.resume:
        print(f"--resume: no checkpoint in {ckpt}, starting from scratch")
    if resumed is None:
        if model is None:  # the seeded build, after the seeded draws
            model = build_model(cfg.model, tokenizer)
        opt = new_optimizer(model, cfg)
    else:
        _, model, opt, state = resumed
        step = state["step"]
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        print(f"resumed from {found} at step {step}")
        put_back(found, ckpt)
    n_params = model.num_parameters()  # tied embeddings counted once
    meta = {"sft_config": asdict(cfg), "model_config": model.config.to_diff_dict() if cfg.init_from else asdict(cfg.model),
            "params": n_params,
            "train_problems": len(problems), "episodes": len(episodes), "trace_config": asdict(tcfg)}
    print(f"model: {model.config.model_type}, {n_params / 1e6:.2f}M parameters; {len(problems)} training problems"
          + (f", {len(episodes)} played episodes ({cfg.episodes_share:.0%} of each batch)" if episodes else ""))

    metrics = MetricsLog(out / "metrics.csv", resume_step=step if found is not None else None)  # rows after the checkpoint: redone
    rows = metrics.rows
    model.train()
    run_start = time.time()
    t_start = run_start - (float(rows[-1]["elapsed_s"]) if rows else 0.0)  # wall time of earlier runs counts
    tokens = 0
    loss_ema = None
    bar = tqdm(total=cfg.max_steps, initial=step, desc="sft", disable=not cfg.progress)
    first_step = step
    side_s = 0.0  # seconds of validation and checkpoint writing this run
    stopped_by_time = False
    interrupted = False
    if cfg.max_minutes > 0 and run_start - t_start > cfg.max_minutes * 60:  # a resumed run already past its time budget
        stopped_by_time = True
        tqdm.write(f"--resume: the run already used its --max-minutes {cfg.max_minutes} at step {step}; nothing to train")
    with StopRequest() as stop, Tracker(cfg.report_to, out, config=meta) as tracker:  # Ctrl-C / SIGTERM: finish the step, save, stop
        while step < cfg.max_steps and not stopped_by_time:
            batch_problems = [episodes[rng.randrange(len(episodes))] if episodes and rng.random() < cfg.episodes_share
                              else problems[rng.randrange(len(problems))] for _ in range(cfg.batch_size)]
            input_ids, mask, labels = make_batch(batch_problems, tokenizer, tcfg, rng, cfg.model.max_positions, cfg.interaction)
            lr = lr_at(step, cfg, time.time() - t_start)
            for g in opt.param_groups:
                g["lr"] = lr
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            step += 1
            tokens += int(mask.sum())
            loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
            elapsed = time.time() - t_start
            train_s = max(time.time() - run_start - side_s, 1e-9)  # training only: validation and checkpoints excluded
            row = {"step": step, "loss": round(loss.item(), 5), "lr": lr, "tokens_per_s": round(tokens / train_s, 1),
                   "elapsed_s": round(elapsed, 1), "val_success": ""}
            out_of_time = cfg.max_minutes > 0 and elapsed > cfg.max_minutes * 60
            if step % cfg.eval_every == 0 or step == cfg.max_steps or out_of_time:
                t_side = time.time()
                row["val_success"] = validation_success(model, tokenizer, val, cfg)
                side_s += time.time() - t_side
                tqdm.write(f"step {step}: loss {loss_ema:.4f}, validation greedy success {row['val_success']:.3f} ({len(val)} problems)")
            metrics.append(row)
            tracker.log({"loss": row["loss"], "learning_rate": lr, "tokens_per_s": row["tokens_per_s"],
                         "eval_greedy_success": row["val_success"]}, step)  # an empty val_success is skipped
            bar.set_postfix(loss=f"{loss_ema:.3f}", tok_s=f"{tokens / train_s:.0f}")
            bar.total = projected_steps(cfg, step, (step - first_step) / max(time.time() - run_start, 1e-9), time.time() - t_start)
            bar.update(1)
            if step % cfg.checkpoint_every == 0 or step == cfg.max_steps or out_of_time or stop.requested:
                t_side = time.time()
                metrics.plot(out / "curves.png", CURVES)
                save_checkpoint(ckpt, model, tokenizer, opt, step, rng, meta)
                side_s += time.time() - t_side
            if out_of_time:
                stopped_by_time = True
                tqdm.write(f"stopping at step {step}: --max-minutes {cfg.max_minutes} reached")
                break
            if stop.requested:
                interrupted = True
                tqdm.write(f"stopped at step {step} (Ctrl-C / SIGTERM); checkpoint saved in {ckpt}: --resume continues from it")
                break
    bar.close()
    elapsed = time.time() - run_start
    metrics.plot(out / "curves.png", CURVES)
    evals = [r for r in rows if r["val_success"] != ""]
    summary = {
        "params": n_params,
        "steps": step,
        "stopped_by_time": stopped_by_time,
        "wall_seconds_this_run": round(elapsed, 1),
        "tokens_per_s_this_run": round(tokens / (elapsed - side_s), 1) if elapsed > side_s else None,  # training only
        "validation_and_checkpoint_seconds_this_run": round(side_s, 1),
        "final_val_success": float(evals[-1]["val_success"]) if evals else None,
        "val_problems": len(val),
    }
    if interrupted:
        summary["interrupted"] = True
    else:
        meta["summary"] = summary
        with written_aside(out / "final") as final:  # whole or not at all
            save_pretrained(model, tokenizer, final, meta)
    print(json.dumps(summary, indent=2))
    return summary


def projected_steps(cfg: SFTConfig, step: int, steps_per_s: float, elapsed: float) -> int:
    """The step the run stops at (the progress bar's total) at this pace."""
    if not (cfg.max_minutes > 0 and steps_per_s > 0):
        return cfg.max_steps
    return min(cfg.max_steps, step + math.ceil(max(cfg.max_minutes * 60 - elapsed, 0.0) * steps_per_s))


if __name__ == "__main__":
    dataclass_cli.run_script(lambda: train(dataclass_cli.parse(SFTConfig)))  # 130: stopped by Ctrl-C
