"""Benchmark the game core against reasoning-gym's countdown, on the same machine, in one run.

    python benchmarks/bench_core.py            # prints the tables, writes docs/benchmarks_core.md
    python benchmarks/bench_core.py --quick    # smaller sizes, for a smoke test (does not write)

Measures the verifier and the generator against reasoning-gym's (``pip install countdown-gym[bench]``), and
``is_solvable`` and cached reachability; the written report says how.
"""

from __future__ import annotations

import random
import re
import subprocess
import time
import types
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version

from _common import ROOT, best_time, check_writable, command, machine, now, timed, write_report
from peer_rewards import reasoning_gym_reward

from countdown_gym import Problem, Rules, dataclass_cli, generate, load_split, verify
from countdown_gym.game import solver
from countdown_gym.game.solver import is_solvable, reachable, solve
from countdown_gym.game.trace import dfs_trace, parse_trace

DOC = ROOT / "docs" / "benchmarks_core.md"
ORIGINAL_COMMIT = "36d2d68"
"""The commit whose ``solver.py`` had the original memoised move search (for the speed-up table)."""


# ---- the completion mix ------------------------------------------------------------------------------

_NUM = re.compile(r"\d+")


def _op(expr: str, rng: random.Random) -> str:
    """``expr`` with one operator changed."""
    i = rng.choice([i for i, ch in enumerate(expr) if ch in "+-*/"])
    return expr[:i] + rng.choice([o for o in "+-*/" if o != expr[i]]) + expr[i + 1 :]


def _num(expr: str, rng: random.Random, other: int | None) -> str:
    """``expr`` with one number replaced by ``other`` (None: that number plus one)."""
    m = rng.choice(list(_NUM.finditer(expr)))
    return expr[: m.start()] + str(int(m.group()) + 1 if other is None else other) + expr[m.end() :]


def _fullwidth(expr: str) -> str:
    d = next(_NUM.finditer(expr)).start()
    return f"{expr[:d]}{chr(ord(expr[d]) + 0xFEE0)}{expr[d + 1 :]}"


def _spaced(expr: str) -> str:
    return re.sub(r"([-+*/()])", r" \1 ", expr).replace("  ", " ").strip()


def _tag(text: str) -> str:
    return f"<answer>{text}</answer>"


_Make = Callable[[Problem, str, random.Random], str]
KINDS: dict[str, tuple[int, _Make]] = {  # kind: (weight in the mix, the completion after its reasoning)
    "correct": (30, lambda p, s, rng: _tag(s)),
    "correct_spaced": (8, lambda p, s, rng: _tag(f" {_spaced(s)} ")),
    "correct_with_equals": (4, lambda p, s, rng: _tag(f"{s} = {p.target}")),
    "earlier_wrong_last_right": (3, lambda p, s, rng: f"{_tag(_op(s, rng))}\nWait, that is wrong.\n{_tag(s)}"),
    "wrong_operator": (15, lambda p, s, rng: _tag(_op(s, rng))),
    "wrong_number_reused": (6, lambda p, s, rng: _tag(_num(s, rng, rng.choice(p.numbers)))),
    "wrong_foreign_number": (5, lambda p, s, rng: _tag(_num(s, rng, None))),
    "wrong_number_missing": (5, lambda p, s, rng: _tag(s[: s.rfind(max("+-*/", key=s.rfind))])),
    "malformed_unbalanced": (4, lambda p, s, rng: _tag(f"({s}")),
    "malformed_prose": (4, lambda p, s, rng: _tag(f"The answer is {s}")),
    "no_answer_tag": (4, lambda p, s, rng: f"So the final answer is {s}."),
    "truncated_unclosed": (3, lambda p, s, rng: f"<answer>{s[: max(1, len(s) // 2)]}"),
    "hedged_unclosed_after_correct": (2, lambda p, s, rng: f"{_tag(s)}\nActually, maybe <answer>{_op(s, rng)}"),
    "power_operator": (2, lambda p, s, rng: _tag(s.replace("*", "**", 1) if "*" in s else s + "**1")),
    "unicode_times_sign": (2, lambda p, s, rng: _tag(s.replace("*", "×") if "*" in s else s + "×1")),
    "fullwidth_digit": (2, lambda p, s, rng: _tag(_fullwidth(s))),
    "unary_minus": (1, lambda p, s, rng: _tag(f"-({s})")),
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


def completion_mix(problems: list[Problem], n: int, seed: int = 0) -> list[tuple[str, Problem, str]]:
    rng = random.Random(seed)
    kinds = list(KINDS)
    weights = [w for w, _ in KINDS.values()]
    sols = {p: solve(p, limit=8) for p in problems}
    out = []
    for _ in range(n):
        p = rng.choice(problems)
        kind = rng.choices(kinds, weights)[0]
        sol = rng.choice(sols[p])
        out.append((kind, p, _think(rng, p) + KINDS[kind][1](p, sol, rng)))
    return out


# ---- sections ---------------------------------------------------------------------------------------


def bench_verifier(n: int, repeats: int) -> dict:
    mix = completion_mix(load_split("tinyzero", "test")[:200], n)

    def ours() -> list:
        return [verify(p, c) for _, p, c in mix]

    def theirs() -> list:
        return [reasoning_gym_reward(c, p.numbers, p.target) for _, p, c in mix]

    verdicts, scores = ours(), theirs()
    disagree: dict[str, list] = defaultdict(list)
    for (kind, _p, c), v, s in zip(mix, verdicts, scores, strict=True):
        if v.correct != (s == 1.0):
            disagree[kind].append((c, v.reason, s))
    return {"n": len(mix), "kinds": Counter(k for k, _, _ in mix), "disagree": disagree,
            "ours": len(mix) / best_time(ours, repeats), "theirs": len(mix) / best_time(theirs, 1),
            "ours_correct": sum(v.correct for v in verdicts), "theirs_correct": sum(s == 1.0 for s in scores)}


def bench_generator(n_ours: int, n_theirs: int, repeats: int) -> dict:
    from reasoning_gym.games.countdown import CountdownConfig, CountdownDataset

    cfg = CountdownConfig(min_numbers=5, max_numbers=6, min_value=1, max_value=100, min_target=100, max_target=999,
                          size=n_theirs, seed=1)
    t_ours = best_time(lambda: generate("hard", n_ours, seed=1), repeats)
    t_theirs, items = timed(lambda: list(CountdownDataset(cfg)))
    sample = items[:40]
    ok = sum(is_solvable(it["metadata"]["numbers"], it["metadata"]["target"], Rules.longproc()) for it in sample)
    return {"ours": n_ours / t_ours, "theirs": n_theirs / t_theirs, "n_ours": n_ours, "n_theirs": n_theirs,
            "theirs_solvable_longproc": (ok, len(sample)),
            "tinyzero": n_ours // 5 / best_time(lambda: generate("tinyzero", n_ours // 5, seed=1), 1),
            "longproc": n_ours / best_time(lambda: generate("longproc-0.5k", n_ours, seed=1), 1)}


def _cold(module: types.ModuleType, draws: list[tuple[tuple[int, ...], int]],
          rules: Rules | None = None) -> tuple[float, list[bool]]:
    """Draws/s of ``module.reachable`` (the solver's, or the original's) from an empty cache, and its answers."""
    module.clear_cache()
    seconds, answers = timed(lambda: [module.reachable(nums, t, rules) for nums, t in draws])
    return len(draws) / seconds, answers


def bench_solver(n_fresh: int, n_states: int, repeats: int) -> dict:
    rng = random.Random(7)
    draws = [(tuple(rng.randint(1, 49) for _ in range(4)), rng.randint(10, 50)) for _ in range(n_fresh)]
    tz_draws = [(tuple(rng.randint(1, 100) for _ in range(4)), rng.randint(1, 100)) for _ in range(n_fresh // 10)]
    fresh, solvable = _cold(solver, draws)
    tinyzero, tz_solvable = _cold(solver, tz_draws, Rules.tinyzero())
    # every state the reference DFS visits on test problems: what the oracle critic asks about
    queries: list[tuple[tuple[int, ...], int]] = []
    for p in load_split("longproc-0.5k", "test"):
        _, target, steps = parse_trace(dfs_trace(p))
        queries += [(st, target) for s in steps for st in (s.state, s.next_state) if st is not None]
        if len(queries) >= n_states:
            break
    queries = queries[:n_states]

    def cached() -> None:
        for st, t in queries:
            reachable(st, t)

    cached()
    return {"fresh": fresh, "fresh_n": len(draws), "fresh_solvable": sum(solvable), "tinyzero": tinyzero,
            "tinyzero_n": len(tz_draws), "tinyzero_solvable": sum(tz_solvable), "cached_n": len(queries),
            "cached": len(queries) / best_time(cached, repeats), "cached_distinct": len(set(queries))}


def _git(*args: str) -> str:
    """The output of ``git <args>`` in the repository ("" without git or the object)."""
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def bench_original_solver(n_lp: int, n_tz: int) -> dict | None:
    """Reachability draws/s of the original memoised move search (``solver.py`` at ORIGINAL_COMMIT)."""
    src = _git("show", f"{ORIGINAL_COMMIT}:countdown_gym/solver.py")
    if not src:
        return None
    old = types.ModuleType("original_solver")  # its modules have since moved into countdown_gym.game
    exec(src.replace("countdown_gym.problem", "countdown_gym.game.problem")  # noqa: S102 - this repository's own code
         .replace("countdown_gym.rules", "countdown_gym.game.rules"), old.__dict__)
    rng = random.Random(11)
    lp = [(tuple(rng.randint(1, 49) for _ in range(4)), rng.randint(10, 50)) for _ in range(n_lp)]
    tz = [(tuple(rng.randint(1, 100) for _ in range(rng.randint(3, 4))), rng.randint(1, 100)) for _ in range(n_tz)]
    out = {}
    for name, rules, draws in (("longproc", Rules.longproc(), lp), ("tinyzero", Rules.tinyzero(), tz)):
        (old_rate, old_answers), (new_rate, new_answers) = (_cold(module, draws, rules) for module in (old, solver))
        out[name] = {"old": old_rate, "new": new_rate, "n": len(draws), "same": old_answers == new_answers}
    return out


# ---- report -----------------------------------------------------------------------------------------


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
        lines.append(f"(skipped: `git show {ORIGINAL_COMMIT}:countdown_gym/solver.py` is not available)")
    else:
        lines += [
            f"`reachable(numbers, target)` on fresh random draws (cold caches), the original memoised move search from commit `{ORIGINAL_COMMIT}` vs the current solver, same process:",
            "",
            "| draws | original, draws/s | current, draws/s | speed-up | same answers |",
            "| --- | ---: | ---: | ---: | --- |",
            *[f"| {name} ranges ({r['n']} draws) | {r['old']:,.0f} | {r['new']:,.0f} | {r['new'] / r['old']:,.1f}x | {_ok(r['same'])} |"
              for name, r in orig.items()],
            "",
            "The generator's accept/reject decisions are these answers, so `generate()` returns the same problems",
            "for a seed (pinned in `tests/test_generator.py`; the frozen splits rebuild byte-for-byte in",
            "`tests/test_splits.py -m slow`).",
        ]
    lines += ["", "## Completion mix", "", "| kind | count |", "| --- | ---: |",
              *[f"| {k} | {ver['kinds'][k]} |" for k in KINDS], "", "## Disagreements", ""]
    if not ver["disagree"]:
        lines.append("None.")
    else:
        lines += ["| kind | completions | our reason | reasoning-gym score | why | example (completion from its first "
                  "`<answer>`) |", "| --- | ---: | --- | --- | --- | --- |"]
        for kind, rows in sorted(ver["disagree"].items(), key=lambda kv: -len(kv[1])):
            reasons = ", ".join(sorted({r for _, r, _ in rows}))
            scores = ", ".join(sorted({f"{s:g}" for _, _, s in rows}))
            tail = rows[0][0][rows[0][0].find("<answer>") :].replace("\n", " ").replace("|", "\\|")
            lines.append(f"| {kind} | {len(rows)} | {reasons} | {scores} | {EXPLANATIONS.get(kind, 'see reasons')} "
                         f"| `{tail[-110:]}` |")
    return "\n".join(lines) + "\n"


@dataclass
class Options:
    quick: bool = False  # small sizes; print only, do not write the doc
    out: str = str(DOC)  # Markdown file to write


def main(argv: list[str] | None = None) -> int:
    args = dataclass_cli.parse(Options, argv, description=__doc__)
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        dataclass_cli.usage_error("reasoning-gym is needed for the comparison: pip install 'countdown-gym[bench]'",
                                  prog="bench_core.py")
    q = args.quick
    if not q:
        check_writable(args.out, "--out")
    facts = [f"- {machine()} at the start",
             f"- countdown-gym commit {_git('rev-parse', '--short', 'HEAD').strip() or 'unknown'}; "
             f"reasoning-gym {version('reasoning-gym')}", f"- run at {now()}, single process, one thread"]
    t0 = time.perf_counter()
    print("verifier ...", flush=True)
    ver = bench_verifier(300 if q else 3000, 1 if q else 3)
    print("generator ...", flush=True)
    gen = bench_generator(100 if q else 1000, 10 if q else 60, 1 if q else 3)
    print("solver ...", flush=True)
    sol = bench_solver(300 if q else 5000, 2000 if q else 50_000, 1 if q else 5)
    print("original solver ...", flush=True)
    orig = bench_original_solver(200 if q else 2000, 30 if q else 300)
    text = render(ver, gen, sol, orig, facts, command("bench_core.py", argv))
    print(text)
    print(f"(benchmark took {time.perf_counter() - t0:.0f} s)")
    if not q:
        write_report(args.out, text)
    return 0


if __name__ == "__main__":
    dataclass_cli.run_script(main)
