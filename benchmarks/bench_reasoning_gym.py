"""``score_answer`` calls per second through the reasoning-gym dataset interface (target: >= 10,000/s).

    python benchmarks/bench_reasoning_gym.py             # tinyzero test split, 500 entries x 5 answers, best of 20
    python benchmarks/bench_reasoning_gym.py --quick     # a smoke test

Each pass scores five answers per entry (the reference solution, a wrong expression, a reused number, a power
and prose) through ``CountdownGymDataset.score_answer``, entries built beforehand as a trainer holds them. The
fastest pass is reported (the least disturbed on a shared machine), with the median and the CPU-time rate.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from countdown_gym import dataclass_cli
from countdown_gym.integrations.reasoning_gym import CountdownGymConfig, CountdownGymDataset


@dataclass
class Options:
    preset: str = "tinyzero"  # frozen-split preset the dataset is built from
    split: str = "test"  # its split (train, validation, test)
    entries: int = 500  # entries of the split (5 answers each)
    passes: int = 20  # timed passes over the entries (the best and the median are reported)
    quick: bool = False  # 50 entries, 3 passes

    def __post_init__(self) -> None:
        dataclass_cli.check_min(self, 1, "entries", "passes")
        if self.quick:
            self.entries, self.passes = 50, 3
        CountdownGymConfig(preset=self.preset, split=self.split, size=self.entries).validate()  # a usage error, not a traceback


def answers_for(entry: dict) -> list[str]:
    a, b, *_ = entry["metadata"]["numbers"]
    return [entry["answer"], f"{a} + {b}", f"{a} + {a}", f"{a}**2", "I think the answer is 42"]


def main(argv: list[str] | None = None) -> None:
    args = dataclass_cli.parse(Options, argv, description=__doc__.splitlines()[0])
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
    dataclass_cli.run_script(main)
