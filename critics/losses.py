"""The critics' contrastive losses: InfoNCE (state -> goal, goal -> state against known dead ends) and the
pairwise sigmoid loss on exact reachability labels (``critics.train``, ``critics.train_text``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(anchors: torch.Tensor, candidates: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean InfoNCE: row ``i`` of ``anchors`` must pick column ``labels[i]`` of ``candidates``.

    Both inputs are L2-normalised, so the logits are cosines divided by ``temperature``.
    """
    logits = anchors @ candidates.T / temperature
    return F.cross_entropy(logits, labels)


def goal_infonce(states: torch.Tensor, goal_ids: torch.Tensor, goals: torch.Tensor, temperature: float) -> torch.Tensor:
    """State -> goal InfoNCE over the *distinct* goals of the batch.

    ``goals`` holds one embedding per distinct goal and ``goal_ids[i]`` is row ``i``'s goal, so
    two rows that share a goal never serve as each other's negatives.
    """
    return info_nce(states, goals, goal_ids, temperature)


def ranking_infonce(goals: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor, temperature: float) -> torch.Tensor:
    """Goal -> state InfoNCE with known negatives.

    Row ``i``: goal ``goals[i]`` must pick its positive state ``positives[i]`` among it and the
    ``k`` states ``negatives[i]`` (``[R, k, D]``), e.g. dead ends of the same trace, from which
    the goal is known to be unreachable.
    """
    pos = (goals * positives).sum(-1, keepdim=True)
    neg = torch.einsum("rd,rkd->rk", goals, negatives)
    logits = torch.cat([pos, neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(goals), dtype=torch.long, device=goals.device))


def reach_sigmoid_loss(states: torch.Tensor, goals: torch.Tensor, labels: torch.Tensor, temperature: float,
                       bias: torch.Tensor | float = 0.0) -> torch.Tensor:
    """Pairwise sigmoid contrastive loss with exact labels (SigLIP-style).

    Every state of the batch is paired with every goal of the range: ``labels[i, g]`` says whether
    goal ``g`` is reachable from state ``i``, and the logit is ``cos / temperature + bias``. Unlike
    InfoNCE, one threshold then separates reachable from unreachable pairs across states of any size.
    """
    logits = states @ goals.T / temperature + bias
    return F.binary_cross_entropy_with_logits(logits, labels.float())
