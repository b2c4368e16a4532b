"""Problems of any number beyond the frozen splits: the generator minus every held-out problem, through
``countdown-gym export --size`` and the reasoning-gym adapter."""

from __future__ import annotations

import json

import pytest

from countdown_gym import load_split, verify
from countdown_gym.cli.export import COLUMNS, generated_rows, main
from countdown_gym.data.difficulty import TIERS, measure, tier
from countdown_gym.data.fresh import fresh_config, generate_fresh, held_out_keys
from countdown_gym.data.generator import iter_problems
from countdown_gym.data.splits import SPLIT_RULES, SPLIT_SPEC
from countdown_gym.integrations.reasoning_gym import DATASET_NAME, CountdownGymConfig, CountdownGymDataset


def test_held_out_keys_are_every_validation_and_test_problem():
    keys = held_out_keys()
    expected = {p.key for preset in SPLIT_SPEC for split in ("validation", "test") for p in load_split(preset, split)}
    assert keys == expected and len(keys) == sum(SPLIT_SPEC[p]["validation"] + SPLIT_SPEC[p]["test"] for p in SPLIT_SPEC)


def test_the_splits_own_seed_skips_test_and_validation_and_continues_with_train():
    # tinyzero's splits were generated under its play rules from one stream: test first, then validation, then
    # train. The same stream minus the held-out problems therefore starts exactly at the frozen train split.
    seed = SPLIT_SPEC["tinyzero"]["seed"]
    raw = [p.key for p, _ in zip(iter_problems(fresh_config("tinyzero"), seed), range(705), strict=False)]
    fresh = generate_fresh("tinyzero", 5, seed)
    train = load_split("tinyzero", "train")[:5]
    assert [p.key for p in fresh] == [p.key for p in train]
    assert [p.key for p in fresh] == raw[700:]  # the first 700 draws (500 test + 200 validation) were skipped
    assert all(p.rules == SPLIT_RULES["tinyzero"] and p.preset == "tinyzero" for p in fresh)
    assert [p.id for p in fresh] == [f"tinyzero/generated-{seed}/{k}" for k in range(5)]


def test_generated_problems_are_deterministic_distinct_solvable_and_never_held_out():
    a = generate_fresh("longproc-0.5k", 400, seed=3)
    assert [p.key for p in a] == [p.key for p in generate_fresh("longproc-0.5k", 400, seed=3)]
    assert [p.key for p in a] != [p.key for p in generate_fresh("longproc-0.5k", 400, seed=4)]
    assert len({p.key for p in a}) == 400 and not {p.key for p in a} & held_out_keys()
    assert all(p.rules == SPLIT_RULES["longproc-0.5k"] for p in a)
    assert all(verify(p, measure(p).solution).correct for p in a[:40])
    with pytest.raises(ValueError, match="unknown preset"):
        generate_fresh("nope", 1)
    with pytest.raises(ValueError, match="non-negative int"):
        generate_fresh("tinyzero", -1)


def test_generated_rows_carry_measured_labels_and_tier():
    rows = generated_rows("tinyzero", 30, seed=2)
    assert len(rows) == 30 and list(rows[0]) == list(COLUMNS)
    for row, p in zip(rows, generate_fresh("tinyzero", 30, seed=2), strict=True):
        d = measure(p)
        assert (row["numbers"], row["target"], row["split"], row["id"]) == (list(p.numbers), p.target, "train", p.id)
        assert row["search_nodes"] == d.search_nodes and row["tier"] == tier(d, "tinyzero") and row["tier"] in TIERS
        assert verify(p, f"<answer>{row['solution']}</answer>").correct


def test_export_size_writes_that_many_generated_train_rows_and_the_frozen_test(tmp_path):
    pytest.importorskip("datasets")
    args = ["--format", "jsonl", "--preset", "longproc-0.5k", "--split", "train,test", "--size", "300", "--seed", "5",
            "--out", str(tmp_path)]
    assert main(args) == 0
    train = [json.loads(line) for line in (tmp_path / "longproc-0.5k" / "train.jsonl").read_text().splitlines()]
    test = [json.loads(line) for line in (tmp_path / "longproc-0.5k" / "test.jsonl").read_text().splitlines()]
    assert len(train) == 300 and len(test) == len(load_split("longproc-0.5k", "test"))  # the test split stays frozen
    keys = {(tuple(sorted(r["numbers"])), r["target"]) for r in train}
    assert len(keys) == 300 and not keys & held_out_keys()
    assert {r["tier"] for r in train} == set(TIERS)
    assert train == generated_rows("longproc-0.5k", 300, seed=5)
    card = (tmp_path / "README.md").read_text()
    assert "generated beyond the frozen splits" in card and "--seed 5" in card


@pytest.mark.parametrize(("args", "message"), [
    (["--size", "0"], "--size must be a number of problems in 1..10,000,000, got 0"),
    (["--size", "99999999999999999999"], "--size must be a number of problems in 1..10,000,000"),
    (["--size", "10", "--split", "test"], "--size makes the train split"),
    (["--size", "10", "--seed", "-1"], "--seed must be >= 0"),
    (["--max-turns", "8"], "--max-turns 8 applies to --format verl --interaction tool only"),  # was ignored silently
])
def test_export_size_usage_errors(tmp_path, capsys, args, message):
    assert main(["--format", "jsonl", "--out", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err


def test_verl_export_size_generates_the_train_split(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from countdown_gym.integrations.verl_export import export

    paths = export("tinyzero", ["train", "validation"], "tinyzero", tmp_path, size=12, seed=1)
    train, validation = (pq.read_table(p).to_pylist() for p in paths)
    assert [r["extra_info"]["id"] for r in train] == [p.id for p in generate_fresh("tinyzero", 12, seed=1)]
    assert len(validation) == len(load_split("tinyzero", "validation"))


def test_reasoning_gym_size_beyond_the_test_split_generates():
    rg = pytest.importorskip("reasoning_gym")
    ds = rg.create_dataset(DATASET_NAME, size=20000)
    assert len(ds) == 20000 and ds.split == "generated"
    entries = [ds[i] for i in range(60)] + [ds[-19800]]  # problems are drawn when first read
    keys = {(tuple(sorted(e["metadata"]["numbers"])), e["metadata"]["target"]) for e in entries}
    assert len(keys) == 61 and not keys & held_out_keys()
    for e in entries[:20]:
        assert e["metadata"]["split"] == "generated" and e["metadata"]["difficulty"]["tier"] in TIERS
        assert ds.score_answer(e["answer"], e) == 1.0
    again = rg.create_dataset(DATASET_NAME, size=20000, seed=0)  # seed None is seed 0
    assert [again[i] for i in range(60)] == entries[:60]
    other = rg.create_dataset(DATASET_NAME, size=20000, seed=1)
    assert [other[i]["metadata"]["numbers"] for i in range(10)] != [e["metadata"]["numbers"] for e in entries[:10]]
    small = rg.create_dataset(DATASET_NAME, size=100)  # fits the frozen test split: the default stays frozen
    assert small.split == "test" and small[0]["metadata"]["id"] == load_split("tinyzero", "test")[0].id


def test_generated_split_honours_ranges_tier_and_pooled_presets():
    ds = CountdownGymDataset(CountdownGymConfig(preset="all", split="generated", size=12, seed=2, tier="hard",
                                                min_numbers=4, max_value=60))
    entries = list(ds)
    assert {e["metadata"]["preset"] for e in entries} == set(SPLIT_SPEC)  # taken in turn
    for e in entries:
        meta = e["metadata"]
        assert meta["difficulty"]["tier"] == "hard" and len(meta["numbers"]) >= 4 and max(meta["numbers"]) <= 60


@pytest.mark.parametrize(("config", "message"), [
    (CountdownGymConfig(split="generated"), "needs a size"),
    (CountdownGymConfig(split="test", size=5000), "split='generated' generates any number"),
    (CountdownGymConfig(split="dev"), "unknown split"),
    (CountdownGymConfig(preset="tinyzero", split="generated", size=3, min_numbers=5), "can be generated"),
])
def test_generated_split_errors(config, message):
    with pytest.raises(ValueError, match=message):
        CountdownGymDataset(config)


@pytest.mark.parametrize("limit", [-1, 2.5, True])
def test_verl_export_refuses_a_limit_that_is_not_a_count(tmp_path, limit):
    from countdown_gym.integrations.verl_export import export

    with pytest.raises(ValueError, match="limit must be an integer >= 0"):  # -1 used to drop the last problem silently
        export("tinyzero", ["validation"], "tinyzero", tmp_path, limit=limit)
    assert not any(tmp_path.iterdir())
