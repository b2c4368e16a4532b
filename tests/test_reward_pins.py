"""Every reward variant's values pinned, bit for bit: the wrappers (named and built by the registry) on
Countdown-v0 and CountdownText-v0, the batched per-move terms and potentials, and the per-completion terms.

The pinned values (``tests/data/reward_pins.json``) were computed before the reward code was refactored; a
refactor must leave every one of them exactly as it is. ``python tests/test_reward_pins.py`` rewrites them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import countdown_gym  # noqa: F401  (registers the environments)
from countdown_gym.data.splits import load_split
from countdown_gym.game.rules import Rules
from countdown_gym.game.solver import reachable, successors
from countdown_gym.integrations.trl import replay
from countdown_gym.rewards.variants import get_variant, variant_names
from countdown_gym.wrappers import ContrastiveCriticReward, OracleReward

PINS = Path(__file__).parent / "data" / "reward_pins.json"
PROBLEMS = load_split("longproc-0.5k", "test")[:6]
LONGPROC = Rules.longproc()


class Critic:
    """A deterministic stand-in critic: a smooth function of the state and the target, in (-1, 1)."""

    def score(self, states: Any, targets: Any) -> np.ndarray:
        return np.array([np.tanh((sum(float(x) for x in s) - t) / 97.0 + 0.1 * len(s))
                         for s, t in zip(states, targets, strict=True)])


WRAPPERS = {
    "oracle-perfect": lambda env: OracleReward(env, mode="perfect", scale=0.3),
    "oracle-reachable": lambda env: OracleReward(env, mode="reachable", scale=0.7),
    "oracle-shaping": lambda env: OracleReward(env, potential=True, gamma=0.9, scale=2.0),
    "critic": lambda env: ContrastiveCriticReward(env, Critic(), scale=0.4),
    "critic-shaping": lambda env: ContrastiveCriticReward(env, Critic(), potential=True, gamma=0.95, scale=1.5),
    "stacked": lambda env: OracleReward(ContrastiveCriticReward(env, Critic(), scale=0.1), mode="reachable", key="o"),
    **{f"variant:{n}": (lambda env, n=n: get_variant(n).wrap(env, scale=0.6, gamma=0.8, scorer=Critic()))
       for n in variant_names("step")},
}


def _move(rng: Any, state: tuple[Any, ...], target: int) -> tuple[Any, ...] | None:
    """A seeded random move ``(a, op, b, result)``: half the time one that keeps the target reachable, else any
    legal one; ``None`` (an illegal move) one time in five."""
    moves = list(successors(state, LONGPROC)) if len(state) > 1 else []
    if not moves or rng.random() < 0.2:
        return None
    good = [m for m, nxt in moves if reachable(nxt, target, LONGPROC)]
    pool = good if good and rng.random() < 0.5 else [m for m, _ in moves]
    return pool[int(rng.integers(len(pool)))]


def _action(env: Any, info: dict[str, Any], move: tuple[Any, ...] | None, text: bool) -> Any:
    if text:
        if len(info["state"]) == 1:
            return f"<answer>{info['state'][0]}</answer>"
        a, b = info["state"][:2]
        return f"{a}+{b}={a + b + 1}\n" if move is None else "{}{}{}={}\n".format(*move)
    if move is None:
        return int(np.flatnonzero(~np.asarray(info["action_mask"], dtype=bool))[0])
    slots = list(env.unwrapped.state)
    i = slots.index(move[0])
    j = next(k for k, x in enumerate(slots) if x == move[2] and k != i)
    return env.unwrapped.encode_action(i, j, move[1])


def _play(make: Any, text: bool) -> list[list[Any]]:
    """Seeded random episodes on the test problems (at most 6 steps each): each step's reward and terms."""
    rng = np.random.default_rng(0)
    out = []
    for problem in PROBLEMS:
        env = make(gym.make("CountdownText-v0" if text else "Countdown-v0", problems=[problem],
                            **({"prompt": "compact"} if text else {})))
        _, info = env.reset(seed=0)
        for _ in range(6):
            move = _move(rng, tuple(info["state"]), problem.target)
            _, reward, term, trunc, info = env.step(_action(env, info, move, text))
            out.append([float(reward), {k: float(v) for k, v in info.get("reward_terms", {}).items()}])
            if term or trunc:
                break
    return out


def _transitions() -> list[dict[str, Any]]:
    """Transition records of random play (valid, dead-end and invalid moves) on the test problems."""
    out: list[dict[str, Any]] = []
    for seed in range(3):
        env = gym.make("Countdown-v0", problems=PROBLEMS)
        rng = np.random.default_rng(seed)
        for _ in PROBLEMS:
            _, info = env.reset(seed=seed)
            done = False
            while not done:
                move = _move(rng, tuple(info["state"]), info["problem"].target)
                _, _, term, trunc, info = env.step(_action(env, info, move, False))
                out += info["transitions"]
                done = term or trunc
    return out


def _completions() -> list[tuple[Any, str]]:
    """Completions of 0 to 3 random moves, every other one with an answer, for each test problem."""
    rng, out = np.random.default_rng(2), []
    for problem in PROBLEMS:
        for k in range(4):
            state, lines = tuple(problem.numbers), []
            for _ in range(k):
                move = _move(rng, state, problem.target)
                if move is None:
                    lines.append(f"{state[0]}*{state[1]}=1")
                    continue
                lines.append("{}{}{}={}".format(*move))
                state = next(nxt for m, nxt in successors(state, LONGPROC) if m == move)
            out.append((problem, "\n".join([*lines, f"<answer>{state[0]}</answer>" if k % 2 else ""])))
    return out


def observed() -> dict[str, Any]:
    """What the pins hold, computed by the code as it is now."""
    out: dict[str, Any] = {}
    for name, make in WRAPPERS.items():
        out[f"countdown/{name}"] = _play(make, False)
        out[f"text/{name}"] = _play(make, True)
    ts, completions = _transitions(), _completions()
    for name in variant_names("step"):
        v = get_variant(name)
        if v.potential is not None:
            states = [t["state"] for t in ts]
            out[f"potentials/{name}"] = v.potentials(states, [t["target"] for t in ts], LONGPROC, Critic(), 0.5).tolist()
        else:
            out[f"moves/{name}"] = v.move_values(ts, Critic(), 0.5).tolist()
    for name in variant_names("text"):
        v = get_variant(name)
        if v.per_completion:
            out[f"completion/{name}"] = [v.completion_score(replay(p, c), Critic()) for p, c in completions]
    return out


def test_every_variant_gives_the_values_pinned_before_the_refactor() -> None:
    pins = json.loads(PINS.read_text())
    now = json.loads(json.dumps(observed()))
    assert sorted(now) == sorted(pins)
    for key in pins:
        assert now[key] == pins[key], key


if __name__ == "__main__":
    PINS.write_text(json.dumps(observed(), sort_keys=True) + "\n")
    print(f"wrote {PINS}", file=sys.stderr)
