"""``CountdownVectorEnv``: ``Countdown-v0`` batched natively in numpy, for fast rollouts."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from countdown_gym.envs.actions import action_table, masked_move, num_actions
from countdown_gym.envs.move_kernel import apply_moves, batch_moves, pair_slots
from countdown_gym.envs.options import (
    InvalidActionError,
    check_render_mode,
    reset_options,
    set_step_options,
)
from countdown_gym.envs.problem_source import ProblemSpec
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules, describe_value, transition_record
from countdown_gym.game.turn_game import check_budget

_INT32_SAFE = 2**31 - 1
_INT64_SAFE = 2**62


def arithmetic_bound(numbers: Sequence[int], rules: Rules) -> int:
    """A bound on ``|x op y|`` for any two values of any state reachable from ``numbers``: ``prod(max(|x|, 2))``,
    or, when :meth:`Rules.result_range` is bounded on both sides, the square of ``max(limit, numbers)``."""
    bound = 1
    for x in numbers:
        bound *= max(abs(int(x)), 2)
    lo, hi = rules.result_range()
    if lo >= 0 and hi != math.inf:
        b = max([int(hi), 2] + [abs(int(x)) for x in numbers])
        bound = min(bound, b * b)
    return bound


def _check_target(p: Problem) -> None:
    """Raise ``ValueError`` unless ``p.target`` fits the batch's int64 target array."""
    if abs(p.target) >= _INT64_SAFE:
        raise ValueError(f"{p}: the target does not fit this batched env's int64 arithmetic")


class CountdownVectorEnv(VectorEnv):
    """``num_envs`` copies of ``Countdown-v0`` stepped together with numpy array operations.

    Same single-env spaces, actions, masks, rewards and episode ends as
    :class:`~countdown_gym.envs.countdown.CountdownEnv` (tested step by step against it), the batch held in
    ``(num_envs, max_numbers)`` arrays.

    ## Spaces
    ``single_observation_space`` / ``single_action_space`` are ``Countdown-v0``'s; ``observation_space`` is the
    batched ``Box`` ``(num_envs, 2 * M + 2)``, ``action_space`` ``MultiDiscrete([n_actions] * num_envs)``.

    ## Autoreset
    ``AutoresetMode.SAME_STEP``: an env whose episode ends is reset in the same ``step``, which returns the finished
    episode's reward / terminated / truncated, the *new* episode's first observation and mask, and the finished
    episode's last observation in ``info["final_obs"]`` (object array, ``None`` elsewhere; mask
    ``info["_final_obs"]``) with its ``is_success`` and ``dead_end`` in ``info["final_info"]``. So every returned
    mask has a legal move. ``gymnasium.make_vec(..., vectorization_mode="sync", vector_kwargs={"autoreset_mode":
    AutoresetMode.SAME_STEP})`` behaves the same way.

    ## Info
    Every ``reset`` / ``step`` returns ``info["action_mask"]`` (``int8``, ``(num_envs, n_actions)``) with
    ``info["_action_mask"]``; :meth:`action_masks` gives the ``bool`` mask. Transition records (object array of
    one-element lists in ``info["transitions"]``) only with ``record_transitions=True``. :meth:`current_problems`
    lists the problems being played.

    ## Rules
    Only ``integer_only`` rules (else ``ValueError``; use ``vectorization_mode="sync"``). The arithmetic runs on
    ``int32`` when :func:`arithmetic_bound` of every problem fits, else ``int64``; a bound reaching ``2**62`` is
    refused with ``ValueError``. Nothing can overflow, so legality agrees exactly with :meth:`Rules.check`.

    ## Arguments
    ``num_envs`` plus ``Countdown-v0``'s keyword arguments (the problem arguments or ``problem_spec``,
    ``max_steps``, ``invalid_action``, ``invalid_penalty``, ``value_scale``); ``max_episode_steps``: ``max_steps`` with
    ``TimeLimit``'s ``truncated`` (also on an ending step), as ``gymnasium.make`` gives; ``render_mode="ansi"``:
    :meth:`render` gives one line per env; ``record_transitions`` (see Info). With ``invalid_action="raise"`` a
    masked action in any env raises :class:`~countdown_gym.envs.countdown.InvalidActionError` before any env moves.

    ``reset(seed=..., options=...)`` takes one ``int`` seed and options ``{"problem": p}`` (every env plays ``p``:
    a GRPO-style group) or ``{"problems": [p_0, ..., p_{n-1}]}``. Autoresets draw from the source. Given problems
    must have a legal first move (``ValueError``).

    Example:
        >>> envs = CountdownVectorEnv(1024, split="train")
        >>> obs, info = envs.reset(seed=0)
        >>> obs.shape, info["action_mask"].shape
        ((1024, 10), (1024, 48))
    """

    metadata = {"render_modes": ["ansi"], "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int = 1, problem_spec: ProblemSpec | None = None, *, max_steps: int | None = None,
                 max_episode_steps: int | None = None, invalid_action: str = "penalty", invalid_penalty: float = -1.0,
                 value_scale: float | None = None, render_mode: str | None = None, record_transitions: bool = False,
                 **problem_args: Any) -> None:
        self.num_envs = check_budget("num_envs", num_envs, allow_none=False)
        self.source = ProblemSpec.of(problem_spec, problem_args, "CountdownVectorEnv").resolve()
        self.rules: Rules = self.source.rules
        if not self.rules.integer_only:
            raise ValueError(f"CountdownVectorEnv supports integer_only rules only (got rules {self.rules.name!r} with "
                             "integer_only=False); use gymnasium.make_vec('Countdown-v0', vectorization_mode='sync') "
                             "for rational rules")
        self._time_limit = check_budget("max_episode_steps", max_episode_steps) is not None
        if max_steps is not None and max_episode_steps is not None and max_steps != max_episode_steps:
            raise ValueError(f"max_steps={max_steps} and max_episode_steps={max_episode_steps} disagree; pass one")
        set_step_options(self, max_steps if max_steps is not None else max_episode_steps, invalid_action,
                         invalid_penalty, value_scale)
        self.render_mode = check_render_mode(render_mode, self.metadata, "CountdownVectorEnv")
        if not isinstance(record_transitions, (bool, np.bool_)):  # "no" would have recorded them
            raise ValueError(f"record_transitions must be a bool, got {describe_value(record_transitions)}")
        self.record_transitions = bool(record_transitions)

        m = self.max_numbers = self.source.max_numbers
        n = self.num_envs
        self.n_actions = num_actions(m)
        self.single_observation_space = spaces.Box(-1.0, 1.0, shape=(2 * m + 2,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(self.n_actions)
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)

        self._pair_i, self._pair_j = pair_slots(m)  # slots i and j of each ordered pair, in action order
        self._slots = np.arange(m, dtype=np.int64)
        self._rows = np.arange(n)
        self._step_scale = 1.0 / (m - 1)

        pool = self.source.pool
        if pool is not None:
            for p in pool:
                _check_target(p)
            bound = max(arithmetic_bound(p.numbers, self.rules) for p in pool)
        else:
            cfg = self.source.config
            assert cfg is not None
            biggest = max(abs(cfg.max_value), abs(cfg.min_value))
            bound = arithmetic_bound([biggest] * cfg.max_numbers, self.rules)
        if bound >= _INT64_SAFE:
            raise ValueError(f"{self.source.description}: values reachable from these numbers may overflow int64 in "
                             "the batched env")
        self._dtype = np.int32 if bound <= _INT32_SAFE else np.int64
        self._pool_arrays = None if pool is None else self._arrays(pool)

        self._vals = np.zeros((n, m), dtype=self._dtype)
        self._count = np.zeros(n, dtype=np.int64)
        self._target = np.zeros(n, dtype=np.int64)
        self._steps = np.zeros(n, dtype=np.int64)
        self._problems = np.empty(n, dtype=object)
        self._legal = np.zeros((n, self.n_actions), dtype=bool)
        self._started = False

    def _arrays(self, problems: Sequence[Problem]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(values, counts, targets, problems)`` of ``problems`` as arrays."""
        vals = np.zeros((len(problems), self.max_numbers), dtype=self._dtype)
        for k, p in enumerate(problems):
            vals[k, : len(p.numbers)] = p.numbers
        counts = np.array([len(p.numbers) for p in problems], dtype=np.int64)
        return vals, counts, np.array([p.target for p in problems], dtype=np.int64), self._object_array(list(problems))

    def _set_rows(self, rows: np.ndarray, arrays: tuple[np.ndarray, ...]) -> None:
        self._vals[rows], self._count[rows], self._target[rows], self._problems[rows] = arrays

    def _load(self, rows: np.ndarray, problems: Sequence[Problem]) -> None:
        limit = _INT32_SAFE if self._dtype == np.int32 else _INT64_SAFE - 1
        for p in problems:
            _check_target(p)
            if arithmetic_bound(p.numbers, self.rules) > limit:
                raise ValueError(f"{p}: values reachable from these numbers may overflow this batched env's "
                                 f"{np.dtype(self._dtype).name} arithmetic (chosen from its problem source)")
        self._set_rows(rows, self._arrays(problems))

    def _draw(self, rows: np.ndarray, won: np.ndarray | None = None) -> None:
        """New problems from the source for ``rows``; ``won``: how their episodes ended (a curriculum hears it)."""
        if won is not None and self.source.curriculum is not None:
            for r in rows.tolist():
                self.source.episode_end(self._problems[r], bool(won[r]))
        if self._pool_arrays is not None:
            idx = self.source.sample_indices(self.np_random, len(rows))
            self._set_rows(rows, tuple(a[idx] for a in self._pool_arrays))
        else:
            self._load(rows, [self.source.sample(self.np_random) for _ in rows])
        self._steps[rows] = 0

    def current_problems(self) -> list[Problem]:
        """The problem each env is playing."""
        if not self._started:
            raise RuntimeError("call reset() first")
        return list(self._problems)

    def _observe(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Observations of all envs (or of ``rows``), encoded as in ``Countdown-v0``."""
        vals, count, target, steps = self._vals, self._count, self._target, self._steps
        if rows is not None:
            vals, count, target, steps = vals[rows], count[rows], target[rows], steps[rows]
        m = self.max_numbers
        obs = np.empty((len(vals), 2 * m + 2), dtype=np.float32)
        present = self._slots < count[:, None]
        values = vals / self.value_scale
        np.clip(values, -1.0, 1.0, out=values)
        values[~present] = 0.0
        obs[:, :m] = values
        obs[:, m : 2 * m] = present
        obs[:, 2 * m] = np.clip(target / self.value_scale, -1.0, 1.0)
        obs[:, 2 * m + 1] = steps * self._step_scale
        return obs

    def action_masks(self) -> np.ndarray:
        """The legal-action masks, ``bool`` of shape ``(num_envs, n_actions)``."""
        if not self._started:
            raise RuntimeError("call reset() before action_masks()")
        return self._legal.copy()

    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, (list, tuple)):
            raise ValueError("CountdownVectorEnv draws every env's problems from one generator: pass one int seed")
        super().reset(seed=seed)
        rows = self._rows
        options = reset_options(options, ("problem", "problems"))
        if options.get("problem") is not None and options.get("problems") is not None:
            raise ValueError("pass reset option 'problem' or 'problems', not both")
        if options.get("problem") is not None:
            self._load(rows, [self.source.coerce(options["problem"])] * self.num_envs)
        elif options.get("problems") is not None:
            given = options["problems"]
            if isinstance(given, (str, bytes, Problem, Mapping)) or not isinstance(given, Iterable):
                raise ValueError(f"reset option 'problems' must be a list of {self.num_envs} problems, got {describe_value(given)}")
            given = list(given)
            if len(given) != self.num_envs:
                raise ValueError(f"reset option 'problems' needs {self.num_envs} problems (one per env), got {len(given)}")
            self._load(rows, [self.source.coerce(p) for p in given])  # coerce checks each is playable
        else:
            self._draw(rows)
        self._steps[:] = 0
        self._legal = batch_moves(self._vals, self._count, self.rules)
        self._started = True
        info: dict[str, Any] = {"action_mask": self._legal.astype(np.int8),
                                "_action_mask": np.ones(self.num_envs, dtype=bool)}
        if self.record_transitions:
            info["transitions"] = self._object_array([[] for _ in rows])
            info["_transitions"] = np.ones(self.num_envs, dtype=bool)
        return self._observe(), info

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(actions)
        if a.shape != (self.num_envs,) or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"actions must be an int array of shape ({self.num_envs},), got {a.dtype} {a.shape}")
        if a.min() < 0 or a.max() >= self.n_actions:
            raise ValueError(f"every action must be in 0..{self.n_actions - 1}, got values {a.min()}..{a.max()}")
        rows = self._rows
        valid = self._legal[rows, a]
        invalid = ~valid
        any_invalid = bool(invalid.any())
        if any_invalid and self.invalid_action == "raise":
            bad = np.flatnonzero(invalid)
            raise InvalidActionError(f"masked actions in envs {bad[:10].tolist()}{' ...' if len(bad) > 10 else ''} "
                                     f"(actions {a[bad[:10]].tolist()}); take actions whose action_mask entry is 1, "
                                     "or create the env with invalid_action='penalty'")
        m = self.max_numbers
        pair = a >> 2
        i, j = self._pair_i[pair], self._pair_j[pair]
        old_vals, old_count = self._vals, self._count
        result = apply_moves(old_vals[rows, i], a & 3, old_vals[rows, j])
        record = self.record_transitions
        if record:
            before = [tuple(v[:c]) for v, c in zip(old_vals.tolist(), old_count.tolist(), strict=True)]

        # remove slots i and j (keeping order), append the result after the numbers left
        lo = np.minimum(i, j)[:, None]
        hi = np.maximum(i, j)[:, None]
        src = self._slots + (self._slots >= lo) + (self._slots >= hi - 1)
        moved = np.take_along_axis(old_vals, np.minimum(src, m - 1), axis=1)
        new_count = old_count - 1
        moved[rows, new_count - 1] = result
        moved[self._slots >= new_count[:, None]] = 0
        if any_invalid:
            moved[invalid] = old_vals[invalid]
            new_count = np.where(valid, new_count, old_count)
        self._vals, self._count = moved, new_count
        self._steps += valid

        won = valid & self.rules.wins(result, new_count, self._target)
        over = won | (new_count == 1) | invalid  # known before legality: reset these first
        reward = won.astype(np.float64)
        if any_invalid:
            reward[invalid] = self.invalid_penalty
        info: dict[str, Any] = {}
        if record:
            info["transitions"] = self._transitions(before, a, result, valid, moved, new_count)
            info["_transitions"] = np.ones(self.num_envs, dtype=bool)

        elapsed = self._steps + invalid  # TimeLimit counts a masked step too
        obs = self._observe()  # the last observation of envs whose episode ends now
        first = np.flatnonzero(over)
        if len(first):
            self._draw(first, won)
        self._legal = batch_moves(self._vals, self._count, self.rules)
        dead_end = ~over & ~self._legal.any(axis=1)
        terminated = over | dead_end
        cap = self.max_steps if self.max_steps is not None else np.inf
        truncated = elapsed >= cap if self._time_limit else ~terminated & (self._steps >= cap)
        second = np.flatnonzero(dead_end | (truncated & ~over))
        if len(second):
            self._draw(second, won)
            self._legal[second] = batch_moves(self._vals[second], self._count[second], self.rules)
        done = terminated | truncated
        if len(first) or len(second):
            ended = np.flatnonzero(done)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for k in ended.tolist():
                final_obs[k] = obs[k].copy()  # obs[ended] is overwritten below
            info["final_obs"], info["_final_obs"] = final_obs, done
            info["final_info"] = {"is_success": won, "_is_success": done, "dead_end": dead_end, "_dead_end": done}
            info["_final_info"] = done
            obs[ended] = self._observe(ended)
        info["action_mask"] = self._legal.astype(np.int8)
        info["_action_mask"] = np.ones(self.num_envs, dtype=bool)
        return obs, reward, terminated, truncated, info

    @staticmethod
    def _object_array(items: list[Any]) -> np.ndarray:
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out

    def _transitions(self, before: list[tuple[int, ...]], actions: np.ndarray, result: np.ndarray, valid: np.ndarray,
                     vals: np.ndarray, count: np.ndarray) -> np.ndarray:
        first, second, ops = action_table(self.max_numbers)
        records = []
        for k, (state, act) in enumerate(zip(before, actions.tolist(), strict=True)):
            i, j, op = first[act], second[act], ops[act]
            if valid[k]:
                nxt = tuple(vals[k, : count[k]].tolist())
                move, reason = (state[i], op, state[j], int(result[k])), "ok"
            else:
                x, y, reason = masked_move(state, i, j, op, self.rules)
                nxt, move = None, (x, op, y, None)
            records.append([transition_record(state, move, nxt, int(self._target[k]), reason, self.rules)])
        return self._object_array(records)

    def render(self) -> tuple[str, ...] | None:
        """One line per env: target and numbers left (``render_mode="ansi"``)."""
        if self.render_mode is None:
            return None
        if not self._started:
            return tuple("Countdown: call reset() first" for _ in range(self.num_envs))
        return tuple(
            f"target {t}  numbers {v[:c]}  step {s}"
            for v, c, t, s in zip(self._vals.tolist(), self._count.tolist(), self._target.tolist(), self._steps.tolist(), strict=True)
        )
