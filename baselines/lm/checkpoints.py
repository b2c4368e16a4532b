"""Which checkpoint a resumed GRPO run continues from: the newest one whose save finished (:class:`CompletionMarker`)
and whose files read back (a kill during a save leaves some file missing or cut off)."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open
from transformers import TrainerCallback

from countdown_gym.runkit.runs import write_text_atomic

MARKER = "checkpoint_complete.json"
"""Written last into a checkpoint directory: the save is complete."""
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "adapter_model.safetensors")
ZIPPED = ("optimizer.pt", "scheduler.pt", "rng_state.pth")
"""``torch.save`` files (zip archives): a cut-off one has no central directory at its end."""
_NAME = re.compile(r"checkpoint-(\d+)")


class CompletionMarker(TrainerCallback):
    """Write :data:`MARKER` into each checkpoint once the save is complete (the last callback)."""

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}" / MARKER
            write_text_atomic(path, json.dumps({"global_step": state.global_step}) + "\n")


def checkpoint_problem(path: Path, require_marker: bool = True) -> str | None:
    """Why the checkpoint ``path`` cannot be resumed from (None: it can): no marker (``require_marker``), no readable
    ``trainer_state.json``, no weights, or a cut-off ``torch.save`` file."""
    if require_marker and not (path / MARKER).is_file():
        return f"no {MARKER} (the save did not finish)"
    if not (path / "trainer_state.json").is_file():  # a FIFO there is never opened (reading it would block)
        return "no trainer_state.json"
    try:
        state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"trainer_state.json is not readable JSON ({str(exc)[:80]})"
    if not isinstance(state, dict) or not isinstance(state.get("global_step"), int):
        return "trainer_state.json has no global_step"
    if not any((path / w).is_file() and (path / w).stat().st_size for w in WEIGHTS):
        return "no model weights"
    if (path / "model.safetensors").is_file() and (error := _safetensors_error(path / "model.safetensors")):
        return f"model.safetensors is not readable ({error})"
    for name in ZIPPED:
        f = path / name
        if name == "optimizer.pt" and not f.is_file():
            return "no optimizer.pt"
        if f.is_file() and not _whole_zip(f):
            return f"{name} is cut off"
    return None


def _whole_zip(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return bool(z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _safetensors_error(path: Path) -> str | None:
    """Why a safetensors file does not read back (the safetensors library checks its header and that its tensors
    cover the file exactly), or None."""
    try:
        with safe_open(str(path), framework="pt"):
            return None
    except (SafetensorError, OSError) as exc:
        return str(exc).removeprefix("Error while deserializing header: ")[:80]


def last_complete_checkpoint(out: Path, say: Any = print) -> str | None:
    """The newest checkpoint of ``out`` that :func:`checkpoint_problem` passes (None: none); each newer one passed
    over is reported through ``say``."""
    numbered = [(int(m[1]), p) for p in Path(out).glob("checkpoint-*") if p.is_dir() and (m := _NAME.fullmatch(p.name))]
    found = [p for _, p in sorted(numbered, reverse=True)]
    marked = any((p / MARKER).is_file() for p in found)  # a run saved before the marker existed has none
    for path in found:
        problem = checkpoint_problem(path, require_marker=marked)
        if problem is None:
            return str(path)
        say(f"--resume: {path} is incomplete ({problem}); trying the checkpoint before it")
    if found:
        say(f"--resume: no complete checkpoint in {out}")
    return None
