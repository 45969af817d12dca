"""Per-element scalar references for elementwise ops: the exact answer, element by element.

``SCALAR`` maps a catalogue op name to a :data:`ScalarReference`
``ref(args, kwargs) -> value`` (or a tuple of values, for ops with several outputs):

- ``args``: the Python numbers of the op's tensor inputs at one output position (after
  broadcasting): ``float`` for floating dtypes, ``complex`` for complex ones, ``int`` for
  integer ones and ``bool`` for bool;
- ``kwargs``: the case's keyword arguments;
- the value: the mathematically exact result rounded once to a Python ``float`` or
  ``complex`` (the jury rounds it again to the output dtype), an exact Python ``int`` for
  an integer result (the jury wraps it to the output dtype, two's complement, as torch's
  integer arithmetic does), or a ``bool``.

Nothing here runs a torch kernel. Sums, products and quotients are exact in
:class:`fractions.Fraction`; ``fmod``, ``ldexp``, ``frexp``, ``copysign`` and rounding are
exact in Python's ``math``; transcendental and special functions are evaluated with
mpmath at 200 bits (imported lazily: without mpmath they are NotApplicable). Special
values follow IEEE 754 / C99 Annex F and G and torch's documentation: ``exp(-inf) = 0``,
``log(0) = -inf``, ``sqrt(-0.0) = -0.0``, odd functions keep the sign of a zero.

:class:`NotApplicable` where the answer is undefined or a convention this module cannot
pin down: integer division by zero, a complex division by zero (an "infinity" of no
phase), complex arguments on a branch cut (mpmath has no signed zeros to pick the side),
a Python scalar that torch would wrap into an unsigned dtype the args do not reveal, and
quantities whose answer depends on the dtype's format (``nextafter``: see
``SCALAR_FOR_DTYPE``; ``nan_to_num``'s default replacement of an infinity).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

import torch

from .references import POLYNOMIALS, NotApplicable

ScalarReference = Callable[[tuple, dict], Any]
SCALAR: dict[str, ScalarReference] = {}
# References that need the dtype of the result (``nextafter``'s neighbour is one of the
# dtype's own floats): ``SCALAR_FOR_DTYPE[name](dtype)`` is a ScalarReference for it.
SCALAR_FOR_DTYPE: dict[str, Callable[[torch.dtype], ScalarReference]] = {}

PRECISION_BITS = 200
INF, NAN = math.inf, math.nan


def _mpmath():
    try:
        import mpmath
    except ImportError:  # (it comes with torch, through sympy; a bare install may lack it)
        raise NotApplicable("mpmath is not installed") from None
    return mpmath


def reference(*names: str):
    def register(fn):
        for name in names:
            SCALAR[name] = fn
        return fn
    return register


# -- exact arithmetic -----------------------------------------------------------------------

def _finite(*values) -> bool:
    for v in values:
        if isinstance(v, complex):
            if not (math.isfinite(v.real) and math.isfinite(v.imag)):
                return False
        elif isinstance(v, float) and not math.isfinite(v):
            return False
    return True


def _result_kind(*values) -> type:
    """The Python type of a result of these operands (complex > float > int > bool)."""
    kinds = {type(v) for v in values}
    for kind in (complex, float, int):
        if kind in kinds:
            return kind
    return bool


def rounded(q: Fraction) -> float:
    """An exact rational rounded once to a float (to +-inf past the largest one)."""
    try:
        return float(q)
    except OverflowError:
        return math.copysign(INF, q)


def _exact(v) -> Fraction:
    return Fraction(v)


def _to_kind(q: Fraction, kind: type, zero_sign: float = 1.0):
    """An exact real result in ``kind``: an int stays exact, a float is rounded once
    (an exact zero gets ``zero_sign``, the sign IEEE arithmetic gives it)."""
    if kind in (int, bool):
        if q.denominator != 1:
            raise NotApplicable("an integer result that is not an integer")
        return int(q)
    if q == 0:
        return math.copysign(0.0, zero_sign)
    return rounded(q)


def _zero_sign_of_sum(*terms: float) -> float:
    """IEEE: an exact zero sum is +0 unless every term is -0."""
    return -1.0 if all(isinstance(t, float) and t == 0 and math.copysign(1, t) < 0 for t in terms) else 1.0


def _sign(v) -> float:
    return math.copysign(1.0, v) if isinstance(v, float) else (1.0 if v >= 0 else -1.0)


def _complex_exact(fn, *values) -> complex:
    """A polynomial of complex operands, exact on the real and imaginary parts."""
    parts = [(Fraction(v.real), Fraction(v.imag)) if isinstance(v, complex) else (Fraction(v), Fraction(0))
             for v in values]
    re, im = fn(*parts)
    return complex(rounded(re), rounded(im))


def _cmul(a, b):
    return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])


def _cadd(a, b):
    return (a[0] + b[0], a[1] + b[1])


def _cscale(k, a):
    return (k[0] * a[0] - k[1] * a[1], k[0] * a[1] + k[1] * a[0])


# -- special values of real functions ------------------------------------------------------

def _mp_real(fn, x: float, *, at_zero_odd: bool = False, specials: dict | None = None):
    """``fn(x)`` at 200 bits, rounded to a float. ``specials``: results at inf/-inf (and
    any other exact argument), NaN gives NaN; ``at_zero_odd``: f(+-0) = +-0."""
    if x != x:
        return NAN
    if specials and x in specials:
        return specials[x]
    if at_zero_odd and x == 0:
        return x
    if not math.isfinite(x):
        raise NotApplicable(f"no convention for an infinite argument here ({x})")
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        value = fn(mp, mp.mpf(x))
        if isinstance(value, mp.mpc):
            if value.imag != 0:
                return NAN  # outside the real domain: IEEE's invalid operation
            value = value.real
        return float(value)


def _mp_complex(fn, z: complex, cuts=None):
    """``fn(z)`` of a complex argument at 200 bits. ``cuts(z)`` says z lies on a branch
    cut, where the side (the sign of a zero part) decides and mpmath has no signed zero."""
    if not _finite(z):
        raise NotApplicable("complex special values: C99 Annex G's tables are not encoded here")
    if cuts is not None and cuts(z):
        raise NotApplicable("a complex argument on a branch cut")
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        value = mp.mpc(fn(mp, mp.mpc(z.real, z.imag)))
        return complex(float(value.real), float(value.imag))


def _on_real_axis_below(limit: float):
    return lambda z: z.imag == 0 and z.real < limit


def _on_real_axis_outside(limit: float):
    return lambda z: z.imag == 0 and abs(z.real) > limit


def _on_imag_axis_outside(limit: float):
    return lambda z: z.real == 0 and abs(z.imag) > limit


def _as_real(v):
    """An integer or bool argument as the float torch promotes it to (through the default
    dtype: float32 rounds integers beyond 2**24)."""
    if isinstance(v, (bool, int)):
        return float(torch.tensor(float(int(v)), dtype=torch.get_default_dtype()).item()) if abs(int(v)) > 2**24 \
            else float(int(v))
    return v


def _unary(real_fn, complex_fn=None, *, odd: bool = False, specials: dict | None = None, cuts=None):
    """A unary math op: ``real_fn(mp, x)`` / ``complex_fn(mp, z)`` (default: real_fn)."""
    def ref(args, kwargs):
        x = _as_real(args[0])
        if isinstance(x, complex):
            return _mp_complex(complex_fn or real_fn, x, cuts)
        return _mp_real(real_fn, x, at_zero_odd=odd, specials=specials)
    return ref


def _sigmoid(mp, x):
    return 1 / (1 + mp.exp(-x))


def _sinc(mp, x):
    return mp.mpf(1) if x == 0 else mp.sin(mp.pi * x) / (mp.pi * x)


def _csinc(mp, z):
    return mp.mpc(1) if z == 0 else mp.sin(mp.pi * z) / (mp.pi * z)


_LOG_CUT = _on_real_axis_below(0.0)
reference("exp")(_unary(lambda mp, x: mp.exp(x), specials={INF: INF, -INF: 0.0}))
reference("exp2")(_unary(lambda mp, x: mp.power(2, x), specials={INF: INF, -INF: 0.0}))
reference("expm1")(_unary(lambda mp, x: mp.expm1(x), odd=True, specials={INF: INF, -INF: -1.0}))
reference("sqrt")(_unary(lambda mp, x: mp.sqrt(x), odd=True, specials={INF: INF, -INF: NAN}, cuts=_LOG_CUT))
reference("rsqrt")(_unary(lambda mp, x: 1 / mp.sqrt(x), specials={INF: 0.0, -INF: NAN, 0.0: INF},
                          cuts=lambda z: z == 0 or _LOG_CUT(z)))
reference("sin")(_unary(lambda mp, x: mp.sin(x), odd=True, specials={INF: NAN, -INF: NAN}))
reference("cos")(_unary(lambda mp, x: mp.cos(x), specials={INF: NAN, -INF: NAN}))
reference("tan")(_unary(lambda mp, x: mp.tan(x), odd=True, specials={INF: NAN, -INF: NAN}))
reference("tanh")(_unary(lambda mp, x: mp.tanh(x), odd=True, specials={INF: 1.0, -INF: -1.0}))
reference("sinh")(_unary(lambda mp, x: mp.sinh(x), odd=True, specials={INF: INF, -INF: -INF}))
reference("cosh")(_unary(lambda mp, x: mp.cosh(x), specials={INF: INF, -INF: INF}))
reference("asin")(_unary(lambda mp, x: mp.asin(x), odd=True, specials={INF: NAN, -INF: NAN},
                         cuts=_on_real_axis_outside(1.0)))
reference("acos")(_unary(lambda mp, x: mp.acos(x), specials={INF: NAN, -INF: NAN}, cuts=_on_real_axis_outside(1.0)))
reference("atan")(_unary(lambda mp, x: mp.atan(x), odd=True, specials={INF: math.pi / 2, -INF: -math.pi / 2},
                         cuts=_on_imag_axis_outside(1.0)))
reference("asinh")(_unary(lambda mp, x: mp.asinh(x), odd=True, specials={INF: INF, -INF: -INF},
                          cuts=_on_imag_axis_outside(1.0)))
reference("acosh")(_unary(lambda mp, x: mp.acosh(x), specials={INF: INF, -INF: NAN, 1.0: 0.0},
                          cuts=_on_real_axis_below(1.0)))
reference("atanh")(_unary(lambda mp, x: mp.atanh(x), odd=True, specials={INF: NAN, -INF: NAN, 1.0: INF, -1.0: -INF},
                          cuts=_on_real_axis_outside(1.0)))
reference("log")(_unary(lambda mp, x: mp.log(x), specials={INF: INF, -INF: NAN, 0.0: -INF, 1.0: 0.0},
                        cuts=lambda z: z == 0 or _LOG_CUT(z)))
reference("log2")(_unary(lambda mp, x: mp.log(x, 2), specials={INF: INF, -INF: NAN, 0.0: -INF, 1.0: 0.0},
                         cuts=lambda z: z == 0 or _LOG_CUT(z)))
reference("log10")(_unary(lambda mp, x: mp.log10(x), specials={INF: INF, -INF: NAN, 0.0: -INF, 1.0: 0.0},
                          cuts=lambda z: z == 0 or _LOG_CUT(z)))
reference("log1p")(_unary(lambda mp, x: mp.log1p(x), odd=True, specials={INF: INF, -INF: NAN, -1.0: -INF},
                          cuts=lambda z: z == -1 or _on_real_axis_below(-1.0)(z)))
reference("sigmoid", "special.expit")(_unary(_sigmoid, specials={INF: 1.0, -INF: 0.0}))
reference("special.sinc")(_unary(_sinc, _csinc, specials={INF: 0.0, -INF: 0.0}))
reference("deg2rad")(_unary(lambda mp, x: x * mp.pi / 180, odd=True, specials={INF: INF, -INF: -INF}))
reference("rad2deg")(_unary(lambda mp, x: x * 180 / mp.pi, odd=True, specials={INF: INF, -INF: -INF}))


@reference("reciprocal")
def _reciprocal(args, kwargs):
    return _divide_values(1.0, _as_real(args[0]))


# -- special functions -----------------------------------------------------------------------

def _is_nonpositive_integer(x: float) -> bool:
    return x <= 0 and x == math.floor(x)


@reference("lgamma", "special.gammaln")
def _lgamma_ref(args, kwargs):
    x = _as_real(args[0])
    if x != x:
        return NAN
    if math.isinf(x) or _is_nonpositive_integer(x):
        return INF  # log|gamma| at its poles and at both infinities
    return _mp_real(lambda mp, v: mp.loggamma(v).real, x)


@reference("digamma")
def _digamma(args, kwargs):
    x = _as_real(args[0])
    if x != x or x == -INF:
        return NAN
    if x == INF:
        return INF
    if x == 0:
        return math.copysign(INF, -x)  # torch: -inf at +0, +inf at -0
    if _is_nonpositive_integer(x):
        return NAN  # torch (and SciPy): NaN at the negative integers
    return _mp_real(lambda mp, v: mp.digamma(v), x)


def _polygamma_value(n: int, x: float):
    if n == 0:
        return _digamma((x,), {})
    if x != x or x == -INF:
        return NAN
    if x == INF:
        return 0.0
    if _is_nonpositive_integer(x):
        # n! / (x - pole)**(n + 1) dominates: +inf from both sides for odd n; for even n
        # the sides disagree
        if n % 2:
            return INF
        raise NotApplicable("polygamma of even order at a pole")
    return _mp_real(lambda mp, v: mp.polygamma(n, v), x)


@reference("polygamma", "special.polygamma")
def _polygamma(args, kwargs):
    return _polygamma_value(int(kwargs["n"]), _as_real(args[0]))


def _mvlgamma_value(x: float, p: int):
    if x != x:
        return NAN
    if not x > (p - 1) / 2:
        raise NotApplicable("mvlgamma outside its domain x > (p - 1) / 2 (torch raises)")
    if math.isinf(x):
        return INF
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        total = p * (p - 1) / mp.mpf(4) * mp.log(mp.pi)
        for j in range(1, p + 1):
            total += mp.loggamma(mp.mpf(x) + mp.mpf(1 - j) / 2).real
        return float(total)


@reference("mvlgamma", "special.multigammaln")
def _mvlgamma(args, kwargs):
    return _mvlgamma_value(_as_real(args[0]), int(kwargs["p"]))


reference("erf")(_unary(lambda mp, x: mp.erf(x), odd=True, specials={INF: 1.0, -INF: -1.0}))
reference("erfc")(_unary(lambda mp, x: mp.erfc(x), specials={INF: 0.0, -INF: 2.0}))
reference("special.erfcx")(_unary(lambda mp, x: mp.exp(x * x) * mp.erfc(x), specials={INF: 0.0, -INF: INF}))
reference("special.ndtr")(_unary(lambda mp, x: mp.erfc(-x / mp.sqrt(2)) / 2, specials={INF: 1.0, -INF: 0.0}))
reference("special.log_ndtr")(_unary(lambda mp, x: mp.log(mp.erfc(-x / mp.sqrt(2)) / 2),
                                     specials={INF: 0.0, -INF: -INF}))


@reference("erfinv")
def _erfinv(args, kwargs):
    x = _as_real(args[0])
    if x != x or abs(x) > 1:
        return NAN
    if abs(x) == 1:
        return math.copysign(INF, x)
    return _mp_real(lambda mp, v: mp.erfinv(v), x, at_zero_odd=True)


@reference("special.ndtri")
def _ndtri(args, kwargs):
    p = _as_real(args[0])
    if p != p or p < 0 or p > 1:
        return NAN
    if p in (0.0, 1.0):
        return -INF if p == 0 else INF
    return _mp_real(lambda mp, v: mp.sqrt(2) * mp.erfinv(2 * v - 1), p)


def _bessel_i(order: int, scaled: bool):
    def fn(mp, x):
        value = mp.besseli(order, x)
        return value * mp.exp(-abs(x)) if scaled else value
    return fn


# I0 is even and I1 odd; their scaled forms tend to 0 at infinity, the plain ones to +-inf
reference("special.i0", "special.modified_bessel_i0")(_unary(_bessel_i(0, False), specials={INF: INF, -INF: INF}))
reference("special.i1", "special.modified_bessel_i1")(_unary(_bessel_i(1, False), odd=True,
                                                             specials={INF: INF, -INF: -INF}))
reference("special.i0e")(_unary(_bessel_i(0, True), specials={INF: 0.0, -INF: 0.0}))
reference("special.i1e")(_unary(_bessel_i(1, True), odd=True, specials={INF: 0.0, -INF: -0.0}))
reference("special.bessel_j0")(_unary(lambda mp, x: mp.besselj(0, x), specials={INF: 0.0, -INF: 0.0}))
reference("special.bessel_j1")(_unary(lambda mp, x: mp.besselj(1, x), odd=True, specials={INF: 0.0, -INF: -0.0}))
reference("special.spherical_bessel_j0")(_unary(lambda mp, x: mp.sin(x) / x if x else mp.mpf(1),
                                                specials={INF: 0.0, -INF: 0.0}))
reference("special.airy_ai")(_unary(lambda mp, x: mp.airyai(x), specials={INF: 0.0}))


def _second_kind(fn, at_zero: float, at_inf: float):
    """Bessel functions of the second kind: real only for x > 0 (torch: NaN below 0)."""
    def ref(args, kwargs):
        x = _as_real(args[0])
        if x != x or x < 0:
            return NAN
        if x == 0:
            return at_zero
        if x == INF:
            return at_inf
        return _mp_real(fn, x)
    return ref


reference("special.bessel_y0")(_second_kind(lambda mp, x: mp.bessely(0, x), -INF, 0.0))
reference("special.bessel_y1")(_second_kind(lambda mp, x: mp.bessely(1, x), -INF, 0.0))
reference("special.modified_bessel_k0")(_second_kind(lambda mp, x: mp.besselk(0, x), INF, 0.0))
reference("special.modified_bessel_k1")(_second_kind(lambda mp, x: mp.besselk(1, x), INF, 0.0))
reference("special.scaled_modified_bessel_k0")(_second_kind(lambda mp, x: mp.besselk(0, x) * mp.exp(x), INF, 0.0))
reference("special.scaled_modified_bessel_k1")(_second_kind(lambda mp, x: mp.besselk(1, x) * mp.exp(x), INF, 0.0))


@reference("special.entr")
def _entr(args, kwargs):
    x = _as_real(args[0])
    if x != x:
        return NAN
    if x < 0:
        return -INF
    if x == 0:
        return 0.0
    if x == INF:
        return -INF
    return _mp_real(lambda mp, v: -v * mp.log(v), x)


@reference("logit")
def _logit(args, kwargs):
    integral = isinstance(args[0], (bool, int))
    x = _as_real(args[0])
    eps = kwargs.get("eps")
    if x != x:
        return NAN
    if eps is not None:
        low, high = eps, 1 - eps
        if integral:  # the clamp runs in the dtype an integer input is promoted to
            low, high = (torch.tensor(b, dtype=torch.get_default_dtype()).item() for b in (low, high))
        x = min(max(x, low), high)
    if x < 0 or x > 1:
        return NAN
    if x in (0.0, 1.0):
        return -INF if x == 0 else INF
    return _mp_real(lambda mp, v: mp.log(v / (1 - v)), x)


def _xlog(log1p: bool):
    def ref(args, kwargs):
        x, y = _as_real(args[0]), _as_real(args[1])
        if y != y:
            return NAN
        if x == 0 and x == x:
            return 0.0  # torch: 0 wherever x is 0 (y finite or not)
        if x != x:
            return NAN
        arg = 1 + Fraction(y) if log1p and math.isfinite(y) else (y + 1 if log1p else y)
        if arg < 0:
            return NAN
        if arg == 0:
            return -x * INF if x else NAN
        if not math.isfinite(y) or not math.isfinite(x):
            return x * (INF if y > 0 else NAN)
        mp = _mpmath()
        with mp.workprec(PRECISION_BITS):
            return float(mp.mpf(x) * (mp.log1p(y) if log1p else mp.log(y)))
    return ref


reference("xlogy")(_xlog(False))
reference("special.xlog1py")(_xlog(True))


@reference("special.zeta")
def _zeta(args, kwargs):
    x, q = float(args[0]), float(args[1])
    if x != x or q != q:
        return NAN
    # torch.special.zeta is the series sum 1 / (k + q)**x, which converges for x > 1
    # only: NaN below (as SciPy; not the analytic continuation), a pole at x = 1
    if x < 1:
        return NAN
    if x == 1:
        return INF if q > 0 else _not_applicable("zeta(1, q <= 0)")
    if _is_nonpositive_integer(q) and math.isfinite(x):
        # the term 1 / (k + q)**x is 1 / 0**x: +inf from both sides for an even x
        if x == math.floor(x) and x % 2 == 0:
            return INF
        raise NotApplicable("zeta at a pole of q with x not an even integer")
    if math.isinf(x) or math.isinf(q):
        raise NotApplicable("zeta at infinities")
    if q < 0 and x != math.floor(x):
        return NAN  # (k + q)**-x of a negative base
    return _mp_real(lambda mp, v: mp.zeta(v, q), x)


def _igamma(upper: bool):
    def ref(args, kwargs):
        a, x = _as_real(args[0]), _as_real(args[1])
        if a != a or x != x:
            return NAN
        if not (a > 0 and x >= 0) or math.isinf(a):
            raise NotApplicable("igamma outside a > 0, x >= 0")
        if x == 0:
            return 1.0 if upper else 0.0
        if x == INF:
            return 0.0 if upper else 1.0
        mp = _mpmath()
        with mp.workprec(PRECISION_BITS):
            if upper:
                return float(mp.gammainc(a, x, mp.inf, regularized=True))
            return float(mp.gammainc(a, 0, x, regularized=True))
    return ref


reference("igamma")(_igamma(False))
reference("igammac")(_igamma(True))


# -- exact arithmetic ops -------------------------------------------------------------------

def _add_values(x, y, alpha=1):
    kind = _result_kind(x, y)
    if kind is bool:
        return bool(x) or bool(y) if alpha in (1, True) else _not_applicable("bool alpha")
    if kind is complex:
        if not _finite(x, y):
            return complex(x) + alpha * complex(y)
        return _complex_exact(lambda a, b: _cadd(a, _cscale((Fraction(alpha), Fraction(0)), b)), x, y)
    if not _finite(x, y, alpha):
        return float(x) + alpha * float(y)
    exact = _exact(x) + _exact(alpha) * _exact(y)
    scaled = alpha * y if isinstance(alpha * y, float) else float(alpha * y)
    return _to_kind(exact, kind, _zero_sign_of_sum(x, scaled) if kind is float else 1.0)


def _not_applicable(why: str):
    raise NotApplicable(why)


def _mul_values(x, y):
    kind = _result_kind(x, y)
    if kind is bool:
        return bool(x) and bool(y)
    if kind is complex:
        if not _finite(x, y):
            return complex(x) * complex(y)
        return _complex_exact(_cmul, x, y)
    if not _finite(x, y):
        return float(x) * float(y)
    return _to_kind(_exact(x) * _exact(y), kind, _sign(x) * _sign(y))


def _divide_values(x, y):
    """True division, exact and rounded once; IEEE at zero divisors (real only)."""
    if isinstance(x, complex) or isinstance(y, complex):
        x, y = complex(x), complex(y)
        if y == 0:
            raise NotApplicable("a complex division by zero (an infinity of no defined phase)")
        if not _finite(x, y):
            raise NotApplicable("complex division with infinite parts")
        d = Fraction(y.real) ** 2 + Fraction(y.imag) ** 2
        re = (Fraction(x.real) * Fraction(y.real) + Fraction(x.imag) * Fraction(y.imag)) / d
        im = (Fraction(x.imag) * Fraction(y.real) - Fraction(x.real) * Fraction(y.imag)) / d
        return complex(rounded(re), rounded(im))
    x, y = float(_as_real(x)), float(_as_real(y))
    if y == 0 or not _finite(x, y):
        if y == 0:
            return NAN if x == 0 or x != x else math.copysign(INF, x) * _sign(y)
        return x / y if math.isfinite(y) or math.isfinite(x) else NAN
    q = Fraction(x) / Fraction(y)
    return _to_kind(q, float, _sign(x) * _sign(y))


@reference("add")
def _add(args, kwargs):
    return _add_values(args[0], args[1], kwargs.get("alpha", 1))


@reference("sub")
def _sub(args, kwargs):
    if isinstance(args[0], bool) and isinstance(args[1], bool):
        raise NotApplicable("torch refuses to subtract bools")
    return _add_values(args[0], args[1], -kwargs.get("alpha", 1))


@reference("mul")
def _mul(args, kwargs):
    return _mul_values(args[0], args[1])


@reference("div", "true_divide")
def _div(args, kwargs):
    return _divide_values(args[0], args[1])


def _int_divide(x: int, y: int, mode: str) -> int:
    if y == 0:
        raise NotApplicable("integer division by zero")
    q = x // y
    if mode == "trunc" and q < 0 and q * y != x:
        q += 1
    return q


def _float_divide_rounded(x: float, y: float, mode: str) -> float:
    """torch.div with rounding_mode for floats: floor is the floor of the exact quotient
    (torch's div_floor, Python's //); trunc truncates the rounded quotient, which the
    exact one decides unless it lies within a rounding of an integer (then the format
    of the case's dtype decides: no answer)."""
    if y == 0 or not _finite(x, y):
        q = _divide_values(x, y)
        return q if not math.isfinite(q) else (math.floor(q) if mode == "floor" else math.trunc(q))
    exact = Fraction(x) / Fraction(y)
    whole = math.floor(exact) if mode == "floor" else math.trunc(exact)
    if mode == "trunc":
        nearest = round(exact)
        if exact != nearest and nearest != 0 and abs(exact - nearest) <= abs(exact) / 2**10:
            raise NotApplicable("the quotient is within a rounding of an integer")
    return _to_kind(Fraction(whole), float, _sign(x) * _sign(y))


def _rounded_division(x, y, mode):
    if mode is None:
        return _divide_values(x, y)
    if isinstance(x, (bool, int)) and isinstance(y, (bool, int)):
        return _int_divide(int(x), int(y), mode)
    return _float_divide_rounded(float(x), float(y), mode)


def _nonzero_divisor(y):
    """The specs' integer zero divisors replaced by 1 (on both sides)."""
    return 1 if isinstance(y, (bool, int)) and not isinstance(y, float) and y == 0 else y


@reference("div_rounding")
def _div_rounding(args, kwargs):
    return _rounded_division(args[0], args[1], kwargs.get("rounding_mode"))


@reference("div_trunc")
def _div_trunc(args, kwargs):
    return _rounded_division(args[0], _nonzero_divisor(args[1]), "trunc")


@reference("div_floor", "floor_divide")
def _div_floor(args, kwargs):
    return _rounded_division(args[0], _nonzero_divisor(args[1]), "floor")


def _modulus(x, y, python: bool):
    """Python's modulus (the sign of the divisor) or C's fmod (the sign of the
    dividend), exact and rounded once."""
    if isinstance(x, (bool, int)) and isinstance(y, (bool, int)):
        x, y = int(x), int(y)
        if y == 0:
            raise NotApplicable("integer modulus by zero")
        if python:
            return x % y
        r = abs(x) % abs(y)
        return -r if x < 0 else r
    x, y = float(x), float(y)
    if python:
        # Python's float % is the exact remainder rounded once (the fmod, exact, plus the
        # divisor where the signs differ); a zero takes the divisor's sign
        if y == 0 or x != x or y != y or math.isinf(x):
            return NAN
        return x % y
    if y == 0 or x != x or y != y or math.isinf(x):
        return NAN
    return math.fmod(x, y)  # exact: fmod(1.0, 2**-1024) is 0.0


@reference("remainder")
def _remainder(args, kwargs):
    return _modulus(args[0], _nonzero_divisor(args[1]), True)


@reference("fmod")
def _fmod(args, kwargs):
    return _modulus(args[0], _nonzero_divisor(args[1]), False)


@reference("remainder_float")
def _remainder_float(args, kwargs):
    return _modulus(args[0], args[1], True)


@reference("fmod_float")
def _fmod_float(args, kwargs):
    return _modulus(args[0], args[1], False)


def _int_power(x: int, e: int) -> int:
    if e >= 0:
        # past 64 bits only the residue matters: the jury wraps to a dtype of 64 bits or
        # fewer, and x**e mod 2**64 wraps as x**e does (an exponent near 2**62 is ordinary)
        return x ** e if e <= 64 else pow(x, e, 2**64)
    if x == 0:
        raise NotApplicable("0 to a negative integer power")
    if x == 1:
        return 1
    if x == -1:
        return -1 if e % 2 else 1
    return 0  # (torch's integer power truncates 1 / x**|e| to 0)


def _real_power(x: float, y: float) -> float:
    """x ** y correctly rounded; C99's special cases (math.pow follows them)."""
    if x == 0 and y == y:
        # C99: pow(+-0, y) is +-inf for odd integers y < 0, +inf for other y < 0, +-0 for
        # odd integers y > 0 and +0 for other y > 0 (math.pow refuses 0 ** negative)
        odd = float(y).is_integer() and abs(y) < 2**53 and int(y) % 2 == 1
        if y == 0:
            return 1.0
        magnitude = INF if y < 0 else 0.0
        return math.copysign(magnitude, x) if odd else magnitude
    if not _finite(x, y) or y == 0 or x == 1:
        try:
            return math.pow(x, y)
        except ValueError:
            return NAN
        except OverflowError:
            return INF if x > 0 or float(y).is_integer() and int(y) % 2 == 0 else -INF
    if x < 0 and not float(y).is_integer():
        return NAN
    if float(y).is_integer() and abs(y) <= 64:
        return rounded(Fraction(x) ** int(y))
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        magnitude = mp.power(abs(mp.mpf(x)), mp.mpf(y))
        negative = x < 0 and int(y) % 2 == 1
        return float(-magnitude if negative else magnitude)


def _complex_power(x: complex, y: complex) -> complex:
    if x == 0:
        if y.real > 0:
            return complex(0.0, 0.0)
        raise NotApplicable("a complex zero to a power of real part <= 0 (conventions differ)")
    if not _finite(x, y):
        raise NotApplicable("complex powers of infinite parts")
    if y.imag == 0 and y.real.is_integer() and abs(y.real) <= 64:
        # an integer power is a product, exact (and off every branch cut)
        base = (Fraction(x.real), Fraction(x.imag))
        n = int(y.real)
        acc = (Fraction(1), Fraction(0))
        for _ in range(abs(n)):
            acc = _cmul(acc, base)
        return complex(rounded(acc[0]), rounded(acc[1])) if n >= 0 else _exact_reciprocal(acc)
    if x.imag == 0 and x.real < 0:
        raise NotApplicable("a complex power of a negative real base (on the branch cut)")
    return _mp_complex(lambda mp, z: mp.power(z, mp.mpc(y.real, y.imag)), x)


def _exact_reciprocal(c) -> complex:
    d = c[0] ** 2 + c[1] ** 2
    if d == 0:
        raise NotApplicable("a complex division by zero")
    return complex(rounded(c[0] / d), rounded(-c[1] / d))


def _power_values(x, y):
    kind = _result_kind(x, y)
    if kind is bool:
        raise NotApplicable("bool powers")
    if kind is int:
        return _int_power(int(x), int(y))
    if kind is complex:
        return _complex_power(complex(x), complex(y))
    return _real_power(float(_as_real(x)), float(_as_real(y)))


@reference("pow")
def _pow(args, kwargs):
    return _power_values(args[0], args[1])


@reference("float_power")
def _float_power(args, kwargs):
    x, y = args
    if isinstance(x, complex) or isinstance(y, complex):
        return _complex_power(complex(x), complex(y))
    return _real_power(float(x), float(y))  # in double precision: integers exactly


@reference("atan2")
def _atan2(args, kwargs):
    return _atan2_value(_as_real(args[0]), _as_real(args[1]))


def _atan2_value(y: float, x: float) -> float:
    if not _finite(x, y) or x == 0 or y == 0:
        return math.atan2(y, x)  # C99's special cases (zeros of either sign, infinities)
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        return float(mp.atan2(y, x))


@reference("hypot")
def _hypot(args, kwargs):
    x, y = float(args[0]), float(args[1])
    if math.isinf(x) or math.isinf(y):
        return INF  # even with a NaN (C99)
    if x != x or y != y:
        return NAN
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        return float(mp.sqrt(mp.mpf(x) ** 2 + mp.mpf(y) ** 2))


@reference("copysign")
def _copysign(args, kwargs):
    return math.copysign(_as_real(args[0]), _as_real(args[1]))


def _nextafter_for(dtype: torch.dtype) -> ScalarReference:
    """nextafter in ``dtype``'s format: float64 by math.nextafter (Python 3.9+), the
    narrower ones by stepping the bit pattern of their own floats."""
    def ref(args, kwargs):
        x, y = float(args[0]), float(args[1])
        if x != x or y != y:
            return NAN
        if x == y:
            return y
        if dtype == torch.float64:
            return math.nextafter(x, y)
        if dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise NotApplicable(f"nextafter in {dtype}")
        width = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[dtype]
        if x == 0:
            tiny = torch.tensor(1, dtype=width).view(dtype).item()
            return math.copysign(tiny, y)
        bits = int(torch.tensor(x, dtype=dtype).view(width).item())
        away = (y > x) == (x > 0)
        return float(torch.tensor(bits + (1 if away else -1), dtype=width).view(dtype).item())
    return ref


SCALAR_FOR_DTYPE["nextafter"] = _nextafter_for


def _complex_logaddexp(x: complex, y: complex) -> complex:
    """log(e**x + e**y) on the branch torch's formula picks, max + log1p(exp(min - max))
    with max the operand of larger real part: the imaginary part within pi of its own."""
    if not _finite(x, y):
        raise NotApplicable("complex logaddexp of infinite parts")
    if x.real == y.real:
        raise NotApplicable("complex logaddexp of equal real parts: which operand leads")
    big, small = (x, y) if x.real > y.real else (y, x)
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        lead = mp.mpc(big.real, big.imag)
        value = lead + mp.log(1 + mp.exp(mp.mpc(small.real, small.imag) - lead))
        return complex(float(value.real), float(value.imag))


def _logaddexp_values(x, y, base2: bool):
    if isinstance(x, complex) or isinstance(y, complex):
        if base2:
            raise NotApplicable("complex logaddexp2")
        return _complex_logaddexp(complex(x), complex(y))
    x, y = float(x), float(y)
    if x != x or y != y:
        return NAN
    if x == INF or y == INF:
        return INF
    if x == -INF:
        return y
    if y == -INF:
        return x
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        if base2:
            return float(mp.log(mp.power(2, x) + mp.power(2, y), 2))
        return float(mp.log(mp.exp(x) + mp.exp(y)))


@reference("logaddexp")
def _logaddexp(args, kwargs):
    return _logaddexp_values(args[0], args[1], False)


@reference("logaddexp2")
def _logaddexp2(args, kwargs):
    return _logaddexp_values(args[0], args[1], True)


def _pick(larger: bool, ignore_nan: bool):
    """max/min of two operands: NaN wins (maximum) or loses (fmax) as documented; exact
    for integers of any width (uint64's 2**64 - 1 included)."""
    def ref(args, kwargs):
        x, y = args
        if isinstance(x, bool) and isinstance(y, bool):
            return (x or y) if larger else (x and y)
        x_nan, y_nan = x != x, y != y
        if x_nan or y_nan:
            if ignore_nan and not (x_nan and y_nan):
                return y if x_nan else x
            return NAN
        if x == y == 0 and isinstance(x, float) and isinstance(y, float) and \
                math.copysign(1, x) != math.copysign(1, y):
            raise NotApplicable("+0 against -0: which one is returned is not specified")
        kind = _result_kind(x, y)
        chosen = max(x, y) if larger else min(x, y)
        return float(chosen) if kind is float else chosen
    return ref


reference("fmax", "fmax_cpu_scalar")(_pick(True, True))
reference("fmin", "fmin_cpu_scalar")(_pick(False, True))
reference("maximum", "max_binary")(_pick(True, False))
reference("minimum", "min_binary")(_pick(False, False))


@reference("heaviside")
def _heaviside(args, kwargs):
    x, y = args
    kind = _result_kind(x, y)
    # torch: x == 0 ? y : (x > 0); so NaN gives 0
    value = y if x == 0 else (x > 0)
    return bool(value) if kind is bool else kind(value)


@reference("isclose")
def _isclose(args, kwargs):
    x, y = args
    rtol, atol = kwargs.get("rtol", 1e-05), kwargs.get("atol", 1e-08)
    if x == y:
        return True
    if x != x or y != y:
        return bool(kwargs.get("equal_nan", False)) and x != x and y != y
    if not _finite(x, y):
        return False
    if isinstance(x, complex) or isinstance(y, complex):
        mp = _mpmath()
        with mp.workprec(PRECISION_BITS):
            return bool(abs(mp.mpc(x) - mp.mpc(y)) <= atol + rtol * abs(mp.mpc(y)))
    return abs(Fraction(x) - Fraction(y)) <= Fraction(atol) + Fraction(rtol) * abs(Fraction(y))


def _compare(fn):
    def ref(args, kwargs):
        return bool(fn(args[0], args[1]))
    return ref


for _name, _fn in (("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b), ("lt", lambda a, b: a < b),
                   ("le", lambda a, b: a <= b), ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b)):
    reference(_name)(_compare(_fn))
reference("logical_and")(_compare(lambda a, b: bool(a) and bool(b)))
reference("logical_or")(_compare(lambda a, b: bool(a) or bool(b)))
reference("logical_xor")(_compare(lambda a, b: bool(a) != bool(b)))


def _bitwise(fn):
    def ref(args, kwargs):
        x, y = args
        if isinstance(x, bool) and isinstance(y, bool):
            return bool(fn(x, y))
        return fn(int(x), int(y))  # two's complement on Python ints: wrapping commutes
    return ref


reference("bitwise_and")(_bitwise(lambda a, b: a & b))
reference("bitwise_or")(_bitwise(lambda a, b: a | b))
reference("bitwise_xor")(_bitwise(lambda a, b: a ^ b))
def _left_shift(a: int, b: int) -> int:
    return 0 if b >= 64 else a << b  # (every bit leaves a dtype of 64 bits or fewer)


reference("bitwise_left_shift")(_bitwise(_left_shift))
reference("bitwise_right_shift")(_bitwise(lambda a, b: a >> b))


@reference("gcd")
def _gcd(args, kwargs):
    return math.gcd(int(args[0]), int(args[1]))


@reference("lcm")
def _lcm(args, kwargs):
    x, y = int(args[0]), int(args[1])
    value = 0 if x == 0 or y == 0 else abs(x * y) // math.gcd(x, y)
    # torch computes |x / gcd * y| in the dtype: past 2**31 it overflows int32 or int64
    # arithmetic before its abs, where the wrapped result depends on the width
    if value >= 2**31:
        raise NotApplicable("an lcm that may overflow a signed dtype")
    return value


@reference("ldexp")
def _ldexp(args, kwargs):
    x, e = float(args[0]), int(args[1])
    try:
        return math.ldexp(x, e)  # exact (rounded once where the result is subnormal)
    except OverflowError:
        return math.copysign(INF, x)


@reference("polar")
def _polar(args, kwargs):
    r, theta = float(args[0]), float(args[1])
    if not _finite(r, theta):
        raise NotApplicable("polar with a non-finite part")
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        return complex(float(r * mp.cos(theta)), float(r * mp.sin(theta)))


@reference("complex")
def _complex(args, kwargs):
    return complex(float(args[0]), float(args[1]))


# -- unary exact ops ------------------------------------------------------------------------

@reference("abs")
def _abs(args, kwargs):
    x = args[0]
    if isinstance(x, complex):
        if not _finite(x):
            return INF if math.isinf(x.real) or math.isinf(x.imag) else NAN
        return _hypot((x.real, x.imag), {})
    return abs(x)


@reference("neg")
def _neg(args, kwargs):
    if isinstance(args[0], bool):
        raise NotApplicable("torch refuses to negate bool")
    return -args[0]


@reference("sign")
def _sign_ref(args, kwargs):
    x = args[0]
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return (x > 0) - (x < 0)
    if x != x:
        return NAN
    return 0.0 if x == 0 else math.copysign(1.0, x)


@reference("sgn")
def _sgn(args, kwargs):
    x = args[0]
    if not isinstance(x, complex):
        return _sign_ref(args, kwargs)
    if x == 0:
        return complex(0.0, 0.0)
    if not _finite(x):
        raise NotApplicable("sgn of a complex infinity or NaN")
    mp = _mpmath()
    with mp.workprec(PRECISION_BITS):
        z = mp.mpc(x.real, x.imag)
        return complex(z / abs(z))


@reference("square")
def _square(args, kwargs):
    x = args[0]
    if isinstance(x, bool):
        return int(x)  # torch: pow(bool, 2) is int64
    return _mul_values(x, x)


def _rounding(fn):
    def ref(args, kwargs):
        x = args[0]
        if isinstance(x, (bool, int)):
            return x  # integers are their own floor, ceil, round and trunc
        if not math.isfinite(x) or x == 0:
            return x
        value = float(fn(x))
        return math.copysign(value, x) if value == 0 else value  # (-0.4 rounds to -0.0)
    return ref


reference("floor")(_rounding(math.floor))
reference("ceil")(_rounding(math.ceil))
reference("trunc")(_rounding(math.trunc))
reference("round")(_rounding(round))  # Python rounds half to even, as torch


@reference("round_decimals")
def _round_decimals(args, kwargs):
    x, d = float(args[0]), int(kwargs["decimals"])
    if not math.isfinite(x) or x == 0:
        return x
    # x rounded to d decimals exactly (half to even); torch scales by 10**d in the dtype,
    # which agrees but where that scaling rounds to a tie
    scaled = Fraction(x) * Fraction(10) ** d
    value = rounded(Fraction(round(scaled)) / Fraction(10) ** d)
    return math.copysign(value, x) if value == 0 else value


@reference("frac")
def _frac(args, kwargs):
    x = float(args[0])
    if not math.isfinite(x):
        return NAN
    return x - math.trunc(x)  # exact (the result is representable), IEEE's zero sign


@reference("bitwise_not")
def _bitwise_not(args, kwargs):
    x = args[0]
    return (not x) if isinstance(x, bool) else ~int(x)


@reference("logical_not")
def _logical_not(args, kwargs):
    return not bool(args[0])


def _class_test(fn, integral_answer: bool):
    def ref(args, kwargs):
        x = args[0]
        if isinstance(x, (bool, int)):
            return integral_answer
        if isinstance(x, complex):
            return bool(fn(x.real) or fn(x.imag)) if fn is not math.isfinite else bool(fn(x.real) and fn(x.imag))
        return bool(fn(x))
    return ref


reference("isnan")(_class_test(math.isnan, False))
reference("isinf")(_class_test(math.isinf, False))
reference("isfinite")(_class_test(math.isfinite, True))
reference("isposinf")(_class_test(lambda v: v == INF, False))
reference("isneginf")(_class_test(lambda v: v == -INF, False))


@reference("signbit")
def _signbit(args, kwargs):
    x = args[0]
    if isinstance(x, float):
        return math.copysign(1.0, x) < 0
    return bool(x < 0)


@reference("nan_to_num")
def _nan_to_num(args, kwargs):
    def fix(v: float) -> float:
        if v != v:
            nan = kwargs.get("nan")
            return 0.0 if nan is None else float(nan)
        if math.isinf(v):
            key = "posinf" if v > 0 else "neginf"
            if kwargs.get(key) is None:
                raise NotApplicable("an infinity's default replacement is the dtype's extreme")
            return float(kwargs[key])
        return v
    x = args[0]
    return complex(fix(x.real), fix(x.imag)) if isinstance(x, complex) else fix(float(x))


@reference("angle")
def _angle(args, kwargs):
    x = _as_real(args[0])
    if isinstance(x, complex):
        return _atan2_value(x.imag, x.real)
    if x != x:
        return NAN
    return math.pi if x < 0 else 0.0  # torch: pi below 0, else 0 (-0.0 included)


@reference("conj_physical")
def _conj_physical(args, kwargs):
    x = args[0]
    return x.conjugate() if isinstance(x, complex) else x


@reference("frexp")
def _frexp(args, kwargs):
    x = float(args[0])
    if not math.isfinite(x):
        raise NotApplicable("frexp of a non-finite value: the exponent is unspecified")
    mantissa, exponent = math.frexp(x)
    return mantissa, exponent


# -- orthogonal polynomials ----------------------------------------------------------------

def _recurrence(kind: str, x: Fraction, n: int) -> Fraction:
    """The degree-n polynomial of ``kind`` at x, exactly, by its three-term recurrence."""
    if kind.startswith("shifted_"):
        return _recurrence(kind.removeprefix("shifted_"), 2 * x - 1, n)
    first = {"chebyshev_polynomial_t": x, "chebyshev_polynomial_u": 2 * x, "chebyshev_polynomial_v": 2 * x - 1,
             "chebyshev_polynomial_w": 2 * x + 1, "hermite_polynomial_h": 2 * x, "hermite_polynomial_he": x,
             "laguerre_polynomial_l": 1 - x, "legendre_polynomial_p": x}[kind]
    if n == 0:
        return Fraction(1)
    previous, current = Fraction(1), first
    for k in range(1, n):
        if kind.startswith("chebyshev"):
            following = 2 * x * current - previous
        elif kind == "hermite_polynomial_h":
            following = 2 * x * current - 2 * k * previous
        elif kind == "hermite_polynomial_he":
            following = x * current - k * previous
        elif kind == "laguerre_polynomial_l":
            following = ((2 * k + 1 - x) * current - k * previous) / (k + 1)
        else:  # legendre
            following = ((2 * k + 1) * x * current - k * previous) / (k + 1)
        previous, current = current, following
    return current


_MAX_DEGREE = 256


def _polynomial(kind: str, scalar_n: bool):
    def ref(args, kwargs):
        x = float(_as_real(args[0]))
        n = kwargs["n"] if scalar_n else _as_real(args[1])
        if x != x or n != n:
            return NAN
        if float(n) != math.floor(float(n)) or not math.isfinite(x) or abs(float(n)) > _MAX_DEGREE:
            raise NotApplicable("a non-integer or huge degree, or an infinite x")
        n = int(n)
        if n < 0:
            return 0.0
        return rounded(_recurrence(kind, Fraction(x), n))
    return ref


for _p in POLYNOMIALS:
    reference(f"special.{_p}")(_polynomial(_p, scalar_n=False))
    reference(f"special.{_p}_scalar_n")(_polynomial(_p, scalar_n=True))


# -- a Python scalar operand ----------------------------------------------------------------

def _scalar_of(args, kwargs, name: str):
    """The tensor's number and the Python scalar. An integer tensor meets a negative
    scalar as torch casts it to the tensor's dtype: an unsigned dtype wraps it (uint8 < -1
    compares with 255), which a non-negative Python int no longer tells from a signed
    one: no answer there for operations that do not commute with wrapping."""
    return args[0], kwargs[name]


def _unsigned_ambiguity(x, scalar) -> bool:
    return (isinstance(x, int) and not isinstance(x, bool) and x >= 0
            and isinstance(scalar, int) and not isinstance(scalar, bool) and scalar < 0)


def _scalar_op(fn, name: str = "other", reflected: bool = False, wraps_safely: bool = True):
    def ref(args, kwargs):
        x, s = _scalar_of(args, kwargs, name)
        if not wraps_safely and _unsigned_ambiguity(x, s):
            raise NotApplicable("a negative scalar an unsigned dtype would wrap")
        return fn(s, x) if reflected else fn(x, s)
    return ref


def _scalar_with_alpha(sign: int, reflected: bool = False):
    """x +- alpha * other, or scalar - alpha * x (rsub)."""
    name = "scalar" if reflected else "other"

    def ref(args, kwargs):
        x, s = args[0], kwargs[name]
        alpha = kwargs.get("alpha", 1)
        if sign < 0 and isinstance(x, bool) and isinstance(s, bool):
            raise NotApplicable("torch refuses to subtract bools")
        return _add_values(s, x, -alpha) if reflected else _add_values(x, s, sign * alpha)
    return ref


reference("add_scalar")(_scalar_with_alpha(+1))
reference("sub_scalar")(_scalar_with_alpha(-1))
reference("rsub_scalar")(_scalar_with_alpha(-1, reflected=True))
reference("mul_scalar")(_scalar_op(_mul_values))
def _bits(fn):
    """A bitwise op of two numbers (bools stay bools)."""
    return lambda a, b: _bitwise(fn)((a, b), {})


reference("bitwise_and_scalar")(_scalar_op(_bits(lambda p, q: p & q)))
reference("bitwise_or_scalar")(_scalar_op(_bits(lambda p, q: p | q)))
reference("bitwise_xor_scalar")(_scalar_op(_bits(lambda p, q: p ^ q)))
reference("bitwise_and_rscalar")(_scalar_op(_bits(lambda p, q: p & q), "scalar", reflected=True))
reference("bitwise_xor_rscalar")(_scalar_op(_bits(lambda p, q: p ^ q), "scalar", reflected=True))
reference("bitwise_left_shift_by_scalar")(_scalar_op(lambda a, b: _left_shift(int(a), int(b))))
reference("bitwise_right_shift_by_scalar")(_scalar_op(lambda a, b: int(a) >> int(b)))
reference("pow_scalar")(_scalar_op(_power_values, "exponent"))
reference("rpow_scalar")(_scalar_op(lambda s, x: _power_values(s, x), "scalar", reflected=True))
reference("remainder_scalar")(_scalar_op(lambda a, b: _modulus(a, b, True), wraps_safely=False))
reference("fmod_scalar")(_scalar_op(lambda a, b: _modulus(a, b, False), wraps_safely=False))
reference("floor_divide_scalar")(_scalar_op(lambda a, b: _rounded_division(a, b, "floor"), wraps_safely=False))
reference("copysign_scalar")(_scalar_op(lambda a, b: math.copysign(_as_real(a), float(b))))
reference("xlogy_scalar")(_scalar_op(lambda a, b: _xlog(False)((a, float(b)), {})))
reference("xlogy_rscalar")(_scalar_op(lambda s, x: _xlog(False)((float(s), x), {}), "scalar", reflected=True))
for _name, _fn in (("eq_scalar", lambda a, b: a == b), ("ne_scalar", lambda a, b: a != b),
                   ("lt_scalar", lambda a, b: a < b), ("le_scalar", lambda a, b: a <= b),
                   ("gt_scalar", lambda a, b: a > b), ("ge_scalar", lambda a, b: a >= b)):
    reference(_name)(_scalar_op((lambda f: lambda a, b: bool(f(a, b)))(_fn), wraps_safely=False))


@reference("div_scalar")
def _div_scalar(args, kwargs):
    # true division promotes an integer tensor to float and casts the scalar as it is
    return _divide_values(args[0], kwargs["other"])


@reference("rdiv_scalar")
def _rdiv_scalar(args, kwargs):
    return _divide_values(kwargs["scalar"], args[0])


@reference("float_power_scalar")
def _float_power_scalar(args, kwargs):
    return _float_power((args[0], kwargs["exponent"]), {})


@reference("atan2_scalar")
def _atan2_scalar(args, kwargs):
    # (the spec makes the scalar a 0-d tensor of x's dtype: exact where it is representable)
    return _atan2_value(float(kwargs["scalar"]), _as_real(args[0]))


def _shift_amount(x: int) -> int:
    """The specs' shift amounts: |x| (unsigned values are already non-negative)."""
    return abs(int(x))


@reference("bitwise_left_shift_scalar")
def _scalar_left_shifted(args, kwargs):
    return _left_shift(int(kwargs["scalar"]), _shift_amount(args[0]))


@reference("bitwise_right_shift_scalar")
def _scalar_right_shifted(args, kwargs):
    return int(kwargs["scalar"]) >> _shift_amount(args[0])


@reference("maximum_scalar")
def _maximum_scalar(args, kwargs):
    x, s = args[0], kwargs["scalar"]
    if isinstance(x, bool):
        return x or bool(s)
    if isinstance(x, int):
        return max(x, int(s))
    return _pick(True, False)((x, float(s)), {})


@reference("clamp")
def _clamp(args, kwargs):
    x = args[0]
    low, high = kwargs.get("min"), kwargs.get("max")
    if any(_unsigned_ambiguity(x, b) for b in (low, high) if b is not None):
        raise NotApplicable("a negative bound an unsigned dtype would wrap")
    if x != x:
        return x
    # torch: min(max(x, low), high), so low > high gives high everywhere
    if low is not None:
        x = max(x, type(x)(low)) if not isinstance(x, bool) else x
    if high is not None:
        x = min(x, type(x)(high)) if not isinstance(x, bool) else x
    return x


# -- ternary ---------------------------------------------------------------------------------

@reference("where")
def _where(args, kwargs):
    c, x, y = args
    kind = _result_kind(x, y)
    chosen = x if c else y
    return chosen if kind is type(chosen) or kind is bool else kind(chosen)


def _bounded(args, kwargs, *, upper: bool):
    x, low = args[0], args[1]
    high = args[2] if upper else None
    if x != x:
        return x
    if low != low or (high is not None and high != high):
        raise NotApplicable("a NaN bound")
    kind = _result_kind(*args)
    value = max(x, low)
    if high is not None:
        value = min(value, high)
    return kind(value) if kind is not bool else bool(value)


@reference("clamp_tensor")
def _clamp_tensor(args, kwargs):
    return _bounded(args, kwargs, upper=True)


@reference("clamp_min_tensor")
def _clamp_min_tensor(args, kwargs):
    return _bounded(args, kwargs, upper=False)


def _lerp_value(x, y, w):
    if not _finite(x, y, w):
        raise NotApplicable("lerp of non-finite values: the formula's branches differ")
    if any(isinstance(v, complex) for v in (x, y, w)):
        return _complex_exact(lambda a, b, c: _cadd(a, _cmul(c, (b[0] - a[0], b[1] - a[1]))), x, y, w)
    return rounded(Fraction(x) + Fraction(w) * (Fraction(y) - Fraction(x)))


@reference("lerp")
def _lerp(args, kwargs):
    return _lerp_value(*args)


@reference("lerp_scalar")
def _lerp_scalar(args, kwargs):
    return _lerp_value(args[0], args[1], kwargs["weight"])


@reference("addcmul")
def _addcmul(args, kwargs):
    x, a, b = args
    value = kwargs.get("value", 1)
    kind = _result_kind(x, a, b)
    if kind is bool:
        raise NotApplicable("bool addcmul")
    if not _finite(x, a, b):
        return x + value * a * b
    if kind is complex:
        return _complex_exact(lambda p, q, r: _cadd(p, _cscale((Fraction(value), Fraction(0)), _cmul(q, r))), x, a, b)
    return _to_kind(Fraction(x) + Fraction(value) * Fraction(a) * Fraction(b), kind)


@reference("addcdiv")
def _addcdiv(args, kwargs):
    x, a, b = args
    value = kwargs.get("value", 1)
    if isinstance(b, complex) or isinstance(a, complex) or isinstance(x, complex):
        quotient = _divide_values(a, b)
        return _add_values(complex(x), complex(quotient), value) if _finite(quotient) else \
            _not_applicable("an infinite complex quotient")
    if b == 0 or not _finite(x, a, b):
        return float(x) + value * _divide_values(a, b)
    return rounded(Fraction(x) + Fraction(value) * Fraction(a) / Fraction(b))
