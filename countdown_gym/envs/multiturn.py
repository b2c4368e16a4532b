"""``CountdownMultiTurn-v0``: the multi-turn language MDP (the agent plans, the environment computes): the Gymnasium
environment of :class:`~countdown_gym.game.turn_game.TurnEpisode`."""

from __future__ import annotations

from typing import Any, SupportsFloat

from countdown_gym.envs.problem_source import ProblemSpec, SourcedEnv
from countdown_gym.envs.text import TextSpace
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules, describe_value
from countdown_gym.game.text_format import CHARSET, format_state, sanitize
from countdown_gym.game.turn_format import TURN_END, TURN_ERRORS, TURN_PROMPT_STYLES, prompt_message, transcript
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS, TurnEpisode, TurnResult, check_budget
from countdown_gym.game.verifier import REASONS

_LONGEST_ERROR = len("error ") + max(map(len, (*TURN_ERRORS, *REASONS)))  # the Rules.check codes are REASONS


def longest_reply(problem: Problem, rules: Rules) -> int:
    """A bound on the length of every reply of an episode of ``problem`` (``error <reason> [..] turn limit``,
    ``= c [..] miss turn limit``). Under integer rules no move lengthens the number set's text; under rational rules
    a number made of the puzzle numbers ``S`` is ``p/q`` with ``|p| + q <= prod(n + 1 for n in S)``."""
    if rules.integer_only:
        state = len(format_state(problem.numbers))
        number = state - 2
    else:
        digits = sum(len(str(n + 1)) for n in problem.numbers)
        number, state = 2 * digits + 2, 2 * digits + 3 * len(problem.numbers) + 1
    return max(_LONGEST_ERROR + len(" turn limit"), len("= ") + number + len(" miss turn limit")) + 1 + state


class CountdownMultiTurnEnv(SourcedEnv):
    """Countdown as a conversation: each agent turn is one move; the environment computes it.

    ## Description
    The agent plans; the environment does the arithmetic and the bookkeeping. Each turn (grammar in
    :mod:`countdown_gym.game.turn_format`) is a move ``a op b`` (optionally ``= c``), ``undo`` or ``give up``; the
    reply is one line ending in the number set in play: ``= 8 [14,6,8]``, ``= 46 [46] solved``, ``= 16 [16] miss``,
    ``undone [..]``, ``error <reason> [..]``. An illegal move is not applied and the episode goes on; ``undo`` takes
    back the last move, so an agent can search and backtrack.

    ## Action space
    ``Text(max_turn_chars, charset=CHARSET)``: one line (a trailing newline is dropped); a longer turn is answered
    ``error turn_too_long``.

    ## Observation space
    ``Text(max_prompt_chars, charset=CHARSET)``: after ``reset`` the prompt
    (:func:`~countdown_gym.game.turn_format.turn_prompt` in ``prompt`` style), after each step the reply line.

    ## Rewards
    Sparse: 0, and on the terminating step ``verify(problem, <Solution> block of the path).reward`` (1.0 when the
    target is reached). Dense terms: the wrappers of :mod:`countdown_gym.wrappers`.

    ## Episode end
    *Terminated* when the target is reached (:meth:`Rules.wins`; under ``use_all`` rules a last number that misses
    is a dead end to ``undo`` out of) or on ``give up`` (reward 0). *Truncated* (reward 0) after ``max_turns``
    turns. Stepping an ended episode raises ``RuntimeError``.

    ## Info
    ``transitions``: ``docs/DESIGN.md`` records (plus ``turn``), one per move turn (``next_state=None`` when
    refused) and per ``undo`` (``move = (None, "undo", None, None)``, ``next_state`` the state taken back to); none
    for an unreadable turn. Also ``state``, ``turn``, ``turn_kind``, ``valid``, ``reason``, ``invalid_turns``,
    ``problem``, and at the end ``verdict`` and ``is_success``.

    ## Arguments
    * ``preset``, ``split``, ``config``, ``problems``, ``rules``, ``max_numbers``, ``curriculum`` or
      ``problem_spec``: the problem source (:mod:`countdown_gym.envs.problem_source`).
    * ``max_turns`` (16): the turn budget; ``max_turn_chars`` (200); ``max_prompt_chars`` (4096: ``reset`` raises
      ``ValueError`` for a problem whose prompt or longest reply, :func:`longest_reply`, it cannot hold).
    * ``prompt``: ``"compact"`` (default, the embedded model's) or ``"instruct"``.
    * ``render_mode``: ``"ansi"`` (``render()`` returns :meth:`transcript`, the conversation as a model reads it)
      or ``"human"`` (each message printed as it comes).

    Example:
        >>> env = CountdownMultiTurnEnv(problems=[((21, 16, 17, 26), 46)])
        >>> obs, info = env.reset(seed=0)
        >>> env.step("21+16")[0]
        '= 37 [17,26,37]'
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(self, problem_spec: ProblemSpec | None = None, *, max_turns: int = DEFAULT_MAX_TURNS,
                 max_turn_chars: int = 200, max_prompt_chars: int = 4096, prompt: str = "compact",
                 render_mode: str | None = None, **problem_args: Any) -> None:
        for name, value in (("max_turns", max_turns), ("max_turn_chars", max_turn_chars), ("max_prompt_chars", max_prompt_chars)):
            check_budget(name, value, allow_none=False)
        if prompt not in TURN_PROMPT_STYLES:
            raise ValueError(f"prompt must be one of {list(TURN_PROMPT_STYLES)}, got {prompt!r}")
        self._set_source(problem_spec, problem_args, render_mode, "CountdownMultiTurn-v0")
        self.max_turns, self.max_turn_chars, self.max_prompt_chars = max_turns, max_turn_chars, max_prompt_chars
        self.prompt_style = prompt
        self.observation_space = TextSpace(max_length=max_prompt_chars, charset=CHARSET)
        self.action_space = TextSpace(max_length=max_turn_chars, min_length=0, charset=CHARSET.replace("\n", ""))
        self.problem: Problem | None = None
        self.episode: TurnEpisode | None = None
        self.conversation: list[tuple[str, str]] = []
        """``(role, text)`` messages so far: ``("env", prompt)``, then ``("agent", turn)``, ``("env", reply)``..."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        problem = self._problem(options)
        prompt = self._check_prompt(prompt_message(problem, self.prompt_style, self.max_turns), problem)
        if (reply := longest_reply(problem, self.rules)) > self.max_prompt_chars:
            raise ValueError(f"the replies of {problem} may reach {reply} characters, more than "
                             f"max_prompt_chars={self.max_prompt_chars}")
        self.problem = problem
        self.episode = TurnEpisode(problem, self.rules, self.max_turns, self.max_turn_chars)
        self.conversation = [("env", prompt)]
        if self.render_mode == "human":
            print(prompt)
        return sanitize(prompt), self._info(None)

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        if not isinstance(action, str):
            raise ValueError(f"an action must be a str (one turn), got {describe_value(action)}")
        action = action.removesuffix(TURN_END)
        if TURN_END in action:
            raise ValueError(f"an action must be one line (no newline inside), got {action!r:.80}")
        res = self.episode.play(action)
        self.conversation += [("agent", action), ("env", res.reply)]
        if self.render_mode == "human":
            print(f"> {action}\n{res.reply}")
        info = self._info(res)
        if res.terminated or res.truncated:
            self.source.episode_end(self.problem, bool(info.get("is_success")))
        return sanitize(res.reply), res.reward, res.terminated, res.truncated, info

    def _info(self, res: TurnResult | None) -> dict[str, Any]:
        ep = self.episode
        info: dict[str, Any] = {"transitions": [] if res is None else res.transitions, "state": ep.state,
                                "turn": ep.turns, "invalid_turns": ep.invalid_turns, "problem": self.problem}
        if res is not None:
            info.update(turn_kind=res.kind, valid=res.valid, reason=res.reason)
        if ep.done:
            info["verdict"] = ep.verdict
            info["is_success"] = bool(ep.terminated and ep.verdict.correct)
        return info

    def transcript(self) -> str:
        """The conversation as one text: the prompt, then each agent turn and reply on their own lines."""
        return transcript(text for _, text in self.conversation)

    def _render_text(self) -> str:
        return "(call reset() first)" if self.episode is None else self.transcript()
