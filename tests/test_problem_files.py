"""load_problems: TinyZero-style rows, the package's own rows, verl rows; bad rows reported by row number."""

from __future__ import annotations

import json

import pytest

from countdown_gym import Problem, Rules, load_split
from countdown_gym.data.problem_files import TINYZERO_RULES, load_problems, row_problem

TINYZERO_JSON = '{"nums": [4, 6, 1], "target": 24}'
TINYZERO_ROWS = [
    {"target": 24, "nums": [4, 6, 1]},            # 0: ok (4 * 6 * 1)
    {"target": 98, "nums": [44, 19, 35]},         # 1: ok (44 + 19 + 35)
    {"target": 1000, "nums": [1, 2, 3]},          # 2: unsolvable
    {"nums": [1, 2, 3]},                          # 3: no target
    {"target": 5, "nums": "1, 2, 3"},             # 4: numbers not a list
    {"target": 5, "nums": [1, 2.5]},              # 5: a float
    {"target": True, "nums": [2, 3]},             # 6: a bool target
    {"target": 3, "numbers": [3]},                # 7: one number, nothing to do
    {"target": 1, "nums": [3, 4]},                # 8: ok (4 - 3)
]


def test_tinyzero_rows_are_read_and_bad_rows_reported_by_row():
    loaded = load_problems(TINYZERO_ROWS, progress=False)
    assert loaded.rows == [0, 1, 8]
    assert [p.target for p in loaded.problems] == [24, 98, 1]
    assert all(p.rules == TINYZERO_RULES for p in loaded.problems)
    reasons = {i.row: i.reason for i in loaded.issues}
    assert reasons == {2: "unsolvable", 3: "malformed", 4: "malformed", 5: "malformed", 6: "malformed", 7: "trivial"}
    assert loaded.total_rows == len(TINYZERO_ROWS)
    text = loaded.report()
    assert text.startswith("9 rows: 3 problems, 6 left out") and "row 2: unsolvable" in text


def test_rules_override_and_no_solver_check():
    loaded = load_problems(TINYZERO_ROWS[:3], rules=Rules.longproc(), check_solvable=False, progress=False)
    assert loaded.rows == [0, 1, 2] and all(p.rules == Rules.longproc() for p in loaded.problems)


def test_own_rows_and_verl_rows():
    p = load_split("tinyzero", "test")[0]
    assert row_problem(p.to_dict()) == p
    assert row_problem({"numbers": [3, 4], "target": 7}).rules == Rules.longproc()
    assert row_problem({"numbers": [3, 4], "target": 7, "rules": "tinyzero"}).rules == Rules.tinyzero()
    from countdown_gym.integrations.verl import ground_truth

    verl_row = {"prompt": [], "reward_model": {"style": "rule", "ground_truth": ground_truth(p)}}
    assert row_problem(verl_row) == p
    from countdown_gym.integrations.verl import verl_row as exported

    back = row_problem(exported(p, "tinyzero", "test", 0, []))  # its id and preset were dropped
    assert (back, back.id, back.preset) == (p, p.id, "tinyzero")


def test_tinyzero_verl_rows_play_under_tinyzero_rules():
    """A row of TinyZero's own verl parquet (data_source 'countdown', no rules) was read under LongProc's rules, so
    [1, 5, 5, 5] -> 24 (5 * (5 - 1/5)) was left out as unsolvable; it is now a TinyZero problem."""
    gt = {"numbers": [1, 5, 5, 5], "target": 24}
    rows = [{"data_source": "countdown", "reward_model": {"style": "rule", "ground_truth": gt}},
            {"data_source": "countdown_gym/longproc-0.5k", "reward_model": {"style": "rule", "ground_truth": gt}}]
    loaded = load_problems(rows, progress=False)
    assert loaded.rows == [0] and loaded.problems[0].rules == TINYZERO_RULES
    assert [i.reason for i in loaded.issues] == ["unsolvable"]


def test_a_verl_ground_truth_that_is_no_object_is_named():
    """A ground truth of 5 was reported as "argument of type 'int' is not iterable"."""
    rows = [{"reward_model": {"ground_truth": gt}} for gt in (5, "[4, 6]", 2.5)]
    issues = load_problems(rows, progress=False).issues
    assert [i.message[:57] for i in issues] == ["reward_model.ground_truth must be a dict or its JSON, got"] * 3


def test_jsonl_file_with_a_broken_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"nums": [4, 6, 1], "target": 24}\nnot json\n\n{"nums": [3, 4], "target": 1}\n')
    loaded = load_problems(path, progress=False)
    assert loaded.rows == [0, 2] and [(i.row, i.reason) for i in loaded.issues] == [(1, "malformed")]


def test_a_key_twice_in_a_row_is_a_malformed_row(tmp_path):
    """'{"nums": [1, 2], "nums": [4, 6, 1], "target": 24}' was read as [4, 6, 1] -> 24 (json keeps the last key)."""
    twice = '{"nums": [1, 2], "nums": [4, 6, 1], "target": 24}'
    gt_twice = json.dumps({"reward_model": {"ground_truth": '{"numbers": [3], "numbers": [4, 6, 1], "target": 24}'}})
    rules_twice = '{"numbers": [4, 6, 1], "target": 24, "rules": "{\\"name\\": \\"x\\", \\"name\\": \\"y\\"}"}'
    (tmp_path / "rows.jsonl").write_text("\n".join([twice, gt_twice, rules_twice, TINYZERO_JSON]) + "\n")
    (tmp_path / "rows.json").write_text(f"[{twice}]")
    (tmp_path / "rows.csv").write_text('nums,target\n"{""a"": 1, ""a"": 2}",24\n')
    for name, issues in (("rows.jsonl", 3), ("rows.json", 1), ("rows.csv", 1)):
        loaded = load_problems(tmp_path / name, progress=False)
        assert [i.reason for i in loaded.issues] == ["malformed"] * issues, name
        assert all("appears twice in one object" in i.message for i in loaded.issues), loaded.report()


def test_parquet_csv_and_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(TINYZERO_ROWS[:2] + TINYZERO_ROWS[8:])
    assert load_problems(ds, progress=False).rows == [0, 1, 2]
    ds.to_parquet(str(tmp_path / "t.parquet"))
    assert len(load_problems(tmp_path / "t.parquet", progress=False).problems) == 3
    dd = datasets.DatasetDict({"train": ds, "test": ds.select([0])})
    with pytest.raises(ValueError, match="pass split"):
        load_problems(dd, progress=False)
    assert len(load_problems(dd, split="test", progress=False).problems) == 1
    dd.save_to_disk(str(tmp_path / "saved"))
    assert len(load_problems(tmp_path / "saved", split="train", progress=False).problems) == 3
    (tmp_path / "t.csv").write_text('nums,target\n"[4, 6, 1]",24\n"[1, 2, 3]",1000\n')
    loaded = load_problems(tmp_path / "t.csv", progress=False)
    assert loaded.rows == [0] and loaded.issues[0].reason == "unsolvable"
    for source in (tmp_path / "t.parquet", ds, TINYZERO_ROWS):  # split= was ignored: every row came back
        with pytest.raises(ValueError, match="split='test' picks a split of a DatasetDict"):
            load_problems(source, split="test", progress=False)



@pytest.mark.parametrize("fmt", ["numpy", "pandas", "arrow"])
def test_a_formatted_dataset_is_read_by_its_rows(fmt):
    """A Dataset with a format (ds.set_format("numpy") for training) left every row out as malformed: 'a row must be
    a mapping of column -> value, got DataFrame', or 'Rules.integer_only must be a bool, got ndarray'."""
    datasets = pytest.importorskip("datasets")
    own = [{**r, "rules": Rules.longproc().to_dict()} for r in (TINYZERO_ROWS[0], TINYZERO_ROWS[8])]
    for rows in (TINYZERO_ROWS[:2], own):
        ds = datasets.Dataset.from_list(rows)
        assert load_problems(ds.with_format(fmt), progress=False).problems == load_problems(ds, progress=False).problems
    dd = datasets.DatasetDict({"train": ds.with_format(fmt)})
    assert len(load_problems(dd, progress=False).problems) == 2

def test_csv_ids_and_presets_are_kept_as_written(tmp_path):
    """They were read as JSON: id 1e5 became "100000.0", true "True", null no id."""
    (tmp_path / "t.csv").write_text('id,preset,numbers,target\n1e5,true,"[1, 2]",3\ntrue,x,"[1, 3]",4\n'
                                    'null,null,"[1, 4]",5\n007,7,"[1, 5]",6\n')
    loaded = load_problems(tmp_path / "t.csv", check_solvable=False, progress=False)
    assert [(p.id, p.preset) for p in loaded.problems] == [("1e5", "true"), ("true", "x"), ("null", "null"), ("007", "7")]



def test_a_nan_id_is_no_id(tmp_path):
    """pandas reads a missing id (pd.read_json(lines=True) of rows some without an id) as NaN; it became the id
    'nan', while the same file read directly gives no id."""
    pd = pytest.importorskip("pandas")
    (tmp_path / "t.jsonl").write_text('{"numbers": [3, 4], "target": 7, "id": "a"}\n{"numbers": [3, 5], "target": 8}\n')
    for source in (tmp_path / "t.jsonl", pd.read_json(tmp_path / "t.jsonl", lines=True)):
        assert [p.id for p in load_problems(source, progress=False).problems] == ["a", None]
    verl = {"reward_model": {"ground_truth": {"numbers": [3, 4], "target": 7}}, "extra_info": {"id": float("nan")}}
    assert row_problem(verl).id is None


def test_a_row_without_numbers_names_its_columns_of_any_type():
    """Column names of mixed types (a DataFrame's 0 beside 'target') gave "'<' not supported between instances of
    'str' and 'int'" instead of the missing column."""
    [issue] = load_problems([{0: [3, 4], "target": 7}], progress=False).issues
    assert issue.message == "no 'numbers' or 'nums' column (columns: [0, 'target'])"


@pytest.mark.parametrize("value", [5, b"tinyzero", ["tinyzero"], Rules.tinyzero()])
def test_rules_that_are_no_dict_json_or_preset_name_are_named(value):
    """They were read as the preset named by their str(): "unknown rules preset \"b'tinyzero'\"" (and the verl
    readers said so too, where they had said 'must be a dict, a preset name or absent, got int 5')."""
    [issue] = load_problems([{"numbers": [3, 4], "target": 7, "rules": value}], progress=False).issues
    assert issue.message.startswith("a row's 'rules' must be a dict, its JSON or a preset name, got ")

def test_a_column_named_twice_is_a_malformed_row_not_read_last_wins(tmp_path):
    (tmp_path / "t.csv").write_text('numbers,target,target,,\n"[1, 2, 3]",6,7,,\n')  # two unnamed columns: no matter
    loaded = load_problems(tmp_path / "t.csv", check_solvable=False, progress=False)
    assert loaded.problems == [] and "'target' appears twice" in loaded.issues[0].message  # was target 7
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([[[1, 2, 3], 6, 7]] * 2, columns=["numbers", "target", "target"])
    loaded = load_problems(frame, check_solvable=False, progress=False)
    assert loaded.problems == [] and [i.row for i in loaded.issues] == [0, 1] and "appears twice" in loaded.issues[0].message


def test_a_one_element_array_is_no_number_as_a_one_element_list_is_none():
    np = pytest.importorskip("numpy")
    rows = [{"numbers": [1, 2, 3], "target": np.array([6])}, {"numbers": [np.array([1]), 2, 3], "target": 6},
            {"numbers": np.array([1, 2, 3]), "target": np.int64(6)}]  # the last: numpy scalars are ints
    loaded = load_problems(rows, check_solvable=False, progress=False)  # a DataFrame of a list<int> parquet column
    assert loaded.rows == [2] and [i.row for i in loaded.issues] == [0, 1]  # were read as 6 and 1


def test_bad_sources():
    with pytest.raises(FileNotFoundError):
        load_problems("/no/such/file.jsonl")
    with pytest.raises(TypeError):
        load_problems(42)
    with pytest.raises(TypeError):
        load_problems([], rules="longproc")  # type: ignore[arg-type]


def test_exported_jsonl_reads_back(tmp_path):
    from countdown_gym.cli.export import export

    export("jsonl", tmp_path, ["tinyzero"], ["validation"])
    loaded = load_problems(tmp_path / "tinyzero" / "validation.jsonl", progress=False)
    assert not loaded.issues
    assert loaded.problems == load_split("tinyzero", "validation")
    assert all(isinstance(p, Problem) and p.id for p in loaded.problems)
    assert json.loads((tmp_path / "tinyzero" / "validation.jsonl").read_text().splitlines()[0])["split"] == "validation"


def test_a_folder_that_is_no_datasets_folder_is_named(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"nums": [4, 6, 1], "target": 24}\n')
    with pytest.raises(ValueError, match="is a folder but not a datasets folder"):  # was datasets' FileNotFoundError
        load_problems(tmp_path, progress=False)


@pytest.mark.parametrize(("name", "text"), [("dataset_dict.json", "cut sh"), ("state.json", "{}")])
def test_a_broken_datasets_folder_is_named(tmp_path, name, text):
    pytest.importorskip("datasets")
    (tmp_path / name).write_text(text)  # was json's "Expecting value: line 1 column 1 (char 0)", naming no file
    with pytest.raises(ValueError, match=f"{tmp_path} is not a readable datasets folder"):
        load_problems(tmp_path, progress=False)


def test_a_parquet_file_that_is_no_parquet_is_named(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "t.parquet").write_text("version https://git-lfs.github.com/spec/v1\n")  # a Git LFS pointer
    with pytest.raises(ValueError, match="is not a readable Parquet file"):  # was pyarrow's ArrowInvalid from inside
        load_problems(tmp_path / "t.parquet", progress=False)


def test_rows_text_given_as_the_path_is_no_file():
    text = '{"nums": [4, 6, 1], "target": 24}\n' * 20  # past the longest file name: OSError 'File name too long'
    with pytest.raises(FileNotFoundError, match="no such file or folder: '.*' \\(File name too long\\)"):
        load_problems(text, progress=False)
