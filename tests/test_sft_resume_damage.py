"""``llm_sft.py --resume`` on a torn or odd checkpoint: the folder is passed over (named) for ``checkpoint.old/`` when
that one reads back, else one error line naming the file; never a traceback, never a hang on a FIFO (D6, D9)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from no_hang import no_hang  # noqa: E402

from baselines import llm_sft  # noqa: E402
from baselines.lm.tiny_lm import load_pretrained  # noqa: E402
from countdown_gym import dataclass_cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--batch-size", "2", "--hidden", "16", "--heads", "2", "--layers", "1", "--intermediate", "32", "--eval-every", "1000",
        "--eval-problems", "2", "--max-new-tokens", "4", "--checkpoint-every", "2", "--fresh-problems", "0", "--no-progress",
        "--report-to", "none", "--threads", "1"]


def _argv(out: Path, steps: int, *more: str) -> list[str]:
    return ["--out", str(out), "--max-steps", str(steps), *TINY, *more]


def _train(out: Path, steps: int, *more: str) -> dict:
    return llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, _argv(out, steps, *more)))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A finished 3-step run: ``checkpoint/`` holds step 3."""
    out = tmp_path_factory.mktemp("sft") / "base"
    _train(out, 3)
    return out


@pytest.fixture(name="no_hang")
def _no_hang_fixture():
    """Fail (not block for ever) when the test takes over 60 s: a FIFO opened for reading waits for a writer."""
    with no_hang(60):
        yield


def _copy(base: Path, tmp_path: Path) -> Path:
    shutil.copytree(base, tmp_path / "run")
    return tmp_path / "run"


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _truncate(size: int) -> Callable[[Path], None]:
    def cut(path: Path) -> None:
        os.truncate(path, size)
    return cut


DAMAGES = {  # (file of checkpoint/, damage, what the error says about it)
    "trainer_state.pt truncated": ("trainer_state.pt", _truncate(100), r"trainer_state.pt does not read \(torn\?\): "),
    "model.safetensors truncated": ("model.safetensors", _truncate(1000), r"model.safetensors does not read \(torn\?\)"),
    "model.safetensors missing": ("model.safetensors", Path.unlink, "model.safetensors is missing"),
    "config.json empty": ("config.json", _truncate(0), "config.json is empty"),
    "config.json a folder": ("config.json", lambda p: (p.unlink(), p.mkdir()), "config.json is a folder, not a regular file"),
    "trainer_state.pt a FIFO": ("trainer_state.pt", _fifo, "trainer_state.pt is a FIFO, not a regular file"),
    "tokenizer.json a FIFO": ("tokenizer.json", _fifo, "tokenizer.json is a FIFO, not a regular file"),
    "trainer_state.pt without a step": ("trainer_state.pt", lambda p: torch.save({"optimizer": {}}, p), "holds no training step"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_checkpoint_alone_is_one_error_line_naming_the_file(base, tmp_path, damage, no_hang):
    name, hurt, said = DAMAGES[damage]
    run = _copy(base, tmp_path)
    hurt(run / "checkpoint" / name)
    options, metrics = (run / "options.json").read_bytes(), (run / "metrics.csv").read_bytes()
    with pytest.raises(SystemExit) as exc:
        _train(run, 4, "--resume", "true")
    message = str(exc.value.code)
    assert "\n" not in message and message.startswith(f"--resume: {run / 'checkpoint' / name}")
    assert re.search(said, message), message
    assert message.endswith(f"to train from scratch delete {run / 'checkpoint'} and --resume again, or start a new --out")
    assert (run / "options.json").read_bytes() == options and (run / "metrics.csv").read_bytes() == metrics  # untouched


@pytest.mark.parametrize("damage", ["trainer_state.pt truncated", "trainer_state.pt a FIFO", "model.safetensors missing"])
def test_a_good_checkpoint_old_beside_a_damaged_checkpoint_is_resumed_exactly(base, tmp_path, capsys, damage, no_hang):
    name, hurt, _ = DAMAGES[damage]
    whole = _copy(base, tmp_path / "whole")  # the undamaged run, resumed to step 4
    _train(whole, 4, "--resume", "true")
    run = _copy(base, tmp_path)
    shutil.copytree(run / "checkpoint", run / "checkpoint.old")
    hurt(run / "checkpoint" / name)
    capsys.readouterr()
    assert _train(run, 4, "--resume", "true")["steps"] == 4
    out = capsys.readouterr().out
    assert f"--resume: passing over {run / 'checkpoint'}: {run / 'checkpoint' / name}" in out
    assert f"resumed from {run / 'checkpoint.old'} at step 3" in out
    a, _ = load_pretrained(whole / "final")
    b, _ = load_pretrained(run / "final")
    for (key, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), key
    assert (run / "checkpoint").is_dir() and not (run / "checkpoint.old").exists()  # the next save replaced both


def test_a_resume_from_checkpoint_old_puts_it_back_before_any_save(base, tmp_path, no_hang):
    """The next save deletes ``checkpoint.old/`` before its renames: the good one must be ``checkpoint/`` by then."""
    run = _copy(base, tmp_path)
    shutil.copytree(run / "checkpoint", run / "checkpoint.old")
    (run / "checkpoint" / "trainer_state.pt").write_bytes(b"torn")
    _train(run, 3, "--resume", "true")  # resumed at step 3 of 3: no save after it
    assert not (run / "checkpoint.old").exists()
    assert torch.load(run / "checkpoint" / "trainer_state.pt", weights_only=False)["step"] == 3


def test_both_checkpoints_damaged_names_both(base, tmp_path, no_hang):
    run = _copy(base, tmp_path)
    shutil.copytree(run / "checkpoint", run / "checkpoint.old")
    os.truncate(run / "checkpoint" / "trainer_state.pt", 100)
    _fifo(run / "checkpoint.old" / "trainer_state.pt")
    with pytest.raises(SystemExit) as exc:
        _train(run, 4, "--resume", "true")
    message = str(exc.value.code)
    assert "\n" not in message
    assert f"{run / 'checkpoint' / 'trainer_state.pt'} does not read (torn?)" in message
    assert f"{run / 'checkpoint.old' / 'trainer_state.pt'} is a FIFO" in message
    assert f"delete {run / 'checkpoint'} and {run / 'checkpoint.old'} and --resume again" in message


def test_only_checkpoint_old_left_by_a_kill_between_the_renames_is_resumed(base, tmp_path, capsys):
    run = _copy(base, tmp_path)
    (run / "checkpoint").rename(run / "checkpoint.old")
    assert _train(run, 4, "--resume", "true")["steps"] == 4
    out = capsys.readouterr().out
    assert f"resumed from {run / 'checkpoint.old'} at step 3" in out and "passing over" not in out


def test_a_stale_checkpoint_tmp_link_is_not_written_through(base, tmp_path):
    """A ``checkpoint.tmp`` link (one planted in a shared folder) was written through: the save filled the folder it
    points to and left ``checkpoint`` a link to it."""
    run, elsewhere = _copy(base, tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "checkpoint.tmp").symlink_to(elsewhere)
    assert _train(run, 4, "--resume", "true")["steps"] == 4
    assert not list(elsewhere.iterdir()) and not (run / "checkpoint").is_symlink()
    assert sorted(p.name for p in run.glob("checkpoint*")) == ["checkpoint"]
    assert torch.load(run / "checkpoint" / "trainer_state.pt", weights_only=False)["step"] == 4


@pytest.mark.parametrize("training_json", [b"{", b"", b"[]", b'{"sft_config": 3}', "fifo"])
def test_a_broken_training_json_without_options_json_is_one_error_line(base, tmp_path, training_json, no_hang):
    run = _copy(base, tmp_path)
    (run / "options.json").unlink()
    f = run / "checkpoint" / "training.json"
    if training_json == "fifo":  # the checkpoint check refuses it before saved_options is asked
        _fifo(f)
    else:
        f.write_bytes(training_json)
    with pytest.raises(SystemExit) as exc:
        _train(run, 4, "--resume", "true")
    message = str(exc.value.code)
    assert "\n" not in message and message.startswith(f"--resume: {f}"), message
    # saved_options itself: one line naming the file (a FIFO never opened)
    with pytest.raises(SystemExit, match="training.json"):
        llm_sft.saved_options(run / "checkpoint", None)


def test_saved_options_prefers_options_json_and_reads_the_checkpoints_record(base, tmp_path):
    assert llm_sft.saved_options(base / "checkpoint", {"seed": 3}) == {"seed": 3}
    assert llm_sft.saved_options(base / "checkpoint", None)["max_steps"] == 3
    assert llm_sft.saved_options(tmp_path, None) is None  # no training.json
    assert llm_sft.saved_options(None, None) is None
    (tmp_path / "training.json").symlink_to("training.json")  # there but unreadable (a link to itself): not "absent"
    with pytest.raises(SystemExit, match="training.json: cannot read it"):
        llm_sft.saved_options(tmp_path, None)


def test_the_script_exits_1_with_one_line_on_a_fifo_trainer_state(base, tmp_path):
    run = _copy(base, tmp_path)
    _fifo(run / "checkpoint" / "trainer_state.pt")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "baselines" / "llm_sft.py"), *_argv(run, 4), "--resume", "true"],
                       capture_output=True, text=True, timeout=180, env=env, check=False)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        f"--resume: {run / 'checkpoint' / 'trainer_state.pt'} is a FIFO, not a regular file; to train from scratch "
        f"delete {run / 'checkpoint'} and --resume again, or start a new --out")
