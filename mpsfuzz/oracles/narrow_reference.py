"""A half-precision op evaluated kernel by kernel on eager CPU, where CPU lacks one of
its half kernels: the arbiter's second opinion on a widened reference.

Where eager CPU has no float16/bfloat16 kernel for an op, the executor computes the
reference in float32 and rounds the result (``executor.run_reference``). For one kernel
that is what a device's half kernel does (it accumulates in float32). A *composite* op
is not one kernel: ``F.local_response_norm`` squares its input, pools, scales, raises to
a power and divides, and on a device each of those kernels rounds its result to half.
Three H200 runs (docs/real-findings.md): float16 ``local_response_norm`` of 65504 is 0 on CUDA, because
65504 squared is inf in half, and 3.9 in the float32 reference; any backend running the
op's own decomposition in half gets 0.

:func:`narrow_per_kernel` runs the op with every aten call on half tensors computed in
float32 and its result rounded back to half: half arithmetic, kernel by kernel, with
CPU's float32 kernels. A target that agrees with it does what the op's own decomposition
does in that dtype.
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map
from ..execution.dispatch_modes import DenseHigherOrderOps

NARROW = (torch.float16, torch.bfloat16)


class _HalfPerKernel(DenseHigherOrderOps):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        narrow = next((t.dtype for t in leaves if t.dtype in NARROW), None)
        schema = func._schema
        if narrow is None or schema.is_mutable or any(r.alias_info is not None for r in schema.returns):
            # In-place and out= calls write their arguments: not emulated (the call
            # raises where CPU lacks the kernel, and there is no second opinion). Views
            # need no kernel and stay views.
            return func(*args, **kwargs)
        had_float32 = any(t.dtype == torch.float32 for t in leaves)

        def up(t):
            return t.to(torch.float32) if isinstance(t, torch.Tensor) and t.dtype == narrow else t

        def down(t):
            # A float32 result of float32 arguments of the caller's own stays float32.
            return t.to(narrow) if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t
        out = func(*tree_map(up, args), **tree_map(up, kwargs))
        return out if had_float32 else tree_map(down, out)


def narrow_per_kernel(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with half arithmetic kernel by kernel (see the module)."""
    with _HalfPerKernel():
        return fn(*args, **kwargs)
