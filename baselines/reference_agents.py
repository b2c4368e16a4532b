"""Reference agents for Countdown-v0: random legal moves, the exhaustive solver, and the shipped critic.

Each is a policy ``policy(obs, info) -> action`` over ``Countdown-v0``; :data:`AGENTS` says what each plays. Evaluate
one on a split and write a leaderboard submission::

    python baselines/reference_agents.py --agent solver --preset longproc-0.5k --split test \\
        --out leaderboard/submissions/exhaustive-solver.longproc-0.5k.test.jsonl

The same policies plug into the generic command:
``python -m countdown_gym.leaderboard submit --policy baselines/reference_agents.py:RandomLegalPolicy ...``.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from countdown_gym import dataclass_cli
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS
from countdown_gym.envs.actions import encode_action
from countdown_gym.game.rules import OPERATORS
from countdown_gym.game.solver import apply_move, reachable
from countdown_gym.game.solver import legal_moves as game_moves
from countdown_gym.game.turn_format import format_move
from countdown_gym.leaderboard.agents import check_output_path, submit_policy
from countdown_gym.leaderboard.submission import MAX_ANSWERS


class RandomLegalPolicy:
    """Uniform random choice among the legal actions (the action mask)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        legal = np.flatnonzero(info["action_mask"])
        if legal.size == 0:
            raise ValueError("no legal action in this state (the env ends such episodes itself)")
        return int(legal[self.rng.integers(legal.size)])


def legal_moves(info: dict[str, Any]) -> list[tuple[int, tuple]]:
    """Every legal action of ``info``'s state with its new state, in action order (of two actions that make the same
    state, such as ``a + b`` and ``b + a``, the first)."""
    state, rules = tuple(info["state"]), info["problem"].rules
    moves = sorted((encode_action(i, j, op, len(state)), apply_move(state, i, j, r))  # an index whatever M is
                   for i, j, (_, op, _, r) in game_moves(state, rules))
    if not moves:
        raise ValueError("no legal action in this state (the env ends such episodes itself)")
    return moves


class SolverPolicy:
    """The first legal action (in action order) after which the target is still reachable (the package's exhaustive,
    memoised :func:`countdown_gym.game.solver.reachable`); on an unsolvable state, the first legal action."""

    def __init__(self, seed: int = 0) -> None:
        del seed  # deterministic

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        moves, problem = legal_moves(info), info["problem"]
        return next((a for a, after in moves if reachable(after, problem.target, problem.rules)), moves[0][0])


class TurnSolverPolicy:
    """A multi-turn text policy (``CountdownMultiTurn-v0``): the first move after which the target is
    still reachable, written as a turn (``"21+16"``); ``give up`` on an unsolvable start.

    ``python -m countdown_gym.leaderboard submit --interaction multi-turn --policy
    baselines/reference_agents.py:TurnSolverPolicy ...`` (the upper bound of the multi-turn mode).
    """

    def __init__(self, seed: int = 0) -> None:
        del seed  # deterministic

    def __call__(self, message: str, info: dict[str, Any]) -> str:
        state, problem = tuple(info["state"]), info["problem"]
        moves = sorted((i, j, OPERATORS.index(op), format_move(a, op, b), apply_move(state, i, j, r))  # slots, then op
                       for i, j, (a, op, b, r) in game_moves(state, problem.rules))
        return next((turn for *_, turn, after in moves if reachable(after, problem.target, problem.rules)), "give up")


class CriticGreedyPolicy:
    """The legal move whose new state the shipped critic scores highest."""

    def __init__(self, seed: int = 0) -> None:
        del seed  # deterministic
        from critics import load_critic

        self.critic = load_critic(None)

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        actions, after = zip(*legal_moves(info), strict=True)
        return actions[int(np.argmax(self.critic.score(list(after), [info["problem"].target] * len(after))))]


class RandomFirstPolicy:
    """A uniformly random legal first move (by ``first_policy``), the later moves by the solver."""

    first_policy: Any = RandomLegalPolicy

    def __init__(self, seed: int = 0) -> None:
        self.first, self.solver = self.first_policy(seed), SolverPolicy()

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        first = len(info["state"]) == len(info["problem"].numbers)
        return (self.first if first else self.solver)(obs, info)


class CriticFirstPolicy(RandomFirstPolicy):
    """First move by the critic's score, the later moves by the solver."""

    first_policy = CriticGreedyPolicy


CRITIC = "shipped contrastive critic (critics/checkpoints/v5)"
LATER_BY_SOLVER = "later moves by the solver (a measurement, not an agent to rank)"
AGENTS: dict[str, dict[str, Any]] = {  # name -> the policy and its submission's header
    "random": dict(factory=RandomLegalPolicy, agent="random-legal", model="none", model_size="0", temperature=1.0,
                   method="uniform random over legal moves (Countdown-v0 action mask)"),
    "solver": dict(factory=SolverPolicy, agent="exhaustive-solver", model="none", model_size="0", temperature=0.0,
                   method="exhaustive search (countdown_gym.game.solver.reachable), upper bound"),
    "critic-greedy": dict(factory=CriticGreedyPolicy, agent="critic-greedy", model=CRITIC, model_size="critic",
                          temperature=0.0, method="at every move, the legal move whose new state the critic scores highest"),
    "random-first": dict(factory=RandomFirstPolicy, agent="random-first-then-solver", model="none", model_size="0",
                         temperature=1.0, method=f"random legal first move, {LATER_BY_SOLVER}"),
    "critic-first": dict(factory=CriticFirstPolicy, agent="critic-first-then-solver", model=f"{CRITIC} + exhaustive solver",
                         model_size="critic", temperature=0.0, method=f"first move by the critic's score, {LATER_BY_SOLVER}"),
}


@dataclass
class Options:
    """Evaluate a reference agent on a frozen split and write a leaderboard submission."""

    agent: str  # One of the agents of the module doc: critic-first, critic-greedy, random, random-first, solver.
    out: str  # Submission file to write (.jsonl).
    preset: str = "longproc-0.5k"
    split: str = "test"
    k: int = 1  # Episodes per problem (seeds seed..seed+k-1); pass@k uses them.
    seed: int = 0
    authors: str = "countdown-gym maintainers (reference agents)"
    progress: bool = True

    def __post_init__(self) -> None:
        for name, allowed in (("agent", sorted(AGENTS)), ("preset", sorted(SPLIT_SPEC)), ("split", SPLITS)):
            dataclass_cli.check_choice(self, name, allowed)
        if not 1 <= self.k <= MAX_ANSWERS:  # a submission holds 1 to MAX_ANSWERS answers per problem
            raise ValueError(f"--k must be in 1..{MAX_ANSWERS}, got {self.k}")
        dataclass_cli.check_min(self, 0, "seed")  # Gymnasium's seeds are non-negative
        check_output_path(self.out)  # a folder or a place that may not be written: refused before any episode


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = dataclass_cli.parse(Options, argv, prog="reference_agents.py", description=__doc__.split("\n\n")[0])
    spec = AGENTS[args.agent]
    path, evals = submit_policy(
        spec["factory"], args.out, preset=args.preset, split=args.split, k=args.k, seed=args.seed,
        temperature=spec["temperature"], progress=args.progress,
        command="python baselines/reference_agents.py " + shlex.join(argv),
        agent=spec["agent"], authors=args.authors, model=spec["model"], model_size=spec["model_size"],
        method=spec["method"], reward_variant="none",
    )  # fmt: skip
    rate = sum(ev.success_rate for ev in evals) / len(evals)
    print(f"{spec['agent']} on {args.preset}/{args.split}: env success rate {rate:.3f} over {args.k} run(s); wrote {path}")
    return 0


if __name__ == "__main__":
    dataclass_cli.run_script(main)
