"""verl multi-turn adapter: the game as stateful verl tools (:class:`CountdownTool`, the TRL adapter's tools; a
trajectory's turns in ``agent_data.extra_fields[TURNS_KEY]``), the reward of the moves they played
(:func:`compute_score`) and the YAML of ``multi_turn.tool_config_path`` (:func:`tool_config`). Guide:
``docs/multiturn.md``. Without verl (it pins ``transformers<5.11``) the class keeps its signatures and answers a
local ``ToolResponse`` with verl's ``text`` field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import describe_value
from countdown_gym.game.turn_format import TOOL_NAMES, episode_over_reply, numbers_reply, tool_turn
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS, TurnEpisode, check_budget, replay_turns
from countdown_gym.integrations.trl_env import tool_json_schema
from countdown_gym.integrations.verl import ground_truth, problem_from_ground_truth

try:  # verl's real base classes when verl is installed
    from verl.tools.base_tool import BaseTool as _Base
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    HAVE_VERL = True
except ImportError:  # verl absent: the same signatures, no verl behaviour to imitate beyond them
    HAVE_VERL = False
    _Base = object
    OpenAIFunctionToolSchema = None

    @dataclass
    class ToolResponse:  # type: ignore[no-redef]
        """What a tool call answers (verl's ``ToolResponse`` has this ``text`` field, plus media)."""

        text: str | None = None


TURNS_KEY = "countdown_turns"
"""The key of ``agent_data.extra_fields`` (and of the reward's ``extra_info``) holding the turns played."""
ACTIONS: tuple[str, ...] = TOOL_NAMES

tool_schema = tool_json_schema
"""The OpenAI function schema of one tool, as TRL derives it (one source for TRL, verl and ``verifiers``)."""


def tool_config(max_turns: int = DEFAULT_MAX_TURNS) -> dict[str, Any]:
    """verl's ``tool_config_path`` YAML as a dict: the four tools, this module's class, the turn budget."""
    cls = f"{__name__}.CountdownTool"
    return {"tools": [{"class_name": cls, "config": {"type": "native", "action": a, "max_turns": max_turns},
                       "tool_schema": tool_schema(a)} for a in ACTIONS]}  # fmt: skip


def tools_kwargs(problem: Problem) -> dict[str, Any]:
    """The row's ``extra_info.tools_kwargs``: every tool's ``create_kwargs`` carries the ground truth."""
    gt = ground_truth(problem)
    return {a: {"create_kwargs": {"ground_truth": gt}} for a in ACTIONS}


def turn_text(action: str, parameters: Any) -> str:
    """The game turn a tool call states (``move`` -> ``"37-29"``); a malformed call gives text the game refuses."""
    if action != "move":
        return tool_turn(action)
    if not isinstance(parameters, Mapping):
        return ""
    a, op, b = (parameters.get(k) for k in ("a", "op", "b"))
    if a is None or op is None or b is None or isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return ""  # answered "error empty_turn": the move names no numbers
    return tool_turn(action, a, op, b)


class CountdownTool(_Base):  # type: ignore[misc, valid-type]
    """One Countdown tool for verl's tool agent loop (``config["action"]``: a tool name; ``config["max_turns"]``: the
    game's turn budget over the trajectory, default 16). A bad call is a reply the model reads, never an error."""

    def __init__(self, config: dict, tool_schema: Any = None) -> None:
        config = dict(config or {})
        self.action = config.get("action", "move")
        self.max_turns = check_budget("max_turns", config.get("max_turns", DEFAULT_MAX_TURNS), allow_none=False)
        schema = tool_schema or tool_json_schema(self.action)
        if HAVE_VERL:
            if isinstance(schema, dict):
                schema = OpenAIFunctionToolSchema.model_validate(schema)
            super().__init__(config, schema)
        else:
            self.config, self.tool_schema = config, schema
            self.name = schema["function"]["name"]
        self._problems: dict[str, Problem] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Bind an instance to the row's problem (``create_kwargs={"ground_truth": ...}``, as verl passes it)."""
        instance_id = instance_id or str(uuid4())
        create_kwargs = kwargs.get("create_kwargs", kwargs)
        if not isinstance(create_kwargs, Mapping) or "ground_truth" not in create_kwargs:
            raise ValueError("CountdownTool needs the row's extra_info.tools_kwargs.<tool>.create_kwargs.ground_truth (countdown-gym "
                             f"export --format verl --interaction tool), got create_kwargs={create_kwargs!r:.120}")
        self._problems[instance_id] = problem_from_ground_truth(create_kwargs["ground_truth"])
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        """Play the call's turn; returns the game's reply, the step reward and ``{"turn_kind", "valid", "reason"}``."""
        problem = self._problems[instance_id]
        store = _store(kwargs.get("agent_data"))
        turns: list[str] = store.setdefault(TURNS_KEY, [])
        episode = TurnEpisode(problem, max_turns=self.max_turns)
        episode.play_turns(turns)
        if episode.done:
            reply = episode_over_reply(episode.state)
            return ToolResponse(text=reply), 0.0, {"turn_kind": "refused", "valid": False, "reason": "episode_over"}
        if self.action == "numbers":  # free: no turn of the game
            reply = numbers_reply(episode.state, problem.target, self.max_turns - episode.turns)
            return ToolResponse(text=reply), 0.0, {"turn_kind": "numbers", "valid": True, "reason": "ok"}
        text = turn_text(self.action, parameters)
        res = episode.play(text)
        turns.append(text)
        return ToolResponse(text=res.reply), float(res.reward), {"turn_kind": res.kind, "valid": res.valid, "reason": res.reason}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The verifier's verdict of the moves played so far (1.0 once the target is reached)."""
        store = _store(kwargs.get("agent_data"))
        rep = replay_turns(self._problems[instance_id], store.get(TURNS_KEY, []), max_turns=self.max_turns)
        return float(rep.reward)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._problems.pop(instance_id, None)


def _store(agent_data: Any) -> dict[str, Any]:
    """Where a trajectory keeps its turns: verl's ``agent_data.extra_fields`` (a fresh dict when absent)."""
    if agent_data is None:
        raise ValueError("CountdownTool keeps a trajectory's turns in agent_data.extra_fields; verl's tool agent "
                         "loop passes agent_data to execute (verl >= 0.6)")
    if getattr(agent_data, "extra_fields", None) is None:
        agent_data.extra_fields = {}
    return agent_data.extra_fields


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's reward for tool trajectories: the verdict of the turns in ``extra_info[TURNS_KEY]`` (none: 0;
    ``solution_str`` is not read), with ``turns``, ``invalid_turns`` and ``solved``. ``data_source`` is not read
    either: the tools never see it, so a ground truth without rules plays under LongProc's in both."""
    del data_source, solution_str, kwargs
    problem = problem_from_ground_truth(ground_truth)
    turns = (extra_info or {}).get(TURNS_KEY)
    if turns is not None and (isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable)):
        raise ValueError(f"extra_info[{TURNS_KEY!r}] must be a list of turns, got {describe_value(turns)}")
    turns = [] if turns is None else list(turns)  # not `or []`: verl's batches may hand a numpy array
    rep = replay_turns(problem, [str(t) for t in turns], max_turns=max(len(turns), 1))
    return {"score": float(rep.reward), "turns": len(turns), "invalid_turns": rep.invalid_steps, "solved": float(rep.solved)}


def dump_tool_config(path: Any, max_turns: int = DEFAULT_MAX_TURNS) -> None:
    """Write :func:`tool_config` as YAML (JSON is valid YAML; no YAML library needed)."""
    from countdown_gym.dataclass_cli import written_aside  # here: verl's workers import this module, tyro not needed

    with written_aside(path) as tmp:
        tmp.write_text(json.dumps(tool_config(max_turns), indent=2) + "\n", encoding="utf-8")


__all__ = ["ACTIONS", "HAVE_VERL", "TURNS_KEY", "CountdownTool", "compute_score", "dump_tool_config", "tool_config", "tool_schema", "tools_kwargs", "turn_text"]
