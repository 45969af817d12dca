"""The cast family: conversions between dtypes (issue 38, pytorch#160744).

- ``copy_``: ``dst.copy_(src)``, the destination and the source each of any dtype (every
  pair: semantics ``dtype-pairs``), the source broadcast into the destination: 0-d in a
  quarter of the cases, else a shape that broadcasts to the destination's (a suffix of
  it, sides of 1), and of the strided layouts a stride-0 expanded view; the destination
  is written in place, with its own layout made on the device (a storage offset, gaps,
  a transposed or permuted view). MPS's copy of a 0-d float32 -1 into a uint8
  destination of more than one element gave 0 where it gave 255 for one element
  (pytorch#160744).
- ``to``: ``x.to(dtype)``, the input of any dtype and ``dtype`` any dtype.

The sources hold ``cast_edges`` values (generation/recipes.py): each integer dtype's
limits and half and one past them, small values of both signs and their fractions, plus
the specials (nan, inf, -0.0, the source dtype's extremes). The result is the source
converted (``OpSpec.converts``): the values oracle compares it where C++ defines the
conversion and gives no verdict where it does not (oracles/conversions.py: a float out of
an integer dtype's range, pytorch#160744's -1.0 into uint8, which a maintainer answered is
undefined and need not match CPU's 255). The jury's reference is the documented conversion
in Python numbers (oracles/jury/formulas/casts.py).
"""
from __future__ import annotations

import torch

from .. import dtypes as dt
from ..opspec import OpSpec, ShapeBudget, any_shape, broadcastable_to, integers_once, register, sampled_once
from ..preparation import preparation
from ..recipes import DtypeArg

FAMILY = "cast"
# Every dtype: eager CPU converts between any two of them (torch 2.11-2.13). The
# destination's dtype is the op's drawn dtype; the source draws its own (dtype-pairs).
# Hypothesis shrinks to the first (float32, the default dtype: a minimised case reads
# "float32 into ..."); uint8, pytorch#160744's destination, is last (Hypothesis draws
# a list's ends more often than its middle).
DTYPES = ("float32", "float64", "float16", "bfloat16", "complex64", "complex128", "complex32",
          "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "bool", "uint8")
assert sorted(DTYPES) == sorted(dt.ALL_DTYPE_NAMES)


def _copy_shapes(draw, budget: ShapeBudget):
    """(destination, source): the destination 0-d in an eighth of the cases, else of 1-6
    dims (a broadcast needs more than one element to go wrong: pytorch#160744's 0-d,
    [1] and [1, 1, 1] destinations were right, [3] and [2, 2] wrong); the source 0-d in
    a quarter of the cases, else a shape that broadcasts to the destination's (the whole
    shape, a suffix of it, sides of 1)."""
    zero_d = draw(integers_once(0, 7)) == 0
    (dst,) = any_shape(1, min_rank=0 if zero_d else 1, max_rank=0 if zero_d else 6)(draw, budget)
    src = () if draw(integers_once(0, 3)) == 0 else broadcastable_to(draw, dst)
    return (dst, src)


@preparation
def writable_destination(dst: torch.Tensor) -> torch.Tensor:
    """``dst`` itself (its storage offset and gaps keep the filler a kernel must not
    write), or a copy where stride-0 dims make several elements share memory (torch
    refuses to write those)."""
    if any(s == 0 and n > 1 for s, n in zip(dst.stride(), dst.shape)):
        return dst.clone()
    return dst


def _copy(dst, src):
    return writable_destination(dst).copy_(src)


def _to(x, dtype):
    return x.to(dtype)


def _target_dtype(draw, shapes, dtypes) -> dict:
    return {"dtype": DtypeArg(draw(sampled_once(DTYPES)))}


register(
    OpSpec(name="copy_", family=FAMILY, fn=_copy, shapes=_copy_shapes, dtypes=DTYPES,
           input_dtypes=(None, None), input_values=(None, "cast_edges"), mutates=(0,), converts=1, semantics=frozenset({"dtype-pairs"}),
           doc="dst.copy_(src) between any two dtypes, src broadcast into dst (0-d, sides of 1, stride-0)"),
    OpSpec(name="to", family=FAMILY, fn=_to, shapes=any_shape(1, max_rank=6), dtypes=DTYPES,
           input_values=("cast_edges",), args=_target_dtype, converts=0,
           doc="x.to(dtype) between any two dtypes"),
)
