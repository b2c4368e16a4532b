"""``countdown-gym leaderboard submit|score|check`` (also ``python -m countdown_gym.leaderboard ...``).

``submit`` plays a Countdown-v0 policy, a saved MaskablePPO model or (``--interaction multi-turn``) a text policy
on a frozen split and writes a submission (language models: ``baselines/llm_eval.py``); ``score`` re-verifies
``<dir>/submissions/`` and writes ``LEADERBOARD.md``, ``leaderboard.png`` and ``leaderboard.html`` (with file
arguments it scores just those and prints the results); ``check`` exits 1 if a submission is rejected or one of
those files is not what ``score`` would write now (CI runs it through the test suite).

Exit codes: 0 done; 1 a failure (a rejected submission, a stale leaderboard, a policy that fails
while it plays); 2 a usage error (a malformed or contradictory option, a ``--policy``, ``--sb3``
or ``--wrapper`` that does not load, metadata the submission format refuses), reported before
anything is played; 130 Ctrl-C; 141 output pipe closed.
"""

from __future__ import annotations

import functools
import shlex
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import tyro

from countdown_gym import dataclass_cli
from countdown_gym.data.splits import SPLIT_SPEC
from countdown_gym.dataclass_cli import finish_together, usage_error, write_together
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS
from countdown_gym.leaderboard.html import render_html
from countdown_gym.leaderboard.names import agent_key, display_name, plain_text
from countdown_gym.leaderboard.score import Rejection, Scores, plot, render_markdown, score_directory, score_file

MARKDOWN = "LEADERBOARD.md"
PNG = "leaderboard.png"
HTML = "leaderboard.html"
SUBMISSIONS = "submissions"


PROG = "countdown-gym leaderboard"
EXIT_CODES = __doc__.split("\n\n")[-1].strip().replace("``", "'")


@dataclass
class ScoreOptions:
    """Re-verify submissions; write LEADERBOARD.md, leaderboard.png and leaderboard.html."""

    files: Annotated[tuple[str, ...], tyro.conf.Positional, tyro.conf.arg(metavar="[FILE ...]")] = ()
    """score only these files and print the results (writes nothing)"""
    dir: str = "leaderboard"
    """leaderboard directory"""
    progress: bool = True
    """a progress bar"""


@dataclass
class CheckOptions:
    """Exit 1 if a submission is invalid or LEADERBOARD.md is stale."""

    dir: str = "leaderboard"
    """leaderboard directory"""


@dataclass
class SubmitOptions:
    """Evaluate a Countdown-v0 policy, a saved MaskablePPO model or a multi-turn text policy; write a submission."""

    out: str
    """submission file to write, e.g. leaderboard/submissions/<agent>.<preset>.<split>.jsonl"""
    agent: str
    """short agent name shown in the table"""
    authors: str
    """names and a contact"""
    model: str
    """model / policy description"""
    method: str
    """training method, e.g. 'MaskablePPO'"""
    reward_variant: str
    """reward used in training: sparse, oracle-perfect, critic, none, ..."""
    policy: str | None = None
    """'module:name' or 'file.py:name': a policy (obs, info) -> action, or a class taking seed (or --sb3)"""
    sb3: str | None = None
    """path of a saved sb3-contrib MaskablePPO model (.zip) (or --policy)"""
    wrapper: str | None = None
    """'module:name' or 'file.py:name': a Gymnasium wrapper class applied to Countdown-v0 (the observation wrapper
    the model was trained behind)"""
    wrapper_kwargs: dict | None = None
    """keyword arguments of the wrapper as a JSON object, e.g. '{"lookahead": 2}'"""
    interaction: Literal["moves", "multi-turn"] = "moves"
    """moves: a Countdown-v0 policy (obs, info) -> action; multi-turn: a text policy (message, info) -> turn on
    CountdownMultiTurn-v0 (shown in the table's mode column)"""
    max_turns: int = DEFAULT_MAX_TURNS
    """multi-turn: the turn budget of an episode"""
    preset: str = "longproc-0.5k"
    """frozen split preset"""
    split: Literal["train", "validation", "test"] = "test"
    model_size: str = "n/a"
    """parameter count, e.g. 9.5k"""
    k: int = 1
    """episodes per problem (pass@k)"""
    seed: int = 0
    """seed of the first episode of each problem (run r plays seed + r)"""
    temperature: float = 0.0
    """0: deterministic actions; 1: actions sampled from the SB3 policy's distribution"""
    compute: str | None = None
    """compute notes (default: cores and measured wall time)"""
    notes: str | None = None
    progress: bool = True
    """a progress bar"""

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.sb3 is None):
            raise ValueError("give one of --policy and --sb3")
        if not agent_key(self.agent):  # the board refuses such a file: refused here, before any episode is played
            raise ValueError(f"--agent {self.agent!r} shows as nothing (only control, invisible or combining characters)")
        dataclass_cli.check_choice(self, "preset", sorted(SPLIT_SPEC))
        dataclass_cli.check_min(self, 1, "k", "max_turns")
        dataclass_cli.check_min(self, 0, "seed", "temperature")
        if self.interaction == "multi-turn" and self.sb3:
            raise ValueError("--sb3 models play Countdown-v0; --interaction multi-turn takes a text --policy")
        if self.interaction == "multi-turn" and self.wrapper:
            raise ValueError("--wrapper applies to Countdown-v0 policies; a multi-turn text policy takes none")
        if self.wrapper_kwargs is not None and self.wrapper is None:
            raise ValueError("--wrapper-kwargs needs --wrapper")
        if self.sb3 and self.temperature not in (0.0, 1.0):
            raise ValueError(f"--temperature with --sb3 must be 0 (deterministic actions) or 1 (sampled from the "
                             f"policy's own distribution), got {self.temperature}")


class _BadCommandLine(ValueError):
    """The command line is wrong, found while running: reported by dataclass_cli.usage_error (exit code 2)."""


def _leaderboard_dir(path: str) -> Path:
    d = Path(path)
    if not (d / SUBMISSIONS).is_dir():
        raise _BadCommandLine(f"{d / SUBMISSIONS} is not a directory; run from the repository root or pass --dir")
    return d


def _summary(r: Scores | Rejection) -> str:
    if isinstance(r, Rejection):
        return f"REJECTED {plain_text(r.path)}: {plain_text(r.reason)}"  # a file name may hold a line break or ESC
    passk = f", pass@{r.k} {r.pass_at_k:.3f}" if r.pass_at_k is not None else ""
    inv = f", invalid steps {r.invalid_step_rate:.3f}" if r.invalid_step_rate is not None else ""
    line = (
        f"{plain_text(r.path)}: {display_name(r.header['agent'])} on {r.header['preset']}/{r.header['split']}: pass@1 {r.pass_at_1:.3f}{passk}, "
        f"per-sample {r.per_sample:.3f}{inv}, mean length {r.mean_length:.0f}"
    )
    return line + "".join(f"\n  note: {plain_text(n)}" for n in r.claim_notes)


def _board(results: list[Scores | Rejection], d: Path) -> dict[Path, str | bytes | None]:
    """What ``score`` writes in ``d``, in the order it puts them in place: the table, the chart (redrawn from
    ``results``; None: no valid submission, so no chart) and the page last."""
    with tempfile.TemporaryDirectory() as charts:
        png = plot(results, Path(charts) / PNG)
        chart = png.read_bytes() if png else None
    return {d / MARKDOWN: render_markdown(results, d, PNG), d / PNG: chart, d / HTML: render_html(results, d, chart)}


def cmd_score(args: ScoreOptions) -> int:
    if args.files:
        results = [score_file(f, progress=args.progress) for f in args.files]
        for r in results:
            print(_summary(r))
        return 1 if any(isinstance(r, Rejection) for r in results) else 0
    d = _leaderboard_dir(args.dir)
    results = score_directory(d / SUBMISSIONS, progress=args.progress)
    board = _board(results, d)
    try:  # all or none, the page last (a FIFO or link there is replaced, never opened); a kill is finished next run
        write_together({path: data for path, data in board.items() if data is not None})
        if board[d / PNG] is None:  # no chart: an old one would show scores that no longer stand
            (d / PNG).unlink(missing_ok=True)
    except OSError as e:
        print(f"{PROG} score: error: cannot write {e.filename2 or e.filename}: {e.strerror or e}", file=sys.stderr)
        return 1
    for r in results:
        print(_summary(r), file=sys.stderr if isinstance(r, Rejection) else sys.stdout)
    print("wrote " + ", ".join(str(path) for path, data in board.items() if data is not None))
    return 0


def cmd_check(args: CheckOptions) -> int:
    d = _leaderboard_dir(args.dir)
    finish_together(d / HTML)  # a score a kill cut short: checked as it meant to leave the board
    results = score_directory(d / SUBMISSIONS)
    problems = [f"rejected: {plain_text(r.path)}: {plain_text(r.reason)}" for r in results if isinstance(r, Rejection)]
    fix = "; run countdown-gym leaderboard score"
    for path, data in _board(results, d).items():
        if data is None:
            if path.exists() or path.is_symlink():
                problems.append(f"{path} is stale (no submission is valid, so there is no chart){fix}")
        elif not path.is_file():
            problems.append(f"{path} is missing{fix}")
        elif (path.read_bytes() if isinstance(data, bytes) else path.read_text(encoding="utf-8", errors="replace")) != data:
            problems.append(f"{path} is stale (it differs from the re-scored submissions){fix}")
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"ok: {sum(isinstance(r, Scores) for r in results)} submissions re-verified, {d / MARKDOWN} is up to date")
    return 1 if problems else 0


def cmd_submit(args: SubmitOptions, argv: list[str], started: list[bool]) -> int:
    """Play and write; ``started[0]`` turns True once the first episode starts (a ``ValueError`` before that is the
    command line's)."""
    from countdown_gym.leaderboard.agents import load_object, load_policy, load_sb3_model, sb3_policy, submit_policy

    wrapper = _load(load_object, args.wrapper, "wrapper") if args.wrapper else None
    if wrapper is not None and args.wrapper_kwargs is not None:
        wrapper = functools.partial(wrapper, **args.wrapper_kwargs)
    model = _load(load_sb3_model, args.sb3) if args.sb3 else None

    def make(seed: int):
        if model is None:
            policy = _load(load_policy, args.policy, seed=seed)
        else:
            model.set_random_seed(seed)  # sampled actions repeat for the same --seed
            policy = sb3_policy(model, deterministic=args.temperature == 0)
        started[0] = True  # from here on an error is the policy's failure, not the command line's
        return policy

    path, evals = submit_policy(
        make, args.out, preset=args.preset, split=args.split, k=args.k, seed=args.seed,
        temperature=args.temperature, progress=args.progress, interaction=args.interaction,
        max_turns=args.max_turns, command="python -m countdown_gym.leaderboard submit " + shlex.join(argv), compute=args.compute, wrapper=wrapper,
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
        raise _BadCommandLine(str(e)) from None


def _command(name: str, cls: type, body: Callable[..., int]) -> tuple[str, Callable[[list[str]], int]]:
    """``name``'s entry for :func:`dataclass_cli.dispatch`: its options parsed through ``cls``, then ``body``."""
    prog = f"{PROG} {name}"

    def run(rest: list[str]) -> int:
        started = [name != "submit"]  # submit: errors before the first episode are the command line's

        def guarded(options) -> int:
            try:
                return body(options, rest, started) if name == "submit" else body(options)
            except (ValueError, RuntimeError) as e:
                if isinstance(e, _BadCommandLine) or (isinstance(e, ValueError) and not started[0]):
                    usage_error(str(e), prog=prog)
                print(f"{prog}: error: {e}", file=sys.stderr)
                return 1
            except OSError as e:  # dataclass_cli.run's one error line (1), naming --out when the error names no file
                e.filename = e.filename or getattr(options, "out", None)
                raise

        return dataclass_cli.run(cls, rest, guarded, prog=prog, description=f"{cls.__doc__}\n\n{EXIT_CODES}")

    return (cls.__doc__ or "").rstrip("."), run


COMMANDS = {
    "score": _command("score", ScoreOptions, cmd_score),
    "check": _command("check", CheckOptions, cmd_check),
    "submit": _command("submit", SubmitOptions, cmd_submit),
}


def main(argv: list[str] | None = None) -> int:
    """0 done, 1 failure, 2 usage error (see the module docstring)."""
    return dataclass_cli.dispatch(PROG, COMMANDS, argv, epilog=EXIT_CODES,
                                  description="Leaderboard tools: re-score the submissions, check the table, submit a policy.")


if __name__ == "__main__":
    sys.exit(main())
