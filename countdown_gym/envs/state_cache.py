"""What ``Countdown-v0`` derives from a state (legal-action mask, observation), computed once and memoised."""

from __future__ import annotations

import itertools

import numpy as np

from countdown_gym.envs.actions import action_table, num_actions
from countdown_gym.game.rules import OPERATORS, Number, Rules


class StateInfo:
    """Everything the env derives from one state, computed once and cached."""

    __slots__ = ("legal", "mask", "base_obs", "has_legal_move")

    def __init__(self, legal: bytes, mask: np.ndarray, base_obs: np.ndarray, has_legal_move: bool):
        self.legal = legal  # one byte per action: 1 = legal
        self.mask = mask  # int8 view of ``legal`` (read-only)
        self.base_obs = base_obs  # float32 slot values + presence (never handed out: copied per step)
        self.has_legal_move = has_legal_move


CACHE_LIMIT = 1 << 18


class PairTable(dict):
    """``(x, y) -> 4 legality bytes`` of ``x op y``, filled on demand."""

    def __init__(self, rules: Rules) -> None:
        super().__init__()
        self.rules = rules
        self.results: dict[tuple[Number, Number], tuple[Number | None, ...]] = {}

    def __missing__(self, key: tuple[Number, Number]) -> bytes:
        res = self.results[key] = self.rules.legal_results(key[0], key[1])
        bits = self[key] = bytes((res[0] is not None, res[1] is not None, res[2] is not None, res[3] is not None))
        return bits


class ValueTable(dict):
    """``x -> clip(x / value_scale, -1, 1)``, filled on demand."""

    def __init__(self, value_scale: float) -> None:
        super().__init__()
        self.value_scale = value_scale

    def __missing__(self, x: Number) -> float:
        v = self[x] = encode_values([x], self.value_scale)[0]
        return v


class StateCache:
    """Memo of :class:`StateInfo` per state, and of pair legality and value encodings; one per (rules, max_numbers,
    value_scale), shared. At most ``CACHE_LIMIT`` states (the oldest half dropped when full); the pair and value
    memos are cleared at that size."""

    _shared: dict[tuple[Rules, int, float], StateCache] = {}

    def __init__(self, rules: Rules, max_numbers: int, value_scale: float) -> None:
        self.rules, self.max_numbers, self.value_scale = rules, max_numbers, value_scale
        self.data: dict[tuple[Number, ...], StateInfo] = {}
        self.pairs = PairTable(rules)
        self.values = ValueTable(value_scale)
        m = max_numbers
        first, second, _ = action_table(m)
        n_ops = len(OPERATORS)
        # with k numbers left, the pairs inside the first k slots are the first k * (k - 1)
        self._pairs_of = [[(first[n_ops * p], second[n_ops * p]) for p in range(k * (k - 1))] for k in range(m + 1)]
        self._zeros = [bytes(num_actions(m) - n_ops * k * (k - 1)) for k in range(m + 1)]
        self._tails = [[0.0] * (m - k) + [1.0] * k + [0.0] * (m - k) + [0.0, 0.0] for k in range(m + 1)]

    @classmethod
    def get(cls, rules: Rules, max_numbers: int, value_scale: float) -> StateCache:
        key = (rules, max_numbers, value_scale)
        if key not in cls._shared:
            cls._shared[key] = cls(rules, max_numbers, value_scale)
        return cls._shared[key]

    def lookup(self, state: tuple[Number, ...]) -> StateInfo:
        return self.data.get(state) or self.add(state)

    def add(self, state: tuple[Number, ...]) -> StateInfo:
        """Compute and memoise ``state`` (the oldest half of the memo goes when it is full)."""
        data = self.data
        if len(data) >= CACHE_LIMIT:
            for key in list(itertools.islice(data, len(data) // 2)):
                del data[key]
        info = data[state] = self._compute(state)
        return info

    def _compute(self, state: tuple[Number, ...]) -> StateInfo:
        k = len(state)
        pairs = self.pairs
        if len(pairs) >= CACHE_LIMIT:
            pairs.clear()
            pairs.results.clear()
            self.values.clear()
        legal = b"".join([pairs[(state[i], state[j])] for i, j in self._pairs_of[k]]) + self._zeros[k]
        mask = np.frombuffer(legal, dtype=np.int8)  # a read-only view of immutable bytes
        values = self.values
        obs = np.array([values[x] for x in state] + self._tails[k], dtype=np.float32)
        return StateInfo(legal, mask, obs, 1 in legal)


def encode_values(values: tuple[Number, ...] | list[Number], value_scale: float) -> list[float]:
    """The observation's normalisation ``clip(x / value_scale, -1, 1)``, clipped before any float conversion (so a
    target of ``10**400`` encodes as 1 instead of overflowing)."""
    return [1.0 if x >= value_scale else -1.0 if x <= -value_scale else float(x) / value_scale for x in values]
