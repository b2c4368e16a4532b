"""Expert iteration for the multi-turn model: sample episodes, keep the solved ones, fine-tune on them.

    python baselines/llm_expert_iteration.py                       # the shipped multi-turn model, CPU
    python baselines/llm_expert_iteration.py --problems 4000 --samples 8 --sft-minutes 30

One round of rejection-sampling fine-tuning (STaR): ``--samples`` episodes of each of the first ``--problems``
training problems at ``--temperature``; the solved ones, without their refused turns, go to ``<out>/episodes.jsonl``
(reused when ``episodes.json`` records the same sampling options; other ones beside a fine-tuning in ``sft/`` are
refused); then ``llm_sft.py --interaction multi-turn --init-from <model> --episodes <out>/episodes.jsonl`` trains on
them beside the search traces into ``<out>/sft/final`` (``--resume`` continues it).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from baselines.lm.grpo_model import DEFAULT_TURN_MODEL
from baselines.lm.tiny_lm import SplitRun
from countdown_gym import dataclass_cli
from countdown_gym.runkit.runs import holds_run, read_options, run_directory, write_text_atomic


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


def solved_episodes(opts: Options) -> tuple[list[dict], dict]:
    """The solved episodes of ``samples`` per training problem, without their refused turns, and counts."""
    import torch

    from baselines.llm_sft import training_problems
    from baselines.lm.tiny_lm import load_pretrained
    from countdown_gym.integrations.trl_rollout import play_episodes

    torch.manual_seed(opts.seed)
    problems = training_problems(opts.preset, progress=False)[: opts.problems]
    model, tok = load_pretrained(opts.model)
    start = time.perf_counter()
    with torch.no_grad():
        rollouts = play_episodes(model, tok, [p for p in problems for _ in range(opts.samples)], max_turns=opts.max_turns,
                                 temperature=opts.temperature, batch_size=opts.batch_size)
    seconds = time.perf_counter() - start
    rows, seen, solved_problems = [], set(), set()
    for r in rollouts:
        if not r.solved:
            continue
        turns = [t for t, reply in zip(r.turns, r.replay.replies, strict=False) if not reply.startswith("error")]
        key = (r.problem.key, tuple(turns))
        if key in seen:
            continue
        seen.add(key)
        solved_problems.add(r.problem.key)
        rows.append({"numbers": [int(x) for x in r.problem.numbers], "target": int(r.problem.target), "turns": turns})
    stats = {"problems": len(problems), "episodes_played": len(rollouts), "solved_episodes": sum(r.solved for r in rollouts),
             "distinct_solved_episodes": len(rows), "problems_solved": len(solved_problems),
             "sampling_seconds": round(seconds, 1)}
    return rows, stats


def main(opts: Options) -> int:
    out = run_directory(opts.out, f"--out {opts.out}")
    os.environ.setdefault("OMP_NUM_THREADS", str(opts.threads))
    import torch

    torch.set_num_threads(opts.threads)
    episodes, record = out / "episodes.jsonl", out / "episodes.json"
    sampling = {k: getattr(opts, k) for k in ("model", "preset", "problems", "samples", "temperature", "max_turns", "seed")}
    saved = read_options(out, record.name) or {}  # one error naming a damaged record
    if episodes.exists() and saved.get("sampling") == sampling and isinstance(saved.get("stats"), dict):
        stats = saved["stats"]
        print(f"reusing {episodes}: {stats['distinct_solved_episodes']} episodes")
    else:
        if holds_run(out / "sft"):  # its fine-tuning read the episodes there: they must stay
            raise SystemExit(f"{out / 'sft'} was fine-tuned on episodes sampled with {saved.get('sampling')}; use the "
                             "same sampling options (--model, --preset, --problems, --samples, --temperature, "
                             "--max-turns, --seed) or another --out")
        rows, stats = solved_episodes(opts)
        record.unlink(missing_ok=True)  # killed before the new record is written: no record, so sampled again
        write_text_atomic(episodes, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
        write_text_atomic(record, json.dumps({"sampling": sampling, "stats": stats}, indent=2) + "\n")
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
