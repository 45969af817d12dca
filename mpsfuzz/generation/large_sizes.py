"""The large size class of every family (issue 31): dims of 65,536 and more wherever a
kernel may map them onto a limited dimension.

Metal and MPSGraph limit one dimension of a grid, a threadgroup count, a texture or an
NDArray to 65,535; a kernel that maps a batch, a row count, an inner dim, a channel count
or a sequence length onto such a dimension goes wrong past it, in ops far from the
reductions the ``large`` family covers. So an op declares, in its table, which of its
dims may grow (:class:`Grows`: a kind and the ``(input, dim)`` pairs that share one
size), and :func:`large_variant` makes from it the op's large class, ``<op>@large``:

- The op's own shape builder draws the case with a small budget (what it draws is
  valid for the op), then one declared group of dims is set to a side near 65,536
  (``SIDES``: 65,537 first, where shrinking goes), every dim of the group alike, so
  coupled sizes (``bmm``'s batch in both inputs) stay equal. The op's argument builder
  runs afterwards and sees the grown shapes (a softmax ``dim`` along the long dim or
  across it).
- Every input stays within ``MAX_ELEMENTS`` (2^20 elements, 8 MiB in float64): the rest
  of the shape is drawn within what is left, so the CPU reference runs on the whole
  input and the host's memory per case stays bounded (README: "Large sizes").
- Values are small integers (-4..4) unless the op declares its own: a product along
  an inner dim of 131,073 terms is then exact in float32 (at most 16 * 131,073 < 2^24),
  so the reference needs no rounding allowance there.

The variants are off by default: ``--large`` adds the large class of the ops selected
(``mpsfuzz run --large --ops nn``), ``--ops bmm@large`` names one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .opspec import LARGE_REAL_NUMEL, OpSpec, ShapeBudget, sampled_once

SIZE_CLASS = "large"
SUFFIX = "@large"
KINDS = ("batch", "rows", "cols", "inner", "channels", "length", "width", "indices")
# Sides drawn, the one shrinking goes to first: just past 65,535 (a grid dim's limit),
# at 2^16, just below it (the control a bug of the boundary passes), twice past it.
SIDES = (65537, 65536, 65535, 131073)
# The most elements one input of a large-class case holds (16 MiB in float64): the CPU
# reference runs on the whole of it.
MAX_ELEMENTS = 2 * LARGE_REAL_NUMEL


@dataclass(frozen=True)
class Grows:
    """Dims that share one size and may grow past 65,536: ``dims`` holds ``(input, dim)``
    pairs (``dim`` may be negative, counted from the end). The first pair must exist
    in a drawn case for the group to apply; a later pair whose input lacks the dim, or
    holds a broadcast 1 (or an empty 0, as cat's legacy empty inputs) where the first
    does not, is left as drawn."""
    kind: str
    dims: tuple[tuple[int, int], ...]
    # The first input's fewest dims for the group to apply (a loss's batch dim is dim 0
    # only where the input is batched).
    min_rank: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}: expected one of {', '.join(KINDS)}")
        if not self.dims or not all(isinstance(d, tuple) and len(d) == 2 for d in self.dims):
            raise ValueError(f"dims={self.dims!r}: expected one or more (input, dim) pairs")


def grows(kind: str, *dims: tuple[int, int], min_rank: int = 0) -> Grows:
    return Grows(kind, tuple(dims), min_rank)


def _dim(shape, d: int) -> int | None:
    """``d`` as a non-negative index into ``shape``, or None where it has no such dim."""
    return d % len(shape) if -len(shape) <= d < len(shape) else None


def applies(group: Grows, shapes) -> bool:
    i, d = group.dims[0]
    return i < len(shapes) and len(shapes[i]) >= group.min_rank and _dim(shapes[i], d) is not None


def grown(shapes, group: Grows, side: int) -> tuple:
    """``shapes`` with ``group``'s dims set to ``side``."""
    out = [list(s) for s in shapes]
    i0, d0 = group.dims[0]
    first = out[i0][_dim(out[i0], d0)]
    for i, d in group.dims:
        if i >= len(out) or (k := _dim(out[i], d)) is None:
            continue
        if out[i][k] == 1 and first != 1 or out[i][k] == 0:
            continue                        # broadcast along the group's dim, or empty: stays so
        out[i][k] = side
    return tuple(tuple(s) for s in out)


def _large_shapes(spec: OpSpec):
    base = spec.shapes

    def shapes(draw, budget: ShapeBudget) -> tuple:
        side = draw(sampled_once(SIDES))
        # What is left for the other dims (a builder's own floors may take more: the
        # side is then lowered, or the case stays small).
        room = max(1, LARGE_REAL_NUMEL // side)
        small = ShapeBudget(min_rank=max(1, budget.min_rank, spec.min_rank), max_rank=min(budget.max_rank, 4),
                            max_side=min(budget.max_side, 4), allow_empty=False, max_numel=room)
        drawn = base(draw, small)
        groups = [g for g in spec.grows if applies(g, drawn)]
        if not groups:
            return drawn                    # (a rank the op's groups do not reach: a small case)
        group = draw(sampled_once(groups))
        for s in sorted(SIDES, key=lambda s: (s != side, s)):
            out = grown(drawn, group, s)
            if input_elements(out) <= MAX_ELEMENTS:
                return out
        return drawn
    return shapes


def _small_integers(shapes, kwargs) -> dict:
    return {"distribution": "small_int"}


def large_variant(spec: OpSpec) -> OpSpec:
    """``spec``'s large class: same call, references and judges, its declared dims grown."""
    own = list(spec.input_values)
    count = len(spec.input_dtypes) or 16     # (an op of any number of inputs: cat's)
    values = tuple(own[i] if i < len(own) and own[i] is not None else _small_integers for i in range(count))
    return replace(spec, name=spec.name + SUFFIX, shapes=_large_shapes(spec), input_values=values,
                   size_class=SIZE_CLASS, base=spec.name,
                   doc=f"{spec.doc} (dims of 65,536 and more: {', '.join(sorted({g.kind for g in spec.grows}))})")


# How an explanation names a long dim of each kind ("`input` has 65,536 or more rows").
_KIND_PHRASES = {"batch": "a batch of {n} or more", "rows": "{n} or more rows", "cols": "{n} or more columns",
                 "inner": "an inner dim of {n} or more", "channels": "{n} or more channels",
                 "length": "a dim of {n} or more elements", "width": "a width of {n} or more",
                 "indices": "{n} or more indices"}


def kind_of(spec: OpSpec | None, shapes, i: int, d: int) -> str | None:
    """The declared kind of dim ``d`` of input ``i`` (None where no group names it)."""
    for group in (spec.grows if spec is not None else ()):
        for j, e in group.dims:
            if j == i and j < len(shapes) and _dim(shapes[j], e) == d:
                return group.kind
    return None


def long_dim_phrase(spec: OpSpec | None, shapes, names: list[str], boundary: int) -> str:
    """"`input` has 65,536 or more rows (dim 0: 65,537 here)": the first dim of
    ``boundary`` or more elements, named by its declared kind."""
    for i, shape in enumerate(shapes):
        for d, n in enumerate(shape):
            if n >= boundary:
                kind = kind_of(spec, shapes, i, d)
                what = _KIND_PHRASES[kind].format(n=f"{boundary:,}") if kind else f"a dim of {boundary:,} or more"
                return f"`{names[i]}` has {what} (dim {d}: {n:,} here)"
    return f"a dim is {boundary:,} or longer"


def input_elements(shapes) -> int:
    return max((math.prod(s) for s in shapes), default=0)
