"""Requests per second and latency of the OpenEnv server (``countdown-gym serve``) over HTTP and WebSocket.

    python benchmarks/bench_openenv.py                       # starts a server on a free 127.0.0.1 port
    python benchmarks/bench_openenv.py --clients 8 --transports ws --seconds 10
    python benchmarks/bench_openenv.py --url http://127.0.0.1:8000   # an already running server

The server (``CountdownMultiTurn-v0``, the ``longproc-0.5k`` test split, ``--max-turns 64``) runs in its own
process; the clients (HTTP: threads with one keep-alive connection each; WebSocket: coroutines of one asyncio loop
speaking openenv's messages) run in this one, on the same CPUs. Each client plays episodes back to back: ``reset``
with a test problem, then the turns of its search trace (with backtracking). A request is one reset or step,
answered (and checked); its latency runs from sending it to having its answer parsed. The last column is the CPU
time (``/proc``; ``nan`` for a ``--url`` server) per request: on a shared machine, the steadier figure.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median, quantiles
from typing import Literal

from _common import ROOT, command, machine
from websockets.asyncio.client import connect

from countdown_gym import load_split
from countdown_gym.dataclass_cli import check_min, parse
from countdown_gym.game.compact_trace import CompactTraceConfig
from countdown_gym.game.turn_trace import turn_trace

TARGET_WS_STEPS = 5_000
"""Target: WebSocket steps per second with 8 clients."""


@dataclass
class Options:
    """Requests per second and p99 latency of countdown-gym serve over HTTP and WebSocket with N clients."""

    clients: tuple[int, ...] = (1, 8, 64)  # numbers of concurrent clients to measure
    seconds: float = 5.0  # how long each measurement runs
    transports: tuple[Literal["http", "ws"], ...] = ("http", "ws")
    repeats: int = 3
    """measurements of each setting (the table shows the median and the range: a shared machine is noisy)"""
    url: str = ""  # an already running server (default: start one on a free 127.0.0.1 port)

    def __post_init__(self) -> None:
        check_min(self, 0.1, "seconds")
        check_min(self, 1, "repeats")
        if not self.clients or min(self.clients) < 1:
            raise ValueError(f"--clients must be numbers >= 1, got {self.clients}")
        if not self.transports:
            raise ValueError("--transports takes http and ws, got none")


@dataclass
class Tally:
    """What the clients of one measurement did."""

    steps: int = 0
    resets: int = 0
    latencies: list[float] = field(default_factory=list)


def episodes() -> list[tuple[dict, list[str]]]:
    """The test problems with the turns of their search traces (with backtracking)."""
    config = CompactTraceConfig(dead_ends=(1, 0))
    return [({"numbers": list(p.numbers), "target": p.target}, turn_trace(p, config=config, seed=i))
            for i, p in enumerate(load_split("longproc-0.5k", "test"))]


def http_client(url: str, eps: list, start: int, stop_at: float, tally: Tally) -> None:
    """Episodes over plain HTTP/1.1 (the standard library's keep-alive connection; lighter than httpx)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)

    def post(path: str, body: dict) -> dict:
        t0 = time.perf_counter()
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status} {data[:200]!r}")
        answer = json.loads(data)
        tally.latencies.append(time.perf_counter() - t0)
        return answer

    k = start
    try:
        while time.perf_counter() < stop_at:
            problem, turns = eps[k % len(eps)]
            k += 1
            eid = post("/reset", {"problem": problem})["observation"]["episode_id"]
            tally.resets += 1
            for t in turns:
                done = post("/step", {"action": {"turn": t}, "episode_id": eid})["done"]
                tally.steps += 1
                if done:
                    break
    finally:
        conn.close()


async def ws_client(url: str, eps: list, start: int, stop_at: float, tally: Tally) -> None:
    """Episodes over one WebSocket session (openenv's messages)."""
    async with connect(url.replace("http", "ws", 1) + "/ws", max_size=None, compression=None) as ws:

        async def ask(message: dict) -> dict:
            t0 = time.perf_counter()
            await ws.send(json.dumps(message))
            answer = json.loads(await ws.recv())
            if answer["type"] != "observation":
                raise RuntimeError(f"the server answered {answer}")
            tally.latencies.append(time.perf_counter() - t0)
            return answer["data"]

        k = start
        while time.perf_counter() < stop_at:
            problem, turns = eps[k % len(eps)]
            k += 1
            await ask({"type": "reset", "data": {"problem": problem}})
            tally.resets += 1
            for t in turns:
                done = (await ask({"type": "step", "data": {"turn": t}}))["done"]
                tally.steps += 1
                if done:
                    break


def cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system) the process ``pid`` has used so far (Linux ``/proc``), or NaN."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def measure(transport: str, url: str, n: int, seconds: float, eps: list,
            server_pid: int | None) -> tuple[float, float, float, float, float]:
    """``(requests/s, steps/s, p99 latency in ms, server and client CPU in microseconds per request)`` of ``n``
    clients over ``transport`` during ``seconds``."""
    tallies = [Tally() for _ in range(n)]  # one per client (threads do not share a counter)
    cpu0, mine0 = cpu_seconds(server_pid), cpu_seconds(os.getpid())
    t0 = time.perf_counter()
    if transport == "http":
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda i: http_client(url, eps, i * 37, t0 + seconds, tallies[i]), range(n)))
    else:
        async def run() -> None:
            await asyncio.gather(*(ws_client(url, eps, i * 37, t0 + seconds, tallies[i]) for i in range(n)))

        asyncio.run(run())
    elapsed = time.perf_counter() - t0
    steps, requests = sum(t.steps for t in tallies), sum(t.steps + t.resets for t in tallies)
    p99 = quantiles([x for t in tallies for x in t.latencies], n=100)[98] * 1000
    server_us = (cpu_seconds(server_pid) - cpu0) / requests * 1e6
    return requests / elapsed, steps / elapsed, p99, server_us, (cpu_seconds(os.getpid()) - mine0) / requests * 1e6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cmd: list[str], port: int, env: dict[str, str], what: str, seconds: float) -> tuple[subprocess.Popen, str]:
    """Start ``cmd`` (a server that listens on ``port``) and wait until it accepts a connection: its process and URL."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the {what} exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit(f"the {what} did not start within {seconds:g} s")


def start_server(max_sessions: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "countdown_gym", "serve", "--port", str(port), "--split", "test",
           "--max-sessions", str(max_sessions), "--max-turns", "64"]
    return launch(cmd, port, {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}, "server", 300)


def main(argv: list[str] | None = None) -> int:
    opts = parse(Options, argv, prog="python benchmarks/bench_openenv.py")
    eps = episodes()
    proc, url = (None, opts.url) if opts.url else start_server(2 * max(opts.clients))  # room for closing sessions
    runs = [(t, n) for t in opts.transports for n in opts.clients]
    results: dict[tuple[str, int], list[tuple[float, ...]]] = {run: [] for run in runs}
    before = machine()
    try:
        for r in range(opts.repeats):
            for transport, n in runs:
                results[(transport, n)].append(measure(transport, url, n, opts.seconds, eps, proc and proc.pid))
                print(f"repeat {r + 1}/{opts.repeats} {transport} x{n}: {results[(transport, n)][-1][0]:,.0f} "
                      "requests/s", file=sys.stderr, flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    print(f"\n`{command('bench_openenv.py', argv)}` ({opts.repeats} x {opts.seconds:g} s per setting, {before} before "
          f"and {os.getloadavg()[0]:.1f} after; server and clients on the same machine)\n")
    print("| transport | clients | requests/s median (min - max) | steps/s median | p99 latency median (ms) "
          "| CPU per request median, server / clients (µs) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (transport, n), rows in results.items():
        rate, steps, p99, server, client = (sorted(col) for col in zip(*rows, strict=True))
        print(f"| {'HTTP' if transport == 'http' else 'WebSocket'} | {n} | {median(rate):,.0f} ({rate[0]:,.0f} - "
              f"{rate[-1]:,.0f}) | {median(steps):,.0f} | {median(p99):.1f} | {median(server):.0f} / "
              f"{median(client):.0f} |")
    if ("ws", 8) in results:
        steps = median(r[1] for r in results[("ws", 8)])
        print(f"\nWebSocket steps/s with 8 clients: {steps:,.0f} (target {TARGET_WS_STEPS:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
