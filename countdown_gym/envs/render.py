"""The one check of an environment's ``render_mode`` argument."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

IMAGE_MODES: tuple[str, ...] = ("rgb_array", "rgb_array_list", "depth_array", "depth_array_list")
"""Gymnasium's image render modes."""


def check_render_mode(render_mode: str | None, metadata: Mapping[str, Any], env_name: str) -> str | None:
    """``render_mode`` if ``metadata["render_modes"]`` lists it (or ``None``).

    An image mode the environment does not draw is a ``TypeError``: Stable-Baselines3's ``make_vec_env`` asks for
    ``render_mode="rgb_array"`` and makes the environment again without it on exactly that error. Any other
    unknown mode is a ``ValueError``.
    """
    modes = list(metadata["render_modes"])
    if render_mode is None or render_mode in modes:
        return render_mode
    if render_mode in IMAGE_MODES:
        raise TypeError(f"{env_name} draws no images: render_mode must be one of {modes} or None, got {render_mode!r} "
                        "(Countdown-v0 has render_mode='rgb_array')")
    raise ValueError(f"render_mode must be one of {modes} or None, got {render_mode!r}")
