"""Benchmark the game core against reasoning-gym's countdown, on the same machine, in one run.

    python benchmarks/bench_core.py            # prints the tables, writes docs/benchmarks_core.md
    python benchmarks/bench_core.py --quick    # smaller sizes, for a smoke test (does not write)

Measures:
* verifier completions/s on a mix of correct, wrong and malformed TinyZero-style completions,
  against reasoning-gym's ``extract_answer`` + ``CountdownDataset.score_answer`` on the same
  completions, and every completion on which the two disagree (with the reason);
* generator problems/s for ``hard``-like ranges against reasoning-gym's countdown generator;
* ``is_solvable`` on fresh 4-number problems/s and cached reachability queries/s.

reasoning-gym is used here only, as a peer (``pip install countdown-gym[bench]``).
"""

from __future__ import annotations

import os
import platform
import random
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from countdown_gym import (
    Problem,
    Rules,
    dataclass_cli,
    dfs_trace,
    generate,
    is_solvable,
    load_split,
    parse_trace,
    reachable,
    solve,
    verify,
)
from countdown_gym.game.solver import clear_cache

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks_core.md"
ORIGINAL_COMMIT = "36d2d68"
"""The commit whose ``solver.py`` had the original memoised move search (for the speed-up table)."""


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _best_time(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` runs (the machine is shared; the minimum is the least disturbed)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


# ---- the completion mix ------------------------------------------------------------------------------

_NUM = re.compile(r"\d+")

WEIGHTS = {
    "correct": 30,
    "correct_spaced": 8,
    "correct_with_equals": 4,
    "earlier_wrong_last_right": 3,
    "wrong_operator": 15,
    "wrong_number_reused": 6,
    "wrong_foreign_number": 5,
    "wrong_number_missing": 5,
    "malformed_unbalanced": 4,
    "malformed_prose": 4,
    "no_answer_tag": 4,
    "truncated_unclosed": 3,
    "hedged_unclosed_after_correct": 2,
    "power_operator": 2,
    "unicode_times_sign": 2,
    "fullwidth_digit": 2,
    "unary_minus": 1,
}

EXPLANATIONS = {
    "correct_with_equals": "a trailing `= target` is accepted here (checked against the value); sympy's `parse_expr` rejects `=`",
    "earlier_wrong_last_right": "here the block closed first is the answer (the text environment ends its episode at that closing tag); reasoning-gym takes the last complete block",
    "unicode_times_sign": "here `×` is an accepted alias of `*`; sympy cannot parse it",
    "fullwidth_digit": "here non-ASCII digits are rejected (`non_ascii_digit`); reasoning-gym's `\\d` and sympy read `２` as 2",
    "power_operator": "here `**` is not a Countdown operation; sympy evaluates powers",
    "unary_minus": "here unary minus is rejected; sympy evaluates it",
}


def _think(rng: random.Random, p: Problem) -> str:
    a, b = rng.sample(list(p.numbers), 2)
    lines = [
        f"Let me find a way to reach {p.target} with {', '.join(map(str, p.numbers))}.",
        f"First try {a} + {b} = {a + b}. That leaves the other numbers; it does not obviously work.",
        f"Maybe {max(a, b)} - {min(a, b)} = {max(a, b) - min(a, b)} helps instead.",
        f"What about {a} * {b} = {a * b}? That is too large, so I will backtrack.",
        "Let me try combining the remaining numbers in a different order and check each step.",
    ]
    rng.shuffle(lines)
    return "<think>\n" + "\n".join(lines[: rng.randint(2, 5)]) + "\n</think>\n"


def _mutate_operator(expr: str, rng: random.Random) -> str:
    idx = [i for i, ch in enumerate(expr) if ch in "+-*/"]
    i = rng.choice(idx)
    new = rng.choice([o for o in "+-*/" if o != expr[i]])
    return expr[:i] + new + expr[i + 1 :]


def _replace_number(expr: str, rng: random.Random, new: Callable[[int], int]) -> str:
    ms = list(_NUM.finditer(expr))
    m = rng.choice(ms)
    return expr[: m.start()] + str(new(int(m.group()))) + expr[m.end() :]


def make_completion(kind: str, p: Problem, sol: str, rng: random.Random) -> str:
    think = _think(rng, p)
    spaced = re.sub(r"([-+*/()])", r" \1 ", sol).replace("  ", " ").strip()
    if kind == "correct":
        return f"{think}<answer>{sol}</answer>"
    if kind == "correct_spaced":
        return f"{think}<answer> {spaced} </answer>"
    if kind == "correct_with_equals":
        return f"{think}<answer>{sol} = {p.target}</answer>"
    if kind == "earlier_wrong_last_right":
        return f"{think}<answer>{_mutate_operator(sol, rng)}</answer>\nWait, that is wrong.\n<answer>{sol}</answer>"
    if kind == "wrong_operator":
        return f"{think}<answer>{_mutate_operator(sol, rng)}</answer>"
    if kind == "wrong_number_reused":
        other = rng.choice(p.numbers)
        return f"{think}<answer>{_replace_number(sol, rng, lambda x: other)}</answer>"
    if kind == "wrong_foreign_number":
        return f"{think}<answer>{_replace_number(sol, rng, lambda x: x + 1)}</answer>"
    if kind == "wrong_number_missing":
        return f"{think}<answer>{sol[: sol.rfind(max('+-*/', key=sol.rfind))]}</answer>"
    if kind == "malformed_unbalanced":
        return f"{think}<answer>({sol}</answer>"
    if kind == "malformed_prose":
        return f"{think}<answer>The answer is {sol}</answer>"
    if kind == "no_answer_tag":
        return f"{think}So the final answer is {sol}."
    if kind == "truncated_unclosed":
        return f"{think}<answer>{sol[: max(1, len(sol) // 2)]}"
    if kind == "hedged_unclosed_after_correct":
        return f"{think}<answer>{sol}</answer>\nActually, maybe <answer>{_mutate_operator(sol, rng)}"
    if kind == "power_operator":
        return f"{think}<answer>{sol.replace('*', '**', 1) if '*' in sol else sol + '**1'}</answer>"
    if kind == "unicode_times_sign":
        return f"{think}<answer>{sol.replace('*', '×')}</answer>" if "*" in sol else f"{think}<answer>{sol}×1</answer>"
    if kind == "fullwidth_digit":
        m = _NUM.search(sol)
        assert m is not None
        d = m.start()
        return f"{think}<answer>{sol[:d]}{chr(ord(sol[d]) + 0xFEE0)}{sol[d + 1 :]}</answer>"
    if kind == "unary_minus":
        return f"{think}<answer>-({sol})</answer>"
    raise ValueError(kind)


def completion_mix(problems: list[Problem], n: int, seed: int = 0) -> list[tuple[str, Problem, str]]:
    rng = random.Random(seed)
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    sols = {p: solve(p, limit=8) for p in problems}
    out = []
    for _ in range(n):
        p = rng.choice(problems)
        kind = rng.choices(kinds, weights)[0]
        out.append((kind, p, make_completion(kind, p, rng.choice(sols[p]), rng)))
    return out


# ---- sections ---------------------------------------------------------------------------------------


def bench_verifier(n: int, repeats: int) -> dict:
    from reasoning_gym.games.countdown import CountdownConfig, CountdownDataset
    from reasoning_gym.utils import extract_answer

    problems = load_split("tinyzero", "test")[:200]
    mix = completion_mix(problems, n)
    entries = {p: {"metadata": {"numbers": list(p.numbers), "target": p.target}} for p in problems}
    ds = CountdownDataset(CountdownConfig(size=1, seed=0))

    def ours() -> list:
        return [verify(p, c) for _, p, c in mix]

    def theirs() -> list:
        return [ds.score_answer(extract_answer(c), entries[p]) for _, p, c in mix]

    verdicts = ours()
    scores = theirs()
    t_ours = _best_time(ours, repeats)
    t_theirs = _best_time(theirs, 1)
    disagree: dict[str, list] = defaultdict(list)
    for (kind, _p, c), v, s in zip(mix, verdicts, scores, strict=True):
        if v.correct != (s == 1.0):
            disagree[kind].append((c, v.reason, s))
    return {
        "n": len(mix),
        "kinds": Counter(k for k, _, _ in mix),
        "ours": _rate(len(mix), t_ours),
        "theirs": _rate(len(mix), t_theirs),
        "ours_correct": sum(v.correct for v in verdicts),
        "theirs_correct": sum(s == 1.0 for s in scores),
        "disagree": disagree,
    }


def bench_generator(n_ours: int, n_theirs: int, repeats: int) -> dict:
    from reasoning_gym.games.countdown import CountdownConfig, CountdownDataset

    cfg = dict(min_numbers=5, max_numbers=6, min_value=1, max_value=100, min_target=100, max_target=999)

    def ours() -> list:
        return generate("hard", n_ours, seed=1)

    def theirs() -> list:
        ds = CountdownDataset(CountdownConfig(**cfg, size=n_theirs, seed=1))
        return [ds[i] for i in range(n_theirs)]

    t_ours = _best_time(ours, repeats)
    t0 = time.perf_counter()
    items = theirs()
    t_theirs = time.perf_counter() - t0
    rules = Rules.longproc()
    sample = items[:40]
    ok = sum(is_solvable(it["metadata"]["numbers"], it["metadata"]["target"], rules) for it in sample)
    tinyzero_t = _best_time(lambda: generate("tinyzero", n_ours // 5, seed=1), 1)
    longproc_t = _best_time(lambda: generate("longproc-0.5k", n_ours, seed=1), 1)
    return {
        "ours": _rate(n_ours, t_ours),
        "theirs": _rate(n_theirs, t_theirs),
        "n_ours": n_ours,
        "n_theirs": n_theirs,
        "theirs_solvable_longproc": (ok, len(sample)),
        "tinyzero": _rate(n_ours // 5, tinyzero_t),
        "longproc": _rate(n_ours, longproc_t),
    }


def bench_solver(n_fresh: int, n_states: int, repeats: int) -> dict:
    rng = random.Random(7)
    draws = [(tuple(rng.randint(1, 49) for _ in range(4)), rng.randint(10, 50)) for _ in range(n_fresh)]
    tz_rules = Rules.tinyzero()
    tz_draws = [(tuple(rng.randint(1, 100) for _ in range(4)), rng.randint(1, 100)) for _ in range(n_fresh // 10)]

    clear_cache()
    t0 = time.perf_counter()
    solvable = sum(is_solvable(nums, t) for nums, t in draws)
    t_fresh = time.perf_counter() - t0
    clear_cache()
    t0 = time.perf_counter()
    tz_solvable = sum(is_solvable(nums, t, tz_rules) for nums, t in tz_draws)
    t_tz = time.perf_counter() - t0

    # every state the reference DFS visits on test problems: what the oracle critic asks about
    queries: list[tuple[tuple[int, ...], int]] = []
    for p in load_split("longproc-0.5k", "test"):
        _, target, steps = parse_trace(dfs_trace(p))
        for s in steps:
            queries.append((s.state, target))
            if s.next_state is not None:
                queries.append((s.next_state, target))
        if len(queries) >= n_states:
            break
    queries = queries[:n_states]
    for st, t in queries:
        reachable(st, t)

    def cached() -> None:
        for st, t in queries:
            reachable(st, t)

    t_cached = _best_time(cached, repeats)
    return {
        "fresh": _rate(len(draws), t_fresh),
        "fresh_n": len(draws),
        "fresh_solvable": solvable,
        "tinyzero": _rate(len(tz_draws), t_tz),
        "tinyzero_n": len(tz_draws),
        "tinyzero_solvable": tz_solvable,
        "cached": _rate(len(queries), t_cached),
        "cached_n": len(queries),
        "cached_distinct": len(set(queries)),
    }


def bench_original_solver(n_lp: int, n_tz: int) -> dict | None:
    """Reachability draws/s of the original memoised move search (``solver.py`` at ORIGINAL_COMMIT)."""
    import importlib.util
    import tempfile

    try:
        src = subprocess.run(
            ["git", "show", f"{ORIGINAL_COMMIT}:countdown_gym/game/solver.py"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "original_solver.py"
        path.write_text(src, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("original_solver", path)
        assert spec is not None and spec.loader is not None
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    from countdown_gym.game import solver as new

    rng = random.Random(11)
    cases = {
        "longproc": (Rules.longproc(), [(tuple(rng.randint(1, 49) for _ in range(4)), rng.randint(10, 50)) for _ in range(n_lp)]),
        "tinyzero": (Rules.tinyzero(), [(tuple(rng.randint(1, 100) for _ in range(rng.randint(3, 4))), rng.randint(1, 100)) for _ in range(n_tz)]),
    }
    out = {}
    for name, (rules, draws) in cases.items():
        rates, answers = [], []
        for mod in (old, new):
            mod.clear_cache()
            t0 = time.perf_counter()
            answers.append([mod.reachable(nums, t, rules) for nums, t in draws])
            rates.append(_rate(len(draws), time.perf_counter() - t0))
        out[name] = {"old": rates[0], "new": rates[1], "n": len(draws), "same": answers[0] == answers[1]}
    return out


# ---- report -----------------------------------------------------------------------------------------


def machine_facts() -> list[str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        rev = "unknown"
    import reasoning_gym

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores (shared with other jobs: load average {load[0]:.1f} at the start)",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        f"- countdown-gym commit {rev or 'unknown'}; reasoning-gym {getattr(reasoning_gym, '__version__', '?')}",
        f"- run at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, single process, one thread",
    ]


def _ok(x: bool) -> str:
    return "yes" if x else "**no**"


def render(ver: dict, gen: dict, sol: dict, orig: dict | None, facts: list[str], command: str) -> str:
    v_ratio = ver["ours"] / ver["theirs"]
    g_ratio = gen["ours"] / gen["theirs"]
    ok, total = gen["theirs_solvable_longproc"]
    lines = [
        "# Game-core benchmarks",
        "",
        "Written by `benchmarks/bench_core.py`; numbers from one run on one machine. Rates are the best",
        "of a few repeats for our side (the machine is shared) and a single pass for reasoning-gym.",
        "",
        f"Command: `{command}`",
        "",
        *facts,
        "",
        "| measurement | countdown-gym | reasoning-gym | ratio | target | met |",
        "| --- | ---: | ---: | ---: | --- | --- |",
        f"| verifier, completions/s ({ver['n']} TinyZero-style completions, mix below) | {ver['ours']:,.0f} | {ver['theirs']:,.0f} | {v_ratio:,.1f}x | >= 10x | {_ok(v_ratio >= 10)} |",
        f"| generator, solvable problems/s, 5-6 numbers 1-100, targets 100-999 | {gen['ours']:,.0f} | {gen['theirs']:,.1f} | {g_ratio:,.1f}x | >= 5x | {_ok(g_ratio >= 5)} |",
        f"| `is_solvable`, fresh 4-number problems/s (1-49, targets 10-50, LongProc rules, cold cache) | {sol['fresh']:,.0f} | - | - | - | - |",
        f"| `is_solvable`, fresh 4-number problems/s (1-100, targets 1-100, TinyZero rational rules, cold cache) | {sol['tinyzero']:,.0f} | - | - | - | - |",
        f"| cached reachability queries/s ({sol['cached_n']:,} DFS-trace states, {sol['cached_distinct']:,} distinct) | {sol['cached']:,.0f} | - | - | >= 100k/s | {_ok(sol['cached'] >= 100_000)} |",
        f"| generator `longproc-0.5k`, problems/s | {gen['longproc']:,.0f} | - | - | - | - |",
        f"| generator `tinyzero`, problems/s | {gen['tinyzero']:,.0f} | - | - | - | - |",
        "",
        "Notes:",
        "",
        f"- Generator: ours is `generate(\"hard\", {gen['n_ours']}, seed=1)` (LongProc rules: positive integer",
        "  intermediates below 2000, every number used); reasoning-gym's is `CountdownDataset` with the same",
        f"  ranges ({gen['n_theirs']} items). Both are solvable by construction under their own rules;",
        f"  {ok}/{total} sampled reasoning-gym problems are also solvable under LongProc rules (its expressions",
        "  are not checked for negative or >= 2000 intermediates).",
        f"- `is_solvable` draws: {sol['fresh_solvable']}/{sol['fresh_n']} LongProc draws and {sol['tinyzero_solvable']}/{sol['tinyzero_n']} TinyZero draws were solvable.",
        f"- Verifier: both sides include answer extraction. Accepted: ours {ver['ours_correct']}, reasoning-gym {ver['theirs_correct']}",
        "  (reasoning-gym's 1.0 counts as accepted; its 0.05/0.01 as rejected). Problems: the first 200 of",
        "  the frozen `tinyzero` test split, verified under TinyZero rules (exact rationals, any sign), the",
        "  rules closest to reasoning-gym's float check.",
        "",
        "## Solver: target-directed subset search vs the original move search",
        "",
    ]
    if orig is None:
        lines.append(f"(skipped: `git show {ORIGINAL_COMMIT}:countdown_gym/game/solver.py` is not available)")
    else:
        lines += [
            f"`reachable(numbers, target)` on fresh random draws (cold caches), the original memoised move search from commit `{ORIGINAL_COMMIT}` vs the current solver, same process:",
            "",
            "| draws | original, draws/s | current, draws/s | speed-up | same answers |",
            "| --- | ---: | ---: | ---: | --- |",
            *[
                f"| {name} ranges ({r['n']} draws) | {r['old']:,.0f} | {r['new']:,.0f} | {r['new'] / r['old']:,.1f}x | {_ok(r['same'])} |"
                for name, r in orig.items()
            ],
            "",
            "The generator's accept/reject decisions are these answers, so `generate()` returns the same problems",
            "for a seed (pinned in `tests/test_generator.py`; the frozen splits rebuild byte-for-byte in",
            "`tests/test_splits.py -m slow`).",
        ]
    lines += [
        "",
        "## Completion mix",
        "",
        "| kind | count |",
        "| --- | ---: |",
        *[f"| {k} | {ver['kinds'][k]} |" for k in WEIGHTS],
        "",
        "## Disagreements",
        "",
    ]
    if not ver["disagree"]:
        lines.append("None.")
    else:
        lines += ["| kind | completions | our reason | reasoning-gym score | why | example (completion from its first `<answer>`) |", "| --- | ---: | --- | --- | --- | --- |"]
        for kind, rows in sorted(ver["disagree"].items(), key=lambda kv: -len(kv[1])):
            reasons = ", ".join(sorted({r for _, r, _ in rows}))
            scores = ", ".join(sorted({f"{s:g}" for _, _, s in rows}))
            example = rows[0][0]
            tail = example[example.find("<answer>") :].replace("\n", " ").replace("|", "\\|")
            lines.append(f"| {kind} | {len(rows)} | {reasons} | {scores} | {EXPLANATIONS.get(kind, 'see reasons')} | `{tail[-110:]}` |")
    return "\n".join(lines) + "\n"


@dataclass
class Options:
    quick: bool = False
    """Small sizes; print only, do not write the doc."""
    out: str = str(DOC)
    """Markdown file to write."""


def main(argv: list[str] | None = None) -> int:
    args = dataclass_cli.parse(Options, argv, description=__doc__)
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        dataclass_cli.usage_error("reasoning-gym is needed for the comparison: pip install 'countdown-gym[bench]'",
                                  prog="bench_core.py")
    q = args.quick
    facts = machine_facts()
    t0 = time.perf_counter()
    print("verifier ...", flush=True)
    ver = bench_verifier(300 if q else 3000, 1 if q else 3)
    print("generator ...", flush=True)
    gen = bench_generator(100 if q else 1000, 10 if q else 60, 1 if q else 3)
    print("solver ...", flush=True)
    sol = bench_solver(300 if q else 5000, 2000 if q else 50_000, 1 if q else 5)
    print("original solver ...", flush=True)
    orig = bench_original_solver(200 if q else 2000, 30 if q else 300)
    command = "python benchmarks/bench_core.py" + (" --quick" if q else "")
    text = render(ver, gen, sol, orig, facts, command)
    print(text)
    print(f"(benchmark took {time.perf_counter() - t0:.0f} s)")
    if not q:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
