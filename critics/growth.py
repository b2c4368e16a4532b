"""Growing a trained numerical critic without changing what it computes: a wider child pool or an added
grandchild pool start as the same function (``python -m critics.train --init-from``)."""

from __future__ import annotations

import dataclasses

import torch

from critics.models import NumericalCriticV1, NumericalCriticV2


@torch.no_grad()
def widen_child_pool(model: NumericalCriticV2, old: NumericalCriticV2) -> None:
    """Load ``old``'s weights into ``model``, whose child pool is wider (``child_dim``) and which is otherwise
    the same architecture, so that ``model`` computes exactly what ``old`` computes (a function-preserving
    widening): the old units keep their weights, new units get their fresh initialisation, weights from new
    units into old ones and the state MLP's columns of the new pooled features start at 0.
    """
    a, b = old.cfg, model.cfg
    if not (a.child_dim > 0 and b.child_dim > a.child_dim and dataclasses.replace(b, child_dim=a.child_dim) == a
            and a.grandchild_dim == 0):
        raise ValueError(f"widen_child_pool: the new model must differ only by a larger child_dim (old {a}, new {b})")
    src, dst = old.state_dict(), model.state_dict()
    ca, cb = a.child_dim, b.child_dim
    for name, w in src.items():
        t = dst[name]
        if t.shape == w.shape:
            t.copy_(w)
        elif name.startswith("state_tower.child_mlp."):
            if w.dim() == 1:
                t[: w.shape[0]] = w
            else:
                t[: w.shape[0], : w.shape[1]] = w
                if t.shape[1] > w.shape[1]:  # inputs from new units (the first layer's inputs do not change)
                    t[: w.shape[0], w.shape[1] :] = 0.0
        elif name == "state_tower.mlp.0.weight":  # columns: [slots, pair pool, child mean (ca -> cb), child max]
            base = w.shape[1] - 2 * ca
            t.zero_()
            t[:, :base] = w[:, :base]
            t[:, base : base + ca] = w[:, base : base + ca]
            t[:, base + cb : base + cb + ca] = w[:, base + ca :]
            new_cols = torch.cat([torch.arange(base + ca, base + cb), torch.arange(base + cb + ca, base + 2 * cb)])
            t[:, new_cols] = 0.0
        else:
            raise ValueError(f"widen_child_pool: unexpected shape change of {name}: {tuple(w.shape)} -> {tuple(t.shape)}")
    model.load_state_dict(dst)


@torch.no_grad()
def add_grandchild_pool(model: NumericalCriticV2, old: NumericalCriticV2) -> None:
    """Load ``old``'s weights into ``model``, which is the same architecture plus a grandchild pool
    (``grandchild_dim``), so that ``model`` computes exactly what ``old`` computes: the state MLP's
    columns of the new pooled features start at 0 and the grandchild MLP keeps its fresh initialisation.
    """
    a, b = old.cfg, model.cfg
    if not (a.grandchild_dim == 0 and b.grandchild_dim > 0 and dataclasses.replace(b, grandchild_dim=0) == a):
        raise ValueError(f"add_grandchild_pool: the new model must differ only by a grandchild_dim > 0 (old {a}, new {b})")
    dst = model.state_dict()
    for name, w in old.state_dict().items():
        t = dst[name]
        if t.shape == w.shape:
            t.copy_(w)
        elif name == "state_tower.mlp.0.weight":  # the grandchild pool's columns come last
            t.zero_()
            t[:, : w.shape[1]] = w
        else:
            raise ValueError(f"add_grandchild_pool: unexpected shape change of {name}: {tuple(w.shape)} -> {tuple(t.shape)}")
    model.load_state_dict(dst)


def load_grown(model: NumericalCriticV1 | NumericalCriticV2, old: NumericalCriticV1 | NumericalCriticV2) -> None:
    """Load ``old``'s weights into ``model`` so that it computes what ``old`` computes: the same architecture, a
    wider child pool (:func:`widen_child_pool`) or an added grandchild pool (:func:`add_grandchild_pool`).

    Raises ``ValueError`` if the architectures differ otherwise.
    """
    a, b = old.cfg, model.cfg
    if a == b:
        model.load_state_dict(old.state_dict())
    elif b.child_dim > a.child_dim:
        widen_child_pool(model, old)
    elif b.grandchild_dim and not a.grandchild_dim:
        add_grandchild_pool(model, old)
    else:
        raise ValueError(f"the models differ by more than a wider child pool or an added grandchild pool (old {a}, new {b})")
