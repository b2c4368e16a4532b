"""The text critic (the seed paper's architecture A): training steps, scoring, evaluation sets, reward options."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from countdown_gym import Problem, dfs_trace, load_split  # noqa: E402
from countdown_gym.game.trace import format_list  # noqa: E402
from critics.data import random_states, trace_states, trace_tree  # noqa: E402
from critics.models import CheckpointError  # noqa: E402
from critics.text_critic import (  # noqa: E402
    SHIPPED_TEXT_CHECKPOINT,
    TextCritic,
    TextCriticConfig,
    build_text_critic,
    load_text_critic,
    node_lines,
    prefix_window,
    render_state,
    save_text_critic,
)
from critics.train_text import TextTrainConfig, build_text_traces, train  # noqa: E402

PROBLEM = Problem((37, 14, 29, 6), 46)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real training steps on 6 training problems (small windows and batches)."""
    out = tmp_path_factory.mktemp("text-critic") / "run"
    cfg = TextTrainConfig(train_problems=6, steps=3, batch_size=4, model=TextCriticConfig(window=40, head_hidden=32, out_dim=16),
                          warmup=1, log_every=1, checkpoint_every=2, out=str(out))
    return train(cfg, progress=False)


def test_a_few_training_steps_give_a_loadable_checkpoint(tiny_run: Path) -> None:
    meta = json.loads((tiny_run / "config.json").read_text())
    assert meta["step"] == 3 and meta["model"]["window"] == 40 and meta["data"]["traces"] == 6
    log = [json.loads(x) for x in (tiny_run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3] and all(np.isfinite(r["loss"]) for r in log)
    assert (tiny_run / "loss.png").stat().st_size > 0
    critic = load_text_critic(tiny_run)
    assert isinstance(critic, TextCritic) and critic.config.out_dim == 16


def test_a_run_stopped_mid_way_resumes_to_the_uninterrupted_runs_weights(tiny_run: Path, tmp_path: Path, capsys) -> None:
    kw = dict(train_problems=6, steps=3, batch_size=4, model=TextCriticConfig(window=40, head_hidden=32, out_dim=16),
              warmup=1, log_every=1, checkpoint_every=1)
    stopped = train(TextTrainConfig(**kw, stop_after=2, out=str(tmp_path / "a")), progress=False)
    assert json.loads((stopped / "previous" / "config.json").read_text())["step"] == 1
    torn = Path(shutil.copytree(stopped, tmp_path / "b"))
    meta = json.loads((torn / "config.json").read_text())
    (torn / "config.json").write_text(json.dumps({**meta, "step": 3}))  # a save cut short: new config, older weights
    with pytest.raises(CheckpointError, match="from step 2 but .*config.json from step 3"):
        load_text_critic(torn)
    with pytest.raises(SystemExit, match="holds a run already: --resume continues it"):
        train(TextTrainConfig(**kw, out=str(stopped)), progress=False)
    capsys.readouterr()
    for out, said in ((stopped, f"resumed from {stopped} at step 2"), (torn, f"resumed from {torn / 'previous'} at step 1")):
        train(TextTrainConfig(**kw, resume=True, out=str(out)), progress=False)
        assert said in capsys.readouterr().out
        assert [json.loads(x)["step"] for x in (out / "log.jsonl").read_text().splitlines()] == [1, 2, 3]
        a, b = load_text_critic(tiny_run).model.state_dict(), load_text_critic(out).model.state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_failed_save_leaves_the_tokenizer_folder_as_it_was(tiny_run: Path, tmp_path: Path) -> None:
    class Failing:  # writes part of the tokenizer, then the disk is full
        def save_pretrained(self, path: str) -> None:
            Path(path).mkdir(parents=True, exist_ok=True)
            (Path(path) / "tokenizer.json").write_text("{")
            raise OSError(28, "No space left on device")

    out = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    before = (out / "tokenizer" / "tokenizer.json").read_bytes()
    with pytest.raises(OSError, match="No space"):
        save_text_critic(load_text_critic(out).model, Failing(), out, {"step": 3})
    assert (out / "tokenizer" / "tokenizer.json").read_bytes() == before and not (out / "tokenizer.tmp").exists()
    load_text_critic(out)


def test_training_moves_the_weights_of_lm_head_and_goal_tower(tiny_run: Path) -> None:
    start, _ = build_text_critic(TextCriticConfig(window=40, head_hidden=32, out_dim=16))
    trained = load_text_critic(tiny_run).model.state_dict()
    init = start.state_dict()
    for prefix in ("lm.layers.0.", "head.", "goal_tower."):
        keys = [k for k in init if k.startswith(prefix) and init[k].is_floating_point()]
        assert any(not torch.equal(init[k], trained[k]) for k in keys), prefix


def test_a_frozen_lm_stays_as_loaded(tmp_path: Path) -> None:
    out = train(TextTrainConfig(train_problems=4, steps=2, batch_size=4, out=str(tmp_path / "frozen"),
                                model=TextCriticConfig(window=32, head_hidden=16, out_dim=8, finetune=False)), progress=False)
    start, _ = build_text_critic(TextCriticConfig(window=32, head_hidden=16, out_dim=8, finetune=False))
    trained = load_text_critic(out).model.state_dict()
    assert all(torch.equal(v, trained[k]) for k, v in start.state_dict().items() if k.startswith("lm."))
    assert not torch.equal(start.state_dict()["head.0.weight"], trained["head.0.weight"])


def test_scores_have_one_value_per_state_and_are_deterministic(tiny_run: Path) -> None:
    critic = load_text_critic(tiny_run)
    states, targets = [(20, 26), (80,), (37, 14, 29, 6), (51, 29, 6)], [46, 46, 46, 12]
    s = critic.score(states, targets)
    assert s.shape == (4,) and s.dtype == np.float32 and np.all(np.abs(s) <= 1.0)
    assert np.array_equal(s, critic.score(states, targets))
    alone = np.array([critic.score([st], [t])[0] for st, t in zip(states, targets, strict=True)])
    np.testing.assert_allclose(alone, s, atol=1e-5)  # padding in a batch changes nothing
    assert np.array_equal(load_text_critic(tiny_run).score(states, targets), s)  # a reload scores the same
    text = critic.score_texts([render_state(sorted(st), t) for st, t in zip(states, targets, strict=True)], targets)
    assert np.array_equal(text, s)
    assert critic.score([], []).shape == (0,)


@pytest.mark.skipif(not (SHIPPED_TEXT_CHECKPOINT / "config.json").is_file(), reason="no shipped text critic")
def test_a_number_set_scores_the_same_in_any_order() -> None:
    """score wrote the set in the order given: (12, 24, 9) scored 0.11 and (9, 12, 24) 0.29 for target 100, so one
    state's reward differed between Countdown-v0 and a replayed completion; it is written sorted, as in training."""
    critic = load_text_critic()
    assert np.ptp(critic.score([(12, 24, 9), (9, 12, 24), (24, 9, 12)], [100] * 3)) < 1e-6
    assert critic.score([(9, 12, 24)], [100])[0] == critic.score_texts([render_state((9, 12, 24), 100)], [100])[0]


def test_bad_input_is_refused_clearly(tiny_run: Path, tmp_path: Path) -> None:
    critic = load_text_critic(tiny_run)
    with pytest.raises(ValueError, match="2 states but 1 targets"):
        critic.score([(1, 2), (3, 4)], [5])
    with pytest.raises(TypeError, match="target 0 must be an int"):
        critic.score([(1, 2)], [5.5])
    with pytest.raises(TypeError, match="state 0 holds ints"):
        critic.score([(1, "2")], [5])
    with pytest.raises(ValueError, match="state 0 is empty"):
        critic.score([()], [5])
    with pytest.raises(TypeError, match="sequence of strings"):
        critic.score_texts("Initial number set", [5])
    with pytest.raises(ValueError, match="text 0 is empty"):  # was a RuntimeError inside the LM's attention
        critic.score_texts([""], [5])
    with pytest.raises(CheckpointError, match="not a directory"):
        load_text_critic(tmp_path / "nope")
    with pytest.raises(ValueError, match="finetune must be a bool, got 'no'"):  # was torch's requires_grad_ TypeError
        TextCriticConfig(finetune="no")
    (tmp_path / "half").mkdir()
    with pytest.raises(CheckpointError, match="config.json is missing"):
        load_text_critic(tmp_path / "half")
    (tmp_path / "half" / "config.json").write_text(json.dumps({"format": "countdown-gym-text-critic/1", "model": {}}))
    with pytest.raises(CheckpointError, match="model.safetensors is missing"):
        load_text_critic(tmp_path / "half")
    with pytest.raises(CheckpointError, match="not a text critic"):  # a numerical critic's checkpoint
        load_text_critic(Path(__file__).resolve().parents[1] / "critics" / "checkpoints" / "v2")


@pytest.mark.skipif(not (SHIPPED_TEXT_CHECKPOINT / "config.json").is_file(), reason="no shipped text critic")
def test_a_config_edited_to_a_huge_size_is_refused_before_its_model_is_built(tmp_path: Path, monkeypatch) -> None:
    """A head of 10**6 units was built (a gigabyte allocated and filled) before the weights were found not to fit."""
    d = Path(shutil.copytree(SHIPPED_TEXT_CHECKPOINT, tmp_path / "ck"))
    meta = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**meta, "model": {**meta["model"], "head_hidden": 10**6}}))

    def built(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(torch.nn.Module, "__init__", built)
    with pytest.raises(CheckpointError, match="config.json: head_hidden 1000000 is larger than any dimension"):
        load_text_critic(d)


@pytest.mark.skipif(not (SHIPPED_TEXT_CHECKPOINT / "config.json").is_file(), reason="no shipped text critic")
@pytest.mark.parametrize(("edit", "message"), [
    ({"vocab_size": 10**9}, "vocab_size 1000000000 does not fit the weights"),  # 512 GB were allocated for it
    ({"hidden_size": 10**6}, "hidden_size 1000000 does not fit the weights"),
    ({"intermediate_size": 10**9}, "intermediate_size 1000000000 does not fit the weights"),
    ({"num_hidden_layers": 10**9}, "num_hidden_layers 1000000000 does not fit the 4 layers"),
    ({"num_hidden_layers": 3}, "num_hidden_layers 3 does not fit the 4 layers"),
    ({"num_attention_heads": 10**6}, "not a language-model config that builds"),  # was transformers' traceback
    ({"max_position_embeddings": 10**9}, None),  # no weight's size (rotary): the model is built
])
@pytest.mark.parametrize("where", ["checkpoint", "lm"])
def test_an_lm_config_edited_to_sizes_its_weights_lack_is_refused_before_the_model_is_built(
        tmp_path: Path, monkeypatch, edit, message, where) -> None:
    """lm_config.json (a text-critic checkpoint's) or config.json (the LM a training run starts from) was turned into a
    model, gigabytes allocated, before its weights were found not to fit: now each size is checked against theirs."""
    import critics.text_critic as text_critic

    d = Path(shutil.copytree(SHIPPED_TEXT_CHECKPOINT if where == "checkpoint" else text_critic.DEFAULT_LM, tmp_path / "d"))
    config = d / ("lm_config.json" if where == "checkpoint" else "config.json")
    config.write_text(json.dumps({**json.loads(config.read_text()), **edit}))

    def built(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(text_critic, "TextCriticModel", built)
    with pytest.raises(CheckpointError if message else AssertionError, match=f"{config.name}: {message}" if message
                       else "the model was built"):
        load_text_critic(d) if where == "checkpoint" else build_text_critic(TextCriticConfig(), d)


def test_an_lm_whose_weights_do_not_read_is_a_checkpoint_error(tmp_path: Path) -> None:
    """A truncated model.safetensors of --lm was safetensors' own error, a traceback out of python -m critics.train_text."""
    import critics.text_critic as text_critic

    d = Path(shutil.copytree(text_critic.DEFAULT_LM, tmp_path / "lm"))
    (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="model.safetensors is not a readable safetensors file"):
        build_text_critic(TextCriticConfig(), d)


def test_a_start_that_fails_before_training_leaves_no_run_behind(tmp_path: Path) -> None:
    """A bad --lm failed after options.json was written: the corrected command was refused ('holds a run already')."""
    out = tmp_path / "run"
    with pytest.raises(CheckpointError, match="no language model at"):
        train(TextTrainConfig(lm=str(tmp_path / "no-lm"), out=str(out)), progress=False)
    assert not (out / "options.json").exists()


def test_an_lm_learning_rate_with_a_frozen_lm_is_a_usage_error(capsys) -> None:
    """--no-finetune --lm-lr 1e-3 trained with the LM frozen, --lm-lr ignored."""
    from countdown_gym import dataclass_cli

    with pytest.raises(SystemExit) as exc:
        dataclass_cli.parse(TextTrainConfig, ["--no-finetune", "--lm-lr", "1e-3"])
    assert exc.value.code == 2 and "--lm-lr has no effect with --no-finetune" in capsys.readouterr().err


def test_a_bare_state_is_written_as_the_first_line_of_its_own_search() -> None:
    for p in (PROBLEM, Problem((20, 26), 46), Problem((3, 5, 8), 16)):
        assert render_state(p.numbers, p.target) == dfs_trace(p).split("\n")[1]


def test_every_node_of_the_search_tree_is_cut_at_the_line_that_creates_it() -> None:
    text = dfs_trace(PROBLEM)
    lines, where = text.split("\n"), node_lines(text)
    tree = trace_tree(PROBLEM)
    assert len(where) == len(tree.states)
    for state, line in zip(tree.states, where, strict=True):
        if len(state) >= 2:  # an 'Add r to the number set' line (or the first line) names the new set and the target
            assert f"number set: {format_list(list(state))}, target: 46" in lines[line]
        else:
            assert f"Evaluate {state[0]} " in lines[line]
    window = prefix_window(lines, where[3], context_lines=1)
    assert window.endswith(lines[where[3]]) and window.count("\n") == 1
    with pytest.raises(ValueError, match="outside the trace"):
        prefix_window(lines, len(lines))


def test_text_table_and_evaluation_sets_line_up_with_v2s() -> None:
    from critics.data import start_states
    from critics.evaluate_text import trace_prefixes

    data = build_text_traces(load_split("longproc-0.5k", "train")[:3], progress=False)
    n = int(np.flatnonzero(data.table.node_sizes == 2)[0])
    state = data.table.node_states[n][:2]
    assert f"{int(state[0])}, {int(state[1])}]" in data.node_text(n) or f"{int(state[1])}, {int(state[0])}]" in data.node_text(n)
    assert data.node_text(n, render=True).startswith("Initial number set: [")
    problems = load_split("longproc-0.5k", "test")[:3]
    ls, texts = trace_prefixes(problems, min_size=2)
    v2_set = trace_states(problems, min_size=2)
    assert ls.states == v2_set.states and len(texts) == len(ls)
    assert all(f"target: {t}" in x for x, t in zip(texts, ls.targets, strict=True))
    starts = start_states(problems, 4, seed=0, distinct=True)
    assert len(starts) == 12 and all(len(s) == 4 and 10 <= t <= 50 for s, t in zip(starts.states, starts.targets, strict=True))
    assert all(len(set(starts.targets[i:i + 4])) == 4 for i in range(0, 12, 4))  # distinct targets per problem
    assert len(random_states(problems, rollouts=1)) > 0


def test_evaluate_text_writes_a_report(tiny_run: Path, tmp_path: Path) -> None:
    from critics.evaluate_text import main

    main(["--checkpoint", str(tiny_run), "--max-problems", "2", "--rollouts", "1", "--start-targets", "2", "--out", str(tmp_path)])
    res = json.loads((tmp_path / "results.json").read_text())
    assert set(res["sets"]["trace"]) == {"text (trace prefix)", "text (state only)", "V2 (shipped)"}
    assert "size_4" in res["sets"]["start (4 numbers, random targets 10-50)"]["V2 (shipped)"]
    assert all(v["per_wall_second"] > 0 and v["per_cpu_second"] > 0 for v in res["throughput_states_per_s"].values())
    assert "| trace | text (trace prefix) |" in (tmp_path / "report.md").read_text()


# --- the reward options ---------------------------------------------------------------------------


def test_contrastive_critic_reward_takes_the_text_critic(tiny_run: Path) -> None:
    import gymnasium as gym

    from countdown_gym.wrappers import ContrastiveCriticReward

    critic = load_text_critic(tiny_run)
    env = ContrastiveCriticReward(gym.make("Countdown-v0", problems=[((6, 2, 5, 3), 8)]), critic=critic, scale=0.5)
    _, info = env.reset(seed=0)
    valid = np.flatnonzero(info["action_mask"])
    _, reward, *_, info = env.step(int(valid[0]))
    t = info["transitions"][-1]
    expected = 0.5 * float(critic.score([t["next_state"]], [8])[0])
    assert info["reward_terms"]["critic"] == pytest.approx(expected, abs=1e-6)
    text_env = ContrastiveCriticReward(gym.make("CountdownText-v0", prompt="compact", problems=[((6, 2, 5, 3), 8)]),
                                       critic=critic, potential=True)
    text_env.reset(seed=0)
    _, _, *_, info = text_env.step("6+2=8 [5,3,8]")
    assert np.isfinite(info["reward_terms"]["critic_shaping"])


def test_grpo_text_critic_reward_variant(tiny_run: Path) -> None:
    pytest.importorskip("trl")
    from baselines.lm.rewards import VARIANTS, parse_reward_spec
    from countdown_gym.integrations.trl import reward_function

    assert parse_reward_spec("text-critic") == VARIANTS["text-critic"] == {"sparse": 1.0, "format": 0.1, "text-critic": 0.5}
    problem = json.dumps(Problem((21, 16, 17, 26), 46).to_dict())
    completions = ["21+16=37 [17,26,37]\n 26-17=9 [37,9]\n  37+9=46 [46]", "21+16=38 [17,26,38]"]
    critic = load_text_critic(tiny_run)
    r = reward_function("text-critic", {"text_critic": critic})(["p", "p"], completions, None, problem=[problem] * 2)
    expected = float(np.mean(critic.score([(17, 26, 37), (37, 9), (46,)], [46, 46, 46])))
    assert r[0] == pytest.approx(expected, abs=1e-6) and r[1] == -1.0  # an invalid move scores -1


@pytest.mark.skipif(not (SHIPPED_TEXT_CHECKPOINT / "config.json").is_file(), reason="no shipped text critic")
def test_one_grpo_step_with_the_text_critic_reward(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from baselines import llm_grpo
    from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, save_pretrained

    torch.manual_seed(0)
    tok = build_tokenizer()
    save_pretrained(build_model(TinyLMConfig(hidden=32, layers=2, heads=2, intermediate=64, max_positions=256), tok), tok,
                    tmp_path / "model")
    opts = llm_grpo.Options(model=str(tmp_path / "model"), test_eval=False, rewards="text-critic", steps=1, prompts_per_step=2, num_generations=2,
                            max_completion_length=24, eval_interval=0, eval_problems=0, output_dir=str(tmp_path / "run"),
                            train_problems=8, quiet=True)
    summary = llm_grpo.train(opts)
    assert summary["last"]["step"] == 1
    logs = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").open()]
    assert any("rewards/text_critic_reward/mean" in x for x in logs)


def test_a_run_records_the_lm_inside_the_repository_by_its_relative_path(tiny_run: Path) -> None:
    assert json.loads((tiny_run / "config.json").read_text())["train_config"]["lm"] == "baselines/checkpoints/countdown-tiny-lm"
