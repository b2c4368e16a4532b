"""Leaderboard submission files: build, write and read them (nothing in them is trusted).

Format: JSON Lines (UTF-8). Line 1 is a header object (agent, authors, model, method, reward
variant, preset, split, split SHA-256, package version, date, sampling, compute, command, and
``answer_kind``); every following line is one problem of the split with its answers::

    {"format": "countdown-gym-submission", "format_version": 1, "agent": "random-legal", ...}
    {"id": "longproc-0.5k/test/0", "numbers": [37, 14, 29, 6], "target": 46, "completions": ["..."]}
    {"id": "longproc-0.5k/test/1", "numbers": [28, 44, 11, 9], "target": 27, "moves": [[[28, "+", 44, 72], ...]]}

JSON Lines rather than one JSON document because a submission is a header plus one record per
problem: a reviewer's diff shows changed problems line by line, a truncated file is detected
by a missing problem rather than a parse failure of the whole file, every error can name its
line, and the reader never needs more than one line in memory at a time.

The schema is ``countdown_gym/leaderboard/schema.json`` (its one file; ``leaderboard/README.md``
links to it). :func:`read_submission` enforces it plus what a schema
cannot say: the split hash, the exact problem list of :func:`countdown_gym.load_split` (ids,
numbers, targets; each problem exactly once), size limits, UTF-8. Any violation raises
:class:`SubmissionError` naming the file, the line and the reason.

Answers are either raw completions (text) or move sequences ``[a, op, b, result]`` from a
numeric agent; :func:`moves_to_solution` turns a move sequence into a ``<Solution>`` block, so
both kinds are scored by the same :func:`countdown_gym.game.verifier.verify`.

Example (what the baselines call)::

    from countdown_gym.leaderboard import write_submission
    write_submission(
        "leaderboard/submissions/my-agent.longproc-0.5k.test.jsonl",
        agent="my-agent", authors="A. Person <a@example.org>", model="GPT-2 from config",
        model_size="0.84M", method="GRPO+oracle", reward_variant="oracle-perfect",
        preset="longproc-0.5k", split="test",
        answers=[[completion] for completion in completions],   # one list per problem, split order
        sampling={"k": 1, "temperature": 0.0}, compute="2 CPU cores, 3 min",
        command="python baselines/llm_eval.py --split test ...",
    )
"""

from __future__ import annotations

import datetime as _dt
import json
import numbers as _numbers
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from countdown_gym.data.splits import SPLIT_SPEC, SplitIntegrityError, load_split, split_sha256
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import OPERATORS, format_number
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

_NUMBER_TEXT = re.compile(r"-?[0-9]{1,15}(/[0-9]{1,15})?")
_MAX_MESSAGE = 300


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
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema is in the [dev] extra
        raise RuntimeError(
            "reading leaderboard submissions needs the jsonschema package: pip install 'countdown-gym[dev]'"
        ) from None
    schema = load_schema()
    cls = jsonschema.Draft202012Validator
    defs = {"$defs": schema["$defs"]}
    return cls({**defs, "$ref": "#/$defs/header"}), cls({**defs, "$ref": "#/$defs/problem"})


def _short(text: str, limit: int = _MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


_PROBLEM_KEYS = frozenset({"id", "numbers", "target", "completions", "moves", "claimed_correct"})


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return _is_int(x) or (isinstance(x, str) and _NUMBER_TEXT.fullmatch(x) is not None)


def _is_move(m: Any) -> bool:
    return (
        isinstance(m, list) and len(m) == 4 and m[1] in OPERATORS
        and _is_number(m[0]) and _is_number(m[2]) and _is_number(m[3])
    )  # fmt: skip


def _strict_problem_line(obj: Any) -> bool:
    """True if ``obj`` satisfies the problem schema with JSON integers written without a decimal point.

    A fast path (the generic schema validator costs about 1 ms per line); a line it refuses is
    passed to the schema validator for the error message.
    """
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


# ---- moves -> <Solution> --------------------------------------------------------------------------


def _move_number(x: Any) -> int | str:
    """An exact number as JSON: an int, or ``"p/q"`` for a non-integer rational."""
    if isinstance(x, bool):
        raise TypeError(f"a move number must be an int or a Fraction, got bool {x!r}")
    if isinstance(x, _numbers.Integral):
        return int(x)
    if isinstance(x, Fraction):
        return x.numerator if x.denominator == 1 else format_number(x)
    if isinstance(x, str) and _NUMBER_TEXT.fullmatch(x):
        return x
    raise TypeError(f"a move number must be an int, a Fraction or a 'p/q' string, got {type(x).__name__} {x!r}")


def normalize_move(move: Sequence[Any]) -> list[int | str]:
    """``[a, op, b, result]`` in the submission's JSON form (checks the shape, not the arithmetic)."""
    if isinstance(move, (str, bytes)) or not isinstance(move, Sequence) or len(move) != 4:
        raise TypeError(f"a move must be a sequence (a, op, b, result), got {move!r}")
    a, op, b, r = move
    if op not in OPERATORS:
        raise TypeError(f"a move's operator must be one of {OPERATORS}, got {op!r}")
    return [_move_number(a), op, _move_number(b), _move_number(r)]


def moves_to_solution(moves: Sequence[Sequence[Any]]) -> str:
    """The ``<Solution>`` block of a move sequence, e.g. ``"<Solution>\\n28 + 44 = 72\\n...</Solution>"``.

    The verifier then checks every step (operands available, rules, arithmetic, target), so a
    numeric agent is judged exactly like a language model that wrote the same block.
    """
    lines = []
    for move in moves:
        a, op, b, r = normalize_move(move)
        lines.append(f"{a} {op} {b} = {r}")
    return "<Solution>\n" + "".join(line + "\n" for line in lines) + "</Solution>"


# ---- writing --------------------------------------------------------------------------------------


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


def _plain(v: Any) -> Any:
    """A numpy scalar as the Python value (what ``json`` can write)."""
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def build_header(
    *,
    agent: str,
    authors: str,
    model: str,
    model_size: str,
    method: str,
    reward_variant: str,
    preset: str,
    split: str,
    sampling: Mapping[str, Any],
    compute: str,
    command: str,
    answer_kind: str,
    claimed: Mapping[str, float] | None = None,
    notes: str | None = None,
    date: str | None = None,
    interaction: str | None = None,
) -> dict[str, Any]:
    """The header object of a submission (the split hash and package version filled in)."""
    from countdown_gym import __version__

    header: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "agent": agent,
        "authors": authors,
        "model": model,
        "model_size": model_size,
        "method": method,
        "reward_variant": reward_variant,
        "preset": preset,
        "split": split,
        "split_sha256": split_sha256(preset, split),
        "package_version": __version__,
        "date": date or _dt.datetime.now(_dt.UTC).date().isoformat(),
        "sampling": {str(k): _plain(v) for k, v in sampling.items()},
        "compute": compute,
        "command": command,
        "answer_kind": answer_kind,
    }
    if claimed:
        header["claimed"] = {str(k): float(v) for k, v in claimed.items()}
    if notes:
        header["notes"] = notes
    if interaction:
        header["interaction"] = interaction
    return header


def write_submission(
    path: str | os.PathLike[str],
    *,
    agent: str,
    authors: str,
    model: str,
    model_size: str | None,
    method: str,
    reward_variant: str,
    preset: str,
    split: str,
    answers: Sequence[Any] | Mapping[str, Any] | None = None,
    compute: str,
    command: str,
    moves: Sequence[Sequence[Sequence[Any]]] | None = None,
    completions: Sequence[str] | None = None,
    problems: Sequence[Problem] | None = None,
    sampling: Mapping[str, Any] | None = None,
    claimed: Mapping[str, float] | None = None,
    claimed_correct: Sequence[Sequence[bool]] | Mapping[str, Sequence[bool]] | None = None,
    notes: str | None = None,
    date: str | None = None,
    interaction: str | None = None,
) -> Path:
    """Write a submission for ``preset``/``split`` and check it by reading it back.

    Args:
        answers: One entry per problem of ``load_split(preset, split)``, in split order (or a
            mapping problem id -> entry). An entry is a list of completions (``str``; a bare
            ``str`` means one) or a list of move sequences ``[(a, op, b, result), ...]``; the
            first answer is the pass@1 answer.
        moves: Instead of ``answers``: one move sequence per problem (a numeric agent, k = 1).
        completions: Instead of ``answers``: one completion per problem.
        problems: The problems the entries belong to, in the entries' order (they must be the
            whole split, by id); default: ``load_split(preset, split)`` order.
        model_size: ``None`` is written as ``"n/a"``.
        sampling: ``{"k": answers per problem, "temperature": ...}`` plus any other settings
            (``top_p``, ``max_new_tokens``, ``seed``); ``k`` defaults to the fewest answers
            given for a problem, ``temperature`` to 0.
        claimed: Your own measured numbers (e.g. ``{"pass@1": 0.93}``); reported, never ranked.
        claimed_correct: Optional per-answer self-assessment, same layout as ``answers``.
        date: ``YYYY-MM-DD``; defaults to today (UTC).
        interaction: ``"single-pass"``, ``"multi-turn"`` or ``"moves"`` (how the answers were produced; shown
            in the table); omitted: single-pass for completions, moves for move sequences.

    Returns the path written. Raises ``ValueError`` for answers that do not fit the split and
    :class:`SubmissionError` if the written file would not pass :func:`read_submission`.
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
    if model_size is None:
        model_size = "n/a"
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
            line["claimed_correct"] = [bool(c) for c in claims[i]]
        lines.append(line)
    if len(kinds) != 1:
        raise ValueError("answers mix completions and move sequences; a submission holds one kind")
    sampling = dict(sampling or {})
    sampling.setdefault("k", min(len(line[next(iter(kinds))]) for line in lines))
    sampling.setdefault("temperature", 0.0)
    header = build_header(
        agent=agent, authors=authors, model=model, model_size=model_size, method=method,
        reward_variant=reward_variant, preset=preset, split=split, sampling=sampling, compute=compute,
        command=command, answer_kind=kinds.pop(), claimed=claimed, notes=notes, date=date, interaction=interaction,
    )  # fmt: skip
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as f:
            for obj in [header, *lines]:
                f.write(json.dumps(obj, separators=(",", ":")) + "\n")  # ASCII: any str round-trips
        try:
            read_submission(tmp)
        except SubmissionError as e:
            raise SubmissionError(out, e.reason) from None
        os.replace(tmp, out)
    finally:
        if tmp.is_file():  # a failed write or check leaves nothing behind
            tmp.unlink()
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


# ---- reading --------------------------------------------------------------------------------------


def _iter_lines(path: Path):
    """``(line_number, text)`` of the non-blank lines, with size and UTF-8 checks."""
    with path.open("rb") as f:
        number = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise SubmissionError(path, f"line {number} is longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise SubmissionError(path, f"line {number} is not valid UTF-8 (byte {e.start} of the line)") from None
            if text.strip():
                yield number, text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed (JSON has no NaN or Infinity)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {_short(dup, 40)!r} appears twice in one object")
    return out


def _parse_json(path: Path, number: int, text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as e:
        hint = " (truncated file?)" if not text.endswith("\n") else ""
        raise SubmissionError(path, f"line {number} is not valid JSON{hint}: {_short(str(e), 120)}") from None


def _check_header(path: Path, header: Any) -> dict[str, Any]:
    header_validator, _ = _validators()
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SubmissionError(path, f'line 1 must be the header object with "format": "{FORMAT}"')
    if header.get("format_version") != FORMAT_VERSION:
        raise SubmissionError(path, f"format_version {header.get('format_version')!r} is not supported (expected {FORMAT_VERSION})")
    problem = _schema_error(header_validator, header)
    if problem:
        raise SubmissionError(path, f"header: {problem}")
    if not _is_int(header["sampling"]["k"]):  # the schema's "integer" also accepts 2.0
        raise SubmissionError(path, "header: sampling.k must be a JSON integer written without a decimal point")
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


def check_header(header: dict[str, Any]) -> None:
    """Raise :class:`SubmissionError` when ``header`` (e.g. from :func:`build_header`) breaks the schema.

    Lets a tool check its metadata before spending compute on the answers.
    """
    _check_header(Path("<header>"), header)


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
    """Read and check a submission file; raises :class:`SubmissionError` with the reason.

    Checks, in order: size, UTF-8, JSON per line, the header schema, preset/split and the split
    SHA-256, every problem line's schema, that each line's id, numbers and target are those of
    the frozen split, no problem twice, none missing, and the answer counts. The answers
    themselves are verified by :mod:`countdown_gym.leaderboard.score`.
    """
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise SubmissionError(p, f"cannot read the file ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):  # a folder, or a FIFO that would block the reader
        raise SubmissionError(p, "not a regular file")
    size = st.st_size
    if size > MAX_FILE_BYTES:
        raise SubmissionError(p, f"file is {size / 2**20:.1f} MiB; the limit is {MAX_FILE_BYTES // 2**20} MiB")
    if size == 0:
        raise SubmissionError(p, "file is empty")
    _, problem_validator = _validators()
    lines = _iter_lines(p)
    first = next(lines, None)
    if first is None:
        raise SubmissionError(p, "file has no header line")
    header = _check_header(p, _parse_json(p, *first))
    problems = load_split(header["preset"], header["split"])
    by_id = {q.id: q for q in problems}
    found: dict[str, ProblemAnswers] = {}
    for number, text in lines:
        obj = _parse_json(p, number, text)
        if not _strict_problem_line(obj):
            problem = _schema_error(problem_validator, obj)
            if problem:
                raise SubmissionError(p, f"line {number}: {problem}")
            raise SubmissionError(p, f"line {number}: numbers must be JSON integers written without a decimal point")
        pid = obj["id"]
        expected = by_id.get(pid)
        if expected is None:
            raise SubmissionError(p, f"line {number}: problem id {_short(pid, 80)!r} is not in the {header['preset']}/{header['split']} split")
        if pid in found:
            raise SubmissionError(p, f"line {number}: problem {pid} appears twice (first on line {found[pid].line})")
        if tuple(obj["numbers"]) != expected.numbers or obj["target"] != expected.target:
            raise SubmissionError(
                p,
                f"line {number}: problem {pid} is numbers {obj['numbers']} target {obj['target']} in the file, "
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
