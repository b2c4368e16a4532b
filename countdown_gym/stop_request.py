"""Ctrl-C that loses nothing: the training scripts finish the current step, save, and stop.

``with StopRequest() as stop:`` turns the first SIGINT (Ctrl-C) into ``stop.requested = True``,
which a training loop checks between steps: it then writes a checkpoint and returns, so
``--resume`` continues from exactly that step. A second Ctrl-C raises ``KeyboardInterrupt`` at
once, as usual. Outside the main thread (where signal handlers cannot be set) it does nothing.

Example:
    >>> with StopRequest() as stop:
    ...     stop.requested
    False
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any


class StopRequest:
    """A context manager: the first Ctrl-C inside it sets :attr:`requested`; a second one interrupts."""

    def __init__(self, message: str = "Ctrl-C: stopping after this step and saving a checkpoint (Ctrl-C again to stop at once)") -> None:
        self.message = message
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{self.message}", file=sys.stderr, flush=True)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
