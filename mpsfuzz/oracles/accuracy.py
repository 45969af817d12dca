"""How far a result may legitimately be from float64: the bounds the arbiter uses.

Two effects make a correct kernel's result differ from the exact one by more than a
rounding of the output:

- **Accumulation in low precision.** A kernel that sums ``n`` terms in float16 or
  bfloat16 (or adds them with atomics, as many backward kernels do) may be off by up to
  about ``n`` units of roundoff of the *terms' magnitude*, not of the result's: summing
  [1000, -1000, 0.5] in bfloat16 may legitimately give 0. The bound is therefore
  ``atol + u * (2 + n) * S`` per element, with ``u`` the output dtype's unit roundoff,
  ``n`` the number of summands and ``S`` the sum of the terms' magnitudes, estimated by
  running the op in float64 on the inputs' absolute values (exact for sums, matrix
  products, convolutions, scatter-adds; for other ops the result's own magnitude is
  the floor). Campaign cases are small and minimal cases smaller, so the bound stays
  tight enough that a wrong element (an error the size of the result) is still seen.
- **Overflow of intermediate values.** When the inputs hold non-finite values or
  extremes (a dtype's max, lowest, or values whose squares overflow), where an
  intermediate overflows depends on the order of evaluation: both sides may return inf
  or NaN where float64 is finite, or one side may. That is not a bug. What still is: a
  device that returns a *finite* wrong value where float64 and CPU agree, one that
  returns a finite value where both say inf, or one that drops a NaN that both keep.
"""
from __future__ import annotations

import math

import torch

from ..generation.recipes import NONFINITE_SPECIALS

# Finite specials whose arithmetic (squares, sums, products) overflows the dtype.
OVERFLOWING_SPECIALS = ("max", "lowest", "big")
LOW_PRECISION = (torch.float16, torch.bfloat16, torch.complex32)


def overflow_possible(case) -> bool:
    """Whether the case's inputs hold values whose arithmetic may overflow or go NaN."""
    names = set(NONFINITE_SPECIALS) | set(OVERFLOWING_SPECIALS)
    return any(name in names for r in case.inputs for _, name in r.values.specials)


def unit_roundoff(dtype: torch.dtype) -> float:
    real = {torch.complex32: torch.float16, torch.complex64: torch.float32,
            torch.complex128: torch.float64}.get(dtype, dtype)
    return float(torch.finfo(real).eps) / 2


def summands(input_shapes, output_numel: int) -> int:
    """An estimate of how many terms feed one output element: the larger of (elements of
    the largest input per output element) and the longest dim of any input (the inner
    dim of a matrix product, a reduced dim). Exact for full and per-dim reductions and
    matrix-vector products; within a small factor for matrix products and convolutions."""
    numels = [math.prod(s) for s in input_shapes] or [1]
    per_output = -(-max(numels) // max(1, output_numel))
    longest = max((max(s) for s in input_shapes if s), default=1)
    return max(1, per_output, longest)


def accumulation_bound(truth: torch.Tensor, magnitude: torch.Tensor | None, n: int, dtype: torch.dtype,
                       atol: float) -> torch.Tensor:
    """Per-element allowed |result - truth| for a result of ``dtype`` (flat, float64)."""
    scale = truth.abs()
    if magnitude is not None and magnitude.shape == truth.shape:
        scale = torch.maximum(scale, magnitude.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0))
    return atol + unit_roundoff(dtype) * (2 + n) * scale.nan_to_num(0.0, posinf=0.0, neginf=0.0)
