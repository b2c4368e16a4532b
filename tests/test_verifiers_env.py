"""countdown_gym.load_environment against the real verifiers library (classic SingleTurnEnv / MultiTurnEnv).

The rollouts are driven by a scripted policy behind verifiers' own ``Client`` interface (the solver's
moves, or hand-written answers): everything after the model's text (the rollout loop, env_response,
the stop conditions, the rubric) is verifiers' code and ours. No model server is involved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

vf = pytest.importorskip("verifiers")
pytest.importorskip("verifiers.legacy")  # the classic environments (verifiers < 0.4)

from verifiers.legacy.clients.client import Client  # noqa: E402
from verifiers.legacy.types import ResponseMessage  # noqa: E402

import countdown_gym  # noqa: E402
from countdown_gym import Problem, load_split, solution_path  # noqa: E402
from countdown_gym.integrations.verifiers_env import CountdownTurnEnv, load_environment  # noqa: E402
from countdown_gym.rules import format_number  # noqa: E402


class ScriptedClient(Client):
    """verifiers' client interface around a policy ``messages -> text`` (no network)."""

    def __init__(self, policy: Callable[[list[Any]], str]) -> None:
        super().__init__(None)
        self.policy = policy
        self.calls = 0

    def setup_client(self, config: Any) -> None:
        return None

    async def to_native_tool(self, tool: Any) -> Any:
        return tool

    async def to_native_prompt(self, messages: Any) -> tuple[Any, dict]:
        return list(messages), {}

    async def get_native_response(self, prompt: Any, model: str, sampling_args: Any, tools: Any = None, **kwargs: Any) -> str:
        self.calls += 1
        return self.policy(prompt)

    async def raise_from_native_response(self, response: Any) -> None:
        return None

    async def from_native_response(self, response: str) -> Any:
        message = ResponseMessage(content=response, finish_reason="stop", is_truncated=False)
        return vf.Response(id=f"r{self.calls}", created=int(time.time()), model="scripted", message=message)

    async def close(self) -> None:
        return None


def _run(env: Any, row: dict, client: ScriptedClient) -> Any:
    async def go() -> Any:
        state = await env.rollout(dict(row), client, "scripted")
        await env.rubric.score_rollout(state)
        return state

    return asyncio.run(go())


def _problem(row: dict) -> Problem:
    info = row["info"]
    return countdown_gym.integrations.verifiers_env._problem(info)


def test_verifiers_resolves_the_package_by_its_dashed_name() -> None:
    env = vf.load_environment("countdown-gym", num_train_examples=4, num_eval_examples=3)
    assert isinstance(env, vf.SingleTurnEnv) and env.env_id == "countdown-gym"
    assert len(env.get_dataset()) == 4 and len(env.get_eval_dataset()) == 3
    row = env.get_dataset()[0]
    p = load_split("tinyzero", "train")[0]
    assert row["info"]["numbers"] == list(p.numbers) and row["info"]["target"] == p.target
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and str(p.target) in row["prompt"][1]["content"]
    multi = vf.load_environment("countdown-gym", mode="multi-turn", preset="longproc-0.5k", num_train_examples=2,
                                eval_split=None)
    assert isinstance(multi, CountdownTurnEnv) and isinstance(multi, vf.MultiTurnEnv)


def test_single_turn_rollouts_are_scored_by_the_verifier() -> None:
    env = load_environment(num_train_examples=3, eval_split=None)
    rows = list(env.get_dataset())
    answers = {0: f"<think>easy</think><answer>{rows[0]['answer']}</answer>",  # the reference solution
               1: "<answer>2**3</answer>",  # a hack
               2: "I do not know"}
    for i, row in enumerate(rows):
        state = _run(env, row, ScriptedClient(lambda prompt, i=i: answers[i]))
        assert state["metrics"]["correct"] == (1.0 if i == 0 else 0.0)
        assert state["metrics"]["format"] == (1.0 if i == 0 else 0.0)  # 2**3 is tagged but does not parse
        assert state["reward"] == state["metrics"]["correct"]  # dense terms are metrics at weight 0
        assert len(state["trajectory"]) == 1 and set(state["metrics"]) >= {"oracle", "oracle_perfect", "num_turns"}


def test_single_turn_dense_weights_enter_the_reward() -> None:
    env = load_environment(num_train_examples=1, eval_split=None, oracle_perfect_weight=0.5)
    row = env.get_dataset()[0]
    p = _problem(row)
    lines = [f"{format_number(a)} {op} {format_number(b)} = {format_number(c)}" for a, op, b, c in solution_path(p.numbers, p.target, p.rules)]
    text = "<Solution>\n" + "\n".join(lines) + "\n</Solution>"
    state = _run(env, row, ScriptedClient(lambda prompt: text))
    assert state["metrics"]["correct"] == 1.0 and state["metrics"]["oracle_perfect"] == 1.0
    assert state["reward"] == pytest.approx(1.5)


def _solver_policy(problem: Problem) -> Callable[[list[Any]], str]:
    moves = solution_path(problem.numbers, problem.target, problem.rules)

    def policy(prompt: list[Any]) -> str:
        done = sum(1 for m in prompt if m["role"] == "assistant")
        a, op, b, _ = moves[done]
        return f"{format_number(a)} {op} {format_number(b)}"

    return policy


def test_multi_turn_rollout_plays_the_game_to_the_end() -> None:
    env = load_environment(mode="multi-turn", preset="longproc-0.5k", num_train_examples=2, eval_split=None)
    row = env.get_dataset()[0]
    p = _problem(row)
    client = ScriptedClient(_solver_policy(p))
    state = _run(env, row, client)
    n = len(p.numbers) - 1  # moves to one number
    assert client.calls == n and len(state["trajectory"]) == n
    assert state["metrics"]["solved"] == 1.0 and state["reward"] == 1.0
    assert state["metrics"]["oracle_perfect"] == 1.0 and state["metrics"]["invalid_turns"] == 0.0
    replies = [m["content"] for m in state["completion"] if m["role"] == "user"]
    assert len(replies) == n and replies[-1].endswith("solved")  # the game's last reply closes the rollout


def test_multi_turn_env_response_refuses_bad_turns_and_stops_at_the_turn_limit() -> None:
    env = load_environment(mode="multi-turn", preset="longproc-0.5k", num_train_examples=1, eval_split=None, max_turns=3)
    row = env.get_dataset()[0]
    script = iter(["hello", "undo", f"{row['info']['numbers'][0]} + 1000"])
    client = ScriptedClient(lambda prompt: next(script))
    state = _run(env, row, client)
    assert client.calls == 3 and state["metrics"]["solved"] == 0.0 and state["metrics"]["invalid_turns"] == 3.0
    replies = [m["content"] for m in state["completion"] if m["role"] == "user"]
    assert replies[0].startswith("error malformed") and replies[1].startswith("error nothing_to_undo")
    assert replies[-1].endswith("turn limit")

    async def give_up() -> Any:
        messages = [*row["prompt"], {"role": "assistant", "content": "give up"}]
        state = {"info": row["info"], "prompt": row["prompt"]}
        reply = await env.env_response(messages, state)
        return reply, state

    reply, state = asyncio.run(give_up())
    assert reply[0]["content"].startswith("gave up") and state["final_env_response"] == reply


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown mode"):
        load_environment(mode="tool")
    with pytest.raises(ValueError, match="unknown split"):
        load_environment(train_split="dev")
    with pytest.raises(ValueError, match="cannot both be None"):
        load_environment(train_split=None, eval_split=None)
    with pytest.raises(ValueError, match="multi-turn prompt_style"):
        load_environment(mode="multi-turn", prompt_style="tinyzero", num_train_examples=1, eval_split=None)


def test_evaluate_sync_runs_both_modes_end_to_end() -> None:
    """verifiers' own evaluation loop (generate, score, outputs): the solver wins every game, and a
    single-turn policy that answers the reference solution scores every problem."""
    multi = load_environment(mode="multi-turn", preset="longproc-0.5k", train_split=None, num_eval_examples=4)
    rows = {r["prompt"][0]["content"]: r for r in multi.get_eval_dataset()}
    client = ScriptedClient(lambda prompt: _solver_policy(_problem(rows[prompt[0]["content"]]))(prompt))
    out = multi.evaluate_sync(client, model="scripted", num_examples=4)
    assert [o["reward"] for o in out["outputs"]] == [1.0] * 4
    assert out["metadata"]["avg_metrics"]["invalid_turns"] == 0.0

    single = load_environment(train_split=None, num_eval_examples=4)
    answers = {r["prompt"][-1]["content"]: r["answer"] for r in single.get_eval_dataset()}
    out = single.evaluate_sync(ScriptedClient(lambda prompt: f"<answer>{answers[prompt[-1]['content']]}</answer>"),
                               model="scripted", num_examples=4)
    assert [o["reward"] for o in out["outputs"]] == [1.0] * 4
