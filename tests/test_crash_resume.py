"""Crash anywhere, resume: each training script is killed with SIGKILL at random moments (some of them while a
checkpoint is being written), then started again with ``--resume``, until it finishes. Every resume must continue
from the last complete checkpoint (never a torn one), and where the script promises it (the critic, SFT with a
step schedule: one thread, every random state in the checkpoint) the run must end with exactly the weights of an
uninterrupted run. GRPO (the multi-turn mode) is killed and resumed the same way and must finish; it promises to
continue from the last complete checkpoint, not the uninterrupted run's weights. MaskablePPO is not here yet
(``docs/security.md``).

Slow (a script's start-up is seconds of imports): ``python -m pytest -m slow tests/test_crash_resume.py``. Other
random kill points: ``CRASH_SEED=7 CRASH_KILLS=6 python -m pytest -m slow tests/test_crash_resume.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SEED = int(os.environ.get("CRASH_SEED", "0"))
KILLS = int(os.environ.get("CRASH_KILLS", "4"))
RUN_LIMIT_S = 900


@dataclass
class Script:
    """How to run one training script in a run directory, and how to tell that it is writing a checkpoint."""

    name: str
    argv: Callable[[Path], list[str]]
    saving: Callable[[Path], bool]
    """Whether a checkpoint is being written now (a temporary or unmarked checkpoint file is there)."""
    weights: Callable[[Path], dict[str, torch.Tensor]] | None
    """The final weights (None: the script does not promise the uninterrupted run's)."""


def _safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


def _critic_argv(out: Path) -> list[str]:
    return ["-m", "critics.train", "--max-train-problems", "30", "--extra-problems", "0", "--reach-extra", "300",
            "--cache-dir", "", "--steps", "60", "--batch-size", "32", "--lr", "3e-3", "--warmup", "5",
            "--value-dim", "8", "--fourier", "4", "--hidden", "32", "--depth", "2", "--goal-hidden", "32",
            "--out-dim", "16", "--pair-dim", "8", "--temperature", "0.2", "--checkpoint-every", "4", "--log-every", "10",
            "--no-calibrate", "--threads", "1", "--out", str(out)]


def _sft_argv(out: Path) -> list[str]:
    return [str(ROOT / "baselines" / "llm_sft.py"), "--out", str(out), "--fresh-problems", "20", "--max-steps", "12",
            "--batch-size", "4", "--hidden", "32", "--intermediate", "64", "--layers", "1", "--heads", "2",
            "--eval-every", "100", "--eval-problems", "2", "--max-new-tokens", "4", "--checkpoint-every", "2",
            "--progress", "false", "--schedule", "steps", "--warmup-steps", "1", "--threads", "1"]


def _grpo_argv(out: Path) -> list[str]:
    """A 4-step sparse GRPO run (multi-turn, the default mode) of a tiny saved Llama, a checkpoint every step."""
    model = out.parent / "grpo-model"
    if not model.exists():
        from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, save_pretrained

        torch.manual_seed(0)
        tok = build_tokenizer()
        config = TinyLMConfig(hidden=32, layers=2, heads=2, intermediate=64, max_positions=256)
        save_pretrained(build_model(config, tok), tok, model)
    return [str(ROOT / "baselines" / "llm_grpo.py"), "--model", str(model), "--rewards", "sparse", "--steps", "4",
            "--prompts-per-step", "2", "--num-generations", "2", "--max-completion-length", "8", "--eval-interval", "0",
            "--eval-problems", "2", "--eval-samples", "0", "--output-dir", str(out), "--save-steps", "1",
            "--train-problems", "8", "--quiet", "true", "--test-eval", "false", "--threads", "1"]


def _grpo_saving(out: Path) -> bool:
    from baselines.lm.checkpoints import MARKER, checkpoints

    return any(not (p / MARKER).exists() for p in checkpoints(out))


SCRIPTS = {
    "critic": Script("critic", _critic_argv,
                     lambda out: any(out.glob("*.tmp")) or (out / "previous.new").exists(),
                     lambda out: _safetensors(out / "model.safetensors")),
    "sft": Script("sft", _sft_argv, lambda out: (out / "checkpoint.tmp").exists() or (out / "checkpoint.old").exists(),
                  lambda out: _safetensors(out / "final" / "model.safetensors")),
    "grpo": Script("grpo", _grpo_argv, _grpo_saving, None),
}


def _start(script: Script, out: Path, resume: bool) -> subprocess.Popen:
    argv = [sys.executable, *script.argv(out), *(["--resume"] if resume else [])]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def run_with_kills(script: Script, out: Path, rng: random.Random, typical_s: float, kills: int) -> list[str]:
    """Run ``script`` in ``out`` until it exits 0, killing it ``kills`` times: at a random moment of its typical run
    time, or (every other kill on average) the moment it is seen writing a checkpoint. Returns each run's output."""
    outputs: list[str] = []
    for attempt in range(kills + 1):
        p = _start(script, out, resume=(out / "options.json").exists())  # a run killed before it began starts anew
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
        if p.returncode == 0:
            return outputs
        assert p.returncode == -signal.SIGKILL, f"run {attempt} of {script.name} failed:\n{text[-3000:]}"
        assert "Traceback" not in text
    raise AssertionError(f"{script.name} did not finish after {kills} kills:\n{outputs[-1][-3000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_killed_anywhere_the_run_resumes_and_ends_as_an_uninterrupted_one(name: str, tmp_path: Path) -> None:
    script = SCRIPTS[name]
    t0 = time.monotonic()
    straight = _start(script, tmp_path / "straight", resume=False)
    text = straight.communicate(timeout=RUN_LIMIT_S)[0]
    assert straight.returncode == 0, text[-3000:]
    typical = time.monotonic() - t0
    rng = random.Random(f"{SEED}-{name}")
    outputs = run_with_kills(script, tmp_path / "killed", rng, typical, KILLS)
    assert len(outputs) >= 2 and all("Traceback" not in o for o in outputs)  # at least one kill landed
    if script.weights is None:  # finished all its steps from the checkpoints it was given
        summary = json.loads((tmp_path / "killed" / "summary.json").read_text())
        assert summary["steps"] == json.loads((tmp_path / "straight" / "summary.json").read_text())["steps"]
    else:
        a, b = script.weights(tmp_path / "straight"), script.weights(tmp_path / "killed")
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), (name, k, outputs)
