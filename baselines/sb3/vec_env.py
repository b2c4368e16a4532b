"""An SB3 ``VecEnv`` over the package's batched ``CountdownVectorEnv``, with move features and dense rewards.

``CountdownSB3VecEnv`` steps ``num_envs`` games with numpy (:class:`countdown_gym.envs.vector.CountdownVectorEnv`),
computes :func:`baselines.sb3.features.state_features` for the whole batch, and adds the reward variant's
per-move terms or potentials (``countdown_gym.rewards.variants``: the functions its single-env wrapper calls, on the
same transition records): the MDP and rewards of ``DummyVecEnv`` over ``MoveFeatures(variant.wrap(...))`` without a
Python loop over envs. ``evaluate_batched`` plays a list of problems greedily with a masked policy, all at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

from baselines.sb3.features import feature_size, state_features
from countdown_gym import Problem
from countdown_gym.envs.vector import CountdownVectorEnv
from countdown_gym.rewards.terms import potential_shaping
from countdown_gym.rewards.variants import get_variant


class CountdownSB3VecEnv(VecEnv):
    """``num_envs`` Countdown-v0 games as one SB3 ``VecEnv`` whose observations are move-feature rows.

    ``reward``: a ``step`` variant of the registry (as ``sb3_ppo.py --reward``); ``scale``, ``gamma``: its dense
    term's size and the shaping discount; ``lookahead``, ``log_ratios``, ``children``: the features; ``critic``: what
    the variant needs passed in (a scorer with ``score(states, targets)`` for the critic rewards); ``env_kwargs`` go
    to ``CountdownVectorEnv`` (``preset``, ``split``, ``problems``, ...).
    """

    def __init__(self, num_envs: int, reward: str = "sparse", scale: float = 0.1, gamma: float = 1.0, lookahead: int = 1,
                 critic: Any = None, log_ratios: bool = False, children: bool = False, **env_kwargs: Any) -> None:
        self.variant = get_variant(reward, "step")
        self.reward, self.scale, self.gamma, self.critic = reward, scale, gamma, self.variant.need(critic)
        self.lookahead, self.log_ratios, self.children = lookahead, log_ratios, children
        self.potential = self.variant.potential is not None
        self.dense = self.potential or self.variant.move_term is not None
        self.venv = CountdownVectorEnv(num_envs, record_transitions=True, **env_kwargs)  # the exact numbers held
        self.rules, self.n_actions, self.render_mode = self.venv.rules, self.venv.n_actions, None
        size = feature_size(self.venv.max_numbers, lookahead, log_ratios, children)
        super().__init__(num_envs, spaces.Box(-1.0, 1.0, shape=(size,), dtype=np.float32), spaces.Discrete(self.n_actions))
        self._actions: np.ndarray | None = None
        self._phi, self._returns, self._lengths = np.zeros(num_envs), np.zeros(num_envs), np.zeros(num_envs, dtype=np.int64)

    # ---- features and potentials ------------------------------------------------------------
    def features(self, states: Sequence[Sequence[int]], targets: Sequence[int], raw_obs: np.ndarray) -> np.ndarray:
        return state_features(states, targets, raw_obs[:, -1], self.venv.max_numbers, self.rules, self.lookahead,
                              self.log_ratios, self.children)

    def _potentials(self, states: Sequence[tuple], targets: Sequence[int]) -> np.ndarray:
        return self.variant.potentials(list(states), list(targets), self.rules, self.critic, self.scale)

    def _start_potentials(self, rows: np.ndarray) -> None:
        problems = self.venv.current_problems()
        self._phi[rows] = self._potentials([tuple(problems[k].numbers) for k in rows], [problems[k].target for k in rows])

    # ---- VecEnv API ---------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        """Reset every game: with ``seed()``'s first seed and ``set_options()``'s ``{"problem": p}`` for every env, if set."""
        options = None
        if any(self._options):
            if any(set(o) != {"problem"} for o in self._options):
                raise ValueError(f"CountdownSB3VecEnv's reset options are {{'problem': p}} for every env or for none, "
                                 f"got {self._options!r:.200}")
            options = {"problems": [o["problem"] for o in self._options]}
        obs, _ = self.venv.reset(seed=self._seeds[0], options=options)
        self._reset_seeds()
        self._reset_options()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        if self.potential:
            self._start_potentials(np.arange(self.num_envs))
        problems = self.venv.current_problems()
        return self.features([p.numbers for p in problems], [p.target for p in problems], obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)  # its dtype checked by the vector env

    def _dense(self, records: list[dict], held: list[tuple], terminated: np.ndarray, done: np.ndarray) -> np.ndarray:
        if not self.potential:
            return self.variant.move_values(records, self.critic, self.scale)
        # potential-based shaping: F = gamma * Phi(s') - Phi(s), Phi = 0 once the episode terminates
        phi_next = np.zeros(self.num_envs)
        live = [k for k in range(self.num_envs) if not terminated[k]]
        phi_next[live] = self._potentials([held[k] for k in live], [records[k]["target"] for k in live])
        term = np.array([potential_shaping(p, q, self.gamma) for p, q in zip(self._phi, phi_next, strict=True)])
        self._phi = phi_next
        ended = np.flatnonzero(done)
        if len(ended):
            self._start_potentials(ended)
        return term

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        assert self._actions is not None, "step_async first"
        raw, reward, terminated, truncated, info = self.venv.step(self._actions)
        done = terminated | truncated
        reward = reward.astype(np.float64)
        records = [t[0] for t in info["transitions"]]
        held = [r["next_state"] if r["valid"] else r["state"] for r in records]  # the numbers each game holds
        if self.dense:
            reward = reward + self._dense(records, held, terminated, done)
        problems = self.venv.current_problems()
        obs = self.features([problems[k].numbers if done[k] else held[k] for k in range(self.num_envs)],
                            [p.target for p in problems], raw)
        self._returns += reward
        self._lengths += 1
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        ended = np.flatnonzero(done)
        if len(ended):
            final = self.features([held[k] for k in ended], [records[k]["target"] for k in ended],
                                  np.stack([info["final_obs"][k] for k in ended]))
            success = info["final_info"]["is_success"]
            for n, k in enumerate(ended):
                infos[k] = {"terminal_observation": final[n], "TimeLimit.truncated": bool(truncated[k] and not terminated[k]),
                            "is_success": bool(success[k]),
                            "episode": {"r": float(self._returns[k]), "l": int(self._lengths[k]), "t": 0.0}}
            self._returns[ended] = 0.0
            self._lengths[ended] = 0
        return obs, reward.astype(np.float32), done, infos

    def action_masks(self) -> np.ndarray:
        """Legal-action masks ``(num_envs, n_actions)`` bool."""
        return self.venv.action_masks()

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        idx = list(self._get_indices(indices))
        if method_name == "action_masks":
            masks = self.action_masks()
            return [masks[k] for k in idx]
        raise AttributeError(f"CountdownSB3VecEnv has no per-env method {method_name!r}")

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return [False] * len(self._get_indices(indices))

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None] * self.num_envs


def evaluate_batched(model: Any, problems: list[Problem], preset: str, lookahead: int = 1, log_ratios: bool = False,
                     children: bool = False, chunk: int = 500) -> tuple[float, list[list[tuple]]]:
    """Greedy, masked play of every problem, ``chunk`` at a time: (success rate, the moves of each episode)."""
    wins, moves = 0, []
    for start in range(0, len(problems), chunk):
        part = problems[start : start + chunk]
        venv = CountdownVectorEnv(len(part), preset=preset, record_transitions=True)
        raw, info = venv.reset(options={"problems": part})
        part_moves: list[list[tuple]] = [[] for _ in part]
        won = np.zeros(len(part), dtype=bool)
        live = np.ones(len(part), dtype=bool)
        held = [p.numbers for p in venv.current_problems()]
        while live.any():
            obs = state_features(held, [p.target for p in part], raw[:, -1], venv.max_numbers, venv.rules, lookahead,
                                 log_ratios, children)
            action, _ = model.predict(obs, deterministic=True, action_masks=venv.action_masks())
            raw, _, terminated, truncated, info = venv.step(np.asarray(action, dtype=np.int64))
            records = [t[0] for t in info["transitions"]]
            held = [r["next_state"] if r["valid"] else r["state"] for r in records]  # an ended game's: not played on
            for k in np.flatnonzero(live):
                part_moves[k].extend(t["move"] for t in info["transitions"][k])
            done = (terminated | truncated) & live
            if done.any():
                won |= done & info["final_info"]["is_success"]
            live &= ~done
        venv.close()
        wins += int(won.sum())
        moves += part_moves
    return wins / max(len(problems), 1), moves
