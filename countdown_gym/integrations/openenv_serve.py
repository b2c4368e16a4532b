"""``countdown-gym serve``: its options and entry point.

The flags are read before openenv-core is imported, so ``countdown-gym serve --help`` and a bad flag answer at
once (and without the ``openenv`` extra installed); the server itself is
:mod:`countdown_gym.integrations.openenv.server`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

from countdown_gym.dataclass_cli import parse, usage_error

ENV_IDS: tuple[str, ...] = ("CountdownMultiTurn-v0", "Countdown-v0")
"""The environments the server can serve."""
DEFAULT_MAX_SESSIONS = 64
DEFAULT_MAX_EPISODES = 4096
DEFAULT_MAX_BODY_BYTES = 64 * 1024


@dataclass
class ServeOptions:
    """Serve a countdown-gym environment over HTTP and WebSocket with openenv-core (reset / step / state).

    HTTP: POST /reset answers an episode_id; POST /step {"action": ..., "episode_id": ...}; GET /state/{episode_id}.
    WebSocket: /ws, one session per connection (CountdownTurnClient / CountdownStepClient). Guide: docs/openenv.md.
    """

    env: Literal["CountdownMultiTurn-v0", "Countdown-v0"] = "CountdownMultiTurn-v0"
    """the environment: CountdownMultiTurn-v0 (text turns) or Countdown-v0 (action indices)"""
    host: str = "127.0.0.1"
    """address to bind (the server has no authentication: keep it on localhost or a private network)"""
    port: int = 8000
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """most WebSocket sessions at once"""
    max_episodes: int = DEFAULT_MAX_EPISODES
    """most episodes reachable by id over HTTP (the least recently used go first)"""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """largest HTTP body or WebSocket message accepted"""
    preset: str = "longproc-0.5k"
    """problem preset"""
    split: str = "train"
    """frozen split to draw problems from (train, validation, test) or 'generate'"""
    rules: str | None = None
    """rules preset (longproc, tinyzero, classic); default: the problems' own"""
    max_turns: int = 16
    """CountdownMultiTurn-v0: turn budget of an episode"""
    prompt: str = "compact"
    """CountdownMultiTurn-v0: prompt style (compact or instruct)"""
    log_level: str = "warning"
    """uvicorn's log level"""

    def __post_init__(self) -> None:
        if self.env not in ENV_IDS:
            raise ValueError(f"--env must be one of {list(ENV_IDS)}, got {self.env!r}")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"--port must be in 1..65535, got {self.port}")

    def env_kwargs(self) -> dict[str, Any]:
        """The Gymnasium environment's arguments."""
        kwargs: dict[str, Any] = {"preset": self.preset, "split": self.split, "rules": self.rules}
        if self.env == "CountdownMultiTurn-v0":
            kwargs.update(max_turns=self.max_turns, prompt=self.prompt)
        return kwargs


def main(argv: list[str] | None = None) -> int:
    """``countdown-gym serve [--env ID] [--port N] ...``: build the app, then run it with uvicorn until Ctrl-C."""
    prog = "countdown-gym serve"
    opts = parse(ServeOptions, argv, prog=prog)
    try:
        import uvicorn

        from countdown_gym.integrations.openenv.server import make_app
    except ImportError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    try:
        app = make_app(opts.env, max_sessions=opts.max_sessions, max_episodes=opts.max_episodes,
                       max_body_bytes=opts.max_body_bytes, **opts.env_kwargs())
    except ValueError as e:
        usage_error(str(e), prog=prog)
    print(f"{prog}: {opts.env} on http://{opts.host}:{opts.port} (HTTP /reset /step /state/{{episode_id}}, "
          f"WebSocket /ws, up to {opts.max_sessions} sessions); Ctrl-C stops", flush=True)
    uvicorn.run(app, host=opts.host, port=opts.port, ws_max_size=opts.max_body_bytes, log_level=opts.log_level)
    return 0
