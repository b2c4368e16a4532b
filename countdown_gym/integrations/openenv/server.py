"""The OpenEnv server: ``CountdownMultiTurn-v0`` or ``Countdown-v0`` behind openenv-core's ``create_app``
(``make_app``; ``countdown-gym serve`` runs it: ``docs/openenv.md``).

Each WebSocket session (``/ws``) plays on its own ``Environment``; over HTTP each request gets a fresh one, and the
episode lives in the :class:`EpisodeStore` under a random (uuid4) ``episode_id``. Game calls run under one
process-wide lock (the environments share their state caches), so calling an ``Environment`` from threads is safe.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib.metadata
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import pydantic_core
from fastapi import FastAPI
from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation
from pydantic import ValidationError

from countdown_gym.envs.countdown import CountdownEnv
from countdown_gym.envs.multiturn import CountdownMultiTurnEnv
from countdown_gym.integrations.openenv import models
from countdown_gym.integrations.openenv.listen import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEAD_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_EPISODES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_S,
    base_url,
    check_limits,
    listening_socket,
    uvicorn_server,
)
from countdown_gym.integrations.openenv.transport import (
    BodyGuard,
    EpisodeConflict,
    RequestError,
    Sessions,
    UnknownEpisode,
    add_http_routes,
    add_mcp_route,
    in_words,
)

__all__ = ["ENVIRONMENTS", "EpisodeConflict", "EpisodeStore", "RequestError", "UnknownEpisode", "make_app",
           "serve_in_thread"]

_LOCK = threading.Lock()


try:  # countdown-gym's installed version (what ``pip show countdown-gym`` says), the served environments' version
    _VERSION = importlib.metadata.version("countdown-gym")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    _VERSION = "unknown"


@dataclass
class Episode:
    """One episode: its Gymnasium environment and bookkeeping."""

    episode_id: str
    env: gym.Env
    steps: int = 0
    done: bool = False
    rules: dict[str, Any] | None = None
    """``Rules.to_dict()`` of the episode (computed once, at reset)"""
    state: tuple = ()
    """the numbers in play after the last answer (``info["state"]``)"""


class EpisodeStore:
    """The episodes reachable by id (least recently used dropped beyond ``max_episodes``)."""

    def __init__(self, max_episodes: int = DEFAULT_MAX_EPISODES) -> None:
        check_limits(max_episodes=max_episodes)
        self.max_episodes = max_episodes
        self._episodes: OrderedDict[str, Episode] = OrderedDict()
        self._templates: dict[tuple[type, str], gym.Env] = {}

    def new_env(self, env_cls: type[gym.Env], env_kwargs: dict[str, Any]) -> gym.Env:
        """A fresh ``env_cls(**env_kwargs)`` for one episode: a shallow copy (sharing its spaces and problem source;
        ``reset`` gives it its own state and generator) of one built once per class and arguments, never reset
        (building one takes about a millisecond)."""
        key = (env_cls, repr(sorted(env_kwargs.items())))
        if key not in self._templates:
            self._templates[key] = env_cls(**env_kwargs)
        return copy.copy(self._templates[key])

    def __len__(self) -> int:
        return len(self._episodes)

    def check_free(self, episode_id: str) -> None:
        """``EpisodeConflict`` if ``episode_id`` names a kept episode."""
        if episode_id in self._episodes:
            raise EpisodeConflict(f"episode_id {episode_id[:80]!r} is in use; reset without one to get a fresh id")

    def add(self, episode: Episode) -> None:
        self.check_free(episode.episode_id)
        self._episodes[episode.episode_id] = episode
        while len(self._episodes) > self.max_episodes:
            self._episodes.popitem(last=False)

    def get(self, episode_id: Any) -> Episode:
        if not isinstance(episode_id, str):
            raise RequestError(f"episode_id must be a string, got {type(episode_id).__name__}")
        episode = self._episodes.get(episode_id)
        if episode is None:
            raise UnknownEpisode(f"unknown episode_id {episode_id[:80]!r} (never reset here, or dropped as least "
                                 f"recently used beyond the last {self.max_episodes}); call /reset")
        self._episodes.move_to_end(episode_id)
        return episode


class _CountdownEnvironment(Environment):
    """What both served environments share: episode handling, reset arguments, errors."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    env_id: ClassVar[str]
    env_cls: ClassVar[type[gym.Env]]
    action_cls: ClassVar[type[Action]]
    observation_cls: ClassVar[type[Observation]]

    def __init__(self, store: EpisodeStore, env_kwargs: dict[str, Any]) -> None:
        super().__init__()
        self._store = store
        self._env_kwargs = env_kwargs
        self._episode: Episode | None = None

    # ---- subclasses ---------------------------------------------------------------------------
    def _native_action(self, episode: Episode, action: Action) -> Any:
        raise NotImplementedError

    def _fields(self, obs: Any, info: dict[str, Any], done: bool) -> dict[str, Any]:
        """The fields of this environment's observation class besides the shared ones (JSON values)."""
        raise NotImplementedError

    # ---- openenv Environment --------------------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None, problem: Any = None,
              **kwargs: Any) -> Observation:
        """A new episode: ``seed`` seeds the draw, ``problem`` picks the puzzle, ``episode_id`` names it
        (the fields of :class:`~countdown_gym.integrations.openenv.models.ResetRequest`)."""
        try:
            request = models.ResetRequest.model_validate({"seed": seed, "episode_id": episode_id, "problem": problem,
                                                          **kwargs})
        except ValidationError as e:
            raise RequestError(f"invalid reset: {in_words(e)}") from None
        return self.reset_request(request)

    def reset_request(self, request: models.ResetRequest) -> Observation:
        """:meth:`reset` with a validated request."""
        return self._observation(self._reset(request))

    def reset_answer(self, request: models.ResetRequest) -> bytes:
        """:meth:`reset_request`'s answer as the JSON that openenv's clients read (what the routes send)."""
        return pydantic_core.to_json(self._reset(request))

    def _reset(self, request: models.ResetRequest) -> dict[str, Any]:
        options = None
        with _LOCK:
            if request.episode_id is not None:
                self._store.check_free(request.episode_id)
            previous = self._episode  # a WebSocket session's: its env's generator carries on, as one local env's
            env = copy.copy(previous.env) if previous else self._store.new_env(self.env_cls, self._env_kwargs)
            if request.problem is not None:
                options = {"problem": (request.problem.numbers, request.problem.target)}
                lo, hi = env.unwrapped.rules.result_range()  # a target no move can make under the rules is refused
                if not lo <= request.problem.target < hi:
                    raise RequestError(f"target {request.problem.target} is out of reach under rules "
                                       f"{env.unwrapped.rules.name!r}: every result lies in [{lo}, {hi})")
            try:
                obs, info = env.reset(seed=request.seed, options=options)
            except ValueError as e:  # an unplayable problem, refused by the problem source with its reason
                raise RequestError(str(e)) from None
            episode = Episode(request.episode_id or uuid.uuid4().hex, env, rules=info["problem"].rules.to_dict())
            answer = self._answer(episode, obs, info, None, False, False)
            self._store.add(episode)  # only once its answer exists
            self._episode = episode
            return answer

    def step(self, action: Action, timeout_s: float | None = None, episode_id: str | None = None,
             **kwargs: Any) -> Observation:
        """Play ``action`` in this session's episode, or (HTTP) in the episode named by ``episode_id``."""
        if kwargs.keys() - {"request_id"}:
            raise RequestError(f"unknown step fields {sorted(kwargs)}; /step takes action, episode_id, timeout_s, request_id")
        return self._observation(self._step(action, episode_id))

    def step_answer(self, action: Action, episode_id: str | None = None) -> bytes:
        """:meth:`step`'s answer as the JSON that openenv's clients read (what the routes send)."""
        return pydantic_core.to_json(self._step(action, episode_id))

    def _step(self, action: Action, episode_id: str | None) -> dict[str, Any]:
        if not isinstance(action, self.action_cls):
            raise RequestError(f"the action must be a {self.action_cls.__name__}, got {type(action).__name__}")
        with _LOCK:
            episode = self._store.get(episode_id) if episode_id is not None else self._episode
            if episode is None:
                raise EpisodeConflict("no episode yet: call reset first (over HTTP, pass the episode_id /reset answered)")
            if episode.done:
                raise EpisodeConflict(f"episode {episode.episode_id!r} has ended; call reset for a new one")
            try:
                obs, reward, terminated, truncated, info = episode.env.step(self._native_action(episode, action))
            except ValueError as e:  # an action the environment refuses (invalid_action="raise"), with its reason
                raise RequestError(str(e)) from None
            episode.steps += 1
            episode.done = bool(terminated or truncated)
            return self._answer(episode, obs, info, float(reward), bool(terminated), bool(truncated))

    @property
    def state(self) -> models.CountdownState:
        with _LOCK:
            return self._state_of(self._episode)

    def state_of(self, episode_id: str) -> models.CountdownState:
        """The state of the episode ``episode_id`` (``GET /state/{episode_id}``)."""
        with _LOCK:
            return self._state_of(self._store.get(episode_id))

    def _state_of(self, episode: Episode | None) -> models.CountdownState:
        if episode is None:
            return models.CountdownState(env_id=self.env_id)
        problem = episode.env.unwrapped.problem
        return models.CountdownState(episode_id=episode.episode_id, step_count=episode.steps, env_id=self.env_id,
                                     numbers=list(problem.numbers), target=problem.target,
                                     state=[models.to_json_number(x) for x in episode.state], done=episode.done)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=self.env_id, version=_VERSION,
                                   description=f"countdown-gym's {self.env_id}: reach the target with + - * /")

    def _observation(self, answer: dict[str, Any]) -> Observation:
        """The observation model of an answer of :meth:`_answer`."""
        return self.observation_cls(**answer["observation"], reward=answer["reward"], done=answer["done"])

    def _answer(self, episode: Episode, obs: Any, info: dict[str, Any], reward: float | None, terminated: bool,
                truncated: bool) -> dict[str, Any]:
        """What a reset or step answers, ``{"observation": {...}, "reward": r, "done": d}`` (JSON values): what
        openenv's clients read, serialised in one call by the routes (no model is built; ``tests/test_openenv.py``
        checks it equals the observation model's dump)."""
        problem = info["problem"]
        episode.state = info["state"]
        fields = {
            "episode_id": episode.episode_id, "numbers": list(problem.numbers), "target": problem.target,
            "rules": episode.rules, "state": [models.to_json_number(x) for x in info["state"]],
            "transitions": [models.TransitionModel.fields_of(t) for t in info["transitions"]],
            "terminated": terminated, "truncated": truncated,
        }
        fields.update(self._fields(obs, info, terminated or truncated))
        return {"observation": fields, "reward": reward, "done": terminated or truncated}


class CountdownMultiTurnEnvironment(_CountdownEnvironment):
    """``CountdownMultiTurn-v0`` over OpenEnv: a :class:`TurnAction` in, a :class:`TurnObservation` out."""

    env_id, env_cls = "CountdownMultiTurn-v0", CountdownMultiTurnEnv
    action_cls, observation_cls = models.TurnAction, models.TurnObservation

    def _native_action(self, episode: Episode, action: models.TurnAction) -> str:
        turn = action.turn[:-1] if action.turn.endswith("\n") else action.turn
        if "\n" in turn:
            raise RequestError("a turn must be one line (no newline inside)")
        # A turn above the game's max_turn_chars is answered turn_too_long whatever follows its first
        # max_turn_chars + 1 characters: only those are kept in the episode's conversation.
        return turn[: episode.env.unwrapped.max_turn_chars + 1]

    def _fields(self, obs: str, info: dict[str, Any], done: bool) -> dict[str, Any]:
        verdict = info.get("verdict")
        return {"is_success": info.get("is_success"), "text": obs, "turn": info["turn"],
                "invalid_turns": info["invalid_turns"], "turn_kind": info.get("turn_kind"), "valid": info.get("valid"),
                "reason": info.get("reason"), "verdict": None if verdict is None else verdict.reason}


class CountdownStepEnvironment(_CountdownEnvironment):
    """``Countdown-v0`` over OpenEnv: a :class:`MoveAction` (action index) in, a :class:`MoveObservation` out."""

    env_id, env_cls = "Countdown-v0", CountdownEnv
    action_cls, observation_cls = models.MoveAction, models.MoveObservation

    def _native_action(self, episode: Episode, action: models.MoveAction) -> int:
        n = episode.env.n_actions
        if action.action >= n:
            raise RequestError(f"action must be in 0..{n - 1}, got {action.action}")
        return action.action

    def _fields(self, obs: Any, info: dict[str, Any], done: bool) -> dict[str, Any]:
        return {"is_success": info["is_success"] if done else None, "observation": obs.tolist(),
                "action_mask": info["action_mask"].tolist(), "dead_end": info["dead_end"]}


ENVIRONMENTS: dict[str, type[_CountdownEnvironment]] = {
    cls.env_id: cls for cls in (CountdownMultiTurnEnvironment, CountdownStepEnvironment)
}
"""The environments the server can serve, by Gymnasium id."""


_REPLACED_ROUTES = {"/reset", "/step", "/ws", "/mcp"}
"""openenv's routes this package replaces (strictly read, within the limits; no ``/mcp`` WebSocket: no MCP tools)."""


def make_app(env_id: str = "CountdownMultiTurn-v0", *, max_sessions: int = DEFAULT_MAX_SESSIONS,
             max_episodes: int = DEFAULT_MAX_EPISODES, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
             body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S, session_idle_s: float = DEFAULT_SESSION_IDLE_S,
             **env_kwargs: Any) -> FastAPI:
    """The FastAPI app serving ``env_id`` (openenv's ``create_app``) with the episode store and error answers.

    ``env_kwargs`` go to the Gymnasium environment (``preset``, ``split``, ``rules``, ``max_turns``,
    ``max_turn_chars``, ...); one environment is built here, so bad arguments fail now with the environment's
    own message. The limits (``docs/security.md``; their ranges: ``listen.check_limits``): ``max_sessions``
    WebSocket sessions at once, each closed after ``session_idle_s`` seconds without a message; ``max_episodes``
    HTTP episodes kept; bodies and messages up to ``max_body_bytes``, a body fully received within
    ``body_timeout_s`` seconds.
    """
    if env_id not in ENVIRONMENTS:
        raise ValueError(f"unknown env_id {env_id!r}; the server serves {sorted(ENVIRONMENTS)}")
    check_limits(max_sessions=max_sessions, max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s,
                 session_idle_s=session_idle_s,
                 **{k: env_kwargs[k] for k in ("max_turn_chars", "max_turns") if env_kwargs.get(k) is not None})
    cls = ENVIRONMENTS[env_id]
    store = EpisodeStore(max_episodes)
    factory = functools.partial(cls, store=store, env_kwargs=dict(env_kwargs))
    store.new_env(cls.env_cls, env_kwargs)  # builds the template env: bad env_kwargs fail here
    app = create_app(factory, cls.action_cls, cls.observation_cls, env_name=env_id, max_concurrent_envs=max_sessions)
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) not in _REPLACED_ROUTES]
    add_http_routes(app, factory, cls.action_cls, cls.observation_cls)
    add_mcp_route(app)
    app.add_api_websocket_route("/ws", Sessions(factory, cls.action_cls, max_sessions, session_idle_s))

    @app.get("/state/{episode_id:path}", response_model=models.CountdownState, tags=["State Management"],
             summary="The state of an episode started over HTTP", responses={404: {"model": models.ErrorAnswer}})
    async def episode_state(episode_id: str) -> models.CountdownState:
        return factory().state_of(episode_id)

    app.add_middleware(BodyGuard, limit=max_body_bytes, timeout_s=body_timeout_s)
    app.state.episodes = store
    app.state.max_body_bytes = max_body_bytes
    return app


@contextlib.contextmanager
def serve_in_thread(app: FastAPI, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning", *,
                    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S, max_connections: int | None = None) -> Iterator[str]:
    """Run ``app`` with uvicorn in a background thread of this process; yields its base URL (``port=0``: a free one).

    WebSocket messages are limited to the app's ``max_body_bytes``, request heads and connections as
    ``countdown-gym serve`` limits them (:func:`~countdown_gym.integrations.openenv.listen.uvicorn_server`).
    """
    sock = listening_socket(host, port)
    server = uvicorn_server(app, getattr(app.state, "max_body_bytes", DEFAULT_MAX_BODY_BYTES), log_level,
                            head_timeout_s=head_timeout_s, max_connections=max_connections)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the server thread stopped before it started (see the log above)")
            time.sleep(0.01)
        yield base_url(host, sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
