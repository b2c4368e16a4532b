"""How a command ends when it cannot go on (:func:`~countdown_gym.dataclass_cli.run`): Ctrl-C (:func:`interrupted`,
exit code 130) and standard output that cannot be written (``> /dev/full``: one error line and exit code 1; a pipe
whose reader left: a quiet 0)."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any

EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it."""


def interrupted(prog: str) -> int:
    """Say on stderr that ``prog`` was stopped by Ctrl-C (one line, no traceback); :data:`EXIT_INTERRUPTED`."""
    print(f"\n{prog}: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


class OutputError(OSError):
    """Standard output could not be written while a command ran (a full disk such as ``> /dev/full``, a closed pipe)."""


class _Stdout:
    """``sys.stdout`` while a command runs (:func:`run`): an ``OSError`` writing it is an :class:`OutputError`."""

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
    """Within it, a failed write of ``sys.stdout`` raises :class:`OutputError`; on leaving, what was printed is flushed."""
    stream = sys.stdout
    if stream is None or isinstance(stream, _Stdout):
        yield
        return
    sys.stdout = _Stdout(stream)
    try:
        yield
        sys.stdout.flush()
    finally:
        if isinstance(sys.stdout, _Stdout) and sys.stdout.stream is stream:
            sys.stdout = stream


def output_failed(exc: OutputError, prog: str) -> int:
    """The exit code after ``exc``: a reader that closed the pipe (as ``| head`` does) quietly 0, as after
    ``--help``; any other failure one error line on stderr, 1."""
    with contextlib.suppress(OSError, ValueError):  # no second error when Python flushes the buffer at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if exc.errno == errno.EPIPE:
        return 0
    with contextlib.suppress(OSError):
        print(f"{prog}: error: cannot write to standard output: {exc.strerror or exc}", file=sys.stderr)
    return 1
