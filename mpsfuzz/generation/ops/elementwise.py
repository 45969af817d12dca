"""Elementwise ops: unary math, binary arithmetic and comparison, bitwise and logical
ops, ternary ops (where, lerp, addcmul, clamp with tensor bounds), tensor-scalar forms
(a Python scalar on either side) and the ``torch.special`` functions.

Declared dtypes are what torch defines the op for, not only what eager CPU implements:
where CPU has no kernel (uint16 shifts, complex32 math ...) the oracle recomputes the
reference in a wider dtype. A few integer inputs are declared for float math ops
(``_PROMOTING``) so that the integer-to-float promotion paths are tested too; the
``torch.special`` functions declare uint16/32/64 as well (``_SPECIAL_PROMOTING``).

Variants: each op names its Tensor method and in-place method where torch has them
(checked against ``torch.Tensor`` at import), ``out=`` where the function takes it, and
``grad`` where it is differentiable. Ops whose ``fn`` rewrites an input (integer
divisors with zeros replaced) declare no method: the method would skip the rewrite.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..grad_points import both_zero, equal_operands, kinks, wide, when, zero_crossings
from ..large_sizes import grows
from ..opspec import declare_grows
from ..opspec import OpSpec, any_shape, broadcast_shapes, expand, first_dtype, nonzero_int_divisor, register

FAMILY = "elementwise"

FLOAT = expand("float")
FC = expand("floating_and_complex")
# Integer inputs that float math ops promote (int -> default float).
_PROMOTING = ("int32", "int64", "uint8", "bool")
FC_PROMOTING = FC + _PROMOTING
FLOAT_PROMOTING = FLOAT + _PROMOTING
# torch.special's kernels promote every integer dtype, and CUDA's jitted ones read an
# operand through casts of their own that lacked uint16/32/64 (issue 38, pytorch#173636:
# special.zeta read a uint16 q as 0 and returned inf): the special ops' tables declare
# the wide unsigned integers too.
_WIDE_UNSIGNED = ("uint16", "uint32", "uint64")
_SPECIAL_PROMOTING = _PROMOTING + _WIDE_UNSIGNED
REAL = expand("real")
REAL_BOOL = expand("real_and_bool")
NUMERIC = expand("numeric")
ALL = expand("all")
INTEGRAL = expand("integral")
INTEGRAL_BOOL = expand("integral_and_bool")
# complex32 has no kernel anywhere for these; complex64/128 do.
FLOAT_AND_WIDE_COMPLEX = FLOAT + ("complex64", "complex128")
# torch.special's Bessel, Airy and orthogonal-polynomial kernels: float32/float64 only
# (the reference widens float16/bfloat16).
SPECIAL_FLOAT = FLOAT
# What the real torch.special functions are drawn in: floats and every integer dtype CPU promotes.
SPECIAL_REAL = SPECIAL_FLOAT + _SPECIAL_PROMOTING


def _is_fc(name: str) -> bool:
    return name in dt.FLOAT or name in dt.COMPLEX


def variants(method: str | None = None, *, inplace: bool = True, out: bool = True,
             grad: bool = False) -> dict:
    """OpSpec variant fields: the Tensor method ``method`` and, if ``inplace``, its
    in-place form ``method_``, where ``torch.Tensor`` has them."""
    kw: dict = {"out": out, "grad": grad}
    if method and hasattr(torch.Tensor, method):
        kw["method"] = method
        if inplace and hasattr(torch.Tensor, method + "_"):
            kw["inplace"] = method + "_"
    return kw


# Comparisons and logical ops return bool, but their in-place forms (``eq_``,
# ``logical_not_``) keep the input's dtype: they declare no in-place variant until the
# variants oracle compares an in-place result after casting to the functional dtype.


def unary(name: str, fn, dtypes, doc: str, **kw) -> OpSpec:
    kw.setdefault("shapes", any_shape(1))
    return OpSpec(name=name, family=FAMILY, fn=fn, dtypes=expand(dtypes), doc=doc, **kw)


def _exp_log_form(base, exponent, **kw):
    """z ** w as exp(w log z) where either is complex (the form of complex pow in
    c10::complex and std::pow: CUDA and eager CPU round w log z in the dtype, and an
    error u there is |w log z| u of the result; issue 37, H200: complex64 pow, both
    backends 1-2.7e-6 off); a real power is one rounding, its own form."""
    if any(isinstance(t, torch.Tensor) and t.is_complex() for t in (base, exponent)):
        return torch.exp(exponent * torch.log(torch.as_tensor(base)))
    return torch.pow(base, exponent, **kw)


def _promoting(kw: dict) -> dict:
    """An elementwise op of several tensor operands promotes them (torch.result_type):
    its declaration admits operands of different dtypes (issue 38; pytorch#149951: fmax
    of float32 and float16)."""
    kw["semantics"] = frozenset(kw.get("semantics", ())) | {"promotes"}
    return kw


def binary(name: str, fn, dtypes, doc: str, **kw) -> OpSpec:
    kw = _promoting(kw)
    kw.setdefault("input_dtypes", (None, None))
    kw.setdefault("shapes", broadcast_shapes(2))
    return OpSpec(name=name, family=FAMILY, fn=fn, dtypes=expand(dtypes), doc=doc, **kw)


def ternary(name: str, fn, dtypes, doc: str, **kw) -> OpSpec:
    kw = _promoting(kw)
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


def _with_alpha(scalar_args, name: str = "alpha"):
    """A scalar operand plus, in some cases, an ``alpha`` multiplier (left out first:
    shrinking goes to the plain call); bool inputs take only alpha 1."""
    def build(draw, shapes, dtypes):
        out = scalar_args(draw, shapes, dtypes)
        if draw(st.integers(0, 2)) == 2 and first_dtype(dtypes) != "bool":
            out.update(_alpha_args(name)(draw, shapes, dtypes))
        return out
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
    for integral ones, bool or int for bool ones), passed as ``name`` (the torch
    parameter's own name where a Tensor method is declared, e.g. ``other``)."""
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


def _int_scalar_args(name: str, low: int, high: int):
    def build(draw, shapes, dtypes):
        return {name: draw(st.integers(low, high))}
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


def _rounding_mode(draw, shapes, dtypes):
    return {"rounding_mode": draw(st.sampled_from((None, "trunc", "floor")))}


def _isclose_args(draw, shapes, dtypes):
    out = {"equal_nan": draw(st.booleans())}
    if draw(st.booleans()):
        out["rtol"] = draw(st.sampled_from((0.0, 1e-3, 0.5)))
        out["atol"] = draw(st.sampled_from((0.0, 1e-2, 1.0)))
    return out


def _logit_args(draw, shapes, dtypes):
    return {"eps": draw(st.sampled_from((None, 1e-6, 0.01, 0.25)))}


def _weight_args(draw, shapes, dtypes):
    return {"weight": draw(st.sampled_from((0.0, 0.25, 0.5, 1.0, -0.5, 1.5)))}


# -- values -------------------------------------------------------------------------------

def _shift_amounts(shapes, kwargs):
    """Shift amounts in [0, 4] (shifting by the bit width or more is undefined)."""
    return {"distribution": "int_range", "low": 0, "high": 4, "allow_specials": False}


def _poly_degrees(shapes, kwargs):
    """Polynomial degrees as a tensor: small integers (-1 included: the result is 0);
    no specials, since the recurrences loop ``n`` times."""
    return {"distribution": "int_range", "low": -1, "high": 8, "allow_specials": False}


def _mvlgamma_domain(shapes, kwargs):
    """multigammaln(x, p) is defined for x > (p - 1) / 2 (CPU raises otherwise)."""
    low = (kwargs.get("p", 1) - 1) / 2 + 0.05
    return {"distribution": "positive", "low": low, "high": low + 8, "allow_specials": False}


# -- pre-processing that runs identically on both sides -----------------------------

def _shift_amount(t):
    """Shift amounts must be in [0, bit width): small_int values are -4..4, so signed
    ones take their absolute value (unsigned ones are already 0..4)."""
    return t if t.dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else t.abs()


_nz = nonzero_int_divisor


# -- where gradients are undefined ------------------------------------------------------
# Ops whose derivative is a constant by definition (floor, ceil, round, trunc, frac,
# sign, and sgn and angle of real inputs, rounding divisions, fmod/remainder by a Python
# scalar) need no declaration: at their discontinuities autograd returns that constant,
# and there is nothing to choose.

AT_ZERO = kinks((0.0,))
PICKS_ONE = equal_operands((0, 1))


def _and_0d(draw, budget):
    """Any shape for x, and a 0-d y."""
    return any_shape(1)(draw, budget) + ((),)


def _quotient_kinks(rounding: str):
    """fmod/remainder of tensors: the gradient w.r.t. the divisor is -trunc(x/y)
    (-floor(x/y)), which jumps where x/y is an integer (trunc: a nonzero one)."""
    def quotients(inputs, kwargs):
        x, y = torch.broadcast_tensors(wide(inputs[0]), wide(inputs[1]))
        q = x / y
        ok = torch.isfinite(q) & ((q.abs() >= 0.5) if rounding == "trunc" else torch.ones_like(q, dtype=torch.bool))
        return [(torch.where(ok, q - q.round(), torch.ones_like(q)), q.abs() + 1)]
    return zero_crossings(quotients, "x/y minus an integer")


def _clamp_bounds(kwargs):
    return (kwargs.get("min"), kwargs.get("max"))


def _logit_bounds(kwargs):
    eps = kwargs.get("eps")
    return () if eps is None else (eps, 1 - eps)


# -- unary ------------------------------------------------------------------------------

_UNARY_FC = [
    # name, fn, doc (method = the name; all differentiable)
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
]
# torch.special functions of complex inputs too (method = the name without "special.").
_UNARY_SPECIAL_FC = [
    ("special.sinc", torch.special.sinc, "normalised sinc (pytorch#148471)"),
]
_UNARY_REAL_MATH = [
    ("lgamma", torch.lgamma, "log|gamma(x)|, negative inputs included (pytorch#145740)"),
    ("digamma", torch.digamma, "digamma (psi)"),
    ("erf", torch.erf, "error function"),
    ("erfc", torch.erfc, "complementary error function"),
    ("deg2rad", torch.deg2rad, "degrees to radians"),
    ("rad2deg", torch.rad2deg, "radians to degrees"),
]
# torch.special functions of real inputs with a derivative.
_UNARY_SPECIAL_REAL = [
    ("special.i0", torch.special.i0, "modified Bessel function I0"),
    ("special.i0e", torch.special.i0e, "exponentially scaled I0"),
    ("special.i1", torch.special.i1, "modified Bessel function I1"),
    ("special.i1e", torch.special.i1e, "exponentially scaled I1"),
    ("special.entr", torch.special.entr, "elementwise entropy -x*ln(x)"),
    ("special.ndtr", torch.special.ndtr, "standard normal CDF"),
    ("special.ndtri", torch.special.ndtri, "inverse of the standard normal CDF (NaN outside [0, 1])"),
    ("special.log_ndtr", torch.special.log_ndtr, "log of the standard normal CDF"),
    ("special.erfcx", torch.special.erfcx, "scaled complementary error function"),
    ("special.expit", torch.special.expit, "logistic sigmoid (torch.special's name)"),
    ("special.gammaln", torch.special.gammaln, "log|gamma(x)| (torch.special's name)"),
]
# torch.special functions with no derivative and no Tensor method.
_UNARY_SPECIAL_NODIFF = [
    ("special.bessel_j0", torch.special.bessel_j0, "Bessel function of the first kind, order 0"),
    ("special.bessel_j1", torch.special.bessel_j1, "Bessel function of the first kind, order 1"),
    ("special.bessel_y0", torch.special.bessel_y0, "Bessel function of the second kind, order 0"),
    ("special.bessel_y1", torch.special.bessel_y1, "Bessel function of the second kind, order 1"),
    ("special.modified_bessel_i0", torch.special.modified_bessel_i0, "modified Bessel I0"),
    ("special.modified_bessel_i1", torch.special.modified_bessel_i1, "modified Bessel I1"),
    ("special.modified_bessel_k0", torch.special.modified_bessel_k0, "modified Bessel K0"),
    ("special.modified_bessel_k1", torch.special.modified_bessel_k1, "modified Bessel K1"),
    ("special.scaled_modified_bessel_k0", torch.special.scaled_modified_bessel_k0, "exp(x) * K0(x)"),
    ("special.scaled_modified_bessel_k1", torch.special.scaled_modified_bessel_k1, "exp(x) * K1(x)"),
    ("special.spherical_bessel_j0", torch.special.spherical_bessel_j0, "spherical Bessel j0 = sin(x)/x"),
    ("special.airy_ai", torch.special.airy_ai, "Airy function Ai"),
]


def _method_of(name: str) -> str:
    return name.removeprefix("special.")


register(*(unary(n, f, FC_PROMOTING, d, **variants(_method_of(n), grad=True)) for n, f, d in _UNARY_FC))
register(*(unary(n, f, FC + _SPECIAL_PROMOTING, d, **variants(_method_of(n), grad=True))
           for n, f, d in _UNARY_SPECIAL_FC))
register(*(unary(n, f, FLOAT_PROMOTING, d, **variants(_method_of(n), grad=True)) for n, f, d in _UNARY_REAL_MATH))
# i0e(x) = exp(-|x|) I0(x): slopes -1 and 1 on either side of 0
register(*(unary(n, f, SPECIAL_REAL, d, grad_undefined=AT_ZERO if n == "special.i0e" else None,
                 **variants(_method_of(n), grad=True))
           for n, f, d in _UNARY_SPECIAL_REAL))
register(*(unary(n, f, SPECIAL_REAL, d, **variants(None))
           for n, f, d in _UNARY_SPECIAL_NODIFF))
register(
    unary("erfinv", torch.erfinv, FLOAT_PROMOTING, "inverse error function on (-1, 1)",
          input_values=("uniform",), **variants("erfinv", grad=True)),
    unary("abs", torch.abs, NUMERIC, "absolute value (complex -> real)", grad_undefined=AT_ZERO,
          **variants("abs", grad=True)),
    unary("neg", torch.neg, NUMERIC, "negation (storage offsets: pytorch#148512)",
          **variants("neg", grad=True)),
    unary("sign", torch.sign, REAL_BOOL, "sign of a real number", **variants("sign", grad=True)),
    unary("sgn", torch.sgn, ALL, "sign, x/|x| for complex", **variants("sgn", grad=True)),
    unary("square", torch.square, NUMERIC, "x*x", **variants("square", grad=True)),
    unary("floor", torch.floor, REAL, "round down", **variants("floor", grad=True)),
    unary("ceil", torch.ceil, REAL, "round up", **variants("ceil", grad=True)),
    unary("round", torch.round, REAL, "round half to even", **variants("round", grad=True)),
    unary("round_decimals", lambda x, decimals, **kw: torch.round(x, decimals=decimals, **kw), FLOAT,
          "round to a number of decimals", args=_round_args, **variants("round", grad=True)),
    unary("trunc", torch.trunc, REAL, "round towards zero", **variants("trunc", grad=True)),
    unary("frac", torch.frac, FLOAT, "fractional part", **variants("frac", grad=True)),
    unary("bitwise_not", torch.bitwise_not, INTEGRAL_BOOL, "bitwise complement",
          **variants("bitwise_not")),
    unary("logical_not", torch.logical_not, ALL, "logical not (bool result)", **variants("logical_not", inplace=False)),
    unary("isnan", torch.isnan, ALL, "NaN test", **variants("isnan", out=False)),
    unary("isinf", torch.isinf, ALL, "infinity test", **variants("isinf", out=False)),
    unary("isfinite", torch.isfinite, ALL, "finiteness test", **variants("isfinite", out=False)),
    unary("isposinf", torch.isposinf, REAL_BOOL, "+inf test", **variants("isposinf")),
    unary("isneginf", torch.isneginf, REAL_BOOL, "-inf test", **variants("isneginf")),
    unary("signbit", torch.signbit, REAL_BOOL, "sign bit set (-0.0 included)", **variants("signbit")),
    unary("nan_to_num", lambda x, **kw: torch.nan_to_num(x, **kw), FC,
          "replace NaN and infinities", args=_nan_to_num_args, **variants("nan_to_num", grad=True)),
    unary("angle", torch.angle, FC_PROMOTING, "argument of a complex number",
          **variants("angle", grad=True)),
    unary("conj_physical", torch.conj_physical, ALL, "materialised complex conjugate",
          **variants("conj_physical", grad=True)),
    # The component views of a complex tensor (issue 38, pytorch#184379: MPS's `.imag` of
    # a conjugate view returned the stored imaginary part, not its negation). Complex
    # inputs only: they draw the conj and neg bits by their dtype (strategies'
    # VIEW_BIT_TENTHS), and `imag` of a conj view is a view with the negative bit. No
    # method (`Tensor.real` is a property), no out=, no grad variant (GRAD is real).
    unary("real", torch.real, expand("complex"), "real part of a complex tensor (a view)", out=False),
    unary("imag", torch.imag, expand("complex"),
          "imaginary part of a complex tensor (a view; of a conj view, negated: pytorch#184379)", out=False),
    unary("logit", lambda x, eps=None, **kw: torch.logit(x, eps, **kw), FLOAT_PROMOTING,
          "log(x/(1-x)), input clamped to [eps, 1-eps] when eps is given",
          input_values=("uniform",), args=_logit_args, grad_undefined=kinks(_logit_bounds),
          **variants("logit", grad=True)),
    unary("polygamma", lambda x, n, **kw: torch.polygamma(n, x, **kw), FLOAT_PROMOTING,
          "n-th derivative of digamma, n = 0..4", args=_int_scalar_args("n", 0, 4),
          **variants("polygamma", grad=True)),
    unary("special.multigammaln", lambda x, p, **kw: torch.special.multigammaln(x, p, **kw),
          ("float32", "float64", "bfloat16", "float16", "int32", "int64", "uint8") + _WIDE_UNSIGNED,
          "multivariate log-gamma of dimension p on its domain x > (p-1)/2 (torch refuses bool)",
          input_values=(_mvlgamma_domain,), args=_int_scalar_args("p", 1, 5), out=True, grad=True),
    unary("mvlgamma", lambda x, p, **kw: torch.mvlgamma(x, p, **kw), ("float32", "float64"),
          "multivariate log-gamma (torch's name, with its Tensor methods)",
          input_values=(_mvlgamma_domain,), args=_int_scalar_args("p", 1, 5),
          **variants("mvlgamma", grad=True)),
    unary("frexp", torch.frexp, FLOAT, "mantissa and integer exponent", **variants("frexp")),
)

# -- binary -----------------------------------------------------------------------------

register(
    # Operands of two dtypes sometimes (float + int with alpha: pytorch#143949; the common
    # dtype of a TensorIterator op: pytorch#160334).
    binary("add", lambda x, y, alpha=1, **kw: torch.add(x, y, alpha=alpha, **kw), ALL,
           "x + alpha*y (alpha != 1, mixed dtypes: pytorch#143949)", args=_alpha_args(),
           semantics=frozenset({"mixed_dtypes_sometimes"}), **variants("add", grad=True)),
    binary("sub", lambda x, y, alpha=1, **kw: torch.sub(x, y, alpha=alpha, **kw), NUMERIC,
           "x - alpha*y", args=_alpha_args(), **variants("sub", grad=True)),
    binary("mul", torch.mul, ALL, "x * y", **variants("mul", grad=True)),
    binary("div", torch.div, ALL, "true division", **variants("div", grad=True)),
    binary("true_divide", torch.true_divide, ALL, "true division (alias name)",
           **variants("true_divide", grad=True)),
    binary("div_rounding", lambda x, y, rounding_mode=None, **kw: torch.div(x, y, rounding_mode=rounding_mode, **kw),
           FLOAT, "float division, truncated or floored (zeros in y give inf/nan)",
           args=_rounding_mode, **variants("div", grad=True)),
    binary("div_trunc", lambda x, y, **kw: torch.div(x, _nz(y), rounding_mode="trunc", **kw), REAL,
           "division rounded towards zero (integer zeros in y replaced by 1)", out=True),
    binary("div_floor", lambda x, y, **kw: torch.div(x, _nz(y), rounding_mode="floor", **kw), REAL,
           "division rounded down (integer zeros in y replaced by 1)", out=True),
    binary("floor_divide", lambda x, y, **kw: torch.floor_divide(x, _nz(y), **kw), REAL,
           "floor division (integer zeros in y replaced by 1)", out=True),
    binary("remainder", lambda x, y, **kw: torch.remainder(x, _nz(y), **kw), REAL,
           "Python-style modulus (integer zeros in y replaced by 1)", out=True),
    binary("fmod", lambda x, y, **kw: torch.fmod(x, _nz(y), **kw), REAL,
           "C-style modulus (integer zeros in y replaced by 1)", out=True),
    binary("remainder_float", torch.remainder, FLOAT, "Python-style modulus of floats (zeros: NaN)",
           grad_undefined=_quotient_kinks("floor"), **variants("remainder", grad=True)),
    binary("fmod_float", torch.fmod, FLOAT, "C-style modulus of floats (zeros: NaN)",
           grad_undefined=_quotient_kinks("trunc"), **variants("fmod", grad=True)),
    binary("pow", torch.pow, FC + expand("signed") + ("uint8",), "x ** y", rounding_form=_exp_log_form,
           **variants("pow", grad=True)),
    binary("float_power", torch.float_power, FC + expand("signed") + ("uint8",),
           "x ** y in double precision", **variants("float_power", inplace=False, grad=True)),
    binary("atan2", torch.atan2, FLOAT_PROMOTING, "two-argument arctangent (int64: pytorch#149017)",
           grad_undefined=both_zero(), **variants("atan2", grad=True)),
    binary("hypot", torch.hypot, FLOAT, "sqrt(x**2 + y**2)", grad_undefined=both_zero(),
           **variants("hypot", grad=True)),
    binary("nextafter", torch.nextafter, FLOAT, "next representable value towards y",
           **variants("nextafter")),
    binary("copysign", torch.copysign, FLOAT_PROMOTING, "|x| with the sign of y", grad_undefined=AT_ZERO,
           **variants("copysign", grad=True)),
    binary("xlogy", torch.xlogy, FLOAT_PROMOTING, "x * log(y), 0 where x == 0", **variants("xlogy", grad=True)),
    binary("special.xlog1py", torch.special.xlog1py, SPECIAL_REAL, "x * log1p(y), 0 where x == 0",
           out=True, grad=True),
    binary("special.zeta", torch.special.zeta, ("float32", "float64") + _SPECIAL_PROMOTING,
           "Hurwitz zeta function zeta(x, q)", out=True),
    binary("logaddexp", torch.logaddexp, FLOAT_AND_WIDE_COMPLEX, "log(exp(x) + exp(y))",
           **variants("logaddexp", grad=True)),
    binary("logaddexp2", torch.logaddexp2, FLOAT, "log2(2**x + 2**y)", **variants("logaddexp2", grad=True)),
    binary("fmax", torch.fmax, REAL_BOOL, "max ignoring NaN (0-d operand: pytorch#143934)",
           grad_undefined=PICKS_ONE, **variants("fmax", grad=True)),
    binary("fmin", torch.fmin, REAL_BOOL, "min ignoring NaN (0-d operand: pytorch#143934)",
           grad_undefined=PICKS_ONE, **variants("fmin", grad=True)),
    # The 0-d operand on the CPU, as torch.tensor(.3) is (pytorch#143934's own trigger): a
    # CPU scalar tensor takes another path than a 0-d tensor on the device. No method:
    # it would skip the move.
    binary("fmax_cpu_scalar", lambda x, y, **kw: torch.fmax(x, y.cpu(), **kw), REAL_BOOL,
           "fmax(x, y) with y a 0-d tensor on the CPU (pytorch#143934)", shapes=_and_0d,
           grad_undefined=PICKS_ONE, out=True, grad=True),
    binary("fmin_cpu_scalar", lambda x, y, **kw: torch.fmin(x, y.cpu(), **kw), REAL_BOOL,
           "fmin(x, y) with y a 0-d tensor on the CPU (pytorch#143934)", shapes=_and_0d,
           grad_undefined=PICKS_ONE, out=True, grad=True),
    binary("maximum", torch.maximum, REAL_BOOL, "max propagating NaN", grad_undefined=PICKS_ONE,
           **variants("maximum", grad=True)),
    binary("minimum", torch.minimum, REAL_BOOL, "min propagating NaN", grad_undefined=PICKS_ONE,
           **variants("minimum", grad=True)),
    binary("max_binary", torch.max, REAL_BOOL, "torch.max(x, other): elementwise max",
           grad_undefined=PICKS_ONE, **variants("max", inplace=False, grad=True)),
    binary("min_binary", torch.min, REAL_BOOL, "torch.min(x, other): elementwise min",
           grad_undefined=PICKS_ONE, **variants("min", inplace=False, grad=True)),
    binary("heaviside", torch.heaviside, REAL_BOOL, "step function with value y at 0",
           **variants("heaviside")),
    binary("isclose", lambda x, y, **kw: torch.isclose(x, y, **kw), NUMERIC + ("bool",),
           "|x - y| <= atol + rtol*|y|, NaN equal or not", args=_isclose_args,
           **variants("isclose", out=False)),
    binary("eq", torch.eq, ALL, "x == y", **variants("eq", inplace=False)),
    binary("ne", torch.ne, ALL, "x != y", **variants("ne", inplace=False)),
    binary("lt", torch.lt, REAL_BOOL, "x < y", **variants("lt", inplace=False)),
    binary("le", torch.le, REAL_BOOL, "x <= y", **variants("le", inplace=False)),
    binary("gt", torch.gt, REAL_BOOL, "x > y", **variants("gt", inplace=False)),
    binary("ge", torch.ge, REAL_BOOL, "x >= y", **variants("ge", inplace=False)),
    binary("bitwise_and", torch.bitwise_and, INTEGRAL_BOOL, "bitwise and (non-contiguous: pytorch#146085)",
           **variants("bitwise_and")),
    binary("bitwise_or", torch.bitwise_or, INTEGRAL_BOOL, "bitwise or", **variants("bitwise_or")),
    binary("bitwise_xor", torch.bitwise_xor, INTEGRAL_BOOL, "bitwise xor", **variants("bitwise_xor")),
    binary("bitwise_left_shift", torch.bitwise_left_shift, INTEGRAL, "x << y, shift amounts 0..4",
           input_values=(None, _shift_amounts), **variants("bitwise_left_shift")),
    binary("bitwise_right_shift", torch.bitwise_right_shift, INTEGRAL, "x >> y, shift amounts 0..4",
           input_values=(None, _shift_amounts), **variants("bitwise_right_shift")),
    binary("logical_and", torch.logical_and, ALL, "logical and (bool result)", **variants("logical_and", inplace=False)),
    binary("logical_or", torch.logical_or, ALL, "logical or (bool result)", **variants("logical_or", inplace=False)),
    binary("logical_xor", torch.logical_xor, ALL, "logical xor (bool result)", **variants("logical_xor", inplace=False)),
    binary("gcd", torch.gcd, INTEGRAL, "greatest common divisor", **variants("gcd")),
    binary("lcm", torch.lcm, INTEGRAL, "least common multiple", **variants("lcm")),
    binary("ldexp", torch.ldexp, FLOAT, "x * 2**y with an integer exponent tensor",
           input_dtypes=(None, ("int32", "int64")), input_values=(None, "small_int"),
           **variants("ldexp", grad=True)),
    binary("igamma", torch.igamma, FLOAT, "regularised lower incomplete gamma",
           input_values=("positive", "positive"), **variants("igamma")),
    binary("igammac", torch.igammac, FLOAT, "regularised upper incomplete gamma",
           input_values=("positive", "positive"), **variants("igammac")),
    binary("polar", torch.polar, ("float32", "float64"), "complex from magnitude and angle",
           out=True, grad=True),
    binary("complex", torch.complex, ("float16", "float32", "float64"),
           "complex from real and imaginary parts", out=True, grad=True),
)

# Orthogonal polynomials: degree n as a tensor (broadcast with x) or as a Python int.
# No NaN/inf inputs: torch 2.13's CPU kernels return uninitialised values for x = NaN
# with n > 6 (chebyshev u/w, shifted chebyshev, laguerre, legendre), which would make
# the reference itself nondeterministic.
_POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
                "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
                "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
                "laguerre_polynomial_l", "legendre_polynomial_p")
def _polynomial_semantics(name: str) -> frozenset:
    return frozenset({"shifted-argument"}) if name.startswith("shifted_") else frozenset()


register(*(
    binary(f"special.{p}", getattr(torch.special, p), SPECIAL_REAL, f"{p.replace('_', ' ')} of degree n (a tensor)",
           input_values=("uniform", _poly_degrees), allow_nonfinite=False, out=True, discrete_inputs=(1,),
           semantics=_polynomial_semantics(p))
    for p in _POLYNOMIALS))
register(*(
    unary(f"special.{p}_scalar_n", (lambda f: lambda x, n, **kw: f(x, n, **kw))(getattr(torch.special, p)),
          SPECIAL_REAL, f"{p.replace('_', ' ')} of a Python-int degree n",
          input_values=("uniform",), args=_int_scalar_args("n", -1, 8), allow_nonfinite=False, out=True,
          semantics=_polynomial_semantics(p))
    for p in _POLYNOMIALS))

# -- tensor-scalar forms ----------------------------------------------------------------
# The scalar is passed under torch's own parameter name (``other``, ``exponent``) so the
# Tensor methods take the same keyword arguments.

register(
    unary("bitwise_left_shift_scalar",
          lambda x, scalar: torch.bitwise_left_shift(scalar, _shift_amount(x)), INTEGRAL,
          "Python int << tensor of shift amounts 0..4 (pytorch#148686)",
          input_values=("small_int",), allow_specials=False, args=_shift_scalar_args),
    unary("bitwise_right_shift_scalar",
          lambda x, scalar: torch.bitwise_right_shift(scalar, _shift_amount(x)), INTEGRAL,
          "Python int >> tensor of shift amounts 0..4",
          input_values=("small_int",), allow_specials=False, args=_shift_scalar_args),
    unary("bitwise_left_shift_by_scalar", lambda x, other, **kw: torch.bitwise_left_shift(x, other, **kw),
          INTEGRAL, "tensor << Python int 0..4", args=_int_scalar_args("other", 0, 4),
          **variants("bitwise_left_shift")),
    unary("bitwise_right_shift_by_scalar", lambda x, other, **kw: torch.bitwise_right_shift(x, other, **kw),
          INTEGRAL, "tensor >> Python int 0..4", args=_int_scalar_args("other", 0, 4),
          **variants("bitwise_right_shift")),
    unary("bitwise_and_scalar", lambda x, other, **kw: torch.bitwise_and(x, other, **kw), INTEGRAL_BOOL,
          "tensor & Python int", args=_scalar_args(name="other"), **variants("bitwise_and")),
    unary("bitwise_or_scalar", lambda x, other, **kw: torch.bitwise_or(x, other, **kw), INTEGRAL_BOOL,
          "tensor | Python int", args=_scalar_args(name="other"), **variants("bitwise_or")),
    unary("bitwise_xor_scalar", lambda x, other, **kw: torch.bitwise_xor(x, other, **kw), INTEGRAL_BOOL,
          "tensor ^ Python int", args=_scalar_args(name="other"), **variants("bitwise_xor")),
    unary("bitwise_and_rscalar", lambda x, scalar: torch.bitwise_and(scalar, x), INTEGRAL_BOOL,
          "Python int & tensor (the Scalar_Tensor overload)", args=_scalar_args()),
    unary("bitwise_xor_rscalar", lambda x, scalar: scalar ^ x, INTEGRAL_BOOL,
          "Python int ^ tensor (the reflected operator)", args=_scalar_args()),
    unary("add_scalar", lambda x, other, **kw: torch.add(x, other, **kw), ALL, "tensor + alpha * Python scalar",
          args=_with_alpha(_scalar_args(name="other")), **variants("add", grad=True)),
    unary("sub_scalar", lambda x, other, **kw: torch.sub(x, other, **kw), NUMERIC, "tensor - alpha * Python scalar",
          args=_with_alpha(_scalar_args(name="other")), **variants("sub", grad=True)),
    unary("mul_scalar", lambda x, other, **kw: torch.mul(x, other, **kw), ALL, "tensor * Python scalar",
          args=_scalar_args(name="other"), **variants("mul", grad=True)),
    unary("div_scalar", lambda x, other, **kw: torch.div(x, other, **kw), NUMERIC,
          "tensor / Python scalar (true division)", args=_scalar_args(nonzero=True, name="other"),
          **variants("div", grad=True)),
    unary("rdiv_scalar", lambda x, scalar: scalar / x, FC,
          "Python scalar / tensor (the reflected operator)", args=_scalar_args(), grad=True),
    unary("rsub_scalar", lambda x, scalar, **kw: torch.rsub(x, scalar, **kw), NUMERIC,
          "Python scalar - alpha * tensor", args=_with_alpha(_scalar_args()), grad=True),
    unary("pow_scalar", lambda x, exponent, **kw: torch.pow(x, exponent, **kw), FC + expand("signed") + ("uint8",),
          "tensor ** Python scalar", args=_scalar_args(nonnegative_int=True, name="exponent"),
          rounding_form=_exp_log_form, **variants("pow", grad=True)),
    unary("rpow_scalar", lambda x, scalar, **kw: torch.pow(scalar, x, **kw), FC,
          "Python scalar ** tensor", args=_scalar_args(), grad=True, out=True),
    unary("float_power_scalar", lambda x, exponent, **kw: torch.float_power(x, exponent, **kw),
          FC + expand("signed"), "tensor ** Python scalar in double precision",
          args=_scalar_args(nonnegative_int=True, name="exponent"),
          **variants("float_power", inplace=False, grad=True)),
    unary("remainder_scalar", lambda x, other, **kw: torch.remainder(x, other, **kw), REAL,
          "tensor % Python scalar", args=_scalar_args(nonzero=True, name="other"),
          **variants("remainder", grad=True)),
    unary("fmod_scalar", lambda x, other, **kw: torch.fmod(x, other, **kw), REAL,
          "fmod by a Python scalar", args=_scalar_args(nonzero=True, name="other"),
          **variants("fmod", grad=True)),
    unary("floor_divide_scalar", lambda x, other, **kw: torch.floor_divide(x, other, **kw), REAL,
          "floor division by a nonzero Python scalar", args=_scalar_args(nonzero=True, name="other"),
          **variants("floor_divide")),
    unary("atan2_scalar", lambda x, scalar, **kw: torch.atan2(torch.tensor(scalar, dtype=x.dtype), x, **kw)
          if x.is_floating_point() else torch.atan2(torch.tensor(float(scalar)), x, **kw), FLOAT,
          "atan2(0-d tensor, tensor): the 0-d operand broadcast first", args=_scalar_args(), grad=True, out=True,
          grad_undefined=when(lambda kw: kw.get("scalar") == 0, AT_ZERO)),
    unary("copysign_scalar", lambda x, other, **kw: torch.copysign(x, other, **kw), FLOAT_PROMOTING,
          "|x| with the sign of a Python scalar (-0.0 included)", args=_scalar_args(name="other"),
          grad_undefined=AT_ZERO, **variants("copysign", grad=True)),
    unary("xlogy_scalar", lambda x, other, **kw: torch.xlogy(x, other, **kw), FLOAT,
          "x * log(Python scalar)", args=_scalar_args(name="other"), **variants("xlogy", grad=True)),
    unary("xlogy_rscalar", lambda x, scalar, **kw: torch.xlogy(scalar, x, **kw), FLOAT,
          "Python scalar * log(tensor)", args=_scalar_args(), grad=True, out=True),
    unary("lt_scalar", lambda x, other, **kw: torch.lt(x, other, **kw), REAL_BOOL, "tensor < Python scalar",
          args=_scalar_args(name="other"), **variants("lt", inplace=False)),
    unary("le_scalar", lambda x, other, **kw: torch.le(x, other, **kw), REAL_BOOL, "tensor <= Python scalar",
          args=_scalar_args(name="other"), **variants("le", inplace=False)),
    unary("gt_scalar", lambda x, other, **kw: torch.gt(x, other, **kw), REAL_BOOL, "tensor > Python scalar",
          args=_scalar_args(name="other"), **variants("gt", inplace=False)),
    unary("ge_scalar", lambda x, other, **kw: torch.ge(x, other, **kw), REAL_BOOL, "tensor >= Python scalar",
          args=_scalar_args(name="other"), **variants("ge", inplace=False)),
    unary("eq_scalar", lambda x, other, **kw: torch.eq(x, other, **kw), ALL, "tensor == Python scalar",
          args=_scalar_args(name="other"), **variants("eq", inplace=False)),
    unary("ne_scalar", lambda x, other, **kw: torch.ne(x, other, **kw), ALL, "tensor != Python scalar",
          args=_scalar_args(name="other"), **variants("ne", inplace=False)),
    unary("maximum_scalar", lambda x, scalar, **kw: torch.maximum(x, torch.tensor(scalar, dtype=x.dtype), **kw),
          REAL_BOOL, "maximum with a 0-d tensor of the same dtype", args=_scalar_args(nonnegative_int=True),
          grad=True, out=True,
          grad_undefined=kinks(lambda kw: (kw.get("scalar"),))),
    unary("clamp", lambda x, **kw: torch.clamp(x, **kw), REAL,
          "clamp to Python-scalar bounds (min > max included)", args=_clamp_args,
          grad_undefined=kinks(_clamp_bounds), **variants("clamp", grad=True)),
    unary("special.polygamma", lambda x, n, **kw: torch.special.polygamma(n, x, **kw), SPECIAL_REAL,
          "polygamma with n = 0..3 (torch.special's name)", args=_int_scalar_args("n", 0, 3),
          out=True, grad=True),
)

# -- ternary ----------------------------------------------------------------------------

register(
    ternary("where", lambda c, x, y, **kw: torch.where(c, x, y, **kw), ALL,
            "select by a bool condition (inf operands: pytorch#144500)",
            input_dtypes=(("bool",), None, None), out=True, grad=True, grad_inputs=(1, 2)),
    ternary("clamp_tensor", lambda x, lo, hi, **kw: torch.clamp(x, lo, hi, **kw), REAL,
            "clamp to tensor bounds", grad_undefined=equal_operands((0, 1), (0, 2), (1, 2)),
            **variants("clamp", grad=True)),
    OpSpec(name="clamp_min_tensor", family=FAMILY, fn=lambda x, lo, **kw: torch.clamp_min(x, lo, **kw),
           shapes=broadcast_shapes(2), dtypes=REAL, input_dtypes=(None, None),
           doc="clamp below by a tensor bound", grad_undefined=PICKS_ONE, **variants("clamp_min", grad=True)),
    ternary("lerp", lambda x, y, w, **kw: torch.lerp(x, y, w, **kw), FC,
            "x + w*(y - x) with a tensor weight", **variants("lerp", grad=True)),
    binary("lerp_scalar", lambda x, y, weight, **kw: torch.lerp(x, y, weight, **kw), FC,
           "x + weight*(y - x) with a Python-float weight", args=_weight_args, **variants("lerp", grad=True)),
    ternary("addcmul", lambda x, a, b, value=1, **kw: torch.addcmul(x, a, b, value=value, **kw),
            expand("numeric"), "x + value*a*b", args=_alpha_args("value"), **variants("addcmul", grad=True),
            evaluation_steps=lambda inputs, kw: (inputs[1] * inputs[2], kw.get("value", 1) * inputs[1])),
    ternary("addcdiv", lambda x, a, b, value=1, **kw: torch.addcdiv(x, a, b, value=value, **kw), FC,
            "x + value*a/b", args=_alpha_args("value"), **variants("addcdiv", grad=True),
            evaluation_steps=lambda inputs, kw: (inputs[1] / inputs[2], kw.get("value", 1) * inputs[1])),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py): long
# rows and many of them, broadcast operands alike.
_ROWS = (grows("length", (0, -1), (1, -1), (2, -1)), grows("rows", (0, -2), (1, -2), (2, -2)))
# (a unary op's rows are also independent whatever its arguments: past 2^31 elements too)
# (past 2^32 elements 5-D in a share of their own: pytorch#154828's elementwise ops on a
# 5-D bfloat16/float16 tensor of about 2^32 elements)
_UNARY_ROWS = (grows("length", (0, -1)), grows("rows", (0, 0), sliced=True, five_d_past_2_32=True))
declare_grows({**{op: _ROWS for op in ("add", "sub", "mul", "div", "where", "maximum", "pow")},
               **{op: _UNARY_ROWS for op in ("neg", "abs", "exp", "tanh", "sigmoid", "clamp")}})
