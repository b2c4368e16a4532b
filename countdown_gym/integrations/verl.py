"""verl adapter: a ``compute_score`` reward function and the problem encoding of the exported data.

verl (and OpenRLHF-style trainers that accept the same signature) call a custom reward function as
``compute_score(data_source, solution_str, ground_truth, extra_info=None, **reward_kwargs)``.
Point verl at this file::

    custom_reward_function.path=<site-packages>/countdown_gym/integrations/verl.py
    custom_reward_function.name=compute_score
    # optional dense terms, passed through verl's reward_kwargs:
    +custom_reward_function.reward_kwargs.dense=[oracle]

The ``critic`` term needs a loaded critic, which this package does not load: for it point verl at
``critics/verl_reward.py`` instead (same ``compute_score``, plus the shipped critic or
``reward_kwargs.critic_checkpoint=<dir>``), or call :func:`compute_score` with ``critic=``.

and train on the parquet files written by ``scripts/export_verl.py`` (``reward_model.ground_truth``
holds :func:`ground_truth`). The completion is replayed through CountdownText-v0
(``replay_completion``), so the score is the same verdict and the same dense terms as the TRL
baseline's rewards. Without ``dense`` the score is the sparse verifier reward (a float, 1.0 or
0.0); with dense terms it is a dict: ``score`` (the weighted sum) plus every term and the number of
invalid steps, which verl logs as extra metrics.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules
from countdown_gym.integrations import SCORE_TERMS, score_terms
from countdown_gym.rewards.terms import Scorer
from countdown_gym.rewards.variants import REWARD_VARIANTS, TERM_WEIGHTS

DEFAULT_WEIGHTS: dict[str, float] = dict(TERM_WEIGHTS)
"""Weight of each term in ``score`` when it is requested (``countdown_gym.rewards.variants.TERM_WEIGHTS``,
what the GRPO baseline's variants use too)."""

DATA_SOURCE_PREFIX = "countdown_gym/"


def ground_truth(problem: Problem) -> dict[str, Any]:
    """The ``reward_model.ground_truth`` of ``problem``: numbers, target and its rules (JSON)."""
    return {
        "numbers": [int(x) for x in problem.numbers],
        "target": int(problem.target),
        "rules": json.dumps(problem.rules.to_dict(), separators=(",", ":"), sort_keys=True),
    }


def _as_int_list(xs: Any) -> list[int]:
    if hasattr(xs, "tolist"):  # numpy arrays, as pandas/pyarrow hand back list columns
        xs = xs.tolist()
    if isinstance(xs, (str, bytes)) or not isinstance(xs, Sequence):
        raise ValueError(f"ground_truth numbers must be a list of ints, got {xs!r:.80}")
    out = []
    for x in xs:
        if hasattr(x, "item"):
            x = x.item()
        if isinstance(x, bool) or not isinstance(x, int):
            raise ValueError(f"ground_truth numbers must be ints, got {x!r}")
        out.append(x)
    return out


def problem_from_ground_truth(gt: Any) -> Problem:
    """Decode :func:`ground_truth` (a dict, or its JSON string); clear ``ValueError`` otherwise."""
    if isinstance(gt, (str, bytes)):
        try:
            gt = json.loads(gt)
        except json.JSONDecodeError as exc:
            raise ValueError(f"ground_truth is not JSON: {gt!r:.80}") from exc
    if not isinstance(gt, Mapping) or "numbers" not in gt or "target" not in gt:
        raise ValueError(f"ground_truth must have 'numbers' and 'target' (see scripts/export_verl.py), got {gt!r:.120}")
    target = gt["target"]
    target = target.item() if hasattr(target, "item") else target
    if isinstance(target, bool) or not isinstance(target, int):
        raise ValueError(f"ground_truth target must be an int, got {target!r}")
    rules = gt.get("rules")
    if rules is None:
        rules_obj = Rules.longproc()
    elif isinstance(rules, Mapping):
        rules_obj = Rules.from_dict(dict(rules))
    elif isinstance(rules, str) and rules.lstrip().startswith("{"):
        rules_obj = Rules.from_dict(json.loads(rules))
    elif isinstance(rules, str):
        rules_obj = Rules.preset(rules)
    else:
        raise ValueError(f"ground_truth rules must be a preset name, a dict or its JSON, got {rules!r:.80}")
    return _problem(tuple(_as_int_list(gt["numbers"])), target, rules_obj)


@lru_cache(maxsize=4096)
def _problem(numbers: tuple[int, ...], target: int, rules: Rules) -> Problem:
    return Problem(numbers=numbers, target=target, rules=rules)


def dense_terms(dense: Any) -> list[str]:
    """The dense terms of verl's ``dense`` reward kwarg (a list or a comma/plus-separated string).

    Each entry is a term (``format``, ``oracle``, ``oracle_perfect``, ``critic``) or the name of a
    ``text`` reward variant of :data:`countdown_gym.rewards.variants.REWARD_VARIANTS` whose terms
    are computed from one completion (e.g. ``oracle-perfect``; ``sparse`` adds none).
    """
    if dense is None:
        return []
    if isinstance(dense, str):
        dense = [d for d in dense.replace("+", ",").split(",") if d.strip()]
    if hasattr(dense, "tolist"):
        dense = dense.tolist()
    allowed = [t for t in SCORE_TERMS if t != "sparse"]
    names: list[str] = []
    for entry in (str(d).strip() for d in dense):
        variant = REWARD_VARIANTS.get(entry)
        if variant is not None and "text" in variant.kinds:
            terms = list(variant.text_terms)
            if any(t not in allowed for t in terms):
                raise ValueError(f"reward variant {entry!r} is not a per-completion score (it needs the trainer); "
                                 f"verl's dense terms: {allowed}")
        else:
            terms = [entry.replace("-", "_")]
            if terms[0] not in allowed:
                raise ValueError(f"unknown dense term {entry!r}; choose from the terms {allowed} or the text reward "
                                 f"variants of countdown_gym.rewards.variants")
        names += [t for t in terms if t not in names]
    return names


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    dense: Sequence[str] | str | None = None,
    weights: Mapping[str, float] | None = None,
    critic: Scorer | None = None,
    **kwargs: Any,
) -> float | dict[str, float]:
    """verl reward: the sparse verifier reward, or a dict with ``score`` and the dense terms.

    Args:
        data_source: verl's ``data_source`` column (not used for scoring; any value is accepted).
        solution_str: The decoded response (no prompt).
        ground_truth: :func:`ground_truth` of the problem (dict or JSON string).
        extra_info: verl's ``extra_info`` column (not used for scoring).
        dense: Extra terms: any of ``format``, ``oracle``, ``oracle_perfect``, ``critic``
            (a list or a comma-separated string).
        weights: Term weights overriding :data:`DEFAULT_WEIGHTS`.
        critic: The loaded critic the ``critic`` term scores with (any
            :class:`~countdown_gym.rewards.terms.Scorer`); ``critics/verl_reward.py`` passes the
            shipped one.
        **kwargs: What else verl passes (its reward loop adds ``reward_router_address`` and
            ``reward_model_tokenizer``); not used.

    Example:
        >>> gt = {"numbers": [6, 2, 5, 3], "target": 8}
        >>> compute_score("countdown_gym/longproc-0.5k", "<answer>(6 - 2) * (5 - 3)</answer>", gt)
        1.0
    """
    from countdown_gym.envs.text import replay_completion

    problem = problem_from_ground_truth(ground_truth)
    if not isinstance(solution_str, str):
        raise ValueError(f"solution_str must be a string, got {type(solution_str).__name__}")
    terms = dense_terms(dense)
    if "critic" not in terms:
        critic = None
    elif critic is None:
        raise ValueError("dense=critic needs a loaded critic: point verl's custom_reward_function.path at "
                         "critics/verl_reward.py (it loads the shipped critic), or pass critic=...")
    limit = getattr(getattr(critic, "config", None), "max_numbers", None)
    if limit is not None and len(problem.numbers) > limit:
        raise ValueError(f"dense=critic: the critic scores states of at most {limit} numbers, but this problem has "
                         f"{len(problem.numbers)} {list(problem.numbers)}; drop the critic term or use a critic trained "
                         f"with max_numbers >= {len(problem.numbers)}")
    replay = replay_completion(problem, solution_str)
    scores = score_terms(replay, ["sparse", *terms], critic=critic)
    if not terms:
        return scores["sparse"]
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    out: dict[str, float] = {"score": float(sum(w[name] * value for name, value in scores.items()))}
    out.update(scores)
    out["invalid_steps"] = float(replay.invalid_steps)
    out["moves"] = float(len(replay.transitions))
    return out


__all__ = ["DATA_SOURCE_PREFIX", "DEFAULT_WEIGHTS", "compute_score", "dense_terms", "ground_truth", "problem_from_ground_truth"]
