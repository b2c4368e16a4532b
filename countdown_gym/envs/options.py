"""The checks and defaults of the environments' options (``render_mode`` for all; the rest for ``Countdown-v0`` and
its vector env)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from countdown_gym.game.rules import Rules

INVALID_ACTION_MODES = ("raise", "penalty")
DEFAULT_VALUE_SCALE = 1000.0
"""Value normalisation when the rules have no ``value_limit``."""
IMAGE_MODES: tuple[str, ...] = ("rgb_array", "rgb_array_list", "depth_array", "depth_array_list")
"""Gymnasium's image render modes."""


class InvalidActionError(ValueError):
    """A masked action was taken with ``invalid_action="raise"``."""


def check_max_steps(max_steps: Any) -> int | None:
    if max_steps is None:
        return None
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int or None, got {max_steps!r}")
    return int(max_steps)


def check_invalid_action(mode: Any) -> str:
    if mode not in INVALID_ACTION_MODES:
        raise ValueError(f"invalid_action must be one of {INVALID_ACTION_MODES}, got {mode!r}")
    return mode


def check_penalty(penalty: Any) -> float:
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float, np.number)) or not math.isfinite(penalty):
        raise ValueError(f"invalid_penalty must be a finite number, got {penalty!r}")
    return float(penalty)


def check_value_scale(value_scale: Any, rules: Rules) -> float:
    if value_scale is None:
        return float(rules.value_limit) if rules.value_limit is not None else DEFAULT_VALUE_SCALE
    if (
        isinstance(value_scale, bool)
        or not isinstance(value_scale, (int, float, np.number))
        or not math.isfinite(value_scale)
        or value_scale <= 0
    ):
        raise ValueError(f"value_scale must be a positive finite number or None, got {value_scale!r}")
    return float(value_scale)


def set_step_options(env: Any, max_steps: Any, invalid_action: Any, invalid_penalty: Any, value_scale: Any) -> None:
    """Check the step-level options and set them on ``env`` (whose ``rules`` are set)."""
    env.max_steps = check_max_steps(max_steps)
    env.invalid_action = check_invalid_action(invalid_action)
    env.invalid_penalty = check_penalty(invalid_penalty)
    env.value_scale = check_value_scale(value_scale, env.rules)


def check_render_mode(render_mode: str | None, metadata: Mapping[str, Any], env_name: str) -> str | None:
    """``render_mode`` if ``metadata["render_modes"]`` lists it (or ``None``).

    An image mode the environment does not draw is a ``TypeError`` (Stable-Baselines3's ``make_vec_env`` asks for
    ``"rgb_array"`` and retries without it on exactly that error); any other unknown mode a ``ValueError``.
    """
    modes = list(metadata["render_modes"])
    if render_mode is None or render_mode in modes:
        return render_mode
    if render_mode in IMAGE_MODES:
        raise TypeError(
            f"{env_name} draws no images: render_mode must be one of {modes} or None, got {render_mode!r} "
            "(Countdown-v0 has render_mode='rgb_array')"
        )
    raise ValueError(f"render_mode must be one of {modes} or None, got {render_mode!r}")
