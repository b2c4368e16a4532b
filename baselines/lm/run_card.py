"""The run card of a GRPO run: the ``README.md`` of its directory (what ran, how to repeat it, validation so far)
and the summary a finished run prints."""

from __future__ import annotations

import shlex
from typing import Any

from baselines.analysis.uncertainty import binomial_se
from baselines.lm.callbacks import PARTS
from baselines.lm.grpo_config import reward_terms
from baselines.lm.grpo_data import VALIDATION_SEED
from baselines.lm.grpo_options import GRPORun, Options


def command_line(opts: Options) -> str:
    """The shell command that repeats the run (every option that differs from its default, and ``--threads``
    always: the thread count is part of what makes a CPU run repeat bit for bit, docs/llm_grpo.md)."""
    from countdown_gym.dataclass_cli import to_argv

    argv = to_argv(opts, skip=("resume", "dry_run", "threads"))
    return shlex.join(["python", "baselines/llm_grpo.py", *argv, "--threads", str(opts.threads)])


def run_card(run: GRPORun, rows: list[dict[str, Any]], step: int, profile: dict[str, float] | None = None,
             test: dict[str, Any] | None = None) -> str:
    """The run directory's README.md: what was run, how to repeat it, held-out test success (``test``:
    :func:`baselines.lm.held_out.paired_difference`, once the run has ended), validation so far (``rows``:
    :class:`ValidationCallback` rows, numbers), and where a step's time goes (``profile``:
    :meth:`baselines.lm.callbacks.StepProfile.summary`)."""
    opts = run.options
    weights = ", ".join(f"{k} {w:g}" for k, w in reward_terms(opts).items() if w)
    lines = [
        f"# GRPO run `{run.run_dir.name}`",
        "",
        "Written by `baselines/llm_grpo.py` at every checkpoint and at the end of training.",
        "",
        f"- starting model: `{run.model}`",
        f"- interaction: `{opts.interaction}`" + (f" (at most {opts.max_turns} turns of {opts.max_turn_tokens} tokens)"
                                                   if run.multi_turn else f" (TRL's tool loop, at most {opts.max_turns} "
                                                   "turns)" if run.tools else ""),
        f"- rewards: `{opts.rewards}` (term weights: {weights}; see docs/llm_grpo.md)",
        f"- split preset `{opts.preset}`, " + ("prompt: the puzzle text of `CountdownToolEnv.reset`" if run.tools
                                              else f"prompt style `{opts.prompt_style}`"),
        f"- {'at most ' if opts.max_minutes else ''}{opts.steps} steps"
        f"{f' (or {opts.max_minutes:g} minutes of training)' if opts.max_minutes else ''} of {opts.prompts_per_step} prompts x {opts.num_generations} completions, "
        f"learning rate {opts.learning_rate:g}, beta {opts.beta:g}, temperature {opts.temperature:g}, "
        f"at most {opts.max_completion_length} completion tokens, loss `{opts.loss_type}`, seed {opts.seed}",
        f"- torch CPU threads: {opts.threads} (the same seed and thread count repeat the run bit for bit; another "
        f"thread count adds floats in another order and takes another trajectory)",
        f"- trained steps so far: {step}",
        "",
        "Repeat it (add `--resume` to continue from the newest checkpoint in this directory):",
        "",
        "```bash",
        command_line(opts),
        "```",
        "",
    ]
    if test:
        lines += ["## Test", "", held_out_line(test, opts.interaction) + ".", "",
                  f"The first {test['problems']} problems of the `{opts.preset}` test split, played greedily by the starting "
                  "and the final model (`held_out.json` holds each problem's outcome). No step, checkpoint or shipped model was "
                  "chosen on them.", ""]
    lines += ["## Validation", ""]
    if rows:
        samples = rows[0].get("samples") or 0
        drawn = "all of it" if not opts.eval_problems else (
            f"drawn at random with the fixed seed {VALIDATION_SEED} (`baselines/lm/grpo_data.py: validation_subset`, the "
            "same problems in every run); they alone chose `best/`, and no choice looked at the test split")
        lines += [
            f"{rows[0]['problems']} problems of the `{opts.preset}` validation split, {drawn}; greedy = one "
            f"greedy completion per problem" + (f", sampled = mean success of {samples} samples at T = {opts.temperature:g}, "
                                         f"pass@{samples} = any of them." if samples else "."),
            "",
            "| step | greedy | sampled | pass@k | greedy completions with an invalid step | mean completion tokens |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            cells = [f"{v:.1%}" if isinstance(v := r.get(key), (int, float)) else "-"
                     for key in ("greedy_success", "sampled_success", "pass_at_k", "greedy_invalid_frac")]
            lines.append(f"| {r['step']} | {' | '.join(cells)} | {r['mean_completion_tokens']:.0f} |")
        lines += ["", "![validation success vs step](success.png)", ""]
    else:
        lines += ["No validation yet.", ""]
    if profile:
        lines += [
            "## Time per step",
            "",
            "Mean seconds per GRPO step (validation not counted; baselines/lm/callbacks.py):",
            "",
            "| " + " | ".join(p.replace("_", " ") for p in PARTS) + " | step |",
            "| " + " | ".join("---:" for _ in range(len(PARTS) + 1)) + " |",
            "| " + " | ".join(f"{profile[p]:.2f}" for p in (*PARTS, "step")) + " |",
            "",
        ]
    lines += [
        "## Files",
        "",
        "| file | content |",
        "| --- | --- |",
        "| `options.json` | every option of the run |",
        "| `held_out.json` | with `--test-eval`: each held-out test problem's greedy outcome at the start and the end, and their "
        "comparison |",
        "| `metrics.csv`, `success.png` | one row per validation, and the plot of success vs step |",
        "| `train_log.jsonl` | TRL's per-step logs, one reward column per term, `replay/*` diagnostics |",
        "| `checkpoint-N/` | model, optimizer and RNG state (the last two are kept) |",
        "| `final/` | the trained model, loadable with `--model` (after the run ends) |",
        "| `best/` | the model with the highest greedy validation success so far (the start included), chosen on the "
        "validation problems above alone, never on test; `best/validation.json` says at which step. 200 problems do not "
        "rank checkpoints reliably (docs/results/checkpoint_ranking.md): `final/` is the run's model |",
        "",
    ]
    return "\n".join(lines)


def held_out_line(test: dict[str, Any], interaction: str) -> str:
    """The held-out test figures (``baselines.lm.held_out.paired_difference``) in one line."""
    p = test["p_value"]
    return (f"test success (greedy, {test['problems']} held-out test problems, {interaction}): start {test['start']:.1%} "
            f"± {test['start_se']:.1%} -> final {test['end']:.1%} ± {test['end_se']:.1%}; difference "
            f"{100 * test['difference']:+.1f} points ± {100 * test['difference_se']:.1f} (paired SE), "
            f"{test['gained']} problems gained, {test['lost']} lost, McNemar p {'< 0.001' if p < 0.001 else f'= {p:.3f}'}")


def summary_lines(opts: Options, summary: dict[str, Any]) -> list[str]:
    """What a finished run prints: held-out test success at the start and the end with the paired difference, and
    validation success at the start, the end and its best, with standard errors."""
    lines: list[str] = []
    if summary.get("test"):
        lines.append(held_out_line(summary["test"], summary["interaction"]))
    first, last = summary.get("first"), summary.get("last")
    if first and last:
        n = int(first["problems"])

        def se(p: float) -> str:  # the binomial standard error of a success rate on n problems
            return f"± {binomial_se(p, n):.1%}"

        lines.append(f"validation success (greedy, {n} validation problems drawn at random, {summary['interaction']}): start "
                     f"{first['greedy_success']:.1%} {se(first['greedy_success'])} (step {first['step']}) -> final "
                     f"{last['greedy_success']:.1%} {se(last['greedy_success'])} (step {last['step']})")
        best = summary.get("best")
        if best:
            lines.append(f"best validation success (greedy): {best['greedy_success']:.1%} at step {best['step']}, "
                         f"saved in {summary['best_dir']} (200 validation problems do not rank checkpoints reliably: the "
                         "run's model is final/, docs/results/checkpoint_ranking.md)")
        if "sampled_success" in last:
            lines.append(f"validation success (sampled, T={opts.temperature}, {opts.eval_samples}/problem): "
                         f"start {first['sampled_success']:.1%} -> final {last['sampled_success']:.1%}; "
                         f"pass@{opts.eval_samples} {first['pass_at_k']:.1%} -> {last['pass_at_k']:.1%}")
    if prof := summary.get("step_profile"):
        lines.append("seconds per GRPO step by part: " + ", ".join(f"{p.replace('_', ' ')} {prof[p]:.2f}" for p in PARTS)
                     + f" (step {prof['step']:.2f})")
    if summary.get("seconds_per_step"):
        lines.append(f"seconds per GRPO step: {summary['seconds_per_step']:.2f}; "
                     f"generated tokens/s (validation generate): {summary.get('eval_tokens_per_s', 0):.0f}")
    return lines
