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
    the file-descriptor limit allows; :mod:`~countdown_gym.integrations.openenv.head_guard`).
    """
    import uvicorn

    from countdown_gym.integrations.openenv.head_guard import default_max_connections, guarded_protocol

    protocol = guarded_protocol(head_timeout_s, max_connections or default_max_connections())
    return uvicorn.Server(uvicorn.Config(app, http=protocol, ws_max_size=max_body_bytes, ws_per_message_deflate=False,
                                         log_level=log_level))
