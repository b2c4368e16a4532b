"""One source for the tool schemas: what TRL shows the model, verl's tool config and verifiers' tool definitions
all come from the typed tool functions of countdown_gym.integrations.trl_env, and agree."""

from __future__ import annotations

import json
from typing import Any

import pytest

from countdown_gym.integrations.trl_env import TOOL_NAMES, tool_functions, tool_json_schema
from countdown_gym.integrations.verl_multiturn import tool_config, tool_schema

pytest.importorskip("transformers")


def trl_schemas() -> dict[str, dict[str, Any]]:
    """The tool schemas exactly as the model reads them under TRL: GRPOTrainer passes the environment's bound methods
    as ``tools`` to the chat template (Qwen2.5-Instruct's), which writes one JSON schema per line inside <tools>."""
    from qwen_chat import qwen_tokenizer

    tok = qwen_tokenizer()
    text = tok.apply_chat_template([{"role": "user", "content": "go"}], tools=list(tool_functions().values()),
                                   tokenize=False, add_generation_prompt=True)
    block = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    return {s["function"]["name"]: s["function"] for s in map(json.loads, block.splitlines())}


def normalized(function: dict[str, Any]) -> dict[str, Any]:
    """Name, description, required and per-parameter types / enum / description, whatever the converter's style
    (``"type": [..]`` or ``anyOf``, titles, ``additionalProperties``)."""
    params = function["parameters"]
    props = {}
    for name, p in params.get("properties", {}).items():
        types = p.get("type") or [alt["type"] for alt in p["anyOf"]]
        props[name] = {"types": sorted([types] if isinstance(types, str) else types), "enum": p.get("enum"),
                       "description": p.get("description")}
    return {"name": function["name"], "description": function["description"], "required": params.get("required", []),
            "properties": props}


def test_trl_verl_and_verifiers_schemas_agree() -> None:
    trl = {n: normalized(f) for n, f in trl_schemas().items()}
    verl = {t["tool_schema"]["function"]["name"]: normalized(t["tool_schema"]["function"]) for t in tool_config()["tools"]}
    assert list(trl) == list(verl) == list(TOOL_NAMES)
    assert trl == verl
    move = trl["move"]["properties"]
    assert move["a"]["types"] == move["b"]["types"] == ["integer", "string"] and move["op"]["enum"] == ["+", "-", "*", "/"]
    assert trl["move"]["required"] == ["a", "op", "b"]
    for name in TOOL_NAMES:  # verl's schema is TRL's, byte for byte (less the return entry OpenAI has no field for)
        assert tool_schema(name) == tool_json_schema(name)
        assert {k: v for k, v in trl_schemas()[name].items() if k != "return"} == tool_schema(name)["function"]
    pytest.importorskip("verifiers")
    from countdown_gym.integrations.verifiers_env import CountdownToolsEnv

    env = CountdownToolsEnv(eval_dataset=_one_row())
    vf_defs = {t.name: normalized({"name": t.name, "description": t.description, "parameters": t.parameters})
               for t in env.tool_defs}
    assert vf_defs == trl


def _one_row() -> Any:
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": "go"}], "answer": "", "info": {"numbers": [1, 2],
                                                                                                    "target": 3}}])


def test_unknown_tool_names_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown Countdown tool"):
        tool_json_schema("jump")
    with pytest.raises(ValueError, match="unknown Countdown tool"):
        tool_schema("jump")


def test_without_transformers_the_schema_error_names_the_extra(no_transformers, tmp_path, capsys) -> None:
    with pytest.raises(ImportError, match=r"countdown-gym\[llm\]"):
        tool_json_schema("move")
    from countdown_gym.cli.export import main

    pytest.importorskip("pyarrow")
    args = ["--format", "verl", "--interaction", "tool", "--preset", "tinyzero", "--split", "test", "--out", str(tmp_path)]
    assert main(args) == 2 and "get_json_schema" in capsys.readouterr().err
