"""``CountdownText-v0``: reasoning text as an MDP, with every move line checked (:class:`CountdownTextEnv`), on
the code path of :func:`replay_completion` (:class:`LineChecker` per line, :class:`TextEpisode` per episode; their
names are importable from here)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from countdown_gym.envs.actions import check_index
from countdown_gym.envs.problem_source import ProblemSpec, SourcedEnv
from countdown_gym.envs.text_checker import INVALID_REASONS, LineCheck, LineChecker
from countdown_gym.envs.text_episode import Replay, StepResult, TextEpisode, replay_completion
from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import describe_value
from countdown_gym.game.text_format import CHARSET, PROMPT_STYLES, build_prompt, sanitize
from countdown_gym.game.trace import dfs_trace, format_list, search_nodes
from countdown_gym.game.turn_game import check_budget

ACTION_MODES: tuple[str, ...] = ("line", "token_str", "token")
"""How an action extends the text: a whole line, a token's text, or a token id."""


class _ObjectShaped:
    """Observations that fit an object array, ``shape == ()`` and ``dtype == object`` (Stable-Baselines3's
    ``DummyVecEnv`` allocates its buffer from them: a ``None`` shape crashes it, a ``'<U'`` dtype cuts text)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shape = ()
        self.dtype = np.dtype(object)


class TextSpace(_ObjectShaped, spaces.Text):
    """``gymnasium.spaces.Text`` whose observations fit an object array (``shape == ()``, ``dtype == object``)."""


class TokenIdsSpace(_ObjectShaped, spaces.Sequence):
    """``gymnasium.spaces.Sequence`` whose observations fit an object array (``shape == ()``, ``dtype == object``)."""


class Tokenizer:
    """One interface over a ``transformers`` tokenizer and a raw ``tokenizers.Tokenizer``."""

    def __init__(self, tok: Any, eos_token_id: int | None) -> None:
        if not (hasattr(tok, "encode") and hasattr(tok, "decode")):
            raise ValueError(f"tokenizer must be a Hugging Face tokenizer (with encode/decode), got {type(tok).__name__}")
        self.tok = tok
        self.raw = hasattr(tok, "get_vocab_size") and not hasattr(tok, "convert_ids_to_tokens")
        self.vocab_size = int(tok.get_vocab_size(with_added_tokens=True) if self.raw else len(tok))
        if eos_token_id is None and not self.raw:
            eos_token_id = getattr(tok, "eos_token_id", None)
        self.eos_token_id = eos_token_id
        # transformers' decode may end with ``clean_up_tokenization`` (" ." -> ".", " 's" -> "'s", ...)
        # on the whole text; it is applied to the stream separately (see Detokenizer)
        self.cleanup = None
        if not self.raw and getattr(tok, "clean_up_tokenization_spaces", False):
            self.cleanup = tok.clean_up_tokenization
            probe = self.encode("a . b ' s")
            plain = self.decode(probe)
            if " ." in plain and tok.decode(probe, skip_special_tokens=True) == plain:  # e.g. skipped for BPE models
                self.cleanup = None

    def encode(self, text: str) -> list[int]:
        try:
            text.encode()
        except UnicodeEncodeError as e:  # the tokenizers library's 'TextInputSequence must be str' TypeError
            raise ValueError(f"text with a lone surrogate ({e.object[e.start:e.end]!r} at index {e.start}) cannot be "
                             "tokenized; pass valid Unicode (surrogate pairs joined)") from None
        if self.raw:
            return list(self.tok.encode(text, add_special_tokens=False).ids)
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, without the clean-up (see :class:`Detokenizer`)."""
        if self.raw:
            return self.tok.decode(list(ids), skip_special_tokens=True)
        return self.tok.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


class Detokenizer:
    """Append-only decoding of a token stream, as LLM servers do it: each token decoded with the ones before it
    in its window, text ending in U+FFFD (an incomplete character) held back; the tokenizer's clean-up (a space
    dropped before punctuation, never across a newline) runs on the stream, holding 3 characters after a space."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.ids: list[int] = []
        self.prefix = 0  # decode window start
        self.read = 0  # tokens before this index are released
        self.pending = ""  # decoded text held back from the clean-up

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        return self._clean(self._release(final=False), final=False)

    def flush(self) -> str:
        return self._clean(self._release(final=True), final=True)

    def _release(self, final: bool) -> str:
        before = self.tok.decode(self.ids[self.prefix : self.read])
        text = self.tok.decode(self.ids[self.prefix :])
        if len(text) <= len(before) or (text.endswith("\ufffd") and not final) or not text.startswith(before):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return text[len(before) :]

    def _clean(self, text: str, final: bool) -> str:
        if self.tok.cleanup is None:
            return text
        text = self.pending + text
        cut = len(text)
        while not final and text[cut - 1 : cut] != "\n" and " " in text[max(cut - 3, 0) : cut]:
            cut = text.rindex(" ", 0, cut)
        self.pending = text[cut:]
        return self.tok.cleanup(text[:cut])


def _render_line(line_no: int, text: str, invalid_reason: str | None) -> str:
    mark = "" if invalid_reason is None else f"   <-- invalid: {invalid_reason}"
    return f"{line_no:4d} | {text}{mark}"


class CountdownTextEnv(SourcedEnv):
    """Countdown as text generation: one puzzle per episode, the action extends the completion.

    ## Description
    The policy writes reasoning text after a prompt (LongProc, TinyZero or compact style). Every completed line
    stating a move (LongProc ``Try`` lines, plain ``a op b = c``, compact ``a+b=c [..]``; grammar in
    :mod:`countdown_gym.game.line_grammar`) is checked against the search tree reachable so far: the operands must
    be in the state it branches from (LongProc indentation and compact depth may backtrack; plain lines apply in
    sequence, inside ``<Solution>`` from the initial numbers), :meth:`Rules.check` must allow the move, the result
    must be exact, and every claim on the line (number sets, target, ``Evaluate``, ``### Current State``) true. A
    wrong line is flagged, never trusted: the state does not advance, and lines below it are ``parent_invalid``.

    ## Action space
    By ``action_mode``: ``"line"`` (default), ``Text(max_line_chars)`` without newlines (the env appends ``"\n"``;
    one trailing ``"\n"`` is dropped); ``"token_str"``, ``Text(max_token_chars, min_length=1)`` appended verbatim;
    ``"token"``, ``Discrete(vocab_size)`` token ids (needs ``tokenizer``; decoded append-only, see
    ``docs/text_env.md``; the EOS id ends the episode). Any ``str`` is accepted in the text modes; characters
    outside :data:`CHARSET` are kept in the completion and shown as U+FFFD in the observation.

    ## Observation space
    ``Text(max_prompt_chars + max_completion_chars, charset=CHARSET)``: prompt + generated text. With a tokenizer
    ``Dict({"text": <that Text>, "token_ids": Sequence(Discrete(vocab_size), stack=True)})``: the prompt's encoding
    then the generated ids (the actions in ``"token"`` mode, else each action's encoding).

    ## Rewards
    Sparse: 0, and on the terminating step ``verify(problem, completion, rules).reward`` (1.0 for a correct final
    answer). Dense terms: the wrappers of :mod:`countdown_gym.wrappers`, reading ``info["transitions"]``.

    ## Starting state
    A problem from the problem source, or ``reset(options={"problem": ...})``; the observation is its prompt.

    ## Episode end
    *Terminated* when a completed line holds ``</answer>`` or ``</Solution>`` (any case the verifier accepts), or
    on EOS in ``"token"`` mode. *Truncated* (reward 0) at ``max_lines`` complete lines, ``max_tokens`` tokens (ids
    with a tokenizer, else ``token_str`` actions) or ``max_completion_chars``.

    ## Info
    ``transitions`` (one record per move line completed this step, ``docs/DESIGN.md`` shape plus ``line_no``),
    ``lines`` (every line completed this step: ``line_no``, ``text``, ``kind``, ``valid``, ``reason``),
    ``invalid_lines``, ``num_lines``, ``num_invalid_lines``, ``invalid_steps``, ``num_tokens``, ``state`` (the
    tracked number set), ``problem``, ``prompt_style``; at the end ``verdict`` and ``is_success``.

    ## Arguments
    * ``preset``, ``split``, ``config``, ``problems``, ``rules``, ``max_numbers``, ``curriculum`` or
      ``problem_spec``: the problem source (:mod:`countdown_gym.envs.problem_source`).
    * ``prompt``: ``"longproc"`` (default), ``"tinyzero"`` or ``"compact"``; ``prompt_kwargs``: the LongProc
      prompt's ``current_state`` and ``example``.
    * ``action_mode``; ``tokenizer``: any Hugging Face tokenizer; ``eos_token_id`` overrides its EOS.
    * ``max_lines`` (2048), ``max_tokens`` (None), ``max_completion_chars`` (131072),
      ``max_prompt_chars`` (16384), ``max_line_chars`` (4096), ``max_token_chars`` (64).
    * ``render_mode``: ``"ansi"`` (``render()`` returns the numbered completion, invalid lines marked) or
      ``"human"`` (each step prints the lines it completed).
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(self, problem_spec: ProblemSpec | None = None, *, prompt: str = "longproc",
                 prompt_kwargs: dict[str, Any] | None = None, action_mode: str = "line", tokenizer: Any = None,
                 eos_token_id: int | None = None, max_lines: int | None = 2048, max_tokens: int | None = None,
                 max_completion_chars: int = 131072, max_prompt_chars: int = 16384, max_line_chars: int = 4096,
                 max_token_chars: int = 64, render_mode: str | None = None, **problem_args: Any) -> None:
        if prompt not in PROMPT_STYLES:
            raise ValueError(f"prompt must be one of {list(PROMPT_STYLES)}, got {prompt!r}")
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {list(ACTION_MODES)}, got {action_mode!r}")
        if action_mode == "token" and tokenizer is None:
            raise ValueError("action_mode='token' needs a tokenizer (a Hugging Face tokenizer object)")
        if max_tokens is not None and action_mode == "line" and tokenizer is None:
            raise ValueError("max_tokens in action_mode='line' needs a tokenizer to count tokens; use max_lines")
        check_budget("max_lines", max_lines)
        check_budget("max_tokens", max_tokens)
        for name, value in (("max_completion_chars", max_completion_chars), ("max_prompt_chars", max_prompt_chars),
                            ("max_line_chars", max_line_chars), ("max_token_chars", max_token_chars)):
            check_budget(name, value, allow_none=False)
        if prompt_kwargs is not None and (prompt != "longproc" or not isinstance(prompt_kwargs, dict)):
            raise ValueError("prompt_kwargs (a dict) is only for prompt='longproc'")
        unknown = set(prompt_kwargs or {}) - {"current_state", "example"}
        if unknown:
            raise ValueError(f"unknown prompt_kwargs {sorted(unknown)}; the LongProc prompt takes 'current_state' and 'example'")
        example = (prompt_kwargs or {}).get("example")
        if example is not None and not isinstance(example, Problem):
            raise ValueError(f"prompt_kwargs['example'] must be a Problem, got {describe_value(example)}")
        if not isinstance((prompt_kwargs or {}).get("current_state", False), bool):  # else every reset raised
            raise ValueError(f"prompt_kwargs['current_state'] must be a bool, got {describe_value(prompt_kwargs['current_state'])}")
        self._set_source(problem_spec, problem_args, render_mode, "CountdownText-v0")
        if example is not None:  # its DFS trace is in every prompt: refuse one that cannot fit, without searching on
            lines = iter(range(max_prompt_chars // 16))  # a legal move's Try line is longer than 16 characters

            def count(*_: Any) -> None:
                if next(lines, None) is None:
                    raise ValueError(f"prompt_kwargs['example'] {example}: its DFS search makes more than "
                                     f"{max_prompt_chars // 16} moves without reaching the target, a trace longer than "
                                     f"max_prompt_chars={max_prompt_chars}; pass a smaller, solvable example")
            search_nodes(example, self.rules, count)
            try:
                dfs_trace(example, self.rules)  # unsolvable, or won before a move: refused here, not by every reset
            except ValueError as e:
                raise ValueError(f"prompt_kwargs['example']: {e}") from None
        self.prompt_style = prompt
        self.prompt_kwargs = dict(prompt_kwargs or {})
        self.action_mode = action_mode
        if eos_token_id is not None and tokenizer is None:
            raise ValueError("eos_token_id needs a tokenizer")
        self.tokenizer = None if tokenizer is None else Tokenizer(tokenizer, eos_token_id)
        if self.tokenizer is not None and self.tokenizer.eos_token_id is not None:
            check_index(self.tokenizer.eos_token_id, self.tokenizer.vocab_size, "eos_token_id")
        self.max_lines, self.max_tokens = max_lines, max_tokens
        self.max_completion_chars, self.max_prompt_chars = max_completion_chars, max_prompt_chars

        text_space = TextSpace(max_length=max_prompt_chars + max_completion_chars, charset=CHARSET)
        if self.tokenizer is None:
            self.observation_space = text_space
        else:
            ids = TokenIdsSpace(spaces.Discrete(self.tokenizer.vocab_size), stack=True)
            self.observation_space = spaces.Dict({"text": text_space, "token_ids": ids})
        if action_mode == "line":
            self.action_space = TextSpace(max_length=max_line_chars, min_length=0, charset=CHARSET.replace("\n", ""))
        elif action_mode == "token_str":
            self.action_space = TextSpace(max_length=max_token_chars, min_length=1, charset=CHARSET)
        else:
            self.action_space = spaces.Discrete(self.tokenizer.vocab_size)

        self.problem: Problem | None = None
        self.prompt = ""
        self.episode: TextEpisode | None = None
        self._obs_prompt = ""
        self._obs_completion = ""
        self._ids = array("q")  # prompt + generated token ids
        self._detok: Detokenizer | None = None
        self.num_tokens = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        problem = self._problem(options)
        prompt = self._check_prompt(build_prompt(problem, self.prompt_style, **self.prompt_kwargs), problem)
        self.problem, self.prompt = problem, prompt
        self.episode = TextEpisode(self.problem, self.rules, max_lines=self.max_lines, max_chars=self.max_completion_chars)
        self._obs_prompt = sanitize(prompt)
        self._obs_completion = ""
        self.num_tokens = 0
        if self.tokenizer is not None:
            self._ids = array("q", self.tokenizer.encode(prompt))
            self._detok = Detokenizer(self.tokenizer)
        return self._obs(), self._info(StepResult())

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        if self.episode.done:
            raise RuntimeError("the episode has ended; call reset() before step()")
        text, eos = self._action_text(action)
        res = self.episode.feed(text) if text else StepResult()
        if not self.episode.done:
            if eos:
                res.extend(self.episode.finish())
            elif self.max_tokens is not None and self.num_tokens >= self.max_tokens:
                res.truncated = self.episode.truncate().truncated
        if self.episode.done:  # the episode may have ignored text after its final answer
            self._obs_completion = sanitize(self.episode.text)
        else:
            self._obs_completion += sanitize(text)
        obs, info = self._obs(), self._info(res)
        if self.episode.done:
            self.source.episode_end(self.episode.problem, bool(info.get("is_success")))
        if self.render_mode == "human":  # each step prints the lines it completed
            for c in res.lines:
                print(_render_line(c.line_no, c.text, None if c.valid else c.reason))
            if self.episode.done:
                print(self._status())
        return obs, float(res.reward), res.terminated, res.truncated, info

    def _action_text(self, action: Any) -> tuple[str, bool]:
        """The text an action appends, and whether it is the EOS token."""
        tok = self.tokenizer
        if self.action_mode == "token":
            if isinstance(action, np.ndarray) and action.size == 1:  # 0-d or shape (1,), as Countdown-v0 takes
                action = action.reshape(()).item()
            action = check_index(action, tok.vocab_size, "a token action")
            self.num_tokens += 1
            self._ids.append(action)
            if tok.eos_token_id is not None and action == tok.eos_token_id:
                return self._detok.flush(), True
            if self.max_tokens is not None and self.num_tokens >= self.max_tokens:  # the last token: no text held back
                return self._detok.push(action) + self._detok.flush(), False
            return self._detok.push(action), False
        if not isinstance(action, str):
            raise ValueError(f"a {self.action_mode!r} action must be a str, got {describe_value(action)}")
        if self.action_mode == "line":
            if action.endswith("\n"):
                action = action[:-1]
            if "\n" in action:
                raise ValueError(f"a 'line' action must be one line (no newline inside), got {action!r:.80}")
            action += "\n"
        if tok is not None:
            ids = tok.encode(action)
            self._ids.extend(ids)
            self.num_tokens += len(ids)
        elif self.action_mode == "token_str":
            self.num_tokens += 1
        return action, False

    def _obs(self) -> Any:
        text = self._obs_prompt + self._obs_completion
        if self.tokenizer is None:
            return text
        return {"text": text, "token_ids": np.array(self._ids, dtype=np.int64)}

    def _info(self, res: StepResult) -> dict[str, Any]:
        ep = self.episode
        info: dict[str, Any] = {"transitions": res.transitions, "lines": [c.to_dict() for c in res.lines],
                                "invalid_lines": [c.to_dict() for c in res.lines if not c.valid],
                                "num_lines": ep.num_lines, "num_invalid_lines": len(ep.invalid_lines),
                                "invalid_steps": ep.invalid_steps, "num_tokens": self.num_tokens,
                                "state": ep.checker.state, "problem": self.problem, "prompt_style": self.prompt_style}
        if ep.done:
            info["verdict"] = ep.verdict
            info["is_success"] = bool(ep.verdict is not None and ep.verdict.correct and ep.terminated)
        return info

    @property
    def completion(self) -> str:
        """The generated text of the current episode (exact, not sanitized)."""
        return "" if self.episode is None else self.episode.text

    def _status(self) -> str:
        ep = self.episode
        status = f"lines={ep.num_lines} invalid_steps={ep.invalid_steps} state={format_list(ep.checker.state)}"
        if ep.done:
            status += f" | {'terminated' if ep.terminated else 'truncated'}: {ep.verdict.reason}"
        return status

    def _render_text(self) -> str:
        ep = self.episode
        if ep is None:
            return "(call reset() first)"
        p = self.problem
        head = f"Countdown {format_list(p.numbers)} -> {p.target} ({self.rules.name} rules, {self.prompt_style} prompt)"
        bad = {c.line_no: c.reason for c in ep.invalid_lines}
        lines = ep.text.split("\n")
        if lines and not lines[-1]:
            lines.pop()
        body = [_render_line(k, line, bad.get(k)) for k, line in enumerate(lines)]
        return "\n".join([head, *body, self._status()])


__all__ = ["ACTION_MODES", "INVALID_REASONS", "CountdownTextEnv", "LineCheck", "LineChecker", "Replay", "StepResult",
           "TextEpisode", "TextSpace", "TokenIdsSpace", "replay_completion"]
