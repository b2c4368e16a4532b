"""The OpenEnv server's load figures over WebSocket or HTTP, with every client in a process of its own.

    python benchmarks/bench_server.py                                # 8 client processes, 10 s, the server on a free port
    python benchmarks/bench_server.py --server-cpus 0 --client-cpus 1-15    # pinned: the core split is reported
    python benchmarks/bench_server.py --transports http ws --clients 1 8 64 --seconds 5 --repeats 3

Each client plays episodes back to back (``reset`` with a test problem, then the turns of its search trace, with
backtracking) over one WebSocket session on ``/ws`` or one keep-alive HTTP connection. The server (``countdown-gym
serve``, ``CountdownMultiTurn-v0``, ``longproc-0.5k`` test, ``--max-turns 64``) runs in its own process; its CPU time
(user + system, ``/proc``) per step does not depend on how many cores the clients take. Printed: a Markdown row per
transport, client count and repeat (latency: from sending a reset or step to having its answer parsed; errors: clients
whose session failed). Targets: at most 100 us of server CPU per step; at least 5,000 WebSocket steps/s
from 8 clients where the cores allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from _common import ROOT, command
from websockets.asyncio.client import connect

from countdown_gym import load_split
from countdown_gym.dataclass_cli import check_min, parse, run_script
from countdown_gym.game.compact_trace import CompactTraceConfig
from countdown_gym.game.turn_trace import turn_trace

TARGET_STEPS = 5_000
TARGET_CPU_US = 100.0
_ECHO_DATA = '{"observation":{"text":"= 37 [17,26,37]","episode_id":"echo"},"reward":0.0,"done":false}'


@dataclass
class Options:
    """Steps/s, latency and server CPU per step of countdown-gym serve, with each client in its own process."""

    clients: tuple[int, ...] = (8,)
    """numbers of client processes to measure (one session each)"""
    seconds: float = 10.0
    """how long the clients of each measurement play"""
    transports: tuple[Literal["http", "ws"], ...] = ("ws",)
    """ws (a WebSocket session per client) and / or http (a keep-alive connection per client)"""
    repeats: int = 1
    """measurements of each transport and client count (a shared machine is noisy)"""
    server: Literal["countdown", "echo"] = "countdown"
    """countdown (countdown-gym serve) or echo (a plain uvicorn echo, for comparison)"""
    server_cpus: str = ""
    """CPUs the server may use, e.g. 0 or 0-1 (default: all)"""
    client_cpus: str = ""
    """CPUs the client processes may use, e.g. 1-15 (default: all)"""
    url: str = ""
    """an already running server, e.g. http://127.0.0.1:8000 (default: start one on a free 127.0.0.1 port)"""

    def __post_init__(self) -> None:
        check_min(self, 0.5, "seconds")
        check_min(self, 1, "repeats")
        if not self.clients or min(self.clients) < 1:
            raise ValueError(f"--clients must be numbers >= 1, got {self.clients}")
        if not self.transports:
            raise ValueError("--transports takes http and ws, got none")
        if self.url and (self.server == "echo" or self.server_cpus):
            raise ValueError("--url names a running server: it takes neither --server echo nor --server-cpus")
        if self.url:
            self.url = server_url(self.url)
        for name in ("server_cpus", "client_cpus"):
            cpu_list(getattr(self, name), f"--{name.replace('_', '-')}")


@dataclass
class Tally:
    """What one client did."""

    steps: int = 0
    resets: int = 0
    latencies: list[float] = field(default_factory=list)


def server_url(text: str) -> str:
    """``text`` as ``http://HOST:PORT`` (a trailing ``/`` dropped), the form the clients build their addresses from;
    ``ValueError`` naming ``--url`` for anything else."""
    url = urlsplit(text)
    try:
        port = url.port
    except ValueError:  # no number, or out of range
        port = None
    if url.scheme != "http" or not url.hostname or port is None or "@" in url.netloc or url.path not in ("", "/") \
            or url.query or url.fragment:
        raise ValueError(f"--url must be http://HOST:PORT, e.g. http://127.0.0.1:8000, got {text!r}")
    return f"http://{url.netloc}"


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


def episodes() -> list[tuple[dict, list[str]]]:
    """The test problems with the turns of their search traces (with backtracking)."""
    config = CompactTraceConfig(dead_ends=(1, 0))
    return [({"numbers": list(p.numbers), "target": p.target}, turn_trace(p, config=config, seed=i))
            for i, p in enumerate(load_split("longproc-0.5k", "test"))]


async def play(ask: Callable[[str, dict], Awaitable[dict]], eps: list, start: int, stop_at: float, tally: Tally) -> None:
    """Episodes back to back until ``stop_at``; ``ask("reset" | "step", data)`` sends a request and returns its answer."""
    k = start
    while time.perf_counter() < stop_at:
        problem, turns = eps[k % len(eps)]
        k += 1
        await ask("reset", {"problem": problem})
        tally.resets += 1
        for t in turns:
            done = (await ask("step", {"turn": t}))["done"]
            tally.steps += 1
            if done:
                break


async def http_client(url: str, eps: list, start: int, stop_at: float, tally: Tally) -> None:
    """Episodes over plain HTTP/1.1 (the standard library's keep-alive connection; lighter than httpx)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    episode: dict = {}  # the episode_id of the last reset, sent with each step
    with contextlib.closing(http.client.HTTPConnection(host, int(port), timeout=120)) as conn:

        async def ask(kind: str, data: dict) -> dict:
            body = data if kind == "reset" else {"action": data, **episode}
            t0 = time.perf_counter()
            conn.request("POST", f"/{kind}", json.dumps(body), {"content-type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            if r.status != 200:
                raise RuntimeError(f"/{kind}: HTTP {r.status} {raw[:200]!r}")
            answer = json.loads(raw)
            tally.latencies.append(time.perf_counter() - t0)
            if kind == "reset":
                episode["episode_id"] = answer["observation"]["episode_id"]
            return answer

        await play(ask, eps, start, stop_at, tally)


async def ws_client(url: str, eps: list, start: int, stop_at: float, tally: Tally) -> None:
    """Episodes over one WebSocket session (openenv's messages)."""
    async with connect(url.replace("http", "ws", 1) + "/ws", max_size=None, compression=None) as ws:

        async def ask(kind: str, data: dict) -> dict:
            t0 = time.perf_counter()
            await ws.send(json.dumps({"type": kind, "data": data}))
            answer = json.loads(await ws.recv())
            if answer["type"] != "observation":
                raise RuntimeError(f"the server answered {answer}")
            tally.latencies.append(time.perf_counter() - t0)
            return answer["data"]

        await play(ask, eps, start, stop_at, tally)


def cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system) the process ``pid`` has used so far (Linux ``/proc``), or NaN."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


async def echo_app(scope: dict, receive, send) -> None:
    """ASGI: every HTTP request and WebSocket message answered with :data:`_ECHO_DATA` (``--server echo``)."""
    if scope["type"] == "http":
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": _ECHO_DATA.encode()})
    elif scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while (await receive())["type"] == "websocket.receive":
            await send({"type": "websocket.send", "text": f'{{"type":"observation","data":{_ECHO_DATA}}}'})


def start_server(echo: bool, max_sessions: int) -> tuple[subprocess.Popen, str]:
    """``countdown-gym serve`` (or the echo app under uvicorn with its WebSocket settings) on a free port, once it
    accepts a connection: its process and URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if echo:
        cmd = [sys.executable, "-m", "uvicorn", "bench_server:echo_app", "--app-dir", str(Path(__file__).parent),
               "--port", str(port), "--ws-max-size", "65536", "--ws-per-message-deflate", "false", "--log-level", "warning"]
    else:
        cmd = [sys.executable, "-m", "countdown_gym", "serve", "--port", str(port), "--split", "test",
               "--max-sessions", str(max_sessions), "--max-turns", "64"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("the server did not start within 300 s")


def client_process(transport: str, url: str, index: int, seconds: float, cpus: set[int] | None,
                   ready: Barrier, results: multiprocessing.Queue) -> None:
    """One client: read the problems, wait for the others, play ``seconds``, put ``(steps, resets, latencies, error)``."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    eps = episodes()
    tally, error = Tally(), ""
    ready.wait()
    stop_at = time.perf_counter() + seconds
    try:
        asyncio.run((http_client if transport == "http" else ws_client)(url, eps, index * 37, stop_at, tally))
    except Exception as exc:  # noqa: BLE001 - a failed session is counted and shown, not a crash of the benchmark
        error = f"{type(exc).__name__}: {exc}"[:200]
    results.put((tally.steps, tally.resets, tally.latencies, error))


def measure(transport: str, url: str, n: int, seconds: float, cpus: set[int] | None,
            server_pid: int | None) -> tuple[float, float, float, float, float, float, list[str]]:
    """``(steps/s, requests/s, p50 and p99 latency in ms, server CPU µs per step and per request, errors)`` of ``n``
    client processes over ``transport`` during ``seconds``."""
    ctx = multiprocessing.get_context("spawn")
    results, ready = ctx.Queue(), ctx.Barrier(n + 1)
    clients = [ctx.Process(target=client_process, args=(transport, url, i, seconds, cpus, ready, results))
               for i in range(n)]
    for c in clients:
        c.start()
    ready.wait(timeout=300)  # every client has imported and read its problems
    cpu0, t0 = cpu_seconds(server_pid), time.perf_counter()
    time.sleep(seconds)
    cpu, elapsed = cpu_seconds(server_pid) - cpu0, time.perf_counter() - t0
    outcomes = [results.get(timeout=300) for _ in clients]
    for c in clients:
        c.join(timeout=60)
    steps, resets = sum(o[0] for o in outcomes), sum(o[1] for o in outcomes)
    latencies = [x for o in outcomes for x in o[2]]
    cents = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return (steps / elapsed, (steps + resets) / elapsed, cents[49] * 1000, cents[98] * 1000,
            cpu / max(steps, 1) * 1e6, cpu / max(steps + resets, 1) * 1e6, [o[3] for o in outcomes if o[3]])


def main(argv: list[str] | None = None) -> int:
    opts = parse(Options, argv, prog="python benchmarks/bench_server.py")
    server_cpus, client_cpus = cpu_list(opts.server_cpus), cpu_list(opts.client_cpus)
    # twice the clients: room for sessions still closing
    proc, url = (None, opts.url) if opts.url else start_server(opts.server == "echo", 2 * max(opts.clients))
    if proc is not None and server_cpus is not None:
        os.sched_setaffinity(proc.pid, server_cpus)
    rows: dict[tuple[str, int], list[tuple]] = {(t, n): [] for t in opts.transports for n in opts.clients}
    load_before = os.getloadavg()[0]
    try:
        for r in range(opts.repeats):
            for transport, n in rows:
                rows[(transport, n)].append(measure(transport, url, n, opts.seconds, client_cpus, proc and proc.pid))
                print(f"repeat {r + 1}/{opts.repeats} {transport} x{n}: {rows[(transport, n)][-1][0]:,.0f} steps/s",
                      file=sys.stderr, flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    split = (f"server on CPUs {opts.server_cpus or 'all'}, clients on CPUs {opts.client_cpus or 'all'} "
             f"of {os.cpu_count()}")
    print(f"`{command('bench_server.py', argv)}` (Python {platform.python_version()}, {split}; load average "
          f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after)\n")
    print("| server | clients | steps/s | requests/s | p50 latency (ms) | p99 latency (ms) | errors "
          "| server CPU per step (µs) | server CPU per request (µs) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (transport, n), measured in rows.items():
        for steps, requests, p50, p99, per_step, per_request, errors in measured:
            print(f"| {opts.server} | {n} {'HTTP' if transport == 'http' else 'WebSocket'} processes | {steps:,.0f} | "
                  f"{requests:,.0f} | {p50:.2f} | {p99:.2f} | {len(errors)} | {per_step:.0f} | {per_request:.0f} |")
    errors = [e for measured in rows.values() for m in measured for e in m[6]]
    for e in errors:
        print(f"error: {e}")
    ws = [m for (t, _), measured in rows.items() if t == "ws" for m in measured]
    eight = [m[0] for (t, n), measured in rows.items() if (t, n) == ("ws", 8) for m in measured]
    if ws:
        print(f"\ntargets (WebSocket): server CPU per step <= {TARGET_CPU_US:.0f} µs (met in "
              f"{sum(m[4] <= TARGET_CPU_US for m in ws)} of {len(ws)} rows); >= {TARGET_STEPS:,} steps/s from 8 "
              f"clients (met in {sum(s >= TARGET_STEPS for s in eight)} of {len(eight)} rows, with {split})")
    return 1 if errors else 0


if __name__ == "__main__":
    run_script(main)
