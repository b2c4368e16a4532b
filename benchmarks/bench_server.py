"""The OpenEnv server's WebSocket load figure, with every client in a process of its own.

    python benchmarks/bench_server.py                                # 8 client processes, 10 s, the server on a free port
    python benchmarks/bench_server.py --server-cpus 0 --client-cpus 1-15    # pinned: the core split is reported
    python benchmarks/bench_server.py --server echo                  # the same clients against a plain uvicorn echo

``benchmarks/bench_openenv.py`` runs its clients as coroutines of one process, which on a small machine measures the
clients as much as the server. Here each client is a process (``multiprocessing``) holding one WebSocket session
to ``/ws`` and playing episodes back to back (``reset`` with a test problem, then the turns of its search trace:
``bench_openenv.ws_client``, every answer checked to be an ``observation``). The server (``countdown-gym serve``,
``CountdownMultiTurn-v0``) is a process of its own; its CPU time (user + system, ``/proc``) over the measured
seconds divided by the steps is the figure that does not depend on how many cores the clients take.

``--server echo`` serves the same clients from a plain uvicorn app with the same WebSocket settings that answers
every message with a fixed observation: the cost of uvicorn and the WebSocket layer alone, for comparison.

Printed: steps/s, requests/s, p50 / p99 latency of a request (reset or step), errors (a client whose session
failed), the server's CPU microseconds per step and per request, and the core split (the CPUs each side may use).
Targets: at most 100 us of server CPU per step; at least 5,000 steps/s from 8 clients where the cores allow.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from countdown_gym.dataclass_cli import check_min, parse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks/ as a package
from benchmarks.bench_openenv import Tally, cpu_seconds, episodes, free_port, launch, start_server, ws_client  # noqa: E402

TARGET_STEPS = 5_000
TARGET_CPU_US = 100.0
_ECHO_ANSWER = '{"type":"observation","data":{"observation":{"text":"= 37 [17,26,37]"},"reward":0.0,"done":false}}'


@dataclass
class Options:
    """Steps/s, latency and server CPU per step of countdown-gym serve, with each WebSocket client in its own process."""

    clients: int = 8
    """client processes (one WebSocket session each)"""
    seconds: float = 10.0
    """how long the clients play"""
    server: str = "countdown"
    """countdown (countdown-gym serve) or echo (a plain uvicorn WebSocket echo, for comparison)"""
    server_cpus: str = ""
    """CPUs the server may use, e.g. 0 or 0-1 (default: all)"""
    client_cpus: str = ""
    """CPUs the client processes may use, e.g. 1-15 (default: all)"""

    def __post_init__(self) -> None:
        check_min(self, 1, "clients")
        check_min(self, 0.5, "seconds")
        if self.server not in ("countdown", "echo"):
            raise ValueError(f"--server must be countdown or echo, got {self.server!r}")
        for name in ("server_cpus", "client_cpus"):
            cpu_list(getattr(self, name), f"--{name.replace('_', '-')}")


def cpu_list(text: str, flag: str = "") -> set[int] | None:
    """``"0,2-3"`` as ``{0, 2, 3}`` (``""``: None, every CPU); ``ValueError`` naming ``flag`` if malformed."""
    if not text:
        return None
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ValueError(f"{flag} must be CPU numbers such as 0 or 1-3,5, got {text!r}") from None
    if not cpus or min(cpus) < 0 or max(cpus) >= (os.cpu_count() or 1):
        raise ValueError(f"{flag} must name CPUs 0..{(os.cpu_count() or 1) - 1}, got {text!r}")
    return cpus


async def echo_app(scope: dict, receive, send) -> None:
    """ASGI: a WebSocket that answers each message with :data:`_ECHO_ANSWER` (``--server echo``)."""
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while (await receive())["type"] == "websocket.receive":
        await send({"type": "websocket.send", "text": _ECHO_ANSWER})


def start_echo_server() -> tuple[subprocess.Popen, str]:
    """The echo app under uvicorn in its own process, with the WebSocket settings ``countdown-gym serve`` uses."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", "bench_server:echo_app", "--app-dir", str(Path(__file__).parent),
           "--port", str(port), "--ws-max-size", "65536", "--ws-per-message-deflate", "false", "--log-level", "warning"]
    return launch(cmd, port, {**os.environ, "OMP_NUM_THREADS": "1"}, "echo server", 120)


def client_process(url: str, index: int, start_at: float, stop_at: float, cpus: set[int] | None,
                   results: multiprocessing.Queue) -> None:
    """One client: wait for ``start_at``, play until ``stop_at``, put ``(steps, resets, latencies, error)``."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    eps = episodes()
    tally, error = Tally(), ""
    time.sleep(max(0.0, start_at - time.time()))
    try:
        asyncio.run(ws_client(url, eps, index * 37, time.perf_counter() + (stop_at - time.time()), tally))
    except Exception as exc:  # noqa: BLE001 - a failed session is counted and shown, not a crash of the benchmark
        error = f"{type(exc).__name__}: {exc}"[:200]
    results.put((tally.steps, tally.resets, tally.latencies, error))


def main(argv: list[str] | None = None) -> int:
    opts = parse(Options, argv, prog="python benchmarks/bench_server.py")
    server_cpus, client_cpus = cpu_list(opts.server_cpus), cpu_list(opts.client_cpus)
    proc, url = start_echo_server() if opts.server == "echo" else start_server(2 * opts.clients)
    if server_cpus is not None:
        os.sched_setaffinity(proc.pid, server_cpus)
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue = ctx.Queue()
    load_before = os.getloadavg()[0]
    try:
        start_at = time.time() + 15  # every client has imported and read its problems by then
        stop_at = start_at + opts.seconds
        clients = [ctx.Process(target=client_process, args=(url, i, start_at, stop_at, client_cpus, results))
                   for i in range(opts.clients)]
        for c in clients:
            c.start()
        time.sleep(max(0.0, start_at - time.time()))
        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        time.sleep(max(0.0, stop_at - time.time()))
        cpu1, elapsed = cpu_seconds(proc.pid), time.perf_counter() - t0
        outcomes = [results.get(timeout=300) for _ in clients]
        for c in clients:
            c.join(timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    steps, resets = sum(o[0] for o in outcomes), sum(o[1] for o in outcomes)
    latencies = sorted(x for o in outcomes for x in o[2])
    errors = [o[3] for o in outcomes if o[3]]
    cents = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    command = " ".join(["python benchmarks/bench_server.py", *(argv if argv is not None else sys.argv[1:])])
    split = (f"server on CPUs {opts.server_cpus or 'all'}, clients on CPUs {opts.client_cpus or 'all'} "
             f"of {os.cpu_count()}")
    print(f"`{command}` (Python {platform.python_version()}, {split}; load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after)\n")
    print("| server | clients | steps/s | requests/s | p50 latency (ms) | p99 latency (ms) | errors "
          "| server CPU per step (µs) | server CPU per request (µs) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    per_step = (cpu1 - cpu0) / max(steps, 1) * 1e6
    print(f"| {opts.server} | {opts.clients} processes | {steps / elapsed:,.0f} | {(steps + resets) / elapsed:,.0f} | "
          f"{cents[49] * 1000:.2f} | {cents[98] * 1000:.2f} | {len(errors)} | {per_step:.0f} | "
          f"{(cpu1 - cpu0) / max(steps + resets, 1) * 1e6:.0f} |")
    for e in errors:
        print(f"error: {e}")
    print(f"\ntargets: server CPU per step <= {TARGET_CPU_US:.0f} µs ({'met' if per_step <= TARGET_CPU_US else 'not met'}); "
          f">= {TARGET_STEPS:,} steps/s from 8 clients ({'met' if steps / elapsed >= TARGET_STEPS else 'not met'} "
          f"with {split})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
