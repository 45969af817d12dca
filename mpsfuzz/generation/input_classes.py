"""The input classes of issue 38, by name: which ones an op admits and which ones a
case exercises (``mpsfuzz coverage`` counts them per op).

Each class is a kind of call upstream bugs cluster on and a builder draws rarely, if
ever: operands of different dtypes, an ``out=`` of another dtype, a keyword argument at
an extreme of its range, a zero-size dim that only a later input has, a complex input
viewed with its conjugate or negative bit, and the large size classes. An op admits a
class by what its table entry declares (dtypes, semantics, variants, the size-class
variants the catalogue made of it), so a new op joins without a list of names here.
Two classes depend on the shapes and arguments the builders draw, not on a declaration
alone (``empty-other``: a size only a later input has; ``argument-extreme``: a keyword
argument that can move to an extreme): they are admitted where some drawn case admits
them (:data:`JUDGED_FROM_DRAWS`).

A size-class variant (``<op>@large``, ``<op>@huge``) admits and draws its size classes
only (``large``, ``large-grad``...): its cases count for its base op's row.
"""
from __future__ import annotations

from typing import Iterable

from . import dtypes as dt
from .arg_extremes import admits_extremes, extreme_arguments, number_dtype
from .opspec import OpSpec, mixes_dtypes
from .recipes import Case, main_input

MIXED_DTYPES = "mixed-dtypes"
OUT_CAST = "out-cast"
ARGUMENT_EXTREME = "argument-extreme"
EMPTY_OTHER = "empty-other"
CONJ_VIEW = "conj-view"
NEG_VIEW = "neg-view"
# A NaN entry in the matrix of an op whose result must carry it (OpSpec.nan_propagates).
NAN_ENTRY = "nan-entry"
# The layout bit (recipes.Layout.bit) each view class is drawn with.
VIEW_BITS = {"conj": CONJ_VIEW, "neg": NEG_VIEW}
# The size classes, by the suffix of the variant the catalogue makes (large_sizes.SUFFIXES);
# each with its grad variant where the size-class variant has one.
SIZE_CLASSES = ("large", "huge")
GRAD_SUFFIX = "-grad"

CLASSES = (MIXED_DTYPES, OUT_CAST, ARGUMENT_EXTREME, EMPTY_OTHER, CONJ_VIEW, NEG_VIEW, NAN_ENTRY,
           *(name + suffix for name in SIZE_CLASSES for suffix in ("", GRAD_SUFFIX)))
# Admitted where some drawn case admits them: the shapes and arguments decide.
JUDGED_FROM_DRAWS = (EMPTY_OTHER, ARGUMENT_EXTREME)


def size_class_of(spec: OpSpec) -> str:
    """``large`` for ``<op>@large``, ``huge`` for ``<op>@huge``, "" for an op of its own
    (the suffix after the base op's name: the catalogue names the variants so)."""
    if not spec.size_class or not spec.base or not spec.name.startswith(spec.base + "@"):
        return ""
    return spec.name[len(spec.base) + 1:]


def _declared_dtypes(spec: OpSpec) -> set[str]:
    """Every dtype an input of ``spec`` may take: the op's and each input's own list."""
    return set(spec.dtypes) | {d for allowed in spec.input_dtypes if allowed for d in allowed}


def free_inputs(spec: OpSpec, count: int) -> list[int]:
    """The inputs (of ``count``) whose dtype the op's drawn dtype sets, not a list of
    their own (an index, a mask): the ones whose dtypes may be mixed."""
    per_input = list(spec.input_dtypes)
    return [i for i in range(count) if i >= len(per_input) or per_input[i] is None]


def _has_free_later_input(spec: OpSpec) -> bool:
    """Whether an input after the first is free to take another dtype (an op declaring
    no inputs one by one takes any number: cat's)."""
    if not spec.input_dtypes:
        return True
    return any(i > 0 for i in free_inputs(spec, len(spec.input_dtypes)))


def _declared(spec: OpSpec) -> set[str]:
    """The classes ``spec``'s declaration admits, those judged from draws included as
    candidates."""
    size = size_class_of(spec)
    if size:
        return {size} | ({size + GRAD_SUFFIX} if "grad" in spec.variants() else set())
    out = set()
    if mixes_dtypes(spec) and _has_free_later_input(spec):
        out.add(MIXED_DTYPES)
    if OUT_CAST in spec.variants() and spec.out_cast and any(d in dt.OUT_CASTS for d in spec.dtypes):
        out.add(OUT_CAST)
    if any(d in dt.COMPLEX for d in _declared_dtypes(spec)):
        out |= set(VIEW_BITS.values())
    if any(d in dt.FLOAT for d in _declared_dtypes(spec)) and not ({"random", "large"} & set(spec.semantics)):
        out.add(NEG_VIEW)       # (a real input's neg bit: a boundary sibling)
    if (spec.arity > 1 or not spec.input_dtypes) and "structural-later-sizes" not in spec.semantics \
            and "large" not in spec.semantics:
        out.add(EMPTY_OTHER)
    out.add(ARGUMENT_EXTREME)
    if spec.nan_propagates:
        out.add(NAN_ENTRY)
    return out


def later_sizes(case: Case) -> set[int]:
    """The dim sizes inputs after the first have and the first has not."""
    if not case.inputs:
        return set()
    return {n for r in case.inputs[1:] for n in r.shape if n > 0} - set(case.inputs[0].shape)


def _admits_empty_other(case: Case) -> bool:
    """Whether an ``empty-other`` boundary can be made of ``case`` (strategies'
    boundary_sibling): no input empty yet, and a size that only a later input has."""
    return all(r.numel > 0 for r in case.inputs) and bool(later_sizes(case))


def _judged(spec: OpSpec, case: Case) -> set[str]:
    """The classes judged from draws that ``case``'s skeleton admits."""
    out = set()
    if _admits_empty_other(case):
        out.add(EMPTY_OTHER)
    if admits_extremes(spec, case.kwargs, number_dtype(case)):
        out.add(ARGUMENT_EXTREME)
    return out


def admissible(spec: OpSpec, cases: Iterable[Case] = ()) -> frozenset[str]:
    """The classes ``spec`` admits: by its declaration, and for :data:`JUDGED_FROM_DRAWS`
    where also some case of ``cases`` admits them or exercises them (without cases,
    those are left out: a declaration alone cannot say)."""
    declared = _declared(spec)
    out = declared - set(JUDGED_FROM_DRAWS)
    judged = declared & set(JUDGED_FROM_DRAWS)
    for case in cases:
        if not judged:
            break
        found = judged & (_judged(spec, case) | drawn(spec, case))
        out |= found
        judged -= found
    return frozenset(out)


def drawn(spec: OpSpec, case: Case) -> frozenset[str]:
    """The classes ``case`` of ``spec`` exercises (a size-class variant's: its size
    class, and its grad variant where the case calls it)."""
    size = size_class_of(spec)
    if size:
        return frozenset({size} | ({size + GRAD_SUFFIX} if case.variant == "grad" else set()))
    out = set()
    free = free_inputs(spec, len(case.inputs))
    if len({case.inputs[i].dtype for i in free}) > 1:
        out.add(MIXED_DTYPES)
    if case.variant == OUT_CAST and case.inputs and case.inputs[main_input(case)].dtype in dt.OUT_CASTS:
        out.add(OUT_CAST)
    if extreme_arguments(case):
        out.add(ARGUMENT_EXTREME)
    if case.inputs and 0 not in case.inputs[0].shape and any(0 in r.shape for r in case.inputs[1:]):
        out.add(EMPTY_OTHER)
    out |= {VIEW_BITS[r.layout.bit] for r in case.inputs if r.layout.bit in VIEW_BITS}
    if spec.nan_propagates and case.inputs and any(name == "nan" for _, name in case.inputs[0].values.specials):
        out.add(NAN_ENTRY)
    return frozenset(out)


def ordered(classes: Iterable[str]) -> tuple[str, ...]:
    """``classes`` in the order of :data:`CLASSES` (for reports)."""
    chosen = set(classes)
    return tuple(name for name in CLASSES if name in chosen)
