"""Matrix and vector products as broadcast multiplies and sums (the definitions in the
torch.mm/matmul/addmm/... docs): (A B)[i, j] = sum_k A[i, k] B[k, j]; no BLAS kernel
(mm, bmm, mv, dot, addmm...) runs, forward or backward.

The ``add*`` forms return beta * input + alpha * product, with the input broadcast to the
product's shape; "if beta is 0, then input will be ignored, and nan and inf in it will
not be propagated" (their docs), so beta = 0 leaves the input out altogether.
Floating and complex operands only (vdot conjugates its first); integer products would
be exact in int64 but wrap in their own dtype: not applicable.
"""
from __future__ import annotations

import torch

from ..references import NotApplicable, Reference


def numeric_inputs(inputs, count: int) -> list[torch.Tensor]:
    chosen = list(inputs[:count])
    if len(chosen) != count or not all(isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
                                       for t in chosen):
        raise NotApplicable("products of floating or complex operands only")
    return chosen


def matrix_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(..., n, k) x (..., k, m) -> (..., n, m), batch dims broadcast."""
    if a.shape[-1] != b.shape[-2]:
        raise NotApplicable("inner dims differ")
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(dim=-2)


def general_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul's rules: a 1-D first operand is a row, a 1-D second a column, and
    the dim they add is removed again; two 1-D operands give their dot product."""
    if a.dim() == 0 or b.dim() == 0:
        raise NotApplicable("matmul of a 0-d operand")
    if a.dim() == 1 and b.dim() == 1:
        return dot_product(a, b)
    if a.dim() == 1:
        return matrix_product(a.unsqueeze(0), b).squeeze(-2)
    if b.dim() == 1:
        return matrix_product(a, b.unsqueeze(-1)).squeeze(-1)
    return matrix_product(a, b)


def dot_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.shape != b.shape or a.dim() != 1:
        raise NotApplicable("dot takes two 1-D tensors of one length")
    return (a * b).sum()


def scaled_sum(c: torch.Tensor, product: torch.Tensor, kwargs: dict) -> torch.Tensor:
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    scaled = alpha * product
    if beta == 0:
        return scaled
    return beta * c.expand(product.shape) + scaled


def two(fn):
    def reference(inputs, kwargs):
        a, b = numeric_inputs(inputs, 2)
        return fn(a, b)
    return reference


def with_input(fn):
    def reference(inputs, kwargs):
        c, a, b = numeric_inputs(inputs, 3)
        return scaled_sum(c, fn(a, b), kwargs)
    return reference


def mm(a, b):
    if a.dim() != 2 or b.dim() != 2:
        raise NotApplicable("mm takes 2-D operands")
    return matrix_product(a, b)


def bmm(a, b):
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
        raise NotApplicable("bmm takes 3-D operands of one batch")
    return matrix_product(a, b)


def mv(a, v):
    if a.dim() != 2 or v.dim() != 1:
        raise NotApplicable("mv takes a matrix and a vector")
    return matrix_product(a, v.unsqueeze(-1)).squeeze(-1)


def outer(u, v):
    if u.dim() != 1 or v.dim() != 1:
        raise NotApplicable("outer takes two vectors")
    return u.unsqueeze(-1) * v.unsqueeze(0)


def vdot(a, b):
    return dot_product(a.conj() if a.is_complex() else a, b)


def batch_summed(a, b):
    """addbmm's product: the sum over the batch of a[i] @ b[i]."""
    return bmm(a, b).sum(dim=0)


def linear_reference(inputs, kwargs):
    """x W^T + b: y[..., o] = sum_i x[..., i] W[o, i] (+ b[o])."""
    x, weight, bias = numeric_inputs(inputs, 3)
    y = (x.unsqueeze(-2) * weight).sum(dim=-1)
    return y + bias if kwargs.get("bias", True) else y


def bilinear_reference(inputs, kwargs):
    """x1^T A x2 + b: y[..., o] = sum_ij x1[..., i] A[o, i, j] x2[..., j] (+ b[o])."""
    x1, x2, weight, bias = numeric_inputs(inputs, 4)
    left = (x1.unsqueeze(-2).unsqueeze(-1) * weight).sum(dim=-2)      # (..., out, in2)
    y = (left * x2.unsqueeze(-2)).sum(dim=-1)
    return y + bias if kwargs.get("bias", True) else y


FORMULAS: dict[str, Reference] = {
    "mm": two(mm),
    "bmm": two(bmm),
    "matmul": two(general_product),
    "mv": two(mv),
    "dot": two(dot_product),
    "vdot": two(vdot),
    "outer": two(outer),
    "addmm": with_input(mm),
    "addmv": with_input(mv),
    "addr": with_input(outer),
    "baddbmm": with_input(bmm),
    "addbmm": with_input(batch_summed),
    "linear": linear_reference,
    "bilinear": bilinear_reference,
}
