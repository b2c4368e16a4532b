"""MaskablePPO on Countdown-v0 with a chosen reward: the cheap testbed for dense rewards.

    python baselines/sb3_ppo.py --reward oracle-perfect --total-timesteps 100000 --seed 1

Trains sb3-contrib's MaskablePPO on the train split of a preset (action masks during training
and at inference), evaluates greedily on the frozen validation or test split, logs to CSV and
TensorBoard, checkpoints periodically (``--resume`` continues from the last one), saves the
final model and its evaluation as JSON, and can write a leaderboard submission.
``--evaluate-model runs/sb3/<run>/final_model.zip --eval-split validation`` evaluates a saved
model without training (its run's ``args.json`` supplies the feature flags).

Reward variants (the dense terms come from ``countdown_gym.wrappers``, one home):

* ``sparse``: the verifier's 1 on reaching the target, else 0;
* ``oracle-perfect``: + ``scale`` for every move that keeps the target reachable (the seed paper's
  perfect-move oracle);
* ``oracle-reachable``: + ``scale`` for a move that keeps the target reachable, - ``scale`` otherwise;
* ``oracle-potential``: potential-based shaping with Phi = exact reachability (policy-invariant);
* ``critic``: the shipped contrastive critic's score of each new state, times ``scale``;
* ``critic-potential``: potential-based shaping with Phi = critic score.

Environments: ``--vec-env batched`` (default) steps ``--num-envs`` games in one
``CountdownSB3VecEnv`` (``sb3_vec_env.py``: the package's numpy ``CountdownVectorEnv``, move
features and dense terms computed for the whole batch); ``--vec-env dummy`` is SB3's
``DummyVecEnv`` over ``MoveFeatures(<reward wrapper>(gym.make("Countdown-v0")))``, one Python
env per slot. Both train the same MDP with the same rewards; they draw training problems in a
different order. ``--lookahead`` sets the depth of the move features (``sb3_policy.py``): 1 =
each move's afterstate, 2 = also a summary of the legal moves from that afterstate;
``--children`` gives those next moves raw, pooled by a learned network. The policy never
consults the solver, reachability, the oracle or any search beyond that depth.

The best setting measured is ``--children --n-epochs 20``: with ``--reward oracle-perfect
--threads 2``, one run alone on a 2-core CPU, test success 0.80 at ``--total-timesteps 249856``
(mean of 3 seeds, about 12 minutes per run) and 0.82 at 320000 (13-15.5 minutes); at 200000
steps, two runs at a time, 0.76 (sparse) to 0.79 (oracle-perfect) (``docs/sb3_baseline.md``).

The original setting (the 40k-step results first committed in ``docs/results/sb3_rewards.md``)
is ``--vec-env dummy --lookahead 1 --no-log-ratios --activation tanh --num-envs 8 --n-steps 64
--batch-size 128 --n-epochs 10``; the defaults were chosen on the validation split
(``docs/sb3_baseline.md``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym

if not __package__:  # `python baselines/sb3_ppo.py`: put the repository root, not this folder, on sys.path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import countdown_gym  # noqa: F401  (registers the environments)
from baselines.sb3_policy import LOOKAHEADS, MoveFeatures, PerActionPolicy, load_model  # noqa: E402
from countdown_gym import Problem, dataclass_cli, load_split
from countdown_gym.integrations.tracking import report_to_names
from countdown_gym.splits import SPLIT_SPEC
from countdown_gym.stop_request import StopRequest

REWARDS = ("sparse", "oracle-perfect", "oracle-reachable", "oracle-potential", "critic", "critic-potential")
NET_ARCH = [256, 256]  # the MlpPolicy's default layers
HIDDEN = 64  # the per-action policy's default width


@dataclass
class Args:
    """Every field is a command-line flag (``--total-timesteps 100000``)."""

    preset: str = "longproc-0.5k"
    reward: str = "sparse"
    scale: float = 0.1
    """Size of the dense term per step (the sparse reward is 1)."""
    gamma: float = 1.0
    total_timesteps: int = 100_000
    vec_env: Literal["batched", "dummy"] = "batched"
    """``batched`` (CountdownSB3VecEnv, fast) or ``dummy`` (DummyVecEnv of single envs, the original)."""
    num_envs: int = 64
    lookahead: int = 2
    """Depth of the move features: 1 = each move's afterstate, 2 = also the moves after it (sb3_policy.py)."""
    log_ratios: bool = True
    """Also encode each afterstate's numbers as log(x / target) (sb3_policy.py)."""
    children: bool = False
    """With lookahead 2: give the moves after each move raw, pooled by a learned network (sb3_policy.py)."""
    seed: int = 0
    learning_rate: float = 2e-3
    anneal_lr: bool = False
    """Decay the learning rate linearly from --learning-rate to 0 over --total-timesteps."""
    n_steps: int = 32
    batch_size: int = 256
    n_epochs: int = 4
    ent_coef: float = 0.01
    net_arch: list[int] = field(default_factory=lambda: list(NET_ARCH))
    """Layer widths of the MlpPolicy (--policy mlp)."""
    policy: Literal["per-action", "mlp"] = "per-action"
    """``per-action`` (MoveFeatures + PerActionPolicy, see sb3_policy.py) or ``mlp`` (MlpPolicy on the raw observation)."""
    hidden: int = HIDDEN
    """Width of the per-action policy's networks."""
    child_hidden: int = 0
    """With --children: width of the network that embeds each next move (0 = ``hidden``)."""
    activation: Literal["tanh", "relu"] = "relu"
    """Activation of the per-action policy's networks: ``tanh`` or ``relu``."""
    eval_split: Literal["validation", "test"] = "test"
    eval_limit: int = 0
    """Evaluate on the first N problems of the split (0 = all)."""
    eval_every: int = 5_000
    """Validation success is logged every this many steps (0 = never)."""
    eval_problems: int = 200
    """Validation problems (the first N of the split) behind each point of the curve."""
    checkpoint_every: int = 50_000
    output_dir: str = "runs/sb3"
    run_name: str = ""
    resume: bool = False
    threads: int = 1
    progress: bool = True
    report_to: str = "tensorboard"
    """Where the training metrics and the validation curve are also logged besides ``logs/progress.csv`` and
    ``curve.csv``: none, all, or a comma-separated list of transformers' integrations (tensorboard: ``logs/``)."""
    submit: str = ""
    """Write a leaderboard submission of the evaluation to this path."""
    evaluate_model: str = ""
    """Skip training: evaluate this saved model (a run's ``final_model.zip`` or a checkpoint) on --eval-split."""

    def __post_init__(self) -> None:
        for name, allowed in (("reward", REWARDS), ("lookahead", LOOKAHEADS), ("preset", sorted(SPLIT_SPEC))):
            dataclass_cli.check_choice(self, name, allowed)
        report_to_names(self.report_to)  # a ValueError naming --report-to
        if self.vec_env == "batched" and self.policy != "per-action":
            raise ValueError("--vec-env batched gives move-feature observations: use it with --policy per-action")
        if self.children and (self.lookahead != 2 or self.policy != "per-action"):
            raise ValueError("--children needs --lookahead 2 and --policy per-action")
        if self.child_hidden < 0 or (self.child_hidden and not self.children):
            raise ValueError("--child-hidden must be a positive width and needs --children")
        dataclass_cli.check_min(self, 1, "total_timesteps", "num_envs", "n_steps", "batch_size", "n_epochs", "hidden",
                                "checkpoint_every", "threads")
        dataclass_cli.check_min(self, 0, "eval_limit", "eval_every", "eval_problems", "learning_rate")
        if not self.net_arch or min(self.net_arch) < 1:
            raise ValueError(f"--net-arch must be positive layer widths, got {self.net_arch}")
        if self.policy == "per-action" and list(self.net_arch) != NET_ARCH:
            raise ValueError("--net-arch sets the MlpPolicy (--policy mlp); the per-action policy's width is --hidden")
        if self.policy == "mlp" and (self.hidden, self.activation) != (HIDDEN, "relu"):
            raise ValueError("--hidden and --activation set the per-action policy; the MlpPolicy's layers are --net-arch")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"--gamma must be in (0, 1], got {self.gamma}")


def parse_args(argv: list[str] | None = None) -> Args:
    """:class:`Args` from the command line (``countdown_gym.dataclass_cli``): bad input is a usage error (exit code 2)."""
    return dataclass_cli.parse(Args, argv, description=__doc__.split("\n\n")[0])


def wrap_reward(env: gym.Env, args: Args) -> gym.Env:
    """Add the chosen dense term (the wrappers report it in ``info["reward_terms"]``)."""
    from countdown_gym.wrappers import ContrastiveCriticReward, OracleReward

    if args.reward.startswith("oracle"):
        mode = args.reward.split("-", 1)[1]
        if mode == "potential":
            return OracleReward(env, mode="reachable", scale=args.scale, potential=True, gamma=args.gamma)
        return OracleReward(env, mode=mode, scale=args.scale)
    if args.reward.startswith("critic"):
        return ContrastiveCriticReward(env, scale=args.scale, potential=args.reward.endswith("potential"), gamma=args.gamma)
    return env


def make_env(args: Args, rank: int):
    def thunk() -> gym.Env:
        env = gym.make("Countdown-v0", preset=args.preset, split="train")
        env = wrap_reward(env, args)
        if args.policy == "per-action":
            env = MoveFeatures(env, lookahead=args.lookahead, log_ratios=args.log_ratios, children=args.children)
        env.reset(seed=args.seed * 1000 + rank)
        return env

    return thunk


def make_vec_env(args: Args) -> Any:
    """The training VecEnv (``--vec-env``)."""
    if args.vec_env == "dummy":
        from stable_baselines3.common.vec_env import DummyVecEnv

        return DummyVecEnv([make_env(args, i) for i in range(args.num_envs)])
    from baselines.sb3_vec_env import CountdownSB3VecEnv
    from countdown_gym.wrappers.critic import CachedScorer, load_scorer

    critic = CachedScorer(load_scorer(None)) if args.reward.startswith("critic") else None
    return CountdownSB3VecEnv(args.num_envs, args.reward, args.scale, args.gamma, args.lookahead, critic,
                              args.log_ratios, args.children, preset=args.preset, split="train")


def evaluate(
    model: Any,
    problems: list[Problem],
    preset: str,
    policy: str,
    lookahead: int = 1,
    log_ratios: bool = False,
    children: bool = False,
) -> tuple[float, list[list[tuple]]]:
    """Greedy, masked play of every problem: (success rate, the moves of each episode).

    All problems at once on the batched env when the rules allow (integer-only), else one by one.
    """
    env = gym.make("Countdown-v0", preset=preset)
    if policy == "per-action" and env.unwrapped.rules.integer_only:
        env.close()
        from baselines.sb3_vec_env import evaluate_batched

        return evaluate_batched(model, problems, preset, lookahead, log_ratios, children)
    if policy == "per-action":
        env = MoveFeatures(env, lookahead=lookahead, log_ratios=log_ratios, children=children)
    wins = 0
    all_moves: list[list[tuple]] = []
    for p in problems:
        obs, info = env.reset(options={"problem": p})
        moves: list[tuple] = []
        done = False
        reward = 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True, action_masks=info["action_mask"].astype(bool))
            obs, reward, terminated, truncated, info = env.step(int(action))
            moves.extend(t["move"] for t in info["transitions"])
            done = terminated or truncated
        wins += reward >= 1.0
        all_moves.append(moves)
    env.close()
    return wins / max(len(problems), 1), all_moves


def drop_rows_after(path: Path, column: str, steps: int) -> None:
    """On resume: drop the rows of a CSV log made after the checkpoint the run resumes from (they are redone)."""
    if not path.exists():
        return
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows or column not in rows[0]:
        return
    k = rows[0].index(column)
    keep = [rows[0]] + [r for r in rows[1:] if k >= len(r) or not r[k] or float(r[k]) <= steps]
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(keep)


def training_logger(folder: Path, resume: bool, report_to: str = "tensorboard", config: dict | None = None):
    """SB3 logger to ``progress.csv`` and the ``--report-to`` integrations (TensorBoard by SB3's own writer, in
    ``folder``; the others through :class:`countdown_gym.integrations.tracking.Tracker`); on resume the CSV is
    continued, not overwritten."""
    from stable_baselines3.common.logger import CSVOutputFormat, KVWriter, Logger, make_output_format

    from countdown_gym.integrations.tracking import TENSORBOARD, Tracker

    class TrackerOutput(KVWriter):
        def __init__(self, names: list[str]) -> None:
            self.tracker = Tracker(names, folder, config=config)

        def write(self, key_values: dict, key_excluded: dict, step: int = 0) -> None:
            self.tracker.log({k.replace("/", "_", 1) if k.startswith("eval/") else k: v for k, v in key_values.items()}, step)

        def close(self) -> None:
            self.tracker.close()

    class ContinuedCSV(CSVOutputFormat):
        def __init__(self, filename: Path) -> None:
            if not (resume and filename.exists() and filename.stat().st_size):
                super().__init__(str(filename))
                return
            self.file = filename.open("r+")
            self.keys = self.file.readline().rstrip("\n").split(",")
            self.separator, self.quotechar = ",", '"'
            self.file.seek(0, 2)

    folder.mkdir(parents=True, exist_ok=True)
    names = report_to_names(report_to)
    outputs = [ContinuedCSV(folder / "progress.csv")]
    if TENSORBOARD in names:
        outputs.append(make_output_format("tensorboard", str(folder)))
    if [n for n in names if n != TENSORBOARD]:
        outputs.append(TrackerOutput([n for n in names if n != TENSORBOARD]))
    return Logger(str(folder), outputs)


FEATURE_FLAGS = ("preset", "reward", "seed", "policy", "lookahead", "log_ratios", "children", "hidden", "net_arch")


RESUME_MAY_CHANGE = ("total_timesteps", "resume", "progress", "threads", "eval_split", "eval_limit", "eval_every",
                     "eval_problems", "checkpoint_every", "output_dir", "run_name", "submit", "evaluate_model", "report_to")
"""The flags a ``--resume`` may change; the saved model keeps its own hyperparameters, so any other change is refused."""


def evaluate_saved(args: Args, command: str) -> dict[str, Any]:
    """``--evaluate-model``: greedy evaluation of a saved model, with its run's feature flags when ``args.json`` is found."""
    path = Path(args.evaluate_model)
    if not path.is_file():
        raise SystemExit(f"--evaluate-model: no such file {path}")
    saved = next((p / "args.json" for p in (path.parent, path.parent.parent) if (p / "args.json").is_file()), None)
    if saved is not None:
        old = json.loads(saved.read_text())
        args = dataclasses.replace(args, **{k: old[k] for k in FEATURE_FLAGS if k in old})
        print(f"--evaluate-model: features and reward label from {saved}")
    custom = {"policy_class": PerActionPolicy} if args.policy == "per-action" else {}
    try:
        model = load_model(path, device="cpu", custom_objects=custom)
    except Exception as e:  # not a zip, or not a MaskablePPO save
        raise SystemExit(f"--evaluate-model: {path} is not a saved MaskablePPO model ({type(e).__name__}: {e})") from None
    env = gym.make("Countdown-v0", preset=args.preset)
    if args.policy == "per-action":
        env = MoveFeatures(env, lookahead=args.lookahead, log_ratios=args.log_ratios, children=args.children)
    if model.observation_space.shape != env.observation_space.shape:
        raise SystemExit(
            f"--evaluate-model: the model reads observations of shape {model.observation_space.shape}, but --preset "
            f"{args.preset} --policy {args.policy} --lookahead {args.lookahead} --log-ratios {args.log_ratios} "
            f"--children {args.children} give {env.observation_space.shape}; pass the flags the model was trained with"
        )
    env.close()
    problems = load_split(args.preset, args.eval_split)
    if args.eval_limit:
        problems = problems[: args.eval_limit]
    t1 = time.time()
    rate, moves = evaluate(model, problems, args.preset, args.policy, args.lookahead, args.log_ratios, args.children)
    result = {
        "model": str(path), "preset": args.preset, "reward": args.reward, "seed": args.seed,
        "total_timesteps": model.num_timesteps, "eval_split": args.eval_split, "eval_problems": len(problems),
        "success_rate": rate, "train_seconds": None, "eval_seconds": round(time.time() - t1, 1),
        "lookahead": args.lookahead, "log_ratios": args.log_ratios, "children": args.children,
    }
    print(json.dumps(result))
    if args.submit:
        write_submission(args, problems, moves, result, command)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback

    torch.set_num_threads(args.threads)
    if args.evaluate_model:
        return evaluate_saved(args, " ".join(["python", "baselines/sb3_ppo.py", *(argv if argv is not None else sys.argv[1:])]))
    name = args.run_name or f"{args.preset}-{args.reward}-s{args.seed}"
    out = dataclass_cli.output_dir(Path(args.output_dir) / name, f"--output-dir {args.output_dir}")
    checkpoints = sorted(out.glob("checkpoints/model_*_steps.zip"), key=lambda p: int(p.stem.split("_")[1]))
    if not args.resume and (checkpoints or (out / "args.json").is_file()):
        raise SystemExit(f"{out} holds a run already: --resume continues it; to start over use another --run-name "
                         "or delete that directory")
    if args.resume and checkpoints and (out / "args.json").is_file():
        changed = dataclass_cli.changed_options(json.loads((out / "args.json").read_text()), args, RESUME_MAY_CHANGE)
        if changed:
            raise SystemExit(f"--resume: {out} was trained with {', '.join(changed)}; the checkpoint would keep its "
                             "own values: resume with the same flags or use another --run-name")
    (out / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))

    vec = make_vec_env(args)
    if args.policy == "per-action":
        policy_class, policy_kwargs = PerActionPolicy, {"hidden": args.hidden, "activation": args.activation}
        if args.children:
            policy_kwargs.update(children=True, child_hidden=args.child_hidden or None)
    else:
        policy_class, policy_kwargs = "MlpPolicy", {"net_arch": list(args.net_arch)}
    model = None
    for path in reversed(checkpoints if args.resume else []):  # the newest readable one (a kill may truncate a zip)
        try:
            model = MaskablePPO.load(path, env=vec, device="cpu", custom_objects={"policy_class": policy_class})
        except Exception as exc:  # noqa: BLE001 - zipfile, pickle and torch errors of a half-written file
            print(f"--resume: {path} is not readable ({type(exc).__name__}: {exc}); trying the one before")
            continue
        model.set_random_seed(args.seed + model.num_timesteps)  # SB3 saves no RNG state: a resumed run is at least repeatable
        print(f"resumed from {path} at {model.num_timesteps} steps")
        break
    if args.resume and checkpoints and model is None:
        raise SystemExit(f"--resume: no checkpoint in {out / 'checkpoints'} is readable; use another --run-name to start afresh")
    resumed = model is not None
    if resumed:
        drop_rows_after(out / "logs" / "progress.csv", "time/total_timesteps", model.num_timesteps)
        drop_rows_after(out / "curve.csv", "steps", model.num_timesteps)
    else:
        if args.resume:
            print(f"--resume: no checkpoint in {out / 'checkpoints'}, starting fresh")
        (out / "curve.csv").unlink(missing_ok=True)  # a fresh start begins a fresh curve
        from stable_baselines3.common.utils import LinearSchedule

        learning_rate = LinearSchedule(args.learning_rate, 0.0, 1.0) if args.anneal_lr else args.learning_rate
        model = MaskablePPO(
            policy_class, vec, learning_rate=learning_rate, n_steps=args.n_steps, batch_size=args.batch_size,
            n_epochs=args.n_epochs, gamma=args.gamma, ent_coef=args.ent_coef, seed=args.seed, device="cpu",
            policy_kwargs=policy_kwargs,
        )
    model.set_logger(training_logger(out / "logs", resume=resumed, report_to=args.report_to,
                                     config=dataclasses.asdict(args)))

    validation = load_split(args.preset, "validation")[: args.eval_problems]
    curve_path = out / "curve.csv"

    class ValidationCurve(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            every = args.eval_every or 1 << 62
            self.next_eval = (model.num_timesteps // every + 1) * every

        def _on_training_start(self) -> None:
            if not curve_path.exists():
                with curve_path.open("w", newline="") as f:
                    csv.writer(f).writerow(["steps", "validation_success", "seconds"])
            with curve_path.open(newline="") as f:
                rows = list(csv.DictReader(f))
            # a resumed run's seconds continue from the kept rows' (training time of the whole run)
            self.t0 = time.time() - (float(rows[-1]["seconds"]) if rows else 0.0)
            self.eval_seconds = 0.0

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_eval:
                t = time.time()
                rate, _ = evaluate(self.model, validation, args.preset, args.policy, args.lookahead, args.log_ratios,
                                   args.children)
                self.eval_seconds += time.time() - t
                with curve_path.open("a", newline="") as f:
                    csv.writer(f).writerow([self.num_timesteps, f"{rate:.4f}", f"{time.time() - self.t0:.1f}"])
                self.logger.record("eval/validation_success", rate)  # written with the rollout's metrics
                self.next_eval += args.eval_every or 1 << 62
            return True

    class StopAfterUpdate(BaseCallback):
        """Ctrl-C: finish the rollout being collected and its update, then stop before the next rollout."""

        def _on_rollout_start(self) -> None:
            self.fresh = True

        def _on_step(self) -> bool:
            if self.fresh and stop.requested:
                return False
            self.fresh = False
            return True

    curve = ValidationCurve()
    callbacks = CallbackList([
        CheckpointCallback(max(args.checkpoint_every // args.num_envs, 1), str(out / "checkpoints"), name_prefix="model"),
        curve,
        StopAfterUpdate(),
    ])
    t0 = time.time()
    steps_before = model.num_timesteps
    remaining = max(args.total_timesteps - model.num_timesteps, 0)
    with StopRequest("Ctrl-C: stopping after this rollout's update and saving a checkpoint (Ctrl-C again to stop at once)") as stop:
        model.learn(remaining, callback=callbacks, progress_bar=args.progress, reset_num_timesteps=False)
    train_seconds = time.time() - t0
    if stop.requested and model.num_timesteps < args.total_timesteps:
        path = out / "checkpoints" / f"model_{model.num_timesteps}_steps.zip"
        model.save(path)
        vec.close()
        print(f"stopped by Ctrl-C at {model.num_timesteps} steps; --resume continues from {path}")
        return {"interrupted": True, "total_timesteps": model.num_timesteps, "checkpoint": str(path)}
    model.save(out / "final_model")

    problems = load_split(args.preset, args.eval_split)
    if args.eval_limit:
        problems = problems[: args.eval_limit]
    t1 = time.time()
    rate, moves = evaluate(model, problems, args.preset, args.policy, args.lookahead, args.log_ratios, args.children)
    eval_seconds = time.time() - t1
    result = {
        "run": name, "preset": args.preset, "reward": args.reward, "seed": args.seed,
        "total_timesteps": model.num_timesteps, "eval_split": args.eval_split, "eval_problems": len(problems),
        "success_rate": rate, "train_seconds": round(train_seconds, 1),
        "env_steps_per_second": round((model.num_timesteps - steps_before) / max(train_seconds, 1e-9), 1),
        "validation_seconds": round(getattr(curve, "eval_seconds", 0.0), 1), "eval_seconds": round(eval_seconds, 1),
        "vec_env": args.vec_env, "lookahead": args.lookahead, "log_ratios": args.log_ratios, "children": args.children,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    if args.submit:
        write_submission(args, problems, moves, result, " ".join(["python", "baselines/sb3_ppo.py", *(argv if argv is not None else sys.argv[1:])]))
    vec.close()
    return result


def write_submission(args: Args, problems: list[Problem], moves: list[list[tuple]], result: dict[str, Any], command: str) -> None:
    """The evaluation as a leaderboard submission (re-verified by the leaderboard)."""
    from countdown_gym.leaderboard import write_submission as write

    write(
        args.submit,
        agent=f"MaskablePPO ({args.reward})",
        authors="countdown-gym baselines",
        model="MaskablePPO " + (f"PerActionPolicy hidden {args.hidden}" if args.policy == "per-action" else "MlpPolicy " + "x".join(map(str, args.net_arch))),
        model_size=None,
        method="PPO with action masks",
        reward_variant=args.reward,
        preset=args.preset,
        split=args.eval_split,
        problems=problems,
        moves=[[list(m) for m in ms] for ms in moves],
        sampling={"k": 1, "temperature": 0.0},
        compute=f"{result['total_timesteps']} env steps"
        + (f", {result['train_seconds']} s on CPU" if result.get("train_seconds") is not None else ""),
        command=command,
    )


if __name__ == "__main__":
    raise SystemExit(130 if main().get("interrupted") else 0)  # 130: stopped by Ctrl-C, resumable
