"""TRL reward functions for Countdown: ``GRPOTrainer(reward_funcs=[sparse_reward, format_reward, ...])``, one per
``text`` reward variant of the registry (:func:`reward_function`). A completion is replayed once against its row's
problem (:func:`row_problems`); a multi-turn ``turn_replay``, or a tool environment's replay, is scored as it is
(:func:`completion_replays`). Nothing here imports ``torch``, ``transformers`` or ``trl``; guide:
``docs/integrations.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from countdown_gym.dataclass_cli.strict import strict_json
from countdown_gym.envs.problem_source import problem_from_columns, to_problem
from countdown_gym.envs.text import Replay, replay_completion
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import describe_value
from countdown_gym.game.verifier import completion_text as _verifier_text
from countdown_gym.rewards.terms import Scorer, format_score
from countdown_gym.rewards.variants import completion_variants, get_variant


@lru_cache(maxsize=4096)
def problem_from_json(text: str) -> Problem:
    """The :class:`Problem` stored in a dataset's ``problem`` column (JSON of ``Problem.to_dict``)."""
    try:
        return Problem.from_dict(strict_json(text))  # a key twice is refused, not read last-wins
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: a deep value described in an error
        raise ValueError(f"the dataset's 'problem' column must hold Problem.to_dict() JSON, got {text!r:.120}: {exc}") from None


def completion_text(completion: Any) -> str:
    """The text of a TRL completion (a string, or the last assistant message of chat messages); ``TypeError`` for
    anything else (a malformed batch must not score 0)."""
    text = _verifier_text(completion)
    if text is None:
        raise TypeError(f"a completion must be a string or a list of chat messages ({{'role': ..., 'content': ...}}), "
                        f"got {describe_value(completion)}")
    return text


@lru_cache(maxsize=8192)
def _replay(problem: Problem, text: str) -> Replay:
    return replay_completion(problem, text)


def replay(problem: Problem | str | Mapping[str, Any], completion: Any) -> Replay:
    """Replay one completion (cached); ``problem``: a :class:`Problem`, its ``to_dict()`` JSON, or a dict."""
    problem = problem_from_json(problem) if isinstance(problem, str) else to_problem(problem)
    return _replay(problem, completion_text(completion))


_TRL_KWARGS = frozenset({"trainer_state", "log_metric", "log_extra", "environments", "turn_replay"})
"""Keywords TRL adds to the dataset columns (left out of the error message's column list)."""


def row_problems(n: int, kwargs: Mapping[str, Any]) -> list[Problem]:
    """The problem of each of ``n`` rows from TRL's keyword columns: ``problem`` (JSON), else
    ``numbers`` + ``target`` (+ ``rules``). ``KeyError`` when neither is there, ``ValueError`` for a bad row."""
    problems = kwargs.get("problem")
    if problems is not None:
        if len(problems) != n:
            raise ValueError(f"got {n} completions but {len(problems)} problems")
        return [problem_from_json(p) if isinstance(p, str) else to_problem(p) for p in problems]
    numbers, targets = kwargs.get("numbers"), kwargs.get("target")
    if numbers is None or targets is None:
        raise KeyError(
            "the Countdown reward functions need the dataset columns 'numbers' and 'target' (optional 'rules'), "
            f"or 'problem' (Problem.to_dict() JSON); the batch has columns {sorted(k for k in kwargs if k not in _TRL_KWARGS)}"
        )
    rules = kwargs.get("rules")
    rules = [None] * n if rules is None or len(rules) == 0 else rules  # not `or`: a numpy column is ambiguous
    for name, column in (("numbers", numbers), ("target", targets), ("rules", rules)):
        if len(column) != n:
            raise ValueError(f"got {n} completions but {len(column)} values in the '{name}' column")
    return [problem_from_columns(nums, t, r) for nums, t, r in zip(numbers, targets, rules, strict=True)]


def completion_replays(completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """The replay of each completion: its ``turn_replay``, its environment's ``replay`` (TRL's tool loop), else its
    text replayed through CountdownText-v0 against its row's problem."""
    replays = kwargs.get("turn_replay")
    if replays is None and kwargs.get("environments") is not None:  # TRL's tool loop played them
        replays = [getattr(e, "replay", None) for e in kwargs["environments"]]
        if any(r is None for r in replays):
            raise ValueError("the Countdown reward functions score tool rollouts through their environments' replay: use "
                             "environment_factory=CountdownToolEnv (countdown_gym.integrations.trl_env)")
    if replays is not None:
        if len(replays) != len(completions):
            raise ValueError(f"got {len(completions)} completions but {len(replays)} turn replays")
        return list(replays)
    problems = row_problems(len(completions), kwargs)
    return [_replay(p, completion_text(c)) for p, c in zip(problems, completions, strict=True)]


def replay_stats(replays: Sequence[Any]) -> dict[str, float]:
    """Batch diagnostics: success, answer rate, fraction of completions with an invalid step, moves, fraction of
    multi-turn episodes stopped at a dead end (``stop_at_dead_end``; 0 otherwise)."""
    n = max(len(replays), 1)
    return {"replay/correct_frac": sum(r.verdict.correct for r in replays) / n,
            "replay/format_frac": sum(format_score(r) for r in replays) / n,
            "replay/invalid_frac": sum(r.invalid_steps > 0 for r in replays) / n,
            "replay/mean_moves": sum(len(r.transitions) for r in replays) / n,
            "replay/dead_end_frac": sum(getattr(r, "dead_end", False) for r in replays) / n}


def log_metrics(kwargs: Mapping[str, Any], stats: Mapping[str, float]) -> None:
    """Send ``stats`` to TRL's ``log_metric`` keyword when the trainer passes one."""
    log_metric = kwargs.get("log_metric")
    if callable(log_metric):
        for k, v in stats.items():
            log_metric(k, v)


class VariantReward:
    """The TRL reward function of one per-completion ``text`` variant of the registry; ``scorer``: what it
    ``needs`` (a :class:`~countdown_gym.rewards.terms.Scorer`). ``sparse`` also logs :func:`replay_stats`."""

    def __init__(self, variant: str, scorer: Scorer | None = None) -> None:
        self.variant = get_variant(variant, "text")
        if not self.variant.per_completion:
            raise ValueError(f"the reward {self.variant.name!r} is computed by its trainer object ({self.variant.needs}); "
                             "pass that object as the reward function")
        self.scorer = self.variant.need(scorer)
        self.__name__ = self.variant.name.replace("-", "_") + "_reward"  # TRL logs rewards/<__name__>/mean

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any) -> list[float]:
        replays = completion_replays(completions, kwargs)
        if self.variant.name == "sparse":
            log_metrics(kwargs, replay_stats(replays))
        return [self.variant.completion_score(r, self.scorer) for r in replays]


REWARD_FUNCTIONS: dict[str, Callable[..., list[float]]] = {n: VariantReward(n) for n in completion_variants({})}
"""The reward function of every ``text`` variant needing nothing passed in, by name (any: :func:`reward_function`)."""
sparse_reward = REWARD_FUNCTIONS["sparse"]
"""1.0 if the replayed final answer is correct, else 0.0; also logs the batch's replay stats."""
format_reward = REWARD_FUNCTIONS["format"]
"""1.0 if the final answer is tagged (``<answer>`` / ``<Solution>``) and parses, else 0.0."""
oracle_reward = REWARD_FUNCTIONS["oracle-reachable"]
"""Mean per-move reachability reward (+1 valid and target still reachable, -1 otherwise)."""
oracle_perfect_reward = REWARD_FUNCTIONS["oracle-perfect"]
"""The perfect-move oracle: mean over moves of 1 for a perfect move (valid, on a solution path), else 0."""


class CriticReward(VariantReward):
    """Mean of a critic's per-move scores (0 without moves); ``critic``: a
    :class:`~countdown_gym.rewards.terms.Scorer` (``score(states, targets)`` in ``[-1, 1]``)."""

    def __init__(self, critic: Scorer, variant: str = "critic") -> None:
        super().__init__(variant, critic)
        self.critic = critic


def reward_function(variant: str, given: Mapping[str, Any] | None = None) -> Callable[..., list[float]]:
    """The TRL reward function of the ``text`` variant ``variant``; ``given``: what variants need, by kind
    (``{"critic": ..., "clipo": ...}``): a scorer, or (CLIPO) the trainer's reward function, returned as it is."""
    v = get_variant(variant, "text")
    obj = v.need(v.scorer_in(given))
    if not v.per_completion:
        return obj
    return CriticReward(obj, v.name) if obj is not None else VariantReward(v.name)


__all__ = [
    "REWARD_FUNCTIONS", "CriticReward", "VariantReward", "completion_replays", "completion_text", "format_reward",
    "log_metrics", "oracle_perfect_reward", "oracle_reward", "problem_from_json", "replay", "replay_stats",
    "reward_function", "row_problems", "sparse_reward",
]
