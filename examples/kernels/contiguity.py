"""(a) An elementwise kernel that assumes a contiguous input, as a torch.library op (CPU).

``scale_shift(x, alpha) = x * alpha + 1``. A real kernel indexes its input's memory as
``x[i]`` for ``i < numel``, which is right only for a dense, row-major tensor:
``scale_shift_buggy`` reads the storage the same way (``as_strided(x, (numel,), (1,))``),
so a transposed, gapped or offset view gives wrong values, and an expanded one reads past
its storage. ``scale_shift`` makes its input contiguous first, as the kernel guide asks.

    mpsfuzz run --kernels examples/kernels/contiguity.py --target cpu --ops scale_shift_buggy
"""
import torch

import mpsfuzz


@torch.library.custom_op("mpsfuzz_examples::scale_shift", mutates_args=())
def _scale_shift(x: torch.Tensor, alpha: float) -> torch.Tensor:
    flat = x.contiguous().view(-1)                     # the fix: a dense copy when needed
    return (flat * alpha + 1).view(x.shape)


@torch.library.custom_op("mpsfuzz_examples::scale_shift_buggy", mutates_args=())
def _scale_shift_buggy(x: torch.Tensor, alpha: float) -> torch.Tensor:
    # BUG: element i is read at storage_offset + i, whatever the strides.
    flat = torch.as_strided(x, (x.numel(),), (1,), x.storage_offset())
    return (flat * alpha + 1).view(x.shape)


def scale_shift_reference(x, alpha):
    return x * alpha + 1


INPUTS = [mpsfuzz.tensor(dtypes=["float32", "float16"], min_dims=1)]
ARGS = {"alpha": [2.0, 0.5, -3.0]}


@mpsfuzz.kernel(reference=scale_shift_reference, inputs=INPUTS, args=ARGS)
def scale_shift(x, alpha):
    return torch.ops.mpsfuzz_examples.scale_shift(x, alpha)


@mpsfuzz.kernel(reference=scale_shift_reference, inputs=INPUTS, args=ARGS)
def scale_shift_buggy(x, alpha):
    return torch.ops.mpsfuzz_examples.scale_shift_buggy(x, alpha)
