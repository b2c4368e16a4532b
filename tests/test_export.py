"""countdown-gym export: the frozen splits as datasets (hf, parquet, jsonl) with a dataset card, and as verl rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from countdown_gym import Problem, Rules, load_split, verify
from countdown_gym.difficulty import split_labels, split_tiers
from countdown_gym.export import COLUMNS, main, split_rows
from countdown_gym.text_format import PROMPT_STYLES, build_prompt

ROOT = Path(__file__).resolve().parents[1]


def _card_yaml(path: Path) -> dict:
    yaml = pytest.importorskip("yaml")
    text = path.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_rows_hold_labels_solution_and_prompts():
    rows = split_rows("tinyzero", "validation")
    problems = load_split("tinyzero", "validation")
    assert len(rows) == len(problems) and list(rows[0]) == list(COLUMNS)
    for row, p, d, t in zip(rows, problems, split_labels("tinyzero", "validation"), split_tiers("tinyzero", "validation"),
                            strict=True):
        assert (row["numbers"], row["target"], row["id"], row["split"]) == (list(p.numbers), p.target, p.id, "validation")
        assert row["num_solutions"] == d.num_solutions and row["search_nodes"] == d.search_nodes and row["tier"] == t
        for style in PROMPT_STYLES:
            assert row[f"prompt_{style}"] == build_prompt(p, style)
    row = rows[0]
    problem = Problem(tuple(row["numbers"]), row["target"], Rules.from_dict(json.loads(row["rules"])))
    assert verify(problem, f"<answer>{row['solution']}</answer>").correct


def test_hf_export_loads_from_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    assert main(["--format", "hf", "--preset", "tinyzero", "--split", "validation,test", "--out", str(tmp_path)]) == 0
    dd = datasets.load_from_disk(str(tmp_path / "tinyzero"))
    assert set(dd) == {"validation", "test"} and len(dd["test"]) == len(load_split("tinyzero", "test"))
    assert dd["test"][0] == split_rows("tinyzero", "test")[0]
    assert set(COLUMNS) <= set(dd["test"].column_names)
    meta = _card_yaml(tmp_path / "README.md")
    assert meta["license"] == "mit" and meta["dataset_info"][0]["config_name"] == "tinyzero"
    assert {s["name"]: s["num_examples"] for s in meta["dataset_info"][0]["splits"]} == {"validation": 200, "test": 500}


def test_parquet_export_loads_with_load_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    assert main(["--format", "parquet", "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path / "out")]) == 0
    path = tmp_path / "out" / "tinyzero" / "test.parquet"
    ds = datasets.load_dataset("parquet", data_files={"test": str(path)}, cache_dir=str(tmp_path / "cache"))["test"]
    assert len(ds) == 500 and ds[3]["id"] == "tinyzero/test/3"
    by_config = datasets.load_dataset(str(tmp_path / "out"), "tinyzero", cache_dir=str(tmp_path / "cache2"))  # the card's configs
    assert len(by_config["test"]) == 500
    meta = _card_yaml(tmp_path / "out" / "README.md")
    assert meta["configs"] == [{"config_name": "tinyzero", "data_files": [{"split": "test", "path": "tinyzero/test.parquet"}],
                                "default": True}]


def test_jsonl_and_verl_exports(tmp_path):
    pytest.importorskip("pyarrow")
    assert main(["--format", "jsonl", "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path / "j")]) == 0
    lines = (tmp_path / "j" / "tinyzero" / "test.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == split_rows("tinyzero", "test")[0]
    assert main(["--format", "verl", "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path / "v")]) == 0
    import pyarrow.parquet as pq

    from scripts.export_verl import verl_rows

    table = pq.read_table(tmp_path / "v" / "tinyzero" / "test.parquet").to_pylist()
    assert table == verl_rows(load_split("tinyzero", "test"), "tinyzero", "test", "tinyzero")


def test_bad_arguments_exit_2(capsys):
    assert main(["--format", "hf", "--split", "dev", "--out", "x"]) == 2
    assert "--split" in capsys.readouterr().err
    assert main(["--format", "csv", "--out", "x"]) == 2
    # --interaction is the verl export's: another format would ignore it, so it is refused
    assert main(["--format", "jsonl", "--interaction", "tool", "--out", "x"]) == 2
    assert "--interaction tool applies to --format verl only" in capsys.readouterr().err


def test_unwritable_out_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["--format", "jsonl", "--preset", "tinyzero", "--split", "test", "--out", str(blocker)]) == 1
    assert "cannot write there" in capsys.readouterr().err


def test_console_script_dispatches_export(tmp_path):
    out = subprocess.run([sys.executable, "-m", "countdown_gym", "export", "--format", "jsonl", "--preset", "tinyzero",
                          "--split", "validation", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "tinyzero" / "validation.jsonl").is_file() and (tmp_path / "README.md").is_file()
