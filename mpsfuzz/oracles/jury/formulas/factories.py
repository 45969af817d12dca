"""The factories (``generation/ops/factory.py``) from their documented formulas, in Python
integers, exact fractions and float64, never through a torch factory kernel:

- ``arange(start, end, step)``: ``start + i * step`` for ``i < ceil((end - start) / step)``,
  the length as torch documents and computes it (in double; in int64 integer
  arithmetic for an int64 result, which holds integers past 2^53), the values in exact
  integers where the arguments are integers, else ``start + i * step`` in float64 (a
  backend of a narrower dtype accumulates in its own precision: the jury's tolerance
  for the dtype judges that);
- ``linspace(start, end, steps)``: ``start + i * (end - start) / (steps - 1)``, exact (a
  fraction) and rounded once to float64; an integer dtype truncates it toward zero;
- ``logspace``: ``base ** `` that exponent, in float64 (math.pow), an integer dtype
  truncating it;
- ``full``/``full_like``: the fill value cast to the dtype (an integer dtype truncates a
  float fill, which torch refuses past the dtype's range); ``zeros_like``/``ones_like``:
  0 and 1 cast;
- ``eye(n, m)``: 1 where the row is the column, else 0.

The result dtype is the call's ``dtype=`` (the dummy input's, as the op's function
passes it, where the case gives none); ``dtype=None`` is torch's inference (an int64
``arange`` of integer arguments, the dtype of ``full``'s fill) or its default dtype.
Floating results are rounded to that dtype and handed back in float64 (the contract of
``references.py``: the jury rounds them again to the backends' dtype, a no-op), integer
and bool results in their dtype.
"""
from __future__ import annotations

import math
from fractions import Fraction

import torch

from ..references import NotApplicable, Reference

_UNSET = object()


def result_dtype(inputs, kwargs, inferred=None) -> torch.dtype:
    """The dtype the call makes: its ``dtype=``, the dummy input's where it passes none,
    torch's inference or default dtype for ``dtype=None``."""
    dtype = kwargs.get("dtype", _UNSET)
    if dtype is _UNSET:
        return inputs[0].dtype
    if dtype is None:
        return inferred if inferred is not None else torch.get_default_dtype()
    return dtype


def _integer_dtype(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


def made(values: list, shape, dtype: torch.dtype) -> torch.Tensor:
    """``values`` (Python numbers, flat) as a tensor of ``shape``: cast to ``dtype`` (an
    integer one must hold them), floating ones handed back in float64/complex128."""
    shape = tuple(shape)
    if dtype.is_complex:
        return torch.tensor([complex(v) for v in values], dtype=torch.complex128).to(dtype) \
            .to(torch.complex128).reshape(shape)
    if dtype.is_floating_point:
        return torch.tensor([float(v) for v in values], dtype=torch.float64).to(dtype) \
            .to(torch.float64).reshape(shape)
    if dtype == torch.bool:
        return torch.tensor([bool(v) for v in values], dtype=torch.bool).reshape(shape)
    info = torch.iinfo(dtype)
    ints = [int(v) for v in values]
    if any(not info.min <= v <= info.max for v in ints):
        raise NotApplicable(f"a value past {dtype}'s range (torch refuses or wraps it)")
    return torch.tensor(ints, dtype=torch.int64).to(dtype).reshape(shape)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _finite(*values) -> None:
    for v in values:
        if isinstance(v, float) and not math.isfinite(v):
            raise NotApplicable(f"a non-finite argument {v!r}")


# -- arange ------------------------------------------------------------------------------------

def arange_length(start, end, step, dtype: torch.dtype) -> int:
    """torch's documented length ``ceil((end - start) / step)``: in double, as every
    backend computes it for consistency; for an int64 result of integer arguments in
    integer arithmetic ((end - start + step - sign(step)) / step, truncated)."""
    if step == 0:
        raise NotApplicable("step 0 (torch refuses it)")
    if dtype == torch.int64 and all(_is_int(v) for v in (start, end, step)):
        sign = 1 if step > 0 else -1
        n = Fraction(end - start + step - sign, step)
        length = math.trunc(n)
    else:
        length = math.ceil((float(end) - float(start)) / float(step))
    if length < 0:
        raise NotApplicable("end lies on the wrong side of start (torch refuses it)")
    return length


def arange_reference(inputs, kwargs):
    start, end, step = kwargs.get("start", 0), kwargs["end"], kwargs.get("step", 1)
    _finite(start, end, step)
    integers = all(_is_int(v) for v in (start, end, step))
    dtype = result_dtype(inputs, kwargs, torch.int64 if integers else None)
    n = arange_length(start, end, step, dtype)
    if _integer_dtype(dtype):
        if not integers:
            raise NotApplicable("float arguments of an integer arange (torch truncates them first)")
        values = [start + i * step for i in range(n)]
    elif integers:
        values = [start + i * step for i in range(n)]          # exact, rounded once
    else:
        start_f, step_f = float(start), float(step)
        values = [start_f + i * step_f for i in range(n)]
    return made(values, (n,), dtype)


# -- linspace, logspace ------------------------------------------------------------------------

def exact_points(start, end, steps: int) -> list[Fraction]:
    """``start + i * (end - start) / (steps - 1)``, i < steps, exactly (``[start]`` for one
    step, none for 0)."""
    if steps < 0:
        raise NotApplicable("negative steps (torch refuses them)")
    a, b = Fraction(start), Fraction(end)
    if steps == 1:
        return [a]
    return [a + (b - a) * i / (steps - 1) for i in range(steps)]


def _integer_ends(start, end, dtype: torch.dtype, op: str) -> None:
    """An integer linspace/logspace converts its ends to the dtype first (a float end is
    truncated, one past the dtype's range wrapped): the formula covers ends it holds."""
    info = torch.iinfo(dtype)
    if not (_is_int(start) and _is_int(end)):
        raise NotApplicable(f"float ends of an integer {op} (torch casts them to the dtype first)")
    if not (info.min <= start <= info.max and info.min <= end <= info.max):
        raise NotApplicable(f"an end past {dtype}'s range (torch casts it to the dtype first)")


def linspace_reference(inputs, kwargs):
    start, end, steps = kwargs["start"], kwargs["end"], kwargs["steps"]
    _finite(start, end)
    dtype = result_dtype(inputs, kwargs)
    points = exact_points(start, end, steps)
    if _integer_dtype(dtype):
        _integer_ends(start, end, dtype, "linspace")
        return made([math.trunc(p) for p in points], (steps,), dtype)
    return made([float(p) for p in points], (steps,), dtype)


def _power(base: float, exponent: float) -> float:
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.inf if base > 0 or exponent == math.floor(exponent) and exponent % 2 == 0 else -math.inf
    except ValueError:   # a negative base to a fractional power
        return math.nan


def logspace_reference(inputs, kwargs):
    start, end, steps = kwargs["start"], kwargs["end"], kwargs["steps"]
    base = float(kwargs.get("base", 10.0))
    _finite(start, end, base)
    dtype = result_dtype(inputs, kwargs)
    values = [_power(base, float(p)) for p in exact_points(start, end, steps)]
    if _integer_dtype(dtype):
        _integer_ends(start, end, dtype, "logspace")
        if not all(math.isfinite(v) for v in values):
            raise NotApplicable("a non-finite power in an integer dtype")
        values = [math.trunc(v) for v in values]
    return made(values, (steps,), dtype)


# -- full, eye, *_like ---------------------------------------------------------------------------

def _fill_dtype(fill) -> torch.dtype:
    """What ``full(size, fill)`` infers: bool, int64, the default float or complex dtype."""
    if isinstance(fill, bool):
        return torch.bool
    if isinstance(fill, int):
        return torch.int64
    if isinstance(fill, complex):
        return torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64
    return torch.get_default_dtype()


def cast_fill(fill, dtype: torch.dtype):
    """The fill value as ``dtype`` holds it (a float truncated into an integer dtype)."""
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        return fill
    if isinstance(fill, float):
        if not math.isfinite(fill):
            raise NotApplicable(f"{fill!r} into {dtype} (torch refuses it)")
        return math.trunc(fill)
    return int(fill)


def filled(shape, fill, dtype: torch.dtype) -> torch.Tensor:
    return made([cast_fill(fill, dtype)] * math.prod(shape), shape, dtype)


def full_reference(inputs, kwargs):
    fill = kwargs["fill_value"]
    return filled(tuple(kwargs["size"]), fill, result_dtype(inputs, kwargs, _fill_dtype(fill)))


def eye_reference(inputs, kwargs):
    n = kwargs["n"]
    m = kwargs.get("m")
    m = n if m is None else m
    if n < 0 or m < 0:
        raise NotApplicable("a negative size (torch refuses it)")
    return made([1 if i == j else 0 for i in range(n) for j in range(m)], (n, m), result_dtype(inputs, kwargs))


def like_reference(value=None):
    """zeros_like (0), ones_like (1), full_like (the call's fill_value)."""
    def reference(inputs, kwargs):
        x = inputs[0]
        fill = kwargs["fill_value"] if value is None else value
        dtype = kwargs.get("dtype") or x.dtype
        return filled(tuple(x.shape), fill, dtype)
    return reference


FORMULAS: dict[str, Reference] = {
    "arange": arange_reference,
    "linspace": linspace_reference,
    "logspace": logspace_reference,
    "full": full_reference,
    "eye": eye_reference,
    "zeros_like": like_reference(0),
    "ones_like": like_reference(1),
    "full_like": like_reference(),
}
