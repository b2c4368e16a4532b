"""Text the package writes: the text spaces' character set (:data:`CHARSET`, :func:`sanitize`), the line writers
and the prompts (:func:`build_prompt`: ``"longproc"`` with a :func:`~countdown_gym.game.trace.dfs_trace` example,
``"tinyzero"`` or ``"compact"``). Reading lines back is :mod:`countdown_gym.game.line_grammar`'s.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import Number, Rules, check_int, describe_value, format_number, normalize
from countdown_gym.game.trace import dfs_trace, format_list

REPLACEMENT_CHAR = "\ufffd"
"""Stands for any generated character outside :data:`CHARSET` in an observation."""

CHARSET: str = (
    string.digits
    + string.ascii_letters
    + string.punctuation
    + " \n\t"
    + "".join(chr(c) for c in range(0xA1, 0x100) if c != 0xAD)  # Latin-1 letters and signs (no soft hyphen)
    + "\u2212\u2013\u2014\u2260\u2248\u2264\u2265\u2192\u2190\u2026\u2018\u2019\u201c\u201d\u2713\u2717"
    + REPLACEMENT_CHAR
)
"""The text spaces' characters: printable ASCII and Latin-1, newline, tab, a few symbols and U+FFFD."""

_CHARSET_SET = frozenset(CHARSET)


def sanitize(text: str) -> str:
    """``text`` with every character outside :data:`CHARSET` replaced by U+FFFD."""
    if _CHARSET_SET.issuperset(text):  # one C-level pass: the common case, on every reply the environments send
        return text
    return "".join(c if c in _CHARSET_SET else REPLACEMENT_CHAR for c in text)


def format_equation(a: Number, op: str, b: Number, c: Number) -> str:
    """A plain equation line: ``"21 + 16 = 37"`` (the ``<Solution>`` block's form)."""
    return f"{format_number(a)} {op} {format_number(b)} = {format_number(c)}"


def compact_number(x: Number) -> str:
    """``37``, or a fraction in parentheses, ``(3/2)``: an operand of a compact line or an agent turn."""
    x = normalize(x)
    return format_number(x) if isinstance(x, int) else f"({format_number(x)})"


def format_state(state: Sequence[Number]) -> str:
    """``[14,6,8]``: a number set as compact lines, compact prompts and the multi-turn replies write it."""
    return "[" + ",".join(format_number(x) for x in state) + "]"


def format_compact_line(depth: int, a: Number, op: str, b: Number, c: Number,
                        state: Sequence[Number] | None = None) -> str:
    """A compact search line: ``"  37+17=54 [26,54]"`` (``depth`` leading spaces)."""
    text = " " * check_int(depth, "depth") + f"{compact_number(a)}{op}{compact_number(b)}={compact_number(c)}"
    return text if state is None else f"{text} {format_state(state)}"


PROMPT_STYLES: tuple[str, ...] = ("longproc", "tinyzero", "compact")
"""Prompt templates :func:`build_prompt` knows."""

_EXAMPLE_CANDIDATES: tuple[tuple[tuple[int, ...], int], ...] = (
    ((21, 16, 17, 26), 46),
    ((10, 4, 3, 2), 19),
    ((3, 5, 2, 6), 8),
    ((12, 7, 5, 3), 24),
)


def describe_rules(rules: Rules) -> str:
    """The rules in one English paragraph (used by the prompts)."""
    use = "Use each of the given numbers exactly once" if rules.use_all else "Use each number at most once"
    head = f"{use}, combine them with + - * /; "
    limit = "" if rules.value_limit is None else f"less than {rules.value_limit}"
    if rules.sign == "any" and not rules.integer_only:  # nothing but the limit to require: say what is allowed
        allowed = "(negative numbers and fractions are allowed)."
        if not limit:
            return f"{head}intermediate results may be any number {allowed}"
        return f"{head}every intermediate result must be {limit} {allowed}"
    kind = {"positive": "a positive ", "nonnegative": "a non-negative ", "any": "an "}[rules.sign]
    kind += "integer" if rules.integer_only else "number (fractions are allowed)"
    return f"{head}every intermediate result must be {kind}{f' and {limit}' if limit else ''}."


@lru_cache(maxsize=32)
def default_example(rules: Rules, avoid: tuple[tuple[int, ...], int] | None = None) -> Problem:
    """The LongProc prompt's example: the first candidate solvable under ``rules`` whose key is not ``avoid``."""
    for numbers, target in _EXAMPLE_CANDIDATES:
        p = Problem(numbers, target, rules)
        if avoid is not None and p.key == avoid:
            continue
        try:
            dfs_trace(p)
        except ValueError:
            continue
        return p
    raise ValueError(f"no built-in in-context example is solvable under rules {rules.name!r}; pass example=")


def _task(problem: Problem) -> str:
    return f"Numbers: {format_list(problem.numbers)}\nTarget: {problem.target}\n"


def longproc_prompt(problem: Problem, *, example: Problem | None = None, current_state: bool = False) -> str:
    """The LongProc-style prompt: rules, the search procedure, a worked example (:func:`dfs_trace` of ``example``,
    default :func:`default_example`), the task; ``current_state`` asks for ``### Current State`` annotations."""
    rules = problem.rules
    if example is None:
        example = default_example(rules, problem.key)
    larger = " Write the larger number first." if rules.integer_only and rules.sign != "any" else ""
    annotate = (" End every line of the search with '### Current State: [..]', the number set the search stands on "
                "after that line." if current_state else "")
    return (
        "Countdown: reach the target number by combining the given numbers with arithmetic.\n"
        f"Rules: {describe_rules(rules)}{larger}\n"
        "Search for a solution depth-first and write one line per step, exactly as in the example: pick two "
        "numbers, try the operations in the order + - * /, add each allowed result to the number set and "
        "continue from there; drop a branch that breaks the rules or ends away from the target, and go back "
        "to the last choice." + annotate + " When the target is found, trace the solution back and write it "
        "as a <Solution> block with one line 'a op b = c' per step.\n\n"
        "# Example\n" + _task(example) + dfs_trace(example, rules, current_state=current_state) + "\n"
        "# Task\n" + _task(problem)
    )


def tinyzero_prompt(problem: Problem) -> str:
    """TinyZero's base-model prompt; the completion continues after ``<think>``."""
    numbers = format_list(problem.numbers)
    return (
        "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
        "The assistant first thinks about the reasoning process in the mind and then provides the user with "
        f"the answer.\nUser: Using the numbers {numbers}, create an equation that equals {problem.target}. "
        "You can use basic arithmetic operations (+, -, *, /) and each number can only be used once. "
        "Show your work in <think> </think> tags. And return the final answer in <answer> </answer> tags, "
        "for example <answer> (1 + 2) / 3 </answer>.\nAssistant: Let me solve this step by step.\n<think>"
    )


TINYZERO_SYSTEM = ("You are a helpful assistant. You first thinks about the reasoning process in the mind and then "
                   "provides the user with the answer.")
TINYZERO_ASSISTANT_PREFIX = "Let me solve this step by step.\n<think>"


def chat_messages(problem: Problem, style: str = "longproc", *, prefill: bool = False) -> list[dict[str, str]]:
    """The prompt as chat messages ending with the user's turn (so a renderer opens the assistant turn once):
    ``tinyzero``, TinyZero's ``qwen-instruct`` system and user messages; other styles, one user message of
    :func:`build_prompt`. ``prefill=True`` (``tinyzero``) appends :data:`TINYZERO_ASSISTANT_PREFIX`, which only a
    renderer that continues the final message keeps (:func:`render_chat_prompt`; not TRL's ``GRPOTrainer``).
    """
    if style != "tinyzero":
        return [{"role": "user", "content": build_prompt(problem, style)}]
    question = tinyzero_prompt(problem).split("\nUser: ", 1)[1].split("\nAssistant: ", 1)[0]
    messages = [{"role": "system", "content": TINYZERO_SYSTEM}, {"role": "user", "content": " " + question}]
    if prefill:
        messages.append({"role": "assistant", "content": TINYZERO_ASSISTANT_PREFIX})
    return messages


def render_chat_prompt(problem: Problem, tokenizer: Any, style: str = "tinyzero") -> str:
    """:func:`chat_messages` through ``tokenizer``'s chat template, the assistant turn opened once (``tinyzero``:
    continued after its pre-fill); a leading BOS the tokenizer adds itself is left out."""
    prefill = style == "tinyzero"
    messages = chat_messages(problem, style, prefill=prefill)
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=not prefill,
                                         continue_final_message=prefill)
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos):
        ids = tokenizer("x")["input_ids"]
        if ids and ids[0] == tokenizer.bos_token_id:
            text = text[len(bos):]
    return text


def trainer_prompt(problem: Problem, style: str, tokenizer: Any, chat_template: bool = True) -> str | list[dict[str, str]]:
    """The prompt for a trainer that renders chat itself (TRL's ``GRPOTrainer``): with a chat template,
    :func:`chat_messages` (``tinyzero``: the text of :func:`render_chat_prompt`); else, and for ``compact``,
    :func:`build_prompt`."""
    if style != "compact" and chat_template and getattr(tokenizer, "chat_template", None):
        return render_chat_prompt(problem, tokenizer, style) if style == "tinyzero" else chat_messages(problem, style)
    return build_prompt(problem, style)


def compact_prompt(problem: Problem) -> str:
    """The one-line prompt for small models: ``"Numbers: [37,14,29,6] Target: 46\\n"``."""
    return f"Numbers: {format_state(problem.numbers)} Target: {problem.target}\n"


def build_prompt(problem: Problem, style: str = "longproc", **kwargs: Any) -> str:
    """The prompt of ``problem`` in one of :data:`PROMPT_STYLES` (``kwargs`` go to the style's function)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"build_prompt needs a Problem, got {type(problem).__name__}")
    if style == "longproc":
        return longproc_prompt(problem, **kwargs)
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {describe_value(style)}; choose one of {list(PROMPT_STYLES)}")
    if kwargs:
        raise TypeError(f"prompt style {style!r} takes no options, got {describe_value(sorted(kwargs))}")
    return tinyzero_prompt(problem) if style == "tinyzero" else compact_prompt(problem)
