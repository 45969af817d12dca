"""Results past 2^31 elements that no cut into rows reaches, judged on samples (issue 38).

The ``@huge`` class (large_sizes.py) judges an op whose row i of the result depends on
row i of its inputs: a few blocks of rows, against eager CPU on those rows alone. Two
kinds of op escape that cut, and are sampled here instead:

- **A boolean mask's selection**, ``x[mask]`` (pytorch/pytorch#164048: CUDA's gather of
  the selected slices launched one block per 4,096 bytes of a slice on a grid dim
  limited to 65,535, so a slice of more than 268,431,360 bytes failed). Row k of the
  result is the input's row at the k-th true position of the mask, which depends on
  every mask element before it. The mask here is the unbounded ``index_hash`` bool
  (recipes.index_hash_values), a function of the index with a period of 65,521: where
  its k-th true position lies is known in closed form (:class:`MaskCount`), so the
  reference builds, for the result's rows at its flat boundaries (0, 2^31 - 1, 2^31,
  2^32 - 1, 2^32, the last, rows 65,535 and 65,536), the input rows they come from and
  the mask there, from the hash, without the rest. A slice too long to hold on the host
  (one of 2^29 elements) is compared on windows of its columns (:func:`column_windows`).
- **A random draw** (pytorch/pytorch#155293: MPS ``torch.rand`` of a 5-D bfloat16 tensor
  of 2^31 elements fails with an internal error, where 2^30 works). There is no reference
  to compare with: windows of the draw (:func:`rng_windows`: the start, the end, the
  first element of slices 1 and the last along dim 0, and a window across every power
  of two from 2^16 on, so across 2^31 and 2^32) are judged by the distribution oracle
  (oracles/distribution.py: in range, not constant, no run of values that repeats
  another, each window uniform, a plausible mean), on a few tens of thousands of
  elements on the host.

Sizes are drawn as the ``@huge`` class draws them: past 2^31 and 2^32 elements where
``--max-bytes`` allows (about 2^22 elsewhere, the path CI runs).
"""
from __future__ import annotations

import math

import torch

from . import dtypes as dt
from .large_sizes import BOUNDARIES, BYTES_PER_ELEMENT, MEDIUM, boundary_blocks
from .opspec import ShapeBudget, integers_once, sampled_once
from .recipes import DEVICE_GENERATED, index_hash_values, max_bytes

# -- a boolean mask's selection --------------------------------------------------------------

# The unbounded index_hash's bools repeat every MASK_PERIOD indices (h = (40503 i + seed)
# mod 65,521 is a bijection of i mod 65,521, true where h is a multiple of 3): a third of
# the positions, MASK_TRUE_PER_PERIOD of every period, whatever the seed.
MASK_PERIOD = 65521
MASK_TRUE_PER_PERIOD = -(-MASK_PERIOD // 3)
# Device memory one element of ``x`` may need: itself (up to 2 bytes), the mask (1 byte a
# row: a row of one element), the selection's int64 indices (8 bytes a selected row), the
# result (up to 2 bytes), and the kernels' temporaries.
MASK_BYTES_PER_ELEMENT = 16
# A slice of at most this many elements is compared whole; a longer one on windows of
# WINDOW_HALF columns either side of its first and last element, of each power of two
# within it, and of the columns the flat boundaries fall on.
COLUMNS_WHOLE = 4096
WINDOW_HALF = 8
# CUDA's gather of a selected slice (pytorch#164048): one block per 4,096 bytes on a grid
# dim of at most 65,535 blocks (campaign notes and tests count the slices past it).
GATHER_BLOCK_BYTES = 4096
GRID_DIM_LIMIT = 65535



def _merged(intervals) -> list[tuple[int, int]]:
    """Half-open intervals (a, b), sorted, those that overlap or touch joined."""
    windows: list[list[int]] = []
    for a, b in sorted(intervals):
        if windows and a <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], b)
        else:
            windows.append([a, b])
    return [(a, b) for a, b in windows]

def mask_targets(limit: int) -> tuple[int, ...]:
    """Element counts of ``x`` to draw near: 2^31 and 2^32 (the input's offsets), and the
    counts whose selection (a third of the rows) passes 2^31 and 2^32 (the result's), where
    ``limit`` elements fit with a margin; else about 2^22."""
    wanted = set(BOUNDARIES) | {-(-b * MASK_PERIOD // MASK_TRUE_PER_PERIOD) for b in BOUNDARIES}
    return tuple(sorted(t for t in wanted if t + (t >> 10) <= limit)) or (min(MEDIUM, limit),)


# Trailing dims of x: a few elements a row (rows past 2^31 elements: the selection's
# count, the result's offsets), or a long slice (pytorch#164048's (4, 87, 1056, 736)).
_ROW_TAILS = ((), (3,), (64,), (4, 4), (2, 3, 4), (1, 64, 1, 3))
_SLICE_TAILS = ((), (736,), (1056, 736), (87, 1056, 736))
_SLICE_ROWS = (4, 2, 3, 8)


def mask_shapes(draw, budget: ShapeBudget) -> tuple:
    """(x, mask) for ``x[mask]`` with a mask over x's dim 0: many rows of a few elements,
    or a few rows of long slices (a mask of 2 to 8 elements), within ``--max-bytes`` at
    MASK_BYTES_PER_ELEMENT an element (shrinking goes to one long dim of rows)."""
    limit = max(1, max_bytes() // MASK_BYTES_PER_ELEMENT)
    target = draw(sampled_once(mask_targets(limit)))
    tails_rank = max(0, min(budget.max_rank, 5) - 1)
    if draw(sampled_once(("rows", "slices"))) == "rows":
        tail = draw(sampled_once(tuple(t for t in _ROW_TAILS if len(t) <= tails_rank) or ((),)))
        rows = max(1, target // max(1, math.prod(tail)) + draw(integers_once(-1, 2)))
        return ((rows, *tail), (rows,))
    rows = draw(sampled_once(_SLICE_ROWS))
    per_row = max(1, target // rows)
    rest = draw(sampled_once(tuple(t for t in _SLICE_TAILS if len(t) < max(1, tails_rank)
                                   and math.prod(t) <= per_row) or ((),)))
    first = max(1, per_row // max(1, math.prod(rest)) + draw(integers_once(0, 1)))
    return ((rows, first, *rest), (rows,)) if tails_rank else ((rows * first,), (rows * first,))


class MaskCount:
    """Where a 1-D boolean mask's true positions are, from its recipe: in closed form for
    the unbounded ``index_hash`` (periodic, see MASK_PERIOD), else from its values made on
    the host (a small mask, a triage probe's)."""

    def __init__(self, recipe):
        values = recipe.values
        if values.distribution in DEVICE_GENERATED and not values.specials and recipe.dtype == "bool":
            self.period = MASK_PERIOD
            one = index_hash_values(values.seed, 0, MASK_PERIOD, torch.bool, "cpu")
        else:
            one = recipe.materialize("cpu").reshape(-1).to(torch.bool)
            self.period = max(1, one.numel())
        self.length = recipe.numel
        self.true_at = one.nonzero().view(-1).tolist()
        self.per_period = len(self.true_at)
        self._before = [0] + torch.cumsum(one.to(torch.int64), 0).tolist()

    def before(self, row: int) -> int:
        """How many true positions lie in ``[0, row)``."""
        q, m = divmod(row, self.period)
        return q * self.per_period + self._before[m]

    def position(self, k: int) -> int:
        """The position of the k-th true element (counted from 0)."""
        q, m = divmod(k, self.per_period)
        return q * self.period + self.true_at[m]


def column_windows(per_row: int) -> list[tuple[int, int]]:
    """Column ranges ``[a, b)`` of a flattened slice of ``per_row`` elements that are
    compared: all of it up to COLUMNS_WHOLE, else windows of WINDOW_HALF columns either
    side of its first and last column, of each power of two inside it (a 32-bit or
    block-count offset wraps at one), and of the columns that the flat boundaries 2^31
    and 2^32 (of the input and of the result: both rows start at multiples of the slice)
    fall on; merged, in order. (Plain Python: a repro script carries its source.)"""
    if per_row <= COLUMNS_WHOLE:
        return [(0, per_row)]
    points = [0, per_row - 1]
    p = 1 << 12
    while p < per_row:
        points.append(p)
        p *= 2
    for o in (2**31, 2**32):
        points.append(o % per_row)
    return _merged((max(0, c - WINDOW_HALF), min(per_row, c + WINDOW_HALF)) for c in points)


def selection_rows_of(y: torch.Tensor) -> torch.Tensor:
    """The part of a selection ``y = x[mask]`` that is compared: the rows of its boundary
    blocks (boundary_blocks of its shape as (rows, slice)), each whole where a slice has
    at most COLUMNS_WHOLE elements, else as (rows, the column windows' elements). Cut on
    the device where ``y`` lies; no kernel of ours reads past 2^31 (slices at offsets)."""
    count = y.shape[0]
    per_row = 1
    for n in y.shape[1:]:
        per_row *= n
    blocks = boundary_blocks((count, per_row))
    columns = column_windows(per_row)
    if per_row <= COLUMNS_WHOLE:
        return torch.cat([y[a:b] for a, b in blocks]) if blocks else y[:0]
    flat = y.reshape(count, per_row)
    rows = torch.cat([flat[a:b] for a, b in blocks]) if blocks else flat[:0]
    return torch.cat([rows[:, a:b] for a, b in columns], dim=1)


def selection_input_rows(case) -> list[tuple[int, int]]:
    """The rows ``[a, b)`` of ``x`` (and of the mask) whose selected rows are the ones
    :func:`selection_rows_of` keeps: for each boundary block of the result's rows, the
    input rows from its first selected row's position to its last's."""
    x, mask = case.inputs[0], case.inputs[1]
    count = MaskCount(mask)
    selected = count.before(x.shape[0])
    per_row = math.prod(x.shape[1:])
    return [(count.position(a), count.position(b - 1) + 1) for a, b in boundary_blocks((selected, per_row))]


def _values_at(recipe, rows: list[tuple[int, int]], columns: list[tuple[int, int]]) -> torch.Tensor:
    """The logical values of ``recipe`` (dim 0 its rows) at those rows and columns of its
    flattened slices, as (rows, columns), on the CPU, without the rest."""
    per_row = math.prod(recipe.shape[1:])
    if recipe.values.distribution in DEVICE_GENERATED:
        parts = [torch.cat([recipe.hash_block(r * per_row + a, b - a, "cpu") for a, b in columns])
                 for first, last in rows for r in range(first, last)]
        return torch.stack(parts) if parts else torch.empty((0, sum(b - a for a, b in columns)),
                                                            dtype=dt.to_torch(recipe.dtype))
    whole = recipe.materialize("cpu").reshape(recipe.shape[0], per_row)
    picked = torch.cat([whole[a:b] for a, b in rows]) if rows else whole[:0]
    return torch.cat([picked[:, a:b] for a, b in columns], dim=1)


def selection_reference_inputs(case) -> list[torch.Tensor]:
    """The CPU reference's (x, mask) of a ``getitem_mask@huge`` case: the input rows whose
    selection the compared rows are (selection_input_rows) and the mask there, made from
    the hash; a long slice cut to its column windows (the base op on them is the compared
    part). A few dozen rows of the host's memory."""
    x, mask = case.inputs[0], case.inputs[1]
    rows = selection_input_rows(case)
    per_row = math.prod(x.shape[1:])
    if per_row <= COLUMNS_WHOLE and x.values.distribution in DEVICE_GENERATED:
        cut_x = x.rows_values(rows)
    elif per_row <= COLUMNS_WHOLE:
        whole = x.materialize("cpu")
        cut_x = torch.cat([whole[a:b] for a, b in rows]) if rows else whole[:0]
    else:
        cut_x = _values_at(x, rows, column_windows(per_row))
    return [cut_x, _values_at(mask, rows, [(0, 1)]).reshape(-1).to(torch.bool)]


def _reference_blocks(case) -> dict:
    """{input: its blocks of rows} a repro script cuts from the device's inputs for the
    reference (slices compared whole only: a long slice's column windows have no such
    cut)."""
    if math.prod(case.inputs[0].shape[1:]) > COLUMNS_WHOLE:
        return {}
    rows = selection_input_rows(case)
    return {0: rows, 1: rows}


selection_reference_inputs.blocks = _reference_blocks


def slice_blocks(shape: tuple, itemsize: int) -> int:
    """The blocks of GATHER_BLOCK_BYTES one selected slice of ``x`` of ``shape`` needs
    (pytorch#164048's grid dim: more than GRID_DIM_LIMIT fails)."""
    return -(-math.prod(shape[1:]) * itemsize // GATHER_BLOCK_BYTES)


# -- a random draw ----------------------------------------------------------------------------

# Elements of each window of a draw that is judged.
RNG_WINDOW = 2048
# The first power of two a window is placed across (65,536: a grid dim's limit).
RNG_FIRST_POWER = 16
RNG_DTYPES = ("bfloat16", "float16", "float32")
# Trailing dims by rank, rank 1 first (where shrinking goes): (128, 64, 64, 64, 64) is
# pytorch#155293's 5-D bfloat16 tensor of 2^31 elements.
_RNG_TAILS = {1: ((),), 2: ((64,), (1000,), (3,)), 3: ((64, 64), (3, 1000)),
              4: ((64, 64, 64), (1, 1000, 3)), 5: ((64, 64, 64, 64), (1, 64, 64, 64), (3, 5, 64, 64))}


def rng_shapes(draw, budget: ShapeBudget) -> tuple:
    """The shape of a draw (the input that carries it: a stride-0 view of one element),
    of ranks 1 to 5, just below, at and past 2^31 or 2^32 elements where ``--max-bytes``
    allows BYTES_PER_ELEMENT an element, else about 2^22."""
    limit = max(1, max_bytes() // BYTES_PER_ELEMENT)
    targets = tuple(t for t in BOUNDARIES if t + (t >> 10) <= limit) or (min(MEDIUM, limit),)
    target = draw(sampled_once(targets))
    ranks = tuple(r for r in sorted(_RNG_TAILS) if r <= max(1, min(budget.max_rank, 5)))
    tails = tuple(t for t in _RNG_TAILS[draw(sampled_once(ranks))] if math.prod(t) <= target)
    tail = draw(sampled_once(tails or ((),)))
    first = max(1, target // max(1, math.prod(tail)) + draw(integers_once(-1, 2)))
    return ((first, *tail),)


def rng_windows(numel: int, first_dim: int) -> list[tuple[int, int]]:
    """Flat ranges ``[a, b)`` of a draw of ``numel`` elements (``first_dim`` along dim 0)
    that are judged: RNG_WINDOW elements at the start and at the end, at the first element
    of slice 1 and of the last slice along dim 0 (pytorch#147667: slices that repeat the
    first), and across each power of two from 2^RNG_FIRST_POWER on below ``numel`` (a
    counter or an offset held in 32 bits, or in fewer, wraps at one); merged, in order.
    (Plain Python: a repro script carries its source.)"""
    if numel <= 0:
        return []
    width, half = RNG_WINDOW, RNG_WINDOW // 2
    starts = [0, numel - width]
    if first_dim > 1:
        starts += [numel // first_dim, (first_dim - 1) * (numel // first_dim)]
    p = 1 << RNG_FIRST_POWER
    while p < numel:
        starts.append(p - half)
        p *= 2
    return _merged((max(0, s), min(numel, max(0, s) + width)) for s in starts)


def windows_of(out: torch.Tensor) -> torch.Tensor:
    """The judged windows of a draw (rng_windows of its shape), one after the other, cut
    where it lies (slices: no kernel of ours reads past 2^31)."""
    flat = out.reshape(-1)
    first = out.shape[0] if out.dim() else 1
    return torch.cat([flat[a:b] for a, b in rng_windows(flat.numel(), first)])


def window_count(shape: tuple) -> int:
    """The elements :func:`windows_of` keeps of a draw of ``shape``."""
    return sum(b - a for a, b in rng_windows(math.prod(shape), shape[0] if shape else 1))


# -- a range ----------------------------------------------------------------------------------
#
# pytorch#197673: CUDA torch.arange of int64 with a length past 2^32 returns wrong values
# (a kernel whose element index, or whose length, is held in 32 bits). Element i of
# arange(start, end, step) is start + i * step, a formula: the reference computes it with
# Python integers at the judged positions (no kernel of CPU's), exactly for int64, and for
# a floating dtype as the exact value rounded once to float64 and then to the dtype. A
# device computes start + step * i in its accumulation type (float32 on CUDA for float32,
# float16 and bfloat16: i itself is rounded there), a few of the dtype's ulps from the
# exact value where start and step have one sign (no cancellation: the floating draws
# keep start >= 0 < step), within the values oracle's tolerance of the dtype (float32:
# 1.3e-6 relative, about 20 ulps); a wrapped index or length is wrong by 2^31 steps.
# float16 is left out: past 65,504 its values are inf, and a range of 2^31 passes it.

HUGE_RANGE_DTYPES = ("int64", "float32", "bfloat16", "float64")
# int64 starts where a value passes 32 bits or double's 2^53 (each with a small offset and
# a sign drawn), and steps: ones, small ones, wide ones whose values pass 2^53 at 2^32
# elements (|start| + n * |step| stays below 2^62: every value fits in int64).
RANGE_INT_STARTS = (0, 0, 2**31, 2**32, 2**40, 2**53)
RANGE_INT_STEPS = (1, 1, 1, 2, 3, 7, 2**16 + 1, 2**21 + 3)
# Floating starts and steps of one sign (no cancellation: see above), binary fractions
# and not (0.1), values past 2^24 and 2^31 (float32 holds integers exactly up to 2^24).
RANGE_FLOAT_STARTS = (0, 0, 0.5, 1, 3.25, 1000.5, 2**24, 2**31)
RANGE_FLOAT_STEPS = (1, 1, 0.5, 0.25, 2, 3, 0.1, 1.5)


# Lengths a range is drawn near: 2^31, 2^32 (pytorch#197673's int64 N > 2^32) and 2^33
# (a length held in 32 bits wraps to a small one there), and how far past them: a length
# just below, at and past each, or a block of 4,097 past it (a kernel's tile past the wrap).
RANGE_LENGTHS = (*BOUNDARIES, 2**33)
RANGE_PAST = (1, 0, -1, 2, 4097)


def range_shapes(draw, budget: ShapeBudget) -> tuple:
    """The length of a range, as the 1-D shape of the input that carries it (a stride-0
    view of one element: triage names and shrinks it as an input's dim): near 2^31, 2^32
    or 2^33 elements where ``--max-bytes`` allows BYTES_PER_ELEMENT an element (an int64
    result: 8), else about 2^22."""
    limit = max(1, max_bytes() // BYTES_PER_ELEMENT)
    targets = tuple(t for t in RANGE_LENGTHS if t + (t >> 10) <= limit) or (min(MEDIUM, limit),)
    return ((max(1, draw(sampled_once(targets)) + draw(sampled_once(RANGE_PAST))),),)


def range_args(draw, shapes, dtypes) -> dict:
    """``start`` and ``step`` of a range (its length is the input's): int64's past 2^31,
    2^32 and 2^53 with either sign, and negative steps; a floating dtype's of one sign,
    not always binary fractions."""
    if dtypes[0] == "int64":
        start = draw(sampled_once(RANGE_INT_STARTS)) + draw(integers_once(-3, 3))
        start = -start if draw(integers_once(0, 1)) else start
        step = draw(sampled_once(RANGE_INT_STEPS)) * (-1 if draw(integers_once(0, 2)) == 0 else 1)
        return {"start": start, "step": step}
    start, step = draw(sampled_once(RANGE_FLOAT_STARTS)), draw(sampled_once(RANGE_FLOAT_STEPS))
    return {"start": start, "step": step}


def range_end(start, step, n: int):
    """The end that gives arange(start, end, step) ``n`` elements: ``start + n * step``
    for integers; half a step short of it otherwise (the length is ceil((end - start) /
    step) in double, which a rounded start + n * step could push one further). (Plain
    Python: a repro script carries its source.)"""
    if isinstance(start, int) and isinstance(step, int):
        return start + n * step
    return start + (n - 0.5) * step


def range_windows(n: int) -> list[tuple[int, int]]:
    """Positions ``[a, b)`` of a range of ``n`` elements that are judged: those of a draw
    (rng_windows: the start, the end, and across every power of two from 2^16, so 2^31 -
    1, 2^31, 2^32 - 1 and 2^32)."""
    return rng_windows(n, 1)


def range_formula(start, step, n: int, dtype: torch.dtype) -> torch.Tensor:
    """start + i * step at the judged positions of a range of ``n`` elements, in
    ``dtype``, computed with Python integers: exact for an integer dtype; for a floating
    one the exact value (start and step as the doubles torch receives, ratios of
    integers) rounded once to float64 by Python's integer division, then to ``dtype``.
    (Plain Python: a repro script carries its source.)"""
    positions = [i for a, b in range_windows(n) for i in range(a, b)]
    if not dtype.is_floating_point:
        return torch.tensor([start + i * step for i in positions], dtype=dtype)
    start_num, start_den = float(start).as_integer_ratio()
    step_num, step_den = float(step).as_integer_ratio()
    den = start_den * step_den
    values = [(start_num * step_den + i * step_num * start_den) / den for i in positions]
    return torch.tensor(values, dtype=torch.float64).to(dtype)


# -- a lookup (embedding) ---------------------------------------------------------------------
#
# pytorch#188756: MPS index_select and embedding of a weight past 2^31 elements return
# wrong rows for indices past row 2^31 / dim (the row's offset, index * dim, held in 32
# bits). The weight's rows are not the result's rows, so the @huge class's cut into rows
# does not apply; but the result is small (one row per index), so it is compared whole,
# against eager CPU's embedding of the rows looked up alone: those rows made from the
# weight's hash (recipes.index_hash_values), the indices renumbered into them. The indices
# are made from the hash too, in [0, rows): for a weight of 2^32 elements about half of
# them point past row 2^31 / dim.

LOOKUP_DTYPES = ("float16", "bfloat16", "float32")
# Row widths (a width of 1 at 2^32 elements would need indices past 2^31 - 1, which the
# bounded hash does not reach). 3 first, where shrinking goes: a narrow weight keeps more
# than 65,536 rows at any size past 2^21 elements, so that triage names its long dim.
LOOKUP_DIMS = (3, 64, 1000, 4096, 2)
# How many indices, in one or two dims.
LOOKUP_COUNTS = (16, 1, 5, 64, 257)


def lookup_shapes(draw, budget: ShapeBudget) -> tuple:
    """(indices, weight) of an embedding: a few indices (1-D or 2-D), a weight of just
    below, at or past 2^31 or 2^32 elements where ``--max-bytes`` allows BYTES_PER_ELEMENT
    an element (else about 2^22), rows of LOOKUP_DIMS elements."""
    limit = max(1, max_bytes() // BYTES_PER_ELEMENT)
    dim = draw(sampled_once(LOOKUP_DIMS))
    targets = tuple(t for t in BOUNDARIES if t + 2 * dim <= limit) or (min(MEDIUM, limit),)
    rows = max(1, draw(sampled_once(targets)) // dim + draw(integers_once(-1, 2)))
    count = draw(sampled_once(LOOKUP_COUNTS))
    indices = (count,) if draw(integers_once(0, 1)) == 0 or count == 1 else (2, -(-count // 2))
    return (indices, (rows, dim))


def lookup_index_values(shapes, kwargs) -> dict:
    """The indices: from the hash, made on the device, in [0, rows of the weight)."""
    return {"distribution": "index_hash", "low": 0, "high": max(0, shapes[1][0] - 1)}


def lookup_reference_inputs(case) -> list[torch.Tensor] | None:
    """The CPU reference's (indices, weight) of an ``embedding@huge`` case: the weight's
    rows that the indices look up (modulo its rows, as the call takes them), alone, made from
    its hash (sorted, each once), and the indices renumbered into them (same shape and
    dtype); None where the weight is not made from the hash (a small case or a probe's:
    the reference runs on the case whole)."""
    indices, weight = case.inputs[0], case.inputs[1]
    if weight.values.distribution not in DEVICE_GENERATED or weight.rank != 2:
        return None
    idx = indices.materialize("cpu").to(torch.int64).remainder(max(1, weight.shape[0]))
    rows = torch.unique(idx.reshape(-1))
    cut = weight.rows_values(_merged((r, r + 1) for r in rows.tolist()))
    return [torch.searchsorted(rows, idx.contiguous()).to(dt.to_torch(indices.dtype)), cut]


# (a repro script cuts no rows from the device's inputs: the renumbered indices are no cut)
lookup_reference_inputs.blocks = lambda case: {}


# -- bags reduced by max (embedding_bag, mode="max") and its backward ---------------------------
#
# pytorch#188467: CUDA embedding_bag(mode="max")'s backward with int32 indices writes each
# bag's gradient to the weight's row its max came from at the offset row * dim + column,
# held in 32 bits: a row past 2^31 / dim loses its gradient (and it lands elsewhere). The
# forward result is small (a row per bag) and compared whole; the weight's gradient is as
# large as the weight, so it is cut on the device to sampled rows (:func:`bag_judged_rows`:
# every row looked up, where the gradient goes; the boundary blocks of the weight; and the
# rows a looked-up row's offsets reach wrapped at 2^31 and 2^32, where a wrapped write
# lands), judged against :func:`bag_max_formula` on those rows alone, made from the hash:
# max's definition in float64, whose gradient is, at (row r, column c), the sum of the
# upstream gradient at (bag, c) over the bags whose max in column c is row r's. A max that
# two distinct rows of a bag share has no such row (the kernels keep one of them: which
# one is unspecified), so such a case has no gradient verdict (the op's grad_undefined,
# on the rows the reference ran on).

# Row widths: narrow ones, so that a bag's max in a column is rarely shared (the hash's
# floats take 241 values: a bag of two distinct rows ties in a column once in 241). 3
# first, where shrinking goes (more than 65,536 rows at any size past 2^21 elements); no
# width of 1 or 2, whose rows at 2^32 elements would pass int32's indices.
BAG_DIMS = (3, 16, 5, 8, 64)
# Indices in one dim (cut into bags by offsets) or two (bags of equal length): few per
# bag, for the same reason.
BAG_COUNTS = (8, 1, 5, 16)
BAG_ROWS = (4, 1, 16, 8)
BAG_LENGTHS = (2, 1, 3, 4)
# Rows below the weight's last boundary (2^31 or 2^32 elements) the indices start at:
# the rows past it are the last few where the weight is just past 2^31 elements, and a
# bag's max must land there (and sometimes before) for the backward's offset to wrap.
BAG_ROWS_BELOW = 4
# Device memory one element of the weight may need: itself and its gradient (up to 4
# bytes each), and as much again for the kernels' temporaries.
BAG_BYTES_PER_ELEMENT = 16


def bag_shapes(draw, budget: ShapeBudget) -> tuple:
    """(indices, weight, per-sample weights) of an embedding_bag: a few indices (1-D cut
    by offsets, or 2-D bags of equal length), a weight of just below, at or past 2^31 or
    2^32 elements where ``--max-bytes`` allows BAG_BYTES_PER_ELEMENT an element (else about
    2^22), rows of BAG_DIMS elements; the per-sample weights (unused by max: the base op's
    third input) shaped as the indices."""
    limit = max(1, max_bytes() // BAG_BYTES_PER_ELEMENT)
    dim = draw(sampled_once(BAG_DIMS))
    targets = tuple(t for t in BOUNDARIES if t + 2 * dim <= limit) or (min(MEDIUM, limit),)
    rows = max(1, draw(sampled_once(targets)) // dim + draw(integers_once(-1, 2)))
    if draw(integers_once(0, 1)) == 0:
        indices = (draw(sampled_once(BAG_COUNTS)),)
    else:
        indices = (draw(sampled_once(BAG_ROWS)), draw(sampled_once(BAG_LENGTHS)))
    return (indices, (rows, dim), indices)


def bag_args(draw, shapes, dtypes) -> dict:
    """mode="max"; for 1-D indices, offsets cutting them into 1 to 4 bags (empty ones
    among them), the last one the end or not (include_last_offset). No padding_idx and
    no max_norm: the reference's rows are renumbered (a padding row would move), and a
    renorm writes into the weight."""
    out = {"mode": "max"}
    idx = shapes[0]
    if len(idx) == 1:
        n = idx[0]
        bags = draw(integers_once(1, 4))
        cuts = sorted(draw(integers_once(0, n)) for _ in range(bags - 1))
        last = draw(integers_once(0, 1)) == 1
        out["offsets"] = tuple([0] + cuts + ([n] if last else []))
        out["include_last_offset"] = last
    return out


def bag_index_values(shapes, kwargs) -> dict:
    """The indices: from the hash, made on the device, from BAG_ROWS_BELOW rows below the
    weight's last boundary of 2^31 or 2^32 elements (where it passes one) to its last row,
    so that bags' maxima land past row 2^31 / dim (or 2^32 / dim) and before; over all
    its rows where it passes none (CI's size)."""
    rows, dim = shapes[1]
    passed = [b for b in BOUNDARIES if b < rows * dim]
    low = max(0, passed[-1] // max(1, dim) - BAG_ROWS_BELOW) if passed else 0
    return {"distribution": "index_hash", "low": min(low, max(0, rows - 1)), "high": max(0, rows - 1)}


def bag_split(idx: torch.Tensor, offsets=None, include_last_offset: bool = False) -> list[torch.Tensor]:
    """The indices of each bag: the rows of a 2-D ``idx``, else the runs ``offsets`` cut
    (its last entry the end with include_last_offset). (Plain torch: a repro script
    carries its source.)"""
    if idx.dim() == 2:
        return list(idx)
    cuts = list(offsets or (0,))
    ends = cuts[1:] if include_last_offset else cuts[1:] + [idx.numel()]
    return [idx[start:end] for start, end in zip(cuts, ends)]


def bag_max_formula(idx, w, psw, *, offsets=None, include_last_offset=False, mode="mean"):
    """embedding_bag by its definition, in float64 (no embedding_bag kernel): for mode
    "max" each bag's column-wise maximum of its rows (indices taken modulo the weight's
    rows, as the op's call takes them), zeros for an empty bag, rounded once to the
    weight's dtype. Its gradient is max's: at (row r, column c) the sum, in float64, of
    the upstream gradient at (bag, c) over the bags whose max in column c is row r (a row
    twice in a bag is one row: amax splits its share in halves that add up on it). The
    other modes (sum, mean: F.embedding_bag's default, where triage drops ``mode``) and a
    missing ``offsets`` of 1-D indices (an error) as torch defines them, so that an
    ablation compares the same call on both sides."""
    if idx.dim() == 1 and offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    rows, dim = w.shape
    idx = idx.remainder(rows).long() if rows else idx.long()
    wide = w.to(torch.float64)
    reduce = {"max": lambda t: t.amax(0), "sum": lambda t: t.sum(0), "mean": lambda t: t.mean(0)}[mode]
    bags = bag_split(idx, offsets, include_last_offset)
    out = [reduce(wide[b]) if b.numel() else wide.new_zeros(dim) for b in bags]
    return (torch.stack(out) if out else wide.new_zeros((0, dim))).to(w.dtype)


def bag_judged_rows(case) -> list[int]:
    """The weight's rows whose gradient is judged, in order: every row looked up (modulo
    the rows, where the gradient of a bag's max goes), the weight's boundary blocks (rows
    near 0, 65,536, 2^31 / dim, 2^32 / dim and the last: rows no bag reaches, which must
    stay zero), and, for a looked-up row whose offsets row * dim + column pass 2^31 or
    2^32, the rows those offsets reach wrapped there (where a 32-bit offset writes it)."""
    idx, w = case.inputs[0], case.inputs[1]
    rows, dim = w.shape
    if not rows:
        return []
    looked = set(idx.materialize("cpu").to(torch.int64).remainder(rows).reshape(-1).tolist())
    wanted = set(looked) | {r for a, b in boundary_blocks(tuple(w.shape)) for r in range(a, b)}
    for r in looked:
        for bound in BOUNDARIES:
            if (r + 1) * dim > bound:
                wanted |= {(r * dim % bound) // dim, ((r + 1) * dim - 1) % bound // dim}
    return sorted(r for r in wanted if r < rows)


def _bag_hashed(case) -> bool:
    w = case.inputs[1]
    return w.values.distribution in DEVICE_GENERATED and w.rank == 2


def bag_reference_inputs(case) -> list[torch.Tensor] | None:
    """The reference's (indices, weight, per-sample weights) of an
    ``embedding_bag_max@huge`` case: the weight's judged rows (bag_judged_rows) alone,
    made from its hash, the indices (modulo its rows) renumbered into them (same shape and
    dtype); None where the weight is not made from the hash (a small case or a probe's:
    the reference runs on the case whole). A few hundred rows of the host's memory."""
    if not _bag_hashed(case):
        return None
    idx, w, psw = case.inputs
    judged = bag_judged_rows(case)
    cut = w.rows_values(_merged((r, r + 1) for r in judged))
    looked = idx.materialize("cpu").to(torch.int64).remainder(max(1, w.shape[0]))
    renumbered = torch.searchsorted(torch.tensor(judged, dtype=torch.int64), looked.contiguous())
    return [renumbered.to(dt.to_torch(idx.dtype)), cut, psw.materialize("cpu")]


# (a repro script cuts no rows from the device's inputs: the renumbered indices are no
# cut; its reference runs on the whole case)
bag_reference_inputs.blocks = lambda case: {}


def bag_judged_grads(case, inputs, grads, wrt) -> list:
    """``OpSpec.judged_grads`` of ``embedding_bag_max@huge``: the weight's gradient of the
    whole weight cut to its judged rows on the device, before the copy to the host (the
    reference's, of those rows alone, kept as it is); all of it for a small case."""
    if not _bag_hashed(case):
        return grads
    rows = case.inputs[1].shape[0]
    blocks = _merged((r, r + 1) for r in bag_judged_rows(case))
    return [torch.cat([g[a:b] for a, b in blocks]) if i == 1 and g is not None and g.dim() == 2
            and g.shape[0] == rows else g for g, i in zip(grads, wrt)]
