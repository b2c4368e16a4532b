"""verl multi-turn adapter: the Countdown tools, their reward, the export and the tool config.

verl itself pins ``transformers<5.11`` and pulls ray, so it is not a dependency of this package;
these tests drive the adapter through the call sequence of verl 0.9's tool agent loop
(``create(create_kwargs=...)`` -> ``execute(instance_id, args, agent_data=...)`` -> ``release`` per
call; ``agent_data.extra_fields`` reaching the reward's ``extra_info``). With verl importable
(``PYTHONPATH`` holding verl 0.9.1 and its light deps, see docs/multiturn.md) the class is checked
against verl's real ``BaseTool`` and tool registry too.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from countdown_gym import Problem, Rules, load_split
from countdown_gym.integrations import verl_multiturn as vm

ROOT = Path(__file__).resolve().parents[1]
P = Problem((21, 16, 17, 26), 46, Rules.longproc())


class AgentData:
    """The part of verl's ``AgentData`` a tool sees: ``extra_fields``, a dict per trajectory."""

    def __init__(self) -> None:
        self.extra_fields: dict = {}


def _tools(max_turns: int = 16) -> dict[str, vm.CountdownTool]:
    return {t["config"]["action"]: vm.CountdownTool(t["config"], t["tool_schema"]) for t in vm.tool_config(max_turns)["tools"]}


def _call(tools, kwargs, agent, name, args=None):
    """One tool call exactly as verl 0.9.1's ToolAgentLoop._call_tool makes it."""

    async def go():
        tool = tools[name]
        iid, _ = await tool.create(create_kwargs=kwargs.get(name, {}).get("create_kwargs", {}))
        try:
            return await tool.execute(iid, args or {}, agent_data=agent)
        finally:
            await tool.release(iid)

    return asyncio.run(go())


def test_a_solving_trajectory_scores_one_and_the_reward_matches_the_game() -> None:
    tools, kwargs, agent = _tools(), vm.tools_kwargs(P), AgentData()
    resp, r, m = _call(tools, kwargs, agent, "move", {"a": 21, "op": "+", "b": 16})
    assert (resp.text, r, m["valid"]) == ("= 37 [17,26,37]", 0.0, True)
    assert _call(tools, kwargs, agent, "move", {"a": "99", "op": "+", "b": "1"})[0].text == "error operand_unavailable [17,26,37]"
    assert _call(tools, kwargs, agent, "undo")[0].text == "undone [21,16,17,26]"
    assert _call(tools, kwargs, agent, "numbers")[0].text == "[21,16,17,26] target 46, 13 turns left"
    for args in ({"a": 21, "op": "+", "b": 16}, {"a": 26, "op": "-", "b": 17}):
        _call(tools, kwargs, agent, "move", args)
    resp, r, m = _call(tools, kwargs, agent, "move", {"a": 37.0, "op": "+", "b": "9"})
    assert (resp.text, r) == ("= 46 [46] solved", 1.0)
    assert _call(tools, kwargs, agent, "move", {"a": 1, "op": "+", "b": 2})[0].text.startswith("error episode_over")
    gt = json.loads(json.dumps(kwargs["move"]["create_kwargs"]["ground_truth"]))
    score = vm.compute_score("countdown_gym/longproc-0.5k", "<decoded text>", gt, dict(agent.extra_fields))
    assert score["score"] == 1.0 and score["invalid_turns"] == 1 and score["turns"] == 6
    assert asyncio.run(tools["move"].calc_reward(asyncio.run(tools["move"].create(create_kwargs={"ground_truth": gt}))[0],
                                                agent_data=agent)) == 1.0
    assert vm.compute_score("x", "", gt, {})["score"] == 0.0  # no tool call: nothing was played
    as_array = {vm.TURNS_KEY: np.array(agent.extra_fields[vm.TURNS_KEY], dtype=object)}  # was numpy's "ambiguous"
    assert vm.compute_score("countdown_gym/longproc-0.5k", "", gt, as_array) == score


def test_a_ground_truth_without_rules_plays_under_the_same_rules_in_the_tool_and_the_reward() -> None:
    """The tool never sees the row's data_source; the reward read TinyZero's rules from data_source 'countdown', so
    50*50, refused by the tool (exceeds_limit under LongProc's), scored 1.0."""
    gt, agent = {"numbers": [50, 50], "target": 2500}, AgentData()
    resp, _, _ = _call(_tools(), {a: {"create_kwargs": {"ground_truth": gt}} for a in vm.ACTIONS}, agent, "move",
                       {"a": 50, "op": "*", "b": 50})
    assert resp.text.startswith("error exceeds_limit")
    assert vm.compute_score("countdown", "", gt, dict(agent.extra_fields))["score"] == 0.0


@pytest.mark.parametrize("turns", ["21+16", b"21+16", {"21+16": 1}, 5])
def test_turns_that_are_no_list_are_refused(turns) -> None:
    """A string of turns was played character by character ('21+16': 5 invalid turns, score 0.0); 5 was a raw
    TypeError."""
    with pytest.raises(ValueError, match="countdown_turns.. must be a list of turns"):
        vm.compute_score("countdown_gym/longproc-0.5k", "", vm.ground_truth(P), {vm.TURNS_KEY: turns})

@pytest.mark.parametrize("args", [{}, {"a": 21}, {"a": [1], "op": "+", "b": 2}, {"a": "x" * 10_000_000, "op": "+", "b": 1},
                                  {"a": 21, "op": "^", "b": 16}, {"a": "21/16", "op": "+", "b": 1}, "not a dict"])
def test_bad_calls_are_replies_not_crashes_and_change_nothing(args) -> None:
    tools, kwargs, agent = _tools(), vm.tools_kwargs(P), AgentData()
    resp, r, m = _call(tools, kwargs, agent, "move", args)
    assert resp.text.startswith("error ") and resp.text.endswith("[21,16,17,26]") and r == 0.0 and not m["valid"]


def test_the_turn_budget_ends_the_trajectory() -> None:
    tools, kwargs, agent = _tools(max_turns=2), vm.tools_kwargs(P), AgentData()
    _call(tools, kwargs, agent, "move", {"a": 21, "op": "+", "b": 16})
    assert _call(tools, kwargs, agent, "undo")[0].text.endswith("turn limit")
    assert _call(tools, kwargs, agent, "give_up")[0].text.startswith("error episode_over")
    with pytest.raises(ValueError, match="agent_data"):
        _call(tools, kwargs, None, "undo")


@pytest.mark.parametrize("max_turns", [0, -3, 2.7, "16", None])
def test_a_bad_turn_budget_in_the_tool_config_is_refused(max_turns) -> None:
    with pytest.raises(ValueError, match="max_turns must be a positive int"):
        vm.CountdownTool({"action": "move", "max_turns": max_turns})


@pytest.mark.parametrize("kwargs", [{}, {"create_kwargs": {}}, {"create_kwargs": None}])
def test_a_row_without_the_tools_ground_truth_is_a_clear_error(kwargs) -> None:
    with pytest.raises(ValueError, match="--interaction tool"):
        asyncio.run(vm.CountdownTool({"action": "move"}).create(**kwargs))


def test_tool_export_round_trips_into_the_tools(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_verl.py"), "--interaction", "tool", "--limit", "4",
                          "--split", "test", "--max-turns", "12", "--out", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    df = pd.read_parquet(tmp_path / "longproc-0.5k" / "test.parquet")
    assert set(df.columns) >= {"data_source", "agent_name", "prompt", "reward_model", "extra_info"}
    row = df.iloc[0]
    problem = load_split("longproc-0.5k", "test")[0]
    assert row.agent_name == "tool_agent" and "move(a, op, b)" in row.prompt[0]["content"]
    config = json.loads((tmp_path / "longproc-0.5k" / "countdown_tools.yaml").read_text())
    tools = {t["config"]["action"]: vm.CountdownTool(t["config"], t["tool_schema"]) for t in config["tools"]}
    assert tools["move"].max_turns == 12
    kwargs, agent = row.extra_info["tools_kwargs"], AgentData()  # numpy arrays, as pandas hands them back
    a, b = problem.numbers[:2]
    assert _call(tools, kwargs, agent, "numbers")[0].text.startswith(
        "[" + ",".join(map(str, problem.numbers)) + f"] target {problem.target}")
    assert _call(tools, kwargs, agent, "move", {"a": a, "op": "+", "b": b})[2]["valid"]
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_verl.py"), "--interaction", "tool", "--max-turns", "0",
                          "--out", str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "--max-turns must be >= 1" in bad.stderr


def test_against_verls_real_base_tool_and_registry(tmp_path: Path) -> None:
    pytest.importorskip("verl.tools.base_tool", reason="verl is not installed here (see docs/multiturn.md)")
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse
    from verl.tools.tool_registry import initialize_tools_from_config

    assert vm.HAVE_VERL and issubclass(vm.CountdownTool, BaseTool)
    path = tmp_path / "tools.yaml"
    vm.dump_tool_config(path)
    tools = {t.name: t for t in initialize_tools_from_config(str(path))}
    assert set(tools) == set(vm.ACTIONS)
    resp, r, _ = _call(tools, vm.tools_kwargs(P), AgentData(), "move", {"a": 21, "op": "+", "b": 16})
    assert isinstance(resp, ToolResponse) and resp.text == "= 37 [17,26,37]"
    assert tools["move"].get_openai_tool_schema().function.name == "move"


def test_the_tool_export_without_transformers_is_a_usage_error(no_transformers, tmp_path, capsys) -> None:
    """export --format verl --interaction tool without transformers (the tool schemas need it) was an ImportError
    traceback; it is a usage error naming the extra."""
    from countdown_gym.cli.export import main

    pytest.importorskip("pyarrow")
    assert main(["--format", "verl", "--interaction", "tool", "--split", "test", "--limit", "2", "--out", str(tmp_path)]) == 2
    assert "countdown-gym[llm]" in capsys.readouterr().err
