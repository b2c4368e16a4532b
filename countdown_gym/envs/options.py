"""The options of the step-level environments (``Countdown-v0`` and its vector env): their checks and defaults."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from countdown_gym.game.rules import Rules

INVALID_ACTION_MODES = ("raise", "penalty")
DEFAULT_VALUE_SCALE = 1000.0
"""Value normalisation when the rules have no ``value_limit``."""


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
