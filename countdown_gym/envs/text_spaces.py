"""The text environments' spaces: Gymnasium's ``Text`` and ``Sequence`` with a shape and a dtype that
array-buffered vector environments can hold.

Gymnasium's ``Text`` and ``Sequence`` have ``shape = None``, and ``Text``'s dtype is ``'<U'``: Stable-Baselines3's
default vector env (``DummyVecEnv``, what ``make_vec_env`` builds) allocates one numpy buffer per observation from
``space.shape`` and ``space.dtype``, so ``None`` crashes it (``TypeError: 'NoneType' object is not iterable``) and a
``'<U'`` buffer would cut every string to one character. These subclasses have ``shape = ()`` and ``dtype = object``:
one observation is one element of an object array (a whole string, or a token-id array). Everything else is
Gymnasium's (``contains``, ``sample``, equality, and ``gymnasium.make_vec``'s batching, which dispatches on the base
classes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


class _ObjectShaped:
    """Observations that fit an object array: ``shape == ()``, ``dtype == object``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shape = ()
        self.dtype = np.dtype(object)


class TextSpace(_ObjectShaped, spaces.Text):
    """``gymnasium.spaces.Text`` whose observations fit an object array (``shape == ()``, ``dtype == object``)."""


class TokenIdsSpace(_ObjectShaped, spaces.Sequence):
    """``gymnasium.spaces.Sequence`` whose observations fit an object array (``shape == ()``, ``dtype == object``)."""
