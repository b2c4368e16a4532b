"""What the benchmarks share: best-of-N timing and the command and machine lines of their reports."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn`` (on a shared machine, the least disturbed)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def command(script: str, argv: list[str] | None = None) -> str:
    """``python benchmarks/<script>`` with ``argv`` (default: this process's arguments)."""
    return " ".join([f"python benchmarks/{script}", *(sys.argv[1:] if argv is None else argv)])


def machine() -> str:
    """Python version, architecture, CPU count and the current load average, for a report's first lines."""
    return (f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPU cores shared with other "
            f"jobs, load average {os.getloadavg()[0]:.1f}")


def check_writable(path: str, flag: str) -> None:
    """Exit naming ``flag`` unless the folder of ``path`` (made if missing) may be written: before a run, not after."""
    from countdown_gym.runkit.runs import run_directory

    run_directory(Path(path).parent, f"{flag} {path}")
