"""``F.interpolate`` from its documented sampling rules: nearest, nearest-exact, linear
(bi-/tri-), bicubic and their antialiased forms, and area.

Every mode is separable: along each spatial dim, output position i reads a few input
positions with weights computed here in Python (float64, or exact fractions where a
floor decides the position), and the n-d result is the sum over the tensor product of
the dims' taps (``taps.py``).

The coordinate mapping (torch's ``area_pixel_compute_scale`` and source index, as the
``F.interpolate`` docs describe ``align_corners`` and ``recompute_scale_factor``):

- the output size is ``size``, or floor(L * scale_factor);
- the scale is (L - 1) / (O - 1) with align_corners (0 for O = 1); otherwise
  1 / scale_factor where a scale factor is given and not recomputed, else L / O;
- nearest reads floor(i * scale), nearest-exact floor((i + 1/2) * scale), both at most L - 1;
- linear and cubic sample at x = i * scale with align_corners, else (i + 1/2) * scale - 1/2,
  which linear clamps at 0 and cubic does not;
- linear weighs the two neighbours of x by 1 - t and t (t = x - floor(x)); cubic the
  four by Keys' cubic convolution with A = -0.75, its taps clamped to the input;
- antialias (bilinear and bicubic, 4-D): each output reads the inputs under its filter
  centred at (i + 1/2) * scale, the triangle (bilinear) or Keys' cubic with a = -0.5
  (bicubic, as Pillow and torch's antialiased kernels), stretched by the scale when
  downsampling (support = scale * the filter's), truncated to the input and normalised
  to sum 1;
- area is adaptive average pooling to the output size (``pooling.py``).
"""
from __future__ import annotations

import math
from fractions import Fraction

import torch

from ..references import NotApplicable, Reference
from .arguments import per_dim, real_inputs
from .pooling import adaptive_rows
from .taps import Taps, gather, invalid_filled, tap_dims, taps, weight_of

CUBIC_A = -0.75          # torch's bicubic (as OpenCV's)
AA_CUBIC_A = -0.5        # antialiased bicubic (Keys' choice, Pillow's)


def output_sizes(x: torch.Tensor, kwargs: dict) -> tuple[list[int], list[float | None]]:
    """(output sizes, the scale factor each dim's coordinate mapping uses or None)."""
    nd = x.dim() - 2
    if kwargs.get("size") is not None:
        return list(per_dim(kwargs["size"], nd, "size")), [None] * nd
    factors = per_dim(kwargs.get("scale_factor"), nd, "scale_factor")
    if any(f is None for f in factors):
        raise NotApplicable("neither size nor scale_factor")
    sizes = [int(math.floor(x.shape[2 + i] * float(f))) for i, f in enumerate(factors)]
    recompute = kwargs.get("recompute_scale_factor") or kwargs.get("mode") == "area"
    return sizes, [None] * nd if recompute else [float(f) for f in factors]


def mapping_scale(size: int, out: int, factor: float | None, align_corners: bool) -> float:
    """Input pixels per output pixel, as the coordinate mapping uses it."""
    if align_corners:
        return (size - 1) / (out - 1) if out > 1 else 0.0
    if factor is not None and factor > 0:
        return 1.0 / factor
    return size / out


def exact_scale(size: int, out: int, factor: float | None) -> Fraction:
    """The nearest modes' scale as an exact fraction: the floor of i * scale must not
    land one short of an integer by a rounding of 1 / factor."""
    if factor is not None and factor > 0:
        return 1 / Fraction(factor)
    return Fraction(size, out)


def nearest_taps(size: int, out: int, factor: float | None, exact: bool) -> Taps:
    scale = exact_scale(size, out, factor)
    offset = Fraction(1, 2) if exact else Fraction(0)
    rows = [[min(math.floor((i + offset) * scale), size - 1)] for i in range(out)]
    return taps(rows, size, [[1.0]] * out)


def source_coordinate(scale: float, i: int, align_corners: bool, cubic: bool) -> float:
    if align_corners:
        return scale * i
    x = scale * (i + 0.5) - 0.5
    return x if cubic else max(x, 0.0)


def split_coordinate(x: float, size: int) -> tuple[int, float]:
    """(floor(x) kept at most L - 1, the fraction past it clamped to [0, 1])."""
    base = min(math.floor(x), size - 1)
    return base, min(max(x - base, 0.0), 1.0)


def linear_taps(size: int, out: int, factor: float | None, align_corners: bool) -> Taps:
    scale = mapping_scale(size, out, factor, align_corners)
    rows, weights = [], []
    for i in range(out):
        base, t = split_coordinate(source_coordinate(scale, i, align_corners, cubic=False), size)
        rows.append([base, min(base + 1, size - 1)])
        weights.append([1.0 - t, t])
    return taps(rows, size, weights)


def keys_cubic(x: float, a: float) -> float:
    """Keys' cubic convolution kernel W(x) with parameter a (support [-2, 2])."""
    x = abs(x)
    if x <= 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    if x < 2.0:
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return 0.0


def cubic_taps(size: int, out: int, factor: float | None, align_corners: bool) -> Taps:
    scale = mapping_scale(size, out, factor, align_corners)
    rows, weights = [], []
    for i in range(out):
        base, t = split_coordinate(source_coordinate(scale, i, align_corners, cubic=True), size)
        # the four neighbours base-1 .. base+2 at distances t+1, t, 1-t, 2-t, read
        # clamped to the input (the border sample repeats)
        rows.append([min(max(base + k, 0), size - 1) for k in (-1, 0, 1, 2)])
        weights.append([keys_cubic(d, CUBIC_A) for d in (t + 1.0, t, 1.0 - t, 2.0 - t)])
    return taps(rows, size, weights)


def triangle(x: float) -> float:
    return max(0.0, 1.0 - abs(x))


def antialiased_taps(size: int, out: int, factor: float | None, align_corners: bool,
                     filter_fn, filter_support: float) -> Taps:
    scale = mapping_scale(size, out, factor, align_corners)
    widen = scale >= 1.0                      # only a downsampling widens the filter
    support = filter_support * scale if widen else filter_support
    stretch = 1.0 / scale if widen else 1.0
    rows, weights = [], []
    for i in range(out):
        centre = scale * (i + 0.5)
        # int() truncates toward zero, as the window bounds are computed
        first = max(int(centre - support + 0.5), 0)
        stop = min(int(centre + support + 0.5), size)
        row = list(range(first, stop))
        w = [filter_fn((j - centre + 0.5) * stretch) for j in row]
        total = sum(w)
        rows.append(row)
        weights.append([v / total for v in w] if total != 0.0 else w)
    return taps(rows, size, weights)


def resampled(x: torch.Tensor, tables: list[Taps]) -> torch.Tensor:
    """The weighted sum of each output's taps (padding taps, outside a truncated
    antialias window, read as 0)."""
    windows = invalid_filled(gather(x, tables), tables, 0.0)
    return (windows * weight_of(tables)).sum(dim=tap_dims(len(tables)))


def interpolate_reference(mode: str) -> Reference:
    def reference(inputs, kwargs):
        real_inputs(inputs, 0)
        x = inputs[0]
        if x.dim() < 3:
            raise NotApplicable("interpolate takes (N, C, *spatial)")
        if kwargs.get("mode", "nearest") not in MODES[mode]:
            raise NotApplicable(f"mode={kwargs.get('mode')!r}")
        if mode == "linear" and kwargs["mode"] != LINEAR_BY_RANK.get(x.dim()) or mode == "bicubic" and x.dim() != 4:
            raise NotApplicable(f"mode={kwargs['mode']!r} for a {x.dim()}-D input")
        sizes, factors = output_sizes(x, kwargs)
        spatial = list(x.shape[2:])
        if mode == "area":
            return adaptive_average(x, sizes)
        align = bool(kwargs.get("align_corners") or False)
        antialias = bool(kwargs.get("antialias", False))
        if antialias and x.dim() != 4:
            raise NotApplicable("antialias is defined for 4-D inputs")
        tables = []
        for size, out, factor in zip(spatial, sizes, factors):
            if mode in ("nearest", "nearest_exact"):
                tables.append(nearest_taps(size, out, factor, exact=mode == "nearest_exact"))
            elif antialias and mode == "linear":
                tables.append(antialiased_taps(size, out, factor, align, triangle, 1.0))
            elif antialias and mode == "bicubic":
                tables.append(antialiased_taps(size, out, factor, align,
                                               lambda d: keys_cubic(d, AA_CUBIC_A), 2.0))
            elif mode == "linear":
                tables.append(linear_taps(size, out, factor, align))
            else:
                tables.append(cubic_taps(size, out, factor, align))
        return resampled(x, tables)
    return reference


def adaptive_average(x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Area resampling: the mean of each adaptive window (start floor(i L / O), end
    ceil((i + 1) L / O)), each dim's taps weighing 1 / the window's length."""
    tables = []
    for size, out in zip(x.shape[x.dim() - len(sizes):], sizes):
        rows = adaptive_rows(size, out)
        tables.append(taps(rows, size, [[1.0 / len(r)] * len(r) for r in rows]))
    return resampled(x, tables)


LINEAR_BY_RANK = {3: "linear", 4: "bilinear", 5: "trilinear"}
MODES = {"nearest": ("nearest",), "nearest_exact": ("nearest-exact",),
         "linear": ("linear", "bilinear", "trilinear"), "bicubic": ("bicubic",), "area": ("area",)}

FORMULAS: dict[str, Reference] = {
    "interpolate_nearest": interpolate_reference("nearest"),
    "interpolate_nearest_exact": interpolate_reference("nearest_exact"),
    "interpolate_linear": interpolate_reference("linear"),
    "interpolate_bicubic": interpolate_reference("bicubic"),
    "interpolate_area": interpolate_reference("area"),
}
