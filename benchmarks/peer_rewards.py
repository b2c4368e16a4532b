"""Other projects' Countdown rewards as ``(completion, numbers, target) -> float`` functions, for
``countdown-gym audit`` (``benchmarks/exploit_table.py`` runs them all), e.g.

    countdown-gym audit benchmarks/peer_rewards.py:tinyzero_reward
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

# ---- TinyZero ---------------------------------------------------------------------------------------
# TinyZero is not a package: this re-states compute_score(solution_str, {"target", "numbers"}) of its
# verl/utils/reward_score/countdown.py on the response (solution_str after the prompt's first "Assistant:"). Its
# digit runs (\d+ also matches non-ASCII digits, which int() reads) must be the puzzle's numbers; its characters may
# include ** and //, and Python evaluates it with no builtins (9**9**9**9 never returns: `countdown-gym audit` runs
# every call in a separate process with a time limit).

_TZ_ANSWER = re.compile(r"<answer>(.*?)</answer>")
_TZ_DIGITS = re.compile(r"\d+")
_TZ_CHARSET = re.compile(r"^[\d+\-*/().\s]+$")
TINYZERO_FORMAT_SCORE = 0.1


def tinyzero_reward(completion: str, numbers: Sequence[int], target: int) -> float:
    """TinyZero's ``compute_score`` on a response (the text after the prompt's ``Assistant:``)."""
    last_line = completion.split("\n")[-1]
    found = _TZ_ANSWER.findall(last_line)
    if not found:
        return 0.0
    answer = found[-1].strip()
    try:
        used = sorted(int(run) for run in _TZ_DIGITS.findall(answer))
    except ValueError:
        return TINYZERO_FORMAT_SCORE
    if used != sorted(numbers) or not _TZ_CHARSET.match(answer):
        return TINYZERO_FORMAT_SCORE
    try:
        value = eval(answer, {"__builtins__": None}, {})  # noqa: S307 - the peer's own evaluation, audited
        return 1.0 if abs(value - target) < 1e-5 else TINYZERO_FORMAT_SCORE
    except Exception:
        return TINYZERO_FORMAT_SCORE


# ---- reasoning-gym ----------------------------------------------------------------------------------


@cache
def _reasoning_gym_dataset() -> Any:
    from reasoning_gym.games.countdown import CountdownConfig, CountdownDataset

    return CountdownDataset(CountdownConfig(size=1, seed=0))


def reasoning_gym_reward(completion: str, numbers: Sequence[int], target: int) -> float:
    """reasoning-gym's own ``score_answer(extract_answer(completion), entry)``: ``extract_answer`` takes the last
    complete ``<answer>`` block; 1.0 correct, 0.05 wrong value or numbers, 0.01 unparsable or empty."""
    from reasoning_gym.utils import extract_answer

    entry = {"metadata": {"numbers": list(numbers), "target": target}}
    return float(_reasoning_gym_dataset().score_answer(extract_answer(completion), entry))
