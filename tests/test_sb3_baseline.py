"""Smoke tests of the MaskablePPO baseline: a few hundred steps, evaluation, resume, submission."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))

import gymnasium as gym  # noqa: E402
import sb3_ppo  # noqa: E402
from sb3_policy import MoveFeatures  # noqa: E402

import countdown_gym  # noqa: E402, F401


def test_move_features_rows_describe_each_legal_move() -> None:
    env = MoveFeatures(gym.make("Countdown-v0"))
    obs, info = env.reset(options={"problem": countdown_gym.Problem((6, 2, 5, 3), 8)})
    rows = obs.reshape(env.n_actions, env.row)
    assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(rows[:, 0].astype(np.int8), info["action_mask"])
    # exactly the moves whose result is the target are flagged: 6+2, 2+6, 5+3, 3+5
    assert rows[:, 3].sum() == 4


@pytest.mark.parametrize("reward", ["sparse", "oracle-perfect", "critic"])
def test_train_evaluate_resume_and_submit(tmp_path: Path, reward: str) -> None:
    common = ["--reward", reward, "--num-envs", "2", "--n-steps", "64", "--batch-size", "64", "--n-epochs", "1",
              "--eval-limit", "5", "--eval-every", "128", "--checkpoint-every", "128", "--output-dir", str(tmp_path),
              "--run-name", "r", "--no-progress", "--eval-split", "validation"]
    first = sb3_ppo.main([*common, "--total-timesteps", "256"])
    assert 0.0 <= first["success_rate"] <= 1.0 and first["eval_problems"] == 5
    assert (tmp_path / "r" / "final_model.zip").exists()
    assert list((tmp_path / "r" / "checkpoints").glob("model_*_steps.zip"))
    resumed = sb3_ppo.main([*common, "--total-timesteps", "384", "--resume"])
    assert resumed["total_timesteps"] >= 384
    assert json.loads((tmp_path / "r" / "result.json").read_text())["total_timesteps"] == resumed["total_timesteps"]


def test_submission_of_an_evaluation_is_rescored_by_the_leaderboard(tmp_path: Path) -> None:
    from countdown_gym.leaderboard import read_submission

    out = tmp_path / "ppo.jsonl"
    result = sb3_ppo.main(["--num-envs", "2", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1",
                           "--total-timesteps", "64", "--eval-split", "validation", "--eval-every", "1000",
                           "--output-dir", str(tmp_path), "--run-name", "s", "--no-progress", "--submit", str(out)])
    assert out.exists() and result["eval_problems"] == 500
    assert read_submission(out) is not None


def test_bad_reward_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sb3_ppo.parse_args(["--reward", "dense"])
    assert "--reward must be one of" in capsys.readouterr().err
