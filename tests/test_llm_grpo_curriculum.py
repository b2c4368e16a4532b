"""llm_grpo.py --curriculum staged: prompts in tier order, TRL's shuffling off, one real GRPO step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from baselines import llm_grpo  # noqa: E402
from baselines.llm_grpo import Options, build_grpo_config, parse_options  # noqa: E402
from baselines.lm.grpo_options import GRPORun  # noqa: E402
from countdown_gym.data.curriculum import Curriculum  # noqa: E402
from countdown_gym.data.difficulty import tier  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_option_and_config(tmp_path: Path) -> None:
    assert parse_options([]).curriculum == "none"
    assert build_grpo_config(GRPORun.of(Options(output_dir=str(tmp_path)))).shuffle_dataset
    assert not build_grpo_config(GRPORun.of(Options(curriculum="staged", output_dir=str(tmp_path)))).shuffle_dataset
    with pytest.raises(ValueError, match="curriculum"):
        Options(curriculum="adaptive")
    with pytest.raises(SystemExit, match="--curriculum must be one of"):
        parse_options(["--curriculum", "adaptive"])


def test_one_step_with_the_staged_curriculum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list] = []
    original = Curriculum.sequence

    def record(self, n, seed=0):
        out = original(self, n, seed)
        seen.append(out)
        return out

    monkeypatch.setattr(Curriculum, "sequence", record)
    opts = Options(model=str(ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm"), interaction="single-pass",
                   curriculum="staged", steps=1, prompts_per_step=3, num_generations=2, max_completion_length=16,
                   eval_interval=0, eval_problems=2, eval_samples=0, save_steps=0, output_dir=str(tmp_path / "run"),
                   threads=1, quiet=True, test_eval=False)
    summary = llm_grpo.train(opts)
    assert summary["last"]["step"] == 1
    assert len(seen[0]) == 3 and tier(seen[0][0]) == "easy"  # the first third of the draws is easy
    assert json.loads((tmp_path / "run" / "options.json").read_text())["curriculum"] == "staged"
