"""verl adapter: compute_score (sparse + dense terms) and the parquet export of the frozen splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from countdown_gym import Problem, Rules, load_split, solve
from countdown_gym.integrations.verl import compute_score, ground_truth, problem_from_ground_truth
from countdown_gym.rewards.variants import REWARD_VARIANTS, score_terms

P = Problem((21, 16, 17, 26), 46)
GT = ground_truth(P)
SOURCE = "countdown_gym/longproc-0.5k"
SEARCH = "21+16=37 [17,26,37]\n 26+17=43 [37,43]\n 26-17=9 [37,9]\n  37+9=46 [46]\n<answer>(21 + 16) + (26 - 17)</answer>"


def test_sparse_score_is_a_float() -> None:
    assert compute_score(SOURCE, "<answer>21 + 16 + 26 - 17</answer>", GT) == 1.0
    assert compute_score(SOURCE, "<answer>21 + 16 + 26 + 17</answer>", GT) == 0.0
    assert compute_score(SOURCE, "I give up", GT, {"index": 3}) == 0.0
    assert compute_score(SOURCE, SEARCH, GT) == 1.0
    # verl's reward loop also passes its reward-model router and tokenizer
    assert compute_score(SOURCE, SEARCH, GT, {}, reward_router_address=None, reward_model_tokenizer=None) == 1.0


def test_dense_terms_return_a_dict_with_score() -> None:
    out = compute_score(SOURCE, SEARCH, GT, dense="oracle-reachable,format")
    assert set(out) >= {"score", "sparse", "oracle-reachable", "format", "invalid_steps", "moves"}
    assert out["sparse"] == 1.0 and out["format"] == 1.0 and -1.0 <= out["oracle-reachable"] <= 1.0
    assert out["score"] == pytest.approx(1.0 + REWARD_VARIANTS["format"].weight
                                         + REWARD_VARIANTS["oracle-reachable"].weight * out["oracle-reachable"])
    assert all(isinstance(v, float) for v in out.values())  # verl aggregates every key as a metric
    custom = compute_score(SOURCE, SEARCH, GT, dense=["oracle-perfect"], weights={"oracle-perfect": 2.0})
    assert custom["score"] == pytest.approx(1.0 + 2.0 * custom["oracle-perfect"])
    hallucinated = compute_score(SOURCE, "21+16=38 [17,26,38]\n<answer>38+8</answer>", GT, dense=["oracle-reachable"])
    assert hallucinated["invalid_steps"] >= 1 and hallucinated["oracle-reachable"] == -1.0


def test_weights_must_be_finite_and_name_a_scored_term() -> None:
    assert compute_score(SOURCE, SEARCH, GT, weights={"sparse": 2.0})["score"] == 2.0
    for weights in ({"format": float("nan")}, {"sparse": float("inf")}, {"format": "2"}, {"sparse": 10**400}):
        with pytest.raises(ValueError, match=r"weights\['(format|sparse)'\] must be a finite number"):
            compute_score(SOURCE, SEARCH, GT, dense="format", weights=weights)  # 10**400 was a raw OverflowError
    with pytest.raises(ValueError, match="is not a scored term"):
        compute_score(SOURCE, SEARCH, GT, dense="format", weights={"oracle-reachable": 1.0})
    np = pytest.importorskip("numpy")
    assert compute_score(SOURCE, SEARCH, GT, weights={"sparse": np.float32(2)})["score"] == 2.0  # was refused


def test_same_terms_as_the_trl_rewards() -> None:
    from countdown_gym.envs.text import replay_completion

    out = compute_score(SOURCE, SEARCH, GT, dense="format,oracle-reachable,oracle-perfect")
    ref = score_terms(replay_completion(P, SEARCH), ["sparse", "format", "oracle-reachable", "oracle-perfect"])
    assert {k: out[k] for k in ref} == ref


def test_bad_inputs_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="numbers"):
        compute_score(SOURCE, "x", {"target": 3})
    with pytest.raises(ValueError, match="JSON"):
        compute_score(SOURCE, "x", "{oops")
    with pytest.raises(ValueError, match="dense"):
        compute_score(SOURCE, "x", GT, dense="magic")
    with pytest.raises(ValueError, match="solution_str"):
        compute_score(SOURCE, None, GT)
    # these were a raw TypeError ('int' object is not iterable) and AttributeError ('list' ... no attribute 'items')
    with pytest.raises(ValueError, match="dense must be a list of reward variants"):
        compute_score(SOURCE, "x", GT, dense=5)
    with pytest.raises(ValueError, match="weights must be a mapping"):
        compute_score(SOURCE, "x", GT, weights=[("sparse", 2.0)])


def test_ground_truth_round_trips_json_numpy_and_rules() -> None:
    np = pytest.importorskip("numpy")
    assert problem_from_ground_truth(GT) == P
    assert problem_from_ground_truth(json.dumps(GT)) == P
    assert problem_from_ground_truth({"numbers": np.array([21, 16, 17, 26]), "target": np.int64(46)}) == P
    tz = Problem((3, 7, 9), 10, rules=P.rules.tinyzero())
    assert problem_from_ground_truth(ground_truth(tz)).rules == tz.rules
    assert problem_from_ground_truth({"numbers": [3, 7, 9], "target": 10, "rules": "tinyzero"}).rules.name == "tinyzero"


@pytest.mark.parametrize("gt", [b"\xff{}", "[" * 5000 + "]" * 5000, "{bad"], ids=["not-utf8", "deep", "bad"])
def test_ground_truth_that_is_not_json_is_named(gt) -> None:
    with pytest.raises(ValueError, match="ground_truth is not JSON"):
        problem_from_ground_truth(gt)


def test_a_key_twice_in_a_ground_truth_is_named() -> None:
    """'{"numbers": [1, 2], "numbers": [21, 16, 17, 26], ...}' was read as the second puzzle (json keeps the last)."""
    with pytest.raises(ValueError, match="ground_truth is not JSON .key 'numbers' appears twice in one object"):
        problem_from_ground_truth('{"numbers": [1, 2], "numbers": [21, 16, 17, 26], "target": 46}')


def test_export_writes_verl_parquet_and_rows_score(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from countdown_gym.cli.export import main  # what scripts/export_verl.py runs

    assert main(["--format", "verl", "--preset", "longproc-0.5k", "--split", "train,test", "--limit", "3", "--out", str(tmp_path),
                 "--prompt-style", "longproc"]) == 0
    for split in ("train", "test"):
        rows = pq.read_table(tmp_path / "longproc-0.5k" / f"{split}.parquet").to_pylist()
        problems = load_split("longproc-0.5k", split)[:3]
        assert len(rows) == 3
        for i, (row, p) in enumerate(zip(rows, problems, strict=True)):
            assert row["data_source"] == SOURCE and row["ability"] == "math"
            assert row["prompt"][0]["role"] == "user" and str(p.target) in row["prompt"][0]["content"]
            assert row["reward_model"]["style"] == "rule"
            assert row["extra_info"] == {"split": split, "index": i, "id": p.id, "preset": "longproc-0.5k", "prompt_style": "longproc"}
            gt = row["reward_model"]["ground_truth"]
            assert problem_from_ground_truth(gt) == p
            assert compute_score(row["data_source"], f"<answer>{solve(p, limit=1)[0]}</answer>", gt, row["extra_info"]) == 1.0


def test_export_rejects_bad_splits(tmp_path: Path) -> None:
    from countdown_gym.cli.export import main  # what scripts/export_verl.py runs

    assert main(["--format", "verl", "--split", "dev", "--out", str(tmp_path)]) == 2


def test_dense_critic_on_states_the_critic_cannot_score_is_a_clear_error():
    pytest.importorskip("torch")
    from critics.verl_reward import compute_score

    gt = {"numbers": [1, 2, 3, 4, 5], "target": 15}
    with pytest.raises(ValueError, match="at most 4 numbers, but this problem has 5"):
        compute_score("countdown_gym/hard", "<answer>1+2+3+4+5</answer>", gt, dense=["critic"])
    assert compute_score("countdown_gym/hard", "<answer>1+2+3+4+5</answer>", gt) == 1.0  # sparse needs no critic


def test_dense_critic_without_a_critic_names_the_critics_reward_file():
    from countdown_gym.integrations.verl import compute_score

    gt = {"numbers": [6, 2, 5, 3], "target": 8}
    with pytest.raises(ValueError, match="critics/verl_reward.py"):
        compute_score("countdown_gym/longproc-0.5k", "<answer>(6 - 2) * (5 - 3)</answer>", gt, dense=["critic"])
    with pytest.raises(ValueError, match="with a score.states, targets. method.*got int"):  # not a scorer at all
        compute_score("countdown_gym/longproc-0.5k", "<answer>(6 - 2) * (5 - 3)</answer>", gt, dense=["critic"], critic=5)


def test_dense_critic_scores_four_number_problems():
    pytest.importorskip("torch")
    from countdown_gym.integrations.verl import compute_score as core_score
    from critics import load_critic
    from critics.verl_reward import compute_score, critic_for

    assert load_critic().config.max_numbers >= 4  # the limit comes from the checkpoint's config
    gt = {"numbers": [6, 2, 5, 3], "target": 8}
    out = compute_score("countdown_gym/longproc-0.5k", "<answer>(6 - 2) * (5 - 3)</answer>", gt, dense=["critic"])
    assert out == core_score("countdown_gym/longproc-0.5k", "<answer>(6 - 2) * (5 - 3)</answer>", gt,
                             dense="critic", critic=critic_for(None))
    assert out["sparse"] == 1.0 and -1.0 <= out["critic"] <= 1.0


def test_tinyzero_rows_without_rules_play_under_tinyzero_rules() -> None:
    """TinyZero's own parquet (data_source 'countdown', ground truth {numbers, target}) was scored under LongProc's
    rules: 5*(5-1/5) for [1, 5, 5, 5] -> 24 scored 0.0; TinyZero's rows now play under TinyZero's rules."""
    gt = {"numbers": [1, 5, 5, 5], "target": 24}
    answer = "<answer>5 * (5 - 1 / 5)</answer>"
    assert compute_score("countdown", answer, gt) == 1.0
    assert problem_from_ground_truth(gt, "countdown").rules.name == "tinyzero"
    assert compute_score(SOURCE, answer, gt) == 0.0  # any other row without rules: LongProc's, as documented
    assert compute_score("countdown", answer, {**gt, "rules": "longproc"}) == 0.0  # the row's own rules win


@pytest.mark.parametrize("gt", [{"nums": [1, 5, 5, 5], "target": 24}, b'{"nums": [1, 5, 5, 5], "target": 24}',
                                b'{"numbers": [1, 5, 5, 5], "target": 24, "rules": "tinyzero"}'])
def test_every_verl_reader_reads_a_nums_or_bytes_ground_truth_alike(gt) -> None:
    """load_problems read TinyZero's ``nums`` and refused bytes; compute_score and the tools refused ``nums`` and read
    bytes. Every reader now reads both, as one (a TinyZero problem: 5 * (5 - 1/5) = 24)."""
    import asyncio

    from countdown_gym.data.problem_files import load_problems
    from countdown_gym.integrations import verl_multiturn as vm

    tz = Problem((1, 5, 5, 5), 24, Rules.tinyzero())
    loaded = load_problems([{"data_source": SOURCE, "reward_model": {"ground_truth": gt}}], progress=False)
    assert loaded.problems == [tz] and problem_from_ground_truth(gt, SOURCE) == tz
    assert compute_score(SOURCE, "<answer>5 * (5 - 1 / 5)</answer>", gt) == 1.0
    tool = vm.CountdownTool({"action": "move"})
    assert tool._problems[asyncio.run(tool.create(create_kwargs={"ground_truth": gt}))[0]] == tz
    assert vm.compute_score(SOURCE, "", gt, {vm.TURNS_KEY: ["5-1/5"]})["turns"] == 1


@pytest.mark.parametrize("gt", [b"\xff{", b'{"nums": [1, 2], "nums": [3, 4], "target": 7}', b"[3, 4]"])
def test_every_verl_reader_refuses_a_bad_bytes_ground_truth_alike(gt) -> None:
    import asyncio

    from countdown_gym.data.problem_files import load_problems
    from countdown_gym.integrations import verl_multiturn as vm

    [issue] = load_problems([{"reward_model": {"ground_truth": gt}}], progress=False).issues
    for read in (lambda: problem_from_ground_truth(gt), lambda: compute_score(SOURCE, "", gt),
                 lambda: asyncio.run(vm.CountdownTool({}).create(create_kwargs={"ground_truth": gt})),
                 lambda: vm.compute_score(SOURCE, "", gt)):
        with pytest.raises(ValueError) as err:
            read()
        assert str(err.value) == issue.message


def test_a_rules_string_that_is_bad_json_is_named_by_every_reader() -> None:
    """load_problems named it by the JSON parser alone ('Expecting value: line 1 column 10 (char 9)')."""
    from countdown_gym.data.problem_files import load_problems

    gt = {"numbers": [3, 4], "target": 7, "rules": '{"sign": '}
    [issue] = load_problems([{"reward_model": {"ground_truth": gt}}], progress=False).issues
    assert issue.message.startswith("the row's 'rules' is not valid JSON (Expecting value")
    with pytest.raises(ValueError, match="the row's 'rules' is not valid JSON .Expecting value"):
        problem_from_ground_truth(gt)
    assert load_problems([gt], progress=False).issues[0].message == issue.message
