"""Linear algebra: the matmul family, factorizations and solves, norms, triangular
parts and products.

Factorizations and solves take well-conditioned inputs (``spd`` for Cholesky,
``diag_dominant`` for solves, inverses, determinants and LU), no non-finite values
(BLAS/LAPACK results are implementation-defined there) and no finite extremes either,
which would break the conditioning the recipe built. Where a factorization is not
unique (QR's signs, eigenvectors) a canonicaliser compares what is.
"""
from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..grad_points import (dims_of, eps_of, matrix_last_two, matrix_norm_reason, repeated_spectrum, rows,
                           slack, spectrum_reason, vector_norm_kinks, vector_norm_reason, wide)
from ..large_sizes import grows
from ..opspec import declare_grows
from ..opspec import (OpSpec, ShapeBudget, any_shape, broadcast_shapes, broadcastable_to, combine_args, dim_arg,
                      draw_side, expand, first_dtype, fit, fit_keep_last, integers_once, matmul_shapes, matrix_shapes,
                      register, sampled_once)
from ..recipes import DtypeArg

FAMILY = "linalg"

FLOAT = expand("float")
FC = expand("floating_and_complex")
# What the matmul family is defined for (no complex32, no bool, no uint16/32/64).
MATMUL = FLOAT + ("complex64", "complex128") + expand("signed") + ("uint8",)
# LAPACK-backed ops: single and double precision only.
LAPACK = ("float32", "float64", "complex64", "complex128")
SOLVER = dict(allow_nonfinite=False, allow_specials=False)


def linalg(name: str, fn, shapes, dtypes, doc: str, **kw) -> OpSpec:
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=expand(dtypes),
                  doc=doc, **kw)


def _is_fc(name: str) -> bool:
    return name in dt.FLOAT or name in dt.COMPLEX


# -- shape builders ---------------------------------------------------------------------

def _batched_large_squares(draw, budget: ShapeBudget):
    """A batch of 2 or 3 square matrices of 128 or 256 rows, past the side budget on
    purpose: factorisations switch to blocked kernels at such sizes, and a batch of them
    takes yet another path."""
    n = draw(sampled_once((128, 256)))
    return ((draw(integers_once(2, 3)), n, n),)


def _with_input(kind: str):
    """addmm/addmv/addr/baddbmm/addbmm: (input broadcastable to the product, operand,
    operand). Half the time the input has the product's full shape, which the in-place
    variant (``addmm_``) needs."""
    inner = matmul_shapes("bmm" if kind == "addbmm" else kind)

    def build(draw, budget: ShapeBudget):
        a, b = inner(draw, budget)
        if kind == "mm":
            out = (a[0], b[1])
        elif kind == "mv":
            out = (a[0],)
        elif kind == "outer":
            out = (a[0], b[0])
        elif kind == "addbmm":
            out = (a[1], b[2])
        else:  # bmm
            out = (a[0], a[1], b[2])
        return (out if draw(st.booleans()) else broadcastable_to(draw, out), a, b)
    return build


def _cross_shapes(draw, budget: ShapeBudget):
    """Two same-rank inputs that broadcast, with size 3 along the cross-product dim
    (which the args builder finds again as the dim whose sides are both 3)."""
    rank = draw(st.integers(max(1, budget.min_rank), max(1, min(5, budget.max_rank))))
    pos = draw(st.integers(0, rank - 1))
    full = [draw_side(draw, budget) for _ in range(rank)]
    full[pos] = 1
    full = list(fit(full, ShapeBudget(max_numel=max(1, budget.max_numel // 3))))
    full[pos] = 3
    out = []
    for _ in range(2):
        out.append(tuple(1 if i != pos and draw(st.integers(0, 3)) == 0 else s
                         for i, s in enumerate(full)))
    return tuple(out)


def _cross_args(draw, shapes, dtypes):
    a, b = shapes
    rank = len(a)
    dims = [d for d in range(rank) if a[d] == 3 and b[d] == 3]
    dim = draw(st.sampled_from(dims))
    return {"dim": dim - rank if draw(st.booleans()) else dim}


def _vecdot_shapes(draw, budget: ShapeBudget):
    """Broadcasting shapes of rank >= 1 whose last dims agree (vecdot broadcasts the
    batch dims but not the dim it reduces)."""
    a, b = broadcast_shapes(2, min_rank=1)(draw, budget)
    k = a[-1] if a[-1] != 1 else b[-1]
    return (a[:-1] + (k,), b[:-1] + (k,))


def _triangular_solve_shapes(draw, budget: ShapeBudget):
    """A (..., n, n) triangular system and B (..., n, k) right-hand sides."""
    batch = [draw_side(draw, budget) for _ in range(draw(st.integers(0, 2)))]
    n, k = draw_side(draw, budget), draw_side(draw, budget)
    a = fit(batch + [n, n], budget)
    return (a, a[:-2] + (n, k))


# -- argument builders ------------------------------------------------------------------

def _beta_alpha(draw, shapes, dtypes):
    values = (1, 0.5, 2, -1, 0) if _is_fc(first_dtype(dtypes)) else (1, 2, -1, 0)
    return {"beta": draw(st.sampled_from(values)), "alpha": draw(st.sampled_from(values))}


def _diagonal(draw, shapes, dtypes):
    return {"diagonal": draw(st.integers(-4, 4))}


def _vector_ord(draw, shapes, dtypes):
    return {"ord": draw(st.sampled_from((2, 1, math.inf, -math.inf, 0, 3, 0.5, -1)))}


def _matrix_ord(draw, shapes, dtypes):
    ords = ["fro", 1, -1, math.inf, -math.inf]
    if first_dtype(dtypes) in LAPACK:
        ords += ["nuc", 2, -2]  # these go through an SVD
    out = {"ord": draw(st.sampled_from(ords))}
    if draw(st.booleans()):
        out["keepdim"] = True
    return out


def _flag(name: str, values=(False, True)):
    def build(draw, shapes, dtypes):
        return {name: draw(st.sampled_from(values))}
    return build


def _vecdot_dim(draw, shapes, dtypes):
    """vecdot's dim: the default (-1), or any dim of the broadcast shape, negative or not."""
    rank = max(len(s) for s in shapes)
    if draw(st.integers(0, 2)) < 2:
        return {}
    d = draw(st.integers(0, rank - 1))
    return {"dim": d - rank if draw(st.booleans()) else d}


def _norm_dtype(draw, shapes, dtypes):
    """Sometimes an explicit dtype for a norm: as wide or wider than the input's (norms
    refuse narrowing), complex for complex inputs."""
    d = first_dtype(dtypes)
    if draw(st.integers(0, 3)) < 3:
        return {}
    if d in dt.COMPLEX:
        return {"dtype": DtypeArg("complex128")}
    return {"dtype": DtypeArg(draw(st.sampled_from(("float64",) if d == "float64" else ("float32", "float64"))))}


def _matrix_dims(draw, shapes, dtypes):
    """matrix_norm's dim: the default (-2, -1), or any two dims (either order)."""
    rank = len(shapes[0])
    if draw(st.integers(0, 2)) < 2:
        return {}
    d1, d2 = draw(st.lists(st.integers(0, rank - 1), min_size=2, max_size=2, unique=True))
    return {"dim": (d1 - rank if draw(st.booleans()) else d1, d2)}


def _tolerances(draw, shapes, dtypes):
    """pinv/matrix_rank's atol and rtol: each left out, None, 0 or small (the inputs'
    singular values are O(1): no cut-off falls near one of them)."""
    out = {}
    for name, small in (("atol", 1e-7), ("rtol", 1e-6)):
        how = draw(st.integers(0, 3))
        if how:
            out[name] = (None, 0.0, small)[how - 1]
    return out


def _lstsq_rcond(draw, shapes, dtypes):
    how = draw(st.integers(0, 3))
    return {} if how < 2 else {"rcond": None if how == 2 else 1e-7}


def _matrix_power_n(draw, shapes, dtypes):
    # negative powers invert, which LAPACK does in single/double precision only
    low = -2 if first_dtype(dtypes) in LAPACK else 0
    return {"n": draw(st.integers(low, 4))}


# -- more shape builders ------------------------------------------------------------

def _batch(draw, budget: ShapeBudget, most: int = 2) -> list[int]:
    most = max(0, min(most, budget.max_rank - 2))
    return [draw_side(draw, budget) for _ in range(draw(st.integers(0, most)))]


def _system_shapes(*, rhs_first: bool = False, min_side: int = 0):
    """A square (..., n, n) matrix and right-hand sides (..., n, k); ``rhs_first``
    returns them the other way round (cholesky_solve takes B first)."""
    def build(draw, budget: ShapeBudget):
        batch = _batch(draw, budget)
        n, k = draw_side(draw, budget, min_side=min_side), draw_side(draw, budget)
        a = fit_keep_last(list(batch), [n, n], budget)
        b = a[:-2] + (n, k)
        return (b, a) if rhs_first else (a, b)
    return build


def _lstsq_shapes(draw, budget: ShapeBudget):
    batch = _batch(draw, budget, 1)
    m, n, k = (draw_side(draw, budget) for _ in range(3))
    a = fit_keep_last(list(batch), [m, n], budget)
    return (a, a[:-2] + (m, k))


def _householder_shapes(draw, budget: ShapeBudget):
    """A (..., m, n) with m >= n and tau (..., k) with k <= n."""
    batch = _batch(draw, budget, 1)
    n = draw_side(draw, budget)
    m = n + draw(st.integers(0, 3))
    k = draw(st.integers(0, n))
    a = fit_keep_last(list(batch), [m, n], budget)
    return (a, a[:-2] + (k,))


def _chain_shapes(*, vector_ends: bool):
    """Three operands of a chained product; multi_dot's first and last may be 1-D."""
    def build(draw, budget: ShapeBudget):
        d = [max(1, draw_side(draw, budget)) if i in (0, 3) else draw_side(draw, budget) for i in range(4)]
        shapes = [(d[0], d[1]), (d[1], d[2]), (d[2], d[3])]
        if vector_ends and draw(st.booleans()):
            shapes[0] = (d[1],)
        if vector_ends and draw(st.booleans()):
            shapes[2] = (d[2],)
        return tuple(shapes)
    return build


def _kron_shapes(draw, budget: ShapeBudget):
    small = ShapeBudget(min_rank=budget.min_rank, max_rank=min(4, budget.max_rank),
                        max_side=min(4, budget.max_side), allow_empty=budget.allow_empty,
                        max_numel=max(1, int(budget.max_numel ** 0.5)))
    return any_shape(2, max_rank=4)(draw, small)


def _tensordot_shapes(draw, budget: ShapeBudget):
    """a = free_a + contracted, b = contracted + free_b (the args builder finds how many
    dims contract, and sometimes names them as lists in a shuffled order)."""
    contracted = [draw_side(draw, budget) for _ in range(draw(st.integers(0, 2)))]
    free_a = [draw_side(draw, budget) for _ in range(draw(st.integers(0, 2)))]
    free_b = [draw_side(draw, budget) for _ in range(draw(st.integers(0, 2)))]
    a = fit(free_a + contracted, budget)
    b = fit(list(contracted) + free_b, budget)
    n = len(contracted)
    # fitting may shrink differently: make the contracted sides agree again
    b = tuple(a[len(a) - n:]) + b[n:] if n else b
    return (a, b)


def _square(min_batch=0, max_batch=2, min_side=0):
    return matrix_shapes(square=True, min_batch=min_batch, max_batch=max_batch, min_side=min_side)


def _einsum_shapes(kind: str):
    def build(draw, budget: ShapeBudget):
        i, j, k, l = (draw_side(draw, budget) for _ in range(4))
        if kind == "bmm":
            b = draw_side(draw, budget)
            return ((b, i, j), (b, j, k))
        if kind == "outer":
            return ((i,), (j,))
        if kind == "trace":
            return ((i, i),)
        if kind == "diag":
            return (fit_keep_last(_batch(draw, budget, 3), [i, i], budget),)
        if kind == "contract":
            return ((i, j, k), (j, k, l))
        # attention: bhqd,bhkd->bhqk
        b, h = draw_side(draw, budget), draw_side(draw, budget)
        return ((b, h, i, j), (b, h, k, j))
    return build


def _diagonal_shapes(draw, budget: ShapeBudget):
    return any_shape(1, min_rank=2, max_rank=6)(draw, budget)


# -- more argument builders --------------------------------------------------------------

def _left_flag(rhs: int):
    """``left``: False only when the right-hand sides are a matrix (the wrapper then
    passes B transposed, so the same shapes work both ways)."""
    def build(draw, shapes, dtypes):
        return {"left": not (len(shapes[rhs]) >= 2 and draw(st.booleans()))}
    return build


def _tri_solve_args(draw, shapes, dtypes):
    return {"upper": draw(st.booleans()), "left": draw(st.booleans()),
            "unitriangular": draw(st.integers(0, 3)) == 0}


def _lu_solve_args(draw, shapes, dtypes):
    return {"left": draw(st.booleans()), "adjoint": draw(st.booleans())}


def _lstsq_args(draw, shapes, dtypes):
    drivers = (None, "gelsy", "gelsd", "gelss", "gels")
    if any(0 in s for s in shapes):
        # torch 2.13's CPU gelss/gelsd segfault on an empty right-hand side: the CPU
        # reference would kill the worker whatever the target does.
        drivers = (None, "gelsy", "gels")
    return {"driver": draw(st.sampled_from(drivers))}


def _tensordot_args(draw, shapes, dtypes):
    a, b = shapes
    fits = [n for n in range(0, min(len(a), len(b)) + 1) if tuple(a[len(a) - n:]) == tuple(b[:n])]
    n = draw(st.sampled_from(fits))
    if n == 0 or draw(st.booleans()):
        return {"dims": n}
    order = draw(st.permutations(range(n)))
    return {"dims": (tuple(len(a) - n + i for i in order), tuple(order))}


def _diagonal_args(draw, shapes, dtypes):
    rank = len(shapes[0])
    d1, d2 = draw(st.lists(st.integers(-rank, rank - 1), min_size=2, max_size=2,
                           unique_by=lambda d: d % rank))
    return {"offset": draw(st.integers(-3, 3)), "dim1": d1, "dim2": d2}


def _factor(draw, n: int) -> tuple[int, ...]:
    """An ordered factorization of n into 1..3 factors (n itself included)."""
    out, rest = [], n
    for _ in range(draw(st.integers(0, 2))):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = draw(st.sampled_from(divisors))
        out.append(d)
        rest //= d
    return tuple(out + [rest])


def _tensorinv_args(draw, shapes, dtypes):
    n = shapes[0][-1]
    left, right = _factor(draw, n), _factor(draw, n)
    return {"shape": left + right, "ind": len(left)}


def _tensorsolve_args(draw, shapes, dtypes):
    n = shapes[0][-1]
    out = {"bshape": _factor(draw, n), "xshape": _factor(draw, n)}
    if draw(st.booleans()):
        # dims: where A holds X's dims (the wrapper moves them there; tensorsolve moves
        # them back to the end)
        rank = len(out["bshape"]) + len(out["xshape"])
        out["dims"] = tuple(draw(st.lists(st.integers(0, rank - 1), min_size=len(out["xshape"]),
                                          max_size=len(out["xshape"]), unique=True)))
    return out


def _tensorsolve(a, b, bshape, xshape, dims=None, **kw):
    full = a.reshape(bshape + xshape)
    if dims is not None:
        full = full.movedim(tuple(range(len(bshape), len(bshape) + len(xshape))), dims)
    return torch.linalg.tensorsolve(full, b.reshape(bshape), dims=dims, **kw)


def _norm_args(draw, shapes, dtypes):
    """torch.linalg.norm: a vector norm (flattened, or over one dim) or a matrix norm
    (over two dims), with the ords each accepts."""
    rank = len(shapes[0])
    how = draw(st.sampled_from(("default", "vector", "matrix") if rank >= 2 else ("default", "vector")))
    out: dict = {}
    if how == "default":
        if rank in (1, 2) and draw(st.booleans()):
            out["ord"] = draw(st.sampled_from((2, 1, math.inf)) if rank == 1
                              else st.sampled_from(("fro", 1, math.inf, -1)))
    elif how == "vector" and rank:  # (a 0-d input takes no ord without a dim)
        d = draw(st.integers(0, rank - 1))
        out["dim"] = d - rank if draw(st.booleans()) else d
        out["ord"] = draw(st.sampled_from((None, 2, 1, 0, math.inf, -math.inf, 3)))
    elif how == "matrix":
        d1, d2 = draw(st.lists(st.integers(0, rank - 1), min_size=2, max_size=2, unique=True))
        out["dim"] = (d1, d2)
        ords = [None, "fro", 1, -1, math.inf, -math.inf]
        if first_dtype(dtypes) in LAPACK:
            ords += ["nuc", 2, -2]
        out["ord"] = draw(st.sampled_from(ords))
    out["keepdim"] = draw(st.booleans())
    return out


def _cond_p(draw, shapes, dtypes):
    return {"p": draw(st.sampled_from((None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf)))}


# -- canonicalisers ---------------------------------------------------------------------
# Each side's outputs are turned into what is unique about them: reconstructions and
# invariants, computed on CPU copies in double precision (no device ops are added) and
# cast back to the output's own dtype so the dtype's tolerance applies.

def _wide(t):
    t = t.detach().cpu()
    return t.to(torch.complex128) if t.is_complex() else t.to(torch.float64)


def _as(t, like):
    """``t`` in ``like``'s dtype (the real part dropped only if ``like`` is real and
    ``t`` is a real-valued complex result)."""
    if t.is_complex() and not like.is_complex():
        t = t.real
    return t.to(like.dtype)


def _qr_canonical(inputs, outputs):
    """QR is unique only up to the phases of R's diagonal (and Q's columns beyond A's
    rank, or beyond n in complete mode): compare the reconstruction Q@R (R^H R = A^H A
    in mode 'r'), Q^H Q, |diag R| and R's (zero) strictly lower part."""
    q, r = outputs
    qw, rw = _wide(q), _wide(r)
    diag = _as(rw.diagonal(dim1=-2, dim2=-1).abs(), r.abs())
    lower = _as(rw.tril(-1), r)
    if q.dim() != r.dim():  # mode "r": Q is an empty 1-D tensor
        return (_as(rw.mH @ rw, r), diag, lower)
    return (_as(qw @ rw, r), _as(qw.mH @ qw, q), diag, lower)


def _svd_canonical(inputs, outputs):
    """SVD: singular vectors are unique only up to phase (and within repeated singular
    values): compare U diag(S) Vh, S, U^H U and Vh Vh^H."""
    u, s, vh = outputs
    uw, sw, vw = _wide(u), _wide(s), _wide(vh)
    k = sw.shape[-1]
    recon = (uw[..., :k] * sw.unsqueeze(-2).to(uw.dtype)) @ vw[..., :k, :]
    return (_as(recon, u), s, _as(uw.mH @ uw, u), _as(vw @ vw.mH, vh))


def _lu_structure(pw, lw, uw, like):
    """Reconstruction and the parts that are fixed whatever the pivoting: L's strict
    upper part (zeros) and unit diagonal, U's strict lower part, and that P is a
    permutation matrix (P P^T = I, entries 0 or 1)."""
    return (_as(pw @ lw @ uw, like), _as(lw.triu(1), like),
            _as(lw.diagonal(dim1=-2, dim2=-1), like), _as(uw.tril(-1), like),
            _as(pw @ pw.mT, like), _as(pw * (1 - pw), like))


def _lu_canonical(inputs, outputs):
    """linalg.lu: pivoting may legitimately differ (ties, or complex pivots chosen by
    another magnitude): compare P L U and the structure, not P, L, U."""
    p, l, u = outputs
    return _lu_structure(_wide(p), _wide(l), _wide(u), l)


def _unpack_lu(lu, pivots):
    """P, L, U (double, CPU) from a compact LU and LAPACK-style pivots, plus the number
    of pivots out of range (clamped so a bad side still gives a comparable result)."""
    luw = _wide(lu)
    piv = pivots.detach().cpu().to(torch.int64)
    m = luw.shape[-2]
    bad = torch.logical_or(piv.lt(1), piv.gt(max(m, 1))).sum()
    piv = piv.clamp(1, max(m, 1)).to(torch.int32)
    p, l, u = torch.lu_unpack(luw, piv)
    return p, l, u, bad


def _lu_factor_canonical(inputs, outputs):
    """linalg.lu_factor(_ex): the pivots are compared only through the reconstruction
    P L U (and the count of out-of-range pivots); info (the _ex form) exactly."""
    lu, pivots = outputs[0], outputs[1]
    p, l, u, bad = _unpack_lu(lu, pivots)
    return _lu_structure(p, l, u, lu) + (bad,) + tuple(outputs[2:])


def _eigh_values(inputs, outputs):
    """Eigenvectors are unique only up to phase (and within repeated eigenvalues)."""
    return outputs[0]


def _power_sums(values, a):
    """Power sums p_k = sum (lambda_i/s)^k, k = 1..n, of the eigenvalues scaled by A's
    Frobenius norm: symmetric in the eigenvalues (their order is unspecified) and as well
    conditioned as trace((A/s)^k)."""
    lam = _wide(values).to(torch.complex128)
    aw = _wide(a)
    s = torch.linalg.matrix_norm(aw).clamp_min(1e-300).unsqueeze(-1).to(torch.complex128)
    mu = lam / s
    n = lam.shape[-1]
    return torch.stack([(mu ** k).sum(-1) for k in range(1, n + 1)], -1) if n else lam


def _eigvals_canonical(inputs, outputs):
    return _as(_power_sums(outputs, inputs[0]), outputs)


def _eig_canonical(inputs, outputs):
    """linalg.eig: eigenvalues through their power sums; eigenvectors through the
    relative residual |A V - V diag(L)| / |A| and their (unit) norms."""
    values, vectors = outputs
    a = _wide(inputs[0]).to(torch.complex128)
    v = _wide(vectors).to(torch.complex128)
    lam = _wide(values).to(torch.complex128)
    resid = torch.linalg.matrix_norm(a @ v - v * lam.unsqueeze(-2)) if a.numel() else a.new_zeros(a.shape[:-2]).real
    scale = torch.linalg.matrix_norm(a).clamp_min(1e-300) if a.numel() else resid + 1
    norms = torch.linalg.vector_norm(v, dim=-2)
    real = vectors.real if vectors.is_complex() else vectors
    return (_as(_power_sums(values, inputs[0]), values), _as(resid / scale, real), _as(norms, real))


def _ldl_canonical(inputs, outputs):
    """LDL^T with Bunch-Kaufman pivoting is not unique: compare A^-1 rebuilt from each
    side's factors (ldl_solve against I, on the CPU), plus info for the _ex form."""
    ld, pivots = outputs[0], outputs[1]
    ldw = _wide(ld)
    n = ldw.shape[-1]
    piv = pivots.detach().cpu().to(torch.int64)
    bad = torch.logical_or(piv.eq(0), piv.abs().gt(max(n, 1))).sum()
    piv = torch.where(bad.gt(0), torch.arange(1, n + 1, dtype=torch.int64).expand(piv.shape), piv).to(torch.int32)
    eye = torch.eye(n, dtype=ldw.dtype).expand(ldw.shape)
    herm = bool(inputs[0].is_complex())  # the specs factor complex inputs as Hermitian
    inv = torch.linalg.ldl_solve(ldw, piv, eye, hermitian=herm) if n else eye
    return (_as(inv, ld), bad) + tuple(outputs[2:])


def _lstsq_canonical(inputs, outputs):
    """Only the solution is defined the same way by every driver (rank, residuals and
    singular values are each returned by some drivers only)."""
    return outputs[0]


def _lu_then(solve):
    def fn(a, b, **kw):
        lu, piv = torch.linalg.lu_factor(a)
        return solve(lu, piv, b, **kw)
    return fn


def _lu_solve(lu, piv, b, left=True, adjoint=False, **kw):
    return torch.linalg.lu_solve(lu, piv, b if left else b.mT, left=left, adjoint=adjoint, **kw)


def _ldl_solve(a, b, **kw):
    ld, piv = torch.linalg.ldl_factor(a, hermitian=a.is_complex())
    return torch.linalg.ldl_solve(ld, piv, b, hermitian=a.is_complex(), **kw)


# -- where gradients are undefined ---------------------------------------------------------

def _matrix_norm_undefined(inputs, kwargs, rtol=1e-5):
    a = inputs[0]
    rel, tiny = slack(a)
    why = matrix_norm_reason(matrix_last_two(wide(a), kwargs.get("dim", (-2, -1))), kwargs.get("ord", "fro"),
                             rtol, eps_of(a), rel, tiny)
    return f"input 0: {why}" if why else None


def _norm_undefined(inputs, kwargs, rtol=1e-5):
    """torch.linalg.norm: a matrix norm over two dims (a 2-tuple dim, or a 2-D input
    with an ord and no dim), else a vector norm (the flattened input without a dim)."""
    x = inputs[0]
    if x.numel() == 0:
        return None
    rel, tiny = slack(x)
    ord, dim = kwargs.get("ord"), kwargs.get("dim")
    if (isinstance(dim, (tuple, list)) and len(dim) == 2) or (dim is None and ord is not None and x.dim() == 2):
        why = matrix_norm_reason(matrix_last_two(wide(x), dim if dim is not None else (-2, -1)), ord,
                                 rtol, eps_of(x), rel, tiny)
    else:
        why = vector_norm_reason(rows(wide(x), dims_of(dim, x.dim())), 2 if ord is None else ord, rel, tiny)
    return f"input 0: {why}" if why else None


def _cond_undefined(inputs, kwargs, rtol=1e-5):
    """cond = |A| |A^-1|: for p = 2/-2 the ratio of the extreme singular values (each
    must be simple); for the 1/inf norms, the kinks of both factors' norms."""
    a, p = inputs[0], kwargs.get("p")
    if a.numel() == 0 or p in ("fro", "nuc"):
        return None
    rel, tiny = slack(a)
    if p in (None, 2, -2):
        why = spectrum_reason(a, "svd", "max", rtol, eps_of(a)) or spectrum_reason(a, "svd", "min", rtol, eps_of(a))
        return f"input 0: {why}" if why else None
    w = wide(a)
    try:
        inverse = torch.linalg.inv(w)
    except RuntimeError:
        return None
    n = w.shape[-1]
    why = (matrix_norm_reason(w, p, rtol, eps_of(a), rel, tiny)
           or matrix_norm_reason(inverse, p, rtol, eps_of(a), rel, tiny,
                                 zero_scale=n * inverse.abs().amax((-2, -1), keepdim=True)))
    return f"A or its inverse: {why}" if why else None


# -- specs ------------------------------------------------------------------------------

MM_KW = dict(allow_nonfinite=False, rtol_scale=4, atol_scale=4, semantics=frozenset({"accumulates"}))
SOLVE_KW = dict(rtol_scale=64, atol_scale=64, **SOLVER)
# pseudo-inverses, ranks and condition numbers depend on small singular values
SVD_KW = dict(rtol_scale=256, atol_scale=256, **SOLVER)
FLOAT_COMPLEX = FLOAT + ("complex64", "complex128")

register(
    linalg("matmul", torch.matmul, matmul_shapes("matmul"), MATMUL,
           "matmul of 1-D..5-D operands with broadcast batch dims", input_dtypes=(None, None),
           method="matmul", out=True, grad=True, autocast=True, **MM_KW),
    linalg("mm", torch.mm, matmul_shapes("mm"), MATMUL,
           "2-D matrix product (mixed dtypes sometimes: pytorch#143948)",
           input_dtypes=(None, None), method="mm", out=True, grad=True, autocast=True,
           **dict(MM_KW, semantics=MM_KW["semantics"] | {"mixed_dtypes_sometimes"})),
    linalg("bmm", torch.bmm, matmul_shapes("bmm"), MATMUL, "batched matrix product",
           input_dtypes=(None, None), method="bmm", out=True, grad=True, autocast=True, **MM_KW),
    linalg("mv", torch.mv, matmul_shapes("mv"), MATMUL, "matrix-vector product",
           input_dtypes=(None, None), method="mv", out=True, grad=True, **MM_KW),
    linalg("dot", torch.dot, matmul_shapes("dot"), MATMUL, "inner product of 1-D tensors",
           input_dtypes=(None, None), method="dot", out=True, grad=True, **MM_KW),
    linalg("vdot", torch.vdot, matmul_shapes("dot"), MATMUL,
           "inner product conjugating the first operand", input_dtypes=(None, None),
           method="vdot", out=True, grad=True, **MM_KW),
    linalg("outer", torch.outer, matmul_shapes("outer"), expand("all"), "outer product",
           input_dtypes=(None, None), allow_nonfinite=False, method="outer", out=True, grad=True),
    linalg("addmm", lambda c, a, b, **kw: torch.addmm(c, a, b, **kw),
           _with_input("mm"), MATMUL, "beta*input + alpha*(a @ b), input broadcast",
           input_dtypes=(None, None, None), args=_beta_alpha, method="addmm", inplace="addmm_",
           out=True, grad=True, autocast=True, **MM_KW),
    linalg("addmv", lambda c, a, v, **kw: torch.addmv(c, a, v, **kw),
           _with_input("mv"), MATMUL, "beta*input + alpha*(a @ v)",
           input_dtypes=(None, None, None), args=_beta_alpha, method="addmv", inplace="addmv_",
           out=True, grad=True, **MM_KW),
    linalg("addr", lambda c, u, v, **kw: torch.addr(c, u, v, **kw),
           _with_input("outer"), MATMUL, "beta*input + alpha*outer(u, v)",
           input_dtypes=(None, None, None), args=_beta_alpha, method="addr", inplace="addr_",
           out=True, grad=True, **MM_KW),
    linalg("baddbmm", lambda c, a, b, **kw: torch.baddbmm(c, a, b, **kw),
           _with_input("bmm"), MATMUL, "beta*input + alpha*bmm(a, b)",
           input_dtypes=(None, None, None), args=_beta_alpha, method="baddbmm", inplace="baddbmm_",
           out=True, grad=True, autocast=True, **MM_KW),
    linalg("addbmm", lambda c, a, b, **kw: torch.addbmm(c, a, b, **kw),
           _with_input("addbmm"), MATMUL, "beta*input + alpha*sum of the batch of products",
           input_dtypes=(None, None, None), args=_beta_alpha, method="addbmm", inplace="addbmm_",
           out=True, grad=True, **MM_KW),
    linalg("trace", torch.trace, matrix_shapes(max_batch=0), MATMUL,
           "sum of the diagonal of a 2-D matrix", method="trace", grad=True),
    linalg("linalg.vecdot", lambda x, y, **kw: torch.linalg.vecdot(x, y, **kw), _vecdot_shapes,
           FLOAT_COMPLEX, "conjugated dot product along a dim (the last by default), broadcast",
           input_dtypes=(None, None), args=_vecdot_dim, out=True, grad=True, **MM_KW),
    linalg("kron", torch.kron, _kron_shapes, MATMUL + ("bool",), "Kronecker product of any ranks",
           input_dtypes=(None, None), allow_nonfinite=False, method="kron", out=True, grad=True),
    linalg("tensordot", lambda a, b, dims, **kw: torch.tensordot(a, b, dims, **kw), _tensordot_shapes,
           MATMUL, "contraction over trailing/leading dims (int or dim lists)",
           input_dtypes=(None, None), args=_tensordot_args, out=True, grad=True, **MM_KW),
    linalg("chain_matmul", lambda a, b, c, **kw: torch.chain_matmul(a, b, c, **kw),
           _chain_shapes(vector_ends=False), MATMUL, "product of three matrices (deprecated API)",
           input_dtypes=(None, None, None), out=True, grad=True, **MM_KW),
    linalg("linalg.multi_dot", lambda a, b, c, **kw: torch.linalg.multi_dot([a, b, c], **kw),
           _chain_shapes(vector_ends=True), MATMUL,
           "product of three operands in the cheapest order (1-D ends included)",
           input_dtypes=(None, None, None), out=True, grad=True, **MM_KW),
)

register(*(
    linalg(f"einsum.{kind}", (lambda eq: lambda *xs: torch.einsum(eq, *xs))(eq), _einsum_shapes(kind),
           MATMUL, f"einsum {eq!r}", input_dtypes=(None,) * (eq.split("->")[0].count(",") + 1),
           grad=True, **MM_KW)
    for kind, eq in (("bmm", "bij,bjk->bik"), ("outer", "i,j->ij"), ("trace", "ii->"),
                     ("diag", "...ii->...i"), ("contract", "ijk,jkl->il"),
                     ("attention", "bhqd,bhkd->bhqk"))
))

# The solves whose result X has B's shape and dtype declare B (input 1) an ``out=`` may
# be (``out_aliases``): ``solve_triangular(A, B, out=B)`` of a negative view of B gave -X
# on CUDA (pytorch#178379). With ``left=False`` the wrapper passes ``b.mT``: a result of
# b's shape then overlaps B transposed, which torch refuses on both sides alike.
register(
    linalg("linalg.solve", lambda a, b, left=True, **kw: torch.linalg.solve(a, b if left else b.mT, left=left, **kw),
           matmul_shapes("solve"), LAPACK,
           "solve A X = B (or X A = B) for well-conditioned A (batched, vector or matrix B)",
           input_dtypes=(None, None), input_values=("diag_dominant", None), args=_left_flag(1),
           out=True, out_aliases=(1,), grad=True, nan_propagates=(0,), **SOLVE_KW),
    linalg("linalg.solve_ex", lambda a, b, left=True, **kw: torch.linalg.solve_ex(a, b if left else b.mT, left=left, **kw),
           matmul_shapes("solve"), LAPACK, "solve with an info code",
           input_dtypes=(None, None), input_values=("diag_dominant", None),
           args=combine_args(_left_flag(1), _flag("check_errors")), out=True, nan_propagates=(0,), **SOLVE_KW),
    linalg("linalg.solve_triangular",
           lambda a, b, upper, left=True, **kw: torch.linalg.solve_triangular(a, b if left else b.mT, upper=upper, left=left, **kw),
           _triangular_solve_shapes, LAPACK,
           "solve a triangular system (the other triangle is ignored), left/right, unit diagonal",
           input_dtypes=(None, None), input_values=("diag_dominant", None), args=_tri_solve_args,
           out=True, out_aliases=(1,), grad=True, **SOLVE_KW),
    linalg("linalg.inv", torch.linalg.inv, _square(), LAPACK,
           "inverse of a well-conditioned matrix", input_values=("diag_dominant",),
           method="inverse", out=True, grad=True, nan_propagates=(0,), **SOLVE_KW),
    linalg("linalg.inv_ex", lambda a, **kw: torch.linalg.inv_ex(a, **kw), _square(), LAPACK,
           "inverse with an info code", input_values=("diag_dominant",), args=_flag("check_errors"),
           out=True, nan_propagates=(0,), **SOLVE_KW),
    linalg("linalg.det", torch.linalg.det, _square(), LAPACK,
           "determinant (pytorch#146279)", input_values=("diag_dominant",),
           method="det", out=True, grad=True, nan_propagates=(0,), **SOLVE_KW),
    linalg("linalg.slogdet", torch.linalg.slogdet, _square(), LAPACK,
           "sign and log|det|", input_values=("diag_dominant",),
           method="slogdet", out=True, grad=True, nan_propagates=(1,), **SOLVE_KW),
    linalg("linalg.cholesky", lambda a, upper=False, **kw: torch.linalg.cholesky(a, upper=upper, **kw),
           _square(), LAPACK, "Cholesky factor of an SPD matrix (empty included)",
           input_values=("spd",), args=_flag("upper"), method="cholesky", out=True, grad=True,
           rtol_scale=32, atol_scale=32, **SOLVER),
    linalg("linalg.cholesky_ex", torch.linalg.cholesky_ex, _square(), LAPACK,
           "Cholesky factor and info code (empty inputs: pytorch#147159)",
           input_values=("spd",), args=combine_args(_flag("upper"), _flag("check_errors")), out=True,
           rtol_scale=32, atol_scale=32, **SOLVER),
    linalg("cholesky_solve", lambda b, l, upper=False, **kw: torch.cholesky_solve(b, l, upper, **kw),
           _system_shapes(rhs_first=True), LAPACK,
           "solve with a Cholesky factor (the other triangle is ignored)",
           input_dtypes=(None, None), input_values=(None, "cholesky_factor"), args=_flag("upper"),
           method="cholesky_solve", out=True, grad=True, **SOLVE_KW),
    linalg("cholesky_inverse", lambda l, upper=False, **kw: torch.cholesky_inverse(l, upper, **kw),
           _square(), LAPACK, "inverse from a Cholesky factor (batched)",
           input_values=("cholesky_factor",), args=_flag("upper"), method="cholesky_inverse",
           out=True, grad=True, **SOLVE_KW),
    linalg("linalg.lu_factor", torch.linalg.lu_factor, matrix_shapes(), LAPACK,
           "compact LU and pivots, compared as P L U (non-contiguous, batched: pytorch#146279, #146753)",
           input_values=("diag_dominant",), canonicalise=_lu_factor_canonical, out=True, **SOLVE_KW),
    linalg("linalg.lu_factor_batched_large", torch.linalg.lu_factor, _batched_large_squares, ("float32",),
           "compact LU of a batch of 2-3 matrices of 128 or 256 rows (blocked paths: pytorch#146753 failed on "
           "2 x 256 x 256 where small sizes passed)",
           input_values=("diag_dominant",), canonicalise=_lu_factor_canonical, out=True, **SOLVE_KW),
    linalg("linalg.lu_factor_ex", lambda a, **kw: torch.linalg.lu_factor_ex(a, **kw), matrix_shapes(), LAPACK,
           "compact LU, pivots and info, compared as P L U and info",
           input_values=("diag_dominant",), args=_flag("check_errors"), canonicalise=_lu_factor_canonical,
           out=True, **SOLVE_KW),
    linalg("linalg.lu", torch.linalg.lu, matrix_shapes(), LAPACK,
           "P, L, U of a rectangular matrix, compared as P L U and the factors' structure",
           input_values=("diag_dominant",), canonicalise=_lu_canonical, out=True, **SOLVE_KW),
    linalg("linalg.lu_solve", _lu_then(_lu_solve), _system_shapes(), LAPACK,
           "solve from lu_factor's output, left/right, adjoint",
           input_dtypes=(None, None), input_values=("diag_dominant", None), args=_lu_solve_args,
           out=True, out_aliases=(1,), grad=True, **SOLVE_KW),
    linalg("linalg.ldl_factor",
           lambda a, **kw: torch.linalg.ldl_factor(a, hermitian=a.is_complex(), **kw),
           _square(), LAPACK, "LDL^T factors (complex as Hermitian), compared as the inverse they give",
           input_values=("spd",), canonicalise=_ldl_canonical, out=True, **SOLVE_KW),
    linalg("linalg.ldl_factor_ex",
           lambda a, **kw: torch.linalg.ldl_factor_ex(a, hermitian=a.is_complex(), **kw),
           _square(), LAPACK, "LDL^T factors and info, compared as the inverse they give",
           input_values=("spd",), args=_flag("check_errors"), canonicalise=_ldl_canonical, out=True, **SOLVE_KW),
    linalg("linalg.ldl_solve", _ldl_solve, _system_shapes(), LAPACK,
           "solve from ldl_factor's output (symmetric / Hermitian positive definite A)",
           input_dtypes=(None, None), input_values=("spd", None), out=True, out_aliases=(1,), **SOLVE_KW),
    linalg("linalg.qr", lambda a, mode="reduced", **kw: torch.linalg.qr(a, mode=mode, **kw), matrix_shapes(),
           LAPACK, "QR, compared as Q@R (R^H R for mode r), Q^H Q and |diag R| (signs are not unique)",
           args=_flag("mode", ("reduced", "complete", "r")), canonicalise=_qr_canonical,
           out=True, **SOLVE_KW),
    linalg("linalg.svd", lambda a, full_matrices=True, **kw: torch.linalg.svd(a, full_matrices, **kw),
           matrix_shapes(), LAPACK, "SVD, compared as U diag(S) Vh, S and the orthonormality of U, Vh",
           args=_flag("full_matrices"), canonicalise=_svd_canonical, out=True, **SOLVE_KW),
    linalg("linalg.svdvals", torch.linalg.svdvals, matrix_shapes(), LAPACK, "singular values",
           out=True, grad=True, grad_undefined=repeated_spectrum("svd"), **SOLVE_KW),
    linalg("linalg.eigh", lambda a, UPLO="L", **kw: torch.linalg.eigh(a, UPLO=UPLO, **kw),
           _square(), LAPACK, "Hermitian eigendecomposition, eigenvalues compared",
           args=_flag("UPLO", ("L", "U")), canonicalise=_eigh_values, out=True, **SOLVE_KW),
    linalg("linalg.eigvalsh", lambda a, UPLO="L", **kw: torch.linalg.eigvalsh(a, UPLO=UPLO, **kw),
           _square(), LAPACK, "eigenvalues of a Hermitian matrix",
           args=_flag("UPLO", ("L", "U")), out=True, grad=True, grad_undefined=repeated_spectrum("eigh"),
           **SOLVE_KW),
    linalg("linalg.eig", torch.linalg.eig, _square(), LAPACK,
           "general eigendecomposition, compared as eigenvalue power sums, |AV - V diag(L)| and |v|",
           canonicalise=_eig_canonical, out=True, **SOLVE_KW),
    linalg("linalg.eigvals", torch.linalg.eigvals, _square(), LAPACK,
           "general eigenvalues (any order), compared as power sums", canonicalise=_eigvals_canonical,
           out=True, **SOLVE_KW),
    linalg("linalg.lstsq", lambda a, b, **kw: torch.linalg.lstsq(a, b, **kw), _lstsq_shapes, LAPACK,
           "least-squares / minimum-norm solution with each CPU driver (solution compared)",
           input_dtypes=(None, None), input_values=("diag_dominant", None),
           args=combine_args(_lstsq_args, _lstsq_rcond),
           canonicalise=_lstsq_canonical, **SVD_KW),
    linalg("linalg.pinv", lambda a, **kw: torch.linalg.pinv(a, **kw), matrix_shapes(), ("float32", "float64"),
           "Moore-Penrose pseudo-inverse (real only: torch 2.13's complex pinv is wrong under a "
           "TorchDispatchMode, which the fault target is)", input_values=("diag_dominant",), args=_tolerances,
           out=True, grad=True, grad_undefined=repeated_spectrum("svd", which="zero"), **SVD_KW),
    linalg("linalg.pinv_hermitian", lambda a, **kw: torch.linalg.pinv(a, hermitian=True, **kw),
           _square(), LAPACK, "pseudo-inverse of a Hermitian matrix (eigh path)",
           input_values=("spd",), args=_tolerances, out=True, grad=True,
           grad_undefined=repeated_spectrum("eigh", which="zero"),
           **SVD_KW),
    linalg("linalg.matrix_rank", lambda a, **kw: torch.linalg.matrix_rank(a, **kw), matrix_shapes(),
           LAPACK, "numerical rank (default tolerances) of a random matrix (no out=: torch 2.13 "
           "leaves it unwritten under a TorchDispatchMode)", input_values=("diag_dominant",), args=_tolerances,
           **SVD_KW),
    linalg("linalg.matrix_rank_hermitian",
           lambda a, **kw: torch.linalg.matrix_rank(a, hermitian=True, **kw), _square(), LAPACK,
           "numerical rank of a Hermitian matrix (eigvalsh path)", input_values=("spd",), args=_tolerances,
           **SVD_KW),
    linalg("linalg.cond", lambda a, p=None, **kw: torch.linalg.cond(a, p, **kw), _square(), LAPACK,
           "condition number in the 2, nuclear, Frobenius, 1 and inf norms",
           input_values=("diag_dominant",), args=_cond_p, out=True, grad=True, grad_undefined=_cond_undefined,
           **SVD_KW),
    linalg("linalg.matrix_power", lambda a, n, **kw: torch.linalg.matrix_power(a, n, **kw),
           _square(), FLOAT_COMPLEX + ("int32", "int64"),
           "integer matrix power (negative: of the inverse)", input_values=("diag_dominant",),
           args=_matrix_power_n, method="matrix_power", out=True, grad=True, **SOLVE_KW),
    linalg("linalg.matrix_exp", torch.linalg.matrix_exp, _square(),
           FLOAT_COMPLEX, "matrix exponential",
           input_values=("uniform",), method="matrix_exp", grad=True, nan_propagates=(0,), **SOLVE_KW),
    linalg("linalg.householder_product", lambda a, tau, **kw: torch.linalg.householder_product(a, tau, **kw),
           _householder_shapes, LAPACK, "product of Householder reflectors (the Q of geqrf)",
           input_dtypes=(None, None), input_values=("uniform", "uniform"), out=True, grad=True,
           **SOLVE_KW),
    linalg("linalg.tensorinv", lambda a, shape, ind, **kw: torch.linalg.tensorinv(a.reshape(shape), ind, **kw),
           _square(max_batch=0, min_side=1), LAPACK,
           "inverse of a well-conditioned matrix viewed as a tensor (ind leading dims)",
           input_values=("diag_dominant",), args=_tensorinv_args, out=True, grad=True, **SOLVE_KW),
    linalg("linalg.tensorsolve",
           _tensorsolve,
           lambda draw, budget: (lambda n: ((n, n), (n,)))(max(1, draw_side(draw, budget))), LAPACK,
           "tensor equation solve (A reshaped to B.shape + X.shape)",
           input_dtypes=(None, None), input_values=("diag_dominant", None), args=_tensorsolve_args,
           out=True, grad=True, **SOLVE_KW),
)

register(
    linalg("linalg.vector_norm", lambda x, ord=2, **kw: torch.linalg.vector_norm(x, ord, **kw),
           any_shape(1), FC, "vector p-norm over one, several or all dims",
           args=combine_args(_vector_ord, dim_arg(allow_list=True), _norm_dtype), out=True, grad=True,
           grad_undefined=vector_norm_kinks(), rtol_scale=16, atol_scale=16),
    linalg("linalg.matrix_norm", lambda a, ord="fro", **kw: torch.linalg.matrix_norm(a, ord, **kw),
           matrix_shapes(max_batch=2), FC, "Frobenius, nuclear, 1, 2 and inf matrix norms",
           args=combine_args(_matrix_ord, _matrix_dims, _norm_dtype), allow_nonfinite=False, out=True, grad=True,
           grad_undefined=_matrix_norm_undefined,
           rtol_scale=16, atol_scale=16),
    linalg("linalg.norm", lambda x, **kw: torch.linalg.norm(x, **kw), any_shape(1, max_rank=4), FC,
           "vector or matrix norm chosen by ord and dim", args=combine_args(_norm_args, _norm_dtype),
           allow_nonfinite=False,
           out=True, grad=True, grad_undefined=_norm_undefined, rtol_scale=16, atol_scale=16),
    linalg("triu", lambda a, diagonal=0, **kw: torch.triu(a, diagonal, **kw), matrix_shapes(max_batch=6),
           expand("all"), "upper triangle of 2-D..8-D inputs (>3-D: pytorch#144545)",
           args=_diagonal, min_rank=2, method="triu", inplace="triu_", out=True, grad=True),
    linalg("tril", lambda a, diagonal=0, **kw: torch.tril(a, diagonal, **kw), matrix_shapes(max_batch=6),
           expand("all"), "lower triangle of 2-D..8-D inputs (>3-D: pytorch#144545)",
           args=_diagonal, min_rank=2, method="tril", inplace="tril_", out=True, grad=True),
    linalg("linalg.diagonal", lambda a, **kw: torch.linalg.diagonal(a, **kw), _diagonal_shapes,
           expand("all"), "a diagonal between any two dims, with an offset (a view)",
           args=_diagonal_args, min_rank=2, method="diagonal", grad=True),
    linalg("linalg.cross", lambda x, y, dim=-1, **kw: torch.linalg.cross(x, y, dim=dim, **kw), _cross_shapes,
           FLOAT_COMPLEX + expand("signed") + ("uint8",),
           "3-vector cross product along a dim, broadcast", input_dtypes=(None, None),
           args=_cross_args, method="cross", out=True, grad=True),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py).
declare_grows({
    "mm": (grows("rows", (0, 0), sliced=True), grows("inner", (0, 1), (1, 0)), grows("cols", (1, 1))),
    "bmm": (grows("batch", (0, 0), (1, 0), sliced=True), grows("rows", (0, 1)), grows("inner", (0, 2), (1, 1)),
            grows("cols", (1, 2))),
    "matmul": (grows("batch", (0, -3), (1, -3)), grows("batch", (1, -3), (0, -3)), grows("rows", (0, -2))),
    "addmm": (grows("rows", (1, 0), (0, -2)), grows("inner", (1, 1), (2, 0)), grows("cols", (2, 1), (0, -1))),
    "baddbmm": (grows("batch", (1, 0), (2, 0), (0, -3)), grows("inner", (1, 2), (2, 1)),
                grows("rows", (1, 1), (0, -2))),
    "mv": (grows("rows", (0, 0)), grows("inner", (0, 1), (1, 0))),
    "dot": (grows("inner", (0, 0), (1, 0)),),
})
