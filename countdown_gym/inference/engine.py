"""The multi-turn rollout engine: many episodes of a causal LM against ``CountdownMultiTurn-v0``'s game at once.

Every episode has a row of a decoder (:mod:`countdown_gym.inference.decoders`). Each step samples every row's next
token into per-row tensor buffers and ends a row's turn at a newline, at EOS or at the turn's token budget. At a
*look* (every step on the CPU; on an accelerator see :class:`Engine`) the host plays the turns that ended and queues
the replies as the rows' next blocks. A finished episode's row takes the next waiting prompt; when none is left the
finished rows are dropped, so the batch stays dense. Greedy turns are what feeding the tokens one at a time computes,
token for token; each log-probability is the sampling distribution's.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import torch

from countdown_gym.game.problem import Problem
from countdown_gym.game.rules import check_finite, describe_value
from countdown_gym.game.turn_format import GIVE_UP, TURN_END, reply_lines, turn_line
from countdown_gym.game.turn_game import TurnEpisode, TurnResult
from countdown_gym.inference.decoders import Step

PEEK_FROM = 4
"""On an accelerator, from this many steps after a look the engine reads once a step whether a row still writes,
and looks as soon as none does (turns are often shorter than their budget)."""

REPLY_MARGIN = 32
"""An episode stops before a turn when its prompt, its tokens so far, a whole turn, this many reply tokens and the
closing EOS would not fit in the length limit (a longer reply is cut at the limit: :meth:`Episode.add_reply`)."""


@dataclass(frozen=True)
class Sampler:
    """How the next token is drawn: ``greedy`` (argmax), else ``temperature`` / ``top_p`` / ``top_k`` (0: none)."""

    greedy: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.greedy, bool):  # a truthy "no" played greedily
            raise ValueError(f"greedy must be a bool, got {describe_value(self.greedy)}")
        if not self.greedy:
            check_finite(self.temperature, "temperature (when sampling)", positive=True)
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, Real) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1], got {describe_value(self.top_p)}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, Integral) or self.top_k < 0:
            raise ValueError(f"top_k must be an int >= 0, got {self.top_k!r}")

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Log-probabilities of the sampling distribution (greedy: the model's own)."""
        if self.greedy:
            return logits.float().log_softmax(-1)
        scores = logits.float() / self.temperature
        if self.top_k and self.top_k < scores.shape[-1]:
            kth = scores.topk(self.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p < 1.0:
            sorted_scores, order = scores.sort(-1, descending=True)
            probs = sorted_scores.softmax(-1)
            drop = probs.cumsum(-1) - probs >= self.top_p  # keep the smallest set whose mass reaches top_p
            scores = scores.scatter(-1, order, sorted_scores.masked_fill(drop, float("-inf")))
        return scores.log_softmax(-1)

    def pick(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The next token of each row and its log-probability under :meth:`log_probs`."""
        logp = self.log_probs(logits)
        tok = logp.argmax(-1) if self.greedy else draw(logp.exp())
        return tok, logp.gather(-1, tok[:, None])[:, 0]


def draw(probs: torch.Tensor) -> torch.Tensor:
    """One index per row of ``probs`` (``[rows, n]``, rows summing to about 1), index i with probability ``probs[i]``
    (never a zero-probability one): a uniform draw placed on the row's float64 cumulative sum, what
    ``torch.multinomial(probs, 1)`` draws at a fraction of its cost."""
    cdf = probs.double().cumsum(-1)
    total = cdf[:, -1:].contiguous()
    u = torch.rand((probs.shape[0], 1), dtype=torch.float64, device=probs.device) * total
    # a draw rounded up to the row's total finds no index: it takes the row's last index of positive probability,
    # the first where the cumulative sum reaches the total
    last = torch.searchsorted(cdf, total).clamp_(max=probs.shape[-1] - 1)  # a NaN row: an index, not past the end
    return torch.minimum(torch.searchsorted(cdf, u, right=True), last)[:, 0]


class Episode:
    """Book-keeping of one episode while it is generated: its tokens, which are the model's, and its turns."""

    def __init__(self, problem: Problem, prompt: str, prompt_ids: list[int], max_turns: int, *,
                 stop_at_dead_end: bool | int = False) -> None:
        self.problem, self.prompt, self.prompt_ids = problem, prompt, prompt_ids
        self.game = TurnEpisode(problem, max_turns=max_turns, stop_at_dead_end=stop_at_dead_end)
        self.completion: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.turn_index: list[int] = []
        self.turns: list[str] = []
        self.results: list[TurnResult] = []  # the game's answer to each turn (turn_replay's input)

    def play(self, turn: str) -> str:
        """Play one turn in the game; its reply line."""
        self.turns.append(turn)
        res = self.game.play(turn)
        self.results.append(res)
        return res.reply

    def add(self, ids: Sequence[int], model: bool, logprobs: Sequence[float] | None = None) -> None:
        self.completion += ids
        self.mask += [1 if model else 0] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.turn_index += [len(self.turns) if model else -1] * len(ids)

    def add_reply(self, ids: Sequence[int], limit: int) -> None:
        """Record the environment's reply, cut where it would leave no room within ``limit`` for the closing EOS (a
        reply longer than :data:`REPLY_MARGIN`: the episode has no room for another turn then)."""
        self.add(ids[: max(0, limit - 1 - len(self.prompt_ids) - len(self.completion))], model=False)

    def room_for_a_turn(self, max_turn_tokens: int, limit: int) -> bool:
        return len(self.prompt_ids) + len(self.completion) + max_turn_tokens + REPLY_MARGIN < limit


class TextCache:
    """Token ids of reply texts and texts of turn tokens, each computed once (the reply grammar is small)."""

    def __init__(self, tokenizer: Any, limit: int = 200_000) -> None:
        self.tokenizer, self.limit = tokenizer, limit
        self._ids: dict[str, list[int]] = {}
        self._text = functools.lru_cache(maxsize=limit)(lambda key: tokenizer.decode(list(key), skip_special_tokens=True))

    def ids_many(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of each text, the new ones tokenised in one call (the memo is emptied at ``limit``)."""
        if len(self._ids) >= self.limit:
            self._ids.clear()
        new = list(dict.fromkeys(t for t in texts if t not in self._ids))
        if new:
            got = self.tokenizer(new, add_special_tokens=False)["input_ids"]
            self._ids.update(zip(new, map(list, got), strict=True))
        return [self._ids[t] for t in texts]

    def text(self, toks: Sequence[int]) -> str:
        """The text of the tokens ``toks`` (special tokens skipped), the ``limit`` latest memoised."""
        return self._text(tuple(toks))


def play_turn(e: Episode, texts: TextCache, toks: list[int], lps: list[float], eos: Collection[int]) -> str:
    """Record the model's turn ``toks`` and play it (ended by one of the ``eos`` ids: then give up); the environment's
    reply text (not yet recorded)."""
    bad = [lp for lp in lps if not lp > -math.inf]  # NaN too; a drawn or greedy token is never impossible
    if bad:
        raise ValueError(f"a token of the model's turn in {e.problem} has log-probability {bad[0]}: its logits are NaN "
                         "or infinite (or a temperature so small that dividing by it overflows them)")
    text = texts.text(toks)
    ended_by_eos = bool(toks) and toks[-1] in eos
    e.add(toks, model=True, logprobs=lps)
    replies = [e.play(turn_line(text))]
    if ended_by_eos and not e.game.done:
        replies.append(e.play(GIVE_UP))
    return reply_lines(replies, turn_closed=text.endswith(TURN_END) or ended_by_eos)


class Engine:
    """Plays a list of episodes to their end on one decoder. On an accelerator it looks ``look_every`` steps after the
    last look at the latest, and from ``peek_from`` steps on as soon as one small read says no row is writing."""

    def __init__(self, decoder: Any, texts: TextCache, *, sampler: Sampler, stop: Sequence[int], eos: Collection[int],
                 pad: int, max_turn_tokens: int, limit: int, look_every: int = 1, peek_from: int = PEEK_FROM) -> None:
        self.decoder, self.texts, self.sampler = decoder, texts, sampler
        self.eos, self.pad, self.limit = eos, pad, limit
        self.turn_budget = max_turn_tokens
        self.look_every = max(1, min(look_every, max_turn_tokens))  # every turn has ended by then: more only waits
        self.peek_from = 1 if decoder.device.type == "cpu" else peek_from  # 0: never
        self.stop = torch.tensor(list(stop), dtype=torch.long, device=decoder.device)
        self.stats: dict[str, float] = {"steps": 0, "looks": 0, "turns": 0, "play_s": 0.0}
        """Decode steps, looks, turns played, and seconds the host spent playing them (after the device's read)."""

    def run(self, episodes: Sequence[Episode]) -> None:
        dec, device = self.decoder, self.decoder.device
        queue = [e for e in episodes if e.room_for_a_turn(self.turn_budget, self.limit)]
        for e in episodes:
            if not e.room_for_a_turn(self.turn_budget, self.limit):
                e.game.done = True
        queue.reverse()  # pop() takes them in order
        rows = dec.rows
        slots: list[Episode | None] = [queue.pop() if queue else None for _ in range(rows)]
        blocks = {r: list(e.prompt_ids) for r, e in enumerate(slots) if e is not None}
        bound = [0] * rows  # each row's length after the steps so far, an upper bound between looks
        pending = torch.full((rows,), self.pad, dtype=torch.long, device=device)
        writing, ended = (torch.zeros(rows, dtype=torch.bool, device=device) for _ in range(2))
        turn_len = torch.zeros(rows, dtype=torch.long, device=device)
        buf = torch.zeros((rows, self.turn_budget), dtype=torch.long, device=device)
        lp_buf = torch.zeros((rows, self.turn_budget), dtype=torch.float32, device=device)
        since_look = 0
        while any(s is not None for s in slots):
            # --- one step: every row feeds its block, or its pending token ---------------------------------------
            last = pending.clone()
            advance = writing.clone()
            prefix: list[int] = []
            prefix_rows: list[int] = []
            if blocks:
                fed = sorted(blocks)
                idx = torch.tensor(fed, dtype=torch.long, device=device)
                last[idx] = torch.tensor([blocks[r][-1] for r in fed], dtype=torch.long, device=device)
                advance[idx] = True
                for r in fed:
                    prefix += blocks[r][:-1]
                    prefix_rows += [r] * (len(blocks[r]) - 1)
                    bound[r] += len(blocks[r]) - 1
            bound = [b + 1 if s is not None else b for b, s in zip(bound, slots, strict=True)]
            step = Step(last=last, advance=advance)
            if prefix:
                step.prefix = torch.tensor(prefix, dtype=torch.long, device=device)
                step.prefix_rows = torch.tensor(prefix_rows, dtype=torch.long, device=device)
                with_prefix = [r for r in fed if len(blocks[r]) > 1]
                step.block_rows = torch.tensor(with_prefix, dtype=torch.long, device=device)
                step.width = max(len(blocks[r]) for r in with_prefix) - 1
            logits = dec.forward(step, max(bound) + 1)  # + 1: a waiting row writes one past its end
            if blocks:
                writing[idx] = True
                turn_len[idx] = 0
                blocks = {}
            # --- sample and record, all in tensors ------------------------------------------------------------------
            tok, lp = self.sampler.pick(logits)
            rec = writing
            col = turn_len.clamp(max=self.turn_budget - 1)[:, None]
            buf.scatter_(1, col, torch.where(rec, tok, buf.gather(1, col)[:, 0])[:, None])
            lp_buf.scatter_(1, col, torch.where(rec, lp, lp_buf.gather(1, col)[:, 0])[:, None])
            turn_len = turn_len + rec.long()
            stopped = rec & (torch.isin(tok, self.stop) | (turn_len >= self.turn_budget))
            writing = rec & ~stopped
            pending = torch.where(rec, tok, pending)
            ended |= stopped
            since_look += 1
            self.stats["steps"] += 1
            peek = 0 < self.peek_from <= since_look  # on the CPU a read costs nothing: every step
            if since_look < self.look_every and (not peek or bool(writing.any())):
                continue
            # --- the look: play the turns that ended ----------------------------------------------------------------
            since_look = 0
            done_rows = torch.nonzero(ended, as_tuple=False)[:, 0].tolist()
            if not done_rows:
                if not bool(writing.any()) and not blocks:
                    break  # nothing is writing and nothing ended: every episode is finished
                continue
            ended[:] = False
            sel = torch.tensor(done_rows, dtype=torch.long, device=device)
            toks_rows, lps_rows, lens, pend = (t.index_select(0, sel).tolist() for t in (buf, lp_buf, turn_len, pending))
            played = time.perf_counter()
            self.stats["looks"] += 1
            self.stats["turns"] += len(done_rows)
            resets: list[int] = []
            replies = self.texts.ids_many([play_turn(slots[r], self.texts, toks[:n], lps[:n], self.eos)
                                           for r, toks, lps, n in zip(done_rows, toks_rows, lps_rows, lens, strict=True)])
            for r, reply, p in zip(done_rows, replies, pend, strict=True):
                e = slots[r]
                e.add_reply(reply, self.limit)
                if not e.game.done and e.room_for_a_turn(self.turn_budget, self.limit):
                    blocks[r] = [p, *reply]
                    bound[r] = len(e.prompt_ids) + len(e.completion) - 1 - len(reply)
                    continue
                e.game.done = True
                slots[r] = queue.pop() if queue else None
                if slots[r] is not None:
                    blocks[r] = list(slots[r].prompt_ids)
                    resets.append(r)
                    bound[r] = 0
            if resets:
                dec.reset(torch.tensor(resets, dtype=torch.long, device=device))
            empty = [r for r, s in enumerate(slots) if s is None]
            if empty and len(empty) * 4 >= len(slots) and len(empty) < len(slots):
                keep = [r for r, s in enumerate(slots) if s is not None]
                where = {r: i for i, r in enumerate(keep)}
                k = torch.tensor(keep, dtype=torch.long, device=device)
                dec.select(k)
                slots = [slots[r] for r in keep]
                bound = [bound[r] for r in keep]
                blocks = {where[r]: b for r, b in blocks.items()}
                pending, writing, ended, turn_len = (t.index_select(0, k) for t in (pending, writing, ended, turn_len))
                buf, lp_buf = buf.index_select(0, k), lp_buf.index_select(0, k)
            self.stats["play_s"] += time.perf_counter() - played
