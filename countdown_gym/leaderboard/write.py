"""Writing a leaderboard submission: :func:`write_submission` (and its header, :func:`build_header`), checked by
reading it back with :func:`~countdown_gym.leaderboard.submission.read_submission` before it replaces the file."""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from countdown_gym.data.splits import load_split, split_sha256
from countdown_gym.dataclass_cli import written_aside
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import OPERATORS
from countdown_gym.leaderboard.submission import (
    FORMAT,
    FORMAT_VERSION,
    SubmissionError,
    normalize_move,
    read_submission,
)


def _is_move_sequence(x: Any) -> bool:
    if isinstance(x, (str, bytes)) or not isinstance(x, Sequence):
        return False
    return all(
        not isinstance(m, (str, bytes)) and isinstance(m, Sequence) and len(m) == 4 and m[1] in OPERATORS for m in x
    )


def _answer_list(entry: Any, where: str) -> tuple[str, list[Any]]:
    """``(kind, answers)`` for one problem's answers."""
    if isinstance(entry, str):
        return "completions", [entry]
    if isinstance(entry, (bytes, bytearray)) or not isinstance(entry, Sequence) or len(entry) == 0:
        raise ValueError(f"{where}: answers must be a non-empty list of completions or of move sequences, got {entry!r:.100}")
    if all(isinstance(a, str) for a in entry):
        return "completions", list(entry)
    if _is_move_sequence(entry):  # one move sequence given bare
        return "moves", [[normalize_move(m) for m in entry]]
    if all(_is_move_sequence(a) for a in entry):
        return "moves", [[normalize_move(m) for m in a] for a in entry]
    raise ValueError(
        f"{where}: answers must be all completions (str) or all move sequences [[a, op, b, result], ...], got {entry!r:.100}"
    )


def build_header(*, agent: str, authors: str, model: str, model_size: str, method: str, reward_variant: str,
                 preset: str, split: str, sampling: Mapping[str, Any], compute: str, command: str, answer_kind: str,
                 claimed: Mapping[str, float] | None = None, notes: str | None = None, date: str | None = None,
                 interaction: str | None = None) -> dict[str, Any]:
    """The header object of a submission (the split hash and package version filled in)."""
    from countdown_gym import __version__

    header: dict[str, Any] = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "agent": agent, "authors": authors, "model": model,
        "model_size": model_size, "method": method, "reward_variant": reward_variant, "preset": preset, "split": split,
        "split_sha256": split_sha256(preset, split), "package_version": __version__,
        "date": date or _dt.datetime.now(_dt.UTC).date().isoformat(),
        "sampling": {str(k): v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v  # numpy scalars
                     for k, v in sampling.items()},
        "compute": compute, "command": command, "answer_kind": answer_kind,
    }  # fmt: skip
    optional = {"claimed": {str(k): float(v) for k, v in (claimed or {}).items()}, "notes": notes, "interaction": interaction}
    return header | {key: value for key, value in optional.items() if value}


def write_submission(path: str | os.PathLike[str], *, agent: str, authors: str, model: str, model_size: str | None,
                     method: str, reward_variant: str, preset: str, split: str,
                     answers: Sequence[Any] | Mapping[str, Any] | None = None, compute: str, command: str,
                     moves: Sequence[Sequence[Sequence[Any]]] | None = None, completions: Sequence[str] | None = None,
                     problems: Sequence[Problem] | None = None, sampling: Mapping[str, Any] | None = None,
                     claimed: Mapping[str, float] | None = None,
                     claimed_correct: Sequence[Sequence[bool]] | Mapping[str, Sequence[bool]] | None = None,
                     notes: str | None = None, date: str | None = None, interaction: str | None = None) -> Path:
    """Write a submission for ``preset``/``split``, checked by reading it back before it replaces ``path``.

    Args:
        answers: One entry per problem of ``load_split(preset, split)`` in split order (or a mapping id -> entry): a
            list of completions (a bare ``str`` is one) or of move sequences ``[(a, op, b, result), ...]``; the first
            answer is the pass@1 answer. Or instead ``moves`` (one move sequence per problem) or ``completions``.
        problems: The problems the entries belong to, in their order (the whole split); default the split's order.
        model_size: ``None`` is written as ``"n/a"``.
        sampling: ``{"k": ..., "temperature": ...}`` and any other settings; ``k`` defaults to the fewest answers
            given for a problem, ``temperature`` to 0.
        claimed: Your own numbers (e.g. ``{"pass@1": 0.93}``), reported, never ranked; ``claimed_correct``: a
            per-answer self-assessment laid out as ``answers``.
        date: ``YYYY-MM-DD``, default today (UTC); ``interaction``: ``"single-pass"``, ``"multi-turn"`` or ``"moves"``
            (default from the answers' kind).

    Returns the path. Raises ``ValueError`` for answers that do not fit the split, :class:`SubmissionError` when
    the file would not pass :func:`read_submission`.
    """
    given = [name for name, v in (("answers", answers), ("moves", moves), ("completions", completions)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"pass exactly one of answers=, moves=, completions= (got {given or 'none'})")
    if moves is not None:
        answers = [[list(seq)] for seq in moves]
    elif completions is not None:
        answers = [[c] for c in completions]
    if problems is not None:
        answers = _by_id(answers, problems, "answers")
        if claimed_correct is not None:
            claimed_correct = _by_id(claimed_correct, problems, "claimed_correct")
    problems = load_split(preset, split)
    entries = _align(answers, problems, "answers")
    claims = _align(claimed_correct, problems, "claimed_correct") if claimed_correct is not None else None
    kinds: set[str] = set()
    lines: list[dict[str, Any]] = []
    for i, (p, entry) in enumerate(zip(problems, entries, strict=True)):
        kind, items = _answer_list(entry, f"answers for {p.id}")
        kinds.add(kind)
        line: dict[str, Any] = {"id": p.id, "numbers": list(p.numbers), "target": p.target, kind: items}
        if claims is not None:
            if any(c not in (True, False) for c in claims[i]):  # bool("false") would be True
                raise ValueError(f"claimed_correct for {p.id}: each value must be True or False, got {claims[i]!r:.100}")
            line["claimed_correct"] = [bool(c) for c in claims[i]]
        lines.append(line)
    if len(kinds) != 1:
        raise ValueError("answers mix completions and move sequences; a submission holds one kind")
    sampling = dict(sampling or {})
    sampling.setdefault("k", min(len(line[next(iter(kinds))]) for line in lines))
    sampling.setdefault("temperature", 0.0)
    header = build_header(
        agent=agent, authors=authors, model=model, model_size="n/a" if model_size is None else model_size,
        method=method, reward_variant=reward_variant, preset=preset, split=split, sampling=sampling, compute=compute,
        command=command, answer_kind=kinds.pop(), claimed=claimed, notes=notes, date=date, interaction=interaction,
    )  # fmt: skip
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with written_aside(out) as tmp:  # a failed write or check leaves nothing behind
        with tmp.open("w", encoding="utf-8", newline="\n") as f:
            for obj in [header, *lines]:
                f.write(json.dumps(obj, separators=(",", ":")) + "\n")  # ASCII: any str round-trips
        try:
            read_submission(tmp)
        except SubmissionError as e:
            raise SubmissionError(out, e.reason) from None
    return out


def _by_id(values: Any, problems: Sequence[Problem], what: str) -> dict[str, Any]:
    if isinstance(values, (Mapping, str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"with problems=..., {what} must be a list in the same order as the problems")
    if len(values) != len(problems):
        raise ValueError(f"{what} has {len(values)} entries for {len(problems)} problems")
    out: dict[str, Any] = {}
    for p, v in zip(problems, values, strict=True):
        if not isinstance(p, Problem) or p.id is None:
            raise ValueError(f"problems must be Problems of the frozen split (with ids), got {p!r:.100}")
        if p.id in out:
            raise ValueError(f"problem {p.id} appears twice in problems")
        out[p.id] = v
    return out


def _align(values: Sequence[Any] | Mapping[str, Any], problems: list[Problem], what: str) -> list[Any]:
    if isinstance(values, Mapping):
        missing = [p.id for p in problems if p.id not in values]
        extra = set(values) - {p.id for p in problems}
        if missing or extra:
            raise ValueError(f"{what}: {len(missing)} problem ids missing (e.g. {missing[:3]}), {len(extra)} unknown ids")
        return [values[p.id] for p in problems]
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{what} must be a list (one entry per problem) or a mapping id -> entry")
    if len(values) != len(problems):
        raise ValueError(f"{what} has {len(values)} entries; the split has {len(problems)} problems")
    return list(values)
