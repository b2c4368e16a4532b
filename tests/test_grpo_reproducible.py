"""A seeded GRPO run (``baselines/llm_grpo.py``, multi-turn rollouts) repeats bit for bit: the same seed and thread
count give the same losses, rewards, validation rows and weights, also when the run is stopped and resumed; another
seed gives another run (the seed reaches the rollouts' sampling)."""

from __future__ import annotations

import csv
import hashlib
import json
import shlex
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from baselines import llm_grpo  # noqa: E402
from baselines.lm.run_card import command_line  # noqa: E402
from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, save_pretrained  # noqa: E402
from countdown_gym import load_split  # noqa: E402
from countdown_gym.integrations.trl_rollout import play_episodes  # noqa: E402

TIMING = ("step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second", "eval_seconds", "tokens_per_s")


def _tiny():
    torch.manual_seed(0)
    tok = build_tokenizer()
    return build_model(TinyLMConfig(hidden=32, layers=2, heads=2, intermediate=64, max_positions=512), tok), tok


def _outcome(out: Path) -> dict:
    """What a run measured, without its timings: the step logs, the validation rows and a hash of the weights."""
    steps = [{k: v for k, v in json.loads(line).items() if k not in TIMING}
             for line in (out / "train_log.jsonl").open()]
    steps = [s for s in steps if "loss" in s]
    rows = [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader((out / "metrics.csv").open())]
    weights = hashlib.sha256((out / "final" / "model.safetensors").read_bytes()).hexdigest()
    return {"steps": steps, "validation": rows, "weights": weights}


def test_seeded_rollouts_repeat_and_the_seed_matters() -> None:
    model, tok = _tiny()
    problems = [p for p in load_split("longproc-0.5k", "train")[:4] for _ in range(4)]

    def play(seed: int) -> list:
        torch.manual_seed(seed)
        rollouts = play_episodes(model, tok, problems, max_turns=4, temperature=1.0)
        return [(r.completion_ids, r.logprobs) for r in rollouts]

    assert play(0) == play(0)
    assert play(0) != play(1)


def test_a_seeded_grpo_run_repeats_bit_for_bit_fresh_and_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from countdown_gym.runkit import runs

    model, tok = _tiny()
    save_pretrained(model, tok, tmp_path / "model", meta={"sft_config": {"interaction": "multi-turn"}})

    def options(name: str, **kw) -> llm_grpo.Options:
        return llm_grpo.Options(model=str(tmp_path / "model"), test_eval=False, steps=2, prompts_per_step=2, num_generations=4,
                                max_turns=4, eval_interval=0, eval_problems=4, eval_samples=2, output_dir=str(tmp_path / name),
                                save_steps=0, train_problems=16, quiet=True, report_to="none", threads=1, **kw)

    llm_grpo.train(options("a"))
    llm_grpo.train(options("b"))
    first = _outcome(tmp_path / "a")
    assert len(first["steps"]) == 2 and len(first["validation"]) == 2
    assert _outcome(tmp_path / "b") == first

    class StopAfterTheFirstStep(runs.StopRequest):  # as if Ctrl-C came during step 1: checkpoint-1, then --resume
        def __enter__(self):
            super().__enter__()
            self.requested = True
            return self

    monkeypatch.setattr(runs, "StopRequest", StopAfterTheFirstStep)
    assert llm_grpo.train(options("c"))["interrupted"]
    monkeypatch.undo()
    llm_grpo.train(options("c", resume=True))
    resumed = _outcome(tmp_path / "c")
    assert resumed["steps"] == first["steps"] and resumed["weights"] == first["weights"]
    assert [r for r in resumed["validation"] if r["step"] != "1"] == first["validation"]  # plus the stop's own row

    llm_grpo.train(options("d", seed=1))
    assert _outcome(tmp_path / "d")["steps"] != first["steps"]

    card = (tmp_path / "a" / "README.md").read_text()  # the card states the thread count, and its command repeats it
    assert "torch CPU threads: 1" in card
    command = card.split("```bash\n")[1].split("\n```")[0]
    assert llm_grpo.parse_options(shlex.split(command)[2:]).threads == 1
    assert command_line(llm_grpo.Options()).endswith("--threads 2")  # the default too
