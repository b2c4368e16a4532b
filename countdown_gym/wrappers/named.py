"""``OracleReward`` and ``ContrastiveCriticReward``: the registry's oracle and critic variants under the names and
defaults of their first wrappers (keys ``oracle`` / ``critic``, ``..._shaping`` with ``potential=True``).

Each is a :class:`~countdown_gym.rewards.wrapper.TermReward` of a registry entry
(:mod:`countdown_gym.rewards.variants`), so its values are exactly that variant's (``docs/rewards.md``).
"""

from __future__ import annotations

from os import PathLike

import gymnasium as gym

from countdown_gym.rewards.terms import Scorer
from countdown_gym.rewards.variants import get_variant
from countdown_gym.rewards.wrapper import TermReward

ORACLE_MODES: tuple[str, ...] = ("perfect", "reachable")
"""``OracleReward``'s modes: the variants ``oracle-perfect`` and ``oracle-reachable``."""


class OracleReward(TermReward, gym.utils.RecordConstructorArgs):
    """Adds the oracle's dense reward (exact reachability from the solver) to Countdown-v0 or CountdownText-v0.

    Additive (``potential=False``), per move: ``mode="perfect"`` (the seed paper's oracle, variant
    ``oracle-perfect``): ``+scale`` for a valid move that keeps the target reachable, ``0`` otherwise;
    ``mode="reachable"`` (``oracle-reachable``): ``+scale`` for such a move, ``-scale`` for an invalid move or a
    move into a dead end. Potential-based (``potential=True``, variant ``oracle-potential``): ``F = gamma * Phi(s')
    - Phi(s)`` per step with ``Phi(s) = scale * [target reachable from s]`` (``mode`` unused); set ``gamma`` to the
    agent's discount factor. The term is reported in ``info["reward_terms"]`` under ``key`` (default ``"oracle"``,
    or ``"oracle_shaping"`` with ``potential=True``).

    Example:
        >>> import gymnasium as gym, countdown_gym
        >>> env = OracleReward(gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)]))
        >>> _, info = env.reset(seed=0)
        >>> _, r, *_, info = env.step(env.unwrapped.encode_action(0, 1, "-"))  # 6 - 2 = 4
        >>> info["reward_terms"]
        {'sparse': 0.0, 'oracle': 1.0}
    """

    def __init__(self, env: gym.Env, mode: str = "perfect", scale: float = 1.0, potential: bool = False,
                 gamma: float = 1.0, key: str | None = None) -> None:
        if mode not in ORACLE_MODES:
            raise ValueError(f"OracleReward mode must be one of {ORACLE_MODES}, got {mode!r}")
        gym.utils.RecordConstructorArgs.__init__(self, mode=mode, scale=scale, potential=potential, gamma=gamma, key=key)
        variant = get_variant("oracle-potential" if potential else f"oracle-{mode}")
        super().__init__(env, variant, scale=scale, gamma=gamma, key=key or ("oracle_shaping" if potential else "oracle"))
        self.mode = mode


class ContrastiveCriticReward(TermReward, gym.utils.RecordConstructorArgs):
    """Adds a learned critic's dense reward to Countdown-v0 or CountdownText-v0.

    The critic scores a state against the target: the cosine similarity of their embeddings, in ``[-1, 1]``
    (higher = more likely that the target is still reachable). Additive (``potential=False``, variant ``critic``):
    ``scale * score(next_state, target)`` per move, ``-scale`` for an invalid move. Potential-based
    (``potential=True``, variant ``critic-potential``): ``F = gamma * Phi(s') - Phi(s)`` per step with ``Phi(s) =
    scale * score(s, target)``. Key: ``"critic"`` or ``"critic_shaping"`` unless ``key`` is given.

    ``critic``: anything with ``score(states, targets)`` (:class:`~countdown_gym.rewards.terms.Scorer`):
    ``critics.load_state_critic()`` for the shipped checkpoint, ``critics.load_state_critic(path)`` for another one,
    or a text critic; one critic can be shared by many environments (this package never imports ``critics``).

    Example:
        >>> import gymnasium as gym, countdown_gym
        >>> from critics import load_state_critic
        >>> env = ContrastiveCriticReward(gym.make("Countdown-v0"), load_state_critic(), scale=0.1)
    """

    def __init__(self, env: gym.Env, critic: Scorer, scale: float = 1.0, potential: bool = False,
                 gamma: float = 1.0, key: str | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, critic=critic, scale=scale, potential=potential, gamma=gamma, key=key)
        if not callable(getattr(critic, "score", None)):
            hint = (" (a checkpoint path: load it with critics.load_state_critic(path))"
                    if critic is None or isinstance(critic, (str, bytes, PathLike)) else "")
            raise TypeError(f"critic must have a score(states, targets) method, got {type(critic).__name__}{hint}")
        variant = get_variant("critic-potential" if potential else "critic")
        super().__init__(env, variant, critic, scale=scale, gamma=gamma, key=key or ("critic_shaping" if potential else "critic"))
