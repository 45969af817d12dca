"""Convolutions and transposed convolutions as sums of shifted input taps times weights
(the nn.Conv*d / ConvTranspose*d docs' cross-correlation).

Convolution: out[n, co, o] = bias[co] + sum over the group's input channels ci and the
kernel taps t of weight[co, ci, t] * x[n, ci, o*s - p + t*d] (x is 0 outside the input).
'valid' padding is p = 0; 'same' pads d*(k-1) in all, half before (rounded down) and the
rest after, so that the output keeps the input's size (stride 1).

Transposed convolution, the adjoint of that map: out[n, co, j] = bias[co] + sum of
x[n, ci, i] * weight[ci, co, t] over the i, t with i*s - p + t*d = j, for outputs
j < (L - 1)*s - 2p + d*(k - 1) + output_padding + 1. Read from the output's side: j
takes input i = (j + p - t*d) / s where that is a whole number inside the input.

Both gather their taps with ``taps.py`` and contract with a broadcast multiply and a sum:
no convolution kernel runs, forward or backward.
"""
from __future__ import annotations

from ..references import NotApplicable, Reference
from .arguments import per_dim, real_inputs
from .taps import gather, invalid_filled, tap_dims, taps


def conv_paddings(padding, kernel, dilation, stride, nd: int) -> list[tuple[int, int]]:
    """(before, after) per dim."""
    if padding == "valid":
        return [(0, 0)] * nd
    if padding == "same":
        if any(s != 1 for s in stride):
            raise NotApplicable("padding='same' with a stride")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in per_dim(padding, nd, "padding")]


def forward_rows(size: int, k: int, s: int, before: int, after: int, d: int) -> list[list[int]]:
    out = (size + before + after - d * (k - 1) - 1) // s + 1
    if out < 0:
        raise NotApplicable("the kernel is larger than the padded input")
    return [[o * s - before + t * d for t in range(k)] for o in range(out)]


def transposed_rows(size: int, k: int, s: int, p: int, d: int, extra: int) -> list[list[int]]:
    out = (size - 1) * s - 2 * p + d * (k - 1) + extra + 1
    if out < 0:
        raise NotApplicable("a negative output size")
    rows = []
    for j in range(out):
        row = []
        for t in range(k):
            offset = j + p - t * d
            row.append(offset // s if offset % s == 0 else -1)  # -1: no input lands here
        rows.append(row)
    return rows


def conv_reference(nd: int, *, transposed: bool) -> Reference:
    def reference(inputs, kwargs):
        real_inputs(inputs, 0, 1, 2)
        x, weight, bias = inputs
        if x.dim() not in (nd + 1, nd + 2) or weight.dim() != nd + 2:
            raise NotApplicable("shapes outside the conv's contract")
        batched = x.dim() == nd + 2
        if not batched:
            x = x.unsqueeze(0)
        groups = int(kwargs.get("groups", 1))
        stride = per_dim(kwargs.get("stride", 1), nd, "stride")
        dilation = per_dim(kwargs.get("dilation", 1), nd, "dilation")
        kernel = tuple(weight.shape[2:])
        n, channels = x.shape[0], x.shape[1]
        if channels % groups:
            raise NotApplicable("groups do not divide the input channels")
        if transposed:
            padding = per_dim(kwargs.get("padding", 0), nd, "padding")
            extra = per_dim(kwargs.get("output_padding", 0), nd, "output_padding")
            rows = [transposed_rows(size, k, s, p, d, e) for size, k, s, p, d, e
                    in zip(x.shape[2:], kernel, stride, padding, dilation, extra)]
        else:
            pads = conv_paddings(kwargs.get("padding", 0), kernel, dilation, stride, nd)
            rows = [forward_rows(size, k, s, before, after, d) for size, k, s, (before, after), d
                    in zip(x.shape[2:], kernel, stride, pads, dilation)]
        tables = [taps(r, size) for r, size in zip(rows, x.shape[2:])]
        windows = invalid_filled(gather(x, tables), tables, 0.0)     # (N, C_in, O..., K...)
        outs = windows.shape[2:2 + nd]
        spatial_ones = [1] * nd
        per_group_in = channels // groups
        if transposed:
            # weight (C_in, C_out/g, K...): contract over the group's input channels
            out_per_group = weight.shape[1]
            w = weight.reshape([1, groups, per_group_in, out_per_group] + spatial_ones + list(kernel))
            taps_in = windows.reshape([n, groups, per_group_in, 1] + list(outs) + list(kernel))
            summed = (taps_in * w).sum(dim=(2,) + tap_dims(nd))
        else:
            # weight (C_out, C_in/g, K...)
            if weight.shape[1] != per_group_in:
                raise NotApplicable("the weight's channels do not match the groups")
            out_per_group = weight.shape[0] // groups
            w = weight.reshape([1, groups, out_per_group, per_group_in] + spatial_ones + list(kernel))
            taps_in = windows.reshape([n, groups, 1, per_group_in] + list(outs) + list(kernel))
            summed = (taps_in * w).sum(dim=(3,) + tap_dims(nd))
        out = summed.reshape([n, groups * out_per_group] + list(outs))
        if kwargs.get("bias", True):
            out = out + bias.reshape([1, -1] + spatial_ones)
        return out if batched else out.squeeze(0)
    return reference


FORMULAS: dict[str, Reference] = {}
for _nd in (1, 2, 3):
    FORMULAS[f"conv{_nd}d"] = conv_reference(_nd, transposed=False)
    FORMULAS[f"conv_transpose{_nd}d"] = conv_reference(_nd, transposed=True)
