"""countdown-gym's OpenEnv entry point: ``app`` (``openenv.yaml``: ``server.app:app``) and ``main()``.

``app`` serves what ``countdown-gym serve`` would with the same options, read from environment variables
``COUNTDOWN_<OPTION>`` (``COUNTDOWN_ENV=Countdown-v0``, ``COUNTDOWN_PRESET=tinyzero``, ``COUNTDOWN_MAX_TURNS=8``...;
the flags of ``countdown-gym serve --help``), so a container is configured with ``docker run -e`` or
``from_docker_image(..., env_vars={...})``. ``main()`` is ``countdown-gym serve`` itself (the variables, then its
flags): the image runs it, so the server's limits on connections, request heads and messages hold there too (a bare
``uvicorn server.app:app`` has uvicorn's own).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from countdown_gym.dataclass_cli import guarded, parse
from countdown_gym.integrations.openenv.serve import ServeOptions
from countdown_gym.integrations.openenv.serve import main as serve_main
from countdown_gym.integrations.openenv.server import make_app

PREFIX = "COUNTDOWN_"
PROG = "server.app"


def environment_argv(environ: dict[str, str] | None = None) -> list[str]:
    """The ``countdown-gym serve`` flags that ``COUNTDOWN_<OPTION>`` variables set."""
    environ = os.environ if environ is None else environ
    argv: list[str] = []
    for f in dataclasses.fields(ServeOptions):
        value = environ.get(PREFIX + f.name.upper())
        if value is not None:
            argv += ["--" + f.name.replace("_", "-"), value]
    return argv


def options_from_environment(environ: dict[str, str] | None = None) -> ServeOptions:
    """The serve options set by ``COUNTDOWN_<OPTION>`` variables (the others keep their defaults)."""
    return parse(ServeOptions, environment_argv(environ), prog=f"{PROG} ({PREFIX}* variables)")


def build_app(opts: ServeOptions) -> Any:
    """The app ``countdown-gym serve`` runs for ``opts`` (a FastAPI app: openenv-core's ``create_app``)."""
    return make_app(opts.env, **opts.app_kwargs())


if __name__ != "__main__":  # `python -m server.app` (the image) is main(), which builds its own app
    app = build_app(options_from_environment())


def main() -> int:
    """``uv run --project . server [flags]`` and the image's command: ``countdown-gym serve`` with the variables'
    flags, then its own (a flag given twice: the last wins)."""
    return guarded(PROG, lambda: serve_main(environment_argv() + sys.argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
