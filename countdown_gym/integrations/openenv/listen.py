"""How the OpenEnv server listens: its default limits, the bound socket and the uvicorn server.

Shared by the server (:mod:`~countdown_gym.integrations.openenv.server`) and the command that starts it
(:mod:`~countdown_gym.integrations.openenv.serve`); nothing here needs openenv-core, so ``countdown-gym serve
--help`` answers without it.
"""

from __future__ import annotations

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
"""The longest turn the server reads (``models.MAX_TURN_LENGTH``): a larger ``max_turn_chars`` changes nothing."""
MAX_TURNS = 4096
SHUTDOWN_GRACE_S = 2.0
"""On Ctrl-C, how long answers still being sent may take before their connections are dropped."""


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
    per-message deflate cost both ends more time than it saves on a local or private network. A request head must
    arrive within ``head_timeout_s`` seconds, and at most ``max_connections`` connections are held (default: what
    the file-descriptor limit allows; :mod:`~countdown_gym.integrations.openenv.head_guard`). On shutdown (Ctrl-C)
    a connection still sending its request is closed at once, and answers still being sent get
    :data:`SHUTDOWN_GRACE_S` seconds.
    """
    import uvicorn

    from countdown_gym.integrations.openenv.head_guard import default_max_connections, guarded_protocol

    check_limits(head_timeout_s=head_timeout_s, max_connections=max_connections or 0)
    protocol = guarded_protocol(head_timeout_s, max_connections or default_max_connections())
    return uvicorn.Server(uvicorn.Config(app, http=protocol, ws_max_size=max_body_bytes, ws_per_message_deflate=False,
                                         log_level=log_level, timeout_graceful_shutdown=SHUTDOWN_GRACE_S))
