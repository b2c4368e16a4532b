"""Read Countdown problems people already have (``load_problems``): TinyZero rows (``nums``, ``target``), this
package's rows (``numbers``, ``target``, optional ``rules``) and verl rows (``reward_model.ground_truth``), from a
file, a ``datasets`` folder or dataset, a DataFrame or a list of dicts.

Bad rows never stop the reading: each is reported with its 0-based row and a reason (``malformed``: bad fields, not
UTF-8, not JSON, a key twice in one object or a column twice, nested too deeply; ``unsolvable``; ``timeout``: the solver gave up after ``solver_timeout``;
``trivial``: one number, or the target already among them). A ``.json`` file that holds no list of rows is one
malformed row. Only a source that cannot be opened at all raises.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from countdown_gym.dataclass_cli.strict import strict_json
from countdown_gym.game.problem import Problem
from countdown_gym.game.reachability import SolverTimeout
from countdown_gym.game.rules import Rules, describe_value
from countdown_gym.game.solver import is_solvable

TINYZERO_RULES = Rules.tinyzero()
"""The rules of TinyZero-style (``nums``) rows by default: TinyZero evaluates an answer, so any rational is allowed."""

TINYZERO_DATA_SOURCE = "countdown"
"""The ``data_source`` of TinyZero's own verl parquet, whose ground truth (``numbers``, ``target``) names no rules."""

FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


def verl_rules(data_source: Any) -> Rules:
    """The rules of a verl row whose ground truth names none: TinyZero's for TinyZero's parquet, else LongProc's."""
    return TINYZERO_RULES if isinstance(data_source, str) and data_source == TINYZERO_DATA_SOURCE else Rules.longproc()


@dataclass(frozen=True)
class RowIssue:
    """One row left out: its 0-based ``row``, a ``reason`` code and a readable ``message``."""

    row: int
    reason: str
    message: str

    def __str__(self) -> str:
        return f"row {self.row}: {self.reason}: {self.message}"


@dataclass
class LoadedProblems:
    """What :func:`load_problems` read: the good problems (with their row numbers) and the rows left out."""

    problems: list[Problem] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    """The 0-based row of each problem in ``problems``."""
    issues: list[RowIssue] = field(default_factory=list)
    total_rows: int = 0

    def report(self, limit: int = 20) -> str:
        """A short text: how many rows were read and kept, then the first ``limit`` issues."""
        head = f"{self.total_rows} rows: {len(self.problems)} problems, {len(self.issues)} left out"
        shown = [str(i) for i in self.issues[:limit]]
        if len(self.issues) > limit:
            shown.append(f"... and {len(self.issues) - limit} more")
        return "\n".join([head, *shown])


def _int(x: Any) -> Any:
    """numpy / pandas integers as ``int`` (anything else unchanged, for the Problem checks to refuse: a one-element
    array too, as a one-element list)."""
    if hasattr(x, "item") and not isinstance(x, (str, bytes)) and getattr(x, "shape", ()) == ():
        try:
            return x.item()
        except (TypeError, ValueError):
            return x
    return x


def _int_list(x: Any) -> Any:
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (str, bytes)) or not isinstance(x, Sequence):
        return x
    return [_int(v) for v in x]


def parse_rules_json(rules: Any) -> Any:
    """A row's ``rules`` with JSON text (a str starting with ``{``) parsed; ``ValueError`` if it is not JSON."""
    if isinstance(rules, str) and rules.lstrip().startswith("{"):
        try:
            return strict_json(rules)
        except ValueError as exc:
            raise ValueError(f"the row's 'rules' is not valid JSON ({exc}): {rules!r:.120}") from None
    return rules


def row_problem(row: Mapping[str, Any], rules: Rules | None = None) -> Problem:
    """The :class:`Problem` of one row (``ValueError`` / ``TypeError`` if malformed), under ``rules``, else the
    row's ``rules`` (a dict, its JSON or a preset name), else TinyZero's (``nums``) or LongProc's (``numbers``; a verl
    row: :func:`verl_rules`). The one reader of a verl ground truth (a dict, or its JSON as str or bytes)."""
    if not isinstance(row, Mapping):
        raise TypeError(f"a row must be a mapping of column -> value, got {type(row).__name__}")
    default = Rules.longproc()
    if "numbers" not in row and "nums" not in row and isinstance(row.get("reward_model"), Mapping):
        default = verl_rules(row.get("data_source"))
        extra = row.get("extra_info") if isinstance(row.get("extra_info"), Mapping) else {}
        row = row["reward_model"].get("ground_truth")  # a verl row; its id and preset are in extra_info
        if isinstance(row, (str, bytes)):
            try:
                row = strict_json(row)
            except ValueError as exc:  # not JSON, not UTF-8, a key twice, or nested past the parser's depth
                raise ValueError(f"ground_truth is not JSON ({str(exc)[:80]}): {row!r:.80}") from None
        if not isinstance(row, Mapping):
            raise ValueError(f"reward_model.ground_truth must be a dict or its JSON, got {describe_value(row)}")
        row = {**{k: extra[k] for k in ("id", "preset") if extra.get(k)}, **row}
    if "numbers" in row:
        numbers = row["numbers"]
    elif "nums" in row:
        numbers, default = row["nums"], TINYZERO_RULES
    else:
        raise ValueError(f"no 'numbers' or 'nums' column (columns: {sorted(row, key=str)[:10]})")
    if "target" not in row:
        raise ValueError("no 'target' column")
    row_rules = row.get("rules")
    if rules is None and row_rules is not None:
        row_rules = parse_rules_json(row_rules)
        if not isinstance(row_rules, (Mapping, str)):
            raise ValueError(f"a row's 'rules' must be a dict, its JSON or a preset name, got {describe_value(row_rules)}")
        rules = Rules.from_dict(dict(row_rules)) if isinstance(row_rules, Mapping) else Rules.preset(row_rules)
    pid = row.get("id")
    pid = None if isinstance(pid, float) and pid != pid else pid  # NaN: pandas' missing value
    return Problem(_int_list(numbers), _int(row["target"]), rules or default, id=str(pid) if pid is not None else None,
                   preset=row.get("preset") if isinstance(row.get("preset"), str) else None)


class _BadRow(ValueError):
    """A row that could not be read at all (reported as ``malformed``)."""


def _cell(text: Any) -> Any:
    """A CSV cell as the JSON value it spells, else the text; :class:`_BadRow` for JSON Python refuses to build."""
    try:
        return strict_json(text)
    except (TypeError, json.JSONDecodeError):
        return text
    except ValueError as exc:
        raise _BadRow(f"a cell holds a value Python refuses: {str(exc)[:120]}") from None


def _json_file_rows(path: Path) -> list[Any]:
    try:
        data = strict_json(path.read_bytes().decode("utf-8-sig"))  # a leading byte-order mark is not the JSON
    except UnicodeDecodeError as exc:
        return [_BadRow(f"the .json file is not UTF-8 (byte {exc.start})")]
    except ValueError as exc:
        return [_BadRow(f"not JSON: {str(exc)[:120]}")]
    if isinstance(data, Mapping):  # one row, or {"data": [...]} (a single split)
        is_row = bool({"numbers", "nums", "reward_model"} & set(data))
        lists = [k for k, v in data.items() if isinstance(v, list)]
        if not is_row and len(lists) > 1:  # {"train": [...], "test": [...]}: reading the first alone lost the rest
            return [_BadRow(f"the .json file holds several lists of rows {lists[:5]}, not one; split it into files")]
        data = [data] if is_row else next((v for v in data.values() if isinstance(v, list)), [data])
    if not isinstance(data, list):
        return [_BadRow(f"the .json file holds {type(data).__name__} {str(data)[:40]!r}, not a list of rows")]
    return data


def _read_file(path: Path) -> Iterable[Mapping[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_rows(path)
    if suffix == ".json":
        return _json_file_rows(path)
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid: empty, cut short, a Git LFS pointer
            raise ValueError(f"{path} is not a readable Parquet file: {str(exc)[:200]}") from None
    if suffix == ".csv":
        return _csv_rows(path)
    raise ValueError(f"{path}: unknown file type {suffix!r}; read {list(FILE_SUFFIXES)} or a datasets folder")


def _csv_rows(path: Path) -> Iterator[Any]:
    """One row per CSV record (a record the reader refuses is a :class:`_BadRow`); a leading UTF-8 BOM is dropped."""
    import csv

    # utf-8-sig: a leading byte-order mark is not part of the first column's name; a bad byte: that row only
    with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
        reader = csv.DictReader(f)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield _BadRow(f"not a CSV record: {str(exc)[:120]}")
                continue
            yield _csv_row(row, reader.fieldnames or [])


def _twice(names: Sequence[Any]) -> str | None:
    """Why rows with these column names are malformed: a name (not empty) twice, which would be read last-wins."""
    twice = [n for n in names if n not in ("", None) and names.count(n) > 1]
    return f"column {twice[0]!r} appears twice" if twice else None


def _csv_row(row: Mapping[str | None, Any], names: Sequence[str]) -> Any:
    """A CSV row with its cells as JSON where they are (``"24"``, ``"[4, 6, 1]"``), or a :class:`_BadRow`."""
    if twice := _twice(names):
        return _BadRow(twice)
    texts = [v for v in (*row.keys(), *row.values()) if isinstance(v, str)]
    if any(not t.isascii() and any("\udc80" <= c <= "\udcff" for c in t) for t in texts):
        return _BadRow("not UTF-8")
    if None in row:
        return _BadRow("more cells than columns")
    try:
        return {k: v if k in ("id", "preset") else _cell(v) for k, v in row.items()}  # text: 1e5 is no "100000.0"
    except _BadRow as bad:
        return bad


def _jsonl_rows(path: Path) -> Iterable[Any]:
    """One row per non-blank line; a line that is not UTF-8 or not JSON is a :class:`_BadRow` (reported, skipped)."""
    with path.open("rb") as f:
        for i, raw in enumerate(f):
            if not (raw.removeprefix(b"\xef\xbb\xbf") if i == 0 else raw).strip():  # a BOM alone is no row either
                continue
            rows = [_jsonl_row(raw, i == 0)]
            if isinstance(rows[0], _BadRow) and b"\r" in raw.rstrip(b"\r\n"):  # line breaks written as CR alone?
                parts = [part for part in raw.splitlines() if part.strip()]
                split = [_jsonl_row(part, i == 0 and k == 0) for k, part in enumerate(parts)]
                rows = split if any(not isinstance(r, _BadRow) for r in split) else rows  # else one bad line
            yield from rows


def _jsonl_row(raw: bytes, first: bool) -> Any:
    """One JSON Lines row, or a :class:`_BadRow` saying why it is not one."""
    try:
        return strict_json(raw.decode("utf-8-sig" if first else "utf-8"))  # the file's byte-order mark
    except UnicodeDecodeError as exc:
        return _BadRow(f"not UTF-8 (byte {exc.start} of the line)")
    except ValueError as exc:
        return _BadRow(f"not JSON: {str(exc)[:120]}")


def _rows(source: Any, split: str | None) -> tuple[Iterable[Any], int | None]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            mode = path.stat().st_mode
        except OSError as exc:  # missing, or a name too long for one (the rows' text given as the path?)
            if isinstance(exc, PermissionError):
                raise
            raise FileNotFoundError(f"no such file or folder: {str(path)[:200]!r} ({exc.strerror})") from None
        if stat.S_ISDIR(mode):
            if not any((path / name).is_file() for name in ("state.json", "dataset_dict.json")):  # datasets' marks
                raise ValueError(f"{path} is a folder but not a datasets folder (Dataset.save_to_disk); pass one of its "
                                 f"files of rows {list(FILE_SUFFIXES)}")
            from datasets import load_from_disk

            try:
                loaded = load_from_disk(str(path))
            except (OSError, ValueError) as exc:  # a cut or hand-edited dataset_dict.json / state.json
                raise ValueError(f"{path} is not a readable datasets folder: {str(exc)[:200]}") from None
            return _rows(loaded, split)
        if not stat.S_ISREG(mode):  # a FIFO or a device is never opened: it would block or never end
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a special file"
            raise ValueError(f"{path} is {kind}, not a file of rows {list(FILE_SUFFIXES)} or a datasets folder")
        if split is not None:  # it was ignored: every row of the file was read
            raise ValueError(f"split={split!r} picks a split of a DatasetDict; {path} is one file of rows")
        return _read_file(path), None
    if isinstance(source, Mapping) and source and all(hasattr(v, "column_names") for v in source.values()):  # a DatasetDict
        names = list(source.keys())
        if split is None:
            if len(names) != 1:
                raise ValueError(f"the dataset has splits {names}; pass split=...")
            split = names[0]
        if split not in names:
            raise ValueError(f"no split {split!r}; the dataset has {names}")
        source = source[split]
    elif split is not None:
        raise ValueError(f"split={split!r} picks a split of a DatasetDict; a {type(source).__name__} has none")
    if hasattr(source, "with_format") and hasattr(source, "column_names"):  # a Dataset: rows as dicts, whatever its format
        source = source.with_format(None)
    if hasattr(source, "to_dict") and hasattr(source, "iterrows"):  # a pandas DataFrame
        twice = _twice(list(source.columns))
        return ([_BadRow(twice)] * len(source) if twice else source.to_dict("records")), len(source)
    if isinstance(source, (str, bytes, Mapping)) or not isinstance(source, Iterable):
        raise TypeError(f"load_problems reads a path, a datasets Dataset / DatasetDict, a DataFrame or a list of rows, "
                        f"got {type(source).__name__}")
    return source, len(source) if hasattr(source, "__len__") else None


def _number_text(x: Any, digits: int = 30) -> str:
    """``x`` for a report line; an integer of more than ``digits`` digits by its first digits and its length (Python
    refuses ``str()`` of an int above 4,300 digits)."""
    if isinstance(x, int) and x.bit_length() > 3.33 * digits:
        return f"{'-' if x < 0 else ''}<an integer of about {round(x.bit_length() * 0.30103):,} digits>"  # log10(2)
    return str(x)


def _puzzle_text(p: Problem, shown: int = 12) -> str:
    """``[numbers] -> target`` for a report line, the numbers cut after ``shown`` of them, huge numbers cut short."""
    nums = ", ".join(_number_text(x) for x in p.numbers[:shown])
    more = f", ... ({len(p.numbers)} numbers)" if len(p.numbers) > shown else ""
    return f"[{nums}{more}] -> {_number_text(p.target)}"


DEFAULT_SOLVER_TIMEOUT = 1.0
"""Seconds the solver may spend on one row before it is left out as ``timeout``."""


def load_problems(source: Any, *, rules: Rules | None = None, split: str | None = None, check_solvable: bool = True,
                  progress: bool = True, solver_timeout: float | None = DEFAULT_SOLVER_TIMEOUT) -> LoadedProblems:
    """Read problems from ``source``; every bad row is reported by row number, none stops the reading.

    Args:
        source: A ``.jsonl`` / ``.json`` / ``.parquet`` / ``.csv`` file, a ``datasets`` folder, ``Dataset`` or
            ``DatasetDict``, a pandas DataFrame, or a list of dicts.
        rules: Play every problem under these rules (default: each row's own, :func:`row_problem`).
        split: Which split of a ``DatasetDict`` (needed when it has several).
        check_solvable: Leave out (and report) rows without a solution.
        solver_timeout: Seconds the solver may spend on one row, > 0 (``None``: no limit).
    """
    from tqdm import tqdm

    if rules is not None and not isinstance(rules, Rules):
        raise TypeError(f"rules must be a Rules or None, got {type(rules).__name__}")
    if solver_timeout is not None and (isinstance(solver_timeout, bool) or not isinstance(solver_timeout, (int, float))):
        raise TypeError(f"solver_timeout must be a number of seconds or None, got {type(solver_timeout).__name__}")
    if solver_timeout is not None and not solver_timeout > 0:  # NaN too: it would be no limit at all
        raise ValueError(f"solver_timeout must be > 0 seconds (or None: no limit), got {solver_timeout}")
    rows, total = _rows(source, split)
    out = LoadedProblems()
    for k, row in enumerate(tqdm(rows, total=total, desc="rows", disable=not progress, leave=False)):
        out.total_rows += 1
        if isinstance(row, _BadRow):
            out.issues.append(RowIssue(k, "malformed", str(row)))
            continue
        try:
            p = row_problem(row, rules)
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            message = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
            out.issues.append(RowIssue(k, "malformed", message))
            continue
        if len(p.numbers) < 2 or p.rules.is_won(p.numbers, p.target):
            out.issues.append(RowIssue(k, "trivial", f"{_puzzle_text(p)} needs no move"))
            continue
        try:
            solvable = not check_solvable or is_solvable(p.numbers, p.target, p.rules, timeout=solver_timeout)
        except SolverTimeout:
            out.issues.append(RowIssue(k, "timeout", f"{_puzzle_text(p)}: no answer from the solver in "
                                       f"{solver_timeout:g} s (solver_timeout=)"))
            continue
        if not solvable:
            out.issues.append(RowIssue(k, "unsolvable", f"{_puzzle_text(p)} has no solution under rules {p.rules.name!r}"))
            continue
        out.problems.append(p)
        out.rows.append(k)
    return out
