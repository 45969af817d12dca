"""What a NaN entry of a matrix determines (issue 38, non-finite inputs to linalg;
pytorch/pytorch#173638: CUDA's ``slogdet`` computed a matrix holding a NaN as if it held
a 0, where CPU returns NaN).

Every element of a determinant, an inverse, a solution or a matrix exponential depends on
every entry of the matrix, so a NaN entry must reach the result; which elements a
backend's algorithm carries it to (all of them, through its pivots, or some) is its
own. An op declares the output leaves that must hold a NaN (``OpSpec.nan_propagates``);
where a batch element of its first input holds a NaN, those leaves are compared there
only by whether they hold one, and its other leaves (``slogdet``'s sign, an info code)
not at all. A backend that computes the NaN away gives a finite batch element: a value
no order of evaluation gives.
"""
from __future__ import annotations

import torch


def _batch_holds_nan(x: torch.Tensor) -> torch.Tensor | None:
    """Per batch element of a (*batch, m, n) input: whether its matrix holds a NaN; None
    for an input that is not a batch of matrices."""
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or not (x.is_floating_point() or x.is_complex()) \
            or x.is_meta:
        return None
    return torch.isnan(x).flatten(-2).any(-1)


def _leaf_presence(leaf, held: torch.Tensor, propagates: bool):
    """``leaf`` with each batch element whose matrix holds a NaN replaced by NaN where the
    element holds one and 0 where it does not (``propagates``), or by 0 (a leaf NaN need
    not reach). A leaf whose leading dims are not the batch's is judged whole."""
    if not isinstance(leaf, torch.Tensor) or not (leaf.is_floating_point() or leaf.is_complex()):
        return leaf if propagates or not isinstance(leaf, torch.Tensor) else torch.zeros_like(leaf)
    batch = tuple(held.shape)
    if tuple(leaf.shape[:len(batch)]) == batch:
        per = leaf.reshape(*batch, -1) if leaf.numel() else leaf.reshape(*batch, 0)
        mask = held.to(leaf.device)
    else:
        per, mask = leaf.reshape(1, -1), held.any().reshape(1).to(leaf.device)
    has = torch.isnan(per).any(-1, keepdim=True) if per.shape[-1] else torch.zeros_like(mask)[..., None]
    marker = torch.where(has, torch.full_like(per, float("nan")), torch.zeros_like(per)) if propagates \
        else torch.zeros_like(per)
    return torch.where(mask[..., None], marker, per).reshape(leaf.shape)


def nan_presence(inputs: list, outputs, leaves: tuple[int, ...]):
    """``outputs`` as compared for an op whose leaves ``leaves`` must hold a NaN wherever
    its first input's matrix does (unchanged where no matrix holds one)."""
    held = _batch_holds_nan(inputs[0]) if inputs else None
    if held is None or not bool(held.any()):
        return outputs
    if isinstance(outputs, (tuple, list)):
        out = [_leaf_presence(o, held, i in leaves) for i, o in enumerate(outputs)]
        return type(outputs)(out) if isinstance(outputs, list) else tuple(out)
    return _leaf_presence(outputs, held, 0 in leaves)
