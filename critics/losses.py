"""The critics' contrastive losses: InfoNCE (state -> goal, goal -> state against known dead ends) and the
pairwise sigmoid loss on exact reachability labels (``critics.train``, ``critics.train_text``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F


def info_nce(anchors: torch.Tensor, candidates: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean InfoNCE: row ``i`` of ``anchors`` must pick column ``labels[i]`` of ``candidates`` (both L2-normalised)."""
    return F.cross_entropy(anchors @ candidates.T / temperature, labels)


def ranking_infonce(goals: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor, temperature: float) -> torch.Tensor:
    """Goal -> state InfoNCE: ``goals[i]`` must pick ``positives[i]`` among it and ``negatives[i]`` (``[R, k, D]``,
    e.g. dead ends of the same trace, from which the goal is known to be unreachable)."""
    pos = (goals * positives).sum(-1, keepdim=True)
    neg = torch.einsum("rd,rkd->rk", goals, negatives)
    logits = torch.cat([pos, neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(goals), dtype=torch.long, device=goals.device))


def v2_loss(states: torch.Tensor, goal_values: np.ndarray, embed_goals: Callable[[torch.Tensor], torch.Tensor],
            rows: np.ndarray, dead: torch.Tensor | None, temperature: float,
            hard_weight: float) -> tuple[torch.Tensor, dict[str, float]]:
    """V2's objective and the values it logs: state -> goal InfoNCE over the *distinct* goals of the batch (rows
    sharing a goal are never each other's negatives), plus ``hard_weight`` x :func:`ranking_infonce` of the rows
    ``rows`` against their dead ends ``dead`` (``[len(rows), k, D]``; no term when ``rows`` is empty)."""
    uniq, inv = np.unique(goal_values, return_inverse=True)
    g = embed_goals(torch.from_numpy(uniq.astype(np.float64)))
    inv_t = torch.from_numpy(inv.reshape(-1))
    loss = info_nce(states, g, inv_t, temperature)
    info = {"nce": loss.item(), "acc": float(((states @ g.T).argmax(1) == inv_t).float().mean())}
    if len(rows):
        r = torch.from_numpy(rows)
        hard = ranking_infonce(g[inv_t[r]], states[r], dead, temperature)
        loss = loss + hard_weight * hard
        info["hard"] = hard.item()
        with torch.no_grad():
            pos = (g[inv_t[r]] * states[r]).sum(-1, keepdim=True)
            info["hard_acc"] = float((pos > torch.einsum("rd,rkd->rk", g[inv_t[r]], dead)).all(1).float().mean())
    return loss, info


def reach_sigmoid_loss(states: torch.Tensor, goals: torch.Tensor, labels: torch.Tensor, temperature: float,
                       bias: torch.Tensor | float = 0.0) -> torch.Tensor:
    """Pairwise sigmoid contrastive loss with exact labels (SigLIP-style): ``labels[i, g]`` says whether goal ``g`` is
    reachable from state ``i``; the logit is ``cos / temperature + bias``, so one threshold serves every state size."""
    logits = states @ goals.T / temperature + bias
    return F.binary_cross_entropy_with_logits(logits, labels.float())
