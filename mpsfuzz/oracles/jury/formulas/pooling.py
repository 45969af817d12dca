"""Pooling from the documented window rules: average, max (and its indices), adaptive
average and max, power-average (lp), and max unpooling.

Along each spatial dim of size L, with kernel k, stride s (default k), padding p and
dilation d, output o reads positions o*s - p + j*d (j < k); positions outside [0, L)
are padding. The output count is floor((L + 2p - d(k-1) - 1) / s) + 1, rounded up
instead with ceil_mode, where a last window that would start past L + p (in the right
padding) is dropped (the nn.AvgPool/MaxPool docs). Adaptive pools cut L into O windows
from floor(i L / O) to ceil((i + 1) L / O).

- average: the window's sum over its in-input taps divided by ``divisor_override``, or
  with ``count_include_pad`` by the window's extent clipped to the padded input
  (min(start + k, L + p) - start per dim), else by its count of in-input taps;
- max: the largest in-input tap (NaN if any is NaN), its index the first such tap's
  flat position in the input plane;
- lp: the p-th root of k times the average pool of x^p (``F.lp_pool*d``'s definition:
  with ceil_mode a clipped last window's sum is scaled by k / its size);
- max_unpool2d: the catalogue's wrapper pools a tie-free key to get the indices, so the
  places are known in Python: each pooled value goes back to its window's key maximum.
"""
from __future__ import annotations

import math

import torch

from ..references import NotApplicable, Reference
from .arguments import per_dim, real_inputs
from .elementary import whole_power
from .taps import Taps, flat_positions, gather, invalid_filled, tap_dims, taps, valid_of


def pooled_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1  # the last window would start in the right padding
    if out < 0:
        raise NotApplicable("the window is larger than the padded input")
    return out


def window_rows(out: int, k: int, s: int, p: int, d: int) -> list[list[int]]:
    return [[o * s - p + j * d for j in range(k)] for o in range(out)]


def adaptive_rows(size: int, out: int) -> list[list[int]]:
    return [list(range((i * size) // out, -(-((i + 1) * size) // out))) for i in range(out)]


class Windows:
    """A pooling call's geometry: per spatial dim, kernel, stride, padding, dilation."""

    def __init__(self, x: torch.Tensor, nd: int, kwargs: dict, *, dilation: bool):
        self.nd = nd
        self.sizes = list(x.shape[x.dim() - nd:])
        self.kernel = per_dim(kwargs["kernel_size"], nd, "kernel_size")
        stride = kwargs.get("stride")
        self.stride = self.kernel if stride is None or stride == () or stride == [] else per_dim(stride, nd, "stride")
        self.padding = per_dim(kwargs.get("padding", 0), nd, "padding")
        self.dilation = per_dim(kwargs.get("dilation", 1), nd, "dilation") if dilation else (1,) * nd
        ceil_mode = bool(kwargs.get("ceil_mode", False))
        self.outs = [pooled_size(*a, ceil_mode) for a in zip(self.sizes, self.kernel, self.stride,
                                                               self.padding, self.dilation)]
        self.tables = [taps(window_rows(o, k, s, p, d), n)
                       for o, k, s, p, d, n in zip(self.outs, self.kernel, self.stride, self.padding,
                                                   self.dilation, self.sizes)]

    def clipped_extent(self) -> torch.Tensor:
        """Per output, the window's extent clipped to the padded input (O1..On)."""
        out = torch.ones([1] * self.nd, dtype=torch.float64)
        for i, (o, k, s, p, n) in enumerate(zip(self.outs, self.kernel, self.stride, self.padding, self.sizes)):
            extent = [min(j * s - p + k, n + p) - (j * s - p) for j in range(o)]
            shape = [1] * self.nd
            shape[i] = o
            out = out * torch.tensor(extent, dtype=torch.float64).reshape(shape)
        return out


def in_input_count(tables: list[Taps]) -> torch.Tensor:
    """Per output, how many of its taps lie inside the input (O1..On)."""
    return valid_of(tables).sum(dim=tap_dims(len(tables))).to(torch.float64)


def window_sums(x: torch.Tensor, tables: list[Taps]) -> torch.Tensor:
    return invalid_filled(gather(x, tables), tables, 0.0).sum(dim=tap_dims(len(tables)))


def window_max(x: torch.Tensor, tables: list[Taps], sizes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(each window's largest in-input value, the flat index of its first occurrence in
    the input plane; a NaN counts as the largest)."""
    nd = len(tables)
    key = invalid_filled(gather(x, tables), tables, -math.inf)
    values = key.amax(dim=tap_dims(nd))
    flat = key.flatten(-nd)
    top = values.unsqueeze(-1)
    hits = (torch.eq(flat, top) | (torch.isnan(flat) & torch.isnan(top))) & valid_of(tables).flatten(-nd)
    first = hits.to(torch.uint8).argmax(dim=-1, keepdim=True)
    places = flat_positions(tables, sizes).flatten(-nd).expand(flat.shape)
    return values, places.gather(-1, first).squeeze(-1)


def plain_pool_input(inputs, nd: int) -> torch.Tensor:
    real_inputs(inputs, 0)
    x = inputs[0]
    if x.dim() not in (nd + 1, nd + 2):
        raise NotApplicable(f"a {nd}-D pool takes (C, *L) or (N, C, *L)")
    return x


def avg_pool_reference(nd: int) -> Reference:
    def reference(inputs, kwargs):
        x = plain_pool_input(inputs, nd)
        w = Windows(x, nd, kwargs, dilation=False)
        sums = window_sums(x, w.tables)
        override = kwargs.get("divisor_override")
        if override:
            return sums / float(override)
        if kwargs.get("count_include_pad", True):
            return sums / w.clipped_extent()
        return sums / in_input_count(w.tables)
    return reference


def max_pool_reference(nd: int, *, indices: bool) -> Reference:
    def reference(inputs, kwargs):
        x = plain_pool_input(inputs, nd)
        w = Windows(x, nd, kwargs, dilation=True)
        values, where_ = window_max(x, w.tables, w.sizes)
        return (values, where_) if indices else values
    return reference


def adaptive_tables(x: torch.Tensor, nd: int, output_size) -> tuple[list[Taps], list[int]]:
    sizes = list(x.shape[x.dim() - nd:])
    outs = per_dim(output_size, nd, "output_size")
    outs = [n if o is None else int(o) for o, n in zip(outs, sizes)]
    return [taps(adaptive_rows(n, o), n) for n, o in zip(sizes, outs)], sizes


def adaptive_avg_reference(nd: int) -> Reference:
    def reference(inputs, kwargs):
        x = plain_pool_input(inputs, nd)
        tables, _ = adaptive_tables(x, nd, kwargs["output_size"])
        return window_sums(x, tables) / in_input_count(tables)
    return reference


def adaptive_max_reference(nd: int, *, indices: bool) -> Reference:
    def reference(inputs, kwargs):
        x = plain_pool_input(inputs, nd)
        tables, sizes = adaptive_tables(x, nd, kwargs["output_size"])
        values, where_ = window_max(x, tables, sizes)
        return (values, where_) if indices else values
    return reference


def exact_zero(v: torch.Tensor) -> torch.Tensor:
    """1.0 where v == 0, else 0.0 (no gradient: it only selects)."""
    return torch.eq(v.detach(), 0).to(v.dtype)


def signed_power(x: torch.Tensor, p: float) -> torch.Tensor:
    """x ** p as torch's pow takes it: a whole p by repeated products (any sign); a
    fractional one through exp(p log x), NaN (value and gradient) for x < 0, and 0 with
    a zero gradient at x = 0."""
    whole = whole_power(x, p)
    if whole is not None:
        return whole
    zero = exact_zero(x)
    return torch.exp(p * torch.log(x + zero)) * (1 - zero)


def signed_root(v: torch.Tensor, p: float) -> torch.Tensor:
    """v ** (1/p): NaN (value and gradient) for a negative v unless p is 1, as pow of a
    negative base to a fractional power; 0 at v = 0 (the gradient there, infinite, is
    undefined: the catalogue's grad_undefined says so)."""
    if p == 1:
        return v
    zero = exact_zero(v)
    safe = v + zero
    taken = torch.sqrt(safe) if p == 2 else torch.exp(torch.log(safe) / p)
    return taken * (1 - zero)


def lp_pool_reference(nd: int) -> Reference:
    def reference(inputs, kwargs):
        x = plain_pool_input(inputs, nd)
        p = float(kwargs["norm_type"])
        if math.isinf(p) or p <= 0:
            raise NotApplicable(f"norm_type={p}")
        geometry = {"kernel_size": kwargs["kernel_size"], "stride": kwargs.get("stride"),
                    "ceil_mode": kwargs.get("ceil_mode", False)}
        w = Windows(x, nd, geometry, dilation=False)
        sums = window_sums(signed_power(x, p), w.tables)
        # k times the average over the clipped window (padding 0: its in-input taps)
        scaled = sums * float(math.prod(w.kernel)) / in_input_count(w.tables)
        return signed_root(scaled, p)
    return reference


def unpool_key(plane: int) -> list[int]:
    """The catalogue's tie-free key: position q of each plane holds (q * 7919) % 1000003."""
    return [(q * 7919) % 1_000_003 for q in range(plane)]


def max_unpool2d_reference(inputs, kwargs):
    real_inputs(inputs, 0)
    x = inputs[0]
    if x.dim() not in (3, 4):
        raise NotApplicable("max_unpool2d takes (C, H, W) or (N, C, H, W)")
    height, width = per_dim(kwargs["output_size"], 2, "output_size")
    key = unpool_key(height * width)
    w = Windows(torch.empty(height, width), 2, {"kernel_size": kwargs["kernel_size"], "stride": kwargs.get("stride"),
                                                 "padding": kwargs.get("padding", 0)}, dilation=False)
    if tuple(w.outs) != tuple(x.shape[-2:]):
        raise NotApplicable("the pooled key's shape is not the input's")
    # where each pooled value goes: its window's key maximum (distinct keys: no ties)
    source = {}
    rows, cols = (window_rows(o, k, s, p, 1) for o, k, s, p in zip(w.outs, w.kernel, w.stride, w.padding))
    for i, row in enumerate(rows):
        for j, col in enumerate(cols):
            inside = [a * width + b for a in row for b in col if 0 <= a < height and 0 <= b < width]
            if inside:
                source[max(inside, key=lambda q: key[q])] = i * w.outs[1] + j  # a later write wins
    plane = height * width
    picked = torch.tensor([q in source for q in range(plane)], dtype=torch.bool)
    index = torch.tensor([source.get(q, 0) for q in range(plane)], dtype=torch.int64)
    flat = x.flatten(-2)
    if flat.shape[-1] == 0:
        return torch.zeros(tuple(x.shape[:-2]) + (height, width), dtype=x.dtype)
    values = torch.where(picked, flat.index_select(-1, index), torch.zeros((), dtype=x.dtype))
    return values.unflatten(-1, (height, width))


FORMULAS: dict[str, Reference] = {"max_unpool2d": max_unpool2d_reference}
for _nd in (1, 2, 3):
    FORMULAS[f"avg_pool{_nd}d"] = avg_pool_reference(_nd)
    FORMULAS[f"max_pool{_nd}d"] = max_pool_reference(_nd, indices=False)
    FORMULAS[f"max_pool{_nd}d_with_indices"] = max_pool_reference(_nd, indices=True)
    FORMULAS[f"adaptive_avg_pool{_nd}d"] = adaptive_avg_reference(_nd)
for _nd in (1, 2):
    FORMULAS[f"adaptive_max_pool{_nd}d"] = adaptive_max_reference(_nd, indices=False)
    FORMULAS[f"lp_pool{_nd}d"] = lp_pool_reference(_nd)
FORMULAS["adaptive_max_pool2d_with_indices"] = adaptive_max_reference(2, indices=True)
