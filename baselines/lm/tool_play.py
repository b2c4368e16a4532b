"""Countdown played through tool calls by a chat model, as TRL's tool loop plays it (``--interaction tools``): the
validation and held-out test of such a run (``Play(tools=True)`` of ``baselines.lm.evaluation``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baselines.lm.generation import Sampling, generate
from countdown_gym.game.problem import Problem
from countdown_gym.game.turn_format import trl_call_error
from countdown_gym.integrations.trl_env import CountdownToolEnv, dataset_row, tool_functions


def parse_reply(tokenizer: Any, text: str, prompt_ids: list[int], tools: list[Any]) -> dict[str, Any]:
    """The assistant message of a generated ``text`` (its tool calls parsed), as TRL parses a completion."""
    from trl.chat_template_utils import add_response_schema, parse_response

    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        add_response_schema(tokenizer)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return parse_response(tokenizer, ids, prefix=prompt_ids, tools=tools)


def call_tools(env: CountdownToolEnv, message: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the tool calls of an assistant ``message`` on ``env``; their ``tool`` messages (errors answered as TRL does)."""
    tools = tool_functions(env)
    replies = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        name = function.get("name", "unknown")
        try:
            result = str(tools[name](**function.get("arguments", {})))
        except Exception as exc:  # noqa: BLE001 - a bad call is an answer the model reads, as in TRL's loop
            result = trl_call_error(name, exc, known=name in tools)
        replies.append({"role": "tool", "name": name, "content": result})
    return replies


def play_tool_episodes(model: Any, tokenizer: Any, problems: Sequence[Problem], *, max_turns: int, max_new_tokens: int,
                       sampling: Sampling | None = None, batch_size: int = 64) -> tuple[list[CountdownToolEnv], int]:
    """Play each problem as one tool-calling episode (the puzzle text as the user message; tool calls run on its
    environment until the model stops calling tools, the episode ends, or the call or token budget is spent); returns
    the episodes' environments and the tokens generated. ``max_new_tokens`` bounds each episode's completion (turns and
    tool replies, as TRL's); at most ``max_turns + 4`` tool calls, what the run gives TRL."""
    envs = [CountdownToolEnv(max_turns=max_turns) for _ in problems]
    chats = [[{"role": "user", "content": env.reset(**dataset_row(p))}] for env, p in zip(envs, problems, strict=True)]
    schemas = list(tool_functions(envs[0]).values()) if envs else []

    def render(chat: list[dict[str, Any]]) -> str:
        return tokenizer.apply_chat_template(chat, tools=schemas, add_generation_prompt=True, tokenize=False)

    start = [len(tokenizer(render(c), add_special_tokens=False)["input_ids"]) for c in chats]
    active, generated = list(range(len(problems))), 0
    for rounds_left in range(max_turns + 4, -1, -1):  # the replies to max_turns + 4 tool calls, and the answer after them
        texts = [render(chats[i]) for i in active]
        ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        left = [max_new_tokens - (len(x) - start[i]) for i, x in zip(active, ids, strict=True)]
        keep = [k for k, room in enumerate(left) if room > 0]  # a tool reply that filled the budget ends its episode
        if not keep:
            break
        outs, n = generate(model, tokenizer, [texts[k] for k in keep], max_new_tokens=max(left[k] for k in keep),
                           sampling=sampling, batch_size=batch_size)
        generated += n
        still = []
        for k, (reply,) in zip(keep, outs, strict=True):
            i = active[k]
            reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
            if len(reply_ids) > left[k]:  # written to the batch's largest budget: cut at its own, as TRL cuts
                reply = tokenizer.decode(reply_ids[: left[k]])
            message = parse_reply(tokenizer, reply, ids[k], schemas)
            chats[i].append(message)
            if message.get("tool_calls") and not envs[i].episode.done and rounds_left:  # TRL runs no call past them
                chats[i] += call_tools(envs[i], message)
                still.append(i)
        active = still
    return envs, generated
