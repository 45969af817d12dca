"""Losses computed element by element and then reduced, from the torch.nn loss docs:
mse, l1, smooth L1, Huber, soft margin, KL divergence, Poisson and Gaussian NLL, binary
cross entropy (of probabilities and of logits).

Input and target broadcast against each other (as the functional losses do); the
elementwise loss is reduced by ``reduction`` ('mean' divides by its number of elements,
``kl_div``'s 'batchmean' by the batch size). Where the functional loss is a composite
of elementary ops itself, the formula takes other kernels (``elementary.py``).
"""
from __future__ import annotations

import math

import torch

from ..references import NotApplicable, Reference
from .arguments import real_inputs, reduce_loss
from .elementary import magnitude, natural_exp, natural_log, softplus


def pair(inputs) -> tuple[torch.Tensor, torch.Tensor]:
    real_inputs(inputs, 0, 1)
    try:
        x, y = torch.broadcast_tensors(inputs[0], inputs[1])
    except RuntimeError:
        raise NotApplicable("input and target do not broadcast") from None
    return x, y


def weighted(loss: torch.Tensor, inputs, kwargs, *, mean_over_weights: bool) -> torch.Tensor:
    """The elementwise loss, times the third input where the case passes it as
    ``weight`` (torch 2.13's mse, l1 and Huber losses take one of the input's size),
    reduced: 'mean' is sum(w l) / sum(w) for mse and l1, mean(w l) for Huber, as each
    function documents and computes."""
    reduction = kwargs.get("reduction", "mean")
    if not kwargs.get("use_weight", False):
        return reduce_loss(loss, reduction)
    if len(inputs) < 3 or inputs[2].shape != inputs[0].shape:
        raise NotApplicable("a weight of another size than the input (torch raises)")
    loss = loss * inputs[2]
    if reduction == "mean" and mean_over_weights:
        return loss.sum() / inputs[2].sum()
    return reduce_loss(loss, reduction)


def mse_loss(inputs, kwargs):
    """(x - y)^2."""
    x, y = pair(inputs)
    d = x - y
    return weighted(d * d, inputs, kwargs, mean_over_weights=True)


def l1_loss(inputs, kwargs):
    """|x - y|."""
    x, y = pair(inputs)
    return weighted(magnitude(x - y), inputs, kwargs, mean_over_weights=True)


def smooth_l1_loss(inputs, kwargs):
    """0.5 (x - y)^2 / beta where |x - y| < beta, else |x - y| - 0.5 beta (beta = 0: L1)."""
    x, y = pair(inputs)
    beta = float(kwargs.get("beta", 1.0))
    size = magnitude(x - y)
    if beta == 0:
        return reduce_loss(size, kwargs.get("reduction", "mean"))
    loss = torch.where(torch.lt(size, beta), 0.5 * size * size / beta, size - 0.5 * beta)
    return reduce_loss(loss, kwargs.get("reduction", "mean"))


def huber_loss(inputs, kwargs):
    """0.5 (x - y)^2 where |x - y| < delta, else delta (|x - y| - 0.5 delta)."""
    x, y = pair(inputs)
    delta = float(kwargs.get("delta", 1.0))
    size = magnitude(x - y)
    loss = torch.where(torch.lt(size, delta), 0.5 * size * size, delta * (size - 0.5 * delta))
    return weighted(loss, inputs, kwargs, mean_over_weights=False)


def soft_margin_loss(inputs, kwargs):
    """log(1 + exp(-y x))."""
    x, y = pair(inputs)
    return reduce_loss(softplus(-y * x), kwargs.get("reduction", "mean"))


def kl_div(inputs, kwargs):
    """target * (log target - input), 0 where target is 0 (the xlogy convention); with
    log_target, exp(target) * (target - input). 'batchmean' divides the sum by the size
    of dim 0."""
    x, y = pair(inputs)
    if kwargs.get("log_target", False):
        loss = natural_exp(y) * (y - x)
    else:
        # y log y with 0 log 0 = 0: the log reads 1 where y is 0 (NaN is neither below
        # nor above 0 and reads 1 too, and y = NaN keeps the product NaN)
        is_zero = ~(torch.lt(y, 0) | torch.gt(y, 0))
        safe = torch.where(is_zero, torch.ones_like(y), y)
        loss = y * torch.log(safe) - y * x
    reduction = kwargs.get("reduction", "mean")
    if reduction == "batchmean":
        total = loss.sum()
        return total / inputs[0].shape[0] if inputs[0].dim() else total
    return reduce_loss(loss, reduction)


def poisson_nll_loss(inputs, kwargs):
    """exp(x) - y x with log_input, else x - y log(x + eps); ``full`` adds Stirling's
    y log y - y + 0.5 log(2 pi y) where y > 1."""
    real_inputs(inputs, 0, 1)
    x, y = inputs[0], inputs[1]
    if x.shape != y.shape:
        raise NotApplicable("poisson_nll_loss of different shapes")
    eps = float(kwargs.get("eps", 1e-8))
    if kwargs.get("log_input", True):
        loss = natural_exp(x) - y * x
    else:
        loss = x - y * natural_log(x + eps)
    if kwargs.get("full", False):
        above_one = torch.gt(y, 1)
        safe = torch.where(above_one, y, torch.ones_like(y))
        stirling = safe * natural_log(safe) - safe + 0.5 * natural_log(2 * math.pi * safe)
        loss = loss + torch.where(above_one, stirling, torch.zeros_like(y))
    return reduce_loss(loss, kwargs.get("reduction", "mean"))


def gaussian_nll_loss(inputs, kwargs):
    """0.5 (log v + (x - y)^2 / v) (+ 0.5 log 2 pi with ``full``), v the variance
    clamped below at eps. As F.gaussian_nll_loss does it, the clamp is not
    differentiated: the gradient w.r.t. var is the formula's at the clamped value. A var
    one dim short of the input gains a trailing dim of 1."""
    real_inputs(inputs, 0, 1, 2)
    x, y, var = inputs
    if var.shape != x.shape:
        if tuple(var.shape) == tuple(x.shape[:-1]):
            var = var.unsqueeze(-1)
        elif var.dim() != x.dim():
            raise NotApplicable("var of a shape gaussian_nll_loss refuses")
    eps = float(kwargs.get("eps", 1e-6))
    held = var.detach()
    clamped = var + (torch.where(torch.gt(held, eps), held, torch.full((), eps, dtype=held.dtype)) - held)
    d = x - y
    loss = 0.5 * (natural_log(clamped) + d * d / clamped)
    if kwargs.get("full", False):
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, kwargs.get("reduction", "mean"))


def binary_cross_entropy(inputs, kwargs):
    """-w (y log x + (1 - y) log(1 - x)), each log clamped below at -100 (the docs)."""
    real_inputs(inputs, 0, 1, 2)
    x, y, weight = inputs
    if x.shape != y.shape:
        raise NotApplicable("binary_cross_entropy of different shapes")
    floor = torch.full((), -100.0, dtype=x.dtype)
    log_x = torch.log(x)
    log_rest = torch.log(1 - x)
    loss = -(y * torch.where(torch.gt(log_x, -100.0), log_x, floor)
             + (1 - y) * torch.where(torch.gt(log_rest, -100.0), log_rest, floor))
    if kwargs.get("use_weight", False):
        loss = loss * weight
    return reduce_loss(loss, kwargs.get("reduction", "mean"))


def binary_cross_entropy_with_logits(inputs, kwargs):
    """-w (p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))), p the pos_weight:
    w (p y softplus(-x) + (1 - y) softplus(x))."""
    real_inputs(inputs, 0, 1, 2, 3)
    x, y, weight, pos_weight = inputs
    if x.shape != y.shape:
        raise NotApplicable("binary_cross_entropy_with_logits of different shapes")
    positive = y * softplus(-x)
    if kwargs.get("use_pos_weight", False):
        positive = pos_weight * positive
    loss = positive + (1 - y) * softplus(x)
    if kwargs.get("use_weight", False):
        loss = loss * weight
    return reduce_loss(loss, kwargs.get("reduction", "mean"))


FORMULAS: dict[str, Reference] = {
    "mse_loss": mse_loss,
    "l1_loss": l1_loss,
    "smooth_l1_loss": smooth_l1_loss,
    "huber_loss": huber_loss,
    "soft_margin_loss": soft_margin_loss,
    "kl_div": kl_div,
    "poisson_nll_loss": poisson_nll_loss,
    "gaussian_nll_loss": gaussian_nll_loss,
    "binary_cross_entropy": binary_cross_entropy,
    "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits,
}
