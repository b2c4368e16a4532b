"""The dense-reward wrappers under their public name: ``from countdown_gym.wrappers import OracleReward``.
They live in :mod:`countdown_gym.rewards.wrappers`."""

from countdown_gym.rewards.wrappers import *  # noqa: F403
from countdown_gym.rewards.wrappers import __all__  # noqa: F401
