"""TRL ``environment_factory`` integration: Countdown as tools for tool-calling chat models
(``trl.GRPOTrainer(environment_factory=CountdownToolEnv, ...)``): one :class:`CountdownToolEnv` per rollout, played
through the multi-turn game, its transition records left for the reward functions below. Guide:
``docs/trl_multiturn.md``. Nothing here imports ``torch``, ``transformers`` or ``trl``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import numpy as np

from countdown_gym.data.curriculum import Curriculum
from countdown_gym.data.splits import SPLITS, load_split
from countdown_gym.envs.problem_source import (
    ProblemLike,
    ProblemSource,
    check_playable,
    make_problem_source,
    problem_from_columns,
    to_problem,
)
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, describe_value, format_number
from countdown_gym.game.turn_format import (
    GIVE_UP,
    TOOL_ERRORS,
    TOOL_NAMES,
    UNDO,
    episode_over_reply,
    no_episode_reply,
    numbers_reply,
    tool_doc,
    tool_prompt,
    tool_turn,
)
from countdown_gym.game.turn_game import (
    DEFAULT_MAX_TURNS,
    TurnEpisode,
    TurnReplay,
    TurnResult,
    check_budget,
    turn_replay,
)
from countdown_gym.integrations.trl import VariantReward
from countdown_gym.integrations.verl import ground_truth
from countdown_gym.rewards.terms import Scorer

Op = Literal["+", "-", "*", "/"]
"""The operations of :meth:`CountdownToolEnv.move` (an ``enum`` in every derived JSON schema)."""


def _problem_from_row(row: Mapping[str, Any]) -> Problem | None:
    """The puzzle of a dataset row (``numbers``, ``target``, optional ``rules``); ``None`` for a row with neither
    (TRL's placeholder rows when ``train_dataset`` is omitted); ``ValueError`` for a row with only one."""
    missing = [k for k in ("numbers", "target") if k not in row or row[k] is None]
    if len(missing) == 2:
        return None
    if missing:
        raise ValueError(f"a Countdown dataset row needs 'numbers' and 'target' columns (make_dataset builds them); "
                         f"missing {missing} in a row with columns {sorted(row)}")
    problem = problem_from_columns(row["numbers"], row["target"], row.get("rules"))
    check_playable(problem, len(problem.numbers))
    return problem


def process_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """``(rank, world_size)`` of this process: the arguments, else the launcher's ``RANK`` and ``WORLD_SIZE`` (``(0,
    1)`` without a launcher); ``ValueError`` for a rank outside ``[0, world_size)``."""
    import os

    def read(value: int | None, name: str, default: int) -> int:
        if value is None:
            text = os.environ.get(name, "").strip()
            try:
                return int(text) if text else default
            except ValueError:
                raise ValueError(f"the environment variable {name} must be an int, got {text!r}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name.lower()} must be an int, got {describe_value(value)}")
        return value

    r, w = read(rank, "RANK", 0), read(world_size, "WORLD_SIZE", 1)
    if w < 1 or not 0 <= r < w:
        raise ValueError(f"need 0 <= rank < world_size, got rank {format_number(r)} and world_size {format_number(w)} "
                         "(RANK and WORLD_SIZE: a launcher sets both; set WORLD_SIZE to the number of processes)")
    return r, w


class ProblemDraw:
    """Problems for environments that draw their own (no ``train_dataset``): a frozen split (``preset``, ``split``,
    optionally one ``tier``) or a :class:`~countdown_gym.data.curriculum.Curriculum` (``"adaptive"``: a new one).

    :meth:`next` hands out each problem ``num_generations`` times in a row (one per GRPO group); environments built
    alike share one draw (:meth:`shared`); :meth:`episode_end` reports back to the source. Each process (``rank`` of
    ``world_size``, :func:`process_rank`) walks the split in epochs, each a permutation seeded by ``(seed, epoch)``
    of which it takes every ``world_size``-th problem from ``rank``: no two processes, and no process twice, draw
    one problem within an epoch. A curriculum draws with ``(seed, rank)``; ``seed=None``: unseeded.
    """

    def __init__(self, preset: str | None = None, split: str = "train", tier: str | None = None,
                 curriculum: Curriculum | str | None = None, seed: int | None = 0, num_generations: int = 1,
                 rank: int | None = None, world_size: int | None = None) -> None:
        num_generations = check_budget("num_generations", num_generations, allow_none=False)  # GRPOConfig's
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be an int >= 0 or None, got {seed!r}")
        self.rank, self.world_size = process_rank(rank, world_size)
        self.source = self._source(preset, split, tier, curriculum)
        self.seed = int(np.random.SeedSequence().entropy) if seed is None else seed
        self.rng = np.random.default_rng([self.seed, self.rank])
        if self.source.curriculum is None and len(self.source.pool) < self.world_size:
            raise ValueError(f"{len(self.source.pool)} problems cannot give each of {self.world_size} processes its own")
        self.num_generations = num_generations
        self.draws = 0
        self.epoch = 0
        self._order: list[int] = []
        self._current: Problem | None = None

    @staticmethod
    def _source(preset: str | None, split: str, tier: str | None, curriculum: Curriculum | str | None) -> ProblemSource:
        if curriculum is not None:
            if tier is not None:
                raise ValueError("pass either tier= or curriculum=, not both (a curriculum picks the tiers)")
            if curriculum == "adaptive":
                curriculum = Curriculum(preset=preset or "tinyzero", split=split, mode="adaptive")
            elif not isinstance(curriculum, Curriculum):
                raise ValueError(f"curriculum must be a countdown_gym.data.curriculum.Curriculum or 'adaptive', got {curriculum!r}")
            return make_problem_source(curriculum=curriculum)
        preset = preset or "tinyzero"
        if split not in SPLITS:
            raise ValueError(f"split must be a frozen split, one of {list(SPLITS)} (or pass curriculum=), got {split!r}")
        if tier is None:
            return make_problem_source(preset=preset, split=split)
        return make_problem_source(problems=load_split(preset, split, tier))

    _shared: weakref.WeakValueDictionary[tuple, ProblemDraw] = weakref.WeakValueDictionary()

    @classmethod
    def shared(cls, preset: str | None, split: str, tier: str | None, curriculum: Curriculum | str | None,
               seed: int | None, num_generations: int, rank: int | None = None, world_size: int | None = None) -> ProblemDraw:
        """The draw of every live environment built with these arguments (a new one once none is left)."""
        key = (preset, split, tier, id(curriculum) if isinstance(curriculum, Curriculum) else curriculum, seed,
               num_generations, *process_rank(rank, world_size))
        try:
            draw = cls._shared.get(key)
        except TypeError:  # an unhashable argument (preset=["tinyzero"]): the constructor's checks name it
            return cls(preset, split, tier, curriculum, seed, num_generations, rank, world_size)
        if draw is None:
            draw = cls._shared[key] = cls(preset, split, tier, curriculum, seed, num_generations, rank, world_size)
        return draw

    def _draw(self) -> Problem:
        """The next problem of this process: its share of the epoch's permutation, or the curriculum's pick."""
        if self.source.curriculum is not None:
            return self.source.sample(self.rng)
        if not self._order:
            permutation = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.source.pool))
            self._order = permutation[self.rank::self.world_size].tolist()[::-1]  # popped from the end
            self.epoch += 1
        return self.source.pool[self._order.pop()]

    def next(self) -> Problem:
        """The problem of the next rollout."""
        if self.draws % self.num_generations == 0:
            self._current = self._draw()
        self.draws += 1
        return self._current

    def episode_end(self, problem: Problem, success: bool) -> None:
        self.source.episode_end(problem, success)


class CountdownToolEnv:
    """One Countdown episode per rollout, played through tool calls (TRL ``environment_factory``).

    The public methods are the tools (schemas from their type hints and docstrings,
    :func:`~countdown_gym.game.turn_format.tool_doc`); each returns the game's reply line and never raises: a bad
    call is an answer the model reads. ``move``, ``undo`` and ``give_up`` each use one of ``max_turns`` turns;
    ``numbers`` is free. After :meth:`reset`: ``problem``, ``episode`` (the :class:`TurnEpisode`), ``transitions``
    (every record, ``docs/DESIGN.md`` shape), ``calls`` (``(tool, turn text or "", reply)`` per call).

    A row with ``numbers`` and ``target`` is played as it is; for rows without them, ``preset`` (default
    ``"tinyzero"``), ``split`` (``"train"``), ``tier`` or ``curriculum``, ``seed``, ``num_generations``
    (GRPOConfig's), ``rank`` and ``world_size`` choose the problems (a shared :class:`ProblemDraw`), e.g.
    ``environment_factory=functools.partial(CountdownToolEnv, preset="tinyzero", num_generations=8)``.

    Example:
        >>> env = CountdownToolEnv()
        >>> env.reset(numbers=[6, 2, 5, 3], target=8).startswith("Countdown: reach the target 8 from the numbers [6,2,5,3].")
        True
        >>> env.move(6, "-", 2), env.move(5, "-", 3), env.move(4, "*", 2)
        ('= 4 [5,3,4]', '= 2 [4,2]', '= 8 [8] solved')
        >>> env.get_reward()
        1.0
    """

    def __init__(self, max_turns: int = DEFAULT_MAX_TURNS, max_turn_chars: int = 200, *, preset: str | None = None,
                 split: str | None = None, tier: str | None = None, curriculum: Curriculum | str | None = None,
                 seed: int | None = None, num_generations: int | None = None, rank: int | None = None,
                 world_size: int | None = None) -> None:
        check_budget("max_turns", max_turns, allow_none=False)
        check_budget("max_turn_chars", max_turn_chars, allow_none=False)
        self.max_turns = max_turns
        self.max_turn_chars = max_turn_chars
        draws = (preset, split, tier, curriculum, seed, num_generations)
        self.draw: ProblemDraw | None = None
        if any(x is not None for x in draws):
            self.draw = ProblemDraw.shared(preset, split or "train", tier, curriculum, 0 if seed is None else seed,
                                           1 if num_generations is None else num_generations, rank, world_size)
        self._reported = True
        self.problem: Problem | None = None
        self.episode: TurnEpisode | None = None
        self.transitions: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str, str]] = []
        self._results: list[TurnResult] = []

    def reset(self, **row: Any) -> str:
        """Start the episode of a dataset row (``numbers``, ``target``, optional ``rules``: JSON, dict, struct or
        preset name; other columns such as ``prompt`` are ignored), or of the next drawn problem for a row without
        them, and return the puzzle text."""
        self._report()
        problem = _problem_from_row(row)
        if problem is None:
            if self.draw is None:
                raise ValueError(
                    f"a Countdown dataset row needs 'numbers' and 'target' columns (make_dataset builds them), got a row "
                    f"with columns {sorted(row)}; without a dataset, build the environment with the problems to draw: "
                    "functools.partial(CountdownToolEnv, preset='tinyzero', num_generations=<GRPOConfig's>)"
                )
            problem = self.draw.next()
        self.problem = problem
        self._reported = False
        self.episode = TurnEpisode(problem, max_turns=self.max_turns, max_turn_chars=self.max_turn_chars)
        self.transitions, self.calls, self._results = [], [], []
        return tool_prompt(problem, self.max_turns)

    def _refusal(self) -> str | None:
        if self.episode is None:
            return no_episode_reply()
        if self.episode.done:
            ending = "solved" if self.solved else ("gave_up" if self.episode.terminated else "turn_limit")
            return episode_over_reply(self.episode.state, ending)
        return None

    def _play(self, tool: str, text: str) -> str:
        refusal = self._refusal()
        if refusal is not None:
            self.calls.append((tool, text, refusal))
            return refusal
        res = self.episode.play(text)
        self._results.append(res)
        self.transitions += res.transitions
        self.calls.append((tool, text, res.reply))
        return res.reply

    @tool_doc("move")
    def move(self, a: int | str, op: Op, b: int | str) -> str:
        return self._play("move", tool_turn("move", a, op, b))

    @tool_doc("undo")
    def undo(self) -> str:
        return self._play("undo", UNDO)

    @tool_doc("give_up")
    def give_up(self) -> str:
        return self._play("give_up", GIVE_UP)

    @tool_doc("numbers")
    def numbers(self) -> str:
        reply = self._refusal() or numbers_reply(self.episode.state, self.problem.target,
                                                 self.max_turns - self.episode.turns)
        self.calls.append(("numbers", "", reply))
        return reply

    @property
    def solved(self) -> bool:
        """Whether the episode ended with the target reached (the verifier's verdict of the moves played)."""
        ep = self.episode
        return ep is not None and ep.terminated and ep.verdict is not None and ep.verdict.correct

    @property
    def replay(self) -> TurnReplay | None:
        """The episode as the game's :class:`~countdown_gym.game.turn_game.TurnReplay` (verdict, transitions, refused
        turns): what every reward variant of the registry scores (``None`` before :meth:`reset`)."""
        return None if self.episode is None else turn_replay(self.episode, self._results)

    @property
    def state(self) -> tuple[Number, ...] | None:
        """The numbers in play (``None`` before :meth:`reset`)."""
        return None if self.episode is None else self.episode.state

    def get_reward(self) -> float:
        """The verifier's reward of the episode: 1.0 when solved, else 0.0 (also reported to a :class:`ProblemDraw`)."""
        self._report()
        return 1.0 if self.solved else 0.0

    def _report(self) -> None:
        if self.draw is not None and not self._reported and self.problem is not None:
            self.draw.episode_end(self.problem, self.solved)
        self._reported = True


def tool_functions(env: CountdownToolEnv | None = None) -> dict[str, Callable[..., str]]:
    """The typed tool functions (``env``'s bound methods, by name): the one source of every adapter's tool schemas."""
    env = CountdownToolEnv() if env is None else env
    return {name: getattr(env, name) for name in TOOL_NAMES}


def tool_json_schema(name: str) -> dict[str, Any]:
    """The OpenAI function schema of one tool, as TRL derives it (``transformers.utils.get_json_schema`` of the typed
    function), without the ``return`` entry an OpenAI schema has no field for. Needs ``transformers``."""
    if name not in TOOL_NAMES:
        raise ValueError(f"unknown Countdown tool {name!r}; choose one of {list(TOOL_NAMES)}")
    try:
        from transformers.utils import get_json_schema
    except ImportError:
        raise ImportError("the Countdown tools' JSON schemas are derived with transformers.utils.get_json_schema, as "
                          "TRL does: pip install 'countdown-gym[llm]' (or the verl extra)") from None
    schema = get_json_schema(tool_functions()[name])
    return {"type": "function", "function": {k: v for k, v in schema["function"].items() if k != "return"}}


def variant_reward(variant: str, scorer: Scorer | None = None) -> Callable[..., list[float | None]]:
    """A TRL reward function: the registry's ``text`` variant ``variant`` of each rollout's
    :attr:`CountdownToolEnv.replay` (``scorer``: what the variant needs, e.g. ``critics.load_critic()``). Rollouts
    of other environments get ``None``. Named like the variant with ``_`` for ``-`` in TRL's logs.
    """
    scored = VariantReward(variant, scorer)  # the registry's checks: a per-completion variant, what it needs

    def reward(completions: list[Any], environments: list[Any] | None = None, **kwargs: Any) -> list[float | None]:
        if environments is None:
            raise ValueError(f"the reward function {reward.__name__!r} reads the rollouts' environments: use it with "
                             "GRPOTrainer(environment_factory=CountdownToolEnv, ...), which passes them as `environments`")
        return [scored.variant.completion_score(e.replay, scored.scorer)
                if isinstance(e, CountdownToolEnv) and e.episode is not None else None for e in environments]

    reward.__name__ = reward.__qualname__ = scored.variant.name.replace("-", "_")
    return reward


def oracle_reward(mode: str = "perfect") -> Callable[..., list[float | None]]:
    """:func:`variant_reward` of ``oracle-<mode>`` (``"perfect"`` or ``"reachable"``), named ``oracle_<mode>``."""
    return variant_reward(f"oracle-{mode}")


def critic_reward(critic: Scorer, name: str = "critic") -> Callable[..., list[float | None]]:
    """:func:`variant_reward` of ``critic`` with ``critic`` as the scorer, named ``name``."""
    reward = variant_reward("critic", critic)
    reward.__name__ = reward.__qualname__ = name
    return reward


def dataset_row(problem: ProblemLike) -> dict[str, Any]:
    """One dataset row: an empty-content user ``prompt`` (``reset`` appends the puzzle), ``numbers``,
    ``target`` and ``rules`` (JSON)."""
    p = to_problem(problem)
    check_playable(p, len(p.numbers))
    return {"prompt": [{"role": "user", "content": ""}], **ground_truth(p)}


def make_dataset(problems: Iterable[ProblemLike]) -> Any:
    """A ``datasets.Dataset`` of :func:`dataset_row` rows of ``problems`` (Problems, pairs or dicts)."""
    from datasets import Dataset

    rows = [dataset_row(p) for p in problems]
    if not rows:
        raise ValueError("make_dataset needs at least one problem")
    if big := [r["target"] for r in rows if abs(r["target"]) >= 2**63]:  # else pyarrow's OverflowError
        raise ValueError(f"a dataset's target column is int64: |target| must be < 2**63, got {format_number(big[0])}")
    return Dataset.from_list(rows)


__all__ = [
    "TOOL_ERRORS", "TOOL_NAMES", "CountdownToolEnv", "Op", "ProblemDraw", "critic_reward", "dataset_row", "make_dataset",
    "oracle_reward", "process_rank", "tool_functions", "tool_json_schema", "tool_prompt", "variant_reward",
]
