"""What the benchmarks share: timing, the command, machine and time lines of their reports, and writing a report."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds of one call of ``fn``, and what it returned."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn`` (on a shared machine, the least disturbed)."""
    return min(timed(fn)[0] for _ in range(repeats))


def command(script: str, argv: list[str] | None = None) -> str:
    """``python benchmarks/<script>`` with ``argv`` (default: this process's arguments)."""
    return " ".join([f"python benchmarks/{script}", *(sys.argv[1:] if argv is None else argv)])


def machine() -> str:
    """Python version, architecture, CPU count and the current load average, for a report's first lines."""
    return (f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPU cores shared with other "
            f"jobs, load average {os.getloadavg()[0]:.1f}")


def now() -> str:
    """The time to the minute, UTC, for a report's "run at" line."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def check_writable(path: str, flag: str) -> None:
    """Exit naming ``flag`` unless the folder of ``path`` (made if missing) may be written: before a run, not after."""
    from countdown_gym.runkit.runs import run_directory

    run_directory(Path(path).parent, f"{flag} {path}")


def write_report(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all, and say so."""
    from countdown_gym.runkit.runs import write_text_atomic

    write_text_atomic(path, text)
    print(f"wrote {path}")
