"""Expert iteration for the multi-turn model: solved episodes are sampled, cleaned and trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
from baselines import llm_expert_iteration, llm_sft  # noqa: E402
from baselines.lm.tiny_lm import build_tokenizer  # noqa: E402
from countdown_gym import Problem, dataclass_cli, load_split  # noqa: E402
from countdown_gym.game.compact_trace import CompactTraceConfig  # noqa: E402
from countdown_gym.game.turn_game import replay_turns  # noqa: E402


def test_sampled_episodes_are_solved_clean_and_trained_on(tmp_path):
    out = tmp_path / "ei"
    argv = ["--out", str(out), "--problems", "8", "--samples", "4", "--temperature", "1.0", "--sft-minutes", "0.05",
            "--eval-problems", "2", "--threads", "1", "--progress", "false"]  # fmt: skip
    assert llm_expert_iteration.main(dataclass_cli.parse(llm_expert_iteration.Options, argv)) == 0
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert rows, "the shipped model solves some of 8 x 4 episodes at T = 1"
    rules = load_split("longproc-0.5k", "train")[0].rules
    for row in rows:
        rep = replay_turns(Problem(tuple(row["numbers"]), row["target"], rules), row["turns"], max_turns=16)
        assert rep.solved and rep.invalid_steps == 0  # refused turns were taken out; the game is unchanged
    stats = json.loads((out / "episodes.json").read_text())["stats"]
    assert stats["distinct_solved_episodes"] == len(rows) <= stats["solved_episodes"] <= 32
    assert (out / "sft" / "final" / "model.safetensors").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == stats and summary["sft"]["steps"] >= 1
    # the same sampling options reuse the episodes (no second sampling pass)
    before = (out / "episodes.jsonl").stat().st_mtime_ns
    assert llm_expert_iteration.main(dataclass_cli.parse(llm_expert_iteration.Options, [*argv, "--resume", "true"])) == 0
    assert (out / "episodes.jsonl").stat().st_mtime_ns == before


def test_episode_batches_learn_the_agent_turns_only(tmp_path):
    import random

    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps({"numbers": [21, 16, 17, 26], "target": 46, "turns": ["21+16", "undo", "21+16", "26-17", "37+9"]}) + "\n")
    episodes = llm_sft.load_episodes(path, "longproc-0.5k")
    tok = build_tokenizer()
    ids, mask, labels = llm_sft.make_batch(episodes, tok, CompactTraceConfig(), random.Random(0), 512, "multi-turn")
    learned = tok.decode([t for t in labels[0].tolist() if t != -100])
    assert learned == "21+16\nundo\n21+16\n26-17\n37+9\n"  # the environment's replies are context, not learned
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"numbers": [1, 2]}\n')
    with pytest.raises(ValueError, match="line 1: not an episode"):
        llm_sft.load_episodes(bad, "longproc-0.5k")
    bad.write_text('{"numbers": [1, 1, 1, 1], "numbers": [21, 16, 17, 26], "target": 46, "turns": ["21+16"]}\n')
    with pytest.raises(ValueError, match="line 1: not an episode .*appears twice"):  # was read last-wins
        llm_sft.load_episodes(bad, "longproc-0.5k")
    bad.write_bytes(b'{"numbers": [21, 16, 17, 26], "target": 46, "turns": ["21+16"]}\n{"turns": ["\xff"]}\n')
    with pytest.raises(ValueError, match="line 2: not an episode"):  # was a UnicodeDecodeError traceback
        llm_sft.load_episodes(bad, "longproc-0.5k")
    with pytest.raises(SystemExit):
        dataclass_cli.parse(llm_sft.SFTConfig, ["--episodes", str(path)])  # single-pass has no turns


def _fake_run(monkeypatch):
    """main() with its sampling (one episode per problem, the count in its turn) and fine-tuning replaced."""
    def sample(opts):
        return [{"numbers": [1, 2], "target": 3, "turns": [str(opts.problems)]}], {"distinct_solved_episodes": 1}

    monkeypatch.setattr(llm_expert_iteration, "solved_episodes", sample)
    monkeypatch.setattr(llm_sft, "train", lambda cfg: {})


def test_a_run_killed_between_the_episodes_and_their_record_samples_again(tmp_path, monkeypatch):
    """episodes.jsonl was replaced before episodes.json: killed between the two, the old record stood beside new
    episodes, and a run with the old record's options reused episodes sampled with other ones."""
    _fake_run(monkeypatch)

    def run(problems: str) -> None:
        argv = ["--out", str(tmp_path), "--problems", problems, "--progress", "false"]
        assert llm_expert_iteration.main(dataclass_cli.parse(llm_expert_iteration.Options, argv)) == 0

    run("1")
    real = llm_expert_iteration.write_text_atomic

    def killed_at_the_record(path, text):
        if path.name == "episodes.json":
            raise KeyboardInterrupt
        return real(path, text)

    monkeypatch.setattr(llm_expert_iteration, "write_text_atomic", killed_at_the_record)
    with pytest.raises(KeyboardInterrupt):
        run("2")
    monkeypatch.setattr(llm_expert_iteration, "write_text_atomic", real)
    run("1")
    assert json.loads((tmp_path / "episodes.jsonl").read_text())["turns"] == ["1"]


@pytest.mark.parametrize("text", ["", "{", "[]", '{"sampling": 1'])
def test_a_damaged_episodes_record_is_one_error_naming_it(tmp_path, monkeypatch, text):
    """A cut-off or hand-edited episodes.json raised json's JSONDecodeError (or AttributeError for a list)."""
    _fake_run(monkeypatch)
    (tmp_path / "episodes.jsonl").write_text("")
    (tmp_path / "episodes.json").write_text(text)
    with pytest.raises(SystemExit, match="episodes.json"):
        llm_expert_iteration.main(dataclass_cli.parse(llm_expert_iteration.Options, ["--out", str(tmp_path)]))


@pytest.mark.parametrize("resume", ["true", "false"])
def test_other_sampling_options_keep_the_episodes_a_fine_tuning_read(tmp_path, monkeypatch, resume):
    """Other --problems (any sampling option) beside sft/: the episodes were sampled again and replaced, then a
    --resume continued the fine-tuning on episodes it had not started with (without --resume the SFT step
    refused, after the sampling, leaving sft/final beside episodes it was not trained on)."""
    _fake_run(monkeypatch)
    argv = ["--out", str(tmp_path), "--progress", "false", "--problems"]
    assert llm_expert_iteration.main(dataclass_cli.parse(llm_expert_iteration.Options, [*argv, "1"])) == 0
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "options.json").write_text("{}")
    before = (tmp_path / "episodes.jsonl").read_text()
    with pytest.raises(SystemExit, match="sampled with .*'problems': 1"):
        llm_expert_iteration.main(dataclass_cli.parse(llm_expert_iteration.Options, [*argv, "2", "--resume", resume]))
    assert (tmp_path / "episodes.jsonl").read_text() == before


def test_a_killed_sampling_continues_from_its_last_chunk_to_the_same_episodes(tmp_path, monkeypatch):
    """A kill during the sampling lost every episode of the round (they were written only at its end); now each
    chunk is kept as it ends, on its own seed, and a rerun plays only the chunks left, to the same bytes."""
    from countdown_gym.integrations import trl_rollout

    monkeypatch.setattr(llm_sft, "train", lambda cfg: {})
    monkeypatch.setattr(llm_expert_iteration, "CHUNK_BATCHES", 2)  # 2 x 2 episodes: 2 problems of 2 samples a chunk
    real, calls = trl_rollout.play_episodes, []

    def play(*a, **k):
        calls.append(len(a[2]))
        if len(calls) == kill_at:
            raise KeyboardInterrupt  # a kill in the middle of the chunk
        return real(*a, **k)

    monkeypatch.setattr(trl_rollout, "play_episodes", play)

    def run(out):
        argv = ["--out", str(out), "--problems", "5", "--samples", "2", "--batch-size", "2", "--temperature", "1.0",
                "--threads", "1", "--progress", "false"]
        return llm_expert_iteration.main(dataclass_cli.parse(llm_expert_iteration.Options, argv))

    kill_at = 0
    assert run(tmp_path / "whole") == 0 and calls == [4, 4, 2]
    calls.clear()
    kill_at = 3
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "killed")
    assert len((tmp_path / "killed" / "sampling.jsonl").read_text().splitlines()) == 2
    calls.clear()
    assert run(tmp_path / "killed") == 0 and calls == [2]  # only the chunk the kill cut short is played again
    assert (tmp_path / "killed" / "episodes.jsonl").read_bytes() == (tmp_path / "whole" / "episodes.jsonl").read_bytes()
    stats = [json.loads((tmp_path / d / "episodes.json").read_text())["stats"] for d in ("whole", "killed")]
    assert [{**s, "sampling_seconds": 0} for s in stats][0] == {**stats[1], "sampling_seconds": 0}
    assert not (tmp_path / "killed" / "sampling.jsonl").exists()  # its chunks are in the episodes
