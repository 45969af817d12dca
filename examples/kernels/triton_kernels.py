"""Triton versions of two examples, for CUDA users.

UNTESTED HERE: written on a machine without a GPU or Triton; importing this file
elsewhere declares nothing. On a CUDA machine with Triton:

    mpsfuzz run --kernels examples/kernels/triton_kernels.py --target cuda

``scale_shift_triton_buggy`` loads ``x_ptr + offs`` (contiguity assumed);
``row_sum_triton_buggy`` accumulates each row in the input's dtype (float16) instead of
float32. Their correct forms make the input contiguous and accumulate in float32.
"""
import torch

import mpsfuzz

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton here: the file declares no kernel
    triton = None

HAVE_TRITON = triton is not None and torch.cuda.is_available()


def scale_shift_reference(x, alpha):
    return x * alpha + 1


def row_sum_reference(x):
    return x.sum(-1, dtype=torch.promote_types(x.dtype, torch.float32)).to(x.dtype)


if HAVE_TRITON:
    @triton.jit
    def _scale_shift_kernel(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha + 1, mask=mask)

    @triton.jit
    def _row_sum_kernel(x_ptr, out_ptr, n_cols, ACC_FP32: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((), dtype=tl.float32) if ACC_FP32 else tl.zeros((), dtype=tl.float16)
        for j in range(0, n_cols):
            v = tl.load(x_ptr + row * n_cols + j)
            acc += v.to(tl.float32) if ACC_FP32 else v
        tl.store(out_ptr + row, acc.to(out_ptr.dtype.element_ty))

    def _scale_shift(x, alpha, out):
        if x.numel():
            _scale_shift_kernel[(triton.cdiv(x.numel(), 256),)](x, out, alpha, x.numel(), BLOCK=256)
        return out

    @mpsfuzz.kernel(reference=scale_shift_reference, inputs=[mpsfuzz.tensor(dtypes=["float32", "float16"])],
                    args={"alpha": [2.0, 0.5]})
    def scale_shift_triton(x, alpha):
        x = x.contiguous()                                        # the fix
        return _scale_shift(x, alpha, torch.empty_like(x))

    @mpsfuzz.kernel(reference=scale_shift_reference, inputs=[mpsfuzz.tensor(dtypes=["float32", "float16"])],
                    args={"alpha": [2.0, 0.5]})
    def scale_shift_triton_buggy(x, alpha):
        return _scale_shift(x, alpha, torch.empty(x.shape, dtype=x.dtype, device=x.device))  # BUG: strides

    def _row_sum(x, acc_fp32):
        x = x.contiguous()
        rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
        out = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        if rows:
            _row_sum_kernel[(rows,)](x, out, x.shape[-1], ACC_FP32=acc_fp32)
        return out

    ROWS = [mpsfuzz.tensor(dtypes=["float16"], min_dims=1, max_dims=3, max_side=256)]

    @mpsfuzz.kernel(reference=row_sum_reference, inputs=ROWS)
    def row_sum_triton(x):
        return _row_sum(x, True)

    @mpsfuzz.kernel(reference=row_sum_reference, inputs=ROWS)
    def row_sum_triton_buggy(x):
        return _row_sum(x, False)                                 # BUG: float16 accumulator
