"""Margin and embedding losses from the torch.nn loss docs: margin ranking, hinge
embedding, cosine embedding, triplet margin, multi-class margin (multi_margin),
multi-label margin and multi-label soft margin.

Hinges max(0, z) are ``relu``; selections by a +-1 target are ``masked_fill`` with masks
from ``le`` comparisons (the composites use ``where``, ``eq``, ``ne``, ``clamp_min``).
"""
from __future__ import annotations

import struct

import torch

from ..references import NotApplicable, Reference
from .arguments import real_inputs, reduce_loss
from .elementary import equal_to, log_sigmoid, magnitude, power, root, smaller

# Added to each squared magnitude by torch's cosine_embedding_loss: 1e-12 as a float32
# constant (9.99999996e-13), which shows in the gradient at a zero vector (1/sqrt(eps)).
COSINE_EPSILON = struct.unpack("f", struct.pack("f", 1e-12))[0]


def margin_ranking_loss(inputs, kwargs):
    """max(0, -y (a - b) + margin), the three broadcast."""
    real_inputs(inputs, 0, 1, 2)
    a, b, y = torch.broadcast_tensors(*inputs[:3])
    loss = torch.relu(-y * (a - b) + float(kwargs.get("margin", 0.0)))
    return reduce_loss(loss, kwargs.get("reduction", "mean"))


def hinge_embedding_loss(inputs, kwargs):
    """x where y = 1, max(0, margin - x) where y = -1 (the docs). torch defines the
    loss for any y as the hinge where y != 1 plus x where y != -1: a target of 0 gets
    both, and so does this formula."""
    real_inputs(inputs, 0, 1)
    x, y = inputs[0], inputs[1]
    if x.shape != y.shape:
        raise NotApplicable("hinge_embedding_loss of different shapes")
    margin = float(kwargs.get("margin", 1.0))
    hinge = torch.relu(margin - x).masked_fill(equal_to(y, 1.0), 0.0)
    own = x.masked_fill(equal_to(y, -1.0), 0.0)
    return reduce_loss(hinge + own, kwargs.get("reduction", "mean"))


def cosine_embedding_loss(inputs, kwargs):
    """1 - cos(a, b) where y = 1, max(0, cos(a, b) - margin) where y = -1, 0 for other
    targets; cos along the last dim, each squared magnitude plus torch's epsilon."""
    real_inputs(inputs, 0, 1, 2)
    a, b, y = inputs[:3]
    if a.shape != b.shape or tuple(a.shape[:-1]) != tuple(y.shape):
        raise NotApplicable("cosine_embedding_loss shapes")
    dot = (a * b).sum(dim=-1)
    squares = ((a * a).sum(dim=-1) + COSINE_EPSILON) * ((b * b).sum(dim=-1) + COSINE_EPSILON)
    cos = dot * torch.rsqrt(squares)
    margin = float(kwargs.get("margin", 0.0))
    alike = (1 - cos).masked_fill(~equal_to(y, 1.0), 0.0)
    unlike = torch.relu(cos - margin).masked_fill(~equal_to(y, -1.0), 0.0)
    return reduce_loss(alike + unlike, kwargs.get("reduction", "mean"))


def pairwise_distance(u: torch.Tensor, v: torch.Tensor, p: float, eps: float) -> torch.Tensor:
    """||u - v + eps||_p over the last dim (F.pairwise_distance)."""
    return root(power(magnitude(u - v + eps), p).sum(dim=-1), p)


def triplet_margin_loss(inputs, kwargs):
    """max(0, margin + d(a, p) - d(a, n)), d the pairwise p-distance; with ``swap`` the
    negative's distance is the smaller of d(a, n) and d(p, n)."""
    real_inputs(inputs, 0, 1, 2)
    anchor, positive, negative = inputs[:3]
    if not (anchor.shape == positive.shape == negative.shape) or anchor.dim() == 0:
        raise NotApplicable("triplet_margin_loss shapes")
    p, eps = float(kwargs.get("p", 2.0)), float(kwargs.get("eps", 1e-6))
    if p <= 0:
        raise NotApplicable(f"p={p}")
    near = pairwise_distance(anchor, positive, p, eps)
    far = pairwise_distance(anchor, negative, p, eps)
    if kwargs.get("swap", False):
        far = smaller(far, pairwise_distance(positive, negative, p, eps))
    loss = torch.relu(float(kwargs.get("margin", 1.0)) + near - far)
    return reduce_loss(loss, kwargs.get("reduction", "mean"))


def rows_of(x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(x as (N, C), target as (N, ...), whether the input was batched)."""
    if x.dim() == 1:
        return x.unsqueeze(0), target.unsqueeze(0), False
    if x.dim() != 2:
        raise NotApplicable("a (N, C) or (C,) input")
    return x, target, True


def per_sample(loss: torch.Tensor, batched: bool, reduction: str) -> torch.Tensor:
    return reduce_loss(loss if batched else loss.squeeze(0), reduction)


def multi_margin_loss(inputs, kwargs):
    """sum over classes i != y of w[y] max(0, margin - x[y] + x[i])^p, divided by C."""
    real_inputs(inputs, 0, 2)
    x, target, batched = rows_of(inputs[0], inputs[1])
    weight = inputs[2]
    p, margin = int(kwargs.get("p", 1)), float(kwargs.get("margin", 1.0))
    if p not in (1, 2):
        raise NotApplicable(f"p={p}")
    classes = x.shape[1]
    target = target.to(torch.int64).reshape(-1, 1)
    own = x.gather(1, target)
    hinge = torch.relu(margin - own + x)
    if p == 2:
        hinge = hinge * hinge
    if kwargs.get("use_weight", False):
        hinge = hinge * weight.index_select(0, target.reshape(-1)).unsqueeze(1)
    others = torch.ne(torch.arange(classes).unsqueeze(0), target)
    hinge = torch.where(others, hinge, torch.zeros((), dtype=x.dtype))
    return per_sample(hinge.sum(dim=1) / classes, batched, kwargs.get("reduction", "mean"))


def multilabel_margin_loss(inputs, kwargs):
    """sum over the targets j (the target's entries up to the first -1) and the classes
    i not among them of max(0, 1 - (x[j] - x[i])), divided by C. A class listed twice
    counts twice, as torch sums over the target entries."""
    real_inputs(inputs, 0)
    x, target, batched = rows_of(inputs[0], inputs[1])
    classes = x.shape[1]
    firsts, seconds = [], []
    for row in target.tolist():
        chosen = []
        for c in row:
            if c < 0:
                break
            chosen.append(int(c))
        others = [i for i in range(classes) if i not in set(chosen)]
        firsts.append([j for j in chosen for _ in others])
        seconds.append([i for _ in chosen for i in others])
    width = max([len(r) for r in firsts] + [1])
    valid = torch.tensor([[k < len(r) for k in range(width)] for r in firsts], dtype=torch.bool)
    j_index = torch.tensor([r + [0] * (width - len(r)) for r in firsts], dtype=torch.int64)
    i_index = torch.tensor([r + [0] * (width - len(r)) for r in seconds], dtype=torch.int64)
    hinge = torch.relu(1 - x.gather(1, j_index) + x.gather(1, i_index))
    hinge = torch.where(valid, hinge, torch.zeros((), dtype=x.dtype))
    return per_sample(hinge.sum(dim=1) / classes, batched, kwargs.get("reduction", "mean"))


def multilabel_soft_margin_loss(inputs, kwargs):
    """-(1/C) sum over classes of w[c] (y log sigmoid(x) + (1 - y) log sigmoid(-x))."""
    real_inputs(inputs, 0, 1, 2)
    x, y, weight = inputs[:3]
    loss = -(y * log_sigmoid(x) + (1 - y) * log_sigmoid(-x))
    if kwargs.get("use_weight", False):
        loss = loss * weight
    per_row = loss.sum(dim=-1) / x.shape[-1]
    return reduce_loss(per_row, kwargs.get("reduction", "mean"))


FORMULAS: dict[str, Reference] = {
    "margin_ranking_loss": margin_ranking_loss,
    "hinge_embedding_loss": hinge_embedding_loss,
    "cosine_embedding_loss": cosine_embedding_loss,
    "triplet_margin_loss": triplet_margin_loss,
    "multi_margin_loss": multi_margin_loss,
    "multilabel_margin_loss": multilabel_margin_loss,
    "multilabel_soft_margin_loss": multilabel_soft_margin_loss,
}
