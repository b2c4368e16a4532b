"""Run a ``Countdown-v0`` policy (``policy(obs, info) -> action``, or an SB3 model through :func:`sb3_policy`) or a
``CountdownMultiTurn-v0`` text policy on a frozen split and collect its moves for a submission. A masked action ends
the episode (``invalid_action="penalty"``) and is kept as the last move with its unrestricted exact result, so the
verifier reports which rule it broke.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from countdown_gym.data.splits import load_split
from countdown_gym.dataclass_cli import not_regular
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, Rules
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS, check_budget

Policy = Callable[[np.ndarray, dict[str, Any]], int]
MoveList = list[tuple[Number, str, Number, Number]]
Played = tuple[MoveList, int, dict[str, Any]]
"""One played episode: its moves, its invalid actions and the last step's ``info``."""

_UNRESTRICTED = Rules(name="unrestricted", integer_only=False, sign="any", value_limit=None, use_all=True)


@dataclass
class Evaluation:
    """What :func:`evaluate_policy` returns: one move sequence per problem, in split order."""

    moves: list[MoveList]
    successes: int  # episodes the env itself reported as won (the leaderboard re-verifies)
    invalid_actions: int
    seconds: float

    @property
    def success_rate(self) -> float:
        return self.successes / len(self.moves) if self.moves else 0.0


def sb3_policy(model: Any, deterministic: bool = True) -> Policy:
    """A policy from an SB3-style model (``model.predict(obs, action_masks=..., deterministic=...)``)."""
    masked = "action_masks" in inspect.signature(model.predict).parameters

    def policy(obs: np.ndarray, info: dict[str, Any]) -> int:
        masks = {"action_masks": np.asarray(info["action_mask"], dtype=bool)} if masked else {}
        action, _ = model.predict(obs, deterministic=deterministic, **masks)
        return int(np.asarray(action).reshape(()))

    return policy


def load_sb3_model(path: str | Path) -> Any:
    """A saved sb3-contrib ``MaskablePPO`` model (CPU)."""
    p = Path(path)
    found = p if p.exists() else p.with_suffix(".zip")  # where SB3 looks
    if not found.exists():
        raise FileNotFoundError(f"no saved model at {p}")
    if (kind := not_regular(found)) is not None:  # a folder, FIFO or device: refused, never opened (it would block)
        raise ValueError(f"{found} is {kind}, not a saved model (a .zip file)")
    try:
        from sb3_contrib import MaskablePPO
    except ImportError:
        raise RuntimeError("loading an SB3 model needs sb3-contrib: pip install 'countdown-gym[sb3]'") from None
    return MaskablePPO.load(str(p), device="cpu")


def load_object(spec: str, what: str = "policy") -> Any:
    """The object named by ``"module:name"`` or ``"path/to/file.py:name"`` (a file is imported under its stem with
    its folder on ``sys.path``, so classes a saved SB3 model refers to resolve when it loads)."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise ValueError(f"{what} spec must be 'module:name' or 'file.py:name', got {spec!r}")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{what} file not found: {target}")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        module = importlib.import_module(path.stem)
        if Path(getattr(module, "__file__", "") or "").resolve() != path:
            raise ValueError(f"{target}: the module name {path.stem!r} is taken by {module.__file__}; rename the file")
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            if e.name is None or not (target == e.name or target.startswith(e.name + ".")):
                raise  # the module exists but one of its own imports is missing: keep that traceback
            raise ValueError(f"{what} module {target!r} not found (spec {spec!r}); is it installed or on sys.path?") from None
    if not hasattr(module, name):
        raise ValueError(f"{target} has no attribute {name!r}")
    return getattr(module, name)


def load_policy(spec: str, seed: int = 0) -> Policy:
    """A policy from ``"module:name"`` or ``"path/to/file.py:name"``: a callable ``(obs, info) -> action``, an object
    with ``predict`` (SB3 model), or a class, instantiated as ``name(seed=seed)`` (or ``name()``)."""
    obj = load_object(spec, "policy")
    if inspect.isclass(obj):
        obj = obj(seed=seed) if "seed" in inspect.signature(obj).parameters else obj()
    if hasattr(obj, "predict"):
        return sb3_policy(obj)
    if not callable(obj):
        raise ValueError(f"{spec} is not callable")
    return obj


def _recorded_move(transition: dict[str, Any]) -> tuple[Number, str, Number, Number] | None:
    a, op, b, r = transition["move"]
    if transition["valid"]:
        return (a, op, b, r)
    if a is None or b is None:
        return None
    r = _UNRESTRICTED.apply(a, op, b)
    return None if r is None else (a, op, b, r)


def evaluate_policy(policy: Policy | Any, preset: str, split: str, *, seed: int = 0, progress: bool = True,
                    limit: int | None = None, wrapper: Callable[[Any], Any] | None = None) -> Evaluation:
    """Play every problem of ``load_split(preset, split)`` once with ``policy`` (or an SB3 model), on the env wrapped
    by ``wrapper`` when given; ``limit``: only the first problems (a quick check)."""
    from countdown_gym.envs.countdown import CountdownEnv

    if not callable(policy) and hasattr(policy, "predict"):
        policy = sb3_policy(policy)
    env = CountdownEnv(preset=preset, split=split, invalid_action="penalty")
    if wrapper is not None:
        env = wrapper(env)

    def episode(problem: Problem, obs: Any, info: dict[str, Any]) -> Played:
        moves: MoveList = []
        invalid = 0
        done = not info["action_mask"].any()
        while not done:
            obs, _, terminated, truncated, info = env.step(policy(obs, info))
            done = terminated or truncated
            for t in info["transitions"]:
                invalid += not t["valid"]
                move = _recorded_move(t)
                if move is not None:
                    moves.append(move)
        return moves, invalid, info

    return _play(env, load_split(preset, split)[:limit], episode, seed=seed, desc=f"{preset}/{split}",
                 progress=progress)


TextPolicy = Callable[[str, dict[str, Any]], str]
"""A multi-turn policy: ``(last message, info) -> turn`` on ``CountdownMultiTurn-v0``."""


def evaluate_turn_policy(policy: TextPolicy, preset: str, split: str, *, seed: int = 0,
                         max_turns: int = DEFAULT_MAX_TURNS, limit: int | None = None, progress: bool = True,
                         ) -> Evaluation:
    """Play one ``CountdownMultiTurn-v0`` episode of each problem with a text ``policy`` (the last message and
    ``info`` -> one turn such as ``"21+16"``, ``"undo"``). The answer is the moves on the final path; a refused turn
    counts as invalid; a turn that is not a ``str`` raises ``ValueError`` naming the problem."""
    from countdown_gym.envs.multiturn import CountdownMultiTurnEnv

    env = CountdownMultiTurnEnv(preset=preset, split=split, max_turns=max_turns)

    def episode(problem: Problem, obs: Any, info: dict[str, Any]) -> Played:
        invalid = 0
        done = False
        while not done:
            turn = policy(obs, info)
            if not isinstance(turn, str):
                raise ValueError(f"a multi-turn policy returns the turn as a str; got {type(turn).__name__} on problem {problem.id}")
            obs, _, terminated, truncated, info = env.step(turn)
            invalid += not info["valid"]
            done = terminated or truncated
        return [tuple(m) for m in env.episode.moves], invalid, info

    return _play(env, load_split(preset, split)[:limit], episode, seed=seed, desc=f"{preset}/{split} multi-turn",
                 progress=progress)


def _play(env: Any, problems: list[Problem], episode: Callable[[Problem, Any, dict[str, Any]], Played], *, seed: int,
          desc: str, progress: bool) -> Evaluation:
    """One episode of each problem on ``env`` (seeded once): ``episode(problem, obs, info)`` plays it from the reset
    and returns its moves, its invalid actions and the last ``info``."""
    from tqdm import tqdm

    env.reset(seed=seed)
    out: list[MoveList] = []
    successes = invalid = 0
    start = time.perf_counter()
    for problem in tqdm(problems, desc=desc, disable=not progress):
        moves, bad, info = episode(problem, *env.reset(options={"problem": problem}))
        out.append(moves)
        invalid += bad
        successes += bool(info["is_success"])
    env.close()
    return Evaluation(out, successes, invalid, time.perf_counter() - start)


def check_output_path(out: str | os.PathLike[str]) -> None:
    """Raise ``ValueError`` unless a submission can be written at ``out`` (checked before any episode is played):
    not an existing folder or other non-file, and its parent a folder (or creatable) that may be written."""
    p = Path(out)
    if p.exists() and not p.is_file():
        raise ValueError(f"{p} exists and is not a file (a folder?); give the path of the .jsonl file to write")
    parent = next((q for q in p.absolute().parents if q.exists()), None)
    if parent is not None and not parent.is_dir():
        raise ValueError(f"cannot write {p}: {parent} is not a folder")
    if parent is not None and not os.access(parent, os.W_OK):  # read-only file system, no permission
        raise ValueError(f"cannot write {p}: the folder {parent} is not writable")


def check_wrapper(wrapper: Callable[[Any], Any], preset: str, split: str) -> None:
    """Raise ``ValueError`` unless ``wrapper(env)`` wraps a Countdown-v0 env into a Gymnasium env (tried once,
    before any episode is played: a function that is no wrapper, or keyword arguments it does not take, fail here)."""
    import gymnasium

    from countdown_gym.envs.countdown import CountdownEnv

    name = getattr(wrapper, "__qualname__", None) or getattr(getattr(wrapper, "func", None), "__qualname__", repr(wrapper))
    try:
        wrapped = wrapper(CountdownEnv(preset=preset, split=split, invalid_action="penalty"))
    except Exception as e:  # noqa: BLE001 - any failure to wrap is the caller's input
        raise ValueError(f"the wrapper {name} cannot wrap Countdown-v0: {type(e).__name__}: {e}") from None
    if not isinstance(wrapped, gymnasium.Env):
        raise ValueError(f"the wrapper {name} returned {type(wrapped).__name__}, not a Gymnasium environment")
    wrapped.close()


def submit_policy(make_policy: Callable[[int], Policy | Any], out: str | Path, *, preset: str, split: str, command: str,
                  k: int = 1, seed: int = 0, temperature: float = 0.0, progress: bool = True,
                  compute: str | None = None, wrapper: Callable[[Any], Any] | None = None, interaction: str = "moves",
                  max_turns: int = DEFAULT_MAX_TURNS, **metadata: Any) -> tuple[Path, list[Evaluation]]:
    """Evaluate ``make_policy(seed + r)`` for ``r < k`` on the split and write a submission; ``metadata``: the other
    :func:`write_submission` fields. The env's own success rate of the first run is the claimed pass@1 (the board
    shows a disagreement). ``interaction="multi-turn"``: text policies (:func:`evaluate_turn_policy`)."""
    from countdown_gym.leaderboard.submission import check_header
    from countdown_gym.leaderboard.write import build_header, write_submission

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if interaction not in ("moves", "multi-turn"):
        raise ValueError(f"interaction must be 'moves' (Countdown-v0) or 'multi-turn' (CountdownMultiTurn-v0), got {interaction!r}")
    if interaction == "multi-turn" and wrapper is not None:
        raise ValueError("a wrapper applies to Countdown-v0 policies, not to multi-turn text policies")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0 (Gymnasium seeds are non-negative), got {seed!r}")
    check_output_path(out)
    if wrapper is not None:
        check_wrapper(wrapper, preset, split)
    sampling: dict[str, Any] = {"k": k, "temperature": temperature, "seed": seed}
    if interaction == "multi-turn":
        sampling["max_turns"] = check_budget("max_turns", max_turns, allow_none=False)
    check_header(  # bad metadata fails now, not after the evaluation (an empty one too: not checked as "n/a")
        build_header(
            preset=preset, split=split, command=command, compute="-" if compute is None else compute,
            answer_kind="moves", sampling=sampling,
            model_size="n/a" if metadata.get("model_size") is None else metadata["model_size"],
            **{key: metadata.get(key, "") for key in ("agent", "authors", "model", "method", "reward_variant")},
            notes=metadata.get("notes"), interaction=interaction,
        )
    )  # fmt: skip
    play = (functools.partial(evaluate_turn_policy, max_turns=max_turns) if interaction == "multi-turn"
            else functools.partial(evaluate_policy, wrapper=wrapper))
    evals = [play(make_policy(seed + r), preset, split, seed=seed + r, progress=progress) for r in range(k)]
    n = len(evals[0].moves)
    answers = [[ev.moves[i] for ev in evals] for i in range(n)]
    seconds = sum(ev.seconds for ev in evals)
    if compute is None:
        compute = f"{os.cpu_count()} CPU cores ({platform.machine()}), {seconds:.1f} s wall for {k} x {n} episodes"
    path = write_submission(
        out, preset=preset, split=split, answers=answers, command=command, compute=compute,
        sampling=sampling, claimed={"pass@1": evals[0].success_rate}, interaction=interaction,
        **metadata,
    )  # fmt: skip
    return path, evals
