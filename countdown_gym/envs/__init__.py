"""Gymnasium registration of the environments on import, with ``max_episode_steps=None`` (episodes end by
themselves: no ``TimeLimit`` unless asked); ``gymnasium.make_vec("Countdown-v0", ...)`` gives the native batched env.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium

_ENTRY_POINTS = {
    "Countdown-v0": ("countdown_gym.envs.countdown:CountdownEnv", "countdown_gym.envs.vector:CountdownVectorEnv"),
    "CountdownText-v0": ("countdown_gym.envs.text:CountdownTextEnv", None),
    "CountdownMultiTurn-v0": ("countdown_gym.envs.multiturn:CountdownMultiTurnEnv", None),
}


def register_envs() -> None:
    """Register the environments (idempotent)."""
    for env_id, (entry_point, vector_entry_point) in _ENTRY_POINTS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point,
                               max_episode_steps=None)


ENV_IDS = tuple(_ENTRY_POINTS)

register_envs()

_LAZY = {"CountdownEnv": "countdown_gym.envs.countdown", "CountdownVectorEnv": "countdown_gym.envs.vector",
         "CountdownTextEnv": "countdown_gym.envs.text", "CountdownMultiTurnEnv": "countdown_gym.envs.multiturn",
         "ProblemSpec": "countdown_gym.envs.problem_source", "make_problem_source": "countdown_gym.envs.problem_source"}


def __getattr__(name: str) -> Any:
    """``from countdown_gym.envs import CountdownEnv`` etc., imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ENV_IDS", "CountdownEnv", "CountdownMultiTurnEnv", "CountdownTextEnv", "CountdownVectorEnv", "ProblemSpec",
           "make_problem_source", "register_envs"]
