"""MaskablePPO on Countdown-v0 with a chosen reward: the cheap testbed for dense rewards.

    python baselines/sb3_ppo.py --reward oracle-perfect --total-timesteps 100000 --seed 1

Trains sb3-contrib's MaskablePPO with action masks on a preset's train split and evaluates it greedily on the frozen
validation or test split (``--evaluate-model``: a saved model, without training). ``--reward``: a ``step`` variant
of ``countdown_gym.rewards.variants``. The policy reads move features (``baselines/sb3/features.py``) and never
consults the solver, the oracle or any search beyond them. Settings, outputs and results: ``docs/sb3_baseline.md``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import CallbackList
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import DummyVecEnv

import countdown_gym  # noqa: F401  (registers the environments)
from baselines.sb3.callbacks import AtomicCheckpoints, StopAfterUpdate, ValidationCurve, save_atomic, training_logger
from baselines.sb3.features import LOOKAHEADS
from baselines.sb3.policy import MoveFeatures, PerActionPolicy, load_model
from baselines.sb3.vec_env import CountdownSB3VecEnv, evaluate_batched
from countdown_gym import dataclass_cli, load_split
from countdown_gym.data.splits import SPLIT_RULES, SPLIT_SPEC
from countdown_gym.leaderboard.agents import evaluate_policy
from countdown_gym.rewards.terms import CachedScorer
from countdown_gym.rewards.variants import get_variant, variant_names
from countdown_gym.runkit.runs import (
    MetricsLog,
    StopRequest,
    not_regular,
    prepare_run,
    read_options,
    truncate_rows,
    write_text_atomic,
)
from countdown_gym.runkit.tracking import report_to_names

NET_ARCH = [256, 256]  # the MlpPolicy's default layers
HIDDEN = 64  # the per-action policy's default width


@dataclass
class Args:
    """Every field is a command-line flag (``--total-timesteps 100000``)."""

    # the task and its reward
    preset: str = "longproc-0.5k"  # Preset whose train split the agent plays (its validation / test split evaluate it).
    reward: str = "sparse"  # Reward variant: a ``step`` variant of the registry (see above).
    scale: float = 0.1  # Size of the dense term per step (the sparse reward is 1).
    gamma: float = 1.0  # PPO's discount, also the potential-based shaping's.
    # environments and features
    total_timesteps: int = 100_000  # Environment steps of the whole run (a --resume may raise it).
    vec_env: Literal["batched", "dummy"] = "batched"  # CountdownSB3VecEnv (fast) or DummyVecEnv of single envs.
    num_envs: int = 64  # Games played side by side.
    lookahead: int = 2  # Depth of the move features: 1 = each move's afterstate, 2 = also the moves after it.
    log_ratios: bool = True  # Also encode each afterstate's numbers as log(x / target) (baselines/sb3/features.py).
    children: bool = False  # With lookahead 2: the moves after each move raw, pooled by a learned network.
    # PPO
    seed: int = 0  # Seed of the model, the environments' problem order and the run's default name.
    learning_rate: float = 2e-3
    anneal_lr: bool = False  # Decay the learning rate linearly from --learning-rate to 0 over --total-timesteps.
    n_steps: int = 32  # Steps per environment in each rollout.
    batch_size: int = 256  # Minibatch size of the PPO update.
    n_epochs: int = 4  # Passes over each rollout.
    ent_coef: float = 0.01  # Entropy bonus.
    # the policy
    net_arch: list[int] = field(default_factory=lambda: list(NET_ARCH))  # Layer widths of the MlpPolicy (--policy mlp).
    policy: Literal["per-action", "mlp"] = "per-action"  # MoveFeatures + PerActionPolicy, or MlpPolicy on the raw obs.
    hidden: int = HIDDEN  # Width of the per-action policy's networks.
    child_hidden: int = 0  # With --children: width of the network that embeds each next move (0 = ``hidden``).
    activation: Literal["tanh", "relu"] = "relu"  # Activation of the per-action policy's networks.
    # evaluation
    eval_split: Literal["validation", "test"] = "test"  # the split of the final greedy evaluation
    eval_limit: int = 0  # evaluate on the first N problems of the split (0 = all)
    eval_every: int = 5_000  # validation success is logged every this many steps (0 = never)
    eval_problems: int = 200  # validation problems (the first N of the split) behind each point of the curve
    # the run (docs/runs.md)
    output_dir: str = "runs/sb3"  # the folder of the run directories
    run_name: str = ""  # the run directory in --output-dir (default: <preset>-<reward>-s<seed>)
    resume: bool = False  # continue the run from its newest checkpoint
    checkpoint_every: int = 50_000  # environment steps between checkpoints (checkpoints/model_N_steps.zip)
    threads: int = 1  # torch threads
    progress: bool = True  # show a progress bar
    report_to: str = "tensorboard"
    """Where the training metrics and the validation curve are also logged besides ``logs/progress.csv`` and
    ``curve.csv``: none, all, or a comma-separated list of transformers' integrations (tensorboard: ``logs/``)."""
    submit: str = ""  # Write a leaderboard submission of the evaluation to this path.
    evaluate_model: str = ""  # Skip training: evaluate this saved model (final_model.zip or a checkpoint).

    def __post_init__(self) -> None:
        for name, allowed in (("reward", variant_names("step")), ("lookahead", LOOKAHEADS), ("preset", sorted(SPLIT_SPEC))):
            dataclass_cli.check_choice(self, name, allowed)
        report_to_names(self.report_to)  # a ValueError naming --report-to
        if self.vec_env == "batched" and self.policy != "per-action":
            raise ValueError("--vec-env batched gives move-feature observations: use it with --policy per-action")
        if not SPLIT_RULES[self.preset].integer_only and ((self.vec_env == "batched" and not self.evaluate_model) or (
                self.policy == "per-action" and (self.lookahead > 1 or self.log_ratios or self.children))):
            raise ValueError(f"--preset {self.preset} has rational rules: --vec-env batched, --lookahead 2, --log-ratios and "
                             "--children need integer-only ones (use --vec-env dummy --lookahead 1 --no-log-ratios)")
        if self.children and (self.lookahead != 2 or self.policy != "per-action"):
            raise ValueError("--children needs --lookahead 2 and --policy per-action")
        if self.child_hidden < 0 or (self.child_hidden and not self.children):
            raise ValueError("--child-hidden must be a positive width and needs --children")
        dataclass_cli.check_min(self, 1, "total_timesteps", "num_envs", "n_steps", "batch_size", "n_epochs", "hidden",
                                "checkpoint_every", "threads", "eval_problems")  # 0 validation problems: a curve of 0.0
        dataclass_cli.check_min(self, 0, "eval_limit", "eval_every", "learning_rate")
        rollout = self.num_envs * self.n_steps  # cut into minibatches of --batch-size, the last one shorter
        if self.batch_size == 1 or rollout % self.batch_size == 1:  # its advantage's std: NaN
            raise ValueError(f"--batch-size {self.batch_size} with --num-envs {self.num_envs} --n-steps {self.n_steps} "
                             f"(a rollout of {rollout} steps) leaves a minibatch of one step, which PPO cannot normalise")
        if not self.net_arch or min(self.net_arch) < 1:
            raise ValueError(f"--net-arch must be positive layer widths, got {self.net_arch}")
        if self.policy == "per-action" and list(self.net_arch) != NET_ARCH:
            raise ValueError("--net-arch sets the MlpPolicy (--policy mlp); the per-action policy's width is --hidden")
        if self.policy == "mlp" and (self.hidden, self.activation) != (HIDDEN, "relu"):
            raise ValueError("--hidden and --activation set the per-action policy; the MlpPolicy's layers are --net-arch")
        if self.submit and self.eval_limit:
            raise ValueError(f"--submit writes a leaderboard submission of the whole split: drop --eval-limit {self.eval_limit}")
        if not 0 <= self.seed < 2**31:  # numpy's seeding takes [0, 2**32); a resume seeds seed + steps
            raise ValueError(f"--seed must be in [0, 2**31), got {self.seed}")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"--gamma must be in (0, 1], got {self.gamma}")
        if not self.eval_every:
            dataclass_cli.check_unused(self, "--eval-every 0 (no validation curve)", only=("eval_problems",))
        if self.evaluate_model:  # it trains nothing: the flags of the training and of its run are refused
            dataclass_cli.check_unused(self, "--evaluate-model", skip=(*FEATURE_FLAGS, "eval_split", "eval_limit",
                                                                       "threads", "progress", "submit", "evaluate_model"))


def parse_args(argv: list[str] | None = None) -> Args:
    """:class:`Args` from the command line (``countdown_gym.dataclass_cli``): bad input is a usage error (exit code 2)."""
    return dataclass_cli.parse(Args, argv, description=__doc__.split("\n\n")[0])


def reward_scorer(args: Args) -> Any:
    """What the ``--reward`` variant needs passed in: the shipped state critic for ``needs="critic"``, else None."""
    if get_variant(args.reward).needs != "critic":
        return None
    from critics import load_state_critic

    return load_state_critic()


def wrap_reward(env: gym.Env, args: Args, scorer: Any = None) -> gym.Env:
    """Add the ``--reward`` variant's term (the registry's wrapper, reported in ``info["reward_terms"]``)."""
    scorer = scorer if scorer is not None else reward_scorer(args)
    return get_variant(args.reward, "step").wrap(env, scale=args.scale, gamma=args.gamma, scorer=scorer)


def with_features(env: gym.Env, args: Args) -> gym.Env:
    """``env`` with the per-action policy's move features (``--policy per-action``), else as it is."""
    if args.policy != "per-action":
        return env
    return MoveFeatures(env, lookahead=args.lookahead, log_ratios=args.log_ratios, children=args.children)


def make_env(args: Args, rank: int, scorer: Any = None):
    def thunk() -> gym.Env:
        env = with_features(wrap_reward(gym.make("Countdown-v0", preset=args.preset, split="train"), args, scorer), args)
        env.reset(seed=args.seed * 1000 + rank)
        return env

    return thunk


def make_vec_env(args: Args) -> Any:
    """The training VecEnv (``--vec-env``); the variant's scorer is loaded once, shared by the envs."""
    scorer = reward_scorer(args)
    if args.vec_env == "dummy":
        return DummyVecEnv([make_env(args, i, scorer) for i in range(args.num_envs)])
    return CountdownSB3VecEnv(args.num_envs, args.reward, args.scale, args.gamma, args.lookahead,
                              None if scorer is None else CachedScorer(scorer), args.log_ratios, args.children,
                              preset=args.preset, split="train")


def evaluate(model: Any, split: str, limit: int | None, args: Args) -> tuple[float, list[list[tuple]]]:
    """Greedy, masked play of the first ``limit`` problems of ``split`` with ``args``' features: (success rate, the
    moves of each episode). All at once on the batched env when the rules allow (integer-only), else one by one
    (the leaderboard's ``evaluate_policy``)."""
    if args.policy == "per-action" and SPLIT_RULES[args.preset].integer_only:
        problems = load_split(args.preset, split)[:limit]
        return evaluate_batched(model, problems, args.preset, args.lookahead, args.log_ratios, args.children)
    played = evaluate_policy(model, args.preset, split, limit=limit, progress=False,
                             wrapper=lambda env: with_features(env, args))
    return played.success_rate, played.moves


def final_evaluation(model: Any, args: Args, command: str, result: dict[str, Any], save: Path | None = None) -> dict[str, Any]:
    """``result`` with the greedy evaluation on the first ``--eval-limit`` problems of ``--eval-split``, written to
    ``save`` (if given), printed, and with ``--submit`` written as a leaderboard submission."""
    t1 = time.time()
    rate, moves = evaluate(model, args.eval_split, args.eval_limit or None, args)  # the moves of each problem played
    result = {**result, "total_timesteps": model.num_timesteps, "eval_split": args.eval_split,
              "eval_problems": len(moves), "success_rate": rate, "eval_seconds": round(time.time() - t1, 1),
              "lookahead": args.lookahead, "log_ratios": args.log_ratios, "children": args.children}
    if save is not None:
        write_text_atomic(save, json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    if args.submit:  # never with --eval-limit: the whole split
        write_submission(args, moves, result, command)
    return result


FEATURE_FLAGS = ("preset", "reward", "seed", "policy", "vec_env", "lookahead", "log_ratios", "children", "hidden", "net_arch")


RESUME_MAY_CHANGE = ("total_timesteps", "resume", "progress", "threads", "eval_split", "eval_limit", "eval_every",
                     "eval_problems", "checkpoint_every", "output_dir", "run_name", "submit", "evaluate_model", "report_to")
"""The flags a ``--resume`` may change; the saved model keeps its own hyperparameters, so any other change is refused."""
START_OVER = "use another --run-name"


def evaluate_saved(args: Args, command: str) -> dict[str, Any]:
    """``--evaluate-model``: greedy evaluation of a saved model, with its run's feature flags when its ``options.json`` is found."""
    path = Path(args.evaluate_model)
    if not path.is_file():
        raise SystemExit(f"--evaluate-model: no such file {path}")
    run = next((p for p in (path.parent, path.parent.parent) if saved_options(p) is not None), None)
    if run is not None:
        old, default = saved_options(run) or {}, Args()  # a flag given on the command line wins (--preset hard)
        try:
            args = dataclasses.replace(args, **{k: old[k] for k in FEATURE_FLAGS if k in old and getattr(args, k) == getattr(default, k)})
        except ValueError as exc:  # the run's features do not fit a preset given
            raise SystemExit(f"--evaluate-model: with the features of {run}: {exc}") from None
        print(f"--evaluate-model: the features and reward label not given from the options of {run}")
    custom = {"policy_class": PerActionPolicy} if args.policy == "per-action" else {}
    try:
        model = load_model(path, device="cpu", custom_objects=custom)
    except Exception as e:  # not a zip, or not a MaskablePPO save
        raise SystemExit(f"--evaluate-model: {path} is not a saved MaskablePPO model ({type(e).__name__}: {e})") from None
    env = with_features(gym.make("Countdown-v0", preset=args.preset), args)
    if model.observation_space.shape != env.observation_space.shape:
        raise SystemExit(
            f"--evaluate-model: the model reads observations of shape {model.observation_space.shape}, but --preset "
            f"{args.preset} --policy {args.policy} --lookahead {args.lookahead} --log-ratios {args.log_ratios} "
            f"--children {args.children} give {env.observation_space.shape}; pass the flags the model was trained with"
        )
    env.close()
    return final_evaluation(model, args, command, {"model": str(path), "preset": args.preset, "reward": args.reward,
                                                   "seed": args.seed, "train_seconds": None})


def saved_options(run: Path) -> dict[str, Any] | None:
    """The options of the run kept in ``run`` (``options.json``; ``args.json`` in runs made before the run kit)."""
    return read_options(run) or read_options(run, "args.json")


def find_checkpoints(folder: Path, say: bool = False) -> tuple[list[Path], dict[int, Path]]:
    """The regular files ``model_<steps>_steps.zip`` in ``folder``, oldest first, and by step the folders of such a
    name; any other entry of that name is skipped, never opened (said when ``say``)."""
    found, folders = [], {}
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        if (m := re.fullmatch(r"model_([0-9]+)_steps\.zip", p.name)) is None:
            continue
        kind = not_regular(p) or (None if p.is_file() else "a dangling link")
        if kind is None:
            found.append((int(m[1]), p))
            continue
        if kind == "a folder":
            folders[int(m[1])] = p
        if say:
            print(f"--resume: {p} is {kind}, not a regular file: skipped, never opened")
    return [p for _, p in sorted(found)], folders


def check_outputs(out: Path) -> None:
    """Exit naming the first entry of ``out`` the run cannot write to, before any work."""
    for sub in ("checkpoints", "logs"):
        if (out / sub).exists() and not (out / sub).is_dir():
            raise SystemExit(f"{out / sub} is not a folder; the run writes there: remove it or {START_OVER}")
    progress = out / "logs" / "progress.csv"
    if (kind := not_regular(progress)) is not None:
        raise SystemExit(f"{progress} is {kind}, not a regular file; the run's training log is written there: remove it "
                         f"or {START_OVER}")
    for name in ("final_model.zip", "result.json"):
        if not (out / name).is_symlink() and (out / name).is_dir():
            raise SystemExit(f"{out / name} is a folder; the run saves its {name} there: remove it or {START_OVER}")


def policy_setup(args: Args) -> tuple[Any, dict[str, Any]]:
    """The policy class (or SB3's name of it) and its keyword arguments."""
    if args.policy != "per-action":
        return "MlpPolicy", {"net_arch": list(args.net_arch)}
    kwargs: dict[str, Any] = {"hidden": args.hidden, "activation": args.activation}
    if args.children:
        kwargs.update(children=True, child_hidden=args.child_hidden or None)
    return PerActionPolicy, kwargs


def load_last_checkpoint(checkpoints: list[Path], vec: Any, policy_class: Any, seed: int) -> Any:
    """The newest readable checkpoint, loaded (a kill may truncate a zip); exits when none is."""
    for path in reversed(checkpoints):
        try:
            model = load_model(path, env=vec, device="cpu", custom_objects={"policy_class": policy_class})
        except Exception as exc:  # noqa: BLE001 - zipfile, pickle and torch errors of a half-written file
            print(f"--resume: {path} is not readable ({type(exc).__name__}: {exc}); trying the one before")
            continue
        model.set_random_seed(seed + model.num_timesteps)  # SB3 saves no RNG state: a resumed run is at least repeatable
        print(f"resumed from {path} at {model.num_timesteps} steps")
        return model
    raise SystemExit(f"--resume: no checkpoint in {checkpoints[0].parent} is readable; use another --run-name to start afresh")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    command = " ".join(["python", "baselines/sb3_ppo.py", *(argv if argv is not None else sys.argv[1:])])
    if args.submit and (kind := not_regular(args.submit)):  # written last: a device (/dev/null) would become a file
        raise SystemExit(f"--submit {args.submit} is {kind}; name a file")
    if args.evaluate_model:
        return evaluate_saved(args, command)
    name = args.run_name or f"{args.preset}-{args.reward}-s{args.seed}"
    out = Path(args.output_dir) / name
    checkpoints, folders = find_checkpoints(out / "checkpoints", say=args.resume)
    check_outputs(out)
    out = prepare_run(out, "--output-dir", args, resume=args.resume, resuming=args.resume and bool(checkpoints),
                      may_change=RESUME_MAY_CHANGE, markers=("args.json", *(f"checkpoints/{p.name}" for p in checkpoints)),
                      start_over=START_OVER,  # a run made before options.json is compared with its args.json
                      saved_as=lambda saved, run=out: saved if saved is not None else saved_options(run))

    vec = make_vec_env(args)
    policy_class, policy_kwargs = policy_setup(args)
    model = load_last_checkpoint(checkpoints, vec, policy_class, args.seed) if args.resume and checkpoints else None
    resumed = model is not None
    start = model.num_timesteps if resumed else 0
    if later := [p for step, p in sorted(folders.items()) if step > start]:  # a save there would fail
        raise SystemExit(f"{later[0]} is a folder, where this run saves its checkpoint of that step: remove it and "
                         "--resume again")
    if resumed:
        truncate_rows(out / "logs" / "progress.csv", model.num_timesteps, "time/total_timesteps")
    else:
        if args.resume:
            print(f"--resume: no checkpoint in {out / 'checkpoints'}, starting fresh")
        learning_rate = LinearSchedule(args.learning_rate, 0.0, 1.0) if args.anneal_lr else args.learning_rate
        model = MaskablePPO(
            policy_class, vec, learning_rate=learning_rate, n_steps=args.n_steps, batch_size=args.batch_size,
            n_epochs=args.n_epochs, gamma=args.gamma, ent_coef=args.ent_coef, seed=args.seed, device="cpu",
            policy_kwargs=policy_kwargs,
        )
    model.set_logger(training_logger(out / "logs", resume=resumed, report_to=args.report_to,
                                     config=dataclasses.asdict(args)))
    curve = ValidationCurve(
        lambda m: evaluate(m, "validation", args.eval_problems, args)[0],
        MetricsLog(out / "curve.csv", step="steps", resume_step=model.num_timesteps if resumed else None),
        args.eval_every, model.num_timesteps)
    t0 = time.time()
    steps_before = model.num_timesteps
    remaining = max(args.total_timesteps - model.num_timesteps, 0)
    with StopRequest("stopping after this rollout's update and saving a checkpoint (Ctrl-C again to stop at once)") as stop:
        checkpointing = AtomicCheckpoints(max(args.checkpoint_every // args.num_envs, 1), str(out / "checkpoints"),
                                          name_prefix="model")
        model.learn(remaining, callback=CallbackList([checkpointing, curve, StopAfterUpdate(stop)]),
                    progress_bar=args.progress, reset_num_timesteps=False)
    train_seconds = time.time() - t0
    if stop.requested and model.num_timesteps < args.total_timesteps:
        path = out / "checkpoints" / f"model_{model.num_timesteps}_steps.zip"
        save_atomic(model, path)
        vec.close()
        print(f"stopped at {model.num_timesteps} steps; --resume continues from {path}")
        return {"interrupted": True, "total_timesteps": model.num_timesteps, "checkpoint": str(path)}
    save_atomic(model, out / "final_model.zip")
    result = {"run": name, "preset": args.preset, "reward": args.reward, "seed": args.seed,
              "train_seconds": round(train_seconds, 1),
              "env_steps_per_second": round((model.num_timesteps - steps_before) / max(train_seconds, 1e-9), 1),
              "validation_seconds": round(curve.eval_seconds, 1), "vec_env": args.vec_env}
    result = final_evaluation(model, args, command, result, save=out / "result.json")
    vec.close()
    return result


def write_submission(args: Args, moves: list[list[tuple]], result: dict[str, Any], command: str) -> None:
    """The evaluation as a leaderboard submission (re-verified by the leaderboard)."""
    from countdown_gym.leaderboard import write_submission as write

    net = f"PerActionPolicy hidden {args.hidden}" if args.policy == "per-action" else "MlpPolicy " + "x".join(map(str, args.net_arch))
    seconds = f", {result['train_seconds']} s on CPU" if result.get("train_seconds") is not None else ""
    write(args.submit, agent=f"MaskablePPO ({args.reward})", authors="countdown-gym baselines", model=f"MaskablePPO {net}",
          model_size=None, method="PPO with action masks", reward_variant=args.reward, preset=args.preset,
          split=args.eval_split, moves=[[list(m) for m in ms] for ms in moves],
          sampling={"k": 1, "temperature": 0.0}, compute=f"{result['total_timesteps']} env steps{seconds}", command=command)


if __name__ == "__main__":
    dataclass_cli.run_script(main)  # 130: stopped by Ctrl-C, resumable
