"""Embedding lookups from their documented formulas: ``F.embedding`` and
``F.embedding_bag`` (sum, mean, max), with ``max_norm``'s renormalisation.

**The renorm** (``torch.embedding_renorm_``, which both call in place before the lookup
when ``max_norm`` is given; issue 37): each *distinct* row the indices name whose p-norm,
(sum |x|^p)^(1/p), exceeds ``max_norm`` is scaled by max_norm / (norm + 1e-7); the other
rows stay as they are. It is computed here with numpy in float64, not with a torch
kernel (:func:`renormed`). A row named twice is renormed once, from its own values, and
rows are disjoint, so the order of the updates cannot change the result (a second
renorm of a renormed row would leave it: its norm is below max_norm).

**The lookup**: row ``indices[...]`` of the (renormed) weight, read with advanced
indexing (eager CPU's kernel is ``index_select``). The bags sum (times the per-sample
weights), average or take the elementwise maximum of their rows, leaving out the rows
at ``padding_idx`` (an empty bag gives zeros; a mean divides by the rows kept).

**Gradients** follow the documented backward, which knows nothing of the renorm (torch
renorms under ``no_grad``, in place): the weight's gradient is the upstream gradient
sent to the rows looked up, none to ``padding_idx``'s, each lookup's share divided by
its index's frequency in the input with ``scale_grad_by_freq``; a per-sample weight's is
the upstream gradient times the (renormed) row it weighs. :class:`_Lookup` carries the
renormed values forward and that gradient back.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..references import NotApplicable, Reference

# What embedding_renorm_ adds to the norm before dividing (the docs and every kernel).
RENORM_EPSILON = 1e-7


def p_norm(row: np.ndarray, p: float) -> float:
    """The p-norm of ``row`` in float64, with absolute values: max |x| for p = inf, the
    count of non-zeros for p = 0 (torch.norm's conventions)."""
    magnitudes = np.abs(row)
    if not row.size:
        return 0.0
    if math.isinf(p):
        return float(magnitudes.max() if p > 0 else magnitudes.min())
    if p == 0:
        return float(np.count_nonzero(row))
    return float(np.sum(magnitudes ** p) ** (1.0 / p))


def renormed(weight: torch.Tensor, indices: torch.Tensor, max_norm: float, norm_type: float) -> torch.Tensor:
    """The weight as ``torch.embedding_renorm_(weight, indices, max_norm, norm_type)``
    leaves it, in float64: each distinct row named by ``indices`` whose p-norm exceeds
    ``max_norm`` scaled by max_norm / (norm + 1e-7). A row holding NaN has a NaN norm,
    never above max_norm; one holding inf is scaled by 0 (its infinities become NaN)."""
    if norm_type < 0:
        raise NotApplicable(f"norm_type={norm_type}")
    rows = np.array(weight.detach().cpu().to(torch.float64).numpy(), dtype=np.float64, copy=True)
    with np.errstate(all="ignore"):
        for i in sorted({int(v) for v in indices.reshape(-1).tolist()}):
            norm = p_norm(rows[i], norm_type)
            if norm > max_norm:
                rows[i] = rows[i] * (max_norm / (norm + RENORM_EPSILON))
    return torch.from_numpy(rows)


class _Lookup(torch.autograd.Function):
    """Rows looked up: forward, their ``values`` (the renormed rows); backward, the
    upstream gradient times ``scale`` (one number per lookup) to ``rows`` (the same
    lookup of the weight itself), as embedding's backward sends it."""

    @staticmethod
    def forward(ctx, rows, values, scale):
        ctx.save_for_backward(scale)
        return values.clone()

    @staticmethod
    def backward(ctx, grad):
        (scale,) = ctx.saved_tensors
        return grad * scale, None, None


def _index_list(indices: torch.Tensor, num: int) -> list[int]:
    if indices.dtype not in (torch.int32, torch.int64):
        raise NotApplicable(f"indices of dtype {indices.dtype}")
    flat = [int(v) for v in indices.reshape(-1).tolist()]
    if any(not 0 <= v < num for v in flat):
        raise NotApplicable("an index out of range (eager raises)")
    return flat


def _padding(kwargs: dict, num: int) -> int | None:
    padding_idx = kwargs.get("padding_idx")
    if padding_idx is None:
        return None
    padding_idx = int(padding_idx)
    if not -num <= padding_idx < num:
        raise NotApplicable(f"padding_idx={padding_idx} outside the weight's rows")
    return padding_idx + num if padding_idx < 0 else padding_idx


def _weight_values(weight: torch.Tensor, indices: torch.Tensor, kwargs: dict) -> torch.Tensor:
    """The weight's values the lookup reads: renormed where ``max_norm`` is given."""
    max_norm = kwargs.get("max_norm")
    if max_norm is None:
        return weight.detach()
    return renormed(weight, indices, float(max_norm), float(kwargs.get("norm_type", 2.0)))


def _gradient_shares(flat: list[int], padding_idx: int | None, by_frequency: bool) -> torch.Tensor:
    """Each lookup's share of its upstream gradient: 0 at padding_idx, 1 / (the index's
    count in the input) with scale_grad_by_freq, else 1."""
    counts: dict[int, int] = {}
    for v in flat:
        counts[v] = counts.get(v, 0) + 1
    shares = [0.0 if v == padding_idx else (1.0 / counts[v] if by_frequency else 1.0) for v in flat]
    return torch.tensor(shares, dtype=torch.float64).reshape(-1, 1)


def _looked_up(weight: torch.Tensor, values: torch.Tensor, flat: list[int], shares: torch.Tensor) -> torch.Tensor:
    """(lookups, dim): the rows ``flat`` names, renormed values forward, the documented
    gradient back."""
    at = torch.tensor(flat, dtype=torch.int64)
    return _Lookup.apply(weight[at], values.to(weight.dtype)[at], shares.to(weight.dtype))


def _weight_of(inputs: list, position: int) -> torch.Tensor:
    weight = inputs[position]
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or weight.dim() != 2:
        raise NotApplicable("the weight is not a 2-D real floating tensor")
    return weight


def embedding(inputs, kwargs):
    """``F.embedding(indices, weight, padding_idx, max_norm, norm_type,
    scale_grad_by_freq)``: the rows named by the indices, shaped indices.shape + (dim,)."""
    indices, weight = inputs[0], _weight_of(inputs, 1)
    if kwargs.get("sparse"):
        raise NotApplicable("sparse gradients")
    flat = _index_list(indices, weight.shape[0])
    shares = _gradient_shares(flat, _padding(kwargs, weight.shape[0]), bool(kwargs.get("scale_grad_by_freq")))
    rows = _looked_up(weight, _weight_values(weight, indices, kwargs), flat, shares)
    return rows.reshape(tuple(indices.shape) + (weight.shape[1],))


def _bags(indices: torch.Tensor, kwargs: dict) -> list[range]:
    """The positions of the flattened indices each bag takes: the rows of a 2-D input,
    or the spans between ``offsets`` (with ``include_last_offset`` the last offset ends
    the last bag; it must be the input's length, as the docs say)."""
    if indices.dim() == 2:
        length = indices.shape[1]
        return [range(b * length, (b + 1) * length) for b in range(indices.shape[0])]
    if indices.dim() != 1 or kwargs.get("offsets") is None:
        raise NotApplicable("a 1-D input without offsets")
    offsets, n = [int(o) for o in kwargs["offsets"]], indices.shape[0]
    if not offsets or offsets[0] != 0 or any(b < a for a, b in zip(offsets, offsets[1:])) or offsets[-1] > n:
        raise NotApplicable(f"offsets {offsets} for {n} indices")
    if kwargs.get("include_last_offset"):
        if offsets[-1] != n:
            raise NotApplicable("include_last_offset with a last offset short of the input")
        return [range(a, b) for a, b in zip(offsets, offsets[1:])]
    return [range(a, b) for a, b in zip(offsets, offsets[1:] + [n])]


def _bag_value(rows: torch.Tensor, kept: list[int], mode: str) -> torch.Tensor:
    """One bag's result from the rows it keeps: their sum, mean or elementwise max;
    zeros for a bag that keeps none (an empty sum: still a result of the weight, with a
    zero gradient, as eager's is)."""
    taken = rows[torch.tensor(kept, dtype=torch.int64)]
    if mode == "sum" or not kept:
        return taken.sum(dim=0)
    if mode == "mean":
        return taken.sum(dim=0) / len(kept)
    if bool(torch.isnan(taken).any()):
        # the documented max says nothing of NaN, and kernels compare in their own order
        raise NotApplicable("a bag's maximum over NaN")
    return taken.amax(dim=0)


def embedding_bag(inputs, kwargs):
    """``F.embedding_bag(indices, weight, offsets, max_norm, norm_type,
    scale_grad_by_freq, mode, per_sample_weights, include_last_offset, padding_idx)``:
    one row per bag, (bags, dim)."""
    indices, weight = inputs[0], _weight_of(inputs, 1)
    mode = kwargs.get("mode", "mean")
    if mode not in ("sum", "mean", "max") or kwargs.get("sparse"):
        raise NotApplicable(f"mode={mode!r}" if mode not in ("sum", "mean", "max") else "sparse gradients")
    num = weight.shape[0]
    flat = _index_list(indices, num)
    padding_idx = _padding(kwargs, num)
    by_frequency = bool(kwargs.get("scale_grad_by_freq")) and mode != "max"
    rows = _looked_up(weight, _weight_values(weight, indices, kwargs), flat,
                      _gradient_shares(flat, None, by_frequency))
    if kwargs.get("per_sample_weights"):
        if mode != "sum":
            raise NotApplicable("per-sample weights with a mode other than sum")
        rows = rows * inputs[2].reshape(-1, 1).to(rows.dtype)
    bags = [_bag_value(rows, [i for i in bag if flat[i] != padding_idx], mode) for bag in _bags(indices, kwargs)]
    return torch.stack(bags) if bags else rows[:0]


FORMULAS: dict[str, Reference] = {
    "embedding": embedding,
    "embedding_bag": embedding_bag,
    "embedding_bag_max": embedding_bag,
}
