"""How a command ends when it cannot go on (:func:`~countdown_gym.dataclass_cli.run`): a usage error (exit code 2),
Ctrl-C (exit code 130) and standard output or error that cannot be written (``> /dev/full``:
one error line and exit code 1; a pipe whose reader left: quietly, exit code 141); and how it writes an output file
whole or not at all (:func:`written_aside`), never through a FIFO or device (:func:`not_regular`), and files that
must agree all or none (:func:`write_together`)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it."""

EXIT_PIPE_CLOSED = 141
"""The exit code of a command whose standard output's or error's reader left (``| head``): 128 + 13 (SIGPIPE), as
a shell reports a Unix tool stopped so; never 0, so a run cut short is no success."""


class UsageError(SystemExit):
    """Bad command-line input: exit code 2, its message already printed on stderr (``str()`` of it is the message)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def error_line(line: str, code: int = 1) -> int:
    """Print ``line`` on stderr and return ``code``; stderr a pipe whose reader left: :data:`EXIT_PIPE_CLOSED`
    (another failure to write it: ``code``), never a traceback, nor a second error when Python flushes at exit."""
    try:
        print(line, file=sys.stderr, flush=True)
        return code
    except OSError as exc:
        _quiet(sys.stderr)
        return EXIT_PIPE_CLOSED if exc.errno == errno.EPIPE else code


def _quiet(stream: Any) -> None:
    """Point ``stream``'s file descriptor at ``/dev/null``: what it still buffers is flushed there at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


class OutputError(OSError):
    """Standard output or error could not be written while a command ran (a full disk such as ``> /dev/full``, a
    closed pipe)."""


class _Watched:
    """``sys.stdout`` or ``sys.stderr`` while a command runs (:func:`run`): an ``OSError`` writing it is an
    :class:`OutputError`."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as e:
            raise OutputError(e.errno, e.strerror) from e

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as e:
            raise OutputError(e.errno, e.strerror) from e

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def stdout_watched() -> Iterator[None]:
    """Within it, a failed write of ``sys.stdout`` or ``sys.stderr`` raises :class:`OutputError`; on leaving, what
    was printed is flushed."""
    streams = {name: stream for name in ("stdout", "stderr")
               if (stream := getattr(sys, name)) is not None and not isinstance(stream, _Watched)}
    for name, stream in streams.items():
        setattr(sys, name, _Watched(stream))
    try:
        yield
        for name in streams:
            getattr(sys, name).flush()
    finally:
        for name, stream in streams.items():
            current = getattr(sys, name)
            if isinstance(current, _Watched) and current.stream is stream:
                setattr(sys, name, stream)


def guarded(prog: str, body: Callable[[], int | None]) -> int:
    """The exit code of ``body()`` (None: 0) run within :func:`stdout_watched`; a :class:`UsageError`: 2; Ctrl-C:
    one line, :data:`EXIT_INTERRUPTED`; standard output or error that cannot be written: one error line and 1, or,
    a reader that closed the pipe (``| head``), quietly :data:`EXIT_PIPE_CLOSED`; another ``OSError`` (a full disk,
    a file it may not write): one error line, 1."""
    try:
        with stdout_watched():
            return body() or 0
    except UsageError:
        return 2
    except KeyboardInterrupt:
        error_line(f"\n{prog}: interrupted")
        return EXIT_INTERRUPTED
    except OutputError as exc:
        _quiet(sys.stdout)  # no second error when Python flushes the buffer at exit
        if exc.errno == errno.EPIPE:
            _quiet(sys.stderr)
            return EXIT_PIPE_CLOSED
        return error_line(f"{prog}: error: cannot write to standard output: {exc.strerror or exc}")
    except OSError as exc:
        return error_line(f"{prog}: error: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}")


def run_script(main: Callable[[], Any]) -> NoReturn:
    """A script's ``if __name__ == "__main__"``: exit with ``main()``'s code (an int as it is; a result marked
    ``{"interrupted": True}``, a run that Ctrl-C stopped after saving a checkpoint, :data:`EXIT_INTERRUPTED`; else 0).
    A Ctrl-C that reaches here (while the script sets up, or a second one) is one line and :data:`EXIT_INTERRUPTED`;
    an ``OSError`` (:func:`guarded`), or safetensors' own error for one, is one error line and exit code 1."""
    def code() -> int:
        result = main()
        if isinstance(result, Mapping):
            return EXIT_INTERRUPTED if result.get("interrupted") else 0
        return result if isinstance(result, int) and not isinstance(result, bool) else 0

    prog = Path(sys.argv[0]).name
    try:
        exit_code = guarded(prog, code)
    except Exception as exc:
        if type(exc).__name__ != "SafetensorError" or "I/O error" not in str(exc):  # a defect: its traceback
            raise
        raise SystemExit(error_line(f"{prog}: error: writing weights: {exc}")) from None
    raise SystemExit(exit_code)


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when something other than a regular file is there (a link is followed): ``"a folder"``,
    ``"a FIFO"`` or ``"a special file"`` (a socket, a device); None for a regular file or nothing at all. Looks with
    ``stat`` only, so a FIFO (whose reader blocks) or a device (``/dev/zero`` never ends) is never opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there (or a dangling link): the caller's own "missing" case
        return None
    return file_kind(mode)


def file_kind(mode: int) -> str | None:
    """What an ``st_mode`` says stands there when it is not a regular file: ``"a folder"``, ``"a FIFO"`` or
    ``"a special file"`` (a socket, a device); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a special file"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _refuse_devices(paths: Iterable[Path]) -> None:
    """``OSError`` for a device or socket among ``paths``: a write would replace it by a file (a link to one is
    replaced, not the device)."""
    if device := next((p for p in paths if not p.is_symlink() and not_regular(p) == "a special file"), None):
        raise OSError(errno.EEXIST, "a device or a socket, not a file", str(device))


@contextlib.contextmanager
def written_aside(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Write ``path`` (a file or a folder) whole or not at all: yields ``<path>.tmp`` (whatever stale stood there
    removed) to write; on leaving, it replaces ``path`` (a FIFO or link there is replaced, never opened; a device
    or socket is an ``OSError`` first; a folder there is renamed to ``<path>.old``, put back if the new one cannot
    take its place, and removed once it has); on an exception (a full disk, Ctrl-C) the temporary is removed and
    ``path`` keeps what it held. A folder's ``<path>.old`` that a kill left is put back (no ``path``) or removed
    first."""
    path = Path(path)
    _refuse_devices([path])
    tmp, old = path.with_name(path.name + ".tmp"), path.with_name(path.name + ".old")
    _remove(tmp)
    if old.is_dir() and not old.is_symlink():  # a kill during a folder swap left it
        if not os.path.lexists(path):  # between the two renames: the old folder back
            os.replace(old, path)
        elif path.is_dir():  # before the old folder was removed
            shutil.rmtree(old)
    swap = False
    try:
        yield tmp
        swap = tmp.is_dir() and path.is_dir() and not path.is_symlink()
        try:
            if swap:
                _remove(old)
                os.replace(path, old)
            os.replace(tmp, path)
        except BaseException:  # a Ctrl-C even between the two renames: the old folder is put back
            if swap and old.is_dir() and not os.path.lexists(path):
                os.replace(old, path)
            raise
    finally:
        _remove(tmp)  # still there only after a failure
    if swap:
        shutil.rmtree(old)


def write_together(files: Mapping[str | os.PathLike[str], str | bytes | Callable[[Path], Any]]) -> None:
    """Write files that must agree (a page, its figure, a line quoting it) all or none: each to a temporary beside it,
    ``<stem>.part<suffix>`` (``str``: UTF-8 text; ``bytes`` as they are; a function is given that path); once all are
    whole, a journal beside the last file (``<name>.parts``) names them and they replace their files in the order
    given, the last one last. A kill during the renames leaves the journal: :func:`finish_together`, run first by
    every call (and by whoever reads the files), completes them."""
    paths = [Path(p) for p in files]
    journal = finish_together(paths[-1])
    if folder := next((p for p in paths if p.is_dir() and not p.is_symlink()), None):  # no rename could replace it:
        raise IsADirectoryError(errno.EISDIR, "a folder, not a file", str(folder))  # refused before any part is written
    _refuse_devices(paths)
    parts = [p.with_name(f"{p.stem}.part{p.suffix}") for p in paths]
    try:
        for part, write in zip(parts, files.values(), strict=True):
            if callable(write):
                write(part)
            else:
                with written_aside(part) as tmp:
                    tmp.write_bytes(write.encode() if isinstance(write, str) else write)
        with written_aside(journal) as tmp:
            pairs = [[os.path.relpath(x, journal.parent) for x in pair] for pair in zip(parts, paths, strict=True)]
            tmp.write_text(json.dumps({"renames": pairs}) + "\n", encoding="utf-8")
    except BaseException:
        for part in parts:
            part.unlink(missing_ok=True)
        raise
    finish_together(paths[-1])


def finish_together(last: str | os.PathLike[str]) -> Path:
    """Complete the renames of a :func:`write_together` whose last file is ``last`` that a kill cut short (its
    journal names them; none: nothing to do); returns the journal's path."""
    journal = Path(last).with_name(Path(last).name + ".parts")
    if os.path.lexists(journal):
        try:
            if (kind := not_regular(journal)) is not None:
                raise ValueError(f"it is {kind}")
            for part, path in json.loads(journal.read_bytes().decode("utf-8"))["renames"]:
                if (journal.parent / part).is_file():
                    os.replace(journal.parent / part, journal.parent / path)
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            raise SystemExit(f"{journal}: not the journal of an interrupted write ({exc}); delete it") from None
        journal.unlink()
    return journal
