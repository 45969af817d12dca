"""A deterministic reducer that runs after Hypothesis' shrinker.

Hypothesis shrinks the choices that *drew* a case; it cannot see that a 5-D input would
fail as a 1-D one once another draw changes, or that two inputs could swap their
awkwardness. This reducer works on the recipe itself: it proposes simpler cases (drop
the variant, aliasing, optional arguments and dims; shrink sizes, jointly where shapes are tied;
simplify the layout and move it to the first input; give inputs of several dtypes
one; move to the simplest dtype of the class; simplify values to small integers and the one special value that matters) and
keeps a proposal only when it is strictly simpler by :func:`cost` *and* a run in a
worker still fails the same way (same symptom). It stops at a fixed point or when its
time budget is spent, so it always terminates, and it is deterministic given the runs'
outcomes. Crash and hang findings work the same way: the prober runs each attempt in a
fresh worker with a time bound.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from ..generation import catalogue
from ..generation import dtypes as dt
from ..generation.input_classes import free_inputs
from ..generation.opspec import aliased_out_input
from ..generation.recipes import MATRIX_DISTRIBUTIONS, SPECIAL_NAMES, VIEW_BIT_DTYPES, Case, main_input
from . import edits
from .probe import SAME, Prober, out_of_time

# The simplest dtype of each class first: torch's defaults, then the wide ones, then
# the reduced precisions (a repro in float32 is what a maintainer reaches for first).
DTYPE_PREFERENCE = {
    "float": ("float32", "float64", "float16", "bfloat16"),
    "complex": ("complex64", "complex128", "complex32"),
    "integral": ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64"),
    "bool": ("bool",),
}
_SPECIAL_RANK = {name: i for i, name in enumerate(SPECIAL_NAMES)}
_DISTRIBUTION_RANK = {"small_int": 0}


# How awkward each layout feature is, simplest first: between two layouts that both
# trigger a bug, the reducer keeps the simpler, so a bug that any non-contiguous input
# triggers is always shown the same way (a gap of 2 in one dim).
_FEATURE_WEIGHT = {"offset": 1, "gapped": 2, "transposed": 3, "channels_last": 4, "permuted": 4, "expanded": 5,
                   "conj": 1, "neg": 1}


def _layout_weight(lay) -> tuple[int, int, int]:
    kinds = lay.kinds()
    features = (bool(lay.offset) + sum(g > 1 for g in lay.gaps) + bool(lay.moves_dims())
                + len(lay.expanded) + bool(lay.bit))
    magnitude = (lay.offset + sum(g - 1 for g in lay.gaps if g > 1)
                 + sum(p != j for j, p in enumerate(lay.permutation)))
    return features, sum(_FEATURE_WEIGHT[k] for k in kinds), magnitude


def _numeric_kwargs(case: Case) -> float:
    total = 0.0
    for _, v in case.kwargs:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            continue
        total += abs(v)
    return total


# Aliasing, simplest first: none, a storage shared by disjoint (adjacent) inputs, then
# overlapping ones (further in, the more so); out= that is an input counts as one more.
_ALIAS_WEIGHT = {"adjacent": 1, "overlap": 2}


def _aliasing_weight(case: Case) -> tuple[int, int]:
    aliases = [r.alias for r in case.inputs if r.alias is not None]
    return (len(aliases) + (aliased_out_input(case.variant) is not None),
            sum(_ALIAS_WEIGHT[a.how] + a.at for a in aliases))


def cost(case: Case) -> tuple:
    """How complex a case is, compared lexicographically: the call form and optional
    arguments, then elements and dims, then aliasing and the layout (features, their
    size, and how late the awkward inputs come), the dtype, and last the values."""
    inputs = case.inputs
    layouts = [_layout_weight(r.layout) for r in inputs]
    main = inputs[main_input(case)].dtype if inputs else "float32"
    preference = DTYPE_PREFERENCE[dt.dtype_class(main)]
    return (
        case.variant != "functional",
        len(case.kwargs),
        sum(r.numel for r in inputs),
        sum(r.rank for r in inputs),
        *_aliasing_weight(case),
        sum(f for f, _, _ in layouts),
        sum(w for _, w, _ in layouts),
        sum(m for _, _, m in layouts),
        sum(i + 1 for i, r in enumerate(inputs) if not r.layout.is_plain()),
        len({r.dtype for r in inputs}),
        preference.index(main) if main in preference else len(preference),
        sum(len(r.values.specials) for r in inputs),
        sum(_SPECIAL_RANK.get(n, 99) for r in inputs for _, n in r.values.specials),
        sum(_DISTRIBUTION_RANK.get(r.values.distribution, 1) for r in inputs),
        sum(r.values.seed != 0 for r in inputs),
        sum(p for r in inputs for p, _ in r.values.specials),
        _numeric_kwargs(case),
    )


# -- proposals, cheapest big wins first ------------------------------------------------

def _variant(case: Case):
    if case.variant != "functional":
        yield replace(case, variant="functional")


def _aliasing(case: Case):
    if aliased_out_input(case.variant) is not None:
        yield replace(case, variant="out")
    if case.is_aliased():
        yield edits.without_aliasing(case)
    for i, r in enumerate(case.inputs):
        if r.alias is None:
            continue
        yield edits.with_input(case, i, edits.unaliased(r))
        if r.alias.how == "overlap":
            yield edits.with_input(case, i, replace(r, alias=replace(r.alias, how="adjacent", at=0)))
            if r.alias.at:
                yield edits.with_input(case, i, replace(r, alias=replace(r.alias, at=0)))


def _kwargs(case: Case):
    for name, _ in case.kwargs:
        yield edits.drop_kwarg(case, name)


def _dims(case: Case):
    ranks = [r.rank for r in case.inputs]
    top = max(ranks, default=0)
    if top:
        # Broadcasting aligns dims from the right: drop the leading dim of every input
        # of the highest rank together.
        yield edits.with_inputs(case, [edits.drop_dim(r, 0) if r.rank == top else r for r in case.inputs])
    for i, r in enumerate(case.inputs):
        for d in range(r.rank):
            yield edits.with_input(case, i, edits.drop_dim(r, d))


def _sizes(case: Case):
    sizes = sorted({s for r in case.inputs for s in r.shape if s > 1}, reverse=True)
    for s in sizes:
        # A size that recurs (a broadcast dim, a matmul's inner dim, a square matrix)
        # usually has to change everywhere at once.
        for t in dict.fromkeys((1, s // 2, s - 1)):
            yield edits.with_inputs(case, [replace(r, shape=tuple(t if x == s else x for x in r.shape))
                                           for r in case.inputs])
    for i, r in enumerate(case.inputs):
        for d, s in enumerate(r.shape):
            if s > 1:
                for t in dict.fromkeys((1, s // 2, s - 1)):
                    yield edits.with_input(case, i, edits.resize(r, d, t))


def _layouts(case: Case):
    for i, r in enumerate(case.inputs):
        for simpler in edits.layout_variants(r):
            yield edits.with_input(case, i, simpler)
    # Move a later input's awkwardness to an earlier plain input of the same rank, so
    # a bug that any non-contiguous input triggers is always shown on the first one.
    for j, rj in enumerate(case.inputs):
        if rj.layout.is_plain():
            continue
        for i in range(j):
            ri = case.inputs[i]
            if not ri.layout.is_plain():
                continue
            if ri.rank == rj.rank:
                moved = list(case.inputs)
                # (a view bit the earlier input's dtype cannot carry stays behind: a neg
                # bit moved from a float source onto copy_'s uint8 destination is no case)
                bit = rj.layout.bit if not rj.layout.bit or ri.dtype in VIEW_BIT_DTYPES[rj.layout.bit] else ""
                moved[i], moved[j] = replace(ri, layout=replace(rj.layout, bit=bit)), edits.plain(rj)
                yield edits.with_inputs(case, moved)
            if ri.dtype == rj.dtype:
                # Symmetric ops (add, bitwise_and, ...) take their inputs either way round.
                swapped = list(case.inputs)
                swapped[i], swapped[j] = rj, ri
                yield edits.with_inputs(case, swapped)


def _free_inputs(case: Case) -> list[int]:
    try:
        return free_inputs(catalogue.get(case.op), len(case.inputs))
    except KeyError:
        return list(range(len(case.inputs)))


def _one_dtype(case: Case):
    """The free inputs (not an index or a mask) all in the main input's dtype, where they
    are of several: a boundary sibling that mixed dtypes beside another change (a
    compound, strategies.COMPOUNDS) keeps the mix only where the failure needs it."""
    free = _free_inputs(case)
    if not case.inputs or len({case.inputs[i].dtype for i in free}) < 2:
        return
    m = main_input(case)
    one = case.inputs[m if m in free else free[0]].dtype
    yield edits.with_inputs(case, [edits.with_dtype(r, one) if i in free else r for i, r in enumerate(case.inputs)])
    # Of three dtypes or more (a compound that retyped two inputs: pytorch#153210's
    # int64, int16 and int32 operands), one input at a time into the main dtype: a
    # failure that needs the inputs mixed but not three dtypes keeps two.
    if len({case.inputs[i].dtype for i in free}) > 2:
        for j in reversed(free):
            if case.inputs[j].dtype != one:
                yield edits.with_input(case, j, edits.with_dtype(case.inputs[j], one))


def _dtypes(case: Case):
    if not case.inputs:
        return
    m = main_input(case)
    current = case.inputs[m].dtype
    try:
        allowed = set(catalogue.get(case.op).dtypes)
    except KeyError:
        allowed = set(dt.ALL_DTYPE_NAMES)
    for name in DTYPE_PREFERENCE[dt.dtype_class(current)]:
        if name == current:
            break
        if name in allowed:
            yield edits.with_inputs(case, [edits.with_dtype(r, name) if r.dtype == current else r
                                           for r in case.inputs])


def _values(case: Case):
    for i, r in enumerate(case.inputs):
        v = r.values
        for k in range(len(v.specials)):
            yield edits.with_input(case, i, replace(r, values=replace(v, specials=v.specials[:k] + v.specials[k + 1:])))
        for k, (pos, name) in enumerate(v.specials):
            for simpler in SPECIAL_NAMES[:_SPECIAL_RANK.get(name, 0)]:
                specials = v.specials[:k] + ((pos, simpler),) + v.specials[k + 1:]
                yield edits.with_input(case, i, replace(r, values=replace(v, specials=specials)))
            if pos:
                specials = v.specials[:k] + ((0, name),) + v.specials[k + 1:]
                yield edits.with_input(case, i, replace(r, values=replace(v, specials=specials)))
        # (a solve's or factorisation's matrix keeps its kind: small integers are
        # singular for some seeds, and ablation's reseeded probes of a case reduced so
        # were refused by eager CPU, "invalid", and explained nothing: lu_solve into its
        # negative B, pytorch#178379's class)
        if v.distribution != "small_int" and v.distribution not in MATRIX_DISTRIBUTIONS \
                and v.low is None and v.high is None:
            yield edits.with_input(case, i, replace(r, values=replace(v, distribution="small_int")))
        if v.seed:
            yield edits.with_input(case, i, replace(r, values=replace(v, seed=0)))


def _kwarg_values(case: Case):
    for name, v in case.kwargs:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v == 0:
            continue
        smaller = [0, 1, -1, 2, v // 2 if isinstance(v, int) else round(v)]
        for t in dict.fromkeys(type(v)(x) for x in smaller):
            if abs(t) < abs(v):
                yield edits.set_kwarg(case, name, t)


PASSES = (_variant, _aliasing, _kwargs, _dims, _sizes, _layouts, _one_dtype, _dtypes, _values, _kwarg_values)


@dataclass
class Reduction:
    case: Case
    failure: object                   # the Failure of the last accepted run
    attempts: int
    accepted: int
    seconds: float
    exhausted: bool                   # the budget ran out before a fixed point


def reduce_case(case: Case, failure, symptom: tuple, prober: Prober, *, budget_s: float = 30.0,
                max_attempts: int = 2000) -> Reduction:
    """Greedy first-improvement descent over the proposals above, restarting from the
    first pass after each accepted step, until no proposal is both simpler and still
    fails the same way."""
    start = time.monotonic()
    tried: set[Case] = {case}
    attempts = accepted = 0
    current, current_cost = case, cost(case)
    improved = True
    while improved:
        improved = False
        for proposals in PASSES:
            for candidate in proposals(current):
                if out_of_time(prober, start + budget_s) or attempts >= max_attempts:
                    return Reduction(current, failure, attempts, accepted, time.monotonic() - start, True)
                if candidate in tried:
                    continue
                tried.add(candidate)
                try:
                    candidate_cost = cost(candidate)
                except (ValueError, KeyError):
                    continue
                if candidate_cost >= current_cost:
                    continue
                attempts += 1
                outcome = prober.classify(candidate, symptom)
                if outcome.verdict == SAME:
                    current, current_cost, failure = candidate, candidate_cost, outcome.same
                    accepted += 1
                    improved = True
                    break
            if improved:
                break
    return Reduction(current, failure, attempts, accepted, time.monotonic() - start, False)
