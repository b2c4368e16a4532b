"""The reward-variant registry is the one list of names: SB3, GRPO, verl and the leaderboard read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from countdown_gym.integrations.verl import dense_terms
from countdown_gym.leaderboard.submission import SubmissionError, read_submission
from countdown_gym.rewards.variants import (
    REWARD_VARIANTS,
    check_reward_variant,
    get_variant,
    parse_reward_spec,
    variant_names,
)

ROOT = Path(__file__).resolve().parents[1]


def test_every_variant_is_described_and_supported_somewhere() -> None:
    for name, v in REWARD_VARIANTS.items():
        assert v.name == name and v.description and set(v.kinds) <= {"step", "text"} and v.kinds
        if "text" in v.kinds:  # a text variant is scored per completion, or by the trainer object it needs
            assert v.per_completion or v.needs
        if "step" in v.kinds and name != "sparse":  # a step variant adds a per-move term or shapes
            assert (v.move_term is None) != (v.potential is None)
    assert variant_names("step") == (
        "sparse", "oracle-perfect", "oracle-reachable", "oracle-potential", "critic", "critic-potential")
    assert variant_names("text") == ("sparse", "format", "oracle-perfect", "oracle-reachable", "critic", "clipo",
                                     "text-critic")
    with pytest.raises(ValueError, match="unknown env kind"):
        variant_names("pixels")


def test_the_baselines_read_the_registry() -> None:
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("sb3_contrib")
    from baselines import sb3_ppo
    from baselines.lm import rewards as llm_rewards
    from baselines.sb3 import vec_env as sb3_vec_env

    args = sb3_ppo.parse_args(["--reward", "oracle-perfect"])
    env = sb3_vec_env.CountdownSB3VecEnv(2, args.reward, args.scale, preset="longproc-0.5k", split="train")
    assert env.variant is get_variant("oracle-perfect")
    assert set(llm_rewards.VARIANTS) == set(variant_names("text"))
    assert llm_rewards.VARIANTS["oracle-perfect"] == {"sparse": 1.0, "format": 0.1, "oracle-perfect": 0.5}
    with pytest.warns(FutureWarning, match="earlier spelling of 'oracle-reachable'"):
        assert llm_rewards.parse_reward_spec("oracle-reachable") == get_variant_spec("oracle")


def get_variant_spec(name: str) -> dict[str, float]:
    return parse_reward_spec(name)


def test_one_spelling_and_the_earlier_ones_in_one_place() -> None:
    """A variant's name is also its term's key; the earlier GRPO / verl spellings are read as aliases."""
    assert parse_reward_spec("critic,oracle-reachable=0.2") == {"sparse": 1.0, "format": 0.1, "critic": 0.5,
                                                                "oracle-reachable": 0.2}
    with pytest.warns(FutureWarning):
        assert get_variant("oracle_perfect") is get_variant("oracle-perfect")
    with pytest.raises(ValueError, match="unknown reward variant 'oracle-magic'"):
        get_variant("oracle-magic")


def test_a_spec_weight_is_a_plain_decimal_number() -> None:
    """float() alone read 'critic=1_0' as 10 and Arabic-Indic digits as numbers."""
    assert parse_reward_spec("sparse=.5,critic=1e-1") == {"sparse": 0.5, "critic": 0.1}
    for bad in ("1_0", "\u0661", "0x1", "", "nan"):
        with pytest.raises(ValueError, match="weight of 'critic' must be a finite number"):
            parse_reward_spec(f"sparse,critic={bad}")


def test_verl_dense_takes_text_variant_names() -> None:
    assert dense_terms("oracle-perfect,format") == ["oracle-perfect", "format"]
    assert dense_terms(["oracle-reachable", "oracle"]) == ["oracle-reachable"]
    assert dense_terms(["sparse"]) == []
    assert get_variant("oracle-reachable").weight == 0.5
    with pytest.raises(ValueError, match="needs the trainer"):
        dense_terms(["clipo"])
    with pytest.raises(ValueError, match="unknown dense term 'oracle-potential'"):
        dense_terms(["oracle-potential"])  # a step-only variant


@pytest.mark.parametrize("value", ["none", "sparse", "critic-potential", "oracle-reachable+clipo",
                                   "critic,oracle-reachable=0.2"])
def test_leaderboard_accepts_registered_names_and_grpo_specs(value: str) -> None:
    assert check_reward_variant(value) == value


def test_leaderboard_refuses_an_unknown_reward_variant(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="registered variants"):
        check_reward_variant("GRPO")
    shipped = sorted((ROOT / "leaderboard" / "submissions").glob("*.jsonl"))
    assert shipped
    for path in shipped:  # every shipped submission names a registered reward
        read_submission(path)
    lines = shipped[0].read_text().splitlines()
    header = json.loads(lines[0])
    header["reward_variant"] = "dense-magic"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(SubmissionError, match="unknown reward variant 'dense-magic'"):
        read_submission(bad)


def test_one_parser_for_grpo_specs_and_the_leaderboard() -> None:
    """The GRPO baseline's spec parser is the registry's: both accept and refuse the same specs."""
    from baselines.lm import rewards as llm_rewards

    assert llm_rewards.parse_reward_spec is parse_reward_spec
    for bad in ("oracle-potential+critic", "sparse=0,format=0", "oracle=inf"):
        with pytest.raises(ValueError):
            parse_reward_spec(bad)
        with pytest.raises(ValueError):
            check_reward_variant(bad)
