"""verl adapter: a ``compute_score`` reward function (verl's ``custom_reward_function``, ``docs/llm_grpo.md``) for
the parquet files of ``countdown-gym export --format verl``, whose ``reward_model.ground_truth`` is
:func:`ground_truth`. The completion is replayed through CountdownText-v0, so the score is the TRL baseline's; the
``critic`` term needs a loaded critic (``critics/verl_reward.py``: :func:`with_scorers`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from countdown_gym.data.problem_files import row_problem
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import check_finite
from countdown_gym.rewards.terms import Scorer, check_scorer_fits
from countdown_gym.rewards.variants import REWARD_VARIANTS, completion_variants, get_variant, given_scorers, score_terms

DATA_SOURCE_PREFIX = "countdown_gym/"


def ground_truth(problem: Problem) -> dict[str, Any]:
    """The ``reward_model.ground_truth`` of ``problem``: numbers, target and its rules (JSON)."""
    return {"numbers": [int(x) for x in problem.numbers], "target": int(problem.target),
            "rules": json.dumps(problem.rules.to_dict(), separators=(",", ":"), sort_keys=True)}


def verl_row(problem: Problem, preset: str, split: str, index: int, prompt: list[dict[str, str]],
             agent_name: str | None = None, **extra_info: Any) -> dict[str, Any]:
    """A row of verl's parquet prompt format (``countdown-gym export --format verl``); ``extra_info`` adds to its own."""
    return {"data_source": DATA_SOURCE_PREFIX + preset, **({"agent_name": agent_name} if agent_name else {}),
            "prompt": prompt, "ability": "math", "reward_model": {"style": "rule", "ground_truth": ground_truth(problem)},
            "extra_info": {"split": split, "index": index, "id": problem.id or "", "preset": preset, **extra_info}}


def problem_from_ground_truth(gt: Any, data_source: Any = None) -> Problem:
    """Decode :func:`ground_truth` (a dict, or its JSON as str or bytes; TinyZero's ``nums`` too) as ``load_problems``
    reads a verl row (:func:`~countdown_gym.data.problem_files.row_problem`); clear ``ValueError`` otherwise. Without
    ``rules`` the row's ``data_source`` picks them (:func:`~countdown_gym.data.problem_files.verl_rules`)."""
    try:
        return row_problem({"data_source": data_source, "reward_model": {"ground_truth": gt}})
    except (TypeError, KeyError, RecursionError) as exc:
        raise ValueError(f"bad ground_truth: {str(exc)[:200]}") from None


def dense_terms(dense: Any) -> list[str]:
    """The reward variants of verl's ``dense`` kwarg (a list or a comma/plus-separated string): per-completion
    ``text`` variants of the registry (``format``, ``oracle-reachable``, ...; ``sparse`` is always there)."""
    if dense is None:
        return []
    if isinstance(dense, str):
        dense = [d for d in dense.replace("+", ",").split(",") if d.strip()]
    if hasattr(dense, "tolist"):
        dense = dense.tolist()
    if not isinstance(dense, Iterable):
        raise ValueError(f"dense must be a list of reward variants or a comma-separated string, got {dense!r:.80}")
    names: list[str] = []
    for entry in (str(d).strip() for d in dense):
        try:
            variant = get_variant(entry, "text")
        except ValueError:
            raise ValueError(f"unknown dense term {entry!r}; verl's dense terms: {completion_variants(but=('sparse',))}") from None
        if not variant.per_completion:
            raise ValueError(f"reward variant {entry!r} is not a per-completion score (it needs the trainer); "
                             f"verl's dense terms: {completion_variants(but=('sparse',))}")
        if variant.name != "sparse" and variant.name not in names:
            names.append(variant.name)
    return names


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None,
                  *, dense: Sequence[str] | str | None = None, weights: Mapping[str, float] | None = None,
                  critic: Scorer | None = None, scorers: Mapping[str, Scorer] | None = None,
                  **kwargs: Any) -> float | dict[str, float]:
    """verl reward: the sparse verifier reward, or a dict with ``score`` and the dense terms.

    Args:
        solution_str: The decoded response (no prompt).
        ground_truth: :func:`ground_truth` of the problem (dict or JSON string).
        dense: Extra terms, ``text`` reward variants (:func:`dense_terms`), e.g. ``"format,oracle-reachable"``.
        weights: Term weights overriding the registry's (each variant's ``weight``): finite numbers, for ``sparse``
            or a ``dense`` term (given, the answer is the dict).
        critic: The loaded critic (a :class:`~countdown_gym.rewards.terms.Scorer`) of the ``critic`` term; short for
            ``scorers={"critic": critic}``.
        scorers: What the dense variants need, by kind (``critic``, ``text_critic``).
        data_source: The row's; it picks the rules of a ground truth without them (:func:`problem_from_ground_truth`).
        extra_info, **kwargs: What else verl passes; not used.

    Example:
        >>> gt = {"numbers": [6, 2, 5, 3], "target": 8}
        >>> compute_score("countdown_gym/longproc-0.5k", "<answer>(6 - 2) * (5 - 3)</answer>", gt)
        1.0
    """
    from countdown_gym.envs.text import replay_completion

    problem = problem_from_ground_truth(ground_truth, data_source)
    if not isinstance(solution_str, str):
        raise ValueError(f"solution_str must be a string, got {type(solution_str).__name__}")
    terms = dense_terms(dense)
    given = given_scorers(critic, scorers)
    for name in terms:
        variant = REWARD_VARIANTS[name]
        try:
            scorer = variant.need(variant.scorer_in(given))
        except ValueError as exc:
            raise ValueError(f"dense={name}: {exc}; point verl's custom_reward_function.path at critics/verl_reward.py "
                             "(it loads the shipped critic), or pass critic=... / scorers=...") from None
        if scorer is not None:
            check_scorer_fits(scorer, problem.numbers, f"dense={name}", "this problem has")
    replay = replay_completion(problem, solution_str)
    scores = score_terms(replay, ["sparse", *terms], scorers=given)
    if not terms and not weights:
        return scores["sparse"]
    w = {name: REWARD_VARIANTS[name].weight for name in scores}
    if weights is not None and not isinstance(weights, Mapping):
        raise ValueError(f"weights must be a mapping of term -> weight, got {type(weights).__name__}")
    for key, value in (weights or {}).items():
        name = get_variant(key).name
        if name not in w:
            raise ValueError(f"weights[{key!r}] is not a scored term {sorted(w)}")
        w[name] = check_finite(value, f"weights[{key!r}]")
    return {"score": float(sum(w[name] * value for name, value in scores.items())), **scores,
            "invalid_steps": float(replay.invalid_steps), "moves": float(len(replay.transitions))}


def with_scorers(load: Mapping[str, Callable[[str | None], Scorer]]) -> Callable[..., float | dict[str, float]]:
    """:func:`compute_score` that loads what the dense terms need with ``load[kind](checkpoint)`` (verl's
    ``reward_kwargs.critic_checkpoint``, ``None`` = the default one); ``critics/verl_reward.py`` is this with the
    shipped critics."""

    def compute_score_with_scorers(data_source: str, solution_str: str, ground_truth: Any,
                                   extra_info: Mapping[str, Any] | None = None, *, dense: Sequence[str] | str | None = None,
                                   critic_checkpoint: str | None = None, **kwargs: Any) -> float | dict[str, float]:
        needs = {REWARD_VARIANTS[name].needs for name in dense_terms(dense)} & set(load)
        scorers = {need: load[need](critic_checkpoint) for need in sorted(needs)}
        return compute_score(data_source, solution_str, ground_truth, extra_info, dense=dense,
                             scorers={**scorers, **kwargs.pop("scorers", {})}, **kwargs)

    compute_score_with_scorers.__doc__ = (f":func:`countdown_gym.integrations.verl.compute_score` with "
                                          f"{sorted(load)} loaded when ``dense`` asks for them.")
    return compute_score_with_scorers


__all__ = ["DATA_SOURCE_PREFIX", "compute_score", "dense_terms", "ground_truth", "problem_from_ground_truth",
           "verl_row", "with_scorers"]
