"""Hypothesis strategies for awkward tensors and whole cases.

Strategies are plural nouns with keyword-only ``min_*``/``max_*``/``allow_*`` arguments
validated up front. Every choice is drawn so that Hypothesis shrinks towards the simple
end (contiguous layout, no specials, low rank, small sides, the first dtype of the op's
list), which makes the shrunk case show only what the bug needs.
"""
from __future__ import annotations

import functools
import random
from dataclasses import replace

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from . import arg_extremes
from . import dtypes as dt
from .opspec import GRAD_DTYPES, LARGE_REAL_NUMEL, OpSpec, mixes_dtypes, written_input, ShapeBudget, integers_once, sampled_once, unique_lists_once
from .recipes import (DEVICE_GENERATED, MATRIX_DISTRIBUTIONS, NONFINITE_SPECIALS, SPECIAL_NAMES, Alias, Case, Layout,
                      TensorRecipe, ValueRecipe, storage_plan)

# Ops that disallow non-finite values (BLAS, factorizations) also get no finite extremes
# that overflow in any accumulation: the order of accumulation decides inf vs nan there.
OVERFLOWING_SPECIALS = ("max", "lowest", "big")
FINITE_SPECIALS = tuple(n for n in SPECIAL_NAMES if n not in NONFINITE_SPECIALS + OVERFLOWING_SPECIALS)
GAP_STEPS = (2, 3)
# Share of inputs drawn with at least one layout feature. Hypothesis' draws are not
# uniform (it favours boundaries and integer constants it finds in loaded modules, so the
# realised share even depends on what else is imported), and 0-d, empty and size-1
# tensors stay contiguous whatever their layout. 0.8 gave 31-34% non-contiguous inputs
# depending on the imports; 0.9 gives 38-45% over seeds, above the one third we want.
AWKWARD_RATIO = 0.9
MAX_OFFSET = 5
# Share of draws, among cases with two or more inputs of one dtype, that carve some
# input's base buffer from an earlier input's storage. As with AWKWARD_RATIO, Hypothesis'
# draws are not uniform: 0.2 gives about 9% aliased cases (the tenth we want), 0.1 gave 4%.
ALIAS_RATIO = 0.2
MAX_ALIASED = 3
MAX_OVERLAP_AT = 3
# Where a special value goes: a position taken modulo the input's size.
SPECIAL_POSITIONS = 2**16


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def dtype_names(*, allowed=dt.ALL_DTYPE_NAMES) -> st.SearchStrategy[str]:
    """Dtype names from ``allowed`` (group names such as "float" are expanded)."""
    names = dt.expand_groups(allowed)
    _check(bool(names), f"allowed={allowed!r} names no dtype")
    return st.sampled_from(names)


def layouts(shape: tuple[int, ...], *, allow_offset: bool = True, allow_gaps: bool = True,
            allow_permutation: bool = True, allow_expand: bool = True,
            awkward_ratio: float = AWKWARD_RATIO) -> st.SearchStrategy[Layout]:
    """Layouts for a tensor of ``shape``. ``awkward_ratio`` is the share of draws that get
    at least one awkward feature; the rest are plain (the shrink target)."""
    _check(0.0 <= awkward_ratio <= 1.0, f"awkward_ratio={awkward_ratio!r} must be in [0, 1]")
    return _dressed(_draw_layout, tuple(shape), allow_offset=allow_offset, allow_gaps=allow_gaps,
                  allow_permutation=allow_permutation, allow_expand=allow_expand,
                  awkward_ratio=awkward_ratio)


def value_recipes(dtype_name: str, *, distribution: str | None = None,
                  allow_specials: bool = True, allow_nonfinite: bool = True,
                  max_specials: int = 3) -> st.SearchStrategy[ValueRecipe]:
    """Value recipes for ``dtype_name``: a distribution, a seed and (sometimes) named
    special values at chosen positions."""
    _check(max_specials >= 0, f"max_specials={max_specials!r} must be >= 0")
    dt.canonical(dtype_name)
    return _dressed(_draw_values, dtype_name, distribution=distribution, allow_specials=allow_specials,
                  allow_nonfinite=allow_nonfinite, max_specials=max_specials)


def tensor_recipes(shape: tuple[int, ...], dtype_name: str, *, distribution: str | None = None,
                   allow_specials: bool = True, allow_nonfinite: bool = True,
                   awkward_ratio: float = AWKWARD_RATIO) -> st.SearchStrategy[TensorRecipe]:
    """Recipes for one tensor of a given shape and dtype, with an awkward layout and
    awkward values drawn independently."""
    _check(0.0 <= awkward_ratio <= 1.0, f"awkward_ratio={awkward_ratio!r} must be in [0, 1]")
    dt.canonical(dtype_name)
    return _dressed(_draw_tensor, tuple(shape), dtype_name, distribution=distribution,
                  allow_specials=allow_specials, allow_nonfinite=allow_nonfinite,
                  awkward_ratio=awkward_ratio)


def cases(spec: OpSpec, *, min_rank: int = 0, max_rank: int = 8, max_side: int = 8,
          max_numel: int = 4096, allow_empty: bool = True, awkward_ratio: float = AWKWARD_RATIO,
          mixed_dtype_ratio: float = 0.1, allow_variants: bool = True,
          alias_ratio: float = ALIAS_RATIO) -> st.SearchStrategy[Case]:
    """Whole cases for one op, honouring its declared dtypes, shapes, values and args;
    ``allow_variants`` lets cases call the op's method, in-place, ``out=`` and grad forms;
    ``alias_ratio`` is the share of cases with 2+ inputs of one dtype whose inputs share
    storages."""
    _check(0 <= min_rank <= max_rank, f"min_rank={min_rank!r} and max_rank={max_rank!r} must satisfy 0 <= min_rank <= max_rank")
    _check(max_side >= 1, f"max_side={max_side!r} must be >= 1")
    _check(max_numel >= 1, f"max_numel={max_numel!r} must be >= 1")
    _check(0.0 <= awkward_ratio <= 1.0, f"awkward_ratio={awkward_ratio!r} must be in [0, 1]")
    _check(0.0 <= mixed_dtype_ratio <= 1.0, f"mixed_dtype_ratio={mixed_dtype_ratio!r} must be in [0, 1]")
    _check(0.0 <= alias_ratio <= 1.0, f"alias_ratio={alias_ratio!r} must be in [0, 1]")
    budget = ShapeBudget(min_rank=max(min_rank, spec.min_rank), max_rank=min(max_rank, spec.max_rank),
                         max_side=max_side, allow_empty=allow_empty, max_numel=max_numel)
    return _drawn(_draw_case, spec, budget, awkward_ratio=awkward_ratio, mixed_dtype_ratio=mixed_dtype_ratio,
                  allow_variants=allow_variants, alias_ratio=alias_ratio)


def skeletons(spec: OpSpec, *, min_rank: int = 0, max_rank: int = 8, max_side: int = 8,
              max_numel: int = 4096, allow_empty: bool = True, mixed_dtype_ratio: float = 0.1,
              allow_variants: bool = True) -> st.SearchStrategy[Case]:
    """Cases of ``spec`` of which only the skeleton is drawn (shapes, dtypes, arguments
    and variant, by the op's own builders, as ``cases`` draws them), each input plainly
    dressed (contiguous, the dtype's first value distribution, seed 0). For measuring
    what the builders draw (``mpsfuzz coverage``): the dressing, which draws most of a
    case's choices and no argument, is left out."""
    _check(0 <= min_rank <= max_rank,
           f"min_rank={min_rank!r} and max_rank={max_rank!r} must satisfy 0 <= min_rank <= max_rank")
    _check(max_side >= 1, f"max_side={max_side!r} must be >= 1")
    _check(max_numel >= 1, f"max_numel={max_numel!r} must be >= 1")
    _check(0.0 <= mixed_dtype_ratio <= 1.0, f"mixed_dtype_ratio={mixed_dtype_ratio!r} must be in [0, 1]")
    budget = ShapeBudget(min_rank=max(min_rank, spec.min_rank), max_rank=min(max_rank, spec.max_rank),
                         max_side=max_side, allow_empty=allow_empty, max_numel=max_numel)
    return _drawn(_draw_skeleton, spec, budget, mixed_dtype_ratio=mixed_dtype_ratio, allow_variants=allow_variants)


def example_cases(spec: OpSpec, n: int, *, seed: int, **limits) -> list[Case]:
    """``n`` cases of ``cases(spec, **limits)`` as a campaign draws them (fewer when the
    op has fewer distinct cases), the same ones for the same seed: for measurements and
    tests, which must not change from run to run."""
    return _examples(cases(spec, **limits), n, seed)


def example_skeletons(spec: OpSpec, n: int, *, seed: int, **limits) -> list[Case]:
    """``n`` cases of ``skeletons(spec, **limits)``, drawn as example_cases draws."""
    return _examples(skeletons(spec, **limits), n, seed)


def _examples(strategy: st.SearchStrategy[Case], n: int, seed: int) -> list[Case]:
    drawn: list[Case] = []

    @hypothesis_seed(seed)
    @settings(max_examples=n, deadline=None, database=None, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @given(strategy)
    def collect(case):
        drawn.append(case)

    collect()
    return drawn


# -- drawing ------------------------------------------------------------------------------
# The strategies above are thin wrappers over these plain functions of ``draw``. One
# module-level composite serves them all: defining composites per call is costly
# (Hypothesis inspects their source each time), and plain functions compose without
# building a strategy object per tensor.

@st.composite
def _drawn(draw, fn, *args, **kwargs):
    return fn(draw, *args, **kwargs)


@st.composite
def _dressed(draw, fn, *args, **kwargs):
    return fn(DrawnChoices(draw), *args, **kwargs)


# A case is drawn in two parts: its *skeleton* (shapes, dtypes, arguments, variant: what
# the op's own builders decide) and its *dressing* (each input's layout and values, and
# which inputs share storage: the same for every op). The dressing is drawn through a
# choices object with the methods below, either DrawnChoices (Hypothesis: a drawn case,
# it shrinks) or SeededChoices (a seeded PRNG: siblings() dresses a drawn skeleton again
# at a thirtieth of Hypothesis' cost).
class DrawnChoices:
    """The dressing's choices drawn by Hypothesis (each shrinks towards its first option,
    its lowest integer, its smallest subset)."""
    __slots__ = ("draw",)

    def __init__(self, draw):
        self.draw = draw

    def integer(self, low: int, high: int) -> int:
        return self.draw(integers_once(low, high))

    def choice(self, options):
        return self.draw(sampled_once(options))

    def subset(self, options, *, min_size: int, max_size: int) -> list:
        return self.draw(unique_lists_once(options, min_size=min_size, max_size=max_size))

    def permutation(self, n: int) -> tuple:
        return tuple(self.draw(_permutations(n)))

    def specials(self, names: tuple, max_specials: int) -> tuple:
        return tuple(self.draw(_specials(names, max_specials)))


class SeededChoices:
    """The same choices made by a seeded PRNG: uniform, and the same for the same seed in
    every process (random.Random of an int does not depend on PYTHONHASHSEED)."""
    __slots__ = ("rng",)

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def choice(self, options):
        options = tuple(options)
        return options[self.rng.randrange(len(options))]

    def subset(self, options, *, min_size: int, max_size: int) -> list:
        options = tuple(options)
        return self.rng.sample(options, self.rng.randint(min_size, min(max_size, len(options))))

    def permutation(self, n: int) -> tuple:
        return tuple(self.rng.sample(range(n), n))

    def specials(self, names: tuple, max_specials: int) -> tuple:
        return tuple((self.rng.randint(0, SPECIAL_POSITIONS), self.choice(names))
                     for _ in range(self.rng.randint(1, max_specials)))


def _draw_layout(choose, shape, *, allow_offset=True, allow_gaps=True, allow_permutation=True,
                 allow_expand=True, awkward_ratio=AWKWARD_RATIO, keep_last_dims=0) -> Layout:
    rank = len(shape)
    # 20 buckets: the low ones (where shrinking goes) are plain.
    if choose.integer(0, 19) < round(20 * (1 - awkward_ratio)):
        return Layout()
    features = []
    if allow_permutation and rank >= 2:
        features.append("permutation")
    if allow_gaps and rank >= 1:
        features.append("gaps")
    if allow_expand and rank >= 1:
        features.append("expand")
    if allow_offset:
        features.append("offset")
    if not features:
        return Layout()
    chosen = choose.subset(features, min_size=1, max_size=len(features))
    offset = choose.integer(1, MAX_OFFSET) if "offset" in chosen else 0
    gaps: tuple[int, ...] = ()
    if "gaps" in chosen:
        steps = [choose.choice((1,) + GAP_STEPS) for _ in range(rank)]
        if all(s == 1 for s in steps):
            # Put the gap on a dim longer than 1 so the view really is gapped.
            longer = [d for d, n in enumerate(shape) if n > 1] or [rank - 1]
            steps[choose.choice(longer)] = choose.choice(GAP_STEPS)
        gaps = tuple(steps)
    permutation: tuple[int, ...] = ()
    if "permutation" in chosen:
        kinds = ["transpose", "random"] + (["channels_last"] if rank in (4, 5) else [])
        kind = choose.choice(kinds)
        if kind == "transpose":
            permutation = (*range(rank - 2), rank - 1, rank - 2)
        elif kind == "channels_last":
            permutation = (0, rank - 1, *range(1, rank - 1))
        else:
            permutation = choose.permutation(rank)
    expanded: tuple[int, ...] = ()
    candidates: list[int] = []
    if "expand" in chosen:
        expandable = list(range(rank - keep_last_dims)) if keep_last_dims else list(range(rank))
        candidates = [d for d in expandable if shape[d] != 1] or expandable
    if "expand" in chosen and candidates:
        expanded = tuple(sorted(choose.subset(candidates, min_size=1, max_size=min(2, len(candidates)))))
    return Layout(offset=offset, gaps=gaps, permutation=permutation, expanded=expanded)


@functools.lru_cache(maxsize=None)
def _permutations(rank: int) -> st.SearchStrategy:
    return st.permutations(range(rank))


@functools.lru_cache(maxsize=None)
def _specials(names: tuple, max_specials: int) -> st.SearchStrategy[list]:
    return st.lists(st.tuples(st.integers(0, SPECIAL_POSITIONS), st.sampled_from(names)), min_size=1, max_size=max_specials)


def _distributions_for(dtype_name: str) -> tuple[str, ...]:
    if dtype_name == "bool":
        return ("bool",)
    if dtype_name in dt.INTEGRAL:
        return ("small_int", "int_range")
    return ("normal", "small_int", "uniform", "positive")


def _draw_values(choose, dtype_name, *, distribution=None, allow_specials=True, allow_nonfinite=True,
                 max_specials=3, low=None, high=None) -> ValueRecipe:
    names = SPECIAL_NAMES if allow_nonfinite else FINITE_SPECIALS
    dist = choose.choice((distribution,) if distribution else _distributions_for(dtype_name))
    seed = choose.integer(0, 2**32 - 1)
    specials: tuple = ()
    if allow_specials and max_specials and dtype_name != "bool" and choose.integer(0, 9) >= 6:
        specials = choose.specials(names, max_specials)
    return ValueRecipe(distribution=dist, seed=seed, specials=specials, low=low, high=high)


# Share of complex inputs (in tenths) that carry the conjugate or the negative bit: a
# layout class of its own (issue 38), drawn apart from the strided features since a
# contiguous tensor can carry it too.
VIEW_BIT_TENTHS = 2


def _draw_tensor(choose, shape, dtype_name, *, distribution=None, allow_specials=True,
                 allow_nonfinite=True, awkward_ratio=AWKWARD_RATIO, low=None, high=None) -> TensorRecipe:
    # Well-conditioned matrices: expanding their last two dims would repeat rows or
    # columns and make them singular.
    keep = 2 if distribution in MATRIX_DISTRIBUTIONS else 0
    layout = _draw_layout(choose, shape, awkward_ratio=awkward_ratio, keep_last_dims=keep)
    if dtype_name in dt.COMPLEX and choose.integer(0, 9) >= 10 - VIEW_BIT_TENTHS:
        layout = replace(layout, bit=choose.choice(("conj", "neg")))
    return TensorRecipe(tuple(shape), dtype_name, layout,
                        _draw_values(choose, dtype_name, distribution=distribution,
                                     allow_specials=allow_specials, allow_nonfinite=allow_nonfinite,
                                     low=low, high=high))


# Share of cases (in twentieths) that call the plain functional form; the rest spread
# over the op's other variants. Functional is variant 0, so shrinking goes there first
# and a shrunk variant case means the bug needs that variant.
FUNCTIONAL_TWENTIETHS = 9


def _draw_variant(draw, spec: OpSpec, main_dtype: str, allow_variants: bool, inputs=()) -> str:
    # A written self that was drawn expanded loses only its stride-0 dims afterwards
    # (_not_expanded_where_written): its gaps, offset and permutation stay, so in-place
    # calls on awkward views keep their share of cases.
    variants = [v for v in spec.variants() if (v != "grad" or main_dtype in GRAD_DTYPES)
                and (v != "autocast" or main_dtype == "float32")]
    if not allow_variants or len(variants) == 1 or draw(integers_once(0, 19)) < FUNCTIONAL_TWENTIETHS:
        return "functional"
    return draw(sampled_once(variants[1:]))


def _value_options(entry, shapes, kwargs, spec: OpSpec) -> dict:
    """What an ``input_values`` entry asks of an input's values, as _draw_tensor kwargs."""
    options = dict(distribution=None, allow_specials=spec.allow_specials,
                   allow_nonfinite=spec.allow_nonfinite)
    if isinstance(entry, str):
        options["distribution"] = entry
    elif callable(entry):
        asked = dict(entry(tuple(shapes), kwargs))
        if "allow_specials" in asked:
            options["allow_specials"] = options["allow_specials"] and asked.pop("allow_specials")
        options.update(asked)
    return options


def _written_inputs(spec: OpSpec, variant: str) -> set[int]:
    """Inputs the call writes: self of an in-place call, the input an out-alias call
    passes as ``out=``, the ones the functional form mutates, and the self of
    in-place-only RNG ops (not the input of a large one, rand@huge's, which carries only
    the size of its draw: a stride-0 view)."""
    written = set(spec.mutates) | ({written_input(variant)} - {None})
    if "random" in spec.semantics and "large" not in spec.semantics:
        written.add(0)
    return written


def _may_overlap(a: TensorRecipe, b: TensorRecipe) -> bool:
    """Whether the later input ``b`` may overwrite part of ``a``'s memory: only values of
    one kind (an index in range stays in range, a positive value positive), never a
    well-conditioned matrix."""
    va, vb = a.values, b.values
    return (va.distribution == vb.distribution and (va.low, va.high) == (vb.low, vb.high)
            and va.distribution not in MATRIX_DISTRIBUTIONS)


def _draw_aliasing(choose, spec: OpSpec, inputs: tuple, variant: str, alias_ratio: float) -> tuple:
    """Some inputs carved from an earlier input's storage (``alias_ratio`` of the cases
    that have two inputs of one dtype); drawn so that Hypothesis shrinks to none, to one
    aliased input, to its nearest earlier input of the dtype, and to ``adjacent``."""
    candidates = [j for j in range(1, len(inputs)) if any(inputs[k].dtype == inputs[j].dtype for k in range(j))]
    # Where the reference rebuilds rows of inputs from the hash (``reference_inputs``:
    # the @huge class), an input written over by another's values would hold what no
    # reference rebuilds (bmm@huge judged a correct result wrong). (The @large class's
    # reference materialises the whole case, aliasing included.)
    if spec.reference_inputs is not None and any(r.values.distribution in DEVICE_GENERATED for r in inputs):
        return inputs
    if not candidates or choose.integer(0, 19) < round(20 * (1 - alias_ratio)):
        return inputs
    written = _written_inputs(spec, variant)
    out = list(inputs)
    chosen = choose.subset(candidates, min_size=1, max_size=min(MAX_ALIASED, len(candidates)))
    for j in sorted(chosen):
        earlier = [k for k in reversed(range(j)) if inputs[k].dtype == inputs[j].dtype]
        k = earlier[0] if len(earlier) == 1 or choose.integer(0, 3) < 3 else choose.choice(earlier[1:])
        overlap_ok = j not in written and k not in written and _may_overlap(inputs[k], inputs[j])
        how = choose.choice(("adjacent", "overlap")) if overlap_ok else "adjacent"
        at = choose.integer(0, MAX_OVERLAP_AT) if how == "overlap" else 0
        out[j] = replace(out[j], alias=Alias(of=k, how=how, at=at))
        if how == "overlap" and not _overlaps_allowed(out[:j + 1], j, written):
            out[j] = replace(out[j], alias=Alias(of=k))
    return tuple(out)


def _overlaps_allowed(inputs: tuple, j: int, written: set[int]) -> bool:
    """Whether input ``j``'s base buffer meets only inputs it may overlap: an overlap that
    runs past the end of its source reaches the inputs placed after it in the storage,
    which may be written by the call or hold values of another kind."""
    plan = storage_plan(inputs)
    storage, start = plan[j]
    end = start + inputs[j].base_numel
    for i in range(j):
        other, other_start = plan[i]
        if other != storage or other_start >= end or other_start + inputs[i].base_numel <= start:
            continue
        if i in written or not _may_overlap(inputs[i], inputs[j]):
            return False
    return True


def _constant_if_large(recipe: TensorRecipe, keeps_expanded: bool = False) -> TensorRecipe:
    """An input of the large family past LARGE_REAL_NUMEL elements: a stride-0 view of
    one element (its one value drawn as usual, specials included). One made from the
    hash keeps its stride-0 dims only where ``keeps_expanded`` (the @huge class, whose
    reference rebuilds the expanded rows from the hash, TensorRecipe.rows_values)."""
    if recipe.values.distribution in DEVICE_GENERATED:
        # Made on the device row by row, compared on a few rows: every row its own values
        # (or, expanded, the values of the row it repeats).
        return recipe if keeps_expanded else replace(recipe, layout=replace(recipe.layout, expanded=()))
    if recipe.numel <= LARGE_REAL_NUMEL:
        return recipe
    return replace(recipe, layout=Layout(expanded=tuple(d for d, n in enumerate(recipe.shape) if n != 1)))


def _draw_case(draw, spec: OpSpec, budget: ShapeBudget, *, awkward_ratio, mixed_dtype_ratio,
               allow_variants=True, alias_ratio=ALIAS_RATIO) -> Case:
    shapes, names, main, kwargs = _draw_bones(draw, spec, budget, mixed_dtype_ratio)
    choose = DrawnChoices(draw)
    inputs = _dress_inputs(choose, spec, tuple(shapes), tuple(names), kwargs, awkward_ratio)
    variant = _draw_variant(draw, spec, main, allow_variants, inputs)
    if variant == "autocast":
        inputs = _autocast_inputs(draw, inputs)
    inputs = _not_expanded_where_written(inputs, _written_inputs(spec, variant))
    inputs = _draw_aliasing(choose, spec, inputs, variant, alias_ratio)
    return Case(op=spec.name, inputs=inputs, kwargs=tuple(sorted(kwargs.items())), variant=variant)


def _draw_skeleton(draw, spec: OpSpec, budget: ShapeBudget, *, mixed_dtype_ratio, allow_variants=True) -> Case:
    """What _draw_case draws with the op's own builders (shapes, dtypes, arguments,
    variant), every input plainly dressed: contiguous, the dtype's first distribution."""
    shapes, names, main, kwargs = _draw_bones(draw, spec, budget, mixed_dtype_ratio)
    inputs = tuple(TensorRecipe(tuple(shape), name, Layout(), ValueRecipe(distribution=_distributions_for(name)[0]))
                   for shape, name in zip(shapes, names))
    variant = _draw_variant(draw, spec, main, allow_variants, inputs)
    return Case(op=spec.name, inputs=inputs, kwargs=tuple(sorted(kwargs.items())), variant=variant)


def _draw_bones(draw, spec: OpSpec, budget: ShapeBudget, mixed_dtype_ratio) -> tuple:
    """A case's shapes, input dtypes, main dtype and keyword arguments."""
    shapes = spec.shapes(draw, budget)
    main = draw(sampled_once(spec.dtypes))
    n = len(shapes)
    per_input = list(spec.input_dtypes) or [None] * n
    names = []
    for i in range(n):
        allowed = per_input[i] if i < len(per_input) else None
        name = draw(sampled_once(allowed)) if allowed else main
        if i > 0 and allowed is None and "dtype-pairs" in spec.semantics:
            name = draw(sampled_once(spec.dtypes))
        if (i > 0 and allowed is None and "mixed_dtypes_sometimes" in spec.semantics
                and draw(integers_once(0, 99)) >= round(100 * (1 - mixed_dtype_ratio))):
            name = draw(sampled_once(spec.dtypes))
        names.append(name)
    source = spec.converts
    if "dtype-pairs" in spec.semantics and source is not None and 0 < source < n \
            and draw(integers_once(0, 3)) == 0:
        # A quarter of the pairs: a floating source (the input the result converts) into
        # an integer destination (the first input, of the main dtype), the conversions
        # whose out-of-range values C++ leaves undefined and backends answer differently
        # (pytorch#160744's -1.0 into uint8), their in-range values defined.
        ints = [d for d in spec.dtypes if d in dt.INTEGRAL]
        floats = [d for d in spec.dtypes if d in dt.FLOAT]
        if ints and floats:
            main = names[0] = draw(sampled_once(ints))
            names[source] = draw(sampled_once(floats))
    # Arguments come before values: an input's values may depend on them (indices
    # into the dim that ``dim`` names).
    kwargs = spec.args(draw, tuple(shapes), tuple(names)) if spec.args else {}
    return shapes, names, main, kwargs


def _dress_inputs(choose, spec: OpSpec, shapes: tuple, names: tuple, kwargs: dict, awkward_ratio: float) -> tuple:
    """Each input's layout and values. An input the op requires contiguous (a user's
    kernel that documents it) gets only plain layouts."""
    values = list(spec.input_values) or [None] * len(shapes)
    inputs = tuple(
        _draw_tensor(choose, shapes[i], names[i], awkward_ratio=0.0 if i in spec.contiguous_inputs else awkward_ratio,
                     **_value_options(values[i] if i < len(values) else None, shapes, kwargs, spec))
        for i in range(len(shapes)))
    if spec.input_layouts is not None:
        chosen = spec.input_layouts(choose, shapes, kwargs)
        inputs = tuple(replace(r, layout=chosen[i]) if i in chosen else r for i, r in enumerate(inputs))
    if "large" in spec.semantics:
        keeps = expanded_rows_rebuilt(spec)
        inputs = tuple(_constant_if_large(r, keeps) for r in inputs)
    return inputs


def expanded_rows_rebuilt(spec: OpSpec) -> bool:
    """Whether an input of ``spec`` made from the hash keeps a drawn stride-0 (expanded)
    dim: the @huge class of a sliced group, whose reference rebuilds any rows of an
    expanded input from the hash (issue 38: pytorch#193096, adaptive_avg_pool3d's
    backward of an expanded input past 2^31 elements; a kernel that reads an input by its
    strides meets a stride of 0 there). Not the sample-judged @huge ops (a mask's true
    rows are known in closed form of a mask that is not expanded) nor the large rows'
    ops (generation/ops/large_rows.py: rows of dense inputs)."""
    return spec.reference_inputs is not None and any(g.sliced for g in spec.grows)


def _autocast_inputs(draw, inputs: tuple) -> tuple:
    """Under autocast a layer gets what the one before it gave: each float32 input after
    the first is float16 in a third of the cases (mixed dtypes are what autocast's rules
    are for: an attention whose query is float16 and whose key is float32)."""
    return tuple(replace(r, dtype="float16") if i and r.dtype == "float32" and draw(integers_once(0, 2)) == 0
                 else r for i, r in enumerate(inputs))


def _not_expanded_where_written(inputs: tuple, written: set[int]) -> tuple:
    """An input the call writes keeps its other layout features but no stride-0 dim:
    writing into memory that several elements share is undefined (eager CPU does not
    always refuse it, torch.compile does), so such a case judges nothing."""
    return tuple(replace(r, layout=replace(r.layout, expanded=())) if i in written and r.layout.expanded else r
                 for i, r in enumerate(inputs))


def skeleton(case: Case) -> tuple:
    """What a case shares with its siblings: op, arguments, variant, and each input's
    shape and dtype (distinct skeletons are distinct draws)."""
    return case.op, case.kwargs, case.variant, tuple((r.shape, r.dtype) for r in case.inputs)


def siblings(spec: OpSpec, case: Case, salt: int, count: int, *, awkward_ratio: float = AWKWARD_RATIO,
             alias_ratio: float = ALIAS_RATIO, boundaries: bool = False) -> list[Case]:
    """``count`` cases with ``case``'s skeleton (op, shapes, dtypes, arguments, variant)
    dressed again: each input's layout and values, and the aliasing, drawn by a PRNG
    seeded from ``salt``, the case's value seeds and the sibling's number, so a replay
    derives the same siblings. Drawing a case costs Hypothesis about a millisecond
    whatever is drawn (the worker judges a small op in less); dressing one costs tens of
    microseconds, and a kernel's layouts and values matter as much as its shapes.
    Siblings equal to ``case`` or to an earlier sibling (an op without inputs) are left out.
    With ``boundaries``, every other case's last sibling is its :func:`boundary_sibling`
    instead, where one applies (a campaign's siblings: its first cases of an op reach
    the crash classes a builder draws rarely; issue 37).

    The PRNG draws uniformly where Hypothesis favours the simple end of each choice; with
    the same ratios, siblings come out close to drawn cases (elementwise ops: 91% of
    inputs with some layout feature against 85%, specials in 37% against 34%, 7% of cases
    aliased against 6%)."""
    shapes = tuple(r.shape for r in case.inputs)
    names = tuple(r.dtype for r in case.inputs)
    kwargs = dict(case.kwargs)
    written = _written_inputs(spec, case.variant)
    root = salt
    for r in case.inputs:
        root = _mix(root, r.values.seed)
    out: list[Case] = []
    for k in range(1, count + 1):
        choose = SeededChoices(_mix(root, k))
        inputs = _dress_inputs(choose, spec, shapes, names, kwargs, awkward_ratio)
        inputs = _not_expanded_where_written(inputs, written)
        inputs = _draw_aliasing(choose, spec, inputs, case.variant, alias_ratio)
        sibling = replace(case, inputs=inputs)
        if sibling != case and sibling not in out:
            out.append(sibling)
    edge = boundary_sibling(spec, case, root) if boundaries and count and root % 2 else None
    if edge is not None and edge not in out:
        out = out[:count - 1] + [edge]
    return out


# The skeleton changes of boundary siblings (:func:`boundary_sibling`): the classes of
# crash a campaign must reach within its first cases of an op, which a builder draws
# rarely (issue 37: a 10-minute campaign of five families gives an op 30-50 cases, and
# mse_loss on empty inputs, pytorch#148608, and mm of mixed dtypes, pytorch#143948, were
# never drawn; issue 38: arguments at the ends of their ranges, pytorch#189664, #147613).
BOUNDARIES = ("empty", "mixed-dtypes", "empty-other", "argument-extreme", "nan-entry", "neg-view")


def boundary_sibling(spec: OpSpec, case: Case, salt: int) -> Case | None:
    """``case`` with its skeleton moved to a boundary, the kind chosen from those that
    apply by a hash of ``salt`` and the case: ``empty``, every dim of the size of one of
    the dims of the op's index inputs (else of its first input) made 0 in every input
    (mm's (3, 4) @ (4, 5) -> (0, 4) @ (4, 5), a loss's two (3, 2) inputs -> (0, 2) each,
    index_add's 8 indices and source rows -> 0); ``mixed-dtypes``, for an op that takes them,
    the last input free to take any dtype of the op's given another one; ``empty-other``,
    a size only a later input has made 0 wherever it appears (a weight's columns, a
    grid's points: issue 38, zero-size dims in every tensor of a call);
    ``argument-extreme``, one keyword argument at an extreme of its range
    (:mod:`.arg_extremes`); ``nan-entry``, for an op whose result must carry a NaN of its
    matrix (``OpSpec.nan_propagates``), one entry of the first input made NaN (issue 38,
    non-finite inputs to linalg, whose draws hold none); ``neg-view``, a real floating
    input viewed with the negative bit (``x._neg_view()``: a kernel that reads the
    storage gets -x; pytorch#178379's solve_triangular into a negative view of ``B``),
    which draws give complex inputs only. One sibling in three whose kind is one of a
    pair of :data:`COMPOUNDS` carries both kinds of the pair where both apply (the
    dtypes mixed and an argument at an extreme: pytorch#153210); the other two are the
    single kind's sibling, the same as a salt gave it before compounds were drawn. The
    inputs keep their layouts and value seeds, without aliasing; None where no kind
    applies or the case is there already."""
    kinds = [k for k in BOUNDARIES if _boundary_applies(spec, case, k)]
    if not kinds:
        return None
    choose = SeededChoices(_mix(salt, len(case.inputs)))
    kind = choose.choice(kinds)
    sibling = _moved(spec, case, kind, choose)
    if sibling is None:
        return None
    return _compound(spec, case, kind, salt) or sibling


# Pairs of boundary kinds one sibling may carry together: the mixed dtypes with a kind
# that moves something else (an argument, an entry, a view bit). Upstream reports need
# both at once: pytorch#153210 (CUDA addcmul of an int64 0-d, an int16 and an int32 0-d
# operand with ``value`` ~1e18) and #153209 (cosine_similarity of a float64 0-d operand
# beside float16 NaNs with ``eps=-9.7e23``); a kernel's cast path taken only for mixed
# operands meets the entry's NaN or the view's bit as rarely.
COMPOUNDS = (("mixed-dtypes", "argument-extreme"), ("mixed-dtypes", "nan-entry"), ("mixed-dtypes", "neg-view"))
# How often (in thirds) a sibling whose kind is one of a pair that applies carries the
# pair instead: the single kind stays the sibling two times in three (it is still drawn
# then, and carried the third time too).
COMPOUND_THIRDS = 1
# Mixed into the salt for the compound's own choices, apart from the single kind's: the
# single sibling a salt gives is the one it gave before compounds were drawn.
_COMPOUND_STREAM = 0xC0B0
# How often (in halves) a compound's mix retypes two inputs, each to a dtype of its own,
# where the op has two inputs free to take one and its class has the dtypes: every
# operand of a three-tensor op in a dtype of its own (pytorch#153210's addcmul of int64,
# int16 and int32 operands). Compounds only: a single mixed sibling is the one it was.
TWO_RETYPED_HALVES = 1
# How often (in halves) a compound carries a third change after its pair, where one
# applies: another kind of a pair, or a NaN entry in the first input of an op whose draws
# admit non-finite values (``nan-value``: pytorch#153209's float16 NaNs beside a float64
# 0-d operand with an extreme eps; the ``nan-entry`` kind is for ops whose result must
# carry the NaN, OpSpec.nan_propagates). Compounds only, so no kind's single siblings
# change.
THIRD_KIND_HALVES = 1
# The compound-only kind above.
NAN_VALUE = "nan-value"


def _compound(spec: OpSpec, case: Case, kind: str, salt: int) -> Case | None:
    """``case`` moved to two boundaries of a pair of :data:`COMPOUNDS` that ``kind`` (the
    single kind drawn) belongs to, one sibling in three where the pair applies; else None.
    The dtypes are mixed first (two inputs retyped half the time where two are free:
    :data:`TWO_RETYPED_HALVES`) and the other kind is applied to the mixed case, so an
    argument's extreme is one the mixed case's number dtype holds
    (arg_extremes.number_dtype) and a view bit sits on an input of its final dtype. Half
    the time a third change follows where one applies (:data:`THIRD_KIND_HALVES`): mixed
    dtypes, an extreme argument and a NaN in one call (pytorch#153209)."""
    choose = SeededChoices(_mix(salt, _COMPOUND_STREAM))
    if choose.integer(0, 2) >= COMPOUND_THIRDS:
        return None
    # (each pair's other kind than the mix: every kind of the pairs for a mixed sibling,
    # the kind itself for another)
    others = [b if a == "mixed-dtypes" else a for a, b in COMPOUNDS
              if kind in (a, b) and {a, b} <= set(BOUNDARIES)]
    two = choose.integer(0, 1) < TWO_RETYPED_HALVES
    mixed = _moved(spec, case, "mixed-dtypes", choose, same_class=True, retyped=2 if two else 1) \
        if others and _boundary_applies(spec, case, "mixed-dtypes") else None
    if mixed is None:
        return None
    others = [k for k in others if _boundary_applies(spec, mixed, k)]
    if not others:
        return None
    second = choose.choice(others)
    both = _moved(spec, mixed, second, choose)
    if both is None or both == mixed:
        return None
    if choose.integer(0, 1) >= THIRD_KIND_HALVES:
        return both
    thirds = [k for a, b in COMPOUNDS for k in (a, b)
              if k not in ("mixed-dtypes", second) and _boundary_applies(spec, both, k)]
    if "nan-entry" not in thirds and _nan_value_applies(spec, both):
        thirds.append(NAN_VALUE)
    if not thirds:
        return both
    third = choose.choice(sorted(set(thirds)))
    all_three = _moved(spec, both, third, choose)
    return both if all_three is None else all_three


def _nan_value_applies(spec: OpSpec, case: Case) -> bool:
    """Whether a compound may put a NaN in ``case``'s first input: floating, not empty,
    without one, its values drawn on the host, and the op's draws admit non-finite
    values (a NaN there is one its own draws make, not a new kind of input)."""
    first = case.inputs[0] if case.inputs else None
    if first is None or first.numel == 0 or not (first.dtype in dt.FLOAT or first.dtype in dt.COMPLEX) \
            or first.values.distribution in DEVICE_GENERATED or "large" in spec.semantics \
            or any(name == "nan" for _, name in first.values.specials):
        return False
    # (what the op's builder asks of its first input's values: a matrix drawn well
    # conditioned, a probability, takes no special value, and gets none here)
    entry = spec.input_values[0] if spec.input_values else None
    asked = _value_options(entry, tuple(r.shape for r in case.inputs), dict(case.kwargs), spec)
    return bool(asked["allow_specials"] and asked["allow_nonfinite"])


def _moved(spec: OpSpec, case: Case, kind: str, choose, *, same_class: bool = False,
           retyped: int = 1) -> Case | None:
    """``case`` moved to boundary ``kind`` (which applies to it), the choices drawn from
    ``choose``; None where that leaves it as it was. ``same_class``: mixed dtypes of one
    class where the op has another dtype of the input's class (a compound's: the reports
    mix integers with integers, #153210, and floats with floats, #153209). ``retyped``:
    how many inputs free to take a dtype the mix retypes (the last ones), each to a dtype
    of its own other than the case's, where the op has them (fewer where not)."""
    inputs = tuple(replace(r, alias=None) for r in case.inputs)
    if kind == "argument-extreme":
        name, slot, extremes = choose.choice(arg_extremes.candidates(spec, case.kwargs, arg_extremes.number_dtype(case)))
        kwargs = arg_extremes.with_extreme(dict(case.kwargs), name, slot, choose.choice(extremes))
        sibling = replace(case, inputs=inputs, kwargs=tuple(sorted(kwargs.items())))
        return None if sibling == case else sibling
    if kind == "neg-view":
        # Half the time the input the call writes (in place, or passed as out=), where
        # there is one: a kernel writing through the bit is the class's bugs
        # (pytorch#178379's solve_triangular into its own B; eager CPU's triu into out=
        # of its own permuted negative view).
        eligible = _real_float_inputs(case)
        written = sorted(set(eligible) & _written_inputs(spec, case.variant))
        i = choose.choice(written) if written and choose.integer(0, 1) else choose.choice(eligible)
        inputs = tuple(r if j != i else replace(r, layout=replace(r.layout, bit="neg")) for j, r in enumerate(inputs))
        return replace(case, inputs=inputs)
    if kind in ("nan-entry", NAN_VALUE):
        # (a compound's NaN joins the specials the input was drawn with)
        first = inputs[0]
        kept = first.values.specials if kind == NAN_VALUE else ()
        inputs = (replace(first, values=replace(first.values, specials=kept + ((choose.integer(0, 2**16), "nan"),))),
                  *inputs[1:])
        return replace(case, inputs=inputs)
    if kind in ("empty", "empty-other"):
        if kind == "empty":
            first = next(r.shape for r in _emptied_from(spec, inputs) if any(n > 0 for n in r.shape))
            size = choose.choice([n for n in first if n > 0])
        else:
            size = choose.choice(_later_sizes(inputs))
        inputs = tuple(replace(r, shape=tuple(0 if n == size else n for n in r.shape)) for r in inputs)
    else:
        free = [i for i in range(1, len(inputs)) if _free_dtype(spec, i)]
        taken = {inputs[free[-1]].dtype}
        for i in reversed(free[-retyped:]):
            others = [d for d in spec.dtypes if d not in taken]
            if same_class:
                others = [d for d in others if dt.dtype_class(d) == dt.dtype_class(inputs[i].dtype)] or others
            if not others or (i != free[-1] and not [d for d in others if dt.dtype_class(d) == dt.dtype_class(inputs[i].dtype)]):
                break       # (a second input retyped only within its class, to a dtype of its own)
            name = choose.choice(others)
            taken.add(name)
            inputs = _retyped(inputs, i, name)
    sibling = replace(case, inputs=inputs)
    return None if sibling == case else sibling


def _retyped(inputs: tuple, i: int, name: str) -> tuple:
    """``inputs`` with input ``i`` in dtype ``name``, its values drawn for that dtype."""
    # (values made on the device stay so: a @huge input of billions of elements is
    # never drawn on the host, and its reference builds a few rows from the hash)
    r = inputs[i]
    made_on_device = r.values.distribution in DEVICE_GENERATED
    return tuple(x if j != i else x.retyped(name, values=replace(
        x.values, distribution=x.values.distribution if made_on_device else _distributions_for(name)[0],
        low=None, high=None, specials=()))
        for j, x in enumerate(inputs))


def _real_float_inputs(case: Case) -> list[int]:
    """The inputs a ``neg-view`` boundary may take: real floating, not empty, no bit yet."""
    return [i for i, r in enumerate(case.inputs) if r.dtype in dt.FLOAT and r.numel > 0 and not r.layout.bit]


def _emptied_from(spec: OpSpec, inputs) -> list:
    """The inputs an ``empty`` boundary takes its size from: an op's index inputs where it
    has them (integer inputs whose values its builders draw for the shapes), so that no
    index is left pointing into a dim made empty (index_add of 8 indices into a self of 0
    rows is a call no backend need answer: CUDA's bounds check asserts); else every input."""
    builders = list(spec.input_values)
    index = [r for i, r in enumerate(inputs) if i < len(builders) and builders[i] is not None
             and r.dtype in dt.INTEGRAL]
    return index or list(inputs)


def _later_sizes(inputs) -> list[int]:
    """The dim sizes of inputs after the first that the first has not (sorted)."""
    return sorted({n for r in inputs[1:] for n in r.shape if n > 0} - set(inputs[0].shape)) if inputs else []


def _free_dtype(spec: OpSpec, i: int) -> bool:
    per_input = list(spec.input_dtypes)
    return i > 0 and (i >= len(per_input) or per_input[i] is None)


def _boundary_applies(spec: OpSpec, case: Case, kind: str) -> bool:
    if kind == "argument-extreme":
        return arg_extremes.admits_extremes(spec, case.kwargs, arg_extremes.number_dtype(case)) \
            and not arg_extremes.extreme_arguments(case)
    if kind == "neg-view":
        return not ({"random", "large"} & set(spec.semantics)) and bool(_real_float_inputs(case))
    if kind == "nan-entry":
        first = case.inputs[0] if case.inputs else None
        return bool(spec.nan_propagates) and case.variant != "grad" and first is not None \
            and first.numel > 0 and first.dtype in dt.FLOAT + dt.COMPLEX \
            and not any(name == "nan" for _, name in first.values.specials)
    if kind in ("empty", "empty-other"):
        if not all(r.numel > 0 for r in case.inputs) or "large" in spec.semantics:
            return False
        if kind == "empty" and "undefined-when-empty" in spec.semantics:
            return False
        if kind == "empty-other":
            return "structural-later-sizes" not in spec.semantics and bool(_later_sizes(case.inputs))
        return any(any(n > 0 for n in r.shape) for r in _emptied_from(spec, case.inputs))
    return (mixes_dtypes(spec)
            and any(_free_dtype(spec, i) for i in range(1, len(case.inputs)))
            and len({r.dtype for r in case.inputs}) == 1)


def _mix(x: int, y: int) -> int:
    # splitmix64's finaliser over x and y: cheap, and well spread even where Hypothesis
    # drew a seed as 0 or 2**32 - 1 (it favours boundaries).
    x = (x * 0x9E3779B97F4A7C15 + y * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & (2**64 - 1)
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return x ^ (x >> 31)
