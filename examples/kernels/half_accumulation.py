"""(d) A row sum that accumulates in float16, as a torch.library op (CPU).

``row_sum`` walks each row of the last dim and adds one element at a time, as a
one-thread-per-row GPU kernel does, with the accumulator in float32 and one rounding at
the end; ``row_sum_buggy`` keeps the accumulator in the input's dtype, so a float16 row
of a few dozen elements is off by far more than one rounding. The kernels do not declare
``accumulates=True``: their contract is the reference's accuracy (a float32 accumulator),
which the float64 arbiter holds them to. Rows are up to 256 long (``max_side``).

    mpsfuzz run --kernels examples/kernels/half_accumulation.py --target cpu --ops row_sum_buggy
"""
import torch

import mpsfuzz


def _sequential_sum(x: torch.Tensor, acc_dtype: torch.dtype) -> torch.Tensor:
    acc = torch.zeros(x.shape[:-1], dtype=acc_dtype)
    for j in range(x.shape[-1]):                      # one add (and one rounding) per element
        acc += x[..., j].to(acc_dtype)
    return acc.to(x.dtype)


@torch.library.custom_op("mpsfuzz_examples::row_sum", mutates_args=())
def _row_sum(x: torch.Tensor) -> torch.Tensor:
    return _sequential_sum(x, torch.promote_types(x.dtype, torch.float32))


@torch.library.custom_op("mpsfuzz_examples::row_sum_buggy", mutates_args=())
def _row_sum_buggy(x: torch.Tensor) -> torch.Tensor:
    return _sequential_sum(x, x.dtype)                # BUG: float16 accumulator


def row_sum_reference(x):
    return x.sum(-1, dtype=torch.promote_types(x.dtype, torch.float32)).to(x.dtype)


# Half dtypes only: a float32 kernel that adds one element at a time (float32 accumulator)
# is legitimately less accurate than the reference's pairwise float32 sum.
INPUTS = [mpsfuzz.tensor(dtypes=["float16", "bfloat16"], min_dims=1, max_dims=3, max_side=256)]


@mpsfuzz.kernel(reference=row_sum_reference, inputs=INPUTS)
def row_sum(x):
    return torch.ops.mpsfuzz_examples.row_sum(x)


@mpsfuzz.kernel(reference=row_sum_reference, inputs=INPUTS)
def row_sum_buggy(x):
    return torch.ops.mpsfuzz_examples.row_sum_buggy(x)
