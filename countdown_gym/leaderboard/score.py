"""Re-score leaderboard submissions and write ``LEADERBOARD.md`` and ``leaderboard.png``.

Every answer is re-verified with :func:`countdown_gym.game.verifier.verify`; numbers a file claims are only compared
with the re-scored ones, never ranked. A file failing a file-level check is a :class:`Rejection` with its reason; each
file is scored on its own, and no input makes the scorer crash. Metrics: pass@1 (first answer correct); pass@k, the
unbiased estimator ``1 - C(n-c, k) / C(n, k)`` with the header's ``sampling.k`` (when ``k > 1``); per-sample, the
mean over problems of ``c / n``; invalid steps, illegal or miscomputed move lines over all move lines of the first
answers (:func:`countdown_gym.envs.text.replay_completion`); mean length in characters per answer.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from countdown_gym.data.splits import SPLITS
from countdown_gym.dataclass_cli import file_kind
from countdown_gym.game.problem import Problem
from countdown_gym.game.verifier import verify
from countdown_gym.leaderboard.names import agent_key, display_name, look_alike_key, plain_text
from countdown_gym.leaderboard.submission import MAX_COMPLETION_CHARS, Submission, SubmissionError, read_submission

COLUMNS: tuple[tuple[str, str], ...] = (
    ("rank", "num"), ("agent", "text"), ("method", "text"), ("mode", "text"), ("model (size)", "text"),
    ("reward", "text"), ("pass@1", "num"), ("pass@k", "num"), ("per-sample", "num"), ("invalid steps", "num"),
    ("length", "num"), ("answers", "num"), ("authors", "text"), ("command", "text"), ("file", "text"),
)
"""The board's columns (``LEADERBOARD.md`` and the page) and how each sorts."""
CLAIM_TOLERANCE = 0.0005
"""A claimed metric further than this from the re-scored value is reported."""


@dataclass(frozen=True)
class AnswerScore:
    """One answer, re-verified; ``moves``: the move lines the text env replayed (``None``: not replayed)."""

    correct: bool
    reason: str
    length: int
    moves: int | None = None
    invalid_moves: int | None = None


@dataclass
class Scores:
    """The re-scored results of one valid submission."""

    path: Path
    header: dict[str, Any]
    num_problems: int
    num_answers: int
    pass_at_1: float
    pass_at_k: float | None
    k: int
    per_sample: float
    invalid_step_rate: float | None
    mean_length: float
    failure_reasons: dict[str, int] = field(default_factory=dict)
    claim_notes: list[str] = field(default_factory=list)

    @property
    def group(self) -> tuple[str, str]:
        return (self.header["preset"], self.header["split"])


@dataclass(frozen=True)
class Rejection:
    """A file that could not be scored, with the reason."""

    path: Path
    reason: str


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` answers of which ``c`` are correct (``k <= n``)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return float(_pass_at_k(n, c, k))


def _pass_at_k(n: int, c: int, k: int) -> Fraction:
    if n - c < k:
        return Fraction(1)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


MAX_REPLAY_LINES = 2_000
"""Answers with more lines are verified but not replayed for the invalid-step count (a LongProc 8k trace has well
under 1,000), so junk lines cannot make scoring slow; a submission with such a first answer has no invalid-step rate."""


def score_answer(problem: Problem, text: str, replay: Callable[..., Any] | None = None) -> AnswerScore:
    """Verify one answer text (never raises; a verifier failure scores it wrong)."""
    if len(text) > MAX_COMPLETION_CHARS:
        return AnswerScore(False, "completion_too_long", len(text))
    try:
        verdict = verify(problem, text)
        correct, reason = verdict.correct, verdict.reason
    except Exception as e:  # noqa: BLE001 - a verifier bug must not crash the scorer
        correct, reason = False, f"verifier_error:{type(e).__name__}"
    moves = invalid = None
    if replay is not None and text.count("\n") < MAX_REPLAY_LINES:
        with contextlib.suppress(Exception):  # the step count is optional; never fail the answer on it
            r = replay(problem, text)
            moves, invalid = len(r.transitions), int(r.invalid_steps)
    return AnswerScore(correct, reason, len(text), moves, invalid)


def score_submission(sub: Submission, progress: bool = False) -> Scores:
    """Re-verify every answer of a valid submission and compute its metrics."""
    from tqdm import tqdm

    from countdown_gym.envs.text import replay_completion as replay

    k = sub.k
    first = per_sample = passk = Fraction(0)
    total_len = total_answers = moves = invalid = unreplayed = 0
    reasons: Counter[str] = Counter()
    claimed_right_scored_wrong = claimed_wrong_scored_right = 0
    for pa in tqdm(sub.answers, desc=sub.path.name, disable=not progress, leave=False):
        again = functools.cache(functools.partial(score_answer, pa.problem))  # a repeated answer is verified once
        results = [score_answer(pa.problem, pa.texts[0], replay), *map(again, pa.texts[1:])]  # replayed: the first
        c = sum(r.correct for r in results)
        n = len(results)
        first += results[0].correct
        per_sample += Fraction(c, n)
        passk += _pass_at_k(n, c, k)
        total_answers += n
        total_len += sum(r.length for r in results)
        reasons.update(r.reason for r in results if not r.correct)
        unreplayed += results[0].moves is None  # the only answer replayed
        moves += results[0].moves or 0
        invalid += results[0].invalid_moves or 0
        if pa.claimed_correct is not None:
            for claim, r in zip(pa.claimed_correct, results, strict=True):
                claimed_right_scored_wrong += claim and not r.correct
                claimed_wrong_scored_right += (not claim) and r.correct
    m = len(sub.answers)
    scores = Scores(
        path=sub.path, header=sub.header, num_problems=m, num_answers=total_answers, pass_at_1=float(first / m),
        pass_at_k=float(passk / m) if k > 1 else None, k=k, per_sample=float(per_sample / m),
        invalid_step_rate=invalid / moves if moves and not unreplayed else None, mean_length=total_len / total_answers,
        failure_reasons=dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    )  # fmt: skip
    scores.claim_notes = _claim_notes(scores, claimed_right_scored_wrong, claimed_wrong_scored_right)
    return scores


def _claim_notes(s: Scores, right_wrong: int, wrong_right: int) -> list[str]:
    notes = []
    rescored = {key: value for key, value in (("pass@1", s.pass_at_1), ("per_sample", s.per_sample),
                (f"pass@{s.k}", s.pass_at_k), ("invalid_step_rate", s.invalid_step_rate)) if value is not None}
    for key, value in sorted(s.header.get("claimed", {}).items()):
        if key not in rescored:
            notes.append(f"claimed {_md(key)} = {value:g} was not re-scored (known: {', '.join(sorted(rescored))})")
        elif not math.isfinite(value) or abs(value - rescored[key]) > CLAIM_TOLERANCE:
            notes.append(f"claimed {key} = {value:.4f}, re-scored {rescored[key]:.4f}")
    return notes + [f"{n} answers claimed {claim} were scored {scored}" for n, claim, scored in
                    ((right_wrong, "correct", "wrong"), (wrong_right, "wrong", "correct")) if n]


def score_file(path: str | os.PathLike[str], progress: bool = False) -> Scores | Rejection:
    """Read and score one file; every failure becomes a :class:`Rejection` with the reason."""
    p = Path(path)
    try:
        return score_submission(read_submission(p), progress=progress)
    except SubmissionError as e:
        return Rejection(p, e.reason)
    except Exception as e:  # noqa: BLE001 - no input may crash the scorer
        return Rejection(p, f"could not be scored ({type(e).__name__}: {str(e)[:200]})")


_FILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}\.(?P<preset>[a-z0-9][a-z0-9.-]{0,39})\.(?P<split>[a-z]+)\.jsonl")
"""The naming rule of a submission file: ``<agent>.<preset>.<split>.jsonl``, lower case, no spaces."""


def name_problem(path: Path) -> str | None:
    """Why ``path`` is not a submission file (a link, not a regular file, a name breaking the rule), else None; by
    ``lstat``: a link is never followed, a FIFO never opened."""
    try:
        mode = path.lstat().st_mode
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISLNK(mode):
        return "a symbolic link (submit the file itself)"
    if (kind := file_kind(mode)) is not None:
        return f"{kind}, not a regular file (submit one .jsonl file per agent and split)"
    m = _FILE_NAME.fullmatch(path.name)
    if m is None or m["split"] not in SPLITS:
        return ("file name does not follow <agent>.<preset>.<split>.jsonl (lower-case letters, digits, '-', '_'; "
                f"split one of {list(SPLITS)})")
    return None


def score_directory(directory: str | os.PathLike[str], progress: bool = False) -> list[Scores | Rejection]:
    """Score every entry of ``directory`` but hidden ones (``.gitkeep``); rejected: what :func:`name_problem` refuses
    (links, folders, FIFOs are listed, never skipped) and a second file of an agent (:func:`agent_key`) on a split."""
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"submissions directory not found: {d}")
    results: list[Scores | Rejection] = []
    seen: dict[tuple[str, str, str], tuple[Path, str]] = {}
    for p in sorted(p for p in d.iterdir() if not p.name.startswith(".")):
        problem = name_problem(p)
        if problem is not None:
            results.append(Rejection(p, problem))
            continue
        r = score_file(p, progress=progress)
        if isinstance(r, Scores):
            h = r.header
            key = (agent_key(h["agent"]), str(h["preset"]), str(h["split"]))
            also = (look_alike_key(h["agent"]), *key[1:])
            m = _FILE_NAME.fullmatch(p.name)
            if not key[0]:
                r = Rejection(p, f"agent name {h['agent']!r} shows as nothing (only control, invisible or combining characters)")
            elif (m["preset"], m["split"]) != (key[1], key[2]):
                r = Rejection(p, f"the file name says {m['preset']}/{m['split']}, the header {key[1]}/{key[2]}")
            elif key in seen or also in seen:
                first, name = seen.get(key) or seen[also]
                same = "" if name == h["agent"] else f" (as {name!r}; names equal up to case, width, look-alike " \
                                                       "letters, control or invisible characters and spaces are one agent)"
                r = Rejection(p, f"agent {h['agent']!r} on {key[1]}/{key[2]} is already on the board{same} "
                                 f"({first.name}); one file per agent and split")
            else:
                seen[key] = seen[also] = (p, h["agent"])
        results.append(r)
    return results


# ---- output -------------------------------------------------------------------------------------


_MD_SPECIAL = re.compile(r"([\[\]()!*_#~:$])")
_WWW = re.compile(r"(?i)(www)\.")
_EMAIL_AT = re.compile(r"@(?=[A-Za-z0-9_.\\-]*\.)")
"""An ``@`` that a bare e-mail address could follow (a dot in what comes next)."""


def _md(text: Any, limit: int = 80, code: bool = False) -> str:
    """Untrusted text made safe for one Markdown table cell: one line, no invisible characters, no live links (an
    empty HTML comment after ``@`` splits an e-mail address, which GitHub links even escaped), images, emphasis,
    ``$`` math (GitHub's LaTeX) or HTML. ``code=True``: text inside a code span (only ``|`` and backticks need care)."""
    s = plain_text(text, limit)
    if code:
        return s.replace("|", "\\|").replace("`", "'")
    s = s.replace("\\", "\\\\").replace("|", "\\|").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("`", "'")  # &: an entity such as &#x202e; would put the character back
    s = _WWW.sub(r"\1\\.", _MD_SPECIAL.sub(r"\\\1", s))
    return _EMAIL_AT.sub("@<!-- -->", s)


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _rel(path: Path, base: Path) -> str:
    """``path`` relative to ``base``; a link is named by its own path, never by its target's."""
    return Path(os.path.relpath(path.parent.resolve() / path.name, base.resolve())).as_posix()


def interaction(header: Mapping[str, Any]) -> str:
    """How a submission's answers were produced: its ``interaction`` field, else what its answer kind implies."""
    return header.get("interaction") or ("moves" if header.get("answer_kind") == "moves" else "single-pass")


def ranked(scores: Iterable[Scores]) -> dict[tuple[str, str], list[tuple[int, Scores]]]:
    """``(preset, split) -> [(rank, scores), ...]``: by pass@1, then pass@k, per-sample, name; equal metrics share a
    rank (1, 1, 3, ...)."""
    groups: dict[tuple[str, str], list[Scores]] = {}
    for s in scores:
        groups.setdefault(s.group, []).append(s)

    def metric(s: Scores) -> tuple[float, float, float]:
        return (-round(s.pass_at_1, 9), -round(s.pass_at_k or s.pass_at_1, 9), -round(s.per_sample, 9))

    order = {"test": 0, "validation": 1, "train": 2}
    out: dict[tuple[str, str], list[tuple[int, Scores]]] = {}
    for g in sorted(groups, key=lambda g: (g[0], order.get(g[1], len(SPLITS)))):
        rows = sorted(groups[g], key=lambda s: (metric(s), s.header["agent"], s.path.name))
        ranks: list[tuple[int, Scores]] = []
        for i, s in enumerate(rows):
            rank = ranks[-1][0] if ranks and metric(ranks[-1][1]) == metric(s) else i + 1
            ranks.append((rank, s))
        out[g] = ranks
    return out


def render_markdown(results: list[Scores | Rejection], base: Path, png_name: str | None = "leaderboard.png") -> str:
    """The text of ``LEADERBOARD.md`` (deterministic: no timestamps); links relative to ``base``."""
    scores = [r for r in results if isinstance(r, Scores)]
    rejected = [r for r in results if isinstance(r, Rejection)]
    out = [
        "# countdown-gym leaderboard",
        "",
        "Written by `python -m countdown_gym.leaderboard score` from `leaderboard/submissions/`; do not edit by hand",
        "(`python -m countdown_gym.leaderboard check` fails when this file is stale). Every answer was re-verified",
        "with `countdown_gym.verify`: numbers claimed in a submission are never used. How to submit: `README.md`.",
        "",
        "Columns: pass@1 = first answer correct; pass@k = unbiased estimator with the submission's k (shown when",
        "k > 1); per-sample = mean over problems of the fraction of its answers correct; invalid steps = illegal or miscomputed move lines over",
        "all move lines of the first answers (replayed by the text environment); length = mean characters per answer.",
    ]
    if png_name and scores:
        out += ["", f"![pass@1 per agent]({png_name})"]
    groups = ranked(scores)
    for (preset, split), rows in groups.items():
        n = rows[0][1].num_problems
        out += [
            "",
            f"## {preset} / {split} ({n} problems)",
            "",
            "| " + " | ".join(name for name, _ in COLUMNS) + " |",
            "| " + " | ".join("---:" if kind == "num" else "---" for _, kind in COLUMNS) + " |",
        ]
        for rank, s in rows:
            h = s.header
            passk = "-" if s.pass_at_k is None else f"{s.pass_at_k:.3f} (k={s.k})"
            rel = _rel(s.path, base)
            out.append(
                f"| {rank} | {_md(display_name(h['agent']), 40)} | {_md(h['method'], 60)} | {interaction(h)} "
                f"| {_md(h['model'], 40)} ({_md(h['model_size'], 20)}) "
                f"| {_md(h['reward_variant'], 30)} | {s.pass_at_1:.3f} | {passk} | {s.per_sample:.3f} "
                f"| {_fmt(s.invalid_step_rate)} | {s.mean_length:.0f} | {s.num_answers} | {_md(h['authors'], 60)} "
                f"| `{_md(h['command'], 200, code=True)}` | [{_md(Path(rel).name, 60)}]({rel}) |"
            )
    details = [s for rows in groups.values() for _, s in rows]
    if details:
        out += ["", "## Failure reasons", "", "Verifier reason codes of the wrong answers (most frequent first).", ""]
        for s in details:
            top = ", ".join(f"`{_md(r, 40, code=True)}` {c}" for r, c in list(s.failure_reasons.items())[:6]) or "none"
            out.append(f"- [{_md(s.path.name, 60)}]({_rel(s.path, base)}): {top}")
    out += ["", "## Claims that differ from the re-scored values", ""]
    out += [f"- [{_md(s.path.name, 60)}]({_rel(s.path, base)}): " + "; ".join(s.claim_notes)
            for s in details if s.claim_notes] or ["None."]
    out += ["", "## Rejected submissions", ""]
    out += [f"- `{_md(_rel(r.path, base), 100, code=True)}`: {_md(r.reason, 400)}" for r in rejected] or ["None."]
    return "\n".join(out) + "\n"


def plot(results: list[Scores | Rejection], png: str | os.PathLike[str]) -> Path | None:
    """A bar chart of pass@1 (and pass@k) per agent, one panel per preset and split."""
    groups = ranked([r for r in results if isinstance(r, Scores)])
    if not groups:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heights = [max(1.6, 0.45 * len(rows) + 1.0) for rows in groups.values()]
    fig, axes = plt.subplots(len(groups), 1, figsize=(8, sum(heights)), height_ratios=heights, squeeze=False)
    for ax, ((preset, split), rows) in zip(axes[:, 0], groups.items(), strict=True):
        bars = [s for _, s in rows][::-1]  # the best on top
        y = range(len(bars))
        ax.barh([v + 0.2 for v in y], [float("nan") if s.pass_at_k is None else s.pass_at_k for s in bars], height=0.4,
                color="#9ecae1", label="pass@k")
        ax.barh([v - 0.2 for v in y], [s.pass_at_1 for s in bars], height=0.4, color="#3182bd", label="pass@1")
        for v, s in enumerate(bars):
            ax.text(min(s.pass_at_1, 1.0) + 0.01, v - 0.2, f"{s.pass_at_1:.3f}", va="center", fontsize=8)
            if s.pass_at_k is not None:
                ax.text(min(s.pass_at_k, 1.0) + 0.01, v + 0.2, f"{s.pass_at_k:.3f} (k={s.k})", va="center", fontsize=8)
        ax.set_yticks(list(y), [plain_text(s.header["agent"])[:30].replace("$", r"\$") for s in bars])
        ax.set_xlim(0, 1.15)
        ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_title(f"{preset} / {split} ({rows[0][1].num_problems} problems)", fontsize=10)
        ax.set_xlabel("success rate (re-verified)")
        if any(s.pass_at_k is not None for _, s in rows):
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    out = Path(png)
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out
