"""Elementwise ops: unary math, binary arithmetic and comparison, bitwise and logical
ops, ternary ops (where, lerp, addcmul, clamp with tensor bounds) and tensor-scalar forms.

Declared dtypes are what torch defines the op for, not only what eager CPU implements:
where CPU has no kernel (uint16 shifts, complex32 math ...) the oracle recomputes the
reference in a wider dtype. A few integer inputs are declared for float math ops
(``_PROMOTING``) so that the integer-to-float promotion paths are tested too.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from ..catalogue import (OpSpec, any_shape, broadcast_shapes, expand, first_dtype,
                         nonzero_int_divisor, register)
from .. import dtypes as dt

FAMILY = "elementwise"

FLOAT = expand("float")
FC = expand("floating_and_complex")
# Integer inputs that float math ops promote (int -> default float).
_PROMOTING = ("int32", "int64", "uint8", "bool")
FC_PROMOTING = FC + _PROMOTING
FLOAT_PROMOTING = FLOAT + _PROMOTING
REAL = expand("real")
REAL_BOOL = expand("real_and_bool")
NUMERIC = expand("numeric")
ALL = expand("all")
INTEGRAL = expand("integral")
INTEGRAL_BOOL = expand("integral_and_bool")
# complex32 has no kernel anywhere for these; complex64/128 do.
FLOAT_AND_WIDE_COMPLEX = FLOAT + ("complex64", "complex128")


def _is_fc(name: str) -> bool:
    return name in dt.FLOAT or name in dt.COMPLEX


def unary(name: str, fn, dtypes, doc: str, **kw) -> OpSpec:
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=any_shape(1), dtypes=expand(dtypes),
                  doc=doc, **kw)


def binary(name: str, fn, dtypes, doc: str, **kw) -> OpSpec:
    kw.setdefault("input_dtypes", (None, None))
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=broadcast_shapes(2),
                  dtypes=expand(dtypes), doc=doc, **kw)


def ternary(name: str, fn, dtypes, doc: str, **kw) -> OpSpec:
    kw.setdefault("input_dtypes", (None, None, None))
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=broadcast_shapes(3),
                  dtypes=expand(dtypes), doc=doc, **kw)


# -- argument builders ------------------------------------------------------------------

def _alpha_args(name: str = "alpha"):
    """alpha/value multipliers: never a float for integral or bool inputs (torch refuses)."""
    def build(draw, shapes, dtypes):
        values = (1, 2, -1, 0.5) if _is_fc(first_dtype(dtypes)) else (1, 2, -1)
        return {name: draw(st.sampled_from(values))}
    return build


def _clamp_args(draw, shapes, dtypes):
    if _is_fc(first_dtype(dtypes)):
        value = st.one_of(st.integers(-3, 3).map(float),
                          st.floats(-3.0, 3.0, allow_nan=False, width=32))
    else:
        value = st.integers(-5, 5)
    which = draw(st.sampled_from(("both", "min", "max")))
    out = {}
    if which in ("both", "min"):
        out["min"] = draw(value)
    if which in ("both", "max"):
        out["max"] = draw(value)
    return out


def _scalar_args(*, nonzero: bool = False, nonnegative_int: bool = False, name: str = "scalar"):
    """A Python scalar operand of the input's kind (float for float/complex inputs, int
    for integral ones, bool or int for bool ones)."""
    def build(draw, shapes, dtypes):
        d = first_dtype(dtypes)
        if _is_fc(d):
            choices = [2.0, -1.5, 0.5, 3.0, 1e-3, -0.0, 0.0]
        elif d == "bool":
            choices = [True, False, 2]
        else:
            choices = list(range(0 if nonnegative_int else -3, 4))
        if nonzero:
            choices = [c for c in choices if c != 0]
        return {name: draw(st.sampled_from(choices))}
    return build


def _shift_scalar_args(draw, shapes, dtypes):
    return {"scalar": draw(st.integers(0, 7))}


def _round_args(draw, shapes, dtypes):
    return {"decimals": draw(st.sampled_from((1, 2, 0, -1, 3)))}


def _nan_to_num_args(draw, shapes, dtypes):
    out = {}
    if draw(st.booleans()):
        out["nan"] = draw(st.sampled_from((0.0, 1.5, -2.0)))
    if draw(st.booleans()):
        out["posinf"] = draw(st.sampled_from((100.0, 1e4)))
    if draw(st.booleans()):
        out["neginf"] = draw(st.sampled_from((-100.0, -1e4)))
    return out


# -- pre-processing that runs identically on both sides -----------------------------

def _shift_amount(t):
    """Shift amounts must be in [0, bit width): small_int values are -4..4, so signed
    ones take their absolute value (unsigned ones are already 0..4)."""
    return t if t.dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else t.abs()


_nz = nonzero_int_divisor


# -- unary ------------------------------------------------------------------------------

_UNARY_FC = [
    # name, fn, doc
    ("exp", torch.exp, "e**x"),
    ("sqrt", torch.sqrt, "square root (complex32 included: pytorch#148285)"),
    ("rsqrt", torch.rsqrt, "1/sqrt(x)"),
    ("sin", torch.sin, "sine"),
    ("cos", torch.cos, "cosine"),
    ("tan", torch.tan, "tangent"),
    ("tanh", torch.tanh, "hyperbolic tangent"),
    ("sinh", torch.sinh, "hyperbolic sine"),
    ("cosh", torch.cosh, "hyperbolic cosine"),
    ("asin", torch.asin, "arcsine"),
    ("acos", torch.acos, "arccosine"),
    ("atan", torch.atan, "arctangent"),
    ("asinh", torch.asinh, "inverse hyperbolic sine"),
    ("acosh", torch.acosh, "inverse hyperbolic cosine"),
    ("atanh", torch.atanh, "inverse hyperbolic tangent"),
    ("log", torch.log, "natural logarithm"),
    ("log1p", torch.log1p, "log(1 + x)"),
    ("log2", torch.log2, "base-2 logarithm"),
    ("log10", torch.log10, "base-10 logarithm"),
    ("expm1", torch.expm1, "exp(x) - 1"),
    ("exp2", torch.exp2, "2**x"),
    ("sigmoid", torch.sigmoid, "logistic sigmoid"),
    ("reciprocal", torch.reciprocal, "1/x"),
    ("special.sinc", torch.special.sinc, "normalised sinc (pytorch#148471)"),
]
_UNARY_REAL_MATH = [
    ("lgamma", torch.lgamma, "log|gamma(x)|, negative inputs included (pytorch#145740)"),
    ("digamma", torch.digamma, "digamma (psi)"),
    ("erf", torch.erf, "error function"),
    ("erfc", torch.erfc, "complementary error function"),
    ("special.i0", torch.special.i0, "modified Bessel function I0"),
    ("special.i0e", torch.special.i0e, "exponentially scaled I0"),
    ("special.i1", torch.special.i1, "modified Bessel function I1"),
    ("special.entr", torch.special.entr, "elementwise entropy -x*ln(x)"),
    ("special.ndtr", torch.special.ndtr, "standard normal CDF"),
    ("special.log_ndtr", torch.special.log_ndtr, "log of the standard normal CDF"),
    ("special.erfcx", torch.special.erfcx, "scaled complementary error function"),
    ("deg2rad", torch.deg2rad, "degrees to radians"),
    ("rad2deg", torch.rad2deg, "radians to degrees"),
]

register(*(unary(n, f, FC_PROMOTING, d) for n, f, d in _UNARY_FC))
register(*(unary(n, f, FLOAT_PROMOTING, d) for n, f, d in _UNARY_REAL_MATH))
register(
    unary("erfinv", torch.erfinv, FLOAT_PROMOTING, "inverse error function on (-1, 1)",
          input_values=("uniform",)),
    unary("abs", torch.abs, NUMERIC, "absolute value (complex -> real)"),
    unary("neg", torch.neg, NUMERIC, "negation (storage offsets: pytorch#148512)"),
    unary("sign", torch.sign, REAL_BOOL, "sign of a real number"),
    unary("sgn", torch.sgn, ALL, "sign, x/|x| for complex"),
    unary("square", torch.square, NUMERIC, "x*x"),
    unary("floor", torch.floor, REAL, "round down"),
    unary("ceil", torch.ceil, REAL, "round up"),
    unary("round", torch.round, REAL, "round half to even"),
    unary("round_decimals", lambda x, decimals: torch.round(x, decimals=decimals), FLOAT,
          "round to a number of decimals", args=_round_args),
    unary("trunc", torch.trunc, REAL, "round towards zero"),
    unary("frac", torch.frac, FLOAT, "fractional part"),
    unary("bitwise_not", torch.bitwise_not, INTEGRAL_BOOL, "bitwise complement"),
    unary("logical_not", torch.logical_not, ALL, "logical not (bool result)"),
    unary("isnan", torch.isnan, ALL, "NaN test"),
    unary("isinf", torch.isinf, ALL, "infinity test"),
    unary("isfinite", torch.isfinite, ALL, "finiteness test"),
    unary("signbit", torch.signbit, REAL_BOOL, "sign bit set (-0.0 included)"),
    unary("nan_to_num", lambda x, **kw: torch.nan_to_num(x, **kw), FC,
          "replace NaN and infinities", args=_nan_to_num_args),
    unary("angle", torch.angle, FC_PROMOTING, "argument of a complex number"),
    unary("conj_physical", torch.conj_physical, ALL, "materialised complex conjugate"),
)

# -- binary -----------------------------------------------------------------------------

register(
    binary("add", lambda x, y, alpha=1: torch.add(x, y, alpha=alpha), ALL,
           "x + alpha*y (alpha != 1: pytorch#143949)", args=_alpha_args()),
    binary("sub", lambda x, y, alpha=1: torch.sub(x, y, alpha=alpha), NUMERIC,
           "x - alpha*y", args=_alpha_args()),
    binary("mul", torch.mul, ALL, "x * y"),
    binary("div", torch.div, ALL, "true division"),
    binary("div_trunc", lambda x, y: torch.div(x, _nz(y), rounding_mode="trunc"), REAL,
           "division rounded towards zero (integer zeros in y replaced by 1)"),
    binary("div_floor", lambda x, y: torch.div(x, _nz(y), rounding_mode="floor"), REAL,
           "division rounded down (integer zeros in y replaced by 1)"),
    binary("floor_divide", lambda x, y: torch.floor_divide(x, _nz(y)), REAL,
           "floor division (integer zeros in y replaced by 1)"),
    binary("remainder", lambda x, y: torch.remainder(x, _nz(y)), REAL,
           "Python-style modulus (integer zeros in y replaced by 1)"),
    binary("fmod", lambda x, y: torch.fmod(x, _nz(y)), REAL,
           "C-style modulus (integer zeros in y replaced by 1)"),
    binary("pow", torch.pow, FC + expand("signed") + ("uint8",), "x ** y"),
    binary("atan2", torch.atan2, FLOAT_PROMOTING, "two-argument arctangent (int64: pytorch#149017)"),
    binary("hypot", torch.hypot, FLOAT, "sqrt(x**2 + y**2)"),
    binary("nextafter", torch.nextafter, FLOAT, "next representable value towards y"),
    binary("copysign", torch.copysign, FLOAT_PROMOTING, "|x| with the sign of y"),
    binary("xlogy", torch.xlogy, FLOAT_PROMOTING, "x * log(y), 0 where x == 0"),
    binary("special.xlog1py", torch.special.xlog1py, FLOAT_PROMOTING, "x * log1p(y), 0 where x == 0"),
    binary("logaddexp", torch.logaddexp, FLOAT_AND_WIDE_COMPLEX, "log(exp(x) + exp(y))"),
    binary("logaddexp2", torch.logaddexp2, FLOAT, "log2(2**x + 2**y)"),
    binary("fmax", torch.fmax, REAL_BOOL, "max ignoring NaN (0-d operand: pytorch#143934)"),
    binary("fmin", torch.fmin, REAL_BOOL, "min ignoring NaN (0-d operand: pytorch#143934)"),
    binary("maximum", torch.maximum, REAL_BOOL, "max propagating NaN"),
    binary("minimum", torch.minimum, REAL_BOOL, "min propagating NaN"),
    binary("heaviside", torch.heaviside, REAL_BOOL, "step function with value y at 0"),
    binary("eq", torch.eq, ALL, "x == y"),
    binary("ne", torch.ne, ALL, "x != y"),
    binary("lt", torch.lt, REAL_BOOL, "x < y"),
    binary("le", torch.le, REAL_BOOL, "x <= y"),
    binary("gt", torch.gt, REAL_BOOL, "x > y"),
    binary("ge", torch.ge, REAL_BOOL, "x >= y"),
    binary("bitwise_and", torch.bitwise_and, INTEGRAL_BOOL, "bitwise and (non-contiguous: pytorch#146085)"),
    binary("bitwise_or", torch.bitwise_or, INTEGRAL_BOOL, "bitwise or"),
    binary("bitwise_xor", torch.bitwise_xor, INTEGRAL_BOOL, "bitwise xor"),
    binary("bitwise_left_shift", lambda x, y: torch.bitwise_left_shift(x, _shift_amount(y)),
           INTEGRAL, "x << y, shift amounts 0..4", input_values=(None, "small_int"),
           allow_specials=False),
    binary("bitwise_right_shift", lambda x, y: torch.bitwise_right_shift(x, _shift_amount(y)),
           INTEGRAL, "x >> y, shift amounts 0..4", input_values=(None, "small_int"),
           allow_specials=False),
    binary("logical_and", torch.logical_and, ALL, "logical and (bool result)"),
    binary("logical_or", torch.logical_or, ALL, "logical or (bool result)"),
    binary("logical_xor", torch.logical_xor, ALL, "logical xor (bool result)"),
    binary("gcd", torch.gcd, INTEGRAL, "greatest common divisor"),
    binary("lcm", torch.lcm, INTEGRAL, "least common multiple"),
    binary("ldexp", torch.ldexp, FLOAT, "x * 2**y with an integer exponent tensor",
           input_dtypes=(None, ("int32", "int64")), input_values=(None, "small_int")),
    binary("igamma", torch.igamma, FLOAT, "regularised lower incomplete gamma",
           input_values=("positive", "positive")),
    binary("polar", torch.polar, ("float32", "float64"), "complex from magnitude and angle"),
    binary("complex", torch.complex, ("float16", "float32", "float64"),
           "complex from real and imaginary parts"),
)

# -- tensor-scalar forms ----------------------------------------------------------------

register(
    unary("bitwise_left_shift_scalar",
          lambda x, scalar: torch.bitwise_left_shift(scalar, _shift_amount(x)), INTEGRAL,
          "Python int << tensor of shift amounts 0..4 (pytorch#148686)",
          input_values=("small_int",), allow_specials=False, args=_shift_scalar_args),
    unary("bitwise_right_shift_scalar",
          lambda x, scalar: torch.bitwise_right_shift(scalar, _shift_amount(x)), INTEGRAL,
          "Python int >> tensor of shift amounts 0..4",
          input_values=("small_int",), allow_specials=False, args=_shift_scalar_args),
    unary("add_scalar", lambda x, scalar: torch.add(x, scalar), ALL, "tensor + Python scalar",
          args=_scalar_args()),
    unary("mul_scalar", lambda x, scalar: torch.mul(x, scalar), ALL, "tensor * Python scalar",
          args=_scalar_args()),
    unary("div_scalar", lambda x, scalar: torch.div(x, scalar), NUMERIC,
          "tensor / Python scalar (true division)", args=_scalar_args(nonzero=True)),
    unary("rsub_scalar", lambda x, scalar: torch.rsub(x, scalar), NUMERIC, "Python scalar - tensor",
          args=_scalar_args()),
    unary("pow_scalar", lambda x, scalar: torch.pow(x, scalar), FC + expand("signed") + ("uint8",),
          "tensor ** Python scalar", args=_scalar_args(nonnegative_int=True)),
    unary("rpow_scalar", lambda x, scalar: torch.pow(scalar, x), FC,
          "Python scalar ** tensor", args=_scalar_args()),
    unary("remainder_scalar", lambda x, scalar: torch.remainder(x, scalar), REAL,
          "tensor % Python scalar", args=_scalar_args(nonzero=True)),
    unary("fmod_scalar", lambda x, scalar: torch.fmod(x, scalar), REAL,
          "fmod by a Python scalar", args=_scalar_args(nonzero=True)),
    unary("lt_scalar", lambda x, scalar: torch.lt(x, scalar), REAL_BOOL, "tensor < Python scalar",
          args=_scalar_args()),
    unary("eq_scalar", lambda x, scalar: torch.eq(x, scalar), ALL, "tensor == Python scalar",
          args=_scalar_args()),
    unary("clamp", lambda x, **kw: torch.clamp(x, **kw), REAL,
          "clamp to Python-scalar bounds (min > max included)", args=_clamp_args),
)

# -- ternary ----------------------------------------------------------------------------

register(
    ternary("where", torch.where, ALL, "select by a bool condition (inf operands: pytorch#144500)",
            input_dtypes=(("bool",), None, None)),
    ternary("clamp_tensor", lambda x, lo, hi: torch.clamp(x, lo, hi), REAL,
            "clamp to tensor bounds"),
    ternary("lerp", torch.lerp, FC, "x + w*(y - x) with a tensor weight"),
    ternary("addcmul", lambda x, a, b, value=1: torch.addcmul(x, a, b, value=value),
            expand("numeric"), "x + value*a*b", args=_alpha_args("value")),
    ternary("addcdiv", lambda x, a, b, value=1: torch.addcdiv(x, a, b, value=value), FC,
            "x + value*a/b", args=_alpha_args("value")),
)
