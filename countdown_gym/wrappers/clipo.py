"""``CLIPOGroupReward``: CLIPO (``docs/rewards.md``) on the Gymnasium side, a vector of environments in groups of
``group_size`` that play one puzzle. A finished member's :class:`Trajectory` goes to ``embed_fn``; when the whole
group has finished, a CLIPO trainer (:class:`GroupTrainer`, passed in) turns the embeddings and outcomes into CLIPO
rewards, added at the end of each episode.

The group-hold protocol. A member that finishes first is held: its terminal step is reported with reward 0,
``terminated = truncated = False``, ``info["clipo_waiting"] = False``; after that its actions are ignored and its
final observation repeated (reward 0, ``clipo_waiting`` True, an all-ones action mask). On the step the last member
finishes, every member reports its real flags and ``reward = held terminal reward + clipo``, with
``info["reward_terms"]`` (the held terms and ``"clipo"``), ``info["clipo"]``, ``info["clipo_correct"]`` and
``info["clipo_held_steps"]`` (steps since its last real decision). The next step resets the group to a new puzzle
(next-step autoreset, actions ignored, reward 0). Leave ``clipo_waiting`` steps out of the policy-gradient loss but
keep their rewards in the returns.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from countdown_gym.rewards.variants import env_name


@dataclass
class Trajectory:
    """One member's finished episode, for ``embed_fn`` and ``correct_fn``: the reset observation and one per step,
    the actions, per-step rewards, transition records and the final step's info."""

    index: int
    group: int
    problem: Any
    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    final_info: dict[str, Any] = field(default_factory=dict)
    correct: bool | None = None


EmbedFn = Callable[[Trajectory], Any]
CorrectFn = Callable[[Trajectory], bool]


class GroupTrainer(Protocol):
    """A CLIPO trainer (``critics.clipo.CLIPOTrainer``): ``step`` returns one reward per rollout, ``last_stats`` its
    statistics; a ``config.dim_in`` is checked against the embeddings."""

    last_stats: dict[str, float]

    def step(self, embeddings: Any, correct: Any, group_ids: Any) -> Any: ...


TrainerFactory = Callable[[int], GroupTrainer]
"""``dim_in -> trainer``, e.g. ``functools.partial(critics.clipo.CLIPOTrainer, dim_out=64)``."""


def is_success(trajectory: Trajectory) -> bool:
    """The default outcome: ``final_info["is_success"]`` (what Countdown-v0 and CountdownText-v0 report)."""
    if "is_success" not in trajectory.final_info:
        raise ValueError("CLIPOGroupReward decides correctness from info['is_success'] of the final step, which this "
                         f"environment does not report (keys {sorted(trajectory.final_info)}); pass correct_fn=...")
    return bool(trajectory.final_info["is_success"])


_ACTIVE, _WAITING, _ENDED = 0, 1, 2


class CLIPOGroupReward(VectorEnv):
    """A vector of Countdown environments in groups that share a puzzle, with the CLIPO reward.

    Args:
        env_fns: One callable per member returning an environment with the same spaces that accepts
            ``reset(options={"problem": ...})``; members ``[k * group_size, (k + 1) * group_size)`` form group ``k``.
        group_size: Rollouts per puzzle (CLIPO needs >= 3: two correct, one incorrect).
        embed_fn: ``embed_fn(trajectory) -> 1-D vector`` of one fixed length ``D``, called once per finished episode.
        trainer: A :class:`GroupTrainer`, or a factory ``dim_in -> trainer`` called on the first finished group
            (e.g. ``functools.partial(CLIPOTrainer, dim_out=64)``).
        correct_fn: ``correct_fn(trajectory) -> bool``; default ``info["is_success"]`` of the final step.
        key: The CLIPO term's key in ``info["reward_terms"]``.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], group_size: int, embed_fn: EmbedFn,
                 trainer: GroupTrainer | TrainerFactory, correct_fn: CorrectFn | None = None,
                 key: str = "clipo") -> None:
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
            raise ValueError(f"group_size must be an int >= 2, got {group_size!r}")
        env_fns = list(env_fns)
        if not env_fns or len(env_fns) % group_size:
            raise ValueError(f"need a positive multiple of group_size={group_size} env_fns, got {len(env_fns)}")
        if not isinstance(key, str) or not key or key == "sparse":
            raise ValueError(f"key must be a non-empty string other than 'sparse', got {type(key).__name__} {key!r:.80}")
        if not callable(embed_fn):
            raise TypeError(f"embed_fn must be callable (trajectory -> 1-D vector), got {type(embed_fn).__name__}")
        is_trainer = not isinstance(trainer, type) and callable(getattr(trainer, "step", None))
        if not is_trainer and not callable(trainer):
            raise TypeError("trainer must be a CLIPO trainer (with step(embeddings, correct, group_ids), e.g. "
                            "critics.clipo.CLIPOTrainer(dim_in=D)) or a factory dim_in -> trainer (e.g. the class "
                            f"CLIPOTrainer), got {type(trainer).__name__}")
        self.envs = [fn() for fn in env_fns]
        if len({id(getattr(e, "unwrapped", e)) for e in self.envs}) < len(self.envs):  # members would share one game
            raise ValueError("env_fns returned one environment for two members; each call must make a new one "
                             "(lambda: gym.make('Countdown-v0'), not lambda: env)")
        self.num_envs = len(self.envs)
        self.group_size = group_size
        self.num_groups = self.num_envs // group_size
        self.embed_fn = embed_fn
        self.correct_fn = correct_fn or is_success
        self.trainer: GroupTrainer | None = trainer if is_trainer else None
        self._make_trainer: TrainerFactory | None = None if is_trainer else trainer
        self.key = key
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        for i, e in enumerate(self.envs[1:], 1):
            if e.observation_space != first.observation_space or e.action_space != first.action_space:
                raise ValueError(f"env {i} ({env_name(e)}) has different spaces than env 0 ({env_name(first)})")
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._status = [_ACTIVE] * self.num_envs
        self._trajectories: list[Trajectory | None] = [None] * self.num_envs
        self._embeddings: list[np.ndarray | None] = [None] * self.num_envs
        self._held_steps = [0] * self.num_envs  # steps a held member's action has been ignored
        self._masks: list[np.ndarray | None] = [None] * self.num_envs
        self.last_group_stats: dict[str, float] = {}
        self.finished_groups = 0

    def _members(self, g: int) -> range:
        return range(g * self.group_size, (g + 1) * self.group_size)

    def _reset_group(self, g: int, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        options = dict(options or {})
        infos = []
        for k, i in enumerate(self._members(g)):
            obs, info = self.envs[i].reset(seed=None if seed is None else seed + i, options=options or None)
            if k == 0:
                if info.get("problem") is None:
                    raise ValueError(f"CLIPOGroupReward needs the reset info to include 'problem' (to give the whole "
                                     f"group the same puzzle); {env_name(self.envs[i])} does not report it")
                options["problem"] = info["problem"]
            elif info.get("problem") != options["problem"]:
                raise ValueError(f"env {i} did not play the group's puzzle {options['problem']} after "
                                 f"reset(options={{'problem': ...}}); got {info.get('problem')}")
            self._status[i] = _ACTIVE
            self._trajectories[i] = Trajectory(index=i, group=g, problem=options["problem"], observations=[obs])
            self._embeddings[i] = None
            self._held_steps[i] = 0
            self._masks[i] = info.get("action_mask")
            infos.append(info)
        return infos

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset every group: member 0 draws a puzzle, the others play it (``seed=s`` seeds member ``i`` with
        ``s + i``; ``options={"problem": p}`` gives every group ``p``)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"CLIPOGroupReward.reset takes an int seed or None, got {seed!r}")
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"reset options must be a dict or None, got {type(options).__name__} {options!r:.80}")
        infos: dict[str, Any] = {}
        for g in range(self.num_groups):
            for k, info in enumerate(self._reset_group(g, None if seed is None else int(seed), options)):
                infos = self._add_info(infos, info, g * self.group_size + k)
        return self._batch_obs(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        n = self.num_envs
        if isinstance(actions, (str, bytes)) or not isinstance(actions, Iterable):  # a str: one character per env
            raise ValueError(f"actions must hold one action per env ({n}), got {type(actions).__name__} {actions!r:.80}")
        acts = list(iterate(self.action_space, actions))
        if len(acts) != n:
            raise ValueError(f"actions must hold one action per env ({n}), got {len(acts)}")
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        member_infos: list[dict[str, Any]] = [{} for _ in range(n)]
        reset_now: set[int] = set()
        for g in range(self.num_groups):  # next-step autoreset of the groups that ended last step
            if self._status[g * self.group_size] == _ENDED:
                for i, info in zip(self._members(g), self._reset_group(g, None, None), strict=True):
                    member_infos[i] = info
                    reset_now.add(i)
        finished_now: set[int] = set()
        for i in range(n):
            if i in reset_now:
                continue
            if self._status[i] == _WAITING:
                self._held_steps[i] += 1
                member_infos[i] = self._waiting_info(i)
                continue
            obs, reward, term, trunc, info = self.envs[i].step(acts[i])
            traj = self._trajectories[i]
            traj.observations.append(obs)
            traj.actions.append(acts[i])
            traj.rewards.append(float(reward))
            traj.transitions.extend(info.get("transitions") or [])
            self._masks[i] = info.get("action_mask")
            if term or trunc:
                traj.terminated, traj.truncated, traj.final_info = bool(term), bool(trunc), info
                traj.correct = bool(self.correct_fn(traj))
                self._embeddings[i] = self._embed(traj)  # held: the trajectory keeps its last step
                self._status[i] = _WAITING
                member_infos[i] = self._waiting_info(i, info)
                finished_now.add(i)
            else:
                rewards[i] = float(reward)
                member_infos[i] = info
        done = [g for g in range(self.num_groups) if all(self._status[i] == _WAITING for i in self._members(g))]
        if done:
            self._finish_groups(done, finished_now, rewards, terminated, truncated, member_infos)
        infos: dict[str, Any] = {}
        for i, info in enumerate(member_infos):
            infos = self._add_info(infos, info, i)
        return self._batch_obs(), rewards, terminated, truncated, infos

    def _finish_groups(self, groups: list[int], finished_now: set[int], rewards: np.ndarray, terminated: np.ndarray,
                       truncated: np.ndarray, member_infos: list[dict[str, Any]]) -> None:
        members = [i for g in groups for i in self._members(g)]
        emb = np.stack([self._embeddings[i] for i in members])
        correct = [bool(self._trajectories[i].correct) for i in members]
        gids = [self._trajectories[i].group for i in members]
        trainer = self._get_trainer(emb.shape[1])
        clipo = np.asarray(trainer.step(emb, correct, gids), dtype=np.float64)
        if clipo.shape != (len(members),) or not np.isfinite(clipo).all():
            raise ValueError(f"the CLIPO trainer's step returned {clipo!r:.120} for {len(members)} rollouts; "
                             f"expected {len(members)} finite rewards")
        self.last_group_stats = dict(trainer.last_stats)
        self.finished_groups += len(groups)
        for r_cl, i in zip(clipo, members, strict=True):
            traj = self._trajectories[i]
            info = traj.final_info
            terms = dict(info.get("reward_terms") or {"sparse": traj.rewards[-1]})
            if self.key in terms:
                raise ValueError(f"info['reward_terms'] already has a {self.key!r} term; pass key='...'")
            terms[self.key] = float(r_cl)
            final = dict(info)
            final.update(reward_terms=terms, clipo=float(r_cl), clipo_correct=bool(traj.correct),
                         clipo_waiting=i not in finished_now,  # a member held before: its action here was ignored
                         clipo_held_steps=self._held_steps[i],
                         # a member held since an earlier step reported its last move's transitions then
                         transitions=final.get("transitions", []) if i in finished_now else [])
            rewards[i] = traj.rewards[-1] + float(r_cl)
            terminated[i], truncated[i] = traj.terminated, traj.truncated
            member_infos[i] = final
            self._status[i] = _ENDED

    def _waiting_info(self, i: int, real: dict[str, Any] | None = None) -> dict[str, Any]:
        """A held member's info: the real one on the step it finished, else a ``clipo_waiting`` stub."""
        held_info = self._trajectories[i].final_info
        zero_terms = dict.fromkeys(held_info.get("reward_terms") or {"sparse": 0.0}, 0.0)
        info = dict(real) if real is not None else {"transitions": []}
        info.update(reward_terms=zero_terms, clipo_waiting=real is None)
        if "action_mask" in held_info:
            info["action_mask"] = np.ones_like(np.asarray(held_info["action_mask"]))
        return info

    def _embed(self, traj: Trajectory) -> np.ndarray:
        out = self.embed_fn(traj)
        if hasattr(out, "detach"):  # a torch tensor
            out = out.detach().cpu().numpy()
        try:
            vec = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"embed_fn must return a numeric 1-D vector, got {type(out).__name__}: {e}") from e
        if vec.ndim == 2 and vec.shape[0] == 1:
            vec = vec[0]
        expected = getattr(getattr(self.trainer, "config", None), "dim_in", None)
        if expected is None:
            expected = next((e.shape[0] for e in self._embeddings if e is not None), None)
        if vec.ndim != 1 or vec.shape[0] == 0 or (expected is not None and vec.shape[0] != expected):
            want = f"length {expected}" if expected is not None else "one fixed length"
            raise ValueError(f"embed_fn returned an embedding of shape {vec.shape} for env {traj.index}; "
                             f"CLIPOGroupReward needs a 1-D vector of {want} (the CLIPO head's dim_in)")
        if not np.isfinite(vec).all():
            raise ValueError(f"embed_fn returned NaN or inf for env {traj.index}")
        return vec

    def _get_trainer(self, dim_in: int) -> GroupTrainer:
        if self.trainer is None:
            assert self._make_trainer is not None
            trainer = self._make_trainer(dim_in)
            if not callable(getattr(trainer, "step", None)):
                raise TypeError(f"the trainer factory returned {type(trainer).__name__}, which has no step() method")
            self.trainer = trainer
        return self.trainer

    def _batch_obs(self) -> Any:
        out = create_empty_array(self.single_observation_space, self.num_envs)
        last = [t.observations[-1] for t in self._trajectories]
        return copy.deepcopy(concatenate(self.single_observation_space, last, out))

    def action_masks(self) -> np.ndarray:
        """``bool [num_envs, n_actions]``: each member's legal actions (all ones while held or about to reset)."""
        if not isinstance(self.single_action_space, gym.spaces.Discrete):
            raise TypeError(f"action_masks() needs a Discrete action space, not {self.single_action_space}")
        ones = np.ones(self.single_action_space.n, dtype=bool)  # held, or reset on the next step
        return np.stack([ones if status != _ACTIVE or mask is None else np.asarray(mask).astype(bool)
                         for status, mask in zip(self._status, self._masks, strict=True)])

    def close_extras(self, **kwargs: Any) -> None:
        for e in self.envs:
            e.close()
