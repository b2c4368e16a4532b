"""``countdown-gym leaderboard submit|score|check`` (also ``python -m countdown_gym.leaderboard ...``).

* ``submit``: evaluate a Countdown-v0 policy (``--policy module:name`` or ``file.py:name``) or a
  saved MaskablePPO model (``--sb3 model.zip``) on a frozen split and write a submission; with
  ``--interaction multi-turn`` the policy is a text policy ``(message, info) -> turn`` played on
  CountdownMultiTurn-v0.
  Language models write their submissions with ``baselines/llm_eval.py`` (same file format).
* ``score``: re-verify every file in ``<dir>/submissions/`` and write ``<dir>/LEADERBOARD.md``
  and ``<dir>/leaderboard.png``; with file arguments, score just those and print the results.
* ``check``: exit 1 if any submission is rejected or ``LEADERBOARD.md`` is not what ``score``
  would write now (CI runs it through the test suite).

Exit codes: 0 done; 1 a failure (a rejected submission, a stale leaderboard, a policy that fails
while it plays); 2 a usage error (a malformed or contradictory option, a ``--policy``, ``--sb3``
or ``--wrapper`` that does not load, metadata the submission format refuses), reported before
anything is played.
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import sys
from pathlib import Path

from countdown_gym.leaderboard.score import (
    Rejection,
    Scores,
    plain_text,
    plot,
    render_markdown,
    score_directory,
    score_file,
)
from countdown_gym.splits import SPLIT_SPEC, SPLITS
from countdown_gym.turn_game import DEFAULT_MAX_TURNS

MARKDOWN = "LEADERBOARD.md"
PNG = "leaderboard.png"
SUBMISSIONS = "submissions"


PROG = "countdown-gym leaderboard"


class UsageError(ValueError):
    """The command line is wrong: exit code 2 with the command's usage."""


def _leaderboard_dir(path: str) -> Path:
    d = Path(path)
    if not (d / SUBMISSIONS).is_dir():
        raise UsageError(f"{d / SUBMISSIONS} is not a directory; run from the repository root or pass --dir")
    return d


def _summary(r: Scores | Rejection) -> str:
    if isinstance(r, Rejection):
        return f"REJECTED {r.path}: {plain_text(r.reason)}"
    passk = f", pass@{r.k} {r.pass_at_k:.3f}" if r.pass_at_k is not None else ""
    inv = f", invalid steps {r.invalid_step_rate:.3f}" if r.invalid_step_rate is not None else ""
    line = (
        f"{r.path}: {plain_text(r.header['agent'])} on {r.header['preset']}/{r.header['split']}: pass@1 {r.pass_at_1:.3f}{passk}, "
        f"per-sample {r.per_sample:.3f}{inv}, mean length {r.mean_length:.0f}"
    )
    return line + "".join(f"\n  note: {plain_text(n)}" for n in r.claim_notes)


def cmd_score(args: argparse.Namespace) -> int:
    if args.files:
        results = [score_file(f, progress=not args.no_progress) for f in args.files]
        for r in results:
            print(_summary(r))
        return 1 if any(isinstance(r, Rejection) for r in results) else 0
    d = _leaderboard_dir(args.dir)
    results = score_directory(d / SUBMISSIONS, progress=not args.no_progress)
    (d / MARKDOWN).write_text(render_markdown(results, d, PNG), encoding="utf-8", newline="\n")
    png = plot(results, d / PNG)
    for r in results:
        print(_summary(r), file=sys.stderr if isinstance(r, Rejection) else sys.stdout)
    print(f"wrote {d / MARKDOWN}" + (f" and {png}" if png else ""))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    d = _leaderboard_dir(args.dir)
    results = score_directory(d / SUBMISSIONS)
    problems = [f"rejected: {r.path}: {plain_text(r.reason)}" for r in results if isinstance(r, Rejection)]
    expected = render_markdown(results, d, PNG)
    md = d / MARKDOWN
    if not md.exists():
        problems.append(f"{md} is missing; run countdown-gym leaderboard score")
    elif md.read_text(encoding="utf-8") != expected:
        problems.append(f"{md} is stale (it differs from the re-scored submissions); run countdown-gym leaderboard score")
    if any(isinstance(r, Scores) for r in results):
        if not (d / PNG).exists():
            problems.append(f"{d / PNG} is missing; run countdown-gym leaderboard score")
        else:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:  # the chart is redrawn from the re-scored results
                fresh = plot(results, Path(tmp) / PNG)
                if fresh is not None and fresh.read_bytes() != (d / PNG).read_bytes():
                    problems.append(f"{d / PNG} is stale (it is not the chart of the re-scored submissions); "
                                    "run countdown-gym leaderboard score")
    for p in problems:
        print(p, file=sys.stderr)
    n = sum(isinstance(r, Scores) for r in results)
    if not problems:
        print(f"ok: {n} submissions re-verified, {md} is up to date")
    return 1 if problems else 0


def cmd_submit(args: argparse.Namespace, argv: list[str]) -> int:
    from countdown_gym.leaderboard.agents import load_object, load_policy, load_sb3_model, sb3_policy, submit_policy

    if args.interaction == "multi-turn" and args.sb3:
        raise UsageError("--sb3 models play Countdown-v0; --interaction multi-turn takes a text --policy")
    if args.interaction == "multi-turn" and args.wrapper:
        raise UsageError("--wrapper applies to Countdown-v0 policies; a multi-turn text policy takes none")
    if args.max_turns < 1:
        raise UsageError(f"--max-turns must be >= 1, got {args.max_turns}")
    wrapper = _load(load_object, args.wrapper, "wrapper") if args.wrapper else None
    if args.wrapper_kwargs:
        if wrapper is None:
            raise UsageError("--wrapper-kwargs needs --wrapper")
        try:
            kwargs = json.loads(args.wrapper_kwargs)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--wrapper-kwargs must be a JSON object: {exc}") from None
        if not isinstance(kwargs, dict):
            raise UsageError(f"--wrapper-kwargs must be a JSON object, got {args.wrapper_kwargs!r}")
        wrapper = functools.partial(wrapper, **kwargs)
    if args.sb3:
        if args.temperature not in (0.0, 1.0):
            raise UsageError(f"--temperature with --sb3 must be 0 (deterministic actions) or 1 (sampled from the "
                             f"policy's own distribution), got {args.temperature}")
        model = _load(load_sb3_model, args.sb3)

        def make(seed: int):
            model.set_random_seed(seed)  # sampled actions repeat for the same --seed
            args.started = True
            return sb3_policy(model, deterministic=args.temperature == 0)
    else:

        def make(seed: int):
            policy = _load(load_policy, args.policy, seed=seed)
            args.started = True  # from here on an error is the policy's failure, not the command line's
            return policy

    path, evals = submit_policy(
        make, args.out, preset=args.preset, split=args.split, k=args.k, seed=args.seed,
        temperature=args.temperature, progress=not args.no_progress, interaction=args.interaction,
        max_turns=args.max_turns, command="python -m countdown_gym.leaderboard " + shlex.join(argv), compute=args.compute, wrapper=wrapper,
        agent=args.agent, authors=args.authors, model=args.model, model_size=args.model_size,
        method=args.method, reward_variant=args.reward_variant, notes=args.notes,
    )  # fmt: skip
    print(_summary(score_file(path)))
    print(f"wrote {path}")
    return 0


def _load(loader, *a, **kw):
    """``loader(*a, **kw)``; a spec or path that does not load is a usage error."""
    try:
        return loader(*a, **kw)
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    exit_codes = __doc__.split("\n\n")[-1].strip().replace("``", "'")
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0], epilog=exit_codes)
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("score", help="re-verify submissions; write LEADERBOARD.md and leaderboard.png", epilog=exit_codes)
    s.add_argument("files", nargs="*", help="score only these files and print the results (writes nothing)")
    s.add_argument("--dir", default="leaderboard", help="leaderboard directory (default: leaderboard)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(subparser=s)

    c = sub.add_parser("check", help="exit 1 if a submission is invalid or LEADERBOARD.md is stale", epilog=exit_codes)
    c.add_argument("--dir", default="leaderboard", help="leaderboard directory (default: leaderboard)")
    c.set_defaults(subparser=c)

    m = sub.add_parser("submit", help="evaluate a Countdown-v0 policy, a saved MaskablePPO model or a multi-turn text "
                       "policy; write a submission", epilog=exit_codes)
    src = m.add_mutually_exclusive_group(required=True)
    src.add_argument("--policy", help="'module:name' or 'file.py:name': a policy (obs, info) -> action, or a class taking seed")
    src.add_argument("--sb3", help="path of a saved sb3-contrib MaskablePPO model (.zip)")
    m.add_argument("--wrapper", help="'module:name' or 'file.py:name': a Gymnasium wrapper class applied to Countdown-v0 "
                   "(the observation wrapper the model was trained behind)")
    m.add_argument("--wrapper-kwargs", default="", help='keyword arguments of the wrapper as JSON, e.g. \'{"lookahead": 2}\'')
    m.add_argument("--interaction", default="moves", choices=("moves", "multi-turn"),
                   help="moves: a Countdown-v0 policy (obs, info) -> action; multi-turn: a text policy (message, info) -> "
                        "turn on CountdownMultiTurn-v0 (shown in the table's mode column)")
    m.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="multi-turn: the turn budget of an episode")
    m.add_argument("--preset", default="longproc-0.5k", choices=sorted(SPLIT_SPEC))
    m.add_argument("--split", default="test", choices=SPLITS)
    m.add_argument("--out", required=True, help="submission file to write, e.g. leaderboard/submissions/<agent>.<preset>.<split>.jsonl")
    m.add_argument("--agent", required=True, help="short agent name shown in the table")
    m.add_argument("--authors", required=True, help="names and a contact")
    m.add_argument("--model", required=True, help="model / policy description")
    m.add_argument("--model-size", default="n/a", help="parameter count, e.g. 9.5k")
    m.add_argument("--method", required=True, help="training method, e.g. 'MaskablePPO'")
    m.add_argument("--reward-variant", required=True, help="reward used in training: sparse, oracle-perfect, critic, none, ...")
    m.add_argument("--k", type=int, default=1, help="episodes per problem (pass@k)")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--temperature", type=float, default=0.0, help="0: deterministic actions; 1: actions sampled from the SB3 policy's distribution")
    m.add_argument("--compute", default=None, help="compute notes (default: cores and measured wall time)")
    m.add_argument("--notes", default=None)
    m.add_argument("--no-progress", action="store_true")
    m.set_defaults(subparser=m)
    return parser


def main(argv: list[str] | None = None) -> int:
    """0 done, 1 failure, 2 usage error (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = args.command != "submit"  # submit: errors before the first episode are the command line's
    try:
        if args.command == "score":
            return cmd_score(args)
        if args.command == "check":
            return cmd_check(args)
        return cmd_submit(args, argv)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        if isinstance(e, UsageError) or (isinstance(e, ValueError) and not args.started):
            from countdown_gym.cli import usage_error

            return usage_error(args.subparser, str(e))
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
