"""Steps per second of the OpenEnv server (``countdown-gym serve``) over HTTP and WebSocket, N clients at once.

    python benchmarks/bench_openenv.py                       # starts a server on a free local port, prints the table
    python benchmarks/bench_openenv.py --url http://127.0.0.1:8000 --clients 1,16

The server (``CountdownMultiTurn-v0``, the ``longproc-0.5k`` test split) runs in its own process, started
here unless ``--url`` names one; the clients run in this process on one asyncio loop. Each client plays
episodes back to back for ``--seconds``: ``reset`` with a test problem, then the turns of its search trace
(:func:`countdown_gym.turn_trace.turn_trace` with backtracking) until the episode ends. HTTP clients are
threads posting ``/reset`` and ``/step`` with the episode id over one keep-alive ``http.client`` connection
each (httpx costs the client about 5 ms a request here, more than the server); WebSocket clients are
:class:`~countdown_gym.integrations.openenv.CountdownTurnClient` sessions on one asyncio loop. A step is one
turn answered; resets are counted apart. Every reply is checked (HTTP 200; WebSocket errors raise).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from tqdm import tqdm  # noqa: E402

from countdown_gym import load_split  # noqa: E402
from countdown_gym.compact_trace import CompactTraceConfig  # noqa: E402
from countdown_gym.dataclass_cli import check_min, parse  # noqa: E402
from countdown_gym.integrations.openenv import CountdownTurnClient  # noqa: E402
from countdown_gym.turn_trace import turn_trace  # noqa: E402


@dataclass
class Options:
    """Steps per second of countdown-gym serve over HTTP and WebSocket with N concurrent clients."""

    clients: tuple[int, ...] = (1, 8, 64)
    """numbers of concurrent clients to measure"""
    seconds: float = 10.0
    """how long each measurement runs"""
    transports: tuple[str, ...] = ("http", "ws")
    repeats: int = 3
    """measurements of each setting (the table shows the median and the range: a shared machine is noisy)"""
    url: str = ""
    """an already running server (default: start one on a free 127.0.0.1 port)"""

    def __post_init__(self) -> None:
        check_min(self, 0.1, "seconds")
        check_min(self, 1, "repeats")
        if not self.clients or min(self.clients) < 1:
            raise ValueError(f"--clients must be numbers >= 1, got {self.clients}")
        bad = set(self.transports) - {"http", "ws"}
        if bad:
            raise ValueError(f"--transports takes http and ws, got {sorted(bad)}")


def episodes() -> list[tuple[dict, list[str]]]:
    """The test problems with the turns of their search traces (with backtracking)."""
    out = []
    for i, p in enumerate(load_split("longproc-0.5k", "test")):
        turns = turn_trace(p, config=CompactTraceConfig(dead_ends=(1, 0)), seed=i)
        out.append(({"numbers": list(p.numbers), "target": p.target}, turns))
    return out


def http_client(url: str, eps: list, start: int, stop_at: float) -> tuple[int, int]:
    """Episodes over plain HTTP/1.1 (the standard library's keep-alive connection; lighter than httpx)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    headers = {"content-type": "application/json"}

    def post(path: str, body: dict) -> dict:
        conn.request("POST", path, json.dumps(body), headers)
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status} {data[:200]!r}")
        return json.loads(data)

    steps = resets = 0
    k = start
    try:
        while time.perf_counter() < stop_at:
            problem, turns = eps[k % len(eps)]
            k += 1
            eid = post("/reset", {"problem": problem})["observation"]["episode_id"]
            resets += 1
            for t in turns:
                steps += 1
                if post("/step", {"action": {"turn": t}, "episode_id": eid})["done"]:
                    break
    finally:
        conn.close()
    return steps, resets


async def ws_client(url: str, eps: list, start: int, stop_at: float, counts: list[int]) -> None:
    async with CountdownTurnClient(base_url=url) as env:
        k = start
        while time.perf_counter() < stop_at:
            problem, turns = eps[k % len(eps)]
            k += 1
            await env.reset(problem=problem)
            counts[1] += 1
            for t in turns:
                result = await env.step(t)
                counts[0] += 1
                if result.done:
                    break


async def ws_measure(url: str, n: int, seconds: float, eps: list) -> list[int]:
    counts = [0, 0]
    stop_at = time.perf_counter() + seconds
    await asyncio.gather(*(ws_client(url, eps, i * 37, stop_at, counts) for i in range(n)))
    return counts


def measure(transport: str, url: str, n: int, seconds: float, eps: list) -> tuple[float, float]:
    """``(steps/s, resets/s)`` of ``n`` clients over ``transport`` during ``seconds``: HTTP clients are
    threads, WebSocket clients coroutines of one asyncio loop."""
    t0 = time.perf_counter()
    if transport == "http":
        with ThreadPoolExecutor(n) as pool:
            done = list(pool.map(lambda i: http_client(url, eps, i * 37, t0 + seconds), range(n)))
        counts = [sum(d[0] for d in done), sum(d[1] for d in done)]
    else:
        counts = asyncio.run(ws_measure(url, n, seconds, eps))
    elapsed = time.perf_counter() - t0
    return counts[0] / elapsed, counts[1] / elapsed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(max_sessions: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "countdown_gym", "serve", "--port", str(port), "--split", "test",
           "--max-sessions", str(max_sessions), "--max-turns", "64"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with code {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("the server did not start within 300 s")


def main(argv: list[str] | None = None) -> int:
    opts = parse(Options, argv, prog="python benchmarks/bench_openenv.py")
    eps = episodes()
    proc = None
    url = opts.url
    if not url:
        proc, url = start_server(2 * max(opts.clients))  # room for sessions still closing
    rows = []
    try:
        runs = [(t, n) for t in opts.transports for n in opts.clients]
        results: dict[tuple[str, int], list[tuple[float, float]]] = {run: [] for run in runs}
        for _, (transport, n) in tqdm([(r, run) for r in range(opts.repeats) for run in runs], desc="measurements"):
            results[(transport, n)].append(measure(transport, url, n, opts.seconds, eps))
        rows = [(t, n, sorted(results[(t, n)])) for t, n in runs]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    command = " ".join(["python benchmarks/bench_openenv.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"\n`{command}` ({opts.repeats} x {opts.seconds:g} s per setting, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, server and clients on the same machine)\n")
    print("| transport | clients | steps/s median (min - max) | resets/s median |")
    print("| --- | --- | --- | --- |")
    for transport, n, runs_ in rows:
        steps = [r[0] for r in runs_]
        resets = sorted(r[1] for r in runs_)
        name = "HTTP" if transport == "http" else "WebSocket"
        print(f"| {name} | {n} | {statistics.median(steps):,.0f} ({steps[0]:,.0f} - {steps[-1]:,.0f}) | "
              f"{statistics.median(resets):,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
