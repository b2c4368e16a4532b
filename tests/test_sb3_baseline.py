"""The MaskablePPO baseline: move features (exact against plain loops), the batched VecEnv (same
observations and rewards as the single-env wrappers), and smoke runs of a few hundred steps."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import gymnasium as gym  # noqa: E402
from no_hang import no_hang  # noqa: E402

import countdown_gym  # noqa: E402, F401
from baselines import sb3_ppo  # noqa: E402
from baselines.sb3.features import (  # noqa: E402
    canonical_moves,
    child_shape,
    feature_size,
    observation_features,
    row_size,
)
from baselines.sb3.policy import MoveFeatures, PerActionPolicy  # noqa: E402
from baselines.sb3.vec_env import CountdownSB3VecEnv, evaluate_batched  # noqa: E402
from countdown_gym import Problem, Rules  # noqa: E402
from countdown_gym.envs.actions import num_actions  # noqa: E402
from countdown_gym.envs.countdown import decode_action  # noqa: E402
from countdown_gym.rewards.variants import variant_names  # noqa: E402


def move_features(vals, count, target, progress, rules: Rules, lookahead: int = 1) -> np.ndarray:
    """Each action's feature row ``(n, A, F)``: the flat observation without children, by rows."""
    rows = observation_features(vals, count, target, progress, rules, lookahead)
    return rows.reshape(len(vals), -1, row_size(vals.shape[1], lookahead))


def child_features(vals, count, target, rules: Rules) -> np.ndarray:
    """The child block ``(n, P, C, K)`` of the flat observation with children."""
    m = vals.shape[1]
    flat = observation_features(vals, count, target, np.zeros(len(vals)), rules, lookahead=2, children=True)
    return flat[:, num_actions(m) * row_size(m, 2) :].reshape(len(vals), *child_shape(m))


def _next_results(state: tuple[int, ...], rules: Rules) -> list[int]:
    """Every legal move's result from ``state``, by plain loops over Rules.check."""
    out = []
    for i in range(len(state)):
        for j in range(len(state)):
            if i != j:
                out += [r for op in "+-*/" if (r := rules.check(state[i], op, state[j])[0]) is not None]
    return out


def _reference_lookahead(state: tuple[int, ...], target: int, rules: Rules, m: int) -> np.ndarray:
    """The three lookahead-2 columns of every action, from plain loops."""
    cols = np.zeros((4 * m * (m - 1), 3))
    for a in range(len(cols)):
        i, j, op = decode_action(a, m)
        if i >= len(state) or j >= len(state) or (r := rules.check(state[i], op, state[j])[0]) is None:
            continue
        after = tuple(x for k, x in enumerate(state) if k not in (i, j)) + (r,)
        nxt = _next_results(after, rules)
        cols[a] = [target in nxt, min([min(abs(x - target) / target, 1.0) for x in nxt], default=1.0), bool(nxt)]
    return cols


def test_move_features_rows_describe_each_legal_move() -> None:
    env = MoveFeatures(gym.make("Countdown-v0"))
    obs, info = env.reset(options={"problem": countdown_gym.Problem((6, 2, 5, 3), 8)})
    rows = obs.reshape(env.n_actions, env.row)
    assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(rows[:, 0].astype(np.int8), info["action_mask"])
    # exactly the moves whose result is the target are flagged: 6+2, 2+6, 5+3, 3+5
    assert rows[:, 3].sum() == 4


def test_lookahead_two_columns_on_a_hand_made_state() -> None:
    env = MoveFeatures(gym.make("Countdown-v0"), lookahead=2)
    env.reset(options={"problem": Problem((6, 2, 5, 3), 8)})
    obs, *_ = env.step(env.unwrapped.encode_action(0, 1, "-"))  # 6 - 2 = 4: numbers (5, 3, 4)
    rows = obs.reshape(env.n_actions, env.row)
    hit, gap, has_next = 10, 11, 12
    # 5 - 3 = 2 leaves (4, 2): 4 * 2 = 8 makes the target
    a = env.unwrapped.encode_action(0, 1, "-")
    assert rows[a, hit] == 1.0 and rows[a, gap] == 0.0 and rows[a, has_next] == 1.0
    # 5 + 3 = 8 leaves (4, 8): next results 12, 4, 32, 2 (8 / 4); the closest, 12 and 4, are 4 away
    a = env.unwrapped.encode_action(0, 1, "+")
    assert rows[a, hit] == 0.0 and rows[a, gap] == pytest.approx(0.5) and rows[a, has_next] == 1.0
    # 5 / 3 is not exact: masked, an all-zero row but for target and progress
    a = env.unwrapped.encode_action(0, 1, "/")
    assert not rows[a, :-2].any() and rows[a, -1] == pytest.approx(1 / 3)


def test_log_ratio_columns_on_a_hand_made_state() -> None:
    env = MoveFeatures(gym.make("Countdown-v0"), lookahead=2, log_ratios=True)
    obs, _ = env.reset(options={"problem": Problem((6, 2, 5, 3), 8)})
    rows = obs.reshape(env.n_actions, env.row)
    assert env.row == row_size(4, 2, True) == 18
    a = env.unwrapped.encode_action(0, 1, "*")  # 6 * 2 = 12 leaves 5 and 3
    np.testing.assert_allclose(rows[a, 13:16], np.log([12 / 8, 5 / 8, 3 / 8]) / 4, rtol=1e-6)
    np.testing.assert_allclose(rows[a, 10:13], [1.0, 0.0, 1.0])  # from (5, 3, 12) the next move 5 + 3 makes 8


def test_log_ratio_features_are_finite_for_a_target_below_zero() -> None:
    """Under sign="any" rules a target of -3 is reachable; log(x / T) was NaN in the log-ratio and child columns."""
    p = Problem((6, 2, 5), -3, Rules.longproc().replace(sign="any"))
    for kwargs in ({"log_ratios": True}, {"lookahead": 2, "children": True}):
        obs, _ = MoveFeatures(gym.make("Countdown-v0", problems=[p]), **kwargs).reset()
        assert np.isfinite(obs).all()


def _random_state(rng: np.random.Generator, m: int, high: int) -> tuple[tuple[int, ...], int, np.ndarray, int]:
    """A random state of 2..m numbers below ``high`` and a target: (state, target, slot values, count)."""
    count = int(rng.integers(2, m + 1))
    state = tuple(int(x) for x in rng.integers(1, high, size=count))
    vals = np.zeros((1, m), dtype=np.int64)
    vals[0, :count] = state
    return state, int(rng.integers(1, 100)), vals, count


def test_move_features_match_plain_loops_on_random_states() -> None:
    rng = np.random.default_rng(0)
    rules, m = Rules.longproc(), 4
    env = MoveFeatures(gym.make("Countdown-v0"))
    for _ in range(60):
        state, target, vals, count = _random_state(rng, m, 60)
        rows = move_features(vals, np.array([count]), np.array([target]), np.array([0.5]), rules, lookahead=2)[0]
        assert rows.shape == (4 * m * (m - 1), row_size(m, 2))
        np.testing.assert_allclose(rows[:, 10:13], _reference_lookahead(state, target, rules, m), atol=1e-7)
        one = move_features(vals, np.array([count]), np.array([target]), np.array([0.5]), rules, lookahead=1)[0]
        np.testing.assert_array_equal(one, env._python_rows(state, target, 0.5))  # the original per-move loop
        np.testing.assert_array_equal(np.delete(rows, [10, 11, 12], axis=1), one)


def _reference_children(state: tuple[int, ...], target: int, rules: Rules, m: int) -> list[list[tuple]]:
    """For each canonical parent move, the sorted list of (numbers left, largest first) of its legal children."""
    out = []
    for a in canonical_moves(m)[0]:
        i, j, op = decode_action(int(a), m)
        kids: list[tuple] = []
        if i < len(state) and j < len(state) and (r := rules.check(state[i], op, state[j])[0]) is not None:
            after = (*sorted((x for k, x in enumerate(state) if k not in (i, j)), reverse=True), r)
            for i2 in range(len(after)):
                for j2 in range(len(after)):
                    for op2 in "+-*/":
                        if i2 == j2 or (op2 in "+*" and i2 > j2):
                            continue  # a swapped + or * makes the same child
                        if (r2 := rules.check(after[i2], op2, after[j2])[0]) is not None:
                            rest = [x for k, x in enumerate(after) if k not in (i2, j2)] + [r2]
                            kids.append(tuple(sorted(rest, reverse=True)))
        out.append(sorted(kids))
    return out


def _reference_child_row(numbers: tuple[int, ...], target: int, rules: Rules, m: int) -> tuple[float, ...]:
    """The documented child row of a child that leaves ``numbers`` (largest first), by hand."""
    cols = [1.0]
    for k in range(m - 2):
        if k >= len(numbers):
            cols += [0.0, 0.0, 0.0, 0.0]
            continue
        x = numbers[k]
        logr = max(-1.0, min(1.0, np.log(x / target) / 4)) if x > 0 else -1.0
        cols += [1.0, min(x / target, 4.0) / 4, logr, float(x == target)]
    return (*cols, min(np.log(target) / np.log1p(rules.value_limit), 1.0))


def _by_rows(rows: list, columns: int) -> np.ndarray:
    return np.array(sorted(rows, key=lambda c: tuple(np.round(c, 3))), dtype=np.float64).reshape(-1, columns)


def test_child_features_match_plain_loops_on_random_states() -> None:
    rng = np.random.default_rng(2)
    rules, m = Rules.longproc(), 4
    parents, per_parent, columns = child_shape(m)
    assert (parents, per_parent, columns) == (36, 18, 10)
    for _ in range(40):
        state, target, vals, count = _random_state(rng, m, 40)
        kids = child_features(vals, np.array([count]), np.array([target]), rules)[0]
        assert kids.shape == (parents, per_parent, columns)
        for got, want in zip(kids, _reference_children(state, target, rules, m), strict=True):
            assert not got[got[:, 0] == 0].any()  # illegal children are all-zero rows
            expected = [_reference_child_row(w, target, rules, m) for w in want]
            np.testing.assert_allclose(_by_rows(got[got[:, 0] > 0].tolist(), columns), _by_rows(expected, columns), atol=1e-5)


def test_children_observation_and_policy_are_consistent() -> None:
    import torch

    env = MoveFeatures(gym.make("Countdown-v0"), lookahead=2, log_ratios=True, children=True)
    obs, info = env.reset(options={"problem": Problem((6, 2, 5, 3), 8)})
    assert obs.shape == (feature_size(4, 2, True, True),) == (48 * row_size(4, 2, True) + 36 * 18 * 10,)
    assert env.observation_space.contains(obs)
    policy = PerActionPolicy(env.observation_space, env.action_space, lambda _: 1e-3, hidden=16, children=True)
    with torch.no_grad():
        features = torch.as_tensor(obs[None])
        logits, _ = policy.mlp_extractor(policy.extract_features(features, policy.pi_features_extractor))
    # 6 + 2 and 2 + 6 make the same afterstate, so the same children and the same logit
    twin = env.unwrapped.encode_action(1, 0, "+"), env.unwrapped.encode_action(0, 1, "+")
    assert canonical_moves(4)[1][twin[0]] == canonical_moves(4)[1][twin[1]]
    assert logits[0, twin[0]] == logits[0, twin[1]]
    with pytest.raises(ValueError, match="children"):
        MoveFeatures(gym.make("Countdown-v0"), lookahead=1, children=True).reset()


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_pooled_children_are_the_max_over_each_parents_legal_children(activation: str) -> None:
    import torch

    rng = np.random.default_rng(3)
    rules, m = Rules(), 4
    env = MoveFeatures(gym.make("Countdown-v0"), lookahead=2, log_ratios=True, children=True)
    policy = PerActionPolicy(env.observation_space, env.action_space, lambda _: 1e-3, hidden=16, children=True,
                             activation=activation, child_hidden=8)
    ext = policy.mlp_extractor
    obs = []
    for _ in range(6):  # random states of 2 to 4 numbers; the action rows do not matter here
        n = int(rng.integers(2, 5))
        vals = np.zeros((1, m), dtype=np.int64)
        vals[0, :n] = rng.integers(1, 30, size=n)
        kids = child_features(vals, np.array([n]), rng.integers(1, 100, size=1), rules)[0]
        obs.append(np.concatenate([np.zeros(48 * ext.row, dtype=np.float32), kids.reshape(-1)]))
    features = torch.as_tensor(np.stack(obs))
    with torch.no_grad():
        got = ext.pooled_children(features)
        kids = features[:, 48 * ext.row :].view(len(obs), *child_shape(m))
        for b in range(len(obs)):
            for p in range(kids.shape[1]):
                legal = kids[b, p][kids[b, p, :, 0] > 0]
                want = ext.child_net(legal).max(0).values if len(legal) else torch.zeros(8)
                torch.testing.assert_close(got[b, p], want)
    assert got.shape == (6, 36, 8) and (got != 0).any()


def test_segment_max_gradient_is_shared_by_tied_rows_like_scatter_amax() -> None:
    import torch

    from baselines.sb3.policy import _SegmentMax

    torch.manual_seed(0)
    counts = torch.tensor([3, 0, 4, 1, 2])
    owner = torch.repeat_interleave(torch.arange(5), counts)
    x = torch.randn(int(counts.sum()), 6)
    x[1], x[4], x[5] = x[0], x[3], x[3]  # tied maxima (and ties elsewhere) within segments
    x = x.relu().requires_grad_(True)
    weight = torch.randn(5, 6)
    (_SegmentMax.apply(x, owner, counts) * weight).sum().backward()
    got, x.grad = x.grad, None
    want = x.new_zeros(5, 6).scatter_reduce(0, owner[:, None].expand_as(x), x, "amax", include_self=False)
    (want * weight).sum().backward()
    torch.testing.assert_close(_SegmentMax.apply(x, owner, counts), want)
    positive = x > 0  # amax also counts its zero start as a tie when the max is 0; no gradient passes a ReLU there
    torch.testing.assert_close(got[positive], x.grad[positive])


def test_children_policy_trains_saves_and_evaluates(tmp_path: Path) -> None:
    from sb3_contrib import MaskablePPO

    result = sb3_ppo.main(["--children", "--num-envs", "4", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1",
                           "--hidden", "16", "--child-hidden", "8", "--total-timesteps", "128", "--eval-limit", "20", "--eval-every", "0",
                           "--output-dir", str(tmp_path), "--run-name", "c", "--no-progress", "--eval-split", "validation"])
    assert result["children"] is True and result["eval_problems"] == 20
    model = MaskablePPO.load(tmp_path / "c" / "final_model", device="cpu")
    assert model.policy.with_children and model.policy.mlp_extractor.child_net[0].out_features == 8
    rate, _ = evaluate_batched(model, countdown_gym.load_split("longproc-0.5k", "validation")[:20], "longproc-0.5k",
                               lookahead=2, log_ratios=True, children=True, chunk=7)
    assert rate == result["success_rate"]


def test_children_need_lookahead_two(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sb3_ppo.parse_args(["--children", "--lookahead", "1"])
    assert "--children needs --lookahead 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sb3_ppo.parse_args(["--child-hidden", "32"])
    assert "--child-hidden must be a positive width and needs --children" in capsys.readouterr().err


@pytest.mark.parametrize("reward", variant_names("step"))
def test_batched_vec_env_matches_the_single_env_wrappers(reward: str) -> None:
    args = sb3_ppo.parse_args(["--reward", reward, "--lookahead", "2"])
    from countdown_gym.rewards.terms import CachedScorer

    scorer = sb3_ppo.reward_scorer(args)  # the shipped critic for the critic rewards, else None
    critic = None if scorer is None else CachedScorer(scorer)
    rng = np.random.default_rng(1)
    for p in countdown_gym.load_split("longproc-0.5k", "validation")[:4]:
        single = MoveFeatures(sb3_ppo.wrap_reward(gym.make("Countdown-v0", problems=[p]), args, scorer), lookahead=2)
        vec = CountdownSB3VecEnv(1, reward, args.scale, args.gamma, 2, critic, problems=[p])
        vec.seed(0)
        batched = vec.reset()
        obs, info = single.reset(seed=0)
        for _ in range(7):  # more than two episodes
            np.testing.assert_array_equal(batched[0], obs)
            np.testing.assert_array_equal(vec.action_masks()[0], info["action_mask"].astype(bool))
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            vec.step_async(np.array([action]))
            batched, reward_b, done, infos = vec.step_wait()
            obs, reward_s, terminated, truncated, info = single.step(action)
            assert reward_b[0] == pytest.approx(reward_s, abs=1e-6)
            assert done[0] == (terminated or truncated)
            if done[0]:
                np.testing.assert_array_equal(infos[0]["terminal_observation"], obs)
                assert infos[0]["is_success"] == info["is_success"]
                obs, info = single.reset()


def test_batched_vec_env_features_are_exact_past_the_observations_value_scale() -> None:
    """Classic rules have no value limit: 50 * 40 = 2000 and the target 2003 saturate the observation (scale 1000), and
    the batched env read the features back from it (2000 as 1000), unlike MoveFeatures on the env's own numbers."""
    p = Problem((50, 40, 3), 2003, Rules.classic())
    single = MoveFeatures(gym.make("Countdown-v0", problems=[p]), lookahead=2, log_ratios=True)
    vec = CountdownSB3VecEnv(1, "sparse", lookahead=2, log_ratios=True, problems=[p])
    obs, _ = single.reset()
    np.testing.assert_array_equal(vec.reset()[0], obs)
    for move in ((0, 1, "*"), (0, 1, "+")):  # 50 * 40, then 3 + 2000 wins
        action = next(a for a in range(vec.n_actions) if decode_action(a, 3) == move)
        obs, _, terminated, _, _ = single.step(action)
        batched, _, done, infos = vec.step(np.array([action]))
        np.testing.assert_array_equal(infos[0]["terminal_observation"] if done[0] else batched[0], obs)
    assert terminated and done[0] and infos[0]["is_success"]


def test_batched_vec_env_resets_with_the_options_sb3_set_options_gives() -> None:
    """VecEnv.set_options (one dict for every env, or one per env) was ignored: random problems were played."""
    problems = countdown_gym.load_split("longproc-0.5k", "validation")[:3]
    vec = CountdownSB3VecEnv(3, lookahead=1)
    vec.set_options({"problem": problems[0]})
    vec.reset()
    assert vec.venv.current_problems() == [problems[0]] * 3
    vec.set_options([{"problem": p} for p in problems])
    vec.reset()
    assert vec.venv.current_problems() == problems
    vec.reset()  # options hold for the next reset only, as in DummyVecEnv
    assert vec.venv.current_problems() != problems
    for bad in ({"nope": 1}, [{"problem": problems[0]}, {}, {}]):
        vec.set_options(bad)
        with pytest.raises(ValueError, match="reset options"):
            vec.reset()


def test_batched_vec_env_refuses_float_actions_like_the_envs_it_batches() -> None:
    vec = CountdownSB3VecEnv(2, lookahead=1)
    vec.reset()
    with pytest.raises(ValueError, match="int array"):  # 0.7 was played as action 0
        vec.step(np.array([0.7, 0.2]))
    vec.step(np.array([[0], [0]], dtype=np.int32))  # SB3's (n, 1) actions of any int type still step


def test_batched_evaluation_matches_playing_one_problem_at_a_time(tmp_path: Path) -> None:
    from sb3_contrib import MaskablePPO

    sb3_ppo.main(["--num-envs", "4", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1", "--lookahead", "2",
                  "--total-timesteps", "128", "--eval-limit", "1", "--eval-every", "0", "--output-dir", str(tmp_path),
                  "--run-name", "e", "--no-progress", "--eval-split", "validation"])
    model = MaskablePPO.load(tmp_path / "e" / "final_model", device="cpu")
    problems = countdown_gym.load_split("longproc-0.5k", "validation")[:40]
    rate, moves = evaluate_batched(model, problems, "longproc-0.5k", lookahead=2, log_ratios=True)
    env = MoveFeatures(gym.make("Countdown-v0"), lookahead=2, log_ratios=True)
    wins = 0
    for p, played in zip(problems, moves, strict=True):
        obs, info = env.reset(options={"problem": p})
        done, one = False, []
        while not done:
            action, _ = model.predict(obs, deterministic=True, action_masks=info["action_mask"].astype(bool))
            obs, reward, terminated, truncated, info = env.step(int(action))
            one += [t["move"] for t in info["transitions"]]
            done = terminated or truncated
        wins += reward >= 1.0
        assert one == played
    assert rate == wins / len(problems)


@pytest.mark.parametrize("reward", ["sparse", "oracle-perfect", "critic"])
def test_train_evaluate_resume_and_submit(tmp_path: Path, reward: str) -> None:
    common = ["--reward", reward, "--num-envs", "2", "--n-steps", "64", "--batch-size", "64", "--n-epochs", "1",
              "--eval-limit", "5", "--eval-every", "128", "--checkpoint-every", "128", "--output-dir", str(tmp_path),
              "--run-name", "r", "--no-progress", "--eval-split", "validation"]
    first = sb3_ppo.main([*common, "--total-timesteps", "256"])
    assert 0.0 <= first["success_rate"] <= 1.0 and first["eval_problems"] == 5
    assert (tmp_path / "r" / "final_model.zip").exists()
    assert list((tmp_path / "r" / "checkpoints").glob("model_*_steps.zip"))
    resumed = sb3_ppo.main([*common, "--total-timesteps", "384", "--resume"])
    assert resumed["total_timesteps"] >= 384
    assert json.loads((tmp_path / "r" / "result.json").read_text())["total_timesteps"] == resumed["total_timesteps"]
    # the training log and the validation curve are continued across the resume, each step once
    with (tmp_path / "r" / "logs" / "progress.csv").open() as f:
        assert [int(r["time/total_timesteps"]) for r in csv.DictReader(f)] == [128, 256, 384]
    with (tmp_path / "r" / "curve.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["steps"]) for r in rows] == [128, 256, 384]
    seconds = [float(r["seconds"]) for r in rows]
    assert seconds == sorted(seconds)  # the resumed part continues the clock, it does not restart at 0


def test_anneal_lr_decays_the_learning_rate_linearly_to_zero(tmp_path: Path) -> None:
    sb3_ppo.main(["--anneal-lr", "--learning-rate", "0.001", "--num-envs", "2", "--n-steps", "64", "--batch-size", "64",
                  "--n-epochs", "1", "--total-timesteps", "256", "--eval-limit", "5", "--eval-every", "0",
                  "--output-dir", str(tmp_path), "--run-name", "r", "--no-progress", "--eval-split", "validation"])
    with (tmp_path / "r" / "logs" / "progress.csv").open() as f:
        rates = [r["train/learning_rate"] for r in csv.DictReader(f)]
    # one update after each 128-step rollout; SB3 writes an update's row with the next rollout's,
    # so the rows are: no update yet, the update at half of the budget (the last one, at lr 0, is not logged)
    assert rates[0] == "" and float(rates[1]) == pytest.approx(0.0005)
    from sb3_contrib import MaskablePPO

    final = MaskablePPO.load(tmp_path / "r" / "final_model.zip", device="cpu")
    assert final.policy.optimizer.param_groups[0]["lr"] == 0.0  # the last update ran at the end of the decay


def test_evaluate_model_rescores_a_saved_run_and_names_wrong_flags(tmp_path: Path) -> None:
    common = ["--eval-split", "validation", "--eval-limit", "20", "--no-progress"]
    trained = sb3_ppo.main(["--lookahead", "1", "--num-envs", "2", "--n-steps", "64", "--batch-size", "64",
                            "--n-epochs", "1", "--total-timesteps", "128", "--eval-every", "0",
                            "--output-dir", str(tmp_path), "--run-name", "r", *common])
    again = sb3_ppo.main(["--evaluate-model", str(tmp_path / "r" / "final_model.zip"), *common])
    assert again["lookahead"] == 1  # from the run's options.json
    assert again["success_rate"] == trained["success_rate"] and again["total_timesteps"] == trained["total_timesteps"]
    with pytest.raises(SystemExit, match="but --preset hard --policy per-action --lookahead 1"):  # a flag given wins over
        sb3_ppo.main(["--evaluate-model", str(tmp_path / "r" / "final_model.zip"), "--preset", "hard", *common])  # the run's
    alone = tmp_path / "copy.zip"  # no options.json beside it: the command line's flags (lookahead 2) do not fit
    alone.write_bytes((tmp_path / "r" / "final_model.zip").read_bytes())
    with pytest.raises(SystemExit, match="pass the flags the model was trained with"):
        sb3_ppo.main(["--evaluate-model", str(alone), *common])
    with pytest.raises(SystemExit, match="no such file"):
        sb3_ppo.main(["--evaluate-model", str(tmp_path / "missing.zip"), *common])


def test_evaluate_model_of_an_mlp_run_takes_its_vec_env_too(tmp_path: Path) -> None:
    """The run's --policy mlp met the default --vec-env batched: refused (a ValueError traceback before) unless
    --vec-env dummy, which the evaluation does not use, was given."""
    run = ["--policy", "mlp", "--vec-env", "dummy", "--num-envs", "2", "--n-steps", "32", "--batch-size", "64",
           "--total-timesteps", "64", "--eval-every", "0", "--output-dir", str(tmp_path), "--run-name", "m"]
    common = ["--eval-split", "validation", "--eval-limit", "3", "--no-progress"]
    sb3_ppo.main([*run, *common])
    assert sb3_ppo.main(["--evaluate-model", str(tmp_path / "m" / "final_model.zip"), *common])["eval_problems"] == 3


def test_resume_refuses_flags_the_checkpoint_would_ignore(tmp_path: Path) -> None:
    common = ["--num-envs", "2", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1", "--eval-limit", "5",
              "--eval-every", "0", "--checkpoint-every", "64", "--output-dir", str(tmp_path), "--run-name", "r",
              "--no-progress", "--eval-split", "validation"]
    sb3_ppo.main([*common, "--total-timesteps", "64", "--learning-rate", "0.001"])
    with pytest.raises(SystemExit, match="--learning-rate 0.001 \\(now 0.5\\)"):  # MaskablePPO.load keeps 0.001
        sb3_ppo.main([*common, "--total-timesteps", "128", "--learning-rate", "0.5", "--resume"])
    assert json.loads((tmp_path / "r" / "options.json").read_text())["learning_rate"] == 0.001
    assert sb3_ppo.main([*common, "--total-timesteps", "128", "--learning-rate", "0.001", "--resume"])["total_timesteps"] == 128
    # a fresh start in the run's directory would let a later --resume continue the older model: refused
    with pytest.raises(SystemExit, match="holds a run already: --resume continues it"):
        sb3_ppo.main([*common, "--total-timesteps", "64", "--learning-rate", "0.001"])
    assert json.loads((tmp_path / "r" / "options.json").read_text())["total_timesteps"] == 128  # untouched


def test_a_resumed_run_does_not_replay_the_problems_of_its_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[list[Problem]] = []
    reset = CountdownSB3VecEnv.reset

    def recording_reset(self: CountdownSB3VecEnv) -> np.ndarray:
        obs = reset(self)
        drawn.append(list(self.venv.current_problems()))
        return obs

    monkeypatch.setattr(CountdownSB3VecEnv, "reset", recording_reset)
    common = ["--num-envs", "8", "--n-steps", "8", "--batch-size", "64", "--n-epochs", "1", "--eval-limit", "5",
              "--eval-every", "0", "--checkpoint-every", "64", "--output-dir", str(tmp_path), "--run-name", "r",
              "--no-progress", "--eval-split", "validation"]
    sb3_ppo.main([*common, "--total-timesteps", "64"])
    sb3_ppo.main([*common, "--total-timesteps", "128", "--resume"])
    # MaskablePPO.load re-seeds everything with the run's seed; without a new seed the resumed part
    # would draw the very problems (and action samples) the run started with
    assert len(drawn) == 2 and drawn[0] != drawn[1]


def test_ctrl_c_stops_after_the_update_with_a_resumable_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from countdown_gym.runkit.runs import StopRequest

    class CtrlCDuringFirstRollout(StopRequest):
        def __enter__(self):
            super().__enter__()
            self.requested = True
            return self

    monkeypatch.setattr(sb3_ppo, "StopRequest", CtrlCDuringFirstRollout)
    common = ["--num-envs", "2", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1", "--eval-limit", "5",
              "--eval-every", "0", "--checkpoint-every", "1000", "--output-dir", str(tmp_path), "--run-name", "r",
              "--no-progress", "--eval-split", "validation"]
    stopped = sb3_ppo.main([*common, "--total-timesteps", "256"])
    assert stopped["interrupted"] and stopped["total_timesteps"] == 2  # one vector step of a rollout, no update yet
    assert Path(stopped["checkpoint"]).exists() and not (tmp_path / "r" / "final_model.zip").exists()
    monkeypatch.setattr(sb3_ppo, "StopRequest", StopRequest)
    assert sb3_ppo.main([*common, "--total-timesteps", "256", "--resume"])["total_timesteps"] >= 256
    # a newest checkpoint cut short by a kill: the resume takes the one before it
    checkpoints = tmp_path / "r" / "checkpoints"
    (checkpoints / "model_999_steps.zip").write_bytes(b"PK\x03\x04 cut short")
    assert sb3_ppo.main([*common, "--total-timesteps", "320", "--resume"])["total_timesteps"] >= 320
    for zip_file in checkpoints.glob("*.zip"):
        zip_file.write_bytes(b"")
    with pytest.raises(SystemExit, match="no checkpoint .* is readable"):
        sb3_ppo.main([*common, "--total-timesteps", "384", "--resume"])


def test_submission_of_an_evaluation_is_rescored_by_the_leaderboard(tmp_path: Path) -> None:
    from countdown_gym.leaderboard import read_submission

    out = tmp_path / "ppo.jsonl"
    result = sb3_ppo.main(["--num-envs", "2", "--n-steps", "32", "--batch-size", "64", "--n-epochs", "1",
                           "--total-timesteps", "64", "--eval-split", "validation", "--eval-every", "1000",
                           "--output-dir", str(tmp_path), "--run-name", "s", "--no-progress", "--submit", str(out)])
    assert out.exists() and result["eval_problems"] == 500
    assert read_submission(out) is not None


def test_a_submission_path_that_is_a_folder_is_refused_before_training(tmp_path: Path) -> None:
    """--submit naming a folder trained and evaluated, then failed with 'Is a directory: <folder>.tmp' (the temporary
    name); the same with --evaluate-model after the evaluation."""
    train = ["--num-envs", "2", "--n-steps", "32", "--batch-size", "64", "--total-timesteps", "64", "--output-dir", str(tmp_path),
             "--run-name", "s"]
    for argv in (train, ["--evaluate-model", str(tmp_path / "final_model.zip")]):
        with pytest.raises(SystemExit, match=f"--submit {tmp_path} is a folder; name a file"):
            sb3_ppo.main([*argv, "--no-progress", "--submit", str(tmp_path)])
    os.mkfifo(tmp_path / "fifo")  # as a device (--submit /dev/null, run as root): replaced by a file at the end
    with pytest.raises(SystemExit, match="fifo is a FIFO; name a file"):
        sb3_ppo.main(["--evaluate-model", str(tmp_path / "final_model.zip"), "--submit", str(tmp_path / "fifo")])
    assert not (tmp_path / "s").exists()


def test_the_original_dummy_vec_env_path_still_trains(tmp_path: Path) -> None:
    result = sb3_ppo.main(["--vec-env", "dummy", "--reward", "oracle-potential", "--num-envs", "2", "--n-steps", "32",
                           "--batch-size", "64", "--n-epochs", "1", "--total-timesteps", "64", "--eval-limit", "5",
                           "--eval-every", "0", "--output-dir", str(tmp_path), "--run-name", "d", "--no-progress",
                           "--eval-split", "validation"])
    assert result["vec_env"] == "dummy" and result["total_timesteps"] == 64 and result["eval_problems"] == 5


def test_flags_of_the_other_policy_are_refused_not_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sb3_ppo.parse_args(["--net-arch", "32"])  # the default per-action policy has no net_arch
    assert "--net-arch sets the MlpPolicy" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sb3_ppo.parse_args(["--policy", "mlp", "--vec-env", "dummy", "--hidden", "128"])
    assert "--hidden and --activation set the per-action policy" in capsys.readouterr().err
    assert sb3_ppo.parse_args(["--policy", "mlp", "--vec-env", "dummy", "--net-arch", "32", "32"]).net_arch == [32, 32]


def test_a_preset_of_rational_rules_with_integer_only_features_is_a_usage_error(capsys) -> None:
    """--preset tinyzero with the defaults (the batched env, --lookahead 2, --log-ratios) was a ValueError traceback
    from the vector env once the run directory was made."""
    with pytest.raises(SystemExit) as exc:
        sb3_ppo.parse_args(["--preset", "tinyzero"])
    assert exc.value.code == 2 and "--preset tinyzero has rational rules" in capsys.readouterr().err
    assert sb3_ppo.parse_args(["--preset", "tinyzero", "--vec-env", "dummy", "--lookahead", "1", "--no-log-ratios"])
    assert sb3_ppo.parse_args(["--preset", "tinyzero", "--policy", "mlp", "--vec-env", "dummy"])


def test_eval_problems_without_a_validation_curve_is_a_usage_error(capsys) -> None:
    """--eval-every 0 --eval-problems 50 trained with no curve, --eval-problems ignored."""
    with pytest.raises(SystemExit) as exc:
        sb3_ppo.parse_args(["--eval-every", "0", "--eval-problems", "50"])
    assert exc.value.code == 2 and "--eval-problems has no effect with --eval-every 0" in capsys.readouterr().err


def test_bad_reward_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sb3_ppo.parse_args(["--reward", "dense"])
    assert "--reward must be one of" in capsys.readouterr().err


def test_first_move_reference_agents_win_exactly_when_their_first_move_keeps_the_target_reachable() -> None:
    from baselines import reference_agents as ref
    from countdown_gym.game.solver import reachable

    env = gym.make("Countdown-v0")
    greedy = ref.CriticGreedyPolicy()
    for policy in (ref.RandomFirstPolicy(seed=3), ref.CriticFirstPolicy()):
        for p in countdown_gym.load_split("longproc-0.5k", "validation")[:8]:
            obs, info = env.reset(options={"problem": p})
            first = policy(obs, info)
            if isinstance(policy, ref.CriticFirstPolicy):
                assert first == greedy(obs, info)
            obs, reward, terminated, truncated, info = env.step(first)
            keeps = reachable(info["state"], p.target, p.rules)
            while not (terminated or truncated):
                obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            assert (reward >= 1.0) == keeps


def test_reference_agents_negative_seed_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--seed -1 raised submit_policy's ValueError: a traceback, exit 1."""
    from baselines import reference_agents as ref

    with pytest.raises(SystemExit) as exc:
        ref.main(["--agent", "random", "--seed", "-1", "--out", str(tmp_path / "s.jsonl")])
    assert exc.value.code == 2 and "--seed must be >= 0, got -1" in capsys.readouterr().err


BAD_ARGUMENTS = {  # command line -> the usage error's message
    "--eval-limit -5": "--eval-limit must be >= 0",
    "--checkpoint-every 0": "--checkpoint-every must be >= 1",
    "--gamma 2": "--gamma must be in (0, 1]",
    "--preset nosuch": "--preset must be one of",
    "--n-steps 0": "--n-steps must be >= 1",
    "--eval-problems 0": "--eval-problems must be >= 1",  # was a validation curve of 0.0 measured on no problem
    "--submit s.jsonl --eval-limit 5": "drop --eval-limit 5",
    "--seed -1": "--seed must be in [0, 2**31), got -1",  # was numpy's traceback when the model was built
    "--seed 4294967296": "--seed must be in [0, 2**31)",  # was the leaderboard's traceback after training
    # a minibatch of one step normalises its advantage by a NaN std: the policy's NaN logits' traceback
    "--batch-size 1": "leaves a minibatch of one step",
    "--num-envs 1 --n-steps 1": "leaves a minibatch of one step",
    "--num-envs 3 --n-steps 3 --batch-size 4": "(a rollout of 9 steps) leaves a minibatch of one step",
}


@pytest.mark.parametrize(("argv", "message"), BAD_ARGUMENTS.items())
def test_bad_arguments_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        sb3_ppo.parse_args(argv.split())
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_only_regular_checkpoint_files_are_opened_and_odd_run_entries_are_one_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import shutil

    tiny = ["--num-envs", "2", "--n-steps", "16", "--batch-size", "32", "--n-epochs", "1", "--eval-every", "0",
            "--eval-limit", "2", "--eval-split", "validation", "--checkpoint-every", "32", "--no-progress",
            "--report-to", "none", "--output-dir", str(tmp_path)]
    stray = tmp_path / "fresh" / "checkpoints"  # a stray name in a new run's folder: not a checkpoint, no crash
    stray.mkdir(parents=True)
    (stray / "model_final_steps.zip").write_bytes(b"")
    assert sb3_ppo.main([*tiny, "--run-name", "fresh", "--total-timesteps", "64"])["total_timesteps"] == 64
    sb3_ppo.main([*tiny, "--run-name", "r", "--total-timesteps", "128"])  # model_{32,64,96,128}_steps.zip

    def resume(damage) -> dict:
        run = tmp_path / "x"
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(tmp_path / "r", run, symlinks=True)
        damage(run, run / "checkpoints" / "model_128_steps.zip")
        capsys.readouterr()
        with no_hang():
            return sb3_ppo.main([*tiny, "--run-name", "x", "--total-timesteps", "192", "--resume"])

    def replace(make):
        return lambda run, newest: (newest.unlink(), make(newest))

    assert resume(lambda run, newest: (run / "checkpoints" / "model_x_steps.zip").write_bytes(b""))["total_timesteps"] == 192
    assert "model_128_steps.zip at 128 steps" in capsys.readouterr().out
    for make, kind in ((os.mkfifo, "a FIFO"), (lambda p: p.symlink_to("/dev/null"), "a special file")):
        assert resume(replace(make))["total_timesteps"] == 192  # a FIFO once hung MaskablePPO.load for ever
        out = capsys.readouterr().out
        assert f"model_128_steps.zip is {kind}, not a regular file: skipped" in out
        assert "model_96_steps.zip at 96 steps" in out
        assert (tmp_path / "x" / "checkpoints" / "model_128_steps.zip").is_file()  # the next save replaced it
    with pytest.raises(SystemExit, match="model_128_steps.zip is a folder, where this run saves"):  # a traceback at 128
        resume(replace(os.mkdir))

    def log_folder(run, newest):
        (run / "logs" / "progress.csv").unlink()
        (run / "logs" / "progress.csv").mkdir()

    with pytest.raises(SystemExit, match=r"progress.csv is a folder, not a regular file; the run's training log"):
        resume(log_folder)
    with pytest.raises(SystemExit, match=r"progress.csv is a FIFO"):
        resume(lambda run, newest: ((run / "logs" / "progress.csv").unlink(), os.mkfifo(run / "logs" / "progress.csv")))
    with pytest.raises(SystemExit, match=r"progress.csv is not UTF-8 text \(byte 0\)"):
        resume(lambda run, newest: (run / "logs" / "progress.csv").write_bytes(b"\xff\xfe\x00a,b\n"))
    with pytest.raises(SystemExit, match=r"options.json is a FIFO, not the run's options"):
        resume(lambda run, newest: ((run / "options.json").unlink(), os.mkfifo(run / "options.json")))
