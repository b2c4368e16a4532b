"""The typed messages of the OpenEnv server: requests, actions, observations, state and transition records.

Numbers travel as JSON ints, or as ``"p/q"`` strings for the rational values of rules with
``integer_only=False`` (:func:`countdown_gym.game.rules.format_number`). :meth:`TransitionModel.record`
turns a record back into the exact dict of ``docs/DESIGN.md`` (tuples, ``Fraction``, ``Rules``), so
the package's dense-reward terms (``perfect_moves``, ``scored_moves``) work on what a client receives.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from countdown_gym.game.expression import MAX_NUMBER_DIGITS
from countdown_gym.game.rules import Number, Rules, format_number, normalize

JSONNumber = int | str
"""A number on the wire: an ``int``, or ``"p/q"`` for a rational value."""

MAX_SEED = 2**64 - 1
"""Largest ``seed`` a reset takes."""
MAX_PROBLEM_INT = 10**MAX_NUMBER_DIGITS - 1
"""Largest number or target (in absolute value) a ``problem`` may state: the verifier's literal limit."""


def _utf8(text: str) -> str:
    """Refuse a string UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"``): it could not be answered."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the string holds a lone surrogate (not valid Unicode text)") from None
    return text


Text = Annotated[str, AfterValidator(_utf8)]
"""A ``str`` that is valid Unicode text (encodable as UTF-8)."""


def _path_safe(episode_id: str) -> str:
    """Refuse an id with a ``.`` or ``..`` part between slashes: URLs drop those, so no ``/state/`` could read it."""
    if {".", ".."} & set(episode_id.split("/")):
        raise ValueError("an episode_id may not have '.' or '..' between slashes: URLs drop them, so "
                         "GET /state/{episode_id} could not read it")
    return episode_id


EpisodeName = Annotated[Text, AfterValidator(_path_safe)]


def to_json_number(x: Number | None) -> JSONNumber | None:
    """``37`` -> ``37``, ``Fraction(3, 2)`` -> ``"3/2"`` (``None``, a move's missing operand, stays ``None``)."""
    return x if x is None or type(x) is int else format_number(x)


def from_json_number(x: JSONNumber | None) -> Number | None:
    """Inverse of :func:`to_json_number`."""
    return normalize(Fraction(x)) if isinstance(x, str) else x


class TurnAction(Action):
    """One agent turn of ``CountdownMultiTurn-v0``: ``"21+16"``, ``"21 + 16 = 37"``, ``"undo"``, ``"give up"``."""

    turn: Text = Field(..., strict=True, description="the agent's turn (one line)")


class MoveAction(Action):
    """One move of ``Countdown-v0``: the action index (``CountdownEnv.encode_action(i, j, op)``)."""

    action: int = Field(..., strict=True, ge=0, description="action index in 0..n_actions-1")


class Strict(BaseModel):
    """A request, or a part of one, read strictly: no unknown field, no type coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ProblemSpec(Strict):
    """The ``problem`` reset field: play this puzzle instead of drawing one."""

    numbers: list[Annotated[int, Field(ge=0, le=MAX_PROBLEM_INT)]] = Field(..., min_length=2, max_length=64)
    target: int = Field(..., ge=-MAX_PROBLEM_INT, le=MAX_PROBLEM_INT)


class ResetRequest(Strict):
    """The body of ``POST /reset`` and the ``data`` of a WebSocket ``reset`` message (every field optional)."""

    seed: int | None = Field(None, ge=0, le=MAX_SEED, description="seeds the draw of the problem")
    episode_id: EpisodeName | None = Field(None, min_length=1, max_length=255, description="your own name for the episode")
    problem: ProblemSpec | None = Field(None, description="play this puzzle instead of drawing one")


class StepRequestBase(Strict):
    """The body of ``POST /step`` besides its ``action`` (:func:`step_request` adds the environment's action)."""

    episode_id: Text | None = Field(None, min_length=1, max_length=255,
                                    description="the episode /reset answered (over HTTP, required)")
    timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False, description="accepted for openenv; unused")
    request_id: Text | None = Field(None, max_length=255, description="accepted for openenv; unused")


def step_request(action_cls: type[Action]) -> type[StepRequestBase]:
    """The ``POST /step`` body model for an environment's action class."""
    from pydantic import create_model

    return create_model(f"{action_cls.__name__}Request", __base__=StepRequestBase,
                        action=(action_cls, Field(..., description="the action (see /schema)")))


class ErrorAnswer(BaseModel):
    """Every refusal over HTTP (4xx): what was wrong, in words."""

    detail: str


class TransitionModel(BaseModel):
    """A transition record of ``docs/DESIGN.md`` without its ``rules`` (the observation carries them once)."""

    model_config = ConfigDict(extra="forbid")

    state: list[JSONNumber]
    move: tuple[JSONNumber | None, str, JSONNumber | None, JSONNumber | None]
    next_state: list[JSONNumber] | None
    target: int
    valid: bool
    reason: str
    turn: int | None = None

    @staticmethod
    def fields_of(record: dict[str, Any]) -> dict[str, Any]:
        """The model's fields for a record (a dict of ``info["transitions"]``), as JSON values."""
        a, op, b, c = record["move"]
        nxt = record["next_state"]
        return {
            "state": [to_json_number(x) for x in record["state"]],
            "move": [to_json_number(a), op, to_json_number(b), to_json_number(c)],
            "next_state": None if nxt is None else [to_json_number(x) for x in nxt],
            "target": record["target"], "valid": record["valid"], "reason": record["reason"], "turn": record.get("turn"),
        }

    def record(self, rules: Rules) -> dict[str, Any]:
        """The record as the Gymnasium environments emit it (tuples, exact numbers, ``rules``)."""
        a, op, b, c = self.move
        out: dict[str, Any] = {
            "state": tuple(from_json_number(x) for x in self.state),
            "move": (from_json_number(a), op, from_json_number(b), from_json_number(c)),
            "next_state": None if self.next_state is None else tuple(from_json_number(x) for x in self.next_state),
            "target": self.target, "valid": self.valid, "reason": self.reason, "rules": rules,
        }
        if self.turn is not None:
            out["turn"] = self.turn
        return out


class _CountdownObservation(Observation):
    """What every observation carries besides ``reward`` and ``done`` (``done`` = terminated or truncated)."""

    episode_id: str = Field(..., description="pass it back as 'episode_id' with HTTP /step (WebSocket sessions need not)")
    numbers: list[int] = Field(..., description="the problem's numbers")
    target: int
    rules: dict[str, Any] = Field(..., description="Rules.to_dict() of the episode")
    state: list[JSONNumber] = Field(..., description="the numbers in play now (exact)")
    transitions: list[TransitionModel] = Field(default_factory=list, description="this step's records (docs/DESIGN.md)")
    terminated: bool = False
    truncated: bool = False
    is_success: bool | None = Field(default=None, description="whether the episode was won (once it has ended)")

    def transition_records(self) -> list[dict[str, Any]]:
        """This step's transition records exactly as the Gymnasium environment's ``info["transitions"]``."""
        rules = Rules.from_dict(self.rules)
        return [t.record(rules) for t in self.transitions]


class TurnObservation(_CountdownObservation):
    """``CountdownMultiTurn-v0``: after reset the prompt, after each step the environment's reply line."""

    text: str = Field(..., description="the prompt (reset) or the reply line (step)")
    turn: int = Field(0, description="turns played so far")
    invalid_turns: int = 0
    turn_kind: str | None = Field(default=None, description="move | undo | give_up | invalid (None at reset)")
    valid: bool | None = None
    reason: str | None = Field(default=None, description="'ok' or the refusal's reason code")
    verdict: str | None = Field(default=None, description="the verifier's reason code once the episode has ended")


class MoveObservation(_CountdownObservation):
    """``Countdown-v0``: the observation vector and the action mask."""

    observation: list[float] = Field(..., description="the Box observation (2 * max_numbers + 2 floats)")
    action_mask: list[int] = Field(..., description="1 = legal action")
    dead_end: bool = False


class CountdownState(State):
    """The episode behind a session (``GET /state/{episode_id}`` over HTTP, ``state`` over WebSocket)."""

    env_id: str | None = None
    numbers: list[int] | None = None
    target: int | None = None
    state: list[JSONNumber] | None = None
    done: bool = False
