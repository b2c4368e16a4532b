"""Crash anywhere, resume: each training script is killed with SIGKILL at random moments (about half of them
while a checkpoint is being written), then started again with ``--resume`` (the reward comparison: started again),
until it finishes.

After every kill the harness reads, on its own, which checkpoint of the run directory is complete; the next start
must say it resumed from exactly that one (never a torn one, never an older one: it loses at most the steps since
it), or that it starts afresh when none is. Scripts whose one-thread run is bit-reproducible (the critic, the text
critic, SFT with a step schedule, GRPO in both modes, the comparison of GRPO runs) must end with exactly the weights
of an uninterrupted run. MaskablePPO cannot promise that (its checkpoint holds neither the games in progress nor the
random states; ``docs/security.md``): it must finish its steps, and a resume from one checkpoint is repeatable.

Slow (a script's start-up is seconds of imports): ``python -m pytest -m slow tests/test_crash_resume.py``. Other
random kill points: ``CRASH_SEED=7 CRASH_KILLS=6 python -m pytest -m slow tests/test_crash_resume.py``.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SEED = int(os.environ.get("CRASH_SEED", "0"))
KILLS = int(os.environ.get("CRASH_KILLS", "4"))
RUN_LIMIT_S = 900
RESUMED = re.compile(r"resumed from (\S+) at (?:step )?(\d+)")
"""What every script prints when it continues from a checkpoint."""


@dataclass
class Script:
    """How to run one training script in a run directory, and how to read its checkpoints from outside."""

    name: str
    argv: Callable[[Path], list[str]]
    saving: Callable[[Path], bool]
    """Whether a checkpoint is being written now (a temporary or unmarked checkpoint file is there)."""
    complete: Callable[[Path], int | None]
    """The step of the newest complete checkpoint in the run directory (None: none), read by the harness."""
    weights: Callable[[Path], dict[str, torch.Tensor]] | None
    """The final weights (None: the script does not promise the uninterrupted run's)."""
    resume_flag: tuple[str, ...] = ("--resume",)


def _safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


def _torch_step(path: Path, key: str = "step") -> int | None:
    try:
        return int(torch.load(path, weights_only=False, map_location="cpu")[key])
    except Exception:  # noqa: BLE001 - missing or cut off: not a complete checkpoint
        return None


def _readable_safetensors(path: Path) -> bool:
    try:
        _safetensors(path)
        return True
    except Exception:  # noqa: BLE001
        return False


def _tiny_llama(path: Path) -> Path:
    if not path.exists():
        from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, save_pretrained

        torch.manual_seed(0)
        tok = build_tokenizer()
        config = TinyLMConfig(hidden=32, layers=2, heads=2, intermediate=64, max_positions=256)
        save_pretrained(build_model(config, tok), tok, path)
    return path


# ---- the critic ----------------------------------------------------------------------------------------------------

def _critic_argv(out: Path) -> list[str]:
    return ["-m", "critics.train", "--max-train-problems", "30", "--extra-problems", "0", "--reach-extra", "300",
            "--cache-dir", "", "--steps", "60", "--batch-size", "32", "--lr", "3e-3", "--warmup", "5",
            "--value-dim", "8", "--fourier", "4", "--hidden", "32", "--depth", "2", "--goal-hidden", "32",
            "--out-dim", "16", "--pair-dim", "8", "--temperature", "0.2", "--checkpoint-every", "4", "--log-every", "10",
            "--no-calibrate", "--threads", "1", "--out", str(out)]


def _critic_complete(out: Path) -> int | None:
    """The run directory's checkpoint if its files read back and carry one step, else ``previous/`` (the one before)."""
    from safetensors import safe_open

    for d in (out, out / "previous"):
        step = _torch_step(d / "train_state.pt")
        try:
            config_step = json.loads((d / "config.json").read_text())["step"]
            with safe_open(str(d / "model.safetensors"), "pt") as f:
                weights_step = (f.metadata() or {}).get("step", str(step))
        except Exception:  # noqa: BLE001 - missing or cut off
            continue
        if step is not None and step == config_step and weights_step == str(step):
            return step
    return None


def _text_critic_argv(out: Path) -> list[str]:
    """20 steps of a small text critic over the embedded LM (nothing to build first), a checkpoint every 2 steps."""
    return ["-m", "critics.train_text", "--train-problems", "6", "--steps", "20", "--batch-size", "4", "--window", "32",
            "--head-hidden", "16", "--out-dim", "8", "--value-dim", "8", "--fourier", "4", "--goal-hidden", "16",
            "--warmup", "2", "--checkpoint-every", "2", "--log-every", "3", "--threads", "1", "--out", str(out)]


# ---- SFT -----------------------------------------------------------------------------------------------------------

def _sft_argv(out: Path) -> list[str]:
    return [str(ROOT / "baselines" / "llm_sft.py"), "--out", str(out), "--fresh-problems", "20", "--max-steps", "12",
            "--batch-size", "4", "--hidden", "32", "--intermediate", "64", "--layers", "1", "--heads", "2",
            "--eval-every", "100", "--eval-problems", "2", "--max-new-tokens", "4", "--checkpoint-every", "2",
            "--progress", "false", "--schedule", "steps", "--warmup-steps", "1", "--threads", "1"]


def _sft_complete(out: Path) -> int | None:
    for d in (out / "checkpoint", out / "checkpoint.old"):
        step = _torch_step(d / "trainer_state.pt")
        if step is not None and _readable_safetensors(d / "model.safetensors"):
            return step
    return None


# ---- GRPO ----------------------------------------------------------------------------------------------------------

def _grpo_argv(interaction: str) -> Callable[[Path], list[str]]:
    def argv(out: Path) -> list[str]:
        """A 4-step sparse GRPO run of a tiny saved Llama, a checkpoint every step."""
        model = _tiny_llama(out.parent / "grpo-model")
        return [str(ROOT / "baselines" / "llm_grpo.py"), "--model", str(model), "--interaction", interaction,
                "--rewards", "sparse", "--steps", "4", "--prompts-per-step", "2", "--num-generations", "2",
                "--max-completion-length", "8", "--eval-interval", "0", "--eval-problems", "2", "--eval-samples", "0",
                "--output-dir", str(out), "--save-steps", "1", "--train-problems", "8", "--quiet", "true",
                "--test-eval", "false", "--threads", "1"]

    return argv


def _grpo_saving(out: Path) -> bool:
    return any(not (p / "checkpoint_complete.json").exists() for p in out.glob("checkpoint-*"))


def _grpo_complete(out: Path) -> int | None:
    """The newest ``checkpoint-N`` with its completion marker, its state and weights readable."""
    found = sorted((int(p.name.split("-")[1]), p) for p in out.glob("checkpoint-*") if p.name.split("-")[1].isdigit())
    for step, p in reversed(found):
        try:
            state = json.loads((p / "trainer_state.json").read_text())
        except (OSError, ValueError):
            continue
        if (p / "checkpoint_complete.json").is_file() and state.get("global_step") == step and \
                _readable_safetensors(p / "model.safetensors"):
            return step
    return None


# ---- MaskablePPO ---------------------------------------------------------------------------------------------------

def _sb3_argv(out: Path) -> list[str]:
    return [str(ROOT / "baselines" / "sb3_ppo.py"), "--output-dir", str(out.parent), "--run-name", out.name,
            "--total-timesteps", "2048", "--num-envs", "4", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1",
            "--checkpoint-every", "128", "--eval-every", "0", "--eval-limit", "5", "--eval-split", "validation",
            "--progress", "false", "--report-to", "none", "--threads", "1"]


def _sb3_complete(out: Path) -> int | None:
    found = sorted((int(p.stem.split("_")[1]), p) for p in (out / "checkpoints").glob("model_*_steps.zip"))
    for step, p in reversed(found):
        try:
            with zipfile.ZipFile(p) as z:
                if z.testzip() is None:
                    return step
        except (OSError, zipfile.BadZipFile):
            continue
    return None


# ---- the reward comparison -----------------------------------------------------------------------------------------

def _compare_argv(out: Path) -> list[str]:
    """Two arms x two seeds of 3-step GRPO runs of a tiny Llama; the records and page in ``out``."""
    model = _tiny_llama(out.parent / "grpo-model")
    return [str(ROOT / "baselines" / "compare_llm_rewards.py"), "--model", str(model), "--variants", "sparse,oracle-perfect",
            "--seeds", "0-1", "--steps", "3", "--prompts-per-step", "2", "--num-generations", "2",
            "--max-completion-length", "8", "--eval-interval", "0", "--eval-problems", "2", "--test-problems", "4",
            "--jobs", "1", "--runs-dir", str(out / "runs"), "--results-dir", str(out), "--name", "cmp",
            "--train-pass-rates", "none", "--extra-args", "--save-steps 1 --train-problems 8"]


def _compare_weights(out: Path) -> dict[str, torch.Tensor]:
    """Every run's final weights, and every record's outcomes as tensors (so both are compared)."""
    weights: dict[str, torch.Tensor] = {}
    for run in sorted((out / "runs").glob("*-s*")):
        for k, v in _safetensors(run / "final" / "model.safetensors").items():
            weights[f"{run.name}/{k}"] = v
    for record in sorted((out / "cmp").glob("*.json.gz")):
        r = json.loads(gzip.decompress(record.read_bytes()))
        weights[f"{record.name}/outcomes"] = torch.tensor([int(c) for c in r["test_outcomes"]])
        weights[f"{record.name}/zero_std"] = torch.tensor(r["frac_reward_zero_std"])
    assert len(weights) > 0
    return weights


def _compare_saving(out: Path) -> bool:
    return any(_grpo_saving(run) for run in (out / "runs").glob("*-s*"))


SCRIPTS = {
    "critic": Script("critic", _critic_argv,
                     lambda out: any(out.glob("*.tmp")),  # previous.tmp included
                     _critic_complete, lambda out: _safetensors(out / "model.safetensors")),
    "text-critic": Script("text-critic", _text_critic_argv, lambda out: any(out.glob("*.tmp")),  # tokenizer.tmp too
                          _critic_complete, lambda out: _safetensors(out / "model.safetensors")),
    "sft": Script("sft", _sft_argv, lambda out: (out / "checkpoint.tmp").exists() or (out / "checkpoint.old").exists(),
                  _sft_complete, lambda out: _safetensors(out / "final" / "model.safetensors")),
    "grpo-multi-turn": Script("grpo-multi-turn", _grpo_argv("multi-turn"), _grpo_saving, _grpo_complete,
                              lambda out: _safetensors(out / "final" / "model.safetensors")),
    "grpo-single-pass": Script("grpo-single-pass", _grpo_argv("single-pass"), _grpo_saving, _grpo_complete,
                               lambda out: _safetensors(out / "final" / "model.safetensors")),
    "sb3": Script("sb3", _sb3_argv,
                  lambda out: any((out / "checkpoints").glob("*.tmp*")) if (out / "checkpoints").is_dir() else False,
                  _sb3_complete, None),
    "comparison": Script("comparison", _compare_argv, _compare_saving, lambda out: None, _compare_weights,
                         resume_flag=()),
}


def _start(script: Script, out: Path, resume: bool) -> subprocess.Popen:
    argv = [sys.executable, *script.argv(out), *(script.resume_flag if resume else ())]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def _started(out: Path) -> bool:
    """Whether a run directory holds a run (a run killed before it wrote one starts anew, without --resume)."""
    return any((out / name).exists() for name in ("options.json", "args.json", "runs"))


def run_with_kills(script: Script, out: Path, rng: random.Random, typical_s: float, kills: int) -> list[str]:
    """Run ``script`` in ``out`` until it exits 0, killing it ``kills`` times: at a random moment of its typical run
    time, or (every other kill on average) the moment it is seen writing a checkpoint. After each kill, the next
    start must resume from the checkpoint the harness finds complete. Returns each run's output."""
    outputs: list[str] = []
    expected: int | None = None
    for attempt in range(kills + 1):
        resuming = _started(out)
        p = _start(script, out, resume=resuming)
        if attempt < kills:
            mid_save = rng.random() < 0.5
            at = time.monotonic() + rng.uniform(0.05, 1.0) * typical_s
            while p.poll() is None and time.monotonic() < at + (typical_s if mid_save else 0):
                if (script.saving(out) if mid_save else time.monotonic() >= at):
                    break
                time.sleep(0.002)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        text = p.communicate(timeout=RUN_LIMIT_S)[0]
        outputs.append(text)
        assert "Traceback" not in text, text[-3000:]
        if resuming and script.resume_flag:
            said = RESUMED.search(text)
            if expected is None:
                assert said is None, f"{script.name} resumed from {said and said[0]} but no checkpoint was complete"
            elif said is not None or p.returncode != -signal.SIGKILL:  # a run killed during start-up says nothing
                assert said is not None and int(said[2]) == expected, \
                    f"{script.name}: the newest complete checkpoint is step {expected}; the run said {said and said[0]}"
        if p.returncode == 0:
            return outputs
        assert p.returncode == -signal.SIGKILL, f"run {attempt} of {script.name} failed:\n{text[-3000:]}"
        expected = script.complete(out)
    raise AssertionError(f"{script.name} did not finish after {kills} kills:\n{outputs[-1][-3000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_killed_anywhere_the_run_resumes_and_ends_as_an_uninterrupted_one(name: str, tmp_path: Path) -> None:
    script = SCRIPTS[name]
    straight = _start(script, tmp_path / "straight", resume=False)
    t0 = time.monotonic()  # after _start: a model the script's argv builds first (a tiny Llama) is not run time
    text = straight.communicate(timeout=RUN_LIMIT_S)[0]
    assert straight.returncode == 0, text[-3000:]
    typical = time.monotonic() - t0
    rng = random.Random(f"{SEED}-{name}")
    outputs = run_with_kills(script, tmp_path / "killed", rng, typical, KILLS)
    assert len(outputs) >= 2  # at least one kill landed
    if script.weights is None:  # MaskablePPO: its steps all done, from the checkpoints it was given
        assert _sb3_complete(tmp_path / "killed") is not None
        assert (tmp_path / "killed" / "final_model.zip").is_file()
        from stable_baselines3.common.save_util import load_from_zip_file

        steps = [load_from_zip_file(tmp_path / d / "final_model.zip")[0]["num_timesteps"] for d in ("straight", "killed")]
        assert steps[1] >= steps[0] >= 2048
    else:
        a, b = script.weights(tmp_path / "straight"), script.weights(tmp_path / "killed")
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), (name, k, outputs)


@pytest.mark.slow
def test_maskable_ppo_resumed_twice_from_one_checkpoint_ends_alike(tmp_path: Path) -> None:
    """SB3 promises repeatability, not the uninterrupted run: two resumes from one checkpoint end with one model."""
    import shutil

    first = tmp_path / "a"
    p = _start(SCRIPTS["sb3"], first, resume=False)
    while p.poll() is None and _sb3_complete(first) is None:
        time.sleep(0.01)
    os.killpg(p.pid, signal.SIGKILL)
    p.communicate()
    step = _sb3_complete(first)
    assert step is not None
    for ckpt in (first / "checkpoints").glob("model_*_steps.zip"):
        if int(ckpt.stem.split("_")[1]) != step:
            ckpt.unlink()
    shutil.copytree(first, tmp_path / "b")
    for out in (first, tmp_path / "b"):
        r = _start(SCRIPTS["sb3"], out, resume=True)
        text = r.communicate(timeout=RUN_LIMIT_S)[0]
        assert r.returncode == 0 and f"at {step}" in text, text[-3000:]
    from stable_baselines3.common.save_util import load_from_zip_file

    a = load_from_zip_file(first / "final_model.zip")[1]["policy"]
    b = load_from_zip_file(tmp_path / "b" / "final_model.zip")[1]["policy"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
