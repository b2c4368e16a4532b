"""Training pairs for the numerical critics, read off the package's own DFS traces, and the evaluation states.

Each trace is parsed back into a search tree labelled from the trace alone: nodes on the path to the target
(reachable), dead ends (the exhaustive search came back: unreachable) and hindsight goals (values reached below).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TypeVar

import numpy as np
from tqdm import tqdm

from countdown_gym import Problem, Rules, dfs_trace, generate, legal_moves, load_split, parse_trace, reachable
from countdown_gym.data.generator import get_config
from countdown_gym.dataclass_cli import not_regular, written_aside
from countdown_gym.game.solver import apply_move

T = TypeVar("T")


@dataclass
class TraceTree:
    """One trace as a tree: node states (trace order), parents, labels, and the line -> node map."""

    initial: tuple[int, ...]
    target: int
    states: list[tuple[int, ...]]
    parent: list[int]
    on_path: list[bool]
    reached: list[set[int]]
    line_node: list[int]


def trace_tree(problem: Problem) -> TraceTree:
    """Parse ``problem``'s DFS trace back into a :class:`TraceTree`; ``ValueError`` for rules without ``use_all``
    (the trace's stopping rule then differs) or an unsolvable problem."""
    if not problem.rules.use_all:
        raise ValueError(f"critic training data needs use_all rules; {problem.rules.name!r} lets numbers go unused")
    init, target, steps = parse_trace(dfs_trace(problem))
    states: list[tuple[int, ...]] = [tuple(init)]
    parent, reached, line_node = [-1], [set()], []
    path = [0]  # node ids of the current path, root first; depth d holds len(init) - d numbers
    found = -1
    for st in steps:
        depth = len(init) - len(st.state)
        if depth < 0 or depth >= len(path) or states[path[depth]] != st.state:
            raise ValueError(f"trace of {problem!r}: line {st.line_no} does not continue the search path")
        del path[depth + 1 :]
        if st.next_state is None:  # dropped move: the search stays where it is
            line_node.append(path[-1])
            continue
        node = len(states)
        states.append(tuple(st.next_state))
        parent.append(path[-1])
        reached.append(set())
        line_node.append(node)
        if st.outcome == "added":
            path.append(node)
            continue
        value = st.next_state[0]
        reached[node].add(value)
        for a in path:
            reached[a].add(value)
        if st.outcome == "found":
            found = node
    if found < 0:
        raise ValueError(f"trace of {problem!r} never reaches the target")
    on_path = [False] * len(states)
    k = found
    while k >= 0:
        on_path[k] = True
        k = parent[k]
    return TraceTree(tuple(init), target, states, parent, on_path, reached, line_node)


@dataclass
class NpzTable:
    """A dataclass table of numpy arrays plus ``max_numbers`` and ``goal_range``, saved as one ``.npz``."""

    max_numbers: int
    goal_range: tuple[int, int]

    def save(self, path: str | Path) -> None:
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)[2:]}  # after max_numbers, goal_range
        meta = np.array(json.dumps({"max_numbers": self.max_numbers, "goal_range": list(self.goal_range)}))
        with written_aside(path) as tmp, tmp.open("wb") as f:  # whole or not at all: a torn cache would be loaded
            np.savez_compressed(f, meta=meta, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in z.files if k != "meta"}
        return cls(max_numbers=meta["max_numbers"], goal_range=tuple(meta["goal_range"]), **arrays)


def _size_weights(pools: list[np.ndarray], size_mix: Sequence[float]) -> np.ndarray:
    weights = [w if k + 1 < len(pools) and len(pools[k + 1]) else 0.0 for k, w in enumerate(size_mix)]
    return np.array(weights, dtype=np.float64)


def draw_by_size(pools: list[np.ndarray], size_mix: Sequence[float], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` entries of ``pools[k]`` (the candidates of size ``k``), ``size_mix[k-1]`` the relative chance of size ``k``
    (empty pools skipped); ``ValueError`` if no weighted size has a candidate."""
    mix = _size_weights(pools, size_mix)
    if mix.sum() <= 0:
        raise ValueError(f"no states of the sizes weighted by {list(size_mix)}")
    sizes = rng.choice(len(mix), size=n, p=mix / mix.sum()) + 1
    out = np.empty(n, dtype=np.int64)
    for k in np.unique(sizes):
        m = sizes == k
        out[m] = pools[k][rng.integers(0, len(pools[k]), int(m.sum()))]
    return out


@dataclass
class TraceTable(NpzTable):
    """All nodes of many traces as flat arrays, plus CSR indexes for fast batch sampling."""

    initial: np.ndarray  # int64 [T, max_numbers], sorted, 0-padded
    target: np.ndarray  # int64 [T]
    node_states: np.ndarray  # int64 [N, max_numbers], sorted, 0-padded
    node_sizes: np.ndarray  # int64 [N]
    node_trace: np.ndarray  # int64 [N]
    node_on_path: np.ndarray  # bool [N]
    goal_ptr: np.ndarray  # int64 [N + 1]: hindsight goals (reached values inside goal_range) per node
    goal_vals: np.ndarray  # int64
    line_ptr: np.ndarray  # int64 [T + 1]: Try lines per trace
    line_node: np.ndarray  # int64 [L]

    def __post_init__(self) -> None:
        lines_on_path = self.node_on_path[self.line_node]
        self._path_lines = _group(self.line_ptr, lines_on_path)
        self._dead_lines = _group(self.line_ptr, ~lines_on_path)
        self._has_dead = np.diff(self._dead_lines[0]) > 0
        self._multi_line = np.diff(self.line_ptr) >= 2
        has_goals = np.diff(self.goal_ptr) > 0
        self._goal_nodes_by_size = [np.flatnonzero(has_goals & (self.node_sizes == k)) for k in range(self.max_numbers + 1)]
        dead = np.flatnonzero(~self.node_on_path)
        key = self.node_trace[dead] * (self.max_numbers + 1) + self.node_sizes[dead]
        order = np.argsort(key, kind="stable")
        self._dead_key, self._dead_sorted = key[order], dead[order]

    def stats(self) -> dict[str, int]:
        return {"traces": len(self.target), "lines": len(self.line_node), "nodes": len(self.node_trace),
                "on_path_nodes": int(self.node_on_path.sum()), "dead_end_nodes": int((~self.node_on_path).sum()),
                "hindsight_pairs": len(self.goal_vals)}

    def _pick(self, groups: tuple[np.ndarray, np.ndarray], traces: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        ptr, lines = groups
        lo, n = ptr[traces], ptr[traces + 1] - ptr[traces]
        return self.line_node[lines[lo + (rng.random(len(traces)) * n).astype(np.int64)]]

    def _dead_same_size(self, traces: np.ndarray, sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A dead-end node of each trace with the given size (any dead-end line's node if none)."""
        key = traces * (self.max_numbers + 1) + sizes
        lo = np.searchsorted(self._dead_key, key, side="left")
        hi = np.searchsorted(self._dead_key, key, side="right")
        out = self._pick(self._dead_lines, traces, rng)
        ok = hi > lo
        out[ok] = self._dead_sorted[lo[ok] + (rng.random(int(ok.sum())) * (hi - lo)[ok]).astype(np.int64)]
        return out

    def sample_v2(self, batch: int, rng: np.random.Generator, positives: str = "reachable", hindsight: float = 0.5,
                  dead_per_row: int = 4, size_mix: tuple[float, ...] = (0.1, 0.3, 0.6),
                  dead_same_size: float = 1.0) -> dict[str, np.ndarray]:
        """A V2 batch: ``state`` nodes (``positives``: ``"all"`` lines, the paper's, or ``"reachable"`` ones), their
        ``goal`` (the target; for a ``hindsight`` fraction a value reached below a node drawn by ``size_mix``), and per
        own-target row (``dead_valid``) ``dead_per_row`` ``dead`` ends of its trace (``dead_same_size``: same size)."""
        if positives not in ("all", "reachable"):
            raise ValueError(f"positives must be 'all' or 'reachable', got {positives!r}")
        traces = rng.integers(0, len(self.target), batch)
        all_lines = (self.line_ptr, np.arange(len(self.line_node)))
        nodes = self._pick(self._path_lines if positives == "reachable" else all_lines, traces, rng)
        goals = self.target[traces].copy()
        hind = rng.random(batch) < hindsight if positives == "reachable" else np.zeros(batch, dtype=bool)
        if hind.any() and _size_weights(self._goal_nodes_by_size, size_mix).sum() > 0:
            hn = draw_by_size(self._goal_nodes_by_size, size_mix, int(hind.sum()), rng)
            traces[hind], nodes[hind] = self.node_trace[hn], hn
            lo, n = self.goal_ptr[hn], self.goal_ptr[hn + 1] - self.goal_ptr[hn]
            goals[hind] = self.goal_vals[lo + (rng.random(len(hn)) * n).astype(np.int64)]
        else:
            hind[:] = False
        dead_valid = ~hind & self._has_dead[traces]
        dead = np.zeros((batch, dead_per_row), dtype=np.int64)
        if dead_valid.any() and dead_per_row > 0:
            rows = np.flatnonzero(dead_valid)
            same = int(round(dead_per_row * dead_same_size))
            for k in range(dead_per_row):  # the first `same` of them with the row's state size
                dead[rows, k] = (self._dead_same_size(traces[rows], self.node_sizes[nodes[rows]], rng) if k < same
                                 else self._pick(self._dead_lines, traces[rows], rng))
        return {"state": nodes, "goal": goals, "dead": dead, "dead_valid": dead_valid, "trace": traces}

    def sample_v1(self, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A V1 batch: (initial numbers, state at a random line, a later line's state as goal)."""
        ok = np.flatnonzero(self._multi_line)
        traces = ok[rng.integers(0, len(ok), batch)]
        lo, n = self.line_ptr[traces], self.line_ptr[traces + 1] - self.line_ptr[traces]
        i = (rng.random(batch) * (n - 1)).astype(np.int64)
        j = i + 1 + (rng.random(batch) * (n - 1 - i)).astype(np.int64)
        return {"trace": traces, "state": self.line_node[lo + i], "goal_node": self.line_node[lo + j]}


def _group(ptr: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the line indexes with ``keep`` per trace: ``(new_ptr, line_indexes)``."""
    lines = np.flatnonzero(keep)
    trace_of_line = np.searchsorted(ptr, lines, side="right") - 1
    counts = np.bincount(trace_of_line, minlength=len(ptr) - 1)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), lines.astype(np.int64)


def _padded(state: Sequence[int], width: int) -> list[int]:
    s = sorted(int(x) for x in state)
    return s + [0] * (width - len(s))


def heldout_sets(preset: str = "longproc-0.5k") -> set[tuple[int, ...]]:
    """The sorted number sets of the preset's validation and test splits: never trained on."""
    return {tuple(sorted(p.numbers)) for s in ("validation", "test") for p in load_split(preset, s)}


def train_split(preset: str, max_train: int = 0) -> list[Problem]:
    """The preset's train split, its first ``max_train`` problems if > 0."""
    problems = load_split(preset, "train")
    return problems[:max_train] if max_train > 0 else problems


def build_table(problems: Iterable[Problem], max_numbers: int = 4, goal_range: tuple[int, int] = (10, 50),
                forbidden: set[tuple[tuple[int, ...], int]] | None = None, progress: bool = False) -> TraceTable:
    """Trace every problem and flatten the trees into a :class:`TraceTable`; ``ValueError`` for a ``forbidden`` key
    (default: longproc-0.5k's test split: test problems never reach training)."""
    forbidden = {p.key for p in load_split("longproc-0.5k", "test")} if forbidden is None else forbidden
    init_rows, targets = [], []
    st_rows, sizes, node_trace, on_path, goal_counts, goal_vals = [], [], [], [], [], []
    line_ptr, line_node = [0], []
    lo_g, hi_g = goal_range
    for t, p in enumerate(tqdm(list(problems), desc="tracing", unit="trace", disable=not progress)):
        if p.key in forbidden:
            raise ValueError(f"{p!r} belongs to the test split; it must not be used for training")
        if len(p.numbers) > max_numbers:
            raise ValueError(f"{p!r} has {len(p.numbers)} numbers; the critic takes at most {max_numbers}")
        if not p.rules.integer_only:  # the table's int64 rows would truncate p/q states and goals to integers
            raise ValueError(f"{p!r}: critic training tables hold integer states; rules {p.rules.name!r} allow fractions")
        tree = trace_tree(p)
        base = len(node_trace)
        init_rows.append(_padded(tree.initial, max_numbers))
        targets.append(tree.target)
        for s, op, r in zip(tree.states, tree.on_path, tree.reached, strict=True):
            st_rows.append(_padded(s, max_numbers))
            sizes.append(len(s))
            node_trace.append(t)
            on_path.append(op)
            g = sorted(v for v in r if lo_g <= v <= hi_g)
            goal_counts.append(len(g))
            goal_vals.extend(g)
        line_node.extend(base + k for k in tree.line_node)
        line_ptr.append(len(line_node))
    i64 = functools.partial(np.array, dtype=np.int64)
    return TraceTable(
        max_numbers=max_numbers, goal_range=(lo_g, hi_g), initial=i64(init_rows).reshape(-1, max_numbers),
        target=i64(targets), node_states=i64(st_rows).reshape(-1, max_numbers), node_sizes=i64(sizes),
        node_trace=i64(node_trace), node_on_path=np.array(on_path, dtype=bool),
        goal_ptr=np.concatenate([[0], np.cumsum(goal_counts)]).astype(np.int64), goal_vals=i64(goal_vals),
        line_ptr=i64(line_ptr), line_node=i64(line_node))


def training_problems(preset: str = "longproc-0.5k", extra: int = 0, seed: int = 0, max_train: int = 0) -> list[Problem]:
    """The preset's train split (its first ``max_train`` if > 0) plus ``extra`` generated problems
    not in any frozen split."""
    problems = train_split(preset, max_train)
    if extra > 0:
        taken = {p.key for s in ("train", "validation", "test") for p in load_split(preset, s)}
        for p in generate(preset, extra + len(taken), seed=seed):
            if p.key not in taken:
                problems.append(p)
                taken.add(p.key)
                extra -= 1
                if extra == 0:
                    break
    return problems


def cached_table(preset: str = "longproc-0.5k", extra: int = 0, seed: int = 0, max_numbers: int = 4,
                 goal_range: tuple[int, int] = (10, 50), cache_dir: str | Path | None = None, progress: bool = True,
                 max_train: int = 0) -> TraceTable:
    """:func:`build_table` over :func:`training_problems`, cached as ``.npz`` in ``cache_dir``."""
    key = [preset, extra, seed, max_numbers, list(goal_range), 1] + ([max_train] if max_train else [])
    return cached_npz(cache_dir, "traces", key, get_config(preset).rules, TraceTable.load,
                      lambda: build_table(training_problems(preset, extra, seed, max_train), max_numbers, goal_range,
                                          progress=progress))


def cached_npz(cache_dir: str | Path | None, prefix: str, key: list, rules: Rules, load: Callable[[Path], T],
               build: Callable[[], T]) -> T:
    """``build()``'s table, saved as ``<cache_dir>/<prefix>-<hash>.npz`` and loaded from there next time (the hash
    covers ``key`` and the ``rules`` of the labels, so new rules build a new table); ``cache_dir=None``: no cache."""
    if cache_dir is None:
        return build()
    digest = hashlib.sha256(json.dumps([*key, rules.to_dict()], sort_keys=True).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{prefix}-{digest}.npz"
    if path.exists() and not_regular(path) is None:  # a FIFO would block the read: built again and replaced
        try:
            return load(path)
        except Exception as exc:  # noqa: BLE001 - a torn or foreign file: built again and replaced
            print(f"{path} does not read as a cached table ({type(exc).__name__}: {exc}); building it again")
    table = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    table.save(path)
    return table


@dataclass
class LabelledStates:
    """States with their target, the oracle's reachability, and the puzzle's initial numbers."""

    states: list[tuple[int, ...]]
    targets: list[int]
    labels: np.ndarray  # bool
    initial: list[tuple[int, ...]]

    def __len__(self) -> int:
        return len(self.states)

    @classmethod
    def label(cls, rows: Iterable[tuple[tuple[int, ...], int, Problem]]) -> LabelledStates:
        """``(state, target, problem)`` rows, labelled by :func:`countdown_gym.reachable` under the problem's rules."""
        rows = list(rows)
        labels = np.array([reachable(s, t, p.rules) for s, t, p in rows], dtype=bool)
        return cls([s for s, _, _ in rows], [t for _, t, _ in rows], labels, [p.numbers for _, _, p in rows])


def distinct_states(states: Iterable[Sequence[int]], min_size: int = 1) -> list[tuple[int, ...]]:
    """The distinct sorted ``states`` of at least ``min_size`` numbers, in order of first occurrence."""
    return list(dict.fromkeys(k for k in (tuple(sorted(s)) for s in states) if len(k) >= min_size))


def trace_states(problems: Iterable[Problem], min_size: int = 1) -> LabelledStates:
    """Every distinct state the DFS trace of each problem stands on (with its own target)."""
    rows = ((s, p.target, p) for p in problems for s in distinct_states(trace_tree(p).states, min_size))
    return LabelledStates.label(rows)


def random_states(problems: Iterable[Problem], rollouts: int = 4, seed: int = 0, min_size: int = 1) -> LabelledStates:
    """The distinct states of at least ``min_size`` numbers along uniformly random legal-move rollouts from each
    problem's numbers."""
    rng = random.Random(seed)

    def visited(p: Problem) -> list[tuple[int, ...]]:
        out = []
        for _ in range(rollouts):
            state = tuple(p.numbers)
            while len(state) > 1 and (moves := list(legal_moves(state, p.rules))):
                i, j, move = rng.choice(moves)
                state = apply_move(state, i, j, move[3])
                out.append(state)
        return distinct_states(out, min_size)

    return LabelledStates.label((k, p.target, p) for p in problems for k in visited(p))


def start_states(problems: Iterable[Problem], targets: int = 4, seed: int = 0, goal_range: tuple[int, int] = (10, 50),
                 distinct: bool = False) -> LabelledStates:
    """Each problem's full number set with ``targets`` random targets in ``goal_range`` (not its own target: that one
    is always reachable); ``distinct`` draws a problem's targets without repeats."""
    rng = random.Random(seed)
    lo, hi = goal_range

    def draws() -> list[int]:
        return rng.sample(range(lo, hi + 1), targets) if distinct else [rng.randint(lo, hi) for _ in range(targets)]

    return LabelledStates.label((tuple(sorted(p.numbers)), t, p) for p in problems for t in draws())
