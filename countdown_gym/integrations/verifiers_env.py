"""Countdown as a ``verifiers`` environment: ``verifiers.load_environment("countdown-gym", ...)`` calls
:func:`load_environment` (verifiers 0.3.x's classic environments) in ``mode`` ``"single-turn"`` (``SingleTurnEnv``,
rubric ``correct``), ``"multi-turn"`` (:class:`CountdownTurnEnv`) or ``"tools"`` (:class:`CountdownToolsEnv`, the
TRL adapter's tools), both rubric ``solved``. Guide: ``docs/integrations.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import verifiers as vf

if not hasattr(vf, "MultiTurnEnv"):  # verifiers 0.4 replaced the classic environments by verifiers.v1
    raise ImportError(
        f"countdown-gym's verifiers environments need verifiers>=0.3.1,<0.4 (SingleTurnEnv / MultiTurnEnv); "
        f"verifiers {getattr(vf, '__version__', '?')} is installed"
    )

from countdown_gym.data.splits import load_split
from countdown_gym.dataclass_cli.strict import strict_json
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import check_finite
from countdown_gym.game.solver import solve
from countdown_gym.game.text_format import TINYZERO_SYSTEM, chat_messages
from countdown_gym.game.turn_format import TURN_PROMPT_STYLES, bad_call, bad_call_reply, tool_prompt, turn_prompt
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS, TurnEpisode, TurnReplay, check_budget, replay_turns
from countdown_gym.game.verifier import message_content, message_field, verify
from countdown_gym.integrations.trl import replay
from countdown_gym.integrations.trl_env import CountdownToolEnv, tool_functions
from countdown_gym.integrations.verl import ground_truth, problem_from_ground_truth
from countdown_gym.rewards.variants import OUTCOME, completion_variants, get_variant

MODES: tuple[str, ...] = ("single-turn", "multi-turn", "tools")


def row(problem: Problem, prompt: list[dict[str, str]]) -> dict[str, Any]:
    """One dataset row: ``prompt`` messages, ``answer`` (a reference solution), ``info`` (the problem)."""
    solutions = solve(problem, limit=1)
    info = {**ground_truth(problem), "id": problem.id or ""}
    return {"prompt": prompt, "answer": solutions[0] if solutions else "", "info": info}


def _dataset(problems: Sequence[Problem], prompt: Any) -> Any:
    from datasets import Dataset

    return Dataset.from_list([row(p, prompt(p)) for p in problems])


def _problems(preset: str, split: str | None, n: int) -> list[Problem]:
    if split is None:
        return []
    problems = load_split(preset, split)
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"the number of examples must be an int (-1 = all), got {n!r}")
    return problems if n < 0 else problems[:n]


def correct(completion: Any, info: Mapping[str, Any], **kwargs: Any) -> float:
    """1.0 if the completion's final answer solves the row's problem (:func:`countdown_gym.verify`), else 0.0."""
    return verify(problem_from_ground_truth(info), completion).reward


def dense_terms(outcome: Sequence[str], scorers: Mapping[str, Any] | None = None) -> list[str]:
    """The registry's ``text`` variants a rubric reports next to its outcome: every one scored from a replay alone,
    or with a scorer given in ``scorers`` (by kind, e.g. ``{"critic": critics.load_critic()}``), but ``outcome``."""
    return completion_variants(scorers or {}, outcome)


def rubric(outcome: Callable[..., float], outcome_names: Sequence[str], game: Callable[[Any, Mapping[str, Any]], Any],
           weights: Mapping[str, float] | None = None, scorers: Mapping[str, Any] | None = None,
           extra: Sequence[Callable[..., float]] = ()) -> Any:
    """A ``verifiers`` rubric: ``outcome`` (weight 1), each of :func:`dense_terms` of the replay ``game(completion,
    info)`` (named like the variant, ``_`` for ``-``; weight 0 unless ``weights`` gives one) and ``extra`` metrics."""
    weights = {get_variant(k, "text").name: check_finite(w, f"weights[{k!r}]") for k, w in (weights or {}).items()}
    names = dense_terms(outcome_names, scorers)
    if set(weights) - set(names):
        raise ValueError(f"weights name {sorted(set(weights) - set(names))}, which this rubric does not report; "
                         f"its terms: {names}")

    def term(name: str) -> Callable[..., float]:
        variant = get_variant(name, "text")
        scorer = variant.need(variant.scorer_in(scorers))

        def score(completion: Any, info: Mapping[str, Any], **kwargs: Any) -> float:
            return variant.completion_score(game(completion, info), scorer)

        score.__name__ = score.__qualname__ = name.replace("-", "_")
        return score

    return vf.Rubric(funcs=[outcome, *map(term, names), *extra],
                     weights=[1.0, *(weights.get(n, 0.0) for n in names), *(0.0 for _ in extra)])


def agent_turns(messages: Any, prompt_len: int = 0) -> list[str]:
    """The texts of the assistant messages after the first ``prompt_len`` messages: the agent's turns."""
    return [message_content(m) for m in list(messages)[prompt_len:] if message_field(m, "role") == "assistant"]


def play(info: Mapping[str, Any], completion: Any, max_turns: int = DEFAULT_MAX_TURNS) -> TurnReplay:
    """The game of a multi-turn rollout: its agent turns replayed through :func:`replay_turns`."""
    return replay_turns(problem_from_ground_truth(info), agent_turns(completion), max_turns=max_turns)


class CountdownTurnEnv(vf.MultiTurnEnv):
    """``CountdownMultiTurn-v0``'s game as a ``verifiers.MultiTurnEnv``: one move per assistant message,
    the game's reply as the next user message, the rollout over when the game is."""

    def __init__(self, game_max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> None:
        check_budget("game_max_turns", game_max_turns, allow_none=False)
        self.game_max_turns = game_max_turns
        # one model turn more than the game allows: the game itself ends the rollout (its reply to the last
        # turn, "... turn limit", is the final message); verifiers' own limit is only a safety net
        super().__init__(max_turns=game_max_turns + 1, **kwargs)

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        """The game's reply to the last agent turn (the turns so far are replayed: one source of truth);
        once the game is over the reply is the rollout's final message."""
        episode = TurnEpisode(problem_from_ground_truth(state["info"]), max_turns=self.game_max_turns)
        results = episode.play_turns(agent_turns(messages, len(state["prompt"])))
        response = [vf.UserMessage(content=results[-1].reply if results else "")]
        if episode.done:
            state["final_env_response"] = response
        return response


def game_rubric(game: Callable[[Any, Mapping[str, Any]], TurnReplay], weights: Mapping[str, float] | None = None,
                scorers: Mapping[str, Any] | None = None) -> Any:
    """A game's outcome as a rubric: ``solved`` (weight 1), the registry's dense terms over the game's transition
    records (metrics unless weighted), ``invalid_turns`` (a metric); ``game(completion, info)``: the rollout's game."""

    def solved(completion: Any, info: Mapping[str, Any], **kwargs: Any) -> float:
        """1.0 if the agent reached the target, else 0.0."""
        return game(completion, info).reward

    def invalid_turns(completion: Any, info: Mapping[str, Any], **kwargs: Any) -> float:
        return float(game(completion, info).invalid_turns)

    return rubric(solved, OUTCOME, game, weights, scorers, [invalid_turns])


def _tool_calls(messages: Any) -> list[tuple[str, str, Any]]:
    """``(id, name, arguments JSON)`` of every tool call in the assistant messages, in order."""
    calls = [c for m in messages if message_field(m, "role") == "assistant" for c in message_field(m, "tool_calls") or []]
    fns = [message_field(c, "function") or c for c in calls]  # an OpenAI-style dict, or verifiers' ToolCall
    return [(message_field(c, "id"), message_field(f, "name"), message_field(f, "arguments"))
            for c, f in zip(calls, fns, strict=True)]


def play_tools(info: Mapping[str, Any], messages: Any, max_turns: int = DEFAULT_MAX_TURNS) -> tuple[CountdownToolEnv, list[str]]:
    """The row's game with every tool call of ``messages`` played in order (the one source of truth of a rollout),
    and each call's reply; a call of no known tool, or with unreadable arguments, is answered with an error."""
    env = CountdownToolEnv(max_turns=max_turns)
    env.reset(**ground_truth(problem_from_ground_truth(info)))
    tools, replies = tool_functions(env), []
    for _, name, args in _tool_calls(messages):
        try:
            kwargs = strict_json(args) if isinstance(args, str) else dict(args or {})
            problem = bad_call(name, kwargs, tools)
            if problem is not None:
                raise ValueError(problem)
            replies.append(tools[name](**kwargs))
        except (TypeError, ValueError, RecursionError) as exc:  # a bad call is an answer the model reads, never a crash
            replies.append(bad_call_reply(exc))
    return env, replies


class CountdownToolsEnv(vf.ToolEnv):
    """The game for tool-calling models (``verifiers.ToolEnv``): every call is played on the row's game (the calls so
    far are replayed: one source of truth) and answered with the game's reply; the rollout ends when the game does or
    the model answers without a tool call."""

    def __init__(self, game_max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> None:
        check_budget("game_max_turns", game_max_turns, allow_none=False)
        self.game_max_turns = game_max_turns
        # verifiers converts the typed tool functions to its tool definitions itself
        super().__init__(tools=list(tool_functions().values()), max_turns=game_max_turns + 1, **kwargs)

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        env, replies = play_tools(state["info"], messages, self.game_max_turns)
        new = _tool_calls(list(messages)[-1:])  # the last message's calls: the last of the replies
        response = [vf.ToolMessage(tool_call_id=str(cid), content=reply)
                    for (cid, _, _), reply in zip(new, replies[len(replies) - len(new):], strict=True)]
        if env.episode.done:
            state["final_env_response"] = response
        return response


def load_environment(mode: str = "single-turn", preset: str = "tinyzero", train_split: str | None = "train",
                     eval_split: str | None = "test", num_train_examples: int = -1, num_eval_examples: int = -1,
                     prompt_style: str | None = None, system_prompt: str | None = None,
                     max_turns: int = DEFAULT_MAX_TURNS, format_weight: float = 0.0, oracle_weight: float = 0.0,
                     oracle_perfect_weight: float = 0.0, weights: Mapping[str, float] | None = None,
                     scorers: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """A ``verifiers`` environment of a frozen split (``preset``; rows from ``train_split`` and ``eval_split``;
    ``num_*_examples=-1`` = all) in ``mode`` ``"single-turn"``, ``"multi-turn"`` or ``"tools"``.

    ``prompt_style``: single-turn, one of ``text_format.PROMPT_STYLES`` (default ``"tinyzero"``, with its system
    prompt unless ``system_prompt`` is given); multi-turn, one of ``turn_format.TURN_PROMPT_STYLES`` (default
    ``"instruct"``). The rubric's dense terms (those needing a critic when ``scorers`` gives one) are metrics unless
    ``weights`` (by variant name; ``format_weight``, ``oracle_weight``, ``oracle_perfect_weight`` for ``format``,
    ``oracle-reachable``, ``oracle-perfect``) weights them. Other keyword arguments go to the environment.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(MODES)}")
    if train_split is None and eval_split is None:
        raise ValueError("train_split and eval_split cannot both be None")
    named = {"format": format_weight, "oracle-reachable": oracle_weight, "oracle-perfect": oracle_perfect_weight}
    weights = {**{k: w for k, w in named.items() if w}, **(weights or {})}
    train = _problems(preset, train_split, num_train_examples)
    test = _problems(preset, eval_split, num_eval_examples)
    if mode == "single-turn":
        if max_turns != DEFAULT_MAX_TURNS:  # it would be ignored
            raise ValueError(f"max_turns={max_turns} applies to mode 'multi-turn' or 'tools', not 'single-turn'")
        style = prompt_style or "tinyzero"
        if system_prompt is None and style == "tinyzero":
            system_prompt = TINYZERO_SYSTEM

        def prompt(p: Problem) -> list[dict[str, str]]:  # the user turn; TinyZero's pre-started assistant turn is
            return [m for m in chat_messages(p, style) if m["role"] == "user"]  # dropped (a chat API cannot continue it)

        env_cls, game = vf.SingleTurnEnv, {}
        scoring = rubric(correct, ("sparse",), lambda completion, info: replay(problem_from_ground_truth(info), completion),
                         weights, scorers)
    else:
        tools, style = mode == "tools", prompt_style or "instruct"
        if tools and prompt_style is not None:
            raise ValueError("mode='tools' has one prompt (the tool-calling puzzle text); leave prompt_style unset")
        if style not in TURN_PROMPT_STYLES:
            raise ValueError(f"unknown multi-turn prompt_style {style!r}; choose one of {list(TURN_PROMPT_STYLES)}")

        def prompt(p: Problem) -> list[dict[str, str]]:
            return [{"role": "user", "content": tool_prompt(p, max_turns) if tools else turn_prompt(p, style, max_turns)}]

        def played(completion: Any, info: Mapping[str, Any]) -> TurnReplay:
            return play_tools(info, completion, max_turns)[0].replay if tools else play(info, completion, max_turns)

        env_cls, game = CountdownToolsEnv if tools else CountdownTurnEnv, {"game_max_turns": max_turns}
        scoring = game_rubric(played, weights, scorers)
    return env_cls(**game, dataset=_dataset(train, prompt) if train else None,
                   eval_dataset=_dataset(test, prompt) if test else None, system_prompt=system_prompt, rubric=scoring,
                   **kwargs)


__all__ = ["MODES", "CountdownToolsEnv", "CountdownTurnEnv", "agent_turns", "correct", "dense_terms", "game_rubric",
           "load_environment", "play", "play_tools", "row", "rubric"]
