"""Numerical contrastive critics (the seed paper's V1 and V2), their checkpoints and what both critics' scoring shares.

A number set is encoded order-free (sorted, padded, each number a learned row plus Fourier features), optionally with
pools over pairs, one-move children and two-move descendants. V2 scores a state against its target; V1 (the ablation)
scores (initial numbers, state) against a later state of the trace.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from countdown_gym.dataclass_cli import not_regular, strict_json, written_aside
from countdown_gym.envs.problem_source import MAX_SLOTS
from countdown_gym.game.rules import check_finite

ConfigT = TypeVar("ConfigT", bound="ConfigDict")
T = TypeVar("T")
CONFIG_FORMAT = "countdown-gym-critic/1"
"""Tag stored in every checkpoint's config JSON; a different tag is refused."""


class ConfigDict:
    """``to_dict`` and the field checks of a dataclass config saved beside the weights (a model's, a training run's);
    a checkpoint's is rebuilt as ``cls(**config_json["model"])`` (an unknown field is a ``TypeError``)."""

    NOT_SIZES: tuple[str, ...] = ()  # the int fields that size no weight (:func:`check_sizes` skips them)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def check_fields(self, positive: Sequence[str], non_negative: Sequence[str] = (), flags: Sequence[str] = ()) -> None:
        """``ValueError`` naming the field unless each of ``positive`` is an int >= 1, each of ``non_negative`` an
        int >= 0, each of ``flags`` a bool and ``temperature`` a finite number > 0."""
        for name, low in [*((n, 1) for n in positive), *((n, 0) for n in non_negative)]:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{type(self).__name__}.{name} must be an int >= {low}, got {v!r}")
        if bad := [n for n in flags if not isinstance(getattr(self, n), bool)]:
            raise ValueError(f"{type(self).__name__}.{bad[0]} must be a bool, got {getattr(self, bad[0])!r}")
        check_finite(self.temperature, f"{type(self).__name__}.temperature", positive=True)


@dataclass
class ModelConfig(ConfigDict):
    """Architecture of a numerical critic (saved beside the weights); the defaults are v2's (v3-v5 set the pools: their config.json)."""

    version: str = "v2"  # "v2" (state vs target) or "v1" (initial + state vs future state)
    max_numbers: int = 4  # slots of a number set (longer sets are refused)
    vocab: int = 2001  # value-table size: integers 0..vocab-2 have their own row; others share the last
    value_dim: int = 32  # learned value embedding size
    fourier: int = 12  # frequencies per Fourier family (linear and log): 4 * fourier fixed features
    hidden: int = 256  # MLP width of the state tower
    depth: int = 2  # hidden layers of the state tower
    goal_hidden: int = 256  # MLP width of the goal tower (one hidden layer per depth step, max 2)
    out_dim: int = 128  # embedding size
    temperature: float = 0.1  # InfoNCE temperature (the cosine is divided by it)
    pair_dim: int = 32  # 0 = plain MLP over the sorted slots; > 0 also pools a learned "combine two numbers" feature over every pair
    child_dim: int = 0  # > 0: also pool a learned feature of every one-move child (a op b, the rest) (state tower)
    grandchild_dim: int = 0  # > 0: also pool a learned feature of every two-move descendant of a state of 3+ numbers (state tower)
    logit_bias: bool = False  # a learned scalar added to cosine / temperature (the sigmoid loss on exact labels)

    def __post_init__(self) -> None:
        if self.version not in ("v1", "v2"):
            raise ValueError(f"ModelConfig.version must be 'v1' or 'v2', got {self.version!r}")
        self.check_fields(("max_numbers", "vocab", "value_dim", "fourier", "hidden", "depth", "goal_hidden", "out_dim"),
                          ("pair_dim", "child_dim", "grandchild_dim"), ("logit_bias",))
        if self.max_numbers > MAX_SLOTS:  # the most numbers a problem holds (SetEncoder's buffers grow as its cube)
            raise ValueError(f"ModelConfig.max_numbers must be at most {MAX_SLOTS}, got {self.max_numbers}")


def check_state(i: int, s: Any) -> tuple:
    """State ``i`` as a tuple: ``TypeError`` unless a sequence of ints (or Fractions), ``ValueError`` if empty."""
    if isinstance(s, (str, bytes, Mapping)) or not hasattr(s, "__len__"):  # a Counter: its keys alone
        raise TypeError(f"state {i} must be a sequence of numbers, got {s!r}")
    if len(s) == 0:
        raise ValueError(f"state {i} is empty")
    for x in s:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer, Fraction)):
            raise TypeError(f"state {i} holds ints (or Fractions), got {type(x).__name__} {x!r}")
    return tuple(s)


def check_target(i: int, t: Any) -> int:
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
        raise TypeError(f"target {i} must be an int, got {type(t).__name__} {t!r}")
    return int(t)


VALUE_CAP = 1e30
"""The largest magnitude a critic reads: a larger number (no value limit) is read as this one, so its features stay
finite (float32 phases overflow near 1e38, ``float`` near 1e308)."""


def capped(x: int | float | Fraction) -> float:
    """``x`` as a float clipped to ``[-VALUE_CAP, VALUE_CAP]`` (an exact comparison: no overflow)."""
    return float(min(max(x, -VALUE_CAP), VALUE_CAP))


def pack_sets(sets: Sequence[Sequence[Any]], max_numbers: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, padded number sets: ``(values float64 [N, max_numbers], mask float32 [N, max_numbers])``.

    Raises :func:`check_state`'s errors and ``ValueError`` for a set of more than ``max_numbers`` numbers.
    """
    values = np.zeros((len(sets), max_numbers), dtype=np.float64)
    mask = np.zeros((len(sets), max_numbers), dtype=np.float32)
    for i, s in enumerate(sets):
        k = len(check_state(i, s))
        if k > max_numbers:
            raise ValueError(f"state {i} has {k} numbers; this critic takes at most {max_numbers}")
        values[i, :k] = sorted(capped(x) for x in s)
        mask[i, :k] = 1.0
    return values, mask


class GoalScorer:
    """What both loaded critics share: the model (in eval mode), its config and checkpoint record, goal embeddings
    of target values, cached per value, and the checks of ``score``."""

    def __init__(self, model: nn.Module, meta: dict[str, Any] | None = None, path: Path | None = None) -> None:
        self.model = model.eval()
        self.meta = meta or {}
        self.path = path
        self.config = model.cfg
        self._goal_cache: dict[int, np.ndarray] = {}

    def _embed_goal_values(self, values: torch.Tensor) -> torch.Tensor:
        return self.model.embed_goals(values)  # V2's and the text critic's goal tower: target values

    @torch.no_grad()
    def embed_targets(self, targets: Sequence[int]) -> np.ndarray:
        """L2-normalised goal embeddings ``[N, out_dim]`` of single target values, cached; each computed in its fixed batch
        of 64 consecutive targets, so its bits never depend on what came first (a resumed run scores as an unbroken one)."""
        keys = [check_target(i, t) for i, t in enumerate(targets)]
        for ks in sorted({range(k // 64 * 64, k // 64 * 64 + 64) for k in keys if k not in self._goal_cache}, key=min):
            emb = self._embed_goal_values(torch.tensor([capped(k) for k in ks], dtype=torch.float64)).numpy()
            self._goal_cache.update(zip(ks, emb, strict=True))
        return np.array([self._goal_cache[k] for k in keys], dtype=np.float32).reshape(len(keys), self.config.out_dim)

    @torch.no_grad()
    def _cosines(self, embed: Callable[[int, int], torch.Tensor | np.ndarray], targets: Sequence[int], batch_size: int) -> np.ndarray:
        """Cosine of the state embeddings ``embed(lo, hi)`` of items ``lo..hi`` and their targets, a batch at a time:
        ``float32 [N]`` in ``[-1, 1]``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        out = np.empty(len(targets), dtype=np.float32)
        for lo in range(0, len(targets), batch_size):
            hi = lo + batch_size
            out[lo:hi] = np.clip((np.asarray(embed(lo, hi)) * self.embed_targets(targets[lo:hi])).sum(1), -1.0, 1.0)
        return out

    @staticmethod
    def _check_pairs(states: Any, targets: Any) -> None:
        if isinstance(states, (str, bytes)) or isinstance(targets, (str, bytes)):
            raise TypeError("states must be a sequence of number sets and targets a sequence of ints")
        if len(states) != len(targets):
            raise ValueError(f"got {len(states)} states but {len(targets)} targets")


class NumberEmbedding(nn.Module):
    """One number -> a learned value-table row (integers ``0 <= v < vocab - 1``; any other value shares the last)
    plus fixed Fourier features of the value and its logarithm."""

    def __init__(self, vocab: int, value_dim: int, fourier: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.table = nn.Embedding(vocab, value_dim)
        nn.init.normal_(self.table.weight, std=0.1)
        periods = 2.0 * (2000.0 ** (torch.arange(fourier, dtype=torch.float64) / max(fourier - 1, 1)))
        self.register_buffer("lin_freq", (2 * torch.pi / periods).float(), persistent=False)
        log_freq = 0.5 * (400.0 ** (torch.arange(fourier, dtype=torch.float64) / max(fourier - 1, 1)))
        self.register_buffer("log_freq", log_freq.float(), persistent=False)
        self.dim = value_dim + 4 * fourier

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` float64 ``[..., k]`` -> ``[..., k, dim]`` (a move's result past :data:`VALUE_CAP` read as it)."""
        values = values.clamp(-VALUE_CAP, VALUE_CAP)
        whole = (values == torch.round(values)) & (values >= 0) & (values < self.vocab - 1)
        idx = torch.where(whole, values, torch.full_like(values, self.vocab - 1)).long()
        # phases in float64 (exact enough for values up to ~1e6), features in float32
        lin = (values.unsqueeze(-1) * self.lin_freq.double()).float()
        logv = (torch.log(values.abs().clamp_min(1e-6)).unsqueeze(-1) * self.log_freq.double()).float()
        return torch.cat([self.table(idx), lin.sin(), lin.cos(), logv.sin(), logv.cos()], dim=-1)


CHILD_OPS = ("+", "*", "-", "/")
"""The ops of the state tower's child features (``-`` and ``/`` as larger over smaller)."""
GRANDCHILD_CHUNK = 256
"""Rows per pass of the grandchild pool (its activations are ~300 descendants per row)."""


def _mlp(dim_in: int, hidden: int, depth: int, dim_out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = dim_in
    for _ in range(depth):
        layers += [nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.GELU()]
        d = hidden
    layers.append(nn.Linear(d, dim_out))
    return nn.Sequential(*layers)


class SetEncoder(nn.Module):
    """A sorted, padded number set -> L2-normalised embedding (number embeddings + mask -> MLP), the MLP input
    optionally holding the mean and max (reachability is an OR over moves) of learned features of every pair of
    numbers (``pair_dim``), one-move child (``child_dim``) or two-move descendant (``grandchild_dim``)."""

    def __init__(self, cfg: ModelConfig, slots: int, hidden: int, depth: int, pair_dim: int = 0, child_dim: int = 0,
                 grandchild_dim: int = 0) -> None:
        super().__init__()
        self.slots = slots
        self.numbers = NumberEmbedding(cfg.vocab, cfg.value_dim, cfg.fourier)
        d = self.numbers.dim
        self.pair_dim = pair_dim if slots >= 2 else 0
        self.child_dim = child_dim if slots >= 2 else 0
        self.grandchild_dim = grandchild_dim if slots >= 3 else 0
        extra = 0
        if self.pair_dim or self.child_dim or self.grandchild_dim:
            for prefix, n in (("child", slots), ("grand", slots - 1)):  # pairs of a state, and of a one-move child
                pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
                rest = [[k for k in range(n) if k not in p] for p in pairs]
                self.register_buffer(f"{prefix}_i", torch.tensor([p[0] for p in pairs], dtype=torch.long), persistent=False)
                self.register_buffer(f"{prefix}_j", torch.tensor([p[1] for p in pairs], dtype=torch.long), persistent=False)
                rest_t = torch.tensor(rest, dtype=torch.long).reshape(len(pairs), max(n - 2, 0))
                self.register_buffer(f"{prefix}_rest", rest_t, persistent=False)
        if self.child_dim:
            self.child_mlp = nn.Sequential(
                nn.Linear(d + (slots - 2) * (d + 1) + len(CHILD_OPS), 2 * child_dim), nn.GELU(),
                nn.Linear(2 * child_dim, 2 * child_dim), nn.GELU(), nn.Linear(2 * child_dim, child_dim), nn.GELU())
            extra += 2 * child_dim
        if self.grandchild_dim:
            g = self.grandchild_dim
            self.grandchild_mlp = nn.Sequential(
                nn.Linear(d + (slots - 3) * (d + 1) + len(CHILD_OPS), 2 * g), nn.GELU(), nn.Linear(2 * g, g), nn.GELU())
            extra += 2 * g
        if self.pair_dim:
            rest = torch.ones(len(self.child_i), slots).scatter_(1, torch.stack([self.child_i, self.child_j], 1), 0.0)
            self.register_buffer("pair_rest", rest, persistent=False)  # 1 for the slots beside each pair
            self.pair_mlp = nn.Sequential(nn.Linear(3 * d + 1, 2 * pair_dim), nn.GELU(),
                                          nn.Linear(2 * pair_dim, pair_dim), nn.GELU())
            extra += 2 * pair_dim
        self.mlp = _mlp(slots * (d + 1) + extra, hidden, depth, cfg.out_dim)

    def forward(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        e = self.numbers(values) * mask.unsqueeze(-1)
        x = torch.cat([e, mask.unsqueeze(-1)], dim=-1).flatten(1)
        if self.pair_dim:
            ei, ej = e[:, self.child_i], e[:, self.child_j]  # [N, P, d]
            rest = torch.einsum("ps,nsd->npd", self.pair_rest, e)
            n_rest = (mask @ self.pair_rest.T).unsqueeze(-1)  # [N, P, 1]
            present = (mask[:, self.child_i] * mask[:, self.child_j]).unsqueeze(-1)  # [N, P, 1]
            h = self.pair_mlp(torch.cat([ei, ej, rest, n_rest], dim=-1))
            x = torch.cat([x, *_pool(h, present.squeeze(-1) > 0)], dim=-1)
        if self.child_dim:
            x = torch.cat([x, *self._children(values, mask, e)], dim=-1)
        if self.grandchild_dim:
            x = torch.cat([x, *self._grandchildren(values, mask)], dim=-1)
        return F.normalize(self.mlp(x), dim=-1)

    def _pool_moves(self, mlp: nn.Sequential, results: torch.Tensor, others: torch.Tensor | None, valid: torch.Tensor):
        """:func:`_pool` of ``mlp`` over every move's ``(result, other numbers, op)``, its first layer applied block by
        block (linear in the three), so the other numbers are projected once for the four ops."""
        first, d = mlp[0], self.numbers.dim
        h = self.numbers(results) @ first.weight[:, :d].T + first.bias  # [..., 4, 2c]
        if others is not None:
            h = h + (others @ first.weight[:, d : d + others.shape[-1]].T).unsqueeze(-2)
        return _pool(mlp[1:](h + first.weight[:, -len(CHILD_OPS):].T), valid)  # one row per op (a one-hot input)

    def _children(self, values: torch.Tensor, mask: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The pool over every one-move child ``(a op b, the other numbers)``."""
        present = mask[:, self.child_i] * mask[:, self.child_j]
        results, valid = _moves(values[:, self.child_i], values[:, self.child_j], present > 0)  # [N, P, 4]
        rest = None
        if self.slots > 2:  # the slot embeddings (already masked) and presence beside each pair
            rest = torch.cat([e[:, self.child_rest], mask[:, self.child_rest].unsqueeze(-1)], -1).flatten(2)
        return self._pool_moves(self.child_mlp, results, rest, valid)

    def _grandchildren(self, values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The pool over every two-move descendant ``(c op d, the other numbers)`` of a state of 3+ numbers (zeros
        for smaller ones)."""
        n, g = values.shape[0], self.grandchild_dim
        mean, mx = values.new_zeros(n, g, dtype=torch.float32), values.new_zeros(n, g, dtype=torch.float32)
        rows = (mask.sum(1) >= 3).nonzero().squeeze(1)
        if rows.numel() == 0:
            return mean, mx
        for part in rows.split(GRANDCHILD_CHUNK):  # ~300 descendants per row: bounded memory
            r2, ok2, ov, om = self.two_moves(values[part], mask[part] > 0)
            other = None
            if self.slots > 3:
                om = om.float()
                other = torch.cat([self.numbers(ov) * om.unsqueeze(-1), om.unsqueeze(-1)], -1).flatten(-2)
            mean[part], mx[part] = self._pool_moves(self.grandchild_mlp, r2, other, ok2)
        return mean, mx

    def two_moves(self, v: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every two-move descendant of the sets ``v`` (float64 ``[M, slots]``, present ``m``): the second move's result
        and whether it is made (``[M, P, 4, Q, 4]``: pair, op, pair, op), the other numbers and their presence."""
        r1, ok1 = _moves(v[:, self.child_i], v[:, self.child_j], m[:, self.child_i] & m[:, self.child_j])  # [M, P, 4]
        rest_v, rest_m = v[:, self.child_rest].unsqueeze(2), m[:, self.child_rest].unsqueeze(2)  # [M, P, 1, slots-2]
        cv = torch.cat([r1.unsqueeze(-1), rest_v.expand(-1, -1, len(CHILD_OPS), -1)], -1)  # the children: [M, P, 4, slots-1]
        cm = torch.cat([ok1.unsqueeze(-1), rest_m.expand(-1, -1, len(CHILD_OPS), -1)], -1)
        both = cm[..., self.grand_i] & cm[..., self.grand_j] & ok1.unsqueeze(-1)  # [M, P, 4, Q]
        r2, ok2 = _moves(cv[..., self.grand_i], cv[..., self.grand_j], both)  # [M, P, 4, Q, 4]
        return r2, ok2, cv[..., self.grand_rest], cm[..., self.grand_rest]


def _moves(a: torch.Tensor, b: torch.Tensor, present: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The results of :data:`CHILD_OPS` on pairs ``(a, b)`` and whether each is made (``[..., 4]``): ``a + b``,
    ``a * b``, ``|a - b|`` if not 0, ``max / min`` if it divides (none where ``present`` is false)."""
    hi, lo = torch.maximum(a, b), torch.minimum(a, b)
    safe_lo = torch.where(lo > 0, lo, torch.ones_like(lo))
    div_ok = (lo > 0) & (torch.remainder(hi, safe_lo) == 0)
    results = torch.stack([a + b, a * b, hi - lo, torch.where(div_ok, hi / safe_lo, torch.zeros_like(hi))], -1)
    valid = torch.stack([present, present, present & (hi != lo), present & div_ok], -1)
    return results, valid


def _pool(h: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and max of ``h`` ``[N, ..., c]`` over its middle dims, counting only ``valid`` ``[N, ...]`` entries (0 if none)."""
    v = valid.unsqueeze(-1).float()
    h, v = (h * v).flatten(1, -2), v.flatten(1, -2)
    mean = h.sum(1) / v.sum(1).clamp_min(1.0)
    mx = torch.where(v.bool(), h, torch.full_like(h, -1e4)).max(1).values
    mx = torch.where(v.sum(1) > 0, mx, torch.zeros_like(mx))
    return mean, mx


class _TwoTowers(nn.Module):
    """A critic of ``VERSION``: a state tower over ``state_slots`` numbers (with the config's pools) and a goal
    tower over ``goal_slots``."""

    VERSION = ""

    def __init__(self, cfg: ModelConfig, state_slots: int, goal_slots: int, child_dim: int = 0, grandchild_dim: int = 0) -> None:
        super().__init__()
        if cfg.version != self.VERSION:
            raise ValueError(f"{type(self).__name__} needs ModelConfig(version={self.VERSION!r})")
        self.cfg = cfg
        self.state_tower = SetEncoder(cfg, state_slots, cfg.hidden, cfg.depth, cfg.pair_dim, child_dim, grandchild_dim)
        self.goal_tower = SetEncoder(cfg, goal_slots, cfg.goal_hidden, min(cfg.depth, 2))


class NumericalCriticV2(_TwoTowers):
    """Intermediate state vs the fixed final target (the seed paper's final architecture)."""

    VERSION = "v2"

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg, cfg.max_numbers, 1, cfg.child_dim, cfg.grandchild_dim)
        if cfg.logit_bias:
            self.logit_bias = nn.Parameter(torch.tensor(-2.0))

    def embed_states(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.state_tower(values, mask)

    def embed_goals(self, targets: torch.Tensor) -> torch.Tensor:
        """``targets`` float64 ``[N]`` -> ``[N, out_dim]``."""
        t = targets.reshape(-1, 1)
        return self.goal_tower(t, torch.ones_like(t, dtype=torch.float32))


class NumericalCriticV1(_TwoTowers):
    """Initial numbers + intermediate state vs a sampled future state (the paper's first critic)."""

    VERSION = "v1"

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg, 2 * cfg.max_numbers, cfg.max_numbers)

    def embed_state_actions(self, init_values: torch.Tensor, init_mask: torch.Tensor, values: torch.Tensor,
                            mask: torch.Tensor) -> torch.Tensor:
        return self.state_tower(torch.cat([init_values, values], 1), torch.cat([init_mask, mask], 1))

    def embed_goals(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.goal_tower(values, mask)


def build_model(cfg: ModelConfig) -> NumericalCriticV1 | NumericalCriticV2:
    return NumericalCriticV2(cfg) if cfg.version == "v2" else NumericalCriticV1(cfg)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class CheckpointError(ValueError):
    """A critic checkpoint that is missing, unreadable or does not fit its config."""


def write_files(directory: str | Path, model: nn.Module, meta: dict[str, Any]) -> Path:
    """Write ``model.safetensors`` and ``config.json`` (``meta``) into ``directory``, each under a temporary name moved
    into place; the weights carry ``meta``'s step, if any (:func:`read_weights` refuses a mixed pair)."""
    (d := Path(directory)).mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    with written_aside(d / "model.safetensors") as weights, written_aside(d / "config.json") as config:
        save_file(tensors, str(weights), metadata={"step": str(meta["step"])} if "step" in meta else None)
        config.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return d


def save_checkpoint(model: nn.Module, cfg: ModelConfig, directory: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write ``model.safetensors`` and ``config.json`` (:func:`write_files`)."""
    return write_files(directory, model, {"format": CONFIG_FORMAT, "model": cfg.to_dict(), **(extra or {})})


def read_safetensors(path: Path, read: Callable[[Any], T]) -> T:
    """``read(f)`` of the safetensors file at ``path`` opened as ``f``; :class:`CheckpointError` if it does not read."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return read(f)
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file: {e}") from None


def read_weights(path: Path, model: nn.Module, meta: dict[str, Any]) -> None:
    """Load the safetensors file at ``path`` into ``model``; :class:`CheckpointError` if it does not read, does not fit
    the model (``meta``: the config beside it) or carries a step other than ``meta``'s (a pair mixed by a cut save)."""
    cfg_path = path.with_name("config.json")
    state, recorded = read_safetensors(path, lambda f: ({k: f.get_tensor(k) for k in f.keys()},  # noqa: SIM118
                                                         (f.metadata() or {}).get("step")))
    if recorded is not None and recorded != str(meta.get("step")):
        raise CheckpointError(f"{path} is from step {recorded} but {cfg_path} from step {meta.get('step')} "
                              "(interrupted while saving?)")
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise CheckpointError(f"{path} does not fit the config in {cfg_path}: {' '.join(str(e).split())[:300]}") from None


def check_sizes(path: Path, cfg: ConfigDict) -> dict[str, tuple[int, ...]]:
    """The tensor shapes, by name, of the safetensors file at ``path`` (its tensors unread); :class:`CheckpointError`
    naming the files if a size in ``cfg`` (an int field) exceeds them all: a huge size is refused before the model is built."""
    shapes = read_safetensors(path, lambda f: {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()})  # noqa: SIM118
    largest = max((n for s in shapes.values() for n in s), default=0)
    for name, v in cfg.to_dict().items():
        if type(v) is int and name not in cfg.NOT_SIZES and v > largest:
            raise CheckpointError(f"{path.with_name('config.json')}: {name} {v} is larger than any dimension of the "
                                  f"weights in {path} ({largest}); the config does not fit them")
    return shapes


def read_checkpoint(directory: str | Path, fmt: str, kind: str, config: type[ConfigT], files: Sequence[str],
                    fmt_kind: str = "") -> tuple[Path, dict[str, Any], ConfigT]:
    """``(directory, its config.json, the model config in it)`` of a checkpoint directory whose ``format`` is ``fmt``
    (``fmt_kind``: its name, default ``kind``) and which holds ``files``; :class:`CheckpointError` otherwise."""
    if not isinstance(directory, (str, Path)) or not str(directory):  # "" would be the current folder
        raise CheckpointError(f"a {kind} checkpoint is a directory's path, got {directory!r:.60}")
    d = Path(directory)
    if not d.is_dir():
        gone = "" if d.exists() else " (it does not exist)"
        raise CheckpointError(f"{kind} checkpoint not found: {d} is not a directory{gone}")
    for name in ("config.json", *files):  # a FIFO or a device is never opened (a reader would block, or never end)
        if (what := not_regular(d / name)) is not None and (what != "a folder" or Path(name).suffix):  # "tokenizer/"
            raise CheckpointError(f"{kind} checkpoint unreadable: {d / name} is {what}, not a regular file")
    if not (d / "config.json").is_file():
        raise CheckpointError(f"{kind} checkpoint incomplete: {d / 'config.json'} is missing")
    try:
        meta = strict_json((d / "config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:  # not JSON, a key twice (read last-wins), NaN, nested too deep
        raise CheckpointError(f"{d / 'config.json'} is not valid JSON: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != fmt:  # the format first: another kind lacks these files
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"{d / 'config.json'}: format {got!r} is not {fmt!r}; not a {fmt_kind or kind} checkpoint")
    if missing := next((name for name in files if not (d / name).exists()), None):
        raise CheckpointError(f"{kind} checkpoint incomplete: {d / missing} is missing")
    try:
        return d, meta, config(**meta.get("model", {}))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{d / 'config.json'}: bad model config: {e}") from None


def load_checkpoint(directory: str | Path) -> tuple[NumericalCriticV1 | NumericalCriticV2, dict[str, Any]]:
    """Rebuild a critic from ``directory`` (``config.json`` + ``model.safetensors``); :class:`CheckpointError` naming
    the file and the problem."""
    d, meta, cfg = read_checkpoint(directory, CONFIG_FORMAT, "critic", ModelConfig, ["model.safetensors"],
                                   "countdown-gym critic")
    cfg_path, weights_path = d / "config.json", d / "model.safetensors"
    check_sizes(weights_path, cfg)
    model = build_model(cfg)
    read_weights(weights_path, model, meta)
    if bad := sorted(k for k, v in model.state_dict().items() if v.is_floating_point() and not torch.isfinite(v).all()):
        raise CheckpointError(f"{weights_path} holds NaN or infinite weights in {bad[:5]}")
    cal = meta.get("calibration")
    numbers = isinstance(cal, dict) and all(type(cal.get(k)) in (int, float) and math.isfinite(cal[k]) for k in "ab")
    if cal is not None and not numbers:
        raise CheckpointError(f"{cfg_path}: 'calibration' must be {{\"a\": number, \"b\": number, ...}}, got {cal!r:.120}")
    return model.eval(), meta
