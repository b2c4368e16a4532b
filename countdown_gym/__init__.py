"""countdown-gym: the Countdown game for studying dense rewards in LLM reasoning.

Importing the package registers the Gymnasium environments (``Countdown-v0``,
``CountdownText-v0``).
"""

import countdown_gym.envs  # noqa: F401  (registers Countdown-v0 and CountdownText-v0 with Gymnasium)
from countdown_gym.expression import ExpressionError, evaluate_expression, parse_expression
from countdown_gym.generator import PRESETS, GeneratorConfig, generate, iter_problems
from countdown_gym.problem import Problem
from countdown_gym.rules import OPERATORS, Rules
from countdown_gym.solver import (
    count_solutions,
    is_solvable,
    legal_moves,
    reachable,
    reachable_values,
    solution_path,
    solve,
)
from countdown_gym.splits import load_split, split_sha256
from countdown_gym.trace import TraceStep, dfs_trace, parse_trace, search_nodes
from countdown_gym.verifier import REASONS, Verdict, extract_answer, verify

__version__ = "0.1.0"

__all__ = [
    "OPERATORS",
    "PRESETS",
    "REASONS",
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
    "load_split",
    "parse_expression",
    "parse_trace",
    "reachable",
    "reachable_values",
    "search_nodes",
    "solution_path",
    "solve",
    "split_sha256",
    "verify",
]

# difficulty labels, curriculum, reading other Countdown data (docs/difficulty.md, docs/datasets.md)
from countdown_gym.curriculum import Curriculum  # noqa: E402
from countdown_gym.difficulty import Difficulty, tier  # noqa: E402  (difficulty() stays in its module, not shadowing it)
from countdown_gym.problem_files import load_problems  # noqa: E402

__all__ += ["Curriculum", "Difficulty", "load_problems", "tier"]
