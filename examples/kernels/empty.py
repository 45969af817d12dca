"""(c) A row-wise RMSNorm that fails on zero-numel input, as a torch.library op (CPU).

Modelled on the kernel guide's ``rmsnorm_kernel.py``: one "threadgroup" per row of the
last dim, ``rows = numel // hidden``. ``rmsnorm_buggy`` computes that division without
asking whether the last dim is empty (a real kernel launches a grid of size 0 or divides
by zero); ``rmsnorm`` returns an empty result early.

    mpsfuzz run --kernels examples/kernels/empty.py --target cpu --ops rmsnorm_buggy
"""
import torch

import mpsfuzz


def _rows(x: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    rows = x.numel() // hidden                        # ZeroDivisionError when hidden == 0
    v = x.contiguous().view(rows, hidden).float()
    out = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)
    return out.to(x.dtype).view(x.shape)


@torch.library.custom_op("mpsfuzz_examples::rms_norm", mutates_args=())
def _rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    if x.numel() == 0:                                # the fix: nothing to launch
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return _rows(x, eps)


@torch.library.custom_op("mpsfuzz_examples::rms_norm_buggy", mutates_args=())
def _rms_norm_buggy(x: torch.Tensor, eps: float) -> torch.Tensor:
    return _rows(x, eps)                              # BUG: no zero-numel guard


def rms_norm_reference(x, eps):
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


INPUTS = [mpsfuzz.tensor(dtypes=["float32", "float16"], min_dims=1, allow_nonfinite=False)]
ARGS = {"eps": [1e-6, 1e-5]}


@mpsfuzz.kernel(reference=rms_norm_reference, inputs=INPUTS, args=ARGS)
def rmsnorm(x, eps):
    return torch.ops.mpsfuzz_examples.rms_norm(x, eps)


@mpsfuzz.kernel(reference=rms_norm_reference, inputs=INPUTS, args=ARGS)
def rmsnorm_buggy(x, eps):
    return torch.ops.mpsfuzz_examples.rms_norm_buggy(x, eps)
