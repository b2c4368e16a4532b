"""How the OpenEnv server listens: its limits, the bound socket, and the uvicorn server with a connection guard
(request heads timed, connections capped, unread answers dropped; each limit: ``docs/security.md``), shared by
:mod:`~countdown_gym.integrations.openenv.server` and :mod:`~countdown_gym.integrations.openenv.serve`. Nothing
here needs openenv-core, so ``countdown-gym serve --help`` answers without it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

DEFAULT_MAX_SESSIONS = 64
DEFAULT_MAX_EPISODES = 4096
DEFAULT_MAX_BODY_BYTES = 64 * 1024
DEFAULT_BODY_TIMEOUT_S = 10.0
DEFAULT_SESSION_IDLE_S = 600.0
DEFAULT_MAX_TURN_CHARS = 200
DEFAULT_HEAD_TIMEOUT_S = 10.0

MAX_SECONDS = 86400.0
"""The longest time limit (a day), as ``countdown-gym audit --timeout``'s."""
MAX_CONNECTIONS = 65536
"""The most connections, and so WebSocket sessions, a server may be told to hold (one file descriptor each)."""
MAX_EPISODES = 1_000_000
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_TURN_CHARS = 4096
"""The largest ``max_turn_chars``."""
MAX_TURNS = 4096
SHUTDOWN_GRACE_S = 2.0
"""On Ctrl-C, how long answers still being sent may take before their connections are dropped."""
SEND_TIMEOUT_S = 30.0
"""How long answers may wait unread in a connection's write buffer (the same bytes at two looks this far apart)
before the connection is dropped."""


def check_limits(flags: bool = False, **limits: float) -> None:
    """``ValueError`` unless each limit is a number in its range: a ``*_s`` limit in (0, :data:`MAX_SECONDS`], a
    count in [1, its ``MAX_*``] (``max_connections`` may be 0: the default); ``flags``: named as ``--max-turns``."""
    bounds = {"max_sessions": MAX_CONNECTIONS, "max_connections": MAX_CONNECTIONS, "max_episodes": MAX_EPISODES,
              "max_body_bytes": MAX_BODY_BYTES, "max_turn_chars": MAX_TURN_CHARS, "max_turns": MAX_TURNS}
    for key, value in limits.items():
        name = f"--{key.replace('_', '-')}" if flags else key
        if key.endswith("_s"):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_SECONDS:
                raise ValueError(f"{name} must be a number of seconds > 0 and at most {MAX_SECONDS:g}, got {value!r}")
            continue
        low = 0 if key == "max_connections" else 1
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= bounds[key]:
            raise ValueError(f"{name} must be an int in {low}..{bounds[key]}, got {value!r}")


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 address in brackets (``http://[::1]:8000``)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (``port=0``: a free one); ``OSError`` if it cannot be."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def uvicorn_server(app: Any, max_body_bytes: int, log_level: str = "warning", *,
                   head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S, max_connections: int | None = None) -> Any:
    """The uvicorn server of ``countdown-gym serve`` (and of ``serve_in_thread``).

    WebSocket messages are limited to ``max_body_bytes``, and not compressed: an answer is about a kilobyte, and
    per-message deflate cost both ends more time than it saves on a local or private network. Its connections have
    :func:`guarded_protocol`'s guard (``max_connections`` None: what the file-descriptor limit allows), and answers
    still being sent at shutdown get :data:`SHUTDOWN_GRACE_S` seconds.
    """
    import uvicorn

    check_limits(head_timeout_s=head_timeout_s, max_connections=max_connections or 0)
    protocol = guarded_protocol(head_timeout_s, max_connections or default_max_connections())
    config = uvicorn.Config(app, http=protocol, ws_max_size=max_body_bytes, ws_per_message_deflate=False,
                            log_level=log_level, timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    logging.getLogger("uvicorn.error").addFilter(_bad_utf8_in_one_line)  # once: the same function each time
    return uvicorn.Server(config)


def _bad_utf8_in_one_line(record: logging.LogRecord) -> bool:
    """uvicorn's ``Invalid UTF-8 sequence received from client.`` (an ERROR with the ``UnicodeDecodeError``'s
    traceback, for the client's own fault) as one INFO line, kept only where the logger shows INFO."""
    exc = record.exc_info[1] if record.exc_info else None
    if not (isinstance(exc, UnicodeDecodeError) and "UTF-8" in record.getMessage()):
        return True
    record.msg, record.args = "a WebSocket client sent a text message that is not UTF-8: closed (code 1007)", ()
    record.exc_info = record.exc_text = None
    record.levelno, record.levelname = logging.INFO, "INFO"
    return logging.getLogger(record.name).isEnabledFor(logging.INFO)


_TIMEOUT_ANSWER = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def guarded_protocol(head_timeout_s: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's own HTTP protocol class (``h11`` or ``httptools``) with the connection guard: a request head not
    complete ``head_timeout_s`` after the connection's first wait for one is answered 408; beyond ``max_connections``
    the oldest connection waiting for a head is closed, else the new one (a class per server: its own waiting list)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    waiting: dict[Any, None] = {}
    """Connections waiting for a request head, oldest first."""

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                oldest = next(iter(waiting), None)
                if oldest is None:  # every other connection is busy: this one waits for none of them
                    transport.close()
                    return
                oldest._head_arrived()  # out of the waiting list now, not when its close completes
                oldest.transport.close()
            self._wait_for_head()
            _watch_writes(transport, 0)

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle or self not in self.connections:  # a request head, or a WebSocket upgrade
                self._head_arrived()
            elif self.cycle is None or self.cycle.response_complete:  # still in a head
                self._wait_for_head()

        def shutdown(self) -> None:
            """Server shutdown (Ctrl-C): a connection still sending its request body is closed now; uvicorn's own
            ``shutdown`` would wait for the body, up to the body timeout, before the server could stop."""
            cycle = self.cycle
            if cycle is not None and cycle.more_body and not cycle.response_started:
                self._head_arrived()
                self.transport.close()
            else:
                super().shutdown()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            super().connection_lost(exc)

        def _wait_for_head(self) -> None:
            if self._head_timer is None:
                waiting[self] = None
                self._head_timer = asyncio.get_running_loop().call_later(head_timeout_s, self._head_timed_out)

        def _head_arrived(self) -> None:
            waiting.pop(self, None)
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_arrived()  # out of the waiting list (its timer has fired)
            if not self.transport.is_closing():
                self.transport.write(_TIMEOUT_ANSWER)
                self.transport.close()

    return GuardedHTTPProtocol


def _watch_writes(transport: asyncio.Transport, before: int) -> None:
    """Every :data:`SEND_TIMEOUT_S` seconds while ``transport`` is open (the connection's, before and after a
    WebSocket upgrade), or still has answers to send: abort it if the answers waiting in its write buffer are the
    same as at the last look (the client read none of them)."""
    size = transport.get_write_buffer_size()
    if size and size == before:
        transport.abort()
    elif size or not transport.is_closing():
        asyncio.get_running_loop().call_later(SEND_TIMEOUT_S, _watch_writes, transport, size)


def default_max_connections() -> int:
    """The connection cap that keeps file descriptors free for the process itself: the soft ``RLIMIT_NOFILE``
    less 32, at least 8 and at most 4,096."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 1024
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(8, min(4096, soft - 32))
