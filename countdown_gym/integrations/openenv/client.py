"""OpenEnv clients (openenv-core's ``EnvClient``: one WebSocket session per client) for the served environments.

    async with CountdownTurnClient(base_url="http://127.0.0.1:8000") as env:
        result = await env.reset(problem={"numbers": [21, 16, 17, 26], "target": 46})
        result = await env.step("21+16")           # a str or a TurnAction
        result.observation.text                    # '= 37 [17,26,37]'

    with CountdownTurnClient(base_url="http://127.0.0.1:8000").sync() as env:   # the same, synchronously
        env.reset(seed=0)

``reset`` takes ``seed``, ``episode_id`` and ``problem``. Errors the server answers (a step after the episode
ended, a malformed turn) raise ``RuntimeError`` with the server's message; the session goes on.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from countdown_gym.integrations.openenv.models import (
    CountdownState,
    MoveAction,
    MoveObservation,
    TurnAction,
    TurnObservation,
)


def _result(payload: dict[str, Any], cls: type) -> StepResult:
    observation = cls(**payload.get("observation", {}), reward=payload.get("reward"), done=payload.get("done", False))
    return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))


class CountdownTurnClient(EnvClient[TurnAction, TurnObservation, CountdownState]):
    """A session of a server started with ``countdown-gym serve`` (``--env CountdownMultiTurn-v0``)."""

    def _step_payload(self, action: TurnAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            action = TurnAction(turn=action)
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TurnObservation]:
        return _result(payload, TurnObservation)

    def _parse_state(self, payload: dict[str, Any]) -> CountdownState:
        return CountdownState(**payload)


class CountdownStepClient(EnvClient[MoveAction, MoveObservation, CountdownState]):
    """A session of a server started with ``countdown-gym serve --env Countdown-v0``: actions are indices."""

    def _step_payload(self, action: MoveAction | int) -> dict[str, Any]:
        if not isinstance(action, MoveAction):
            action = MoveAction(action=action)
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[MoveObservation]:
        return _result(payload, MoveObservation)

    def _parse_state(self, payload: dict[str, Any]) -> CountdownState:
        return CountdownState(**payload)
