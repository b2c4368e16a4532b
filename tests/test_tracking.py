"""Experiment logging: the Tracker, --report-to, and TensorBoard event files from tiny runs of every training script."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from countdown_gym.runkit.tracking import Tracker, report_to_names

pytest.importorskip("tensorboard")
ROOT = Path(__file__).resolve().parents[1]


def scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the event files under ``logdir``: [(step, value), ...]."""
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    assert list(logdir.rglob("events.out.tfevents.*")), f"no event files under {logdir}"
    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    out: dict[str, list[tuple[int, float]]] = {}
    for run, tags in mux.Runs().items():
        for tag in tags["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in mux.Scalars(run, tag))
    return out


def test_report_to_names() -> None:
    assert report_to_names("none") == [] and report_to_names(" tensorboard ") == ["tensorboard"]
    for bad in ("", ",", "nosuch"):
        with pytest.raises(ValueError):
            report_to_names(bad)


def test_tracker_logs_through_transformers_integrations(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    with Tracker("tensorboard", tmp_path, config={"lr": 0.1}) as t:
        t.log({"loss": 1.5, "eval_success": 0.25, "note": "", "flag": True}, step=3)
        t.log({"loss": 0.5}, step=4)
    got = scalars(tmp_path / "tensorboard")
    assert got == {"train/loss": [(3, 1.5), (4, 0.5)], "eval/success": [(3, 0.25)]}


def test_tracker_without_transformers_writes_tensorboard_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    for name in [m for m in sys.modules if m == "transformers" or m.startswith("transformers.")] or ["transformers"]:
        monkeypatch.setitem(sys.modules, name, None)  # the critics / sb3 extras: no transformers
    with pytest.raises(ValueError, match=r"countdown-gym\[llm\]"):
        report_to_names("wandb")
    with Tracker("tensorboard", tmp_path) as t:
        t.log({"loss": 2.0, "eval_success": 0.5}, step=7)
    assert scalars(tmp_path / "tensorboard") == {"train/loss": [(7, 2.0)], "eval/success": [(7, 0.5)]}


def test_sb3_ppo_logs_training_and_validation_to_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("sb3_contrib")
    from baselines import sb3_ppo

    sb3_ppo.main(["--num-envs", "2", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1", "--total-timesteps", "128",
                  "--eval-limit", "3", "--eval-every", "64", "--eval-problems", "3", "--output-dir", str(tmp_path),
                  "--run-name", "r", "--no-progress", "--eval-split", "validation"])  # fmt: skip
    got = scalars(tmp_path / "r" / "logs")
    assert "eval/validation_success" in got and "train/loss" in got and "rollout/ep_rew_mean" in got
    with pytest.raises(SystemExit):
        sb3_ppo.parse_args(["--report-to", "nosuch"])


def test_llm_sft_logs_loss_and_validation_to_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from baselines import llm_sft
    from countdown_gym import dataclass_cli

    out = tmp_path / "run"
    llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, [
        "--out", str(out), "--fresh-problems", "10", "--max-steps", "2", "--batch-size", "2", "--hidden", "32",
        "--intermediate", "64", "--layers", "1", "--heads", "2", "--eval-every", "2", "--eval-problems", "2",
        "--max-new-tokens", "4", "--checkpoint-every", "2", "--progress", "false", "--schedule", "steps"]))  # fmt: skip
    got = scalars(out / "tensorboard")
    assert [s for s, _ in got["train/loss"]] == [1, 2] and [s for s, _ in got["eval/greedy_success"]] == [2]
    assert {"train/learning_rate", "train/tokens_per_s"} <= set(got)
    with pytest.raises(SystemExit):
        dataclass_cli.parse(llm_sft.SFTConfig, ["--report-to", "nosuch"])


def test_critics_train_logs_the_loss_to_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from critics.models import ModelConfig
    from critics.train import TrainConfig, parse_args, train

    out = train(TrainConfig(model=ModelConfig(hidden=16, goal_hidden=16, out_dim=8, pair_dim=0), max_train_problems=10, extra_problems=0,
                            cache_dir="", steps=4, batch_size=16, warmup=1, out=str(tmp_path / "run"), log_every=2,
                            calibrate=False), progress=False)  # fmt: skip
    got = scalars(out / "tensorboard")
    assert [s for s, _ in got["train/loss"]] == [2, 4] and "train/lr" in got
    with pytest.raises(SystemExit):
        parse_args(["--report-to", "nosuch"])


def test_llm_grpo_logs_trl_metrics_and_validation_to_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from baselines import llm_grpo
    from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, save_pretrained

    tok = build_tokenizer()
    save_pretrained(build_model(TinyLMConfig(hidden=32, layers=1, heads=2, intermediate=64), tok), tok, tmp_path / "model")
    out = tmp_path / "run"
    llm_grpo.train(llm_grpo.Options(
        test_eval=False,
        model=str(tmp_path / "model"), rewards="sparse", steps=1, prompts_per_step=2, num_generations=2,
        max_completion_length=8, eval_interval=1, eval_problems=2, eval_samples=0, output_dir=str(out),
        train_problems=4, train_pass_rates="none", quiet=True))  # fmt: skip
    got = scalars(out / "tensorboard")
    assert [s for s, _ in got["eval/greedy_success"]] == [0, 1]
    assert "train/loss" in got and "train/reward" in got


def test_report_to_wandb_without_wandb_names_the_extra() -> None:
    import importlib.util

    pytest.importorskip("transformers")
    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    from countdown_gym.runkit.tracking import report_to_names

    with pytest.raises(ValueError, match=r"--report-to wandb: the wandb package is not installed \(pip install 'countdown-gym\[wandb\]'\)"):
        report_to_names("wandb")


def test_report_to_tensorboard_needs_tensorboard_itself_even_where_transformers_counts_tensorboardx(monkeypatch) -> None:
    """TensorBoard is written through torch's writer, which needs the tensorboard package; transformers also counts
    tensorboardX as TensorBoard, which would pass the check and fail in Tracker with an ImportError traceback."""
    import importlib.util

    pytest.importorskip("transformers")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else find_spec(name, *a))
    monkeypatch.setattr("countdown_gym.runkit.tracking._integrations", lambda: (["tensorboard", "wandb"], ["tensorboard"]))
    with pytest.raises(ValueError, match=r"--report-to tensorboard: the tensorboard package is not installed \(pip install tensorboard\)"):
        report_to_names("tensorboard")
    assert report_to_names("all") == []
