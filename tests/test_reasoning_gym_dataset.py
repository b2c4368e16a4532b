"""The reasoning-gym dataset adapter, against reasoning-gym's own base classes, registry and composite."""

from __future__ import annotations

import pytest

reasoning_gym = pytest.importorskip("reasoning_gym")

from reasoning_gym.composite import CompositeConfig, CompositeDataset, DatasetSpec  # noqa: E402
from reasoning_gym.dataset import ProceduralDataset  # noqa: E402
from reasoning_gym.utils import extract_answer  # noqa: E402

from countdown_gym import load_split, verify  # noqa: E402
from countdown_gym.integrations.reasoning_gym import (  # noqa: E402
    DATASET_NAME,
    CountdownGymConfig,
    CountdownGymDataset,
    entry_problem,
    register,
)


def test_items_have_question_answer_metadata_and_the_reference_answer_scores_1() -> None:
    ds = CountdownGymDataset(CountdownGymConfig(preset="longproc-0.5k", split="test", size=20))
    assert isinstance(ds, ProceduralDataset) and len(ds) == 20 and len(list(ds)) == 20
    split = load_split("longproc-0.5k", "test")
    for i, entry in enumerate(ds):
        assert set(entry) == {"question", "answer", "metadata"}
        meta = entry["metadata"]
        assert meta["source_dataset"] == DATASET_NAME and meta["source_index"] == i
        assert (tuple(meta["numbers"]), meta["target"]) == (split[i].numbers, split[i].target)  # seed=None: frozen order
        assert entry_problem(entry) == split[i]  # rules included
        assert str(split[i].target) in entry["question"] and "<answer>" in entry["question"]
        assert ds.score_answer(entry["answer"], entry) == 1.0
        assert verify(split[i], entry["answer"]).correct


def test_score_answer_is_the_verifiers_reward() -> None:
    ds = CountdownGymDataset(CountdownGymConfig(preset="tinyzero", size=3))
    e = ds[0]
    right = e["answer"]
    assert ds.score_answer(right, e) == 1.0
    assert ds.score_answer(extract_answer(f"<think>hm</think><answer> {right} </answer>"), e) == 1.0  # rg's extraction
    assert ds.score_answer(f"<think>hm</think><answer>{right}</answer>", e) == 1.0  # or the whole completion
    assert ds.score_answer(None, e) == 0.0 and ds.score_answer("", e) == 0.0
    a, b, c, d = e["metadata"]["numbers"]
    assert ds.score_answer(f"{a}+{b}+{c}+{d}", e) == (1.0 if a + b + c + d == e["metadata"]["target"] else 0.0)
    assert ds.score_answer(f"{a}**2", e) == 0.0  # reasoning-gym's own countdown gives hacks partial credit
    with pytest.raises(ValueError, match="metadata with 'numbers' and 'target'"):
        ds.score_answer(right, {"question": "q", "answer": "a", "metadata": {}})


def test_an_entry_read_after_its_int_twin_is_still_refused_not_the_cached_problem() -> None:
    """entry_problem's cache once matched 3.0 to 3, True to 1, 2000.0 to 2000 (equal and same hash) and read a set or
    a dict of numbers as a tuple of its members: a problem the entry does not state."""
    entry_problem({"metadata": {"numbers": [1, 2], "target": 3, "rules": {"value_limit": 2000, "use_all": False}}})
    for meta in ({"numbers": [1, 2], "target": 3.0}, {"numbers": [True, 2], "target": 3},
                 {"numbers": [1, 2], "target": 3, "rules": {"value_limit": 2000.0, "use_all": False}},
                 {"numbers": [1, 2], "target": 3, "rules": {"value_limit": 2000, "use_all": 0}},
                 {"numbers": {4, 2}, "target": 8}, {"numbers": {4: 1, 2: 1}, "target": 8}):
        with pytest.raises(ValueError):
            entry_problem({"metadata": meta})


def test_registered_with_reasoning_gyms_factory_and_composite() -> None:
    assert register() is True  # idempotent: already registered on import
    ds = reasoning_gym.create_dataset(DATASET_NAME, preset="tinyzero", split="validation", size=8, seed=3)
    assert isinstance(ds, CountdownGymDataset) and len(ds) == 8
    again = reasoning_gym.create_dataset(DATASET_NAME, preset="tinyzero", split="validation", size=8, seed=3)
    assert [e["metadata"]["id"] for e in ds] == [e["metadata"]["id"] for e in again]  # seeded: reproducible
    score = reasoning_gym.get_score_answer_fn(DATASET_NAME)
    assert score(ds[0]["answer"], ds[0]) == 1.0
    comp = CompositeDataset(CompositeConfig(size=30, seed=7, datasets=[
        DatasetSpec(DATASET_NAME, 1.0, {"preset": "longproc-0.5k", "split": "test"}),
        DatasetSpec("countdown", 1.0, {}),
    ]))
    ours = [e for e in comp if e["metadata"]["source_dataset"] == DATASET_NAME]
    assert ours and all(comp.score_answer(e["answer"], e) == 1.0 for e in ours)


def test_bad_configs_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown preset"):
        CountdownGymDataset(CountdownGymConfig(preset="nope"))
    with pytest.raises(ValueError, match="unknown split"):
        CountdownGymDataset(CountdownGymConfig(split="dev"))
    with pytest.raises(ValueError, match="size=5000 but"):
        CountdownGymDataset(CountdownGymConfig(split="test", size=5000))
    with pytest.raises(ValueError, match="unknown prompt_style"):
        CountdownGymDataset(CountdownGymConfig(prompt_style="chatml"))
    with pytest.raises(IndexError):
        CountdownGymDataset(CountdownGymConfig(size=2))[2]
    split = load_split("tinyzero", "test")[:3]
    for problems in ((p for p in split), set(split), split[0]):  # were "no tinyzero/test problem matches {}", a
        with pytest.raises(ValueError, match="problems must be a non-empty sequence"):  # run-dependent order, a TypeError
            CountdownGymDataset(problems=problems)


# --- parity with reasoning-gym's own countdown: difficulty metadata, its config names, a curriculum --------------


def test_difficulty_metadata_carries_the_tier_and_its_labels() -> None:
    from countdown_gym.data.difficulty import split_labels, split_tiers

    ds = CountdownGymDataset(CountdownGymConfig(preset="tinyzero", split="test", size=30))
    labels, tiers = split_labels("tinyzero", "test"), split_tiers("tinyzero", "test")
    for i, entry in enumerate(ds):
        d = entry["metadata"]["difficulty"]
        want = {k: v for k, v in labels[i].to_dict().items() if k != "solution"}
        assert d == {"tier": tiers[i], "numbers": len(entry["metadata"]["numbers"]), **want}
    assert {e["metadata"]["difficulty"]["tier"] for e in ds} == {"easy", "medium", "hard"}
    own = CountdownGymDataset(CountdownGymConfig(), problems=[load_split("hard", "test")[0]])  # labels computed
    assert own[0]["metadata"]["difficulty"]["tier"] == split_tiers("hard", "test")[0]


def test_reasoning_gyms_config_names_are_accepted() -> None:
    import dataclasses

    from reasoning_gym.games.countdown import CountdownConfig

    from countdown_gym.integrations.reasoning_gym import RANGE_FIELDS

    theirs = {f.name for f in dataclasses.fields(CountdownConfig)}  # the installed reasoning-gym's names
    assert set(RANGE_FIELDS) <= theirs
    ranges = {"min_numbers": 3, "max_numbers": 3, "min_value": 5, "max_value": 90, "min_target": 10, "max_target": 60}
    ds = reasoning_gym.create_dataset(DATASET_NAME, preset="tinyzero", split="train", size=20, seed=1, **ranges)
    for e in ds:
        m = e["metadata"]
        assert len(m["numbers"]) == 3 and min(m["numbers"]) >= 5 and max(m["numbers"]) <= 90 and 10 <= m["target"] <= 60
        assert ds.score_answer(e["answer"], e) == 1.0
    pooled = reasoning_gym.create_dataset(DATASET_NAME, preset="all", split="test", min_numbers=5, tier="hard", size=10)
    assert all(e["metadata"]["preset"] == "hard" and e["metadata"]["difficulty"]["tier"] == "hard" for e in pooled)
    with pytest.raises(ValueError, match="no tinyzero/test problem matches"):
        CountdownGymDataset(CountdownGymConfig(preset="tinyzero", min_numbers=5))
    with pytest.raises(ValueError, match="min_target=9 is above max_target=3"):
        CountdownGymDataset(CountdownGymConfig(min_target=9, max_target=3))
    with pytest.raises(ValueError, match="max_value must be a positive int"):
        CountdownGymDataset(CountdownGymConfig(max_value=0))
    with pytest.raises(ValueError, match="unknown tier"):
        CountdownGymDataset(CountdownGymConfig(tier="extreme"))


def test_registered_curriculum_steps_over_tiers_and_number_counts() -> None:
    from reasoning_gym.factory import create_curriculum

    from countdown_gym.integrations.reasoning_gym import CountdownGymCurriculum

    cur = create_curriculum(DATASET_NAME)
    assert isinstance(cur, CountdownGymCurriculum) and set(cur.attributes) == {"tier", "numbers"}
    seen = []
    for step in range(3):
        config = cur.generate_configuration({"size": 12, "seed": step})
        ds = CountdownGymDataset(config)
        counts = {len(e["metadata"]["numbers"]) for e in ds}
        assert {e["metadata"]["difficulty"]["tier"] for e in ds} == {config.tier}
        assert config.min_numbers <= min(counts) and max(counts) <= config.max_numbers
        seen.append((config.tier, config.min_numbers, config.max_numbers))
        cur.increment_attr_level("tier")
        cur.increment_attr_level("numbers")
    assert seen == [("easy", 3, 4), ("medium", 3, 5), ("hard", 3, 6)]
    assert CountdownGymDataset(cur.generate_configuration({"preset": "tinyzero", "size": 4})).config.preset == "tinyzero"


def test_a_generated_split_whose_tier_never_occurs_is_an_error_not_a_hang(monkeypatch) -> None:
    import countdown_gym.integrations.reasoning_gym as rg

    monkeypatch.setattr(rg, "MAX_MISSES", 20)  # 3-number tinyzero problems are never hard: every draw misses
    ds = CountdownGymDataset(CountdownGymConfig(split="generated", size=3, seed=0, tier="hard", max_numbers=3))
    for _ in range(2):
        with pytest.raises(ValueError, match="among 20 generated in a row"):
            ds[0]


def test_reseeding_dataset_over_an_unseeded_dataset_counts_from_a_drawn_seed() -> None:
    """reasoning-gym's ReseedingDataset seeds chunk k with dataset.seed + k: with seed=None ours was None, a
    TypeError; now, as reasoning-gym's own datasets do, seed=None draws one (the dataset keeps its frozen order)."""
    from dataclasses import replace

    from reasoning_gym.dataset import ReseedingDataset

    config = CountdownGymConfig(preset="tinyzero", split="validation", size=4)
    ds = CountdownGymDataset(config)
    assert isinstance(ds.seed, int) and config.seed is None
    assert [e["metadata"]["id"] for e in ds] == [p.id for p in load_split("tinyzero", "validation")[:4]]
    items = iter(ReseedingDataset(ds, chunk_size=4))
    chunks = [CountdownGymDataset(replace(config, seed=(ds.seed + k) % 2**32)) for k in (0, 1)]
    assert [next(items)["metadata"]["id"] for _ in range(8)] == [e["metadata"]["id"] for c in chunks for e in c]
