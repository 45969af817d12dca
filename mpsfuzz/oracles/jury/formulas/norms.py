"""Normalisations from their documented formulas: batch, instance, group, layer and RMS
norm, local response norm, ``F.normalize``, and ``F.cosine_similarity`` (its norms clamped
at eps).

The statistics normalisations compute y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias
over their sets (batch norm: each channel over the batch and the spatial dims; instance
norm: each (sample, channel) over the spatial dims; group norm: each (sample, group) over
the group's channels and the spatial dims; layer norm: the trailing ``normalized_shape``),
Var the biased variance (the nn docs: "the biased estimator").

Running statistics (batch and instance norm with ``track``: the catalogue's wrappers
return them after the call) are updated as the docs give it, in training only:
new = (1 - momentum) * old + momentum * observed, the observed variance unbiased (n - 1
in the denominator); instance norm averages the per-sample update over the batch. They
carry no gradient, as eager's in-place update carries none.
"""
from __future__ import annotations

import math

import torch

from ..references import NotApplicable, Reference
from .arguments import real_inputs
from .elementary import larger, magnitude, power, root
from .taps import gather, invalid_filled, tap_dims, taps


def biased_moments(x: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(mean, biased variance, count) of x over ``dims``, kept as size-1 dims."""
    count = math.prod(x.shape[d] for d in dims)
    mean = x.sum(dim=dims, keepdim=True) / count
    centred = x - mean
    return mean, (centred * centred).sum(dim=dims, keepdim=True) / count, count


def standardised(x, mean, var, eps: float) -> torch.Tensor:
    return (x - mean) / torch.sqrt(var + eps)


def channel_shaped(t: torch.Tensor, rank: int) -> torch.Tensor:
    """A (C,) tensor shaped to broadcast along dim 1 of a rank-``rank`` input."""
    return t.reshape([1, -1] + [1] * (rank - 2))


def affine(y, weight, bias, rank: int):
    if weight is not None:
        y = y * channel_shaped(weight, rank)
    if bias is not None:
        y = y + channel_shaped(bias, rank)
    return y


def updated_running(old, observed_mean, observed_var_unbiased, momentum: float):
    with torch.no_grad():
        return ((1 - momentum) * old[0] + momentum * observed_mean,
                (1 - momentum) * old[1] + momentum * observed_var_unbiased)


def _running_norm_arguments(inputs, kwargs, min_rank: int, what: str):
    """(x, running mean, running var, weight or None, bias or None, momentum, eps) of a
    batch or instance norm call (weight and bias None where ``affine`` is off)."""
    real_inputs(inputs, 0, 1, 2, 3, 4)
    x, running_mean, running_var, weight, bias = inputs
    if x.dim() < min_rank:
        raise NotApplicable(f"{what} takes (N, C, *spatial)")
    w, b = (weight, bias) if kwargs.get("affine", True) else (None, None)
    return x, running_mean, running_var, w, b, kwargs.get("momentum", 0.1), kwargs.get("eps", 1e-5)


def batch_norm_reference(inputs, kwargs):
    x, running_mean, running_var, w, b, momentum, eps = _running_norm_arguments(inputs, kwargs, 2, "batch norm")
    training, track = bool(kwargs["training"]), kwargs.get("track", True)
    if momentum is None:
        raise NotApplicable("momentum=None (a cumulative average)")
    rank = x.dim()
    if training:
        dims = (0,) + tuple(range(2, rank))
        mean, var, count = biased_moments(x, dims)
        out = affine(standardised(x, mean, var, eps), w, b, rank)
        if not track:
            return out
        new_mean, new_var = updated_running((running_mean, running_var), mean.reshape(-1),
                                            var.reshape(-1) * count / (count - 1), momentum)
        return out, new_mean, new_var
    if not track:
        raise NotApplicable("eval mode without running statistics")
    out = affine(standardised(x, channel_shaped(running_mean, rank), channel_shaped(running_var, rank), eps),
                 w, b, rank)
    return out, running_mean.detach().clone(), running_var.detach().clone()


def instance_norm_reference(inputs, kwargs):
    x, running_mean, running_var, w, b, momentum, eps = _running_norm_arguments(inputs, kwargs, 3, "instance norm")
    use_input_stats, track = bool(kwargs["use_input_stats"]), kwargs.get("track", False)
    rank = x.dim()
    if not use_input_stats:
        if not track:
            raise NotApplicable("running statistics asked for but not given")
        out = affine(standardised(x, channel_shaped(running_mean, rank), channel_shaped(running_var, rank), eps),
                     w, b, rank)
        return out, running_mean.detach().clone(), running_var.detach().clone()
    mean, var, count = biased_moments(x, tuple(range(2, rank)))
    out = affine(standardised(x, mean, var, eps), w, b, rank)
    if not track:
        return out
    batch = x.shape[0]
    new_mean, new_var = updated_running(
        (running_mean, running_var), mean.reshape(batch, x.shape[1]).sum(0) / batch,
        (var * count / (count - 1)).reshape(batch, x.shape[1]).sum(0) / batch, momentum)
    return out, new_mean, new_var


def group_norm_reference(inputs, kwargs):
    real_inputs(inputs, 0, 1, 2)
    x, weight, bias = inputs
    groups = int(kwargs["num_groups"])
    eps = kwargs.get("eps", 1e-5)
    if x.dim() < 2 or x.shape[1] % groups:
        raise NotApplicable("group norm takes (N, C, *) with groups dividing C")
    n, c = x.shape[0], x.shape[1]
    grouped = x.reshape((n, groups, c // groups) + tuple(x.shape[2:]))
    mean, var, _ = biased_moments(grouped, tuple(range(2, grouped.dim())))
    y = standardised(grouped, mean, var, eps).reshape(x.shape)
    on = kwargs.get("affine", True)
    return affine(y, weight if on else None, bias if on else None, x.dim())


def layer_norm_reference(inputs, kwargs):
    real_inputs(inputs, 0, 1, 2)
    x, weight, bias = inputs
    shape = tuple(kwargs["normalized_shape"])
    if tuple(x.shape[x.dim() - len(shape):]) != shape:
        raise NotApplicable("normalized_shape is not x's trailing shape")
    eps = kwargs.get("eps", 1e-5)
    mean, var, _ = biased_moments(x, tuple(range(x.dim() - len(shape), x.dim())))
    y = standardised(x, mean, var, eps)
    which = kwargs.get("affine", "both")
    if which in ("both", "weight"):
        y = y * weight
    if which == "both":
        y = y + bias
    return y


def rms_norm_reference(inputs, kwargs):
    """y = x / sqrt(mean(x^2) + eps) * weight over the trailing ``normalized_shape``.
    eps=None means the input dtype's machine epsilon, which a float64 copy no longer
    tells (float32's 1.2e-7 or half's 9.8e-4 move the result by more than a float32
    roundoff where mean(x^2) is small): not applicable then."""
    real_inputs(inputs, 0, 1)
    x, weight = inputs
    eps = kwargs.get("eps")
    if eps is None:
        raise NotApplicable("eps=None is the original dtype's epsilon, unknown in float64")
    shape = tuple(kwargs["normalized_shape"])
    if tuple(x.shape[x.dim() - len(shape):]) != shape:
        raise NotApplicable("normalized_shape is not x's trailing shape")
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    count = math.prod(shape)
    mean_square = (x * x).sum(dim=dims, keepdim=True) / count
    y = x / torch.sqrt(mean_square + eps)
    return y * weight if kwargs.get("affine", True) else y


def local_response_norm_reference(inputs, kwargs):
    """b_c = a_c / (k + alpha / n * sum of a_c'^2 over channels c - n//2 .. c + (n-1)//2
    (those that exist; the sum is divided by n whatever the count)) ** beta (the
    nn.LocalResponseNorm docs; the window as torch's zero padding places it)."""
    real_inputs(inputs, 0)
    x = inputs[0]
    if x.dim() < 3:
        raise NotApplicable("local response norm takes (N, C, *)")
    n, alpha, beta, k = int(kwargs["size"]), kwargs.get("alpha", 1e-4), kwargs.get("beta", 0.75), kwargs.get("k", 1.0)
    channels = x.shape[1]
    if x.numel() == 0:
        return x.clone()
    window = [taps([[c + j for j in range(-(n // 2), (n - 1) // 2 + 1)] for c in range(channels)], channels)]
    square = (x * x).movedim(1, -1)                   # channels last, where the taps read
    total = invalid_filled(gather(square, window), window, 0.0).sum(dim=tap_dims(1)).movedim(-1, 1)
    base = k + alpha / n * total
    # base ** -beta through exp/log (base > 0): the composite runs pow itself
    return x * torch.exp(-beta * torch.log(base))


def normalize_reference(inputs, kwargs):
    """x / max(||x||_p, eps) along ``dim`` (F.normalize), ||x||_p = (sum |x|^p)^(1/p) and
    the max |x| for p = inf."""
    real_inputs(inputs, 0)
    x = inputs[0]
    p, dim, eps = float(kwargs.get("p", 2.0)), kwargs.get("dim", 1), kwargs.get("eps", 1e-12)
    if x.dim() == 0:
        raise NotApplicable("a 0-d input")
    size = magnitude(x)
    if math.isinf(p) and p > 0:
        if x.shape[dim] == 0:
            raise NotApplicable("the max over an empty dim")
        norm = size.max(dim=dim, keepdim=True).values
    elif p > 0:
        norm = root(power(size, p).sum(dim=dim, keepdim=True), p)
    else:
        raise NotApplicable(f"p={p}")
    return x / larger(norm, eps)


def _all_finite(*tensors) -> bool:
    """Whether every element is finite: x * 0 is 0 for a finite x, NaN otherwise (no
    ``isfinite``, whose ``eq`` is a kernel of eager CPU's cosine_similarity)."""
    return not any(bool((t.detach() * 0).ne(0).any()) for t in tensors)


def cosine_similarity_reference(inputs, kwargs):
    """x1 . x2 / (max(||x1||_2, eps) * max(||x2||_2, eps)) along ``dim`` of the operands
    broadcast together (the torch docs' formula), taken as the dot product of the two
    operands each divided by its clamped norm: the same number, whose denominator does not
    underflow (eps = 5e-324: a product of two clamped zero norms is 0, and 0/0 NaN where
    the result is 0) or overflow. A 0-d pair is two vectors of one element. torch refuses
    a negative eps (pytorch#169047), and where a square passes float64's range the norm
    here computes nothing a kernel that scales would: both declined."""
    real_inputs(inputs, 0, 1)
    x1, x2 = torch.broadcast_tensors(inputs[0], inputs[1])
    dim, eps = kwargs.get("dim", 1), float(kwargs.get("eps", 1e-8))
    if eps < 0:
        raise NotApplicable("a negative eps (torch refuses it)")
    if x1.dim() == 0:
        x1, x2 = x1.reshape(1), x2.reshape(1)
    norms = [root(power(magnitude(x), 2).sum(dim=dim, keepdim=True), 2) for x in (x1, x2)]
    if _all_finite(x1, x2) and not _all_finite(*norms):
        raise NotApplicable("a square past float64's range")
    # torch clamps the norms outside autograd (under no_grad, by design: pytorch#31378), so
    # a norm below eps passes the norm's own gradient on, not the clamp's 0: the clamp is
    # added as a constant.
    clamped = [n + (larger(n, eps) - n).detach() for n in norms]
    return ((x1 / clamped[0]) * (x2 / clamped[1])).sum(dim=dim)


FORMULAS: dict[str, Reference] = {
    "batch_norm": batch_norm_reference,
    "instance_norm": instance_norm_reference,
    "group_norm": group_norm_reference,
    "layer_norm": layer_norm_reference,
    "layer_norm_medium": layer_norm_reference,
    "rms_norm": rms_norm_reference,
    "rms_norm_medium": rms_norm_reference,
    "local_response_norm": local_response_norm_reference,
    "normalize": normalize_reference,
    "cosine_similarity": cosine_similarity_reference,
}
