"""(d) A reduction that passes its element count as a 32-bit integer, as a torch.library op (CPU).

``sum_all(x)`` sums every element into one float32 value. Its launcher hands the kernel
``n = x.numel()`` as an ``int`` (32 bits), the classic way a kernel goes silently wrong past
2^31 elements: from 2^31 to 2^32 - 1 elements ``n`` is negative and the loop runs zero
times (the result is 0); from 2^32 on it wraps to ``numel - 2^32`` and the kernel sums only
that many. ``sum_all_buggy`` emulates it, reading its input row by row through the view's
strides so that a stride-0 view of billions of elements costs no memory; ``sum_all`` keeps
the count in 64 bits.

The input is declared ``large=True``: with ``--large`` some cases draw it past 2^31
elements (within ``--max-bytes``: 8 bytes an element, so ``--max-bytes 32GB`` for 2^32 + 1),
as a stride-0 view of one value. The reference, ``x.sum()`` in float32, runs on that view
without copying it.

    mpsfuzz run --kernels examples/kernels/overflow.py --target cpu --ops sum_all_buggy \\
        --large --max-bytes 32GB
"""
import torch

import mpsfuzz

_INT32 = 1 << 32


def _sum_first(x: torch.Tensor, n: int) -> torch.Tensor:
    """The float32 sum of the first ``n`` elements of ``x`` in row-major order, without a
    dense copy: whole leading slices, then the first part of the next one, recursively."""
    if n <= 0:
        return torch.zeros((), dtype=torch.float32)
    if x.dim() == 0 or n >= x.numel():
        return x.sum(dtype=torch.float32) if x.dim() else x.to(torch.float32)
    row = x[0].numel()
    full, rest = divmod(n, row)
    total = x[:full].sum(dtype=torch.float32) if full else torch.zeros((), dtype=torch.float32)
    return total + _sum_first(x[full], rest) if rest else total


@torch.library.custom_op("mpsfuzz_examples::sum_all", mutates_args=())
def _sum_all(x: torch.Tensor) -> torch.Tensor:
    return _sum_first(x, x.numel())                    # a 64-bit count


@torch.library.custom_op("mpsfuzz_examples::sum_all_buggy", mutates_args=())
def _sum_all_buggy(x: torch.Tensor) -> torch.Tensor:
    n = x.numel() % _INT32
    n = n - _INT32 if n >= _INT32 // 2 else n          # BUG: `int n = numel`, 32 bits
    return _sum_first(x, n)


def sum_reference(x):
    return x.sum(dtype=torch.float32)


INPUTS = [mpsfuzz.tensor(dtypes=["float32"], min_dims=1, max_dims=3, large=True, low=-4, high=4)]


@mpsfuzz.kernel(reference=sum_reference, inputs=INPUTS, accumulates=True)
def sum_all(x):
    return torch.ops.mpsfuzz_examples.sum_all(x)


@mpsfuzz.kernel(reference=sum_reference, inputs=INPUTS, accumulates=True)
def sum_all_buggy(x):
    return torch.ops.mpsfuzz_examples.sum_all_buggy(x)
