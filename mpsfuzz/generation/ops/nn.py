"""Neural-network ops, first half: convolutions, pooling, normalisation, linear layers and
embeddings, activations, dropout, resampling (interpolate, grid_sample), padding and
tensor rearrangements (pixel shuffle, im2col/col2im, channel shuffle, one_hot).

(Losses, attention and recurrent cells are in :mod:`.nn_losses`, the same family.)

Shapes are drawn so that CPU accepts them: a conv's weight matches the input's channels
and groups; kernel, stride, padding and dilation are drawn by the argument builders from
the drawn shapes (argument builders only see shapes, so e.g. ``groups`` is read back from
the weight's shape). Rank 4 and 5 inputs get channels_last layouts from the strategies;
a batch of zero appears now and then.

Max pooling's indices are not unique under ties (expanded layouts repeat values), so the
``*_with_indices`` ops compare the input values the indices point at. Gradients of max
pooling depend on the tie-breaking too, so max pools declare no ``grad`` variant.
Dropouts are random: they are judged statistically (:func:`dropout_judge`).

Activations and dropouts that take ``inplace`` draw it: an in-place call writes a copy of
the input in the input's own layout (``writable_copy``), so the kernel sees the drawn
strides and the case's input (which the statistical judges read) stays as it was.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from .. import dtypes as dt
from ..grad_points import (dims_of, has_tie, is_zero, kinks, near, rows, slack, vector_norm_reason, when, wide,
                           zero_crossings)
from ..huge_samples import (LOOKUP_DTYPES, bag_args, bag_index_values, bag_judged_grads, bag_max_formula,
                            bag_reference_inputs, bag_shapes, lookup_index_values, lookup_reference_inputs,
                            lookup_shapes)
from ..large_sizes import HUGE_SUFFIX, SIZE_CLASS, dim_off_rows, grows
from ..opspec import declare_grows
from ..opspec import (OpSpec, ShapeBudget, any_shape, broadcast_shapes, expand, integers_once, prod, register,
                      sampled_once, writable_copy)
from ..preparation import preparation
from ..recipes import DtypeArg

FAMILY = "nn"

FLOAT = expand("float")
SIGNED_AND_BYTE = expand("signed") + ("uint8",)
INDEX = ("int64", "int32")
TIES = frozenset({"ties_unspecified"})
RANDOM = frozenset({"random"})
# Tolerances for ops that accumulate (convs, norms, pooling over windows).
ACCUMULATES = dict(rtol_scale=16, atol_scale=32, semantics=frozenset({"accumulates"}))
CONVOLVES = dict(ACCUMULATES, semantics=frozenset({"accumulates", "zero-taps"}))
# A transposed convolution's output grows with its stride and dilation.
CONVOLVES_TRANSPOSED = dict(ACCUMULATES, semantics=frozenset({"accumulates", "zero-taps", "window-sizes-output"}))
# Linear and cubic resampling: taps of weight 0 (zero-taps) and weights it computes.
RESAMPLES = dict(ACCUMULATES, semantics=frozenset({"accumulates", "zero-taps", "computed-weights"}))


def nn(name: str, fn, shapes, dtypes, doc: str, **kw) -> OpSpec:
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=expand(dtypes),
                  doc=doc, **kw)


# -- small drawing helpers ----------------------------------------------------------------

def _batch(draw, budget: ShapeBudget, high: int = 3) -> int:
    """A batch size: 0 in about one case in twenty (when empties are allowed)."""
    if budget.allow_empty and draw(st.integers(0, 19)) == 0:
        return 0
    return draw(st.integers(1, high))


def _spatial(draw, budget: ShapeBudget, n: int, low: int = 1, high: int = 8) -> list[int]:
    top = max(low, min(high, budget.max_side))
    return [draw(st.integers(low, top)) for _ in range(n)]


def _shrink(shape: list[int], movable: list[int], limit: int, floors: dict | None = None) -> list[int]:
    """Halve the largest of the ``movable`` sides until numel <= limit (never below
    their floor, default 1)."""
    floors = floors or {}
    shape = list(shape)
    while prod(shape) > limit:
        cands = [i for i in movable if shape[i] > floors.get(i, 1)]
        if not cands:
            break
        i = max(cands, key=lambda k: shape[k])
        shape[i] = max(floors.get(i, 1), shape[i] // 2)
    return shape


def _pack(draw, values: list[int]):
    """An int where all dims agree (sometimes), else a tuple (torch accepts both)."""
    if len(set(values)) == 1 and draw(st.booleans()):
        return values[0]
    return tuple(values)


def _left_at_default(draw, out: dict, **defaults) -> dict:
    """``out`` with, now and then, each window argument that equals its documented
    default (an int, or a tuple of it) left out, so that the default itself is drawn."""
    for name, default in defaults.items():
        value = out.get(name)
        at_default = value == default or isinstance(value, tuple) and value and all(v == default for v in value)
        if name in out and at_default and draw(st.booleans()):
            del out[name]
    return out


def _divisors(n: int, top: int = 8) -> list[int]:
    return [d for d in range(1, min(n, top) + 1) if n % d == 0] or [1]


def _float_dtype(dtype_names) -> str:
    return dtype_names if isinstance(dtype_names, str) else dtype_names[0]


# ==========================================================================================
# Convolutions
# ==========================================================================================

def _conv_shapes(nd: int, transposed: bool):
    """(input, weight, bias): input (N, C_in, *L) or unbatched (C_in, *L); weight
    (C_out, C_in/g, *k) for a conv, (C_in, C_out/g, *k) for a transposed conv; bias
    (C_out,). The groups g are read back by the argument builder."""
    def build(draw, budget: ShapeBudget):
        groups = draw(st.sampled_from((1, 1, 1, 2, 3)))
        cin_g, cout_g = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        cin, cout = groups * cin_g, groups * cout_g
        spatial = _spatial(draw, budget, nd, high=8 if nd < 3 else 5)
        kernel = [draw(st.integers(1, min(3, s))) for s in spatial]
        batched = draw(st.integers(0, 4)) > 0
        n = _batch(draw, budget)
        shape = ([n] if batched else []) + [cin] + spatial
        first = len(shape) - nd
        # a transposed conv's output is up to ~3x larger per dim: keep its input smaller
        limit = budget.max_numel // (4 ** nd if transposed else 1)
        floors = {first + i: kernel[i] for i in range(nd)}
        shape = _shrink(shape, list(range(first, len(shape))), max(limit, 1), floors)
        if batched and prod(shape) > limit:
            shape[0] = min(shape[0], 1)
        if transposed:
            weight = (cin, cout_g) + tuple(kernel)
        else:
            weight = (cout, cin_g) + tuple(kernel)
        return (tuple(shape), weight, (cout,))
    return build


def _conv_args(nd: int, transposed: bool):
    def build(draw, shapes, dtypes):
        x, w, b = shapes
        spatial, kernel = x[-nd:], w[-nd:]
        groups = (b[0] // w[1]) if transposed else (x[-nd - 1] // w[1])
        out: dict = {"bias": draw(st.booleans())}
        if groups != 1 or draw(st.booleans()):
            out["groups"] = groups
        # a fifth of the cases keep stride, dilation (and a transposed conv's padding) at
        # their defaults in every dim, which independent draws per dim seldom give
        if transposed:
            plain = draw(st.integers(0, 4)) == 0
            strides, dils, pads, opads = [], [], [], []
            for size, k in zip(spatial, kernel):
                s, d = (1, 1) if plain else (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
                op = draw(st.integers(0, max(s, d) - 1))
                most = ((size - 1) * s + d * (k - 1) + op) // 2
                p = 0 if plain else draw(st.integers(0, max(0, min(k, most))))
                strides.append(s), dils.append(d), pads.append(p), opads.append(op)
            out.update(stride=_pack(draw, strides), dilation=_pack(draw, dils),
                       padding=_pack(draw, pads), output_padding=_pack(draw, opads))
            return _left_at_default(draw, out, stride=1, dilation=1, padding=0, output_padding=0)
        # ("same" second: a run's first examples, which its later ones mutate, favour
        # the low options)
        how = draw(st.sampled_from(("explicit", "same", "explicit", "valid")))
        plain = draw(st.integers(0, 4)) == 0
        dils = []
        if how == "same":
            dils = [draw(st.integers(1, 2)) for _ in range(nd)]
            out.update(padding="same", dilation=_pack(draw, dils))
            return _left_at_default(draw, out, dilation=1)
        strides, pads = [], []
        for size, k in zip(spatial, kernel):
            s = 1 if plain else draw(st.integers(1, 3))
            p = 0 if how == "valid" or plain else draw(st.integers(0, k))
            d = 1 if plain else draw(st.integers(1, 2))
            if size + 2 * p < d * (k - 1) + 1:
                d = 1
            if size + 2 * p < k:  # (kernel larger than the padded input)
                p = (k - size + 1) // 2
                how = "explicit"
            strides.append(s), pads.append(p), dils.append(d)
        out.update(stride=_pack(draw, strides), dilation=_pack(draw, dils),
                   padding="valid" if how == "valid" else _pack(draw, pads))
        return _left_at_default(draw, out, stride=1, dilation=1, padding=0)
    return build


def _conv_fn(fn):
    def call(x, w, b, *, bias=True, **kw):
        return fn(x, w, b if bias else None, **kw)
    return call


_CONV_DOCS = {
    "conv": "{n}-D convolution: groups, stride, dilation, int/tuple/'same'/'valid' padding, optional bias",
    "conv_transpose": "{n}-D transposed convolution: groups, stride, dilation, padding, output_padding",
}

for _nd, _f, _ft in ((1, F.conv1d, F.conv_transpose1d), (2, F.conv2d, F.conv_transpose2d),
                     (3, F.conv3d, F.conv_transpose3d)):
    register(
        nn(f"conv{_nd}d", _conv_fn(_f), _conv_shapes(_nd, False), FLOAT,
           _CONV_DOCS["conv"].format(n=_nd), args=_conv_args(_nd, False),
           input_dtypes=(None, None, None), grad=True, autocast=True, **CONVOLVES),
        nn(f"conv_transpose{_nd}d", _conv_fn(_ft), _conv_shapes(_nd, True), FLOAT,
           _CONV_DOCS["conv_transpose"].format(n=_nd), args=_conv_args(_nd, True),
           input_dtypes=(None, None, None), grad=True, autocast=True, **CONVOLVES_TRANSPOSED),
    )


# ==========================================================================================
# Pooling
# ==========================================================================================

def _pool_shapes(nd: int, *, min_side: int = 1, allow_unbatched: bool = True):
    """One input (N, C, *L) or unbatched (C, *L)."""
    def build(draw, budget: ShapeBudget):
        spatial = _spatial(draw, budget, nd, low=min_side, high=8 if nd < 3 else 6)
        c = draw(st.integers(1, 4))
        batched = not allow_unbatched or draw(st.integers(0, 4)) > 0
        shape = ([_batch(draw, budget)] if batched else []) + [c] + spatial
        first = len(shape) - nd
        shape = _shrink(shape, list(range(first, len(shape))), budget.max_numel,
                        {i: min_side for i in range(first, len(shape))})
        return (tuple(shape),)
    return build


def _window(draw, size: int, *, max_kernel: int = 3, dilation: bool = True,
            pad_limit: str = "half"):
    """A valid (kernel, stride, padding, dilation) for one spatial dim of ``size``."""
    k = draw(st.integers(1, max(1, min(max_kernel, size))))
    s = draw(st.integers(1, 3))
    p = draw(st.integers(0, k // 2)) if pad_limit == "half" else 0
    d = draw(st.integers(1, 2)) if dilation else 1
    if size + 2 * p < d * (k - 1) + 1:
        d = 1
    return k, s, p, d


def _max_pool_args(nd: int):
    def build(draw, shapes, dtypes):
        spatial = shapes[0][-nd:]
        ks, ss, ps, ds = zip(*(_window(draw, n) for n in spatial))
        out = {"kernel_size": _pack(draw, list(ks)), "padding": _pack(draw, list(ps)),
               "dilation": _pack(draw, list(ds)), "ceil_mode": draw(st.booleans())}
        if draw(st.integers(0, 3)):
            out["stride"] = _pack(draw, list(ss))
        if set(ds) == {1} and not out["ceil_mode"]:
            # the default dilation, left out where ceil_mode is off: without a draw of its
            # own, every case keeps the layouts and values it was drawn with
            del out["dilation"]
        return out
    return build


def _avg_pool_args(nd: int):
    def build(draw, shapes, dtypes):
        spatial = shapes[0][-nd:]
        ks, ss, ps, _ = zip(*(_window(draw, n, dilation=False) for n in spatial))
        out = {"kernel_size": _pack(draw, list(ks)), "padding": _pack(draw, list(ps)),
               "ceil_mode": draw(st.booleans()), "count_include_pad": draw(st.booleans())}
        if draw(st.integers(0, 3)):
            out["stride"] = _pack(draw, list(ss))
        if nd > 1 and draw(st.integers(0, 3)) == 0:
            out["divisor_override"] = draw(st.integers(1, 5))
        return out
    return build


def _adaptive_args(nd: int, *, allow_none: bool = True):
    def build(draw, shapes, dtypes):
        spatial = shapes[0][-nd:]
        sizes = [draw(st.integers(1, n + 1)) for n in spatial]
        if nd > 1 and allow_none and draw(st.integers(0, 4)) == 0:
            sizes[draw(st.integers(0, nd - 1))] = None
        if nd == 1:
            return {"output_size": sizes[0] if draw(st.booleans()) else tuple(sizes)}
        if None not in sizes and len(set(sizes)) == 1 and draw(st.booleans()):
            return {"output_size": sizes[0]}
        return {"output_size": tuple(sizes)}
    return build


def _lp_pool_args(nd: int):
    def build(draw, shapes, dtypes):
        spatial = shapes[0][-nd:]
        ks, ss, _, _ = zip(*(_window(draw, n, dilation=False, pad_limit="none") for n in spatial))
        # (lp_pool1d wants plain ints: it multiplies by kernel_size)
        pack = (lambda v: v[0]) if nd == 1 else (lambda v: _pack(draw, v))
        out = {"norm_type": draw(st.sampled_from((2.0, 1.0, 3.0, 1.5))),
               "kernel_size": pack(list(ks)), "ceil_mode": draw(st.booleans())}
        if draw(st.integers(0, 3)):
            out["stride"] = pack(list(ss))
        return out
    return build


def pooled_indices(nd: int, *, values_at: int = 0, indices_at: int = 1):
    """Canonicaliser for max pools that return indices (flat into each (n, c) plane of
    the input's last ``nd`` dims): the indices become the input values they point at,
    plus a flag per index saying it was in range. Tie-breaking then does not matter."""
    def canonicalise(inputs, outputs):
        x = inputs[0]
        values, idx = outputs[values_at], outputs[indices_at]
        plane = prod(x.shape[x.dim() - nd:])
        if idx.numel() == 0 or plane == 0:
            return (values, torch.zeros(idx.shape, dtype=x.dtype, device=x.device),
                    torch.ones(idx.shape, dtype=torch.bool, device=x.device))
        lead = x.shape[:x.dim() - nd]
        flat_x = x.reshape(*lead, plane)
        flat_i = idx.reshape(*idx.shape[:idx.dim() - nd], -1)
        if tuple(flat_i.shape[:-1]) != tuple(lead):  # a wrongly shaped result: keep it
            return (values, idx, torch.zeros(idx.shape, dtype=torch.bool, device=idx.device))
        in_range = torch.logical_and(flat_i.ge(0), flat_i.lt(plane))
        gathered = flat_x.gather(-1, flat_i.clamp(0, plane - 1))
        return (values, gathered.reshape(idx.shape), in_range.reshape(idx.shape))
    return canonicalise


def _with_indices(fn):
    def call(x, **kw):
        return fn(x, return_indices=True, **kw)
    return call


def _lp_pool_undefined(nd: int):
    """lp_pool is (sign(s) relu(|s|) k)^(1/p) of each window's sum s of x^p: at s = 0
    the relu has its kink and the root an infinite slope."""
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d}[nd]

    def window_sums(inputs, kwargs):
        x, p = wide(inputs[0]), kwargs["norm_type"]
        if x.numel() == 0:
            return []
        call = dict(kernel_size=kwargs["kernel_size"], stride=kwargs.get("stride"), padding=0,
                    ceil_mode=kwargs.get("ceil_mode", False))
        return [(pool(x.pow(p), **call), pool(x.abs().pow(p), **call))]
    return zero_crossings(window_sums, "a window's sum of x^p")


_MAX_POOLS = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOLS = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_ADAPTIVE_AVG = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}
_ADAPTIVE_MAX = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}

for _nd in (1, 2, 3):
    register(
        nn(f"max_pool{_nd}d", _MAX_POOLS[_nd], _pool_shapes(_nd), FLOAT,
           f"{_nd}-D max pooling: kernel, stride, padding <= kernel/2, dilation, ceil_mode",
           args=_max_pool_args(_nd)),
        nn(f"max_pool{_nd}d_with_indices", _with_indices(_MAX_POOLS[_nd]), _pool_shapes(_nd), FLOAT,
           f"{_nd}-D max pooling returning indices (compared through the values they point at)",
           args=_max_pool_args(_nd), canonicalise=pooled_indices(_nd), semantics=TIES),
        nn(f"avg_pool{_nd}d", _AVG_POOLS[_nd], _pool_shapes(_nd), FLOAT,
           f"{_nd}-D average pooling: ceil_mode, count_include_pad"
           + (", divisor_override" if _nd > 1 else ""),
           args=_avg_pool_args(_nd), grad=True, **ACCUMULATES),
        nn(f"adaptive_avg_pool{_nd}d", _ADAPTIVE_AVG[_nd], _pool_shapes(_nd), FLOAT,
           f"{_nd}-D adaptive average pooling (output sizes up to input + 1, None keeps a side)",
           args=_adaptive_args(_nd), grad=True, **ACCUMULATES),
    )
for _nd in (1, 2):
    register(
        nn(f"adaptive_max_pool{_nd}d", _ADAPTIVE_MAX[_nd], _pool_shapes(_nd), FLOAT,
           f"{_nd}-D adaptive max pooling", args=_adaptive_args(_nd)),
    )
register(
    nn("adaptive_max_pool2d_with_indices", _with_indices(F.adaptive_max_pool2d), _pool_shapes(2),
       FLOAT, "2-D adaptive max pooling returning indices (compared through the values they point at)",
       args=_adaptive_args(2), canonicalise=pooled_indices(2), semantics=TIES),
    nn("lp_pool1d", F.lp_pool1d, _pool_shapes(1), FLOAT, "1-D power-average pooling (norm_type 1, 1.5, 2, 3)",
       args=_lp_pool_args(1), grad=True, grad_undefined=_lp_pool_undefined(1), **ACCUMULATES),
    nn("lp_pool2d", F.lp_pool2d, _pool_shapes(2), FLOAT, "2-D power-average pooling (norm_type 1, 1.5, 2, 3)",
       args=_lp_pool_args(2), grad=True, grad_undefined=_lp_pool_undefined(2), **ACCUMULATES),
)


# max_unpool2d: the indices come from a max_pool2d on the same device of a tie-free key
# tensor built in the wrapper (distinct integers), so both sides scatter to the same places.
# Windows never overlap (stride >= kernel): overlapping windows can pick the same input
# position twice and the unpooled value there would depend on the order of the writes.

def _unpool_shapes(draw, budget: ShapeBudget):
    (shape,) = _pool_shapes(2, allow_unbatched=True)(draw, budget)
    return (shape,)


def _unpool_args(draw, shapes, dtypes):
    ho, wo = shapes[0][-2:]
    ks, ss, ps, size = [], [], [], []
    for n in (ho, wo):
        k = draw(st.integers(1, 3))
        s = draw(st.integers(k, k + 1))
        p = draw(st.integers(0, k // 2))
        # the pooled input side h must give n windows: floor((h + 2p - k) / s) + 1 == n
        base = (n - 1) * s + k - 2 * p
        extra = draw(st.integers(0, s - 1))
        h = base + extra
        if h < 1 or h + 2 * p < k or n == 0:
            k, s, p, h = 1, 1, 0, max(n, 1)
        ks.append(k), ss.append(s), ps.append(p), size.append(h)
    out = {"kernel_size": tuple(ks), "stride": tuple(ss), "padding": tuple(ps), "output_size": tuple(size)}
    return _left_at_default(draw, out, padding=0)


def _tie_free_key(shape, device) -> torch.Tensor:
    """Distinct values (as float32, exactly) in a scrambled order, one plane per (n, c)."""
    plane = prod(shape[-2:])
    pos = torch.arange(plane, dtype=torch.int64, device=device)
    key = (pos * 7919) % 1_000_003   # a bijection on [0, 1000003), and 1000003 > plane
    return key.to(torch.float32).reshape(shape[-2:]).expand(*shape)


def _max_unpool2d(x, *, kernel_size, stride, output_size, padding=0):
    key_shape = tuple(x.shape[:-2]) + tuple(output_size)
    key = _tie_free_key(key_shape, x.device)
    _, idx = F.max_pool2d(key, kernel_size, stride, padding, return_indices=True)
    if tuple(idx.shape) != tuple(x.shape):
        raise ValueError(f"max_unpool2d: pooled shape {tuple(idx.shape)} != input {tuple(x.shape)}")
    return F.max_unpool2d(x, idx, kernel_size, stride, padding, output_size=output_size)


register(
    nn("max_unpool2d", _max_unpool2d, _unpool_shapes, FLOAT,
       "inverse of 2-D max pooling (indices from a tie-free max_pool2d on the same device)",
       args=_unpool_args, grad=True),
)


# ==========================================================================================
# Normalisation
# ==========================================================================================

def _norm_shapes(*, min_rank: int = 2, max_rank: int = 5, min_spatial: int = 0,
                 n_stats: int = 4):
    """(x, running_mean, running_var, weight, bias) with x (N, C, *spatial)."""
    def build(draw, budget: ShapeBudget):
        rank = draw(st.integers(min_rank, max_rank))
        c = draw(st.integers(1, 6))
        spatial = _spatial(draw, budget, rank - 2, low=max(1, min_spatial))
        shape = [_batch(draw, budget, 4), c] + spatial
        shape = _shrink(shape, list(range(2, rank)), budget.max_numel, {i: max(1, min_spatial) for i in range(2, rank)})
        return (tuple(shape),) + ((c,),) * n_stats
    return build


@preparation
def _writable(t):
    """Running stats are updated in place: a stride-0 (expanded) view cannot be written,
    so such a view is made dense; other layouts are kept."""
    if any(st_ == 0 and n > 1 for st_, n in zip(t.stride(), t.shape)):
        return t.clone(memory_format=torch.contiguous_format)
    return t


def _batch_norm(x, rm, rv, w, b, *, training, track=True, affine=True, momentum=0.1, eps=1e-5):
    rm, rv = (_writable(rm), _writable(rv)) if track else (None, None)
    out = F.batch_norm(x, rm, rv, w if affine else None, b if affine else None,
                       training=training, momentum=momentum, eps=eps)
    return (out, rm, rv) if track else out


def _bn_args(draw, shapes, dtypes):
    x = shapes[0]
    per_channel = x[0] * prod(x[2:])
    training = per_channel > 1 and draw(st.booleans())
    track = not training or draw(st.integers(0, 3)) > 0
    return {"training": training, "track": track, "affine": draw(st.booleans()),
            "momentum": draw(st.sampled_from((0.1, 0.0, 1.0, 0.5))),
            "eps": draw(st.sampled_from((1e-5, 1e-3, 0.1)))}


def _instance_norm(x, rm, rv, w, b, *, use_input_stats, track=False, affine=True,
                   momentum=0.1, eps=1e-5):
    rm, rv = (_writable(rm), _writable(rv)) if track else (None, None)
    out = F.instance_norm(x, rm, rv, w if affine else None, b if affine else None,
                          use_input_stats=use_input_stats, momentum=momentum, eps=eps)
    return (out, rm, rv) if track else out


def _in_args(draw, shapes, dtypes):
    x = shapes[0]
    use = prod(x[2:]) > 1 and draw(st.integers(0, 3)) > 0
    track = not use or draw(st.booleans())
    # (with an empty batch CPU refuses weight and bias: it indexes the first sample)
    return {"use_input_stats": use, "track": track, "affine": x[0] > 0 and draw(st.booleans()),
            "momentum": draw(st.sampled_from((0.1, 0.0, 1.0))),
            "eps": draw(st.sampled_from((1e-5, 1e-3, 0.1)))}


def _group_norm(x, w, b, *, num_groups, affine=True, eps=1e-5):
    return F.group_norm(x, num_groups, w if affine else None, b if affine else None, eps)


def _gn_shapes(draw, budget: ShapeBudget):
    x, _, _ = _norm_shapes(min_rank=2, n_stats=2)(draw, budget)
    if x[1] * prod(x[2:]) < 2:  # a group needs more than one value
        x = (x[0], 2) + tuple(x[2:])
    return (x, (x[1],), (x[1],))


def _gn_args(draw, shapes, dtypes):
    c, per_channel = shapes[0][1], prod(shapes[0][2:])
    groups = [g for g in _divisors(c) if (c // g) * per_channel > 1]
    return {"num_groups": draw(st.sampled_from(groups)), "affine": draw(st.booleans()),
            "eps": draw(st.sampled_from((1e-5, 1e-3, 0.1)))}


def _suffix_shapes(draw, budget: ShapeBudget):
    """(x, weight, bias) for layer_norm/rms_norm: the weight's shape is a suffix of x's
    (the normalized_shape, read back by the argument builder)."""
    rank = draw(st.integers(1, max(1, min(5, budget.max_rank))))
    shape = [draw(st.integers(1, max(1, min(8, budget.max_side)))) for _ in range(rank)]
    if budget.allow_empty and rank > 1 and draw(st.integers(0, 19)) == 0:
        shape[0] = 0
    shape = _shrink(shape, list(range(rank)), budget.max_numel)
    k = draw(st.integers(1, min(3, rank)))
    suffix = tuple(shape[rank - k:])
    return (tuple(shape), suffix, suffix)


def _layer_norm(x, w, b, *, normalized_shape, affine="both", eps=1e-5):
    return F.layer_norm(x, normalized_shape, w if affine != "none" else None,
                        b if affine == "both" else None, eps)


def _ln_args(draw, shapes, dtypes):
    return {"normalized_shape": tuple(shapes[1]),
            "affine": draw(st.sampled_from(("both", "weight", "none"))),
            "eps": draw(st.sampled_from((1e-5, 1e-3, 0.1)))}


def _rms_shapes(draw, budget: ShapeBudget):
    return _suffix_shapes(draw, budget)[:2]


def _rms_norm(x, w, *, normalized_shape, affine=True, eps=None):
    return F.rms_norm(x, normalized_shape, w if affine else None, eps)


def _rms_args(draw, shapes, dtypes):
    return {"normalized_shape": tuple(shapes[1]), "affine": draw(st.booleans()),
            "eps": draw(st.sampled_from((None, 1e-6, 1e-2)))}


# Normalized sizes around threadgroup and reduction-tile boundaries (a SIMD group of 32,
# threadgroups of 256 to 1,024 threads, multistage reductions past them), past the side
# budget on purpose: budgeted shapes normalize at most ~210 elements and the @large
# class starts at 65,535, while Inductor's layer_norm went wrong for a normalized dim of
# 512 (pytorch/pytorch#191976) and its compiled rms_norm for a reduction of 2,048
# (pytorch/pytorch#150454).
MEDIUM_NORMALIZED = (256, 511, 512, 513, 1000, 1024, 1025, 2047, 2048, 2049, 4096)
MEDIUM_MAX_ROWS = 8


def _medium_suffix_shapes(draw, budget: ShapeBudget):
    """(x, weight, bias) for the medium class of layer_norm/rms_norm: 0-2 leading dims
    of 1-8 rows in all, normalized over the last dim, of a MEDIUM_NORMALIZED size (at
    most 8 x 4,096 elements per input)."""
    n = draw(sampled_once(MEDIUM_NORMALIZED))
    ranks = draw(integers_once(0, max(0, min(2, budget.max_rank - 1))))
    lead = _shrink([draw(integers_once(1, MEDIUM_MAX_ROWS)) for _ in range(ranks)], list(range(ranks)),
                   MEDIUM_MAX_ROWS)
    return (tuple(lead) + (n,), (n,), (n,))


def _medium_rms_shapes(draw, budget: ShapeBudget):
    return _medium_suffix_shapes(draw, budget)[:2]


def _lrn_args(draw, shapes, dtypes):
    c = shapes[0][1]
    return {"size": draw(st.integers(1, c + 2)), "alpha": draw(st.sampled_from((1e-4, 0.1, 1.0))),
            "beta": draw(st.sampled_from((0.75, 0.5, 1.0))), "k": draw(st.sampled_from((1.0, 2.0, 0.5)))}


def _normalize_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    dim = draw(st.integers(-rank, rank - 1))
    # The inf-norm is a max: CPU refuses it over an empty dim (nothing to take the max of).
    ps = (2.0, 1.0, 3.0) if shapes[0][dim] == 0 else (2.0, 1.0, 3.0, math.inf)
    return {"p": draw(st.sampled_from(ps)), "dim": dim,
            "eps": draw(st.sampled_from((1e-12, 1e-3)))}


def _normalize_undefined(inputs, kwargs, rtol=1e-5):
    """normalize divides by max(|x|_p, eps) along dim: a norm at eps (where the clamp
    lets go), or a kink of a norm that is used (above eps)."""
    x = inputs[0]
    if x.numel() == 0:
        return None
    rel, tiny = slack(x)
    p, eps = kwargs.get("p", 2.0), kwargs.get("eps", 1e-12)
    r = rows(wide(x), dims_of(kwargs.get("dim", 1), x.dim()))
    norms = torch.linalg.vector_norm(r, p, dim=-1)
    if bool(near(norms, eps, rel, tiny).any()):
        return "a slice's norm equals eps (where normalize's clamp lets go)"
    why = vector_norm_reason(r[norms > eps], p, rel, tiny)
    return f"input 0: {why}" if why else None


# cosine_similarity (issue 38, pytorch#153209: a float64 0-d operand beside float16 ones
# holding NaNs, eps=-9.7e23): operands that broadcast (either may be 0-d), of two dtypes
# sometimes (mixed_dtypes_sometimes), and an eps the argument-extremes class moves to the
# ends of its range (subnormals, float32's largest, 1e300 and their negatives). Eager CPU
# refuses a negative eps ("eps must be non-negative", pytorch#169047; torch 2.13 here): a
# target that computes with one is a capability note (oracles/errors.py), not a bug.
_COSINE_EPS = (1e-8, 0.0, 1e-6, 1e-3, 0.5)


def _cosine_shapes(draw, budget: ShapeBudget):
    """Two shapes that broadcast (each a suffix of a common shape of rank 0-5 with some
    sides 1, or 0-d), as broadcast_shapes draws them."""
    return broadcast_shapes(2, max_rank=5)(draw, budget)


def _cosine_args(draw, shapes, dtypes):
    """``dim``, any dim of the broadcast shape (0 or -1 when both are 0-d: torch takes a
    0-d pair as vectors of one element), and ``eps``."""
    rank = max(len(s) for s in shapes)
    dim = draw(st.integers(-max(rank, 1), max(rank, 1) - 1))
    return {"dim": dim, "eps": draw(st.sampled_from(_COSINE_EPS))}


def _cosine_undefined(inputs, kwargs, rtol=1e-5):
    """cosine_similarity divides each operand by max(||x||, eps) along dim: no gradient
    where a norm equals eps (the clamp lets go) or at a norm's own kink (a zero row above
    eps: only where eps is 0)."""
    x1, x2 = torch.broadcast_tensors(wide(inputs[0]), wide(inputs[1]))
    if x1.numel() == 0:
        return None
    eps = float(kwargs.get("eps", 1e-8))
    dims = dims_of(kwargs.get("dim", 1), x1.dim())
    for i, (x, drawn) in enumerate(((x1, inputs[0]), (x2, inputs[1]))):
        rel, tiny = slack(drawn)
        r = rows(x, dims)
        norms = torch.linalg.vector_norm(r, 2, dim=-1)
        if bool(near(norms, eps, rel, tiny).any()):
            return f"input {i}: a slice's norm equals eps (where cosine_similarity's clamp lets go)"
        why = vector_norm_reason(r[norms > eps], 2, rel, tiny)
        if why:
            return f"input {i}: {why}"
    return None


def _positive(shapes, kwargs):
    return {"distribution": "positive"}


@preparation
def _dense_from_4d(x):
    """The CPU composite of local_response_norm views an intermediate of x's layout as
    5-D, which a channels_last or gapped 4-D/5-D input refuses: such inputs are made
    dense (the ops it decomposes into see the layouts elsewhere)."""
    return x.contiguous() if x.dim() >= 4 else x


def _local_response_norm(x, **kw):
    return F.local_response_norm(_dense_from_4d(x), **kw)


register(
    nn("batch_norm", _batch_norm, _norm_shapes(), FLOAT,
       "batch norm, training or eval; updated running stats are outputs too",
       args=_bn_args, input_dtypes=(None,) * 5, input_values=(None, None, "positive", None, None),
       grad=True, grad_inputs=(0, 3, 4), mutates=(1, 2), **ACCUMULATES),
    nn("instance_norm", _instance_norm, _norm_shapes(min_rank=3), FLOAT,
       "instance norm with input or running stats; updated running stats are outputs too",
       args=_in_args, input_dtypes=(None,) * 5, input_values=(None, None, "positive", None, None),
       grad=True, grad_inputs=(0, 3, 4), mutates=(1, 2), **ACCUMULATES),
    nn("group_norm", _group_norm, _gn_shapes, FLOAT, "group norm (groups dividing C), optional affine",
       args=_gn_args, input_dtypes=(None,) * 3, grad=True, **ACCUMULATES),
    nn("layer_norm", _layer_norm, _suffix_shapes, FLOAT,
       "layer norm over a 1-3 dim suffix, with weight and bias, weight only, or neither",
       args=_ln_args, input_dtypes=(None,) * 3, grad=True, **ACCUMULATES),
    nn("layer_norm_medium", _layer_norm, _medium_suffix_shapes, FLOAT,
       "layer norm of 1-8 rows over a last dim of 256-4,096 (tile boundaries: pytorch/pytorch#191976), "
       "with weight and bias, weight only, or neither",
       args=_ln_args, input_dtypes=(None,) * 3, grad=True, **ACCUMULATES),
    nn("local_response_norm", _local_response_norm,
       lambda draw, budget: _norm_shapes(min_rank=3, n_stats=0)(draw, budget), FLOAT,
       "local response normalisation across channels (3-D to 5-D; 4-D/5-D made dense)", args=_lrn_args,
       grad=True, **ACCUMULATES),
    nn("normalize", lambda x, **kw: F.normalize(x, **kw), any_shape(1, min_rank=1, max_rank=6), FLOAT,
       "Lp-normalisation along a dim (p = 1, 2, 3, inf)", args=_normalize_args, grad=True, out=True,
       grad_undefined=_normalize_undefined, **ACCUMULATES),
    nn("cosine_similarity", lambda x1, x2, **kw: F.cosine_similarity(x1, x2, **kw), _cosine_shapes, FLOAT,
       "cosine similarity along a dim of two broadcast operands (0-d ones, two dtypes, eps at its extremes: "
       "pytorch#153209)", args=_cosine_args, input_dtypes=(None, None), grad=True,
       grad_undefined=_cosine_undefined,
       **dict(ACCUMULATES, semantics=frozenset({"accumulates", "mixed_dtypes_sometimes"}))),
)
if hasattr(F, "rms_norm"):
    register(
        nn("rms_norm", _rms_norm, _rms_shapes, FLOAT, "RMS norm over a 1-3 dim suffix, optional weight",
           args=_rms_args, input_dtypes=(None, None), grad=True, **ACCUMULATES),
        nn("rms_norm_medium", _rms_norm, _medium_rms_shapes, FLOAT,
           "RMS norm of 1-8 rows over a last dim of 256-4,096 (tile boundaries: pytorch/pytorch#150454), "
           "optional weight", args=_rms_args, input_dtypes=(None, None), grad=True, **ACCUMULATES),
    )


# ==========================================================================================
# Linear layers and embeddings
# ==========================================================================================

def _linear_shapes(draw, budget: ShapeBudget):
    rank = draw(st.integers(1, 4))
    batch = [_batch(draw, budget, 4) if i == 0 else draw(st.integers(1, 4)) for i in range(rank - 1)]
    fan_in = draw(st.integers(0, 12)) if budget.allow_empty else draw(st.integers(1, 12))
    fan_out = draw(st.integers(1, 10))
    x = _shrink(batch + [fan_in], list(range(rank)), budget.max_numel)
    return (tuple(x), (fan_out, x[-1]), (fan_out,))


def _linear(x, w, b, *, bias=True):
    return F.linear(x, w, b if bias else None)


def _bilinear_shapes(draw, budget: ShapeBudget):
    rank = draw(st.integers(1, 3))
    batch = [_batch(draw, budget, 4) if i == 0 else draw(st.integers(1, 3)) for i in range(rank - 1)]
    in1, in2, out = (draw(st.integers(1, 6)) for _ in range(3))
    return (tuple(batch + [in1]), tuple(batch + [in2]), (out, in1, in2), (out,))


def _bilinear(x1, x2, w, b, *, bias=True):
    return F.bilinear(x1, x2, w, b if bias else None)


def _bias_arg(draw, shapes, dtypes):
    return {"bias": draw(st.booleans())}


def _embedding_shapes(draw, budget: ShapeBudget):
    rank = draw(st.integers(0, 3))
    idx = [draw(st.integers(0 if budget.allow_empty and draw(st.integers(0, 19)) == 0 else 1, 5))
           for _ in range(rank)]
    num, dim = draw(st.integers(1, 10)), draw(st.integers(1, 8))
    return (tuple(idx), (num, dim))


def _index_into(weight_input: int):
    def values(shapes, kwargs):
        return {"distribution": "int_range", "low": 0, "high": max(0, shapes[weight_input][0] - 1),
                "allow_specials": False}
    return values


def _padding_idx(draw, num: int) -> int:
    """A row index, written negatively half the time."""
    i = draw(st.integers(0, num - 1))
    return i - num if draw(st.booleans()) else i


def _max_norm(draw) -> dict:
    """max_norm (rows looked up are renormalised to it, in place) in a quarter of the
    cases, with its norm_type now and then."""
    if draw(st.integers(0, 3)) < 3:
        return {}
    out = {"max_norm": draw(st.sampled_from((1.0, 0.5, 2.0)))}
    if draw(st.booleans()):
        out["norm_type"] = draw(st.sampled_from((1.0, 3.0, 2.0)))
    return out


def _embedding_args(draw, shapes, dtypes):
    num = shapes[1][0]
    out = {}
    if draw(st.booleans()):
        out["padding_idx"] = _padding_idx(draw, num)
    if draw(st.integers(0, 3)) == 0:
        out["scale_grad_by_freq"] = True
    out.update(_max_norm(draw))
    return out


def _renormable(w, kw):
    """With max_norm the lookup renormalises rows of the weight in place: it gets a copy
    in the drawn layout, the case's weight stays as it was."""
    return writable_copy(w) if kw.get("max_norm") is not None else w


def _renorm_steps(inputs, kw):
    """The renorm's intermediate (max_norm): each looked-up row's sum of |x|^p, which a
    backend may accumulate in float32 before the p-th root (CUDA's renorm kernel), past
    float32's range for a row at the dtype's max while the renormed row is finite (issue 37,
    CUDA on an H200: 0 where 1 is right)."""
    if kw.get("max_norm") is None or not inputs[0].numel():
        return ()
    rows = inputs[1][torch.unique(inputs[0].reshape(-1).long())]
    return ((rows.abs() ** float(kw.get("norm_type", 2.0))).sum(-1),)


def _embedding(idx, w, **kw):
    return F.embedding(idx, _renormable(w, kw), **kw)


def _lookup(idx, w):
    """embedding of ``idx`` taken modulo ``w``'s rows (a no-op as drawn: the indices are in
    range), so that an index stays in range where triage shrinks or caps the weight's rows
    (the @huge class: the size probe then says whether the long dim is needed)."""
    return F.embedding(idx.remainder(w.shape[0]) if w.shape[0] else idx, w)


def _bag_shapes(draw, budget: ShapeBudget):
    two_d = draw(st.booleans())
    if two_d:
        # (B, L) bags of equal length; L == 0 is refused by CPU (an arange with step 0)
        idx = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    else:
        idx = (draw(st.integers(0 if budget.allow_empty else 1, 10)),)
    num, dim = draw(st.integers(1, 10)), draw(st.integers(1, 6))
    return (idx, (num, dim), idx)


def _bag_args(modes):
    def build(draw, shapes, dtypes):
        idx, (num, _), _ = shapes
        mode = draw(st.sampled_from(modes))
        out = {"mode": mode}
        if len(idx) == 1:
            n = idx[0]
            bags = draw(st.integers(1, 4))
            cuts = sorted(draw(st.integers(0, n)) for _ in range(bags - 1))
            last = draw(st.booleans())
            out["offsets"] = tuple([0] + cuts + ([n] if last else []))
            out["include_last_offset"] = last
        if mode == "sum" and draw(st.booleans()):
            out["per_sample_weights"] = True
        if draw(st.integers(0, 3)) == 0:
            out["padding_idx"] = _padding_idx(draw, num)
        if mode != "max" and draw(st.integers(0, 3)) == 0:   # (not supported with max)
            out["scale_grad_by_freq"] = True
        out.update(_max_norm(draw))
        return out
    return build


def _embedding_bag(idx, w, psw, *, offsets=None, per_sample_weights=False, **kw):
    if offsets is not None:
        offsets = torch.tensor(offsets, dtype=idx.dtype, device=idx.device)
    return F.embedding_bag(idx, _renormable(w, kw), offsets, per_sample_weights=psw if per_sample_weights else None,
                           **kw)


def _bag_lookup(idx, w, psw, **kw):
    """embedding_bag of ``idx`` taken modulo ``w``'s rows (a no-op as drawn), so that an
    index stays in range where triage shrinks the weight's rows (as ``_lookup``)."""
    return _embedding_bag(idx.remainder(w.shape[0]) if w.shape[0] else idx, w, psw, **kw)


def _bags(idx: torch.Tensor, kw) -> list[torch.Tensor]:
    """The indices of each bag: the rows of a 2-D ``idx``, else the runs ``offsets`` cut
    (its last entry the end with include_last_offset)."""
    if idx.dim() == 2:
        return list(idx)
    cuts = list(kw.get("offsets") or (0,))
    ends = cuts[1:] if kw.get("include_last_offset") else cuts[1:] + [idx.numel()]
    return [idx[start:end] for start, end in zip(cuts, ends)]


def _bag_max_ties(inputs, kwargs, rtol=1e-5):
    """embedding_bag(mode="max"): a bag's max in some column held by two or more distinct
    rows of the weight. The gradient goes to one of them and which one is unspecified (CPU
    keeps the first, a parallel kernel any: issue 38, pytorch#188467's op). The same row
    twice is no tie (its gradient lands on that row either way), padding_idx is no member
    of its bag, and with max_norm the rows compared are the renormed ones (float64 here)."""
    idx, w = inputs[0], inputs[1]
    if idx.numel() == 0 or w.numel() == 0:
        return None
    rel, tiny = slack(w)
    weight = wide(w)
    if kwargs.get("max_norm") is not None:
        weight = torch.embedding_renorm_(weight.clone(), idx.reshape(-1).long(), kwargs["max_norm"],
                                         kwargs.get("norm_type", 2.0))
    padding = kwargs.get("padding_idx")
    padding = None if padding is None else padding % w.shape[0]
    for bag in _bags(idx.long(), kwargs):
        members = torch.unique(bag[bag != padding] if padding is not None else bag)
        if members.numel() >= 2 and has_tie(weight[members].T, "max", rel, tiny):
            return "a bag's max is held by two or more of its rows in some column (the gradient picks one of them)"
    return None


register(
    nn("linear", _linear, _linear_shapes, FLOAT, "x @ W^T + b, 1-D to 4-D inputs, fan-in 0 included",
       args=_bias_arg, input_dtypes=(None, None, None), grad=True, autocast=True, **ACCUMULATES),
    nn("bilinear", _bilinear, _bilinear_shapes, FLOAT, "x1^T A x2 + b over matching batch dims",
       args=_bias_arg, input_dtypes=(None,) * 4, grad=True, **ACCUMULATES),
    nn("embedding", _embedding, _embedding_shapes, FLOAT,
       "row lookup (int64/int32 indices in range, padding_idx, scale_grad_by_freq)",
       args=_embedding_args, input_dtypes=(INDEX, None), input_values=(_index_into(1), None),
       grad=True, grad_inputs=(1,), rtol_scale=4, atol_scale=4, evaluation_steps=_renorm_steps),
    # A weight past 2^31 and 2^32 elements, indices past row 2^31 / dim (pytorch#188756: MPS
    # embedding's row offset held in 32 bits); compared whole (a row per index) with the
    # rows looked up alone (generation/huge_samples.py). No grad variant: the weight's
    # gradient is a scatter over all its rows.
    nn("embedding" + HUGE_SUFFIX, _lookup, lookup_shapes, LOOKUP_DTYPES,
       "row lookup in a weight past 2^31 and 2^32 elements, indices from the hash over all its rows (past "
       "row 2^31 / dim), compared with the rows looked up alone", input_dtypes=(INDEX, None),
       input_values=(lookup_index_values, "index_hash"), allow_specials=False, allow_nonfinite=False,
       semantics=frozenset({"large"}), reference_fn=_lookup, reference_inputs=lookup_reference_inputs,
       size_class=SIZE_CLASS, base="embedding"),
    nn("embedding_bag", _embedding_bag, _bag_shapes, FLOAT,
       "bags of rows summed or averaged (offsets, include_last_offset, per-sample weights, padding_idx)",
       args=_bag_args(("sum", "mean")), input_dtypes=(INDEX, None, None),
       input_values=(_index_into(1), None, None), grad=True, grad_inputs=(1, 2), evaluation_steps=_renorm_steps,
       **ACCUMULATES),
    nn("embedding_bag_max", _embedding_bag, _bag_shapes, FLOAT,
       "bags of rows reduced by max (empty bags give zeros)",
       args=_bag_args(("max",)), input_dtypes=(INDEX, None, None),
       input_values=(_index_into(1), None, None), evaluation_steps=_renorm_steps,
       # the weight's gradient only: per-sample weights are for mode="sum" alone (issue 38,
       # pytorch#188467: max's backward routes each bag's gradient to the row its max came from)
       grad=True, grad_inputs=(1,), grad_undefined=_bag_max_ties),
    # A weight past 2^31 and 2^32 elements, bags whose max lands past row 2^31 / dim, int32
    # and int64 indices (pytorch#188467: CUDA max's backward with int32 indices computes the
    # row's offset in 32 bits); the result compared whole, the weight's gradient on sampled
    # rows, against max's definition in float64 on those rows alone (generation/huge_samples.py).
    nn("embedding_bag_max" + HUGE_SUFFIX, _bag_lookup, bag_shapes, LOOKUP_DTYPES,
       "bags reduced by max over a weight past 2^31 and 2^32 elements, indices from the hash past row "
       "2^31 / dim; its weight's gradient judged on the rows looked up and the boundary rows",
       args=bag_args, input_dtypes=(INDEX, None, None), input_values=(bag_index_values, "index_hash", "index_hash"),
       allow_specials=False, allow_nonfinite=False,
       # (the backward adds up to 16 bags' upstream gradients on a row, in the dtype on a
       # device: CUDA's atomics in float16; a row's offset that wraps moves whole gradients)
       rtol_scale=ACCUMULATES["rtol_scale"], atol_scale=ACCUMULATES["atol_scale"],
       semantics=frozenset({"large", "accumulates"}),
       reference_fn=bag_max_formula, reference_inputs=bag_reference_inputs, size_class=SIZE_CLASS,
       base="embedding_bag_max", grad=True, grad_inputs=(1,), grad_undefined=_bag_max_ties,
       judged_grads=bag_judged_grads),
)


# ==========================================================================================
# Activations
# ==========================================================================================

def _choice(**options):
    """An argument builder drawing each keyword from its tuple of choices (the first is
    the default-ish value shrinking goes to); a key may be left out sometimes."""
    def build(draw, shapes, dtypes):
        return {k: draw(st.sampled_from(v)) for k, v in options.items()}
    return build


def _hardtanh_args(draw, shapes, dtypes):
    lo, hi = draw(st.sampled_from(((-1.0, 1.0), (-2.0, 0.5), (0.0, 6.0), (-0.5, -0.25))))
    return {"min_val": lo, "max_val": hi}


def _threshold_args(draw, shapes, dtypes):
    if _float_dtype(dtypes) in dt.FLOAT:
        return {"threshold": draw(st.sampled_from((0.0, 0.5, -1.0))),
                "value": draw(st.sampled_from((0.0, 20.0, -3.5)))}
    return {"threshold": draw(st.sampled_from((0, 1, -2))), "value": draw(st.sampled_from((0, 20, -3)))}


def _rrelu_args(draw, shapes, dtypes):
    lo, hi = draw(st.sampled_from(((1 / 8, 1 / 3), (0.0, 0.5), (0.25, 0.25))))
    return {"lower": lo, "upper": hi, "training": False}


def _glu_shapes(draw, budget: ShapeBudget):
    (shape,) = any_shape(1, min_rank=1, max_rank=6)(draw, budget)
    shape = list(shape)
    if not any(n % 2 == 0 for n in shape):
        i = draw(st.integers(0, len(shape) - 1))
        shape[i] = 2 * max(1, shape[i] // 2)
    return (tuple(shape),)


def _glu_args(draw, shapes, dtypes):
    even = [d for d, n in enumerate(shapes[0]) if n % 2 == 0]
    d = draw(st.sampled_from(even))
    return {"dim": d - len(shapes[0]) if draw(st.booleans()) else d}


def _prelu_shapes(draw, budget: ShapeBudget):
    (shape,) = any_shape(1, max_rank=5)(draw, budget)
    channels = shape[1] if len(shape) >= 2 else 1
    if channels > 0 and draw(st.booleans()):
        return (shape, (channels,))
    return (shape, (1,))


def _softmax_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    out = {"dim": draw(st.integers(-rank, rank - 1)) if rank else draw(st.sampled_from((0, -1)))}
    if draw(st.integers(0, 3)) == 0:
        out["dtype"] = DtypeArg(draw(st.sampled_from(("float32", "float64"))))
    return out


AT_ZERO = kinks((0.0,))
AT_LAMBD = kinks(lambda kw: (-kw.get("lambd", 0.5), kw.get("lambd", 0.5)))


def _activation(name, fn, doc, dtypes=FLOAT, args=None, **kw):
    kw.setdefault("grad", True)
    return nn(name, fn, any_shape(1), dtypes, doc, args=args, **kw)


def in_place_option(fn):
    """``fn`` (an F function taking ``inplace``) whose in-place calls write a copy of the
    input in its layout (``writable_copy``): the in-place kernel sees the drawn strides,
    the case's input stays as it was (the random judges read it), and under grad the
    write goes to a non-leaf, as a model's in-place activation does."""
    def call(x, *, inplace=False, **kw):
        return fn(writable_copy(x) if inplace else x, inplace=inplace, **kw)
    call.__name__ = getattr(fn, "__name__", "call")
    return call


def _in_place_activation(name, fn, doc, args=None, **kw):
    """An activation whose ``inplace`` flag is drawn too (see in_place_option)."""
    return _activation(name, in_place_option(fn), doc, args=with_inplace(args), **kw)


def with_inplace(build=None):
    """``build``'s arguments plus ``inplace=True`` in a quarter of the cases (left out
    first: shrinking goes to the out-of-place call)."""
    def wrapped(draw, shapes, dtypes):
        out = build(draw, shapes, dtypes) if build is not None else {}
        if draw(st.integers(0, 3)) == 3:
            out["inplace"] = True
        return out
    return wrapped


register(
    _activation("relu", lambda x: F.relu(x), "max(x, 0)", dtypes=FLOAT + SIGNED_AND_BYTE,
                method="relu", inplace="relu_", grad_undefined=AT_ZERO),
    _in_place_activation("relu6", F.relu6, "min(max(x, 0), 6)", dtypes=FLOAT + SIGNED_AND_BYTE,
                grad_undefined=kinks((0.0, 6.0))),
    _in_place_activation("leaky_relu", F.leaky_relu, "leaky ReLU (slopes incl. 0, > 1, < 0)",
                args=_choice(negative_slope=(0.01, 0.2, 0.0, -0.5, 1.5)),
                grad_undefined=when(lambda kw: kw.get("negative_slope", 0.01) != 1, AT_ZERO)),
    # (ELU's slopes at 0 are alpha and 1; CELU's are both 1: no kink)
    _in_place_activation("elu", F.elu, "ELU", args=_choice(alpha=(1.0, 0.5, 2.0)),
                grad_undefined=when(lambda kw: kw.get("alpha", 1.0) != 1, AT_ZERO)),
    _in_place_activation("selu", F.selu, "SELU", grad_undefined=AT_ZERO),
    _in_place_activation("celu", F.celu, "CELU", args=_choice(alpha=(1.0, 0.5, 2.0))),
    _activation("gelu", lambda x, **kw: F.gelu(x, **kw), "GELU, exact or tanh approximation",
                args=_choice(approximate=("none", "tanh"))),
    _in_place_activation("silu", F.silu, "x * sigmoid(x)"),
    _in_place_activation("mish", F.mish, "x * tanh(softplus(x))"),
    _activation("softplus", lambda x, **kw: F.softplus(x, **kw), "softplus with beta and threshold",
                args=_choice(beta=(1.0, 0.5, 2.0), threshold=(20.0, 1.0, 5.0)),
                # (above beta*x = threshold it is x: the derivative jumps from sigmoid(threshold) to 1)
                grad_undefined=kinks(lambda kw: (kw.get("threshold", 20.0) / kw.get("beta", 1.0),))),
    _activation("softsign", lambda x: F.softsign(x), "x / (1 + |x|)"),
    _in_place_activation("hardtanh", F.hardtanh, "clamp to [min_val, max_val]",
                args=_hardtanh_args,
                grad_undefined=kinks(lambda kw: (kw.get("min_val", -1.0), kw.get("max_val", 1.0)))),
    _in_place_activation("hardsigmoid", F.hardsigmoid, "piecewise-linear sigmoid",
                grad_undefined=kinks((-3.0, 3.0))),
    _in_place_activation("hardswish", F.hardswish, "x * hardsigmoid(x)", grad_undefined=kinks((-3.0, 3.0))),
    _activation("hardshrink", lambda x, **kw: F.hardshrink(x, **kw), "zero inside [-lambd, lambd]",
                args=_choice(lambd=(0.5, 0.0, 1.5)), grad_undefined=AT_LAMBD),
    _activation("softshrink", lambda x, **kw: F.softshrink(x, **kw), "shrink towards zero by lambd",
                args=_choice(lambd=(0.5, 0.0, 1.5)), grad_undefined=AT_LAMBD),
    _activation("tanhshrink", lambda x: F.tanhshrink(x), "x - tanh(x)"),
    _activation("logsigmoid", lambda x: F.logsigmoid(x), "log(sigmoid(x))"),
    _in_place_activation("rrelu_eval", F.rrelu,
                "randomized leaky ReLU in eval mode (fixed slope (lower + upper) / 2)", args=_rrelu_args,
                grad_undefined=AT_ZERO),
    _in_place_activation("threshold", F.threshold, "x if x > threshold else value",
                dtypes=FLOAT + SIGNED_AND_BYTE, args=_threshold_args,
                grad_undefined=kinks(lambda kw: (kw.get("threshold"),))),
    nn("glu", lambda x, **kw: F.glu(x, **kw), _glu_shapes, FLOAT, "gated linear unit along an even dim",
       args=_glu_args, grad=True),
    nn("prelu", lambda x, w: F.prelu(x, w), _prelu_shapes, FLOAT,
       "parametric ReLU with one weight or one per channel (dim 1)", input_dtypes=(None, None),
       method="prelu", grad=True, grad_undefined=AT_ZERO),
    _activation("softmax", lambda x, **kw: F.softmax(x, **kw), "softmax along a dim (optional dtype)",
                args=_softmax_args, method="softmax", rtol_scale=4, atol_scale=4),
    _activation("log_softmax", lambda x, **kw: F.log_softmax(x, **kw), "log-softmax along a dim (optional dtype)",
                args=_softmax_args, method="log_softmax", rtol_scale=4, atol_scale=4),
    _activation("softmin", lambda x, **kw: F.softmin(x, **kw), "softmin along a dim (optional dtype)",
                args=_softmax_args, rtol_scale=4, atol_scale=4),
)


# ==========================================================================================
# Dropout (random: judged statistically)
# ==========================================================================================

SELU_ALPHA = 1.7580993408473766   # -SELU's negative saturation value / scale
_JUDGE_TOL = {"float16": (1e-2, 1e-4), "bfloat16": (3e-2, 1e-3), "float32": (1e-5, 1e-7),
              "float64": (1e-10, 1e-12)}


def _alpha_constants(p: float) -> tuple[float, float, float]:
    """Alpha dropout: kept elements become a*x + b, dropped ones the constant c."""
    a = 1.0 / math.sqrt((SELU_ALPHA * SELU_ALPHA * p + 1) * (1 - p))
    return a, SELU_ALPHA * a * p, SELU_ALPHA * a * (p - 1)


def _same_nan_equal(a, b) -> bool:
    if a.shape != b.shape:
        return False
    same = torch.eq(a, b) | (torch.isnan(a) & torch.isnan(b))
    return bool(same.all())


def dropout_judge(kind: str):
    """A statistical judge for ``kind`` in ("plain", "feature", "alpha", "feature_alpha").

    Checks that the output has the input's shape and dtype; that with training=False or
    p == 0 it equals the input; otherwise that every element with a finite input is
    either kept (x / (1 - p), or a*x + b for alpha dropout) or dropped (0, or the alpha
    constant); for feature dropouts that each (n, c) channel is dropped or kept as a
    whole; and that the number of dropped units is within 6 standard deviations (+1) of
    its binomial mean (a false alarm about once in 10^8 calls)."""
    alpha = kind in ("alpha", "feature_alpha")
    feature = kind in ("feature", "feature_alpha")

    def judge(dut_outputs, inputs, kwargs) -> str | None:
        out = dut_outputs[0] if isinstance(dut_outputs, (tuple, list)) else dut_outputs
        x = inputs[0].detach().to("cpu")
        out = out.detach().to("cpu")
        if out.shape != x.shape:
            return f"output shape {tuple(out.shape)} != input shape {tuple(x.shape)}"
        if out.dtype != x.dtype:
            return f"output dtype {out.dtype} != input dtype {x.dtype}"
        p = float(kwargs.get("p", 0.5))
        if not kwargs.get("training", True) or p == 0.0:
            if not _same_nan_equal(out, x):
                return f"with training={kwargs.get('training', True)} and p={p} the output is not the input"
            return None
        if x.numel() == 0:
            return None
        rtol, atol = _JUDGE_TOL.get(dt.name_of(x.dtype), (1e-5, 1e-7))
        xd, od = x.to(torch.float64), out.to(torch.float64)
        if alpha:
            a, b, c = _alpha_constants(p)
        else:
            a, b, c = 1.0 / (1 - p), 0.0, 0.0
        keep = a * xd + b
        keep_narrow = (x * a + b).to(torch.float64)   # as computed in the input's dtype
        # a*x + b cancels for alpha dropout: the error scales with the terms, not the sum
        keep_tol = rtol * ((a * xd).abs() + abs(b)) + atol
        drop_tol = rtol * abs(c) + atol
        is_keep = ((od - keep).abs() <= keep_tol) | torch.isclose(od, keep_narrow, rtol=rtol, atol=atol,
                                                                   equal_nan=True)
        is_drop = (od - c).abs() <= drop_tol
        finite = torch.isfinite(xd)
        bad = finite & ~(is_keep | is_drop)
        if bool(bad.any()):
            i = int(torch.nonzero(bad.reshape(-1))[0])
            return (f"{int(bad.sum())} element(s) are neither kept nor dropped: e.g. input "
                    f"{x.reshape(-1)[i].item()!r} gave {out.reshape(-1)[i].item()!r} (p={p})")
        # Elements that tell kept from dropped (a finite input whose kept value differs)
        telling = finite & ((keep - c).abs() > 2 * (keep_tol + drop_tol))
        dropped = telling & is_drop
        if feature:
            units = prod(x.shape[:2]) if x.dim() >= 2 else 1
            telling_u = telling.reshape(units, -1)
            dropped_u = dropped.reshape(units, -1)
            n_tell = telling_u.sum(1)
            n_drop = dropped_u.sum(1)
            mixed = (n_drop > 0) & (n_drop < n_tell)
            if bool(mixed.any()):
                return (f"{int(mixed.sum())} channel(s) are partly dropped: feature dropout drops "
                        f"whole channels (p={p})")
            informative = n_tell > 0
            n, k = int(informative.sum()), int((informative & (n_drop == n_tell)).sum())
        else:
            n, k = int(telling.sum()), int(dropped.sum())
        if n == 0:
            return None
        mean, sd = n * p, math.sqrt(n * p * (1 - p))
        if abs(k - mean) > 6 * sd + 1:
            what = "channels" if feature else "elements"
            return f"{k} of {n} {what} dropped with p={p} (expected about {mean:.1f} +- {6 * sd + 1:.1f})"
        return None
    return judge


def _dropout_args(draw, shapes, dtypes):
    return {"p": draw(st.sampled_from((0.5, 0.0, 0.1, 0.3, 0.8))),
            "training": draw(st.integers(0, 4)) > 0}


def _dropout2d_shapes(draw, budget: ShapeBudget):
    shape = [_batch(draw, budget, 4), draw(st.integers(1, 8))] + _spatial(draw, budget, 2)
    return (tuple(_shrink(shape, [2, 3, 1], budget.max_numel)),)


def _feature_shapes(draw, budget: ShapeBudget):
    rank = draw(st.integers(3, 5))
    shape = [_batch(draw, budget, 4), draw(st.integers(1, 8))] + _spatial(draw, budget, rank - 2)
    return (tuple(_shrink(shape, list(range(2, rank)) + [1], budget.max_numel)),)


register(
    nn("dropout", in_place_option(F.dropout), any_shape(1), FLOAT,
       "zero elements with probability p, scale the rest by 1/(1-p) (judged statistically)",
       args=with_inplace(_dropout_args), semantics=RANDOM, statistical=dropout_judge("plain")),
    nn("dropout2d", in_place_option(F.dropout2d), _dropout2d_shapes, FLOAT,
       "zero whole (n, c) channels of a 4-D input with probability p (judged statistically)",
       args=with_inplace(_dropout_args), semantics=RANDOM, statistical=dropout_judge("feature")),
    nn("alpha_dropout", in_place_option(F.alpha_dropout), any_shape(1), FLOAT,
       "SELU-preserving dropout (judged statistically)",
       args=with_inplace(_dropout_args), semantics=RANDOM, statistical=dropout_judge("alpha")),
    nn("feature_alpha_dropout", in_place_option(F.feature_alpha_dropout), _feature_shapes, FLOAT,
       "alpha dropout of whole (n, c) channels (judged statistically)",
       args=with_inplace(_dropout_args), semantics=RANDOM, statistical=dropout_judge("feature_alpha")),
)


# ==========================================================================================
# Resampling: interpolate, grid_sample, affine_grid
# ==========================================================================================

_INTERP_RANKS = {"nearest": (3, 4, 5), "nearest-exact": (3, 4, 5), "linear": (3, 4, 5),
                 "bicubic": (4,), "area": (3, 4, 5)}
_LINEAR_BY_RANK = {3: "linear", 4: "bilinear", 5: "trilinear"}


def _interp_shapes(mode: str):
    def build(draw, budget: ShapeBudget):
        rank = draw(st.sampled_from(_INTERP_RANKS[mode]))
        spatial = [_interp_side(draw, budget, high=8 if rank < 5 else 5) for _ in range(rank - 2)]
        shape = [_batch(draw, budget), draw(st.integers(1, 3))] + spatial
        # outputs are up to twice as large per side: keep the input small
        limit = max(1, budget.max_numel // (2 ** (rank - 2)))
        return (tuple(_shrink(shape, list(range(2, rank)), limit)),)
    return build


# Scale factors: exact ones, and ones whose float is inexact (1.7, 1/3, 1/6), whose
# reciprocal a kernel rounds in float32 (and may fuse into an FMA) before it maps an output
# onto an input coordinate.
_INTERP_SCALES = (2.0, 0.5, 1.5, 0.75, 1.0, 1.7, 3.0, 1 / 3, 1 / 6)


# An input side whose even-divisor resizes put pixel centres on pixel boundaries at a
# scale that binary floating point cannot hold (6 to 1: centre 3.0, scale 1/6; 6 to 5).
# Drawn a quarter of the time: sides from 1 to 8 alone gave nearest-exact's backward a
# float32-broken tie in 1.2% of its gradient cases (7% now), and 420 s campaigns on an
# H200 met CUDA's real bug there only in their last minute (docs/real-findings.md).
_TIE_SIDE = 6


def _interp_side(draw, budget: ShapeBudget, *, high: int) -> int:
    if _TIE_SIDE <= budget.max_side and draw(st.integers(0, 3)) == 0:
        return _TIE_SIDE
    return _spatial(draw, budget, 1, high=high)[0]


def _resized_side(draw, n: int) -> int:
    """An output side for an input side ``n``: any up to 2n + 1, or one an integer ratio
    away (n / d for a divisor d, or n x 2). An even d puts pixel centres exactly on the
    boundaries between input pixels (6 to 1: the centre is 3.0), the ties where a forward
    and a backward kernel that round a float32 scale apart disagree on which input an
    output reads; half the integer ratios drawn are those."""
    if n < 2 or draw(st.booleans()):
        return draw(st.integers(1, 2 * n + 1))
    ties = [n // d for d in range(2, n + 1, 2) if n % d == 0]     # even d: centres on boundaries
    others = [n // d for d in range(3, n + 1, 2) if n % d == 0] + [2 * n]
    return draw(st.sampled_from(ties if ties and draw(st.booleans()) else others))


def _interp_args(mode: str):
    def build(draw, shapes, dtypes):
        spatial = shapes[0][2:]
        nd = len(spatial)
        out: dict = {}
        if draw(st.booleans()):
            sizes = [_resized_side(draw, n) for n in spatial]
            out["size"] = _pack(draw, sizes)
        else:
            scales = []
            for n in spatial:
                s = draw(st.sampled_from(_INTERP_SCALES))
                if math.floor(n * s) < 1:
                    s = 1.0
                scales.append(s)
            out["scale_factor"] = scales[0] if len(set(scales)) == 1 and draw(st.booleans()) else tuple(scales)
            if draw(st.booleans()):
                out["recompute_scale_factor"] = draw(st.booleans())
        torch_mode = _LINEAR_BY_RANK[nd + 2] if mode == "linear" else mode
        out["mode"] = torch_mode
        if mode in ("linear", "bicubic"):
            if draw(st.booleans()):
                out["align_corners"] = draw(st.booleans())
            if nd == 2 and draw(st.integers(0, 2)) == 0:
                out["antialias"] = True
        return out
    return build


def _interpolate(x, **kw):
    return F.interpolate(x, **kw)


_INTERP_DOCS = {
    "nearest": "nearest-neighbour resize (size or scale_factor, 3-D to 5-D)",
    "nearest-exact": "nearest-exact resize (pixel-centre rounding, 3-D to 5-D)",
    "linear": "linear/bilinear/trilinear resize: align_corners, antialias (4-D), recompute_scale_factor",
    "bicubic": "bicubic resize of 4-D inputs: align_corners, antialias",
    "area": "area (adaptive average) resize, 3-D to 5-D",
}
for _mode in ("nearest", "nearest-exact", "linear", "bicubic", "area"):
    register(
        nn("interpolate_" + _mode.replace("-", "_"), _interpolate, _interp_shapes(_mode), FLOAT,
           _INTERP_DOCS[_mode], args=_interp_args(_mode), grad=True,
           # Linear and cubic weights are exactly 0 where an output falls on an input
           # sample: CPU's 0 x inf is NaN there, CUDA skips the tap (H100, bilinear).
           **(RESAMPLES if _mode in ("linear", "bicubic") else ACCUMULATES if _mode == "area" else {})),
    )


def _grid_shapes(draw, budget: ShapeBudget):
    three_d = draw(st.integers(0, 3)) == 0
    nd = 3 if three_d else 2
    n = _batch(draw, budget)
    c = draw(st.integers(1, 3))
    spatial = _spatial(draw, budget, nd, high=8 if nd == 2 else 4)
    out_spatial = _spatial(draw, budget, nd, high=6 if nd == 2 else 3)
    x = [n, c] + spatial
    x = _shrink(x, list(range(2, nd + 2)), budget.max_numel)
    grid = _shrink([n] + out_spatial + [nd], list(range(1, nd + 1)), budget.max_numel)
    return (tuple(x), tuple(grid))


def _grid_args(draw, shapes, dtypes):
    five_d = len(shapes[0]) == 5
    modes = ("bilinear", "nearest") if five_d else ("bilinear", "nearest", "bicubic")
    return {"mode": draw(st.sampled_from(modes)),
            "padding_mode": draw(st.sampled_from(("zeros", "border", "reflection"))),
            "align_corners": draw(st.sampled_from((False, True, None)))}


def _grid_values(shapes, kwargs):
    return {"distribution": "uniform", "low": -1.2, "high": 1.2, "allow_specials": False}


def _grid_sample_undefined(inputs, kwargs, rtol=1e-5):
    """Bilinear sampling is piecewise bilinear in the sampling point: the gradient w.r.t.
    the grid jumps where a point's pixel coordinate is an integer (and, reflecting
    without align_corners, a half-integer: the reflection points). Nearest has no grid
    gradient and bicubic's kernel is C1: no kinks."""
    if kwargs.get("mode", "bilinear") != "bilinear":
        return None
    x, g = inputs[0], inputs[1]
    if x.numel() == 0 or g.numel() == 0:
        return None
    rel, tiny = slack(g)
    align = kwargs.get("align_corners", False)
    sizes = list(reversed(x.shape[2:]))   # grid[..., 0] indexes the last dim (W), [..., 1] H, [..., 2] D
    gw = wide(g)
    for axis, size in enumerate(sizes[:g.shape[-1]]):
        c = gw[..., axis]
        coord = (c + 1) / 2 * (size - 1) if align else ((c + 1) * size - 1) / 2
        offsets = (0.0, 0.5) if kwargs.get("padding_mode") == "reflection" and not align else (0.0,)
        for off in offsets:
            if bool(is_zero(coord - off - (coord - off).round(), rel, tiny, coord.abs() + size).any()):
                return f"a sampling point sits on a pixel boundary (grid axis {axis})"
    return None


def _affine_shapes(draw, budget: ShapeBudget):
    three_d = draw(st.integers(0, 3)) == 0
    n = draw(st.integers(1, 3))
    return ((n, 3, 4) if three_d else (n, 2, 3),)


def _affine_args(draw, shapes, dtypes):
    n, rows, _ = shapes[0]
    nd = rows  # 2 rows -> 2-D, 3 rows -> 3-D
    spatial = [draw(st.integers(1, 6 if nd == 2 else 4)) for _ in range(nd)]
    return {"size": tuple([n, draw(st.integers(1, 3))] + spatial),
            "align_corners": draw(st.sampled_from((False, True, None)))}


register(
    nn("grid_sample", lambda x, g, **kw: F.grid_sample(x, g, **kw), _grid_shapes, FLOAT,
       "sample at grid points in [-1.2, 1.2]: bilinear/nearest/bicubic, zeros/border/reflection padding",
       args=_grid_args, input_dtypes=(None, None), input_values=(None, _grid_values), grad=True,
       grad_undefined=_grid_sample_undefined, **ACCUMULATES),
    nn("affine_grid", lambda theta, **kw: F.affine_grid(theta, **kw), _affine_shapes, FLOAT,
       "sampling grid of an affine transform (2-D and 3-D)", args=_affine_args, grad=True,
       **ACCUMULATES),
)


# ==========================================================================================
# Padding
# ==========================================================================================

def _pad_shapes(mode: str):
    def build(draw, budget: ShapeBudget):
        if mode == "constant":
            (shape,) = any_shape(1, min_rank=1, max_rank=6)(draw, budget)
            return (shape,)
        m = draw(st.integers(1, 3))
        rank = m + draw(st.integers(1, 2))
        low = 1
        spatial = _spatial(draw, budget, m, low=low, high=8 if m < 3 else 5)
        lead = [draw(st.integers(1, 3)) for _ in range(rank - m)]
        if rank == m + 2:
            lead[0] = _batch(draw, budget)
        shape = _shrink(lead + spatial, list(range(rank - m, rank)), budget.max_numel // 4)
        return (tuple(shape),)
    return build


def _pad_args(mode: str):
    def build(draw, shapes, dtypes):
        shape = shapes[0]
        rank = len(shape)
        if mode == "constant":
            m = draw(st.integers(0, rank))  # 0: pad=() (pytorch#161149)
        else:
            m = rank - 1 if rank == 2 else draw(st.sampled_from(sorted({rank - 2, rank - 1} & {1, 2, 3})))
        pads = []
        for j in range(m):  # pads go last dim first
            size = shape[rank - 1 - j]
            for _ in range(2):
                if mode == "constant":
                    low = -1 if size > 1 and draw(st.integers(0, 4)) == 0 else 0
                    pads.append(draw(st.integers(low, 3)))
                elif mode == "reflect":
                    pads.append(draw(st.integers(0, max(0, min(3, size - 1)))))
                elif mode == "circular":
                    pads.append(draw(st.integers(0, min(3, size))))
                else:
                    pads.append(draw(st.integers(0, 3)))
        out = {"pad": tuple(pads)}
        if mode == "constant" and draw(st.booleans()):
            d = _float_dtype(dtypes)
            if d == "bool":
                out["value"] = draw(st.sampled_from((True, False)))
            elif d in dt.FLOAT:
                out["value"] = draw(st.sampled_from((1.5, -2.0, 0.0)))
            else:
                out["value"] = draw(st.sampled_from((3, 0, 1)))
        return out
    return build


def _pad_fn(mode: str):
    def call(x, **kw):
        return F.pad(x, mode=mode, **kw)
    return call


register(
    nn("pad_constant", _pad_fn("constant"), _pad_shapes("constant"), FLOAT + ("int32", "int64", "uint8", "bool"),
       "constant padding of any dims (negative pads crop), with a fill value",
       args=_pad_args("constant"), grad=True),
    nn("pad_reflect", _pad_fn("reflect"), _pad_shapes("reflect"), FLOAT,
       "reflection padding of the last 1-3 dims (pad < size)", args=_pad_args("reflect"), grad=True),
    nn("pad_replicate", _pad_fn("replicate"), _pad_shapes("replicate"), FLOAT,
       "edge-replicating padding of the last 1-3 dims", args=_pad_args("replicate"), grad=True),
    nn("pad_circular", _pad_fn("circular"), _pad_shapes("circular"), FLOAT,
       "circular padding of the last 1-3 dims (pad <= size)", args=_pad_args("circular"), grad=True),
)


# ==========================================================================================
# Rearrangements: pixel (un)shuffle, unfold/fold, channel_shuffle, one_hot
# ==========================================================================================

def _pixel_shuffle_shapes(draw, budget: ShapeBudget):
    r = draw(st.integers(1, 3))
    c = draw(st.integers(1, 2))
    h, w = _spatial(draw, budget, 2, high=4)
    lead = [_batch(draw, budget)] if draw(st.integers(0, 3)) else []
    if lead and draw(st.integers(0, 4)) == 0:
        lead.append(draw(st.integers(1, 2)))
    shape = _shrink(lead + [c * r * r, h, w], [len(lead) + 1, len(lead) + 2], budget.max_numel)
    return (tuple(shape),)


def _pixel_shuffle_args(draw, shapes, dtypes):
    c = shapes[0][-3]
    return {"upscale_factor": draw(st.sampled_from([r for r in (1, 2, 3) if c % (r * r) == 0]))}


def _pixel_unshuffle_shapes(draw, budget: ShapeBudget):
    r = draw(st.integers(1, 3))
    c = draw(st.integers(1, 3))
    h, w = (r * draw(st.integers(1, 3)) for _ in range(2))
    lead = [_batch(draw, budget)] if draw(st.integers(0, 3)) else []
    return (tuple(lead + [c, h, w]),)


def _pixel_unshuffle_args(draw, shapes, dtypes):
    h, w = shapes[0][-2:]
    return {"downscale_factor": draw(st.sampled_from([r for r in (1, 2, 3) if h % r == 0 and w % r == 0]))}


def _unfold_shapes(draw, budget: ShapeBudget):
    (shape,) = _pool_shapes(2)(draw, budget)
    return (shape,)


def _unfold_args(draw, shapes, dtypes):
    spatial = shapes[0][-2:]
    ks, ss, ps, ds = [], [], [], []
    for n in spatial:
        k = draw(st.integers(1, max(1, min(3, n))))
        p = draw(st.integers(0, 2))
        d = draw(st.integers(1, 2))
        if n + 2 * p < d * (k - 1) + 1:
            d = 1
        ks.append(k), ss.append(draw(st.integers(1, 3))), ps.append(p), ds.append(d)
    return _left_at_default(draw, {"kernel_size": _pack(draw, ks), "dilation": _pack(draw, ds),
                                   "padding": _pack(draw, ps), "stride": _pack(draw, ss)},
                            dilation=1, padding=0, stride=1)


def _fold_shapes(draw, budget: ShapeBudget):
    c = draw(st.integers(1, 3))
    kk = draw(st.integers(1, 3)) * draw(st.integers(1, 3))
    blocks = draw(st.integers(1, 4)) * draw(st.integers(1, 4))
    lead = [_batch(draw, budget)] if draw(st.integers(0, 3)) else []
    return (tuple(lead + [c * kk, blocks]),)


def _fold_args(draw, shapes, dtypes):
    ckk, blocks = shapes[0][-2:]
    kh = draw(st.sampled_from([k for k in (1, 2, 3) if ckk % k == 0]))
    kw = draw(st.sampled_from([k for k in (1, 2, 3) if (ckk // kh) % k == 0]))
    bh = draw(st.sampled_from(_divisors(blocks, blocks)))
    bw = blocks // bh
    sizes, strides, pads, dils = [], [], [], []
    for k, b in ((kh, bh), (kw, bw)):
        s, d = draw(st.integers(1, 3)), draw(st.integers(1, 2))
        p = draw(st.integers(0, k // 2))
        # b blocks along this side: floor((n + 2p - d(k-1) - 1) / s) + 1 == b
        n = (b - 1) * s + d * (k - 1) + 1 - 2 * p + draw(st.integers(0, s - 1))
        if n < 1:
            p = 0
            n = (b - 1) * s + d * (k - 1) + 1
        sizes.append(n), strides.append(s), pads.append(p), dils.append(d)
    return _left_at_default(draw, {"output_size": tuple(sizes), "kernel_size": (kh, kw),
                                   "dilation": _pack(draw, dils), "padding": _pack(draw, pads),
                                   "stride": _pack(draw, strides)},
                            dilation=1, padding=0, stride=1)


def _channel_shuffle_shapes(draw, budget: ShapeBudget):
    rank = draw(st.integers(3, 5))
    c = draw(st.integers(1, 3)) * draw(st.integers(1, 3))
    shape = [_batch(draw, budget), c] + _spatial(draw, budget, rank - 2, high=5)
    return (tuple(_shrink(shape, list(range(2, rank)), budget.max_numel)),)


def _channel_shuffle_args(draw, shapes, dtypes):
    return {"groups": draw(st.sampled_from(_divisors(shapes[0][1])))}


def _one_hot_args(draw, shapes, dtypes):
    if prod(shapes[0]) > 0 and draw(st.integers(0, 3)) == 0:
        return {"num_classes": -1}
    return {"num_classes": draw(st.integers(1, 8))}


def _one_hot_values(shapes, kwargs):
    n = kwargs.get("num_classes", -1)
    return {"distribution": "int_range", "low": 0, "high": 4 if n == -1 else n - 1,
            "allow_specials": False}


register(
    nn("pixel_shuffle", lambda x, **kw: F.pixel_shuffle(x, **kw), _pixel_shuffle_shapes,
       FLOAT + ("int32", "int64", "uint8", "bool"),
       "(*, C r^2, H, W) -> (*, C, H r, W r), 3-D to 5-D", args=_pixel_shuffle_args, grad=True),
    nn("pixel_unshuffle", lambda x, **kw: F.pixel_unshuffle(x, **kw), _pixel_unshuffle_shapes,
       FLOAT + ("int32", "int64", "uint8", "bool"),
       "(*, C, H r, W r) -> (*, C r^2, H, W)", args=_pixel_unshuffle_args, grad=True),
    nn("unfold_im2col", lambda x, **kw: F.unfold(x, **kw), _unfold_shapes, FLOAT,
       "im2col: sliding 2-D blocks to columns (kernel, dilation, padding, stride)",
       args=_unfold_args, grad=True),
    nn("fold_col2im", lambda x, **kw: F.fold(x, **kw), _fold_shapes, FLOAT,
       "col2im: columns summed back into a 2-D image (overlapping blocks add up)",
       args=_fold_args, grad=True, **ACCUMULATES),
    nn("channel_shuffle", lambda x, **kw: F.channel_shuffle(x, **kw), _channel_shuffle_shapes,
       FLOAT + ("int32", "int64", "uint8"), "shuffle channels across groups (3-D to 5-D)",
       args=_channel_shuffle_args),
    nn("one_hot", lambda x, **kw: F.one_hot(x, **kw), any_shape(1, max_rank=4), ("int64",),
       "one-hot encoding of in-range int64 classes (num_classes given or inferred)",
       args=_one_hot_args, input_values=(_one_hot_values,)),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py): a
# batch, channels, a spatial width or a sequence length that a kernel maps onto one grid
# dimension.
declare_grows({
    "linear": (grows("rows", (0, -2)), grows("inner", (0, -1), (1, 1)), grows("cols", (1, 0), (2, 0))),
    # (in channels: the weight's too, and the groups read back are then 1)
    "conv1d": (grows("batch", (0, 0), min_rank=3, sliced=True), grows("width", (0, -1)),
               grows("channels", (0, -2), (1, 1), broadcasts=False)),
    "conv2d": (grows("batch", (0, 0), min_rank=4, sliced=True), grows("width", (0, -1)), grows("rows", (0, -2)),
               grows("channels", (0, -3), (1, 1), broadcasts=False)),
    "conv_transpose1d": (grows("batch", (0, -3)), grows("width", (0, -1))),
    "max_pool1d": (grows("batch", (0, 0), min_rank=3, sliced=True), grows("channels", (0, -2)), grows("width", (0, -1))),
    "avg_pool1d": (grows("batch", (0, 0), min_rank=3, sliced=True), grows("channels", (0, -2)), grows("width", (0, -1))),
    "max_pool2d": (grows("batch", (0, 0), min_rank=4, sliced=True), grows("channels", (0, -3)), grows("width", (0, -1)),
                   grows("rows", (0, -2))),
    "avg_pool2d": (grows("batch", (0, 0), min_rank=4, sliced=True), grows("channels", (0, -3)), grows("width", (0, -1)),
                   grows("rows", (0, -2))),
    "adaptive_avg_pool1d": (grows("batch", (0, -3)), grows("channels", (0, -2)), grows("width", (0, -1))),
    # (a batch of planes past 2^31 elements: pytorch#176784, #188957, #193096, forward
    # and backward of the 2-D and 3-D adaptive pools)
    "adaptive_avg_pool2d": (grows("batch", (0, 0), min_rank=4, sliced=True), grows("channels", (0, -3)),
                            grows("width", (0, -1))),
    "adaptive_avg_pool3d": (grows("batch", (0, 0), min_rank=5, sliced=True), grows("channels", (0, -4)),
                            grows("width", (0, -1))),
    "pad_constant": (grows("rows", (0, 0)), grows("width", (0, -1))),
    "pad_reflect": (grows("rows", (0, 0)), grows("width", (0, -1))),
    "pad_replicate": (grows("rows", (0, 0)), grows("width", (0, -1))),
    "pad_circular": (grows("rows", (0, 0)), grows("width", (0, -1))),
    # (rows apart where the softmax runs along another dim: pytorch#191565, a float16
    # log_softmax past 2^31 elements)
    "softmax": (grows("length", (0, -1)), grows("rows", (0, 0), min_rank=2, sliced=True, rows_args=dim_off_rows())),
    "log_softmax": (grows("length", (0, -1)),
                    grows("rows", (0, 0), min_rank=2, sliced=True, rows_args=dim_off_rows())),
    "layer_norm": (grows("length", (0, -1), (1, -1), (2, -1)),),
    "group_norm": (grows("batch", (0, 0), min_rank=2, sliced=True), grows("width", (0, -1), min_rank=3)),
    "embedding": (grows("indices", (0, -1)), grows("rows", (1, 0)), grows("cols", (1, 1))),
    "relu": (grows("length", (0, -1)), grows("rows", (0, 0), sliced=True)),
    "gelu": (grows("length", (0, -1)), grows("rows", (0, 0), sliced=True)),
})
