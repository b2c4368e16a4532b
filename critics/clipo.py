"""CLIPO: a contrastive head and loss over the rollouts of a group, turned into a dense reward (``docs/rewards.md``).

Anchors are the correct rollouts of groups with >= 2 correct and >= 1 incorrect; an anchor's loss ``L`` (``infonce``,
``supcon`` or ``softnn`` over ``cos / temperature``, against the other rollouts of its group) gives the reward
``max(-lam * L, floor)``, every other rollout 0. :class:`CLIPOTrainer` rewards from the loss before its head update.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from countdown_gym.dataclass_cli import written_aside
from countdown_gym.game.rules import check_finite

LOSS_KINDS: tuple[str, ...] = ("infonce", "supcon", "softnn")
DEFAULT_LAMBDA: dict[str, float] = {"infonce": 0.2, "supcon": 0.2, "softnn": 1.0}
"""The paper's reward weight per loss kind (lambda = 1 for SoftNN, 0.2 otherwise)."""

__all__ = [
    "DEFAULT_LAMBDA", "LOSS_KINDS", "CLIPOConfig", "CLIPOHead", "CLIPOTrainer", "clipo_loss", "clipo_rewards",
    "mean_pool", "valid_anchors"
]


class CLIPOHead(nn.Module):
    """Pooled trajectory embeddings -> L2-normalised vectors: a bias-free ``Linear(dim_in, dim_out)`` (the paper's),
    or with ``mlp`` ``Linear(dim_in, hidden) -> GELU -> Linear(hidden, dim_out)`` (``hidden``: ``dim_in`` if None)."""

    def __init__(self, dim_in: int, dim_out: int = 512, mlp: bool = False, hidden: int | None = None) -> None:
        super().__init__()
        for name, v in (("dim_in", dim_in), ("dim_out", dim_out), ("hidden", hidden if mlp else 1)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"CLIPOHead {name} must be a positive int, got {v!r}")
        self.dim_in, self.dim_out, self.mlp = dim_in, dim_out, mlp
        if mlp:
            h = hidden or dim_in
            self.proj: nn.Module = nn.Sequential(nn.Linear(dim_in, h, bias=False), nn.GELU(),
                                                 nn.Linear(h, dim_out, bias=False))
        else:
            self.proj = nn.Linear(dim_in, dim_out, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 2 or x.shape[1] != self.dim_in:
            raise ValueError(f"CLIPOHead expects embeddings of shape [N, {self.dim_in}] (N rollouts x dim_in), "
                             f"got {tuple(x.shape)}")
        return F.normalize(self.proj(x), dim=-1)


def check_reward_weights(lam: Any, floor: Any) -> None:
    """The reward's settings: ``lam`` a finite number >= 0, ``floor`` an int or float <= 0 (not NaN)."""
    check_finite(lam, "lam", non_negative=True)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not floor <= 0:
        raise ValueError(f"floor must be a number <= 0, got {floor!r}")


def _outcomes(correct: Any, group_ids: Any, n: int) -> tuple[Tensor, Tensor]:
    """``correct`` as a bool tensor and ``group_ids`` (ints, strings, anything numpy can compare) as dense int64
    labels, both on the CPU; ``ValueError`` unless each is a 1-D sequence of ``n`` entries."""
    c = correct.cpu() if isinstance(correct, Tensor) else torch.as_tensor(np.asarray(correct))
    if c.ndim != 1 or c.shape[0] != n:
        raise ValueError(f"correct must be a 1-D sequence of {n} flags (one per rollout), got shape {tuple(c.shape)}")
    if c.dtype != torch.bool:
        if (c.is_floating_point() or c.is_complex()) and c.numel():  # [] reads as float64
            raise ValueError(f"correct must hold booleans or 0/1 ints, got dtype {c.dtype}")
        if not bool(((c == 0) | (c == 1)).all()):
            raise ValueError("correct must hold booleans or 0/1 ints")
        c = c != 0
    arr = group_ids.detach().cpu().numpy() if isinstance(group_ids, Tensor) else np.asarray(group_ids)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"group_ids must be a 1-D sequence of {n} ids (one per rollout), got shape {arr.shape}")
    _, inverse = np.unique(arr, return_inverse=True)
    return c, torch.as_tensor(inverse.reshape(-1), dtype=torch.long)


def valid_anchors(correct: Any, group_ids: Any) -> Tensor:
    """Boolean mask of the anchors: correct rollouts of groups with >= 2 correct and >= 1 incorrect rollouts."""
    c, g = _outcomes(correct, group_ids, len(correct))
    same = g[:, None] == g[None, :]
    n_correct = (same & c[None, :]).sum(1)
    n_wrong = (same & ~c[None, :]).sum(1)
    return c & (n_correct >= 2) & (n_wrong >= 1)


def clipo_loss(z: Tensor, correct: Any, group_ids: Any, kind: str = "infonce", temperature: float = 0.05,
               generator: torch.Generator | None = None) -> Tensor:
    """Per-rollout CLIPO loss ``[N]`` (0 for non-anchors) of embeddings ``z`` ``[N, d]`` (normalised here), outcomes
    ``correct`` ``[N]`` and ``group_ids`` ``[N]`` (one per prompt); ``generator``: InfoNCE's positive sampling."""
    if not isinstance(z, Tensor):
        raise TypeError(f"z must be a torch.Tensor of shape [N, d], got {type(z).__name__}")
    if z.ndim != 2 or z.shape[0] == 0 or z.shape[1] == 0:
        raise ValueError(f"z must have shape [N, d] with N, d >= 1, got {tuple(z.shape)}")
    if not z.is_floating_point():
        raise ValueError(f"z must be a floating-point tensor, got dtype {z.dtype}")
    if kind not in LOSS_KINDS:
        raise ValueError(f"kind must be one of {LOSS_KINDS}, got {kind!r}")
    check_finite(temperature, "temperature", positive=True)
    if not bool(torch.isfinite(z).all()):
        raise ValueError("z holds NaN or inf")
    n = z.shape[0]
    c, g = _outcomes(correct, group_ids, n)
    anchors = valid_anchors(c, g).to(z.device)
    c, g = c.to(z.device), g.to(z.device)

    zn = F.normalize(z, dim=-1)
    sim = zn @ zn.T / temperature
    eye = torch.eye(n, dtype=torch.bool, device=z.device)
    others = (g[:, None] == g[None, :]) & ~eye  # denominator: every other rollout of the group
    positives = others & c[None, :] & anchors[:, None]
    neg_inf = torch.finfo(sim.dtype).min
    log_denom = torch.logsumexp(sim.masked_fill(~others, neg_inf), dim=1)

    if kind == "infonce":
        u = torch.rand(n, n, generator=generator, dtype=torch.float64).to(z.device)
        pick = u.masked_fill(~positives, -1.0).argmax(dim=1)
        log_num = sim.gather(1, pick[:, None]).squeeze(1)
        loss = log_denom - log_num
    elif kind == "supcon":
        log_ratio = sim - log_denom[:, None]
        npos = positives.sum(1).clamp(min=1)
        loss = -(log_ratio * positives).sum(1) / npos
    else:  # softnn
        log_num = torch.logsumexp(sim.masked_fill(~positives, neg_inf), dim=1)
        loss = log_denom - log_num
    return torch.where(anchors, loss, torch.zeros_like(loss))


def clipo_rewards(loss: Tensor, correct: Any, group_ids: Any, lam: float = 0.2, floor: float = -0.5) -> Tensor:
    """Detached reward per rollout: ``max(-lam * loss, floor)`` for :func:`valid_anchors`, 0 for the others."""
    if not isinstance(loss, Tensor) or loss.ndim != 1:
        raise ValueError(f"loss must be a 1-D tensor (one value per rollout), got {getattr(loss, 'shape', loss)!r}")
    check_reward_weights(lam, floor)
    anchors = valid_anchors(correct, group_ids).to(loss.device)
    if anchors.shape != loss.shape:
        raise ValueError(f"loss has {loss.shape[0]} values but correct/group_ids describe {anchors.shape[0]} rollouts")
    r = (-lam * loss.detach()).clamp(min=floor)
    return torch.where(anchors, r, torch.zeros_like(r))


def mean_pool(hidden_states: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``hidden_states [B, T, D]`` where ``mask [B, T]`` is set (CLIPO: the response tokens) -> ``[B, D]``;
    an empty row pools to zeros. Not detached (:class:`CLIPOTrainer` detaches what it receives)."""
    if not isinstance(hidden_states, Tensor) or hidden_states.ndim != 3:
        raise ValueError(f"hidden_states must be a [B, T, D] tensor, got {getattr(hidden_states, 'shape', hidden_states)!r}")
    if not isinstance(mask, Tensor) or mask.shape != hidden_states.shape[:2]:
        raise ValueError(f"mask must be a [B, T] tensor matching hidden_states {tuple(hidden_states.shape[:2])}, "
                         f"got {getattr(mask, 'shape', mask)!r}")
    m = mask.to(hidden_states.dtype).unsqueeze(-1)
    return (hidden_states * m).sum(1) / m.sum(1).clamp(min=1.0)


@dataclass(frozen=True)
class CLIPOConfig:
    """Everything that defines a :class:`CLIPOTrainer` (saved with its state); ``lam`` None: ``DEFAULT_LAMBDA``."""

    dim_in: int
    dim_out: int = 512
    mlp: bool = False
    kind: str = "infonce"
    temperature: float = 0.05
    lam: float | None = None
    floor: float = -0.5
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 0
    freeze: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in LOSS_KINDS:
            raise ValueError(f"kind must be one of {LOSS_KINDS}, got {self.kind!r}")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be a non-negative int, got {self.warmup_steps!r}")
        check_finite(self.temperature, "temperature", positive=True)
        check_reward_weights(0 if self.lam is None else self.lam, self.floor)
        for name in ("lr", "weight_decay"):  # a YAML 1e-3 is a str: torch's TypeError; inf trained to NaN
            check_finite(getattr(self, name), name, non_negative=True)
        for name in ("mlp", "freeze"):  # a YAML "false" is a str, which reads as true
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise ValueError(f"seed must be an int, got {self.seed!r}")

    @property
    def reward_lambda(self) -> float:
        return DEFAULT_LAMBDA[self.kind] if self.lam is None else float(self.lam)


class CLIPOTrainer:
    """A :class:`CLIPOHead` and its AdamW optimizer. Each :meth:`step` (one per policy batch) computes the loss under
    the current head, takes the rewards from it (0 during warm-up), then makes one AdamW step on the anchors' mean
    loss (none when ``freeze`` or without anchors), e.g. ``CLIPOTrainer(dim_in=8).step(emb, correct, group_ids)``."""

    def __init__(self, dim_in: int | None = None, *, config: CLIPOConfig | None = None, **kwargs: Any) -> None:
        if config is None:
            if dim_in is None:
                raise ValueError("CLIPOTrainer needs dim_in (the size of the pooled embeddings) or a config")
            config = CLIPOConfig(dim_in=dim_in, **kwargs)
        elif dim_in is not None or kwargs:
            raise ValueError("pass either config or dim_in/keyword settings to CLIPOTrainer, not both")
        self.config = config
        gen = torch.Generator().manual_seed(config.seed)
        self.head = CLIPOHead(config.dim_in, config.dim_out, config.mlp)
        with torch.no_grad():
            for p in self.head.parameters():  # nn.Linear's default init, from a seeded generator
                bound = 1.0 / np.sqrt(p.shape[1])
                p.copy_(torch.rand(p.shape, generator=gen) * 2 * bound - bound)
        self.optimizer = torch.optim.AdamW(self.head.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.generator = torch.Generator().manual_seed(config.seed + 1)
        self.steps_done = 0
        self.last_stats: dict[str, float] = {}

    def _embeddings(self, embeddings: Any) -> Tensor:
        try:
            x = embeddings if isinstance(embeddings, Tensor) else torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
        except (TypeError, ValueError) as e:
            raise ValueError(f"embeddings must be a numeric [N, {self.config.dim_in}] array or tensor: {e}") from e
        if x.ndim != 2 or x.shape[1] != self.config.dim_in or x.shape[0] == 0:
            raise ValueError(f"embeddings must have shape [N, {self.config.dim_in}] (N rollouts x the head's dim_in), "
                             f"got {tuple(x.shape)}")
        if not (x.is_floating_point() or x.dtype in (torch.int32, torch.int64)):
            raise ValueError(f"embeddings must be numeric, got dtype {x.dtype}")
        x = x.detach().to(dtype=torch.float32, device=next(self.head.parameters()).device)
        if not torch.isfinite(x).all():
            raise ValueError("embeddings contain NaN or inf")
        return x

    def loss(self, embeddings: Any, correct: Any, group_ids: Any) -> Tensor:
        """Per-rollout loss under the current head (with gradient to the head)."""
        x = self._embeddings(embeddings)
        return clipo_loss(self.head(x), correct, group_ids, self.config.kind, self.config.temperature, self.generator)

    def step(self, embeddings: Any, correct: Any, group_ids: Any) -> Tensor:
        """Rewards ``[N]`` from the pre-update loss, then one head update."""
        loss = self.loss(embeddings, correct, group_ids)
        anchors = valid_anchors(correct, group_ids).to(loss.device)
        warmup = self.steps_done < self.config.warmup_steps
        rewards = (torch.zeros_like(loss).detach() if warmup
                   else clipo_rewards(loss, correct, group_ids, self.config.reward_lambda, self.config.floor))
        n_anchor = int(anchors.sum())
        mean_loss = loss[anchors].mean() if n_anchor else torch.zeros(())
        updated = bool(n_anchor) and not self.config.freeze
        if updated:
            self.optimizer.zero_grad(set_to_none=True)
            mean_loss.backward()
            self.optimizer.step()
        self.last_stats = {"loss": float(mean_loss.detach()), "anchors": float(n_anchor),
                           "reward_mean": float(rewards[anchors].mean()) if n_anchor else 0.0,
                           "warmup": float(warmup), "updated": float(updated)}
        self.steps_done += 1
        return rewards.detach().cpu()

    def state_dict(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "head": self.head.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "steps_done": self.steps_done}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the configs must describe the same head."""
        try:
            saved = CLIPOConfig(**state["config"])
            if (saved.dim_in, saved.dim_out, saved.mlp) != (self.config.dim_in, self.config.dim_out, self.config.mlp):
                raise ValueError(f"CLIPO state is for a head dim_in={saved.dim_in}, dim_out={saved.dim_out}, "
                                 f"mlp={saved.mlp}; this trainer has dim_in={self.config.dim_in}, "
                                 f"dim_out={self.config.dim_out}, mlp={self.config.mlp}")
            self.head.load_state_dict(state["head"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.generator.set_state(state["generator"])
            self.steps_done = int(state["steps_done"])
        except (KeyError, TypeError, RuntimeError) as e:
            raise ValueError(f"not a valid CLIPOTrainer state: {' '.join(str(e).split())}") from e

    def save(self, path: str | Path) -> None:
        """Write :meth:`state_dict` to ``path`` (``torch.save``), whole or not at all."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_aside(path) as tmp:
            torch.save(self.state_dict(), tmp)

    @classmethod
    def load(cls, path: str | Path) -> CLIPOTrainer:
        """A trainer restored from :meth:`save` (config included)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no CLIPO trainer state at {path}")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            config = CLIPOConfig(**state["config"])
        except Exception as e:  # noqa: BLE001 - any unreadable file is the same user error
            raise ValueError(f"{path} is not a CLIPOTrainer state file: {e}") from e
        trainer = cls(config=config)
        trainer.load_state_dict(state)
        return trainer

