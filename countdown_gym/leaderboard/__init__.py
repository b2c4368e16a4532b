"""The countdown-gym leaderboard: submission files, re-scoring, the ranked table.

:func:`write_submission` writes a checked JSON Lines submission for a frozen split (``answers=``, ``moves=`` or
``completions=``); :func:`read_submission` checks a file; :func:`score_file` / :func:`score_directory` re-verify
every answer with the one verifier; :func:`~countdown_gym.leaderboard.agents.evaluate_policy` plays a Countdown-v0
policy on a split. Command line: ``countdown-gym leaderboard submit|score|check``; format and rules:
``leaderboard/README.md``.
"""

from countdown_gym.leaderboard.score import (
    Rejection,
    Scores,
    pass_at_k,
    render_markdown,
    score_directory,
    score_file,
    score_submission,
)
from countdown_gym.leaderboard.submission import (
    FORMAT,
    FORMAT_VERSION,
    ProblemAnswers,
    Submission,
    SubmissionError,
    check_header,
    load_schema,
    moves_to_solution,
    read_submission,
)
from countdown_gym.leaderboard.write import build_header, write_submission

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ProblemAnswers",
    "Rejection",
    "Scores",
    "Submission",
    "SubmissionError",
    "build_header",
    "check_header",
    "load_schema",
    "moves_to_solution",
    "pass_at_k",
    "read_submission",
    "render_markdown",
    "score_directory",
    "score_file",
    "score_submission",
    "write_submission",
]
