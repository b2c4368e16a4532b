"""A guard for tests of code that must never open a FIFO (imported by the test modules): a test that blocks fails."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class Hung(BaseException):
    """Not an OSError (a TimeoutError would be): no ``except OSError`` or ``except Exception`` swallows it."""


@contextlib.contextmanager
def no_hang(seconds: int = 60) -> Iterator[None]:
    """Fail (rather than block the suite) when the code inside opens a FIFO and waits on it."""

    def ring(signum: int, frame: object) -> None:
        raise Hung(f"still running after {seconds} s: blocked on a FIFO?")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
