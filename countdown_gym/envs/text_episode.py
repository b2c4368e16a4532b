"""One episode of CountdownText-v0's text (:class:`TextEpisode`: lines to the
:class:`~countdown_gym.envs.text_checker.LineChecker`, the end to the verifier), and :func:`replay_completion`, a
finished completion replayed through it line by line (what the GRPO rewards, verl and the leaderboard read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from countdown_gym.envs.text_checker import LineCheck, LineChecker
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Rules
from countdown_gym.game.turn_game import check_budget
from countdown_gym.game.verifier import Verdict, final_answer_end, verify


@dataclass
class StepResult:
    """What one piece of text did: completed lines, transitions, reward and episode end."""

    lines: list[LineCheck] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False

    def extend(self, more: StepResult) -> None:
        """Add what ``more`` (later text of the same step) did."""
        self.lines += more.lines
        self.transitions += more.transitions
        self.reward += more.reward
        self.terminated, self.truncated = more.terminated, more.truncated


class TextEpisode:
    """One episode's generated text: ``feed(text)`` appends any chunk and checks every line it completes. It
    terminates at a final-answer closing tag (read up to the tag) or :meth:`finish`, with reward ``verify(problem,
    text).reward``; it is truncated (reward 0) at ``max_lines`` complete lines or ``max_chars`` characters."""

    def __init__(self, problem: Problem, rules: Rules | None = None, *, max_lines: int | None = None,
                 max_chars: int | None = None) -> None:
        self.problem = problem
        self.rules = rules or problem.rules
        self.checker = LineChecker(problem, self.rules)
        self.max_lines = max_lines
        self.max_chars = max_chars
        self._parts: list[str] = []  # completed lines, with their newlines
        self._partial = ""  # the line being written
        self._complete_chars = 0
        self.num_lines = 0
        self.invalid_lines: list[LineCheck] = []
        self.invalid_steps = 0
        self.verdict: Verdict | None = None
        self.terminated = False
        self.truncated = False

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def text(self) -> str:
        """The generated text consumed so far."""
        return "".join(self._parts) + self._partial

    @property
    def num_chars(self) -> int:
        return self._complete_chars + len(self._partial)

    def _line(self, line: str, res: StepResult) -> bool:
        """Check one completed line, up to a final-answer closing tag (nothing after it is read, however the text
        came in chunks); True when it ends the episode."""
        end = final_answer_end(line)
        check, transitions = self.checker.check(line if end < 0 else line[:end])
        self.num_lines += 1
        res.lines.append(check)
        res.transitions.extend(transitions)
        self.invalid_steps += sum(not t["valid"] for t in transitions)
        if not check.valid:
            self.invalid_lines.append(check)
        if end >= 0:
            self._end(res, terminated=True)
            return True
        if self.max_lines is not None and self.num_lines >= self.max_lines:
            self._end(res, terminated=False)
            return True
        return False

    def _end(self, res: StepResult, terminated: bool) -> None:
        self.verdict = verify(self.problem, self.text, self.rules)
        self.terminated, self.truncated = terminated, not terminated
        res.terminated, res.truncated = self.terminated, self.truncated
        res.reward = self.verdict.reward if terminated else 0.0

    def _new_result(self) -> StepResult:
        """An empty step result; ``RuntimeError`` once the episode has ended."""
        if self.done:
            raise RuntimeError("the episode has ended; start a new one (reset)")
        return StepResult()

    def _last_line(self, tail: str, res: StepResult) -> bool:
        """Take ``tail`` (text without a newline) as a complete line; ``True`` if that ended the episode."""
        self._parts.append(tail)
        self._complete_chars += len(tail)
        return self._line(tail, res)

    def feed(self, text: str) -> StepResult:
        """Append ``text`` and check the lines it completes."""
        res = self._new_result()
        cut = self.max_chars is not None and self.num_chars + len(text) >= self.max_chars
        if cut:
            text = text[: self.max_chars - self.num_chars]
        buf, pos = self._partial + text, 0
        self._partial = ""
        while (nl := buf.find("\n", pos)) >= 0:
            self._parts.append(buf[pos : nl + 1])
            self._complete_chars += nl + 1 - pos
            line, pos = buf[pos:nl], nl + 1
            if self._line(line, res):
                return res
        tail = buf[pos:]
        if final_answer_end(tail) >= 0:  # a final answer closed mid-line: that line is complete
            if not self._last_line(tail, res):
                self._end(res, terminated=True)
            return res
        self._partial = tail
        if cut:
            self._end(res, terminated=False)
        return res

    def truncate(self) -> StepResult:
        """End the episode by a budget kept outside (e.g. a token budget): reward 0."""
        res = self._new_result()
        self._end(res, terminated=False)
        return res

    def finish(self) -> StepResult:
        """The completion ended (EOS): check the last partial line and verify the whole text."""
        res = self._new_result()
        if self._partial:
            tail, self._partial = self._partial, ""
            if self._last_line(tail, res):
                return res
        self._end(res, terminated=True)
        return res


@dataclass
class Replay:
    """A finished completion replayed line by line: ``transitions``, ``invalid_steps``, ``step_rewards`` (one per
    line, the verdict's reward on the last) and ``num_lines`` as the environment gives them in ``"line"`` mode;
    ``verdict`` of the text it consumed (all of it unless a final answer or the line budget came first);
    ``invalid_lines`` (non-move lines included); ``truncated`` when ``line_budget`` cut the completion."""

    transitions: list[dict[str, Any]]
    verdict: Verdict
    invalid_steps: int
    step_rewards: list[float]
    num_lines: int
    invalid_lines: list[LineCheck] = field(default_factory=list)
    truncated: bool = False

    @property
    def reward(self) -> float:
        """The episode's total reward (the sum of ``step_rewards``)."""
        return float(sum(self.step_rewards))


def replay_completion(problem: Problem, completion: str, *, rules: Rules | None = None,
                      line_budget: int | None = None) -> Replay:
    """Replay ``completion`` (the text after the prompt) through the environment's line checks: each line is one
    ``"line"``-mode step, the end counts as EOS (so it is verified without a closing tag); ``line_budget``
    truncates after that many lines.

    Example:
        >>> from countdown_gym import Problem, dfs_trace
        >>> p = Problem((21, 16, 17, 26), 46)
        >>> r = replay_completion(p, dfs_trace(p))
        >>> r.invalid_steps, r.verdict.correct
        (0, True)
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"replay_completion needs a Problem, got {type(problem).__name__}")
    if not isinstance(completion, str):
        raise TypeError(f"completion must be a str, got {type(completion).__name__}")
    if rules is not None and not isinstance(rules, Rules):
        raise TypeError(f"rules must be a Rules or None, got {type(rules).__name__}")
    check_budget("line_budget", line_budget)
    ep = TextEpisode(problem, rules, max_lines=line_budget)
    transitions: list[dict[str, Any]] = []
    rewards: list[float] = []
    pieces = completion.split("\n")
    tail = pieces.pop()  # the text after the last newline ("" when the completion ends with one)
    for piece in pieces:
        res = ep.feed(piece + "\n")
        transitions.extend(res.transitions)
        rewards.append(res.reward)
        if ep.done:
            break
    if not ep.done:  # the last line (if unterminated) and the end of the completion: one step
        res = ep.feed(tail) if tail else StepResult()
        if not ep.done:
            res.extend(ep.finish())
        transitions.extend(res.transitions)
        if tail or not rewards:
            rewards.append(res.reward)
        else:
            rewards[-1] += res.reward
    assert ep.verdict is not None
    return Replay(transitions, ep.verdict, ep.invalid_steps, rewards, ep.num_lines, list(ep.invalid_lines), ep.truncated)

