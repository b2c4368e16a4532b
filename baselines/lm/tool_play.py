"""Countdown played through tool calls by a chat model, as TRL's tool loop plays it (``--interaction tools``): the
validation and held-out test of such a run. Each problem's puzzle text is the user message; the model's reply is
parsed by TRL's ``parse_response``, each tool call runs on the episode's environment and its reply is appended, until
the model stops calling tools, the episode ends, or the call or token budget is spent.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from baselines.lm.callbacks import ValidationCallback
from baselines.lm.evaluation import Evaluation, Record, evaluating, shared
from baselines.lm.generation import Sampling, generate
from baselines.lm.held_out import HeldOutTest
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
                       max_tool_calls: int | None = None, sampling: Sampling | None = None,
                       batch_size: int = 64) -> tuple[list[CountdownToolEnv], int]:
    """Play each problem as one tool-calling episode; returns the episodes' environments and the tokens generated.
    ``max_new_tokens`` bounds each episode's completion (turns and tool replies, as TRL's); ``max_tool_calls``
    defaults to ``max_turns + 4``, what the run gives TRL."""
    envs = [CountdownToolEnv(max_turns=max_turns) for _ in problems]
    chats = [[{"role": "user", "content": env.reset(**dataset_row(p))}] for env, p in zip(envs, problems, strict=True)]
    schemas = list(tool_functions(envs[0]).values()) if envs else []

    def render(chat: list[dict[str, Any]]) -> str:
        return tokenizer.apply_chat_template(chat, tools=schemas, add_generation_prompt=True, tokenize=False)

    start = [len(tokenizer(render(c), add_special_tokens=False)["input_ids"]) for c in chats]
    active, generated = list(range(len(problems))), 0
    for _ in range((max_turns + 4 if max_tool_calls is None else max_tool_calls) + 1):
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
            message = parse_reply(tokenizer, reply, ids[k], schemas)
            chats[i].append(message)
            if message.get("tool_calls") and not envs[i].episode.done:
                chats[i] += call_tools(envs[i], message)
                still.append(i)
        active = still
    return envs, generated


def tool_records(envs: Sequence[CountdownToolEnv]) -> list[Record]:
    """The evaluation records of played tool episodes (answer and text: the moves' ``<Solution>`` block)."""
    return [Record(e.solved, e.episode.invalid_turns > 0, e.episode.solution_text(), e.episode.solution_text())
            for e in envs]


def evaluate_tools(model: Any, tokenizer: Any, problems: Sequence[Problem], *, max_turns: int, max_new_tokens: int,
                   samples: int = 0, sampling: Sampling | None = None, batch_size: int = 64,
                   seed: int = 0) -> dict[str, float]:
    """The validation row (``Evaluation.row``) of ``problems`` played through tool calls."""
    play = {"max_turns": max_turns, "max_new_tokens": max_new_tokens, "batch_size": batch_size}
    with evaluating(model, seed):
        t0 = time.perf_counter()
        greedy, tokens = play_tool_episodes(model, tokenizer, problems, **play)
        ev = Evaluation(tool_records(greedy), greedy_tokens=tokens, greedy_seconds=time.perf_counter() - t0)
        if samples:
            t0 = time.perf_counter()
            sampled, ev.sampled_tokens = play_tool_episodes(model, tokenizer, [p for p in problems for _ in range(samples)],
                                                            sampling=sampling or Sampling(), **play)
            records = tool_records(sampled)
            ev.sampled = [records[i * samples:(i + 1) * samples] for i in range(len(problems))]
            ev.sampled_seconds = time.perf_counter() - t0
    return ev.row()


class ToolValidationCallback(ValidationCallback):
    """The run's validation with each problem played through tool calls (:func:`evaluate_tools`)."""

    def _play(self, model: Any, idx: list[int], step: int) -> dict[str, float]:
        return evaluate_tools(model, self.tokenizer, [self.problems[i] for i in idx], max_turns=self.max_turns,
                              max_new_tokens=self.max_new_tokens, samples=self.samples, sampling=self.sampling,
                              batch_size=self.batch_size, seed=self.seed + step)


class ToolHeldOutTest(HeldOutTest):
    """The held-out test with each test problem played greedily through tool calls."""

    def _play(self, model: Any, label: str) -> list[bool]:
        if self.verbose:
            print(f"test: greedy play of {len(self.problems)} held-out test problems through tool calls ({label} model)",
                  flush=True)

        def work(problems: list[Problem]) -> list[bool]:
            with evaluating(model):
                envs, _ = play_tool_episodes(model, self.tokenizer, problems, max_turns=self.play["max_turns"],
                                             max_new_tokens=self.play["max_new_tokens"], batch_size=self.play["batch_size"])
            return [e.solved for e in envs]

        return shared(self.problems, work)
