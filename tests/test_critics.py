"""Tests of the numerical critics: models, data labels, training loop, checkpoints, metrics."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import torch
from no_hang import no_hang

from countdown_gym import load_split, reachable
from critics import CheckpointError, Critic, load_critic
from critics.data import build_table, random_states, trace_states, trace_tree
from critics.losses import info_nce, ranking_infonce
from critics.metrics import auroc, best_threshold_accuracy, expected_calibration_error, fit_logistic
from critics.models import ModelConfig, build_model, count_parameters, pack_sets, save_checkpoint
from critics.train import TrainConfig, parse_args, train

TINY = dict(value_dim=8, fourier=4, hidden=32, depth=2, goal_hidden=32, out_dim=16, pair_dim=8)


def _ints(row, size):
    return tuple(int(x) for x in row[:size])


@pytest.fixture(scope="module")
def table():
    return build_table(load_split("longproc-0.5k", "train")[:40])


# ---- models -------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair_dim", [0, 8])
def test_v2_shapes_and_normalisation(pair_dim):
    cfg = ModelConfig(**{**TINY, "pair_dim": pair_dim})
    model = build_model(cfg)
    values, mask = pack_sets([(3, 5), (1, 2, 3, 4), (7,)], cfg.max_numbers)
    assert values.tolist()[0] == [3, 5, 0, 0] and mask.tolist()[2] == [1, 0, 0, 0]
    s = model.embed_states(torch.from_numpy(values), torch.from_numpy(mask))
    g = model.embed_goals(torch.tensor([10.0, 46.0, 2000.0], dtype=torch.float64))
    assert s.shape == (3, 16) and g.shape == (3, 16)
    assert torch.allclose(s.norm(dim=1), torch.ones(3), atol=1e-5)
    assert torch.allclose(g.norm(dim=1), torch.ones(3), atol=1e-5)


def test_state_order_does_not_matter():
    critic = Critic(build_model(ModelConfig(**TINY)), {})
    a = critic.score([(3, 17, 26), (26, 3, 17)], [46, 46])
    assert a[0] == pytest.approx(a[1])


def test_v1_shapes_and_score_needs_initial():
    cfg = ModelConfig(**{**TINY, "version": "v1"})
    critic = Critic(build_model(cfg), {})
    with pytest.raises(ValueError, match="initial"):
        critic.score([(3, 5)], [8])
    out = critic.score([(3, 5)], [8], initial=[(1, 2, 5, 3)])
    assert out.shape == (1,) and -1 <= out[0] <= 1


def test_full_size_model_is_under_one_million_parameters():
    assert count_parameters(build_model(TrainConfig().model_config())) < 1_000_000


def test_pack_sets_rejects_bad_states():
    with pytest.raises(ValueError, match="at most 4"):
        pack_sets([(1, 2, 3, 4, 5)], 4)
    with pytest.raises(ValueError, match="empty"):
        pack_sets([()], 4)
    with pytest.raises(TypeError):
        pack_sets([("a", 2)], 4)
    with pytest.raises(TypeError, match="state 0 must be a sequence"):  # was read as its keys: (3, 4), not (3, 3, 4)
        pack_sets([Counter({3: 2, 4: 1})], 4)


def test_losses_are_minimal_for_matching_embeddings():
    e = torch.nn.functional.normalize(torch.eye(4), dim=1)
    low = info_nce(e, e, torch.arange(4), 0.1)
    high = info_nce(e, e, torch.tensor([1, 2, 3, 0]), 0.1)
    assert low < 0.01 < high
    neg = e[[1, 2, 3, 0]].unsqueeze(1)
    assert ranking_infonce(e, e, neg, 0.1) < 0.01


def test_score_validates_input():
    critic = Critic(build_model(ModelConfig(**TINY)), {})
    with pytest.raises(ValueError, match="2 states but 1 targets"):
        critic.score([(1, 2), (3, 4)], [5])
    with pytest.raises(TypeError, match="target 0 must be an int"):
        critic.score([(1, 2)], [2.5])
    out = critic.score([(1, 2)] * 5, [3] * 5, batch_size=2)
    assert out.shape == (5,) and out.dtype == np.float32 and np.all(np.abs(out) <= 1)



@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_score_refuses_a_batch_size_below_one(batch_size):
    critic = Critic(build_model(ModelConfig(**TINY)), {})
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        critic.score([(1, 2)] * 3, [3] * 3, batch_size=batch_size)  # -1 returned uninitialised memory


def test_score_of_huge_numbers_is_finite():
    """Rules without a value limit (classic, tinyzero) reach numbers past float32 (NaN scores) and float64
    (OverflowError); the critic scores them like its largest number, 1e30, and normal states as before."""
    critic = load_critic()
    states = [(10**400, 3), (10**100, 2, 5), (Fraction(10**400, 3), 1), (20, 26)]
    out = critic.score(states, [46, 46, 10**400, 46])
    assert np.isfinite(out).all() and np.all(np.abs(out) <= 1)
    assert out[3] == pytest.approx(critic.score([(20, 26)], [46])[0], abs=1e-6)
    assert critic.score([(10**400, 3)], [46])[0] == critic.score([(10**30, 3)], [46])[0]

# ---- data ---------------------------------------------------------------------------------------


def test_trace_labels_match_the_oracle():
    for p in load_split("longproc-0.5k", "train")[:15]:
        tree = trace_tree(p)
        for s, on_path, reached in zip(tree.states, tree.on_path, tree.reached, strict=True):
            assert reachable(s, p.target) == on_path
            for v in list(reached)[:5]:
                assert reachable(s, v)


def test_samples_carry_true_labels(table):
    rng = np.random.default_rng(0)
    b = table.sample_v2(128, rng)
    for n, g in zip(b["state"], b["goal"], strict=True):
        assert reachable(_ints(table.node_states[n], table.node_sizes[n]), int(g))
    for i in np.flatnonzero(b["dead_valid"]):
        t = int(table.target[b["trace"][i]])
        for d in b["dead"][i]:
            assert not reachable(_ints(table.node_states[d], table.node_sizes[d]), t)
    v1 = table.sample_v1(16, rng)
    assert (table.node_trace[v1["state"]] == v1["trace"]).all()
    assert (table.node_trace[v1["goal_node"]] == v1["trace"]).all()


def test_a_negative_seed_is_a_usage_error(capsys):
    """--seed -1 was numpy's "expected non-negative integer" after the run directory was prepared."""
    with pytest.raises(SystemExit):
        parse_args(["--seed", "-1"])
    assert "--seed must be >= 0, got -1" in capsys.readouterr().err


def test_test_split_is_refused_for_training():
    with pytest.raises(ValueError, match="test split"):
        build_table(load_split("longproc-0.5k", "test")[:1])


def test_rational_rules_are_refused_for_training():
    # int64 table rows used to truncate p/q states and hindsight goals (87/47 -> 1) without a word
    with pytest.raises(ValueError, match="integer states"):
        build_table(load_split("tinyzero", "train")[:5], forbidden=set())


def test_table_save_load_round_trip(table, tmp_path):
    table.save(tmp_path / "t.npz")
    from critics.data import TraceTable

    again = TraceTable.load(tmp_path / "t.npz")
    assert again.stats() == table.stats()
    assert (again.goal_vals == table.goal_vals).all()


def test_eval_state_sets_are_labelled_by_the_oracle():
    probs = load_split("longproc-0.5k", "validation")[:3]
    for ls in (trace_states(probs), random_states(probs, rollouts=2)):
        assert len(ls) > 0
        for s, t, y in zip(ls.states, ls.targets, ls.labels, strict=True):
            assert reachable(s, t) == y


# ---- training, checkpoints ----------------------------------------------------------------------


def _cfg(tmp_path, **kw):
    base = dict(
        max_train_problems=30, extra_problems=0, reach_extra=300, cache_dir="", steps=60, batch_size=32, lr=3e-3, warmup=5,
        out=str(tmp_path / "run"), checkpoint_every=20, log_every=10, calibrate=False,
    )
    model = {**TINY, "temperature": 0.2}
    for name in [k for k in kw if k in ModelConfig.__dataclass_fields__]:  # the model's fields: TrainConfig.model
        model[name] = kw.pop(name)
    base.update(kw)
    return TrainConfig(model=ModelConfig(**model), **base)


def test_loss_decreases_on_a_tiny_run(tmp_path):
    out = train(_cfg(tmp_path, steps=150), progress=False)
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert log[-1]["loss"] < 0.8 * log[0]["loss"]
    assert (out / "loss.png").stat().st_size > 0 and (out / "similarity.png").stat().st_size > 0
    critic = load_critic(out)
    assert critic.version == "v2" and critic.score([(1, 2)], [3]).shape == (1,)


def test_v1_trains(tmp_path):
    out = train(_cfg(tmp_path, version="v1", steps=30), progress=False)
    assert load_critic(out).version == "v1"


def test_resume_reproduces_an_uninterrupted_run(tmp_path):
    straight = train(_cfg(tmp_path / "a", steps=40), progress=False)
    train(_cfg(tmp_path / "b", steps=40, stop_after=20), progress=False)
    resumed = train(_cfg(tmp_path / "b", steps=40, resume=True), progress=False)
    a, b = load_critic(straight).model.state_dict(), load_critic(resumed).model.state_dict()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k


def test_a_resumed_run_logs_and_times_as_if_it_had_never_stopped(tmp_path):
    straight = train(_cfg(tmp_path / "a", steps=40), progress=False)
    train(_cfg(tmp_path / "b", steps=40, stop_after=25), progress=False)  # stopped between two log rows (SIGTERM)
    with (tmp_path / "b" / "run" / "log.jsonl").open("a") as f:
        f.write('{"step": 30, "loss": 0.')  # a kill during an append leaves a torn last line
    resumed = train(_cfg(tmp_path / "b", steps=40, resume=True), progress=False)
    rows = [[{k: v for k, v in json.loads(x).items() if k != "seconds"} for x in (out / "log.jsonl").read_text().splitlines()]
            for out in (straight, resumed)]
    assert rows[0] == rows[1] and [r["step"] for r in rows[1]] == [10, 20, 30, 40]  # row 30 averages steps 21-30
    meta = json.loads((resumed / "config.json").read_text())
    assert meta["train_seconds"] <= meta["total_seconds"]
    (resumed / "log.jsonl").write_text('{"step": 10}\n{"step": 20, "lo\n{"step": 30}\n')  # not the last line: named
    from countdown_gym.runkit.runs import MetricsLog

    with pytest.raises(SystemExit, match=r"log.jsonl: line 2 is not JSON .*, not a row this run wrote; fix or remove"):
        MetricsLog(resumed / "log.jsonl", resume_step=30)


def test_resume_refuses_a_run_it_cannot_continue_exactly(tmp_path):
    out = train(_cfg(tmp_path, steps=40, stop_after=20), progress=False)
    before = (out / "model.safetensors").read_bytes()
    with pytest.raises(SystemExit, match=r"--hidden 32 \(now 48\)"):  # was a RuntimeError traceback
        train(_cfg(tmp_path, steps=40, hidden=48, resume=True), progress=False)
    with pytest.raises(SystemExit, match=r"--positives reachable \(now all\)"):  # was silently mixed
        train(_cfg(tmp_path, steps=40, positives="all", resume=True), progress=False)
    with pytest.raises(SystemExit, match="already at step 20, past --stop-after 10"):  # was re-saved as step 10
        train(_cfg(tmp_path, steps=40, stop_after=10, resume=True), progress=False)
    assert (out / "model.safetensors").read_bytes() == before
    st = torch.load(out / "train_state.pt", weights_only=False)
    torch.save({**st, "step": 0}, out / "train_state.pt")  # killed between the weights and the optimizer state
    with pytest.raises(SystemExit, match="from step 20 but train_state.pt from step 0"):
        train(_cfg(tmp_path, steps=40, resume=True), progress=False)
    (out / "train_state.pt").write_bytes(b"truncated")
    with pytest.raises(SystemExit, match="train_state.pt is not readable"):
        train(_cfg(tmp_path, steps=40, resume=True), progress=False)


def test_resume_names_a_broken_options_file_or_log_and_never_silently_restarts(tmp_path, capsys):
    out = train(_cfg(tmp_path, steps=40, stop_after=20), progress=False)
    good = (out / "options.json").read_bytes()
    for text, needle in ((b"", "is empty"), (b'{"steps": 4', "is not JSON"), (b"\xff\xfe", "is not UTF-8"),
                         (b"[]", "holds a JSON list"), (b"7", "holds a JSON int"), (b"{}", "holds none of")):
        (out / "options.json").write_bytes(text)
        with pytest.raises(SystemExit, match="options.json " + needle) as e:
            train(_cfg(tmp_path, steps=40, resume=True), progress=False)
        assert "trained with" not in str(e.value)  # [] once claimed "was trained with --steps 6000"
    (out / "options.json").write_bytes(good)
    (out / "log.jsonl").unlink()
    (out / "log.jsonl").mkdir()  # was an IsADirectoryError traceback
    with pytest.raises(SystemExit, match="log.jsonl is not a file"):
        train(_cfg(tmp_path, steps=40, resume=True), progress=False)
    (out / "log.jsonl").rmdir()
    (out / "train_state.pt").unlink()
    shutil.rmtree(out / "previous", ignore_errors=True)
    train(_cfg(tmp_path, steps=40, resume=True), progress=False)  # was a silent restart
    assert "has model.safetensors but no train_state.pt" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["steps_done"] == 40


def test_cli_reports_a_preset_the_critic_cannot_hold(tmp_path):
    from critics.train import main

    argv = ["--preset", "hard", "--max-train-problems", "1", "--extra-problems", "0", "--cache-dir", "", "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match="error: .* numbers; the critic takes at most 4"):
        main(argv)


def test_cli_stop_after_then_resume(tmp_path, capsys):
    from critics.train import main

    argv = ["--max-train-problems", "30", "--extra-problems", "0", "--cache-dir", "", "--steps", "4", "--batch-size", "8",
            "--hidden", "32", "--goal-hidden", "32", "--no-calibrate", "--out", str(tmp_path)]
    main([*argv, "--stop-after", "2"])  # was a KeyError after the checkpoint was written
    assert "done: 2 steps" in capsys.readouterr().out
    main([*argv, "--resume"])
    assert "done: 4 steps" in capsys.readouterr().out


def test_cli_ctrl_c_saves_a_resumable_checkpoint(tmp_path, capsys, monkeypatch):
    import critics.train as train_mod
    from countdown_gym.runkit.runs import StopRequest

    class CtrlCAtOnce(StopRequest):
        def __enter__(self):
            super().__enter__()
            self.requested = True  # as if Ctrl-C came during the first step
            return self

    argv = ["--max-train-problems", "30", "--extra-problems", "0", "--cache-dir", "", "--steps", "4", "--batch-size", "8",
            "--hidden", "32", "--goal-hidden", "32", "--no-calibrate", "--out", str(tmp_path)]
    monkeypatch.setattr(train_mod, "StopRequest", CtrlCAtOnce)
    with pytest.raises(SystemExit) as e:
        train_mod.main(argv)
    assert e.value.code == 130 and "stopped by Ctrl-C at step 1" in capsys.readouterr().out
    monkeypatch.setattr(train_mod, "StopRequest", StopRequest)
    train_mod.main([*argv, "--resume"])
    assert "done: 4 steps" in capsys.readouterr().out


def test_resume_without_a_run_fails_clearly(tmp_path):
    with pytest.raises(SystemExit, match="train_state.pt not found"):
        train(_cfg(tmp_path, resume=True), progress=False)


def test_a_run_stopped_before_its_first_checkpoint_resumes_afresh(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "options.json").write_text("{}\n")  # killed while building its data: no checkpoint yet
    with pytest.raises(SystemExit, match="holds a run already: --resume continues it"):
        train(_cfg(tmp_path, steps=20), progress=False)
    train(_cfg(tmp_path, steps=20, resume=True), progress=False)
    assert "no checkpoint in" in capsys.readouterr().out and load_critic(out).version == "v2"
    assert json.loads((out / "options.json").read_text())["steps"] == 20


def test_cli_parses_every_field():
    cfg = parse_args(["--steps", "7", "--positives", "all", "--no-calibrate", "--temperature", "0.3"])
    assert cfg.steps == 7 and cfg.positives == "all" and cfg.calibrate is False and cfg.model.temperature == 0.3
    with pytest.raises(SystemExit):
        parse_args(["--positives", "nonsense"])


def test_load_critic_errors_name_the_file(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_critic(tmp_path / "nope")
    for path in (3, ["a"], ""):  # a TypeError naming no argument; "" read the current folder
        with pytest.raises(CheckpointError, match="a critic checkpoint is a directory's path, got"):
            load_critic(path)  # type: ignore[arg-type]
    d = tmp_path / "ck"
    save_checkpoint(build_model(ModelConfig(**TINY)), ModelConfig(**TINY), d)
    load_critic(d)
    good = (d / "config.json").read_text()
    for text in ("{not json", "[" * 100_000, good.replace("{", '{"format": "x", ', 1)):  # the deep one was a
        (d / "config.json").write_text(text)  # RecursionError inside json; a key twice was read last-wins
        with pytest.raises(CheckpointError, match="config.json is not valid JSON"):
            load_critic(d)
    (d / "config.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(CheckpointError, match="not a countdown-gym critic"):
        load_critic(d)
    save_checkpoint(build_model(ModelConfig(**TINY)), ModelConfig(**{**TINY, "hidden": 48}), d)
    with pytest.raises(CheckpointError, match="does not fit the config") as fit:
        load_critic(d)
    assert "\n" not in str(fit.value) and "size mismatch" in str(fit.value)  # one line (torch's has a tab line)
    model = build_model(ModelConfig(**TINY))
    save_checkpoint(model, ModelConfig(**TINY), d, extra={"calibration": {"a": "ten"}})
    with pytest.raises(CheckpointError, match="'calibration' must be"):
        load_critic(d)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    save_checkpoint(model, ModelConfig(**TINY), d)
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        load_critic(d)
    (d / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_critic(d)
    (d / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model.safetensors is missing"):
        load_critic(d)



@pytest.mark.parametrize(("edit", "message"), [
    ({"model": {**TINY, "vocab": 10**12}}, "config.json: vocab 1000000000000 is larger than any dimension"),  # was torch's
    ({"model": {**TINY, "temperature": float("inf")}}, "config.json is not valid JSON: Infinity is not JSON"),  # accepted
    ({"model": {**TINY, "temperature": -1.0}}, "temperature must be a finite number > 0"),
    ({"calibration": {"a": True, "b": 0.0}}, "'calibration' must be"),  # a bool was read as 1
])
def test_a_checkpoint_with_a_wrong_field_is_a_checkpoint_error(tmp_path, edit, message):
    d = save_checkpoint(build_model(ModelConfig(**TINY)), ModelConfig(**TINY), tmp_path / "ck")
    meta = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**meta, **edit}))
    with pytest.raises(CheckpointError, match=message):
        load_critic(d)



@pytest.mark.parametrize(("edit", "message"), [
    ({"vocab": 10**8}, "vocab 100000000 is larger than any dimension"),
    ({"hidden": 10**6}, "hidden 1000000 is larger than any dimension"),
    ({"max_numbers": 2000}, "max_numbers must be at most 64"),  # under the 2001-row value table: SetEncoder listed
    ({"max_numbers": 1500, "version": "v1"}, "max_numbers must be at most 64"),  # ~max_numbers**3 / 2 pair slots
])
def test_a_config_edited_to_a_huge_size_is_refused_before_its_model_is_built(tmp_path, monkeypatch, edit, message):
    """It was built (gigabytes allocated and filled) before the weights were found not to fit."""
    d = save_checkpoint(build_model(ModelConfig(**TINY)), ModelConfig(**TINY), tmp_path / "ck")
    meta = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**meta, "model": {**TINY, **edit}}))

    def built(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(torch.nn.Module, "__init__", built)
    with pytest.raises(CheckpointError, match=f"config.json: .*{message}"):
        load_critic(d)

# ---- the shipped checkpoint ---------------------------------------------------------------------


def test_shipped_checkpoint_metadata():
    """The default critic is v5: v4 plus the grandchild pool, warm-started from v4 under today's longproc rules
    (a 0 intermediate allowed; docs/critics.md); v2, v3 and v4 stay for the results that name them."""
    from countdown_gym import Rules
    from critics import SHIPPED_CHECKPOINT, V2_CHECKPOINT, V3_CHECKPOINT, V4_CHECKPOINT

    assert SHIPPED_CHECKPOINT.name == "v5"
    meta = json.loads((SHIPPED_CHECKPOINT / "config.json").read_text())
    assert meta["rules"] == Rules.longproc().to_dict() and meta["rules"]["sign"] == "nonnegative"
    assert meta["parameters"] == 755_361 and meta["step"] == meta["steps_done"] == 10_000
    assert meta["model"]["child_dim"] == 128 and meta["model"]["grandchild_dim"] == 64 and meta["model"]["hidden"] == 256
    assert meta["train_config"]["init_from"] == "critics/checkpoints/v4" and meta["train_config"]["reach_extra"] == 150_000
    assert meta["data"]["reach_size_4"] == 157_787 and meta["data"]["reach_states"] == 1_101_917
    assert meta["command"].startswith("python -m critics.train --objective reach --child-dim 128 --grandchild-dim 64 "
                                      "--init-from critics/checkpoints/v4")
    assert meta["calibration"]["a"] > 0 and "validation" in meta["calibration"]["fitted_on"]
    v4 = json.loads((V4_CHECKPOINT / "config.json").read_text())
    assert v4["parameters"] == 693_089 and v4["train_config"]["init_from"] == "runs/critic-v4b"
    for old, params in ((V4_CHECKPOINT, 693_089), (V3_CHECKPOINT, 554_785), (V2_CHECKPOINT, 465_632)):
        assert json.loads((old / "config.json").read_text())["parameters"] == params
        assert load_critic(old).score([(20, 26)], [46])[0] > 0


def test_shipped_checkpoint_separates_obvious_cases():
    critic = load_critic()
    assert critic.version == "v2"
    assert count_parameters(critic.model) < 1_000_000
    pairs = [  # (reachable state, unreachable state, target)
        ((20, 26), (54, 26), 46),
        ((44, 31), (94, 31), 13),
        ((46,), (80,), 46),
        ((6, 4), (7, 5), 24),
        ((2, 10, 3), (1, 1, 1), 36),
        ((25, 2, 1), (1, 1, 2), 50),
    ]
    for ok, bad_state, t in pairs:
        assert reachable(ok, t) and not reachable(bad_state, t)
    good = critic.score([p[0] for p in pairs], [p[2] for p in pairs])
    bad = critic.score([p[1] for p in pairs], [p[2] for p in pairs])
    assert (good > bad).all(), (good, bad)
    assert np.all(np.abs(good) <= 1) and np.all(np.abs(bad) <= 1)
    p = critic.probability([(20, 26), (80,)], [46, 46])
    assert 0 <= p[1] < 0.5 < p[0] <= 1


# ---- metrics ------------------------------------------------------------------------------------


def test_metrics():
    y = np.array([0, 0, 1, 1], dtype=bool)
    assert auroc(np.array([0.1, 0.2, 0.3, 0.4]), y) == 1.0
    assert auroc(np.array([0.4, 0.3, 0.2, 0.1]), y) == 0.0
    assert auroc(np.array([0.5, 0.5, 0.5, 0.5]), y) == 0.5
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([True, True])))
    acc, thr = best_threshold_accuracy(np.array([0.1, 0.2, 0.3, 0.4]), y)
    assert acc == 1.0 and 0.2 < thr <= 0.3
    rng = np.random.default_rng(0)
    x = rng.normal(size=4000)
    lab = rng.random(4000) < 1 / (1 + np.exp(-(3 * x - 1)))
    a, b = fit_logistic(x, lab)
    assert a == pytest.approx(3, abs=0.4) and b == pytest.approx(-1, abs=0.3)
    ece, table = expected_calibration_error(1 / (1 + np.exp(-(a * x + b))), lab)
    assert ece < 0.05 and sum(r["n"] for r in table) == 4000



def test_metrics_match_a_brute_force_reference_on_ties_and_huge_scores():
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        s = rng.integers(0, 3, n) * 10.0 ** float(rng.choice([0, 12]))  # ties; 1e12 + 1e-6 == 1e12 in float64
        y = rng.random(n) < 0.5
        pairs = [(p > q) + 0.5 * (p == q) for p in s[y] for q in s[~y]]
        assert auroc(s, y) == pytest.approx(np.mean(pairs)) if pairs else np.isnan(auroc(s, y))
        acc, thr = best_threshold_accuracy(s, y)
        assert acc == max(np.mean((s >= t) == y) for t in [*s, np.inf]) == np.mean((s >= thr) == y)


@pytest.mark.parametrize("call", [
    lambda: auroc(np.array([np.nan, 0.2, 0.3]), np.array([1, 0, 1])),  # was 1.0
    lambda: best_threshold_accuracy(np.array([np.nan, 0.2, 0.3]), np.array([1, 0, 1])),
    lambda: fit_logistic(np.array([np.nan, 0.2]), np.array([0, 1])),  # was (nan, nan)
    lambda: expected_calibration_error(np.array([np.nan, 0.2]), np.array([0, 1])),
    lambda: auroc(np.array([0.1, 0.2]), np.array([1, 0, 1])),  # was numpy's IndexError
    lambda: best_threshold_accuracy(np.array([0.1, 0.2]), np.array([1, 0, 1])),  # was 0.5
    lambda: auroc(np.array([0.1, 0.2, 0.3]), np.array([2, 0, 1])),  # 2 was read as True
    lambda: expected_calibration_error(np.array([1.5, 0.2]), np.array([0, 1])),  # was binned as 1.0
])
def test_metrics_refuse_nan_scores_mismatched_lengths_and_non_binary_labels(call):
    with pytest.raises(ValueError, match="scores|probabilities|labels"):
        call()


def test_metrics_of_no_states_are_nan():
    acc, thr = best_threshold_accuracy(np.array([]), np.array([], dtype=bool))  # was an IndexError
    assert np.isnan(acc) and np.isnan(thr)

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"preset": "nosuch"}, "--preset must be one of"),
    ({"lr": -1.0}, "--lr must be >= 0"),
    ({"max_train_problems": -3}, "--max-train-problems must be >= 0"),
    ({"reach_weight": -1.0, "objective": "both"}, "--reach-weight must be >= 0"),  # was accepted: it ascended the reach loss
    ({"size_small": -0.1}, "--size-small must be >= 0"),  # was accepted: numpy's error mid-run, or nothing
])
def test_train_config_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("objective", ["trace", "reach"])
def test_train_builds_its_tables_for_the_model_max_numbers(tmp_path, objective):
    """The tables were built 4 wide whatever --max-numbers said: 3 or 5 ended in a shape error deep in torch."""
    with pytest.raises(ValueError, match="has 4 numbers; the critic takes"):
        train(_cfg(tmp_path / "a", max_numbers=3, objective=objective, steps=1, max_train_problems=3), progress=False)
    out = train(_cfg(tmp_path / "b", max_numbers=5, objective=objective, steps=2, max_train_problems=3), progress=False)
    assert load_critic(out).score([(1, 2, 3, 4, 5)], [15]).shape == (1,)


def test_model_config_names_the_lowest_allowed_size():
    from critics.models import ModelConfig

    with pytest.raises(ValueError, match=r"pair_dim must be an int >= 0, got -1"):  # said "a positive int", 0 allowed
        ModelConfig(pair_dim=-1)


def test_resume_without_a_run_fails_before_the_data(tmp_path, monkeypatch):
    import critics.train as critics_train

    monkeypatch.setattr(critics_train, "cached_table", lambda *a, **k: pytest.fail("built the data first"))
    with pytest.raises(SystemExit, match="--resume: .* not found"):
        train(TrainConfig(out=str(tmp_path), resume=True), progress=False)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_problems": 0}, "--max-problems must be >= 1"),
    ({"rollouts": 0}, "--rollouts must be >= 1"),
    ({"val_problems": 0}, "--val-problems must be >= 1"),
])
def test_evaluate_rejects_bad_sizes(tmp_path, kwargs, message):
    from critics.evaluate import evaluate

    with pytest.raises(ValueError, match=message):
        evaluate(out=tmp_path, **kwargs)


def test_a_checkpoint_mixed_by_an_interrupted_save_is_refused(tmp_path):
    import shutil

    from critics.models import load_checkpoint

    cfg = ModelConfig(**TINY)
    a, b = tmp_path / "a", tmp_path / "b"
    save_checkpoint(build_model(cfg), cfg, a, {"step": 1})
    save_checkpoint(build_model(cfg), cfg, b, {"step": 2})
    assert load_checkpoint(a)[1]["step"] == 1
    assert not list(a.glob("*.tmp"))  # written under temporary names, moved into place
    shutil.copy(b / "model.safetensors", a / "model.safetensors")  # the weights of the next save, the config of this one
    with pytest.raises(CheckpointError, match="from step 2 but .*config.json from step 1"):
        load_checkpoint(a)
    save_checkpoint(build_model(cfg), cfg, a)  # a config.json without a step beside weights that carry one
    shutil.copy(b / "model.safetensors", a / "model.safetensors")
    with pytest.raises(CheckpointError, match="from step 2 but .*config.json from step None"):
        load_checkpoint(a)


def test_an_interrupted_save_resumes_from_the_checkpoint_before(tmp_path, capsys):
    straight = train(_cfg(tmp_path / "a", steps=40, checkpoint_every=10), progress=False)
    out = train(_cfg(tmp_path / "b", steps=40, stop_after=30, checkpoint_every=10), progress=False)
    assert torch.load(out / "previous" / "train_state.pt", weights_only=False)["step"] == 20
    st = torch.load(out / "train_state.pt", weights_only=False)
    torch.save({**st, "step": 31}, out / "train_state.pt")  # a save torn between its files
    resumed = train(_cfg(tmp_path / "b", steps=40, checkpoint_every=10, resume=True), progress=False)
    assert "previous at step 20" in capsys.readouterr().out
    a, b = load_critic(straight).model.state_dict(), load_critic(resumed).model.state_dict()
    for k in a:  # continuing from step 20 repeats the run exactly
        assert torch.allclose(a[k], b[k], atol=1e-6), k


def test_a_fifo_or_folder_in_the_checkpoint_is_never_opened(tmp_path, capsys):
    out = train(_cfg(tmp_path, steps=40, stop_after=20, checkpoint_every=10), progress=False)  # previous/: step 10
    kept = tmp_path / "kept"
    shutil.copytree(out, kept)

    def fresh_copy():
        shutil.rmtree(out)
        shutil.copytree(kept, out)

    (out / "train_state.pt").unlink()
    os.mkfifo(out / "train_state.pt")  # torch.load once blocked on it for ever
    with no_hang(120):
        train(_cfg(tmp_path, steps=40, resume=True), progress=False)
    assert "train_state.pt is a FIFO, not a regular file); resumed from" in capsys.readouterr().out  # previous/
    assert (out / "train_state.pt").is_file() and json.loads((out / "config.json").read_text())["steps_done"] == 40
    for name, make in (("model.safetensors", os.mkfifo), ("config.json", os.mkfifo),
                       ("train_state.pt", lambda p: p.symlink_to("/dev/null"))):
        fresh_copy()
        shutil.rmtree(out / "previous")  # nothing to fall back to: one clear error
        (out / name).unlink()
        make(out / name)
        with no_hang(), pytest.raises(SystemExit, match=f"{name} is a (FIFO|special file), not a regular file"):
            train(_cfg(tmp_path, steps=40, resume=True), progress=False)
    fresh_copy()
    (out / "train_state.pt").unlink()
    (out / "train_state.pt").mkdir()  # the next save goes there: refused before any work
    with pytest.raises(SystemExit, match="train_state.pt is a folder, where the run saves its checkpoint"):
        train(_cfg(tmp_path, steps=40, resume=True), progress=False)
    fresh_copy()
    (out / "options.json").unlink()
    os.mkfifo(out / "options.json")
    with no_hang(), pytest.raises(SystemExit, match="options.json is a FIFO, not the run's options"):
        train(_cfg(tmp_path, steps=40, resume=True), progress=False)
    load_critic(kept)
    os.mkfifo(tmp_path / "pipe")
    shutil.move(tmp_path / "pipe", kept / "model.safetensors")
    with no_hang(), pytest.raises(CheckpointError, match="model.safetensors is a FIFO, not a regular file"):
        load_critic(kept)


# ---- states of every size (reach table) and the per-size evaluation ------------------------------


def test_reach_table_labels_every_goal_exactly():
    from critics.reach_data import build_reach_table

    starts = [p.numbers for p in load_split("longproc-0.5k", "train")[:3]]
    tab = build_reach_table(starts, singles=60)
    assert set(tab.sizes.tolist()) == {1, 2, 3, 4}
    assert len({tuple(r) for r in tab.states}) == len(tab.states)  # distinct states
    rng = np.random.default_rng(0)
    for i in rng.choice(len(tab.states), 60, replace=False):
        state = _ints(tab.states[i], tab.sizes[i])
        for g, y in zip(tab.goals, tab.labels[i], strict=True):
            assert reachable(state, int(g)) == y
    idx = tab.sample(400, rng, (0.0, 0.0, 1.0, 1.0))
    assert set(tab.sizes[idx].tolist()) == {3, 4}


def test_reach_table_refuses_held_out_number_sets():
    from critics.reach_data import build_reach_table, start_sets

    test_set = tuple(sorted(load_split("longproc-0.5k", "test")[0].numbers))
    with pytest.raises(ValueError, match="held-out split"):
        build_reach_table([test_set])
    held = {tuple(sorted(p.numbers)) for s in ("validation", "test") for p in load_split("longproc-0.5k", s)}
    starts = start_sets(extra=50, max_train=20)
    assert len(starts) == len(set(starts)) and not held & set(starts)


def test_reach_objective_trains_a_child_pool_critic(tmp_path):
    out = train(_cfg(tmp_path, objective="reach", child_dim=8, steps=80), progress=False)
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert log[-1]["loss"] < log[0]["loss"]
    critic = load_critic(out)
    assert critic.config.child_dim == 8 and critic.config.logit_bias
    assert np.ptp(critic.score([(4, 3, 2, 1), (1, 2, 3, 4)], [10, 10])) < 1e-6  # order-free with children
    meta = json.loads((out / "config.json").read_text())
    assert meta["data"]["reach_size_4"] > 0
    from countdown_gym import Rules

    assert meta["rules"] == Rules.longproc().to_dict()  # the rules its labels were made under
    with pytest.raises(ValueError, match="V1 takes --objective trace"):
        TrainConfig(model=ModelConfig(version="v1"), objective="reach")


def test_start_states_are_labelled_by_the_oracle():
    from critics.data import start_states

    probs = load_split("longproc-0.5k", "validation")[:5]
    ls = start_states(probs, targets=6, seed=1)
    assert len(ls) == 30 and all(len(s) == 4 and 10 <= t <= 50 for s, t in zip(ls.states, ls.targets, strict=True))
    assert [reachable(s, t) for s, t in zip(ls.states, ls.targets, strict=True)] == ls.labels.tolist()


def test_any_scorer_is_evaluated_per_size_with_its_first_move(tmp_path):
    from critics.evaluate import evaluate, first_move, set_metrics, state_sets

    def oracle(states, targets):
        return np.array([float(reachable(s, t)) for s, t in zip(states, targets, strict=True)])

    def contrary(states, targets):
        return -oracle(states, targets)

    probs = load_split("longproc-0.5k", "test")[:8]
    sets = state_sets(probs, rollouts=2, start_targets=3)
    res = set_metrics(oracle, sets)
    assert res["trace"]["size_3"]["auroc"] == 1.0 and res["start"]["size_4"]["auroc"] == 1.0
    assert set(res["start"]) == {"all", "size_4"} and {"size_2", "size_3", "sizes_2_3"} <= set(res["random"])
    assert set_metrics(contrary, sets)["trace"]["size_3"]["auroc"] == 0.0
    fm = first_move(oracle, probs)
    assert fm["critic_best_move_keeps_reachable"] == 1.0 == fm["best_possible"]
    assert 0 < fm["random_move_keeps_reachable"] < 1
    assert first_move(contrary, probs)["critic_best_move_keeps_reachable"] < 1.0
    res = evaluate(score_fn=oracle, name="oracle", max_problems=4, val_problems=2, rollouts=1, out=tmp_path, progress=False)
    assert res["checkpoint"] == "oracle" and "parity_probe_loo_acc" not in res
    assert "| start | 4 numbers |" in (tmp_path / "report.md").read_text()
    with pytest.raises(ValueError, match="shape"):
        set_metrics(lambda s, t: np.zeros(3), sets)



def test_an_interrupted_evaluation_keeps_the_old_report_and_plots(tmp_path, monkeypatch):
    """critics.evaluate / evaluate_text wrote report.md, results.json and the PNGs in place: Ctrl-C (or a full disk)
    mid-write left a torn file in --out; now each is whole or the old one."""
    from pathlib import Path

    from matplotlib.figure import Figure

    from critics.evaluate import evaluate

    def oracle(states, targets):
        return np.array([float(reachable(s, t)) for s, t in zip(states, targets, strict=True)])

    def run():
        evaluate(score_fn=oracle, max_problems=4, val_problems=2, rollouts=1, out=tmp_path, progress=False)

    def torn(path):
        Path(path).write_bytes(b"half")
        raise KeyboardInterrupt

    run()
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert {"report.md", "results.json", "reliability_trace.png"} <= set(old)
    for cls, name, fn in ((Figure, "savefig", lambda self, fname, **_: torn(fname)),
                          (Path, "write_text", lambda self, *_, **__: torn(self))):
        with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):
            m.setattr(cls, name, fn)
            run()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == old


def test_data_cache_is_keyed_by_the_rules_it_was_built_under(tmp_path):
    """A table cached under one rules value is not read back under another (a 0 intermediate changes labels)."""
    from countdown_gym import Rules
    from critics.data import cached_npz

    built: list[str] = []

    class Table:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def save(self, path) -> None:
            path.write_text(self.tag)

    def load(path):
        return Table(path.read_text())

    def build(tag):
        def make():
            built.append(tag)
            return Table(tag)
        return make

    key = ["reach", "longproc-0.5k", 0, 0]
    assert cached_npz(tmp_path, "reach", key, Rules.longproc(), load, build("nonneg")).tag == "nonneg"
    assert cached_npz(tmp_path, "reach", key, Rules.longproc(), load, build("again")).tag == "nonneg"  # read back
    assert cached_npz(tmp_path, "reach", key, Rules.longproc_positive(), load, build("positive")).tag == "positive"
    assert built == ["nonneg", "positive"] and len(list(tmp_path.glob("reach-*.npz"))) == 2
    assert cached_npz(None, "reach", key, Rules.longproc(), load, build("nocache")).tag == "nocache"



def test_a_cache_file_that_does_not_read_is_built_again(tmp_path, capsys):
    """A cached table that does not read (garbage, another program's file) was a traceback from np.load on every
    run, and a FIFO of its name blocked it; now the table is built again and replaces it."""
    from countdown_gym import Rules
    from critics.data import NpzTable, cached_npz

    table = NpzTable(max_numbers=4, goal_range=(10, 50))
    cached_npz(tmp_path, "traces", ["k"], Rules.longproc(), NpzTable.load, lambda: table)
    (path,) = tmp_path.glob("traces-*.npz")
    for bad in (b"not a table", None):
        path.unlink()
        path.write_bytes(bad) if bad else os.mkfifo(path)
        with no_hang(10):
            assert cached_npz(tmp_path, "traces", ["k"], Rules.longproc(), NpzTable.load, lambda: table) == table
        assert NpzTable.load(path) == table
    assert "does not read as a cached table" in capsys.readouterr().out

def test_an_interrupted_table_save_leaves_no_torn_cache(tmp_path, monkeypatch):
    """np.savez_compressed wrote the cache file in place: Ctrl-C mid-save left a torn .npz that the next run loaded
    (a BadZipFile traceback); now the file is whole or absent, and the next run builds the table again."""
    from critics.data import NpzTable

    def torn(f, **arrays):  # a path (written in place) or the open file of the temporary
        with open(f, "wb") if isinstance(f, os.PathLike) else f as out:
            out.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    table = NpzTable(max_numbers=4, goal_range=(10, 50))
    monkeypatch.setattr(np, "savez_compressed", torn)
    with pytest.raises(KeyboardInterrupt):
        table.save(tmp_path / "traces-x.npz")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    table.save(tmp_path / "traces-x.npz")
    assert NpzTable.load(tmp_path / "traces-x.npz") == table

# ---- warm starts and one-ply lookahead -----------------------------------------------------------


def test_init_from_starts_from_a_checkpoint_and_a_wider_child_pool_keeps_its_function(tmp_path):
    from critics.growth import load_grown

    src = train(_cfg(tmp_path / "src", objective="reach", child_dim=8, steps=20), progress=False)
    # lr 0: the warm-started run keeps the checkpoint's weights exactly
    same = train(_cfg(tmp_path / "same", objective="reach", child_dim=8, steps=5, lr=0.0, init_from=str(src)), progress=False)
    a, b = load_critic(src).model.state_dict(), load_critic(same).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    states, targets = [(1, 2, 3, 4), (6, 7, 30), (5, 9), (3,)], [10, 24, 45, 3]
    wide = train(_cfg(tmp_path / "wide", objective="reach", child_dim=16, steps=5, lr=0.0, init_from=str(src)), progress=False)
    assert load_critic(wide).config.child_dim == 16
    np.testing.assert_allclose(load_critic(wide).score(states, targets), load_critic(src).score(states, targets), atol=1e-5)
    with pytest.raises(SystemExit, match="--init-from .* its model differs"):
        train(_cfg(tmp_path / "bad", objective="reach", child_dim=8, hidden=48, steps=5, init_from=str(src)), progress=False)
    with pytest.raises(SystemExit, match="--init-from: critic checkpoint not found"):
        train(_cfg(tmp_path / "none", objective="reach", child_dim=8, steps=5, init_from=str(tmp_path / "nope")), progress=False)
    assert not (tmp_path / "bad").exists() and not (tmp_path / "none").exists()  # nothing written: a fixed re-run starts
    with pytest.raises(ValueError, match="differ by more than a wider child pool"):
        load_grown(load_critic(src).model, load_critic(wide).model)


def test_one_ply_lookahead_scores_a_state_by_its_best_child():
    from countdown_gym.game.solver import successors
    from critics.evaluate import lookahead_score_fn

    def oracle(states, targets):
        return np.array([float(reachable(s, t)) for s, t in zip(states, targets, strict=True)])

    probs = load_split("longproc-0.5k", "test")[:6]
    ls = random_states(probs, rollouts=2)
    states = ls.states + [tuple(p.numbers) for p in probs] + [(4001, 2)]  # (4001, 2): no legal move
    targets = ls.targets + [p.target for p in probs] + [3]
    look = lookahead_score_fn(oracle)(states, targets)
    # an exact scorer stays exact: a state of 2+ numbers reaches t iff one of its children does
    assert (look > 0).tolist() == [reachable(s, t) for s, t in zip(states, targets, strict=True)]
    assert look[-1] == -1.0
    torch.manual_seed(0)
    critic = Critic(build_model(ModelConfig(**{**TINY, "child_dim": 8})), {})
    got = lookahead_score_fn(critic)([(1, 2, 3, 4), (7,)], [10, 7])
    kids = list(dict.fromkeys(tuple(sorted(c)) for _, c in successors((1, 2, 3, 4), load_split("longproc-0.5k", "test")[0].rules)))
    assert got[0] == pytest.approx(critic.score(kids, [10] * len(kids)).max(), abs=1e-5)  # batches differ: float error
    assert got[1] == pytest.approx(critic.score([(7,)], [7])[0], abs=1e-5)


def test_evaluate_reports_lookahead_under_its_own_name(tmp_path):
    from critics.evaluate import evaluate

    def oracle(states, targets):
        return np.array([float(reachable(s, t)) for s, t in zip(states, targets, strict=True)])

    res = evaluate(score_fn=oracle, name="oracle", max_problems=3, val_problems=2, rollouts=1, out=tmp_path, progress=False,
                   lookahead=True)
    assert res["checkpoint"].startswith("oracle + one-ply lookahead") and res["version"] == "score_fn+lookahead"
    assert res["sets"]["start"]["size_4"]["auroc"] == 1.0 and res["first_move"]["critic_best_move_keeps_reachable"] == 1.0


# ---- the grandchild pool (two-move descendants) ------------------------------------------------------


def test_grandchild_pool_enumerates_every_two_move_descendant():
    """One more move from the pool's descendants makes exactly the values the set makes (positive rules)."""
    from countdown_gym import Rules
    from countdown_gym.game.solver import reachable_values
    from critics.models import _moves, pack_sets

    enc = build_model(ModelConfig(**{**TINY, "child_dim": 4, "grandchild_dim": 4})).state_tower
    rules = Rules.longproc_positive()
    rng = np.random.default_rng(3)
    # small numbers: no result reaches the rules' limit of 2000, which the pool does not apply
    sets = [tuple(int(x) for x in rng.integers(1, 13 if k == 3 else 7, size=k)) for k in (3, 4) for _ in range(25)]
    sets += [(6, 6, 6, 6), (2, 2, 7), (1, 1, 1, 1)]
    v, m = pack_sets(sets, 4)
    r2, ok2, ov, om = enc.two_moves(torch.tensor(v), torch.tensor(m) > 0)
    for i, s in enumerate(sets):
        if len(s) == 3:  # the descendants are final values
            made = {int(x) for x in r2[i][ok2[i]].tolist()}
        else:  # the descendants are 2-number sets: one more move
            keep = ok2[i]
            r3, ok3 = _moves(r2[i][keep], ov[i][..., 0].unsqueeze(-1).expand_as(ok2[i])[keep], torch.ones_like(r2[i][keep]).bool())
            made = {int(x) for x in r3[ok3].tolist()}
        assert made == set(reachable_values(s, rules)), s


def test_grandchild_pool_is_added_without_changing_the_function(tmp_path):
    from critics.growth import load_grown
    from critics.models import pack_sets

    src = train(_cfg(tmp_path / "src", objective="reach", child_dim=8, steps=20), progress=False)
    grown = train(_cfg(tmp_path / "grown", objective="reach", child_dim=8, grandchild_dim=6, steps=5, lr=0.0,
                       init_from=str(src)), progress=False)
    a, b = load_critic(src), load_critic(grown)
    assert b.config.grandchild_dim == 6
    states, goals = [(3, 5, 7, 9), (2, 4, 8), (5, 6), (12,)], [24, 16, 30, 12]
    assert np.allclose(a.score(states, goals), b.score(states, goals), atol=1e-6)
    assert np.ptp(b.score([(9, 7, 5, 3), (3, 5, 7, 9)], [24, 24])) < 1e-6  # order-free
    v, m = pack_sets([(5, 6), (12,)], 4)
    mean, mx = b.model.state_tower._grandchildren(torch.tensor(v), torch.tensor(m))
    assert not mean.any() and not mx.any()  # fewer than 3 numbers: no descendants
    with pytest.raises(ValueError, match="differ by more than a wider child pool"):
        load_grown(a.model, b.model)  # a pool is never taken away


@pytest.mark.parametrize("version", ["v5", "v2", "text"])
def test_goal_embeddings_do_not_depend_on_what_was_scored_before(version):
    """A resumed run starts with an empty goal cache: its scores must be the uninterrupted run's bit for bit (goals
    used to be embedded in a batch of whatever targets were new, and a batch's shape changes the last bits)."""
    if version == "text":
        from critics.text_critic import load_text_critic

        fresh, used = load_text_critic(), load_text_critic()
    else:
        from critics import SHIPPED_CHECKPOINT

        fresh, used = load_critic(SHIPPED_CHECKPOINT.parent / version), load_critic(SHIPPED_CHECKPOINT.parent / version)
    used.embed_targets(list(range(1, 300)))
    targets = [46, 977, -3, 10**40]
    assert fresh.embed_targets(targets).tobytes() == used.embed_targets(targets).tobytes()
