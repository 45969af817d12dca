"""Reductions and scans: sums, products, moments, extrema and their indices, norms,
cumulative ops. Inputs go up to 8-D (the budget's max rank) and reduce over one dim,
several dims, or everything.

Indices of extrema are not unique under ties, so the ops that return them are compared
through :func:`~mpsfuzz.fuzzer.catalogue.gather_at_indices` (the input values the
indices point at) and carry the ``ties_unspecified`` semantic.
"""
from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..catalogue import (OpSpec, any_shape, combine_args, dim_arg, expand, first_dtype,
                         gather_at_indices, register)
from ..recipes import DtypeArg

FAMILY = "reduction"

FLOAT = expand("float")
FC = expand("floating_and_complex")
FLOAT_AND_WIDE_COMPLEX = FLOAT + ("complex64", "complex128")
REAL = expand("real")
REAL_BOOL = expand("real_and_bool")
ALL = expand("all")
TIES = frozenset({"ties_unspecified"})


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


def _correction(draw, shapes, dtypes):
    how = draw(st.integers(0, 3))
    return {} if how == 0 else {"correction": how - 1}


def _norm_p(draw, shapes, dtypes):
    return {"p": draw(st.sampled_from((2, 1, "fro", math.inf, 3, 0, -math.inf)))}


def _kthvalue_args(draw, shapes, dtypes):
    shape = shapes[0]
    rank = len(shape)
    dim = draw(st.integers(-rank, rank - 1)) if rank else 0
    size = shape[dim] if rank else 1
    return {"k": draw(st.integers(1, max(1, size))), "dim": dim, "keepdim": draw(st.booleans())}


def _logsumexp_dims(draw, shapes, dtypes):
    # logsumexp needs a dim (an empty tuple is refused)
    return dim_arg(allow_none=False, allow_list=True)(draw, shapes, dtypes)


def _median_input(x, dim):
    """Work around an eager-CPU bug (torch 2.13): median/nanmedian along a dim whose
    stride is 0 (an expanded dim longer than 1) return garbage on CPU, so the reference
    would be wrong. Such inputs are made dense on both sides; other layouts are kept."""
    if x.dim() and x.stride(dim) == 0 and x.size(dim) > 1:
        return x.contiguous()
    return x


# -- specs ------------------------------------------------------------------------------

_idx_values = gather_at_indices()          # (values, indices) outputs

register(
    reduction("sum", lambda x, **kw: torch.sum(x, **kw), ALL,
              "sum over dims, optionally into a given dtype (large reductions: pytorch#148975)",
              args=combine_args(_dims(), _sum_dtype), rtol_scale=16, atol_scale=16),
    reduction("nansum", lambda x, **kw: torch.nansum(x, **kw), REAL_BOOL,
              "sum treating NaN as zero", args=_dims(), rtol_scale=16, atol_scale=16),
    reduction("prod", lambda x, **kw: torch.prod(x, **kw), ALL,
              "product over one dim or everything (up to 8-D)",
              args=dim_arg(), rtol_scale=32, atol_scale=16),
    reduction("mean", lambda x, **kw: torch.mean(x, **kw), FC, "mean over dims",
              args=_dims(), rtol_scale=16, atol_scale=16),
    reduction("nanmean", lambda x, **kw: torch.nanmean(x, **kw), FLOAT, "mean ignoring NaN",
              args=_dims(), rtol_scale=16, atol_scale=16),
    reduction("var", lambda x, **kw: torch.var(x, **kw), FC,
              "variance with a correction (0-d and >4-D inputs included)",
              args=combine_args(_dims(), _correction), rtol_scale=32, atol_scale=32),
    reduction("std", lambda x, **kw: torch.std(x, **kw), FC, "standard deviation",
              args=combine_args(_dims(), _correction), rtol_scale=32, atol_scale=32),
    reduction("var_mean", lambda x, **kw: torch.var_mean(x, **kw), FC,
              "variance and mean in one pass", args=combine_args(_dims(), _correction),
              rtol_scale=32, atol_scale=32),
    reduction("std_mean", lambda x, **kw: torch.std_mean(x, **kw), FC,
              "standard deviation and mean in one pass", args=combine_args(_dims(), _correction),
              rtol_scale=32, atol_scale=32),
    reduction("amax", lambda x, **kw: torch.amax(x, **kw), REAL_BOOL, "max over dims (NaN propagates)",
              args=_dims()),
    reduction("amin", lambda x, **kw: torch.amin(x, **kw), REAL_BOOL, "min over dims (NaN propagates)",
              args=_dims()),
    reduction("aminmax", lambda x, **kw: torch.aminmax(x, **kw), REAL_BOOL, "min and max together",
              args=dim_arg()),
    reduction("max", lambda x: torch.max(x), REAL_BOOL, "max of all elements"),
    reduction("min", lambda x: torch.min(x), REAL_BOOL, "min of all elements"),
    reduction("argmax", lambda x, **kw: torch.argmax(x, **kw), REAL, "index of the max (ties: any max)",
              args=dim_arg(), canonicalise=gather_at_indices(values_at=None, indices_at=None, reducer="amax"),
              semantics=TIES),
    reduction("argmin", lambda x, **kw: torch.argmin(x, **kw), REAL, "index of the min (ties: any min)",
              args=dim_arg(), canonicalise=gather_at_indices(values_at=None, indices_at=None, reducer="amin"),
              semantics=TIES),
    reduction("max_dim", lambda x, dim, keepdim=False: torch.max(x, dim, keepdim=keepdim), REAL_BOOL,
              "max and its index along a dim", args=dim_arg(allow_none=False),
              canonicalise=_idx_values, semantics=TIES),
    reduction("min_dim", lambda x, dim, keepdim=False: torch.min(x, dim, keepdim=keepdim), REAL_BOOL,
              "min and its index along a dim", args=dim_arg(allow_none=False),
              canonicalise=_idx_values, semantics=TIES),
    reduction("median",
              lambda x, dim, keepdim=False: torch.median(_median_input(x, dim), dim, keepdim=keepdim),
              REAL, "lower median and its index along a dim (stride-0 dims made dense: CPU bug)",
              args=dim_arg(allow_none=False), canonicalise=_idx_values, semantics=TIES),
    reduction("median_all", lambda x: torch.median(x), REAL, "lower median of all elements"),
    reduction("nanmedian",
              lambda x, dim, keepdim=False: torch.nanmedian(_median_input(x, dim), dim, keepdim=keepdim),
              REAL, "median ignoring NaN along a dim (stride-0 dims made dense: CPU bug)",
              args=dim_arg(allow_none=False), canonicalise=_idx_values, semantics=TIES),
    reduction("kthvalue", lambda x, k, dim, keepdim=False: torch.kthvalue(x, k, dim, keepdim=keepdim), REAL,
              "k-th smallest value and its index along a dim", args=_kthvalue_args,
              canonicalise=_idx_values, semantics=TIES),
    reduction("any", lambda x, **kw: torch.any(x, **kw), ALL, "any element true", args=_dims()),
    reduction("all", lambda x, **kw: torch.all(x, **kw), ALL, "all elements true", args=_dims()),
    reduction("count_nonzero", lambda x, **kw: torch.count_nonzero(x, **kw), ALL,
              "count of non-zero elements", args=dim_arg(keepdim=False, allow_list=True)),
    reduction("logsumexp", lambda x, dim, keepdim=False: torch.logsumexp(x, dim, keepdim=keepdim),
              FLOAT_AND_WIDE_COMPLEX, "log of the sum of exponentials", args=_logsumexp_dims,
              rtol_scale=16, atol_scale=16),
    reduction("norm", lambda x, p, **kw: torch.norm(x, p, **kw), FC, "p-norm (torch.norm)",
              args=combine_args(_norm_p, dim_arg()), rtol_scale=16, atol_scale=16),
    reduction("cumsum", lambda x, dim: torch.cumsum(x, dim), ALL, "running sum along a dim",
              args=dim_arg(keepdim=False, allow_none=False), rtol_scale=16, atol_scale=16),
    reduction("cumprod", lambda x, dim: torch.cumprod(x, dim), ALL, "running product along a dim",
              args=dim_arg(keepdim=False, allow_none=False), rtol_scale=32, atol_scale=16),
    reduction("logcumsumexp", lambda x, dim: torch.logcumsumexp(x, dim), FLOAT_AND_WIDE_COMPLEX,
              "running log-sum-exp along a dim", args=dim_arg(keepdim=False, allow_none=False),
              rtol_scale=16, atol_scale=16),
    reduction("cummax", lambda x, dim: torch.cummax(x, dim), REAL_BOOL, "running max and its index",
              args=dim_arg(keepdim=False, allow_none=False), canonicalise=_idx_values, semantics=TIES),
    reduction("cummin", lambda x, dim: torch.cummin(x, dim), REAL_BOOL, "running min and its index",
              args=dim_arg(keepdim=False, allow_none=False), canonicalise=_idx_values, semantics=TIES),
)
