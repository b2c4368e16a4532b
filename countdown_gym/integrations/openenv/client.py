"""OpenEnv clients (openenv-core's ``EnvClient``: one WebSocket session per client) for the served environments
(usage: ``docs/openenv.md``). ``reset`` takes ``seed``, ``episode_id`` and ``problem``; an error the server answers
raises ``RuntimeError`` with its message, and the session goes on.
"""

from __future__ import annotations

import operator
from typing import Any, Generic, TypeVar

import numpy as np
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from pydantic import BaseModel

from countdown_gym.integrations.openenv.models import (
    CountdownState,
    MoveAction,
    MoveObservation,
    TurnAction,
    TurnObservation,
)

ActT = TypeVar("ActT", bound=BaseModel)
ObsT = TypeVar("ObsT", bound=BaseModel)


class _CountdownClient(EnvClient[ActT, ObsT, CountdownState], Generic[ActT, ObsT]):
    """What both clients share: an action (or its one field's value) sent as its fields, the answer read as the
    observation model."""

    action_cls: type[ActT]
    action_field: str
    observation_cls: type[ObsT]

    def _step_payload(self, action: Any) -> dict[str, Any]:
        if isinstance(action, np.ndarray) and action.shape in ((), (1,)) and action.dtype.kind in "iu":
            action = action.item()  # a policy's one action, as the local env takes it
        elif not isinstance(action, (self.action_cls, bool, str, np.ndarray)) and hasattr(action, "__index__"):
            action = operator.index(action)  # a numpy int, as the local env takes it
        if not isinstance(action, self.action_cls):
            action = self.action_cls(**{self.action_field: action})
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        reward, done = payload.get("reward"), payload.get("done", False)
        observation = self.observation_cls(**payload.get("observation", {}), reward=reward, done=done)
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: dict[str, Any]) -> CountdownState:
        return CountdownState(**payload)


class CountdownTurnClient(_CountdownClient[TurnAction, TurnObservation]):
    """A session of a server started with ``countdown-gym serve`` (``--env CountdownMultiTurn-v0``)."""

    action_cls, action_field, observation_cls = TurnAction, "turn", TurnObservation


class CountdownStepClient(_CountdownClient[MoveAction, MoveObservation]):
    """A session of a server started with ``countdown-gym serve --env Countdown-v0``: actions are indices."""

    action_cls, action_field, observation_cls = MoveAction, "action", MoveObservation
