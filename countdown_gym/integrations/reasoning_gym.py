"""The frozen splits, or problems of any number beyond them, as a reasoning-gym dataset: ``question`` /
``answer`` / ``metadata`` items and ``score_answer(answer, entry)`` judged by :func:`countdown_gym.verify`.

    ds = CountdownGymDataset(CountdownGymConfig(preset="tinyzero", split="test", size=100))
    ds.score_answer("(29-6)+(37-14)", ds[0])   # 1.0 or 0.0: the verifier's verdict
    big = CountdownGymDataset(CountdownGymConfig(split="generated", size=20_000, seed=1))   # beyond the splits

With reasoning-gym installed the class is a ``ProceduralDataset`` registered as ``"countdown_gym"`` with a curriculum
(:class:`CountdownGymCurriculum`); without it the class works alone. As reasoning-gym's ``countdown``, a wrong or
malformed answer scores 0.0.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from countdown_gym.data.difficulty import TIERS, check_tier, difficulty, split_labels, split_tiers, tier
from countdown_gym.data.fresh import GENERATED, fresh_config, fresh_problems
from countdown_gym.data.generator import PRESETS, GeneratorConfig
from countdown_gym.data.splits import SPLITS, load_split
from countdown_gym.envs.problem_source import problem_from_columns
from countdown_gym.game.problem import Problem
from countdown_gym.game.solver import solve
from countdown_gym.game.text_format import PROMPT_STYLES, chat_messages
from countdown_gym.game.verifier import verify

try:  # the real base class when reasoning-gym is installed, so isinstance checks and the registry accept it
    from reasoning_gym.coaching.attributes import RangeAttributeDefinition, ScalarAttributeDefinition
    from reasoning_gym.coaching.base_curriculum import BaseCurriculum as _CurriculumBase
    from reasoning_gym.dataset import ProceduralDataset as _Base
    from reasoning_gym.factory import DATASETS as _REGISTRY
    from reasoning_gym.factory import register_dataset as _register_dataset
except ImportError:  # pragma: no cover - exercised only without the bench extra
    _Base, _REGISTRY, _register_dataset, _CurriculumBase = object, None, None, object  # type: ignore[assignment,misc]

ALL_PRESETS = "all"
"""``preset="all"``: the chosen split of every preset, pooled (3 to 6 numbers)."""
RANGE_FIELDS: tuple[str, ...] = ("min_numbers", "max_numbers", "min_value", "max_value", "min_target", "max_target")
"""reasoning-gym's ``CountdownConfig`` range names, accepted here as filters of the split."""

DATASET_NAME = "countdown_gym"
"""The name the dataset is registered under in reasoning-gym, and ``metadata["source_dataset"]``."""


@dataclass
class CountdownGymConfig:
    """Which frozen split, how many problems, and the question's wording.

    ``size=None`` takes the whole split; ``seed=None`` keeps its frozen order, an int shuffles it (the first
    ``size`` are used). ``split``: ``train``, ``validation``, ``test``, or ``generated`` (``size`` problems beyond the
    frozen splits, from ``seed``, inside the range fields); ``None``: ``test``, or ``generated`` when ``size`` exceeds
    it. The question is the user message of :func:`~countdown_gym.game.text_format.chat_messages` in
    ``prompt_style`` (``tinyzero``: the answer in ``<answer>`` tags, as reasoning-gym extracts).
    """

    preset: str = "tinyzero"
    split: str | None = None
    prompt_style: str = "tinyzero"
    size: int | None = None
    seed: int | None = None
    tier: str | None = None
    """Keep only problems of this difficulty tier (``easy``, ``medium``, ``hard``)."""
    min_numbers: int | None = None
    max_numbers: int | None = None
    min_value: int | None = None
    max_value: int | None = None
    min_target: int | None = None
    max_target: int | None = None

    def validate(self) -> None:
        """``ValueError`` naming the bad field."""
        if self.preset not in PRESETS and self.preset != ALL_PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {sorted(PRESETS) + [ALL_PRESETS]}")
        if self.tier is not None:
            check_tier(self.tier)
        for name, least in [*((name, 1) for name in RANGE_FIELDS), ("size", 1), ("seed", 0)]:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                kind = "a positive" if least else "a non-negative"
                raise ValueError(f"{name} must be {kind} int or None, got {value!r}")
        for what in ("numbers", "value", "target"):
            lo, hi = getattr(self, f"min_{what}"), getattr(self, f"max_{what}")
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"min_{what}={lo} is above max_{what}={hi}")
        if self.split is not None and self.split not in (*SPLITS, GENERATED):
            raise ValueError(f"unknown split {self.split!r}; choose one of {[*SPLITS, GENERATED]} or None")
        if self.split == GENERATED and self.size is None:
            raise ValueError("split='generated' needs a size (the number of problems to generate)")
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"unknown prompt_style {self.prompt_style!r}; choose one of {list(PROMPT_STYLES)}")


def question(problem: Problem, prompt_style: str = "tinyzero") -> str:
    """The question text of ``problem``: the user message of its chat prompt in ``prompt_style``."""
    return next(m["content"] for m in chat_messages(problem, prompt_style) if m["role"] == "user").strip()


@lru_cache(maxsize=100_000)
def _problem(numbers: tuple[tuple[type, Any], ...], target: tuple[type, Any], rules: Any) -> Problem:
    """Cached by each value with its type: 3.0 is no 3, True no 1 (equal, same hash), so each is refused as uncached."""
    rules = {k: v for k, _, v in rules} if isinstance(rules, frozenset) else rules
    return problem_from_columns([x for _, x in numbers], target[1], rules)


def entry_problem(entry: Mapping[str, Any]) -> Problem:
    """The :class:`Problem` an entry's ``metadata`` describes (``numbers``, ``target``, ``rules``); cached.
    ``ValueError`` for an entry without them (an entry of another dataset, or a hand-made dict)."""
    meta = entry.get("metadata") if isinstance(entry, Mapping) else None
    if not isinstance(meta, Mapping) or "numbers" not in meta or "target" not in meta:
        raise ValueError(f"a countdown_gym entry needs metadata with 'numbers' and 'target', got {entry!r:.160}")
    numbers, target, rules = meta["numbers"], meta["target"], meta.get("rules")
    if isinstance(numbers, (list, tuple)):  # not a set or a dict: a tuple of its members is no problem it states
        try:
            key = (tuple((type(x), x) for x in numbers), (type(target), target),
                   frozenset((k, type(v), v) for k, v in rules.items()) if isinstance(rules, Mapping) else rules)
            hash(key)
        except TypeError:  # unhashable: not cached
            pass
        else:
            return _problem(*key)
    return problem_from_columns(numbers, target, rules)


def score_answer(answer: str | None, entry: Mapping[str, Any]) -> float:
    """1.0 if ``answer`` (an expression, or a completion with ``<answer>`` / ``<Solution>`` tags) solves the
    entry's problem under its rules, else 0.0 (``None`` or an empty answer included)."""
    if answer is None:
        return 0.0
    return verify(entry_problem(entry), answer).reward


class CountdownGymDataset(_Base):  # type: ignore[misc,valid-type]
    """A frozen split of countdown-gym with reasoning-gym's dataset interface.

    ``ds[i]`` is ``{"question", "answer", "metadata"}``: the question in the config's prompt style, a
    reference solution (the first of :func:`~countdown_gym.solve`), and metadata with ``numbers``,
    ``target``, ``rules`` (a dict), ``preset``, ``split``, ``id`` and the solver's ``difficulty``
    figures when the split has them. ``problems=`` replaces the split by your own problems. ``seed``: the config's,
    or (``seed=None``) drawn at random as reasoning-gym's datasets do, for its ``ReseedingDataset`` to count from.
    """

    def __init__(self, config: CountdownGymConfig | None = None, problems: Sequence[Problem] | None = None) -> None:
        config = config if config is not None else CountdownGymConfig()
        if not isinstance(config, CountdownGymConfig):
            raise TypeError(f"config must be a CountdownGymConfig, got {type(config).__name__}")
        config.validate()
        self.config = config
        self.seed = config.seed if config.seed is not None else random.Random().randint(0, 2**32)  # as reasoning-gym's
        self._labels: list[tuple[Any, str | None]] = []
        self.split = config.split or "test"
        if problems is not None:
            if not isinstance(problems, Sequence) or not problems or not all(isinstance(p, Problem) for p in problems):
                raise ValueError("problems must be a non-empty sequence of Problem")
            pool = [(p, None, None) for p in problems]  # labels computed when an entry is read
        else:
            presets = sorted(PRESETS) if config.preset == ALL_PRESETS else [config.preset]
            if config.split is None and config.size is not None and config.size > sum(
                    len(load_split(p, "test")) for p in presets):
                self.split = GENERATED
            if self.split == GENERATED:
                self.problems: Sequence[Problem] = _GeneratedProblems(config, presets)
                self.size = len(self.problems)
                return
            pool = [item for preset in presets for item in zip(load_split(preset, self.split),
                                                               split_labels(preset, self.split),
                                                               split_tiers(preset, self.split), strict=True)]
        pool = [item for item in pool if _keep(config, item)]
        if not pool:
            raise ValueError(f"no {config.preset}/{self.split} problem matches {_filters(config)}")
        if config.seed is not None:
            random.Random(config.seed).shuffle(pool)
        if config.size is not None:
            if config.size > len(pool):
                raise ValueError(f"size={config.size} but {config.preset}/{self.split} has {len(pool)} problems"
                                 + (f" matching {_filters(config)}" if _filters(config) else "")
                                 + f"; split={GENERATED!r} generates any number beyond the frozen splits")
            pool = pool[: config.size]
        self.size = len(pool)
        self.problems = [p for p, _, _ in pool]
        self._labels = [(d, t) for _, d, t in pool]

    @property
    def category(self) -> str:
        return "games"

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(self.size))

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"index must be an int, got {type(idx).__name__}")
        if not -self.size <= idx < self.size:
            raise IndexError(f"index {idx} out of range for a dataset of {self.size} problems")
        idx %= self.size
        p = self.problems[idx]
        labels, tier_name = self._labels[idx] if self._labels else (None, None)
        if labels is None:
            labels, tier_name = difficulty(p), tier(p)
        solutions = solve(p, limit=1)
        metadata: dict[str, Any] = {
            "source_dataset": DATASET_NAME,
            "source_index": idx,
            "numbers": list(p.numbers),
            "target": p.target,
            "rules": p.rules.to_dict(),
            "preset": p.preset or self.config.preset,
            "split": self.split,
            "id": p.id,
            "difficulty": {"tier": tier_name, "numbers": len(p.numbers),
                           **{k: v for k, v in labels.to_dict().items() if k != "solution"}},
        }
        return {"question": question(p, self.config.prompt_style), "answer": solutions[0] if solutions else None,
                "metadata": metadata}

    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        return score_answer(answer, entry)


class _GeneratedProblems(Sequence[Problem]):
    """``config.size`` problems generated beyond the frozen splits, each drawn when first read: the presets' streams
    (:func:`~countdown_gym.data.fresh.fresh_problems` with ``config.seed``, 0 when None) taken in turn, inside the
    config's ranges, of its tier when it names one."""

    def __init__(self, config: CountdownGymConfig, presets: list[str]) -> None:
        seed = config.seed or 0
        streams = {}
        for preset in presets:
            generator = _narrowed(fresh_config(preset), config)
            if generator is not None:
                streams[preset] = _kept(config, fresh_problems(preset, seed, generator))
        if not streams:
            raise ValueError(f"no {config.preset} problem can be generated within {_filters(config)}")
        self._config = config
        self._streams = list(streams.values())
        self._size = config.size or 0
        self._drawn: list[Problem] = []

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return [self[i] for i in range(*idx.indices(self._size))]
        if not -self._size <= idx < self._size:
            raise IndexError(f"index {idx} out of range for {self._size} generated problems")
        idx %= self._size
        while len(self._drawn) <= idx:
            problem = next(self._streams[len(self._drawn) % len(self._streams)], None)
            if problem is None:
                raise ValueError(f"no {self._config.preset} problem within {_filters(self._config)} among "
                                 f"{MAX_MISSES} generated in a row (a tier its number counts never reach?)")
            self._drawn.append(problem)
        return self._drawn[idx]


MAX_MISSES = 2000
"""Generated problems in a row outside the config's tier or ranges after which the generated split gives up."""


def _kept(config: CountdownGymConfig, stream: Iterator[Problem]) -> Iterator[Problem]:
    """The problems of ``stream`` the config keeps; ends after :data:`MAX_MISSES` in a row it does not."""
    misses = 0
    for p in stream:
        if _keep(config, (p, None, None)):
            misses = 0
            yield p
        elif (misses := misses + 1) >= MAX_MISSES:
            return


def _narrowed(generator: GeneratorConfig, config: CountdownGymConfig) -> GeneratorConfig | None:
    """``generator`` with its ranges narrowed by the config's range fields; None when nothing is left."""
    changes = {}
    for name in RANGE_FIELDS:
        value = getattr(config, name)
        if value is not None:
            own = getattr(generator, name)
            changes[name] = max(own, value) if name.startswith("min_") else min(own, value)
    try:
        return generator.replace(**changes)
    except ValueError:  # empty ranges, or no target the rules can reach
        return None


def _keep(config: CountdownGymConfig, item: tuple[Problem, Any, str | None]) -> bool:
    p, _, tier_name = item
    if config.tier is not None and (tier_name or tier(p)) != config.tier:
        return False
    checks = ((len(p.numbers), "numbers"), (min(p.numbers), "value"), (max(p.numbers), "value"), (p.target, "target"))
    for value, what in checks:
        lo, hi = getattr(config, f"min_{what}"), getattr(config, f"max_{what}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return False
    return True


def _filters(config: CountdownGymConfig) -> dict[str, Any]:
    return {k: getattr(config, k) for k in ("tier", *RANGE_FIELDS) if getattr(config, k) is not None}


class CountdownGymCurriculum(_CurriculumBase):  # type: ignore[misc,valid-type]
    """reasoning-gym's curriculum for ``countdown_gym``: a ``tier`` level (easy, medium, hard) and a ``numbers``
    range level over the presets' number counts, 3 to 6 (``min_numbers`` / ``max_numbers``), on the ``train`` split
    of every preset pooled (``preset="all"``) unless ``defaults`` say otherwise. Needs reasoning-gym."""

    def __init__(self) -> None:
        if _register_dataset is None:
            raise ImportError("CountdownGymCurriculum needs reasoning-gym: pip install 'countdown-gym[reasoning-gym]'")
        super().__init__(CountdownGymCurriculum.__name__, CountdownGymConfig)
        self._define_attributes(
            ScalarAttributeDefinition(name="tier", field_name="tier", levels=list(TIERS),
                                      description="Difficulty tier of the problems (solver search nodes)"),
            RangeAttributeDefinition(name="numbers", levels=[3, 4, 5, 6], description="Number of source numbers",
                                     lower_field_name="min_numbers", upper_field_name="max_numbers",
                                     ensure_interval=True),
        )

    def generate_configuration(self, defaults: dict[str, Any] | None = None, context: Any = None) -> CountdownGymConfig:
        return super().generate_configuration({"preset": ALL_PRESETS, "split": "train", **(defaults or {})}, context)


def register() -> bool:
    """Register the dataset and its curriculum with reasoning-gym as :data:`DATASET_NAME` (done on import;
    idempotent). False when reasoning-gym is not installed."""
    if _register_dataset is None:
        return False
    if DATASET_NAME not in _REGISTRY:
        _register_dataset(DATASET_NAME, CountdownGymDataset, CountdownGymConfig, CountdownGymCurriculum)
    return True


register()

__all__ = ["ALL_PRESETS", "DATASET_NAME", "RANGE_FIELDS", "CountdownGymConfig", "CountdownGymCurriculum", "CountdownGymDataset", "entry_problem", "question", "register",
           "score_answer"]
