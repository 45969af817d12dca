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
- Every input stays within ``MAX_ELEMENTS`` (2^21 elements, 16 MiB in float64): the rest
  of the shape is drawn within what is left, so the CPU reference runs on the whole
  input and the host's memory per case stays bounded (docs/large-sizes.md).
- Values are small integers (-4..4) unless the op declares its own: a product along
  an inner dim of 131,073 terms is then exact in float32 (at most 16 * 131,073 < 2^24),
  so the reference needs no rounding allowance there. Integers (small ones, and an
  ``int_range`` of indices with its bounds) are made on the device, not drawn on the
  host and moved: ``index_hash`` in those bounds, a hash of each element's index whose
  period (2^31 - 1) reaches every index of a dim of 131,073; the CPU reference gets the
  same values from the same hash, and a repro script carries the hash and makes the
  input on ``device`` (``mpsfuzz.reports.repro``). Other distributions an op declares
  (normal, positive, ...) stay seeded on the host.

The variants are off by default: ``--large`` adds the large class of the ops selected
(``mpsfuzz run --large --ops nn``), ``--ops bmm@large`` names one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import torch

from .opspec import GRAD_DTYPES, LARGE_REAL_NUMEL, OpSpec, ShapeBudget, integers_once, sampled_once
from .recipes import SMALL_INT_BOUNDS, max_bytes

SIZE_CLASS = "large"
SUFFIX = "@large"
SUFFIXES = (SUFFIX, "@huge")       # the class's variants of an op, in the order listed
# "inputs": a dim whose slices are passed as separate tensors (cat_many's pieces: a Metal
# kernel batches a cat's inputs into argument buffers, so their number is a size too).
KINDS = ("batch", "rows", "cols", "inner", "channels", "length", "width", "indices", "inputs")
# Sides drawn, the one shrinking goes to first: just past 65,535 (a grid dim's limit),
# at 2^16, just below it (the control a bug of the boundary passes), twice past it.
SIDES = (65537, 65536, 65535, 131073)
# The most elements one input of a large-class case holds (16 MiB in float64): the CPU
# reference runs on the whole of it.
MAX_ELEMENTS = 2 * LARGE_REAL_NUMEL
# Sides past 2^22 for a dim the op does not work along (Grows.segments): the number of
# slices a kernel sorts, each short (pytorch#183885: MPS argsort of (3, 2^22 + 1) along
# dim 0 is wrong, 2^22 + 1 sorts of 3 elements), just past 2^22 and at it (the control a
# bug of the boundary passes; 2^22 + 1 first, where shrinking goes).
SEGMENT_SIDES = (4194305, 4194304)
# Device memory one element of such a case may need: the input (up to 8 bytes), the sorted
# values and the int64 indices (8 each), and a sort kernel's temporaries.
SEGMENT_BYTES_PER_ELEMENT = 32


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
    # Every dim is dim 0 of its input, and row i of the result (dim 0) depends on row i
    # of these inputs alone, whatever the arguments (a batch of matrices, of signals, an
    # elementwise op's rows): the op also joins the class past 2^31 elements, ``@huge``,
    # judged on blocks of rows (huge_variant).
    sliced: bool = False
    # Whether a later pair's 1 (where the first's size is not 1) is a broadcast that
    # stays 1; not for a convolution's weight, whose 1 in channels is channels/groups.
    broadcasts: bool = True
    # Where the coupling holds for some drawn shapes only: the group applies to those
    # for which this is true (index_add's index count is its source's dim 0 only where
    # dim 0 is the one indexed, which its shapes tell).
    when: Callable[[tuple], bool] | None = None
    # The op only moves its inputs' elements (no tensor it makes is larger than they
    # are together): its cases skip the meta-device check of MAX_RESULT_ELEMENTS, which
    # for cat_many would join 65,537 meta tensors in Python, a second a case.
    rearranges: bool = False
    # Where row i of the result depends on row i of the inputs only under some arguments
    # (a softmax or a scan along a dim other than 0, a loss without reduction): the drawn
    # arguments moved to ones that keep rows apart, ``(shapes, kwargs) -> kwargs``
    # (idempotent). The @huge class draws through it and holds any other arguments
    # (a shrinker's dropped ``dim``) outside the op's declaration (issue 38: more ops in
    # the class past 2^31 elements).
    rows_args: Callable[[tuple, dict], dict] | None = None
    # A share of the @huge cases drawn 5-D and just past 2^32 elements together
    # (pytorch#154828: MPS elementwise ops on a 5-D bfloat16 or float16 tensor of about
    # 2^32 elements): apart, rank 5 and a size past 2^32 each come in a few cases of a
    # hundred, together in almost none.
    five_d_past_2_32: bool = False
    # The group's dim may also take a side of SEGMENT_SIDES (past 2^22) where the op then
    # works along another, short dim (pytorch#183885: argsort of (3, 2^22 + 1) along dim 0):
    # ``(shapes, kwargs) -> kwargs`` moves the drawn arguments off the long dim
    # (idempotent). Half the op's @large cases are drawn so, within
    # MAX_RESULT_ELEMENTS (no tensor past 2^24 elements: the CPU reference runs on the
    # whole case) and --max-bytes at SEGMENT_BYTES_PER_ELEMENT.
    segments: Callable[[tuple, dict], dict] | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}: expected one of {', '.join(KINDS)}")
        if not self.dims or not all(isinstance(d, tuple) and len(d) == 2 for d in self.dims):
            raise ValueError(f"dims={self.dims!r}: expected one or more (input, dim) pairs")
        if self.sliced and any(d != 0 for _, d in self.dims):
            raise ValueError(f"sliced=True with dims={self.dims!r}: rows are dim 0 of each input")
        if self.rows_args is not None and not self.sliced:
            raise ValueError("rows_args without sliced=True: only the @huge class keeps rows apart")
        if self.five_d_past_2_32 and not self.sliced:
            raise ValueError("five_d_past_2_32 without sliced=True: only the @huge class draws past 2^32")
        if self.segments is not None and self.sliced:
            raise ValueError("segments with sliced=True: the @huge class cuts rows, not the slices of a sort")


def grows(kind: str, *dims: tuple[int, int], min_rank: int = 0, sliced: bool = False, broadcasts: bool = True,
          when: Callable[[tuple], bool] | None = None, rearranges: bool = False,
          rows_args: Callable[[tuple, dict], dict] | None = None, five_d_past_2_32: bool = False,
          segments: Callable[[tuple, dict], dict] | None = None) -> Grows:
    return Grows(kind, tuple(dims), min_rank, sliced, broadcasts, when, rearranges, rows_args, five_d_past_2_32,
                 segments)


def dim_off_rows(*, name: str = "dim", new_dim: bool = False) -> Callable[[tuple, dict], dict]:
    """A ``rows_args``: the op's ``name`` argument moved off dim 0 (to the last dim),
    whether written as an int or as a tuple of dims (the others kept); absent or None
    (a full reduction) becomes the last dim. ``new_dim``: the dim counts in the result,
    one more than the input has (stack's)."""
    def move(shapes, kwargs: dict) -> dict:
        rank = len(shapes[0]) + (1 if new_dim else 0)
        value = kwargs.get(name)
        if isinstance(value, (tuple, list)):
            kept = type(value)(d for d in value if d % rank != 0)
            return {**kwargs, name: kept if kept else type(value)((rank - 1,))}
        if value is None or value % rank == 0:
            return {**kwargs, name: -1}
        return kwargs
    return move


def dim_off_long(*, name: str = "dim", default: int = -1, bounded: str | None = None
                 ) -> Callable[[tuple, dict], dict]:
    """A ``segments``: where the op's ``name`` argument (absent: ``default``) points at a
    dim of SEGMENT_SIDES of the first input, it is moved to the longest dim shorter than
    that (the first of equals: dim 0 of #183885's (3, 2^22 + 1)); ``bounded``: an
    argument at most the size of the dim worked along (topk's ``k``), lowered to the new
    dim's size."""
    def move(shapes, kwargs: dict) -> dict:
        shape = tuple(shapes[0]) if shapes else ()
        d = kwargs.get(name, default)
        if len(shape) < 2 or not isinstance(d, int) or not -len(shape) <= d < len(shape) \
                or shape[d] < min(SEGMENT_SIDES):
            return kwargs
        shorts = [i for i, n in enumerate(shape) if n < min(SEGMENT_SIDES)]
        if not shorts:
            return kwargs
        short = max(shorts, key=lambda i: (shape[i], -i))
        out = {**kwargs, name: short}
        if bounded is not None and isinstance(out.get(bounded), int):
            out[bounded] = min(out[bounded], shape[short])
        return out
    return move


def without_reduction(shapes, kwargs: dict) -> dict:
    """A ``rows_args`` for a loss: ``reduction="none"`` (a mean or a sum mixes rows)."""
    return {**kwargs, "reduction": "none"}


def base_op_name(op: str) -> str:
    """The op a size-class variant's name stands for (``bmm@large`` -> ``bmm``)."""
    return op.split("@", 1)[0]


def _dim(shape, d: int) -> int | None:
    """``d`` as a non-negative index into ``shape``, or None where it has no such dim."""
    return d % len(shape) if -len(shape) <= d < len(shape) else None


def applies(group: Grows, shapes) -> bool:
    i, d = group.dims[0]
    return (i < len(shapes) and len(shapes[i]) >= group.min_rank and _dim(shapes[i], d) is not None
            and (group.when is None or group.when(tuple(tuple(s) for s in shapes))))


def grown(shapes, group: Grows, side: int) -> tuple:
    """``shapes`` with ``group``'s dims set to ``side``."""
    out = [list(s) for s in shapes]
    i0, d0 = group.dims[0]
    first = out[i0][_dim(out[i0], d0)]
    for i, d in group.dims:
        if i >= len(out) or (k := _dim(out[i], d)) is None:
            continue
        if group.broadcasts and out[i][k] == 1 and first != 1 or out[i][k] == 0:
            continue                        # broadcast along the group's dim, or empty: stays so
        out[i][k] = side
    return tuple(tuple(s) for s in out)


def segment_limit() -> int:
    """The most elements an input of a case of SEGMENT_SIDES may have: MAX_RESULT_ELEMENTS
    (the host's bound of the class), within --max-bytes at SEGMENT_BYTES_PER_ELEMENT."""
    return min(MAX_RESULT_ELEMENTS, max_bytes() // SEGMENT_BYTES_PER_ELEMENT)


def _segment_shapes(draw, base, spec: OpSpec, budget: ShapeBudget, groups: list) -> tuple | None:
    """A case whose ``segments`` group is set to a side of SEGMENT_SIDES, the rest of the
    first input's shape (2 or more dims) within segment_limit(); None where no side fits.
    The small case is drawn as if the grown dim took none of the room, then its longest
    other dim halved until the case fits, and where the other dims are all 1 the first
    takes 2 or more (a sort of one element is no sort; the sorts' shapes are any
    shapes)."""
    side = draw(sampled_once(SEGMENT_SIDES))
    limit = segment_limit()
    if limit < 2 * side:
        return None
    small = ShapeBudget(min_rank=max(2, budget.min_rank, spec.min_rank), max_rank=min(budget.max_rank, 4),
                        max_side=min(budget.max_side, 4), allow_empty=False, max_numel=4 * (limit // side))
    drawn = base(draw, small)
    fitting = [g for g in groups if applies(g, drawn)]
    if not fitting:
        return drawn
    group = fitting[0] if len(fitting) == 1 else draw(sampled_once(fitting))
    out = [list(s) for s in grown(drawn, group, side)]
    i, d = group.dims[0]
    d = _dim(out[i], d)
    others = [j for j in range(len(out[i])) if j != d]
    while math.prod(out[i]) > limit:
        k = max(others, key=lambda j: out[i][j])
        out[i][k] = max(1, out[i][k] // 2)
    if all(out[i][j] == 1 for j in others):
        out[i][others[0]] = draw(integers_once(2, limit // out[i][d]))
    return tuple(tuple(s) for s in out)


def _large_shapes(spec: OpSpec):
    base = spec.shapes
    segmented = [g for g in spec.grows if g.segments is not None]

    def shapes(draw, budget: ShapeBudget) -> tuple:
        # (half the cases past 2^22 slices where the op declares it, the last choice,
        # so that shrinking leaves it)
        if segmented and budget.max_rank >= 2 and draw(integers_once(0, 1)) == 1:
            out = _segment_shapes(draw, base, spec, budget, segmented)
            if out is not None:
                return out
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


# The most elements any tensor a large-class case makes may have, its result or an
# intermediate: a declaration that grows a dim one input broadcasts along would make
# (65,537, 65,537) of a (65,537, 1) and a (65,537,) (mse_loss's did, inside a loss that
# returns one number, and a test process was killed for its memory).
MAX_RESULT_ELEMENTS = 1 << 24


def on_meta(fn, shapes, dtypes, kwargs: dict, mode=None):
    """``fn``'s result for inputs of these shapes and dtypes on the meta device (no
    memory), under ``mode`` if given; None where it cannot tell (no meta kernel, or an
    error the case will show anyway)."""
    from . import dtypes as dt
    from .recipes import resolve_kwargs
    try:
        inputs = [torch.empty(s, dtype=dt.to_torch(d), device="meta") for s, d in zip(shapes, dtypes)]
        if mode is None:
            return fn(*inputs, **resolve_kwargs(tuple(kwargs.items())))
        with mode:
            return fn(*inputs, **resolve_kwargs(tuple(kwargs.items())))
    except Exception:
        return None


def largest_tensor(fn, shapes, dtypes, kwargs) -> int | None:
    """The most elements of any tensor ``fn`` makes for these shapes, intermediates
    included: run on the meta device under a dispatch mode that looks at each (None
    where it cannot tell)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Largest(TorchDispatchMode):
        most = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            sizes = [t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            self.most = max([self.most, *sizes])
            return out
    seen = Largest()
    return None if on_meta(fn, shapes, dtypes, kwargs, seen) is None else seen.most


def _segments_args(base, spec: OpSpec):
    """The op's argument builder, then its arguments moved off a dim of SEGMENT_SIDES where
    a group declares how (``Grows.segments``)."""
    moves = [g.segments for g in spec.grows if g.segments is not None]
    if not moves:
        return base

    def args(draw, shapes, dtypes) -> dict:
        kwargs = base(draw, shapes, dtypes) if base else {}
        for move in moves:
            kwargs = move(shapes, kwargs)
        return kwargs
    return args


def _bounded_args(spec: OpSpec):
    """The op's argument builder (its arguments moved off a dim of SEGMENT_SIDES where the
    op declares how), then the case given up (a Hypothesis rejection, rare) where a tensor
    it makes would pass MAX_RESULT_ELEMENTS (unchecked where every group declares that the
    op only rearranges its inputs)."""
    base = _segments_args(spec.args, spec)
    if all(g.rearranges for g in spec.grows):
        return base

    def args(draw, shapes, dtypes) -> dict:
        from hypothesis import reject
        kwargs = base(draw, shapes, dtypes) if base else {}
        made = largest_tensor(spec.fn, shapes, dtypes, kwargs)
        if made is not None and made > MAX_RESULT_ELEMENTS:
            reject()
        return kwargs
    return args


# The distributions whose integers the large class makes on the device instead.
HASHED = ("small_int", "int_range")


def hashed(asked: dict) -> dict:
    """An input's resolved value declaration with its integers made from the hash
    (``index_hash`` in the same bounds: small_int's -4..4 unless it sets others); other
    distributions, and an int_range without both bounds (its range is the dtype's,
    unknown here), as declared."""
    dist, low, high = asked.get("distribution"), asked.get("low"), asked.get("high")
    if dist == "small_int":
        low = SMALL_INT_BOUNDS[0] if low is None else low
        high = SMALL_INT_BOUNDS[1] if high is None else high
    if dist not in HASHED or low is None or high is None:
        return asked
    return {**asked, "distribution": "index_hash", "low": low, "high": high}


def _hashed_values(entry):
    """An ``input_values`` entry (None: small integers, a distribution's name, or a
    function of the shapes and arguments) whose integers are made on the device."""
    def values(shapes, kwargs) -> dict:
        if entry is None or isinstance(entry, str):
            return hashed({"distribution": entry or "small_int"})
        return hashed(dict(entry(shapes, kwargs)))
    return values


def large_variant(spec: OpSpec) -> OpSpec:
    """``spec``'s large class: same call, references and judges, its declared dims grown."""
    own = list(spec.input_values)
    count = len(spec.input_dtypes) or 16     # (an op of any number of inputs: cat's)
    values = tuple(_hashed_values(own[i] if i < len(own) else None) for i in range(count))
    return replace(spec, name=spec.name + SUFFIX, shapes=_large_shapes(spec), args=_bounded_args(spec),
                   input_values=values,
                   size_class=SIZE_CLASS, base=spec.name,
                   doc=f"{spec.doc} (dims of 65,536 and more: {', '.join(sorted({g.kind for g in spec.grows}))})")


# How an explanation names a long dim of each kind ("`input` has 65,536 or more rows").
_KIND_PHRASES = {"batch": "a batch of {n} or more", "rows": "{n} or more rows", "cols": "{n} or more columns",
                 "inner": "an inner dim of {n} or more", "channels": "{n} or more channels",
                 "length": "a dim of {n} or more elements", "width": "a width of {n} or more",
                 "indices": "{n} or more indices",
                 "inputs": "{n} or more slices, each passed as its own tensor"}


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


# -- past 2^31 elements: the ``@huge`` class, judged on blocks of rows ------------------

HUGE_SUFFIX = SUFFIXES[1]
BOUNDARIES = (2**31, 2**32)
# Device memory one logical element may need: the input (1-2 bytes), a result of up to 4
# bytes, and as much again for a kernel's temporaries.
BYTES_PER_ELEMENT = 12
# The same where the op has a gradient (the case may be the grad variant, drawn after its
# shapes): the input and its gradient (2 + 2 bytes in float16), the result kept for the
# backward, the upstream gradient autograd accumulates from the cut rows and the one made
# from the hash (up to 4 each), and 8 for the backward kernel's temporaries.
GRAD_BYTES_PER_ELEMENT = 24
MEDIUM = 1 << 22            # what --max-bytes allows when no boundary fits (CI's size)
# Rows either side of 65,536 (a grid dim's limit), besides the boundaries of the elements.
_ROW_BOUNDARIES = (65535, 65536)
# 1- and 2-byte dtypes: 2^31 elements in 2 to 4 GB, and values (index_hash: small
# integers, quarters up to 30 for floats) whose products and short sums are exact.
HUGE_DTYPES = ("float16", "bfloat16", "int8", "uint8", "bool")


def boundary_blocks(shape: tuple, *others: tuple) -> list[tuple[int, int]]:
    """Blocks ``[a, b)`` of rows (dim 0) that hold the elements at flat offsets 0,
    2^31 - 1, 2^31, 2^32 - 1, 2^32 and the last, of ``shape`` and of each of ``others``
    (shapes of as many rows: a result's, whose rows may be wider), and rows 65,535 and
    65,536, with a row either side; merged, in order."""
    # (Plain loops, no math.prod: a repro script carries this function's source.)
    if not shape or shape[0] == 0:
        return []
    rows = shape[0]
    sizes = []
    for s in (shape, *others):
        numel = 1
        for n in s:
            numel *= n
        sizes.append(numel if s and s[0] == rows else 0)
    if sizes[0] == 0:
        return [(0, min(rows, 3))]
    wanted = {r for r in _ROW_BOUNDARIES if r < rows}
    for numel in (n for n in sizes if n):
        per_row = numel // rows
        offsets = {0, numel - 1} | {o + d for o in BOUNDARIES for d in (-1, 0) if 0 <= o + d < numel}
        wanted |= {o // per_row for o in offsets}
    blocks: list[list[int]] = []
    for r in sorted(wanted):
        a, b = max(0, r - 1), min(rows, r + 2)
        if blocks and a <= blocks[-1][1]:
            blocks[-1][1] = max(blocks[-1][1], b)
        else:
            blocks.append([a, b])
    return [(a, b) for a, b in blocks]


def _huge_shapes(spec: OpSpec, group: Grows, bytes_per_element: int = BYTES_PER_ELEMENT):
    base = spec.shapes

    def shapes(draw, budget: ShapeBudget) -> tuple:
        # (ranks to 5: a 5-D bfloat16 input past 2^32 elements, pytorch#154828; where the
        # group declares it, a third of the cases are that joint form, the last choice, so
        # that shrinking leaves it)
        joint = group.five_d_past_2_32 and budget.max_rank >= 5 and draw(integers_once(0, 2)) == 2
        small = ShapeBudget(min_rank=5 if joint else max(1, spec.min_rank, group.min_rank),
                            max_rank=min(budget.max_rank, 5), max_side=min(budget.max_side, 4), allow_empty=False,
                            max_numel=64)
        drawn = base(draw, small)
        if not applies(group, drawn):
            return drawn
        grown_inputs = [i for i, _ in group.dims if i < len(drawn) and drawn[i]]
        per_row = max(max(1, math.prod(drawn[i][1:])) for i in grown_inputs)
        limit = max_bytes() // bytes_per_element
        targets = tuple(t for t in BOUNDARIES if t + 2 * per_row <= limit) or (min(MEDIUM, limit),)
        if joint and targets[-1] == BOUNDARIES[-1]:
            # just past 2^32 elements: one or two rows more
            return grown(drawn, group, targets[-1] // per_row + draw(integers_once(1, 2)))
        target = draw(sampled_once(targets))
        rows = max(1, target // per_row + draw(integers_once(-1, 2)))   # below, at and past it
        return grown(drawn, group, rows)
    return shapes


# Elements of the upstream gradient made at once on the device (int64 index arithmetic:
# 128 MiB of temporaries), as recipes.HASH_CHUNK makes inputs.
UPSTREAM_CHUNK = 1 << 24


def upstream_past_rows(grad, blocks):
    """The upstream gradient of a whole result of the @huge class, for its backward: the
    rows of ``blocks`` as autograd hands them (the executor's seeded upstream gradient of
    the cut rows, which the CPU reference's backward gets too), every other element a
    hash of its flat index made on the device, chunk by chunk (quarters in [-30, 30]), so
    that a backward kernel that reads or writes past 2^31 elements through a wrapped
    32-bit index meets values unlike the ones there (zeros everywhere but the judged rows
    would hide a kernel that reads the wrong zero). The host makes none of it. (A repro
    script carries its source: plain torch.)"""
    full = torch.empty(tuple(grad.shape), dtype=grad.dtype, device=grad.device)
    flat = full.view(-1)
    for start in range(0, flat.numel(), UPSTREAM_CHUNK):
        count = min(UPSTREAM_CHUNK, flat.numel() - start)
        i = torch.arange(start, start + count, dtype=torch.int64, device=grad.device)
        flat[start:start + count].copy_(((i * 40503 % 65521) % 241 - 120).to(torch.float32) / 4)
    for a, b in blocks:
        full[a:b].copy_(grad[a:b])
    return full


def _rows_of(op, group: Grows):
    """The op on the whole inputs, then only the boundary blocks' rows of each result
    (all of it where the case's shapes are outside the group: a small case). A result
    that takes a gradient (the grad variant) gets, in its backward, the upstream gradient
    of upstream_past_rows: the judged rows' own, a hash elsewhere. Its closure holds
    numbers and functions alone: a repro script carries its source."""
    primary, min_rank = group.dims[0][0], max(1, group.min_rank)   # (a sliced group's rows are dim 0)

    def fn(*inputs, **kwargs):
        out = op(*inputs, **kwargs)
        if inputs[primary].dim() < min_rank:
            return out
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        blocks = boundary_blocks(tuple(inputs[primary].shape), *(tuple(o.shape) for o in outs))
        for o in outs:
            if o.requires_grad:
                o.register_hook(lambda g, rows=blocks: upstream_past_rows(g, rows))
        cut = tuple(torch.cat([o[a:b] for a, b in blocks]) for o in outs)
        return cut if isinstance(out, (tuple, list)) else cut[0]
    fn.__name__ = fn.__qualname__ = f"rows_of_{getattr(op, '__name__', 'op')}"
    return fn


def _result_shapes(op, case) -> tuple:
    """The shapes of ``op``'s results for ``case``, from the meta device (none where it
    cannot tell: the input's rows alone are then cut)."""
    out = on_meta(op, [r.shape for r in case.inputs], [r.dtype for r in case.inputs], case.kwargs_dict())
    return tuple(tuple(o.shape) for o in (out if isinstance(out, (tuple, list)) else (out,))
                 if isinstance(o, torch.Tensor))


def _sliced_reference_inputs(op, group: Grows):
    """The CPU reference's inputs: the grown inputs' boundary rows alone (those of the
    result's boundaries too), made from their hash; the others whole (small)."""
    primary = group.dims[0][0]
    sliced = {i for i, _ in group.dims}

    def blocks(case) -> dict[int, list]:
        if not applies(group, [r.shape for r in case.inputs]):
            return {}
        rows = boundary_blocks(case.inputs[primary].shape, *_result_shapes(op, case))
        return {i: rows for i in sliced if i < len(case.inputs) and case.inputs[i].rank
                and case.inputs[i].shape[0] == case.inputs[primary].shape[0]}

    def inputs(case) -> list | None:
        cut = blocks(case)
        if not cut:
            return None                       # a small case: the reference runs on it whole
        return [r.rows_values(cut[i]) if i in cut else r.materialize("cpu") for i, r in enumerate(case.inputs)]
    inputs.blocks = blocks
    return inputs


def _judged_grads(blocks_of):
    """The part of each gradient the ``grads`` oracle compares, given the case, the
    inputs the side ran on and its gradients (``OpSpec.judged_grads``): the gradient of a
    sliced input of the whole size cut to the boundary blocks' rows on the device, before
    the copy to the host (a side whose input is those rows alone, the CPU reference's,
    keeps its own); a gradient of an input without the rows, None on both sides (a sum
    over every row, which no few rows give)."""
    def judged(case, inputs, grads, wrt):
        cut = blocks_of(case)
        if not cut:
            return grads                        # a small case: compared whole
        out = []
        for g, i in zip(grads, wrt):
            if i not in cut:
                out.append(None)
            elif g is not None and g.dim() and g.shape[0] == case.inputs[i].shape[0]:
                out.append(torch.cat([g[a:b] for a, b in cut[i]]))
            else:
                out.append(g)
        return out
    return judged


def _huge_grad(spec: OpSpec, group: Grows) -> tuple[int, ...]:
    """The inputs whose gradient the grad variant of ``spec``'s @huge class judges: the
    sliced ones the op differentiates (none where it has no gradient). Row i of their
    gradient depends on row i of the upstream gradient and the small other inputs alone
    (an elementwise op's, a batch of matrices' or signals'), so the CPU backward of the
    boundary rows is its reference; the other inputs' gradients (a weight's: a sum over
    all 2^31 rows) are not asked for in this class."""
    if not spec.grad or not any(d in GRAD_DTYPES for d in spec.dtypes if d in HUGE_DTYPES):
        return ()
    sliced = sorted({i for i, _ in group.dims})
    return tuple(i for i in sliced if spec.grad_inputs is None or i in spec.grad_inputs)


def _huge_values(entry):
    """An input's values in the @huge class, made on the device: integers an op declares
    in a range (a loss's class indices) from the hash in that range, anything else from
    the unbounded hash (quarters in [-30, 30] for floats: stored corpora depend on it)."""
    if entry is None or isinstance(entry, str):
        return "index_hash"

    def values(shapes, kwargs) -> dict:
        asked = hashed(dict(entry(shapes, kwargs)))
        bounded = asked.get("distribution") == "index_hash" and asked.get("low") is not None
        return ({"distribution": "index_hash", "low": asked["low"], "high": asked["high"]} if bounded
                else {"distribution": "index_hash"})
    return values


def _rows_apart_args(base, group: Grows):
    """The op's argument builder, then its arguments moved to keep rows apart where the
    group declares how (``Grows.rows_args``) and the drawn shapes are the group's."""
    if group.rows_args is None:
        return base

    def args(draw, shapes, dtypes) -> dict:
        kwargs = base(draw, shapes, dtypes) if base else {}
        return group.rows_args(shapes, kwargs) if applies(group, shapes) else kwargs
    return args


def _rows_mixed(group: Grows):
    """``OpSpec.outside`` of a @huge op: why a case's arguments mix the rows the class
    judges apart (a reducer that drops softmax's ``dim``, which then defaults to 0), or
    None: such a case is no input of the class, whatever it returns."""
    if group.rows_args is None:
        return None

    def outside(case) -> str | None:
        shapes = [r.shape for r in case.inputs]
        kwargs = case.kwargs_dict()
        if not applies(group, shapes) or group.rows_args(shapes, dict(kwargs)) == kwargs:
            return None
        return "its arguments mix the rows the large class judges apart"
    return outside


def huge_variant(spec: OpSpec) -> OpSpec | None:
    """``spec`` past 2^31 elements along its sliced group (None where it has none, or no
    1- or 2-byte dtype): inputs made on the device from a hash of each element's index,
    up to 2^31 and 2^32 elements where --max-bytes allows BYTES_PER_ELEMENT an element
    (else about 2^22), the result compared on the boundary blocks' rows only; the CPU
    reference runs on those rows of the inputs alone (host memory: a few rows).

    An op with a gradient also has the grad variant (issue 38: backward kernels index
    with 32 bits and tile wide dims too), judged like the forward: the gradient of the
    sliced inputs (``_huge_grad``) cut to the boundary blocks' rows on the device
    (``judged_grads``), against eager CPU's backward of those rows alone, with the
    executor's seeded upstream gradient of the cut rows; the rest of the whole result's
    upstream gradient is made on the device from a hash (``upstream_past_rows``). Its
    sizes leave GRAD_BYTES_PER_ELEMENT an element for the gradient buffers, whatever
    variant is drawn. Gradients of the other inputs (weights) are not judged here."""
    groups = [g for g in spec.grows if g.sliced]
    dtypes = tuple(d for d in spec.dtypes if d in HUGE_DTYPES)
    if not groups or not dtypes or spec.canonicalise is not None:
        # (a canonicaliser reads the call's inputs beside its results: argmax's gathers
        # from the whole input, on the host, against results cut to a few rows)
        return None
    group = groups[0]
    count = len(spec.input_dtypes) or 1
    wrt = _huge_grad(spec, group)
    reference_inputs = _sliced_reference_inputs(spec.fn, group)
    own = list(spec.input_values)
    return OpSpec(name=spec.name + HUGE_SUFFIX, family=spec.family, fn=_rows_of(spec.fn, group),
                  shapes=_huge_shapes(spec, group, GRAD_BYTES_PER_ELEMENT if wrt else BYTES_PER_ELEMENT),
                  dtypes=dtypes, input_dtypes=spec.input_dtypes,
                  input_values=tuple(_huge_values(own[i] if i < len(own) else None) for i in range(count)),
                  args=_rows_apart_args(spec.args, group), outside=_rows_mixed(group),
                  allow_nonfinite=False, allow_specials=False,
                  min_rank=spec.min_rank, max_rank=spec.max_rank, canonicalise=spec.canonicalise,
                  canonical_kwargs=spec.canonical_kwargs,
                  rtol_scale=spec.rtol_scale, atol_scale=spec.atol_scale, semantics=spec.semantics | {"large"},
                  grad=bool(wrt), grad_inputs=wrt or None, grad_undefined=spec.grad_undefined if wrt else None,
                  judged_grads=_judged_grads(reference_inputs.blocks) if wrt else None,
                  reference_fn=spec.fn, reference_inputs=reference_inputs, grows=(group,),
                  size_class=SIZE_CLASS, base=spec.name,
                  doc=f"{spec.doc} (past 2^31 elements along its {group.kind}, compared on blocks of rows)")
