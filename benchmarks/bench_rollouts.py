"""Model tokens per second of multi-turn greedy episodes: the rollout engine against a bare decode loop (one command).

    python benchmarks/bench_rollouts.py                         # CPU (and CUDA when present), batches 128, 512, 2048
    python benchmarks/bench_rollouts.py --quick                 # 200 problems, batch 128: a smoke run
    python benchmarks/bench_rollouts.py --json runs/rollouts.json
    python benchmarks/bench_rollouts.py --devices cuda --graphs on off --repeat 4   # CUDA graphs against none

What it measures and the results: ``docs/benchmarks_rollouts.md``. The bound is a bare greedy decode loop of the
same model at the same batch (the direct decoder where it runs, else the Hugging Face forward with its KV cache):
one prefill of the episodes' mean prompt length, then their mean completion length of one-token steps.
"""

from __future__ import annotations

import json
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from _common import ROOT, T, check_writable, command, timed, write_report

from countdown_gym.dataclass_cli import check_min, parse, run_script
from countdown_gym.inference.engine import PEEK_FROM

GRAPHS = {"auto": None, "on": True, "off": False}


@dataclass
class Options:
    model: str = str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm-turns")  # HF causal LM dir or hub id
    problems: int = 1000  # first N problems of the longproc-0.5k test split (0 = all 1,000)
    batches: list[int] = field(default_factory=lambda: [128, 512, 2048])  # engine batch sizes (episodes at once)
    devices: list[str] = field(default_factory=list)  # devices to measure (default: cpu, and cuda when present)
    threads: int = 2  # torch CPU threads
    max_turns: int = 16
    decoder: Literal["auto", "direct", "hf"] = "auto"  # play_episodes' decoder
    graphs: list[Literal["auto", "on", "off"]] = field(default_factory=lambda: ["auto"])
    """One engine row each: CUDA graphs of the direct decoder's one-token steps (auto: on CUDA)."""
    peek_from: list[int] = field(default_factory=lambda: [PEEK_FROM])
    """Accelerator: steps after a look from which the engine reads whether a row still writes (0: never), one row
    each."""
    repeat: int = 1
    """Play each problem this many times (greedy: the same episodes; fills batches above the problem count)."""
    runs: int = 1  # timed runs of each row (the median is reported)
    dtype: Literal["float32", "bfloat16"] = "float32"  # the model's weights and KV cache
    quick: bool = False  # 200 problems, batch 128 only
    json: str = ""  # also write the figures as JSON to this path
    profile: str = ""
    """Also profile one engine run of each device's best row (torch.profiler) and write its top operations here."""

    def __post_init__(self) -> None:
        check_min(self, 0, "problems")
        check_min(self, 1, "threads", "max_turns", "repeat", "runs")
        for name in ("graphs", "peek_from", "batches"):
            if not getattr(self, name):
                raise ValueError(f"--{name.replace('_', '-')} needs at least one value")
        if any(not re.fullmatch(r"cpu|cuda(:\d+)?", d) for d in self.devices):
            raise ValueError(f"--devices takes cpu, cuda or cuda:N, got {self.devices}")
        if min(self.peek_from) < 0:
            raise ValueError(f"--peek-from must be steps >= 0, got {self.peek_from}")
        if min(self.batches) < 1:
            raise ValueError(f"--batches must be positive sizes, got {self.batches}")
        if self.quick:
            self.problems, self.batches = 200, [128]


def _sync(device: str, result: T = None) -> T:
    """``result``, once the work queued on ``device`` is done (for timing)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return result


def _engine_kwargs(opts: Options, batch: int, graphs: str, peek_from: int | None) -> dict:
    """``play_episodes``' arguments for one row (``peek_from`` None: a CPU row, where the engine reads every step)."""
    return dict(greedy=True, batch_size=batch, max_turns=opts.max_turns, decoder=opts.decoder, graphs=GRAPHS[graphs],
                peek_from=PEEK_FROM if peek_from is None else peek_from)


def engine_run(model, tok, problems, batch: int, device: str, opts: Options, graphs: str, peek_from: int) -> dict:
    from countdown_gym.integrations.trl_rollout import play_episodes

    kw = _engine_kwargs(opts, batch, graphs, peek_from)
    play_episodes(model, tok, problems[:64], **kw)  # warm-up
    runs = []
    for _ in range(opts.runs):
        stats: dict = {}
        _sync(device)
        seconds, rollouts = timed(lambda s=stats: _sync(device, play_episodes(model, tok, problems, stats=s, **kw)))
        runs.append((seconds, stats))
    dt, stats = sorted(runs, key=lambda t: t[0])[len(runs) // 2]
    prompts, completions = (sum(len(getattr(r, k)) for r in rollouts) for k in ("prompt_ids", "completion_ids"))
    return {"seconds": dt, "model_tokens": sum(sum(r.env_mask) for r in rollouts), "all_tokens": prompts + completions,
            "episodes": len(rollouts), "solved": sum(r.solved for r in rollouts),
            "prompt_tokens": prompts / len(rollouts), "completion_tokens": completions / len(rollouts),
            "steps": stats.get("steps", 0), "looks": stats.get("looks", 0), "play_seconds": stats.get("play_s", 0.0),
            "graphs_captured": stats.get("graphs", 0),
            "all_seconds": [round(t[0], 4) for t in runs] if opts.runs > 1 else None}


def bound_run(model, rows: int, prompt_len: int, steps: int, device: str, direct: bool) -> dict:
    """A bare greedy decode loop: ``rows`` x ``prompt_len`` prefill, then ``steps`` one-token steps."""
    import torch

    from countdown_gym.inference.decoders import DirectDecoder, HFDecoder, Step, cache_arg

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(10, model.config.vocab_size, (rows, prompt_len), generator=gen).to(device)
    every = torch.ones(rows, dtype=torch.bool, device=device)
    dec = DirectDecoder(model, rows, prompt_len + steps + 1) if direct else HFDecoder(model, rows, cache_arg(model))
    prefix_rows = torch.arange(rows, device=device).repeat_interleave(prompt_len - 1)

    def loop() -> None:
        logits = dec.forward(Step(last=ids[:, -1], advance=every, prefix=ids[:, :-1].reshape(-1),
                                  prefix_rows=prefix_rows), prompt_len + 1)
        for k in range(steps):
            logits = dec.forward(Step(last=logits.argmax(-1), advance=every), prompt_len + k + 2)

    if direct:  # a first pass captures the CUDA graphs (on CUDA); the timed pass replays them
        loop()
        dec.reset(torch.arange(rows, device=device))
    _sync(device)
    seconds, _ = timed(lambda: _sync(device, loop()))
    return {"seconds": seconds, "tokens": rows * steps, "decoder": "direct" if direct else "hf"}


def measure(opts: Options) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from countdown_gym import load_split
    from countdown_gym.inference.decoders import DirectDecoder

    torch.set_num_threads(opts.threads)
    problems = load_split("longproc-0.5k", "test")[: opts.problems or None]
    problems = [p for p in problems for _ in range(opts.repeat)]
    out: dict = {"devices": {}, "rows": []}
    for device in opts.devices or (["cpu"] + (["cuda"] if torch.cuda.is_available() else [])):
        if device != "cpu" and not torch.cuda.is_available():
            raise SystemExit(f"--devices {device}: this torch sees no CUDA device")
        tok = AutoTokenizer.from_pretrained(opts.model)
        model = AutoModelForCausalLM.from_pretrained(opts.model).to(device=device, dtype=getattr(torch, opts.dtype))
        model.eval()
        cpu = device == "cpu"
        name = (torch.cuda.get_device_name(0) if device.startswith("cuda")
                else f"CPU ({platform.processor() or platform.machine()}, {opts.threads} threads)")
        direct = DirectDecoder.supports(model) and opts.decoder != "hf"
        best = None
        for batch in opts.batches:
            bnd = None
            for graphs in opts.graphs if direct else ["off"]:
                for peek in [1] if cpu else opts.peek_from:
                    eng = engine_run(model, tok, problems, batch, device, opts, graphs, peek)
                    rows = min(batch, len(problems))
                    bnd = bnd or bound_run(model, rows, round(eng["prompt_tokens"]), round(eng["completion_tokens"]),
                                           device, direct)
                    row = {"device": name, "batch": batch, "rows": rows, "repeat": opts.repeat, "graphs": graphs,
                           "peek_from": None if cpu else peek,
                           "engine_tokens_per_s": eng["model_tokens"] / eng["seconds"],
                           "engine_all_tokens_per_s": eng["all_tokens"] / eng["seconds"],
                           "bound_tokens_per_s": bnd["tokens"] / bnd["seconds"],
                           **{f"engine_{k}": v for k, v in eng.items()},
                           "bound_decoder": bnd["decoder"], "bound_seconds": bnd["seconds"]}
                    row["ratio"] = row["engine_tokens_per_s"] / row["bound_tokens_per_s"]
                    row["ratio_all"] = row["engine_all_tokens_per_s"] / row["bound_tokens_per_s"]
                    out["rows"].append(row)
                    how = f"graphs {graphs}" + ("" if cpu else f", peek {peek}")
                    print(f"{name:>34} batch {batch:>5} ({how}): engine {row['engine_tokens_per_s']:>9,.0f} model "
                          f"tok/s ({row['engine_all_tokens_per_s']:>9,.0f} all), bound "
                          f"{row['bound_tokens_per_s']:>9,.0f} tok/s, ratio {row['ratio']:.2f} (all "
                          f"{row['ratio_all']:.2f}); {eng['episodes']} episodes in {eng['seconds']:.2f} s "
                          f"({eng['steps']} steps, {eng['looks']} looks, {eng['graphs_captured']} graphs, "
                          f"{eng['play_seconds']:.2f} s playing turns), {eng['solved']} solved", flush=True)
                    if best is None or row["engine_tokens_per_s"] > best["engine_tokens_per_s"]:
                        best = row
        if opts.profile:
            _profile(model, tok, problems, best, device, opts)
        keys = ("device", "batch", "graphs", "peek_from", "engine_tokens_per_s", "bound_tokens_per_s", "ratio")
        out["devices"][device] = {k: best[k] for k in keys}
    return out


def _profile(model, tok, problems, row: dict, device: str, opts: Options) -> None:
    """Append the top operations of one engine run of ``row``'s configuration (``torch.profiler``) to
    ``opts.profile``."""
    from torch.profiler import ProfilerActivity, profile

    from countdown_gym.integrations.trl_rollout import play_episodes

    cuda = device.startswith("cuda")
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        play_episodes(model, tok, problems, **_engine_kwargs(opts, row["batch"], row["graphs"], row["peek_from"]))
        _sync(device)
    tables = [f"## {row['device']}, batch {row['batch']}, graphs {row['graphs']}, peek {row['peek_from']}"]
    for key in (["self_device_time_total"] if cuda else []) + ["self_cpu_time_total"]:
        try:
            tables.append(f"### by {key}\n" + prof.key_averages().table(sort_by=key, row_limit=25))
        except (KeyError, AttributeError, ValueError) as exc:  # a sort key this torch does not know
            tables.append(f"### by {key}: {exc}")
    with Path(opts.profile).open("a") as f:
        f.write("\n\n".join(tables) + "\n\n")
    print(f"profile appended to {opts.profile}")


def main(argv: list[str] | None = None) -> None:
    opts = parse(Options, argv, description=__doc__.split("\n")[0])
    if opts.json:
        check_writable(opts.json, "--json")
    if opts.profile:
        check_writable(opts.profile, "--profile")
    out = measure(opts)
    if opts.json:
        first = next(iter(out["devices"].values()))
        summary = {k: first[k] for k in ("device", "engine_tokens_per_s", "bound_tokens_per_s", "ratio")}
        summary.update(per_device=out["devices"], rows=out["rows"], command=command("bench_rollouts.py", argv))
        write_report(opts.json, json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    run_script(main)
