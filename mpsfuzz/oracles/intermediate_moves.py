"""The arbiter's conditioning check, for intermediates: the op in float64 with every
kernel's floating result moved by up to one unit of roundoff of the case's dtype.

The check that moves the *inputs* by a roundoff (``arbiter.perturbed_sides``) misses a
formula that amplifies the roundoff of an intermediate. Run 27 (H200): shifted Chebyshev
V_8 in float32 near 2x - 1 = -1 multiplies t = acos(2x - 1)'s roundoff by 47 (three
rules came of it). Run 34: the bfloat16 gradient of ``tanhshrink`` is g - g (1 - tanh^2 x),
and rounding g (1 - tanh^2 x) to bfloat16 near g costs an ulp of g, which the
cancellation leaves as the whole result: CUDA and CPU were each about that far off
float64. A backend that rounds each kernel's result to the dtype may land anywhere in
that spread; where float64 moves that much, the result is not determined to within the
tolerance by arithmetic in the dtype.

A result is moved multiplicatively (a zero stays zero, a sign stays), and only a fresh
result: views and writes into arguments keep their aliasing.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

WIDE = (torch.float64, torch.complex128)


class _MovedResults(TorchDispatchMode):
    def __init__(self, unit: float, seed: int):
        super().__init__()
        self.unit = unit
        self.gen = torch.Generator().manual_seed(seed)

    def _move(self, t):
        if not isinstance(t, torch.Tensor) or t.dtype not in WIDE or not t.numel():
            return t
        # between half and one roundoff, either way (continuous: exact ties are broken)
        step = torch.rand(t.shape, generator=self.gen, dtype=torch.float64) * 0.5 + 0.5
        sign = torch.randint(0, 2, t.shape, generator=self.gen, dtype=torch.int64).to(torch.float64) * 2 - 1
        return t * (1 + self.unit * step * sign)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        schema = func._schema
        if schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
            return out
        return tree_map(self._move, out)


def moved_intermediates(unit: float, seed: int):
    """A runner (``runner(fn, *args, **kwargs)``) that calls ``fn`` with every fresh
    floating result of an aten call moved by up to ``unit`` relative, seeded."""
    def run(fn, *args, **kwargs):
        with _MovedResults(unit, seed):
            return fn(*args, **kwargs)
    return run
