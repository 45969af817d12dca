"""Factories: tensors made from arguments alone (``arange``, ``linspace``, ``logspace``,
``full``, ``eye``) or shaped like an input (``zeros_like``, ``ones_like``,
``full_like``), each made on the device under test.

The size-creating ones take a 0-d dummy input that only carries the device and the dtype
(``device=x.device, dtype=x.dtype``, as the random family's factories and
``tril_indices``/``triu_indices`` in ``ops/indexing.py`` do); now and then they pass
``dtype=None`` where torch then infers or defaults the dtype. The ``*_like`` ones take a
real (strided) input, a ``dtype=`` other than its own now and then and a memory format
(preserve, contiguous, channels_last at rank 4, channels_last_3d at rank 5).
``empty``/``empty_like`` are left out: their values are undefined.

Lengths stay small (at most a few thousand elements, so that a case runs in
milliseconds); the large numbers are values, not lengths:

- ``arange``: ``end``, ``(start, end)`` or ``(start, end, step)``, negative steps, ends
  that are not a multiple of the step away (the length is ``ceil((end - start) / step)``),
  every integer dtype's bounds, and in int64 starts past 2^31, 2^32 and 2^53 and near
  the int64 bounds with a few elements (a 32-bit index, accumulator or argument of a
  kernel wraps there); float steps in the floating dtypes;
- ``linspace``/``logspace``: 0, 1, a few and a few hundred steps, int dtypes too, bases
  for logspace. An integer result truncates the exact value ``start + i * (end - start)
  / (steps - 1)`` (``base ** that`` for logspace). Where that value is itself an integer
  but the step is no binary fraction (11 to -5 in 39 steps: position 19 is exactly 3,
  and step * 19 in double may land just under it), which side of the integer a
  backend's floating evaluation lands on, so whether truncation gives 3 or 2, is its
  rounding, not the op's definition (eager CPU's vectorised loop gives 2 there). The
  builders draw integer-dtype calls whose truncation is unambiguous: ends within 2^52
  (a double, which eager CPU computes in, holds them), and a step that is a binary
  fraction (every value exact in double) or one with no exact integer strictly inside
  the range and values within 2^36 (the fractional parts, at least 1 / (steps - 1), stay
  far above double's rounding);
- ``full``/``full_like``: fill values at the dtype's extremes (int64's max and min,
  2^31, 2^32, the largest finite float, the smallest normal and subnormal, inf, -inf,
  nan, -0.0) and ordinary ones (a float truncated into an integer dtype, a bool);
- ``eye``: n and m from 0, m left out or not.
"""
from __future__ import annotations

import math
from fractions import Fraction

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..huge_samples import HUGE_RANGE_DTYPES, range_args, range_end, range_formula, range_shapes, range_windows
from ..large_sizes import HUGE_SUFFIX, SIZE_CLASS
from ..opspec import OpSpec, ShapeBudget, any_shape, draw_rank, draw_side, fit, integers_once, register, sampled_once
from ..recipes import DtypeArg

FAMILY = "factory"

FLOAT = ("float32", "float64", "float16", "bfloat16")
INTS = ("int64", "int32", "int16", "int8", "uint8")
RANGE_DTYPES = INTS + FLOAT          # arange, linspace: CPU has kernels for these
LOG_DTYPES = FLOAT + INTS
FILL_DTYPES = FLOAT + INTS + ("bool",)
LIKE_DTYPES = FLOAT + INTS + ("bool", "complex64")

# The most elements a factory makes (its length is drawn; the values may be huge).
MAX_NUMEL = 4096

# int64 starts where a narrower index, accumulator or argument would go wrong: 2^31 and
# 2^32 (32 bits, signed and unsigned), 2^53 (a double stops being exact), near the int64
# bounds. Each is a magnitude; the builder adds a small offset and a sign.
HUGE = (2**31, 2**32, 2**33, 2**40, 2**53, 2**62, 2**63 - 64)
HUGE_STEPS = (1, 1, 2, 3, 7, 1000, 2**16 + 1, 2**30 + 3, 2**31, 2**32 + 5)


def _dummy_shapes(draw, budget: ShapeBudget):
    return ((),)   # a 0-d tensor that carries the device and dtype


def _dtype_of(x, kw: dict) -> None:
    """The dummy input's dtype as the call's ``dtype=``, unless the case passes one (None
    included) or an ``out=`` (whose dtype is the result's: torch refuses another)."""
    if "out" not in kw:
        kw.setdefault("dtype", x.dtype)


def _int_limits(dtype_name: str) -> tuple[int, int]:
    return dt.EXACT_INTEGERS[dtype_name]


# -- arange ---------------------------------------------------------------------------------

def arange_length(start, end, step, dtype_name: str) -> int:
    """The length torch gives arange(start, end, step) in ``dtype_name``: for int64 in
    integer arithmetic, else ``ceil((end - start) / step)`` in double (RangeUtils.h)."""
    if dtype_name == "int64" and all(isinstance(v, int) for v in (start, end, step)):
        sign = (step > 0) - (step < 0)
        return max(0, int(Fraction(end - start + step - sign, step)))   # truncated toward zero, as C's /
    return max(0, math.ceil((float(end) - float(start)) / float(step)))


def _end_after(start, step, n: int, draw, *, integer: bool):
    """An end that gives ``n`` elements from ``start`` by ``step``: ``start + n * step``,
    or short of it by part of a step (the length is a ceiling); ``start`` for none."""
    if not n:
        return start
    if integer:
        short = draw(integers_once(0, abs(step) - 1)) if abs(step) > 1 and draw(st.booleans()) else 0
        return start + n * step - (short if step > 0 else -short)
    part = draw(sampled_once((0.0, 0.0, 0.25, 0.5, 0.9)))
    return start + (n - part) * step


def _arange_ints(draw, dtype_name: str) -> dict:
    lo, hi = _int_limits(dtype_name)
    kind = draw(sampled_once(("small", "small", "bounds", "huge") if dtype_name == "int64" else
                             ("small", "small", "bounds")))
    if kind == "huge":
        # past 2^31, 2^32, 2^53, near the int64 bounds: a few elements
        start = draw(sampled_once(HUGE)) + draw(integers_once(-8, 8))
        start = -start if draw(st.booleans()) else start
        if draw(integers_once(0, 9)) == 0:
            start = lo + draw(integers_once(0, 8))        # int64's min itself
        step = draw(sampled_once(HUGE_STEPS)) * (-1 if draw(st.booleans()) else 1)
        n = draw(integers_once(0, 40))
    elif kind == "bounds":
        # at the dtype's own bounds, counting towards or away from them
        start = draw(sampled_once((lo, hi, lo + 1, hi - 1, 0)))
        step = draw(sampled_once((1, -1, 2, -3, 7, -16)))
        n = draw(integers_once(0, 64))
    else:
        start = draw(integers_once(max(lo, -20), min(hi, 20)))
        step = draw(sampled_once((1, 1, 2, 3, -1, -2, -4, 5, 16)))
        n = draw(st.one_of(integers_once(0, 24), integers_once(25, MAX_NUMEL)))
    # values start + i * step, i < n, within the dtype (a wrapped value is no one's answer)
    room = (hi - start) // step if step > 0 else (start - lo) // -step
    n = max(0, min(n, room + 1 if room >= 0 else 0, MAX_NUMEL))
    end = _end_after(start, step, n, draw, integer=True)
    if not (-2**63 <= end < 2**63 and -2**63 <= end - start + step < 2**63):   # torch's length in int64
        end = start + n * step if -2**63 <= start + n * step < 2**63 else start
    return {"start": start, "end": end, "step": step}


_FLOAT_STARTS = (0.0, 1.0, -1.0, 0.5, -2.5, 0.1, 1 / 3, 10.0, -100.0, 1000.5)
_FLOAT_STEPS = (1.0, 0.5, -0.5, 0.1, -0.1, 0.25, 1 / 3, 2.0, -3.0, 1e-3, 7.5)
# float16 holds 65504 at most, bfloat16 about 3.4e38 (int64 starts only in the wider ones)
_FLOAT_SPAN = {"float16": 1000.0, "bfloat16": 4000.0, "float32": 1e6, "float64": 1e6}


def _arange_floats(draw, dtype_name: str) -> dict:
    span = _FLOAT_SPAN[dtype_name]
    how = draw(integers_once(0, 5))
    if how == 0:       # integer arguments, a floating result
        start, step = draw(integers_once(-20, 20)), draw(sampled_once((1, 2, -1, 3)))
    elif how == 1 and dtype_name in ("float32", "float64"):   # values past 2^24, 2^31, 2^32
        start = float(draw(sampled_once((2**24, 2**31, 2**32, 2**40)))) * (-1 if draw(st.booleans()) else 1)
        step = draw(sampled_once((1.0, 0.5, 3.0, -1.0)))
    else:
        start = draw(st.one_of(sampled_once(_FLOAT_STARTS),
                               st.floats(-span, span, allow_nan=False, allow_infinity=False, width=32)))
        step = draw(sampled_once(_FLOAT_STEPS))
    n = draw(st.one_of(integers_once(0, 24), integers_once(25, 1000)))
    # within the dtype's range: |start + n * step| <= span (past 2^24: a few elements)
    limit = max(0, int((span - abs(start)) / abs(step))) if abs(start) <= span else 16
    n = min(n, limit)
    integer = all(isinstance(v, int) for v in (start, step))
    end = _end_after(start, step, n, draw, integer=integer)
    if arange_length(start, end, step, dtype_name) > MAX_NUMEL:
        end = start
    return {"start": start, "end": end, "step": step}


def _arange_args(draw, shapes, dtypes):
    dtype_name = dtypes[0]
    args = _arange_ints(draw, dtype_name) if dtype_name in INTS else _arange_floats(draw, dtype_name)
    start, end, step = args["start"], args["end"], args["step"]
    out: dict = {}
    form = draw(integers_once(0, 3))
    if form == 0 and step == 1 and start == 0:
        out = {"end": end}
    elif form <= 1 and step == 1:
        out = {"start": start, "end": end}
    else:
        out = {"start": start, "end": end, "step": step}
    if all(isinstance(v, int) for v in out.values()) and draw(integers_once(0, 2)) == 0:
        out["dtype"] = None                     # inferred from the integer arguments: int64
    return out


def _arange(x, **kw):
    _dtype_of(x, kw)
    return torch.arange(**kw, device=x.device)


# -- past 2^31 and 2^32 elements: arange judged on windows against its formula (issue 38) ----

def _range_windows(x, *, start, step):
    """``torch.arange`` of ``x``'s length (``x``: a stride-0 view that carries the length,
    the dtype and the device) from ``start`` by ``step``, made whole on the device and cut
    there to the windows that are judged (generation/huge_samples.py)."""
    n = x.shape[0]
    out = torch.arange(start, range_end(start, step, n), step, dtype=x.dtype, device=x.device)
    return torch.cat([out[a:b] for a, b in range_windows(out.numel())])


def _range_formula(x, *, start, step):
    """The reference: start + i * step at the same windows, computed with Python integers
    (no CPU kernel makes the range)."""
    return range_formula(start, step, x.shape[0], x.dtype)


# -- linspace, logspace ---------------------------------------------------------------------

STEPS = (0, 1, 2, 3, 4, 5, 7, 10, 16, 17, 33, 100, 255, 256, 257, 300, 500)


def unambiguous_truncation(start: int, end: int, steps: int) -> bool:
    """Whether every value ``start + i * (end - start) / (steps - 1)`` truncates to the same
    integer however a backend rounds its floating evaluation: ends within 2^52 (a double
    holds them), and a step that is a binary fraction (every value exact in double), or no
    exact integer strictly inside (each fractional part is at least 1 / (steps - 1) from
    an integer, values within 2^36)."""
    if max(abs(start), abs(end)) >= 2**52:
        return False     # (a backend computes in double, which stops holding every integer)
    if steps < 3 or start == end:
        return True
    step = Fraction(end - start, steps - 1)
    if step.denominator & (step.denominator - 1) == 0:
        return True
    return math.gcd(steps - 1, abs(end - start)) == 1 and max(abs(start), abs(end)) < 2**36


def _linspace_ints(draw, dtype_name: str, *, limit: tuple[int, int] | None = None) -> tuple[int, int, int]:
    lo, hi = limit or _int_limits(dtype_name)
    steps = draw(sampled_once(STEPS))
    for _ in range(8):
        kind = draw(integers_once(0, 4))
        if kind == 0 and dtype_name == "int64" and limit is None:
            # past 2^31, 2^32 (a 32-bit or float32 evaluation goes wrong there)
            base = draw(sampled_once((2**31, 2**32, 2**33 + 1, 2**40)))
            base = -base if draw(st.booleans()) else base
            start, end = base, base + draw(integers_once(-1000, 1000))
        elif kind == 1:   # the dtype's bounds
            start, end = draw(sampled_once((lo, hi, 0))), draw(sampled_once((hi, lo, 0, 1)))
        else:
            start = draw(integers_once(max(lo, -300), min(hi, 300)))
            end = draw(integers_once(max(lo, -300), min(hi, 300)))
        if unambiguous_truncation(start, end, steps):
            return start, end, steps
    # a multiple of steps - 1 apart: every value an integer, exactly
    start = max(lo, min(hi, 0))
    return start, start + (steps - 1 if steps > 1 and start + steps - 1 <= hi else 0), steps


_LIN_FLOATS = (0.0, 1.0, -1.0, 0.5, 10.0, -10.0, 0.1, -2.5, 100.0, 1000.0, -1000.0, 1 / 3)


def _linspace_args(draw, shapes, dtypes):
    dtype_name = dtypes[0]
    if dtype_name in INTS:
        start, end, steps = _linspace_ints(draw, dtype_name)
    else:
        span = _FLOAT_SPAN[dtype_name]
        value = st.one_of(sampled_once(_LIN_FLOATS), st.floats(-span, span, allow_nan=False, width=32))
        start, end = draw(value), draw(value)
        steps = draw(sampled_once(STEPS))
    out = {"start": start, "end": end, "steps": steps}
    if dtype_name in INTS and draw(integers_once(0, 3)) == 0:
        out["dtype"] = None     # the default dtype (the dummy's dtype is not the result's)
    return out


def _linspace(x, **kw):
    _dtype_of(x, kw)
    return torch.linspace(**kw, device=x.device)


BASES = (10.0, 2.0, math.e, 0.5, 3.0, 1.0, -2.0)
# Exponents: where the result stays well inside the dtype (away from overflow, where
# rounding decides between the largest finite value and inf, and from subnormals).
_EXPONENT_SPAN = {"float16": 4.0, "bfloat16": 30.0, "float32": 30.0, "float64": 100.0}


def _logspace_args(draw, shapes, dtypes):
    dtype_name = dtypes[0]
    steps = draw(sampled_once(STEPS))
    if dtype_name in INTS:
        # integer exponents of 2, 3 and 10 (and 0.5: truncated to 0) within the dtype
        base = draw(sampled_once((10.0, 2.0, 3.0, 0.5)))
        lo, hi = _int_limits(dtype_name)
        # base ** top within the dtype and within 2^53 (where double, which the value is
        # computed in, stops holding every integer)
        top = 6
        if base > 1:
            top = 0
            while int(base) ** (top + 1) <= min(hi, 2**53):
                top += 1
        start, end, steps = _linspace_ints(draw, dtype_name, limit=(0 if base > 1 else max(lo, -6), max(top, 0)))
        if base > 1 and max(start, end) > top:
            start, end = min(start, top), min(end, top)
        if not unambiguous_truncation(start, end, steps):
            end = start
        out = {"start": start, "end": end, "steps": steps, "base": base}
        if draw(integers_once(0, 3)) == 0:
            out["dtype"] = None     # the default dtype (the dummy's dtype is not the result's)
        return out
    span = _EXPONENT_SPAN[dtype_name]
    base = draw(sampled_once(BASES))
    if dtype_name in ("float16", "bfloat16"):
        # exponents the dtype holds exactly (a backend may round them to it first): an
        # eighth of an integer apart
        start = draw(integers_once(-int(span) * 8, int(span) * 8)) / 8
        end = draw(integers_once(-int(span) * 8, int(span) * 8)) / 8
        steps = draw(sampled_once((0, 1, 2, 3, 5, 9, 17, 33, 65, 129, 257)))
        if steps > 1 and (Fraction(end) - Fraction(start)) / (steps - 1) * 8 % 1:
            end = start + (steps - 1) / 8 * draw(sampled_once((1, -1, 2)))
            end = max(-span, min(span, end))
            if (Fraction(end) - Fraction(start)) / (steps - 1) * 8 % 1:
                end = start
    else:
        value = st.one_of(sampled_once((0.0, 1.0, -1.0, 2.0, -3.0, 0.5, 0.1, 10.0)),
                          st.floats(-span, span, allow_nan=False, width=32))
        start, end = draw(value), draw(value)
    if base < 0:   # a negative base: integer exponents only (a fraction gives NaN, fine, but dull)
        start, end = float(round(start)), float(round(end))
        if steps > 1 and (end - start) % (steps - 1):
            end = start
    out = {"start": start, "end": end, "steps": steps}
    if base != 10.0 or draw(st.booleans()):
        out["base"] = base
    return out


def _logspace(x, **kw):
    _dtype_of(x, kw)
    return torch.logspace(**kw, device=x.device)


# -- full, eye ------------------------------------------------------------------------------

def fill_values(dtype_name: str) -> tuple[tuple, ...]:
    """Fill values a ``dtype_name`` result holds, in groups drawn alike: its extremes,
    its special values, ordinary ones."""
    if dtype_name == "bool":
        return ((True, False), (1, 0))
    if dtype_name in INTS:
        lo, hi = _int_limits(dtype_name)
        extremes = [lo, hi, hi - 1, lo + 1]
        if dtype_name == "int64":
            extremes += [2**31, 2**32, -2**31 - 1, 2**32 + 1, 2**53 + 1, -2**32]
        elif dtype_name == "int32":
            extremes += [65536, -65537]
        ordinary = [0, 1, True] + ([-7, 2.75, -3.5] if lo < 0 else [7])   # a float truncates toward zero
        return tuple(extremes), tuple(ordinary)
    info = torch.finfo(dt.to_torch(dtype_name))
    extremes = [info.max, -info.max, info.tiny, info.smallest_normal / 4]
    if info.max > 2**64:
        extremes += [2**31, 2**32, 2**63 - 1, -2**63]   # integers past 2^31, 2^32, int64's bounds
    return tuple(extremes), (math.inf, -math.inf, math.nan, -0.0), (0.0, 0.1, 1 / 3, -2.5, 7, True)


def draw_fill(draw, dtype_name: str):
    groups = fill_values(dtype_name)
    return draw(sampled_once(groups[draw(integers_once(0, len(groups) - 1))]))


def _size(draw) -> tuple[int, ...]:
    """A size: 0-d, empty, 1-D long, or up to 6 dims, at most MAX_NUMEL elements."""
    budget = ShapeBudget(max_rank=6, max_side=16, allow_empty=True, max_numel=MAX_NUMEL)
    how = draw(integers_once(0, 9))
    if how == 0:
        return ()
    if how == 1:
        return (draw(integers_once(64, MAX_NUMEL)),)
    rank = draw_rank(draw, budget, 1, 6)
    return fit([draw_side(draw, budget) for _ in range(rank)], budget)


def _full_args(draw, shapes, dtypes):
    dtype_name = dtypes[0]
    fill = draw_fill(draw, dtype_name)
    out = {"size": _size(draw), "fill_value": fill}
    # dtype=None: torch infers it from the fill (bool, int64, the default float dtype)
    inferred = {bool: "bool", int: "int64", float: "float32"}[type(fill)]
    if inferred == dtype_name and draw(integers_once(0, 3)) == 0:
        out["dtype"] = None
    return out


def _full(x, **kw):
    _dtype_of(x, kw)
    return torch.full(**kw, device=x.device)


def _eye_args(draw, shapes, dtypes):
    n = draw(st.one_of(integers_once(0, 4), integers_once(5, 64)))
    out = {"n": n}
    if draw(integers_once(0, 2)):
        out["m"] = draw(st.one_of(integers_once(0, 4), integers_once(5, 64)))
    if draw(integers_once(0, 7)) == 0:
        out["dtype"] = None     # the default dtype
    return out


def _eye(x, **kw):
    _dtype_of(x, kw)
    return torch.eye(**kw, device=x.device)


# -- *_like ---------------------------------------------------------------------------------

# The memory formats a *_like result may take besides the input's own (preserve_format).
_FORMATS = {4: ("contiguous_format", "channels_last"), 5: ("contiguous_format", "channels_last_3d")}


def _like_dtype(draw, dtype_name: str) -> str | None:
    """A ``dtype=`` other than the input's in half the cases (None: none passed)."""
    if draw(st.booleans()):
        return None
    return draw(sampled_once(tuple(d for d in LIKE_DTYPES if d != dtype_name)))


def _like_args(fill: bool):
    def build(draw, shapes, dtypes):
        out: dict = {}
        dtype_name = _like_dtype(draw, dtypes[0])
        if dtype_name is not None:
            out["dtype"] = DtypeArg(dtype_name)
        if draw(integers_once(0, 2)) == 0:
            out["memory_format"] = draw(sampled_once(("preserve_format",)
                                                     + _FORMATS.get(len(shapes[0]), ("contiguous_format",))))
        if fill:
            result = dtype_name or dtypes[0]
            out["fill_value"] = draw_fill(draw, "float32" if result == "complex64" else result)
        return out
    return build


def _like(factory):
    """A *_like factory with its memory format drawn by name (torch.channels_last)."""
    def call(x, **kw):
        if "memory_format" in kw:
            kw["memory_format"] = getattr(torch, kw["memory_format"])
        return factory(x, **kw)
    call.__name__ = factory.__name__
    return call


# -- specs ----------------------------------------------------------------------------------

def op(name: str, fn, shapes, dtypes, doc: str, **kw) -> OpSpec:
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=tuple(dtypes), doc=doc, **kw)


ANY_SHAPE = any_shape(1)

register(
    op("arange", _arange, _dummy_shapes, RANGE_DTYPES,
       "arange(end) / (start, end) / (start, end, step): negative steps, ends short of a step, every integer "
       "dtype's bounds, int64 values past 2^31, 2^32, 2^53 and near its bounds, float steps (the dummy input "
       "names device and dtype)", args=_arange_args, out=True),
    # arange past 2^31 and 2^32 elements (pytorch#197673: CUDA int64 arange of N > 2^32 gives
    # wrong values), its length riding on the input's shape so that triage names and shrinks
    # it; judged against the formula, so its arbiter has nothing to add (the reference is
    # exact).
    op("arange" + HUGE_SUFFIX, _range_windows, range_shapes, HUGE_RANGE_DTYPES,
       "arange past 2^31 and 2^32 elements (int64 starts past 2^31, 2^32, 2^53, negative steps; float32, "
       "bfloat16, float64 of one sign), judged against start + i * step computed with Python integers on "
       "windows at the start, the end and across every power of two", args=range_args,
       allow_specials=False, allow_nonfinite=False, semantics=frozenset({"large"}), reference_fn=_range_formula,
       size_class=SIZE_CLASS, base="arange"),
    op("linspace", _linspace, _dummy_shapes, RANGE_DTYPES,
       "linspace with 0, 1, a few and a few hundred steps, integer dtypes (truncated, unambiguous), int64 past "
       "2^31 and 2^32", args=_linspace_args, out=True),
    op("logspace", _logspace, _dummy_shapes, LOG_DTYPES,
       "logspace: base ** linspace, bases 10, 2, e, 0.5, 3, 1, -2; integer dtypes (integer exponents)",
       args=_logspace_args, out=True),
    op("full", _full, _dummy_shapes, FILL_DTYPES,
       "full of a drawn size with fill values at the dtype's extremes (int64 max/min, 2^31, 2^32, inf, nan, "
       "-0.0, the largest float, subnormals)", args=_full_args, out=True),
    op("eye", _eye, _dummy_shapes, FILL_DTYPES, "eye(n) and eye(n, m), n and m from 0",
       args=_eye_args, out=True),
    op("zeros_like", _like(torch.zeros_like), ANY_SHAPE, LIKE_DTYPES,
       "zeros shaped like a (strided) input, another dtype, a memory format", args=_like_args(False)),
    op("ones_like", _like(torch.ones_like), ANY_SHAPE, LIKE_DTYPES,
       "ones shaped like a (strided) input, another dtype, a memory format", args=_like_args(False)),
    op("full_like", _like(torch.full_like), ANY_SHAPE, LIKE_DTYPES,
       "full_like with fill values at the result dtype's extremes, another dtype, a memory format",
       args=_like_args(True)),
)
