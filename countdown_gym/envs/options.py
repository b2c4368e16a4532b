"""The checks and defaults of the environments' options (``render_mode`` for all; the rest for ``Countdown-v0`` and
its vector env)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from countdown_gym.game.rules import check_finite, describe_value
from countdown_gym.game.turn_game import check_budget

INVALID_ACTION_MODES = ("raise", "penalty")
DEFAULT_VALUE_SCALE = 1000.0
"""Value normalisation when the rules have no ``value_limit``."""
IMAGE_MODES: tuple[str, ...] = ("rgb_array", "rgb_array_list", "depth_array", "depth_array_list")
"""Gymnasium's image render modes."""


class InvalidActionError(ValueError):
    """A masked action was taken with ``invalid_action="raise"``."""


def reset_options(options: Any, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    """``reset(options=...)`` as a mapping (``None``: empty); ``ValueError`` for anything else or a key not ``allowed``."""
    options = {} if options is None else options
    if not isinstance(options, Mapping):
        raise ValueError(f"reset options must be a dict or None, got {describe_value(options)}")
    unknown = set(options) - set(allowed)
    if unknown:
        raise ValueError(f"unknown reset options {sorted(unknown)}; use {' or '.join(map(repr, allowed))}")
    return options


def set_step_options(env: Any, max_steps: Any, invalid_action: Any, invalid_penalty: Any, value_scale: Any) -> None:
    """Check the step-level options and set them on ``env`` (whose ``rules`` are set); ``value_scale=None``: the
    rules' ``value_limit``, else :data:`DEFAULT_VALUE_SCALE`."""
    env.max_steps = check_budget("max_steps", max_steps)
    if invalid_action not in INVALID_ACTION_MODES:
        raise ValueError(f"invalid_action must be one of {INVALID_ACTION_MODES}, got {invalid_action!r}")
    env.invalid_action = invalid_action
    env.invalid_penalty = check_finite(invalid_penalty, "invalid_penalty")
    limit = env.rules.value_limit
    env.value_scale = check_finite(value_scale, "value_scale", positive=True,  # a limit past float range: the largest
                                   default=float(min(limit, sys.float_info.max)) if limit is not None else DEFAULT_VALUE_SCALE)


def check_render_mode(render_mode: str | None, metadata: Mapping[str, Any], env_name: str) -> str | None:
    """``render_mode`` if ``metadata["render_modes"]`` lists it (or ``None``); an image mode the environment does not
    draw is a ``TypeError`` (SB3's ``make_vec_env`` retries without ``"rgb_array"`` on it), another a ``ValueError``."""
    modes = list(metadata["render_modes"])
    if render_mode is None or render_mode in modes:
        return render_mode
    if render_mode in IMAGE_MODES:
        raise TypeError(
            f"{env_name} draws no images: render_mode must be one of {modes} or None, got {render_mode!r} "
            "(Countdown-v0 has render_mode='rgb_array')"
        )
    raise ValueError(f"render_mode must be one of {modes} or None, got {render_mode!r}")
