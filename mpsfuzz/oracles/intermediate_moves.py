"""The arbiter's conditioning check, for intermediates: the op in float64 with every
kernel's floating result moved by up to one unit of roundoff of the case's dtype.

The check that moves the *inputs* by a roundoff (``arbiter.perturbed_sides``) misses a
formula that amplifies the roundoff of an intermediate. On an H200 (docs/real-findings.md), shifted Chebyshev
V_8 in float32 near 2x - 1 = -1 multiplies t = acos(2x - 1)'s roundoff by 47 (three
rules came of it). Another H200 case: the bfloat16 gradient of ``tanhshrink`` is g - g (1 - tanh^2 x),
and rounding g (1 - tanh^2 x) to bfloat16 near g costs an ulp of g, which the
cancellation leaves as the whole result: CUDA and CPU were each about that far off
float64. A backend that rounds each kernel's result to the dtype may land anywhere in
that spread; where float64 moves that much, the result is not determined to within the
tolerance by arithmetic in the dtype.

A result is moved multiplicatively (a zero stays zero, a sign stays), and only a fresh
result that a kernel rounds: views and writes into arguments keep their aliasing, and
exact kernels (selections, copies, sign changes, comparisons' operands such as a max
that a composite then tests for equality) round nothing on any backend.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from ..execution.dispatch_modes import DenseHigherOrderOps

WIDE = (torch.float64, torch.complex128)

# Kernels whose result is exact on every backend: moving it would model no rounding, and
# a composite that compares it (x == x.max()) would branch differently.
EXACT = frozenset(f"aten::{name}" for name in (
    "max", "min", "amax", "amin", "maximum", "minimum", "fmax", "fmin", "aminmax", "sort", "topk", "kthvalue",
    "median", "nanmedian", "mode", "cummax", "cummin", "clamp", "clamp_min", "clamp_max", "where", "index",
    "index_select", "gather", "take", "take_along_dim", "masked_select", "masked_fill", "masked_scatter", "cat",
    "stack", "clone", "_to_copy", "copy", "lift_fresh", "lift_fresh_copy", "abs", "neg", "sign", "sgn",
    "floor", "ceil", "round", "trunc", "frac", "relu", "hardtanh", "threshold", "flip", "roll", "repeat",
    "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
    "replication_pad2d", "replication_pad3d", "zeros_like", "ones_like", "full_like", "empty_like", "zeros",
    "ones", "full", "empty", "empty_strided", "scalar_tensor", "select_scatter",
    "slice_scatter", "diagonal_scatter", "as_strided_scatter", "tril", "triu", "diag_embed", "narrow_copy",
    "_unsafe_view", "view_copy", "expand_copy", "permute_copy", "squeeze_copy", "unsqueeze_copy",
    "t_copy", "transpose_copy", "alias_copy", "detach", "conj_physical", "resolve_conj", "resolve_neg",
    "max_pool2d_with_indices", "max_pool3d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "max_unpool2d", "max_unpool3d", "embedding", "index_copy",
    # prims of a decomposed op that move or make data
    "convert_element_type", "broadcast_in_dim", "collapse_view", "split_dim", "squeeze", "transpose",
    "view_of", "reshape", "slice", "slice_in_dim", "expand_dims", "iota", "copy_to", "device_put",
    "item", "select", "signbit"))


class _MovedResults(DenseHigherOrderOps):
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
        # a prim (a decomposed op's kernel) names the aten op it computes
        name = "aten::" + schema.name.split("::", 1)[1] if schema.name.startswith("prims::") else schema.name
        if schema.is_mutable or any(r.alias_info is not None for r in schema.returns) or name in EXACT:
            return out
        return tree_map(self._move, out)


def moving_mode(unit: float, seed: int) -> TorchDispatchMode:
    """The dispatch mode that moves every fresh floating result, seeded."""
    return _MovedResults(unit, seed)


def moved_intermediates(unit: float, seed: int):
    """A runner (``runner(fn, *args, **kwargs)``) that calls ``fn`` with every fresh
    floating result of an aten call moved by up to ``unit`` relative, seeded."""
    def run(fn, *args, **kwargs):
        with _MovedResults(unit, seed):
            return fn(*args, **kwargs)
    return run
