"""``countdown-gym audit REWARD_FN``: how often a reward function pays for a known reward hack.

The corpus (``countdown_gym/data/exploits.jsonl``, :func:`load_exploits`) holds completions that game Countdown
rewards and a few correct controls, each with its due verdict (``reject`` or ``accept``) and this verifier's reason
code. A reward function ``fn(completion, numbers, target) -> float`` (``module:function`` or ``file.py:function``)
is called in a worker process with a time limit and a memory cap (after one untimed warm-up call), so a hanging
call counts as hung and the worker is restarted. A completion is *accepted* when its reward is >= ``--threshold``.

    countdown-gym audit countdown_gym.cli.audit:verify_reward
    countdown-gym audit benchmarks/peer_rewards.py:tinyzero_reward --timeout 2
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from countdown_gym import dataclass_cli
from countdown_gym.dataclass_cli import file_kind, not_regular, strict_json, written_aside
from countdown_gym.game.problem import Problem
from countdown_gym.game.verifier import REASONS, verify

CORPUS = "exploits.jsonl"
DEFAULT_TIMEOUT = 5.0
DEFAULT_MEMORY_MB = 2048
MAX_TIMEOUT = 86_400.0
"""The longest ``--timeout`` (a day): the worker's answer is waited for with ``select``, which refuses longer."""
MAX_MEMORY_MB = 1 << 30
"""The largest ``--memory-mb`` (1 PiB); more is no cap at all (``--memory-mb 0``)."""
MAX_CORPUS_BYTES = 64 * 2**20
LOAD_TIMEOUT = 300.0
WARM_UP = ("<think>1 + 2 = 3</think>\n<answer>1 + 2</answer>", (1, 2), 3)
"""A correct completion each worker passes once, untimed, before the corpus (the function's lazy set-up)."""


class AuditError(RuntimeError):
    """The reward function could not be loaded or the corpus is malformed."""


@dataclass(frozen=True)
class Exploit:
    """One corpus row: a completion for the problem ``(numbers, target)`` and its due verdict."""

    id: str
    category: str
    numbers: tuple[int, ...]
    target: int
    completion: str
    verdict: Literal["accept", "reject"]
    reason: str
    note: str


@dataclass(frozen=True)
class Outcome:
    """What one reward call gave: ``status`` is ``ok`` (``reward`` set), ``hung`` or ``raised``."""

    exploit: Exploit
    status: Literal["ok", "hung", "raised"]
    reward: float | None = None
    error: str | None = None

    def accepted(self, threshold: float) -> bool:
        return self.status == "ok" and self.reward is not None and self.reward >= threshold


@dataclass(frozen=True)
class CategoryResult:
    """Per category: rows, accepted (reward >= threshold), hung, raised, mean reward of the calls that returned."""

    category: str
    rows: int
    accepted: int
    hung: int
    raised: int
    mean_reward: float | None

    def cell(self) -> str:
        """``accepted/rows`` with the hung and raised calls named: the audit table's cell."""
        extra = [f"{n} {what}" for n, what in ((self.hung, "hung"), (self.raised, "raised")) if n]
        return f"{self.accepted}/{self.rows}" + (f" ({', '.join(extra)})" if extra else "")


def corpus_path() -> Path:
    """The shipped corpus file."""
    from importlib import resources

    return Path(str(resources.files("countdown_gym") / "data" / CORPUS))


def load_exploits(path: str | Path | None = None) -> list[Exploit]:
    """The corpus rows of ``path`` (default: the shipped corpus); a malformed row raises :class:`AuditError`."""
    path = Path(path) if path is not None else corpus_path()
    try:
        st = path.stat()  # a FIFO, a device or a folder is refused before it is opened (a FIFO would block)
        if (kind := file_kind(st.st_mode)) is not None:
            raise AuditError(f"the corpus {path} is {kind}, not a regular file")
        if (size := st.st_size) > MAX_CORPUS_BYTES:
            raise AuditError(f"the corpus {path} has {size:,} bytes, more than {MAX_CORPUS_BYTES:,}")
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise AuditError(f"cannot read the corpus {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise AuditError(f"the corpus {path} is not UTF-8 (byte {e.start})") from None
    out, seen = [], set()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = strict_json(line)  # a key twice is refused, not read last-wins
            ex = Exploit(
                id=str(row["id"]), category=str(row["category"]), numbers=tuple(row["numbers"]), target=row["target"],
                completion=row["completion"], verdict=row["verdict"], reason=row["reason"], note=str(row.get("note", "")),
            )  # fmt: skip
            Problem(ex.numbers, ex.target)  # numbers and target are ints
            json.dumps(row, ensure_ascii=False).encode("utf-8")  # a lone surrogate (\ud800) cannot be printed or written
        except (ValueError, KeyError, TypeError) as e:
            raise AuditError(f"{path}:{i}: not a corpus row ({type(e).__name__}: {str(e)[:200]})") from None
        except RecursionError:
            raise AuditError(f"{path}:{i}: not a corpus row (JSON nested too deeply)") from None
        if not isinstance(ex.completion, str) or ex.verdict not in ("accept", "reject") \
                or not isinstance(ex.reason, str) or ex.reason not in REASONS:  # a list would raise in the dict
            raise AuditError(f"{path}:{i}: completion must be a string, verdict accept|reject, reason a verifier code")
        if ex.id in seen:
            raise AuditError(f"{path}:{i}: duplicate id {ex.id!r}")
        seen.add(ex.id)
        out.append(ex)
    if not out:
        raise AuditError(f"{path}: no corpus rows")
    return out


def verify_reward(completion: str, numbers: Sequence[int], target: int) -> float:
    """This package's verifier as a reward: ``verify(Problem(numbers, target), completion).reward``."""
    return verify(Problem(tuple(numbers), target), completion).reward


# ---- the worker process -----------------------------------------------------------------------------


def _limit_memory(memory_mb: int) -> None:
    if memory_mb <= 0:
        return
    try:
        import resource
    except ImportError:  # not on POSIX: the time limit still holds
        return
    try:  # the cap is what the calls may add to the address space the loaded function already has
        with open("/proc/self/statm") as f:
            in_use = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        in_use = 0
    cap = in_use + memory_mb * 2**20
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if cap >= 2**63 - 1:  # beyond what the kernel can hold: no cap
        return
    with contextlib.suppress(ValueError, OSError):  # a cap the system refuses: the time limit still holds
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _serve(spec: str, conn: Any, memory_mb: int) -> None:
    """Worker: load the function, then answer ``(completion, numbers, target)`` requests until None. Ctrl-C is the
    parent's to handle (it stops the worker): the worker ignores SIGINT, so it prints no traceback of its own."""
    import warnings

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from countdown_gym.leaderboard.agents import load_object

    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - a reward's prints must not mix with the table
    warnings.simplefilter("ignore")  # e.g. Python's SyntaxWarning on an evaluated '2(3 + 4)'
    try:
        fn = load_object(spec, "reward function")
        if not callable(fn):
            raise ValueError(f"{spec} is not callable (a {type(fn).__name__})")
    except (ValueError, FileNotFoundError) as e:
        conn.send(("usage", str(e)))
        return
    except BaseException as e:  # the module itself failed to import
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    # a warm-up call, untimed: lazy imports and caches load here, not in row 1; what it raises (SystemExit too) is
    # found again by the rows, never a failed load
    with contextlib.suppress(BaseException):
        fn(WARM_UP[0], list(WARM_UP[1]), WARM_UP[2])
    _limit_memory(memory_mb)
    conn.send(("ready", None))
    while (item := conn.recv()) is not None:
        completion, numbers, target = item
        try:  # a NaN, an infinity or text ("1.0") is no reward: the call counts as raised, never as accepted
            reward = fn(completion, list(numbers), target)
            value = math.nan if isinstance(reward, (str, bytes)) else float(reward)
            conn.send(("ok", value) if math.isfinite(value) else ("raised", f"returned {reward!r:.100}, not a finite number"))
        except BaseException as e:  # noqa: BLE001 - a raising reward is a finding, not a crash of the audit
            conn.send(("raised", f"{type(e).__name__}: {e}"[:300]))


class _Worker:
    def __init__(self, spec: str, memory_mb: int, load_timeout: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(spec, child, memory_mb), daemon=True)
        main = threading.current_thread() is threading.main_thread()  # only there can a handler be set
        # Ctrl-C is the parent's: the worker inherits SIGINT blocked (or, without pthread_sigmask, ignored) from its
        # first instruction. A Ctrl-C while it starts is held and raised once it has started, never lost. Starting
        # multiprocessing's resource tracker unblocks SIGINT (it blocks and unblocks it around its own start), so the
        # tracker is started first.
        held = main and hasattr(signal, "pthread_sigmask")
        pressed: list[int] = []
        if held:
            resource_tracker.ensure_running()
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        previous = signal.signal(signal.SIGINT, (lambda n, _: pressed.append(n)) if held else signal.SIG_IGN) if main else None
        try:
            self.proc.start()
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
            try:
                if held:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending Ctrl-C is raised here
            except KeyboardInterrupt:
                pressed.append(signal.SIGINT)
        if pressed:
            if self.proc.pid is not None:
                self.proc.kill()
                self.proc.join()
            raise KeyboardInterrupt
        child.close()
        kind, detail = "slow", None
        if self.conn.poll(load_timeout):
            kind = "died"  # unless the worker's message comes
            with contextlib.suppress(EOFError):
                kind, detail = self.conn.recv()
        if kind != "ready":
            self.stop()
            if kind == "usage":
                raise ValueError(detail)
            raise AuditError({"slow": f"loading {spec} took more than {load_timeout:.0f} s",
                              "died": f"the worker loading {spec} died (exit code {self.proc.exitcode})",
                              "failed": f"importing {spec} failed: {detail}"}[kind])

    def call(self, item: tuple[str, tuple[int, ...], int], timeout: float) -> tuple[str, Any]:
        self.conn.send(item)
        if not self.conn.poll(timeout):
            return "hung", f"no answer within {timeout:g} s"
        try:
            return self.conn.recv()
        except EOFError:
            self.proc.join(1)
            return "raised", f"the worker process died (exit code {self.proc.exitcode})"

    def close(self) -> None:
        """Ask the worker to end, then make sure it has."""
        with contextlib.suppress(OSError):
            self.conn.send(None)
            self.proc.join(2)
        self.stop()

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()


def run_audit(spec: str, exploits: Sequence[Exploit] | None = None, *, timeout: float = DEFAULT_TIMEOUT,
              memory_mb: int = DEFAULT_MEMORY_MB, load_timeout: float = LOAD_TIMEOUT, progress: bool = False,
              ) -> list[Outcome]:
    """Call the reward function ``spec`` on every corpus row, each call in a worker with ``timeout`` seconds; raises
    ``ValueError`` for a spec that names no callable, :class:`AuditError` when its module fails to import."""
    if not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(f"timeout must be > 0 and at most {MAX_TIMEOUT:g} seconds, got {timeout}")
    from tqdm import tqdm

    rows = load_exploits() if exploits is None else list(exploits)
    worker: _Worker | None = None
    out = []
    try:
        for ex in tqdm(rows, desc="audit", unit="call", disable=not progress):
            if worker is None:
                worker = _Worker(spec, memory_mb, load_timeout)
            status, value = worker.call((ex.completion, ex.numbers, ex.target), timeout)
            out.append(Outcome(ex, "ok", reward=value) if status == "ok" else Outcome(ex, status, error=value))
            if status == "hung" or (status == "raised" and not worker.proc.is_alive()):
                worker.stop()
                worker = None
    finally:
        if worker is not None:
            worker.close()
    return out


def _result(name: str, outcomes: Sequence[Outcome], threshold: float) -> CategoryResult:
    rewards = [o.reward for o in outcomes if o.status == "ok" and o.reward is not None]
    return CategoryResult(
        name, len(outcomes), sum(o.accepted(threshold) for o in outcomes), sum(o.status == "hung" for o in outcomes),
        sum(o.status == "raised" for o in outcomes), sum(rewards) / len(rewards) if rewards else None,
    )  # fmt: skip


def summarize(outcomes: Sequence[Outcome], threshold: float = 1.0) -> list[CategoryResult]:
    """One :class:`CategoryResult` per category, in corpus order."""
    by_cat: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_cat.setdefault(o.exploit.category, []).append(o)
    return [_result(cat, rows, threshold) for cat, rows in by_cat.items()]


def summarize_exploits(outcomes: Sequence[Outcome], threshold: float = 1.0) -> CategoryResult:
    """All rows whose verdict is ``reject`` (every category but the correct controls) as one result."""
    return _result("all exploits", [o for o in outcomes if o.exploit.verdict == "reject"], threshold)


def misjudged(outcomes: Sequence[Outcome], threshold: float = 1.0) -> list[Outcome]:
    """The rows judged against their verdict: accepted exploits and unrewarded correct controls."""
    return [o for o in outcomes if o.accepted(threshold) != (o.exploit.verdict == "accept")]


def report(spec: str, outcomes: Sequence[Outcome], threshold: float, timeout: float) -> str:
    """The plain-text table ``countdown-gym audit`` prints."""
    summary = summarize(outcomes, threshold)
    lines = [f"reward function {spec}: accepted = reward >= {threshold:g}; {timeout:g} s per call", ""]
    w = max(len("category"), *(len(r.category) for r in summary))
    lines.append(f"{'category':<{w}}  rows  accepted  hung  raised  mean reward")
    for r in summary:
        mean = f"{r.mean_reward:.3f}" if r.mean_reward is not None else "-"
        lines.append(f"{r.category:<{w}}  {r.rows:>4}  {r.accepted:>8}  {r.hung:>4}  {r.raised:>6}  {mean:>11}")
    bad = summarize_exploits(outcomes, threshold)
    controls = [o for o in outcomes if o.exploit.verdict == "accept"]
    lines += ["", f"exploits accepted: {bad.accepted}/{bad.rows}" + (f" ({100 * bad.accepted / bad.rows:.1f}%)" if bad.rows else "")
              + f"; correct controls accepted: {sum(o.accepted(threshold) for o in controls)}/{len(controls)}"]
    wrong = misjudged(outcomes, threshold)
    if wrong:
        lines.append("judged against the corpus verdict:")
        for o in wrong:
            got = f"reward {o.reward:g}" if o.status == "ok" else f"{o.status}: {o.error}"
            lines.append(f"  {o.exploit.id:<20} {o.exploit.verdict:>6} expected, {got}  ({o.exploit.note})")
    return "\n".join(lines)


@dataclass
class AuditOptions:
    """Run a reward function over the shipped corpus of reward hacks and print, per category, how many it accepts.

    Exit codes: 0 audited (with --check: and every row judged as the corpus says), 1 importing the function raised
    or --check found a misjudged row, 2 usage error (or no such module, file or function)."""

    reward_fn: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="REWARD_FN")]
    """'module:function' or 'file.py:function', called as fn(completion, numbers, target) -> float (this package's
    verifier: countdown_gym.cli.audit:verify_reward)"""
    threshold: float = 1.0
    """a reward at or above this accepts the completion"""
    timeout: float = DEFAULT_TIMEOUT
    """seconds per call before it counts as hung (> 0)"""
    memory_mb: int = DEFAULT_MEMORY_MB
    """memory in MiB the calls may add to the worker's address space once the function is loaded, 0 for no cap"""
    corpus: str | None = None
    """a corpus file of the same format (default: the shipped one)"""
    json: str | None = None
    """also write every row's outcome to this path as JSON lines"""
    check: bool = False
    """exit 1 if an exploit is accepted or a correct control is not"""
    progress: bool = True
    """a progress bar"""

    def __post_init__(self) -> None:
        if not 0 < self.timeout <= MAX_TIMEOUT:
            raise ValueError(f"--timeout must be > 0 and at most {MAX_TIMEOUT:g} seconds, got {self.timeout:g}")
        dataclass_cli.check_min(self, 0, "memory_mb")
        if self.memory_mb > MAX_MEMORY_MB:
            raise ValueError(f"--memory-mb must be at most {MAX_MEMORY_MB} (1 PiB; 0: no cap), got {self.memory_mb}")
        if self.json is not None:  # checked now, not after the whole audit has run
            out = Path(self.json)
            if out.is_dir():
                raise ValueError(f"--json {out} is a folder; give the path of a file to write")
            if not out.absolute().parent.is_dir():
                raise ValueError(f"--json {out}: the folder {out.absolute().parent} does not exist")


PROG = "countdown-gym audit"


class _CannotWrite(Exception):
    """The ``--json`` file could not be opened or written (an ``OSError`` in words)."""


def _open_output(path: str) -> Any:
    """``path`` opened for writing text; a FIFO nobody reads is refused at once (ENXIO) instead of blocking the open
    (a pipe with a reader, such as ``/dev/stdout | jq``, is written as usual)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
    except OSError as e:
        raise _CannotWrite("a FIFO that nothing reads" if e.errno == errno.ENXIO else e.strerror or str(e)) from None
    os.set_blocking(fd, True)
    return os.fdopen(fd, "w", encoding="utf-8")


def _audit(args: AuditOptions) -> int:
    out = None
    # a file (or nothing) at --json is written aside: an earlier one stays whole until the new one is (Ctrl-C, a full
    # disk); a link (/dev/stdout), FIFO or device is written as it is
    aside = args.json is not None and not os.path.islink(args.json) and not_regular(args.json) is None
    try:
        with written_aside(args.json) if aside else contextlib.nullcontext(args.json) as target:
            rows = load_exploits(args.corpus)
            # opened before the audit runs: a path that cannot be written fails now, not after every call
            out = _open_output(str(target)) if args.json else None
            outcomes = run_audit(args.reward_fn, rows, timeout=args.timeout, memory_mb=args.memory_mb,
                                 progress=args.progress)
            print(report(args.reward_fn, outcomes, args.threshold, args.timeout), flush=True)  # its errors: run's
            if out is not None:  # every row's outcome as JSON lines, closed before it is renamed into place
                try:
                    out.writelines(json.dumps({"id": o.exploit.id, "category": o.exploit.category, "verdict":
                                               o.exploit.verdict, "status": o.status, "reward": o.reward,
                                               "error": o.error}) + "\n" for o in outcomes)
                    out.close()
                except OSError as e:
                    raise _CannotWrite(e.strerror or str(e)) from None
    except ValueError as e:
        dataclass_cli.usage_error(str(e), prog=PROG)
    except _CannotWrite as e:
        torn = out is not None and aside  # its temporary file, removed
        print(f"{PROG}: error: cannot write --json {args.json}: {e}{' (the partial file is removed)' if torn else ''}",
              file=sys.stderr)
        return 1
    except AuditError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    finally:
        if out is not None:
            with contextlib.suppress(OSError):  # reported above; a failed flush must not raise twice
                out.close()
    return 1 if args.check and misjudged(outcomes, args.threshold) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``countdown-gym audit``: 0 audited, 1 failure (or --check found a misjudged row), 2 usage error."""
    return dataclass_cli.run(AuditOptions, argv, _audit, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
