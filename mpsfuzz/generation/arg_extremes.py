"""Arguments at the ends of their valid ranges (issue 38, *argument extremes*).

Upstream reports keep finding kernels that overflow a 32-bit index or an output-size
computation on an argument a builder never draws: ``max_pool2d(dilation=2**31 - 1)``
(pytorch#189664), ``avg_pool2d(stride=2**31)`` (#147613), ``fold`` with a kernel near
INT64_MAX (#188959), ``interpolate`` with a subnormal scale (#191850), ``addcmul`` with
``value`` ~1e18 (#153210), ``cosine_similarity`` with ``eps=-9.7e23`` (#153209). The op
builders draw small, typical values (a stride of 1-3); this module moves one of a drawn
case's keyword arguments to an extreme of its type (in the ``argument-extreme`` boundary
sibling a campaign makes of every other case: strategies.boundary_sibling), so the class joins every op by the
names of its parameters, not op by op.

A parameter joins by its name (``EXTREME_CLASSES``): the class says which extremes it
takes. Parameters that size an output (``padding``, ``output_size``, ``bins``,
``minlength``, ``num_classes``, ``repeats``, a factory's ``end``; the stride and dilation
of an op of semantics ``window-sizes-output``, a transposed convolution) are left out: an
extreme there asks for an output of gigabytes, which a valid call must then allocate on
the host (the large classes grow sizes with references that stay small). Probabilities
(``p``, ``q``, ``label_smoothing``) are left out too: outside [0, 1] they are rejected
by argument checks alike on every backend. The random family's parameters are the
distribution oracle's (an extreme mean gives every backend infinities), not this class's,
and the large classes' cases are about their sizes.

The extremes of an integer sit where 32- and 64-bit arithmetic wraps (2^31 - 1, 2^31,
2^32 + 1, 2^63 - 1 and their negatives where a sign is valid); those of a float at
the smallest subnormal, the smallest normal float32, the largest float32 and 1e300
(beyond float32: a kernel that converts it saturates or overflows).

A *number* (a scalar operand or coefficient: ``margin``, ``threshold``, ``fill_value``)
is converted into the dtype the op computes in, and one that dtype cannot hold (3.4e38
or 1e300 into float16, 5e-324 into float32, -1e300 into int8) is an undefined
conversion: torch refuses it where it checks (``value cannot be converted to type
at::Half without overflow``), a kernel that converts it unchecked saturates or rounds
it to 0, and which of these a backend does is no bug (an H200's CUDA refused
``threshold=-3.4e38`` of a float16 input where CPU saturated, and raised
``x ** (-1e300)`` of float32 where CPU computed in float64; docs/real-findings.md). So a
number takes the extremes above that its dtype holds, and that dtype's own ends (its
largest value, its smallest normal and subnormal): a float64 case still gets 1e300, a
float16 case 65504 (``number_dtype``, ``holds``).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from . import dtypes as dt

INT_EXTREMES = (2**31 - 1, 2**31, 2**32 + 1, 2**63 - 1, -2**31, -2**63)
POSITIVE_INT_EXTREMES = (2**31 - 1, 2**31, 2**32 + 1, 2**63 - 1)
FLOAT_EXTREMES = (5e-324, -5e-324, 1.1754943508222875e-38, 3.4028234663852886e38,
                  -3.4028234663852886e38, 1e300, -1e300)
TINY_FLOAT_EXTREMES = (5e-324, 2.2250738585072014e-308, 1e-300)

# class -> (extremes of an int value, extremes of a float value); None: the class takes
# no value of that type.
_CLASSES: dict[str, tuple[tuple | None, tuple | None]] = {
    # a window's extent and step: positive by definition (a kernel of 2^31 - 1 makes the
    # output-size formula wrap; a stride of 2^31 gives one output where it is valid)
    "window": (POSITIVE_INT_EXTREMES, None),
    # an offset into or along a dim: any integer is valid (tril's diagonal, roll's
    # shifts) or an index error (select's index), and a kernel that wraps it is wrong
    "offset": (INT_EXTREMES, None),
    # a scalar operand or coefficient: any number of its type
    "number": (INT_EXTREMES, FLOAT_EXTREMES),
    # a scale factor: positive, the tiny ones (a huge one asks for a huge output)
    "scale": (None, TINY_FLOAT_EXTREMES),
}

EXTREME_CLASSES: dict[str, str] = {
    "kernel_size": "window", "dilation": "window", "stride": "window", "divisor_override": "window",
    "diagonal": "offset", "offset": "offset", "shifts": "offset", "index": "offset", "ignore_index": "offset",
    # embedding_bag's bag offsets (pytorch#193095: an offset of -10^12 read out of bounds)
    # and ctc_loss's lengths: values a kernel indexes with, given as a list
    "offsets": "offset", "input_lengths": "window", "target_lengths": "window",
    "eps": "number", "margin": "number", "lambd": "number", "negative_slope": "number", "delta": "number",
    "threshold": "number", "min_val": "number", "max_val": "number", "min": "number", "max": "number",
    "value": "number", "other": "number", "scalar": "number", "alpha": "number", "beta": "number",
    "scale": "number", "norm_type": "number", "maxnorm": "number", "max_norm": "number", "nan": "number",
    "posinf": "number", "neginf": "number", "fill_value": "number", "exponent": "number",
    "correction": "number", "lower": "number", "upper": "number", "weight": "number", "d": "number",
    "rtol": "number",
    "scale_factor": "scale",
}

# The window arguments that size the output of an op of semantics window-sizes-output.
WINDOW_SIZES_OUTPUT = ("stride", "dilation")

# Families whose arguments are not this class's (see the module docstring); a user's
# kernel documents the values it takes, and is left out too.
EXCLUDED_FAMILIES = ("random", "large", "kernels")


def number_dtype(case) -> str | None:
    """The dtype ``case``'s numbers are converted into: its ``dtype`` keyword argument
    (``full_like(x, dtype=float16, fill_value=...)``), else its first floating or
    complex input's, else its first input's; None without either."""
    named = dict(case.kwargs).get("dtype")
    if named is not None and hasattr(named, "name"):
        return named.name
    names = [r.dtype for r in case.inputs]
    return next((n for n in names if n in dt.FLOAT or n in dt.COMPLEX), names[0] if names else None)


def _range(dtype: str) -> tuple[float, float, float]:
    """(lowest, largest, smallest non-zero magnitude) a value of ``dtype`` holds."""
    if dtype == "bool":
        return 0, 1, 1
    info = dt.finfo_or_iinfo(dtype)
    if dtype in dt.INTEGRAL:
        return info.min, info.max, 1
    return -float(info.max), float(info.max), float(info.tiny) * float(info.eps)   # the smallest subnormal


def holds(dtype: str | None, value) -> bool:
    """Whether a value of ``dtype`` can be ``value`` (to within rounding): not past its
    ends, and not a non-zero float it would flush to 0. Any value without a dtype."""
    if dtype is None:
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return dtype in dt.FLOAT or dtype in dt.COMPLEX   # an infinity or NaN is a float's own
    low, high, smallest = _range(dtype)
    return low <= value <= high and (value == 0 or abs(value) >= smallest)


def own_ends(dtype: str | None) -> tuple[float, ...]:
    """A floating dtype's own extremes as float arguments: its largest value and its
    negative, its smallest normal and its smallest subnormal."""
    if dtype is None or not (dtype in dt.FLOAT or dtype in dt.COMPLEX):
        return ()
    info = dt.finfo_or_iinfo(dtype)
    return (float(info.max), -float(info.max), float(info.tiny), float(info.tiny) * float(info.eps))


def _extremes_for(name: str, value: Any, dtype: str | None = None) -> tuple:
    """The extremes ``value`` of parameter ``name`` may move to (empty: none); a number
    only to those ``dtype`` holds, and that dtype's own ends."""
    ints, floats = _CLASSES[EXTREME_CLASSES[name]]
    if isinstance(value, bool):
        return ()
    if isinstance(value, int):
        extremes = ints or ()
    elif isinstance(value, float):
        extremes = floats or ()
        if extremes and EXTREME_CLASSES[name] == "number":
            extremes = tuple(dict.fromkeys(extremes + own_ends(dtype)))
    else:
        return ()
    if EXTREME_CLASSES[name] == "number":
        extremes = tuple(e for e in extremes if holds(dtype, e))
    return extremes


def _slots(name: str, value: Any, dtype: str | None = None) -> list[tuple[int | None, tuple]]:
    """Where in ``value`` an extreme may go: the value itself (slot None) or one element
    of a tuple of numbers (a kernel_size of (3, 3) -> (2^31 - 1, 3)), with its extremes."""
    if isinstance(value, tuple):
        return [(k, _extremes_for(name, v, dtype)) for k, v in enumerate(value) if _extremes_for(name, v, dtype)]
    extremes = _extremes_for(name, value, dtype)
    return [(None, extremes)] if extremes else []


def admits_extremes(spec, kwargs, dtype: str | None = None) -> bool:
    """Whether a case of ``spec`` with these keyword arguments (a dict or the case's
    pairs) has one that can move to an extreme (``dtype``: :func:`number_dtype`)."""
    return bool(candidates(spec, kwargs, dtype))


def candidates(spec, kwargs, dtype: str | None = None) -> list[tuple[str, int | None, tuple]]:
    """(name, slot, extremes) for each argument of ``kwargs`` that can move; a number
    only to the extremes ``dtype`` (the case's :func:`number_dtype`) holds."""
    if spec.family in EXCLUDED_FAMILIES or spec.size_class or "large" in spec.semantics:
        # (a size class's cases are about their sizes, and an extreme on 65,537 rows costs
        # the host a large reference for an error path the base op's cases reach)
        return []
    pairs = kwargs.items() if isinstance(kwargs, dict) else kwargs
    sizing = WINDOW_SIZES_OUTPUT if "window-sizes-output" in spec.semantics else ()
    return [(name, slot, extremes) for name, value in sorted(pairs, key=lambda kv: kv[0])
            if name in EXTREME_CLASSES and name not in sizing for slot, extremes in _slots(name, value, dtype)]


def with_extreme(kwargs: dict, name: str, slot: int | None, extreme) -> dict:
    """``kwargs`` with argument ``name`` (element ``slot`` of it) set to ``extreme``."""
    value = kwargs[name]
    if slot is not None:
        value = tuple(extreme if k == slot else v for k, v in enumerate(value))
    else:
        value = extreme
    return {**kwargs, name: value}


# Where a value counts as extreme: the ranges the extremes above stand for, not the
# values themselves, so a minimised case keeps its word (a shrinker that moves a diagonal
# of 2^32 + 1 to 2^32 - 1 keeps it past int32 and extreme).
_INT_EDGE = 2**31 - 1
_FLOAT_TINY, _FLOAT_HUGE = 1.1754943508222875e-38, 3.4028234663852886e38


def is_extreme(value: Any, dtype: str | None = None) -> bool:
    """Whether a value (or an element of a tuple) lies where the extremes drawn here do:
    an integer at or past int32's edges, a float that is subnormal in float32 (not 0) or
    at or past float32's largest, or at a floating ``dtype``'s own ends (float16's 65504,
    its smallest normal 6.1e-05 and below: :func:`own_ends` draws it, and a sibling
    carrying it reads as extreme)."""
    if isinstance(value, tuple):
        return any(is_extreme(v, dtype) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return value >= _INT_EDGE or value <= -_INT_EDGE - 1
    if value == 0 or math.isnan(value):
        return False
    if math.isinf(value):
        return True
    ends = own_ends(dtype)
    if ends and (abs(value) >= ends[0] or abs(value) <= ends[2]):
        return True
    return abs(value) <= _FLOAT_TINY or abs(value) >= _FLOAT_HUGE


def extreme_arguments(case) -> tuple[str, ...]:
    """The names of ``case``'s keyword arguments that hold an extreme (0.0 alone is an
    ordinary value: builders draw it)."""
    dtype = number_dtype(case)
    return tuple(name for name, value in case.kwargs
                 if name in EXTREME_CLASSES and is_extreme(value, dtype if EXTREME_CLASSES[name] == "number" else None))


def past_32_bits(case) -> tuple[str, ...]:
    """``name=value`` of each integer keyword argument of ``case`` outside int32."""
    def wide(v):
        if isinstance(v, tuple):
            return any(wide(e) for e in v)
        return isinstance(v, int) and not isinstance(v, bool) and not -2**31 <= v < 2**31
    return tuple(f"{name}={value!r}" for name, value in case.kwargs if wide(value))


def ordinary(value: Any) -> Any:
    """A typical value in place of an extreme, of the same type and sign (what ablation
    tries to say that the extreme is the condition): 1 or -1, 1.0 or -1.0; a tuple's
    extremes replaced element by element."""
    if isinstance(value, tuple):
        return tuple(ordinary(v) if is_extreme(v) else v for v in value)
    if isinstance(value, int):
        return -1 if value < 0 else 1
    return -1.0 if value < 0 else 1.0


def without_extremes(case):
    """``case`` with each extreme argument set to an ordinary value."""
    extreme = set(extreme_arguments(case))
    return replace(case, kwargs=tuple((k, ordinary(v) if k in extreme else v) for k, v in case.kwargs))
