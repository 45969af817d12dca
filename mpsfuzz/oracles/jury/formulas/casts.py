"""The cast family (``generation/ops/cast.py``) from the documented conversions, element by
element in Python numbers, never through a torch cast or copy kernel (pytorch#160744):

- to an integer dtype: an integer is reduced modulo 2^bits into the dtype's range (two's
  complement wrap, C++20 [conv.integral]); a float, or a complex number's real part, is
  truncated toward zero ([conv.fpint]); bool is 0 or 1. A float whose truncation the
  dtype cannot hold, NaN or an infinity is undefined: 0 stands there, and the values
  oracle gives those elements no verdict (oracles/conversions.py);
- to bool: ``x != 0`` (a complex number: either part);
- to a floating dtype: the value (a complex number's real part for a real dtype) rounded
  to nearest even in the dtype, an infinity past its range (IEEE 754), by numpy's
  conversions and float32's bits for bfloat16, handed back in float64 (an integer past
  2^53 rounded first by Python's int-to-float); where the jury's inputs arrive widened
  (a floating destination, ``dtype=`` widened to float64) the jury rounds to the
  backends' dtype itself;
- to a complex dtype: the value with a zero imaginary part where it is real.

``copy_(dst, src)``: ``src`` converted to ``dst``'s dtype and broadcast to its shape
(the destination arrives widened to float64/complex128 where it is floating, which tells
the real or complex kind; the jury rounds to its dtype). ``to(x, dtype)``: ``x``
converted to ``dtype`` (widened like the inputs).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..references import NotApplicable


def _elements(t: torch.Tensor, shape) -> list:
    """``t``'s values broadcast to ``shape``, flat, as Python numbers (read by tolist, no
    kernel: an expanded view is walked through its strides)."""
    values = t.detach().broadcast_to(tuple(shape)).tolist()
    flat: list = []

    def walk(v):
        if isinstance(v, list):
            for item in v:
                walk(item)
        else:
            flat.append(v)
    walk(values)
    return flat


def _integer(value, dtype: torch.dtype) -> int:
    info = torch.iinfo(dtype)
    if isinstance(value, complex):
        value = value.real
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return 0                       # undefined: no verdict (oracles/conversions.py)
        whole = math.trunc(value)
        return whole if info.min <= whole <= info.max else 0
    span = info.max - info.min + 1         # two's complement wrap
    return (value - info.min) % span + info.min


def _rounded(values: list[float], dtype: torch.dtype) -> np.ndarray:
    """``values`` rounded to nearest even in ``dtype``'s format (an infinity past its
    range), in float64, by numpy's conversions, never torch's cast kernel: float32 and
    float16 by numpy's own; bfloat16 as the upper half of float32's bits, rounded (the
    carry of rounding up from the largest value makes the exponent's all ones: inf)."""
    wide = np.array(values, dtype=np.float64)
    if dtype == torch.float64:
        return wide
    if dtype == torch.float16:
        with np.errstate(over="ignore"):
            return wide.astype(np.float16).astype(np.float64)
    with np.errstate(over="ignore"):
        single = wide.astype(np.float32)
    if dtype == torch.float32:
        return single.astype(np.float64)
    if dtype != torch.bfloat16:
        raise NotApplicable(f"no rounding to {dtype}")
    bits = single.view(np.uint32).astype(np.uint64)
    up = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = up.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isnan(wide), wide, out)


_REAL_OF = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}


def _made(values: list, shape, dtype: torch.dtype) -> torch.Tensor:
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.tensor([bool(v) for v in values] or [], dtype=torch.bool).reshape(shape)
    if dtype.is_complex:
        parts = [complex(v) for v in values]
        real = _rounded([z.real for z in parts], _REAL_OF[dtype])
        imag = _rounded([z.imag for z in parts], _REAL_OF[dtype])
        return torch.from_numpy(real + 1j * imag).to(torch.complex128).reshape(shape)
    if dtype.is_floating_point:
        rounded = _rounded([float(v.real if isinstance(v, complex) else v) for v in values], dtype)
        return torch.from_numpy(rounded).reshape(shape)
    ints = [_integer(v, dtype) for v in values]
    if dtype == torch.uint64:
        # (torch.tensor takes no Python int past int64 for uint64: the same bits as int64)
        signed = [v - 2**64 if v >= 2**63 else v for v in ints]
        return torch.tensor(signed, dtype=torch.int64).view(torch.uint64).reshape(shape)
    return torch.tensor(ints, dtype=dtype).reshape(shape)


def _converted(source: torch.Tensor, shape, dtype: torch.dtype) -> torch.Tensor:
    values = _elements(source, shape)
    if dtype == torch.bool:
        values = [v != 0 for v in values]
    return _made(values, shape, dtype)


def copy_formula(inputs, kwargs):
    if kwargs:
        raise NotApplicable(f"arguments {sorted(kwargs)}")
    dst, src = inputs
    return _converted(src, dst.shape, dst.dtype)


def to_formula(inputs, kwargs):
    (x,) = inputs
    dtype = kwargs.get("dtype")
    if not isinstance(dtype, torch.dtype):
        raise NotApplicable("no dtype argument")
    return _converted(x, x.shape, dtype)


FORMULAS = {"copy_": copy_formula, "to": to_formula}
