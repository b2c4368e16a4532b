"""The one evaluator of language models: play problems greedily and with samples, keep a record per problem, report
the rates with their standard errors.

    ev = evaluate(model, tokenizer, problems, Play(max_turns=16), samples=8, sampling=Sampling(temperature=0.5), seed=0)
    ev.greedy[0].solved, ev.rates()              # per-problem records; greedy_success, pass_at_k, ... with ``_se``

Single-pass play replays one completion per problem through the text environment (``verify``'s verdict); multi-turn
play (``max_turns``) runs ``CountdownMultiTurn-v0`` episodes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from baselines.analysis.uncertainty import binomial_se, mean_se
from baselines.lm.generation import Sampling, evaluating, generate, generate_vllm
from countdown_gym.game.problem import Problem
from countdown_gym.integrations.trl_rollout import DEFAULT_MAX_TURN_TOKENS


@dataclass(frozen=True)
class Record:
    """What one play of one problem came to."""

    solved: bool
    invalid: bool  # single-pass: the completion holds an invalid move; multi-turn: the episode holds a refused turn
    answer: str  # the completion, or the ``<Solution>`` block of the moves an episode played
    text: str  # the completion, or the episode's conversation after the prompt
    turns: int | None = None  # multi-turn: the turns the episode took


@dataclass(frozen=True)
class Play:
    """How a model plays: single-pass (``max_turns=None``, one completion per prompt), multi-turn episodes, or with
    ``tools`` multi-turn through tool calls (``baselines.lm.tool_play``)."""

    max_turns: int | None = None
    max_new_tokens: int = 192
    batch_size: int = 64
    prompt_style: str = "compact"  # multi-turn: the turn prompt's style
    max_turn_tokens: int = DEFAULT_MAX_TURN_TOKENS  # multi-turn: the token budget of one turn
    engine: Any = None  # single-pass: a vLLM engine (``generation.vllm_engine``) generating instead of the model
    tools: bool = False


@dataclass
class Evaluation:
    """The records of one evaluation (``greedy``: one per problem; ``sampled``: per problem, its samples) and the
    model's tokens and seconds of each pass."""

    greedy: list[Record]
    sampled: list[list[Record]] = field(default_factory=list)
    greedy_tokens: int = 0
    greedy_seconds: float = 0.0
    sampled_tokens: int = 0
    sampled_seconds: float = 0.0

    @property
    def samples(self) -> int:
        """Sampled plays per problem (0: greedy only)."""
        return len(self.sampled[0]) if self.sampled else 0

    def rates(self) -> dict[str, Any]:
        """``greedy_success``, ``greedy_invalid_frac`` and, with samples, ``sampled_success``, ``pass_at_k`` and
        ``sampled_invalid_frac``; the success rates with their standard error over problems (``_se``)."""
        n = len(self.greedy)
        greedy = _mean([float(r.solved) for r in self.greedy])
        out: dict[str, Any] = {"problems": n, "samples": self.samples, "greedy_success": greedy,
                               "greedy_success_se": binomial_se(greedy, n),
                               "greedy_invalid_frac": _mean([float(r.invalid) for r in self.greedy])}
        if self.samples:
            shares = [sum(r.solved for r in rs) / len(rs) for rs in self.sampled]
            hit = _mean([float(any(r.solved for r in rs)) for rs in self.sampled])  # pass@k of k samples (unbiased: the same)
            out.update(sampled_success=_mean(shares), sampled_success_se=mean_se(shares), pass_at_k=hit,
                       pass_at_k_se=binomial_se(hit, n),
                       sampled_invalid_frac=_mean([float(r.invalid) for rs in self.sampled for r in rs]))
        return out

    def row(self) -> dict[str, float]:
        """The GRPO validation's row (``baselines.lm.callbacks.EVAL_FIELDS``)."""
        rates = self.rates()
        row = {k: v for k, v in rates.items() if not k.endswith("_se")}
        tokens, seconds = self.greedy_tokens + self.sampled_tokens, self.greedy_seconds + self.sampled_seconds
        row["mean_completion_tokens"] = tokens / max(1, len(self.greedy) * (1 + self.samples))
        row["eval_seconds"] = seconds
        row["tokens_per_s"] = tokens / seconds if seconds > 0 else 0.0
        row["generated_tokens"] = tokens
        return row


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def completion_records(problems: Sequence[Problem], completions: Sequence[Sequence[str]]) -> list[list[Record]]:
    """The records of single-pass completions (each problem's list), replayed through the text environment."""
    from countdown_gym.integrations.trl import replay

    out = []
    for p, cs in zip(problems, completions, strict=True):
        replays = [replay(p, c) for c in cs]
        out.append([Record(r.verdict.correct, r.invalid_steps > 0, c, c) for r, c in zip(replays, cs, strict=True)])
    return out


def episode_record(rollout: Any) -> Record:
    """The record of one multi-turn episode (a ``TurnRollout``)."""
    from countdown_gym.game.turn_game import TurnEpisode

    ep = TurnEpisode(rollout.problem)
    for t in rollout.turns:
        if ep.done:
            break
        ep.play(t)
    return Record(bool(rollout.solved), rollout.replay.invalid_turns > 0, ep.solution_text(), rollout.text,
                  len(rollout.turns))


def play(model: Any, tokenizer: Any, problems: Sequence[Problem], how: Play, *, prompts: Sequence[Any] | None = None,
         sampling: Sampling | None = None, n: int = 1, seed: int = 0, progress: bool = False,
         desc: str = "generate") -> tuple[list[list[Record]], int]:
    """``n`` plays of each problem (``sampling=None``: greedy, ``n`` 1) and the tokens the model wrote; single-pass
    play needs one prompt per problem (``prompts``)."""
    if how.tools or how.max_turns is not None:
        repeated = [p for p in problems for _ in range(n)]
        if how.tools:  # answer and text: the moves' <Solution> block
            from baselines.lm.tool_play import play_tool_episodes

            envs, tokens = play_tool_episodes(model, tokenizer, repeated, max_turns=how.max_turns, max_new_tokens=how.max_new_tokens,
                                              sampling=sampling, batch_size=how.batch_size)
            records = [Record(e.solved, e.episode.invalid_turns > 0, e.episode.solution_text(), e.episode.solution_text())
                       for e in envs]
        else:
            from countdown_gym.integrations.trl_rollout import play_episodes

            knobs = {"greedy": True} if sampling is None else sampling.episode_kwargs()
            rollouts = play_episodes(model, tokenizer, repeated, max_turns=how.max_turns, max_turn_tokens=how.max_turn_tokens,
                                     batch_size=how.batch_size, prompt_style=how.prompt_style, **knobs)
            records = [episode_record(r) for r in rollouts]
            tokens = sum(sum(r.env_mask) for r in rollouts)
        return [records[i * n:(i + 1) * n] for i in range(len(problems))], tokens
    if prompts is None or len(prompts) != len(problems):
        raise ValueError(f"single-pass play needs one prompt per problem, got {len(problems)} problems and "
                         f"{0 if prompts is None else len(prompts)} prompts")
    if how.engine is not None:
        completions, tokens = generate_vllm(how.engine, tokenizer, list(prompts), n, sampling, how.max_new_tokens, seed)
    else:
        completions, tokens = generate(model, tokenizer, prompts, max_new_tokens=how.max_new_tokens, sampling=sampling,
                                       num_return_sequences=n, batch_size=how.batch_size, progress=progress, desc=desc)
    return completion_records(problems, completions), tokens


def evaluate(model: Any, tokenizer: Any, problems: Sequence[Problem], how: Play, *,
             prompts: Sequence[Any] | None = None, samples: int = 0, sampling: Sampling | None = None,
             seed: int | None = None, progress: bool = False) -> Evaluation:
    """Greedy play of every problem, then ``samples`` sampled plays of each (drawn as ``sampling`` says, default
    :class:`Sampling`'s); see :class:`Evaluation`."""
    if not isinstance(samples, int) or samples < 0:  # -1 was played as one sample per problem
        raise ValueError(f"samples must be an int >= 0, got {samples!r}")
    bar = tqdm(total=len(problems) * (1 + samples), desc="plays", disable=not progress or how.max_turns is None)
    with evaluating(model, seed):
        t0 = time.perf_counter()
        greedy, tokens = play(model, tokenizer, problems, how, prompts=prompts, seed=seed or 0, progress=progress,
                              desc="greedy")
        ev = Evaluation([rs[0] for rs in greedy], greedy_tokens=tokens, greedy_seconds=time.perf_counter() - t0)
        bar.update(len(problems))
        if samples:
            t0 = time.perf_counter()
            ev.sampled, ev.sampled_tokens = play(model, tokenizer, problems, how, prompts=prompts,
                                                 sampling=sampling or Sampling(), n=samples, seed=seed or 0,
                                                 progress=progress, desc=f"sample k={samples}")
            ev.sampled_seconds = time.perf_counter() - t0
            bar.update(len(problems) * samples)
    bar.close()
    return ev


def greedy_solved(model: Any, tokenizer: Any, problems: Sequence[Problem], how: Play, *,
                  prompts: Sequence[Any] | None = None) -> list[bool]:
    """Whether ``model`` solves each problem with greedy play as ``how`` says (single-pass needs ``prompts``), each
    process playing its share; every process gets the whole list back, in order."""
    from accelerate import PartialState
    from accelerate.utils import gather_object

    if how.max_turns is None and (prompts is None or len(prompts) != len(problems)):
        raise ValueError("single-pass play needs one prompt per problem")
    state = PartialState()
    idx = list(range(state.process_index, len(problems), state.num_processes))
    chosen = None if prompts is None or how.max_turns is not None else [prompts[i] for i in idx]
    mine = [r.solved for r in evaluate(model, tokenizer, [problems[i] for i in idx], how, prompts=chosen).greedy]
    if state.num_processes == 1:
        return mine
    out: list[bool] = [False] * len(problems)
    for rank, part in enumerate(gather_object([mine])):
        out[rank::state.num_processes] = part
    return out
