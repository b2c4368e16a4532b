"""Per-step credit for multi-turn GRPO: dense terms credited to the turn that earned them (the estimator of
docs/step_credit.md). :class:`StepCredit` keeps TRL's outcome advantage and adds, on the tokens of each turn, the
leave-one-out advantage of the discounted return-to-go of the dense terms, which leave the scalar reward
(:func:`split_reward_spec`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines.lm.rewards import load_needs
from countdown_gym.rewards.terms import Scorer, check_gamma
from countdown_gym.rewards.variants import get_variant, given_scorers, step_credit_names


def split_reward_spec(weights: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """``(scalar, per_step)`` weights of a parsed reward spec: ``scalar`` keeps every key in order with the per-step
    terms at 0 (still logged); ``per_step`` holds the terms with a per-move term and a non-zero weight."""
    stepped = step_credit_names()
    scalar = {name: 0.0 if name in stepped else float(w) for name, w in weights.items()}
    return scalar, {name: float(w) for name, w in weights.items() if name in stepped and float(w) != 0.0}


def _variant_name(name: str) -> str:
    try:
        return get_variant(name).name
    except ValueError:
        return name


def _check_step_weights(weights: Mapping[str, float]) -> dict[str, float]:
    stepped = step_credit_names()
    unknown = [k for k in weights if _variant_name(k) not in stepped]
    if unknown:
        raise ValueError(f"per-step credit supports the terms {list(stepped)}, got {unknown}")
    out = {_variant_name(k): float(w) for k, w in weights.items() if float(w) != 0.0}
    if not out:
        raise ValueError(f"per-step credit needs a dense term with a non-zero weight (one of {list(stepped)}), "
                         f"got {dict(weights)}")
    if not all(math.isfinite(w) for w in out.values()):
        raise ValueError(f"per-step weights must be finite numbers, got {dict(weights)}")
    return out


def reward_scorers(funcs: Sequence[Any]) -> dict[str, Scorer]:
    """The scorers the run's TRL reward functions hold, by the kind their variant needs (``critic``, ``text_critic``)."""
    return {f.variant.needs: f.scorer for f in funcs
            if getattr(f, "scorer", None) is not None and getattr(f.variant, "needs", None)}


def turn_rewards(episodes: Sequence[Sequence[Sequence[Mapping[str, Any]]]], weights: Mapping[str, float],
                 critic: Scorer | None = None, scorers: Mapping[str, Scorer] | None = None) -> list[list[float]]:
    """``r_{i,k}``: for each episode (its ``turn_transitions``), the weighted dense terms of each turn (0 for a turn
    without a transition). ``scorers``: what the variants need, by kind (``critic``: short for ``{"critic": critic}``)."""
    weights = _check_step_weights(weights)
    given = given_scorers(critic, scorers)
    flat = [t for episode in episodes for turn in episode for t in turn]
    per_transition = np.zeros(len(flat), dtype=np.float64)
    for name, w in weights.items():
        variant = get_variant(name)
        per_transition += w * variant.move_values(flat, variant.scorer_in(given))
    per_turn = iter(np.split(per_transition, np.cumsum([len(turn) for episode in episodes for turn in episode])))
    return [[float(next(per_turn).sum()) for _ in episode] for episode in episodes]


def returns_to_go(rewards: Sequence[float], gamma: float = 1.0) -> np.ndarray:
    """``G_k = sum_{j >= k} gamma^(j-k) r_j`` for each turn ``k`` of one episode."""
    gamma = check_gamma(gamma)  # "0.5" or None: a ValueError, not numpy's TypeError
    r = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(r)
    running = 0.0
    for k in range(len(r) - 1, -1, -1):
        running = r[k] + gamma * running
        out[k] = running
    return out


def group_step_advantages(returns: Sequence[Sequence[float]], num_generations: int) -> list[np.ndarray]:
    """``A^step_{i,k}`` (leave-one-out) of the batch's episodes, groups of ``num_generations`` consecutive rows;
    episodes may have different numbers of turns (also none)."""
    if num_generations < 1 or len(returns) % num_generations:
        raise ValueError(f"{len(returns)} episodes are not a whole number of groups of {num_generations}")
    out: list[np.ndarray] = []
    for start in range(0, len(returns), num_generations):
        group = [np.asarray(r, dtype=np.float64) for r in returns[start : start + num_generations]]
        depth = max((len(r) for r in group), default=0)
        table = np.full((len(group), depth), np.nan)
        for i, r in enumerate(group):
            table[i, : len(r)] = r
        reached = ~np.isnan(table)
        count = reached.sum(axis=0)  # |S_k|
        total = np.where(reached, table, 0.0).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            others = (total[None, :] - table) / (count[None, :] - 1)
        adv = np.where(reached & (count[None, :] >= 2), table - others, 0.0)
        out += [adv[i, : len(r)] for i, r in enumerate(group)]
    return out


def token_advantages(outcome: Any, step: Sequence[Sequence[float]], turn_index: Sequence[Sequence[int]], width: int) -> Any:
    """``(B, width)`` per-token advantages: ``outcome[i] + step[i][k]`` on the tokens of turn ``k``
    (``turn_index[i][t] == k``), ``outcome[i]`` on environment tokens (index -1) and right padding."""
    import torch

    outcome = torch.as_tensor(outcome)
    if outcome.dim() != 1 or not len(outcome) == len(step) == len(turn_index):
        raise ValueError(f"need one outcome advantage, one step row and one turn index row per rollout, got "
                         f"{tuple(outcome.shape)}, {len(step)} and {len(turn_index)}")
    dtype = outcome.dtype if outcome.is_floating_point() else torch.float32
    extra = torch.zeros((len(step), width), dtype=torch.float64)
    for i, (adv, index) in enumerate(zip(step, turn_index, strict=True)):
        if len(index) > width:
            raise ValueError(f"rollout {i} has {len(index)} completion tokens, more than the padded width {width}")
        idx = torch.as_tensor(list(index), dtype=torch.long)
        if len(idx) and int(idx.max()) >= len(adv):
            raise ValueError(f"rollout {i} has tokens of turn {int(idx.max())} but its replay played {len(adv)} turns")
        model = idx >= 0  # environment tokens (-1) keep 0
        extra[i, : len(idx)][model] = torch.as_tensor(np.asarray(adv, dtype=np.float64))[idx[model]]
    return outcome.unsqueeze(1) + extra.to(device=outcome.device, dtype=dtype)


@dataclass(frozen=True)
class StepCredit:
    """The per-turn credit of ``--step-credit``: dense terms and weights, discount, and the scorers the terms need."""

    weights: dict[str, float]
    gamma: float = 1.0
    scorers: dict[str, Scorer] = field(default_factory=dict)

    @classmethod
    def of(cls, weights: Mapping[str, float], gamma: float = 1.0, critic: Scorer | None = None,
           scorers: Mapping[str, Scorer] | None = None) -> StepCredit:
        """Checked ``weights`` and ``gamma``; missing scorers are loaded (the shipped critics)."""
        weights = _check_step_weights(weights)
        return cls(weights, check_gamma(gamma), load_needs(weights, given_scorers(critic, scorers)))

    def add_turn_advantages(self, output: dict[str, Any], inputs: Sequence[Mapping[str, Any]], groups: int,
                            gather: Callable[[Any], Any], process_index: int) -> dict[str, float]:
        """Replace TRL's ``advantages`` in ``output`` by the ``(B, T)`` per-token advantages (TRL's own kept as
        ``outcome_advantages``; ``turn_index``: -1 off the model's turns). ``gather`` collects every process's rewards;
        this process keeps its slice. Returns the step's ``step_credit/...`` metrics."""
        import torch

        missing = [k for k in ("turn_replay", "turn_index") if k not in inputs[0]]
        if missing:
            raise KeyError(f"per-step credit needs {missing} from the rollout_func "
                           "(countdown_gym.integrations.trl_rollout.make_rollout_func returns them)")
        local = turn_rewards([x["turn_replay"].turn_transitions for x in inputs], self.weights, scorers=self.scorers)
        rewards: list[list[float]] = gather(local)
        step = group_step_advantages([returns_to_go(r, self.gamma) for r in rewards], groups)
        start = process_index * len(inputs)
        index = [list(x["turn_index"]) for x in inputs]
        outcome = output["advantages"]
        width = output["completion_ids"].shape[1]
        output["outcome_advantages"] = outcome
        output["advantages"] = token_advantages(outcome, step[start : start + len(inputs)], index, width)
        turn_index = torch.full((len(index), width), -1, dtype=torch.long)
        for i, row in enumerate(index):
            turn_index[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
        output["turn_index"] = turn_index.to(outcome.device)
        flat_r = np.array([x for r in rewards for x in r], dtype=np.float64)
        flat_a = np.abs(np.concatenate([np.zeros(0), *step]))
        return {"step_credit/turn_reward_mean": float(flat_r.mean()) if flat_r.size else 0.0,
                "step_credit/step_advantage_abs_mean": float(flat_a.mean()) if flat_a.size else 0.0}


__all__ = [
    "StepCredit", "group_step_advantages", "returns_to_go",
    "reward_scorers", "split_reward_spec", "token_advantages", "turn_rewards",
]
