"""``Countdown-v0``: the Countdown game as a step-level MDP, one arithmetic move per step (:class:`CountdownEnv`;
action encoding: :mod:`countdown_gym.envs.actions`). :class:`StateCache` memoises each state's mask and observation."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from countdown_gym.envs.actions import action_table, check_index, decode_action, encode_action, masked_move, num_actions
from countdown_gym.envs.options import InvalidActionError, set_step_options
from countdown_gym.envs.problem_source import ProblemSpec, SourcedEnv
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import OPERATORS, Number, Rules, format_number, transition_record


@dataclass(slots=True)
class StateInfo:
    """Everything the env derives from one state, computed once and cached."""

    legal: bytes  # one byte per action: 1 = legal
    mask: np.ndarray  # int8 view of ``legal`` (read-only)
    base_obs: np.ndarray  # float32 slot values + presence (never handed out: copied per step)
    has_legal_move: bool


CACHE_LIMIT = 1 << 18


class Memo(dict):
    """``key -> compute(key)``, filled on demand."""

    def __init__(self, compute: Callable[[Any], Any]) -> None:
        super().__init__()
        self.compute = compute

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.compute(key)
        return value


class StateCache:
    """Memo of :class:`StateInfo` per state, and of the results, legality bytes and value encodings of number pairs
    and numbers; one per (rules, max_numbers, value_scale), shared. At most ``CACHE_LIMIT`` states (the oldest half
    dropped when full); the other memos are cleared at that size."""

    def __init__(self, rules: Rules, max_numbers: int, value_scale: float) -> None:
        self.data: dict[tuple[Number, ...], StateInfo] = {}
        self.results = Memo(lambda pair: rules.legal_results(*pair))  # ``(x, y) -> x op y`` per operator, or None
        self.pairs = Memo(lambda pair: bytes(r is not None for r in self.results[pair]))  # their 4 legality bytes
        # ``x -> clip(x / value_scale, -1, 1)``, clipped before any float conversion (so a target of ``10**400``
        # encodes as 1 instead of overflowing)
        self.values = Memo(lambda x: 1.0 if x >= value_scale else -1.0 if x <= -value_scale else float(x) / value_scale)
        m = max_numbers
        first, second, _ = action_table(m)
        n_ops = len(OPERATORS)
        # with k numbers left, the pairs inside the first k slots are the first k * (k - 1)
        self._pairs_of = [[(first[n_ops * p], second[n_ops * p]) for p in range(k * (k - 1))] for k in range(m + 1)]
        self._zeros = [bytes(num_actions(m) - n_ops * k * (k - 1)) for k in range(m + 1)]
        self._tails = [[0.0] * (m - k) + [1.0] * k + [0.0] * (m - k) + [0.0, 0.0] for k in range(m + 1)]

    @classmethod
    @cache
    def get(cls, rules: Rules, max_numbers: int, value_scale: float) -> StateCache:
        return cls(rules, max_numbers, value_scale)

    def lookup(self, state: tuple[Number, ...]) -> StateInfo:
        return self.data.get(state) or self.add(state)

    def add(self, state: tuple[Number, ...]) -> StateInfo:
        """Compute and memoise ``state`` (the oldest half of the memo goes when it is full)."""
        data = self.data
        if len(data) >= CACHE_LIMIT:
            for key in list(itertools.islice(data, len(data) // 2)):
                del data[key]
        k = len(state)
        pairs = self.pairs
        if len(self.results) >= CACHE_LIMIT:
            for memo in (self.results, pairs, self.values):
                memo.clear()
        legal = b"".join([pairs[(state[i], state[j])] for i, j in self._pairs_of[k]]) + self._zeros[k]
        mask = np.frombuffer(legal, dtype=np.int8)  # a read-only view of immutable bytes
        values = self.values
        obs = np.array([values[x] for x in state] + self._tails[k], dtype=np.float32)
        info = data[state] = StateInfo(legal, mask, obs, 1 in legal)
        return info


def _num(x: Number | None) -> str:
    return "_" if x is None else format_number(x)


class CountdownEnv(SourcedEnv[np.ndarray, np.int64]):
    """Reach the target by combining numbers with ``+ - * /``, one move per step.

    ## Description
    A problem gives a multiset of numbers and a target (e.g. ``[21, 16, 17, 26] -> 46``). Each step picks two of the
    numbers left and an operator; both are replaced by the result (``21 + 16 = 37`` leaves ``[17, 26, 37]``). The
    problem's :class:`~countdown_gym.Rules` (LongProc's by default) decide which results are allowed and the win.
    The numbers live in ``M = max_numbers`` slots, packed at the front: a move removes slots ``i`` and ``j`` and
    appends the result after the numbers left (:func:`countdown_gym.game.solver.apply_move`'s order).

    ## Action space
    ``Discrete(M * (M - 1) * 4)`` (48 for ``M = 4``): the move ``slot[i] op slot[j]`` is ``a = 4 * p + op_index``,
    ``op_index`` the position in ``("+", "-", "*", "/")``, ``p = h * (h - 1) + 2 * min(i, j) + (i > j)``,
    ``h = max(i, j)``: with ``k`` numbers left exactly the first ``4 * k * (k - 1)`` actions use occupied slots,
    whatever ``M`` is. :func:`encode_action` / :func:`decode_action` (and the methods) convert.

    ## Action masks
    ``info["action_mask"]`` (``int8``, shape ``(n_actions,)``) and :meth:`action_masks` (``bool``, for
    sb3-contrib's ``MaskablePPO``). An action is masked exactly when it uses an empty slot or :meth:`Rules.check`
    rejects the move (division by zero, inexact quotient, a result the sign rule forbids, or at or above
    ``value_limit``).

    ## Observation space
    ``Box(-1, 1, shape=(2 * M + 2,), float32)``:

    ====================  =====================================================================
    ``obs[0:M]``          slot values ``clip(x / value_scale, -1, 1)``; 0 for empty slots
    ``obs[M:2M]``         presence mask: 1.0 for a slot holding a number, else 0.0
    ``obs[2M]``           the target, ``clip(target / value_scale, -1, 1)``
    ``obs[2M + 1]``       moves made so far ``/ (M - 1)`` (in ``[0, 1]``)
    ====================  =====================================================================

    ``value_scale`` defaults to the rules' ``value_limit`` (2000 for LongProc), else 1000 (larger values saturate
    at +-1; the game stays exact). ``info["state"]`` has the exact numbers.

    ## Rewards
    Sparse: ``1.0`` on the step that wins (:meth:`Rules.wins`: under ``use_all`` rules, the default, the last number
    left equals the target; under ``use_all=False`` a move's result does), else ``0.0``. With
    ``invalid_action="penalty"`` a masked action gives ``invalid_penalty`` (default -1.0).

    ## Episode end
    ``terminated`` on a win, one number left, a masked action in penalty mode, or a *dead end* (two or more numbers
    but no legal move, e.g. ``[4001, 2]`` under LongProc rules: reward 0, ``info["dead_end"] = True``; a problem
    starting in one is refused with ``ValueError``). Under ``use_all`` rules, making the target early with numbers
    unused neither wins nor ends the episode. ``truncated`` only after ``max_steps`` moves. An episode lasts at most
    ``M - 1`` steps, so no ``TimeLimit`` is needed. Stepping an ended episode raises ``RuntimeError``.

    ## Info
    ``action_mask``, ``transitions`` (one ``docs/DESIGN.md`` record per step; a masked action's has
    ``valid=False``, ``next_state=None``, ``result=None`` and reason ``"empty_slot"`` or the :meth:`Rules.check`
    code), ``problem``, ``state`` (the numbers now, exact), ``is_success`` and ``dead_end``; ``reset``: the same keys.

    ## Arguments
    ``gymnasium.make("Countdown-v0", ...)`` or ``CountdownEnv(...)``:

    * ``preset``, ``config``, ``rules``, ``split``, ``problems``, ``curriculum``, ``max_numbers`` (slot count ``M``;
      default: the largest problem), or ``problem_spec`` (them as one
      :class:`~countdown_gym.envs.problem_source.ProblemSpec`): where problems come from (default: the
      ``longproc-0.5k`` train split; :mod:`countdown_gym.envs.problem_source`). A curriculum hears every episode end.
    * ``max_steps``: truncate after this many moves (default ``None``).
    * ``invalid_action``: ``"penalty"`` (default: a masked action ends the episode with reward ``invalid_penalty``;
      ``check_env`` and algorithms without masks take such actions) or ``"raise"`` (:class:`InvalidActionError`, a
      ``ValueError``, and nothing changes).
    * ``invalid_penalty``: reward of a masked action in penalty mode (default ``-1.0``).
    * ``value_scale``: the observation's normalisation constant (see above).
    * ``render_mode``: ``"rgb_array"`` (a 96 x 128 x 3 ``uint8`` frame: one bar per slot, log-scaled, green once the
      target is reached, a red target line), ``"ansi"`` (the text) or ``"human"`` (printed every reset / step).

    ``reset(seed=..., options={"problem": p})`` plays ``p`` (a Problem with the env's rules or ``(numbers,
    target)``) instead of drawing one, so a group of envs can play the same puzzle.

    Example:
        >>> env = CountdownEnv(problems=[((21, 16, 17, 26), 46)])
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(env.encode_action(0, 1, "+"))
        >>> info["state"]
        (17, 26, 37)
    """

    metadata = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}

    def __init__(self, problem_spec: ProblemSpec | None = None, *, max_steps: int | None = None,
                 invalid_action: str = "penalty", invalid_penalty: float = -1.0, value_scale: float | None = None,
                 render_mode: str | None = None, **problem_args: Any) -> None:
        self._set_source(problem_spec, problem_args, render_mode, "Countdown-v0")
        self.max_numbers: int = self.source.max_numbers
        set_step_options(self, max_steps, invalid_action, invalid_penalty, value_scale)

        m = self.max_numbers
        self.n_actions = num_actions(m)
        self.action_space = spaces.Discrete(self.n_actions)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(2 * m + 2,), dtype=np.float32)
        self._moves = list(zip(*action_table(m), strict=True))  # (i, j, op) of each action
        self._cache = StateCache.get(self.rules, m, self.value_scale)
        self._results = self._cache.results
        self._states = self._cache.data
        self._step_scale = 1.0 / (m - 1)
        self._wins = self.rules.wins
        self._step_cap = self.max_steps if self.max_steps is not None else math.inf
        self._human = render_mode == "human"

        self.problem: Problem | None = None
        self.state: tuple[Number, ...] = ()
        self._info: StateInfo | None = None
        self._target_obs = 0.0
        self._steps = 0
        self._done = True
        self._history: list[tuple[Number, str, Number, Number | None]] = []
        self._last_reward = 0.0

    def __getstate__(self) -> dict[str, Any]:  # the shared StateCache holds lambdas: not pickled, looked up on load
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_results", "_states")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = StateCache.get(self.rules, self.max_numbers, self.value_scale)
        self._results, self._states = self._cache.results, self._cache.data

    def encode_action(self, i: int, j: int, op: str | int) -> int:
        """The action index of ``slot[i] op slot[j]`` (see the class docstring)."""
        return encode_action(i, j, op, self.max_numbers)

    def decode_action(self, a: int) -> tuple[int, int, str]:
        """``(i, j, op)`` of an action index."""
        return decode_action(a, self.max_numbers)

    def action_masks(self) -> np.ndarray:
        """The current legal-action mask as ``bool`` (for sb3-contrib's MaskablePPO)."""
        if self._info is None:
            raise RuntimeError("call reset() before action_masks()")
        return self._info.mask.astype(bool)

    def _obs(self) -> np.ndarray:
        obs = self._info.base_obs.copy()
        obs[-2] = self._target_obs
        obs[-1] = self._steps * self._step_scale
        return obs

    def _make_info(self, transitions: list[dict[str, Any]], success: bool, dead_end: bool) -> dict[str, Any]:
        return {"action_mask": self._info.mask.copy(), "transitions": transitions, "problem": self.problem,
                "state": self.state, "is_success": success, "dead_end": dead_end}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        problem = self._problem(options)
        self.problem = problem
        self.state = problem.numbers
        self._info = self._cache.lookup(self.state)
        self._target_obs = self._cache.values[problem.target]
        self._steps = 0
        self._done = False
        self._history = []
        self._last_reward = 0.0
        dead_end = not self._info.has_legal_move  # no legal first move: every action is masked
        if self._human:
            self.render()
        return self._obs(), self._make_info([], False, dead_end)

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._done:
            if self._info is None:
                raise RuntimeError("call reset() before step()")
            raise RuntimeError("the episode is over; call reset() before step()")
        a = action if type(action) is int and 0 <= action < self.n_actions else self._coerce_action(action)
        state = self.state
        i, j, op = self._moves[a]
        if not self._info.legal[a]:
            return self._masked_step(a, i, j, op)
        x, y = state[i], state[j]
        result = self._results[(x, y)][a & 3]
        target = self.problem.target
        lo, hi = (i, j) if i < j else (j, i)
        nxt = state[:lo] + state[lo + 1 : hi] + state[hi + 1 :] + (result,)
        steps = self._steps = self._steps + 1
        won = result == target and self._wins(result, len(nxt), target)  # Rules.wins, its cheap half first
        terminated = won or len(nxt) == 1
        self.state = nxt
        info = self._states.get(nxt) or self._cache.add(nxt)
        self._info = info
        dead_end = not terminated and not info.has_legal_move
        terminated = terminated or dead_end
        truncated = not terminated and steps >= self._step_cap
        self._done = terminated or truncated
        move = (x, op, y, result)
        self._history.append(move)
        reward = self._last_reward = 1.0 if won else 0.0
        obs = self._obs()
        step_info = self._make_info([transition_record(state, move, nxt, target, "ok", self.rules)], won, dead_end)
        if self._done:
            self.source.episode_end(self.problem, won)
        if self._human:
            self.render()
        return obs, reward, terminated, truncated, step_info

    def _coerce_action(self, action: Any) -> int:
        if isinstance(action, np.ndarray) and action.shape in ((), (1,)):
            action = action.reshape(()).item()
        return check_index(action, self.n_actions, "action")

    def _masked_step(self, a: int, i: int, j: int, op: str) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        state = self.state
        x, y, reason = masked_move(state, i, j, op, self.rules)
        if self.invalid_action == "raise":
            raise InvalidActionError(
                f"action {a} = slots ({i}, {j}) {op!r} ({_num(x)} {op} {_num(y)}) is masked in state {list(state)}: {reason}. "
                "Take an action whose action_mask entry is 1, or create the env with invalid_action='penalty'."
            )
        self._done = True
        self.source.episode_end(self.problem, False)
        self._history.append((x, op, y, None))
        self._last_reward = self.invalid_penalty
        transition = transition_record(state, (x, op, y, None), None, self.problem.target, reason, self.rules)
        if self._human:
            self.render()
        return self._obs(), self.invalid_penalty, True, False, self._make_info([transition], False, False)

    def _render_frame(self, height: int = 96, width: int = 128) -> np.ndarray:
        """One bar per slot (log-scaled value), a red target line, green bars once the target is reached."""
        frame = np.full((height, width, 3), 255, dtype=np.uint8)
        if self.problem is None:
            return frame

        def level(x: Number) -> int:
            v = math.log1p(max(float(min(x, self.value_scale)), 0.0)) / math.log1p(self.value_scale)  # no overflow
            return int(round(min(max(v, 0.0), 1.0) * (height - 8)))

        slot = width // max(self.max_numbers, 1)
        won = self._done and self._last_reward > 0  # the winning step's reward is the only positive one
        for i, x in enumerate(self.state):
            h = level(x)
            frame[height - 4 - h : height - 4, i * slot + 2 : (i + 1) * slot - 2] = (40, 160, 60) if won else (60, 90, 200)
        t = height - 4 - level(self.problem.target)
        frame[max(t - 1, 0) : t + 1, :] = (210, 40, 40)
        return frame

    def _render_text(self) -> str:
        if self.problem is None:
            return "Countdown: call reset() first"
        lines = [f"Countdown target {self.problem.target} ({self.rules.name} rules), numbers {list(self.problem.numbers)}"]
        for k, (a, op, b, r) in enumerate(self._history, 1):
            tail = f"= {_num(r)}" if r is not None else "(masked move)"
            lines.append(f"  {k}. {_num(a)} {op} {_num(b)} {tail}")
        status = "over" if self._done else "in play"
        now = "[" + ", ".join(_num(x) for x in self.state) + "]"
        lines.append(f"  now {now}, step {self._steps}, reward {self._last_reward:g}, {status}")
        return "\n".join(lines)
