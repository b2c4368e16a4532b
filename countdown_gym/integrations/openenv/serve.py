"""``countdown-gym serve``: its options, read before openenv-core is imported (so ``--help`` and a bad flag answer at
once, even without the ``openenv`` extra), and its entry point (the server: ``server.py``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal, get_args

from countdown_gym.dataclass_cli import check_choice, parse, usage_error
from countdown_gym.integrations.openenv.listen import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEAD_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_EPISODES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_TURN_CHARS,
    DEFAULT_SESSION_IDLE_S,
    base_url,
    check_limits,
    default_max_connections,
    listening_socket,
    uvicorn_server,
)

EnvId = Literal["CountdownMultiTurn-v0", "Countdown-v0"]
ENV_IDS: tuple[str, ...] = get_args(EnvId)
"""The environments the server can serve."""
LogLevel = Literal["critical", "error", "warning", "info", "debug", "trace"]
_LIMITS = ("max_sessions", "session_idle_s", "max_episodes", "max_body_bytes", "body_timeout_s", "head_timeout_s",
           "max_connections", "max_turn_chars", "max_turns")
"""The flags bounded by :func:`~countdown_gym.integrations.openenv.listen.check_limits` (times at most a day)."""

_TURN_FLAGS = ["max_turns", "prompt", "max_turn_chars"]
"""The flags of CountdownMultiTurn-v0 only."""


@dataclass
class ServeOptions:
    """Serve a countdown-gym environment over HTTP and WebSocket with openenv-core (reset / step / state).

    HTTP: POST /reset answers an episode_id; POST /step {"action": ..., "episode_id": ...}; GET /state/{episode_id}.
    WebSocket: /ws, one session per connection (CountdownTurnClient / CountdownStepClient). Guide: docs/openenv.md.
    """

    env: EnvId = "CountdownMultiTurn-v0"
    """the environment: CountdownMultiTurn-v0 (text turns) or Countdown-v0 (action indices)"""
    host: str = "127.0.0.1"
    """address to bind (the server has no authentication: keep it on localhost or a private network)"""
    port: int = 8000
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """most WebSocket sessions at once (one more is answered CAPACITY_REACHED and closed); at most 65536"""
    session_idle_s: float = DEFAULT_SESSION_IDLE_S
    """a WebSocket session that sends nothing for this long is closed (code 1000, reason 'idle'); each time limit
    is at most 86400 (a day)"""
    max_episodes: int = DEFAULT_MAX_EPISODES
    """most episodes reachable by id over HTTP (the least recently used go first); at most 1000000"""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """largest HTTP body or WebSocket message accepted (413 / close code 1009 above it); at most 16 MiB"""
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    """an HTTP body not fully received within this many seconds is answered 408 and its connection closed"""
    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S
    """a connection that has not sent a whole request head within this many seconds is answered 408 and closed"""
    max_connections: int = 0
    """most connections held at once (HTTP and WebSocket; one more closes the oldest still sending its request head);
    0: the file-descriptor limit less 32, at most 4096; set: at most 65536"""
    max_turn_chars: int = DEFAULT_MAX_TURN_CHARS
    """CountdownMultiTurn-v0: longest turn the game reads; a longer one is answered 'error turn_too_long' and only
    its first max_turn_chars + 1 characters are kept; at most 4096"""
    preset: str = "longproc-0.5k"
    """problem preset"""
    split: str = "train"
    """frozen split to draw problems from (train, validation, test) or 'generate'"""
    rules: str | None = None
    """rules preset (longproc, longproc_positive, tinyzero, classic); default: the problems' own"""
    max_turns: int = 16
    """CountdownMultiTurn-v0: turn budget of an episode (at most 4096)"""
    prompt: str = "compact"
    """CountdownMultiTurn-v0: prompt style (compact or instruct)"""
    log_level: LogLevel = "warning"
    """uvicorn's log level"""

    def __post_init__(self) -> None:
        check_choice(self, "env", ENV_IDS)
        check_choice(self, "log_level", get_args(LogLevel))
        if not 1 <= self.port <= 65535:
            raise ValueError(f"--port must be in 1..65535, got {self.port}")
        check_limits(flags=True, **{name: getattr(self, name) for name in _LIMITS})
        if self.env == "Countdown-v0":  # they would be ignored
            for name in (n for n in _TURN_FLAGS if getattr(self, n) != getattr(ServeOptions, n)):
                raise ValueError(f"--{name.replace('_', '-')} applies to CountdownMultiTurn-v0 only, not --env Countdown-v0")

    def sessions(self) -> int:
        """The most WebSocket sessions at once: ``max_sessions``, unless fewer connections are allowed."""
        return min(self.max_sessions, self.max_connections or default_max_connections())

    def app_kwargs(self) -> dict[str, Any]:
        """The arguments of ``make_app`` after the environment id: the server's limits and the environment's."""
        names = ["max_sessions", "max_episodes", "max_body_bytes", "body_timeout_s", "session_idle_s", "preset",
                 "split", "rules"]
        if self.env == "CountdownMultiTurn-v0":
            names += _TURN_FLAGS
        return {name: getattr(self, name) for name in names}


def main(argv: list[str] | None = None) -> int:
    """``countdown-gym serve [--env ID] [--port N] ...``: build the app, then run it with uvicorn until Ctrl-C."""
    prog = "countdown-gym serve"
    opts = parse(ServeOptions, argv, prog=prog)
    try:  # openenv-core not installed, or an environment argument refused: one line, exit 2
        from countdown_gym.integrations.openenv.server import make_app

        app = make_app(opts.env, **opts.app_kwargs())
    except (ImportError, ValueError) as e:
        usage_error(str(e), prog=prog)
    try:  # bound before the banner: a port in use or a bad host is one line, exit 2
        sock = listening_socket(opts.host, opts.port)
    except (OSError, UnicodeError) as e:
        print(f"{prog}: error: cannot listen on {opts.host}:{opts.port}: {e.strerror or e}"
              if isinstance(e, OSError) else f"{prog}: error: bad --host {opts.host!r}: {e}", file=sys.stderr)
        return 2
    print(f"{prog}: {opts.env} on {base_url(opts.host, opts.port)} (HTTP /reset /step /state/{{episode_id}}, "
          f"WebSocket /ws, up to {opts.sessions()} sessions); Ctrl-C stops", flush=True)
    with sock:
        uvicorn_server(app, opts.max_body_bytes, opts.log_level, head_timeout_s=opts.head_timeout_s,
                       max_connections=opts.max_connections or None).run(sockets=[sock])
    return 0
