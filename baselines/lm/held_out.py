"""Greedy success on problems no part of a GRPO run saw (the preset's test split) before and after training:
:class:`HeldOutTest` plays them, :func:`paired_difference` compares the start and the end."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baselines.analysis.uncertainty import binomial_se, mean_se
from baselines.lm.evaluation import greedy_solved
from countdown_gym.game.problem import Problem
from countdown_gym.runkit.runs import read_options, write_text_atomic

if TYPE_CHECKING:
    from baselines.lm.grpo_options import GRPORun


def paired_difference(start: Sequence[bool], end: Sequence[bool]) -> dict[str, float]:
    """Success before and after on the same problems: each rate with its binomial SE, the difference with the paired
    SE, the problems gained and lost, and McNemar's exact two-sided p."""
    from scipy.stats import binomtest

    if len(start) != len(end) or not start:
        raise ValueError(f"need the same problems before and after, got {len(start)} and {len(end)} outcomes")
    n = len(start)
    d = [int(b) - int(a) for a, b in zip(start, end, strict=True)]
    mean = sum(d) / n
    p0, p1 = sum(map(bool, start)) / n, sum(map(bool, end)) / n
    gained, lost = d.count(1), d.count(-1)
    return {
        "problems": n,
        "start": p0, "start_se": binomial_se(p0, n),
        "end": p1, "end_se": binomial_se(p1, n),
        "difference": mean, "difference_se": mean_se(d) or 0.0,
        "gained": gained, "lost": lost,
        "p_value": binomtest(gained, gained + lost, 0.5).pvalue if gained + lost else 1.0,
    }


class HeldOutTest:
    """Greedy success of a GRPO run's starting and final models on held-out ``problems``, played as the run plays
    (single-pass: from ``prompts``; tools: through tool calls) and kept per problem in ``path`` (JSON): a resumed run
    reads the start back (for the same problems and settings). The reward comparison builds the same one."""

    def __init__(self, run: GRPORun, tokenizer: Any, path: str | Path, problems: Sequence[Problem],
                 prompts: Sequence[Any] | None, *, write: bool = True, verbose: bool = True) -> None:
        self.problems, self.tokenizer, self.path, self.prompts = list(problems), tokenizer, Path(path), prompts
        self.ids = [str(p.id) for p in self.problems]
        self.how = run.eval_play
        self.settings = {"model": run.model, "chat_template": run.options.chat_template,
                         **{k: v for k, v in dataclasses.asdict(self.how).items() if k not in ("batch_size", "engine")}}
        """What the outcomes depend on, besides the problems: a start saved under other settings is played again."""
        self.write, self.verbose = write, verbose
        self.outcomes: dict[str, list[bool]] = {}

    def _play(self, model: Any, label: str) -> list[bool]:
        if self.verbose:
            how = " through tool calls" if self.how.tools else ""
            print(f"test: greedy play of {len(self.problems)} held-out test problems{how} ({label} model)", flush=True)
        return greedy_solved(model, self.tokenizer, self.problems, self.how, prompts=self.prompts)

    def start(self, model: Any) -> None:
        """Play the starting model, or read its outcomes back from ``path`` (a resumed run)."""
        saved = read_options(self.path.parent, self.path.name) or {}  # one error naming a damaged file
        if saved.get("ids") == self.ids and saved.get("settings") == self.settings and "start" in saved:
            if not (isinstance(saved["start"], list) and len(saved["start"]) == len(self.problems)
                    and all(isinstance(x, bool) for x in saved["start"])):  # else the end's comparison is wrong, or fails
                raise SystemExit(f"{self.path}: 'start' must be a list of {len(self.problems)} true/false; fix or delete it")
            self.outcomes = {"start": saved["start"]}
            return
        self.outcomes = {"start": self._play(model, "starting")}
        self._save()

    def end(self, model: Any) -> dict[str, float]:
        """Play the final model; :func:`paired_difference` of the start and the end."""
        if "start" not in self.outcomes:
            raise RuntimeError("HeldOutTest.end before HeldOutTest.start")
        self.outcomes["end"] = self._play(model, "final")
        result = paired_difference(self.outcomes["start"], self.outcomes["end"])
        self._save(result)
        return result

    def _save(self, result: dict[str, float] | None = None) -> None:
        if not self.write:
            return
        body = {"ids": self.ids, "settings": self.settings, **self.outcomes, **({"result": result} if result else {})}
        write_text_atomic(self.path, json.dumps(body) + "\n")


held_out_test = HeldOutTest
"""The run's :class:`HeldOutTest` (the name ``llm_grpo.py`` and the reward comparison build it by)."""
