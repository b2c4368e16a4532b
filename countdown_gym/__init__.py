"""countdown-gym: the Countdown game for studying dense rewards in LLM reasoning.

Importing the package registers its three Gymnasium environments: ``Countdown-v0``, ``CountdownText-v0`` and
``CountdownMultiTurn-v0``.
"""

import countdown_gym.envs  # noqa: F401  (registers the three environments with Gymnasium)
from countdown_gym.data.curriculum import Curriculum
from countdown_gym.data.difficulty import Difficulty, tier  # difficulty() stays in its module, not shadowing it
from countdown_gym.data.generator import PRESETS, GeneratorConfig, generate, iter_problems
from countdown_gym.data.problem_files import load_problems
from countdown_gym.data.splits import load_split, split_sha256
from countdown_gym.game.expression import ExpressionError, evaluate_expression, parse_expression
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import OPERATORS, Rules
from countdown_gym.game.solver import (
    count_solutions,
    is_solvable,
    legal_moves,
    reachable,
    reachable_values,
    solution_path,
    solve,
)
from countdown_gym.game.trace import TraceStep, dfs_trace, parse_trace, search_nodes
from countdown_gym.game.verifier import REASONS, Verdict, extract_answer, verify

__version__ = "0.1.0"


def load_environment(**kwargs):  # noqa: ANN201 - a verifiers.Environment; verifiers is an optional extra
    """What ``verifiers.load_environment("countdown-gym", **kwargs)`` calls (needs the ``verifiers`` extra); arguments:
    :func:`countdown_gym.integrations.verifiers_env.load_environment`."""
    try:
        from countdown_gym.integrations.verifiers_env import load_environment as load
    except ImportError as exc:
        if "verifiers" not in str(exc):
            raise
        raise ImportError(
            f"countdown_gym.load_environment needs the verifiers library: pip install 'countdown-gym[verifiers]' ({exc})"
        ) from exc
    return load(**kwargs)


__all__ = [
    "OPERATORS",
    "PRESETS",
    "REASONS",
    "Curriculum",
    "Difficulty",
    "ExpressionError",
    "GeneratorConfig",
    "Problem",
    "Rules",
    "TraceStep",
    "Verdict",
    "__version__",
    "count_solutions",
    "dfs_trace",
    "evaluate_expression",
    "extract_answer",
    "generate",
    "is_solvable",
    "iter_problems",
    "legal_moves",
    "load_environment",
    "load_problems",
    "load_split",
    "parse_expression",
    "parse_trace",
    "reachable",
    "reachable_values",
    "search_nodes",
    "solution_path",
    "solve",
    "split_sha256",
    "tier",
    "verify",
]
