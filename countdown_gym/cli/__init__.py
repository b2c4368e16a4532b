"""The ``countdown-gym`` console script (also ``python -m countdown_gym``): ``countdown-gym <command> ...`` runs the
command's ``main``, imported when it runs (``countdown_gym/cli/<command>.py``; ``leaderboard`` is
:mod:`countdown_gym.leaderboard.__main__`, ``serve`` :mod:`countdown_gym.integrations.openenv.serve`). Every command
parses its options through :mod:`countdown_gym.dataclass_cli`; exit codes 0 success, 1 failure, 2 usage error,
130 Ctrl-C, 141 output pipe closed (``| head``).
"""

from __future__ import annotations

import functools
import importlib
import sys

from countdown_gym import dataclass_cli

PROG = "countdown-gym"
EXIT_CODES = ("Every command: `countdown-gym <command> --help`; exit codes 0 success, 1 failure, 2 usage error, "
              "130 Ctrl-C, 141 output pipe closed (| head).")

_COMMANDS: dict[str, tuple[str, str]] = {
    "leaderboard": ("countdown_gym.leaderboard.__main__", "submit|score|check: leaderboard tools (see: countdown-gym "
                                                          "leaderboard --help)"),
    "splits": ("countdown_gym.cli.splits", "[--write]: check that the frozen splits reproduce from their spec (--write "
                                      "rewrites them)"),
    "audit": ("countdown_gym.cli.audit", "REWARD_FN: how often a reward function accepts the shipped reward hacks"),
    "serve": ("countdown_gym.integrations.openenv.serve", "[--env ID] [--port N]: an OpenEnv server of "
                                                          "CountdownMultiTurn-v0 / Countdown-v0 (needs the openenv extra)"),
    "export": ("countdown_gym.cli.export", "--format F --out DIR: the frozen splits as a Hugging Face dataset, parquet, "
                                       "jsonl or verl files"),
    "difficulty": ("countdown_gym.cli.difficulty", "[--write]: re-measure the difficulty labels of the frozen splits "
                                              "(--write rewrites them)"),
}


def _run(name: str, module: str, argv: list[str]) -> int:
    """The command's ``main``, imported when it runs (a command's dependencies load only for that command)."""

    def body() -> int:
        try:
            return importlib.import_module(module).main(argv)
        except SystemExit as e:  # a command that exits rather than returns its code
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)

    # Ctrl-C while the command's module loads, a closed stdout or stderr where the command has no guard of its own
    return dataclass_cli.guarded(f"{PROG} {name}", body)


COMMANDS = {name: (text, functools.partial(_run, name, module)) for name, (module, text) in _COMMANDS.items()}
_USAGE_LINE = "[-h] [--version] <command> [args]"
USAGE = dataclass_cli.dispatch_help(PROG, COMMANDS, epilog=EXIT_CODES, usage=_USAGE_LINE)
"""What ``countdown-gym --help`` prints."""


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``countdown-gym <command> ...`` to the command's own ``main``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["-V"], ["--version"]):
        from countdown_gym import __version__

        return dataclass_cli.guarded(PROG, lambda: print(f"countdown-gym {__version__}"))
    return dataclass_cli.dispatch(PROG, COMMANDS, argv, epilog=EXIT_CODES, usage=_USAGE_LINE)


if __name__ == "__main__":
    sys.exit(main())
