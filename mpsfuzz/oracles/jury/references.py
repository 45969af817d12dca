"""What an independent reference is, for the jury's tables (formulas, numpy, scalar).

A *reference* computes an op's result without the kernel eager CPU ran for it: from the
documented formula (``formulas/``), with numpy (``numpy_refs.py``) or element by element
with Python's ``math``/``cmath``/mpmath (``scalar_refs.py``). Tables map a catalogue op
name (``OpSpec.name``) to one.

The contract of a tensor reference ``ref(inputs, kwargs) -> outputs``:

- ``inputs``: the case's tensors on the CPU, dense, each in a storage of its own;
  floating ones in float64, complex ones in complex128, integer and bool ones in their
  own dtype. Floating inputs may require grad: a reference written in torch's
  elementary ops (arithmetic, indexing, sums) gives the jury gradients by autograd.
- ``kwargs``: the case's keyword arguments (a dtype among them widened to float64).
- returns: what ``spec.fn(*inputs, **kwargs)`` returns, the same structure (a tensor or
  a tuple of tensors), floating leaves in float64/complex128 and integer leaves holding
  the exact values. The jury rounds each leaf to the dtype of the backends' results.
- raises :class:`NotApplicable` where it does not cover the call (an argument or mode
  it does not implement); the juror then abstains. Any other exception is a bug of the
  reference: the juror abstains too, and says so.

A reference must not call the op's own torch function or kernel, nor a composite that
reaches it: it is a witness only where it shares no kernel with eager CPU's call
(``tests/test_formula_references.py`` checks this with a dispatch mode).
"""
from __future__ import annotations

from typing import Any, Callable


class NotApplicable(Exception):
    """The reference does not cover this call (an argument, mode or dtype it lacks)."""


# (inputs, kwargs) -> outputs, as described above.
Reference = Callable[[list, dict], Any]


# torch.special's orthogonal polynomials (each also with a scalar n: ``<name>_scalar_n``),
# which the numpy and the exact scalar references both compute.
POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
