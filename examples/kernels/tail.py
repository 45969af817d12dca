"""(b) A vectorised kernel that processes 4 elements at a time, as a torch.library op (CPU).

``silu4`` mimics a Metal/CUDA kernel whose threads each load a ``float4``/``half4``:
``numel // 4`` threads cover ``4 * (numel // 4)`` elements, and the tail of a size that is
not a multiple of 4 needs its own pass. ``silu4_buggy`` forgets it (its output buffer starts
zeroed here, so the missing tail is deterministic; on a GPU it would be garbage).

The kernel documents that it requires a contiguous input (``contiguous=True``): mpsfuzz
draws only contiguous inputs for it and checks separately whether it rejects others:
``silu4`` does (``ValueError``), ``silu4_buggy`` does not.

    mpsfuzz run --kernels examples/kernels/tail.py --target cpu --ops silu4_buggy
"""
import torch

import mpsfuzz


def _silu(v: torch.Tensor) -> torch.Tensor:
    return (v.float() * torch.sigmoid(v.float())).to(v.dtype)


@torch.library.custom_op("mpsfuzz_examples::silu4", mutates_args=())
def _silu4(x: torch.Tensor) -> torch.Tensor:
    if not x.is_contiguous():
        raise ValueError("silu4: x must be contiguous")
    flat, out = x.view(-1), torch.zeros(x.numel(), dtype=x.dtype)
    body = x.numel() // 4 * 4
    out[:body] = _silu(flat[:body].view(-1, 4)).view(-1)   # one "thread" per 4 elements
    out[body:] = _silu(flat[body:])                        # the tail, one element each
    return out.view(x.shape)


@torch.library.custom_op("mpsfuzz_examples::silu4_buggy", mutates_args=())
def _silu4_buggy(x: torch.Tensor) -> torch.Tensor:
    flat, out = x.reshape(-1), torch.zeros(x.numel(), dtype=x.dtype)
    body = x.numel() // 4 * 4
    out[:body] = _silu(flat[:body].view(-1, 4)).view(-1)
    # BUG: no pass over the last numel % 4 elements.
    return out.view(x.shape)


def silu_reference(x):
    return torch.nn.functional.silu(x.float()).to(x.dtype) if x.dtype != torch.float64 else torch.nn.functional.silu(x)


INPUTS = [mpsfuzz.tensor(dtypes=["float32", "float16"], min_dims=1, contiguous=True)]


@mpsfuzz.kernel(reference=silu_reference, inputs=INPUTS)
def silu4(x):
    return torch.ops.mpsfuzz_examples.silu4(x)


@mpsfuzz.kernel(reference=silu_reference, inputs=INPUTS)
def silu4_buggy(x):
    return torch.ops.mpsfuzz_examples.silu4_buggy(x)
