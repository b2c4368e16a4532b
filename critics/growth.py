"""Growing a trained numerical critic without changing what it computes: a wider child pool or an added
grandchild pool start as the same function (``python -m critics.train --init-from``)."""

from __future__ import annotations

import dataclasses

import torch

from critics.models import NumericalCriticV1, NumericalCriticV2


@torch.no_grad()
def load_grown(model: NumericalCriticV1 | NumericalCriticV2, old: NumericalCriticV1 | NumericalCriticV2) -> None:
    """Load ``old``'s weights into ``model`` so that it computes what ``old`` computes: the same architecture, a
    wider child pool (``old`` without a grandchild pool) or an added grandchild pool; ``ValueError`` if the
    architectures differ otherwise. Old units keep their weights, new units their fresh initialisation; weights
    from new units into old ones and the state MLP's columns of new features start at 0."""
    a, b = old.cfg, model.cfg
    if a == b:
        model.load_state_dict(old.state_dict())
        return
    wider = 0 < a.child_dim < b.child_dim and a.grandchild_dim == 0 and dataclasses.replace(b, child_dim=a.child_dim) == a
    added = a.grandchild_dim == 0 < b.grandchild_dim and dataclasses.replace(b, grandchild_dim=0) == a
    if not (wider or added):
        raise ValueError(f"the models differ by more than a wider child pool or an added grandchild pool (old {a}, new {b})")
    ca, cb = a.child_dim, b.child_dim
    dst = model.state_dict()
    for key, w in old.state_dict().items():
        t = dst[key]
        if t.shape == w.shape:
            t.copy_(w)
        elif key.startswith("state_tower.child_mlp.") and cb > ca:
            t[tuple(slice(0, n) for n in w.shape)] = w
            if w.dim() == 2:  # inputs from new units (the first layer's inputs do not change)
                t[: w.shape[0], w.shape[1] :] = 0.0
        elif key == "state_tower.mlp.0.weight" and cb > ca:  # columns: [slots, pair pool, child mean, child max]
            base = w.shape[1] - 2 * ca
            t.zero_()
            t[:, : base + ca] = w[:, : base + ca]
            t[:, base + cb : base + cb + ca] = w[:, base + ca :]
        elif key == "state_tower.mlp.0.weight":  # the grandchild pool's columns come last
            t.zero_()
            t[:, : w.shape[1]] = w
        else:
            raise ValueError(f"unexpected shape change of {key}: {tuple(w.shape)} -> {tuple(t.shape)}")
    model.load_state_dict(dst)
