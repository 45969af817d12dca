"""Reductions and scans: sums, products, moments, extrema and their indices, norms,
cumulative ops. Inputs go up to 8-D (the budget's max rank) and reduce over one dim,
several dims, or everything.

Indices of extrema are not unique under ties, so the ops that return them are compared
through :func:`~mpsfuzz.generation.opspec.gather_at_indices` (the input values the
indices point at) and carry the ``ties_unspecified`` semantic. Sorting and selection ops
(sort, argsort, topk, mode, unique...) are judged the same way; argsort and topk run
along any dim, which their canonicalisers receive from the call (``canonical_kwargs``).

Variants: Tensor methods, in-place forms (cumsum_, cumprod_, renorm_) and out= are
declared where torch has them; grad where the gradient of distinct elements does not
depend on the indices an implementation returns (max(dim), sort, topk and friends route
it through those indices, so they declare none). Where elements tie (amax/amin, the
quantiles), a zero spread (std) or a norm's kink, ``grad_undefined`` says so and the
gradient gets no verdict.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..grad_points import (any_of, constant_slices, dims_of, near, rows, slack, ties, vector_norm_kinks,
                           vector_norm_reason, wide, zero_crossings)
from ..large_sizes import HUGE_SUFFIX, SIZE_CLASS, dim_off_long, dim_off_rows, grows
from ..opspec import declare_grows
from ..opspec import (OpSpec, ShapeBudget, any_shape, broadcast_shapes, combine_args, dim_arg, draw_rank, draw_side,
                      expand, first_dtype, fit, gather_at_indices, integers_once, prod, register)
from ..opspec import LARGE_REAL_NUMEL, sampled_once
from ..preparation import preparation
from ..recipes import DtypeArg

FAMILY = "reduction"

FLOAT = expand("float")
FC = expand("floating_and_complex")
FLOAT_AND_WIDE_COMPLEX = FLOAT + ("complex64", "complex128")
REAL = expand("real")
REAL_BOOL = expand("real_and_bool")
ALL = expand("all")
TIES = frozenset({"ties_unspecified"})
# Float reductions accumulate in an order that follows the layout (and vector width), so
# a non-contiguous input legitimately rounds differently in low precision.
ORDER = frozenset({"order-dependent", "accumulates"})
INTEGRAL = expand("integral")


def reduction(name: str, fn, dtypes, doc: str, **kw) -> OpSpec:
    kw.setdefault("shapes", any_shape(1))
    return OpSpec(name=name, family=FAMILY, fn=fn, dtypes=expand(dtypes), doc=doc, **kw)


# -- argument builders ------------------------------------------------------------------

def _dims(**kw):
    """One dim, several dims, or none (reduce everything), with keepdim."""
    kw.setdefault("allow_list", True)
    return dim_arg(**kw)


def _sum_dtype(draw, shapes, dtypes):
    """Sometimes accumulate into an explicit dtype (sum(x, dtype=...))."""
    d = first_dtype(dtypes)
    if draw(st.integers(0, 5)) < 5:
        return {}
    if d in dt.COMPLEX:
        return {"dtype": DtypeArg("complex64")}
    if d in dt.FLOAT:
        return {"dtype": DtypeArg("float32")}
    return {"dtype": DtypeArg(draw(st.sampled_from(("int64", "float32", "int32"))))}


def _accumulate_dtype(*, floating_only: bool = False):
    """Sometimes an explicit result dtype (``dtype=``), one each op takes for the input's
    dtype: as wide or wider for floats and complex (norms refuse narrowing), and an
    integer or float for integral inputs (unless ``floating_only``)."""
    def build(draw, shapes, dtypes):
        d = first_dtype(dtypes)
        if draw(st.integers(0, 3)) < 3:
            return {}
        if d in dt.COMPLEX:
            return {"dtype": DtypeArg("complex128")}
        if d in dt.FLOAT:
            return {"dtype": DtypeArg(draw(st.sampled_from(("float64",) if d == "float64" else ("float32", "float64"))))}
        if floating_only:
            return {}
        return {"dtype": DtypeArg(draw(st.sampled_from(("int64", "float32"))))}
    return build


def _correction(draw, shapes, dtypes):
    """No correction (the default, 1), None (the same, said), or 0, 1, 2."""
    how = draw(st.integers(0, 4))
    return {} if how == 0 else {"correction": None} if how == 4 else {"correction": how - 1}


def _norm_p(draw, shapes, dtypes):
    return {"p": draw(st.sampled_from((2, 1, "fro", math.inf, 3, 0, -math.inf)))}


def _kthvalue_args(draw, shapes, dtypes):
    shape = shapes[0]
    rank = len(shape)
    dim = draw(st.integers(-rank, rank - 1)) if rank else 0
    size = shape[dim] if rank else 1
    out = {"k": draw(st.integers(1, max(1, size))), "dim": dim, "keepdim": draw(st.booleans())}
    if dim in (-1, rank - 1) and draw(st.integers(0, 2)) == 2:
        del out["dim"]   # the documented default (None): the last dim
    return out


def _logsumexp_dims(draw, shapes, dtypes):
    # logsumexp needs a dim (an empty tuple is refused)
    return dim_arg(allow_none=False, allow_list=True)(draw, shapes, dtypes)


@preparation
def _median_input(x, dim):
    """Work around an eager-CPU bug (torch 2.13): median/nanmedian along a dim whose
    stride is 0 (an expanded dim longer than 1) return garbage on CPU, so the reference
    would be wrong. Such inputs are made dense on both sides; other layouts are kept."""
    if x.dim() and x.stride(dim) == 0 and x.size(dim) > 1:
        return x.contiguous()
    return x


def _variants(method=None, *, inplace=None, out=True, grad=False) -> dict:
    kw: dict = {"out": out, "grad": grad}
    if method and hasattr(torch.Tensor, method):
        kw["method"] = method
    if inplace and hasattr(torch.Tensor, inplace):
        kw["inplace"] = inplace
    return kw


def _full_out(reduce, *, all_dims: bool):
    """sum/prod: their out= overloads need a dim, so a full reduction with out= names
    every dim (sum) or reduces the flattened input along dim 0 (prod)."""
    def fn(x, **kw):
        if "out" in kw and kw.get("dim") is None:
            kw.pop("dim", None)
            if all_dims:
                return reduce(x, dim=tuple(range(x.dim())), **kw)
            return reduce(x.reshape(-1), 0, **kw)
        return reduce(x, **kw)
    return fn


def _any_dim_args(*builders):
    """A dim for argsort and topk: left to the default (the last dim), the last dim as
    ``-1`` or ``rank - 1``, dim 0 as ``0`` or ``-rank``, or any dim. Dim 0 has a share of
    its own: upstream bugs of these ops are along the outermost dim of a higher-rank or
    long input (pytorch/pytorch#154890: MPS topk of a 5-D input along dim 0; #183885:
    MPS argsort of (3, 2^22 + 1) along dim 0). The builders after it see the dim drawn."""
    def build(draw, shapes, dtypes):
        rank = len(shapes[0])
        last, lowest = max(rank - 1, 0), -max(rank, 1)   # a 0-d tensor takes dim 0 or -1
        how = draw(st.integers(0, 5))
        out = ({} if how == 0 else {"dim": -1} if how == 1 else {"dim": last} if how == 2
               else {"dim": 0} if how == 3 else {"dim": lowest} if how == 4
               else {"dim": draw(st.integers(lowest, last))})
        for b in builders:
            out.update(b(draw, shapes, dtypes, out.get("dim", -1)))
        return out
    return build


def _flags(*names):
    """Boolean arguments, for :func:`_any_dim_args` (whose builders also get the dim)."""
    def build(draw, shapes, dtypes, dim):
        return {name: draw(st.booleans()) for name in names}
    return build


def _flag(name, values=(False, True)):
    def build(draw, shapes, dtypes):
        return {name: draw(st.sampled_from(values))}
    return build


def _topk_args(draw, shapes, dtypes, dim):
    n = shapes[0][dim] if shapes[0] else 1
    return {"k": draw(st.integers(0, n)), "largest": draw(st.booleans()), "sorted": draw(st.booleans())}


def _quantile_args(draw, shapes, dtypes, *, with_q=True):
    out = dim_arg(allow_list=False)(draw, shapes, dtypes)
    if with_q:
        out["q"] = draw(st.sampled_from((0.0, 0.25, 0.5, 0.9, 1.0, 0.33)))
    out["interpolation"] = draw(st.sampled_from(("linear", "lower", "higher", "midpoint", "nearest")))
    return out


def _q_values(shapes, kwargs):
    return {"distribution": "uniform", "low": 0.0, "high": 1.0, "allow_specials": False}


def _quantile_shapes(draw, budget):
    # quantile rejects an empty input; sides of 0 come often enough from the shape
    # builder to make half the cases errors, so an empty input is one choice in eight.
    if budget.allow_empty and draw(st.integers(0, 7)) != 7:
        budget = dataclasses.replace(budget, allow_empty=False)
    (x,) = any_shape(1)(draw, budget)
    k = draw(st.integers(0, 4))
    return (x, () if k == 0 else (k - 1,))


def _unique_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    out = {"return_inverse": draw(st.booleans()), "return_counts": draw(st.booleans())}
    if rank and draw(st.booleans()):
        out["dim"] = draw(st.integers(-rank, rank - 1))
    return out


def _histc_args(draw, shapes, dtypes):
    lo = draw(st.sampled_from((0, -2, -1, 0.5)))
    out = {"bins": draw(st.integers(1, 12)), "min": lo,
           "max": draw(st.sampled_from((lo, lo + 1, lo + 3, lo + 0.5)))}
    if draw(st.integers(0, 4)) == 4:
        del out["bins"]   # the documented default, 100
    return out


def with_edge_values(x, lo, hi):
    """``x`` flattened, then ``min`` and ``max`` rounded to x's dtype and the values one
    unit of roundoff either side of each (issue 38, pytorch#195076: MPS histc counted
    elements 1 ulp outside the range). Made on the CPU, where nextafter is eager CPU's,
    and moved: the device under test computes only the histogram."""
    edges = torch.tensor([float(lo), float(hi)], dtype=torch.float64).to(x.dtype)
    inf = torch.full_like(edges, float("inf"))
    around = torch.cat([edges, torch.nextafter(edges, -inf), torch.nextafter(edges, inf)])
    return torch.cat([x.reshape(-1), around.to(x.device)])


def _histc_at_edges(x, **kw):
    return torch.histc(with_edge_values(x, kw.get("min", 0), kw.get("max", 0)), **kw)


def _tensor_list_shapes(draw, budget: ShapeBudget):
    """1 to 5 tensors of unrelated shapes (0-d and empty ones included), each within its
    share of the budget: the list a foreach kernel takes (pytorch#169930: CUDA's
    ``_foreach_norm``, which ``clip_grad_norm_`` calls on a model's gradients, chunks the
    list across tensors, so their number and which of them are empty are its sizes)."""
    n = draw(integers_once(1, 5))
    share = dataclasses.replace(budget, max_numel=max(1, budget.max_numel // n))
    return tuple(fit([draw_side(draw, share) for _ in range(draw_rank(draw, share, 0, 4))], share)
                 for _ in range(n))


# The orders a foreach norm takes (CPU's kernel is vector_norm's, whose orders it accepts;
# the fast CUDA kernel takes 1, 2 and inf, and falls back per tensor for the others).
_FOREACH_ORDS = (2, 1, math.inf, -math.inf, 0, 3.5)


def _foreach_norm_args(draw, shapes, dtypes):
    """An order (or the default, 2) and sometimes a wider ``dtype=``. No infinity norm of
    a list that holds an empty tensor: it has no identity, and every backend refuses it."""
    empty = any(prod(s) == 0 for s in shapes)
    ords = tuple(o for o in _FOREACH_ORDS if not (empty and math.isinf(o)))
    how = draw(integers_once(0, len(ords)))
    out = {} if how == len(ords) else {"ord": ords[how]}
    out.update(_accumulate_dtype(floating_only=True)(draw, shapes, dtypes))
    return out


def _foreach_norm_undefined(inputs, kwargs, rtol=1e-5):
    """The kinks of each tensor's norm (a whole-tensor vector norm each)."""
    for i in range(len(inputs)):
        why = vector_norm_kinks(i)(inputs, kwargs, rtol)
        if why:
            return why
    return None


def _bincount_values(shapes, kwargs):
    return {"distribution": "int_range", "low": 0, "high": 9, "allow_specials": False}


def _bincount_shapes(n_inputs):
    def build(draw, budget):
        n = fit([draw_side(draw, budget) * draw(st.integers(1, 4))], budget)
        return (n,) * n_inputs
    return build


def _minlength(draw, shapes, dtypes):
    return {"minlength": draw(st.sampled_from((0, 0, 5, 12)))}


def _renorm_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    return {"p": draw(st.sampled_from((1, 2, 3.5, math.inf))), "dim": draw(st.integers(-rank, rank - 1)),
            "maxnorm": draw(st.sampled_from((0.5, 1.0, 5.0, 0.0)))}


def _dist_p(draw, shapes, dtypes):
    return {"p": draw(st.sampled_from((2, 1, 0, math.inf, -math.inf, 3.5)))}


def _one_dim(draw, shapes, dtypes):
    return dim_arg(keepdim=False, allow_none=False)(draw, shapes, dtypes)


# -- canonicalisers --------------------------------------------------------------------

def _cpu(t):
    """A CPU copy in a dtype CPU can gather and compare: uint16/32 widen to int64 and
    uint64 is reinterpreted as int64 (equality is kept either way)."""
    t = t.detach().cpu()
    if t.dtype == torch.uint64:
        return t.view(torch.int64)
    if t.dtype in (torch.uint16, torch.uint32):
        return t.to(torch.int64)
    return t


def _gatherable(canonicalise):
    """Wrap a catalogue canonicaliser so that its gathers run on CPU-gatherable dtypes."""
    def wrapped(inputs, outputs):
        outs = tuple(_cpu(o) for o in outputs) if isinstance(outputs, (tuple, list)) else _cpu(outputs)
        return canonicalise([_cpu(inputs[0])] + list(inputs[1:]), outs)
    return wrapped


def _gather_along(x, idx, dim):
    """x's values at ``idx`` along ``dim`` (clamped), and which indices were in range; an
    index tensor whose shape does not fit x's along ``dim`` is returned as it is, flagged
    out of range, so that the wrong shape shows."""
    x, idx = _cpu(x), _cpu(idx).to(torch.int64)
    if x.dim() == 0:
        return x.expand(idx.shape).clone(), idx.eq(0)
    d = dim % x.dim()
    if idx.dim() != x.dim() or any(idx.shape[k] != x.shape[k] for k in range(x.dim()) if k != d):
        return idx, torch.zeros(idx.shape, dtype=torch.bool)
    n = x.shape[d]
    in_range = torch.logical_and(idx.ge(0), idx.lt(n))
    if n == 0 or idx.numel() == 0:
        return torch.zeros(idx.shape, dtype=x.dtype), in_range
    return x.gather(d, idx.clamp(0, n - 1)), in_range


def _argsort_canonical(inputs, outputs, dim=-1):
    """argsort along ``dim`` (the call's): the values the indices put in order (ties may
    be ordered either way unless stable), and that every index is in range."""
    return _gather_along(inputs[0], outputs, dim)


def _sorted_along(t, dim):
    t = _cpu(t)
    return torch.sort(t, dim=dim).values if -t.dim() <= dim < t.dim() else t   # (0-d, or a wrong rank: as it is)


def _topk_canonical(inputs, outputs, dim=-1, sorted=True, k=None):
    """topk along ``dim`` (the call's): which of tied elements is picked is unspecified,
    so the indices are compared by the values they gather there, and that every index is
    in range. sorted=True fixes the values' order (ties are equal values); with
    sorted=False any order is valid: the values and the gathered values are then each
    sorted along ``dim``. k=0 of a 0-d tensor selects nothing yet returns 0-d tensors,
    whose element nothing specifies (CPU copies the input; CUDA's compiled kernel leaves
    0 or what ``out=`` held, and so contradicts itself between layouts): only their
    shapes and dtypes are compared."""
    if k == 0 and inputs[0].dim() == 0:
        return (torch.zeros_like(_cpu(outputs[0])), torch.zeros_like(_cpu(outputs[1])))
    values, idx = _cpu(outputs[0]), outputs[1]
    gathered, in_range = _gather_along(inputs[0], idx, dim)
    if sorted:
        return (values, gathered, in_range)
    return (_sorted_along(values, dim), _sorted_along(gathered, dim), in_range)


def _mode_canonical(inputs, outputs):
    """mode: which value is returned when several are equally frequent is unspecified:
    compare how often the returned value occurs along the dim, and that the index
    points at it."""
    x = _cpu(inputs[0])
    values, idx = _cpu(outputs[0]), _cpu(outputs[1]).to(torch.int64)
    if x.dim() == 0 or x.numel() == 0:
        return (values.eq(values), idx.eq(idx))
    xs, vs = tuple(x.shape), tuple(values.shape)
    for d in range(x.dim()):
        keep = xs[:d] + (1,) + xs[d + 1:]
        squeezed = xs[:d] + xs[d + 1:]
        if vs == keep or vs == squeezed:
            v = values.reshape(keep)
            i = idx.reshape(keep)
            count = x.eq(v).sum(d, keepdim=True)
            if count.ge(1).all():  # this is the dim (the value occurs along it)
                n = xs[d]
                hit = x.gather(d, i.clamp(0, n - 1)).eq(v).logical_and(i.ge(0)).logical_and(i.lt(n))
                return (count.reshape(vs), hit.reshape(vs))
    return (values, idx)


# -- where gradients are undefined ---------------------------------------------------------

def _dist_undefined(inputs, kwargs, rtol=1e-5):
    """dist: the p-norm of x - y (broadcast), whose zeros are computed from x and y."""
    try:
        x, y = torch.broadcast_tensors(wide(inputs[0]), wide(inputs[1]))
    except RuntimeError:
        return None
    rel, tiny = slack(inputs[0])
    why = vector_norm_reason((x - y).reshape(1, -1), kwargs.get("p", 2), rel, tiny,
                             zero_scale=(x.abs() + y.abs()).reshape(1, -1))
    return f"x - y: {why}" if why else None


def _renorm_undefined(inputs, kwargs, rtol=1e-5):
    """renorm: a sub-tensor whose p-norm is maxnorm (where rescaling starts), or a
    kink of the norm of a sub-tensor that is rescaled."""
    x = inputs[0]
    if x.numel() == 0 or x.dim() == 0:
        return None
    rel, tiny = slack(x)
    d = kwargs["dim"] % x.dim()
    r = rows(wide(x), [k for k in range(x.dim()) if k != d])  # one row per index along dim
    norms = torch.linalg.vector_norm(r, kwargs["p"], dim=-1)
    if bool(near(norms, kwargs["maxnorm"], rel, tiny).any()):
        return "a sub-tensor's norm equals maxnorm (where renorm starts rescaling)"
    why = vector_norm_reason(r[norms > kwargs["maxnorm"]], kwargs["p"], rel, tiny)
    return f"a rescaled sub-tensor: {why}" if why else None


def _rank_kinks(*, ignore_nan: bool):
    """quantile at a tensor q, linear interpolation: the result is piecewise linear in q
    with kinks where the rank q * (n - 1) is an integer (n: the values per slice)."""
    def ranks(inputs, kwargs):
        if kwargs.get("interpolation", "linear") != "linear" or inputs[0].numel() == 0:
            return []
        x, q = inputs[0], wide(inputs[1]).reshape(-1, 1)
        r = rows(wide(x), dims_of(kwargs.get("dim"), x.dim()))
        n = (~torch.isnan(r)).sum(-1) if ignore_nan else torch.full((r.shape[0],), r.shape[-1])
        rank = q * (n.reshape(1, -1).to(torch.float64) - 1)
        return [(rank - rank.round(), rank.abs() + 1)]
    return zero_crossings(ranks, "q's rank minus an integer", dtype_of=1)


_QUANTILE_TIES = ties(dim="dim")
_NANQUANTILE_TIES = ties(dim="dim", ignore_nan=True)

def _principal_log(inputs, out):
    """A complex logarithm is defined modulo 2*pi*i: both sides are compared by their
    principal values (imaginary part in [-pi, pi)); CPU's logcumsumexp does not wrap it."""
    if not out.is_complex():
        return out
    return torch.complex(out.real, torch.remainder(out.imag + math.pi, 2 * math.pi) - math.pi)


# -- specs ------------------------------------------------------------------------------

_idx_values = gather_at_indices()          # (values, indices) outputs
_sort_values = _gatherable(gather_at_indices())

register(
    reduction("sum", _full_out(torch.sum, all_dims=True), ALL,
              "sum over dims, optionally into a given dtype (large reductions: pytorch#148975)",
              args=combine_args(_dims(), _sum_dtype), rtol_scale=16, atol_scale=16,
              semantics=ORDER, **_variants("sum", grad=True)),
    reduction("nansum", lambda x, **kw: torch.nansum(x, **kw), REAL_BOOL,
              "sum treating NaN as zero, optionally into a given dtype",
              args=combine_args(_dims(), _accumulate_dtype()), rtol_scale=16, atol_scale=16,
              semantics=ORDER, **_variants("nansum", grad=True)),
    reduction("prod", _full_out(torch.prod, all_dims=False), ALL,
              "product over one dim or everything (up to 8-D)",
              args=combine_args(dim_arg(), _accumulate_dtype()), rtol_scale=32, atol_scale=16, semantics=ORDER,
              **_variants("prod", grad=True)),
    reduction("mean", lambda x, **kw: torch.mean(x, **kw), FC, "mean over dims, optionally in a given dtype",
              args=combine_args(_dims(), _accumulate_dtype(floating_only=True)), rtol_scale=16, atol_scale=16, semantics=ORDER, **_variants("mean", grad=True)),
    reduction("nanmean", lambda x, **kw: torch.nanmean(x, **kw), FLOAT, "mean ignoring NaN",
              args=combine_args(_dims(), _accumulate_dtype(floating_only=True)), rtol_scale=16, atol_scale=16, semantics=ORDER, **_variants("nanmean", grad=True)),
    reduction("var", lambda x, **kw: torch.var(x, **kw), FC,
              "variance with a correction (0-d and >4-D inputs included)",
              args=combine_args(_dims(), _correction), rtol_scale=32, atol_scale=32,
              semantics=ORDER, **_variants("var", grad=True)),
    reduction("std", lambda x, **kw: torch.std(x, **kw), FC, "standard deviation",
              args=combine_args(_dims(), _correction), rtol_scale=32, atol_scale=32,
              semantics=ORDER, grad_undefined=constant_slices(), **_variants("std", grad=True)),
    reduction("var_mean", lambda x, **kw: torch.var_mean(x, **kw), FC,
              "variance and mean in one pass", args=combine_args(_dims(), _correction),
              rtol_scale=32, atol_scale=32, semantics=ORDER, **_variants(None, out=False, grad=True)),
    reduction("std_mean", lambda x, **kw: torch.std_mean(x, **kw), FC,
              "standard deviation and mean in one pass", args=combine_args(_dims(), _correction),
              rtol_scale=32, atol_scale=32, semantics=ORDER, grad_undefined=constant_slices(),
              **_variants(None, out=False, grad=True)),
    reduction("amax", lambda x, **kw: torch.amax(x, **kw), REAL_BOOL, "max over dims (NaN propagates)",
              args=_dims(), grad_undefined=ties(among="max"), **_variants("amax", grad=True)),
    reduction("amin", lambda x, **kw: torch.amin(x, **kw), REAL_BOOL, "min over dims (NaN propagates)",
              args=_dims(), grad_undefined=ties(among="min"), **_variants("amin", grad=True)),
    reduction("aminmax", lambda x, **kw: torch.aminmax(x, **kw), REAL_BOOL, "min and max together",
              args=dim_arg(), **_variants("aminmax")),
    reduction("max", lambda x, **kw: torch.max(x, **kw), REAL_BOOL, "max of all elements",
              **_variants("max")),
    reduction("min", lambda x, **kw: torch.min(x, **kw), REAL_BOOL, "min of all elements",
              **_variants("min")),
    reduction("argmax", lambda x, **kw: torch.argmax(x, **kw), REAL, "index of the max (ties: any max)",
              args=dim_arg(), canonicalise=gather_at_indices(values_at=None, indices_at=None, reducer="amax"),
              semantics=TIES, **_variants("argmax")),
    reduction("argmin", lambda x, **kw: torch.argmin(x, **kw), REAL, "index of the min (ties: any min)",
              args=dim_arg(), canonicalise=gather_at_indices(values_at=None, indices_at=None, reducer="amin"),
              semantics=TIES, **_variants("argmin")),
    reduction("max_dim", lambda x, dim, keepdim=False, **kw: torch.max(x, dim, keepdim=keepdim, **kw), REAL_BOOL,
              "max and its index along a dim", args=dim_arg(allow_none=False),
              canonicalise=_idx_values, semantics=TIES, **_variants("max")),
    reduction("min_dim", lambda x, dim, keepdim=False, **kw: torch.min(x, dim, keepdim=keepdim, **kw), REAL_BOOL,
              "min and its index along a dim", args=dim_arg(allow_none=False),
              canonicalise=_idx_values, semantics=TIES, **_variants("min")),
    reduction("median",
              lambda x, dim, keepdim=False, **kw: torch.median(_median_input(x, dim), dim, keepdim=keepdim, **kw),
              REAL, "lower median and its index along a dim (stride-0 dims made dense: CPU bug)",
              args=dim_arg(allow_none=False), canonicalise=_idx_values, semantics=TIES, out=True),
    reduction("median_all", lambda x: torch.median(x), REAL, "lower median of all elements",
              **_variants("median", out=False)),
    reduction("nanmedian",
              lambda x, dim, keepdim=False, **kw: torch.nanmedian(_median_input(x, dim), dim, keepdim=keepdim, **kw),
              REAL, "median ignoring NaN along a dim (stride-0 dims made dense: CPU bug)",
              args=dim_arg(allow_none=False), canonicalise=_idx_values, semantics=TIES, out=True),
    reduction("nanmedian_all", lambda x: torch.nanmedian(x), REAL, "median of all non-NaN elements",
              **_variants("nanmedian", out=False)),
    reduction("kthvalue", lambda x, k, keepdim=False, **kw: torch.kthvalue(x, k, keepdim=keepdim, **kw),
              REAL, "k-th smallest value and its index along a dim", args=_kthvalue_args,
              canonicalise=_idx_values, semantics=TIES, **_variants("kthvalue")),
    reduction("mode", lambda x, dim, keepdim=False, **kw: torch.mode(x, dim, keepdim, **kw), REAL_BOOL,
              "most frequent value along a dim, compared by its count (which of equally frequent "
              "values is unspecified)", args=dim_arg(allow_none=False), allow_nonfinite=False,
              canonicalise=_mode_canonical, semantics=TIES, **_variants("mode")),
    reduction("any", lambda x, **kw: torch.any(x, **kw), ALL, "any element true", args=_dims(),
              **_variants("any")),
    reduction("all", lambda x, **kw: torch.all(x, **kw), ALL, "all elements true", args=_dims(),
              **_variants("all")),
    reduction("count_nonzero", lambda x, **kw: torch.count_nonzero(x, **kw), ALL,
              "count of non-zero elements", args=dim_arg(keepdim=False, allow_list=True),
              **_variants("count_nonzero", out=False)),
    reduction("logsumexp", lambda x, dim, keepdim=False, **kw: torch.logsumexp(x, dim, keepdim=keepdim, **kw),
              FLOAT_AND_WIDE_COMPLEX, "log of the sum of exponentials", args=_logsumexp_dims,
              rtol_scale=16, atol_scale=16, semantics=ORDER, **_variants("logsumexp", grad=True)),
    reduction("norm", lambda x, p, **kw: torch.norm(x, p, **kw), FC, "p-norm (torch.norm)",
              args=combine_args(_norm_p, dim_arg(), _accumulate_dtype(floating_only=True)), rtol_scale=16,
              atol_scale=16,
              semantics=ORDER, grad_undefined=vector_norm_kinks(ord="p"), **_variants("norm", grad=True)),
    reduction("dist", lambda x, y, p=2, **kw: torch.dist(x, y, p), FLOAT, "p-norm of x - y, broadcast",
              shapes=broadcast_shapes(2), input_dtypes=(None, None), args=_dist_p,
              rtol_scale=16, atol_scale=16, semantics=ORDER, grad_undefined=_dist_undefined,
              **_variants("dist", out=False, grad=True)),
    reduction("renorm", lambda x, p, dim, maxnorm, **kw: torch.renorm(x, p, dim, maxnorm, **kw), FLOAT,
              "rescale sub-tensors along a dim to p-norm at most maxnorm", min_rank=2,
              shapes=any_shape(1, min_rank=2),
              args=_renorm_args, rtol_scale=16, atol_scale=16, semantics=ORDER,
              grad_undefined=_renorm_undefined, **_variants("renorm", inplace="renorm_", grad=True)),
    # As many inputs as the shape builder draws (no input_dtypes: they share the drawn
    # dtype, as clip_grad_norm_ groups a model's gradients by dtype before the kernel).
    reduction("foreach_norm", lambda *ts, **kw: torch._foreach_norm(ts, **kw), FLOAT,
              "the norm of each tensor of a list of 1 to 5 (0-d and empty ones included) in one foreach "
              "kernel (torch._foreach_norm, what clip_grad_norm_ calls; pytorch#169930)",
              shapes=_tensor_list_shapes, args=_foreach_norm_args, rtol_scale=16, atol_scale=16,
              semantics=ORDER | {"tensor-list"}, grad_undefined=_foreach_norm_undefined,
              **_variants(None, out=False, grad=True)),
    reduction("cumsum", lambda x, dim, **kw: torch.cumsum(x, dim, **kw), ALL, "running sum along a dim",
              args=combine_args(_one_dim, _accumulate_dtype()), rtol_scale=16, atol_scale=16,
              semantics=ORDER, **_variants("cumsum", inplace="cumsum_", grad=True)),
    reduction("cumprod", lambda x, dim, **kw: torch.cumprod(x, dim, **kw), ALL, "running product along a dim",
              args=combine_args(_one_dim, _accumulate_dtype()), rtol_scale=32, atol_scale=16,
              semantics=ORDER, **_variants("cumprod", inplace="cumprod_", grad=True)),
    reduction("logcumsumexp", lambda x, dim, **kw: torch.logcumsumexp(x, dim, **kw), FLOAT_AND_WIDE_COMPLEX,
              "running log-sum-exp along a dim (complex: compared as principal logarithms)", args=_one_dim,
              canonicalise=_principal_log, rtol_scale=16, atol_scale=16, semantics=ORDER,
              **_variants("logcumsumexp", grad=True)),
    reduction("cummax", lambda x, dim, **kw: torch.cummax(x, dim, **kw), REAL_BOOL, "running max and its index",
              args=_one_dim, canonicalise=_idx_values, semantics=TIES, **_variants("cummax")),
    reduction("cummin", lambda x, dim, **kw: torch.cummin(x, dim, **kw), REAL_BOOL, "running min and its index",
              args=_one_dim, canonicalise=_idx_values, semantics=TIES, **_variants("cummin")),
)

# -- order statistics, sorting, selection, counting ---------------------------------

register(
    reduction("quantile", lambda x, q, **kw: torch.quantile(x, q, **kw), ("float32", "float64"),
              "quantile at a Python-float q, every interpolation mode, over a dim or all",
              args=_quantile_args, rtol_scale=16, atol_scale=16, semantics=ORDER,
              grad_undefined=_QUANTILE_TIES, **_variants("quantile", grad=True)),
    reduction("nanquantile", lambda x, q, **kw: torch.nanquantile(x, q, **kw), ("float32", "float64"),
              "quantile ignoring NaN", args=_quantile_args, rtol_scale=16, atol_scale=16,
              semantics=ORDER, grad_undefined=_NANQUANTILE_TIES, **_variants("nanquantile", grad=True)),
    reduction("quantile_tensor_q", lambda x, q, **kw: torch.quantile(x, q, **kw), ("float32", "float64"),
              "quantiles at a 0-d or 1-D tensor of q in [0, 1]", shapes=_quantile_shapes,
              input_dtypes=(None, None), input_values=(None, _q_values),
              args=lambda draw, shapes, dtypes: _quantile_args(draw, shapes, dtypes, with_q=False),
              rtol_scale=16, atol_scale=16,
              grad_undefined=any_of(_QUANTILE_TIES, _rank_kinks(ignore_nan=False)),
              **_variants("quantile", grad=True)),
    reduction("nanquantile_tensor_q", lambda x, q, **kw: torch.nanquantile(x, q, **kw), ("float32", "float64"),
              "NaN-ignoring quantiles at a tensor of q", shapes=_quantile_shapes,
              input_dtypes=(None, None), input_values=(None, _q_values),
              args=lambda draw, shapes, dtypes: _quantile_args(draw, shapes, dtypes, with_q=False),
              rtol_scale=16, atol_scale=16,
              grad_undefined=any_of(_NANQUANTILE_TIES, _rank_kinks(ignore_nan=True)),
              **_variants("nanquantile", grad=True)),
    reduction("sort", lambda x, **kw: torch.sort(x, **kw), REAL_BOOL,
              "sorted values and their indices along any dim, stable or not, descending or not",
              args=combine_args(dim_arg(keepdim=False, allow_none=False), _flag("descending"), _flag("stable")),
              canonicalise=_sort_values, semantics=TIES, **_variants("sort")),
    reduction("argsort", lambda x, **kw: torch.argsort(x, **kw), REAL_BOOL,
              "indices that sort along any dim, compared by the values they gather there",
              args=_any_dim_args(_flags("descending", "stable")), canonicalise=_argsort_canonical,
              canonical_kwargs=("dim",), semantics=TIES, **_variants("argsort", out=False)),
    reduction("msort", torch.msort, REAL_BOOL, "values sorted along dim 0", **_variants("msort")),
    reduction("topk", lambda x, k, **kw: torch.topk(x, k, **kw), REAL,
              "k largest/smallest along any dim, sorted or not (unsorted: compared as sorted values)",
              args=_any_dim_args(_topk_args), canonicalise=_topk_canonical,
              canonical_kwargs=("dim", "sorted", "k"), semantics=TIES, **_variants("topk")),
    reduction("unique", lambda x, **kw: torch.unique(x, sorted=True, **kw), REAL_BOOL,
              "sorted unique values (flat or along a dim), inverse indices and counts",
              args=_unique_args, allow_nonfinite=False, **_variants(None, out=False)),
    reduction("unique_consecutive", lambda x, **kw: torch.unique_consecutive(x, **kw), REAL_BOOL,
              "collapse runs of equal values (flat or along a dim), inverse and counts",
              args=_unique_args, allow_nonfinite=False, **_variants("unique_consecutive", out=False)),
    reduction("histc", lambda x, **kw: torch.histc(x, **kw), FLOAT,
              "histogram with equal bins over [min, max] (min == max: the data's range)",
              args=_histc_args, allow_nonfinite=False, **_variants("histc")),
    reduction("histc_at_edges", _histc_at_edges, ("float32", "float64"),
              "histogram of values at min and max and one ulp either side of each (pytorch#195076)",
              args=_histc_args, allow_nonfinite=False),
    reduction("bincount", lambda x, **kw: torch.bincount(x, **kw), INTEGRAL,
              "counts of non-negative integers 0..9, with a minlength", shapes=_bincount_shapes(1),
              input_values=(_bincount_values,), args=_minlength, **_variants("bincount", out=False)),
    reduction("bincount_weights", lambda x, w, **kw: torch.bincount(x, w, **kw), ("int64", "int32", "uint8"),
              "weighted counts of non-negative integers", shapes=_bincount_shapes(2),
              input_dtypes=(None, ("float32", "float64", "float16")), input_values=(_bincount_values, None),
              args=_minlength, rtol_scale=16, atol_scale=16, **_variants("bincount", out=False)),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py): along
# the long dim (a reduction over 65,536+ elements) or across it (65,536+ of them).
_ALONG_OR_ACROSS = (grows("length", (0, -1)), grows("rows", (0, 0)))
declare_grows({op: _ALONG_OR_ACROSS for op in ("argmax", "argmin", "cumprod", "prod", "cummax")})
# The sorts' last dim also passes 2^22 beside a short sorted dim (pytorch#183885: MPS
# argsort of (3, 2^22 + 1) along dim 0): 2^22 + 1 sorts of a few elements each.
declare_grows({
    "sort": (grows("length", (0, -1), segments=dim_off_long()), grows("rows", (0, 0))),
    "argsort": (grows("length", (0, -1), segments=dim_off_long()), grows("rows", (0, 0))),
    "topk": (grows("length", (0, -1), segments=dim_off_long(bounded="k")), grows("rows", (0, 0))),
})
# Those whose rows also pass 2^31 elements in the @huge class, reduced or scanned along
# a dim other than 0 (pytorch#167086: a scan along an outer dim past 2^32 elements). (Not
# the products: a float16 product of 64 hashed values overflows; not the canonicalised
# ones, which gather from the whole input.)
_ACROSS_ROWS = (grows("length", (0, -1)), grows("rows", (0, 0), min_rank=2, sliced=True, rows_args=dim_off_rows()))
declare_grows({op: _ACROSS_ROWS for op in ("sum", "mean", "amax", "amin", "logsumexp", "cumsum", "std", "var")})


# -- the foreach norm past 2^31 elements: spikes of known values ---------------------------
#
# pytorch#169930: CUDA's foreach norm (clip_grad_norm_'s kernel) of a tensor of 2^31 + 1
# elements. A whole-tensor norm has no rows to cut (the @huge class's judgement), and its
# fused kernel takes dense tensors only (a stride-0 constant falls back to one norm per
# tensor). So the tensor is made dense on the device, zero but for a few known values at
# flat offsets around 2^31 and 2^32, at the middle and at both ends: its norm, of any
# order, is known exactly in float64 from those values alone, and a kernel that drops,
# wraps or double-counts elements past 2^31 misses or adds one of them.

# The flat offsets of the spikes (those inside the tensor), and their values: small
# integers of both signs, exact in every float dtype, whose squares' sum is exact in
# float32; the last element's the largest in magnitude (an infinity norm that drops the
# elements past 2^31 misses it).
_SPIKE_OFFSETS = (0, 2**31 - 1, 2**31, 2**32 - 1, 2**32)
_SPIKE_VALUES = (3, -5, 2, -6, 4, 1)
_LAST_SPIKE = -7


def spike_offsets(numel: int) -> list[int]:
    """The offsets holding a spike in a tensor of ``numel`` elements: around 2^31 and
    2^32, the middle (past the scaled 2^31 of the sizes drawn where --max-bytes allows no
    2^31) and the last."""
    return sorted({o for o in (*_SPIKE_OFFSETS, numel // 2, numel - 1) if 0 <= o < numel})


def spike_values(numel: int) -> list[int]:
    """The spikes' values, offset by offset (spike_offsets)."""
    count = len(spike_offsets(numel))
    return [_SPIKE_VALUES[k % len(_SPIKE_VALUES)] for k in range(count - 1)] + [_LAST_SPIKE] * (count > 0)


def spiked(carrier: torch.Tensor) -> torch.Tensor:
    """A dense tensor of ``carrier``'s shape, dtype and device (the carrier: a stride-0
    view of one element, whose value is not read), zero but for the spikes. (A repro
    script carries its source: plain torch.)"""
    out = torch.zeros(tuple(carrier.shape), dtype=carrier.dtype, device=carrier.device)
    flat = out.view(-1)
    offsets = spike_offsets(flat.numel())
    flat[torch.tensor(offsets, device=carrier.device)] = torch.tensor(
        spike_values(flat.numel()), dtype=carrier.dtype, device=carrier.device)
    return out


def _spike_carrier(t: torch.Tensor) -> bool:
    """An input that stands for a spiked tensor: more elements than a real input of the
    class holds (the strategies make it a stride-0 view of one element)."""
    return t.numel() > LARGE_REAL_NUMEL


def _foreach_norm_of_spikes(*ts, **kw):
    """``torch._foreach_norm`` of the list, each large input made dense and spiked on its
    device first."""
    return torch._foreach_norm([spiked(t) if _spike_carrier(t) else t for t in ts], **kw)


def spikes_norm(numel: int, ord=2) -> float:
    """The ``ord``-norm of a spiked tensor of ``numel`` elements, in float64 from its
    spikes alone (every other element is 0)."""
    values = [abs(float(v)) for v in spike_values(numel)]
    if ord == 0:
        return float(len(values))
    if ord == math.inf:
        return max(values)
    if ord == -math.inf:
        return 0.0 if numel > len(values) else min(values)
    return sum(v ** ord for v in values) ** (1.0 / ord)


def _foreach_norm_of_spikes_reference(*ts, **kw):
    """The CPU side: the analytic norm of each spiked tensor (the host makes none of it),
    eager CPU's of the others, one list."""
    out = []
    for t in ts:
        if _spike_carrier(t):
            dtype = kw.get("dtype") or t.dtype
            out.append(torch.tensor(spikes_norm(t.numel(), kw.get("ord", 2)), dtype=torch.float64).to(dtype))
        else:
            out.append(torch._foreach_norm([t], **kw)[0])
    return out


# Device memory an element of the spiked tensor may need: itself (up to 4 bytes), the
# kernel's per-chunk partials, and the reference's nothing.
SPIKED_BYTES_PER_ELEMENT = 8
_SPIKED_TAILS = ((), (3,), (64,), (1000,))


def _spiked_list_shapes(draw, budget: ShapeBudget):
    """The spiked tensor (first: shrinking keeps it) of 2^31 - 1 to 2^31 + 2 or 2^32 - 1
    to 2^32 + 2 elements where --max-bytes allows SPIKED_BYTES_PER_ELEMENT an element (else
    about 2^22: the scaled size CI runs), flat or with a short last dim, then 0 to 2 small
    tensors."""
    from ..large_sizes import BOUNDARIES, MEDIUM
    from ..recipes import max_bytes
    limit = max(1, max_bytes() // SPIKED_BYTES_PER_ELEMENT)
    targets = tuple(t for t in BOUNDARIES if t + (t >> 10) <= limit) or (min(MEDIUM, limit),)
    target = draw(integers_once(0, len(targets) - 1))
    tail = draw(sampled_once(_SPIKED_TAILS))
    per = math.prod(tail)
    rows = targets[target] // per
    # just below, at and past the boundary in elements (a flat tensor of 2^31 + 1: the report's)
    numel_shift = draw(integers_once(-1, 2)) if not tail else draw(integers_once(-1, 1))
    big = ((targets[target] + numel_shift,) if not tail else (rows + numel_shift, *tail))
    small_budget = dataclasses.replace(budget, max_numel=min(budget.max_numel, 64), allow_empty=False)
    others = tuple(fit([draw_side(draw, small_budget) for _ in range(draw_rank(draw, small_budget, 0, 3))],
                       small_budget) for _ in range(draw(integers_once(0, 2))))
    return (big, *others)


def _spiked_norm_args(draw, shapes, dtypes):
    """An order the fused kernels take (2, 1, inf; 0 and -inf fall back), or the default;
    sometimes a wider ``dtype=``."""
    ords = (2, 1, math.inf, 0, -math.inf)
    how = draw(integers_once(0, len(ords)))
    out = {} if how == len(ords) else {"ord": ords[how]}
    out.update(_accumulate_dtype(floating_only=True)(draw, shapes, dtypes))
    return out


register(OpSpec(
    name="foreach_norm" + HUGE_SUFFIX, family=FAMILY, fn=_foreach_norm_of_spikes, shapes=_spiked_list_shapes,
    dtypes=("float32", "float16", "bfloat16"), args=_spiked_norm_args,
    doc="the foreach norm of a dense tensor past 2^31 or 2^32 elements made on the device, zero but for known "
        "values around 2^31, 2^32, the middle and the ends (its norm known exactly), and 0 to 2 small tensors "
        "(pytorch#169930)",
    allow_specials=False, allow_nonfinite=False, rtol_scale=16, atol_scale=16,
    semantics=ORDER | {"tensor-list", "large"}, reference_fn=_foreach_norm_of_spikes_reference,
    size_class=SIZE_CLASS, base="foreach_norm"))
