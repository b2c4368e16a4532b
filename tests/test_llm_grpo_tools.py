"""``llm_grpo.py --interaction tools``: GRPO through TRL's own tool loop (``environment_factory`` with
``CountdownToolEnv``), its rewards, its validation and held-out play through tool calls, its run directory and
``--resume``, its vLLM configuration; and the tool env's rank-aware problem draws. Everything is built here (a tiny
Qwen2 with Qwen2.5's tool-calling chat template; no download)."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from countdown_gym import Problem, load_split
from countdown_gym.integrations.trl_env import CountdownToolEnv, ProblemDraw, process_rank

pytest.importorskip("trl")
from test_trl_env import EXPERIMENTAL, SOLVE_A, SOLVE_B, _build_tokenizer, _script_of, _tiny_qwen2  # noqa: E402

from baselines import llm_grpo  # noqa: E402
from baselines.lm.grpo_config import build_grpo_config  # noqa: E402
from baselines.lm.grpo_options import GRPORun, Options  # noqa: E402

P, Q = Problem((6, 2, 5, 3), 8), Problem((21, 16, 17, 26), 46)


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved two-layer Qwen2 whose tokenizer has Qwen2.5's chat template (TRL parses its tool calls)."""
    from qwen_chat import qwen_tokenizer, tiny_qwen2

    from countdown_gym.integrations.trl_env import dataset_row, tool_functions

    env = CountdownToolEnv()
    tools = list(tool_functions(env).values())
    boot = qwen_tokenizer()
    corpus = [boot.apply_chat_template([{"role": "user", "content": env.reset(**dataset_row(p))}], tools=tools,
                                       tokenize=False, add_generation_prompt=True)
              for p in load_split("longproc-0.5k", "train")[:10]]
    corpus.append('<tool_call>\n{"name": "move", "arguments": {"a": 6, "op": "-", "b": 2}}\n</tool_call>')
    tokenizer = qwen_tokenizer(corpus, vocab_size=600)
    path = tmp_path_factory.mktemp("tool_model")
    tokenizer.save_pretrained(path)
    tiny_qwen2(tokenizer).save_pretrained(path)
    return path


def tools_options(model: Path, out: Path, **kw) -> Options:
    return Options(model=str(model), interaction="tools", steps=2, prompts_per_step=2, num_generations=2,
                   max_completion_length=48, eval_problems=2, eval_samples=0, test_problems=4, output_dir=str(out),
                   save_steps=1, train_problems=8, threads=1, report_to="none", quiet=True, **kw)


# ---- the run: directory, card, held-out test, resume -----------------------------------------------------------


@pytest.mark.filterwarnings(EXPERIMENTAL)
def test_a_tools_run_writes_its_directory_card_and_held_out_test_and_resumes(tool_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    opts = tools_options(tool_model, out)
    summary = llm_grpo.train(opts)
    assert summary["interaction"] == "tools" and summary["steps"] == 2
    for name in ("README.md", "options.json", "metrics.csv", "train_log.jsonl", "held_out.json", "summary.json",
                 "checkpoint-2", "final", "best"):
        assert (out / name).exists(), name
    assert json.loads((out / "options.json").read_text())["interaction"] == "tools"
    card = (out / "README.md").read_text()
    assert "- interaction: `tools`" in card and "test success (greedy, 4 held-out test problems, tools)" in card
    held = json.loads((out / "held_out.json").read_text())
    assert len(held["start"]) == len(held["end"]) == 4 and held["result"] == summary["test"]
    step_logs = [row for row in map(json.loads, (out / "train_log.jsonl").open()) if "reward" in row]
    assert len(step_logs) == 2
    for key in ("rewards/sparse_reward/mean", "rewards/format_reward/mean", "rewards/oracle_perfect_reward/mean",
                "rewards/CountdownToolEnv/mean", "tools/call_frequency"):
        assert key in step_logs[0], key
    # resume to step 3: the start of the test is read back, the metrics keep their history
    summary = llm_grpo.train(dataclasses.replace(opts, steps=3, resume=True))
    assert summary["steps"] == 3 and (out / "checkpoint-3").is_dir()
    assert [int(r["step"]) for r in csv.DictReader((out / "metrics.csv").open())] == [0, 2, 3]
    assert json.loads((out / "held_out.json").read_text())["start"] == held["start"]
    command = (out / "README.md").read_text().split("```bash\n")[1].split("\n```")[0]
    assert "--interaction tools" in command


def test_tools_options_are_checked_before_any_model_loads(tool_model: Path) -> None:
    with pytest.raises(SystemExit, match="--interaction tools needs --model"):
        llm_grpo.parse_options(["--interaction", "tools"])
    with pytest.raises(SystemExit, match="use --interaction tools"):  # multi-turn with vLLM: the path that has it
        llm_grpo.parse_options(["--interaction", "multi-turn", "--use-vllm"])
    with pytest.raises(SystemExit, match="--step-credit"):
        llm_grpo.parse_options(["--interaction", "tools", "--model", str(tool_model), "--step-credit",
                                "--rewards", "oracle-perfect"])
    plan = GRPORun.of(Options(interaction="tools", model=str(tool_model)))
    assert plan.run_dir.name == "longproc-0.5k-tools-sparse-s0"


def test_a_tokenizer_without_a_tool_template_is_refused(tmp_path: Path) -> None:
    from qwen_chat import qwen_tokenizer, tiny_qwen2

    from baselines.lm.compat import check_tool_tokenizer

    tokenizer = qwen_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    with pytest.raises(SystemExit, match="renders tool calls"):
        check_tool_tokenizer(tokenizer, "m")
    tokenizer.chat_template = None
    tokenizer.save_pretrained(tmp_path)
    tiny_qwen2(tokenizer).save_pretrained(tmp_path)
    with pytest.raises(SystemExit, match="renders tool calls"):  # before the model loads
        llm_grpo.train(Options(interaction="tools", model=str(tmp_path), output_dir=str(tmp_path / "run"), report_to="none"))


# ---- vLLM: the GRPOConfig TRL 1.16 documents (vLLM itself cannot run on this CPU) -------------------------------


@pytest.mark.parametrize("mode", ["colocate", "server"])
def test_tools_with_vllm_configure_trls_own_generation(tool_model: Path, tmp_path: Path, mode: str) -> None:
    url = {"vllm_server_base_url": "http://gpu-node:8000"} if mode == "server" else {}
    plan = GRPORun.of(Options(interaction="tools", model=str(tool_model), use_vllm=True, vllm_mode=mode,
                               max_prompt_length=1024, max_completion_length=2048, max_turns=12,
                               output_dir=str(tmp_path), **url))
    config = build_grpo_config(plan)
    assert config.use_vllm and config.vllm_mode == mode
    assert config.vllm_max_model_length == 1024 + 2048  # the prompt with its tool schemas, and every turn of the episode
    assert config.max_tool_calling_iterations == 12 + 4  # the game's turn budget and a few free numbers() calls
    assert config.max_completion_length == 2048
    if mode == "server":
        assert config.vllm_server_base_url == "http://gpu-node:8000"
    else:
        assert config.vllm_gpu_memory_utilization == 0.3


# ---- the trainer's rewards and the play through tool calls ------------------------------------------------------


@pytest.mark.filterwarnings(EXPERIMENTAL)
def test_every_reward_variant_scores_the_environments_and_get_reward_weighs_nothing(tmp_path: Path) -> None:
    from trl import GRPOConfig

    from baselines.lm.grpo_trainer import CountdownGRPOTrainer
    from baselines.lm.tool_play import play_tool_episodes
    from countdown_gym.game.turn_game import replay_turns
    from countdown_gym.integrations.trl import REWARD_FUNCTIONS
    from countdown_gym.integrations.trl_env import make_dataset
    from countdown_gym.rewards.terms import format_score
    from countdown_gym.rewards.variants import get_variant

    tokenizer = _build_tokenizer()
    model = _tiny_qwen2(tokenizer)  # writes the scripted tool calls of test_trl_env (a solving and a failing one)
    envs, generated = play_tool_episodes(model, tokenizer, [P, Q, P, Q], max_turns=16, max_new_tokens=400)
    assert generated > 0
    for env in envs:
        script = _script_of(env.problem, env.calls)
        assert env.solved == (script in (SOLVE_A, SOLVE_B))
        replay = replay_turns(env.problem, [text for name, text, _ in env.calls if name != "numbers"])
        assert env.replay.transitions == replay.transitions and env.replay.solved == replay.solved
    assert {env.solved for env in envs} == {True, False}
    n = len(envs)
    for name, func in REWARD_FUNCTIONS.items():  # TRL passes the rollouts' environments to every reward function
        scores = func([None] * n, [[{"role": "assistant", "content": ""}]] * n, environments=envs)
        expected = {"sparse": [float(e.solved) for e in envs], "format": [format_score(e.replay) for e in envs],
                    "oracle-perfect": [get_variant("oracle-perfect").completion_score(e.replay) for e in envs],
                    "oracle-reachable": [get_variant("oracle-reachable").completion_score(e.replay) for e in envs]}[name]
        assert scores == pytest.approx(expected), name
    from baselines.lm.rewards import load_needs
    from countdown_gym.integrations.trl import reward_function

    critic = load_needs(["critic"])["critic"]  # the shipped critic, scoring each episode's moves
    scores = reward_function("critic", {"critic": critic})([None] * n, [[]] * n, environments=envs)
    assert scores == pytest.approx([get_variant("critic").completion_score(e.replay, critic) for e in envs]) and len(set(scores)) > 1
    trainer = CountdownGRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=list(REWARD_FUNCTIONS.values()),
        train_dataset=make_dataset([P, Q]), environment_factory=CountdownToolEnv,
        args=GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, num_generations=2,
                        reward_weights=[1.0, 0.1, 0.0, 0.5], use_cpu=True, report_to="none", save_strategy="no"),
    )
    assert trainer.reward_func_names[-1] == "CountdownToolEnv"  # logged, but the sparse term is already its verdict
    assert trainer.reward_weights.tolist() == [1.0, pytest.approx(0.1), 0.0, 0.5, 0.0]


def test_play_stops_at_the_completion_budget() -> None:
    from baselines.lm.tool_play import play_tool_episodes

    tokenizer = _build_tokenizer()
    envs, _ = play_tool_episodes(_tiny_qwen2(tokenizer), tokenizer, [P, Q], max_turns=16, max_new_tokens=30)
    assert all(len(e.calls) <= 1 and not e.solved for e in envs)  # one tool call's reply fills the 30 tokens


def test_play_runs_at_most_max_turns_plus_4_rounds_of_tool_calls_as_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL (max_tool_calling_iterations = max_turns + 4) never ran the 7th call of this script at max_turns=2; the
    held-out play ran it, and the episode counted solved."""
    import test_trl_env

    from baselines.lm.tool_play import play_tool_episodes

    r = Problem((7, 3, 4), 40)
    script = [("numbers", {})] * 5 + [("move", {"a": 7, "op": "+", "b": 3}), ("move", {"a": 10, "op": "*", "b": 4}), "."]
    monkeypatch.setitem(test_trl_env.SCRIPTS, (r.numbers, r.target), [script])
    tokenizer = _build_tokenizer()
    (env,), _ = play_tool_episodes(_tiny_qwen2(tokenizer), tokenizer, [r], max_turns=2, max_new_tokens=2000)
    assert [c[1] for c in env.calls] == [""] * 5 + ["7+3"] and not env.solved


def test_each_episode_of_a_batch_keeps_its_own_completion_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch generated to its largest budget left: x's second call, past x's own, ran all the same (played alone,
    as TRL cuts each completion, it did not)."""
    import test_trl_env

    from baselines.lm.tool_play import play_tool_episodes

    x, y = Problem((11, 12, 13, 14, 15, 16), 99), Problem((2, 3, 9), 15)
    monkeypatch.setitem(test_trl_env.SCRIPTS, (x.numbers, x.target),
                        [[("move", {"a": 11, "op": "+", "b": 12}), ("move", {"a": 23, "op": "*", "b": 13}), "."]])
    monkeypatch.setitem(test_trl_env.SCRIPTS, (y.numbers, y.target), [[("move", {"a": 2, "op": "+", "b": 3}), ("give_up", {}), "."]])
    tokenizer = _build_tokenizer()
    model = _tiny_qwen2(tokenizer)
    both, _ = play_tool_episodes(model, tokenizer, [x, y], max_turns=8, max_new_tokens=116)
    alone = [play_tool_episodes(model, tokenizer, [p], max_turns=8, max_new_tokens=116)[0][0] for p in (x, y)]
    assert [e.calls for e in both] == [e.calls for e in alone] and [len(e.calls) for e in both] == [1, 2]


# ---- rank-aware problem draws ------------------------------------------------------------------------------------

DRAW = ("from countdown_gym.integrations.trl_env import CountdownToolEnv\n"
        "envs = [CountdownToolEnv(preset='tinyzero', seed=7, num_generations=2) for _ in range(2)]\n"
        "for _ in range(40):\n"
        "    [e.reset() for e in envs]\n"
        "    print(envs[0].problem.numbers, envs[0].problem.target, envs[1].problem == envs[0].problem)\n")


def draws_of(rank: str | None, world: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update({k: v for k, v in (("RANK", rank), ("WORLD_SIZE", world)) if v is not None})
    run = subprocess.run([sys.executable, "-c", DRAW], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0 or rank is not None, run.stderr
    return run.stdout.splitlines() if run.returncode == 0 else [run.stderr.strip().splitlines()[-1]]


def test_two_ranks_draw_disjoint_problems_each_group_one_problem_reproducibly() -> None:
    rank0, rank1 = draws_of("0", "2"), draws_of("1", "2")
    assert len(rank0) == len(rank1) == 40
    assert all(line.endswith("True") for line in rank0 + rank1)  # the two rollouts of a group play one problem
    assert not {line.rsplit(" ", 1)[0] for line in rank0} & {line.rsplit(" ", 1)[0] for line in rank1}
    assert draws_of("1", "2") == rank1  # reproducible from the seed and the rank
    assert len({line.rsplit(" ", 1)[0] for line in rank0}) == 40  # no problem twice within an epoch
    assert "need 0 <= rank < world_size" in draws_of("1", None)[0]  # RANK without WORLD_SIZE: said, not duplicated


def test_draws_split_each_epoch_between_the_processes() -> None:
    draws = [ProblemDraw(preset="tinyzero", split="validation", tier="easy", seed=3, rank=r, world_size=3) for r in range(3)]
    pool = draws[0].source.pool
    first = [[d.next() for _ in range(len(pool) // 3)] for d in draws]  # within the first epoch
    assert all(len(set(mine)) == len(mine) and set(mine) <= set(pool) for mine in first)
    assert all(not set(a) & set(b) for i, a in enumerate(first) for b in first[i + 1:])
    again = ProblemDraw(preset="tinyzero", split="validation", tier="easy", seed=3, rank=1, world_size=3)
    assert [again.next() for _ in range(2 * len(pool))][: len(first[1])] == first[1]  # and on into the next epochs
    assert process_rank(2, 4) == (2, 4)
    with pytest.raises(ValueError, match="rank < world_size"):
        ProblemDraw(preset="tinyzero", rank=4, world_size=4)
    curriculum = [ProblemDraw(curriculum="adaptive", seed=0, rank=r, world_size=2) for r in range(2)]
    assert [curriculum[0].next() for _ in range(5)] != [curriculum[1].next() for _ in range(5)]
