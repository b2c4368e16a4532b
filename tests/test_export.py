"""countdown-gym export: the frozen splits as datasets (hf, parquet, jsonl) with a dataset card, and as verl rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from countdown_gym import Problem, Rules, load_split, verify
from countdown_gym.cli.export import COLUMNS, main, split_rows
from countdown_gym.data.difficulty import split_labels, split_tiers
from countdown_gym.game.text_format import PROMPT_STYLES, build_prompt, chat_messages

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
        assert row["prompt"] == build_prompt(p, "tinyzero")
    row = rows[0]
    assert row["rules"] == {"name": "tinyzero", "integer_only": False, "sign": "any", "value_limit": None, "use_all": True}
    problem = Problem(tuple(row["numbers"]), row["target"], Rules.from_dict(row["rules"]))
    assert verify(problem, f"<answer>{row['solution']}</answer>").correct


def test_prompt_column_follows_prompt_style_and_chat():
    p = load_split("longproc-0.5k", "test")[0]
    (row,) = split_rows("longproc-0.5k", "test", "compact")[:1]
    assert row["prompt"] == build_prompt(p, "compact")
    row = split_rows("longproc-0.5k", "test", "longproc", chat=True)[0]
    assert row["prompt"] == chat_messages(p, "longproc") and row["prompt"][-1]["role"] == "user"
    assert [m["role"] for m in split_rows("tinyzero", "validation", "tinyzero", chat=True)[0]["prompt"]] == ["system", "user"]
    with pytest.raises(ValueError, match="unknown prompt style"):
        split_rows("tinyzero", "test", "base")


def test_card_has_usage_citation_and_the_rewards_that_need_move_lines(tmp_path):
    pytest.importorskip("datasets")
    assert main(["--format", "jsonl", "--preset", "tinyzero", "--split", "validation", "--out", str(tmp_path), "--chat"]) == 0
    card = (tmp_path / "README.md").read_text()
    for heading in ("## Usage", "## Citation", "## Columns", "## Provenance"):
        assert heading in card
    assert "GRPOTrainer(" in card and "train_dataset=ds[\"train\"]" in card and "@software{countdown_gym" in card
    assert "chat messages ending with the user's turn" in card and "give 0.0 to a completion without them" in card
    features = {f["name"]: f for f in _card_yaml(tmp_path / "README.md")["dataset_info"][0]["features"]}
    assert [f["name"] for f in features["rules"]["struct"]] == ["name", "integer_only", "sign", "value_limit", "use_all"]
    assert [f["name"] for f in features["prompt"]["list"]] == ["role", "content"]


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
    assert main(["--format", "jsonl", "--preset", "tinyzero, ", "--split", " test", "--out", str(tmp_path / "j")]) == 0
    lines = (tmp_path / "j" / "tinyzero" / "test.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == split_rows("tinyzero", "test")[0]
    assert main(["--format", "verl", "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path / "v")]) == 0
    import pyarrow.parquet as pq

    from countdown_gym.integrations.verl_export import verl_rows

    table = pq.read_table(tmp_path / "v" / "tinyzero" / "test.parquet").to_pylist()
    assert table == verl_rows(load_split("tinyzero", "test"), "tinyzero", "test", "tinyzero")
    assert [m["role"] for m in table[0]["prompt"]] == ["system", "user"]  # verl adds the generation prompt
    from countdown_gym.cli.export import export

    paths = export("jsonl", tmp_path / "s", presets="tinyzero", splits="test")  # one name: was "unknown ['t', 'i', ...]"
    assert paths[0] == tmp_path / "s" / "tinyzero" / "test.jsonl" and paths[0].read_text().splitlines() == lines


def test_bad_arguments_exit_2(capsys):
    assert main(["--format", "hf", "--split", "dev", "--out", "x"]) == 2
    assert "--split" in capsys.readouterr().err
    assert main(["--format", "csv", "--out", "x"]) == 2
    for flag, value in (("--preset", "tinyzero,tinyzero"), ("--split", "test,test")):  # was exported twice
        assert main(["--format", "jsonl", flag, value, "--out", "x"]) == 2
        assert f"{flag} must be 'all' or a comma-separated subset" in capsys.readouterr().err
    # --interaction is the verl export's: another format would ignore it, so it is refused
    assert main(["--format", "jsonl", "--interaction", "tool", "--out", "x"]) == 2
    assert "--interaction tool applies to --format verl only" in capsys.readouterr().err
    assert main(["--format", "parquet", "--limit", "3", "--out", "x"]) == 2
    assert "--limit 3 applies to --format verl only" in capsys.readouterr().err
    # past sys.maxsize: was an OverflowError traceback from pyarrow while writing
    assert main(["--format", "verl", "--interaction", "tool", "--max-turns", "9" * 20, "--out", "x"]) == 2
    assert f"--max-turns must be a positive int (at most {sys.maxsize}), got int 9999" in capsys.readouterr().err


def test_verl_export_api_refuses_arguments_it_would_ignore(tmp_path):
    from countdown_gym.integrations.verl_export import export

    with pytest.raises(ValueError, match="max_turns=8 applies to interaction='tool' only"):  # was ignored silently
        export("tinyzero", ["validation"], "tinyzero", tmp_path, max_turns=8)
    with pytest.raises(ValueError, match="max_turns must be a positive int"):
        export("tinyzero", ["validation"], "tinyzero", tmp_path, interaction="tool", max_turns=10**20)
    with pytest.raises(ValueError, match="unknown interaction 'tools'"):  # was single-pass rows, silently
        export("tinyzero", ["validation"], "tinyzero", tmp_path, interaction="tools")
    with pytest.raises(ValueError, match="size must be a positive int or None"):  # wrote a parquet with no columns
        export("tinyzero", ["train"], "tinyzero", tmp_path, size=0)
    with pytest.raises(ValueError, match="size makes the train split"):  # was ignored
        export("tinyzero", ["validation"], "tinyzero", tmp_path, size=5)
    assert not any(tmp_path.iterdir())


def test_unwritable_out_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["--format", "jsonl", "--preset", "tinyzero", "--split", "test", "--out", str(blocker)]) == 1
    assert f"cannot write {blocker / 'tinyzero'} (Not a directory)" in capsys.readouterr().err
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "tinyzero").write_text("")  # a file where the preset's folder goes: named, not just --out
    assert main(["--format", "jsonl", "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path / "out")]) == 1
    assert f"cannot write {tmp_path / 'out' / 'tinyzero'} (File exists)" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["jsonl", "verl"])
def test_a_full_disk_leaves_no_torn_export_and_keeps_the_earlier_one(fmt, tmp_path, capsys, monkeypatch):
    """A disk that fills mid-write left a torn test.jsonl (a cut-off last row, or silently fewer rows); now each file
    is written aside and renamed, so the earlier export stays whole and nothing half-written is left."""
    pytest.importorskip("pyarrow")
    import errno

    argv = ["--format", fmt, "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path)]
    assert main(argv) == 0
    name = "test.jsonl" if fmt == "jsonl" else "test.parquet"
    before = (tmp_path / "tinyzero" / name).read_bytes()
    write_bytes = Path.write_bytes

    def fills_up(self, data):
        write_bytes(self, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    import pyarrow.parquet as pq

    def table_fills_up(table, where, **kwargs):
        fills_up(Path(where), b"PAR1" * 1000)

    monkeypatch.setattr(Path, "write_bytes", fills_up)
    monkeypatch.setattr(pq, "write_table", table_fills_up)
    assert main(argv) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert (tmp_path / "tinyzero" / name).read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "tinyzero").iterdir()) == [name]


@pytest.mark.slow  # about a second (two exports)
def test_an_interrupted_hf_export_keeps_the_earlier_one_whole(tmp_path, monkeypatch):
    """save_to_disk wrote into the earlier export's folder: a Ctrl-C (or a full disk) midway left a DatasetDict
    without the splits not yet written; now it is written aside, then each split folder takes its place whole."""
    datasets = pytest.importorskip("datasets")
    argv = ["--format", "hf", "--preset", "tinyzero", "--split", "validation", "--out", str(tmp_path)]
    assert main(argv) == 0
    save = datasets.DatasetDict.save_to_disk

    def interrupted(self, path, **kwargs):
        save(datasets.DatasetDict({"part": self["validation"].select(range(2))}), path, **kwargs)  # a part written
        raise KeyboardInterrupt

    monkeypatch.setattr(datasets.DatasetDict, "save_to_disk", interrupted)
    assert main(argv) == 130
    assert set(datasets.load_from_disk(str(tmp_path / "tinyzero"))) == {"validation"}
    assert sorted(p.name for p in (tmp_path / "tinyzero").iterdir()) == ["dataset_dict.json", "validation"]


def test_a_fifo_or_folder_where_a_file_goes_is_refused(tmp_path, capsys):
    import os

    (tmp_path / "f" / "tinyzero").mkdir(parents=True)
    os.mkfifo(tmp_path / "f" / "tinyzero" / "test.jsonl")  # opening it would block the export
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "README.md").mkdir()
    for out in ("f", "d"):
        assert main(["--format", "jsonl", "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path / out)]) == 1
        assert "is not a regular file" in capsys.readouterr().err


def test_console_script_dispatches_export(tmp_path):
    out = subprocess.run([sys.executable, "-m", "countdown_gym", "export", "--format", "jsonl", "--preset", "tinyzero",
                          "--split", "validation", "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "tinyzero" / "validation.jsonl").is_file() and (tmp_path / "README.md").is_file()


@pytest.mark.parametrize(("fmt", "chat"), [("parquet", True), ("jsonl", False), ("hf", True)])
def test_grpo_trainer_trains_on_an_export_as_is(tmp_path, fmt: str, chat: bool):
    """GRPOTrainer(train_dataset=load_dataset(...)["train"]) with no renaming: 1 step of a tiny local Qwen2."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from datasets import load_dataset, load_from_disk
    from qwen_chat import ASSISTANT_HEADER, qwen_tokenizer, tiny_qwen2
    from trl import GRPOConfig, GRPOTrainer

    from countdown_gym.integrations.trl import format_reward, sparse_reward

    args = ["--format", fmt, "--preset", "tinyzero", "--split", "train", "--out", str(tmp_path / "out")]
    assert main(args + (["--chat"] if chat else [])) == 0
    if fmt == "hf":
        ds = load_from_disk(str(tmp_path / "out" / "tinyzero"))
    else:
        ds = load_dataset(str(tmp_path / "out"), "tinyzero", cache_dir=str(tmp_path / "cache"))
    train = ds["train"]
    tok = qwen_tokenizer([build_prompt(p, "tinyzero") for p in load_split("tinyzero", "train")[:50]])
    seen: dict[str, list] = {"prompts": [], "rules": []}

    class Recording(GRPOTrainer):
        def _tokenize_prompts(self, prompts):
            out = super()._tokenize_prompts(prompts)
            seen["prompts"] += [self.processing_class.decode(ids, skip_special_tokens=False) for ids in out[0]]
            return out

    def record(prompts, completions, **kwargs):
        seen["rules"] += kwargs["rules"]
        return [0.0] * len(completions)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        config = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=2, num_generations=2,
                            max_completion_length=8, use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
                            shuffle_dataset=False, seed=0, disable_tqdm=True)
        trainer = Recording(model=tiny_qwen2(tok), processing_class=tok, args=config, train_dataset=train,
                            reward_funcs=[sparse_reward, format_reward, record])
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    assert trainer.state.global_step == 1
    logged = {k for row in trainer.state.log_history for k in row}
    assert {"rewards/sparse_reward/mean", "rewards/format_reward/mean"} <= logged
    first = load_split("tinyzero", "train")[0]
    assert seen["rules"][0] == Rules.tinyzero().to_dict()  # a struct reaches the reward functions as a dict
    if chat:
        assert seen["prompts"][0].count("<|im_start|>assistant") == 1 and seen["prompts"][0].endswith(ASSISTANT_HEADER)
        assert f"Using the numbers {list(first.numbers)}".replace(" ", "") in seen["prompts"][0].replace(" ", "")
    else:
        assert seen["prompts"][0] == build_prompt(first, "tinyzero")
