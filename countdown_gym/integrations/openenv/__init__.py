"""OpenEnv integration: the package's environments as an OpenEnv server (:func:`make_app`, run by ``countdown-gym
serve``) and its clients. Needs ``pip install 'countdown-gym[openenv]'`` (openenv-core). Guide: ``docs/openenv.md``.
"""

from __future__ import annotations

try:
    import openenv.core  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(
        "countdown_gym.integrations.openenv needs openenv-core: pip install 'countdown-gym[openenv]'"
    ) from e

from countdown_gym.integrations.openenv.client import CountdownStepClient, CountdownTurnClient
from countdown_gym.integrations.openenv.models import (
    CountdownState,
    MoveAction,
    MoveObservation,
    ResetRequest,
    TransitionModel,
    TurnAction,
    TurnObservation,
)
from countdown_gym.integrations.openenv.server import ENVIRONMENTS, make_app

__all__ = [
    "ENVIRONMENTS",
    "CountdownState",
    "CountdownStepClient",
    "CountdownTurnClient",
    "MoveAction",
    "MoveObservation",
    "ResetRequest",
    "TransitionModel",
    "TurnAction",
    "TurnObservation",
    "make_app",
]
