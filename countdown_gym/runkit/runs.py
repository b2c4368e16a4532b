"""Run directories of the training scripts: one layout, one resume rule, one metrics log, one plot, Ctrl-C.

Every training script (``baselines/``, ``critics/``) keeps a run in one directory and does its bookkeeping here
(``tests/test_runs.py`` runs this example):

    >>> import tempfile
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Options:
    ...     lr: float = 1e-3
    ...     steps: int = 10
    >>> out = prepare_run(tempfile.mkdtemp() + "/run", "--out", Options(), resume=False)
    >>> log = MetricsLog(out / "metrics.csv", resume_step=None)   # a fresh run: a fresh log
    >>> log.append({"step": 1, "loss": 0.5})
    >>> with StopRequest() as stop:                               # Ctrl-C / SIGTERM: finish the step, save, stop
    ...     stop.requested
    False

See ``docs/runs.md``.
"""

from __future__ import annotations

import atexit
import contextlib
import csv
import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from countdown_gym.dataclass_cli import EXIT_INTERRUPTED, changed_options, not_regular, written_aside
from countdown_gym.dataclass_cli.strict import duplicate_key

OPTIONS_FILE = "options.json"
"""Every option of the run, written when it starts (``--resume`` compares against it)."""

LOCK_FILE = ".run.lock"
"""Locked by the process training into the directory (:func:`hold_directory`); holds its pid."""

_HELD: dict[Path, Any] = {}


# ---- the run directory ----------------------------------------------------------------------------------


def run_directory(path: str | os.PathLike[str], label: str) -> Path:
    """Create the directory ``path`` (and its parents); exit naming ``label`` (what the user typed, e.g.
    ``"--out runs/x"``) if it cannot be written, so a bad path fails before any work."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK):
            raise PermissionError(13, "permission denied")
    except OSError as exc:
        raise SystemExit(f"{label}: cannot write there ({exc.strerror or exc})") from None
    return out


def hold_directory(out: Path, instead: str) -> None:
    """Hold the run directory ``out`` until this process ends (an exclusive ``flock`` on its :data:`LOCK_FILE`, let go
    however the process ends): a second process training into it exits naming ``instead`` (what else to do) instead
    of mixing its checkpoints and logs in. No lock where unsupported."""
    key = out.resolve()
    if key in _HELD:
        return
    try:
        import fcntl
    except ImportError:  # not on POSIX
        return
    path = out / LOCK_FILE
    if (kind := "a link" if path.is_symlink() else not_regular(path)) is not None:  # a link's target would be emptied
        raise SystemExit(f"{path} is {kind}, not a lock file; delete it")
    try:
        lock = path.open("a+")  # noqa: SIM115 - open until the process ends: that is the lock
    except OSError as exc:
        raise SystemExit(f"{path}: cannot open it ({exc.strerror or exc})") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip()[:20] or "unknown"
        lock.close()
        raise SystemExit(f"{out} is in use: another process (pid {holder}) is training into it; wait for it to end, "
                         f"or {instead}") from None
    except OSError:  # a file system without locks
        lock.close()
        return
    with contextlib.suppress(OSError):  # the pid only names the holder in the message (a full disk may refuse it)
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
    _HELD[key] = lock
    atexit.register(lock.close)  # held to the end, then closed (no unclosed-file warning at exit)


def holds_run(out: str | os.PathLike[str], markers: Iterable[str] = (OPTIONS_FILE,)) -> bool:
    """Whether ``out`` keeps a run: any of ``markers`` (file names or glob patterns) exists in it."""
    out = Path(out)
    return out.is_dir() and any(next(out.glob(m), None) is not None for m in markers)


def read_options(out: str | os.PathLike[str], name: str = OPTIONS_FILE) -> dict[str, Any] | None:
    """The ``options.json`` (or ``name``) of the run in ``out`` (None when there is none); exits naming the file when
    it is not a JSON object (empty, cut off, not UTF-8, a list, a key twice) or not a regular file (never opened)."""
    path = Path(out) / name
    if not os.path.lexists(path):  # a dangling link is no "no options": reading it says why
        return None
    fix = "fix or delete it (the checkpoint keeps its own record), or use another directory"
    if (kind := not_regular(path)) is not None:
        raise SystemExit(f"{path} is {kind}, not the run's options (a regular file); {fix}")
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise SystemExit(f"{path}: cannot read it ({exc.strerror or exc}); {fix}") from None
    except UnicodeDecodeError as exc:
        raise SystemExit(f"{path} is not UTF-8 text (byte {exc.start}); {fix}") from None
    except (ValueError, RecursionError) as exc:
        what = "empty" if not path.stat().st_size else f"not JSON ({str(exc)[:80] or 'nested too deeply'})"
        raise SystemExit(f"{path} is {what}; {fix}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"{path} holds a JSON {type(data).__name__}, not the object of a run's options; {fix}")
    if problem := duplicate_key(text, data):  # json alone keeps the last value silently
        raise SystemExit(f"{path}: {problem}; {fix}")
    return data


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a temporary file beside it, then a rename; a stale temporary
    file, link or FIFO there is removed first, so the write never goes through a link or blocks on a FIFO)."""
    with written_aside(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def _foreign(saved: Mapping[str, Any], options: Any) -> str:
    """The stored options that the dataclass ``options`` has no field for, quoted (at most three named; '' for none)."""
    names = {f.name for f in dataclasses.fields(options)} if dataclasses.is_dataclass(options) else saved.keys()
    extra = [repr(k) for k in saved if k not in names]
    return ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")


def prepare_run(path: str | os.PathLike[str], label: str, options: Any, *, resume: bool, resuming: bool | None = None,
                may_change: Collection[str] = (), markers: Iterable[str] = (), start_over: str | None = None,
                write: bool = True, saved_as: Callable[[dict[str, Any] | None], Mapping[str, Any] | None] | None = None,
                barrier: Callable[[], None] | None = None) -> Path:
    """The run directory of a training script, checked, with its ``options.json`` (``docs/runs.md``).

    ``label``: the flag naming the directory (``"--out"``); ``resume``: the ``--resume`` flag; ``resuming``: whether
    a checkpoint will be continued (default ``resume``; only then are the saved options compared); ``markers``: what
    else shows a kept run (``options.json`` always does); ``may_change``: the options a resume may change;
    ``saved_as``: reads the stored options (None: no file) as today's fields; ``write=False`` checks without writing;
    ``barrier``: called after the checks and after the write (a distributed run's wait). With ``write``, the process
    holds the directory (:func:`hold_directory`).
    """
    out = run_directory(path, f"{label} {path}")
    start_over = start_over or f"use another {label}"
    if write:
        hold_directory(out, start_over)
    if not resume and holds_run(out, (OPTIONS_FILE, *markers)):
        raise SystemExit(f"{out} holds a run already: --resume continues it; to start over {start_over} or delete that "
                         "directory")
    resuming = resume if resuming is None else resuming
    saved = read_options(out) if resume or resuming else None  # nothing to continue: never afresh over another's run
    if resuming and saved_as:
        saved = saved_as(saved)
    if saved is not None:
        if resuming and dataclasses.is_dataclass(options) and saved.keys().isdisjoint(f.name for f in dataclasses.fields(options)):
            raise SystemExit(f"--resume: {out / OPTIONS_FILE} holds none of this script's options; fix or delete "
                             "it (the checkpoint keeps its own record), or use another directory")
        changed = changed_options(saved, options, may_change)
        if changed and (foreign := _foreign(saved, options)):
            raise SystemExit(f"--resume: {out} holds another script's run: its {OPTIONS_FILE} has {foreign}, which "
                             f"this script does not take; {start_over} or delete that directory")
        if changed and resuming:
            raise SystemExit(f"--resume: {out} was trained with {', '.join(changed)}; resume with the same flags or "
                             f"{start_over}")
    if barrier is not None:
        barrier()
    if write:
        data = dataclasses.asdict(options) if dataclasses.is_dataclass(options) else dict(options)
        write_text_atomic(out / OPTIONS_FILE, json.dumps(data, indent=2, default=str) + "\n")
    if barrier is not None:
        barrier()
    return out


# ---- metrics ------------------------------------------------------------------------------------------------


def _value(text: str) -> Any:
    """A CSV cell read back: int, float, or the text itself ('' for an empty cell)."""
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def _step_of(row: Mapping[str, Any], key: str) -> float | None:
    try:
        return float(row[key]) if row.get(key) not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _csv(rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def _rows_upto(path: Path, step: float, key: str) -> tuple[list[str] | None, list[tuple[Any, Any]]]:
    """The CSV's header (None for JSON lines) and the rows of the log at ``path`` (a regular file) whose ``key`` is not
    past ``step`` (rows without it kept), as ``(raw, row)``: a JSON line and its value, or a CSV row's cells and its
    dict (numbers read back as numbers). A torn last line or row is dropped; anything else unreadable exits naming it."""
    header, rows = None, []
    if path.suffix == ".jsonl":
        lines = path.read_bytes().split(b"\n")
        for number, data in enumerate(lines, 1):
            try:
                if (line := data.decode("utf-8")).strip():  # not UTF-8: a UnicodeDecodeError, one ValueError more
                    rows.append((line, json.loads(line)))
            except (ValueError, RecursionError) as exc:  # RecursionError: a line of 100,000 '['
                if number == len(lines):  # the unterminated last line: a torn append
                    break
                raise SystemExit(f"{path}: line {number} is not JSON ({exc}), not a row this run wrote; fix or remove "
                                 "that line, or use another directory") from None
    else:
        try:
            with path.open(newline="", encoding="utf-8-sig") as f:  # a spreadsheet's byte-order mark is no header
                text = f.read()
            header, *cells = list(csv.reader(io.StringIO(text))) or [[]]
            if cells and not text.endswith("\n"):  # the unterminated last row: a torn append ('10,0.05' cut to '1')
                cells.pop()
        except UnicodeDecodeError as exc:
            raise SystemExit(f"{path} is not UTF-8 text (byte {exc.start}), not a log this run wrote; fix or delete "
                             "it, or use another directory") from None
        except csv.Error as exc:  # e.g. a file a crash left full of NUL bytes: one field past csv's size limit
            raise SystemExit(f"{path} is not CSV ({exc}), not a log this run wrote; fix or delete it, or use another "
                             "directory") from None
        rows = [(r, {k: _value(v) for k, v in zip(header, r, strict=False)}) for r in cells]
    return header, [(raw, r) for raw, r in rows
                    if not isinstance(r, Mapping) or (s := _step_of(r, key)) is None or s <= step]


def truncate_rows(path: str | os.PathLike[str], step: float, key: str = "step") -> list[tuple[Any, Any]]:
    """Drop the rows of a CSV or JSON-lines log (SB3's ``progress.csv`` too) whose ``key`` is past ``step`` (a resume
    redoes them) and return the rest as :func:`_rows_upto` reads them. Anything but a regular file is left alone."""
    path = Path(path)
    if not path.is_file():
        return []
    header, kept = _rows_upto(path, step, key)
    if header is None:
        write_text_atomic(path, "".join(line + "\n" for line, _ in kept))
    elif key in header:
        write_text_atomic(path, _csv([header, *(cells for cells, _ in kept)]))
    return kept


class MetricsLog:
    """A run's metrics: one row (a dict) per logged step, appended to ``path`` as it comes.

    ``.jsonl``: one JSON object per line; else a CSV whose header is the columns seen so far (a new column rewrites
    the file once). ``resume_step=None`` starts a fresh log (an earlier file is removed); a number continues a
    resumed run's log: the rows after that step are dropped (they are redone) and :attr:`rows` holds the rest, read
    back (numbers as numbers, empty cells as ``""``). ``write=False`` keeps the rows in memory only.
    """

    def __init__(self, path: str | os.PathLike[str], *, step: str = "step", resume_step: float | None = None,
                 write: bool = True) -> None:
        self.path, self.step, self.write = Path(path), step, write
        if (kind := not_regular(self.path)) is not None:  # a FIFO is never opened: its reader would block
            raise SystemExit(f"{self.path} is not a file ({kind}); the run's log is written there: remove it or "
                             "use another directory")
        self.rows: list[dict[str, Any]] = []
        self._columns: list[str] = []
        if resume_step is None:
            if write:
                self.path.unlink(missing_ok=True)
            return
        if write:
            kept = truncate_rows(self.path, resume_step, step)
        else:
            kept = _rows_upto(self.path, resume_step, step)[1] if self.path.is_file() else []
        self.rows = [r for raw, r in kept if raw and isinstance(r, dict)]  # raw: a blank CSV line has no cells
        for r in self.rows:
            self._columns += [k for k in r if k not in self._columns]

    def append(self, row: Mapping[str, Any]) -> None:
        """Add ``row`` to :attr:`rows` and to the file."""
        row = dict(row)
        self.rows.append(row)
        if not self.write:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.suffix == ".jsonl":
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, default=str) + "\n")
            return
        new = [k for k in row if k not in self._columns]
        self._columns += new
        empty = not self.path.is_file() or not self.path.stat().st_size
        if new and not empty:  # a new column: the header changes
            write_text_atomic(self.path, _csv([self._columns, *([r.get(c, "") for c in self._columns] for r in self.rows)]))
            return
        with self.path.open("a", newline="", encoding="utf-8") as f:
            f.write(_csv([self._columns] * empty + [[row.get(c, "") for c in self._columns]]))

    def plot(self, path: str | os.PathLike[str], panels: Sequence[Panel], *, xlabel: str = "", title: str = "") -> None:
        """:func:`plot_curves` of :attr:`rows` against this log's step column."""
        if self.write:
            plot_curves(self.rows, path, panels, x=self.step, xlabel=xlabel or self.step, title=title)


# ---- curves -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One plot of :func:`plot_curves`: the columns to draw (column -> legend label) against the steps."""

    ylabel: str
    series: Mapping[str, str] = field(default_factory=dict)
    log: bool = False
    """A logarithmic y axis."""
    percent: bool = False
    """Rates in [0, 1] drawn as percentages."""
    smooth: bool = False
    """Also draw a moving mean (for noisy per-interval values such as a loss)."""
    ylim: tuple[float, float] | None = None


def plot_curves(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], panels: Sequence[Panel], *,
                x: str = "step", xlabel: str = "step", title: str = "") -> None:
    """A PNG with one plot per panel, side by side: each column's values (rows without one are skipped) vs ``x``;
    written whole or not at all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels) + 1, 3.8), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for column, label in panel.series.items():
            pts = [(float(r[x]), float(r[column])) for r in rows
                   if r.get(column) not in (None, "") and r.get(x) not in (None, "")]
            if not pts:
                continue
            xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts]) * (100 if panel.percent else 1)
            if panel.smooth and len(ys) >= 10:
                k = max(len(ys) // 30, 2)
                ax.plot(xs, ys, lw=0.8, alpha=0.5, label=f"{label} (per interval)")
                ax.plot(xs[k - 1:], np.convolve(ys, np.ones(k) / k, mode="valid"), lw=1.6, label=f"moving mean ({k})")
            else:
                ax.plot(xs, ys, marker="o" if len(ys) <= 50 else None, label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(panel.ylabel + (" (%)" if panel.percent else ""))
        if panel.log:
            ax.set_yscale("log")
        if panel.ylim is not None:
            ax.set_ylim(*panel.ylim)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0] and (len(panel.series) > 1 or panel.smooth):
            ax.legend()
    if title:
        (axes[0][0].set_title if len(panels) == 1 else fig.suptitle)(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def save_figure(fig: Any, path: str | os.PathLike[str], dpi: int = 120) -> None:
    """Save the matplotlib ``fig`` to ``path`` whole or not at all (a kill mid-save keeps the last one), in the
    format its suffix names (png without one)."""
    with written_aside(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix[1:] or "png", dpi=dpi)


# ---- Ctrl-C and SIGTERM ---------------------------------------------------------------------------------------


class StopRequest:
    """A context manager: the first Ctrl-C (SIGINT) or SIGTERM inside it sets :attr:`requested`, which a training
    loop checks between steps (it then saves a checkpoint and returns, so ``--resume`` continues from exactly that
    step); a second one raises ``KeyboardInterrupt`` at once. Outside the main thread (where signal handlers
    cannot be set) it does nothing."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, message: str = "stopping after this step and saving a checkpoint (Ctrl-C again to stop at once)") -> None:
        self.message = message
        self.requested = False
        self.signum: int | None = None
        """The signal that asked to stop (SIGINT or SIGTERM)."""
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        print(f"\n{name}: {self.message}", file=sys.stderr, flush=True)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        self._previous = {}


def run_commands(commands: Sequence[tuple[Sequence[str], Path]], at_once: int, *,
                 started: Callable[[int], None] = lambda i: None, ended: Callable[[int, int], None] = lambda i, code: None,
                 env: Mapping[str, str] | None = None) -> bool:
    """Run each ``(argv, log)`` as a process, ``at_once`` at a time, its output appended to ``log``; ``started(i)``
    before command ``i`` starts, ``ended(i, exit code)`` once it has ended. The first Ctrl-C (or SIGTERM, passed on)
    starts no more commands and waits for the running ones; returns whether it was stopped so. A second Ctrl-C, or an
    error of a callback, stops the running commands (SIGTERM), waits for them and raises."""
    for _, log in commands:  # a FIFO nothing reads would block the start for ever
        if (kind := not_regular(log)) is not None:
            raise SystemExit(f"{log} is {kind}, not a log file; delete it")
    todo = list(range(len(commands)))
    running: dict[int, tuple[subprocess.Popen[bytes], Any]] = {}
    passed_on = False
    try:
        with StopRequest("starting no more runs; the running ones save a checkpoint and stop (Ctrl-C again to stop at once)") as stop:
            while running or (todo and not stop.requested):
                while todo and not stop.requested and len(running) < at_once:
                    i = todo.pop(0)
                    started(i)
                    argv, log = commands[i]
                    out = Path(log).open("ab")  # noqa: SIM115 - closed when the process ends
                    running[i] = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, env=env), out
                if stop.signum == signal.SIGTERM and not passed_on:
                    passed_on = True
                    for proc, _ in running.values():
                        proc.terminate()
                time.sleep(0.2)
                for i, (proc, out) in list(running.items()):
                    if proc.poll() is not None:
                        out.close()
                        del running[i]
                        ended(i, proc.returncode)
    except BaseException:  # a callback failed (a record it could not write), or a second Ctrl-C: none left running
        for proc, _ in running.values():
            proc.terminate()  # a training script saves a checkpoint and stops
        for proc, _ in running.values():
            proc.wait()
        raise
    finally:
        for _, out in running.values():
            out.close()
    if stop.requested:
        print("stopped by Ctrl-C: finished runs are kept, the others saved a checkpoint; the same command resumes them")
    return stop.requested


def run_named(commands: Sequence[tuple[Sequence[str], Path]], names: Sequence[str], at_once: int, *,
              started: Callable[[int], None] = lambda i: None, done: Callable[[int], None] = lambda i: None,
              env: Mapping[str, str] | None = None) -> bool:
    """:func:`run_commands` of a comparison's runs, each called by its name in what it prints: ``start <name>``, then
    how it ended, ``<name>: done`` (exit 0; then ``done(i)`` is called), ``stopped`` (Ctrl-C: it saved a checkpoint,
    the same command resumes it) or ``FAILED (exit N, see <log>)``. Exits naming the failed runs once none is left
    running (the finished ones are kept); returns whether Ctrl-C stopped them."""
    failed: list[str] = []

    def start(i: int) -> None:
        started(i)
        print(f"start {names[i]}", flush=True)

    def ended(i: int, code: int) -> None:
        bad = code not in (0, EXIT_INTERRUPTED)
        print(f"{names[i]}: " + ("done" if code == 0 else f"FAILED (exit {code}, see {commands[i][1]})" if bad else "stopped"),
              flush=True)
        if code == 0:
            done(i)
        elif bad:
            failed.append(names[i])

    stopped = run_commands(commands, at_once, started=start, ended=ended, env=env)
    if failed:
        raise SystemExit(f"run(s) {', '.join(failed)} failed (see their logs); fix and re-run (finished runs are kept)")
    return stopped
