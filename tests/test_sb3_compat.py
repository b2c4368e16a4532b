"""Gymnasium and Stable-Baselines3 rough edges: make_vec_env for every registered id (its rgb_array request and
TypeError fallback), masks through wrappers, and a masked sampler under each autoreset mode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import countdown_gym
from countdown_gym.envs import ENV_IDS

sb3 = pytest.importorskip("stable_baselines3")
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*render_mode.*:UserWarning")


def test_the_package_registers_three_environments() -> None:
    assert ENV_IDS == ("Countdown-v0", "CountdownText-v0", "CountdownMultiTurn-v0")
    assert all(i in gym.registry for i in ENV_IDS)
    assert "three" in countdown_gym.__doc__ and all(i in countdown_gym.__doc__ for i in ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS[1:])
def test_text_environments_refuse_image_modes_with_the_typeerror_sb3_expects(env_id: str) -> None:
    with pytest.raises(TypeError, match="draws no images"):
        gym.make(env_id, render_mode="rgb_array")
    with pytest.raises(ValueError, match="render_mode must be one of"):
        gym.make(env_id, render_mode="video")
    assert gym.make(env_id, render_mode="ansi").unwrapped.render_mode == "ansi"


def test_make_vec_env_countdown_renders_frames_and_masks_reach_maskable_ppo() -> None:
    vec = make_vec_env("Countdown-v0", n_envs=2, env_kwargs={"preset": "longproc-0.5k"})
    assert isinstance(vec, DummyVecEnv) and vec.render_mode == "rgb_array"
    vec.reset()
    frames = vec.get_images()
    assert len(frames) == 2 and frames[0].shape == (96, 128, 3) and frames[0].dtype == np.uint8
    from sb3_contrib.common.maskable.utils import get_action_masks

    masks = get_action_masks(vec)  # env_method("action_masks") through the Monitor and gym.make's wrappers
    assert masks.shape == (2, vec.action_space.n) and masks.any(axis=1).all()
    vec.step(np.array([np.flatnonzero(m)[0] for m in masks]))
    vec.close()


def _turn(env_id: str) -> str:
    return "undo" if env_id == "CountdownMultiTurn-v0" else "1 + 1 = 2"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_vec_env_default_vec_env_holds_every_environment(env_id: str) -> None:
    """SB3's default DummyVecEnv preallocates one numpy buffer per observation from the space's shape and dtype: the
    text spaces give ``()`` and ``object``, so whole strings come back, equal to a single environment's."""
    vec = make_vec_env(env_id, n_envs=2, seed=7)
    try:
        assert isinstance(vec, DummyVecEnv)
        obs = vec.reset()
        singles = [gym.make(env_id) for _ in range(2)]
        first = [env.reset(seed=7 + i)[0] for i, env in enumerate(singles)]
        if env_id == "Countdown-v0":
            assert obs.shape == (2, *vec.observation_space.shape) and np.array_equal(obs, np.stack(first))
            return
        assert obs.shape == (2,) and obs.dtype == object and obs.tolist() == first and all(len(o) > 20 for o in first)  # whole strings
        obs, reward, done, info = vec.step([_turn(env_id)] * 2)
        for i, env in enumerate(singles):
            o, r, terminated, truncated, inf = env.step(_turn(env_id))
            assert (obs[i], reward[i], done[i]) == (o, r, terminated or truncated)
            assert info[i]["transitions"] == inf["transitions"]
    finally:
        vec.close()


def test_make_vec_env_text_environment_with_token_ids() -> None:
    """The tokenizer mode's Dict observation (text and a variable-length token-id array) fits DummyVecEnv too."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["<unk>", "<eos>", *"0123456789+-*/=()\n ", "Try", "give", "up"])}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    vec = make_vec_env("CountdownText-v0", n_envs=2, env_kwargs={"action_mode": "token", "tokenizer": raw,
                                                                "eos_token_id": 1})
    try:
        obs = vec.reset()
        assert obs["text"].dtype == object and all(isinstance(t, str) and t for t in obs["text"])
        assert all(isinstance(ids, np.ndarray) and len(ids) > 10 for ids in obs["token_ids"])
        before = [len(ids) for ids in obs["token_ids"]]  # the two problems' prompts may differ in length
        obs, *_ = vec.step(np.array([vocab["1"], vocab["2"]]))
        assert [t[-1] for t in obs["text"]] == ["1", "2"] and [len(ids) for ids in obs["token_ids"]] == [n + 1 for n in before]
    finally:
        vec.close()


@pytest.mark.parametrize("env_id", ENV_IDS[1:])
def test_make_vec_env_text_environments_in_subprocesses(env_id: str) -> None:
    vec = make_vec_env(env_id, n_envs=2, vec_env_cls=SubprocVecEnv, vec_env_kwargs={"start_method": "fork"})
    try:
        assert vec.render_mode is None  # created again without the rgb_array request
        obs = vec.reset()
        assert obs.shape == (2,) and all(isinstance(o, str) and o for o in obs.tolist())
        obs, reward, done, info = vec.step([_turn(env_id)] * 2)
        assert len(info) == 2 and "transitions" in info[0]
    finally:
        vec.close()


def test_masks_through_wrappers() -> None:
    from gymnasium.wrappers import RecordEpisodeStatistics, TimeLimit

    env = RecordEpisodeStatistics(TimeLimit(gym.make("Countdown-v0"), 10))
    obs, info = env.reset(seed=0)
    with pytest.raises(AttributeError):
        env.action_masks()  # Gymnasium 1.x wrappers forward no methods
    mask = env.get_wrapper_attr("action_masks")()
    assert mask.dtype == bool and (mask == info["action_mask"].astype(bool)).all()
    obs, reward, terminated, truncated, info = env.step(int(np.flatnonzero(mask)[0]))
    assert (env.get_wrapper_attr("action_masks")() == info["action_mask"].astype(bool)).all()


def _run(mode: AutoresetMode, steps: int = 30) -> dict[str, int]:
    rng = np.random.default_rng(0)
    envs = gym.make_vec("Countdown-v0", num_envs=3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode})
    obs, info = envs.reset(seed=0)
    masks, seen = info["action_mask"], {"episodes": 0, "empty_masks": 0}
    for _ in range(steps):
        empty = ~masks.any(axis=1)
        seen["empty_masks"] += int(empty.sum())
        if mode != AutoresetMode.NEXT_STEP:
            assert not empty.any()
        action = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in masks])
        obs, reward, terminated, truncated, info = envs.step(action)
        masks = info["action_mask"]
        done = terminated | truncated
        seen["episodes"] += int(done.sum())
        if mode == AutoresetMode.DISABLED and done.any():
            obs, reset_info = envs.reset(options={"reset_mask": done})
            masks[done] = reset_info["action_mask"][done]
    envs.close()
    return seen


def test_masked_sampling_under_each_autoreset_mode() -> None:
    nxt, same, off = _run(AutoresetMode.NEXT_STEP), _run(AutoresetMode.SAME_STEP), _run(AutoresetMode.DISABLED)
    assert nxt["episodes"] > 3 and same["episodes"] > 3 and off["episodes"] > 3
    assert nxt["empty_masks"] > 0  # the rows about to be reset: their action is ignored
    assert same["empty_masks"] == off["empty_masks"] == 0
