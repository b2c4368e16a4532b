"""Leaderboard submission files: their format, and reading them (nothing in them is trusted).

JSON Lines (UTF-8; ``leaderboard/README.md``): line 1 a header object, then one line per problem of the split with
its ``completions`` or ``moves`` (turned into ``<Solution>`` blocks by :func:`moves_to_solution`, so both kinds are
judged by the one verifier). :func:`read_submission` enforces ``schema.json`` and what a schema cannot say (the split
hash, the exact problem list of the frozen split, size limits, UTF-8); any breach raises :class:`SubmissionError`
naming the file, the line and the reason. Writing: :mod:`countdown_gym.leaderboard.write`.
"""

from __future__ import annotations

import datetime
import json
import numbers as _numbers
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from countdown_gym.data.splits import SPLIT_SPEC, SplitIntegrityError, load_split, split_sha256
from countdown_gym.dataclass_cli import strict_json
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import OPERATORS, describe_value, format_number
from countdown_gym.rewards.variants import check_reward_variant

FORMAT = "countdown-gym-submission"
FORMAT_VERSION = 1
MAX_FILE_BYTES = 64 * 1024 * 1024
"""Larger files are rejected before reading (GitHub refuses files over 100 MB anyway)."""
MAX_LINE_BYTES = 8 * 1024 * 1024
"""A longer line rejects the file (a problem line holds at most 64 answers)."""
MAX_COMPLETION_CHARS = 200_000
"""A longer completion is scored as wrong (``completion_too_long``); the file stays valid."""
MAX_ANSWERS = 64
"""Most answers per problem (the schema's ``maxItems``)."""


# ---- moves of a numeric agent: their JSON form and the <Solution> block the verifier reads -----------------


NUMBER_TEXT = re.compile(r"-?[0-9]{1,15}(/[0-9]{1,15})?")
"""An exact number written as text in a move: ``"7"``, ``"-3"`` or ``"p/q"``."""


def _move_number(x: Any) -> int | str:
    """An exact number as JSON: an int, or ``"p/q"`` for a non-integer rational."""
    if isinstance(x, bool):
        raise TypeError(f"a move number must be an int or a Fraction, got bool {x!r}")
    if isinstance(x, _numbers.Integral):
        return int(x)
    if isinstance(x, Fraction):
        return x.numerator if x.denominator == 1 else format_number(x)
    if isinstance(x, str) and NUMBER_TEXT.fullmatch(x):
        return x
    raise TypeError(f"a move number must be an int, a Fraction or a 'p/q' string, got {describe_value(x)}")


def normalize_move(move: Sequence[Any]) -> list[int | str]:
    """``[a, op, b, result]`` in the submission's JSON form (checks the shape, not the arithmetic)."""
    if isinstance(move, (str, bytes)) or not isinstance(move, Sequence) or len(move) != 4:
        raise TypeError(f"a move must be a sequence (a, op, b, result), got {describe_value(move)}")
    a, op, b, r = move
    if op not in OPERATORS:
        raise TypeError(f"a move's operator must be one of {OPERATORS}, got {describe_value(op)}")
    return [_move_number(a), op, _move_number(b), _move_number(r)]


def moves_to_solution(moves: Sequence[Sequence[Any]]) -> str:
    """The ``<Solution>`` block of a move sequence, e.g. ``"<Solution>\\n28 + 44 = 72\\n...</Solution>"``: the verifier
    checks every step, so a numeric agent is judged exactly like a language model that wrote the same block."""
    return "<Solution>\n" + "".join("{} {} {} = {}\n".format(*normalize_move(m)) for m in moves) + "</Solution>"


class SubmissionError(ValueError):
    """A submission file that cannot be scored: ``path`` and a human-readable ``reason``."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


@dataclass(frozen=True)
class ProblemAnswers:
    """One problem of a submission: the split's problem and the answer texts to verify."""

    problem: Problem
    line: int
    texts: tuple[str, ...]
    """Completions as submitted, or ``<Solution>`` blocks built from move sequences."""
    claimed_correct: tuple[bool, ...] | None = None


@dataclass(frozen=True)
class Submission:
    """A submission that passed every file-level check (answers not yet verified)."""

    path: Path
    header: dict[str, Any]
    answers: tuple[ProblemAnswers, ...]
    """In split order, one per problem of the split."""

    @property
    def preset(self) -> str:
        return self.header["preset"]

    @property
    def split(self) -> str:
        return self.header["split"]

    @property
    def k(self) -> int:
        return self.header["sampling"]["k"]


# ---- schema ---------------------------------------------------------------------------------------


def schema_path() -> Path:
    """Where the committed JSON Schema lives inside the package."""
    return Path(str(resources.files("countdown_gym.leaderboard") / "schema.json"))


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The submission JSON Schema (``schema.json``)."""
    return json.loads(schema_path().read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validators() -> tuple[Any, Any]:
    import jsonschema

    defs = {"$defs": load_schema()["$defs"]}
    cls = jsonschema.Draft202012Validator
    return cls({**defs, "$ref": "#/$defs/header"}), cls({**defs, "$ref": "#/$defs/problem"})


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_PROBLEM_KEYS = frozenset({"id", "numbers", "target", "completions", "moves", "claimed_correct"})


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return _is_int(x) or (isinstance(x, str) and NUMBER_TEXT.fullmatch(x) is not None)


def _is_move(m: Any) -> bool:
    return (
        isinstance(m, list) and len(m) == 4 and m[1] in OPERATORS
        and _is_number(m[0]) and _is_number(m[2]) and _is_number(m[3])
    )  # fmt: skip


def _strict_problem_line(obj: Any) -> bool:
    """True if ``obj`` satisfies the problem schema with JSON integers written without a decimal point: a fast path
    (the schema validator costs about 1 ms a line); a line it refuses goes to the validator for the message."""
    if not isinstance(obj, dict) or not _PROBLEM_KEYS.issuperset(obj) or ("completions" in obj) == ("moves" in obj):
        return False
    pid, nums = obj.get("id"), obj.get("numbers")
    if not (isinstance(pid, str) and 1 <= len(pid) <= 200 and _is_int(obj.get("target"))):
        return False
    if not (isinstance(nums, list) and 1 <= len(nums) <= 32 and all(_is_int(x) for x in nums)):
        return False
    claims = obj.get("claimed_correct", [])
    if not (isinstance(claims, list) and len(claims) <= MAX_ANSWERS and all(isinstance(c, bool) for c in claims)):
        return False
    items = obj.get("completions", obj.get("moves"))
    if not (isinstance(items, list) and 1 <= len(items) <= MAX_ANSWERS):
        return False
    if "completions" in obj:
        return all(isinstance(t, str) for t in items)
    return all(isinstance(seq, list) and len(seq) <= 64 and all(_is_move(m) for m in seq) for seq in items)


def _schema_error(validator: Any, obj: Any) -> str | None:
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    return f"schema violation at {where}: {_short(error.message)}"


# ---- reading --------------------------------------------------------------------------------------


def _iter_lines(path: Path):
    """``(line_number, text)`` of the non-blank lines, with size and UTF-8 checks."""
    with path.open("rb") as f:
        for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise SubmissionError(path, f"line {number} is longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise SubmissionError(path, f"line {number} is not valid UTF-8 (byte {e.start} of the line)") from None
            if text.strip():
                yield number, text


def _parse_json(path: Path, number: int, text: str) -> Any:
    try:
        return strict_json(text)
    except ValueError as e:
        hint = " (truncated file?)" if not text.endswith("\n") else ""
        raise SubmissionError(path, f"line {number} is not valid JSON{hint}: {_short(str(e), 120)}") from None


def check_header(header: Any, path: str | os.PathLike[str] = "<header>") -> dict[str, Any]:
    """``header`` (of the file ``path``, or e.g. from :func:`build_header`: a tool's metadata checked before it spends
    compute on the answers); :class:`SubmissionError` when it breaks the schema or names no frozen split."""
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SubmissionError(path, f'line 1 must be the header object with "format": "{FORMAT}"')
    if header.get("format_version") != FORMAT_VERSION:
        raise SubmissionError(path, f"format_version {_short(repr(header.get('format_version')), 40)} is not supported "
                                    f"(expected {FORMAT_VERSION})")
    problem = _schema_error(_validators()[0], header)
    if problem:
        raise SubmissionError(path, f"header: {problem}")
    if not _is_int(header["sampling"]["k"]):  # the schema's "integer" also accepts 2.0
        raise SubmissionError(path, "header: sampling.k must be a JSON integer written without a decimal point")
    try:
        datetime.date.fromisoformat(header["date"])  # the schema's pattern lets "2026-13-45" and "2026-01-01\n" by
    except ValueError:
        raise SubmissionError(path, f"header: date {_short(repr(header['date']), 40)} is not a calendar day (YYYY-MM-DD)") from None
    if (header.get("interaction"), header["answer_kind"]) in (("moves", "completions"), ("single-pass", "moves")):
        raise SubmissionError(path, f"header: interaction {header['interaction']!r} does not produce "
                                    f"answer_kind {header['answer_kind']!r}")  # the board would show the wrong one
    try:
        check_reward_variant(header["reward_variant"])
    except ValueError as e:
        raise SubmissionError(path, f"header: {e}") from None
    try:
        json.dumps(header, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        raise SubmissionError(path, "header: a string holds an unpaired surrogate escape (\\ud800-\\udfff), not valid Unicode") from None
    except ValueError:  # only a header built in Python can hold one (the reader refuses NaN / Infinity)
        raise SubmissionError(path, "header: a number is NaN or infinite, which JSON cannot hold") from None
    preset, split = header["preset"], header["split"]
    if preset not in SPLIT_SPEC:
        raise SubmissionError(path, f"unknown preset {preset!r}; frozen splits exist for {sorted(SPLIT_SPEC)}")
    try:
        expected = split_sha256(preset, split)
    except (SplitIntegrityError, ValueError) as e:
        raise SubmissionError(path, str(e)) from None
    if header["split_sha256"] != expected:
        raise SubmissionError(
            path,
            f"split_sha256 {header['split_sha256']} does not match the frozen {preset}/{split} split ({expected}): "
            "the answers were produced for a different problem set",
        )
    return header


def _problem_answers(path: Path, number: int, obj: dict[str, Any], problem: Problem, header: dict[str, Any]) -> ProblemAnswers:
    kind = header["answer_kind"]
    if kind not in obj:
        other = "moves" if kind == "completions" else "completions"
        raise SubmissionError(path, f"line {number} ({problem.id}) holds {other!r} but the header says answer_kind {kind!r}")
    items = obj[kind]
    k = header["sampling"]["k"]
    if len(items) < k:
        raise SubmissionError(path, f"line {number} ({problem.id}) has {len(items)} answers, fewer than sampling.k = {k}")
    claims = obj.get("claimed_correct")
    if claims is not None and len(claims) != len(items):
        raise SubmissionError(
            path, f"line {number} ({problem.id}) has {len(claims)} claimed_correct values for {len(items)} answers"
        )
    texts = tuple(items) if kind == "completions" else tuple(moves_to_solution(m) for m in items)
    return ProblemAnswers(problem, number, texts, tuple(claims) if claims is not None else None)


def read_submission(path: str | os.PathLike[str]) -> Submission:
    """Read and check a submission file (size, UTF-8, JSON per line, the header schema and split hash, each problem
    line against the frozen split, none twice or missing, answer counts); raises :class:`SubmissionError`."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise SubmissionError(p, f"cannot read the file ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):  # a folder, or a FIFO that would block the reader
        raise SubmissionError(p, "not a regular file")
    if (size := st.st_size) > MAX_FILE_BYTES:
        raise SubmissionError(p, f"file is {size / 2**20:.1f} MiB; the limit is {MAX_FILE_BYTES // 2**20} MiB")
    if size == 0:
        raise SubmissionError(p, "file is empty")
    lines = _iter_lines(p)
    first = next(lines, None)
    if first is None:
        raise SubmissionError(p, "file has no header line")
    header = check_header(_parse_json(p, *first), p)
    problems = load_split(header["preset"], header["split"])
    by_id = {q.id: q for q in problems}
    found: dict[str, ProblemAnswers] = {}
    for number, text in lines:
        obj = _parse_json(p, number, text)
        if not _strict_problem_line(obj):
            problem = _schema_error(_validators()[1], obj)
            if problem:
                raise SubmissionError(p, f"line {number}: {problem}")
            raise SubmissionError(p, f"line {number}: numbers must be JSON integers written without a decimal point "
                                     "(in a move also a string such as '-7' or '3/2' and nothing more)")
        pid = obj["id"]
        expected = by_id.get(pid)
        if expected is None:
            raise SubmissionError(p, f"line {number}: problem id {_short(pid, 80)!r} is not in the {header['preset']}/{header['split']} split")
        if pid in found:
            raise SubmissionError(p, f"line {number}: problem {pid} appears twice (first on line {found[pid].line})")
        if tuple(obj["numbers"]) != expected.numbers or obj["target"] != expected.target:
            given = _short(f"numbers {obj['numbers']} target {obj['target']}", 120)  # 32 numbers of 4,000 digits
            raise SubmissionError(
                p,
                f"line {number}: problem {pid} is {given} in the file, "
                f"but numbers {list(expected.numbers)} target {expected.target} in the frozen split",
            )
        found[pid] = _problem_answers(p, number, obj, expected, header)
    missing = [q.id for q in problems if q.id not in found]
    if missing:
        raise SubmissionError(
            p,
            f"{len(missing)} of {len(problems)} problems missing (first: {', '.join(missing[:3])}); "
            "every problem of the split must be answered once (truncated file?)",
        )
    return Submission(p, header, tuple(found[q.id] for q in problems))
