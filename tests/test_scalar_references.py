"""The jury's per-element scalar references agree with eager CPU on ordinary cases.

Each reference in ``SCALAR`` meets cases drawn from the catalogue as a campaign draws
them (contiguous, no special values), with floating inputs in float64 on both sides. At
a few output positions the inputs' Python numbers go to the scalar reference, whose
exact answer, rounded (or wrapped) to CPU's output dtype, must match CPU's element: to a
few float64 roundings (special functions get a looser bound: CPU's float64 kernels are
accurate to about 1e-13), exactly for integer and bool results. A reference must answer
at some sampled position of at least half of the cases CPU computes. Then a few exact
answers the jury relies on, among them the ones where eager CPU is wrong.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.oracles.jury.references import NotApplicable
from mpsfuzz.oracles.jury.scalar_refs import SCALAR, SCALAR_FOR_DTYPE

import test_numpy_references as numpy_tests
from test_numpy_references import widen

CASES_PER_OP = 8
POSITIONS_PER_CASE = 4
SEED = 20240611
# CPU's float64 special functions (series, asymptotic expansions, Cephes polynomials)
# are good to about 1e-13 relative; arithmetic and the elementary functions to an ulp.
SPECIAL = ("special.", "lgamma", "digamma", "polygamma", "erf", "erfc", "erfinv", "igamma", "igammac",
           "mvlgamma", "logit")
# Eager CPU's float32 I0/I1 compute exp(x) first and overflow to inf for x in about
# [88.7, 91.9], where the value is finite in float32 (see test_i0_and_i1_do_not_overflow).
CPU_FLOAT32_OVERFLOW = {"special.i0", "special.i1", "special.modified_bessel_i0", "special.modified_bessel_i1"}


def ordinary_cases(spec, n: int = CASES_PER_OP, seed: int = SEED):
    return numpy_tests.ordinary_cases(spec, n, seed)


def python_number(a: np.ndarray, position):
    """The element at ``position`` as the jury hands it over: float, complex, int or bool."""
    v = a[position].item()
    if a.dtype.kind == "f":
        return float(v)
    if a.dtype.kind == "c":
        return complex(v)
    if a.dtype.kind == "b":
        return bool(v)
    return int(v)


def as_dtype(value, dtype: torch.dtype):
    """The reference's value as CPU's dtype holds it: floats rounded, integers wrapped."""
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.tensor(value, dtype=torch.complex128 if isinstance(value, complex) else torch.float64) \
            .to(dtype).item()
    bits = torch.iinfo(dtype).bits
    wrapped = int(value) & ((1 << bits) - 1)
    signed = dtype in (torch.int8, torch.int16, torch.int32, torch.int64)
    return wrapped - (1 << bits) if signed and wrapped >> (bits - 1) else wrapped


def numpy_of(t: torch.Tensor) -> np.ndarray:
    return t.detach().resolve_conj().contiguous().numpy()


# Oscillating functions of a large argument are ill-conditioned: CPU's kernels evaluate
# x - pi/4 (or pi x) in the working precision, so their phase is off by about x * eps,
# and their values by that much times the amplitude (at most 1 for x >= 1). The
# reference evaluates at the exact x; the difference is conditioning, not a bug.
OSCILLATING = {"special.bessel_j0", "special.bessel_j1", "special.bessel_y0", "special.bessel_y1",
               "special.airy_ai", "special.sinc", "special.spherical_bessel_j0"}
# Eager CPU's float64 trigamma (polygamma with n = 1) sums 6 terms and a short asymptotic
# series: it is good to about 1e-9 only (trigamma(1) = pi**2/6 = 1.6449340668482264,
# CPU 1.6449340676383375; see test_trigamma_is_exact).
LOOSE_FLOAT64 = {("polygamma", 1): 2e-9, ("special.polygamma", 1): 2e-9}
# Eager CPU's float64 Bessel J0, J1, Y0, Y1 lose accuracy between x = 5 and about 25 (up
# to 4e-7 absolute: J0(5.5) = -0.006843869417819197, CPU -0.006844032739174986), and its
# Airy Ai between x = -8 and -2 (Ai(-2.5) off by 2.3e-7); its ndtr is 0.5 (1 + erf(x/sqrt 2)),
# whose cancellation leaves absolute accuracy only (ndtr(-10) = 7.6e-24, CPU 0). The
# exact values are asserted in test_cpu_special_functions_lose_accuracy; here those ops
# are held to what CPU achieves.
CPU_ABSOLUTE_ERROR = {"special.bessel_j0": 1e-6, "special.bessel_j1": 1e-6, "special.bessel_y0": 1e-6,
                      "special.bessel_y1": 1e-6, "special.airy_ai": 1e-5, "special.ndtr": 1e-6}
# Eager CPU's Chebyshev T_n of a degree above 6 inside (-1, 1) is cos(n acos x), whose
# error is absolute, about n eps: T_7(0) = 0, CPU 6.6e-7 in float32 (-4.3e-16 in float64).
# A bool or integer x of 0 reaches it (issue 38: the special ops draw every integer dtype).
COSINE_FORM = {f"special.{shifted}chebyshev_polynomial_t{form}" for shifted in ("", "shifted_")
               for form in ("", "_scalar_n")}


def close(got, want, dtype: torch.dtype, special: bool, atol: float = 0.0, rtol: float | None = None) -> bool:
    if not (dtype.is_floating_point or dtype.is_complex):
        return got == want
    got, want = complex(got), complex(want)
    if got == want:
        return True
    if any(math.isnan(v) for v in (got.real, got.imag, want.real, want.imag)):
        return all(math.isnan(a) == math.isnan(b) for a, b in ((got.real, want.real), (got.imag, want.imag))) \
            and all(a == b or math.isnan(a) for a, b in ((got.real, want.real), (got.imag, want.imag)))
    single = dtype in (torch.float32, torch.complex64)
    if rtol is None or single:
        rtol = (1e-5 if special else 4e-7) if single else (1e-11 if special else 4e-15)
    atol = max(atol, 1e-30 if single else 1e-14)
    return abs(got - want) <= atol + rtol * max(abs(got), abs(want))


def outputs_of(result) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


@pytest.mark.parametrize("name", sorted(SCALAR))
def test_scalar_reference_agrees_with_eager_cpu(name):
    spec = catalogue.get(name)
    special = name.startswith(SPECIAL)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    computed = covered = 0  # cases: CPU computed them; the reference answered an element of them
    for case in ordinary_cases(spec):
        inputs = [widen(t) for t in case.materialize("cpu")]
        kwargs = case.kwargs_dict()
        try:
            outs = outputs_of(spec.fn(*[t.clone() for t in inputs], **kwargs))
        except (RuntimeError, ValueError, TypeError):
            continue  # eager CPU refuses the call
        shape = outs[0].shape
        if outs[0].numel() == 0:
            continue
        arrays = [numpy_of(t.expand(shape) if t.dim() <= len(shape) else t) for t in inputs]
        wanted = [numpy_of(o) for o in outs]
        flat = rng.choice(outs[0].numel(), size=min(POSITIONS_PER_CASE, outs[0].numel()), replace=False)
        computed += 1
        answered = False
        for index in flat:
            position = np.unravel_index(int(index), tuple(shape))
            args = tuple(python_number(a, position) for a in arrays)
            try:
                value = SCALAR[name](args, kwargs)
            except NotApplicable:
                continue
            answered = True
            values = value if isinstance(value, tuple) else (value,)
            assert len(values) == len(outs), f"{name}{args}: {len(values)} values for {len(outs)} outputs"
            for v, o, w in zip(values, outs, wanted):
                want = python_number(w, position)
                got = as_dtype(v, o.dtype)
                if name in CPU_FLOAT32_OVERFLOW and o.dtype == torch.float32 and math.isinf(want) \
                        and math.isfinite(got):
                    continue  # CPU's overflow, asserted below
                if name == "special.zeta" and math.isnan(want) and got == 0 and args[0] > 1e12:
                    continue  # CPU's NaN for a huge exponent, asserted below
                eps = torch.finfo(o.dtype).eps if o.dtype.is_floating_point else 0.0
                phase = 8 * eps * max(abs(args[0]), 1.0) if name in OSCILLATING else 0.0
                phase += CPU_ABSOLUTE_ERROR.get(name, 0.0)
                if name in COSINE_FORM:
                    phase += 8 * eps * abs(kwargs.get("n", args[-1]))
                rtol = LOOSE_FLOAT64.get((name, kwargs.get("n")))
                assert close(got, want, o.dtype, special, phase, rtol), \
                    f"{case.describe()} at {position}: args {args} {kwargs}: reference {got!r}, CPU {want!r}"
        covered += answered
    assert computed, f"{name}: eager CPU computed none of the drawn cases"
    assert covered * 2 >= computed, f"{name}: the reference covers {covered} of {computed} cases"


def test_fmod_by_a_tiny_divisor_is_exact():
    # fmod(1, 2**-1024) is 0 exactly (1 is a multiple of 2**-1024); CPU's vectorised
    # float64 path has returned NaN there where CUDA and a 0-d CPU tensor return 0
    assert SCALAR["fmod_float"]((1.0, 2.0 ** -1024), {}) == 0.0
    assert SCALAR["fmod_scalar"]((1.0,), {"other": 2.0 ** -1024}) == 0.0
    assert SCALAR["fmod_float"]((-7.5, 2.0), {}) == -1.5 and SCALAR["remainder_float"]((-7.5, 2.0), {}) == 0.5


def test_uint64_extremes_are_exact():
    top = 2**64 - 1
    assert SCALAR["fmax"]((top, 1), {}) == top and SCALAR["fmin"]((top, 2**63), {}) == 2**63
    assert SCALAR["maximum"]((top, 0), {}) == top
    assert SCALAR["bitwise_not"]((top,), {}) == -2**64  # wraps to 0 in uint64
    assert as_dtype(SCALAR["add"]((top, 1), {}), torch.uint64) == 0


def test_lgamma_of_negative_non_integers():
    # log|gamma(x)| between the poles: gamma(-2.5) = -0.9453087204829419, gamma(-0.5) = -2 sqrt(pi)
    assert math.isclose(SCALAR["lgamma"]((-2.5,), {}), math.log(0.9453087204829419), rel_tol=1e-15)
    assert math.isclose(SCALAR["lgamma"]((-0.5,), {}), math.log(2 * math.sqrt(math.pi)), rel_tol=1e-15)
    assert SCALAR["lgamma"]((-3.0,), {}) == math.inf
    assert math.isclose(SCALAR["lgamma"]((-7.25,), {}), math.lgamma(-7.25), rel_tol=1e-14)


def test_sqrt_of_complex_numbers():
    assert SCALAR["sqrt"]((3 + 4j,), {}) == 2 + 1j
    assert SCALAR["sqrt"]((-3 + 4j,), {}) == 1 + 2j
    assert SCALAR["sqrt"]((-3 - 4j,), {}) == 1 - 2j
    with pytest.raises(NotApplicable):  # on the cut the sign of a zero imaginary part decides
        SCALAR["sqrt"]((-4 + 0j,), {})
    assert SCALAR["sqrt"]((-0.0,), {}) == 0.0 and math.copysign(1, SCALAR["sqrt"]((-0.0,), {})) < 0


def test_special_values_follow_ieee():
    assert SCALAR["exp"]((-math.inf,), {}) == 0.0
    assert SCALAR["log"]((0.0,), {}) == -math.inf
    assert math.isnan(SCALAR["log"]((-1.0,), {}))
    assert math.copysign(1, SCALAR["sin"]((-0.0,), {})) < 0
    assert SCALAR["digamma"]((0.0,), {}) == -math.inf


def test_i0_and_i1_do_not_overflow():
    # I0(89) = 1.9012e37 and I1(90) = 1.0810e38 are finite in float32; eager CPU's
    # float32 kernels return inf (they overflow exp(x) before scaling it down)
    assert math.isfinite(as_dtype(SCALAR["special.i0"]((89.0,), {}), torch.float32))
    assert math.isfinite(as_dtype(SCALAR["special.i1"]((90.0,), {}), torch.float32))
    assert math.isclose(SCALAR["special.i0"]((89.0,), {}), 1.9012e37, rel_tol=1e-4)


def test_integer_division_by_zero_has_no_answer():
    with pytest.raises(NotApplicable):
        SCALAR["div_rounding"]((7, 0), {"rounding_mode": "floor"})
    assert SCALAR["div_trunc"]((-7, 2), {}) == -3 and SCALAR["div_floor"]((-7, 2), {}) == -4


def test_nextafter_steps_in_the_dtype():
    step64 = SCALAR_FOR_DTYPE["nextafter"](torch.float64)
    step32 = SCALAR_FOR_DTYPE["nextafter"](torch.float32)
    assert step64((1.0, 2.0), {}) == 1.0 + 2.0 ** -52
    assert step32((1.0, 2.0), {}) == 1.0 + 2.0 ** -23
    assert step32((1.0, 0.0), {}) == 1.0 - 2.0 ** -24
    assert torch.nextafter(torch.tensor([1.0]), torch.tensor([0.0])).item() == step32((1.0, 0.0), {})


def test_trigamma_is_exact():
    # trigamma(1) = pi**2/6 and trigamma(1/2) = pi**2/2: the reference is exact where eager
    # CPU's float64 polygamma(1, x) is off by 5e-10 relative (a truncated series)
    assert SCALAR["polygamma"]((1.0,), {"n": 1}) == math.pi ** 2 / 6
    assert math.isclose(SCALAR["polygamma"]((0.5,), {"n": 1}), math.pi ** 2 / 2, rel_tol=2e-16)


def test_zeta_of_a_huge_exponent_underflows_to_zero():
    # zeta(x, 2) = 2**-x + 3**-x + ... underflows to 0 for a large x; eager CPU returns NaN
    # for x beyond about 1e13 (torch 2.13, float32 and float64 alike: its Euler-Maclaurin
    # tail multiplies x (x+1) ... past the largest double and then by 0), which integer
    # inputs of the fuzzer's ordinary range (int64 near 2**62) reach
    assert SCALAR["special.zeta"]((6.4e17, 2.0), {}) == 0.0
    assert SCALAR["special.zeta"]((6.4e17, 1.0), {}) == 1.0
    assert SCALAR["special.zeta"]((2.0, 1.0), {}) == math.pi ** 2 / 6
    assert math.isnan(SCALAR["special.zeta"]((0.5, 2.0), {}))  # the series diverges: NaN, as torch and SciPy


@pytest.mark.parametrize("name, x, exact, cpu", [
    ("special.bessel_j0", 5.5, -0.006843869417819197, -0.006844032739174986),
    ("special.bessel_y1", 6.0, -0.17501034430039825, -0.1750104733135312),
    ("special.airy_ai", -2.5, -0.11232506769296609, -0.11232483666261353),
    ("special.ndtr", -10.0, 7.619853024160525e-24, 0.0),
])
def test_cpu_special_functions_lose_accuracy(name, x, exact, cpu):
    # The reference gives the exact value (mpmath at 200 bits, rounded once) where eager
    # CPU's float64 kernel (torch 2.13) returns ``cpu``: the jury must side with neither
    # CPU nor a device that copies it
    got = SCALAR[name]((x,), {})
    assert math.isclose(got, exact, rel_tol=1e-15) and not math.isclose(got, cpu, rel_tol=1e-12)
