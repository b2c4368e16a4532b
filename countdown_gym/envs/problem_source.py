"""Where an environment's problems come from: one small API shared by every environment.

Every environment takes the same problem arguments, one :class:`ProblemSpec` (``problem_spec=ProblemSpec(split=
"test")``, or its fields as keyword arguments), resolved here into a :class:`ProblemSource` (``source.sample(rng)``
draws one, ``source.coerce((numbers, target))`` takes a caller's). At most one of these:

* ``problems=[...]``: a fixed list (:class:`~countdown_gym.Problem`, ``(numbers, target)`` pairs or
  :meth:`Problem.to_dict` dicts), drawn uniformly;
* ``config=GeneratorConfig(...)``: fresh problems, each from a 63-bit seed drawn from the env's ``np_random``;
* ``preset="longproc-0.5k"`` (default) with ``split``: ``"train"`` (default), ``"validation"`` or ``"test"`` (the
  frozen split), or ``"generate"`` (fresh problems from the preset's generator);
* ``curriculum=Curriculum(...)``: its pool, drawn tier by tier; every finished episode is reported back
  (:meth:`ProblemSource.episode_end`).

``rules`` (a :class:`~countdown_gym.Rules` or preset name) replaces every problem's rules (generated problems are then
generated under it; a split's problems already won under ``use_all=False`` rules are left out); ``None`` keeps the
problems' own (a fixed list must agree on one; plain pairs get LongProc's). Every problem must be *playable*: 2 to
``max_numbers`` numbers, not won before a move, a legal first move. Bad arguments raise ``ValueError`` naming them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence, Set
from functools import lru_cache
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.core import ActType, ObsType

from countdown_gym.data.curriculum import Curriculum
from countdown_gym.data.generator import PRESETS, GeneratorConfig, iter_problems
from countdown_gym.data.problem_files import parse_rules_json
from countdown_gym.data.splits import SPLITS, load_split
from countdown_gym.envs.options import check_render_mode, reset_options
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules, describe_value
from countdown_gym.game.solver import legal_moves

DEFAULT_PRESET = "longproc-0.5k"
GENERATE = "generate"
ProblemLike = Problem | tuple[Sequence[int], int] | Mapping[str, Any]
"""What callers may pass as a problem: a Problem, ``(numbers, target)`` or a Problem dict."""


def resolve_rules(rules: Rules | str | None) -> Rules | None:
    """``None``, a :class:`Rules`, or a rules preset name -> ``Rules`` (or ``None``)."""
    if rules is None or isinstance(rules, Rules):
        return rules
    if isinstance(rules, str):
        return Rules.preset(rules)
    raise ValueError(f"rules must be a Rules, a rules preset name or None, got {describe_value(rules)}")


def _plain(x: Any) -> Any:
    """A numpy int (a pandas / parquet value) as a Python int; anything else as it is."""
    return int(x) if isinstance(x, np.integer) else x


def to_problem(obj: ProblemLike, rules: Rules | None = None) -> Problem:
    """A :class:`Problem` from a Problem, ``(numbers, target)`` pair or dict; ``rules`` (when given) replaces its
    rules (a pair without rules gets LongProc's)."""
    try:
        if isinstance(obj, Problem):
            p = obj
        elif isinstance(obj, Mapping):
            d = dict(obj)  # numpy ints (a pandas / parquet row) count as ints, as in (numbers, target) pairs
            if isinstance(d.get("numbers"), (Sequence, np.ndarray)) and not isinstance(d["numbers"], (str, bytes)):
                d["numbers"] = [_plain(x) for x in d["numbers"]]
            if "target" in d:
                d["target"] = _plain(d["target"])
            p = Problem.from_dict(d)
        elif isinstance(obj, (tuple, list)) and len(obj) == 2 and not isinstance(obj[0], (int, np.integer)):
            numbers, target = obj
            unordered = isinstance(numbers, (Set, Mapping))  # Problem refuses them: a set has lost its repeated numbers
            p = Problem(numbers if unordered else tuple(_plain(x) for x in numbers), _plain(target))
        else:
            raise ValueError(f"a problem must be a Problem, a (numbers, target) pair or a dict, got {describe_value(obj)}")
    except TypeError as e:
        raise ValueError(f"bad problem {describe_value(obj)}: {e}") from None
    if rules is not None and p.rules != rules:
        p = dataclasses.replace(p, rules=rules)
    return p


def problem_from_columns(numbers: Any, target: Any, rules: Any = None) -> Problem:
    """The :class:`Problem` of a dataset row's ``numbers``, ``target`` and optional ``rules`` (a :class:`Rules`, a
    dict, its JSON, a preset name or ``None``: LongProc's); ``ValueError`` naming a bad value."""
    if numbers is None or target is None:
        raise ValueError(f"a Countdown row needs 'numbers' and 'target', got numbers={numbers!r:.80}, target={target!r:.80}")
    rules = parse_rules_json(rules)
    d: dict[str, Any] = {"numbers": numbers, "target": target}
    if isinstance(rules, Rules):
        return to_problem(d, rules)
    if rules is not None:
        d["rules"] = rules
    try:
        return to_problem(d)
    except (TypeError, KeyError, ValueError) as exc:
        raise ValueError(f"bad Countdown row: {exc}") from None


def check_playable(problem: Problem, max_numbers: int) -> None:
    """Raise ``ValueError`` unless an episode can be played on ``problem``."""
    n = len(problem.numbers)
    if n < 2:
        raise ValueError(f"{problem}: an episode needs at least 2 numbers, got {n}")
    if n > max_numbers:
        raise ValueError(f"{problem}: {n} numbers, but the environment has only {max_numbers} slots (max_numbers)")
    if problem.rules.is_won(problem.numbers, problem.target):
        raise ValueError(f"{problem}: the game is won before a move (the target is already one of the numbers under "
                         f"rules {problem.rules.name!r}, which may leave numbers unused)")
    nums, rules = problem.numbers, problem.rules
    if rules.apply(nums[0], "+", nums[1]) is None and next(legal_moves(nums, rules), None) is None:  # cheap case first
        raise ValueError(
            f"problem {problem.numbers} -> {problem.target} has no legal first move under rules {rules.name!r}; "
            "an episode must start with a legal move (every action would be masked)"
        )


@dataclasses.dataclass(frozen=True)
class ProblemSource:
    """A resolved problem source: a ``pool`` of problems (fixed list or frozen split; a ``curriculum`` picks from it
    when given) or a generator ``config``; every problem is played under ``rules`` with at most ``max_numbers``
    numbers (the environments' slot count). ``description``: a label such as ``"longproc-0.5k/train"``."""

    rules: Rules
    max_numbers: int
    pool: tuple[Problem, ...] | None = None
    config: GeneratorConfig | None = None
    description: str = ""
    curriculum: Curriculum | None = None

    def sample(self, rng: np.random.Generator) -> Problem:
        """One problem, drawn with the caller's generator."""
        if self.curriculum is not None:
            return self.pool[self.curriculum.sample_index(rng)]
        if self.pool is not None:
            return self.pool[int(rng.integers(len(self.pool)))]
        assert self.config is not None
        # the generator yields only playable problems: >= 2 numbers, none solved before a move
        return next(iter_problems(self.config, int(rng.integers(0, 2**63 - 1))))

    def sample_indices(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` pool indices in one draw (pool sources only; used by the batched env)."""
        if self.curriculum is not None:
            return self.curriculum.sample_indices(rng, n)
        return rng.integers(len(self.pool), size=n)

    def episode_end(self, problem: Problem | None, success: bool) -> None:
        """An environment reports a finished episode (what an adaptive curriculum learns from; else nothing)."""
        if self.curriculum is not None and problem is not None:
            self.curriculum.update(problem, success)

    def reset_option(self, options: Mapping[str, Any] | None) -> Problem | None:
        """The problem ``reset(options=...)`` asks for (coerced), or ``None``; ``ValueError`` for any other option."""
        options = reset_options(options, ("problem",))
        return self.coerce(options["problem"]) if options.get("problem") is not None else None

    def coerce(self, obj: ProblemLike) -> Problem:
        """A caller's problem as a playable Problem with this source's rules (pairs and dicts without rules get
        them; a Problem or dict with other rules is refused: the spaces and legality are built for one)."""
        explicit = isinstance(obj, Problem) or (isinstance(obj, Mapping) and "rules" in obj)
        p = to_problem(obj, None if explicit else self.rules)
        if p.rules != self.rules:
            raise ValueError(f"{p} has rules {p.rules}, but this environment plays under {self.rules}; "
                             "pass (numbers, target) or a Problem with the environment's rules")
        check_playable(p, self.max_numbers)
        return p


def _pool_source(problems: Iterable[Problem], rules: Rules | None, max_numbers: int | None, description: str,
                 drop_solved: bool = False) -> ProblemSource:
    pool = tuple(problems)
    if not pool:
        raise ValueError(f"{description}: the problem list is empty")
    if rules is None:
        found = {p.rules for p in pool}
        if len(found) > 1:
            names = sorted(r.name for r in found)
            raise ValueError(f"{description}: the problems have different rules ({names}); pass rules=...")
        rules = pool[0].rules
    else:
        pool = tuple(p if p.rules == rules else dataclasses.replace(p, rules=rules) for p in pool)
        if drop_solved:
            pool = tuple(p for p in pool if not rules.is_won(p.numbers, p.target))
            if not pool:
                raise ValueError(f"{description}: every problem is already solved under rules {rules.name!r}")
    longest = max(len(p.numbers) for p in pool)
    slots = _slots(max_numbers, longest)
    for p in pool:
        check_playable(p, slots)
    return ProblemSource(rules=rules, max_numbers=slots, pool=pool, description=description)


MAX_SLOTS = 64
"""Most numbers a problem source may hold per problem (Countdown-v0 has ``M * (M - 1) * 4`` actions)."""


def _slots(max_numbers: int | None, needed: int) -> int:
    if needed > MAX_SLOTS:
        raise ValueError(f"a problem has {needed} numbers; at most {MAX_SLOTS} are supported")
    if max_numbers is None:
        return needed
    if isinstance(max_numbers, bool) or not isinstance(max_numbers, (int, np.integer)) or max_numbers < 2:
        raise ValueError(f"max_numbers must be an int >= 2 or None, got {max_numbers!r}")
    if max_numbers < needed:
        raise ValueError(f"max_numbers={max_numbers} is smaller than the source's largest problem ({needed} numbers)")
    if max_numbers > MAX_SLOTS:
        raise ValueError(f"max_numbers={max_numbers} is above the supported {MAX_SLOTS} (the action space grows as M**2)")
    return int(max_numbers)


@dataclasses.dataclass(frozen=True)
class ProblemSpec:
    """Where an environment's problems come from, as the caller states it (``problem_spec=ProblemSpec(...)``, or
    the same fields as keyword arguments); resolved as the module docstring says. ``max_numbers``: the slot
    count (default: the source's largest problem).

    Example:
        >>> src = ProblemSpec(preset="longproc-0.5k", split="test").resolve()
        >>> src.max_numbers, len(src.pool)
        (4, 1000)
    """

    preset: str | None = None
    config: GeneratorConfig | None = None
    rules: Rules | str | None = None
    split: str | None = None
    problems: Iterable[ProblemLike] | None = None
    curriculum: Curriculum | None = None
    max_numbers: int | None = None

    @classmethod
    def of(cls, spec: ProblemSpec | None, arguments: Mapping[str, Any], owner: str) -> ProblemSpec:
        """``spec`` itself, or one built from the keyword ``arguments``, not both (``owner`` names the environment in
        the ``TypeError`` for an unknown keyword)."""
        unknown = set(arguments) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"{owner} got unexpected keyword arguments {sorted(unknown)}")
        if spec is None:
            return cls(**arguments)
        if not isinstance(spec, cls):
            raise ValueError(f"problem_spec must be a ProblemSpec, got {describe_value(spec)}")
        if arguments:
            raise ValueError(f"pass problem_spec=... or the problem arguments {sorted(arguments)}, not both")
        return spec

    def resolve(self) -> ProblemSource:
        """The :class:`ProblemSource` these arguments name (``ValueError`` naming a bad argument)."""
        curriculum = self.curriculum
        if curriculum is not None:
            if not isinstance(curriculum, Curriculum):
                raise ValueError(f"curriculum must be a countdown_gym.data.curriculum.Curriculum, got {type(curriculum).__name__}")
            if self.preset is not None or self.config is not None or self.split is not None or self.problems is not None:
                raise ValueError("pass either curriculum=... or preset/config/split/problems, not both (the curriculum holds its problems)")
            source = _pool_source(curriculum.problems, resolve_rules(self.rules), self.max_numbers, curriculum.description)
            return dataclasses.replace(source, curriculum=curriculum)
        if self.problems is None:
            try:
                return _cached_source(self, tuple(type(getattr(self, f.name)) for f in dataclasses.fields(self)))
            except TypeError:  # an unhashable argument: resolve without the memo (and report it)
                pass
        return self._resolve()

    def _resolve(self) -> ProblemSource:
        preset, config, split, problems, max_numbers = self.preset, self.config, self.split, self.problems, self.max_numbers
        rules_value = resolve_rules(self.rules)
        if problems is not None:
            if preset is not None or config is not None or split is not None:
                raise ValueError("pass either problems=[...] or preset/config/split, not both")
            if isinstance(problems, (str, bytes, Problem, Mapping)) or not isinstance(problems, Iterable):
                raise ValueError(f"problems must be a list of problems, got {type(problems).__name__}")
            pool = [to_problem(p, rules_value) for p in problems]
            return _pool_source(pool, rules_value, max_numbers, f"fixed list of {len(pool)} problems")
        if config is not None:
            if preset is not None:
                raise ValueError("pass either preset or config, not both")
            if split not in (None, GENERATE):
                raise ValueError(f"split={split!r} needs a preset; a config always generates fresh problems")
            if not isinstance(config, GeneratorConfig):
                raise ValueError(f"config must be a GeneratorConfig, got {type(config).__name__}")
            return _generated_source(config, rules_value, max_numbers)
        preset = DEFAULT_PRESET if preset is None else preset
        if not isinstance(preset, str) or preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)} or pass config=GeneratorConfig(...)")
        split = "train" if split is None else split
        if split == GENERATE:
            return _generated_source(PRESETS[preset], rules_value, max_numbers)
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose one of {SPLITS + (GENERATE,)}")
        return _pool_source(load_split(preset, split), rules_value, max_numbers, f"{preset}/{split}", drop_solved=True)


@lru_cache(maxsize=64)
def _cached_source(spec: ProblemSpec, types: tuple[type, ...]) -> ProblemSource:
    """Sources without a fixed list are immutable values: resolve each one once per process (``types``, of the
    fields, keep ``max_numbers=6.0`` from finding the source of ``6``: equal values hash alike)."""
    return spec._resolve()


def make_problem_source(**arguments: Any) -> ProblemSource:
    """Resolve an environment's problem arguments given as keywords: ``ProblemSpec(**arguments).resolve()``."""
    return ProblemSpec(**arguments).resolve()


def _generated_source(config: GeneratorConfig, rules: Rules | None, max_numbers: int | None) -> ProblemSource:
    if rules is not None and rules != config.rules:
        config = config.replace(rules=rules)
    return ProblemSource(rules=config.rules, max_numbers=_slots(max_numbers, config.max_numbers), config=config,
                         description=f"generated from {config.name!r}")


class SourcedEnv(gym.Env[ObsType, ActType]):
    """What the single environments share: the problem source, ``render_mode`` and ``render()``."""

    def _set_source(self, problem_spec: ProblemSpec | None, problem_args: Mapping[str, Any], render_mode: str | None,
                    name: str) -> None:
        self.source: ProblemSource = ProblemSpec.of(problem_spec, problem_args, name).resolve()
        self.rules: Rules = self.source.rules
        self.render_mode = check_render_mode(render_mode, self.metadata, name)
        self._uniforms: list[float] = []
        self._uniforms_rng: np.random.Generator | None = None  # the generator ``_uniforms`` came from

    def _problem(self, options: Mapping[str, Any] | None) -> Problem:
        """The problem a reset plays: the ``problem`` option, else the next one from the source, seeded by
        ``np_random``: a pool is indexed with uniforms drawn 64 at a time (refilled at once when ``np_random`` is
        replaced, as every seeded reset does), so a seed draws the same problems in every environment."""
        problem, pool = self.source.reset_option(options), self.source.pool
        if problem is not None or pool is None or self.source.curriculum is not None:
            return problem or self.source.sample(self.np_random)
        rng = self.np_random
        if not self._uniforms or self._uniforms_rng is not rng:  # a new generator (e.g. env.np_random = ...) refills
            self._uniforms, self._uniforms_rng = rng.random(64).tolist(), rng
        return pool[int(self._uniforms.pop() * len(pool))]

    def _check_prompt(self, prompt: str, problem: Problem) -> str:
        """``prompt``; ``ValueError`` (before any state changes) when it is longer than ``max_prompt_chars``."""
        if len(prompt) > self.max_prompt_chars:
            raise ValueError(f"the prompt of {problem} has {len(prompt)} characters, more than "
                             f"max_prompt_chars={self.max_prompt_chars}")
        return prompt

    def _render_text(self) -> str:
        raise NotImplementedError

    def render(self) -> Any:
        """The episode as text (``"ansi"``), printed (``"human"``), or a frame (``"rgb_array"``, where drawn)."""
        if self.render_mode is None:
            modes = ", ".join(repr(m) for m in self.metadata["render_modes"])
            gym.logger.warn(f"render() called without a render_mode; pass render_mode= one of {modes}")
            return None
        if self.render_mode == "rgb_array":
            return self._render_frame()
        text = self._render_text()
        if self.render_mode == "ansi":
            return text
        print(text, end="" if text.endswith("\n") else "\n")
        return None
