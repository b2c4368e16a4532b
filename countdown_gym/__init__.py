"""countdown-gym: the Countdown game for studying dense rewards in LLM reasoning.

Importing the package registers the Gymnasium environments (``Countdown-v0``,
``CountdownText-v0``).
"""

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

__version__ = "0.1.0"

__all__ = [
    "OPERATORS",
    "PRESETS",
    "GeneratorConfig",
    "Problem",
    "Rules",
    "TraceStep",
    "__version__",
    "count_solutions",
    "dfs_trace",
    "generate",
    "is_solvable",
    "iter_problems",
    "legal_moves",
    "load_split",
    "parse_trace",
    "reachable",
    "reachable_values",
    "search_nodes",
    "solution_path",
    "solve",
    "split_sha256",
]
