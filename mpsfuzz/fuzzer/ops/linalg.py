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
from ..catalogue import (OpSpec, ShapeBudget, _fit, _side, any_shape, broadcast_shapes,
                         broadcastable_to, combine_args, dim_arg, expand, first_dtype, matmul_shapes,
                         matrix_shapes, register)

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

def _with_input(kind: str):
    """addmm/addmv/addr/baddbmm: (input broadcastable to the product, operand, operand)."""
    inner = matmul_shapes(kind)

    def build(draw, budget: ShapeBudget):
        a, b = inner(draw, budget)
        if kind == "mm":
            out = (a[0], b[1])
        elif kind == "mv":
            out = (a[0],)
        elif kind == "outer":
            out = (a[0], b[0])
        else:  # bmm
            out = (a[0], a[1], b[2])
        return (broadcastable_to(draw, out), a, b)
    return build


def _cross_shapes(draw, budget: ShapeBudget):
    """Two same-rank inputs that broadcast, with size 3 along the cross-product dim
    (which the args builder finds again as the dim whose sides are both 3)."""
    rank = draw(st.integers(max(1, budget.min_rank), max(1, min(5, budget.max_rank))))
    pos = draw(st.integers(0, rank - 1))
    full = [_side(draw, budget) for _ in range(rank)]
    full[pos] = 1
    full = list(_fit(full, ShapeBudget(max_numel=max(1, budget.max_numel // 3))))
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
    batch = [_side(draw, budget) for _ in range(draw(st.integers(0, 2)))]
    n, k = _side(draw, budget), _side(draw, budget)
    a = _fit(batch + [n, n], budget)
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


def _matrix_power_n(draw, shapes, dtypes):
    # negative powers invert, which LAPACK does in single/double precision only
    low = -2 if first_dtype(dtypes) in LAPACK else 0
    return {"n": draw(st.integers(low, 4))}


# -- canonicalisers ---------------------------------------------------------------------

def _qr_canonical(inputs, outputs):
    """QR is unique only up to the phases of R's diagonal (and beyond rank): compare the
    reconstruction Q@R, the orthonormality Q^H Q and |diag(R)|."""
    q, r = outputs
    return (q @ r, q.mH @ q, r.diagonal(dim1=-2, dim2=-1).abs())


def _eigenvalues(inputs, outputs):
    """Eigenvectors are unique only up to phase (and within repeated eigenvalues)."""
    return outputs.eigenvalues


# -- specs ------------------------------------------------------------------------------

MM_KW = dict(allow_nonfinite=False, rtol_scale=4, atol_scale=4)

register(
    linalg("matmul", torch.matmul, matmul_shapes("matmul"), MATMUL,
           "matmul of 1-D..5-D operands with broadcast batch dims", input_dtypes=(None, None),
           **MM_KW),
    linalg("mm", torch.mm, matmul_shapes("mm"), MATMUL,
           "2-D matrix product (mixed dtypes sometimes: pytorch#143948)",
           input_dtypes=(None, None), semantics=frozenset({"mixed_dtypes_sometimes"}), **MM_KW),
    linalg("bmm", torch.bmm, matmul_shapes("bmm"), MATMUL, "batched matrix product",
           input_dtypes=(None, None), **MM_KW),
    linalg("mv", torch.mv, matmul_shapes("mv"), MATMUL, "matrix-vector product",
           input_dtypes=(None, None), **MM_KW),
    linalg("dot", torch.dot, matmul_shapes("dot"), MATMUL, "inner product of 1-D tensors",
           input_dtypes=(None, None), **MM_KW),
    linalg("vdot", torch.vdot, matmul_shapes("dot"), MATMUL,
           "inner product conjugating the first operand", input_dtypes=(None, None), **MM_KW),
    linalg("outer", torch.outer, matmul_shapes("outer"), expand("all"), "outer product",
           input_dtypes=(None, None), allow_nonfinite=False),
    linalg("addmm", lambda c, a, b, beta=1, alpha=1: torch.addmm(c, a, b, beta=beta, alpha=alpha),
           _with_input("mm"), MATMUL, "beta*input + alpha*(a @ b), input broadcast",
           input_dtypes=(None, None, None), args=_beta_alpha, **MM_KW),
    linalg("addmv", lambda c, a, v, beta=1, alpha=1: torch.addmv(c, a, v, beta=beta, alpha=alpha),
           _with_input("mv"), MATMUL, "beta*input + alpha*(a @ v)",
           input_dtypes=(None, None, None), args=_beta_alpha, **MM_KW),
    linalg("addr", lambda c, u, v, beta=1, alpha=1: torch.addr(c, u, v, beta=beta, alpha=alpha),
           _with_input("outer"), MATMUL, "beta*input + alpha*outer(u, v)",
           input_dtypes=(None, None, None), args=_beta_alpha, **MM_KW),
    linalg("baddbmm", lambda c, a, b, beta=1, alpha=1: torch.baddbmm(c, a, b, beta=beta, alpha=alpha),
           _with_input("bmm"), MATMUL, "beta*input + alpha*bmm(a, b)",
           input_dtypes=(None, None, None), args=_beta_alpha, **MM_KW),
    linalg("trace", torch.trace, matrix_shapes(max_batch=0), MATMUL, "sum of the diagonal of a 2-D matrix"),
    linalg("linalg.vecdot", lambda x, y: torch.linalg.vecdot(x, y), _vecdot_shapes,
           FLOAT + ("complex64", "complex128"), "conjugated dot product along the last dim, broadcast",
           input_dtypes=(None, None), **MM_KW),
)

register(
    linalg("linalg.solve", torch.linalg.solve, matmul_shapes("solve"), LAPACK,
           "solve A X = B for well-conditioned A (batched, vector or matrix B)",
           input_dtypes=(None, None), input_values=("diag_dominant", None),
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.solve_triangular",
           lambda a, b, upper: torch.linalg.solve_triangular(a, b, upper=upper),
           _triangular_solve_shapes, LAPACK, "solve a triangular system (the other triangle is ignored)",
           input_dtypes=(None, None), input_values=("diag_dominant", None), args=_flag("upper"),
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.inv", torch.linalg.inv, matrix_shapes(square=True), LAPACK,
           "inverse of a well-conditioned matrix", input_values=("diag_dominant",),
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.inv_ex", torch.linalg.inv_ex, matrix_shapes(square=True), LAPACK,
           "inverse with an info code", input_values=("diag_dominant",),
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.det", torch.linalg.det, matrix_shapes(square=True), LAPACK,
           "determinant (pytorch#146279)", input_values=("diag_dominant",),
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.slogdet", torch.linalg.slogdet, matrix_shapes(square=True), LAPACK,
           "sign and log|det|", input_values=("diag_dominant",),
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.cholesky", lambda a, upper=False: torch.linalg.cholesky(a, upper=upper),
           matrix_shapes(square=True), LAPACK, "Cholesky factor of an SPD matrix (empty included)",
           input_values=("spd",), args=_flag("upper"), rtol_scale=32, atol_scale=32, **SOLVER),
    linalg("linalg.cholesky_ex", torch.linalg.cholesky_ex, matrix_shapes(square=True), LAPACK,
           "Cholesky factor and info code (empty inputs: pytorch#147159)",
           input_values=("spd",), rtol_scale=32, atol_scale=32, **SOLVER),
    linalg("linalg.lu_factor", torch.linalg.lu_factor, matrix_shapes(square=True), LAPACK,
           "compact LU and pivots (non-contiguous, batched: pytorch#146279, #146753)",
           input_values=("diag_dominant",), rtol_scale=64, atol_scale=64, **SOLVER),
    # diag_dominant on a non-square matrix is plain normal values: no ties for pivoting
    linalg("linalg.lu", torch.linalg.lu, matrix_shapes(), LAPACK, "P, L, U of a rectangular matrix",
           input_values=("diag_dominant",), rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.qr", lambda a, mode="reduced": torch.linalg.qr(a, mode=mode), matrix_shapes(),
           LAPACK, "QR, compared as Q@R, Q^H Q and |diag R| (signs are not unique)",
           args=_flag("mode", ("reduced", "complete")), canonicalise=_qr_canonical,
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.eigh", lambda a, UPLO="L": torch.linalg.eigh(a, UPLO=UPLO),
           matrix_shapes(square=True), LAPACK, "Hermitian eigendecomposition, eigenvalues compared",
           args=_flag("UPLO", ("L", "U")), canonicalise=_eigenvalues,
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.eigvalsh", lambda a, UPLO="L": torch.linalg.eigvalsh(a, UPLO=UPLO),
           matrix_shapes(square=True), LAPACK, "eigenvalues of a Hermitian matrix",
           args=_flag("UPLO", ("L", "U")), rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.svdvals", torch.linalg.svdvals, matrix_shapes(), LAPACK, "singular values",
           rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.matrix_power", lambda a, n: torch.linalg.matrix_power(a, n),
           matrix_shapes(square=True), FLOAT + ("complex64", "complex128", "int32", "int64"),
           "integer matrix power (negative: of the inverse)", input_values=("diag_dominant",),
           args=_matrix_power_n, rtol_scale=64, atol_scale=64, **SOLVER),
    linalg("linalg.matrix_exp", torch.linalg.matrix_exp, matrix_shapes(square=True),
           FLOAT + ("complex64", "complex128"), "matrix exponential",
           input_values=("uniform",), rtol_scale=64, atol_scale=64, **SOLVER),
)

register(
    linalg("linalg.vector_norm", lambda x, ord=2, **kw: torch.linalg.vector_norm(x, ord, **kw),
           any_shape(1), FC, "vector p-norm over one, several or all dims",
           args=combine_args(_vector_ord, dim_arg(allow_list=True)), rtol_scale=16, atol_scale=16),
    linalg("linalg.matrix_norm", lambda a, ord="fro", **kw: torch.linalg.matrix_norm(a, ord, **kw),
           matrix_shapes(max_batch=2), FC, "Frobenius, nuclear, 1, 2 and inf matrix norms",
           args=_matrix_ord, allow_nonfinite=False, rtol_scale=16, atol_scale=16),
    linalg("triu", lambda a, diagonal=0: torch.triu(a, diagonal), matrix_shapes(max_batch=6),
           expand("all"), "upper triangle of 2-D..8-D inputs (>3-D: pytorch#144545)",
           args=_diagonal, min_rank=2),
    linalg("tril", lambda a, diagonal=0: torch.tril(a, diagonal), matrix_shapes(max_batch=6),
           expand("all"), "lower triangle of 2-D..8-D inputs (>3-D: pytorch#144545)",
           args=_diagonal, min_rank=2),
    linalg("linalg.cross", lambda x, y, dim=-1: torch.linalg.cross(x, y, dim=dim), _cross_shapes,
           FLOAT + ("complex64", "complex128") + expand("signed") + ("uint8",),
           "3-vector cross product along a dim, broadcast", input_dtypes=(None, None),
           args=_cross_args),
)
