"""Classification losses from the torch.nn docs: NLL of log-probabilities and cross
entropy with class indices or class probabilities (weights, ``ignore_index``, label
smoothing).

The input is (N, C, d1, ...) or unbatched (C,), classes along dim 1 (dim 0 unbatched).
With class indices, sample n's loss is -w[y_n] x[n, y_n] (x the log-probabilities; for
cross entropy, log_softmax of the logits over the classes), 0 where y_n is
``ignore_index``; 'mean' divides the sum by the sum of w[y_n] over the samples not
ignored. Label smoothing eps mixes in the uniform distribution: the loss becomes
(1 - eps) times that plus eps / C times sum_c -w[c] x[n, c] (0 where ignored, reduced
with the same denominator). With class probabilities y, the loss is
-sum_c w[c] y'[n, c] x[n, c], y' = (1 - eps) y + eps / C, and 'mean' divides by the
number of samples (N d1 ...).
"""
from __future__ import annotations

import torch

from ..references import NotApplicable, Reference
from .arguments import real_inputs
from .elementary import log_softmax


def class_dim_of(x: torch.Tensor) -> int:
    if x.dim() == 0:
        raise NotApplicable("a 0-d input")
    return 1 if x.dim() >= 2 else 0


def class_shaped(weight: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    shape = [1] * x.dim()
    shape[dim] = -1
    return weight.reshape(shape)


def picked_terms(log_probs, target, weight, ignore_index: int):
    """(-w[y] x[y] per sample, 0 where ignored; w[y] per sample, 0 where ignored)."""
    dim = class_dim_of(log_probs)
    if tuple(target.shape) != tuple(log_probs.shape[:dim]) + tuple(log_probs.shape[dim + 1:]):
        raise NotApplicable("target shape does not match the input's")
    kept = torch.ne(target, ignore_index)
    safe = torch.where(kept, target, torch.zeros((), dtype=target.dtype)).to(torch.int64)
    # x[y] as the sum over classes of x where the class is y (exact: the rest add 0);
    # the composites gather (cross entropy's smoothed mean gathers the weights)
    classes = torch.arange(log_probs.shape[dim]).reshape([-1] + [1] * (log_probs.dim() - dim - 1))
    other_class = torch.ne(classes, safe.unsqueeze(dim))
    picked = torch.where(other_class, torch.zeros((), dtype=log_probs.dtype), log_probs).sum(dim=dim)
    if weight is None:
        w = kept.to(log_probs.dtype)
    else:
        w = torch.where(kept, weight.index_select(0, safe.reshape(-1)).reshape(safe.shape),
                        torch.zeros((), dtype=log_probs.dtype))
    terms = torch.where(kept, -picked * w, torch.zeros((), dtype=log_probs.dtype))
    return terms, w, kept


def reduced(terms, denominator, reduction: str):
    if reduction == "none":
        return terms
    if reduction == "sum":
        return terms.sum()
    if reduction == "mean":
        return terms.sum() / denominator
    raise NotApplicable(f"reduction={reduction!r}")


def indexed_loss(log_probs, target, weight, kwargs, smoothing: float):
    ignore = int(kwargs.get("ignore_index", -100))
    reduction = kwargs.get("reduction", "mean")
    terms, w, kept = picked_terms(log_probs, target, weight, ignore)
    denominator = w.sum()
    loss = reduced(terms, denominator, reduction)
    if smoothing == 0:
        return loss
    dim = class_dim_of(log_probs)
    spread = log_probs if weight is None else log_probs * class_shaped(weight, log_probs, dim)
    uniform = torch.where(kept, -spread.sum(dim=dim), torch.zeros((), dtype=log_probs.dtype))
    classes = log_probs.shape[dim]
    return (1 - smoothing) * loss + reduced(uniform, denominator, reduction) * (smoothing / classes)


def nll_loss(inputs, kwargs):
    real_inputs(inputs, 0, 2)
    x, target, weight = inputs
    return indexed_loss(x, target, weight if kwargs.get("use_weight", False) else None, kwargs, 0.0)


def cross_entropy(inputs, kwargs):
    real_inputs(inputs, 0, 2)
    x, target, weight = inputs
    log_probs = log_softmax(x, class_dim_of(x))
    return indexed_loss(log_probs, target, weight if kwargs.get("use_weight", False) else None, kwargs,
                        float(kwargs.get("label_smoothing", 0.0)))


def cross_entropy_probs(inputs, kwargs):
    real_inputs(inputs, 0, 1, 2)
    x, target, weight = inputs
    if x.shape != target.shape:
        raise NotApplicable("probabilities of another shape than the input")
    dim = class_dim_of(x)
    classes = x.shape[dim]
    smoothing = float(kwargs.get("label_smoothing", 0.0))
    mixed = target * (1 - smoothing) + smoothing / classes if smoothing else target
    terms = log_softmax(x, dim) * mixed
    if kwargs.get("use_weight", False):
        terms = terms * class_shaped(weight, x, dim)
    loss = -terms.sum(dim=dim)
    return reduced(loss, x.numel() / classes if classes else 0.0, kwargs.get("reduction", "mean"))


FORMULAS: dict[str, Reference] = {
    "nll_loss": nll_loss,
    "cross_entropy": cross_entropy,
    "cross_entropy_probs": cross_entropy_probs,
}
