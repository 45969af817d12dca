"""An op's result as a flat list of leaves, the one order every oracle compares in."""
from __future__ import annotations

import torch


def flatten_outputs(out) -> list:
    """Tensors and scalars of an op's result in a stable order (tuples, namedtuples and
    lists are walked depth first; Python scalars become 0-d tensors)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in flatten_outputs(item)]
    if isinstance(out, (bool, int, float, complex)):
        return [torch.tensor(out)]
    if out is None:
        return [None]
    return [out]
