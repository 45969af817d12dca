"""Triton versions of two examples, for CUDA users (written for Triton 3.x, torch 2.11+).

UNTESTED HERE: written on a machine without a GPU or Triton; importing this file where
either is missing declares nothing (and prints nothing). On a CUDA machine with Triton:

    mpsfuzz run --kernels examples/kernels/triton_kernels.py --target cuda

``scale_shift_triton_buggy`` loads ``x_ptr + offs`` (contiguity assumed);
``row_sum_triton_buggy`` accumulates each row in the input's dtype (float16 or
bfloat16) instead of float32. Their correct forms make the input contiguous and
accumulate in float32, and are right for everything their declarations let mpsfuzz
draw: any layout, empty and >4-D inputs, nan/inf/-0.0/subnormals.

Asking ``torch.cuda.is_available()`` here is fine: mpsfuzz imports kernel files in each
worker after it is forked, never in the process the workers are forked from.
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
        # int64 offsets: a program id times BLOCK passes 2^31 long before memory runs out.
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        # In float32 whatever the input: with alpha 2 or 0.5 the product is exact, so one
        # rounding at the store equals the reference's float16 rounding after each op
        # (overflow to inf included), and nothing depends on how Triton promotes a float16
        # tensor times a float32 scalar argument.
        y = x.to(tl.float32) * alpha + 1.0
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _row_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, ACC_FP32: tl.constexpr):
        # BLOCK_R rows per program, each summed one element at a time (a one-thread-per-row
        # kernel, as in half_accumulation.py): n_cols is a runtime loop bound.
        rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
        mask = rows < n_rows
        if ACC_FP32:
            acc = tl.zeros([BLOCK_R], dtype=tl.float32)
        else:
            acc = tl.zeros([BLOCK_R], dtype=x_ptr.dtype.element_ty)     # BUG (buggy form): half accumulator
        base = x_ptr + rows * n_cols
        for j in range(0, n_cols):
            v = tl.load(base + j, mask=mask, other=0.0)
            acc += v.to(acc.dtype)
        # +0.0 start, as torch's sum: a row of -0.0 sums to +0.0 on both sides.
        tl.store(out_ptr + rows, acc.to(out_ptr.dtype.element_ty), mask=mask)

    def _scale_shift(x, alpha, out):
        n = x.numel()
        if n == 0:       # no 0-size grid
            return out
        block = 1024
        with torch.cuda.device(x.device):   # the launch goes to the current device: make it x's
            _scale_shift_kernel[(triton.cdiv(n, block),)](x, out, float(alpha), n, BLOCK=block)
        return out

    INPUTS = [mpsfuzz.tensor(dtypes=["float32", "float16"])]
    ARGS = {"alpha": [2.0, 0.5]}

    @mpsfuzz.kernel(reference=scale_shift_reference, inputs=INPUTS, args=ARGS)
    def scale_shift_triton(x, alpha):
        x = x.contiguous()                                        # the fix: dense, row-major
        return _scale_shift(x, alpha, torch.empty(x.shape, dtype=x.dtype, device=x.device))

    @mpsfuzz.kernel(reference=scale_shift_reference, inputs=INPUTS, args=ARGS)
    def scale_shift_triton_buggy(x, alpha):
        return _scale_shift(x, alpha, torch.empty(x.shape, dtype=x.dtype, device=x.device))  # BUG: strides

    def _row_sum(x, acc_fp32):
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols if n_cols else 0
        # Zeros: an empty last dim sums to 0 without a launch.
        out = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        if n_rows:
            block_r = 64
            with torch.cuda.device(x.device):
                _row_sum_kernel[(triton.cdiv(n_rows, block_r),)](x, out, n_rows, n_cols, BLOCK_R=block_r,
                                                                 ACC_FP32=acc_fp32)
        return out

    # Half dtypes only, as in half_accumulation.py: a float32 input summed one element at a
    # time (float32 accumulator) is legitimately less accurate than the reference's sum.
    ROWS = [mpsfuzz.tensor(dtypes=["float16", "bfloat16"], min_dims=1, max_dims=3, max_side=256)]

    @mpsfuzz.kernel(reference=row_sum_reference, inputs=ROWS)
    def row_sum_triton(x):
        return _row_sum(x, True)

    @mpsfuzz.kernel(reference=row_sum_reference, inputs=ROWS)
    def row_sum_triton_buggy(x):
        return _row_sum(x, False)                                 # BUG: half accumulator
