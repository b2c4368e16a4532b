"""Reference agents for Countdown-v0: random legal moves, the exhaustive solver, and the shipped critic.

All are policies ``policy(obs, info) -> action`` over ``Countdown-v0`` (they read the action
mask, the exact state and the problem from ``info``). The random agent is the floor every
learned agent must beat; the solver is the upper bound (100% on the frozen splits, which hold
only solvable problems). Two agents measure how far the shipped contrastive critic
(``critics.load_critic()``) alone can guide play: ``critic-greedy`` takes, at every move, the
legal move whose new state the critic scores highest; ``critic-first`` does so for the first
move only and then plays the solver's moves, i.e. the success rate of a policy whose first move
is as good as the critic's judgement and whose later moves are perfect; ``random-first`` plays a
random legal first move and then the solver's moves (the same with no judgement at all).

Evaluate one on a split and write a leaderboard submission::

    python baselines/reference_agents.py --agent random --preset longproc-0.5k --split test \\
        --out leaderboard/submissions/random-legal.longproc-0.5k.test.jsonl
    python baselines/reference_agents.py --agent solver --preset longproc-0.5k --split test \\
        --out leaderboard/submissions/exhaustive-solver.longproc-0.5k.test.jsonl

The same policies plug into the generic command:
``python -m countdown_gym.leaderboard submit --policy baselines/reference_agents.py:RandomLegalPolicy ...``.
"""

from __future__ import annotations

import math
import shlex
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from countdown_gym import dataclass_cli
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS
from countdown_gym.envs.countdown import decode_action
from countdown_gym.game.solver import apply_move, reachable
from countdown_gym.game.turn_format import format_move
from countdown_gym.leaderboard.agents import submit_policy
from countdown_gym.leaderboard.submission import MAX_ANSWERS


def slots_of(mask: np.ndarray) -> int:
    """The env's slot count ``M`` from its action-mask length ``M * (M - 1) * 4``."""
    pairs = len(mask) // 4
    m = (1 + math.isqrt(1 + 4 * pairs)) // 2
    if m * (m - 1) != pairs:
        raise ValueError(f"an action mask of length {len(mask)} is not M * (M - 1) * 4")
    return m


class RandomLegalPolicy:
    """Uniform random choice among the legal actions (the action mask)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        legal = np.flatnonzero(info["action_mask"])
        if legal.size == 0:
            raise ValueError("no legal action in this state (the env ends such episodes itself)")
        return int(legal[self.rng.integers(legal.size)])


class SolverPolicy:
    """The first legal action (in action order) after which the target is still reachable.

    Uses the package's exhaustive, memoised :func:`countdown_gym.game.solver.reachable`; on an
    unsolvable state it falls back to the first legal action.
    """

    def __init__(self, seed: int = 0) -> None:
        del seed  # deterministic

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        mask = info["action_mask"]
        legal = np.flatnonzero(mask)
        if legal.size == 0:
            raise ValueError("no legal action in this state (the env ends such episodes itself)")
        state, problem = info["state"], info["problem"]
        rules, m = problem.rules, slots_of(mask)
        for a in legal:
            i, j, op = decode_action(int(a), m)
            r = rules.apply(state[i], op, state[j])
            if r is not None and reachable(apply_move(state, i, j, r), problem.target, rules):
                return int(a)
        return int(legal[0])


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
        rules = problem.rules
        for i in range(len(state)):
            for j in range(len(state)):
                if i == j:
                    continue
                for op in "+-*/":
                    r = rules.apply(state[i], op, state[j])
                    if r is not None and reachable(apply_move(state, i, j, r), problem.target, rules):
                        return format_move(state[i], op, state[j])
        return "give up"


class CriticGreedyPolicy:
    """The legal move whose new state the shipped critic scores highest (``first_only``: then the solver's)."""

    def __init__(self, seed: int = 0, first_only: bool = False) -> None:
        del seed  # deterministic
        from critics import load_critic

        self.critic = load_critic(None)
        self.first_only = first_only
        self.solver = SolverPolicy()

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        state, problem, mask = info["state"], info["problem"], info["action_mask"]
        if self.first_only and len(state) < len(problem.numbers):
            return self.solver(obs, info)
        legal = np.flatnonzero(mask)
        if legal.size == 0:
            raise ValueError("no legal action in this state (the env ends such episodes itself)")
        m = slots_of(mask)
        after = []
        for a in legal:
            i, j, op = decode_action(int(a), m)
            after.append(apply_move(state, i, j, problem.rules.apply(state[i], op, state[j])))
        scores = np.asarray(self.critic.score(after, [problem.target] * len(after)))
        return int(legal[int(np.argmax(scores))])


class RandomFirstPolicy:
    """A uniformly random legal first move, the later moves by the solver."""

    def __init__(self, seed: int = 0) -> None:
        self.random, self.solver = RandomLegalPolicy(seed), SolverPolicy()

    def __call__(self, obs: np.ndarray, info: dict[str, Any]) -> int:
        first = len(info["state"]) == len(info["problem"].numbers)
        return self.random(obs, info) if first else self.solver(obs, info)


class CriticFirstPolicy(CriticGreedyPolicy):
    """First move by the critic's score, the later moves by the solver."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed, first_only=True)


AGENTS: dict[str, dict[str, Any]] = {
    "random": {
        "factory": RandomLegalPolicy,
        "agent": "random-legal",
        "model": "none",
        "model_size": "0",
        "method": "uniform random over legal moves (Countdown-v0 action mask)",
        "temperature": 1.0,
    },
    "solver": {
        "factory": SolverPolicy,
        "agent": "exhaustive-solver",
        "model": "none",
        "model_size": "0",
        "method": "exhaustive search (countdown_gym.game.solver.reachable), upper bound",
        "temperature": 0.0,
    },
    "critic-greedy": {
        "factory": CriticGreedyPolicy,
        "agent": "critic-greedy",
        "model": "shipped contrastive critic (critics/checkpoints/v5)",
        "model_size": "critic",
        "method": "at every move, the legal move whose new state the critic scores highest",
        "temperature": 0.0,
    },
    "random-first": {
        "factory": RandomFirstPolicy,
        "agent": "random-first-then-solver",
        "model": "none",
        "model_size": "0",
        "method": "random legal first move, later moves by the solver (a measurement, not an agent to rank)",
        "temperature": 1.0,
    },
    "critic-first": {
        "factory": CriticFirstPolicy,
        "agent": "critic-first-then-solver",
        "model": "shipped contrastive critic (critics/checkpoints/v5) + exhaustive solver",
        "model_size": "critic",
        "method": "first move by the critic's score, later moves by the solver (a measurement, not an agent to rank)",
        "temperature": 0.0,
    },
}


@dataclass
class Options:
    """Evaluate a reference agent on a frozen split and write a leaderboard submission."""

    agent: str
    """One of the agents of the module doc: critic-first, critic-greedy, random, random-first, solver."""
    out: str
    """Submission file to write (.jsonl)."""
    preset: str = "longproc-0.5k"
    split: str = "test"
    k: int = 1
    """Episodes per problem (seeds seed..seed+k-1); pass@k uses them."""
    seed: int = 0
    authors: str = "countdown-gym maintainers (reference agents)"
    progress: bool = True

    def __post_init__(self) -> None:
        for name, allowed in (("agent", sorted(AGENTS)), ("preset", sorted(SPLIT_SPEC)), ("split", SPLITS)):
            dataclass_cli.check_choice(self, name, allowed)
        if not 1 <= self.k <= MAX_ANSWERS:  # a submission holds 1 to MAX_ANSWERS answers per problem
            raise ValueError(f"--k must be in 1..{MAX_ANSWERS}, got {self.k}")


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
    sys.exit(main())
