"""Index maps computed in Python, applied with ``index_select``: the machinery of every
windowed formula here (resampling, pooling, padding, convolutions).

Along one dim of size L, an op's output position o reads a list of input positions (its
*taps*): the window of a pool, the two neighbours of a linear interpolation, the source
of a padded position. The lists are computed in Python from the documented formula,
padded to one length with invalid taps, and gathered with ``index_select``, whose
backward (``index_add``) gives the gradient, so no pooling, padding, interpolation or
convolution kernel runs. Positions outside [0, L) are invalid taps (the implicit
padding): the formulas read them as 0 or -inf, or leave them out.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..references import NotApplicable


@dataclass(frozen=True)
class Taps:
    """For each of O output positions along one dim, T input positions (O x T)."""
    index: torch.Tensor            # int64, every entry in [0, L): invalid taps point at 0
    valid: torch.Tensor            # bool: the tap lies inside the input
    weight: torch.Tensor | None    # float64 weights of the taps, where the formula has them


def taps(rows: list[list[int]], size: int, weights: list[list[float]] | None = None) -> Taps:
    """Taps from ``rows`` (per output position, the input positions it reads; any may
    lie outside [0, size)), ``weights`` alongside (padding taps weigh 0)."""
    width = max([len(r) for r in rows] + [1])
    index, valid, weight = [], [], []
    for o, row in enumerate(rows):
        inside = [0 <= p < size for p in row]
        index.append([p if ok else 0 for p, ok in zip(row, inside)] + [0] * (width - len(row)))
        valid.append(inside + [False] * (width - len(row)))
        if weights is not None:
            weight.append(list(weights[o]) + [0.0] * (width - len(row)))
    if size == 0 and rows:
        raise NotApplicable("a window reads an input side of 0")
    shape = (len(rows), width)
    return Taps(index=torch.tensor(index, dtype=torch.int64).reshape(shape),
                valid=torch.tensor(valid, dtype=torch.bool).reshape(shape),
                weight=None if weights is None else torch.tensor(weight, dtype=torch.float64).reshape(shape))


def gather(x: torch.Tensor, tables: list[Taps]) -> torch.Tensor:
    """x's last ``len(tables)`` dims (L1, ..., Ln) read through the taps: a tensor of shape
    (lead..., O1, ..., On, T1, ..., Tn)."""
    nd = len(tables)
    lead = x.dim() - nd
    for i, t in enumerate(tables):
        d = lead + 2 * i  # dims before it have become (O, T) pairs
        x = x.index_select(d, t.index.reshape(-1)).unflatten(d, tuple(t.index.shape))
    order = list(range(lead)) + [lead + 2 * i for i in range(nd)] + [lead + 2 * i + 1 for i in range(nd)]
    return x.permute(order)


def _placed(t: torch.Tensor, i: int, nd: int) -> torch.Tensor:
    """An (O_i, T_i) table shaped to broadcast against (O1..On, T1..Tn)."""
    shape = [1] * (2 * nd)
    shape[i], shape[nd + i] = t.shape
    return t.reshape(shape)


def valid_of(tables: list[Taps]) -> torch.Tensor:
    """Which taps of the n-d window lie inside the input: (O1..On, T1..Tn)."""
    out = torch.ones([1] * (2 * len(tables)), dtype=torch.bool)
    for i, t in enumerate(tables):
        out = out & _placed(t.valid, i, len(tables))
    return out


def weight_of(tables: list[Taps]) -> torch.Tensor:
    """The separable n-d weights, the product of each dim's: (O1..On, T1..Tn)."""
    out = torch.ones([1] * (2 * len(tables)), dtype=torch.float64)
    for i, t in enumerate(tables):
        out = out * _placed(t.weight, i, len(tables))
    return out


def tap_dims(nd: int) -> tuple[int, ...]:
    """The trailing (T1..Tn) dims of a gathered tensor, to reduce over."""
    return tuple(range(-nd, 0))


def invalid_filled(windows: torch.Tensor, tables: list[Taps], fill: float) -> torch.Tensor:
    """The gathered windows with their invalid taps replaced by ``fill`` (0 for a sum,
    -inf for a max): a padding tap must not bring in the value it was clamped to."""
    valid = valid_of(tables)
    if bool(valid.all()):
        return windows
    return torch.where(valid, windows, torch.full((), fill, dtype=windows.dtype))


def flat_positions(tables: list[Taps], sizes: list[int]) -> torch.Tensor:
    """Each tap's flat index into the input plane (L1 x ... x Ln, row-major):
    (O1..On, T1..Tn) int64, what max pooling's indices count."""
    nd = len(tables)
    out = torch.zeros([1] * (2 * nd), dtype=torch.int64)
    stride = 1
    for i in reversed(range(nd)):
        out = out + _placed(tables[i].index, i, nd) * stride
        stride *= sizes[i]
    return out
