"""Case recipes: JSON round trips, strict decoding, deterministic materialisation, and
that a recipe's layout, specials and distributions are really what the tensor gets."""
from __future__ import annotations

import copy
import json
import math
import re
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsfuzz.generation import catalogue, strategies
from mpsfuzz.generation import dtypes as dt
from mpsfuzz.generation.recipes import CASE_FORMAT, SPECIAL_NAMES, Case, DtypeArg, Layout, TensorRecipe, ValueRecipe

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")
pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

OPS = catalogue.all_ops()


def _json_round_trip(case: Case) -> Case:
    return Case.from_json(json.loads(json.dumps(case.to_json())))


def _has_nan(value) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, tuple):
        return any(_has_nan(v) for v in value)
    return False


def _assert_round_trips(case: Case) -> None:
    back = _json_round_trip(case)
    assert back.to_json() == case.to_json()
    if not any(_has_nan(v) for _, v in case.kwargs):  # nan != nan defeats dataclass ==
        assert back == case
    assert back.describe() == case.describe()


def _bytes(t: torch.Tensor) -> bytes:
    if t.numel() == 0:
        return b""
    # a fresh dense copy: .contiguous() keeps odd strides on size-1 dims
    t = torch.empty(t.shape, dtype=t.dtype).copy_(t).view(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.view(torch.uint8).numpy().tobytes()


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and bits, element by element (NaN-safe, works for complex32)."""
    return a.shape == b.shape and a.dtype == b.dtype and _bytes(a) == _bytes(b)


# -- JSON --------------------------------------------------------------------------------

AWKWARD = TensorRecipe(
    shape=(2, 3, 4), dtype="float32",
    layout=Layout(offset=3, gaps=(2, 1, 3), permutation=(2, 0, 1), expanded=(1,)),
    values=ValueRecipe("uniform", seed=2**32 - 1, low=-2.5, high=7.0,
                       specials=((0, "nan"), (5, "-0.0"), (70000, "subnormal"))))


def test_round_trip_with_every_kind_of_kwarg():
    case = Case(op="sum", inputs=(AWKWARD, TensorRecipe((0,), "int8")),
                kwargs=tuple(sorted({
                    "dtype": DtypeArg("float64"), "dim": (0, -1), "keepdim": True, "alpha": 2.5,
                    "beta": -3, "lo": -math.inf, "hi": math.inf, "nested": ((1, 2), (DtypeArg("bool"),)),
                    "none": None, "mode": "reduced"}.items())))
    back = _json_round_trip(case)
    assert back == case
    assert back.kwargs_dict()["dtype"] is torch.float64
    assert dict(back.kwargs)["nested"] == ((1, 2), (DtypeArg("bool"),))
    assert isinstance(dict(back.kwargs)["dim"], tuple)
    assert dict(back.kwargs)["hi"] == math.inf and dict(back.kwargs)["lo"] == -math.inf


def test_round_trip_nan_kwarg():
    case = Case(op="nan_to_num", inputs=(TensorRecipe((3,), "float16"),), kwargs=(("nan", math.nan),))
    encoded = json.dumps(case.to_json(), allow_nan=False)  # strict JSON: no bare NaN token
    back = Case.from_json(json.loads(encoded))
    value = dict(back.kwargs)["nan"]
    assert isinstance(value, float) and math.isnan(value)
    assert back.inputs == case.inputs


def test_round_trip_json_is_strict_json():
    case = Case(op="clamp", inputs=(AWKWARD,), kwargs=(("max", math.inf), ("min", -math.inf)))
    json.dumps(case.to_json(), allow_nan=False)


@pytest.mark.parametrize("op", ["add", "triu", "sum", "linalg.solve", "where", "nan_to_num",
                                "clamp", "var", "round_decimals"])
def test_generated_cases_round_trip(op):
    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategies.cases(OPS[op]))
    def check(case):
        assert case.op == op
        _assert_round_trips(case)

    check()


def test_unknown_format_version_is_rejected():
    data = Case(op="add", inputs=(AWKWARD,)).to_json()
    for version in (CASE_FORMAT + 1, 0, "1", None):
        data["format"] = version
        with pytest.raises(ValueError, match=re.escape(f"format {version!r}")):
            Case.from_json(data)
    del data["format"]
    with pytest.raises(ValueError, match="format"):
        Case.from_json(data)


def _good() -> dict:
    return Case(op="add", inputs=(AWKWARD, TensorRecipe((3,), "int8")),
                kwargs=(("alpha", 2),)).to_json()


def _mutate(path, value=KeyError):
    """A good case dict with the field at ``path`` replaced (or deleted with KeyError)."""
    data = copy.deepcopy(_good())
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


MALFORMED = {
    "not a dict": [1, 2],
    "a string": "case",
    "no op": _mutate(("op",)),
    "no inputs": _mutate(("inputs",)),
    "inputs not a list": _mutate(("inputs",), 5),
    "input not a dict": _mutate(("inputs", 0), "tensor"),
    "no shape": _mutate(("inputs", 0, "shape")),
    "shape null": _mutate(("inputs", 0, "shape"), None),
    "shape of strings": _mutate(("inputs", 0, "shape"), ["a"]),
    "negative side": _mutate(("inputs", 1, "shape"), [-1]),
    "bad dtype": _mutate(("inputs", 0, "dtype"), "float8"),
    "no layout": _mutate(("inputs", 0, "layout")),
    "layout not a dict": _mutate(("inputs", 0, "layout"), 7),
    "gaps not a list": _mutate(("inputs", 0, "layout", "gaps"), 2),
    "gaps of wrong rank": _mutate(("inputs", 0, "layout", "gaps"), [2]),
    "bad permutation": _mutate(("inputs", 0, "layout", "permutation"), [0, 0, 1]),
    "expanded out of rank": _mutate(("inputs", 0, "layout", "expanded"), [9]),
    "no values": _mutate(("inputs", 0, "values")),
    "bad distribution": _mutate(("inputs", 0, "values", "distribution"), "cauchy"),
    "seed not a number": _mutate(("inputs", 0, "values", "seed"), "x"),
    "bad special name": _mutate(("inputs", 0, "values", "specials"), [[0, "pi"]]),
    "special not a pair": _mutate(("inputs", 0, "values", "specials"), [[0]]),
    "no kwargs": _mutate(("kwargs",)),
    "kwargs a list": _mutate(("kwargs",), [["alpha", 2]]),
    "kwargs a string": _mutate(("kwargs",), "alpha=2"),
    "unknown kwarg encoding": _mutate(("kwargs", "alpha"), {"complex": "1j"}),
    "bad dtype kwarg": _mutate(("kwargs", "alpha"), {"dtype": "float8"}),
    "bad float kwarg": _mutate(("kwargs", "alpha"), {"float": "lots"}),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_case_raises_value_error(name):
    with pytest.raises(ValueError):
        Case.from_json(MALFORMED[name])


def test_good_fixture_is_good():  # the malformed ones differ from it in one field only
    assert Case.from_json(_good()).inputs[0] == AWKWARD


# -- deterministic materialisation --------------------------------------------------------

@pytest.mark.parametrize("dtype_name", dt.ALL_DTYPE_NAMES)
def test_materialize_is_bit_identical_across_calls(dtype_name):
    for dist in ("normal", "uniform", "small_int", "int_range", "positive", "bool", "spd",
                 "diag_dominant", "cholesky_factor"):
        specials = tuple((i * 3, name) for i, name in enumerate(SPECIAL_NAMES))
        for layout in (Layout(), Layout(offset=2, gaps=(1, 2, 3), permutation=(1, 2, 0)),
                       Layout(permutation=(0, 2, 1), expanded=(0,))):
            recipe = TensorRecipe((3, 4, 4), dtype_name, layout=layout,
                                  values=ValueRecipe(dist, seed=1234, specials=specials))
            a, b = recipe.materialize("cpu"), recipe.materialize("cpu")
            assert a.dtype == dt.to_torch(dtype_name) and a.shape == (3, 4, 4)
            assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            assert _bytes(a) == _bytes(b), (dist, layout)
            # and the recipe rebuilt from JSON makes the same bytes
            back = _json_round_trip(Case(op="add", inputs=(recipe,))).inputs[0]
            assert _bytes(back.materialize("cpu")) == _bytes(a)


def test_different_seeds_give_different_values():
    a = TensorRecipe((16,), "float32", values=ValueRecipe(seed=1)).materialize()
    b = TensorRecipe((16,), "float32", values=ValueRecipe(seed=2)).materialize()
    assert not torch.equal(a, b)


# -- layouts ------------------------------------------------------------------------------

def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _plain(recipe: TensorRecipe) -> TensorRecipe:
    return TensorRecipe(recipe.shape, recipe.dtype, Layout(), recipe.values)


def test_gaps_multiply_strides():
    recipe = TensorRecipe((3, 4, 5), "float32", Layout(gaps=(2, 1, 3)))
    t = recipe.materialize()
    base = ((3 - 1) * 2 + 1, 4, (5 - 1) * 3 + 1)
    expected = tuple(s * g for s, g in zip(_contiguous_strides(base), (2, 1, 3)))
    assert t.shape == (3, 4, 5)
    assert t.stride() == expected
    assert not t.is_contiguous()
    assert torch.equal(t, _plain(recipe).materialize())


def test_permutation_permutes_strides():
    perm = (2, 0, 1)
    recipe = TensorRecipe((2, 3, 4), "int32", Layout(permutation=perm))
    t = recipe.materialize()
    base = [0] * 3
    for j, p in enumerate(perm):
        base[p] = (2, 3, 4)[j]
    base_strides = _contiguous_strides(base)
    assert t.shape == (2, 3, 4)
    assert t.stride() == tuple(base_strides[p] for p in perm)
    assert not t.is_contiguous()
    assert torch.equal(t, _plain(recipe).materialize())


def test_transpose_is_transposed():
    recipe = TensorRecipe((3, 5), "float64", Layout(permutation=(1, 0)))
    t = recipe.materialize()
    assert t.stride() == (1, 3)
    assert recipe.layout.kinds() == ("transposed",)


def test_channels_last_permutation():
    recipe = TensorRecipe((2, 3, 4, 5), "float16", Layout(permutation=(0, 3, 1, 2)))
    t = recipe.materialize()
    assert t.shape == (2, 3, 4, 5)
    assert t.is_contiguous(memory_format=torch.channels_last)
    assert not t.is_contiguous()
    assert recipe.layout.kinds() == ("channels_last",)
    assert torch.equal(t, _plain(recipe).materialize())


def test_expanded_dims_have_stride_zero():
    recipe = TensorRecipe((3, 4, 5), "float32", Layout(expanded=(0, 2)))
    t = recipe.materialize()
    assert t.shape == (3, 4, 5)
    assert t.stride()[0] == 0 and t.stride()[2] == 0 and t.stride()[1] != 0
    # values repeat along the expanded dims: they are those of the size-1 recipe
    small = TensorRecipe((1, 4, 1), "float32", Layout(), recipe.values).materialize()
    assert torch.equal(t, small.expand(3, 4, 5))


def test_offset_is_storage_offset():
    for offset in (1, 4, 5):
        t = TensorRecipe((2, 3), "int64", Layout(offset=offset)).materialize()
        assert t.storage_offset() == offset
        assert t.untyped_storage().nbytes() >= (offset + 6) * 8


def test_gap_filler_stays_outside_the_view():
    recipe = TensorRecipe((2, 3), "int16", Layout(offset=2, gaps=(1, 2)),
                          ValueRecipe("small_int", seed=5))
    t = recipe.materialize()
    storage = torch.tensor([], dtype=t.dtype).set_(t.untyped_storage())
    assert storage[:2].tolist() == [77, 77]
    assert storage.numel() == 2 + 2 * 5
    assert (storage[2:].view(2, 5)[:, 1::2] == 77).all()  # the gaps
    assert not (t == 77).any()
    assert torch.equal(t, _plain(recipe).materialize())


def test_all_layout_features_at_once():
    recipe = TensorRecipe((2, 3, 4, 5), "bfloat16",
                          Layout(offset=3, gaps=(1, 2, 1, 3), permutation=(0, 3, 1, 2), expanded=(1,)),
                          ValueRecipe("uniform", seed=11))
    t = recipe.materialize()
    assert t.shape == (2, 3, 4, 5) and t.storage_offset() == 3 and t.stride()[1] == 0
    small = TensorRecipe((2, 1, 4, 5), "bfloat16", Layout(), recipe.values).materialize()
    assert torch.equal(t, small.expand(2, 3, 4, 5))


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_layout_never_changes_values(data):
    rank = data.draw(st.integers(0, 5))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    dtype_name = data.draw(st.sampled_from(dt.ALL_DTYPE_NAMES))
    layout = data.draw(strategies.layouts(shape, awkward_ratio=1.0))
    values = data.draw(strategies.value_recipes(dtype_name, allow_specials=False))
    recipe = TensorRecipe(shape, dtype_name, layout, values)
    t = recipe.materialize()
    assert t.shape == shape and t.dtype == dt.to_torch(dtype_name)
    assert t.storage_offset() == layout.offset
    value_shape = tuple(1 if d in layout.expanded else n for d, n in enumerate(shape))
    plain = TensorRecipe(value_shape, dtype_name, Layout(), values).materialize()
    assert plain.is_contiguous() and plain.storage_offset() == 0
    assert _same(t, plain.expand(shape))
    for d in layout.expanded:
        if shape[d] > 1:
            assert t.stride()[d] == 0


# -- specials -----------------------------------------------------------------------------

def _with_specials(shape, dtype_name, specials, layout=Layout(), dist="normal"):
    return TensorRecipe(shape, dtype_name, layout, ValueRecipe(dist, seed=7, specials=specials))


def test_special_lands_at_its_flat_index():
    for layout in (Layout(), Layout(permutation=(1, 0)), Layout(offset=1, gaps=(2, 2))):
        t = _with_specials((2, 3), "float32", ((3, "nan"),), layout).materialize()
        flat = t.reshape(-1)
        assert torch.isnan(flat[3])
        assert int(torch.isnan(flat).sum()) == 1


def test_special_position_wraps_modulo_numel():
    t = _with_specials((2, 3), "float64", ((6 * 5 + 4, "inf"),)).materialize()
    assert t.reshape(-1)[4] == math.inf


def test_negative_zero_has_sign_bit():
    for name in ("float16", "bfloat16", "float32", "float64"):
        t = _with_specials((5,), name, ((2, "-0.0"),)).materialize()
        assert t[2] == 0 and bool(torch.signbit(t[2])), name


@pytest.mark.parametrize("dtype_name", dt.FLOAT)
def test_subnormal_is_subnormal(dtype_name):
    t = _with_specials((4,), dtype_name, ((1, "subnormal"),)).materialize()
    value = t[1].double().item()
    info = torch.finfo(dt.to_torch(dtype_name))
    assert 0 < value < info.smallest_normal


@pytest.mark.parametrize("dtype_name", dt.FLOAT + dt.COMPLEX)
def test_float_specials(dtype_name):
    names = ("nan", "inf", "-inf", "max", "lowest", "tiny", "eps")
    t = _with_specials((10,), dtype_name, tuple(enumerate(names))).materialize()
    real = torch.view_as_real(t.to(torch.complex64 if dtype_name == "complex32" else t.dtype))[..., 0] \
        if t.is_complex() else t
    info = dt.finfo_or_iinfo(dtype_name)
    assert torch.isnan(real[0])
    assert real[1].item() == math.inf and real[2].item() == -math.inf
    assert real[3].item() == info.max and real[4].item() == info.min
    assert real[5].item() == info.smallest_normal and real[6].item() == info.eps


@pytest.mark.parametrize("dtype_name", dt.INTEGRAL)
def test_integer_max_and_lowest_are_iinfo(dtype_name):
    t = _with_specials((5,), dtype_name, ((1, "max"), (3, "lowest")), dist="small_int").materialize()
    info = torch.iinfo(dt.to_torch(dtype_name))
    assert t[1].item() == info.max
    assert t[3].item() == info.min


@pytest.mark.parametrize("dtype_name,special", [
    ("int16", "2^31+1"), ("int32", "2^31+1"), ("int8", "2^24+1"), ("uint8", "-1"),
    ("uint64", "-2^31-1"), ("float16", "2^24+1"), ("int64", "nan"), ("int32", "-0.0"),
    ("uint16", "subnormal"), ("bool", "inf"),
])
def test_special_that_does_not_fit_is_skipped(dtype_name, special):
    dist = "bool" if dtype_name == "bool" else "small_int"
    with_special = _with_specials((2, 3), dtype_name, ((2, special),), dist=dist).materialize()
    without = _with_specials((2, 3), dtype_name, (), dist=dist).materialize()
    assert torch.equal(with_special, without)


@pytest.mark.parametrize("dtype_name,special,expected", [
    ("int32", "-2^31-1", None), ("int64", "-2^31-1", -(2**31) - 1), ("int64", "2^31+1", 2**31 + 1),
    ("uint32", "2^31+1", 2**31 + 1), ("int32", "2^24+1", 2**24 + 1), ("float64", "2^24+1", 2**24 + 1),
    ("int8", "-1", -1), ("bool", "1", True), ("bool", "0", False),
])
def test_special_that_fits_is_exact(dtype_name, special, expected):
    dist = "bool" if dtype_name == "bool" else "small_int"
    t = _with_specials((2, 3), dtype_name, ((4, special),), dist=dist).materialize().reshape(-1)
    if expected is None:  # does not fit: unchanged
        assert torch.equal(t, _with_specials((2, 3), dtype_name, (), dist=dist).materialize().reshape(-1))
    else:
        assert t[4].item() == expected


def test_specials_on_empty_tensor_are_ignored():
    t = _with_specials((0, 3), "float32", ((1, "nan"),)).materialize()
    assert t.shape == (0, 3)


# -- distributions ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype_name", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_spd_has_a_cholesky(dtype_name, n):
    for seed in range(5):
        for layout in (Layout(), Layout(permutation=(0, 2, 1), gaps=(1, 2, 1))):
            t = TensorRecipe((3, n, n), dtype_name, layout, ValueRecipe("spd", seed=seed)).materialize()
            wide = t.to(torch.complex128 if t.is_complex() else torch.float64)
            assert torch.allclose(wide, wide.mH)
            _, info = torch.linalg.cholesky_ex(wide)
            assert (info == 0).all(), (seed, layout)


@pytest.mark.parametrize("dtype_name", ["float16", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("n", [1, 3, 8])
def test_diag_dominant_is_invertible(dtype_name, n):
    for seed in range(5):
        t = TensorRecipe((2, n, n), dtype_name, values=ValueRecipe("diag_dominant", seed=seed)).materialize()
        wide = t.to(torch.complex128 if t.is_complex() else torch.float64)
        _, info = torch.linalg.inv_ex(wide)
        assert (info == 0).all()
        diag = wide.diagonal(dim1=-2, dim2=-1).abs()
        off = wide.abs().sum(-1) - diag
        assert (diag > off).all()  # strictly diagonally dominant, hence invertible
        assert (torch.linalg.cond(wide) < 1e3).all()


@pytest.mark.parametrize("dtype_name", ["float32", "complex64", "complex128"])
def test_cholesky_factor_has_a_real_positive_diagonal(dtype_name):
    """Found by a CUDA run: a complex diagonal is outside cholesky_inverse's domain, and
    CPU and CUDA answer differently there (neither is wrong)."""
    for seed in range(5):
        t = TensorRecipe((2, 3, 3), dtype_name, values=ValueRecipe("cholesky_factor", seed=seed)).materialize()
        diag = t.diagonal(dim1=-2, dim2=-1)
        if t.is_complex():
            assert (diag.imag == 0).all()
        assert (diag.real > (t.abs().sum(-1) - diag.abs())).all()
        gram = torch.cholesky_inverse(t.tril().to(torch.complex128 if t.is_complex() else torch.float64))
        assert torch.allclose(gram, gram.mH)   # the inverse of L L^H is Hermitian


def test_well_conditioned_distributions_leave_non_square_alone():
    a = TensorRecipe((3, 4), "float64", values=ValueRecipe("spd", seed=3)).materialize()
    b = TensorRecipe((3, 4), "float64", values=ValueRecipe("normal", seed=3)).materialize()
    assert torch.equal(a, b)


@pytest.mark.parametrize("dtype_name", dt.ALL_DTYPE_NAMES)
def test_values_stay_in_range(dtype_name):
    for dist in ("normal", "uniform", "small_int", "int_range", "positive"):
        t = TensorRecipe((64,), dtype_name, values=ValueRecipe(dist, seed=9)).materialize()
        if dtype_name in dt.FLOAT:
            assert torch.isfinite(t).all()
        if dist == "positive" and dtype_name in dt.FLOAT:
            assert (t > 0).all()
        if dist == "small_int" and dtype_name in dt.FLOAT + dt.SIGNED:
            assert (t.double().abs() <= 4).all() and torch.equal(t.double(), t.double().round())


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_view_built_in_one_as_strided_call_is_the_slice_view_permute_expand_chain(data):
    """view_in builds the input with one as_strided call (a quarter of the chain's cost,
    paid four to six times a case in a worker); its sizes, strides, storage offset and
    values are those of the chain it replaced, for every layout, empty ones included,
    in a storage that starts elsewhere than at element 0."""
    rank = data.draw(st.integers(0, 5))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    recipe = data.draw(strategies.tensor_recipes(shape, data.draw(st.sampled_from(["float32", "int16", "bool"]))))
    start = data.draw(st.integers(0, 3))
    storage = torch.arange(start + recipe.base_numel + 2, dtype=torch.float32)[1:]   # offset 1 in its own storage
    chain = recipe._view_of(storage[start:start + recipe.base_numel])
    if recipe.layout.expanded:
        chain = chain.expand(*recipe.shape)
    built = recipe.view_in(storage, start)
    assert (built.shape, built.stride(), built.storage_offset()) == (chain.shape, chain.stride(), chain.storage_offset())
    assert torch.equal(built, chain)
    assert built.untyped_storage().data_ptr() == storage.untyped_storage().data_ptr()


# -- index_hash: values made where the tensor is used --------------------------------------

from mpsfuzz.generation.recipes import Alias, index_hash_values  # noqa: E402

# Values the unbounded hash gave before bounds existed: stored corpora and the @huge class
# (its reference rebuilds rows from the hash) depend on them, bit for bit.
OLD_HASH = {torch.float32: ([-27.25, -23.5, -12.0, -8.25, 3.25, 14.75], [5.0, 16.5, 28.0, -28.5]),
            torch.float16: ([-27.25, -23.5, -12.0, -8.25, 3.25, 14.75], [5.0, 16.5, 28.0, -28.5]),
            torch.int8: ([-114, -22, 60, -99, -17, 65], [84, -85, -3, 89]),
            torch.uint8: ([11, 103, 185, 26, 108, 190], [209, 40, 122, 214]),
            torch.int64: ([-114, -22, 60, -99, -17, 65], [84, -85, -3, 89]),
            torch.bool: ([False, False, False, False, True, False], [False, False, True, True])}


@pytest.mark.parametrize("dtype", list(OLD_HASH))
def test_the_unbounded_index_hash_gives_the_values_it_always_gave(dtype):
    first, past_2_31 = OLD_HASH[dtype]
    assert index_hash_values(11, 0, 6, dtype, "cpu").tolist() == first
    assert index_hash_values(5, 2**31 - 2, 4, dtype, "cpu").tolist() == past_2_31
    # A recipe without both bounds is the unbounded hash.
    recipe = TensorRecipe((6,), dt.name_of(dtype),
                          values=ValueRecipe("index_hash", seed=11, low=-4))
    assert recipe.materialize("cpu").tolist() == first


def test_a_bounded_index_hash_covers_its_range_with_a_long_period():
    """Bounds give the integers low..high: an index range of 131,073 is covered (indices
    past 65,536 as often as below), neighbours are unrelated (a row of 9 small integers
    does not sum to a constant), and the period is 2^31 - 1 indices."""
    p = 2**31 - 1
    indices = index_hash_values(3, 0, 131073, torch.int64, "cpu", 0, 131072)
    assert int(indices.min()) >= 0 and int(indices.max()) <= 131072
    assert 0.45 < float((indices > 65536).double().mean()) < 0.55
    assert indices.unique().numel() > 0.6 * 131073          # (1 - 1/e of them, as uniform draws give)
    small = index_hash_values(3, 0, 9 * 20000, torch.float32, "cpu", -4, 4)
    assert sorted(small.unique().tolist()) == list(range(-4, 5))
    assert small.view(-1, 9).sum(1).unique().numel() > 20
    assert torch.equal(index_hash_values(7, p - 3, 6, torch.int64, "cpu", -4, 4),
                       index_hash_values(7, 2 * p - 3, 6, torch.int64, "cpu", -4, 4))
    assert not torch.equal(index_hash_values(7, 0, 64, torch.int64, "cpu", -4, 4),
                           index_hash_values(8, 0, 64, torch.int64, "cpu", -4, 4))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "uint8", "int64", "complex64", "bool"])
def test_a_bounded_index_hash_holds_integers_in_its_bounds_as_the_dtype(dtype):
    recipe = TensorRecipe((4096,), dtype, values=ValueRecipe("index_hash", seed=2, low=-4, high=4))
    values = recipe.materialize("cpu")
    assert values.dtype == dt.to_torch(dtype)
    if dtype == "bool":   # bools ignore the bounds: the unbounded hash's
        assert torch.equal(values, index_hash_values(2, 0, 4096, torch.bool, "cpu"))
        return
    parts = torch.view_as_real(values) if values.is_complex() else values
    wide = parts.double()
    assert torch.equal(wide, wide.round())
    assert int(wide.min()) == (0 if dtype == "uint8" else -4) and int(wide.max()) == 4
    if values.is_complex():
        assert not torch.equal(parts[:, 0], parts[:, 1])


@pytest.mark.parametrize("layout", [Layout(), Layout(gaps=(2, 1, 3)), Layout(offset=5), Layout(expanded=(1,)),
                                    Layout(permutation=(0, 2, 1)), Layout(offset=2, gaps=(1, 2, 1), permutation=(2, 0, 1))])
def test_an_index_hash_input_is_the_same_made_on_the_device_or_on_the_host_in_any_layout(layout):
    """The view filled block by block where it is (what the device does) holds what the
    host's dense values viewed into the layout hold, specials included; the gaps hold
    the filler."""
    values = ValueRecipe("index_hash", seed=9, low=-4, high=4, specials=((3, "nan"), (40, "-inf"), (1001, "max")))
    recipe = TensorRecipe((5, 4, 6), "float32", layout, values)
    made = recipe.materialize("cpu")
    host = recipe.view_in(recipe._pristine_base())
    assert (made.shape, made.stride()) == (host.shape, host.stride())
    assert torch.equal(made.nan_to_num(), host.nan_to_num()) and torch.equal(made.isnan(), host.isnan())
    dense = recipe.cpu_values().reshape(-1)
    n = dense.numel()
    assert math.isnan(dense[3]) and dense[40 % n] == -math.inf and dense[1001 % n] == torch.finfo().max
    base = made.as_strided((recipe.base_numel,), (1,), made.storage_offset() - host.storage_offset())
    assert int((base == 77).sum()) >= recipe.base_numel - dense.numel()


def test_a_storage_that_holds_index_hash_inputs_is_built_where_it_is_used_with_the_hosts_values():
    """A shared storage holding an index_hash input is filled on the device, input by
    input (a later one wins where they overlap), as the host fills it."""
    a = TensorRecipe((3, 4), "float32", Layout(gaps=(1, 2)), ValueRecipe("index_hash", 1, low=-4, high=4))
    b = TensorRecipe((4, 3), "float32", Layout(permutation=(1, 0)), ValueRecipe("normal", 2),
                     alias=Alias(0))
    c = TensorRecipe((5,), "float32", values=ValueRecipe("index_hash", 3, low=0, high=2),
                     alias=Alias(0, "overlap", 2))
    case = Case("add", (a, b, c))
    assert case.generated_storages() == {0}
    made = case.materialize("cpu")
    storages, plan = case.cpu_storages()
    host = [r.view_in(storages[s], start) for r, (s, start) in zip(case.inputs, plan)]
    assert all(torch.equal(m, h) for m, h in zip(made, host))
    assert made[0].untyped_storage().data_ptr() == made[2].untyped_storage().data_ptr()


def test_the_hash_values_kept_on_the_cpu_are_copied_for_each_use():
    """The CPU keeps a few inputs' hash values (a worker makes each input four to six
    times a case): what a use writes into its tensor is not what the next use gets."""
    recipe = TensorRecipe((1000,), "float32", values=ValueRecipe("index_hash", 1, low=-4, high=4))
    recipe.materialize("cpu").fill_(0)
    recipe.cpu_values().fill_(0)
    assert torch.equal(recipe.materialize("cpu"), index_hash_values(1, 0, 1000, torch.float32, "cpu", -4, 4))
