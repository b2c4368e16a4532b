"""The registry of reward variants, one entry per reward, read by every trainer and the leaderboard: a ``step``
variant (Countdown-v0) or a ``text`` one (completions) computes itself everywhere (:meth:`RewardVariant.wrap`,
:meth:`RewardVariant.move_values`, :meth:`RewardVariant.potentials`, :meth:`RewardVariant.completion_score`), named
alike wherever a term is named. Critics and CLIPO trainers are passed in (``needs``). ``docs/rewards.md``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from types import MappingProxyType
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from countdown_gym.game.rules import Number, Rules, check_finite, describe_value
from countdown_gym.rewards import terms

KINDS: tuple[str, ...] = ("step", "text")
"""``step``: Countdown-v0 and its vector envs (the SB3 baseline); ``text``: completions (GRPO, verl)."""

OUTCOME: tuple[str, ...] = ("sparse", "format")
"""The outcome reward every ``text`` variant adds its term to (at their registry weights: 1 and 0.1)."""

NO_REWARD = "none"
"""The leaderboard's ``reward_variant`` of an agent not trained with a reward (a solver, SFT only)."""

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


_PATH_HINT = " (a checkpoint path: load it with critics.load_state_critic(path))"


@dataclass(frozen=True)
class RewardVariant:
    """One reward variant. A ``step`` variant is additive (``move_term``), shaping (``potential``) or the outcome
    alone; a ``text`` variant scores a completion with ``score``, else the mean ``move_term`` over its moves, else
    the trainer object passed in for ``needs`` (CLIPO) computes it."""

    name: str
    """The one spelling: lowercase words joined by ``-``."""
    description: str
    kinds: tuple[str, ...]
    weight: float = 0.5
    """Default weight of its term in a ``text`` run (and in verl's ``score``)."""
    move_term: terms.MoveTerm | None = None
    """Per-move term, unscaled: ``(transitions, scorer) -> values`` (:data:`~countdown_gym.rewards.terms.MoveTerm`)."""
    potential: terms.Potential | None = None
    """Shaping potential, unscaled: ``(states, targets, rules, scorer) -> Phi`` (``step`` only)."""
    score: Callable[[Any], float] | None = None
    """Per-completion score from a replay alone (the outcome terms)."""
    needs: str | None = None
    """The object a trainer passes in: ``"critic"`` (``critics.load_critic()``), ``"text_critic"``, ``"clipo"``."""
    monitor: bool = False
    """Cheap: GRPO computes and logs it in every run (weight 0 unless the spec weights it)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"a reward variant's name is lowercase words joined by '-', got {self.name!r}")
        if not self.kinds or not set(self.kinds) <= set(KINDS):
            raise ValueError(f"reward variant {self.name!r}: kinds must be some of {list(KINDS)}, got {self.kinds!r}")
        if self.move_term is not None and self.potential is not None:
            raise ValueError(f"reward variant {self.name!r}: a per-move term or a potential, not both")
        if "text" in self.kinds and self.potential is not None:
            raise ValueError(f"reward variant {self.name!r}: a shaping potential has no per-completion form; kinds ('step',)")
        check_finite(self.weight, f"reward variant {self.name!r}: weight")

    @property
    def per_completion(self) -> bool:
        """Whether a completion's replay gives its term (else the trainer's object computes it)."""
        return self.score is not None or self.move_term is not None

    def need(self, obj: Any) -> Any:
        """``obj`` when the variant needs one and it is given (or needs none); else a clear ``ValueError``. A variant
        whose own term scores states needs an object with a ``score(states, targets)`` method (a ``Scorer``)."""
        scores = self.move_term is not None or self.potential is not None
        if self.needs is not None and (obj is None or (scores and not callable(getattr(obj, "score", None)))):
            raise ValueError(f"the reward {self.name!r} needs a {self.needs} passed in"
                             f"{' with a score(states, targets) method' if scores else ''} (critics.load_critic() for "
                             f"'critic', critics.text_critic.load_text_critic() for 'text_critic'), got "
                             f"{type(obj).__name__}{_PATH_HINT if isinstance(obj, (str, bytes, PathLike)) else ''}")
        return obj if self.needs is not None else None

    def scorer_in(self, given: Mapping[str, Any] | None) -> Any:
        """What this variant needs, taken from ``given`` (objects by kind); None when it needs nothing."""
        return by_kind(given).get(self.needs) if self.needs else None

    def _finite(self, values: Any, n: int) -> np.ndarray:
        """The term's ``values`` as ``n`` finite floats, else a ``ValueError`` naming the variant (a NaN or ``None``
        would make every reward it enters NaN)."""
        out = np.asarray(values, dtype=np.float64)
        if out.size != n or not np.isfinite(out).all():
            raise ValueError(f"the reward {self.name!r} gave {out.tolist()!r:.120} for {n} value(s); a term is one "
                             "finite number per move, state or completion")
        return out.reshape(n)

    def move_values(self, transitions: Sequence[Mapping[str, Any]], scorer: Any = None, scale: float = 1.0) -> np.ndarray:
        """``scale`` times the per-move term of each transition (0 for each when the variant has none)."""
        scale = check_finite(scale)  # NaN: every reward NaN, silently; a str: numpy's UFuncTypeError
        if self.move_term is None:
            return np.zeros(len(transitions))
        return scale * self._finite(self.move_term(transitions, self.need(scorer)), len(transitions))

    def potentials(self, states: Sequence[Sequence[Number]], targets: Sequence[Number], rules: Rules,
                   scorer: Any = None, scale: float = 1.0) -> np.ndarray:
        """``scale * Phi`` of each state (a shaping variant)."""
        scale = check_finite(scale)
        if self.potential is None:
            raise ValueError(f"the reward {self.name!r} is not a shaping variant")
        if not len(states):
            return np.zeros(0)
        return scale * self._finite(self.potential(states, targets, rules, self.need(scorer)), len(states))

    def completion_score(self, replay: Any, scorer: Any = None) -> float:
        """The per-completion term of a replayed completion (``score``, or the mean per-move term)."""
        if self.score is not None:
            return float(self._finite(self.score(replay), 1)[0])
        if self.move_term is None:
            raise ValueError(f"the reward {self.name!r} is computed by the trainer ({self.needs}), not from one completion")
        return terms.mean_over_moves(self.move_values(replay.transitions, scorer)) if replay.transitions else 0.0

    def wrap(self, env: gym.Env, *, scale: float = 1.0, gamma: float = 1.0, scorer: Any = None) -> gym.Env:
        """``env`` with this variant's term added (reported under the variant's name); ``env`` itself for the outcome."""
        if "step" not in self.kinds:
            raise ValueError(f"the reward {self.name!r} applies to completions only (kinds {self.kinds})")
        if self.move_term is None and self.potential is None:
            return env
        return TermReward(env, self, scorer, scale=scale, gamma=gamma)


_REGISTRY: dict[str, RewardVariant] = {}
REWARD_VARIANTS: Mapping[str, RewardVariant] = MappingProxyType(_REGISTRY)
"""Every registered reward variant by name, in registration order (a live, read-only view)."""

ALIASES: Mapping[str, str] = MappingProxyType({
    "oracle": "oracle-reachable", "oracle_reachable": "oracle-reachable", "oracle_perfect": "oracle-perfect",
    "text_critic": "text-critic",
})
"""Earlier spellings of GRPO ``--rewards`` and verl ``dense`` terms, read as today's names with a ``FutureWarning``."""


def register_variant(variant: RewardVariant, *, replace: bool = False) -> RewardVariant:
    """Add ``variant`` to the registry (``replace=True`` to redefine a name); returns it."""
    if not isinstance(variant, RewardVariant):
        raise TypeError(f"register_variant takes a RewardVariant, got {type(variant).__name__}")
    if variant.name in ALIASES or variant.name == NO_REWARD or (variant.name in _REGISTRY and not replace):
        raise ValueError(f"reward variant {variant.name!r} is already a name; pass replace=True to redefine a variant")
    _REGISTRY[variant.name] = variant
    return variant


def unregister_variant(name: str) -> None:
    """Remove a variant registered at run time (the built-in ones stay)."""
    if name in _BUILT_IN_NAMES:
        raise ValueError(f"{name!r} is a built-in reward variant")
    _REGISTRY.pop(name, None)


def get_variant(name: str, kind: str | None = None) -> RewardVariant:
    """The variant called ``name`` (an earlier spelling of :data:`ALIASES` too), optionally one of ``kind``."""
    if name in ALIASES:
        warnings.warn(f"reward name {name!r} is the earlier spelling of {ALIASES[name]!r}; it is read as "
                      f"{ALIASES[name]!r}", FutureWarning, stacklevel=2)
        name = ALIASES[name]
    variant = _REGISTRY.get(name)
    if variant is None:
        raise ValueError(f"unknown reward variant {name!r}; variants: {list(variant_names(kind) if kind else _REGISTRY)}")
    if kind is not None and kind not in variant.kinds:
        raise ValueError(f"reward variant {name!r} has no {kind!r} form (kinds {list(variant.kinds)}); {kind} variants: "
                         f"{list(variant_names(kind))}")
    return variant


def variant_names(kind: str) -> tuple[str, ...]:
    """The names of the variants that support env kind ``kind`` (``"step"`` or ``"text"``), in registry order."""
    if kind not in KINDS:
        raise ValueError(f"unknown env kind {kind!r}; kinds: {list(KINDS)}")
    return tuple(v.name for v in _REGISTRY.values() if kind in v.kinds)


def completion_variants(scorers: Mapping[str, Any] | None = None, but: Sequence[str] = ()) -> list[str]:
    """The per-completion ``text`` variants (:attr:`RewardVariant.per_completion`) in registry order, but ``but``; with
    ``scorers`` (by kind, e.g. ``{}``), only those needing nothing or a scorer given there."""
    return [n for n, v in _REGISTRY.items() if "text" in v.kinds and v.per_completion and n not in but
            and (scorers is None or v.needs is None or by_kind(scorers).get(v.needs) is not None)]


def monitored() -> dict[str, float]:
    """The cheap terms a GRPO run always computes and logs, at weight 0."""
    return {v.name: 0.0 for v in _REGISTRY.values() if v.monitor}


def step_credit_names() -> tuple[str, ...]:
    """The ``text`` variants with a per-move term: what per-step credit credits to the turns."""
    return tuple(v.name for v in _REGISTRY.values() if "text" in v.kinds and v.move_term is not None)


def text_weights(name: str) -> dict[str, float]:
    """Term weights of the ``text`` variant ``name``: the outcome (``sparse`` 1, ``format`` 0.1) plus its own term."""
    variant = get_variant(name, "text")
    return {o: _REGISTRY[o].weight for o in (*OUTCOME, variant.name)}


class _TextWeights(Mapping[str, dict[str, float]]):
    """The ``text`` variants as term weights (:func:`text_weights`), a live view of the registry."""

    def __getitem__(self, name: str) -> dict[str, float]:
        if name not in variant_names("text"):
            raise KeyError(name)
        return text_weights(name)

    def __iter__(self) -> Iterator[str]:
        return iter(variant_names("text"))

    def __len__(self) -> int:
        return len(variant_names("text"))


TEXT_VARIANT_WEIGHTS: Mapping[str, dict[str, float]] = _TextWeights()


_WEIGHT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_reward_spec(spec: str) -> dict[str, float]:
    """Term weights of a run on completions from a spec: ``text`` variants, ``+``-joined, and ``name=weight`` parts
    that override them (``"critic,oracle-reachable=0.2"``). ``ValueError`` for an unknown variant, a non-finite
    weight, or all weights 0."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"reward spec must be a non-empty string, got {spec!r}; variants: {list(variant_names('text'))}")
    weights: dict[str, float] = {}
    explicit: dict[str, float] = {}
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "=" in part:
                name, _, value = part.partition("=")
                name = get_variant(name, "text").name
                # a plain decimal number: float() alone also reads "1_0" as 10 and non-ASCII digits
                explicit[name] = check_finite(float(value) if _WEIGHT.fullmatch(value) else value, f"weight of {name!r}")
                continue
            for variant in part.split("+"):
                for name, w in text_weights(variant).items():
                    weights[name] = max(weights.get(name, 0.0), w)
        except ValueError as exc:
            raise ValueError(f"{exc} (in the reward spec {spec!r})") from None
    weights.update(explicit)
    if not any(w != 0 for w in weights.values()):
        raise ValueError(f"reward spec {spec!r} gives every term weight 0: nothing to learn from")
    return weights


def check_reward_variant(value: str) -> str:
    """``value`` if it is ``"none"``, a variant or a :func:`parse_reward_spec` spec, else a ``ValueError``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"reward_variant must be a non-empty string, got {value!r}")
    if value == NO_REWARD or value in _REGISTRY:
        return value
    try:
        parse_reward_spec(value)
    except ValueError as exc:
        raise ValueError(f"{exc}; a reward_variant is {NO_REWARD!r}, one of the registered variants "
                         "(countdown_gym.rewards.variants), or a GRPO spec over them") from None
    return value


def given_scorers(critic: Any = None, scorers: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What variants need, by kind: ``scorers`` (``{"critic": ..., "text_critic": ...}``), with ``critic`` short for
    ``scorers={"critic": critic}``."""
    return {**({"critic": critic} if critic is not None else {}), **by_kind(scorers)}


def by_kind(scorers: Any) -> Mapping[str, Any]:
    """``scorers`` (what variants need, by kind), ``{}`` for None; ``TypeError`` for anything but a mapping."""
    if scorers is not None and not isinstance(scorers, Mapping):
        raise TypeError(f"scorers must be a mapping of kind -> object, e.g. {{'critic': critics.load_critic()}}, "
                        f"got {type(scorers).__name__}")
    return scorers or {}


def score_terms(replay: Any, names: Sequence[str], scorers: Mapping[str, Any] | None = None,
                critic: Any = None) -> dict[str, float]:
    """Each ``names`` variant's per-completion term of one replay (``scorers``, ``critic``: :func:`given_scorers`)."""
    given = given_scorers(critic, scorers)
    out: dict[str, float] = {}
    for name in names:
        variant = get_variant(name, "text")
        out[variant.name] = variant.completion_score(replay, variant.scorer_in(given))
    return out


_BUILT_IN = (
    RewardVariant("sparse", "the outcome reward only: 1 for a correct final answer / reaching the target",
                  ("step", "text"), weight=1.0, score=terms.sparse_score, monitor=True),
    RewardVariant("format", "1 when the final answer is in an <answer> tag or <Solution> block and parses "
                  "(right or wrong); part of every text run's outcome reward", ("text",), weight=0.1,
                  score=terms.format_score, monitor=True),
    RewardVariant("oracle-perfect", "the oracle rewards each move that keeps the target reachable (the seed paper's)",
                  ("step", "text"), move_term=terms.perfect_moves, monitor=True),
    RewardVariant("oracle-reachable", "the oracle's +1 / -1 per move: the target still reachable or not",
                  ("step", "text"), move_term=terms.reachable_moves, monitor=True),
    RewardVariant("oracle-potential", "potential-based shaping with the oracle's reachability as the potential",
                  ("step",), potential=terms.reachability),
    RewardVariant("critic", "the learned contrastive critic's score of each move's new state",
                  ("step", "text"), move_term=terms.scored_moves, needs="critic"),
    RewardVariant("critic-potential", "potential-based shaping with the learned critic's score as the potential",
                  ("step",), potential=terms.critic_scores, needs="critic"),
    RewardVariant("clipo", "CLIPO: a contrastive reward over a group of rollouts of one puzzle", ("text",),
                  weight=1.0, needs="clipo"),
    RewardVariant("text-critic", "the critic term scored by the text critic (the seed paper's architecture A)",
                  ("text",), move_term=terms.scored_moves, needs="text_critic"),
)
for _variant in _BUILT_IN:
    register_variant(_variant)
_BUILT_IN_NAMES = frozenset(v.name for v in _BUILT_IN)


# ---- the Gymnasium wrapper a step variant builds ---------------------------------------------------------------


class TransitionsMissingError(ValueError):
    """The wrapped environment does not report ``info["transitions"]``."""


def env_name(env: gym.Env) -> str:
    """The environment's registered id, else its class name (for error messages)."""
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None and spec.id else type(env.unwrapped).__name__


def step_transitions(info: Mapping[str, Any], who: str, env: gym.Env) -> list[Mapping[str, Any]]:
    """``info["transitions"]`` checked, or a :class:`TransitionsMissingError` naming the problem."""
    if "transitions" not in info:
        raise TransitionsMissingError(f"{who} needs an environment that reports info['transitions'] on every step "
                                      f"(Countdown-v0 or CountdownText-v0, see docs/DESIGN.md); {env_name(env)} "
                                      f"returned info keys {sorted(info)}")
    transitions = info["transitions"]
    if not isinstance(transitions, (list, tuple)):
        raise TransitionsMissingError(f"{who}: info['transitions'] must be a list of transition records, "
                                      f"got {type(transitions).__name__}")
    return [terms.check_transition(t) for t in transitions]


class TermReward(gym.Wrapper):
    """Adds one reward variant's term to Countdown-v0 or CountdownText-v0 (what :meth:`RewardVariant.wrap` builds):
    the term of each step's ``info["transitions"]`` is added to the reward and recorded in ``info["reward_terms"]``
    (``"sparse"``: the env's own). Additive: ``scale`` times each move's term. Shaping: ``F = gamma * Phi(s') - Phi(s)``
    of the numbers held (``info["state"]``, else the last transition's), ``Phi = 0`` on termination. A critic is
    memoised and checked against the episode's size at ``reset``.

    Args:
        variant: A :class:`~countdown_gym.rewards.variants.RewardVariant` with a ``move_term`` or a ``potential``.
        scorer: The critic, when the variant needs one.
        scale: Multiplies the term (or the potential).
        gamma: The shaping discount: set it to the agent's.
        key: The term's key in ``info["reward_terms"]`` (default: the variant's name).
    """

    def __init__(self, env: gym.Env, variant: RewardVariant, scorer: Any = None, scale: float = 1.0,
                 gamma: float = 1.0, key: str | None = None) -> None:
        if not isinstance(variant, RewardVariant):  # a name: an AttributeError below
            raise TypeError(f"TermReward needs a RewardVariant (get_variant(name)), got {describe_value(variant)}")
        if (variant.move_term is None) == (variant.potential is None):
            raise ValueError(f"TermReward needs a variant with exactly one of a move_term (additive) or a potential "
                             f"(shaping); {variant.name!r} has {'both' if variant.move_term else 'neither'}")
        super().__init__(env)
        self.variant = variant
        self.scale = check_finite(scale)
        self.potential = variant.potential is not None
        self.gamma = terms.check_gamma(gamma)
        if key is not None and (not isinstance(key, str) or not key or key == "sparse"):
            raise ValueError(f"key must be a non-empty string other than 'sparse', got {key!r}")
        self.key = key or variant.name
        self.critic = variant.need(scorer)
        self.scorer = None if self.critic is None else terms.CachedScorer(self.critic)
        self._current: tuple[tuple[Number, ...], Number, Rules] | None = None  # (numbers, target, rules) now
        self._phi: float | None = None  # potential of the current numbers

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._current, self._phi = None, None
        problem = info.get("problem")
        if problem is not None and hasattr(problem, "numbers") and hasattr(problem, "target"):
            numbers = tuple(info["state"]) if info.get("state") is not None else tuple(problem.numbers)
            self._current = (numbers, problem.target, problem.rules)
        if self.critic is not None and info.get("state") is not None:
            terms.check_scorer_fits(self.critic, info["state"], type(self).__name__)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        transitions = step_transitions(info, type(self).__name__, self.env)
        if self.potential:
            term = self._shaping_term(info, transitions, terminated)
        else:
            term = float(sum(self.variant.move_values(transitions, self.scorer, self.scale)))
        reward_terms = dict(info.get("reward_terms") or {"sparse": float(reward)})
        if self.key in reward_terms:
            raise ValueError(f"info['reward_terms'] already has a {self.key!r} term (two wrappers with the same key); "
                             "pass key='...' to tell them apart")
        reward_terms[self.key] = term
        return obs, float(reward) + term, terminated, truncated, {**info, "reward_terms": reward_terms}

    def _shaping_term(
        self, info: Mapping[str, Any], transitions: Sequence[Mapping[str, Any]], terminated: bool
    ) -> float:
        if self._current is None and transitions:  # env without a problem in its reset info
            first = transitions[0]
            self._current = (tuple(first["state"]), first["target"], first.get("rules") or Rules.longproc())
        if self._current is None:
            return 0.0
        held, target, rules = self._current
        if self._phi is None:
            self._phi = self._potential(held, target, rules)
        phi_s, numbers = self._phi, held
        if info.get("state") is not None:  # the env's own record of the numbers it now holds
            numbers = tuple(info["state"])
        elif transitions:
            last = transitions[-1]
            numbers = tuple(last["next_state"] if last["valid"] else last["state"])
        if numbers != held:
            self._current = (numbers, target, rules)
            self._phi = self._potential(numbers, target, rules)
        return terms.potential_shaping(phi_s, 0.0 if terminated else self._phi, self.gamma)

    def _potential(self, numbers: tuple[Number, ...], target: Number, rules: Rules) -> float:
        return float(self.variant.potentials([numbers], [target], rules, self.scorer, self.scale)[0])


__all__ = [
    "ALIASES", "KINDS", "NO_REWARD", "OUTCOME", "REWARD_VARIANTS", "TEXT_VARIANT_WEIGHTS", "RewardVariant", "TermReward",
    "TransitionsMissingError",
    "check_reward_variant", "completion_variants", "get_variant", "monitored", "parse_reward_spec", "register_variant",
    "given_scorers", "score_terms", "step_credit_names", "text_weights", "unregister_variant", "variant_names",
]
