"""``decomposition``: the op traced into torch's own decompositions (``torch._decomp``,
applied recursively down to the ops that have none, and prims) and run in float64 on
dense copies, its gradients by autograd through the decomposed ops.

It is a witness only where its kernels differ from eager CPU's: the kernels of both
runs are recorded, and the decomposition must avoid at least one kernel eager CPU ran
for the op and share none but building blocks (arithmetic, GEMM, sums and extremes:
kernels every op and mpsfuzz's own comparisons run, which the jury judges as ops of
their own). ``var`` decomposes into ``prims.var``, which runs CPU's ``var``, and
``fmod`` into ``prims.fmod``: it abstains; attention's math path (GEMMs and a softmax)
decomposes into GEMMs and amax/exp/sum/div: it avoids the softmax and votes. Views,
copies and fills are no evidence either way, and kernels of one implementation under
several names (``mm``/``addmm``/``bmm``, one GEMM) count as one.
"""
from __future__ import annotations

import torch

from ...execution.dispatch_modes import DenseHigherOrderOps
from ...execution.observation import Raised
from . import juror
from .float64 import dense_wide_inputs, wide_run
from .reference_vote import vote_with
from .tracing import decomposed_leaves

# Kernels that move or make data without computing: they say nothing about a result.
TRIVIAL = frozenset({
    "alias", "as_strided", "clone", "contiguous", "copy", "detach", "empty", "empty_like", "empty_strided",
    "expand", "fill", "full", "full_like", "lift_fresh", "lift_fresh_copy", "local_scalar_dense", "new_empty",
    "new_empty_strided", "new_full", "new_ones", "new_zeros", "ones", "ones_like", "permute", "reshape",
    "resize", "scalar_tensor", "select", "slice", "split", "split_with_sizes", "squeeze", "t", "to", "to_copy",
    "transpose", "unbind", "unsafe_view", "unsqueeze", "view", "zeros", "zeros_like", "arange", "broadcast_in_dim",
    "convert_element_type", "collapse_view", "split_dim", "device_put", "set", "is_same_size", "item",
    "fill_", "zero", "narrow", "unfold_copy", "view_of", "reshape_as", "expand_as", "view_as", "movedim",
    "squeeze_copy", "unsqueeze_copy", "permute_copy", "expand_copy", "view_copy", "slice_copy", "select_copy",
    "transpose_copy", "as_strided_copy", "t_copy", "alias_copy", "clone_", "resize_as", "ones_like_",
})

# One implementation under several kernel names.
FAMILIES = {
    **{k: "gemm" for k in ("mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "matmul",
                           "linear", "addr", "outer", "ger", "einsum", "tensordot")},
    **{k: "sum" for k in ("sum", "mean", "nansum", "nanmean")},
    **{k: "var" for k in ("var", "std", "var_mean", "std_mean")},
    **{k: "minmax" for k in ("amax", "amin", "max", "min", "aminmax")},
    **{k: "softmax" for k in ("softmax", "log_softmax")},
}


# Kernels shared with eager CPU that leave a decomposition a witness (see the docstring).
BUILDING_BLOCKS = frozenset({
    "add", "sub", "mul", "div", "neg", "reciprocal", "exp", "log", "sqrt", "rsqrt", "pow", "abs", "where",
    "gemm", "sum", "minmax", "maximum", "minimum", "clamp", "ge", "gt", "le", "lt", "eq", "ne", "logical_not",
    "bitwise_not", "masked_fill", "index", "gather", "cat", "constant_pad_nd", "sign", "floor", "ceil", "trunc",
})


def kernel_name(func) -> str:
    """A kernel's implementation name: the op's name without namespace, overload,
    leading underscores or in-place suffix, its family where several names share one."""
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or str(func).split(".")[-2 if str(func).count(".") >= 2 else -1]
    name = name.strip("_")
    return FAMILIES.get(name, name)


class KernelRecorder(DenseHigherOrderOps):
    """Records the implementation name of every kernel run under it."""

    def __init__(self):
        super().__init__()
        self.kernels: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.kernels.add(kernel_name(func))
        return func(*args, **(kwargs or {}))


def recording(recorder: KernelRecorder):
    """A runner (``run_side``'s) that runs the call, forward and backward, under ``recorder``."""
    def run(fn, *args, **kwargs):
        with recorder:
            return fn(*args, **kwargs)
    return run


def eager_kernels(obs) -> set[str] | None:
    """The non-trivial kernels eager CPU runs for the call, in float64 (cached)."""
    if "jury_eager_kernels" not in obs.cache:
        recorder = KernelRecorder()
        side = wide_run(obs, dense_wide_inputs(obs.case), runner=recording(recorder))
        obs.cache["jury_eager_kernels"] = None if isinstance(side.outputs, Raised) else recorder.kernels - TRIVIAL
    return obs.cache["jury_eager_kernels"]


@juror("decomposition", witness="independent", costly=True,
       doc="torch's decompositions (torch._decomp) down to kernels other than eager CPU's, in float64")
def decomposition_vote(obs, failure, ballots):
    if "random" in obs.spec.semantics or obs.spec.reference_fn is not None:
        return None
    eager = eager_kernels(obs)
    if not eager:
        return "eager CPU ran no kernel of its own to differ from" if eager is not None else None
    recorder = KernelRecorder()
    leaves = decomposed_leaves(obs, failure.oracle == "grads", recorder)
    if isinstance(leaves, str):
        return leaves if not leaves.startswith("not traced: the autocast") else None
    shared = sorted(eager & recorder.kernels)
    own = [k for k in shared if k not in BUILDING_BLOCKS]
    if own or not eager - recorder.kernels:
        shown = own or shared
        return f"it reaches eager CPU's own kernel{'s' if len(shown) > 1 else ''} ({', '.join(shown[:4])})"
    return vote_with("decomposition", "independent",
                     f"torch._decomp down to {', '.join(sorted(recorder.kernels - TRIVIAL)[:6])} in float64",
                     leaves, ballots)
