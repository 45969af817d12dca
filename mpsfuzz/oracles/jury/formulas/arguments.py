"""Reading a call's arguments the way torch.nn.functional reads them, and the losses'
``reduction``: the small shared vocabulary of the formula references."""
from __future__ import annotations

import torch

from ..references import NotApplicable


def per_dim(value, n: int, name: str) -> tuple:
    """An int-or-sequence argument (kernel_size, stride, padding...) as ``n`` values: an
    int, or a one-element sequence, stands for every dim (torch's ``_ntuple``)."""
    if isinstance(value, (list, tuple)):
        values = tuple(value)
        if len(values) == 1:
            return values * n
        if len(values) != n:
            raise NotApplicable(f"{name}={value!r} has {len(values)} values for {n} dims")
        return values
    return (value,) * n


def real_inputs(inputs, *indices) -> None:
    """The formulas are written for real floating tensors (float64 by the contract)."""
    for i in indices:
        t = inputs[i]
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise NotApplicable(f"input {i} is not a real floating tensor")


def reduce_loss(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    """The documented reductions: 'none' keeps the elementwise loss, 'sum' adds it up,
    'mean' divides that sum by the number of elements (NaN over none: 0/0, as torch's mean)."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / loss.numel()
    raise NotApplicable(f"reduction={reduction!r}")
