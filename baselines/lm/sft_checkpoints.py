"""``baselines/llm_sft.py``'s checkpoints: written aside and swapped in (:func:`save_checkpoint`), and read back
file by file before a resume takes one (:func:`load_checkpoint`: ``checkpoint/``, else ``checkpoint.old/``; a FIFO
or a device is never opened)."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from baselines.lm.checkpoints import _safetensors_error
from baselines.lm.tiny_lm import load_pretrained, save_pretrained, short_error
from countdown_gym.dataclass_cli import file_kind, written_aside


def save_checkpoint(path: Path, model, tokenizer, opt, step: int, rng: random.Random, meta: dict) -> None:
    """Write the checkpoint to ``<path>.tmp`` and swap it in (``written_aside``: the previous one goes to ``<path>.old``
    until the new one has taken its place), so a kill mid-write leaves the previous one whole."""
    with written_aside(path) as tmp:
        save_pretrained(model, tokenizer, tmp, meta)
        torch.save({"optimizer": opt.state_dict(), "step": step, "rng": rng.getstate(), "torch_rng": torch.get_rng_state()}, tmp / TRAINER_STATE)


def put_back(found: Path, path: Path) -> None:
    """After a resume from ``<path>.old`` (``found``), move it back to ``path`` at once, over a torn ``path``: the
    next :func:`save_checkpoint` deletes ``<path>.old`` before its renames."""
    if found == path:
        return
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    found.rename(path)


TRAINER_STATE = "trainer_state.pt"
CHECKPOINT_FILES = ("config.json", "model.safetensors", TRAINER_STATE)
"""What a checkpoint folder must hold besides the tokenizer files (``training.json``: only read without ``options.json``)."""


class Unusable(Exception):
    """Why a checkpoint folder cannot be resumed from; the message names the file."""


def _check_entries(d: Path) -> None:
    """Every file of ``d`` a regular file (after symbolic links), the needed ones there: nothing that blocks when
    opened (a FIFO) or never ends (``/dev/zero``) is ever read; a dangling link the model does not need passes."""
    try:
        names = os.listdir(d)
    except OSError as exc:
        raise Unusable(f"{d} is not a readable checkpoint folder ({exc.strerror or exc})") from None
    for name in (*CHECKPOINT_FILES, *sorted(set(names) - set(CHECKPOINT_FILES))):
        if not _regular_file(d / name, Unusable) and name in CHECKPOINT_FILES:
            raise Unusable(f"{d / name} is missing")


def _regular_file(f: Path, error: Callable[[str], BaseException]) -> bool:
    """Whether ``f`` exists (after symbolic links); ``error`` when it cannot be read or is not a regular file."""
    try:
        mode = os.stat(f).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise error(f"{f}: cannot read it ({exc.strerror or exc})") from None
    if (what := file_kind(mode)) is not None:
        raise error(f"{f} is {what}, not a regular file")
    return True


def _read_json(f: Path, error: Callable[[str], BaseException]) -> Any:
    """The JSON value in ``f``; ``error`` saying it is empty or not valid JSON."""
    try:
        return json.loads(f.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise error(f"{f} is {'empty' if not f.stat().st_size else f'not valid JSON ({short_error(exc)})'}") from None


def load_saved_model(d: Path, error: Callable[[str], BaseException] = Unusable, flag: str = "") -> Any:
    """The model saved in ``d``; ``error`` naming it (after ``flag``) when it does not load."""
    try:
        return load_pretrained(d)[0]
    except ValueError as exc:  # load_pretrained's own message, naming d
        raise error(f"{flag}{exc}") from None
    except Exception as exc:  # noqa: BLE001 - transformers' and safetensors' many errors of a folder that is no model
        raise error(f"{flag}{d}: the saved model does not load ({short_error(exc)})") from None


def read_checkpoint(d: Path, new_optimizer: Callable[[Any], torch.optim.Optimizer]) -> tuple:
    """``(model, optimizer, trainer state)`` of the checkpoint folder ``d``, each file checked as it is read back;
    :class:`Unusable` naming the file when one does not read."""
    _check_entries(d)
    f = d / "config.json"
    if not isinstance(config := _read_json(f, Unusable), dict):
        raise Unusable(f"{f} holds a JSON {type(config).__name__}, not a model config")
    f = d / "model.safetensors"
    try:
        error = _safetensors_error(f)
    except Exception as exc:  # noqa: BLE001 - an odd header: any error is a file that does not read
        error = short_error(exc)
    if error:
        raise Unusable(f"{f} does not read (torn?): {error}")
    f = d / TRAINER_STATE
    try:
        state = torch.load(f, weights_only=False)
    except Exception as exc:  # noqa: BLE001 - a cut-off zip, a pickle error, ...: the file does not read
        raise Unusable(f"{f} does not read (torn?): {short_error(exc)}") from None
    if not isinstance(state, dict) or type(state.get("step")) is not int or state["step"] < 0:
        raise Unusable(f"{f} holds no training step")
    if missing := [k for k in ("optimizer", "rng", "torch_rng") if k not in state]:
        raise Unusable(f"{f} holds no {', '.join(missing)}")
    model = load_saved_model(d)
    opt = new_optimizer(model)
    torch_rng = torch.get_rng_state()
    try:
        opt.load_state_dict(state["optimizer"])
        random.Random().setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
    except Exception as exc:  # noqa: BLE001
        raise Unusable(f"{f}: its optimizer or random state does not fit the model ({short_error(exc)})") from None
    finally:
        torch.set_rng_state(torch_rng)
    return model, opt, state


def load_checkpoint(path: Path, new_optimizer: Callable[[Any], torch.optim.Optimizer], say: Callable[[str], Any] = print
                    ) -> tuple | None:
    """``(folder, model, optimizer, trainer state)`` of the checkpoint to resume: ``path``, or ``<path>.old`` (a kill
    came between the two renames of a save, or ``path`` does not read). One passed over is named through ``say``;
    None when there is neither; an exit naming the files when neither reads."""
    found = [d for d in (path, path.with_name(path.name + ".old")) if os.path.lexists(d)]
    problems = []
    for d in found:
        try:
            loaded = read_checkpoint(d, new_optimizer)
        except Unusable as exc:
            problems.append(str(exc))
            continue
        for problem in problems:
            say(f"--resume: passing over {path}: {problem}")
        return d, *loaded
    if problems:
        raise SystemExit(f"--resume: {'; '.join(problems)}; to train from scratch delete {' and '.join(map(str, found))} "
                         "and --resume again, or start a new --out")
    return None


def saved_options(ckpt: Path | None, saved: dict | None) -> dict | None:
    """The options of the run being resumed: ``saved`` (its ``options.json``), else the checkpoint's ``training.json``
    (an exit naming it when it does not read)."""
    if saved or ckpt is None:
        return saved
    f = ckpt / "training.json"

    def error(message: str) -> SystemExit:
        return SystemExit(f"--resume: {message}; the run's options.json is gone too: fix or restore one of them, or "
                          "start a new --out")

    if not _regular_file(f, error):
        return saved
    data = _read_json(f, error)
    if not isinstance(data, dict) or not isinstance(data.get("sft_config"), dict | None):
        raise error(f"{f} holds no run options (sft_config)")
    return data.get("sft_config")
