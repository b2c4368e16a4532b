"""Frozen splits: recorded hashes, tamper detection, disjointness, and reproducibility."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from countdown_gym import PRESETS, Rules, is_solvable, load_split, split_sha256
from countdown_gym.data import splits as splits_mod
from countdown_gym.data.splits import (
    SPLIT_GENERATION_RULES,
    SPLIT_RULES,
    SPLIT_SHA256,
    SPLIT_SPEC,
    SPLITS,
    SplitIntegrityError,
    build_splits,
    file_sha256,
    split_path,
)
from countdown_gym.game.rules import LEGACY_LONGPROC


@pytest.mark.parametrize("preset", sorted(SPLIT_SPEC))
def test_shipped_files_match_recorded_hashes_and_sizes(preset: str) -> None:
    for split in SPLITS:
        path = split_path(preset, split)
        assert file_sha256(path) == SPLIT_SHA256[preset][split] == split_sha256(preset, split)
        problems = load_split(preset, split)
        assert len(problems) == SPLIT_SPEC[preset][split]
        assert all(p.preset == preset for p in problems)


@pytest.mark.parametrize("preset", sorted(SPLIT_SPEC))
def test_test_never_overlaps_train_or_validation(preset: str) -> None:
    keys = {split: [p.key for p in load_split(preset, split)] for split in SPLITS}
    for split, ks in keys.items():
        assert len(set(ks)) == len(ks), f"duplicate problem inside {preset}/{split}"
    assert not set(keys["test"]) & set(keys["train"])
    assert not set(keys["test"]) & set(keys["validation"])
    assert not set(keys["validation"]) & set(keys["train"])


@pytest.mark.parametrize("preset", sorted(SPLIT_SPEC))
def test_split_problems_solvable_and_in_range(preset: str) -> None:
    cfg = PRESETS[preset]
    problems = load_split(preset, "test")[:200] + load_split(preset, "validation")[:50]
    for p in problems:
        assert cfg.min_numbers <= len(p.numbers) <= cfg.max_numbers
        assert all(cfg.min_value <= x <= cfg.max_value for x in p.numbers)
        assert cfg.min_target <= p.target <= cfg.max_target
        assert p.rules == cfg.rules
        assert is_solvable(p.numbers, p.target, p.rules)


@pytest.mark.parametrize("preset", sorted(SPLIT_SPEC))
def test_split_files_record_generation_rules_and_load_under_todays(preset: str) -> None:
    # the files keep the rules they were generated under; load_split plays them under the preset's
    # rules, which allow every move the generation rules allow (so every problem stays solvable)
    first = json.loads(split_path(preset, "test").read_text(encoding="utf-8").splitlines()[0])
    assert first["rules"] == SPLIT_GENERATION_RULES[preset].to_dict()
    assert SPLIT_RULES[preset] == PRESETS[preset].rules
    assert all(p.rules == SPLIT_RULES[preset] for p in load_split(preset, "validation"))
    gen, play = SPLIT_GENERATION_RULES[preset], SPLIT_RULES[preset]
    assert (gen.integer_only, gen.value_limit, gen.use_all) == (play.integer_only, play.value_limit, play.use_all)
    assert (gen.sign, play.sign) in {("positive", "nonnegative"), ("any", "any")}
    if preset != "tinyzero":
        assert gen == LEGACY_LONGPROC and play == Rules.longproc()
        for p in load_split(preset, "test")[:100]:  # solvable without a 0, as generated
            assert is_solvable(p.numbers, p.target, Rules.longproc_positive())


def test_load_split_returns_a_fresh_list() -> None:
    a = load_split("longproc-0.5k", "validation")
    a.clear()
    assert len(load_split("longproc-0.5k", "validation")) == 500


def test_tampered_copy_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    shutil.copytree(Path(split_path("longproc-0.5k", "test")).parents[1], data)
    target = data / "longproc-0.5k" / "test.jsonl"
    lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
    first = json.loads(lines[0])
    first["target"] += 1
    lines[0] = json.dumps(first, separators=(",", ":")) + "\n"
    target.write_text("".join(lines), encoding="utf-8")
    monkeypatch.setattr(splits_mod, "_data_dir", lambda: data)
    splits_mod.split_problems.cache_clear()
    try:
        with pytest.raises(SplitIntegrityError, match="was modified"):
            load_split("longproc-0.5k", "test")
        assert len(load_split("longproc-0.5k", "validation")) == 500  # untouched file still loads
        (data / "tinyzero" / "train.jsonl").unlink()
        with pytest.raises(FileNotFoundError):
            load_split("tinyzero", "train")
    finally:
        splits_mod.split_problems.cache_clear()


def test_bad_names() -> None:
    with pytest.raises(ValueError, match="no frozen splits"):
        load_split("nope", "test")
    with pytest.raises(ValueError, match="unknown split"):
        load_split("longproc-0.5k", "dev")


def test_maintenance_command_writes_nothing_without_write(capsys: pytest.CaptureFixture[str]) -> None:
    from countdown_gym.cli.splits import main

    assert main(["--help"]) == 0
    assert "--write" in capsys.readouterr().out


def test_maintenance_command_runs_as_python_m_countdown_gym_without_warnings() -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-W", "error", "-m", "countdown_gym", "splits", "--help"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "countdown-gym splits" in r.stdout and r.stderr == "", r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(SPLIT_SPEC))
def test_build_splits_reproduces_shipped_files(preset: str) -> None:
    built = build_splits(preset)
    for split in SPLITS:
        assert hashlib.sha256(splits_mod.split_bytes(built[split])).hexdigest() == SPLIT_SHA256[preset][split], (preset, split)


def test_tampered_split_files_are_reported(tmp_path, monkeypatch):
    import shutil

    from countdown_gym.data import splits

    data = tmp_path / "data"
    shutil.copytree(splits._data_dir(), data)
    monkeypatch.setattr(splits, "_data_dir", lambda: data)
    assert splits.tampered_files() == []
    f = data / "tinyzero" / "validation.jsonl"
    f.write_bytes(f.read_bytes().replace(b"\n", b"\r\n"))  # what a CRLF checkout would do
    bad = splits.tampered_files()
    assert len(bad) == 1 and "tinyzero/validation.jsonl" in bad[0]
    (data / "hard" / "test.jsonl").unlink()
    assert any("missing" in b for b in splits.tampered_files())


def test_gitattributes_keep_the_split_files_byte_exact():
    root = Path(__file__).resolve().parents[1]
    assert "countdown_gym/data/** -text" in (root / ".gitattributes").read_text()
