"""Expert iteration for the multi-turn model: sample episodes, keep the solved ones, fine-tune on them.

    python baselines/llm_expert_iteration.py                       # the shipped multi-turn model, CPU
    python baselines/llm_expert_iteration.py --problems 4000 --samples 8 --sft-minutes 30

One round of rejection-sampling fine-tuning (STaR): the solved episodes, without their refused turns, go to
``<out>/episodes.jsonl`` (reused when the sampling options match); then ``llm_sft.py --interaction multi-turn
--init-from <model> --episodes <out>/episodes.jsonl`` trains on them into ``<out>/sft/final``.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from baselines.lm.grpo_model import DEFAULT_TURN_MODEL
from baselines.lm.tiny_lm import SplitRun
from countdown_gym import dataclass_cli
from countdown_gym.runkit.runs import MetricsLog, StopRequest, holds_run, read_options, run_directory, write_text_atomic


@dataclass
class Options(SplitRun):
    """Every field is a ``--flag``."""

    model: str = DEFAULT_TURN_MODEL  # the multi-turn model to improve (a local directory)
    out: str = "runs/expert_iteration"
    problems: int = 2000  # the first this many problems of the train split (none in validation or test) are played
    samples: int = 8  # episodes per problem
    temperature: float = 0.5
    batch_size: int = 256  # episodes generated together
    sft_minutes: float = 20.0  # wall-time budget of the fine-tuning step (cosine schedule over it)
    lr: float = 5e-4
    episodes_share: float = 0.5  # share of each fine-tuning batch from the solved episodes (the rest: search traces)
    dead_end_rate: float = 0.2  # the traces' dead-end rate (as the shipped model was trained)
    eval_problems: int = 300  # validation problems of the fine-tuning step's greedy checks
    threads: int = 2
    resume: bool = False  # continue the fine-tuning step from its checkpoint
    progress: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        dataclass_cli.check_min(self, 1, "problems", "samples", "batch_size", "eval_problems")
        if not self.temperature > 0:
            raise ValueError(f"--temperature must be > 0 (episodes are sampled), got {self.temperature}")
        if not 0 < self.episodes_share <= 1:
            raise ValueError(f"--episodes-share must be in (0, 1], got {self.episodes_share}")
        if not (Path(self.model) / "config.json").is_file():
            raise ValueError(f"--model {self.model}: not a saved model directory (no config.json)")


CHUNK_BATCHES = 8
"""Episodes are played ``CHUNK_BATCHES * --batch-size`` at a time (whole problems), each chunk on its own seed and
kept in ``<out>/sampling.jsonl`` as it ends: a killed sampling continues from its last chunk, to the same episodes."""


def solved_episodes(opts: Options) -> tuple[list[dict], dict] | None:
    """The solved episodes of ``samples`` per training problem, without their refused turns, and counts; None when
    Ctrl-C stopped the sampling (after a chunk: the same command continues it)."""
    import numpy as np
    import torch

    from baselines.llm_sft import training_problems
    from baselines.lm.tiny_lm import load_pretrained
    from countdown_gym.integrations.trl_rollout import play_episodes

    problems = training_problems(opts.preset, progress=False)[: opts.problems]
    per = max(1, CHUNK_BATCHES * opts.batch_size // opts.samples)
    chunks = [problems[i: i + per] for i in range(0, len(problems), per)]
    sampling = {**sampling_options(opts), "batch_size": opts.batch_size}
    path = Path(opts.out) / "sampling.jsonl"
    log = MetricsLog(path, step="chunk", resume_step=math.inf)
    if [r.get("chunk") for r in log.rows] != list(range(len(log.rows))) or any(r.get("sampling") != sampling for r in log.rows):
        log = MetricsLog(path, step="chunk")  # other sampling options (or none): sampled afresh
    elif log.rows:
        print(f"{path}: continuing the sampling after {len(log.rows)} of {len(chunks)} chunks")
    try:
        model, tok = load_pretrained(opts.model) if len(log.rows) < len(chunks) else (None, None)
    except (FileNotFoundError, ValueError) as exc:  # no tokenizer files, torn weights...
        raise SystemExit(f"--model: {exc}") from None
    with StopRequest("stopping after this chunk of episodes (Ctrl-C again to stop at once)") as stop:
        for i in range(len(log.rows), len(chunks)):
            if stop.requested:
                return None
            torch.manual_seed(int(np.random.SeedSequence((opts.seed, i)).generate_state(1)[0]))
            start = time.perf_counter()
            with torch.no_grad():
                rollouts = play_episodes(model, tok, [p for p in chunks[i] for _ in range(opts.samples)],
                                         max_turns=opts.max_turns, temperature=opts.temperature, batch_size=opts.batch_size)
            solved = [{"numbers": [int(x) for x in r.problem.numbers], "target": int(r.problem.target),
                       "turns": [t for t, reply in zip(r.turns, r.replay.replies, strict=False) if not reply.startswith("error")]}
                      for r in rollouts if r.solved]
            log.append({"chunk": i, "sampling": sampling, "played": len(rollouts), "solved": solved,
                        "seconds": time.perf_counter() - start})
    try:
        played, rows, seen = [row for r in log.rows for row in r["solved"]], [], set()
        for r in played:  # each episode once (a problem's key and the turns)
            if (key := (tuple(sorted(r["numbers"])), r["target"], tuple(r["turns"]))) not in seen:
                seen.add(key)
                rows.append(r)
        stats = {"problems": len(problems), "episodes_played": sum(r["played"] for r in log.rows), "solved_episodes": len(played),
                 "distinct_solved_episodes": len(rows), "problems_solved": len({(tuple(sorted(r["numbers"])), r["target"]) for r in rows}),
                 "sampling_seconds": round(sum(r["seconds"] for r in log.rows), 1)}
    except (KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: not the chunks of a sampling ({type(exc).__name__}: {exc}); delete it") from None
    return rows, stats


def sampling_options(opts: Options) -> dict:
    """The options the sampled episodes depend on (the same ones reuse them)."""
    return {k: getattr(opts, k) for k in ("model", "preset", "problems", "samples", "temperature", "max_turns", "seed")}


def main(opts: Options) -> int:
    out = run_directory(opts.out, f"--out {opts.out}")
    os.environ.setdefault("OMP_NUM_THREADS", str(opts.threads))
    import torch

    torch.set_num_threads(opts.threads)
    episodes, record = out / "episodes.jsonl", out / "episodes.json"
    sampling = sampling_options(opts)
    saved = read_options(out, record.name) or {}  # one error naming a damaged record
    if episodes.exists() and saved.get("sampling") == sampling and isinstance(saved.get("stats"), dict):
        stats = saved["stats"]
        print(f"reusing {episodes}: {stats['distinct_solved_episodes']} episodes")
    else:
        if holds_run(out / "sft"):  # its fine-tuning read the episodes there: they must stay
            raise SystemExit(f"{out / 'sft'} was fine-tuned on episodes sampled with {saved.get('sampling')}; use the "
                             "same sampling options (--model, --preset, --problems, --samples, --temperature, "
                             "--max-turns, --seed) or another --out")
        if (sampled := solved_episodes(opts)) is None:
            return dataclass_cli.EXIT_INTERRUPTED
        rows, stats = sampled
        record.unlink(missing_ok=True)  # killed before the new record is written: no record, so sampled again
        write_text_atomic(episodes, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
        write_text_atomic(record, json.dumps({"sampling": sampling, "stats": stats}, indent=2) + "\n")
        (out / "sampling.jsonl").unlink(missing_ok=True)  # its chunks are in the episodes now
    print(json.dumps(stats, indent=2))
    if not stats["distinct_solved_episodes"]:
        raise SystemExit("no episode was solved: nothing to fine-tune on (more --samples or a higher --temperature)")

    from baselines.llm_sft import SFTConfig, train

    cfg = SFTConfig(
        out=str(out / "sft"), preset=opts.preset, seed=opts.seed, init_from=opts.model, interaction="multi-turn",
        max_turns=opts.max_turns, episodes=str(episodes), episodes_share=opts.episodes_share, dead_ends=(1, 0),
        dead_end_rate=opts.dead_end_rate, lr=opts.lr, max_minutes=opts.sft_minutes, schedule="time",
        eval_every=500, eval_problems=opts.eval_problems, eval_batch_size=opts.eval_problems, checkpoint_every=250,
        threads=opts.threads, resume=opts.resume, progress=opts.progress,
    )  # fmt: skip
    summary = train(cfg)
    write_text_atomic(out / "summary.json", json.dumps({"options": asdict(opts), "episodes": stats, "sft": summary}, indent=2) + "\n")
    return 130 if summary.get("interrupted") else 0


if __name__ == "__main__":
    dataclass_cli.run_script(lambda: main(dataclass_cli.parse(Options)))
