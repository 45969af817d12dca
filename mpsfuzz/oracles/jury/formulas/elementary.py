"""Elementary functions for the formula references, each built from kernels chosen so that
a reference shares none with eager CPU's call of the op it recomputes.

Several of torch's nn functions are composites of elementary ops themselves (``l1_loss``
is ``(x - y).abs()``, ``normalize`` clamps a ``linalg.vector_norm`` with ``clamp_min``,
``lp_pool`` raises to a ``pow`` and takes ``sign * relu(abs)``), so a reference that
used ``abs``, ``clamp``, ``where`` or ``pow`` would run those very kernels, forward and
backward. The functions here reach the same values by other kernels (``tests/
test_formula_references.py`` records both calls and checks that they share none that
computes anything):

- ``|x|`` is ``x * sign(x)``: its gradient ``sign(x)`` is abs's subgradient, 0 at 0;
- ``max(x, 0)`` is ``relu``; ``max(a, b)`` is ``a + relu(b - a)``;
- a root or power of a value that may be 0 goes through ``exp``/``log`` (or ``sqrt``)
  with the zeros held apart by a comparison (``le``) turned into a 0/1 factor, so that
  the value and the gradient at 0 are both finite, as torch's are (no ``where``:
  composites use it in their backward);
- natural logarithms and exponentials have a second spelling through base 2 for the
  composites that run ``log``/``exp`` themselves;
- a log-softmax is written out (``exp``, ``sum``, ``log`` of values shifted by the
  row's maximum).
"""
from __future__ import annotations

import math

import torch

LN2 = math.log(2.0)
LOG2E = 1.0 / LN2


def magnitude(x: torch.Tensor) -> torch.Tensor:
    """|x| as x * sign(x) (sign's own gradient is 0, so d|x|/dx = sign(x))."""
    return x * torch.sign(x)


def larger(a: torch.Tensor, b) -> torch.Tensor:
    """max(a, b) = a + max(b - a, 0) (``b`` a tensor or a number): exactly a wherever
    a >= b, the case that matters (a norm above its eps)."""
    return a + torch.relu(b - a)


def smaller(a: torch.Tensor, b) -> torch.Tensor:
    """min(a, b) = a - max(a - b, 0): exactly a wherever a <= b."""
    return a - torch.relu(a - b)


def zero_factor(v: torch.Tensor) -> torch.Tensor:
    """1.0 where v <= 0, else 0.0 (NaN compares false: it stays NaN downstream). Carries
    no gradient: it only selects."""
    return torch.le(v.detach(), 0).to(v.dtype)


def root(v: torch.Tensor, p: float) -> torch.Tensor:
    """v ** (1/p) of a v >= 0 (a sum of |x|^p), as torch's p-norms take it: 0 with a
    zero gradient at v = 0, where the root's own slope is infinite (the norm's backward
    masks it there)."""
    if p == 1:
        return v
    zero = zero_factor(v)
    safe = v + zero                       # 1 where v is 0: a finite root and slope
    taken = torch.sqrt(safe) if p == 2 else torch.exp(torch.log(safe) / p)
    return taken * (1 - zero)


def whole_power(x: torch.Tensor, p: float) -> torch.Tensor | None:
    """x ** p by repeated products (exact, any sign) where p is a whole number >= 0,
    else None."""
    if not (float(p).is_integer() and p >= 0):
        return None
    out = torch.ones_like(x)
    for _ in range(int(p)):
        out = out * x
    return out


def power(x: torch.Tensor, p: float) -> torch.Tensor:
    """x ** p of a x >= 0, or of any x for a whole p (then by repeated products, exact);
    a fractional power of 0 is 0 with a zero gradient (p > 1, as in the drawn norms)."""
    whole = whole_power(x, p)
    if whole is not None:
        return whole
    zero = zero_factor(x)
    return torch.exp(p * torch.log(x + zero)) * (1 - zero)


def natural_log(x: torch.Tensor) -> torch.Tensor:
    """ln x as log2(x) * ln 2 (within two roundoffs), for references of composites
    that run ``log`` themselves."""
    return torch.log2(x) * LN2


def natural_exp(x: torch.Tensor) -> torch.Tensor:
    """e^x as 2^(x log2 e), for references of composites that run ``exp`` themselves
    (relative error about |x| roundoffs: 1e-15 for the drawn magnitudes)."""
    return torch.exp2(x * LOG2E)


def softplus(z: torch.Tensor) -> torch.Tensor:
    """log(1 + e^z) without overflow: z + log1p(e^-z) for z > 0, log1p(e^z) elsewhere,
    each branch fed only its own side's values (so the other's cannot overflow, in value
    or gradient). Smooth at 0, where the slope is 1/2 (written as max(z, 0) +
    log1p(e^-|z|), the subgradients of max and |.| would give 0 there)."""
    above = torch.gt(z, 0)
    zero = torch.zeros((), dtype=z.dtype)
    high = torch.where(above, z, zero)
    low = torch.where(above, zero, z)
    return torch.where(above, high + torch.log1p(torch.exp(-high)), torch.log1p(torch.exp(low)))


def log_sigmoid(z: torch.Tensor) -> torch.Tensor:
    """log(1 / (1 + e^-z)) = -softplus(-z)."""
    return -softplus(-z)


def finite_or_zero(m: torch.Tensor) -> torch.Tensor:
    """m where it is finite, else 0 (a shift that must not turn -inf - -inf into NaN)."""
    return torch.nan_to_num(m, nan=0.0, posinf=0.0, neginf=0.0)


def log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """x - log(sum(exp(x))) along ``dim``. The row's maximum is subtracted first so the
    exponentials cannot overflow; it is held constant (it cancels exactly, so autograd
    need not see it)."""
    with torch.no_grad():
        shift = finite_or_zero(x.amax(dim=dim, keepdim=True))
    shifted = x - shift
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def equal_to(x: torch.Tensor, value: float) -> torch.Tensor:
    """x == value (False for NaN), by two ``le`` comparisons (composites use ``eq``)."""
    return torch.le(x, value) & torch.le(-x, -value)
