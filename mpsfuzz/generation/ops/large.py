"""Large sizes: reductions over inputs past 2^31 and 2^32 elements, and over dims of
65,536 or more (issue 14, point 1).

The bugs of this class (a kernel indexing with 32 bits, a grid past Metal's 65,535
threadgroups per dim, a reduction that splits its input wrongly) show only at sizes the
other families never draw. Memory stays small on both sides:

- An input past ``REAL_NUMEL`` elements is a stride-0 view of *one* element: a constant
  tensor of billions of elements that takes a few bytes. These ops reduce, so their
  output stays small too.
- Smaller inputs (a batch of 65,536 rows of a few elements) are real allocations of at
  most ``REAL_NUMEL`` elements, in any layout the strategies draw.
- The CPU reference is never the op on billions of elements (seconds to minutes on
  CPU): for a constant input it is the analytic value (a sum is n·c, a maximum c, an
  argmax 0), its shape and dtype from the op on the meta device; smaller inputs run on
  CPU as usual.

Sizes past 2^31 elements are drawn only within ``--max-bytes`` (see logical_limit):
by default (1 GiB) the family draws dims of 65,536 and more in real allocations; on a
device with the memory, ``--max-bytes 40G`` adds 2^31 and 2^32 elements.

The family is off by default: ``--ops all`` leaves it out, ``--large`` adds it
(``mpsfuzz run --ops large`` also selects it). Sizes are drawn near the boundaries
(2^31 - 1, 2^31, 2^31 + 1, 2^32 ± 1, sides 65,535 / 65,536 / 65,537), smallest first so
that shrinking keeps the smallest size that still fails.
"""
from __future__ import annotations

import math

import torch

from ..opspec import LARGE_REAL_NUMEL as REAL_NUMEL
from ..opspec import OpSpec, gather_at_indices, integers_once, register, sampled_once
from ..recipes import max_bytes

FAMILY = "large"

# Boundary sizes, smallest first (shrinking goes there).
_FLAT = (2**31 + 1, 2**31, 2**31 - 1, 2**32 + 1, 2**32, 2**32 - 1)
_SIDES = (65537, 65536, 65535, 32769, 32768, 131073)
_SMALL = (3, 1, 2, 4, 7)


def logical_limit() -> int:
    """The most elements a drawn input may have: ``--max-bytes`` over 8 bytes an element.
    A stride-0 input takes a few bytes, but a kernel may copy it densely in a wider dtype
    (eager CPU's int32 sum of 2^32 elements allocates 32 GiB of int64), so sizes past
    2^31 are drawn only where --max-bytes says the device has that memory to spare."""
    return max_bytes() // 8


def _fitting(options, limit: int, times: int = 1) -> tuple:
    return tuple(n for n in options if n * times <= limit)


def large_shapes(draw, budget) -> tuple:
    """One input: flat past 2^31/2^32, two sides near 65,536 whose product passes 2^31
    or 2^32, or a batch of 65,536+ rows of a few elements (a real allocation); only
    sizes within logical_limit()."""
    limit = logical_limit()
    kind = draw(integers_once(0, 3))
    if kind == 0 and _fitting(_FLAT, limit):
        return ((draw(sampled_once(_fitting(_FLAT, limit))),),)
    if kind in (1, 2) and _fitting(_SIDES, limit, min(_SIDES) * (max(_SMALL) if kind == 2 else 1)):
        a = draw(sampled_once(_fitting(_SIDES, limit, min(_SIDES) * (max(_SMALL) if kind == 2 else 1))))
        b = draw(sampled_once(_fitting(_SIDES, limit // a // (max(_SMALL) if kind == 2 else 1))))
        # three dims, the batch first: (65,536+, 65,536+, small)
        return ((a, b, draw(sampled_once(_SMALL))),) if kind == 2 else ((a, b),)
    return ((draw(sampled_once(_SIDES)), draw(sampled_once(_SMALL))),)   # a real batch


def _reduce_args(with_keepdim: bool = True):
    def build(draw, shapes, dtypes):
        shape = shapes[0]
        rank = len(shape)
        # Only dims whose reduction leaves a result of at most REAL_NUMEL elements: over
        # the small last dim of (65,537, 65,537, 3) it would keep 4 billion of them, on
        # the device and again in the host's copy (a run on an H100 filled 55 GB of host
        # memory that way).
        numel = math.prod(shape)
        dims = [d for d in range(-rank, rank) if shape[d] and numel // shape[d] <= REAL_NUMEL]
        out = {}
        if dims and draw(integers_once(0, 2)) > 0:   # a third reduce everything
            out["dim"] = draw(sampled_once(tuple(dims)))
            if with_keepdim and draw(integers_once(0, 1)):
                out["keepdim"] = True
        return out
    return build


def is_constant(t: torch.Tensor) -> bool:
    """A stride-0 view of one element: every dim longer than 1 has stride 0."""
    return t.numel() > 0 and all(s == 0 for n, s in zip(t.shape, t.stride()) if n > 1)


def reduced_count(t: torch.Tensor, kwargs: dict) -> int:
    """How many elements each output element reduces."""
    dim = kwargs.get("dim")
    if dim is None:
        return t.numel()
    return t.shape[dim]


def reduced_shape(shape: tuple, kwargs: dict) -> tuple:
    """The shape of a reduction's result, by the rule (the meta device of one torch
    release gave ``vector_norm(x, dim=-1)`` of a 1-D input the shape ``(1,)``)."""
    dim, keepdim = kwargs.get("dim"), kwargs.get("keepdim", False)
    if dim is None:
        return (1,) * len(shape) if keepdim else ()
    d = dim % len(shape)
    return tuple(shape[:d]) + ((1,) if keepdim else ()) + tuple(shape[d + 1:])


def accumulator(dtype: torch.dtype) -> torch.dtype:
    """What eager CPU, CUDA and MPS accumulate a floating reduction in: float32 for the
    16-bit floats and float32, float64 for float64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def constant_reference(fn, value_of):
    """A reference for ``fn`` that needs no full-size computation where its input is a
    constant past REAL_NUMEL elements: ``value_of(c, n, dtype)`` (c the input's one value
    as a 0-d CPU tensor, n the elements each output element reduces, dtype the result's)
    filled into the result's shape. Everything else runs on CPU, the op itself: a
    constant small enough for CPU (what shrinking and triage's probes make of a large
    case) is no place for a formula.

    The value follows the arithmetic of the kernels, not of real numbers: a floating sum
    is n·c in the accumulator's precision, so that n copies of a dtype's max overflow to
    inf as they do on every backend (a mean of them is inf, not max), and a 2-norm sums
    squares that overflow or underflow there. ``reference.analytic`` is the formula
    alone, at any size (tests compare it with CPU on small constants)."""
    def analytic(*inputs, **kwargs):
        x = inputs[0]
        # The result's dtype from the op itself on CPU, on one element per dim.
        dtype = fn(*[t.new_zeros((1,) * t.dim()) for t in inputs], **kwargs).dtype
        c = x[(0,) * x.dim()].reshape(())
        value = value_of(c, reduced_count(x, kwargs), dtype)
        if not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool):
            value = _wrapped(int(value), dtype)   # integer sums wrap around, as torch's do
        # A stride-0 view: the executor's copy to the host checks its size (a result of
        # billions of elements is no case) before making it dense.
        return torch.as_tensor(value).to(dtype).expand(reduced_shape(x.shape, kwargs))

    def reference(*inputs, **kwargs):
        x = inputs[0]
        if is_constant(x) and x.numel() > REAL_NUMEL:
            return analytic(*inputs, **kwargs)
        return fn(*inputs, **kwargs)
    reference.analytic = analytic
    return reference


def _reduced_size(x: torch.Tensor, idx: torch.Tensor) -> int:
    """The size of the dim an index output ``idx`` indexes into (all of ``x`` for a 0-d
    index of a full reduction)."""
    if idx.dim() == 0:
        return x.numel()
    xs, shape = tuple(x.shape), tuple(idx.shape)
    sizes = [xs[d] for d in range(len(xs)) if shape in (xs[:d] + xs[d + 1:], xs[:d] + (1,) + xs[d + 1:])]
    return max(sizes) if sizes else x.numel()


def _index_canonical(reducer: str):
    """argmax/argmin compared through the values their indices point at (ties: any
    index of an equal element is right, as in the reduction family); for a constant
    input of billions of elements without gathering from it (a dense copy): every
    index in range points at its one value."""
    general = gather_at_indices(values_at=None, indices_at=None, reducer=reducer)

    def canonicalise(inputs, outputs):
        x, idx = inputs[0], outputs
        if not is_constant(x):
            return general(inputs, outputs)
        in_range = (idx >= 0) & (idx < _reduced_size(x, idx))
        value = x[(0,) * x.dim()]
        return (torch.where(in_range, value, torch.zeros((), dtype=x.dtype, device=x.device)), in_range)
    return canonicalise


def _wrapped(value: int, dtype: torch.dtype) -> int:
    bits = dtype.itemsize * 8
    if dtype.is_signed:
        return (value + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
    return value % 2**bits


def _truth(c: torch.Tensor) -> bool:
    return bool(c != 0) or bool(c.isnan())        # NaN is true, as in torch.any


def _sum(c: torch.Tensor, n: int, dtype: torch.dtype):
    if not dtype.is_floating_point:
        return int(c) * n                         # exact; wrapped to the dtype by the caller
    return c.to(accumulator(c.dtype)) * n         # overflows to inf as the accumulator does


def _mean(c: torch.Tensor, n: int, dtype: torch.dtype):
    return _sum(c, n, dtype) / n


def _same(c: torch.Tensor, n: int, dtype: torch.dtype):
    return c


def _norm(c: torch.Tensor, n: int, dtype: torch.dtype):
    if n == 1:
        return c.abs()                                # CPU squares nothing over a dim of one
    square = c.to(accumulator(c.dtype)).abs() ** 2    # may overflow to inf or underflow to 0
    return (square * n).sqrt()


def large(name: str, fn, value_of, dtypes, doc: str, *, args=None, **kw) -> OpSpec:
    # Sums of billions (or a batch of 65,536+ rows) of terms: the arbiter's accumulation
    # bound for half precision where the reference is CPU's (a real batch).
    kw.setdefault("semantics", frozenset({"large", "accumulates"}))
    # Billions of terms: a sum's rounding grows with log2(n) roundoffs; the bugs this
    # family looks for are off by factors (half the input summed) or garbage.
    kw.setdefault("rtol_scale", 64)
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=large_shapes, dtypes=dtypes, doc=doc,
                  args=args or _reduce_args(), reference_fn=constant_reference(fn, value_of),
                  min_rank=1, **kw)


FLOAT = ("float32", "float16", "bfloat16")
REAL = FLOAT + ("int32", "int64", "int8", "uint8")
ANY = REAL + ("bool",)

register(
    large("sum_large", torch.sum, _sum, ANY,
          "sum of an input past 2^31/2^32 elements or over a dim of 65,536+"),
    large("mean_large", torch.mean, _mean, FLOAT,
          "mean of an input past 2^31/2^32 elements"),
    large("amax_large", torch.amax, _same, REAL,
          "amax of an input past 2^31/2^32 elements"),
    large("amin_large", torch.amin, _same, REAL,
          "amin of an input past 2^31/2^32 elements"),
    large("any_large", torch.any, lambda c, n, dtype: _truth(c), ANY,
          "any of an input past 2^31/2^32 elements"),
    large("all_large", torch.all, lambda c, n, dtype: _truth(c), ANY,
          "all of an input past 2^31/2^32 elements"),
    large("argmax_large", torch.argmax, lambda c, n, dtype: 0, REAL,
          "argmax of an input past 2^31/2^32 elements (ties: any index of the max)",
          canonicalise=_index_canonical("amax"), semantics=frozenset({"large", "ties_unspecified"})),
    large("argmin_large", torch.argmin, lambda c, n, dtype: 0, REAL,
          "argmin of an input past 2^31/2^32 elements (ties: any index of the min)",
          canonicalise=_index_canonical("amin"), semantics=frozenset({"large", "ties_unspecified"})),
    large("count_nonzero_large", torch.count_nonzero,
          lambda c, n, dtype: n if _truth(c) else 0, ANY,
          "count_nonzero of an input past 2^31/2^32 elements", args=_reduce_args(with_keepdim=False)),
    large("vector_norm_large", torch.linalg.vector_norm, _norm, FLOAT,
          "2-norm of an input past 2^31/2^32 elements"),
)
