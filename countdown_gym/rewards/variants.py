"""The registry of reward variants: one name per reward, shared by every trainer and the leaderboard.

A reward variant is what a run was trained with: the SB3 baseline's ``--reward`` (on Countdown-v0,
kind ``"step"``), the GRPO baseline's ``--rewards`` spec and verl's ``dense`` terms (on completions,
kind ``"text"``), and a leaderboard submission's ``reward_variant`` field. Formulas and scales of
the terms: ``docs/rewards.md``.

Example:
    >>> from countdown_gym.rewards.variants import REWARD_VARIANTS, variant_names
    >>> variant_names("step")
    ('sparse', 'oracle-perfect', 'oracle-reachable', 'oracle-potential', 'critic', 'critic-potential')
    >>> REWARD_VARIANTS["oracle-perfect"].text_terms
    {'oracle_perfect': 0.5}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Kind = Literal["step", "text"]
KINDS: tuple[str, ...] = ("step", "text")
"""``step``: Countdown-v0 and its vector envs (the SB3 baseline); ``text``: completions (GRPO, verl)."""

TERM_WEIGHTS: MappingProxyType[str, float] = MappingProxyType(
    {"sparse": 1.0, "format": 0.1, "oracle": 0.5, "oracle_perfect": 0.5, "critic": 0.5}
)
"""Default weight of each per-completion reward term (GRPO variants and verl's ``score``)."""

TEXT_TERMS: tuple[str, ...] = ("sparse", "format", "oracle", "oracle_perfect", "critic", "clipo", "text_critic")
"""Every reward term a run on completions can weight (``term=weight`` in a GRPO spec)."""


@dataclass(frozen=True)
class RewardVariant:
    """One reward variant: its name, a one-line description and the env kinds that support it.

    ``text_terms`` are the dense terms (term -> weight) a ``text`` run adds to the outcome
    reward (``sparse`` at weight 1 plus ``format`` at 0.1); empty for ``step``-only variants.
    """

    name: str
    description: str
    kinds: tuple[str, ...]
    text_terms: dict[str, float] = field(default_factory=dict)


def _w(term: str) -> dict[str, float]:
    return {term: TERM_WEIGHTS[term]}


_VARIANTS = (
    RewardVariant("sparse", "the outcome reward only: 1 for a correct final answer / reaching the target", ("step", "text")),
    RewardVariant("oracle-perfect", "the oracle rewards each move that keeps the target reachable (the seed paper's)",
                  ("step", "text"), _w("oracle_perfect")),
    RewardVariant("oracle-reachable", "the oracle's +1 / -1 per move: the target still reachable or not",
                  ("step", "text"), _w("oracle")),
    RewardVariant("oracle-potential", "potential-based shaping with the oracle's reachability as the potential", ("step",)),
    RewardVariant("critic", "the learned contrastive critic's score of each move's new state",
                  ("step", "text"), _w("critic")),
    RewardVariant("critic-potential", "potential-based shaping with the learned critic's score as the potential", ("step",)),
    RewardVariant("oracle", "the text name of oracle-reachable: the mean oracle term over a completion's moves",
                  ("text",), _w("oracle")),
    RewardVariant("clipo", "CLIPO: a contrastive reward over a group of rollouts of one puzzle", ("text",), {"clipo": 1.0}),
    RewardVariant("text-critic", "the critic term scored by the text critic (the seed paper's architecture A)",
                  ("text",), {"text_critic": TERM_WEIGHTS["critic"]}),
)
REWARD_VARIANTS: MappingProxyType[str, RewardVariant] = MappingProxyType({v.name: v for v in _VARIANTS})
"""Every reward variant by name, in a fixed order."""

NO_REWARD = "none"
"""The leaderboard's ``reward_variant`` of an agent not trained with a reward (a solver, SFT only)."""


def variant_names(kind: str) -> tuple[str, ...]:
    """The names of the variants that support env kind ``kind`` (``"step"`` or ``"text"``), in registry order."""
    if kind not in KINDS:
        raise ValueError(f"unknown env kind {kind!r}; kinds: {list(KINDS)}")
    return tuple(v.name for v in _VARIANTS if kind in v.kinds)


TEXT_VARIANT_WEIGHTS: MappingProxyType[str, dict[str, float]] = MappingProxyType({
    v.name: {"sparse": TERM_WEIGHTS["sparse"], "format": TERM_WEIGHTS["format"], **v.text_terms}
    for v in _VARIANTS if "text" in v.kinds
})
"""The ``text`` variants as term weights: the outcome reward (``sparse`` 1, ``format`` 0.1) plus the dense terms."""


def parse_reward_spec(spec: str) -> dict[str, float]:
    """Term weights of a run on completions, from a ``text`` variant name, ``+``-joined variants and/or
    explicit ``term=weight`` parts (which override the variants wherever they stand).

    Examples: ``"sparse"``, ``"oracle+clipo"``, ``"sparse=1,oracle=0.25,format=0"``, ``"critic,oracle=0.2"``.
    A ``ValueError`` names the unknown variant or term, a weight that is not a finite number, or a spec
    whose weights are all 0.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"reward spec must be a non-empty string, got {spec!r}; variants: {sorted(TEXT_VARIANT_WEIGHTS)}")
    weights: dict[str, float] = {}
    explicit: dict[str, float] = {}
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        if "=" in part:
            name, _, value = part.partition("=")
            name = name.replace("-", "_")
            if name not in TEXT_TERMS:
                raise ValueError(f"unknown reward term {name!r} in {spec!r}; terms: {list(TEXT_TERMS)}")
            try:
                explicit[name] = float(value)
            except ValueError:
                explicit[name] = math.nan
            if not math.isfinite(explicit[name]):
                raise ValueError(f"weight of {name!r} must be a finite number, got {value!r} in {spec!r}")
            continue
        for variant in part.split("+"):
            if variant not in TEXT_VARIANT_WEIGHTS:
                raise ValueError(
                    f"unknown reward variant {variant!r} in {spec!r}; variants: {sorted(TEXT_VARIANT_WEIGHTS)} "
                    f"(or term=weight with terms {list(TEXT_TERMS)})"
                )
            for name, w in TEXT_VARIANT_WEIGHTS[variant].items():
                weights[name] = max(weights.get(name, 0.0), w)
    weights.update(explicit)
    if not any(w != 0 for w in weights.values()):
        raise ValueError(f"reward spec {spec!r} gives every term weight 0: nothing to learn from")
    return weights


def check_reward_variant(value: str) -> str:
    """``value`` if it names a reward, else a ``ValueError`` listing the registered names.

    Accepted: ``"none"``, a variant name, or a GRPO spec (:func:`parse_reward_spec`), e.g.
    ``"oracle+clipo"`` or ``"critic,oracle=0.2"``.
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"reward_variant must be a non-empty string, got {value!r}")
    if value == NO_REWARD or value in REWARD_VARIANTS:
        return value
    try:
        parse_reward_spec(value)
    except ValueError as exc:
        raise ValueError(f"{exc}; a reward_variant is {NO_REWARD!r}, one of the registered variants "
                         f"{list(REWARD_VARIANTS)} (countdown_gym.rewards.variants), or a GRPO spec over them") from None
    return value
