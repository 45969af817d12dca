"""The op catalogue: families, required ops, declarations, and that every spec's ``fn``
is callable with what its builders produce (small deterministic CPU calls)."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsfuzz.generation import catalogue
from mpsfuzz.generation import dtypes as dt
from mpsfuzz.generation.opspec import ShapeBudget, gather_at_indices
from mpsfuzz.generation.recipes import DISTRIBUTIONS, TensorRecipe, ValueRecipe, resolve_kwargs
from mpsfuzz.generation.strategies import _value_options

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")
# var/std with a correction >= the reduced size warn (and return inf/nan): expected here.
# ldexp of a 0-d x with a larger exponent tensor resizes an internal output (a torch
# deprecation warning, harmless here).
pytestmark = [pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0"),
              pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")]

REQUIRED = {
    "linalg": """matmul mm bmm mv dot outer addmm linalg.solve linalg.inv linalg.det
        linalg.slogdet linalg.cholesky linalg.cholesky_ex linalg.lu_factor linalg.qr
        linalg.vector_norm linalg.matrix_norm triu tril linalg.cross""",
    "elementwise": """add sub mul div neg exp sqrt lgamma bitwise_and bitwise_or bitwise_xor
        bitwise_not bitwise_left_shift bitwise_right_shift bitwise_left_shift_scalar fmax fmin
        where atan2 clamp eq ne lt le gt ge maximum minimum copysign abs sin cos tanh log log1p
        expm1 sigmoid erf erfinv floor ceil round trunc remainder fmod pow reciprocal rsqrt sign
        logical_and logical_not special.i0 special.xlog1py special.entr special.sinc nextafter
        hypot""",
    "reduction": """sum prod mean var std amax amin argmax argmin any all cumsum cumprod
        logsumexp median max_dim min_dim norm count_nonzero nansum var_mean""",
}
MIN_SIZES = {"linalg": 15, "elementwise": 40, "reduction": 15}

OPS = catalogue.all_ops()
SMALL = ShapeBudget(max_rank=4, max_side=3, allow_empty=False, max_numel=96)
QUICK = settings(max_examples=3, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))


def _shapes(spec, draw, budget=SMALL):
    return spec.shapes(draw, budget)


# -- registry -----------------------------------------------------------------------------

def test_family_sizes():
    fams = catalogue.families()
    for family, least in MIN_SIZES.items():
        assert len(fams.get(family, [])) >= least, (family, len(fams.get(family, [])))


@pytest.mark.parametrize("family", sorted(REQUIRED))
def test_required_ops_are_registered_in_their_family(family):
    for name in REQUIRED[family].split():
        assert name in OPS, name
        assert OPS[name].family == family, (name, OPS[name].family)


@pytest.mark.parametrize("name", sorted(OPS))
def test_declarations_are_consistent(name):
    spec = OPS[name]
    assert spec.name == name and spec.doc
    assert spec.dtypes and len(set(spec.dtypes)) == len(spec.dtypes)
    for d in spec.dtypes:
        assert dt.canonical(d) == d
    for allowed in spec.input_dtypes:
        if allowed is not None:
            assert allowed and all(dt.canonical(d) == d for d in allowed)
    for values in spec.input_values:
        assert values is None or callable(values) or values in DISTRIBUTIONS
    if spec.input_dtypes and spec.input_values:
        assert len(spec.input_dtypes) == len(spec.input_values)
    assert 0 <= spec.min_rank <= spec.max_rank
    assert spec.rtol_scale >= 1 and spec.atol_scale >= 1
    if "ties_unspecified" in spec.semantics:
        assert spec.canonicalise is not None


@pytest.mark.parametrize("name", sorted(OPS))
def test_shape_builder_matches_arity(name):
    spec = OPS[name]

    @QUICK
    @given(st.data())
    def check(data):
        shapes = _shapes(spec, data.draw, ShapeBudget())
        if "tensor-list" in spec.semantics:   # (a foreach op: a list of any length but none)
            assert len(shapes) >= 1 and not spec.input_dtypes
        else:
            assert len(shapes) == spec.arity
        assert all(isinstance(s, tuple) and all(isinstance(n, int) and n >= 0 for n in s)
                   for s in shapes)
    check()


# -- every fn is callable ------------------------------------------------------------------

def _pick_dtype(spec) -> str:
    for d in ("float32", "int64", "int32", "uint8", "bool"):
        if d in spec.dtypes:
            return d
    return spec.dtypes[0]


def _default_distribution(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    return "small_int" if dtype in dt.INTEGRAL else "normal"


@pytest.mark.parametrize("name", sorted(OPS))
def test_fn_runs_on_small_cpu_inputs(name):
    spec = OPS[name]
    main = _pick_dtype(spec)

    @QUICK
    @given(st.data())
    def check(data):
        shapes = _shapes(spec, data.draw)
        names = []
        for i in range(len(shapes)):
            allowed = spec.input_dtypes[i] if spec.input_dtypes else None
            names.append(allowed[0] if allowed else main)
        kwargs = spec.args(data.draw, tuple(shapes), tuple(names)) if spec.args else {}
        inputs = []
        for i, (shape, dtype) in enumerate(zip(shapes, names)):
            entry = spec.input_values[i] if spec.input_values else None
            asked = _value_options(entry, shapes, kwargs, spec)
            dist = asked["distribution"] or _default_distribution(dtype)
            recipe = TensorRecipe(shape=shape, dtype=dtype,
                                  values=ValueRecipe(dist, seed=i + 1, low=asked.get("low"), high=asked.get("high")))
            inputs.append(recipe.materialize())
        out = spec.fn(*inputs, **resolve_kwargs(tuple(kwargs.items())))
        out = spec.canonical(inputs, out, kwargs)
        assert out is not None
    check()


# -- builders that the fault targets depend on --------------------------------------------

def _draw_many(builder, n=200, budget=ShapeBudget()):
    out = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        out.append(builder(data.draw, budget))
    collect()
    return out


@pytest.mark.parametrize("name", ["triu", "tril"])
def test_triangular_ops_reach_more_than_3_dims(name):
    shapes = [s[0] for s in _draw_many(OPS[name].shapes)]
    assert all(2 <= len(s) <= 8 for s in shapes)
    assert sum(len(s) > 3 for s in shapes) >= 0.2 * len(shapes)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_get_0d_operands(name):
    shapes = _draw_many(OPS[name].shapes)
    assert any(len(b) == 0 and len(a) > 0 for a, b in shapes)


@pytest.mark.parametrize("name", ["var", "prod"])
def test_reductions_accept_up_to_8_dims(name):
    assert OPS[name].max_rank >= 8
    x = torch.randn((2,) * 8)
    assert OPS[name].fn(x, dim=-1).shape == (2,) * 7
    assert OPS[name].fn(x).shape == ()


def test_cholesky_allows_empty_inputs():
    for name in ("linalg.cholesky", "linalg.cholesky_ex"):
        shapes = [s[0] for s in _draw_many(OPS[name].shapes)]
        assert any(0 in s for s in shapes), name


def test_mm_sometimes_mixes_dtypes():
    assert "mixed_dtypes_sometimes" in OPS["mm"].semantics


@pytest.mark.parametrize("name", ["add", "nll_loss"])
def test_sometimes_mixes_dtypes(name):
    # add: float + int with alpha (pytorch#143949), a common dtype (pytorch#160334);
    # nll_loss: a weight of another float dtype (pytorch#144170)
    assert "mixed_dtypes_sometimes" in OPS[name].semantics


@pytest.mark.parametrize("name", ["fmax_cpu_scalar", "fmin_cpu_scalar"])
def test_cpu_scalar_ops_take_a_0d_operand_and_move_it_to_the_cpu(name):
    spec = OPS[name]
    assert all(len(b) == 0 for _, b in _draw_many(spec.shapes, n=50))
    assert spec.method is None  # a method call would skip the move
    seen = []
    x, y = torch.tensor([1.0, float("nan"), -2.0]), torch.tensor(0.5)
    y.cpu = lambda: seen.append(True) or torch.Tensor.cpu(y)
    expected = torch.fmax(x, y) if name.startswith("fmax") else torch.fmin(x, y)
    assert torch.equal(spec.fn(x, y), expected) and seen


def test_constant_pad_sometimes_pads_nothing():
    # pad=() (pytorch#161149: MPS refused an empty pad list)
    spec = OPS["pad_constant"]
    pads = []

    @settings(max_examples=60, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        shapes = spec.shapes(data.draw, ShapeBudget())
        pads.append(spec.args(data.draw, shapes, ("float32",))["pad"])
    collect()
    assert () in pads and any(pads)
    assert torch.equal(spec.fn(torch.arange(6.0).reshape(2, 3), pad=()), torch.arange(6.0).reshape(2, 3))


def test_add_alpha_is_never_float_for_integral_or_bool():
    build = OPS["add"].args
    seen = set()

    @settings(max_examples=60, deadline=None, database=None, derandomize=True)
    @given(st.data(), st.sampled_from(dt.INTEGRAL + dt.BOOL + dt.FLOAT + dt.COMPLEX))
    def check(data, dtype):
        alpha = build(data.draw, ((2,), (2,)), (dtype, dtype))["alpha"]
        seen.add(alpha)
        if dtype in dt.INTEGRAL or dtype == "bool":
            assert isinstance(alpha, int)
        assert alpha in (1, 2, -1, 0.5)
    check()
    assert 2 in seen


def test_scalar_shift_calls_the_scalar_tensor_overload():
    spec = OPS["bitwise_left_shift_scalar"]
    x = torch.tensor([0, 1, 2, -3, 4], dtype=torch.int32)
    assert spec.fn(x, scalar=3).tolist() == [3, 6, 12, 24, 48]
    assert all(d in dt.INTEGRAL for d in spec.dtypes)


def test_where_takes_a_bool_condition():
    assert OPS["where"].input_dtypes[0] == ("bool",)


def test_integer_division_ops_never_divide_by_zero():
    x = torch.tensor([5, -7, 3], dtype=torch.int64)
    y = torch.tensor([0, 2, 0], dtype=torch.int64)
    for name in ("remainder", "fmod", "div_floor", "div_trunc", "floor_divide"):
        OPS[name].fn(x, y)  # would raise ZeroDivisionError


def test_median_works_around_cpu_stride0_bug():
    x = torch.tensor([1.5]).expand(5)
    assert OPS["median"].fn(x, dim=0).values.item() == 1.5
    assert OPS["nanmedian"].fn(x, dim=0).values.item() == 1.5


# -- canonicalisers ---------------------------------------------------------------------

def _last_index_variant(fn, x, dim, keepdim):
    """Indices of the *last* extremum (another valid answer under ties)."""
    flipped = fn(x.flip(dim), dim, keepdim)
    return type(flipped)((flipped[0], x.shape[dim] - 1 - flipped[1]))


@pytest.mark.parametrize("shape,dim,keepdim", [
    ((4, 4), 0, False), ((4, 4), 1, False), ((4, 4), 1, True), ((3, 3, 3), 1, False),
    ((2, 5), -1, True), ((5,), 0, False), ((1, 6), 1, False), ((6, 1), 0, True),
])
@pytest.mark.parametrize("name", ["max_dim", "min_dim"])
def test_index_canonicaliser_ignores_tie_breaking(name, shape, dim, keepdim):
    spec = OPS[name]
    x = torch.randint(0, 2, shape).float()  # many ties
    a = spec.fn(x, dim=dim, keepdim=keepdim)
    b = _last_index_variant(lambda t, d, k: spec.fn(t, dim=d, keepdim=k), x, dim, keepdim)
    ca, cb = spec.canonicalise([x], a), spec.canonicalise([x], b)
    for u, v in zip(ca, cb):
        assert torch.equal(u, v)
    # with distinct values, an index that points elsewhere is caught
    if x.shape[dim] > 1:
        x = torch.randperm(x.numel()).reshape(shape).float()
        good = spec.fn(x, dim=dim, keepdim=keepdim)
        wrong = type(good)((good[0], (good[1] + 1) % x.shape[dim]))
        cg, cw = spec.canonicalise([x], good), spec.canonicalise([x], wrong)
        assert not all(torch.equal(u, v) for u, v in zip(cg, cw))


@pytest.mark.parametrize("shape,dim", [((4, 4), 0), ((4, 4), 1), ((3, 3, 3), 2), ((6,), 0), ((1, 5), None)])
def test_argmax_canonicaliser_ignores_tie_breaking(shape, dim):
    spec = OPS["argmax"]
    x = torch.randint(0, 2, shape).float()
    kw = {} if dim is None else {"dim": dim}
    a = spec.fn(x, **kw)
    if dim is None:
        b = x.numel() - 1 - torch.argmax(x.flatten().flip(0))
    else:
        b = x.shape[dim] - 1 - torch.argmax(x.flip(dim), dim)
    ca, cb = spec.canonicalise([x], a), spec.canonicalise([x], b)
    assert all(torch.equal(u, v) for u, v in zip(ca, cb))


def test_index_canonicaliser_flags_out_of_range_indices():
    canon = gather_at_indices()
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    values, idx = torch.max(x, 1)
    _, _, in_range = canon([x], (values, idx + 5))
    assert not bool(in_range.any())


def test_qr_canonicaliser_ignores_signs():
    spec = OPS["linalg.qr"]
    a = torch.randn(4, 3, dtype=torch.float64)
    q, r = spec.fn(a)
    d = torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64))
    ca, cb = spec.canonicalise([a], (q, r)), spec.canonicalise([a], (q @ d, d @ r))
    for u, v in zip(ca, cb):
        assert torch.allclose(u, v)
    assert torch.allclose(ca[0], a)


def test_eigh_canonicaliser_keeps_eigenvalues_only():
    spec = OPS["linalg.eigh"]
    a = torch.randn(3, 3, dtype=torch.float64)
    out = spec.fn(a)
    assert torch.equal(spec.canonicalise([a], out), out.eigenvalues)
    assert not math.isnan(float(out.eigenvalues.sum()))


def test_a_lookup_during_another_threads_loading_waits_for_the_whole_registry():
    """Drafting threads of one process look ops up at once: a second thread must not read
    the registry half filled (a KeyError for a real op, a case lost as a harness error).
    In a fresh interpreter the registry's last step is slowed, and a lookup of an op that
    step registers is made from another thread meanwhile."""
    import subprocess
    import sys
    script = (
        "import threading, time\n"
        "from mpsfuzz.generation import catalogue\n"
        "real = catalogue._register_size_classes\n"
        "def slow():\n"
        "    time.sleep(1.0)\n"
        "    real()\n"
        "catalogue._register_size_classes = slow\n"
        "t = threading.Thread(target=catalogue.all_ops); t.start()\n"
        "time.sleep(0.3)\n"
        "print(catalogue.get('softmax@huge').name)\n"
        "t.join()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "softmax@huge"
