"""Small, always-valid edits of case recipes: the moves of the reducer and the ablation.

Each edit returns a new recipe (recipes are frozen) whose layout still fits its shape;
whether the op still accepts the edited case is for a run to say.
"""
from __future__ import annotations

from dataclasses import replace

from ..generation.opspec import aliased_out_input
from ..generation.recipes import NONFINITE_SPECIALS, Case, Layout, TensorRecipe

PLAIN = Layout()


def with_input(case: Case, index: int, recipe: TensorRecipe) -> Case:
    inputs = list(case.inputs)
    inputs[index] = recipe
    return with_inputs(case, inputs)


def with_inputs(case: Case, recipes) -> Case:
    """``case`` with these inputs; an alias the edit broke (it names a later input now,
    or one of another dtype) is dropped, so that an edit always gives a valid case."""
    recipes = list(recipes)
    for i, r in enumerate(recipes):
        if r.alias is not None and (r.alias.of >= i or recipes[r.alias.of].dtype != r.dtype):
            recipes[i] = unaliased(r)
    return replace(case, inputs=tuple(recipes))


def unaliased(recipe: TensorRecipe) -> TensorRecipe:
    """The same input in a storage of its own (its own values: where it overlapped an
    earlier input, that one's values are its own again too)."""
    return replace(recipe, alias=None)


def without_aliasing(case: Case) -> Case:
    """Every input in a storage of its own, and ``out=`` a tensor of its own."""
    plain_case = with_inputs(case, [unaliased(r) for r in case.inputs])
    return replace(plain_case, variant="out") if aliased_out_input(case.variant) is not None else plain_case


def drop_kwarg(case: Case, name: str) -> Case:
    return replace(case, kwargs=tuple((k, v) for k, v in case.kwargs if k != name))


def set_kwarg(case: Case, name: str, value) -> Case:
    return replace(case, kwargs=tuple((k, value if k == name else v) for k, v in case.kwargs))


def drop_dim(recipe: TensorRecipe, dim: int) -> TensorRecipe:
    """``recipe`` without dim ``dim``: the layout loses that dim's gap, its place in the
    permutation (the rest renumbered) and its expansion."""
    lay = recipe.layout
    shape = recipe.shape[:dim] + recipe.shape[dim + 1:]
    gaps = lay.gaps[:dim] + lay.gaps[dim + 1:] if lay.gaps else ()
    perm = ()
    if lay.permutation:
        gone = lay.permutation[dim]
        perm = tuple(p - (p > gone) for j, p in enumerate(lay.permutation) if j != dim)
    expanded = tuple(e - (e > dim) for e in lay.expanded if e != dim)
    return replace(recipe, shape=shape, layout=Layout(lay.offset, gaps, perm, expanded, lay.bit))


def add_leading_dim(recipe: TensorRecipe) -> TensorRecipe:
    """``recipe`` with a new leading dim of size 1 (a 0-d tensor becomes shape [1])."""
    lay = recipe.layout
    gaps = (1,) + lay.gaps if lay.gaps else ()
    perm = (0,) + tuple(p + 1 for p in lay.permutation) if lay.permutation else ()
    expanded = tuple(e + 1 for e in lay.expanded)
    return replace(recipe, shape=(1,) + recipe.shape, layout=Layout(lay.offset, gaps, perm, expanded, lay.bit))


def resize(recipe: TensorRecipe, dim: int, size: int) -> TensorRecipe:
    shape = list(recipe.shape)
    shape[dim] = size
    return replace(recipe, shape=tuple(shape))


def plain(recipe: TensorRecipe) -> TensorRecipe:
    return replace(recipe, layout=PLAIN)


def without_specials(recipe: TensorRecipe, names=None) -> TensorRecipe:
    """Drop the named specials (all of them when ``names`` is None)."""
    kept = tuple((p, n) for p, n in recipe.values.specials if names is not None and n not in names)
    return replace(recipe, values=replace(recipe.values, specials=kept))


def without_nonfinite(recipe: TensorRecipe) -> TensorRecipe:
    return without_specials(recipe, NONFINITE_SPECIALS)


# Specials that are negative numbers (-0.0 is not: it compares equal to 0).
NEGATIVE_SPECIALS = ("-inf", "lowest", "-2^31-1", "-1")


def non_negative(recipe: TensorRecipe) -> TensorRecipe:
    """The same recipe with values that are never negative: the integer and uniform
    ranges start at 0 (a bounded index_hash's too: still made on the device), other
    distributions become ``positive``, negative specials go."""
    v = without_specials(recipe, NEGATIVE_SPECIALS).values
    bounded_hash = v.distribution == "index_hash" and v.low is not None and v.high is not None
    if v.distribution in ("small_int", "int_range", "uniform") or bounded_hash:
        low = 0 if v.low is None else max(v.low, 0)
        high = v.high if v.high is None or v.high >= low else low
        v = replace(v, low=low, high=high)
    elif v.distribution not in ("positive", "bool"):
        v = replace(v, distribution="positive", low=None, high=None)
    return replace(recipe, values=v)


def with_dtype(recipe: TensorRecipe, dtype: str) -> TensorRecipe:
    return recipe.retyped(dtype)


def layout_variants(recipe: TensorRecipe):
    """Simpler layouts for one input, simplest first: plain, then each feature removed,
    then each feature made smaller (one gapped dim of step 2, offset 1, a transpose of
    the last two dims instead of another permutation, one expanded dim)."""
    lay, rank = recipe.layout, recipe.rank
    out = [PLAIN]
    if lay.offset:
        out.append(replace(lay, offset=0))
    if any(g > 1 for g in lay.gaps):
        out.append(replace(lay, gaps=()))
    if lay.moves_dims():
        out.append(replace(lay, permutation=()))
    if lay.expanded:
        out.append(replace(lay, expanded=()))
    if lay.bit:
        out.append(replace(lay, bit=""))
    if lay.offset > 1:
        out.append(replace(lay, offset=1))
    gapped = [d for d, g in enumerate(lay.gaps) if g > 1]
    for d in gapped:
        one = tuple(2 if j == d else 1 for j in range(rank))
        if one != tuple(lay.gaps):
            out.append(replace(lay, gaps=one))
    if lay.moves_dims() and rank >= 2:
        transpose = (*range(rank - 2), rank - 1, rank - 2)
        if tuple(lay.permutation) != transpose:
            out.append(replace(lay, permutation=transpose))
    if len(lay.expanded) > 1:
        out += [replace(lay, expanded=(e,)) for e in lay.expanded]
    # The simplest awkward layouts, whatever this one is: a storage offset of 1, or a
    # gap of 2 in one dim (last dims first) that is not of size 1.
    out.append(Layout(offset=1))
    for d in reversed(range(rank)):
        if recipe.shape[d] > 1:
            out.append(Layout(gaps=tuple(2 if j == d else 1 for j in range(rank))))
    return [replace(recipe, layout=candidate) for candidate in out if candidate != lay]
