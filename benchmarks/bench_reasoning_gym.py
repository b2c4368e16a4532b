"""``score_answer`` calls per second through the reasoning-gym dataset interface (target: >= 10,000/s).

    python benchmarks/bench_reasoning_gym.py             # the 500 problems of the tinyzero test split x 5 answers, best of 20 passes
    python benchmarks/bench_reasoning_gym.py --quick     # a smoke test

The answers are a mix like the core benchmark's: the reference solution, a wrong expression, a
reused number, a power (a hack), and text that is not an expression. Each pass scores every
(answer, entry) pair through ``CountdownGymDataset.score_answer`` (entries built beforehand, as a
trainer holds them). The machine may be shared: the fastest pass is reported (the least disturbed),
with the median and the CPU-time rate next to it.
"""

from __future__ import annotations

import argparse
import statistics
import time

from countdown_gym.integrations.reasoning_gym import CountdownGymConfig, CountdownGymDataset


def answers_for(entry: dict) -> list[str]:
    """Five answers of different kinds for one entry."""
    a, b, *_ = entry["metadata"]["numbers"]
    return [entry["answer"], f"{a} + {b}", f"{a} + {a}", f"{a}**2", "I think the answer is 42"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tinyzero")
    ap.add_argument("--split", default="test")
    ap.add_argument("--entries", type=int, default=500, help="entries of the split (5 answers each)")
    ap.add_argument("--passes", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="50 entries, 3 passes")
    args = ap.parse_args(argv)
    if args.quick:
        args.entries, args.passes = 50, 3
    ds = CountdownGymDataset(CountdownGymConfig(preset=args.preset, split=args.split, size=args.entries))
    pairs = [(ans, e) for e in ds for ans in answers_for(e)]
    score = ds.score_answer
    for ans, e in pairs:  # warm the problem cache once, as a training run does after its first epoch
        score(ans, e)
    walls, cpus, total = [], [], 0.0
    for _ in range(args.passes):
        w, c = time.perf_counter(), time.process_time()
        total = sum(score(ans, e) for ans, e in pairs)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    n = len(pairs)
    print(f"score_answer through CountdownGymDataset ({args.preset}/{args.split}, {n} answers per pass, "
          f"{args.passes} passes, {total:.0f} scored 1.0)")
    print(f"  best pass:   {n / min(walls):,.0f} calls/s")
    print(f"  median pass: {n / statistics.median(walls):,.0f} calls/s")
    print(f"  CPU time:    {n / min(cpus):,.0f} calls/s (best pass)")


if __name__ == "__main__":
    main()
