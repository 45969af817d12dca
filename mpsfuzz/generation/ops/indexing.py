"""Indexing, gathering, scattering, masking, joining, splitting and view-like ops.

Index tensors are int64 (int32 where torch accepts it) and draw their values in range of
the dim they index through ValueBuilders that read the shapes and the drawn ``dim``.

Duplicate indices are allowed everywhere (expanded index tensors make them even more
likely), so two kinds of order dependence are handled explicitly:

* Overwriting ops (scatter with a src tensor, index_copy, index_put/put without
  accumulate, ``x[idx] = v``): which write wins at a position written several times is
  unspecified. :func:`written_by_one_of` compares every position written at most once
  exactly, and at positions written several times only whether the value is one of the
  candidates.
* Accumulating ops (scatter_add, scatter(reduce=...), scatter_reduce sum/prod/mean,
  index_add, index_put/put with accumulate): the order of the additions is unspecified.
  Their value inputs are small integers without specials (``[-4, 4]``; ``[-2, 2]`` for
  products, so every partial product is a power of two) and the number of contributions
  per position is capped (``_ACC_MAX``), so every partial sum is an exactly representable
  integer in every float dtype (bfloat16 included) and the result does not depend on the
  order. They still carry the ``order-dependent`` semantic.

searchsorted/bucketize need sorted inputs. ``searchsorted_sorter`` keeps the sequence
unsorted on the device and passes ``sorter=`` (argsort computed on the CPU, so no extra
op runs on the device under test). The plain forms sort the sequence on the CPU and write
it back into the same (awkward) device tensor with ``copy_``; only the copy runs on the
device. NaN is excluded from both (its position in a binary search is unspecified).
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..grad_points import near, slack, wide
from ..huge_samples import mask_shapes, selection_reference_inputs, selection_rows_of
from ..large_sizes import HUGE_DTYPES, HUGE_SUFFIX, SIZE_CLASS, dim_off_rows, grows
from ..opspec import declare_grows
from ..opspec import (REGISTRY, OpSpec, ShapeBudget, any_shape, broadcastable_to, draw_rank, draw_side, expand,
                      first_dtype, fit, prod, register)
from ..preparation import preparation
from ..recipes import DtypeArg

FAMILY = "indexing"

ALL = expand("all")
# flip's CPU kernel lacks these dtypes on dense inputs but has a strided path that takes
# them, so a contiguous copy would raise where the awkward input does not.
FLIPPABLE = tuple(d for d in ALL if d not in ("complex32", "uint16", "uint32", "uint64"))
FLOAT = expand("float")
# Ordered dtypes CPU can search in (uint16/32 through the widened reference; uint64 would
# change order when widened to int64, bool and complex have no searchsorted kernel).
SEARCHABLE = FLOAT + expand("signed") + ("uint8", "uint16", "uint32")
IDX = ("int64", "int32")       # index dtypes where torch takes int32 too
LONG = ("int64",)
BOOL = ("bool",)
# Accumulating ops: most contributions to one position (keeps integer sums exact in
# bfloat16: 4 * (12 + 1) < 256, and products of [-2, 2] within float16's range).
_ACC_MAX = 12
ORDER = frozenset({"order-dependent", "accumulates"})
SLICES = frozenset({"slices-as-inputs"})


def op(name: str, fn, shapes, dtypes, doc: str, **kw) -> OpSpec:
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=expand(dtypes),
                  doc=doc, **kw)


# -- value builders -----------------------------------------------------------------------

def _int_range(low: int, high: int) -> dict:
    return {"distribution": "int_range", "low": low, "high": max(low, high), "allow_specials": False}


def index_values(of: int = 0, *, dim_key: str | None = "dim", negative: bool = False,
                 flat: bool = False, lead_key: str | None = None):
    """Indices in range of input ``of``'s dim ``kwargs[dim_key]`` (or of its numel when
    ``flat``, or of dim ``kwargs[lead_key]`` for advanced indexing): ``[0, n-1]``, or
    ``[-n, n-1]`` where the op takes negative indices."""
    def build(shapes, kwargs):
        shape = shapes[of]
        if flat or (dim_key is not None and kwargs.get(dim_key, 0) is None):
            n = prod(shape)
        elif lead_key is not None:
            n = shape[kwargs.get(lead_key, 0)] if shape else 1
        else:
            d = kwargs.get(dim_key, 0) if dim_key else 0
            n = shape[d] if shape else 1
        n = max(n, 1)
        return _int_range(-n if negative else 0, n - 1)
    return build


def _accumulated(shapes, kwargs) -> dict:
    """Values of accumulating ops: small integers, no specials (exact in any order)."""
    if kwargs.get("reduce") in ("prod", "multiply"):
        return _int_range(-2, 2)
    if kwargs.get("reduce") in ("amax", "amin"):
        return {}
    return _int_range(-4, 4)


def _mostly_zero(shapes, kwargs) -> dict:
    """nonzero/argwhere: a third of the elements zero (specials keep NaN and -0.0)."""
    return {"distribution": "int_range", "low": -1, "high": 1}


# -- shape helpers -------------------------------------------------------------------------

def _shape(draw, budget: ShapeBudget, low: int = 0, high: int = 8) -> tuple[int, ...]:
    rank = draw_rank(draw, budget, low, high)
    return fit([draw_side(draw, budget) for _ in range(rank)], budget)


def _free_dims(shape) -> list[int]:
    """Dims of ``shape`` longer than 0 (indices into them can exist)."""
    return [d for d, n in enumerate(shape) if n > 0]


def _pick_dim(draw, rank: int, choices=None) -> int:
    """A dim among ``choices`` (default: all), sometimes written negatively."""
    if rank == 0:
        return draw(st.sampled_from((0, -1)))
    d = draw(st.sampled_from(sorted(choices) if choices else list(range(rank))))
    return d - rank if draw(st.booleans()) else d


def _norm(d: int, rank: int) -> int:
    return d + max(rank, 1) if d < 0 else d


def _scatter_like_shapes(*, with_src: bool, src_bigger: bool = True, cap: int | None = None):
    """(self, index[, src]) for gather/scatter: index no longer than self in every dim but
    (sometimes) one, which the args builder then picks as ``dim``; src at least index."""
    def build(draw, budget: ShapeBudget):
        x = _shape(draw, budget)
        idx = [draw(st.integers(0, n)) if n else 0 for n in x]
        if x and draw(st.booleans()):
            d = draw(st.integers(0, len(x) - 1))
            idx[d] = draw(st.integers(1 if x[d] else 0, budget.max_side)) if x[d] else 0
        if cap is not None:
            idx = [min(n, cap) for n in idx]
        idx = tuple(idx)
        if not with_src:
            return (x, idx)
        src = idx
        if src_bigger and draw(st.integers(0, 2)) == 0:
            src = fit([n + draw(st.integers(0, 2)) for n in idx], budget)
            src = tuple(max(a, b) for a, b in zip(src, idx))
        return (x, idx, src)
    return build


def _scatter_like_dim(draw, shapes, dtypes) -> dict:
    """The dim where index may be longer than self (if any), else any dim where the
    indices can point somewhere."""
    x, idx = shapes[0], shapes[1]
    rank = len(x)
    longer = [d for d in range(rank) if idx[d] > x[d]]
    if longer:
        return {"dim": _pick_dim(draw, rank, longer)}
    if prod(idx) > 0:
        return {"dim": _pick_dim(draw, rank, _free_dims(x) or None)}
    return {"dim": _pick_dim(draw, rank)}


def _index_dim_shapes(*, with_src: bool, cap: int | None = None, index_0d: bool = True):
    """(self, index 1-D[, source]) for index_select/index_add/index_copy/index_fill: the
    source shape is self's with the indexed dim replaced by len(index), filled in by the
    args builder's choice of dim (so here source is self's shape with a marker side)."""
    def build(draw, budget: ShapeBudget):
        x = _shape(draw, budget)
        n = draw(st.integers(0, min(budget.max_side, cap or budget.max_side)))
        if not any(x) and x:
            n = 0  # every side is 0: no index can be in range
        if not x:
            n = 1  # a 0-d self takes exactly one index
        idx = () if (index_0d and n == 1 and draw(st.booleans())) else (n,)
        if not with_src:
            return (x, idx)
        # source: self's shape with one dim resized to len(index); the args builder
        # recovers that dim from where the shapes differ.
        rank = len(x)
        if rank == 0:
            return (x, idx, ())
        d = draw(st.sampled_from(_free_dims(x) or list(range(rank)))) if n else draw(st.integers(0, rank - 1))
        src = list(x)
        src[d] = n
        return (x, idx, tuple(src))
    return build


def _index_dim(draw, shapes, dtypes) -> dict:
    x, idx = shapes[0], shapes[1]
    rank = len(x)
    if len(shapes) == 3 and rank:
        src = shapes[2]
        n = prod(idx)
        diff = [d for d in range(rank) if src[d] != x[d]]
        same_len = [d for d in range(rank) if x[d] == n and (n == 0 or x[d] > 0)]
        return {"dim": _pick_dim(draw, rank, diff or same_len or None)}
    if prod(idx) > 0:
        return {"dim": _pick_dim(draw, rank, _free_dims(x) or None)}
    return {"dim": _pick_dim(draw, rank)}


def _fill_value(draw, dtype: str):
    if dtype == "bool":
        return draw(st.booleans())
    if dtype in dt.UNSIGNED:
        return draw(st.sampled_from((0, 1, 7, 200)))
    if dtype in dt.SIGNED:
        return draw(st.sampled_from((0, -1, 7, 100)))
    return draw(st.sampled_from((0.0, -1.5, 2.0, 1e-3, float("nan"), float("inf"), -0.0)))


def _alpha(draw, dtype: str):
    if dtype == "bool":
        return True
    if dtype in dt.UNSIGNED:
        return draw(st.sampled_from((1, 2)))
    if dtype in dt.SIGNED:
        return draw(st.sampled_from((1, 2, -1)))
    return draw(st.sampled_from((1, 2, -1, 0.5)))


# -- the canonicaliser for overwriting ops with duplicate indices ----------------------------

def _comparable(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the CPU in a dtype whose ``==`` is value equality and has a CPU kernel."""
    t = t.detach().cpu()
    if t.dtype == torch.complex32:
        return t.to(torch.complex64)
    if t.dtype in (torch.uint16, torch.uint32, torch.uint64):
        return t.view({torch.uint16: torch.int16, torch.uint32: torch.int32,
                       torch.uint64: torch.int64}[t.dtype])
    return t


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    same = a == b
    if a.is_floating_point() or a.is_complex():
        same = same | (torch.isnan(a) & torch.isnan(b))
    return same


def _contiguous_strides(shape) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return list(reversed(out))


def _grid(shape, dim: int) -> torch.Tensor:
    """arange(shape[dim]) shaped to broadcast along ``dim`` of ``shape``."""
    view = [1] * len(shape)
    view[dim] = shape[dim]
    return torch.arange(shape[dim], dtype=torch.int64).view(view)


def resolve_duplicates(out: torch.Tensor, interpretations) -> tuple:
    """Canonical form of an overwriting op's result where duplicate indices leave the
    winner unspecified. ``interpretations`` lists (positions, candidates): flat indices
    into ``out`` written by the op and the value written at each, once per plausible
    reading of the call (canonicalisers do not see ``dim``; the readings depend only on
    the inputs, so both sides make the same ones). Returns ``out`` with every position
    written more than once (in any reading) zeroed, and a flag per position that is
    False only where the value is none of the candidates in every reading that writes
    it several times; a correct result gives all True whatever its winners."""
    res = out.detach().cpu()
    if not interpretations or res.numel() == 0:
        return res, torch.ones(res.shape, dtype=torch.bool)
    flat = _comparable(res).reshape(-1)
    n = flat.numel()
    any_multi = torch.zeros(n, dtype=torch.bool)
    ok = torch.zeros(n, dtype=torch.bool)
    for positions, candidates in interpretations:
        pos = positions.reshape(-1).to(torch.int64).cpu()
        cand = _comparable(candidates).reshape(-1)
        count = torch.zeros(n, dtype=torch.int64).index_add_(0, pos, torch.ones_like(pos))
        hit = torch.zeros(n, dtype=torch.int64).index_add_(0, pos, _same(cand, flat[pos]).to(torch.int64))
        multi = count > 1
        any_multi |= multi
        ok |= ~multi | (hit > 0)
    canon = torch.where(any_multi.reshape(res.shape), torch.zeros((), dtype=res.dtype), res)
    return canon, ok.reshape(res.shape)


def _in_range(index: torch.Tensor, n: int, negative: bool = False) -> bool:
    if index.numel() == 0:
        return True
    low = -n if negative else 0
    return int(index.min()) >= low and int(index.max()) < n


def _scatter_positions(out_shape, dim: int, index: torch.Tensor) -> torch.Tensor:
    """Flat positions that scatter(dim, index) writes, one per index element."""
    rank = len(out_shape)
    if rank == 0:
        return index.reshape(-1) * 0
    strides = _contiguous_strides(out_shape)
    pos = index * strides[dim]
    for d in range(rank):
        if d != dim:
            pos = pos + _grid(tuple(index.shape), d) * strides[d]
    return pos


def _canon_scatter(inputs, out, kwargs=None):
    """scatter / scatter_ with a src tensor: duplicate indices along dim."""
    index, src = inputs[1].detach().cpu().to(torch.int64), inputs[2].detach().cpu()
    shape, rank = tuple(out.shape), out.dim()
    if index.dim() != rank:
        return out
    dims = [_norm(kwargs["dim"], rank)] if kwargs and "dim" in kwargs else range(max(rank, 1))
    readings = []
    for d in dims:
        if rank and (any(index.shape[k] > shape[k] for k in range(rank) if k != d)
                     or not _in_range(index, shape[d])):
            continue
        cand = src[tuple(slice(0, n) for n in index.shape)] if rank else src
        readings.append((_scatter_positions(shape, d, index), cand))
    return resolve_duplicates(out, readings)


def _canon_index_copy(inputs, out, kwargs=None):
    """index_copy / index_copy_: duplicate entries of the 1-D index."""
    index, src = inputs[1].detach().cpu().to(torch.int64).reshape(-1), inputs[2].detach().cpu()
    shape, rank = tuple(out.shape), out.dim()
    if rank == 0:
        return resolve_duplicates(out, [(index * 0, src.reshape(-1)[:index.numel()])])
    dims = [_norm(kwargs["dim"], rank)] if kwargs and "dim" in kwargs else range(rank)
    readings = []
    for d in dims:
        if (src.dim() != rank or tuple(src.shape[:d]) + tuple(src.shape[d + 1:]) != shape[:d] + shape[d + 1:]
                or src.shape[d] != index.numel() or not _in_range(index, shape[d])):
            continue
        view = [1] * rank
        view[d] = index.numel()
        full = torch.zeros(src.shape, dtype=torch.int64) + index.view(view)
        readings.append((_scatter_positions(shape, d, full), src))
    return resolve_duplicates(out, readings)


def _canon_put(inputs, out, kwargs=None):
    """put / put_ without accumulate: duplicate flat indices."""
    index, src = inputs[1].detach().cpu().to(torch.int64), inputs[2].detach().cpu()
    n = out.numel()
    if n == 0 or not _in_range(index, n, negative=True):
        return resolve_duplicates(out, [])
    return resolve_duplicates(out, [(torch.remainder(index, n), src.reshape(-1))])


def _advanced_positions(out_shape, first: int, indices, gap: int = 0):
    """Flat positions written by ``out[(:,)*first + (i0, (:,)*gap, i1, ...)] = v``, laid
    out like the indexing result (advanced dims in place when adjacent, first when not)."""
    rank = len(out_shape)
    strides = _contiguous_strides(out_shape)
    idx = torch.broadcast_tensors(*indices)
    bshape = tuple(idx[0].shape)
    adv_dims = [first] if len(idx) == 1 else [first, first + 1 + gap]
    adv = torch.zeros(bshape, dtype=torch.int64)
    for d, i in zip(adv_dims, idx):
        adv = adv + torch.remainder(i, max(out_shape[d], 1)) * strides[d]
    others = [d for d in range(rank) if d not in adv_dims]
    if gap:
        layout = [("b", k) for k in range(len(bshape))] + [("d", d) for d in others]
    else:
        layout = ([("d", d) for d in others if d < first] + [("b", k) for k in range(len(bshape))]
                  + [("d", d) for d in others if d > adv_dims[-1]])
    shape = [bshape[k] if kind == "b" else out_shape[k] for kind, k in layout]
    view = [shape[j] if kind == "b" else 1 for j, (kind, _) in enumerate(layout)]
    pos = torch.zeros(shape, dtype=torch.int64) + adv.reshape(view)
    for j, (kind, d) in enumerate(layout):
        if kind == "d":
            pos = pos + _grid(tuple(shape), j) * strides[d]
    return pos


def _advanced_reading(out, values, indices, first=0, gap=0):
    shape = tuple(out.shape)
    dims = [first] if len(indices) == 1 else [first, first + 1 + gap]
    if len(shape) <= dims[-1]:
        return None
    if any(not _in_range(i, shape[d], negative=True) for i, d in zip(indices, dims)):
        return None
    try:
        pos = _advanced_positions(shape, first, indices, gap)
        cand = values.detach().cpu().expand(pos.shape)
    except RuntimeError:  # values do not broadcast to this reading's result
        return None
    return pos, cand


def _canon_index_put(inputs, out, kwargs=None):
    """index_put / index_put_ without accumulate: (x, values, *indices)."""
    indices = [i.detach().cpu().to(torch.int64) for i in inputs[2:]]
    reading = _advanced_reading(out, inputs[1], indices)
    return resolve_duplicates(out, [reading] if reading else [])


def _canon_setitem(inputs, out, kwargs=None):
    """``y[(:,)*lead + (idx,)] = v``: (x, idx, v); ``lead`` is recovered from the shapes."""
    idx = inputs[1].detach().cpu().to(torch.int64)
    leads = [kwargs["lead"]] if kwargs and "lead" in kwargs else range(max(out.dim(), 1))
    readings = [r for r in (_advanced_reading(out, inputs[2], [idx], first=L) for L in leads) if r]
    return resolve_duplicates(out, readings)


# -- wrappers -------------------------------------------------------------------------------

@preparation
def _writable(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself for in-place calls, or a copy where stride-0 dims make several
    elements share memory (torch refuses in-place writes there)."""
    if any(s == 0 and n > 1 for s, n in zip(x.stride(), x.shape)):
        return x.clone()
    return x


def _on_meta(t: torch.Tensor) -> bool:
    """Meta tensors (the executor's dtype probe) have no values to sort or search."""
    return t.device.type == "meta"


def _nonzero(x: torch.Tensor, **kw):
    """torch.nonzero; on meta (no kernel: the result's shape depends on values) a result
    of the right dtype, so that a reference widened from uint16/32/64 is cast back to
    int64 indices and not to the input's dtype."""
    if _on_meta(x):
        if kw.get("as_tuple"):
            return tuple(torch.empty(0, dtype=torch.int64, device=x.device) for _ in range(max(x.dim(), 1)))
        out = torch.empty((0, x.dim()), dtype=torch.int64, device=x.device)
        return kw["out"].resize_(out.shape) if "out" in kw else out
    return torch.nonzero(x, **kw)


@preparation
def _sorted_last(seq: torch.Tensor) -> torch.Tensor:
    """``seq`` sorted along its last dim in place: sorted on the CPU (no sort runs on the
    device under test) and copied back into the same view, so its layout is kept.
    Expanded (stride-0) dims repeat one slice, which is the one sorted."""
    if seq.numel() == 0 or _on_meta(seq):
        return seq
    base = seq
    for d, (s, n) in enumerate(zip(seq.stride(), seq.shape)):
        if s == 0 and n > 1:
            base = base.narrow(d, 0, 1)
    cpu = base.detach().cpu()
    if cpu.dtype in (torch.uint16, torch.uint32):  # no CPU sort kernel: sort a wider copy
        cpu = cpu.to(torch.int64).sort(dim=-1).values.to(cpu.dtype)
    else:
        cpu = cpu.sort(dim=-1).values
    base.copy_(cpu)
    return seq


@preparation
def _cpu_argsort(seq: torch.Tensor) -> torch.Tensor:
    if _on_meta(seq):
        return torch.empty(seq.shape, dtype=torch.int64, device=seq.device)
    cpu = seq.detach().cpu()
    if cpu.dtype in (torch.uint16, torch.uint32):
        cpu = cpu.to(torch.int64)
    return torch.argsort(cpu, dim=-1, stable=True).to(seq.device)


def _index_put(x, v, *idx, accumulate=False):
    return torch.index_put(x, tuple(idx), v, accumulate)


def _index_put_inplace(x, v, *idx, accumulate=False):
    return _writable(x).index_put_(tuple(idx), v, accumulate)


def _subscript(lead: int, *parts, gap: int = 0):
    out = [slice(None)] * lead + [parts[0]]
    if len(parts) > 1:
        out += [slice(None)] * gap + [parts[1]]
    return tuple(out)


def _getitem(x, idx, lead=0):
    return x[_subscript(lead, idx)]


def _getitem2(x, i, j, lead=0, gap=0):
    return x[_subscript(lead, i, j, gap=gap)]


@preparation
def _own_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` for an assignment to write into (the case's input stays as it was)."""
    return x.clone()


def _setitem(x, idx, v, lead=0):
    y = _own_copy(x)
    y[_subscript(lead, idx)] = v
    return y


def _setitem_mask(x, mask, v):
    y = _own_copy(x)
    y[mask] = v
    return y


# -- shape and argument builders for the remaining ops ------------------------------------------

def _flat_index_shapes(*, with_src: bool = False, cap: int | None = None):
    """(x, index[, source]) for take/put: index of any shape (empty when x is); source
    has index's numel, as index's shape or flattened."""
    def build(draw, budget: ShapeBudget):
        x = _shape(draw, budget)
        idx = list(_shape(draw, budget, 0, 3))
        if cap is not None:
            idx = list(fit(idx, ShapeBudget(max_numel=cap)))
        if prod(x) == 0 and prod(idx) > 0:
            idx = idx[:-1] + [0] if idx else [0]
        idx = tuple(idx)
        if not with_src:
            return (x, idx)
        return (x, idx, idx if draw(st.booleans()) else (prod(idx),))
    return build


def _advanced_shapes(k: int, *, with_values: bool, cap: int | None = None, min_extra: int = 0):
    """(x, [values,] i0[, i1]) for index_put: indices broadcast to B and index x's first k
    dims; values broadcast to B + x.shape[k:]."""
    def build(draw, budget: ShapeBudget):
        x = list(_shape(draw, budget, k + min_extra, 6))
        b = list(_shape(draw, budget, 0, 3))
        if cap is not None:
            b = list(fit(b, ShapeBudget(max_numel=cap)))
        if any(n == 0 for n in x[:k]) and prod(b) > 0:
            b = b[:-1] + [0] if b else [0]
        b = tuple(b)
        idx = [b] + [broadcastable_to(draw, b) for _ in range(k - 1)]
        if draw(st.booleans()) and k > 1:
            idx.reverse()
        x = tuple(x)
        if not with_values:
            return (x, *idx)
        return (x, broadcastable_to(draw, b + x[k:]), *idx)
    return build


def _advanced_values(position: int, k_from: int = 0):
    """Indices for input ``position`` into dim ``k_from + (position - first index input)``
    of x; negative indices included."""
    def build(shapes, kwargs):
        n = shapes[0][k_from] if len(shapes[0]) > k_from else 1
        return _int_range(-max(n, 1), max(n, 1) - 1)
    return build


def _getitem_shapes(*, with_values: bool):
    """(x, idx[, v]) for ``x[(:,)*lead + (idx,)]``; v broadcasts to the result for some
    lead, which the args builder picks among those that fit."""
    def build(draw, budget: ShapeBudget):
        x = _shape(draw, budget, 1, 6)
        idx = _shape(draw, budget, 0, 3)
        if not any(x) and prod(idx):
            idx = idx[:-1] + (0,) if idx else (0,)
        if not with_values:
            return (x, idx)
        lead = draw(st.integers(0, len(x) - 1))
        return (x, idx, broadcastable_to(draw, x[:lead] + idx + x[lead + 1:]))
    return build


def _broadcasts(shape, to) -> bool:
    if len(shape) > len(to):
        return False
    return all(a in (1, b) for a, b in zip(reversed(shape), reversed(to)))


def _lead_args(draw, shapes, dtypes):
    x, idx = shapes[0], shapes[1]
    leads = [L for L in range(len(x)) if x[L] > 0 or prod(idx) == 0]
    if len(shapes) == 3:
        leads = [L for L in leads if _broadcasts(shapes[2], x[:L] + idx + x[L + 1:])]
    return {"lead": draw(st.sampled_from(leads or [0]))}


def _getitem2_args(draw, shapes, dtypes):
    x, i, j = shapes
    b = torch.broadcast_shapes(i, j)
    ok = [(L, g) for L in range(len(x)) for g in (0, 1)
          if L + 1 + g < len(x) and (prod(b) == 0 or (x[L] > 0 and x[L + 1 + g] > 0))]
    lead, gap = draw(st.sampled_from(ok or [(0, 0)]))
    return {"lead": lead, "gap": gap}


def _getitem2_values(which: int):
    def build(shapes, kwargs):
        x = shapes[0]
        d = kwargs.get("lead", 0) + (0 if which == 0 else 1 + kwargs.get("gap", 0))
        n = max(x[d] if d < len(x) else 1, 1)
        return _int_range(-n, n - 1)
    return build


def _mask_shapes(*, with_source: bool = False):
    """(x, mask[, v or source]) where mask broadcasts to x."""
    def build(draw, budget: ShapeBudget):
        x = _shape(draw, budget)
        mask = broadcastable_to(draw, x)
        if with_source:
            src = x if draw(st.booleans()) else (prod(x) + draw(st.integers(0, 3)),)
            return (x, mask, src)
        return (x, mask)
    return build


def _leading_mask_shapes(*, with_values: bool):
    """(x, mask[, v]) for ``x[mask]``: mask has x's leading k dims; v broadcasts to
    (count, *x.shape[k:])."""
    def build(draw, budget: ShapeBudget):
        x = _shape(draw, budget, 1, 6)
        k = draw(st.integers(1, len(x)))
        if not with_values:
            return (x, x[:k])
        return (x, x[:k], broadcastable_to(draw, x[k:]))
    return build


def _fill_args(draw, shapes, dtypes):
    return {"value": _fill_value(draw, first_dtype(dtypes))}


def _index_fill_args(draw, shapes, dtypes):
    return {**_index_dim(draw, shapes, dtypes), "value": _fill_value(draw, first_dtype(dtypes))}


def _index_add_args(draw, shapes, dtypes):
    return {**_index_dim(draw, shapes, dtypes), "alpha": _alpha(draw, first_dtype(dtypes))}


def _scatter_value_args(draw, shapes, dtypes):
    return {**_scatter_like_dim(draw, shapes, dtypes), "value": _fill_value(draw, first_dtype(dtypes))}


def _scatter_str_reduce_args(draw, shapes, dtypes):
    return {**_scatter_like_dim(draw, shapes, dtypes), "reduce": draw(st.sampled_from(("add", "multiply")))}


def _scatter_reduce_args(draw, shapes, dtypes):
    d = first_dtype(dtypes)
    reductions = ["sum", "prod"]
    if d not in ("bool", "uint64"):
        reductions.append("mean")
    if d not in dt.COMPLEX and d != "uint64":
        reductions += ["amax", "amin"]
    return {**_scatter_like_dim(draw, shapes, dtypes), "reduce": draw(st.sampled_from(reductions)),
            "include_self": draw(st.booleans())}


def _scatter_extreme_ties(inputs, kwargs, rtol=1e-5):
    """scatter_reduce amax/amin: a target whose max (min) is taken by two or more of its
    contributions (the scattered src elements, and self with include_self)."""
    reduce = kwargs.get("reduce")
    if reduce not in ("amax", "amin"):
        return None
    x, index, src = inputs[0], inputs[1], inputs[2]
    if index.numel() == 0:
        return None
    rel, tiny = slack(x)
    dim, include_self = kwargs["dim"], kwargs.get("include_self", True)
    xw, idx = wide(x), index.to(torch.int64)
    srcw = wide(src)[tuple(slice(0, n) for n in idx.shape)] if idx.dim() else wide(src)
    result = torch.scatter_reduce(xw, dim, idx, srcw, reduce, include_self=include_self)
    count = near(xw, result, rel, tiny).to(torch.float64) if include_self else torch.zeros_like(xw)
    count = count.scatter_add(dim, idx, near(srcw, result.gather(dim, idx), rel, tiny).to(torch.float64))
    if bool((count >= 2).any()):
        return f"several contributions tie for the {reduce[1:]} of a target position"
    return None


def _take_along_shapes(draw, budget: ShapeBudget):
    x = _shape(draw, budget, 0, 6)
    if not x or draw(st.integers(0, 4)) == 0:  # dim=None: indices into the flattened x
        idx = _shape(draw, budget, 0, 2)
        if prod(x) == 0 and prod(idx):
            idx = idx[:-1] + (0,) if idx else (0,)
        return (x, idx)
    idx = [n if draw(st.integers(0, 2)) else 1 for n in x]
    d = draw(st.integers(0, len(x) - 1))
    idx[d] = draw(st.integers(0, budget.max_side))
    return (x, tuple(idx))


def _take_along_args(draw, shapes, dtypes):
    x, idx = shapes
    if len(idx) != len(x) or not x:
        return {"dim": None}
    dims = [d for d in range(len(x))
            if all(idx[k] in (1, x[k]) or x[k] == 1 for k in range(len(x)) if k != d)
            and (x[d] > 0 or prod(idx) == 0)]
    if not dims or draw(st.integers(0, 5)) == 0:
        return {"dim": None}
    return {"dim": _pick_dim(draw, len(x), dims)}


def _repeats_shapes(draw, budget: ShapeBudget):
    x = _shape(draw, budget, 0, 6)
    lengths = [1, prod(x)] + list(x)
    return (x, (draw(st.sampled_from(lengths)),))


def _repeats_args(draw, shapes, dtypes):
    x, (n,) = shapes
    dims = [d for d in range(len(x)) if x[d] == n or n == 1]
    options = ([None] if n in (1, prod(x)) else []) + [_pick_dim(draw, len(x), [d]) for d in dims]
    return {"dim": draw(st.sampled_from(options or [None]))}


def _repeat_int_args(draw, shapes, dtypes):
    x = shapes[0]
    dim = None if not x or draw(st.integers(0, 3)) == 0 else _pick_dim(draw, len(x))
    out = {"repeats": draw(st.integers(0, 3)), "dim": dim}
    if draw(st.integers(0, 2)) == 2:   # the result's length along dim, given (it spares a sync)
        out["output_size"] = out["repeats"] * (prod(x) if dim is None else x[_norm(dim, len(x))])
    return out


def _output_size_flag(draw, shapes, dtypes):
    """repeat_interleave(repeats) with output_size (the sum of repeats, which the wrapper
    reads off a CPU copy) in a third of the cases."""
    return {"output_size": True} if draw(st.integers(0, 2)) == 2 else {}


def _repeat_self(r, output_size=False):
    if output_size and not _on_meta(r):
        return torch.repeat_interleave(r, output_size=int(r.detach().cpu().to(torch.int64).sum()))
    return torch.repeat_interleave(r)


def _cat_shapes(n: int):
    def build(draw, budget: ShapeBudget):
        base = list(_shape(draw, budget, 1, 6))
        d = draw(st.integers(0, len(base) - 1))
        sub = ShapeBudget(max_numel=max(1, budget.max_numel // n))
        # The other dims are fitted once, for all inputs: fitting each input on its own
        # could shrink them differently, and cat needs them equal.
        base[d] = 1
        base = list(fit(base, sub))
        others = max(1, prod(base))
        out = []
        for _ in range(n):
            s = list(base)
            s[d] = min(draw_side(draw, budget), sub.max_numel // others)
            out.append(tuple(s))
        if draw(st.integers(0, 9)) == 0:  # legacy: a 1-D empty tensor joins anything
            out[draw(st.integers(0, n - 1))] = (0,)
        return tuple(out)
    return build


def _cat_args(draw, shapes, dtypes):
    real = [s for s in shapes if s != (0,)] or [shapes[0]]
    rank = len(real[0])
    dims = [d for d in range(rank) if all(len(s) == rank and s[:d] + s[d + 1:] == real[0][:d] + real[0][d + 1:]
                                          for s in real)]
    return {"dim": _pick_dim(draw, rank, dims or None)}


def _stack_args(draw, shapes, dtypes):
    rank = len(shapes[0]) + 1
    return {"dim": draw(st.integers(-rank, rank - 1))}


def _many_shapes(min_rank: int):
    """One tensor whose dim 0 the op unbinds into its inputs (cat_many, stack_many): at
    least one slice (a join of none is an error, the same on every backend), each of
    rank ``min_rank - 1`` or more."""
    def build(draw, budget: ShapeBudget):
        shape = list(_shape(draw, budget, min_rank, 6))
        shape[0] = max(1, shape[0])
        return (fit(shape, budget),)
    return build


def _cat_many_args(draw, shapes, dtypes):
    return {"dim": _pick_dim(draw, len(shapes[0]) - 1)}


def _stack_many_args(draw, shapes, dtypes):
    return _stack_args(draw, (shapes[0][1:],), dtypes)     # as stack's, of one slice's shape


def _hvstack_shapes(vertical: bool):
    def build(draw, budget: ShapeBudget):
        base = list(_shape(draw, budget, 0, 5))
        joined = 0 if vertical or len(base) == 1 else 1
        if len(base) <= joined or (vertical and len(base) == 1):
            return (tuple(base), tuple(base))
        other = list(base)
        other[joined] = draw_side(draw, budget)
        return (tuple(base), fit(other, budget))
    return build


def _split_args(draw, shapes, dtypes):
    x = shapes[0]
    dim = _pick_dim(draw, len(x))
    n = x[_norm(dim, len(x))]
    if draw(st.booleans()):
        return {"split_size": draw(st.integers(1, max(1, n + 1))), "dim": dim}
    sizes, left = [], n
    while left > 0:
        s = draw(st.integers(0, left))
        sizes.append(s)
        left -= s
    return {"split_size": tuple(sizes) or (0,), "dim": dim}


def _tensor_split_args(draw, shapes, dtypes):
    x = shapes[0]
    dim = _pick_dim(draw, len(x))
    n = x[_norm(dim, len(x))]
    if draw(st.booleans()):
        return {"sections": draw(st.integers(1, max(1, n + 2))), "dim": dim}
    points = sorted(draw(st.lists(st.integers(0, n + 1), max_size=4)))
    return {"indices": tuple(points), "dim": dim}


def _chunk_args(draw, shapes, dtypes):
    return {"chunks": draw(st.integers(1, 9)), "dim": _pick_dim(draw, len(shapes[0]))}


def _one_dim(draw, shapes, dtypes):
    return {"dim": _pick_dim(draw, len(shapes[0]))}


def _flip_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    dims = draw(st.lists(st.integers(0, max(rank - 1, 0)), max_size=max(rank, 1), unique=True)) if rank else []
    return {"dims": tuple(d - rank if rank and draw(st.booleans()) else d for d in dims)}


def _roll_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    if rank == 0 or draw(st.integers(0, 3)) == 0:
        return {"shifts": draw(st.integers(-9, 9)), "dims": None}
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    shifts = tuple(draw(st.integers(-9, 9)) for _ in dims)
    return {"shifts": shifts, "dims": tuple(dims)}


def _rot90_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    a, b = draw(st.lists(st.integers(0, rank - 1), min_size=2, max_size=2, unique=True))
    return {"k": draw(st.integers(-5, 5)), "dims": (a - rank if draw(st.booleans()) else a, b)}


def _narrow_args(draw, shapes, dtypes):
    x = shapes[0]
    dim = _pick_dim(draw, len(x))
    n = x[_norm(dim, len(x))]
    start = draw(st.integers(-n, n)) if n else 0
    begin = start + n if start < 0 else start
    return {"dim": dim, "start": start, "length": draw(st.integers(0, n - begin))}


def _some_side_shape(draw, budget: ShapeBudget):
    """One shape of rank >= 1 with at least one side > 0 (select needs one)."""
    x = list(_shape(draw, budget, 1, 8))
    if not any(x):
        x[draw(st.integers(0, len(x) - 1))] = draw(st.integers(1, max(1, budget.max_side)))
    return (fit(x, budget),)


def _select_args(draw, shapes, dtypes):
    x = shapes[0]
    dim = _pick_dim(draw, len(x), _free_dims(x) or None)
    n = max(x[_norm(dim, len(x))], 1)
    return {"dim": dim, "index": draw(st.integers(-n, n - 1))}


def _diagonal_args(out_rank_extra: int):
    def build(draw, shapes, dtypes):
        rank = len(shapes[0]) + out_rank_extra
        a, b = draw(st.lists(st.integers(-rank, rank - 1), min_size=2, max_size=2,
                             unique_by=lambda v: v % rank))
        return {"offset": draw(st.integers(-4, 4)), "dim1": a, "dim2": b}
    return build


def _tri_indices_args(draw, shapes, dtypes):
    out = {"row": draw(st.integers(0, 9)), "col": draw(st.integers(0, 9)), "offset": draw(st.integers(-6, 6))}
    if draw(st.booleans()):
        out["dtype"] = DtypeArg(draw(st.sampled_from(("int64", "int32"))))
    return out


def _search_shapes(draw, budget: ShapeBudget):
    n = draw_side(draw, budget)
    if draw(st.booleans()):  # 1-D sequence, values of any shape
        return ((n,), _shape(draw, budget, 0, 4))
    batch = list(_shape(draw, budget, 0, 3))
    m = draw_side(draw, budget)
    return (fit(batch + [n], budget), fit(batch + [m], budget) if batch else (m,))


def _search_args(draw, shapes, dtypes):
    out = {"out_int32": draw(st.booleans())}
    how = draw(st.integers(0, 2))
    if how == 1:
        out["right"] = draw(st.booleans())
    elif how == 2:
        out["side"] = draw(st.sampled_from(("left", "right")))
    return out


def _bucketize_shapes(draw, budget: ShapeBudget):
    return (_shape(draw, budget, 0, 5), (draw_side(draw, budget),))


def _bucketize_args(draw, shapes, dtypes):
    return {"out_int32": draw(st.booleans()), "right": draw(st.booleans())}


def _mask_select_shapes(draw, budget: ShapeBudget):
    """(x, mask) where either broadcasts to the other."""
    x, mask = _mask_shapes()(draw, budget)
    return (mask, x) if draw(st.booleans()) else (x, mask)


def _mask_put_shapes(draw, budget: ShapeBudget):
    """(x, values, mask) for index_put with a mask over x's leading dims: values
    broadcast to (count, *x.shape[k:])."""
    x, mask, v = _leading_mask_shapes(with_values=True)(draw, budget)
    return (x, v, mask)


def _repeat_counts(shapes, kwargs):
    return _int_range(0, 3)


def _dummy_shape(draw, budget: ShapeBudget):
    return ((),)


# -- specs ------------------------------------------------------------------------------------

_ACC = _accumulated
_IDX_DIM = index_values(0)                       # [0, x.size(dim) - 1]
_SCATTER = _scatter_like_shapes(with_src=True)
_SCATTER_ACC = _scatter_like_shapes(with_src=True, cap=_ACC_MAX)
_INDEX_SRC = _index_dim_shapes(with_src=True)
_INDEX_SRC_ACC = _index_dim_shapes(with_src=True, cap=_ACC_MAX)


def _scatter_fn(x, index, src, dim, **kw):
    return torch.scatter(x, dim, index, src, **kw)


register(
    # -- gathers -----------------------------------------------------------------------------
    op("index_select", lambda x, index, dim, **kw: torch.index_select(x, dim, index, **kw),
       _index_dim_shapes(with_src=False), ALL, "rows of x along dim picked by a 1-D (or 0-d) index",
       input_dtypes=(None, IDX), input_values=(None, _IDX_DIM), args=_index_dim, out=True, grad=True),
    op("gather", lambda x, index, dim, **kw: torch.gather(x, dim, index, **kw),
       _scatter_like_shapes(with_src=False), ALL, "gather along dim (index no longer than x elsewhere)",
       input_dtypes=(None, IDX), input_values=(None, _IDX_DIM), args=_scatter_like_dim, out=True, grad=True),
    op("take", lambda x, index, **kw: torch.take(x, index, **kw), _flat_index_shapes(), ALL,
       "elements of flattened x at (negative) flat indices", input_dtypes=(None, LONG),
       input_values=(None, index_values(0, flat=True, negative=True)), method="take", out=True, grad=True),
    op("take_along_dim", lambda x, index, dim=None, **kw: torch.take_along_dim(x, index, dim, **kw),
       _take_along_shapes, ALL, "gather with broadcasting, or flat when dim=None",
       input_dtypes=(None, LONG), input_values=(None, _IDX_DIM), args=_take_along_args,
       method="take_along_dim", out=True, grad=True),
    op("getitem", _getitem, _getitem_shapes(with_values=False), ALL,
       "x[:, ..., idx] advanced indexing with an integer tensor (negative indices)",
       input_dtypes=(None, IDX), input_values=(None, index_values(0, dim_key=None, lead_key="lead", negative=True)),
       args=_lead_args, grad=True),
    op("getitem2", _getitem2,
       lambda draw, budget: _advanced_shapes(2, with_values=False, min_extra=1)(draw, budget), ALL,
       "x[..., i, j] / x[..., i, :, j] with two broadcasting index tensors (adjacent or not)",
       input_dtypes=(None, IDX, IDX), input_values=(None, _getitem2_values(0), _getitem2_values(1)),
       args=_getitem2_args, grad=True),
    op("getitem_mask", lambda x, mask: x[mask], _leading_mask_shapes(with_values=False), ALL,
       "x[mask] with a bool mask over x's leading dims", input_dtypes=(None, BOOL), grad=True),
    op("masked_select", lambda x, mask, **kw: torch.masked_select(x, mask, **kw), _mask_select_shapes, ALL,
       "elements where a broadcast bool mask is true (mask may broadcast x too)",
       input_dtypes=(None, BOOL), method="masked_select", out=True, grad=True),
    op("nonzero", _nonzero, any_shape(1), ALL,
       "indices of non-zero elements (a third are zero; NaN and -0.0 among specials)",
       input_values=(_mostly_zero,), method="nonzero", out=True),
    op("nonzero_tuple", lambda x, as_tuple: _nonzero(x, as_tuple=as_tuple), any_shape(1), ALL,
       "nonzero(as_tuple=True): one index tensor per dim", input_values=(_mostly_zero,),
       args=lambda draw, shapes, dtypes: {"as_tuple": True}, method="nonzero"),
    op("argwhere", lambda x: _nonzero(x) if _on_meta(x) else torch.argwhere(x), any_shape(1), ALL, "argwhere (nonzero as a matrix)",
       input_values=(_mostly_zero,), method="argwhere"),

    # -- scatters that overwrite (duplicate indices: any candidate may win) ---------------------
    op("scatter", _scatter_fn, _SCATTER, ALL,
       "scatter a src tensor along dim (duplicates: the winner is unspecified)",
       input_dtypes=(None, IDX, None), input_values=(None, _IDX_DIM, None), args=_scatter_like_dim,
       canonicalise=_canon_scatter, out=True, grad=True),
    op("scatter_", lambda x, index, src, dim: _writable(x).scatter_(dim, index, src), _SCATTER, ALL,
       "in-place scatter of a src tensor (duplicates: the winner is unspecified)",
       input_dtypes=(None, IDX, None), input_values=(None, _IDX_DIM, None), args=_scatter_like_dim,
       canonicalise=_canon_scatter, mutates=(0,)),
    op("scatter_value", lambda x, index, dim, value, **kw: torch.scatter(x, dim, index, value, **kw),
       _scatter_like_shapes(with_src=False), ALL, "scatter a scalar along dim",
       input_dtypes=(None, IDX), input_values=(None, _IDX_DIM), args=_scatter_value_args, out=True, grad=True),
    op("index_copy", lambda x, index, src, dim, **kw: torch.index_copy(x, dim, index, src, **kw),
       _INDEX_SRC, ALL, "copy source slices to indexed positions along dim (duplicates: unspecified)",
       input_dtypes=(None, LONG, None), input_values=(None, _IDX_DIM, None), args=_index_dim,
       canonicalise=_canon_index_copy, out=True, grad=True),
    op("index_copy_", lambda x, index, src, dim: _writable(x).index_copy_(dim, index, src), _INDEX_SRC, ALL,
       "in-place index_copy", input_dtypes=(None, LONG, None), input_values=(None, _IDX_DIM, None),
       args=_index_dim, canonicalise=_canon_index_copy, mutates=(0,)),
    op("index_fill", lambda x, index, dim, value: torch.index_fill(x, dim, index, value),
       _index_dim_shapes(with_src=False), ALL, "fill indexed slices along dim with a scalar",
       input_dtypes=(None, LONG), input_values=(None, _IDX_DIM), args=_index_fill_args, grad=True),
    op("index_fill_", lambda x, index, dim, value: _writable(x).index_fill_(dim, index, value),
       _index_dim_shapes(with_src=False), ALL, "in-place index_fill",
       input_dtypes=(None, LONG), input_values=(None, _IDX_DIM), args=_index_fill_args, mutates=(0,)),
    op("index_put", _index_put, _advanced_shapes(1, with_values=True), ALL,
       "index_put with one integer index tensor (negative indices; duplicates: unspecified)",
       input_dtypes=(None, None, IDX), input_values=(None, None, _advanced_values(2, 0)),
       canonicalise=_canon_index_put, grad=True),
    op("index_put2", _index_put, _advanced_shapes(2, with_values=True), ALL,
       "index_put with two broadcasting index tensors (duplicates: unspecified)",
       input_dtypes=(None, None, IDX, IDX),
       input_values=(None, None, _advanced_values(2, 0), _advanced_values(3, 1)),
       canonicalise=_canon_index_put, grad=True),
    op("index_put_", _index_put_inplace, _advanced_shapes(1, with_values=True), ALL,
       "in-place index_put_ (duplicates: unspecified)", input_dtypes=(None, None, IDX),
       input_values=(None, None, _advanced_values(2, 0)), canonicalise=_canon_index_put, mutates=(0,)),
    op("index_put_mask", lambda x, v, mask, accumulate: torch.index_put(x, (mask,), v, accumulate),
       _mask_put_shapes, ALL,
       "index_put with a bool mask (each position written at most once; accumulate either way)",
       input_dtypes=(None, None, BOOL), args=lambda draw, shapes, dtypes: {"accumulate": draw(st.booleans())},
       grad=True),
    op("put", lambda x, index, src, accumulate=False: torch.put(x, index, src, accumulate=accumulate),
       _flat_index_shapes(with_src=True), ALL, "put at flat (negative) indices (duplicates: unspecified)",
       input_dtypes=(None, LONG, None), input_values=(None, index_values(0, flat=True, negative=True), None),
       args=lambda draw, shapes, dtypes: {"accumulate": False}, canonicalise=_canon_put,
       method="put", inplace="put_", grad=True),
    op("setitem", _setitem, _getitem_shapes(with_values=True), ALL,
       "y[:, ..., idx] = v on a clone (duplicates: unspecified)", input_dtypes=(None, IDX, None),
       input_values=(None, index_values(0, dim_key=None, lead_key="lead", negative=True), None),
       args=_lead_args, canonicalise=_canon_setitem, grad=True),
    op("setitem_mask", _setitem_mask, _leading_mask_shapes(with_values=True), ALL,
       "y[mask] = v on a clone, v broadcast over the selected rows", input_dtypes=(None, BOOL, None),
       grad=True),
    op("masked_fill", lambda x, mask, value: torch.masked_fill(x, mask, value), _mask_shapes(), ALL,
       "fill where a bool mask (broadcast to x) is true", input_dtypes=(None, BOOL), args=_fill_args,
       method="masked_fill", inplace="masked_fill_", grad=True),
    op("masked_scatter", lambda x, mask, src: torch.masked_scatter(x, mask, src),
       _mask_shapes(with_source=True), ALL, "consecutive source elements where the mask is true",
       input_dtypes=(None, BOOL, None), method="masked_scatter", inplace="masked_scatter_", grad=True),

    # -- accumulating scatters (exact small-integer values: any order gives the same sum) --------
    op("scatter_add", lambda x, index, src, dim, **kw: torch.scatter_add(x, dim, index, src, **kw),
       _SCATTER_ACC, ALL, "scatter_add along dim (duplicate indices accumulate)",
       input_dtypes=(None, IDX, None), input_values=(_ACC, _IDX_DIM, _ACC), args=_scatter_like_dim,
       semantics=ORDER, out=True, grad=True),
    op("scatter_add_", lambda x, index, src, dim: _writable(x).scatter_add_(dim, index, src), _SCATTER_ACC, ALL,
       "in-place scatter_add", input_dtypes=(None, IDX, None), input_values=(_ACC, _IDX_DIM, _ACC),
       args=_scatter_like_dim, semantics=ORDER, mutates=(0,)),
    op("scatter_reduce_str", lambda x, index, src, dim, reduce, **kw: torch.scatter(x, dim, index, src, reduce=reduce, **kw),
       _SCATTER_ACC, ALL, "legacy scatter(..., reduce='add'|'multiply') with a src tensor",
       input_dtypes=(None, IDX, None), input_values=(_ACC, _IDX_DIM, _ACC), args=_scatter_str_reduce_args,
       semantics=ORDER, out=True),
    op("scatter_reduce", lambda x, index, src, dim, reduce, include_self=True, **kw:
       torch.scatter_reduce(x, dim, index, src, reduce, include_self=include_self, **kw),
       _SCATTER_ACC, ALL, "scatter_reduce sum/prod/mean/amax/amin with and without self",
       input_dtypes=(None, IDX, None), input_values=(_ACC, _IDX_DIM, _ACC), args=_scatter_reduce_args,
       semantics=ORDER, out=True, grad=True, grad_undefined=_scatter_extreme_ties),
    op("scatter_reduce_", lambda x, index, src, dim, reduce, include_self=True:
       _writable(x).scatter_reduce_(dim, index, src, reduce, include_self=include_self),
       _SCATTER_ACC, ALL, "in-place scatter_reduce_", input_dtypes=(None, IDX, None),
       input_values=(_ACC, _IDX_DIM, _ACC), args=_scatter_reduce_args, semantics=ORDER, mutates=(0,)),
    op("index_add", lambda x, index, src, dim, alpha=1, **kw: torch.index_add(x, dim, index, src, alpha=alpha, **kw),
       _INDEX_SRC_ACC, ALL, "index_add with alpha (duplicate indices accumulate)",
       input_dtypes=(None, IDX, None), input_values=(_ACC, _IDX_DIM, _ACC), args=_index_add_args,
       semantics=ORDER, out=True, grad=True),
    op("index_add_", lambda x, index, src, dim, alpha=1: _writable(x).index_add_(dim, index, src, alpha=alpha),
       _INDEX_SRC_ACC, ALL, "in-place index_add_", input_dtypes=(None, IDX, None),
       input_values=(_ACC, _IDX_DIM, _ACC), args=_index_add_args, semantics=ORDER, mutates=(0,)),
    op("index_put_acc", _index_put, _advanced_shapes(1, with_values=True, cap=_ACC_MAX), ALL,
       "index_put(accumulate=True), one index tensor", input_dtypes=(None, None, IDX),
       input_values=(_ACC, _ACC, _advanced_values(2, 0)),
       args=lambda draw, shapes, dtypes: {"accumulate": True}, semantics=ORDER, grad=True),
    op("index_put_acc2", _index_put, _advanced_shapes(2, with_values=True, cap=_ACC_MAX), ALL,
       "index_put(accumulate=True), two broadcasting index tensors", input_dtypes=(None, None, IDX, IDX),
       input_values=(_ACC, _ACC, _advanced_values(2, 0), _advanced_values(3, 1)),
       args=lambda draw, shapes, dtypes: {"accumulate": True}, semantics=ORDER, grad=True),
    op("index_put_acc_", _index_put_inplace, _advanced_shapes(1, with_values=True, cap=_ACC_MAX), ALL,
       "in-place index_put_(accumulate=True)", input_dtypes=(None, None, IDX),
       input_values=(_ACC, _ACC, _advanced_values(2, 0)),
       args=lambda draw, shapes, dtypes: {"accumulate": True}, semantics=ORDER, mutates=(0,)),
    op("put_acc", lambda x, index, src, accumulate=True: torch.put(x, index, src, accumulate=accumulate),
       _flat_index_shapes(with_src=True, cap=_ACC_MAX), ALL, "put(accumulate=True) at flat indices",
       input_dtypes=(None, LONG, None), input_values=(_ACC, index_values(0, flat=True, negative=True), _ACC),
       args=lambda draw, shapes, dtypes: {"accumulate": True}, semantics=ORDER,
       method="put", inplace="put_", grad=True),

    # -- repeat, join, split ---------------------------------------------------------------------
    op("repeat_interleave", lambda x, repeats, dim=None: torch.repeat_interleave(x, repeats, dim),
       _repeats_shapes, ALL, "repeat elements by a repeats tensor (0 repeats included)",
       input_dtypes=(None, IDX), input_values=(None, _repeat_counts),
       args=_repeats_args, method="repeat_interleave", grad=True),
    op("repeat_interleave_int", lambda x, repeats, dim=None, **kw: torch.repeat_interleave(x, repeats, dim, **kw),
       any_shape(1, max_rank=6), ALL, "repeat elements an int number of times",
       args=_repeat_int_args, method="repeat_interleave", grad=True),
    op("repeat_interleave_self", _repeat_self, any_shape(1, min_rank=1, max_rank=1),
       IDX, "repeat_interleave(repeats): arange repeated, output_size given or not", input_values=(_repeat_counts,),
       args=_output_size_flag),
    op("cat", lambda *ts, dim=0, **kw: torch.cat(ts, dim, **kw), _cat_shapes(3), ALL,
       "concatenate three tensors (mixed dtypes promote; legacy 1-D empty inputs)",
       input_dtypes=(None, None, None), args=_cat_args, semantics=frozenset({"mixed_dtypes_sometimes"}),
       out=True, grad=True),
    op("stack", lambda *ts, dim=0, **kw: torch.stack(ts, dim, **kw), lambda draw, budget: (
        (_shape(draw, budget, 0, 6),) * 3), ALL, "stack three same-shaped tensors along a new dim",
       input_dtypes=(None, None, None), args=_stack_args, semantics=frozenset({"mixed_dtypes_sometimes"}),
       out=True, grad=True),
    op("hstack", lambda *ts, **kw: torch.hstack(ts, **kw), _hvstack_shapes(False), ALL,
       "hstack of two tensors (0-d and 1-D included)", input_dtypes=(None, None),
       semantics=frozenset({"mixed_dtypes_sometimes"}), out=True, grad=True),
    op("vstack", lambda *ts, **kw: torch.vstack(ts, **kw), _hvstack_shapes(True), ALL,
       "vstack of two tensors (0-d and 1-D included)", input_dtypes=(None, None),
       semantics=frozenset({"mixed_dtypes_sometimes"}), out=True, grad=True),
    # Many inputs from one recipe: the slices of x along dim 0, each a view (x's layout
    # makes them non-contiguous), passed as separate tensors. The number of inputs is a
    # size a kernel may limit (MPS batches a cat's inputs into argument buffers), which
    # their large class grows past 65,536 without a recipe per input.
    op("cat_many", lambda x, dim=0, **kw: torch.cat(x.unbind(0), dim, **kw), _many_shapes(2), ALL,
       "concatenate the slices of one tensor along dim 0 (one input each: up to 131,073 in its large class)",
       args=_cat_many_args, min_rank=2, semantics=SLICES, out=True, grad=True),
    op("stack_many", lambda x, dim=0, **kw: torch.stack(x.unbind(0), dim, **kw), _many_shapes(1), ALL,
       "stack the slices of one tensor along a new dim (one input each)",
       args=_stack_many_args, min_rank=1, semantics=SLICES, out=True, grad=True),
    op("hstack_many", lambda x, **kw: torch.hstack(x.unbind(0), **kw), _many_shapes(1), ALL,
       "hstack the slices of one tensor (0-d and 1-D slices included; one input each)", min_rank=1,
       semantics=SLICES, out=True, grad=True),
    op("vstack_many", lambda x, **kw: torch.vstack(x.unbind(0), **kw), _many_shapes(1), ALL,
       "vstack the slices of one tensor (one input each)", min_rank=1, semantics=SLICES, out=True, grad=True),
    op("split", lambda x, split_size, dim=0: torch.split(x, split_size, dim), any_shape(1, min_rank=1),
       ALL, "split by a size or a list of sizes", args=_split_args, method="split", grad=True),
    op("tensor_split", lambda x, **kw: torch.tensor_split(x, **kw), any_shape(1, min_rank=1), ALL,
       "tensor_split by a section count or split points (out of range points included)",
       args=_tensor_split_args, method="tensor_split", grad=True),
    op("chunk", lambda x, chunks, dim=0: torch.chunk(x, chunks, dim), any_shape(1, min_rank=1), ALL,
       "chunk into up to n pieces", args=_chunk_args, method="chunk", grad=True),
    op("unbind", lambda x, dim=0: torch.unbind(x, dim), any_shape(1, min_rank=1), ALL,
       "unbind along a dim", args=_one_dim, method="unbind", grad=True),

    # -- reordering and views ----------------------------------------------------------------------
    op("flip", lambda x, dims: torch.flip(x, dims), any_shape(1), FLIPPABLE, "reverse along some dims",
       args=_flip_args, method="flip", grad=True),
    op("roll", lambda x, shifts, dims=None: torch.roll(x, shifts, dims), any_shape(1), ALL,
       "roll along dims (or flattened)", args=_roll_args, method="roll", grad=True),
    op("rot90", lambda x, k=1, dims=(0, 1): torch.rot90(x, k, dims), any_shape(1, min_rank=2), FLIPPABLE,
       "rotate by k quarter turns in a plane", args=_rot90_args, method="rot90", grad=True),
    op("narrow", lambda x, dim, start, length: torch.narrow(x, dim, start, length), any_shape(1, min_rank=1),
       ALL, "narrow to a (negative start) range", args=_narrow_args, method="narrow", grad=True),
    op("select", lambda x, dim, index: torch.select(x, dim, index), _some_side_shape, ALL,
       "select one index along a dim", args=_select_args, method="select", grad=True),
    op("diagonal", lambda x, offset=0, dim1=0, dim2=1: torch.diagonal(x, offset, dim1, dim2),
       any_shape(1, min_rank=2), ALL, "diagonal view over two dims with an offset",
       args=_diagonal_args(0), method="diagonal", grad=True),
    op("diag_embed", lambda x, offset=0, dim1=-2, dim2=-1: torch.diag_embed(x, offset, dim1, dim2),
       any_shape(1, min_rank=1, max_rank=5), ALL, "embed the last dim as a diagonal",
       args=_diagonal_args(1), method="diag_embed", grad=True),
    op("diag", lambda x, diagonal=0, **kw: torch.diag(x, diagonal, **kw), any_shape(1, min_rank=1, max_rank=2),
       ALL, "diagonal of a matrix or matrix from a vector",
       args=lambda draw, shapes, dtypes: {"diagonal": draw(st.integers(-4, 4))}, method="diag",
       out=True, grad=True),
    op("tril_indices", lambda x, **kw: torch.tril_indices(kw["row"], kw["col"], kw["offset"], device=x.device,
                                                          dtype=kw.get("dtype", torch.int64)),
       _dummy_shape, ("float32",), "tril_indices (the tensor input only names the device)",
       args=_tri_indices_args),
    op("triu_indices", lambda x, **kw: torch.triu_indices(kw["row"], kw["col"], kw["offset"], device=x.device,
                                                          dtype=kw.get("dtype", torch.int64)),
       _dummy_shape, ("float32",), "triu_indices (the tensor input only names the device)",
       args=_tri_indices_args),

    # -- searching -----------------------------------------------------------------------------------
    op("searchsorted", lambda seq, v, **kw: torch.searchsorted(_sorted_last(seq), v, **kw), _search_shapes,
       SEARCHABLE, "searchsorted in a sequence sorted on the CPU and written back in place (ties common)",
       input_dtypes=(None, None), input_values=("small_int", "small_int"), args=_search_args,
       allow_nonfinite=False, out=True, mutates=(0,)),
    op("searchsorted_sorter", lambda seq, v, **kw: torch.searchsorted(seq, v, sorter=_cpu_argsort(seq), **kw),
       _search_shapes, SEARCHABLE, "searchsorted in an unsorted sequence with sorter= (argsort on the CPU)",
       input_dtypes=(None, None), input_values=("small_int", "small_int"), args=_search_args,
       allow_nonfinite=False, out=True),
    op("bucketize", lambda x, boundaries, **kw: torch.bucketize(x, _sorted_last(boundaries), **kw),
       _bucketize_shapes, SEARCHABLE, "bucketize against boundaries sorted on the CPU",
       input_dtypes=(None, None), input_values=("small_int", "small_int"), args=_bucketize_args,
       allow_nonfinite=False, out=True, mutates=(1,),
       # input and boundaries of two dtypes (pytorch#145929: uint8 input, int8 boundaries)
       semantics=frozenset({"promotes"})),
)


def _indexes_dim_0(shapes) -> bool:
    """(self, index, source) of index_add where dim 0 is the one indexed: the source is
    self but at dim 0, whose length is the index count (a 1-D index)."""
    x, index, src = shapes
    return len(index) == 1 and len(x) >= 1 and len(src) == len(x) and src[1:] == x[1:] and src[0] == index[0]


def _indexes_another_dim(shapes) -> bool:
    """index_add's shapes where a dim past 0 may be the one indexed: dim 0 is then
    self's and the source's alike, and grows in both."""
    x, index, src = shapes
    n = prod(index)
    return len(x) >= 2 and len(src) == len(x) and src[0] == x[0] and any(
        src[k] == n and src[:k] + src[k + 1:] == x[:k] + x[k + 1:] for k in range(1, len(x)))


# index_add's groups: many indices into as many rows of self (dim 0 indexed, so each row
# takes about one contribution and the sums stay exact in bfloat16), a long indexed dim
# with few indices, rows of self and source where another dim is indexed, long slices.
_INDEX_ADD_GROWS = (
    grows("indices", (1, 0), (2, 0), (0, 0), broadcasts=False, when=_indexes_dim_0),
    grows("rows", (0, 0), when=lambda shapes: _indexes_dim_0(shapes) and shapes[1][0] > 0),
    grows("rows", (0, 0), (2, 0), when=_indexes_another_dim),
    grows("length", (0, -1), (2, -1), min_rank=2, when=_indexes_dim_0),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py).
declare_grows({
    "index_add": _INDEX_ADD_GROWS,
    **{op: (grows("inputs", (0, 0), rearranges=True),) for op in ("cat_many", "stack_many", "hstack_many",
                                                                     "vstack_many")},
    # (the @huge class: a source past 2^31 elements, selected along another dim than its
    # rows: pytorch#188756; a cat or stack of rows whose result passes 2^31 elements:
    # #189960, #169163)
    "index_select": (grows("rows", (0, 0), min_rank=2, sliced=True, rows_args=dim_off_rows()),
                     grows("length", (0, -1)), grows("indices", (1, 0))),
    "gather": (grows("rows", (0, 0), (1, 0)), grows("length", (0, -1), (1, -1))),
    "scatter": (grows("rows", (0, 0), (1, 0), (2, 0)), grows("length", (0, -1), (1, -1), (2, -1))),
    # (a cat's inputs of 1 row are not broadcasts: joined along another dim, all hold
    # the same rows)
    "cat": (grows("rows", (0, 0), (1, 0), (2, 0), min_rank=2, sliced=True, broadcasts=False,
                  rows_args=dim_off_rows()),
            grows("length", (0, -1), (1, -1), (2, -1))),
    "stack": (grows("rows", (0, 0), (1, 0), (2, 0), sliced=True, broadcasts=False,
                    rows_args=dim_off_rows(new_dim=True)),
              grows("length", (0, -1), (1, -1), (2, -1))),
})


# -- past 2^31 elements: a boolean mask's selection, judged on sampled rows -------------------

def _selection_rows(x, mask):
    """``x[mask]`` on the whole input, then only the rows (and a long slice's column
    windows) that generation/huge_samples.py compares."""
    return selection_rows_of(x[mask])


# getitem_mask's rows do not stay apart (row k of x[mask] is x's row at the mask's k-th true
# position), so it joins the @huge class with a reference of its own: the input rows that
# the compared rows of the result come from, found in closed form from the mask's hash
# (pytorch#164048: CUDA's gather of a selected slice of more than 65,535 blocks of 4,096
# bytes; selections past 2^31 elements of the input and of the result).
register(OpSpec(
    name="getitem_mask" + HUGE_SUFFIX, family=FAMILY, fn=_selection_rows, shapes=mask_shapes, dtypes=HUGE_DTYPES,
    input_dtypes=(None, BOOL), input_values=("index_hash", "index_hash"), allow_nonfinite=False,
    allow_specials=False, min_rank=1, semantics=frozenset({"large"}), reference_fn=REGISTRY["getitem_mask"].fn,
    reference_inputs=selection_reference_inputs, size_class=SIZE_CLASS, base="getitem_mask",
    doc="x[mask] with a bool mask over dim 0, past 2^31 elements of x or of the selection, or slices of more "
        "than 65,535 blocks of 4,096 bytes (compared on sampled rows)"))
