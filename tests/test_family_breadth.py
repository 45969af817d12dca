"""Breadth of the linalg, elementwise and reduction families: the ops they must cover,
the variants they declare, and the canonicalisers that judge non-unique outputs
(factorizations, eigenvectors, tie-dependent indices) accepting every valid answer and
rejecting a wrong one."""
from __future__ import annotations

import warnings

import pytest
import torch

from mpsfuzz.generation import catalogue

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")

OPS = catalogue.all_ops()

REQUIRED = {
    "linalg": """linalg.cholesky linalg.cholesky_ex linalg.lu linalg.lu_factor linalg.lu_factor_ex
        linalg.lu_solve linalg.solve linalg.solve_ex linalg.solve_triangular linalg.inv
        linalg.inv_ex linalg.det linalg.slogdet linalg.qr linalg.svd linalg.svdvals linalg.eigh
        linalg.eigvalsh linalg.eig linalg.eigvals linalg.lstsq linalg.pinv linalg.matrix_norm
        linalg.vector_norm linalg.norm linalg.matrix_power linalg.matrix_rank linalg.cond
        linalg.cross linalg.vecdot linalg.multi_dot linalg.householder_product
        linalg.ldl_factor linalg.ldl_solve linalg.tensorinv linalg.tensorsolve
        linalg.matrix_exp linalg.diagonal mm bmm addmm addmv addr addbmm baddbmm matmul dot
        vdot mv outer tensordot kron chain_matmul tril triu cholesky_solve cholesky_inverse
        trace einsum.bmm einsum.outer einsum.trace einsum.diag einsum.contract""",
    "elementwise": """add sub mul div true_divide div_rounding div_trunc div_floor floor_divide
        remainder fmod pow float_power eq ne lt le gt ge bitwise_and bitwise_or bitwise_xor
        bitwise_not bitwise_left_shift bitwise_right_shift bitwise_left_shift_scalar
        bitwise_left_shift_by_scalar bitwise_and_scalar bitwise_and_rscalar maximum minimum
        max_binary min_binary fmin fmax copysign nextafter atan2 lerp lerp_scalar addcmul
        addcdiv where clamp clamp_tensor round_decimals ldexp frexp logaddexp logaddexp2
        xlogy heaviside gcd lcm isclose isfinite isinf isnan isneginf isposinf signbit
        nan_to_num sgn angle conj_physical deg2rad rad2deg frac exp2 log2 log10 sinh cosh
        asinh acosh atanh asin acos atan tan logit special.expit erf erfc special.erfcx erfinv
        lgamma special.gammaln digamma polygamma special.multigammaln special.zeta
        special.xlog1py special.entr special.i0 special.i0e special.i1 special.i1e
        special.bessel_j0 special.bessel_j1 special.bessel_y0 special.bessel_y1
        special.modified_bessel_i0 special.modified_bessel_i1 special.modified_bessel_k0
        special.modified_bessel_k1 special.scaled_modified_bessel_k0
        special.scaled_modified_bessel_k1 special.spherical_bessel_j0 special.sinc
        special.ndtr special.ndtri special.log_ndtr log1p expm1 special.airy_ai
        special.chebyshev_polynomial_t special.chebyshev_polynomial_t_scalar_n
        special.hermite_polynomial_h special.hermite_polynomial_he
        special.laguerre_polynomial_l special.legendre_polynomial_p add_scalar rsub_scalar
        rpow_scalar rdiv_scalar""",
    "reduction": """sum prod mean nanmean nansum var std var_mean std_mean norm logsumexp amax
        amin aminmax max min max_dim min_dim argmax argmin any all count_nonzero cumsum
        cumprod cummax cummin logcumsumexp median median_all nanmedian kthvalue mode quantile
        nanquantile quantile_tensor_q sort argsort topk msort unique unique_consecutive histc
        bincount bincount_weights dist renorm""",
}


@pytest.mark.parametrize("family", sorted(REQUIRED))
def test_required_ops_are_in_their_family(family):
    missing = [n for n in REQUIRED[family].split() if n not in OPS]
    assert not missing, missing
    wrong = [n for n in REQUIRED[family].split() if OPS[n].family != family]
    assert not wrong, wrong


def _family(name):
    return [OPS[n] for n in catalogue.families()[name]]


def test_elementwise_declares_methods_and_out():
    ops = _family("elementwise")
    assert sum(bool(s.method) for s in ops) >= 0.6 * len(ops)
    assert sum(s.out for s in ops) >= 0.4 * len(ops)
    assert sum(s.grad for s in ops) >= 0.4 * len(ops)


@pytest.mark.parametrize("family", sorted(REQUIRED))
def test_declared_methods_exist(family):
    for spec in _family(family):
        for name in (spec.method, spec.inplace):
            if name:
                assert hasattr(torch.Tensor, name), (spec.name, name)
        if spec.inplace:
            assert spec.inplace.endswith("_"), spec.name


def test_reduction_and_linalg_declare_variants():
    for family in ("reduction", "linalg"):
        ops = _family(family)
        assert sum(bool(s.method) for s in ops) >= 0.3 * len(ops), family
        assert sum(s.out for s in ops) >= 0.5 * len(ops), family
    assert OPS["cumsum"].inplace == "cumsum_" and OPS["tril"].inplace == "tril_"
    assert OPS["clamp"].inplace == "clamp_" and OPS["add"].inplace == "add_"


def test_ops_with_rewriting_fns_declare_no_method():
    # their fn replaces integer zeros in the divisor; the method would not
    for name in ("remainder", "fmod", "floor_divide", "div_trunc", "div_floor"):
        assert OPS[name].method is None and OPS[name].inplace is None


@pytest.mark.parametrize("name,args,kwargs", [
    ("add", (torch.arange(4.0), torch.ones(4)), {"alpha": 2}),
    ("clamp", (torch.arange(-3.0, 3.0),), {"min": -1.0, "max": 1.5}),
    ("lerp_scalar", (torch.zeros(3), torch.ones(3)), {"weight": 0.25}),
    ("pow_scalar", (torch.arange(4.0),), {"exponent": 2}),
    ("cumsum", (torch.arange(6.0).reshape(2, 3),), {"dim": 1}),
    ("tril", (torch.ones(3, 3),), {"diagonal": -1}),
    ("max_dim", (torch.tensor([[1.0, 5.0], [7.0, 2.0]]),), {"dim": 1, "keepdim": False}),
])
def test_method_inplace_and_out_agree_with_fn(name, args, kwargs):
    spec = OPS[name]
    want = spec.fn(*[a.clone() for a in args], **kwargs)
    flat = list(want) if isinstance(want, tuple) else [want]
    if spec.method:
        got = getattr(args[0].clone(), spec.method)(*args[1:], **kwargs)
        for g, w in zip(list(got) if isinstance(got, tuple) else [got], flat):
            assert torch.equal(g, w)
    if spec.inplace:
        x = args[0].clone()
        getattr(x, spec.inplace)(*args[1:], **kwargs)
        assert torch.equal(x, flat[0])
    if spec.out:
        outs = tuple(torch.empty_like(w) for w in flat)
        spec.fn(*[a.clone() for a in args], **kwargs, out=outs[0] if len(outs) == 1 else outs)
        for o, w in zip(outs, flat):
            assert torch.equal(o, w)


def test_multi_output_out_accepts_a_tuple():
    x = torch.tensor([[3.0, 1.0, 2.0]])
    v, i = torch.empty(1), torch.empty(1, dtype=torch.int64)
    OPS["max_dim"].fn(x, dim=1, out=(v, i))
    assert v.item() == 3.0 and i.item() == 0


# -- canonicalisers of factorizations ------------------------------------------------------

def _same(a, b, tol=1e-9) -> bool:
    fa = list(a) if isinstance(a, (tuple, list)) else [a]
    fb = list(b) if isinstance(b, (tuple, list)) else [b]
    return len(fa) == len(fb) and all(
        x.shape == y.shape and torch.allclose(x.to(torch.complex128) if x.is_complex() else x.double(),
                                              y.to(torch.complex128) if y.is_complex() else y.double(),
                                              atol=tol, rtol=tol, equal_nan=True)
        for x, y in zip(fa, fb))


A2 = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)


def _unpivoted_lu():
    """A2 = L U without row exchanges (a valid LU that partial pivoting would not pick)."""
    l = torch.tensor([[1.0, 0.0], [3.0, 1.0]], dtype=torch.float64)
    u = torch.tensor([[1.0, 2.0], [0.0, -2.0]], dtype=torch.float64)
    return torch.eye(2, dtype=torch.float64), l, u


def test_lu_canonicaliser_accepts_other_pivoting_and_rejects_wrong():
    spec = OPS["linalg.lu"]
    p, l, u = torch.linalg.lu(A2)
    assert not torch.equal(p, torch.eye(2, dtype=torch.float64))  # torch pivots here
    ours = spec.canonicalise([A2], (p, l, u))
    assert _same(ours, spec.canonicalise([A2], _unpivoted_lu()))
    assert torch.allclose(ours[0], A2)
    wrong_u = u.clone()
    wrong_u[1, 1] += 0.5
    assert not _same(ours, spec.canonicalise([A2], (p, l, wrong_u)))
    not_unit = l.clone()
    not_unit[0, 0] = 2.0
    assert not _same(ours, spec.canonicalise([A2], (p, not_unit, u / torch.tensor([[2.0], [1.0]], dtype=torch.float64))))


@pytest.mark.parametrize("name", ["linalg.lu_factor", "linalg.lu_factor_ex"])
def test_lu_factor_canonicaliser_compares_pivots_only_through_plu(name):
    spec = OPS[name]
    ours = spec.fn(A2)
    _, l, u = _unpivoted_lu()
    compact = torch.tril(l, -1) + u
    no_swaps = torch.tensor([1, 2], dtype=torch.int32)
    other = (compact, no_swaps) + tuple(ours[2:])
    assert not torch.equal(ours[1], no_swaps)
    assert _same(spec.canonicalise([A2], ours), spec.canonicalise([A2], other))
    wrong = (compact + 0.25, no_swaps) + tuple(ours[2:])
    assert not _same(spec.canonicalise([A2], ours), spec.canonicalise([A2], wrong))
    bad_pivots = (ours[0], torch.tensor([7, 2], dtype=torch.int32)) + tuple(ours[2:])
    assert not _same(spec.canonicalise([A2], ours), spec.canonicalise([A2], bad_pivots))


def test_lu_factor_canonicaliser_handles_complex_and_batches():
    spec = OPS["linalg.lu_factor"]
    a = torch.randn(3, 4, 4, dtype=torch.complex128)
    lu, piv = spec.fn(a)
    canon = spec.canonicalise([a], (lu, piv))
    assert canon[0].dtype == torch.complex128 and torch.allclose(canon[0], a)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_canonicaliser_accepts_other_signs_and_rejects_wrong(mode):
    spec = OPS["linalg.qr"]
    a = torch.randn(5, 3, dtype=torch.float64)
    q, r = spec.fn(a, mode=mode)
    k = r.shape[-2]
    d = torch.diag(torch.tensor([1.0, -1.0, -1.0, 1.0, -1.0][:k], dtype=torch.float64))
    flipped = (q @ d if q.numel() else q, d @ r)
    assert _same(spec.canonicalise([a], (q, r)), spec.canonicalise([a], flipped))
    wrong_r = r.clone()
    wrong_r[0, 1] += 0.5
    assert not _same(spec.canonicalise([a], (q, r)), spec.canonicalise([a], (q, wrong_r)))


def test_qr_canonicaliser_complex_phases():
    spec = OPS["linalg.qr"]
    a = torch.randn(4, 4, dtype=torch.complex128)
    q, r = spec.fn(a)
    phases = torch.exp(1j * torch.tensor([0.3, 1.0, -2.0, 2.5], dtype=torch.float64))
    d = torch.diag(phases)
    assert _same(spec.canonicalise([a], (q, r)), spec.canonicalise([a], (q @ d, d.conj() @ r)))


@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_canonicaliser_accepts_other_signs_and_rejects_wrong(full_matrices):
    spec = OPS["linalg.svd"]
    a = torch.randn(4, 3, dtype=torch.float64)
    u, s, vh = spec.fn(a, full_matrices=full_matrices)
    du = torch.diag(torch.tensor([-1.0, 1.0, -1.0, -1.0][:u.shape[-1]], dtype=torch.float64))
    dv = torch.diag(torch.tensor([-1.0, 1.0, -1.0][:vh.shape[-2]], dtype=torch.float64))
    if full_matrices:  # U's extra column is any unit vector orthogonal to the others
        flipped = (u @ du, s, dv @ vh)
    else:
        flipped = (u @ dv, s, dv @ vh)
    ours = spec.canonicalise([a], (u, s, vh))
    assert torch.allclose(ours[0], a)
    assert _same(ours, spec.canonicalise([a], flipped))
    assert not _same(ours, spec.canonicalise([a], (u, s * 1.1, vh)))
    assert not _same(ours, spec.canonicalise([a], (u @ du, s, vh)))  # not matching signs


def test_eig_canonicalisers_ignore_order_and_phase():
    spec, vals = OPS["linalg.eig"], OPS["linalg.eigvals"]
    a = torch.randn(4, 4, dtype=torch.float64)
    w, v = spec.fn(a)
    perm = torch.tensor([2, 0, 3, 1])
    phase = torch.exp(1j * torch.tensor([0.5, -1.0, 2.0, 0.1], dtype=torch.float64))
    other = (w[perm], v[:, perm] * phase[perm])
    assert _same(spec.canonicalise([a], (w, v)), spec.canonicalise([a], other))
    assert _same(vals.canonicalise([a], w), vals.canonicalise([a], w[perm]))
    wrong_w = w.clone()
    wrong_w[0] += 0.1
    assert not _same(spec.canonicalise([a], (w, v)), spec.canonicalise([a], (wrong_w, v)))
    assert not _same(vals.canonicalise([a], w), vals.canonicalise([a], wrong_w))
    assert not _same(spec.canonicalise([a], (w, v)), spec.canonicalise([a], (w, v * 2)))


def test_ldl_canonicaliser_compares_the_inverse():
    spec = OPS["linalg.ldl_factor"]
    b = torch.randn(4, 4, dtype=torch.float64)
    a = b @ b.mT + 4 * torch.eye(4, dtype=torch.float64)
    ld, piv = spec.fn(a)
    (inv, bad) = spec.canonicalise([a], (ld, piv))
    assert int(bad) == 0 and torch.allclose(inv, torch.linalg.inv(a))
    assert not _same((inv, bad), spec.canonicalise([a], (ld * 1.5, piv)))


# -- canonicalisers of tie-dependent reductions ---------------------------------------------

def test_sort_canonicaliser_ignores_tie_order():
    spec = OPS["sort"]
    x = torch.tensor([[2, 1, 2, 1], [0, 0, 0, 3]], dtype=torch.uint16)
    values, idx = spec.fn(x, dim=1, stable=True)
    other = idx.clone()
    other[0, 0], other[0, 1] = idx[0, 1], idx[0, 0]  # the two 1s swapped
    assert _same(spec.canonicalise([x], (values, idx)), spec.canonicalise([x], (values, other)))
    wrong = idx.clone()
    wrong[1, 3] = 0
    assert not _same(spec.canonicalise([x], (values, idx)), spec.canonicalise([x], (values, wrong)))


def test_argsort_and_topk_canonicalisers_ignore_tie_order():
    x = torch.tensor([[3.0, 1.0, 3.0, 2.0]])
    arg = OPS["argsort"]
    a = arg.fn(x, dim=-1, descending=True)
    b = torch.tensor([[2, 0, 3, 1]]) if a[0, 0] == 0 else torch.tensor([[0, 2, 3, 1]])
    assert _same(arg.canonicalise([x], a), arg.canonicalise([x], b))
    assert not _same(arg.canonicalise([x], a), arg.canonicalise([x], torch.tensor([[0, 1, 2, 3]])))
    top = OPS["topk"]
    kw = {"dim": -1, "largest": True, "sorted": False}
    out = top.fn(x, 2, **kw)
    unsorted_other = (out[0].flip(-1), out[1].flip(-1))
    assert _same(top.canonical([x], out, kw), top.canonical([x], unsorted_other, kw))
    assert not _same(top.canonical([x], out, kw),
                     top.canonical([x], (out[0], torch.tensor([[0, 3]])), kw))
    # sorted=True fixes the values' order (the default); sorted=False leaves it free
    y = torch.tensor([[1.0, 3.0, 2.0]])
    best = top.fn(y, 2)
    reversed_ = (best[0].flip(-1), best[1].flip(-1))
    assert not _same(top.canonical([y], best, {}), top.canonical([y], reversed_, {}))
    assert _same(top.canonical([y], best, {"sorted": False}), top.canonical([y], reversed_, {"sorted": False}))


def test_mode_canonicaliser_accepts_any_most_frequent_value():
    spec = OPS["mode"]
    x = torch.tensor([[1.0, 1.0, 2.0, 2.0, 3.0]])
    ours = spec.fn(x, dim=1)
    other = (torch.tensor([2.0]) if ours[0].item() == 1.0 else torch.tensor([1.0]), torch.tensor([3]))
    assert _same(spec.canonicalise([x], ours), spec.canonicalise([x], other))
    wrong = (torch.tensor([3.0]), torch.tensor([4]))
    assert not _same(spec.canonicalise([x], ours), spec.canonicalise([x], wrong))


def test_bincount_inputs_are_non_negative_indices():
    spec = OPS["bincount"]
    asked = spec.input_values[0]((10,), {})
    assert asked["low"] >= 0 and asked["allow_specials"] is False
