"""countdown_gym.load_environment against the real verifiers library (classic SingleTurnEnv / MultiTurnEnv).

The rollouts are driven by a scripted policy behind verifiers' own ``Client`` interface (the solver's
moves, or hand-written answers): everything after the model's text (the rollout loop, env_response,
the stop conditions, the rubric) is verifiers' code and ours. No model server is involved.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

vf = pytest.importorskip("verifiers")
pytest.importorskip("verifiers.legacy")  # the classic environments (verifiers < 0.4)

from verifiers.legacy.clients.client import Client  # noqa: E402
from verifiers.legacy.types import ResponseMessage  # noqa: E402

from countdown_gym import Problem, load_split, solution_path  # noqa: E402
from countdown_gym.game.rules import format_number  # noqa: E402
from countdown_gym.integrations.verifiers_env import (  # noqa: E402
    CountdownToolsEnv,
    CountdownTurnEnv,
    dense_terms,
    load_environment,
)
from countdown_gym.integrations.verl import problem_from_ground_truth  # noqa: E402


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
    return problem_from_ground_truth(row["info"])


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
        assert len(state["trajectory"]) == 1 and set(state["metrics"]) >= {"oracle_reachable", "oracle_perfect", "num_turns"}


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


def test_the_rubric_reports_the_registrys_variants_by_name_and_weights_them() -> None:
    class Half:
        def score(self, states: Any, targets: Any) -> Any:
            return [0.5] * len(states)

    env = load_environment(mode="multi-turn", preset="longproc-0.5k", num_train_examples=1, eval_split=None,
                           weights={"critic": 2.0, "oracle-reachable": 1.0}, scorers={"critic": Half()})
    row = env.get_dataset()[0]
    state = _run(env, row, ScriptedClient(_solver_policy(_problem(row))))
    assert state["metrics"]["critic"] == 0.5 and state["metrics"]["oracle_reachable"] == 1.0
    assert state["reward"] == pytest.approx(1.0 + 2.0 * 0.5 + 1.0)
    assert dense_terms(("sparse",)) == ["format", "oracle-perfect", "oracle-reachable"]  # no critic given: no critic
    with pytest.raises(ValueError, match="does not report"):
        load_environment(mode="tools", num_train_examples=1, eval_split=None, weights={"format": 1.0})


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
    with pytest.raises(ValueError, match="max_turns=4 applies to mode 'multi-turn' or 'tools'"):  # was ignored
        load_environment(max_turns=4, num_train_examples=1, eval_split=None)


def test_non_finite_weights_and_scorers_without_score_are_refused() -> None:
    from countdown_gym.integrations.verifiers_env import correct, rubric

    # a string or a bool was read as a number, 10**400 was a raw OverflowError: verl's check, one for both
    for weights in ({"format": float("nan")}, {"oracle-reachable": float("inf")}, {"format": "2"}, {"format": True},
                    {"format": 10**400}):
        with pytest.raises(ValueError, match=r"weights\['(format|oracle-reachable)'\] must be a finite number"):
            rubric(correct, ("sparse",), lambda completion, info: None, weights)
    with pytest.raises(ValueError, match=r"weights\['format'\] must be a finite number, got str '0.5'"):
        load_environment(num_train_examples=1, eval_split=None, format_weight="0.5")
    with pytest.raises(ValueError, match="with a score.states, targets. method.*got int"):
        rubric(correct, ("sparse",), lambda completion, info: None, scorers={"critic": 5})
    with pytest.raises(TypeError, match="scorers must be a mapping of kind -> object"):  # was an AttributeError
        rubric(correct, ("sparse",), lambda completion, info: None, scorers=object())


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


# --- tools mode ------------------------------------------------------------------------------------------


class ToolClient(ScriptedClient):
    """A scripted tool-calling policy: ``messages -> [(name, arguments), ...]`` (tool calls) or a final text."""

    async def from_native_response(self, response: Any) -> Any:
        from verifiers.legacy.types import ToolCall

        if isinstance(response, str):
            return await super().from_native_response(response)
        calls = [ToolCall(id=f"c{self.calls}-{k}", name=n, arguments=json.dumps(a)) for k, (n, a) in enumerate(response)]
        message = ResponseMessage(content=None, tool_calls=calls, finish_reason="tool_calls", is_truncated=False)
        return vf.Response(id=f"r{self.calls}", created=int(time.time()), model="scripted", message=message)


def _tool_solver(problem: Problem) -> Callable[[list[Any]], Any]:
    moves = solution_path(problem.numbers, problem.target, problem.rules)

    def policy(prompt: list[Any]) -> Any:
        done = sum(1 for m in prompt if m["role"] == "assistant")
        if done == 0:
            return [("numbers", {}), ("move", {"a": "nine", "op": "+", "b": 1})]  # a free look, a refused move
        a, op, b, _ = moves[done - 1]
        return [("move", {"a": format_number(a), "op": op, "b": format_number(b)})]

    return policy


def test_tools_mode_plays_tool_calls_with_verifiers_own_tool_definitions() -> None:
    from countdown_gym.integrations.trl_env import tool_prompt

    env = load_environment(mode="tools", preset="longproc-0.5k", num_train_examples=1, eval_split=None, max_turns=8)
    assert isinstance(env, CountdownToolsEnv) and [t.name for t in env.tool_defs] == ["move", "undo", "give_up", "numbers"]
    row = env.get_dataset()[0]
    p = _problem(row)
    assert row["prompt"] == [{"role": "user", "content": tool_prompt(p, 8)}]
    client = ToolClient(_tool_solver(p))
    state = _run(env, row, client)
    n = len(p.numbers) - 1
    assert client.calls == n + 1 and state["metrics"]["solved"] == 1.0 and state["reward"] == 1.0
    assert state["metrics"]["invalid_turns"] == 1.0
    replies = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    assert replies[0].endswith("turns left") and replies[1].startswith("error")
    assert replies[-1].endswith("solved") and len(replies) == n + 2  # the game's last reply closes the rollout


def test_tools_mode_bad_calls_are_answers_and_a_text_answer_ends_the_rollout() -> None:
    env = load_environment(mode="tools", preset="longproc-0.5k", num_train_examples=1, eval_split=None)
    row = env.get_dataset()[0]
    script = iter([[("jump", {}), ("move", {"a": 1})], [("undo", {})], "I give up."])
    state = _run(env, row, ToolClient(lambda prompt: next(script)))
    replies = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    assert replies[0].startswith("error bad_call: unknown tool 'jump'") and replies[1].startswith("error bad_call")
    assert replies[2].startswith("error nothing_to_undo") and state["metrics"]["solved"] == 0.0
    with pytest.raises(ValueError, match="leave prompt_style unset"):
        load_environment(mode="tools", prompt_style="tinyzero", num_train_examples=1, eval_split=None)


@pytest.mark.parametrize("mode", ["multi-turn", "tools"])
def test_a_format_weight_in_a_game_mode_is_refused_not_dropped(mode) -> None:
    with pytest.raises(ValueError, match=r"weights name \['format'\]"):
        load_environment(mode=mode, num_train_examples=1, eval_split=None, format_weight=0.5)


def test_tools_mode_answers_arguments_nested_too_deep_for_json() -> None:
    from countdown_gym.integrations.verifiers_env import play_tools

    call = {"id": "c", "type": "function", "function": {"name": "move", "arguments": "[" * 5000 + "]" * 5000}}
    env, replies = play_tools({"numbers": [6, 2, 5, 3], "target": 8}, [{"role": "assistant", "tool_calls": [call]}])
    assert replies[0].startswith("error bad_call") and env.episode.turns == 0


def test_tools_mode_answers_a_key_twice_in_the_arguments() -> None:
    """'{"a": 6, "op": "-", "b": 2, "a": 5}' was played as 5 - 2 (the last 'a' won silently); it is a bad call."""
    from countdown_gym.integrations.verifiers_env import play_tools

    args = '{"a": 6, "op": "-", "b": 2, "a": 5}'
    call = {"id": "c", "type": "function", "function": {"name": "move", "arguments": args}}
    env, replies = play_tools({"numbers": [6, 2, 5, 3], "target": 8}, [{"role": "assistant", "tool_calls": [call]}])
    assert replies == ["error bad_call: key 'a' appears twice in one object"] and env.episode.turns == 0


# --- the documented client: openai.AsyncOpenAI behind vf.OpenAIChatCompletionsClient ----------------------


class _ChatServer:
    """A local OpenAI-compatible /v1/chat/completions endpoint on 127.0.0.1 answering with ``policy(messages)``:
    a text, or a list of ``(name, arguments)`` tool calls."""

    def __init__(self, policy: Callable[[list[dict]], Any]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.requests: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                answer = policy(body["messages"])
                message: dict[str, Any] = {"role": "assistant", "content": answer if isinstance(answer, str) else None}
                if not isinstance(answer, str):
                    message["tool_calls"] = [{"id": f"call{len(outer.requests)}-{k}", "type": "function",
                                              "function": {"name": n, "arguments": json.dumps(a)}}
                                             for k, (n, a) in enumerate(answer)]
                data = json.dumps({
                    "id": f"cmpl{len(outer.requests)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body["model"], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "stop" if isinstance(answer, str) else "tool_calls"}],
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_evaluate_sync_with_the_documented_openai_client() -> None:
    """docs/integrations.md: vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=...)) into evaluate_sync, for the
    single-turn and the tools environment (a bare AsyncOpenAI is verifiers' 'Unsupported client type')."""
    from openai import AsyncOpenAI

    single = load_environment(train_split=None, num_eval_examples=3)
    answers = {r["prompt"][-1]["content"]: r["answer"] for r in single.get_eval_dataset()}
    server = _ChatServer(lambda messages: f"<answer>{answers[messages[-1]['content']]}</answer>")
    try:
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.url, api_key="EMPTY"))
        out = single.evaluate_sync(client, model="local", num_examples=3)
        assert [o["reward"] for o in out["outputs"]] == [1.0] * 3 and len(server.requests) == 3
        assert server.requests[0]["messages"][0]["role"] == "system"  # TinyZero's system prompt, then the question
        with pytest.raises(ValueError, match="Unsupported client type"):
            single.evaluate_sync(AsyncOpenAI(base_url=server.url, api_key="EMPTY"), model="local", num_examples=1)
    finally:
        server.close()

    tools = load_environment(mode="tools", preset="longproc-0.5k", train_split=None, num_eval_examples=2)
    rows = {r["prompt"][-1]["content"]: r for r in tools.get_eval_dataset()}

    def solve_with_tools(messages: list[dict]) -> Any:
        p = _problem(rows[next(m["content"] for m in messages if m["role"] == "user")])
        done = sum(1 for m in messages if m["role"] == "assistant")
        moves = solution_path(p.numbers, p.target, p.rules)
        if done == len(moves):
            return "Solved."
        a, op, b, _ = moves[done]
        return [("move", {"a": int(a), "op": op, "b": int(b)})]

    server = _ChatServer(solve_with_tools)
    try:
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.url, api_key="EMPTY"))
        out = tools.evaluate_sync(client, model="local", num_examples=2)
        assert [o["reward"] for o in out["outputs"]] == [1.0, 1.0]
        sent = server.requests[0]["tools"]  # what the model is shown: verifiers' definitions of the typed tools
        assert [t["function"]["name"] for t in sent] == ["move", "undo", "give_up", "numbers"]
        assert sent[0]["function"]["parameters"]["properties"]["op"]["enum"] == ["+", "-", "*", "/"]
    finally:
        server.close()
