"""The ``countdown-gym`` console script (also ``python -m countdown_gym``):
``countdown-gym leaderboard submit|score|check ...``, ``countdown-gym splits [--write]``,
``countdown-gym audit REWARD_FN``. Exit codes of every command: 0 success, 1 failure, 2 usage error."""

from __future__ import annotations

import argparse
import sys

USAGE = """usage: countdown-gym [--version] <command> [args]

commands:
  leaderboard submit|score|check   leaderboard tools (see: countdown-gym leaderboard --help)
  splits [--write]                 check that the frozen splits reproduce from their spec (--write rewrites them)
  audit REWARD_FN                  how often a reward function accepts the shipped reward hacks
  serve [--env ID] [--port N]      an OpenEnv server of CountdownMultiTurn-v0 / Countdown-v0 (needs the openenv extra)
  export --format F --out DIR      the frozen splits as a Hugging Face dataset, parquet, jsonl or verl files
  difficulty [--write]             re-measure the difficulty labels of the frozen splits (--write rewrites them)

Every command: `countdown-gym <command> --help`; exit codes 0 success, 1 failure, 2 usage error.
"""


def usage_error(parser: argparse.ArgumentParser, message: str) -> int:
    """Print the command's usage and ``message`` as argparse does for a bad option, and return 2."""
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``countdown-gym <command> ...`` to the command's own parser."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from countdown_gym import __version__

        print(f"countdown-gym {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "leaderboard":
        from countdown_gym.leaderboard.__main__ import main as leaderboard_main

        return leaderboard_main(rest)
    if command == "splits":
        from countdown_gym.splits import main as splits_main

        return splits_main(rest)
    if command == "audit":
        from countdown_gym.audit import main as audit_main

        return audit_main(rest)
    if command == "serve":
        from countdown_gym.integrations.openenv_serve import main as serve_main

        return serve_main(rest)
    if command == "export":
        from countdown_gym.export import main as export_main

        return export_main(rest)
    if command == "difficulty":
        from countdown_gym.difficulty import main as difficulty_main

        return difficulty_main(rest)
    print(f"{USAGE}countdown-gym: error: unknown command {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
