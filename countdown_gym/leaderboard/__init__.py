"""The countdown-gym leaderboard: submission files, re-scoring, the ranked table.

Public API (what the baselines call to produce entries)::

    from countdown_gym.leaderboard import write_submission, read_submission, score_file, moves_to_solution

* :func:`write_submission` writes a JSON Lines submission for a frozen split (header + one line
  per problem holding completions or move sequences) and checks it by reading it back. Pass
  ``answers=`` (a list of answers per problem), or ``moves=`` (one move sequence per problem) or
  ``completions=`` (one text per problem); ``problems=`` gives the entries' problem order when it
  is not the split's.
* :func:`read_submission` checks a file (schema, split hash, exact problem list, limits).
* :func:`score_file` / :func:`score_directory` re-verify every answer with the package's one
  verifier and compute pass@1, pass@k, per-sample success, invalid-step rate, mean length.
* :func:`evaluate_policy` (in :mod:`countdown_gym.leaderboard.agents`) runs a Countdown-v0
  policy or a saved MaskablePPO model on a split and returns the move sequences to submit.

Command line: ``python -m countdown_gym.leaderboard submit|score|check`` (also
``countdown-gym leaderboard ...``). The file format and the rules are in ``leaderboard/README.md``.
"""

from countdown_gym.leaderboard.moves import moves_to_solution
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
