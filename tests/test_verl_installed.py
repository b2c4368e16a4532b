"""The verl adapters against the installed verl (0.9.1) itself: its dataset, chat-template path, reward manager and
tool agent loop, on this package's exports. verl pins transformers<5.11, so this runs in an environment of its own:

    python -m venv .venv-verl && .venv-verl/bin/pip install -e ".[verl,dev]" -c constraints/verl.txt
    .venv-verl/bin/python -m pytest tests/test_verl_installed.py tests/test_verl.py tests/test_verl_multiturn.py

Skipped where verl is not installed (the shared test environment).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl.experimental.agent_loop.tool_agent_loop", reason="verl is not installed (docs/multiturn.md)")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from qwen_chat import ASSISTANT_HEADER, qwen_tokenizer  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop  # noqa: E402
from verl.experimental.agent_loop.tool_parser import FunctionCall  # noqa: E402
from verl.tools.tool_registry import initialize_tools_from_config  # noqa: E402
from verl.trainer.ppo.reward import load_reward_manager  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder  # noqa: E402

import countdown_gym.integrations.verl as verl_single  # noqa: E402
import countdown_gym.integrations.verl_multiturn as verl_tools  # noqa: E402
from countdown_gym import load_split, solution_path, solve  # noqa: E402
from countdown_gym.game.rules import format_number  # noqa: E402
from countdown_gym.game.text_format import build_prompt  # noqa: E402
from countdown_gym.integrations.verl_export import TOOL_CONFIG, export  # noqa: E402

N = 4


@pytest.fixture(scope="module")
def tok():
    corpus = [build_prompt(p, s) for p in load_split("tinyzero", "test")[:N] for s in ("tinyzero", "longproc")]
    return qwen_tokenizer(corpus)


def _dataset(path: Path, tok: Any, tool_config: Path | None = None) -> RLHFDataset:
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 8192, "filter_overlong_prompts": False,
                               "cache_dir": str(path.parent / "cache"),
                               **({"tool_config_path": str(tool_config)} if tool_config else {})})
    return RLHFDataset(data_files=[str(path)], tokenizer=tok, config=config)


def _rendered(tok: Any, messages: list[dict], tools: list[dict] | None = None) -> str:
    """The prompt as verl 0.9's agent loop renders it (its Continuous Token builder, add_generation_prompt=True)."""
    builder = create_continuous_token_builder(tok, hf_model_type="qwen2")
    return tok.decode(builder.build_initial_tokens(messages, tools=tools), skip_special_tokens=False)


@pytest.mark.parametrize("style", ["tinyzero", "longproc"])
def test_rlhf_dataset_reads_the_export_and_the_agent_loop_opens_the_assistant_turn_once(tmp_path, tok, style) -> None:
    (path,) = export("tinyzero", ["test"], style, tmp_path, limit=N)
    ds = _dataset(path, tok)
    assert len(ds) == N
    row = ds[0]
    assert row["data_source"] == "countdown_gym/tinyzero" and row["extra_info"]["prompt_style"] == style
    text = _rendered(tok, row["raw_prompt"])
    assert text.count("<|im_start|>assistant") == 1 and text.endswith(ASSISTANT_HEADER)
    if style == "tinyzero":
        assert text.startswith("<|im_start|>system\nYou are a helpful assistant. You first thinks")


def _reward_manager(tok: Any, module: Any) -> Any:
    config = OmegaConf.create({"reward": {
        "custom_reward_function": {"path": module.__file__, "name": "compute_score", "reward_kwargs": {}},
        "reward_manager": {"source": "register", "name": "naive"}}})
    return load_reward_manager(config, tok)


def _batch(tok: Any, rows: list[dict], responses: list[str], tool_fields: list[dict] | None = None) -> DataProto:
    ids = [tok(r, add_special_tokens=False)["input_ids"] for r in responses]
    width = max(len(i) for i in ids)
    resp = torch.full((len(ids), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), 1 + width), dtype=torch.long)
    for k, i in enumerate(ids):
        resp[k, : len(i)] = torch.tensor(i)
        mask[k, 0], mask[k, 1 : 1 + len(i)] = 1, 1
    non_tensor = {"data_source": np.array([r["data_source"] for r in rows], dtype=object),
                  "reward_model": np.array([r["reward_model"] for r in rows], dtype=object),
                  "extra_info": np.array([dict(r["extra_info"]) for r in rows], dtype=object)}
    if tool_fields is not None:
        non_tensor["tool_extra_fields"] = np.array(tool_fields, dtype=object)
    return DataProto.from_dict(tensors={"responses": resp, "attention_mask": mask}, non_tensors=non_tensor)


def _scores(manager: Any, batch: DataProto) -> list[dict]:
    async def run() -> list[dict]:
        return [await manager.run_single(batch[k : k + 1]) for k in range(len(batch))]

    return manager.loop.run_until_complete(run())  # the event loop the manager was built on, as verl's reward loop


def test_naive_reward_manager_scores_single_pass_rows_with_compute_score(tmp_path, tok) -> None:
    (path,) = export("tinyzero", ["test"], "tinyzero", tmp_path, limit=N)
    rows = [_dataset(path, tok)[k] for k in range(N)]
    problems = load_split("tinyzero", "test")[:N]
    right = [f"<think>ok</think><answer>{solve(p, limit=1)[0]}</answer>" for p in problems]
    wrong = ["<answer>1+1</answer>", "no answer", "<answer>(</answer>", right[0]]  # the last: another row's answer
    manager = _reward_manager(tok, verl_single)
    assert [s["reward_score"] for s in _scores(manager, _batch(tok, rows, right))] == [1.0] * N
    assert [s["reward_score"] for s in _scores(manager, _batch(tok, rows, wrong))] == [0.0] * N


def test_tool_agent_loop_calls_the_tools_and_the_reward_reads_their_turns(tmp_path, tok) -> None:
    paths = export("longproc-0.5k", ["test"], "tinyzero", tmp_path, limit=2, interaction="tool", max_turns=8)
    config_path = next(p for p in paths if p.name == TOOL_CONFIG)
    tools = {t.name: t for t in initialize_tools_from_config(str(config_path))}
    assert set(tools) == set(verl_tools.ACTIONS) and all(isinstance(t, verl_tools.CountdownTool) for t in tools.values())
    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools.values()]
    assert [s["function"]["parameters"] for s in schemas] == \
        [verl_tools.tool_schema(a)["function"]["parameters"] for a in verl_tools.ACTIONS]  # one source, through verl's models
    ds = _dataset(paths[0], tok, config_path)
    text = _rendered(tok, ds[0]["raw_prompt"], tools=schemas)
    assert "<tools>" in text and '"name": "move"' in text and text.count("<|im_start|>assistant") == 1

    loop = ToolAgentLoop.__new__(ToolAgentLoop)  # verl's own tool-call dispatch, without model servers
    loop.tools, loop.max_tool_response_length, loop.tool_response_truncate_side = tools, 1000, "middle"
    fields, replies = [], []
    for k, problem in enumerate(load_split("longproc-0.5k", "test")[:2]):
        row = ds[k]
        agent = AgentData(messages=list(row["raw_prompt"]), image_data=[], video_data=[], audio_data=None,
                          mm_processor_kwargs=None, metrics={}, request_id=f"r{k}", tools_kwargs=row["tools_kwargs"])
        calls = [("numbers", {}), ("move", {"a": "x", "op": "+", "b": 1})]
        if k == 0:  # the first trajectory solves its problem; the second stops after the two calls above
            calls += [("move", {"a": format_number(a), "op": op, "b": format_number(b)})
                      for a, op, b, _ in solution_path(problem.numbers, problem.target, problem.rules)]
        for name, args in calls:
            call = FunctionCall(name=name, arguments=json.dumps(args))
            resp, _, _ = asyncio.run(loop._call_tool(call, row["tools_kwargs"], agent))
            replies.append(resp.text)
        fields.append(dict(agent.extra_fields))
    assert replies[0].endswith("8 turns left") and replies[1].startswith("error") and replies[-3].endswith("solved")
    assert fields[0][verl_tools.TURNS_KEY][-1] and len(fields[1][verl_tools.TURNS_KEY]) == 1  # numbers() is free
    rows = [ds[0], ds[1]]
    scores = _scores(_reward_manager(tok, verl_tools), _batch(tok, rows, ["done", "stopped"], fields))
    assert [s["reward_score"] for s in scores] == [1.0, 0.0]
    assert scores[0]["reward_extra_info"]["invalid_turns"] == 1 and scores[1]["reward_extra_info"]["turns"] == 1
