"""Metal (``torch.mps.compile_shader``) versions of two examples, for Mac users.

UNTESTED HERE: written on a Linux machine without MPS; importing this file elsewhere
declares nothing (the kernels need an MPS build of torch). On a Mac:

    mpsfuzz run --kernels examples/kernels/metal.py --target mps

``scale_shift_metal_buggy`` indexes ``x[i]`` for ``i < numel`` (contiguity assumed: a
transposed or gapped input gives wrong values); ``silu4_metal_buggy`` has one thread per
4 elements and no tail pass. Their correct forms pass ``x.contiguous()`` and run a tail
thread per leftover element.
"""
import torch

import mpsfuzz

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

kernel void scale_shift(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                        constant float& alpha [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    out[i] = x[i] * alpha + 1.0f;
}

kernel void silu4(device const float4* x [[buffer(0)]], device float4* out [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
    float4 v = x[i];
    out[i] = v / (1.0f + exp(-v));
}

kernel void silu1(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                  constant uint& start [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    float v = x[start + i];
    out[start + i] = v / (1.0f + exp(-v));
}
"""

HAVE_MPS = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
                and hasattr(torch.mps, "compile_shader"))


def scale_shift_reference(x, alpha):
    return x * alpha + 1


def silu_reference(x):
    return torch.nn.functional.silu(x)


if HAVE_MPS:
    LIB = torch.mps.compile_shader(SOURCE)

    @mpsfuzz.kernel(reference=scale_shift_reference, inputs=[mpsfuzz.tensor(dtypes=["float32"], min_dims=1)],
                    args={"alpha": [2.0, 0.5]})
    def scale_shift_metal(x, alpha):
        x = x.contiguous()                                   # the fix
        out = torch.empty_like(x)
        if x.numel():
            LIB.scale_shift(x, out, alpha, threads=x.numel())
        return out

    @mpsfuzz.kernel(reference=scale_shift_reference, inputs=[mpsfuzz.tensor(dtypes=["float32"], min_dims=1)],
                    args={"alpha": [2.0, 0.5]})
    def scale_shift_metal_buggy(x, alpha):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if x.numel():
            LIB.scale_shift(x, out, alpha, threads=x.numel())   # BUG: x's strides ignored
        return out

    @mpsfuzz.kernel(reference=silu_reference,
                    inputs=[mpsfuzz.tensor(dtypes=["float32"], min_dims=1, contiguous=True)])
    def silu4_metal(x):
        if not x.is_contiguous():
            raise ValueError("silu4_metal: x must be contiguous")
        out = torch.zeros_like(x)
        body = x.numel() // 4
        if body:
            LIB.silu4(x, out, threads=body)
        if x.numel() % 4:
            LIB.silu1(x, out, 4 * body, threads=x.numel() % 4)   # the tail
        return out

    @mpsfuzz.kernel(reference=silu_reference,
                    inputs=[mpsfuzz.tensor(dtypes=["float32"], min_dims=1, contiguous=True)])
    def silu4_metal_buggy(x):
        out = torch.zeros_like(x)
        if x.numel() // 4:
            LIB.silu4(x, out, threads=x.numel() // 4)            # BUG: no tail pass
        return out
