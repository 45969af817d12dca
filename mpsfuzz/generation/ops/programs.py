"""Programs: a few ops in one function, as users write them and as a compiler fuses them.

Every other family calls one op; a compiled target (``mps-compiled``, ``cuda-compiled``)
then compiles that one call. Inductor's bugs are often in what it makes of several ops
together: a broadcast then a reduction fused into one kernel, an index it computes for
``arange(...) * t`` in 32 bits because it bounds the range but not the product, a
masked fill feeding a softmax, a residual add feeding a norm (issue 38: pytorch/pytorch
#170360, #175966). Each program here is one function, compiled whole on those targets
and called eagerly elsewhere; eager CPU runs the same function as the reference, and
the jury's decomposition traces it op by op.

Sizes stay within the budget, with a medium side now and then (127-1,025: past a
threadgroup's or a reduction tile's size) where the program reduces.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from ..opspec import OpSpec, ShapeBudget, draw_rank, draw_side, fit, integers_once, register, sampled_once

FAMILY = "programs"

FLOAT = ("float32", "float64", "float16", "bfloat16")
# Sides past a threadgroup's (1,024 threads) or a reduction tile's size, either side of it.
MEDIUM_SIDES = (127, 128, 129, 1023, 1024, 1025)
# The most elements a program's largest intermediate holds (the outer difference's n x m).
MAX_INTERMEDIATE = 1 << 20
# arange starts where a 32-bit index or product goes wrong, and ordinary ones.
STARTS = (0, 1, -7, 2**31 - 3, 2**32 + 1, -2**31)


def program(name: str, fn, shapes, dtypes, doc: str, **kw) -> OpSpec:
    fn.__name__ = fn.__qualname__ = name
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=dtypes, doc=doc, **kw)


def _side(draw, budget: ShapeBudget) -> int:
    """A side within the budget, or one of MEDIUM_SIDES in a third of the draws."""
    if draw(integers_once(0, 2)) == 0:
        return draw(sampled_once(MEDIUM_SIDES))
    return draw_side(draw, budget)


# -- (a[..., :, None] - b[..., None, :]).sum(): a broadcast fused into a reduction -------

def outer_difference_sum(a, b, *, dim=None):
    d = a.unsqueeze(-1) - b.unsqueeze(-2)
    return d.sum() if dim is None else d.sum(dim)


def _outer_shapes(draw, budget: ShapeBudget):
    n, m = _side(draw, budget), _side(draw, budget)
    while n * m > MAX_INTERMEDIATE:
        n, m = max(1, n // 2), max(1, m // 2)
    batch = list(fit([draw_side(draw, budget) for _ in range(draw(integers_once(0, 1)))],
                     ShapeBudget(max_numel=max(1, MAX_INTERMEDIATE // max(1, n * m)))))
    return (tuple(batch + [n]), tuple(batch + [m]))


def _outer_args(draw, shapes, dtypes):
    return {"dim": draw(st.sampled_from((None, -1, -2, (-2, -1))))}


# -- torch.arange(start, start + n) * t: an index range times a tensor -------------------

def arange_times(t, *, start=0):
    n = t.shape[-1] if t.dim() else 1
    return torch.arange(start, start + n, device=t.device, dtype=t.dtype) * t


def _arange_shapes(draw, budget: ShapeBudget):
    rank = draw(integers_once(0, 2))
    return (tuple(fit([_side(draw, budget) for _ in range(rank)], budget)) if rank else (),)


def _arange_args(draw, shapes, dtypes):
    if dtypes[0] != "int64":
        return {}
    return {"start": draw(sampled_once(STARTS))}


def _arange_values(shapes, kwargs):
    """int64: factors whose products with the index pass 2^31 and 2^32 but stay far within
    int64 (a 32-bit product or index wraps; the exact one does not); int32: factors whose
    products stay within int32 (a wrap there is the program's own overflow)."""
    n = max(1, shapes[0][-1] if shapes[0] else 1)
    start = abs(int(kwargs.get("start", 0)))
    if "start" in kwargs:
        bound = min(2**40, (2**62) // (start + n))
        return {"distribution": "int_range", "low": -bound, "high": bound}
    return {"distribution": "int_range", "low": -(2**31 // (4 * n)), "high": 2**31 // (4 * n)}


# -- softmax(x.masked_fill(mask, -inf)): a fill fused into a softmax ---------------------

def masked_softmax(x, mask, *, dim=-1):
    return torch.softmax(x.masked_fill(mask, float("-inf")), dim)


def _rows_of_a_side(limit: int | None = None):
    """Two inputs of one shape: up to 4 dims, the last one a side of ``_side`` (medium
    now and then), fitted to ``limit`` elements (None: the case's budget)."""
    def build(draw, budget: ShapeBudget):
        rank = draw_rank(draw, budget, 1, 4)
        shape = [draw_side(draw, budget) for _ in range(rank - 1)] + [_side(draw, budget)]
        shape = tuple(fit(shape, budget if limit is None else ShapeBudget(max_numel=max(budget.max_numel, limit))))
        return (shape, shape)
    return build


# (a bool mask within the case budget: it has no seeded recipe, and a repro script
# writes it out as a literal)
_masked_shapes = _rows_of_a_side()


def _masked_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    return {"dim": draw(st.integers(-rank, rank - 1))}


# -- layer_norm(x + r): a residual add fused into a norm ---------------------------------

def add_layer_norm(x, r, *, eps=1e-5):
    return F.layer_norm(x + r, x.shape[-1:], eps=eps)


_residual_shapes = _rows_of_a_side(MAX_INTERMEDIATE // 16)


# -- torch.full(t.shape, fill, dtype=t.dtype).sum(): a fill cast, then consumed -----------

def full_sum(t, *, fill_value):
    return torch.full(t.shape, fill_value, dtype=t.dtype, device=t.device).sum()


# Fills of another kind than the dtype, each cast by torch's rules before the sum: an int
# into bool (x != 0) or past a narrow int's positive range (-1 into uint8 is 255), an int
# a float dtype rounds (2^24 + 1 into float32), a float an int dtype truncates. Under
# ``*-dynamic-compiled`` an int fill is a SymInt, whose cast Inductor once dropped
# (pytorch#194062: full((3,), 3, dtype=bool).sum() gave 9). 0 and 1 Dynamo specializes.
_FILLS = {
    "bool": (2, 3, -1, 7, 255, 256, 2**31, 2**40 + 3, -2**62),
    "uint8": (-1, -128, 128, 255, -255, 2, 3),
    "int8": (-128, 127, -1, 2, 100),
    "int16": (-32768, 32767, 300, -129, 2),
    "int32": (2**31 - 1, -2**31, 65537, -3),
    "int64": (2**62 + 1, -2**63, 2**31, 2**32 + 3, -7),
    "float16": (2049, 65504, -3, 0.1, 2.5),
    "bfloat16": (257, 3.0e38, -3, 0.1, 2.5),
    "float32": (2**24 + 1, -3, 0.1, 2.5, 1e30),
    "float64": (2**53 + 1, -3, 0.1, 2.5),
}


def _full_sum_shapes(draw, budget: ShapeBudget):
    rank = draw_rank(draw, budget, 0, 4)
    return (tuple(fit([_side(draw, budget) for _ in range(rank)], budget)),)


def _full_sum_args(draw, shapes, dtypes):
    return {"fill_value": draw(sampled_once(_FILLS[dtypes[0]]))}


register(
    program("outer_difference_sum", outer_difference_sum, _outer_shapes, FLOAT + ("int64", "int32"),
            "(a[..., :, None] - b[..., None, :]).sum(dim): a broadcast fused into a reduction (pytorch#170360)",
            input_dtypes=(None, None), args=_outer_args, grad=True, rtol_scale=16, atol_scale=32, semantics=frozenset({"accumulates"})),
    program("arange_times", arange_times, _arange_shapes, ("int64", "int32", "float32", "float64"),
            "torch.arange(start, start + n) * t: products past 2^31 in int64 (pytorch#175966)",
            args=_arange_args, input_values=(_arange_values,)),
    program("masked_softmax", masked_softmax, _masked_shapes, FLOAT,
            "softmax(x.masked_fill(mask, -inf), dim): fully masked rows are NaN",
            input_dtypes=(None, ("bool",)), args=_masked_args, grad=True, grad_inputs=(0,),
            rtol_scale=4, atol_scale=4),
    program("add_layer_norm", add_layer_norm, _residual_shapes, FLOAT,
            "layer_norm(x + r) over the last dim: a residual add fused into a norm",
            input_dtypes=(None, None), grad=True, rtol_scale=16, atol_scale=32,
            semantics=frozenset({"accumulates"})),
    program("full_sum", full_sum, _full_sum_shapes, tuple(_FILLS),
            "torch.full(t.shape, fill, dtype=t.dtype).sum(): a fill of another kind cast to the dtype, then "
            "summed; under *-dynamic-compiled an int fill is symbolic (pytorch#194062)",
            args=_full_sum_args, rtol_scale=4, atol_scale=4, semantics=frozenset({"accumulates"})),
)
