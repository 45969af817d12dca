"""The indexing family: index values in range, value builders that follow the drawn dim,
canonicalisers that accept any winner among duplicate writes (and nothing else), exact
accumulation, variants that really call the op, and the sorted-input wrappers."""
from __future__ import annotations

import warnings

import pytest
import torch

from mpsfuzz.execution.executor import run_reference
from mpsfuzz.execution.observation import Raised
from mpsfuzz.generation import catalogue
from mpsfuzz.generation import strategies as S
from mpsfuzz.generation.ops import indexing as ix

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")

OPS = {n: s for n, s in catalogue.all_ops().items() if s.family == "indexing"}
INDEX_OPS = sorted(n for n, s in OPS.items()
                   if any(d is not None and set(d) <= {"int64", "int32"} for d in s.input_dtypes)
                   and n not in ("repeat_interleave", "repeat_interleave_self"))


def _cases(spec, n=50, **kw):
    return S.example_cases(spec, n, seed=0, **kw)


def test_family_has_the_requested_ops():
    want = """index_select gather scatter scatter_value scatter_reduce_str scatter_add scatter_reduce
        index_add index_copy index_fill index_put index_put_acc index_put_mask put put_acc masked_fill
        masked_select masked_scatter take take_along_dim nonzero nonzero_tuple argwhere
        repeat_interleave repeat_interleave_int cat stack hstack vstack split tensor_split chunk unbind
        flip roll rot90 narrow select diagonal diag_embed diag tril_indices triu_indices searchsorted
        searchsorted_sorter bucketize getitem getitem_mask setitem setitem_mask scatter_ index_add_
        index_put_ masked_fill""".split()
    assert not [n for n in want if n not in OPS]


@pytest.mark.parametrize("name", INDEX_OPS)
def test_index_values_are_always_in_range(name):
    """50 draws (awkward layouts, >4-D, empty) give cases CPU accepts; the index
    recipes never carry specials."""
    spec = OPS[name]
    for case in _cases(spec, allow_variants=False):
        for recipe, allowed in zip(case.inputs, spec.input_dtypes):
            if allowed and set(allowed) <= {"int64", "int32"}:
                assert recipe.values.specials == ()
                if spec.size_class:   # the large class makes them on the device, in the same bounds
                    assert recipe.values.distribution == "index_hash"
                    assert recipe.values.low is not None and recipe.values.high is not None
                else:
                    assert recipe.values.distribution == "int_range"
        ref, _ = run_reference(case, spec, case.kwargs_dict())
        assert not isinstance(ref, Raised), (case.describe(), ref.message)


@pytest.mark.parametrize("name", ["gather", "scatter", "index_select", "index_add", "scatter_reduce"])
def test_dim_indices_stay_within_the_drawn_dim(name):
    spec = OPS[name]
    for case in _cases(spec, allow_variants=False):
        x, index = case.materialize()[:2]
        dim = case.kwargs_dict()["dim"]
        n = x.shape[dim] if x.dim() else 1
        if index.numel():
            assert 0 <= int(index.min()) and int(index.max()) < n, case.describe()


def test_value_builder_follows_dim_and_flat_modes():
    build = ix.index_values(0)
    assert build(((3, 7),), {"dim": 1})["high"] == 6
    assert build(((3, 7),), {"dim": -2})["high"] == 2
    assert build(((3, 7),), {"dim": 0}) == {"distribution": "int_range", "low": 0, "high": 2,
                                             "allow_specials": False}
    assert ix.index_values(0, negative=True)(((5,),), {"dim": 0})["low"] == -5
    assert ix.index_values(0, flat=True)(((3, 7),), {})["high"] == 20
    assert ix.index_values(0)(((3, 7),), {"dim": None})["high"] == 20      # take_along_dim(dim=None)
    assert ix.index_values(0, dim_key=None, lead_key="lead")(((3, 7, 2),), {"lead": 1})["high"] == 6


def test_nonzero_as_tuple_and_mostly_zero_inputs():
    x = torch.tensor([[0.0, 1.0], [float("nan"), -0.0]])
    rows, cols = OPS["nonzero_tuple"].fn(x, as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [1, 0]
    assert OPS["nonzero"].fn(x).tolist() == [[0, 1], [1, 0]]
    zeros = sum(int((c.materialize()[0] == 0).sum()) for c in _cases(OPS["nonzero"], 30))
    assert zeros > 0


# -- duplicate writes ------------------------------------------------------------------------

def _scatter_reversed(x, index, src, dim):
    """scatter with the other winner: later duplicates lose (CPU: later ones win)."""
    out = x.clone()
    for pos in reversed(list(torch.cartesian_prod(*[torch.arange(n) for n in index.shape]).view(-1, index.dim()))):
        p = tuple(int(v) for v in pos)
        q = list(p)
        q[dim] = int(index[p])
        out[tuple(q)] = src[p]
    return out


def test_scatter_canonicaliser_accepts_any_winner_and_flags_wrong_values():
    x = torch.zeros(3, 4)
    index = torch.tensor([[0, 1, 0, 2], [0, 1, 2, 2]])
    src = torch.arange(8.0).view(2, 4) + 1
    a = torch.scatter(x, 0, index, src)
    b = _scatter_reversed(x, index, src, 0)
    assert not torch.equal(a, b)
    ca, oka = ix._canon_scatter([x, index, src], a)
    cb, okb = ix._canon_scatter([x, index, src], b)
    assert oka.all() and okb.all() and torch.equal(ca, cb)
    wrong = a.clone()
    wrong[0, 0] = 99.0          # written twice: not a candidate
    assert not ix._canon_scatter([x, index, src], wrong)[1].all()
    wrong = a.clone()
    wrong[1, 0] = 5.0           # never written: compared exactly
    assert not torch.equal(ix._canon_scatter([x, index, src], wrong)[0], ca)
    # with the dim known the reading is exact
    assert ix._canon_scatter([x, index, src], b, {"dim": 0})[1].all()


def test_index_copy_put_and_index_put_canonicalisers():
    x = torch.zeros(4, 2)
    index = torch.tensor([1, 1, 3])
    src = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    first_wins = x.clone()
    first_wins[1], first_wins[3] = src[0], src[2]
    last_wins = torch.index_copy(x, 0, index, src)
    for canon in (ix._canon_index_copy,):
        assert torch.equal(canon([x, index, src], first_wins)[0], canon([x, index, src], last_wins)[0])
        assert canon([x, index, src], first_wins)[1].all()
    flat = torch.zeros(5)
    idx = torch.tensor([-1, 4, 0])
    vals = torch.tensor([7.0, 8.0, 9.0])
    a = torch.put(flat, idx, vals)
    b = a.clone()
    b[4] = 7.0
    assert torch.equal(ix._canon_put([flat, idx, vals], a)[0], ix._canon_put([flat, idx, vals], b)[0])
    assert ix._canon_put([flat, idx, vals], b)[1].all()
    b[4] = 1.0
    assert not ix._canon_put([flat, idx, vals], b)[1].all()
    # index_put with two index tensors and broadcast values
    x = torch.zeros(3, 3, 2)
    i, j = torch.tensor([0, 0, 2]), torch.tensor([1, 1, 1])
    v = torch.arange(6.0).view(3, 2)
    a = ix._index_put(x, v, i, j)
    b = a.clone()
    b[0, 1] = v[0]
    ca, oka = ix._canon_index_put([x, v, i, j], a)
    cb, okb = ix._canon_index_put([x, v, i, j], b)
    assert oka.all() and okb.all() and torch.equal(ca, cb)


def test_setitem_canonicaliser_with_leading_slices():
    x = torch.zeros(2, 3)
    idx = torch.tensor([0, -3, 2])
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    a = ix._setitem(x, idx, v, lead=1)
    b = a.clone()
    b[:, 0] = v[:, 1]
    assert torch.equal(ix._canon_setitem([x, idx, v], a)[0], ix._canon_setitem([x, idx, v], b)[0])
    assert ix._canon_setitem([x, idx, v], b)[1].all()


@pytest.mark.parametrize("name", ["scatter", "scatter_", "index_copy", "index_put", "index_put2", "put", "setitem"])
def test_canonicalised_results_agree_between_two_runs(name):
    spec = OPS[name]
    for case in _cases(spec, 25, allow_variants=False):
        kwargs = case.kwargs_dict()
        try:
            one, two = (spec.canonicalise(ins, spec.fn(*ins, **kwargs))
                        for ins in (case.materialize(), case.materialize()))
        except NotImplementedError:  # no CPU kernel for the dtype (the reference widens)
            continue
        except (RuntimeError, IndexError):  # an invalid case (a few percent are): nothing to compare
            continue
        for a, b in zip(one, two):
            assert _equal(a, b), case.describe()
        assert one[1].all(), case.describe()


# -- accumulation is exact ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["scatter_add", "index_add", "index_put_acc", "put_acc", "scatter_reduce",
                                  "scatter_reduce_str"])
def test_accumulating_ops_sum_exactly_in_low_precision(name):
    """The same case in bfloat16/float16 equals the float64 result cast down: the
    values and the number of contributions keep every partial result exact."""
    spec = OPS[name]
    for case in _cases(spec, 40, allow_variants=False):
        if case.inputs[0].dtype not in ("float16", "bfloat16"):
            continue
        if dict(case.kwargs).get("reduce") in ("amax", "amin"):
            continue
        low = case.materialize()
        wide = [t.double() if t.is_floating_point() else t for t in low]
        try:
            out = spec.fn(*low, **case.kwargs_dict())
        except (RuntimeError, IndexError):  # an invalid case (the run counts it as such)
            continue
        ref = spec.fn(*wide, **case.kwargs_dict()).to(out.dtype)
        assert torch.equal(out, ref), case.describe()
        for recipe in case.inputs:
            assert recipe.values.specials == ()


def test_accumulated_value_ranges():
    assert ix._accumulated((), {"reduce": "prod"})["high"] == 2
    assert ix._accumulated((), {"reduce": "sum"})["high"] == 4
    assert ix._accumulated((), {"reduce": "amax"}) == {}
    assert all("order-dependent" in OPS[n].semantics for n in
               ("scatter_add", "index_add", "index_put_acc", "put_acc", "scatter_reduce"))


# -- variants --------------------------------------------------------------------------------------

# (the @large classes' variants, 65,537 tensors and more, with -m slow)
@pytest.mark.parametrize("name", [n if not n.endswith("@large") else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(n for n, s in OPS.items() if s.method or s.inplace or s.out)])
def test_declared_variants_match_the_functional_call(name):
    spec = OPS[name]
    for case in _cases(spec, 10, allow_variants=False):
        kwargs = case.kwargs_dict()
        ins = case.materialize()
        try:
            want = spec.fn(*ins, **kwargs)
        except (NotImplementedError, RuntimeError, IndexError):  # unsupported or invalid
            continue
        if spec.method:
            ins = case.materialize()
            got = getattr(ins[0], spec.method)(*ins[1:], **kwargs)
            _assert_same_canonical(got, want, case)
        if spec.inplace:
            ins = [t.clone() for t in case.materialize()]
            getattr(ins[0], spec.inplace)(*ins[1:], **kwargs)
            if ins[0].shape == want.shape:
                _assert_same_canonical(ins[0], want, case)
        if spec.out and isinstance(want, torch.Tensor):
            ins = case.materialize()
            out = torch.empty(0, dtype=want.dtype)
            spec.fn(*ins, **kwargs, out=out)
            _assert_same_canonical(out, want, case)


def _equal(a, b) -> bool:
    """Exact equality, NaN equal to NaN, for every dtype (complex32 included)."""
    a, b = ix._comparable(a), ix._comparable(b)
    return a.shape == b.shape and bool(ix._same(a, b).all())


def _assert_same_canonical(a, b, case):
    """As _assert_same, after the op's canonicaliser where it has one: duplicate indices
    leave which write wins unspecified (put into an expanded self)."""
    spec = OPS[case.op]
    if spec.canonicalise is not None and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        inputs = case.materialize()
        a, b = spec.canonicalise(inputs, a), spec.canonicalise(inputs, b)
    _assert_same(a, b, case)


def _assert_same(a, b, case):
    if isinstance(a, torch.Tensor):
        assert _equal(a, b), case.describe()
    else:
        assert len(a) == len(b), case.describe()
        for x, y in zip(a, b):
            _assert_same(x, y, case)


# -- sorted inputs ----------------------------------------------------------------------------------

def test_sorted_last_sorts_in_place_and_keeps_the_layout():
    base = torch.tensor([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    view = base.t()                                  # transposed: sort along the rows of base.t()
    stride = view.stride()
    out = ix._sorted_last(view)
    assert out is view and view.stride() == stride
    assert torch.equal(view, view.sort(-1).values)
    expanded = torch.tensor([2, 0, 1], dtype=torch.int32).expand(4, 3)
    assert ix._sorted_last(expanded)[3].tolist() == [0, 1, 2]
    u16 = torch.tensor([5, 1, 3], dtype=torch.uint16)
    assert ix._sorted_last(u16).tolist() == [1, 3, 5]


def test_searchsorted_forms_agree():
    seq = torch.tensor([[3, 1, 2, 2], [0, 9, 4, 4]])
    v = torch.tensor([[2, 5], [4, -1]])
    with_sorter = OPS["searchsorted_sorter"].fn(seq.clone(), v, side="right")
    plain = OPS["searchsorted"].fn(seq.clone(), v, side="right")
    assert torch.equal(with_sorter, plain)
    assert plain.tolist() == [[3, 4], [3, 0]]
    assert not OPS["searchsorted"].allow_nonfinite


def test_tri_indices_take_the_device_from_a_dummy_input():
    x = torch.zeros(())
    got = OPS["tril_indices"].fn(x, row=3, col=4, offset=0, dtype=torch.int32)
    assert torch.equal(got, torch.tril_indices(3, 4, 0, dtype=torch.int32))
    assert OPS["triu_indices"].fn(x, row=2, col=2, offset=1).tolist() == [[0], [1]]


@pytest.mark.parametrize("name, dtypes, kwargs", [
    ("nonzero", ("uint32",), {}), ("argwhere", ("uint64",), {}),
    ("nonzero_tuple", ("uint16",), {"as_tuple": True}),
    ("searchsorted", ("uint32", "uint32"), {"out_int32": False}),
    ("searchsorted_sorter", ("uint16", "uint16"), {"out_int32": True}),
    ("bucketize", ("uint32", "uint32"), {"right": True, "out_int32": False})])
def test_widened_references_keep_index_dtypes(name, dtypes, kwargs):
    """CPU lacks these kernels for uint16/32/64, so the reference runs widened; the
    meta probe must name the index dtype so the result is not cast to the input's."""
    from mpsfuzz.generation.recipes import Case, TensorRecipe, ValueRecipe
    shapes = [(3, 4)] if len(dtypes) == 1 else [(5,), (3,)]
    case = Case(name, tuple(TensorRecipe(s, d, values=ValueRecipe("int_range", seed=1, low=0, high=3))
                            for s, d in zip(shapes, dtypes)), tuple(sorted(kwargs.items())))
    ref, widened = run_reference(case, OPS[name], case.kwargs_dict())
    assert widened
    outs = ref.outputs if isinstance(ref.outputs, tuple) else (ref.outputs,)
    want = torch.int32 if kwargs.get("out_int32") else torch.int64
    assert all(o.dtype == want for o in outs)


def test_a_widened_reference_whose_dtypes_meta_cannot_tell_follows_only_our_own_widening():
    """An H200 run (docs/real-findings.md): CPU lacks uint32 ``index_select``, so ``repeat_interleave``'s
    reference ran in int64, and meta cannot run it (its shape depends on the repeats'
    values), so the int64 result stayed int64 (it might have been indices) and CUDA's
    right uint32 result was filed as the wrong dtype. The DUT's leaf decides only where
    it is exactly the dtype mpsfuzz widened: a DUT returning another dtype is still
    judged against int64."""
    from mpsfuzz.generation.recipes import Case, TensorRecipe, ValueRecipe
    case = Case("repeat_interleave", (TensorRecipe((3,), "uint32", values=ValueRecipe("int_range", seed=1, low=0, high=3)),
                                      TensorRecipe((), "int64", values=ValueRecipe("int_range", seed=2, low=1, high=3))))
    spec = OPS["repeat_interleave"]
    guessed, widened = run_reference(case, spec, case.kwargs_dict())
    assert widened and guessed.outputs.dtype == torch.int64
    for dut, want in ((torch.uint32, torch.uint32), (torch.int32, torch.int64), (torch.int64, torch.int64)):
        ref, _ = run_reference(case, spec, case.kwargs_dict(), dut_outputs=torch.zeros(6, dtype=dut))
        assert ref.outputs.dtype == want, (dut, ref.outputs.dtype)
        assert torch.equal(ref.outputs.to(torch.int64), guessed.outputs)
