"""The LLM GRPO baseline: reward functions, CLI/config, position ids, CLIPO plumbing, two real GRPO steps."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from baselines import llm_grpo  # noqa: E402
from baselines.llm_grpo import Options, build_grpo_config, check_vllm_available, parse_options  # noqa: E402
from baselines.lm import grpo_config, grpo_model  # noqa: E402
from baselines.lm.generation import prompt_token_ids  # noqa: E402
from baselines.lm.grpo_options import GRPORun, pass_rates_file  # noqa: E402
from baselines.lm.rewards import VARIANTS, CLIPOReward, parse_reward_spec  # noqa: E402
from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, derive_position_ids  # noqa: E402
from countdown_gym import Problem, dataclass_cli  # noqa: E402
from countdown_gym.game.text_format import build_prompt  # noqa: E402
from countdown_gym.integrations.trl import REWARD_FUNCTIONS, CriticReward, replay  # noqa: E402

PROBLEM = Problem((21, 16, 17, 26), 46)
PJ = json.dumps(PROBLEM.to_dict())

CORRECT = """21+16=37 [17,26,37]
 26+17=43 [37,43]
  43+37=80 [80]
 26-17=9 [37,9]
  37+9=46 [46]
<Solution>
21 + 16 = 37
26 - 17 = 9
37 + 9 = 46
</Solution>"""
WRONG = """21+16=37 [17,26,37]
 37+26=63 [17,63]
  63+17=80 [80]
<Solution>
21 + 16 = 37
37 + 26 = 63
63 + 17 = 80
</Solution>"""
HALLUCINATED = """21+16=38 [17,26,38]
 38+8=46 [17,46]
<Solution>
21 + 16 = 38
38 + 8 = 46
</Solution>"""
MALFORMED = "21+16=37 [17,26,37]\n<Solution>\n21 plus 16 is 37"
COMPLETIONS = [CORRECT, WRONG, HALLUCINATED, MALFORMED]


def _rewards(name: str, completions=COMPLETIONS, **extra) -> list[float]:
    return REWARD_FUNCTIONS[name](["p"] * len(completions), completions, None, problem=[PJ] * len(completions), **extra)


# --- reward functions on hand-written completions ----------------------------------------------


def test_sparse_reward_and_logged_stats() -> None:
    logged: dict[str, float] = {}
    r = _rewards("sparse", log_metric=logged.__setitem__)
    assert r == [1.0, 0.0, 0.0, 0.0]
    assert logged["replay/correct_frac"] == 0.25
    assert logged["replay/invalid_frac"] == 0.25  # only the hallucinated completion
    assert logged["replay/format_frac"] == 0.75


def test_format_reward() -> None:
    assert _rewards("format") == [1.0, 1.0, 1.0, 0.0]  # a parsed (even wrong) tagged answer counts


def test_oracle_rewards() -> None:
    reach = _rewards("oracle-reachable")
    perfect = _rewards("oracle-perfect")
    # correct: dead-end 26+17 and 43+37 lines cost reachability; the rest keep the target reachable
    assert 0 < reach[0] < 1 and 0 < perfect[0] < 1
    assert reach[1] < reach[0] and perfect[1] < perfect[0]
    assert reach[2] == -1.0 and perfect[2] == 0.0  # every move of the hallucinated completion is invalid
    assert all(-1.0 <= x <= 1.0 for x in reach) and all(0.0 <= x <= 1.0 for x in perfect)


def test_hallucinated_steps_are_invalid_transitions() -> None:
    r = replay(PJ, HALLUCINATED)
    assert r.invalid_steps > 0 and not r.verdict.correct
    assert replay(PJ, CORRECT).invalid_steps == 0


def test_chat_completions_and_bad_inputs() -> None:
    chat = [[{"role": "assistant", "content": CORRECT}]]
    assert REWARD_FUNCTIONS["sparse"](["p"], chat, None, problem=[PJ]) == [1.0]
    with pytest.raises(KeyError, match="problem"):
        REWARD_FUNCTIONS["sparse"](["p"], [CORRECT], None)
    with pytest.raises(ValueError, match="Problem.to_dict"):
        REWARD_FUNCTIONS["sparse"](["p"], [CORRECT], None, problem=["{not json"])


class _FixedCritic:
    def score(self, states, targets):
        return [0.5] * len(states)


def test_critic_reward_means_per_move_scores() -> None:
    r = CriticReward(_FixedCritic())(["p"] * 4, COMPLETIONS, None, problem=[PJ] * 4)
    assert r[0] == pytest.approx(0.5) and r[2] == pytest.approx(-1.0)  # invalid moves score -1


def test_the_baselines_critic_term_is_the_packages_critic_reward_with_the_shipped_critic() -> None:
    from baselines.lm.rewards import load_needs
    from countdown_gym.integrations.trl import reward_function
    from critics import load_critic

    reward = reward_function("critic", load_needs(["critic"]))  # what run_rewards builds for the critic term
    assert isinstance(reward, CriticReward) and type(reward.critic) is type(load_critic())
    got = reward(["p"] * 4, COMPLETIONS, None, problem=[PJ] * 4)
    assert -1.0 <= got[0] <= 1.0 and got[2] == pytest.approx(-1.0)  # every move of the hallucinated completion is invalid
    rewards = llm_grpo.run_rewards(GRPORun.of(Options(rewards="critic")), None, 8)
    assert any(isinstance(f, CriticReward) for f in rewards.funcs)


def test_reward_spec_parsing() -> None:
    assert parse_reward_spec("sparse") == VARIANTS["sparse"]
    assert parse_reward_spec("oracle-reachable+clipo") == {"sparse": 1.0, "format": 0.1, "oracle-reachable": 0.5, "clipo": 1.0}
    assert parse_reward_spec("critic,critic=0.2,format=0") == {"sparse": 1.0, "format": 0.0, "critic": 0.2}
    assert parse_reward_spec("format=0,oracle-reachable") == {"sparse": 1.0, "format": 0.0, "oracle-reachable": 0.5}  # an override before a variant
    for bad in ("", "dense", "oracle=abc", "sparse=0"):
        with pytest.raises(ValueError):
            parse_reward_spec(bad)


# --- tokenizer, prompts, positions ------------------------------------------------------------


@pytest.mark.parametrize("style", ["compact", "longproc", "tinyzero"])
def test_prompts_and_completions_round_trip_the_shipped_tokenizer(style: str) -> None:
    tok = build_tokenizer()
    for text in [build_prompt(PROBLEM, style), *COMPLETIONS]:
        ids = tok(text)["input_ids"]
        assert tok.unk_token_id not in ids
        assert tok.decode(ids, skip_special_tokens=True) == text


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_left_padding_does_not_shift_positions(arch: str) -> None:
    torch.manual_seed(0)
    model = derive_position_ids(build_model(TinyLMConfig(arch=arch, hidden=32, layers=2, heads=2, intermediate=64), build_tokenizer()))
    ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        padded = model(input_ids=ids, attention_mask=mask).logits[0, 2:]
        alone = model(input_ids=ids[:1, 2:], attention_mask=mask[:1, 2:]).logits[0]
    assert torch.allclose(padded, alone, atol=1e-5)


# --- options, GRPOConfig, vLLM / accelerate paths ---------------------------------------------


def test_every_option_is_a_flag() -> None:
    opts = parse_options(
        ["--steps", "3", "--no-chat-template", "--bf16", "false", "--extra", '{"top_p": 0.9}', "--rewards", "oracle",
         "--vllm-mode", "server", "--prompt-style", "tinyzero", "--learning-rate", "1e-5"]
    )
    assert (opts.steps, opts.chat_template, opts.bf16, opts.extra, opts.rewards) == (3, False, False, {"top_p": 0.9}, "oracle")
    assert (opts.vllm_mode, opts.prompt_style, opts.learning_rate) == ("server", "tinyzero", 1e-5)
    flags = dataclass_cli.help_text(Options)
    for name in Options.__dataclass_fields__:
        assert "--" + name.replace("_", "-") in flags
    for bad in (["--prompt-style", "chat"], ["--rewards", "magic"], ["--num-generations", "1"], ["--vllm-mode", "remote"]):
        with pytest.raises(SystemExit):
            parse_options(bad)
    with pytest.raises(SystemExit, match="unknown integration 'nosuch'"):
        parse_options(["--report-to", "nosuch"])
    with pytest.raises(SystemExit, match="must name an integration"):
        parse_options(["--report-to", ","])
    assert parse_options(["--report-to", "none"]).report_to == "none"
    with pytest.raises(SystemExit, match="stop-at-dead-end stops multi-turn episodes"):
        parse_options(["--stop-at-dead-end", "true", "--interaction", "single-pass"])
    assert parse_options(["--stop-at-dead-end", "true"]).stop_at_dead_end
    with pytest.raises(SystemExit, match="--dead-end-patience is the wait of --stop-at-dead-end"):
        parse_options(["--dead-end-patience", "3"])
    with pytest.raises(SystemExit, match="--dead-end-patience must be >= 1"):
        parse_options(["--stop-at-dead-end", "true", "--dead-end-patience", "0"])


def test_pass_rate_filter_keeps_problems_with_group_signal(tmp_path: Path) -> None:
    from countdown_gym import load_split
    from countdown_gym.data.pass_rates import filter_by_pass_rate, pass_rates_text

    train = load_split("longproc-0.5k", "train")[:5]
    path = tmp_path / "rates.jsonl"
    correct = [[False] * 4, [True, False, False, False], [True] * 4, [True, True, False, False], [False, True, True, True]]
    path.write_text(pass_rates_text(train, correct))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[1] == {"id": train[1].id, "samples": 4, "correct": 1}
    assert filter_by_pass_rate(train, path, 0.0, 1.0) == [train[1], train[3], train[4]]
    assert filter_by_pass_rate(train, path, 0.3, 1.0) == [train[3], train[4]]
    assert filter_by_pass_rate(train + load_split("longproc-0.5k", "train")[5:9], path, 0.0, 1.0) == [train[1], train[3], train[4]]
    with pytest.raises(SystemExit, match="no problem"):
        filter_by_pass_rate(train, path, 0.8, 1.0)
    with pytest.raises(SystemExit, match="not in the training split"):
        filter_by_pass_rate(train[:2], path, 0.0, 1.0)
    path.write_text(pass_rates_text([train[0], train[1], train[0]], [[True], [False], [False]]))
    with pytest.raises(SystemExit, match=f":3: problem '{train[0].id}' has a row already \\(line 1\\)"):
        filter_by_pass_rate(train, path, 0.0, 1.0)  # was read last-wins: rate 0, the problem silently dropped
    path.write_text(json.dumps({"id": train[0].id, "samples": 0, "correct": 0}) + "\n")
    with pytest.raises(SystemExit, match="samples >= 1"):
        filter_by_pass_rate(train, path, 0.0, 1.0)
    path.write_text("not json\n")
    with pytest.raises(SystemExit, match=":1: expected"):
        filter_by_pass_rate(train, path, 0.0, 1.0)
    for bad in (["--min-pass-rate", "0.5", "--max-pass-rate", "0.5"], ["--train-pass-rates", str(tmp_path / "missing.jsonl")]):
        with pytest.raises(SystemExit):
            parse_options(bad)


def test_an_interrupted_pass_rates_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llm_eval --pass-rates: Ctrl-C mid-write keeps the old file; a stale ``rates.jsonl.tmp`` link (one planted in a
    shared folder) was written through, its target overwritten and the file left a link to it."""
    from baselines.llm_eval import write_pass_rates

    path, problems = tmp_path / "rates.jsonl", [Problem((1, 2, 3), 6, id="a"), Problem((1, 2, 3), 5, id="b")]
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "rates.jsonl.tmp").symlink_to(victim)
    write_pass_rates(path, problems, [["<answer>1+2+3</answer>"], ["<answer>1</answer>", "<answer>2*3-1</answer>"]])
    assert victim.read_text() == "keep" and not path.is_symlink()
    old = path.read_bytes()
    assert old == b'{"id": "a", "samples": 1, "correct": 1}\n{"id": "b", "samples": 2, "correct": 1}\n'

    def torn(self: Path, text: str, **kwargs: object) -> None:
        self.write_bytes(text[:10].encode())
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(KeyboardInterrupt):
        write_pass_rates(path, problems, [[""], ["", ""]])
    assert path.read_bytes() == old and sorted(p.name for p in tmp_path.iterdir()) == ["rates.jsonl", "victim"]


def test_more_problems_than_a_split_holds_are_all_used_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    from baselines.lm.grpo_data import run_problems

    problems = run_problems(GRPORun.of(Options(train_pass_rates="none", train_problems=10**6, eval_problems=10**6, test_problems=10**6)))
    train, validation, test = problems.train, problems.validation, problems.test
    out = capsys.readouterr().out
    for flag, problems in (("--train-problems", train), ("--eval-problems", validation), ("--test-problems", test)):
        assert f"note: {flag} 1000000 is more than the {len(problems)} " in out
    assert (len(test), len(validation)) == (1000, 500)  # the frozen longproc-0.5k splits
    problems = run_problems(GRPORun.of(Options(train_pass_rates="none", train_problems=7, eval_problems=5, test_problems=3)))
    assert [len(x) for x in (problems.train, problems.validation, problems.test)] == [7, 5, 3]
    assert "note:" not in capsys.readouterr().out


def test_failure_breakdown_of_hand_written_completions() -> None:
    from baselines.llm_eval import failure_breakdown

    p = Problem((37, 14, 29, 6), 46)
    right = "37-29=8 [14,6,8]\n 14*6=84 [8,84]\n  84-8=76 [76]\n<Solution>\n37 - 29 = 8\n14 * 6 = 84\n84 - 8 = 76\n</Solution>\n"
    solved = "37-14=23 [29,6,23]\n 29-6=23 [23,23]\n  23+23=46 [46]\n<Solution>\n37 - 14 = 23\n29 - 6 = 23\n23 + 23 = 46\n</Solution>\n"
    # a dead first move, then the target is claimed with wrong arithmetic
    claims = "37-29=8 [14,6,8]\n 14*6=84 [8,84]\n  84-8=46 [46]\n<Solution>\n37 - 29 = 8\n14 * 6 = 84\n84 - 8 = 46\n</Solution>\n"
    # a dead end, a backtrack to the start, then a wrong product that is not the target
    backtrack = "37-29=8 [14,6,8]\n 14*6=84 [8,84]\n  84-8=76 [76]\n37-14=23 [29,6,23]\n 29*6=175 [23,175]\n"
    out = failure_breakdown([p] * 4, [right, solved, claims, backtrack])
    assert out["correct"] == 0.25 and out["hallucinated_target"] == 0.25 and out["invalid_step"] == 0.25
    assert out["valid_but_wrong"] == 0.25  # `right` reaches 76, a wrong answer with no invalid move
    assert out["first_move_on_path"] == 0.25  # only 37-14 keeps 46 reachable
    assert out["backtracked"] == 0.25  # the solution block's moves do not count as backtracking
    assert out["first_invalid_reason"] == {"arithmetic_error": 0.5}


def test_pass_rate_file_auto_uses_the_model_directory(tmp_path: Path) -> None:
    from countdown_gym import load_split

    train = load_split("longproc-0.5k", "train")[:2]
    (tmp_path / "train_pass_rates.jsonl").write_text("".join(
        json.dumps({"id": p.id, "samples": 8, "correct": 1}) + "\n" for p in train))
    assert pass_rates_file(Options(), str(tmp_path)) == tmp_path / "train_pass_rates.jsonl"
    assert pass_rates_file(Options(preset="tinyzero"), str(tmp_path)) is None
    assert pass_rates_file(Options(train_pass_rates="none"), str(tmp_path)) is None
    assert pass_rates_file(Options(), str(tmp_path / "elsewhere")) is None
    assert pass_rates_file(Options(train_pass_rates=str(tmp_path / "r.jsonl")), "") == tmp_path / "r.jsonl"
    (tmp_path / "train_pass_rates.jsonl").write_text(f'{{"id": "{train[0].id}", "id": "x", "samples": 8, "correct": 1}}\n')
    assert pass_rates_file(Options(), str(tmp_path)) == tmp_path / "train_pass_rates.jsonl"  # was None: skipped silently
    (tmp_path / "train_pass_rates.jsonl").write_bytes(b'{"id": "\xff"}\n')
    assert pass_rates_file(Options(), str(tmp_path)) == tmp_path / "train_pass_rates.jsonl"  # was UnicodeDecodeError
    from countdown_gym.data.pass_rates import filter_by_pass_rate

    shipped = GRPORun.of(Options(interaction="single-pass")).pass_rates
    assert shipped is not None and len(filter_by_pass_rate(load_split("longproc-0.5k", "train"), shipped, 0.0, 1.0)) == 780


def test_grpo_config_on_cpu(tmp_path: Path) -> None:
    cfg = build_grpo_config(GRPORun.of(Options(rewards="oracle", prompts_per_step=4, num_generations=8, output_dir=str(tmp_path))))
    assert cfg.use_cpu and not cfg.bf16
    assert cfg.per_device_train_batch_size == 32 and cfg.generation_batch_size == 32 and cfg.num_generations == 8
    assert cfg.reward_weights == [1.0, 0.1, 0.0, 0.5]  # sparse, format, oracle-perfect, oracle-reachable
    assert not cfg.use_vllm
    assert not cfg.gradient_checkpointing  # the option's default, not TRL's
    assert build_grpo_config(GRPORun.of(Options(gradient_checkpointing=True, output_dir=str(tmp_path)))).gradient_checkpointing


def test_grpo_config_vllm_and_multi_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = Options(interaction="single-pass", use_vllm=True, vllm_mode="server", vllm_server_base_url="http://gpu-node:8000", prompts_per_step=8, num_generations=8)
    monkeypatch.setattr(grpo_config, "world_size", lambda: 4)  # WORLD_SIZE as `accelerate launch --num_processes 4` sets
    from trl import GRPOConfig

    monkeypatch.setattr(GRPOConfig, "world_size", property(lambda self: 4))
    cfg = build_grpo_config(GRPORun.of(dataclasses.replace(opts, output_dir=str(tmp_path))))
    assert cfg.use_vllm and cfg.vllm_mode == "server" and cfg.vllm_server_base_url == "http://gpu-node:8000"
    assert cfg.per_device_train_batch_size == 16 and cfg.generation_batch_size == 64
    colocate = build_grpo_config(GRPORun.of(Options(interaction="single-pass", use_vllm=True, vllm_gpu_memory_utilization=0.4, output_dir=str(tmp_path))))
    assert colocate.vllm_mode == "colocate" and colocate.vllm_gpu_memory_utilization == 0.4
    assert colocate.vllm_max_model_length == 512 + 192  # prompt + completion budget, not the model's whole context
    with pytest.raises(SystemExit, match="divisible"):
        build_grpo_config(GRPORun.of(Options(prompts_per_step=3, num_generations=3, output_dir=str(tmp_path))))


def test_clear_error_without_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpo_config.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit, match="vLLM"):
        check_vllm_available()
    with pytest.raises(SystemExit, match="vLLM"):  # before any model is loaded
        llm_grpo.train(Options(use_vllm=True, interaction="single-pass", report_to="none"))  # find_spec finds nothing here


# --- CLIPO plumbing ---------------------------------------------------------------------------


def _tiny(arch: str = "llama"):
    torch.manual_seed(0)
    tok = build_tokenizer()
    return build_model(TinyLMConfig(arch=arch, hidden=32, layers=2, heads=2, intermediate=64, max_positions=256), tok), tok


def test_clipo_reward_uses_completion_hidden_states() -> None:
    from critics.clipo import CLIPOTrainer

    model, tok = _tiny()
    prompts = [build_prompt(PROBLEM, "compact")] * 4
    completions = [CORRECT, CORRECT.replace("26+17=43", "26*17=442"), WRONG, HALLUCINATED]  # 2 correct, 2 wrong
    comp_ids = [tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for c in completions]
    reward = CLIPOReward(CLIPOTrainer(dim_in=32, seed=0), tok, num_generations=4).bind(model=model)
    emb = reward.embed(prompts, comp_ids)
    assert emb.shape == (4, 32) and not emb.requires_grad
    # the pooled embedding covers the completion only: changing the prompt's padding partner changes nothing
    alone = reward.embed(prompts[:1], comp_ids[:1])
    assert torch.allclose(alone[0], emb[0], atol=1e-5)
    logged: dict[str, float] = {}
    r = reward(prompts, completions, comp_ids, problem=[PJ] * 4, log_metric=logged.__setitem__)
    assert r[2] == 0.0 and r[3] == 0.0  # incorrect rollouts get no CLIPO reward
    assert r[0] < 0.0 and r[1] < 0.0 and min(r) >= -0.5  # correct anchors: clamp(-lambda * loss, -0.5)
    assert logged["clipo/anchors"] == 2.0 and logged["clipo/updated"] == 1.0


def test_clipo_reward_gathers_groups_across_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Process 1 of 2 holds half of a group: it gathers, scores the whole group, keeps its half."""
    import accelerate.utils

    from critics.clipo import CLIPOTrainer

    model, tok = _tiny()
    prompts = [build_prompt(PROBLEM, "compact")] * 4
    completions = [CORRECT, WRONG, CORRECT.replace("26+17=43", "26*17=442"), HALLUCINATED]
    comp_ids = [tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for c in completions]
    single = CLIPOReward(CLIPOTrainer(dim_in=32, seed=0), tok, num_generations=4).bind(model=model)
    expected = single(prompts, completions, comp_ids, problem=[PJ] * 4)
    first_half = single.embed(prompts[:2], comp_ids[:2])

    class TwoProcesses:  # the view of process 1; process 0 holds rows 0-1
        num_processes, process_index = 2, 1

        def gather(self, t):
            other = first_half if t.is_floating_point() else torch.tensor([True, False])
            return torch.cat([other.to(t.dtype), t])

    monkeypatch.setattr(accelerate.utils, "broadcast", lambda t, from_process=0: t)
    split = CLIPOReward(CLIPOTrainer(dim_in=32, seed=0), tok, num_generations=4).bind(model=model, accelerator=TwoProcesses())
    got = split(prompts[2:], completions[2:], comp_ids[2:], problem=[PJ] * 2)
    assert got == pytest.approx(expected[2:], abs=1e-5)


# --- two real GRPO steps ----------------------------------------------------------------------


@pytest.mark.parametrize("arch,rewards", [("llama", "oracle"), ("gpt2", "clipo")])
def test_two_grpo_steps_on_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arch: str, rewards: str) -> None:
    from baselines.lm.tiny_lm import save_pretrained

    model, tok = _tiny(arch)
    save_pretrained(model, tok, tmp_path / "model")
    out = tmp_path / "run"
    opts = Options(
        model=str(tmp_path / "model"), rewards=rewards, steps=2, prompts_per_step=2, num_generations=4,
        max_completion_length=24, eval_interval=1, eval_problems=4, eval_samples=2, output_dir=str(out),
        save_steps=1, train_problems=16, quiet=True, test_problems=6,
    )
    summary = llm_grpo.train(opts)
    assert summary["first"]["step"] == 0 and summary["last"]["step"] == 2
    assert summary["seconds_per_step"] > 0 and summary["steps_timed"] == 2
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [int(r["step"]) for r in rows] == [0, 1, 2]
    assert (out / "success.png").stat().st_size > 0
    logs = [json.loads(line) for line in (out / "train_log.jsonl").open()]
    step_logs = [x for x in logs if "reward" in x]
    assert len(step_logs) == 2
    for key in ("rewards/sparse_reward/mean", "rewards/oracle_reachable_reward/mean", "rewards/format_reward/mean", "replay/invalid_frac"):
        assert key in step_logs[0], key
    if rewards == "clipo":
        assert "rewards/clipo_reward/mean" in step_logs[0] and (out / "checkpoint-2" / "clipo_head.pt").exists()
    assert (out / "final" / "model.safetensors").exists()
    best = json.loads((out / "best" / "validation.json").read_text())
    assert best["step"] == summary["best"]["step"] and (out / "best" / "model.safetensors").exists()
    # resume: continue to step 3 from checkpoint-2 and keep the metrics history
    from baselines.lm import held_out

    played: list[int] = []
    real = held_out.greedy_solved
    monkeypatch.setattr(held_out, "greedy_solved", lambda *a, **k: played.append(1) or real(*a, **k))
    opts.steps, opts.resume = 3, True
    summary = llm_grpo.train(opts)
    assert summary["last"]["step"] == 3
    saved = json.loads((out / "held_out.json").read_text())  # the resumed run compares its end with the first start
    assert summary["test"]["problems"] == 6 and saved["result"] == summary["test"] and len(played) == 1  # the end only
    assert [int(r["step"]) for r in csv.DictReader((out / "metrics.csv").open())] == [0, 1, 2, 3]
    card = (out / "README.md").read_text()  # ours, not TRL's generic model card
    assert card.startswith("# GRPO run `run`") and "trained steps so far: 3" in card and "| 3 |" in card
    assert "test success (greedy, 6 held-out test problems" in card  # the end's card holds the held-out comparison
    command = card.split("```bash\n")[1].split("\n```")[0]
    # the card records what ran: --interaction auto resolved (a model without training.json: single-pass)
    assert llm_grpo.parse_options(shlex.split(command)[2:]) == dataclasses.replace(opts, resume=False, interaction="single-pass")
    if rewards == "clipo":  # a checkpoint without its CLIPO head (a save cut short) is not resumed with a fresh head
        (out / "checkpoint-3" / "clipo_head.pt").unlink()
        opts.steps = 4
        with pytest.raises(SystemExit, match="clipo_head.pt is missing"):
            llm_grpo.train(opts)


def test_policy_weights_are_float32_whatever_the_saved_dtype(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bf16 checkpoint (most hub models) is trained in float32, as TRL loads a model id: bf16 weights
    would round away Adam updates of lr 1e-6."""
    from baselines.lm.tiny_lm import save_pretrained

    model, tok = _tiny("llama")
    save_pretrained(model.to(torch.bfloat16), tok, tmp_path / "model")
    loaded = {}
    original = llm_grpo.load_model_and_tokenizer

    def load(name: str, dtype: Any = None) -> Any:
        loaded["model"] = original(name, dtype)[0]
        raise KeyboardInterrupt  # stop before training

    monkeypatch.setattr(llm_grpo, "load_model_and_tokenizer", load)
    for model_dtype, expected in (("float32", torch.float32), ("bfloat16", torch.bfloat16), ("auto", torch.bfloat16)):
        with pytest.raises(KeyboardInterrupt):
            llm_grpo.train(Options(model=str(tmp_path / "model"), output_dir=str(tmp_path / model_dtype), quiet=True,
                                   model_dtype=model_dtype))  # a directory each: options.json marks a kept run
        assert loaded["model"].dtype == expected, model_dtype
    with pytest.raises(SystemExit, match="--model-dtype"):
        llm_grpo.parse_options(["--model-dtype", "float16x"])


def _three_tiny_steps(tmp_path: Path, **kw: Any) -> Options:
    """A 3-step sparse run of a tiny saved Llama in ``tmp_path / "run"``, no validation between, no test."""
    from baselines.lm.tiny_lm import save_pretrained

    model, tok = _tiny("llama")
    save_pretrained(model, tok, tmp_path / "model")
    return Options(**{**dict(
        model=str(tmp_path / "model"), rewards="sparse", steps=3, prompts_per_step=2, num_generations=2,
        max_completion_length=8, eval_interval=0, eval_problems=2, eval_samples=0, output_dir=str(tmp_path / "run"),
        save_steps=100, train_problems=8, quiet=True, test_eval=False), **kw})


def test_ctrl_c_saves_a_checkpoint_after_the_step_and_resume_continues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from countdown_gym.runkit import runs

    opts = _three_tiny_steps(tmp_path)
    out = Path(opts.output_dir)

    class CtrlCAtOnce(runs.StopRequest):
        def __enter__(self):
            super().__enter__()
            self.requested = True  # as if Ctrl-C came during the first step
            return self

    monkeypatch.setattr(runs, "StopRequest", CtrlCAtOnce)
    summary = llm_grpo.train(opts)
    assert summary == {"interrupted": True, "step": 1, "output_dir": str(out)}
    assert (out / "checkpoint-1" / "model.safetensors").exists() and not (out / "final").exists()
    monkeypatch.undo()
    opts.resume = True
    assert llm_grpo.train(opts)["last"]["step"] == 3 and (out / "final" / "model.safetensors").exists()


def test_resume_passes_over_a_torn_newest_checkpoint_to_the_complete_one_before(tmp_path: Path, capsys) -> None:
    """Defect: a kill during a save left checkpoint-N without trainer_state.json / optimizer.pt, and --resume died
    with a FileNotFoundError traceback instead of continuing from checkpoint-(N-1)."""
    import shutil

    from baselines.lm.checkpoints import MARKER, checkpoint_problem, last_complete_checkpoint

    opts = _three_tiny_steps(tmp_path, save_steps=1, steps=2)
    out = Path(opts.output_dir)
    llm_grpo.train(opts)
    assert (out / "checkpoint-1" / MARKER).is_file() and (out / "checkpoint-2" / MARKER).is_file()
    whole = tmp_path / "whole"
    shutil.copytree(out / "checkpoint-2", whole)
    tears = [  # what a kill during the save of checkpoint-2 (or a cut-off copy, or a hostile hand) leaves
        ("trainer_state.json", lambda p: p.unlink()), ("optimizer.pt", lambda p: p.write_bytes(p.read_bytes()[:100])),
        ("model.safetensors", lambda p: p.unlink()), (MARKER, lambda p: p.unlink()),
        ("rng_state.pth", lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])),
        ("model.safetensors", lambda p: p.write_bytes(b"\x08" + bytes(7) + b'{"w": 1}')),  # a header of the wrong shape
        ("trainer_state.json", lambda p: (p.unlink(), os.mkfifo(p))),  # never opened: reading a FIFO would block
    ]
    for name, tear in tears:
        shutil.rmtree(out / "checkpoint-2")
        shutil.copytree(whole, out / "checkpoint-2")
        tear(out / "checkpoint-2" / name)
        assert checkpoint_problem(out / "checkpoint-2") is not None, name
        assert last_complete_checkpoint(out, say=lambda m: None) == str(out / "checkpoint-1"), name
    (out / "checkpoint-2" / "trainer_state.json").unlink()  # the FIFO of the last tear
    (out / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2, "log_hist')  # cut off mid-write
    assert "not readable JSON" in checkpoint_problem(out / "checkpoint-2")
    (out / "final").rename(tmp_path / "final-before")
    opts.resume, opts.steps = True, 3
    summary = llm_grpo.train(opts)
    assert "checkpoint-2 is incomplete" in capsys.readouterr().out
    assert summary["steps"] == 3 and (out / "final" / "model.safetensors").exists()
    assert checkpoint_problem(out / "checkpoint-2") is None  # saved again, whole, on the way to step 3
    for d in out.glob("checkpoint-*"):
        shutil.rmtree(d)
    (out / "checkpoint-4").mkdir()  # the first save of a run, killed at once
    said: list[str] = []
    assert last_complete_checkpoint(out, say=said.append) is None  # --resume then starts from scratch
    assert said[-1].endswith(f"no complete checkpoint in {out}")


def test_max_minutes_ends_training_after_the_step_then_saves_and_evaluates(tmp_path: Path) -> None:
    """--max-minutes: the step that ends past the limit is the last; the run saves final/, validates at that step and
    says it stopped early; --steps stays the upper bound, a negative limit is a usage error."""
    opts = _three_tiny_steps(tmp_path, max_minutes=1e-9)
    out = Path(opts.output_dir)
    summary = llm_grpo.train(opts)
    assert summary["steps"] == 1 and summary["last"]["step"] == 1 and summary["stopped_by_time_limit"]
    assert (out / "final" / "model.safetensors").exists()
    assert "at most 3 steps (or 1e-09 minutes of training)" in (out / "README.md").read_text()
    roomy = llm_grpo.train(Options(**{**vars(opts), "output_dir": str(tmp_path / "roomy"), "max_minutes": 60.0}))
    assert roomy["steps"] == 3 and "stopped_by_time_limit" not in roomy
    with pytest.raises(SystemExit, match="max-minutes"):
        llm_grpo.parse_options(["--max-minutes", "-1"])


def test_validation_keeps_the_best_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """best/ holds the model of the highest greedy validation (earliest on ties), also across a resume."""
    import shutil
    import types

    from baselines.lm import callbacks as llm_callbacks

    scores = iter([0.2, 0.3, 0.25, 0.3, 0.1, 0.4])
    monkeypatch.setattr(llm_callbacks, "evaluate", lambda *a, **k: types.SimpleNamespace(row=lambda: {
        "problems": 4, "samples": 0, "greedy_success": next(scores), "greedy_invalid_frac": 0.0,
        "mean_completion_tokens": 1.0, "eval_seconds": 1.0, "generated_tokens": 4,
    }))

    class Recorder:
        def __init__(self) -> None:
            self.step = 0

        def save_pretrained(self, path: Path, **kwargs: Any) -> None:
            Path(path).mkdir(parents=True, exist_ok=True)
            (Path(path) / "weights.txt").write_text(str(self.step))

    tok = build_tokenizer()
    model = Recorder()

    def make() -> llm_callbacks.ValidationCallback:
        return llm_callbacks.ValidationCallback([PROBLEM] * 4, ["p"] * 4, tok, tmp_path, verbose=False)

    cb = make()
    best = tmp_path / cb.BEST_DIR
    for step in (0, 10, 20, 30):
        model.step = step
        cb._evaluate(model, step)
    assert (best / "weights.txt").read_text() == "10"  # 0.3 at step 10; the tie at step 30 does not replace it
    assert json.loads((best / "validation.json").read_text())["step"] == 10
    assert (best / "tokenizer.json").exists()
    assert cb.summary()["best"]["step"] == 10 and cb.summary()["best"]["greedy_success"] == pytest.approx(0.3)
    cb = make()  # a resumed run reads the history back and compares against all of it
    for step in (40, 50):
        model.step = step
        cb._evaluate(model, step)
    assert (best / "weights.txt").read_text() == "50" and cb.best()["step"] == 50
    # resumed from step 10 after best/ took step 20's model: the redone validations cannot be compared with a model
    # that is not on the log, and summary.json named step 10 (0.3) while best/ held step 20's
    scores = iter([0.2, 0.3, 0.5, 0.25, 0.26])
    shutil.rmtree(best)
    cb = make()
    for step in (0, 10, 20):
        model.step = step
        cb._evaluate(model, step)
    cb = llm_callbacks.ValidationCallback([PROBLEM] * 4, ["p"] * 4, tok, tmp_path, verbose=False, resume_step=10)
    for step in (20, 30):
        model.step = step
        cb._evaluate(model, step)
    kept = json.loads((best / "validation.json").read_text())["step"]
    assert kept == cb.summary()["best"]["step"] == int((best / "weights.txt").read_text()) == 30


@pytest.mark.parametrize("text", ['{"step": 20, "greedy_su', "[20]", '{"greedy_success": 0.5}'])
def test_a_damaged_best_validation_json_is_one_error_naming_it(tmp_path: Path, text: str) -> None:
    """Regression: a --resume over a cut-off best/validation.json was a JSONDecodeError traceback (a list: TypeError;
    no step: KeyError); now one error naming the file."""
    from baselines.lm import callbacks as llm_callbacks

    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "validation.json").write_text(text)
    with pytest.raises(SystemExit, match=str(tmp_path / "best" / "validation.json").replace(".", r"\.")):
        llm_callbacks.ValidationCallback([PROBLEM], ["p"], None, tmp_path, verbose=False, resume_step=10)


def test_rollout_tokens_per_step_count_the_whole_generation_batch(tmp_path: Path) -> None:
    """TRL's completions/mean_length is the mean over a step's whole generation batch (micro-batch x processes x
    micro-batches): 2 x 2 x 4 = 16 completions of 10 tokens are 160 rollout tokens a step (was 40)."""
    import types

    from baselines.lm import callbacks as llm_callbacks

    cb = llm_callbacks.ValidationCallback([PROBLEM], ["p"], None, tmp_path, verbose=False)
    args = types.SimpleNamespace(per_device_train_batch_size=2, world_size=2, steps_per_generation=4)
    cb.on_log(args, types.SimpleNamespace(global_step=1, is_world_process_zero=True), None,
              logs={"completions/mean_length": 10.0})
    profile = llm_callbacks.StepProfile()
    profile.steps, profile.totals["step"] = 1, 2.0
    summary = cb.summary(profile)
    assert summary["rollout_tokens_per_step"] == 160.0 and summary["rollout_tokens_per_s_of_step"] == 80.0


def test_validation_at_the_last_step_runs_once_on_every_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of training repeats the last interval's step: a non-main process (no rows) must skip it too,
    or it waits in the gather for a main process that skipped it."""
    import types

    import accelerate
    import accelerate.utils

    from baselines.lm import callbacks as llm_callbacks

    calls: list[int] = []
    monkeypatch.setattr(llm_callbacks, "evaluate", lambda *a, **k: calls.append(k["seed"]) or types.SimpleNamespace(row=lambda: {
        "problems": 2, "samples": 0, "greedy_success": 0.5, "greedy_invalid_frac": 0.0,
        "mean_completion_tokens": 1.0, "eval_seconds": 1.0, "generated_tokens": 2,
    }))
    monkeypatch.setattr(accelerate, "PartialState", lambda: types.SimpleNamespace(process_index=1, num_processes=2, is_main_process=False))
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda parts: parts * 2)
    cb = llm_callbacks.ValidationCallback([PROBLEM] * 4, ["p"] * 4, None, tmp_path, eval_interval=2, seed=0, verbose=False)
    state = types.SimpleNamespace(global_step=0)
    cb.on_train_begin(None, state, None, model=None)
    state.global_step = 2
    cb.on_step_end(None, state, None, model=None)
    cb.on_train_end(None, state, None, model=None)
    assert calls == [0, 2]  # steps 0 and 2, each once, as on the main process
    assert not (tmp_path / "metrics.csv").exists()  # only the main process writes


def test_multi_turn_validation_and_test_play_as_the_rollouts_play(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--prompt-style instruct --max-turn-tokens 5: the held-out test and validation played compact prompts with
    12-token turns (play_episodes' defaults), not the episodes the run trains on."""
    import types

    from countdown_gym.integrations import trl_rollout

    calls: list[dict[str, Any]] = []

    def fake(model: Any, tokenizer: Any, problems: Any, **kw: Any) -> Any:
        calls.append(kw)
        if len(calls) == 2:  # the held-out start, then validation at step 0
            raise KeyboardInterrupt
        return [types.SimpleNamespace(problem=p, turns=[], solved=False, replay=types.SimpleNamespace(invalid_turns=0),
                                      text="", env_mask=[]) for p in problems]

    monkeypatch.setattr(trl_rollout, "play_episodes", fake)
    opts = Options(interaction="multi-turn", prompt_style="instruct", max_turn_tokens=5, steps=1, prompts_per_step=2,
                   num_generations=2, eval_problems=2, eval_samples=0, test_problems=2, train_problems=4, quiet=True,
                   output_dir=str(tmp_path / "run"), train_pass_rates="none", report_to="none")
    with pytest.raises(KeyboardInterrupt):
        llm_grpo.train(opts)
    assert [(c.get("prompt_style"), c.get("max_turn_tokens")) for c in calls] == [("instruct", 5)] * 2


def test_validation_stops_at_every_eos_trl_stops_at() -> None:
    """TRL ends a completion at the tokenizer's EOS even when the generation config names another one."""
    import types

    from baselines.lm.generation import generate

    tok = build_tokenizer()
    answer = tok("12+3=15", add_special_tokens=False)["input_ids"]

    class Model(torch.nn.Module):
        generation_config = types.SimpleNamespace(eos_token_id=5)

        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def generate(self, input_ids, eos_token_id, **kwargs):
            assert tok.eos_token_id in eos_token_id and 5 in eos_token_id
            tail = torch.tensor([answer + [tok.eos_token_id] + answer[:2]] * len(input_ids))
            return torch.cat([input_ids, tail], dim=1)

    texts, tokens = generate(Model(), tok, ["3 12 15"], max_new_tokens=8)
    assert texts == [[tok.decode(answer, skip_special_tokens=True)]] and tokens == len(answer) + 1


def test_sampled_validation_draws_with_the_rollouts_sampling_knobs() -> None:
    from baselines.lm.generation import Sampling, generate

    model, tok = _tiny()
    prompts = [build_prompt(PROBLEM, "compact")] * 2
    greedy, _ = generate(model, tok, prompts, max_new_tokens=12)
    torch.manual_seed(0)
    plain, _ = generate(model, tok, prompts, max_new_tokens=12, sampling=Sampling(), num_return_sequences=3)
    torch.manual_seed(0)  # top_k 1, as a GRPOConfig(top_k=1) rollout would draw: the greedy completion every time
    top1, _ = generate(model, tok, prompts, max_new_tokens=12, sampling=Sampling(top_k=1), num_return_sequences=3)
    assert top1 == [g * 3 for g in greedy] and plain != top1


def test_prompt_token_ids_match_trl_tokenization() -> None:
    tok = build_tokenizer()
    prompts = [build_prompt(PROBLEM, "compact")]
    assert prompt_token_ids(tok, prompts) == tok(text=prompts)["input_ids"]


def test_comparison_commands_parse_to_the_intended_options(tmp_path: Path) -> None:
    from baselines import compare_llm_rewards

    args = compare_llm_rewards.parse_args(["--runs-dir", str(tmp_path), "--extra-args", "--beta 0.01", "--interaction",
                                           "single-pass", "--variants", "sparse,oracle-reachable,critic,clipo"])
    for variant in ("sparse", "oracle-reachable", "critic", "clipo"):
        cmd = compare_llm_rewards.run_command(args, variant, 3)
        opts = parse_options(cmd[2:])
        assert (opts.rewards, opts.seed, opts.beta, opts.train_pass_rates) == (variant, 3, 0.01, "auto")
        assert (opts.learning_rate, opts.prompts_per_step, opts.steps) == (args.learning_rate, args.prompts_per_step, args.steps)
        # every option but the rewards, seed and run bookkeeping is llm_grpo.py's default
        same = ("learning_rate", "prompts_per_step", "num_generations", "max_completion_length", "temperature", "train_pass_rates",
                "steps", "eval_interval", "eval_problems")
        assert all(getattr(opts, name) == getattr(Options(), name) for name in same)
        assert GRPORun.of(opts).pass_rates is not None  # the shipped model's own train_pass_rates.jsonl
    args = compare_llm_rewards.parse_args(["--runs-dir", str(tmp_path)])  # the default: the protocol's 4 arms x 11 seeds
    assert compare_llm_rewards.VARIANTS == ("sparse", "oracle-perfect", "critic", "clipo") == args.variants
    assert (args.seed_list, args.test_problems, args.interaction) == (list(range(11)), 1000, "multi-turn")
    assert args.page.name == "reward_comparison.md" and args.records.name == "reward_comparison"
    for variant in args.variants:
        opts = parse_options(compare_llm_rewards.run_command(args, variant, 1)[2:])
        assert (opts.interaction, opts.model, opts.rewards, opts.step_credit) == (
            "multi-turn", llm_grpo.DEFAULT_TURN_MODEL, variant, False)
        assert (opts.test_eval, opts.test_problems, opts.steps, opts.threads) == (True, 1000, Options().steps, 1)
    assert compare_llm_rewards.run_path(args, "oracle-reachable@step", 2).name == "oracle-reachable-step-s2"
    quick = compare_llm_rewards.parse_args(["--runs-dir", str(tmp_path), "--quick"])
    assert (quick.variants, quick.seed_list, quick.page.parent) == (("sparse", "oracle-perfect"), list(range(8)), tmp_path)
    assert compare_llm_rewards.parse_args(["--seeds", "3,0-2,2"]).seed_list == [3, 0, 1, 2]
    for bad in ("a", "5-2"):
        with pytest.raises(SystemExit):
            compare_llm_rewards.parse_args(["--seeds", bad])
    for bad in ("", "sparse,sparse"):  # no arm (the run ended on a missing curves file), or two runs in one folder
        with pytest.raises(SystemExit):
            compare_llm_rewards.parse_args(["--variants", bad])


def test_quick_with_the_flags_it_sets_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--quick --seeds 0-2 (or --variants, --name, --results-dir) ran seeds 0-7 anyway: the flag silently ignored."""
    from baselines import compare_llm_rewards

    for flag in (["--seeds", "0-2"], ["--variants", "sparse,critic"], ["--name", "mine"], ["--results-dir", str(tmp_path)]):
        with pytest.raises(SystemExit) as exc:
            compare_llm_rewards.parse_args(["--quick", *flag])
        assert exc.value.code == 2 and f"--quick sets {flag[0]} itself" in capsys.readouterr().err
    assert compare_llm_rewards.parse_args(["--quick", "--runs-dir", str(tmp_path)]).seed_list == list(range(8))


@pytest.mark.parametrize(("argv", "message"), [
    (["--learning-rate", "-1"], "the runs of variant 'sparse' would be refused: --learning-rate must be >= 0"),
    (["--extra-args=--seed 5"], "--extra-args must not set --rewards"),
    (["--seeds", "0,2147483648"], "the runs of variant 'sparse' would be refused: --seed must be in [0, 2**31)")])  # was checked for seed 0 only
def test_comparison_flags_its_runs_refuse_are_one_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               argv: list[str], message: str) -> None:
    """A flag llm_grpo.py refuses printed its usage error, then the comparison's line again, exit 1; --extra-args
    setting a per-run flag exited 1; now one usage error of compare_llm_rewards.py, exit 2."""
    from baselines import compare_llm_rewards

    with pytest.raises(SystemExit) as exc:
        compare_llm_rewards.main(["--runs-dir", str(tmp_path / "runs"), *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("error:") == 1 and f"compare_llm_rewards.py: error: {message}" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flag", ["--runs-dir", "--results-dir"])
def test_comparison_folders_that_are_files_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """--results-dir naming a file was found after the starting model played and the first run trained (its record
    could not be written); --runs-dir a file was 'File exists', exit 1."""
    from baselines import compare_llm_rewards

    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as exc:
        compare_llm_rewards.parse_args([flag, str(tmp_path / "file")])
    assert exc.value.code == 2 and f"{flag} {tmp_path / 'file'} is not a folder" in capsys.readouterr().err


def test_comparison_refuses_a_bad_variant_or_flag_before_any_run_starts(tmp_path: Path) -> None:
    from baselines import compare_llm_rewards

    runs = tmp_path / "runs"
    with pytest.raises(SystemExit, match="variant 'nope' would be refused: --rewards: unknown reward variant 'nope'"):
        compare_llm_rewards.main(["--runs-dir", str(runs), "--variants", "sparse,nope"])
    with pytest.raises(SystemExit, match="variant 'sparse' would be refused"):
        compare_llm_rewards.main(["--runs-dir", str(runs), "--extra-args", "--beta -1"])
    for extra in ("--seed 5", "--steps 3", "--rewards critic"):  # every seed's run the same, or not the arm it is called
        with pytest.raises(SystemExit, match="--extra-args must not set --rewards, --step-credit, --seed"):
            compare_llm_rewards.main(["--runs-dir", str(runs), f"--extra-args={extra}"])
    with pytest.raises(ValueError, match="--extra-args must be .*No closing quotation"):  # was shlex's traceback
        compare_llm_rewards.Options(runs_dir=str(runs), extra_args="--beta '0.1")
    assert not runs.exists()


def fake_finished_run(cmp: Any, args: Any, variant: str, seed: int, end: list[bool]) -> Path:
    """The files a finished llm_grpo.py run of ``args`` leaves, with the test outcomes ``end``."""
    run = cmp.run_path(args, variant, seed)
    run.mkdir(parents=True, exist_ok=True)
    ids = [f"longproc-0.5k/test/{i}" for i in range(len(end))]
    (run / "held_out.json").write_text(json.dumps({"ids": ids, "settings": {}, "start": [False] * len(end), "end": end}))
    (run / "summary.json").write_text(json.dumps({"last": {"step": args.steps}, "steps": args.steps, "seconds_per_step": 2.5}))
    (run / "train_log.jsonl").write_text('{"step": 1, "frac_reward_zero_std": 0.5}\n{"step": 2, "frac_reward_zero_std": 0.25}\n')
    (run / "metrics.csv").write_text("step,problems,greedy_success\n0,4,0.25\n2,4,0.5\n")
    (run / "options.json").write_text(json.dumps(dataclasses.asdict(parse_options(cmp.run_command(args, variant, seed)[2:]))))
    return run


def test_comparison_reuses_only_runs_of_the_same_options_and_records_each_finished_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-run with other options retrains (or resumes); a finished run leaves its record, and a run about to start
    gets the start's test outcomes played once for all."""
    import subprocess

    from baselines import compare_llm_rewards as cmp
    from baselines.reward_analysis import outcomes, read_records

    args = cmp.parse_args(["--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results"), "--steps", "2",
                           "--test-problems", "3"])
    run = fake_finished_run(cmp, args, "sparse", 0, [True, False, True])
    assert cmp.finished(args, "sparse", 0)
    opts = json.loads((run / "options.json").read_text())
    (run / "options.json").write_text(json.dumps({**opts, "learning_rate": 3e-4}))  # made with another --learning-rate
    assert not cmp.finished(args, "sparse", 0)
    (run / "options.json").write_text(json.dumps(opts))

    start = {"ids": ["x"], "settings": {}, "start": [True]}
    (Path(args.runs_dir) / cmp.START_FILE).write_text(json.dumps(start))
    launched: list[list[str]] = []

    class Done:  # a run that finishes at once, leaving its files
        returncode = 0

        def __init__(self, cmd: list[str], *a: Any, **k: Any) -> None:
            launched.append(cmd)
            assert json.loads((cmp.run_path(args, "critic", 1) / "held_out.json").read_text()) == start
            fake_finished_run(cmp, args, "critic", 1, [False, False, True])

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(subprocess, "Popen", Done)
    from baselines.analysis import protocol

    monkeypatch.setattr(protocol, "git_commit", lambda: "0123abc")  # git runs through Popen too
    cmp.launch_all(args, [("sparse", 0), ("critic", 1)])
    assert len(launched) == 1 and "--test-eval" in launched[0]  # sparse seed 0 was finished already
    (rec,) = read_records(args.records)
    assert cmp.recorded(args, "critic", 1) and not cmp.recorded(args, "sparse", 0)
    rec_path = cmp.record_path(args, "critic", 1)
    from baselines.reward_analysis import write_record

    moved = {**rec, "options": {**rec["options"], "model": "/elsewhere/clone/baselines/checkpoints/countdown-tiny-lm-turns",
                                "output_dir": "/elsewhere/runs/critic-s1"}}
    write_record(rec_path, moved)  # a record committed from another clone counts as the same run
    assert cmp.recorded(args, "critic", 1)
    write_record(rec_path, {**moved, "options": {**moved["options"], "learning_rate": 1.0}})
    assert not cmp.recorded(args, "critic", 1)  # not with other options
    write_record(rec_path, rec)
    assert (rec["arm"], rec["seed"], rec["test_outcomes"], rec["start_outcomes"], rec["steps"]) == ("critic", 1, "001", "000", 2)
    assert rec["frac_reward_zero_std"] == [0.5, 0.25] and rec["validation"][-1] == {"step": 2.0, "problems": 4.0, "greedy_success": 0.5}
    assert rec["options"]["rewards"] == "critic" and rec["commit"] == "0123abc" and list(outcomes(rec["test_outcomes"])) == [0, 0, 1]


@pytest.mark.parametrize("damage", ["record cut", "record without options", "summary.json", "options.json",
                                    "held_out.json", "train_log.jsonl", "metrics.csv", "summary.json fields"])
def test_a_damaged_run_file_or_record_is_one_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             damage: str) -> None:
    """A torn or hand-damaged record, summary.json, options.json or log of a finished run was a traceback (EOFError,
    JSONDecodeError, KeyError, UnicodeDecodeError) from finished() or run_record(); now one error naming the file."""
    from baselines import compare_llm_rewards as cmp
    from baselines.analysis import protocol
    from baselines.reward_analysis import write_record

    monkeypatch.setattr(protocol, "git_commit", lambda: "0123abc")
    args = cmp.parse_args(["--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results"), "--steps", "2",
                           "--test-problems", "3"])
    run = fake_finished_run(cmp, args, "sparse", 0, [True, False, True])
    path, check = run / damage.split()[0], lambda: cmp.finished(args, "sparse", 0)
    if damage.startswith("record"):
        path = write_record(cmp.record_path(args, "sparse", 0), cmp.run_record(run))
        if damage == "record cut":
            path.write_bytes(path.read_bytes()[:40])
        else:
            write_record(path, {"arm": "sparse", "seed": 0, "options": [1]})
    elif damage in ("summary.json", "options.json"):
        path.write_text('{"last": {"st')
    else:
        check = lambda: cmp.run_record(run)  # noqa: E731
        if damage == "held_out.json":
            path.write_text('{"ids": ["a", "b"')
        elif damage == "train_log.jsonl":
            path.write_text('{"step": 1}\nnot a row\n{"step": 2}\n')
        elif damage == "metrics.csv":
            path.write_bytes(b"step,greedy_success\n0,\xff\n")
        else:
            path, _ = run, path.write_text('{"last": 2}')  # no step: not the files of a finished run
    with pytest.raises(SystemExit, match=str(path).replace(".", r"\.")):
        check()


def test_comparison_at_equal_wall_clock_passes_the_limit_and_counts_time_stopped_runs_as_finished(tmp_path: Path) -> None:
    from baselines import compare_llm_rewards as cmp

    args = cmp.parse_args(["--runs-dir", str(tmp_path), "--results-dir", str(tmp_path), "--steps", "1000", "--max-minutes", "5"])
    opts = parse_options(cmp.run_command(args, "oracle-perfect@step", 4)[2:])
    assert (opts.steps, opts.max_minutes, opts.step_credit) == (1000, 5.0, True)
    run = cmp.run_path(args, "sparse", 0)
    run.mkdir(parents=True)
    (run / "options.json").write_text(json.dumps(dataclasses.asdict(parse_options(cmp.run_command(args, "sparse", 0)[2:]))))
    (run / "summary.json").write_text(json.dumps({"last": {"step": 212}, "steps": 212}))
    assert not cmp.finished(args, "sparse", 0)  # cut short some other way: it resumes
    (run / "summary.json").write_text(json.dumps({"last": {"step": 212}, "steps": 212, "stopped_by_time_limit": True}))
    assert cmp.finished(args, "sparse", 0)
    assert "--max-minutes" not in cmp.run_command(cmp.parse_args(["--runs-dir", str(tmp_path)]), "sparse", 0)


def test_a_critic_reward_that_cannot_score_the_presets_states_is_refused_up_front():
    with pytest.raises(SystemExit, match="at most 4 numbers, but preset 'hard' has problems of up to 6") as exc:
        parse_options(["--preset", "hard", "--rewards", "critic"])
    assert exc.value.code == 2  # a usage error, like the other options that do not fit together
    assert parse_options(["--preset", "hard", "--rewards", "oracle"]).rewards == "oracle"


@pytest.mark.parametrize(("argv", "message"), [
    (["--rewards", "sparse=nan"], "weight of 'sparse' must be a finite number"),
    (["--rewards", "sparse=inf"], "weight of 'sparse' must be a finite number"),
    (["--temperature", "0"], "--temperature must be > 0"),
    (["--seed", "-1"], r"--seed must be in \[0, 2\*\*31\), got -1"),  # was numpy's traceback once the model had loaded
    (["--learning-rate", "-1"], "--learning-rate must be >= 0"),
    (["--loss-type", "nosuch"], "--loss-type must be one of"),
    (["--scale-rewards", "nosuch"], "--scale-rewards must be one of"),
    (["--model", "/nonexistent/model"], "--model /nonexistent/model: no such directory"),
    (["--train-pass-rates", "none", "--min-pass-rate", "0.1"], "filter by a pass-rate file"),
    (["--micro-batch-size", "8", "--max-tokens-per-micro-batch", "100000"], "chooses the micro-batch"),  # was ignored
])
def test_bad_options_fail_before_any_model_is_loaded(argv, message):
    with pytest.raises(SystemExit, match=message):
        parse_options(argv)


def test_options_built_in_python_refuse_an_infinite_temperature():
    with pytest.raises(ValueError, match="--temperature must be > 0 and finite"):
        Options(temperature=math.inf)  # generate() would draw uniformly from the vocabulary


@pytest.mark.parametrize("argv", [["--step-credit"], ["--interaction", "single-pass", "--stop-at-dead-end"],
                                  ["--train-pass-rates", "/nonexistent.jsonl"], ["--report-to", "nosuch"],
                                  ["--vllm-server-base-url", "http://gpu-node:8000"],  # was ignored (colocate, no vLLM)
                                  ["--interaction", "single-pass", "--use-vllm", "--vllm-server-base-url", "http://h:8000"],
                                  ["--extra", '{"min_p": 0.1}']])  # multi-turn: refused only at the first rollout
def test_options_that_do_not_fit_together_are_usage_errors(argv, capsys):
    """They exited 1 with a bare line; like a malformed value they are a usage error: the usage line, exit code 2."""
    with pytest.raises(SystemExit) as exc:
        parse_options(argv)
    assert exc.value.code == 2 and "usage:" in capsys.readouterr().err


def test_a_missing_shipped_model_says_how_to_build_it(tmp_path, monkeypatch):
    missing = str(tmp_path / "countdown-tiny-lm")
    monkeypatch.setattr(grpo_model, "DEFAULT_MODEL", missing)
    with pytest.raises(SystemExit, match="the shipped model is missing at .*llm_sft.py"):
        parse_options(["--model", missing])


def test_model_dir_without_config_and_bad_extra_are_clear_errors(tmp_path):
    with pytest.raises(SystemExit, match="no config.json there"):
        parse_options(["--model", str(tmp_path)])
    with pytest.raises(SystemExit, match="invalid GRPO configuration"):
        build_grpo_config(GRPORun.of(Options(extra={"nosuch": 1}, output_dir=str(tmp_path))))


@pytest.mark.parametrize(("extra", "named"), [({"max_steps": 100}, "max_steps (--steps)"),
                                               ({"output_dir": "elsewhere"}, "output_dir (--output-dir)"),
                                               ({"per_device_train_batch_size": 3}, "per_device_train_batch_size,")])
def test_extra_fields_that_the_run_sets_are_usage_errors(tmp_path, capsys, extra, named):
    """--extra '{"max_steps": 100}' trained 100 steps while the card and the summary said 30 (output_dir: the
    checkpoints went where --resume never looks); --extra sets only what the run leaves to TRL."""
    with pytest.raises(SystemExit) as exc:
        build_grpo_config(GRPORun.of(Options(extra=extra, output_dir=str(tmp_path))))
    assert exc.value.code == 2 and f"--extra sets {named}" in capsys.readouterr().err
    assert build_grpo_config(GRPORun.of(Options(extra={"top_p": 0.9}, output_dir=str(tmp_path)))).top_p == 0.9


def test_resume_refuses_a_run_with_other_options_and_a_fresh_start_over_a_kept_run(tmp_path, monkeypatch):
    (tmp_path / "checkpoint-1").mkdir()
    (tmp_path / "options.json").write_text(json.dumps(dataclasses.asdict(Options(rewards="oracle", train_pass_rates="none"))))
    with pytest.raises(SystemExit, match=r"was trained with --rewards oracle \(now sparse\); resume with the same flags"):
        llm_grpo.train(Options(output_dir=str(tmp_path), resume=True, train_pass_rates="none"))
    with pytest.raises(SystemExit, match="holds a run already: --resume continues it; to start over use another --output-dir"):
        llm_grpo.train(Options(output_dir=str(tmp_path), train_pass_rates="none"))
    (tmp_path / "checkpoint-1").rmdir()
    (tmp_path / "metrics.csv").write_text("step\n0\n")
    from countdown_gym.integrations import trl_rollout

    monkeypatch.setattr(trl_rollout, "rollout_task", lambda *a, **k: pytest.fail("stop here"))  # past the directory set-up
    with pytest.raises(pytest.fail.Exception, match="stop here"):  # --resume without a checkpoint: a fresh start
        llm_grpo.train(Options(output_dir=str(tmp_path), resume=True, train_pass_rates="none"))
    assert json.loads((tmp_path / "options.json").read_text())["rewards"] == "sparse"


def test_a_critic_reward_on_four_number_presets_is_accepted() -> None:
    from baselines.lm.compat import check_critic_fits

    check_critic_fits("longproc-0.5k")  # 4-number problems: within the shipped critic's max_numbers
