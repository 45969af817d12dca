"""Random sampling: size-creating generators (rand, randn, randint, randperm, normal with
a size), ``*_like`` generators, samplers with tensor parameters (normal, bernoulli,
multinomial, poisson) and the in-place samplers (normal_, uniform_, bernoulli_,
exponential_, geometric_, log_normal_, cauchy_, random_).

Values are never compared with the CPU (different generators): every spec carries the
``random`` semantic and a statistical judge that looks at the DUT's output alone:

- metadata: the shape and dtype asked for;
- support: [low, high) for uniform integers, {0, 1} for Bernoulli, >= 0 for exponential,
  a permutation for randperm, no zero-probability index (and no repeat without
  replacement) for multinomial, ...; always checked, whatever the size;
- distribution (only from 64 samples on): Kolmogorov-Smirnov against the exact CDF for
  continuous laws, chi-square on frequencies for discrete ones, Bernstein bounds on
  sums for samplers with per-element parameters (bernoulli(p), poisson(rates));
- variety: a continuous sample of 16 or more values is not constant;
- in-place samplers: the whole output is judged, and positions that still hold the
  case's initial value are counted, so a kernel that fills only part of a strided
  ``self`` is caught.

False alarms. Every distribution test runs at ALPHA = 1e-6:
- KS: D > sqrt(ln(2/ALPHA) / (2n)) has probability <= ALPHA for any n (the
  Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant: exact, not asymptotic).
  Outputs are rounded to the dtype, so the CDF is evaluated with a slack of two ulps
  around each sample (which only makes the test more conservative).
- chi-square: the tail is the Wilson-Hilferty normal approximation; bins with an
  expected count below 20 are pooled. The approximation is worst for a rare bin against
  a large one (df = 1): there the exact Poisson tail at the threshold is 2.4e-6, so a
  chi-square test's rate is at most ~3e-6.
- sums (bernoulli/poisson with per-element parameters, unchanged positions): Bernstein's
  inequality, a rigorous bound (<= ALPHA per side).
A judge runs at most a handful of tests, so its false-alarm rate per call is below
1e-5; tests/test_random_ops.py runs each judge on real torch output over hundreds of
seeds and checks it flags corrupted outputs.
"""
from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from .. import dtypes as dt
from ..opspec import (OpSpec, ShapeBudget, any_shape, broadcastable_to, draw_rank, draw_side, fit, register,
                      same_shapes)

FAMILY = "random"
RANDOM = frozenset({"random"})

ALPHA = 1e-6
MIN_SAMPLES = 64          # distribution tests from this many samples on
MIN_VARIETY = 16          # "not all equal" from this many continuous samples on
MIN_EXPECTED = 20         # chi-square: pool bins with a smaller expected count

FLOAT = dt.FLOAT
WIDE_COMPLEX = ("complex64", "complex128")
LOW_BITS = ("float16", "bfloat16", "complex32")
SIGNED_INTS = ("int8", "int16", "int32", "int64")
INTS = SIGNED_INTS + ("uint8",)
INPUT_OPTS = dict(allow_specials=False, allow_nonfinite=False)


# -- statistics ---------------------------------------------------------------------------

def _normal_cdf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * torch.erfc(-x / math.sqrt(2.0))


def ks_critical(n: int, alpha: float = ALPHA) -> float:
    """DKW-Massart: P(sup |F_n - F| > c) <= 2 exp(-2 n c^2) = alpha."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def ks_test(name: str, samples: torch.Tensor, cdf, scale: float, dtype_name: str) -> str | None:
    samples = samples.to(torch.float64).reshape(-1)
    n = samples.numel()
    if n < MIN_SAMPLES:
        return None
    eps = float(dt.finfo_or_iinfo(dt.real_dtype_name(dtype_name)).eps) if dtype_name in FLOAT + dt.COMPLEX else 0.0
    x, _ = torch.sort(samples)
    slack = 2.0 * eps * torch.maximum(x.abs(), torch.tensor(scale, dtype=torch.float64))
    i = torch.arange(1, n + 1, dtype=torch.float64)
    d = float(torch.maximum((i / n - cdf(x + slack)).max(), (cdf(x - slack) - (i - 1) / n).max()).clamp(min=0))
    crit = ks_critical(n)
    if d > crit:
        return (f"distribution: {name}: Kolmogorov-Smirnov D = {d:.4f} over {n} samples exceeds "
                f"{crit:.4f} (alpha {ALPHA:g}); sample mean {float(samples.mean()):.4g}")
    return None


def chi2_sf(x: float, k: int) -> float:
    """Upper tail of chi-square with k degrees of freedom (Wilson-Hilferty)."""
    if k <= 0:
        return 1.0
    if x <= 0:
        return 1.0
    z = ((x / k) ** (1.0 / 3.0) - (1.0 - 2.0 / (9.0 * k))) / math.sqrt(2.0 / (9.0 * k))
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _pool(observed: list[float], expected: list[float]) -> tuple[list[float], list[float]]:
    """Merge bins with expected < MIN_EXPECTED (smallest first) into neighbours."""
    # sorted by expectation only (never by the observed counts: the pooling must not
    # depend on the data, or equal-expectation bins would pair low counts together)
    bins = sorted(zip(expected, observed), key=lambda b: b[0])
    obs_out, exp_out = [], []
    acc_e = acc_o = 0.0
    for e, o in bins:
        acc_e += e
        acc_o += o
        if acc_e >= MIN_EXPECTED:
            exp_out.append(acc_e)
            obs_out.append(acc_o)
            acc_e = acc_o = 0.0
    if acc_e > 0 or acc_o > 0:
        if exp_out:
            exp_out[-1] += acc_e
            obs_out[-1] += acc_o
        else:
            exp_out.append(acc_e)
            obs_out.append(acc_o)
    return obs_out, exp_out


def chi2_statistic(observed, expected) -> tuple[float, int]:
    """(statistic, degrees of freedom) after pooling; observed counts outside every bin
    with a positive expectation must be checked by the caller (support)."""
    obs, exp = _pool([float(o) for o in observed], [float(e) for e in expected])
    if len(exp) < 2:
        return 0.0, 0
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp) if e > 0)
    return stat, len(exp) - 1


def chi2_test(name: str, observed, expected) -> str | None:
    total = float(sum(float(e) for e in expected))
    if total < MIN_SAMPLES:
        return None
    stat, df = chi2_statistic(observed, expected)
    p = chi2_sf(stat, df)
    if df and p < ALPHA:
        return (f"distribution: {name}: chi-square {stat:.1f} with {df} degrees of freedom "
                f"(p ~ {p:.2g} < {ALPHA:g}) over {int(total)} samples")
    return None


def bernstein_sum_test(name: str, total: float, mean: float, variance: float, bound: float,
                       alpha: float = ALPHA) -> str | None:
    """|S - E S| against Bernstein's inequality for a sum of independent terms with the
    given variance, each within ``bound`` of its mean (two-sided, alpha in total)."""
    log_term = math.log(2.0 / alpha)
    t = bound * log_term / 3.0 + math.sqrt((bound * log_term / 3.0) ** 2 + 2.0 * variance * log_term)
    if abs(total - mean) > t:
        return (f"distribution: {name}: sum {total:.6g} is {total - mean:+.4g} from its expectation "
                f"{mean:.6g} (Bernstein bound {t:.4g} at alpha {alpha:g})")
    return None


def poisson_sum_test(name: str, total: float, mean: float, alpha: float = ALPHA) -> str | None:
    """A sum of independent Poisson variables is Poisson(mean): Bernstein-type tail
    bounds, upper P(S >= m + t) <= exp(-t^2 / (2 (m + t/3))), lower exp(-t^2 / (2 m))."""
    log_term = math.log(2.0 / alpha)
    up = log_term / 3.0 + math.sqrt((log_term / 3.0) ** 2 + 2.0 * mean * log_term)
    down = math.sqrt(2.0 * mean * log_term)
    if total - mean > up or mean - total > down:
        return (f"distribution: {name}: sum {total:.6g} vs expectation {mean:.6g} "
                f"(allowed -{down:.4g}/+{up:.4g} at alpha {alpha:g})")
    return None


# -- judge helpers ------------------------------------------------------------------------

def _meta(out, shape, dtype) -> str | None:
    if not isinstance(out, torch.Tensor):
        return f"shape: expected one tensor, got {type(out).__name__}"
    if tuple(out.shape) != tuple(shape):
        return f"shape: {tuple(out.shape)} where {tuple(shape)} was asked for"
    if out.dtype != dtype:
        return f"dtype: {out.dtype} where {dtype} was asked for"
    return None


def _dedupe(out: torch.Tensor, like: torch.Tensor | None) -> torch.Tensor:
    """For an in-place sampler on an expanded ``self``: stride-0 dims alias one element,
    so keep index 0 along them (the samples that are really independent)."""
    if like is None:
        return out
    for d in range(like.dim()):
        if like.stride(d) == 0 and like.size(d) > 1:
            out = out.narrow(d, 0, 1)
            like = like.narrow(d, 0, 1)
    return out


def _real_parts(t: torch.Tensor) -> torch.Tensor:
    """Values as float64 (complex: real and imaginary parts as separate samples)."""
    if t.is_complex():
        t = torch.view_as_real(t.to(torch.complex128))
    return t.to(torch.float64).reshape(-1)


def _resolvable(mean: float, std: float, name: str) -> bool:
    """Whether a normal(mean, std) sample can vary at all in this dtype: a std far below
    the spacing of the dtype around the mean rounds every sample to the same value."""
    eps = float(torch.finfo(getattr(torch, name)).eps) if hasattr(torch, name) else 0.0
    return std >= 2 * eps * abs(mean)


def _variety(values: torch.Tensor) -> str | None:
    if values.numel() >= MIN_VARIETY and bool((values == values.reshape(-1)[0]).all()):
        return f"variety: all {values.numel()} samples equal {float(values.reshape(-1)[0])!r}"
    return None


def _nan(values: torch.Tensor) -> str | None:
    bad = int(torch.isnan(values).sum())
    return f"support: {bad} NaN sample(s)" if bad else None


def _unchanged(out: torch.Tensor, initial: torch.Tensor, dtype_name: str) -> str | None:
    """In-place continuous samplers: positions still holding their initial value. A
    correct sampler matches the initial value with probability q per position (at most
    the largest mass one dtype value can take: 1/16 for 16-bit floats, 2^-20 wider);
    the count is tested against Bernstein's bound."""
    n = out.numel()
    if n == 0:
        return None
    same = int((out.reshape(-1) == initial.reshape(-1)).sum())
    q = 1.0 / 16 if dtype_name in LOW_BITS else 2.0 ** -20
    log_term = math.log(1.0 / ALPHA)
    allowed = n * q + math.sqrt(2.0 * n * q * log_term) + log_term
    if same > allowed:
        return (f"unfilled: {same} of {n} positions ({100.0 * same / n:.0f}%) still hold their "
                f"initial value (at most {allowed:.1f} expected)")
    return None


def _first(*checks) -> str | None:
    for c in checks:
        problem = c() if callable(c) else c
        if problem:
            return problem
    return None


def _integer_chi2(name: str, values: torch.Tensor, low: int, high: int, bins: int = 32) -> str | None:
    """Uniform integers in [low, high): chi-square over up to ``bins`` equal-width groups."""
    n = values.numel()
    span = high - low
    if n < MIN_SAMPLES or span < 2:
        return None
    k = min(bins, span)
    # group g holds the integers v with (v - low) * k // span == g
    group = torch.div((values.to(torch.float64) - low) * k, span, rounding_mode="floor").to(torch.int64)
    observed = torch.bincount(group.clamp(0, k - 1), minlength=k).tolist()
    edges = [-(-(g * span) // k) for g in range(k + 1)]  # first integer offset of each group
    expected = [n * (edges[g + 1] - edges[g]) / span for g in range(k)]
    return chi2_test(name, observed, expected)


def _is_integral(values: torch.Tensor) -> bool:
    return bool((values == torch.round(values)).all())


# -- continuous laws ----------------------------------------------------------------------

def _uniform_checks(name, values, low, high, dtype_name, *, strict_top: bool) -> str | None:
    below = int((values < low).sum())
    above = int((values > high).sum() if not strict_top else (values >= high).sum())
    if below or above:
        bad = values[(values < low) | ((values >= high) if strict_top else (values > high))]
        interval = f"[{low}, {high})" if strict_top else f"[{low}, {high}]"
        return f"support: {below + above} sample(s) outside {interval}, e.g. {float(bad[0])!r}"
    width = high - low
    return ks_test(name, values, lambda x: ((x - low) / width).clamp(0.0, 1.0), abs(width), dtype_name)


def _normal_checks(name, z, dtype_name, scale=1.0) -> str | None:
    """``z`` standardised; ``scale`` the std of z's own units (for the rounding slack)."""
    return ks_test(name, z, _normal_cdf, scale, dtype_name)


# -- argument builders ----------------------------------------------------------------------

def _size(draw) -> tuple[int, ...]:
    """A size for the generators: up to ~4096 elements, 0-d, empty or >4-D sometimes."""
    budget = ShapeBudget(max_rank=6, max_side=16, allow_empty=True, max_numel=4096)
    how = draw(st.integers(0, 9))
    if how == 0:
        return ()
    if how == 1:
        return (draw(st.integers(64, 4096)),)
    rank = draw_rank(draw, budget, 1, 6)
    return fit([draw_side(draw, budget) for _ in range(rank)], budget)


def _dummy_shapes(draw, budget: ShapeBudget):
    return ((),)   # a 0-d tensor that carries the device and dtype


def _size_args(draw, shapes, dtypes):
    return {"size": _size(draw)}


# Integer ranges a dtype can hold exactly (floats: integers up to 2^mantissa).
_INT_LIMITS = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1),
               "int64": (-2**63, 2**63 - 1), "uint8": (0, 255), "uint16": (0, 65535),
               "uint32": (0, 2**32 - 1), "uint64": (0, 2**63 - 1),
               "float16": (-2048, 2048), "bfloat16": (-256, 256),
               "float32": (-2**24, 2**24), "float64": (-2**53, 2**53)}


def _int_range(draw, dtype_name: str) -> tuple[int, int]:
    lo_limit, hi_limit = _INT_LIMITS[dtype_name]
    kind = draw(st.sampled_from(("small", "small", "wide", "edge")))
    if kind == "small":
        low = draw(st.integers(max(lo_limit, -10), min(hi_limit, 10) - 1))
        high = draw(st.integers(low + 1, min(hi_limit, low + 12)))
    elif kind == "wide":
        low = draw(st.integers(max(lo_limit, -1000), 0)) if lo_limit < 0 else 0
        high = min(hi_limit, low + draw(st.sampled_from((100, 256, 1000, 5000, 100000))))
    else:  # the dtype's whole (exact) range, high exclusive
        low, high = lo_limit, hi_limit
    return low, max(high, low + 1)


def _randint_args(draw, shapes, dtypes):
    low, high = _int_range(draw, dtypes[0])
    return {"low": low, "high": high, "size": _size(draw)}


def _randint_like_args(draw, shapes, dtypes):
    low, high = _int_range(draw, dtypes[0])
    return {"low": low, "high": high}


_PERM_MAX = {"int8": 128, "uint8": 256, "int16": 4096, "float16": 2048, "bfloat16": 256}


def _randperm_args(draw, shapes, dtypes):
    top = min(4096, _PERM_MAX.get(dtypes[0], 4096))
    n = draw(st.one_of(st.integers(0, 20), st.integers(21, top)))
    return {"n": n}


_MEANS = (0.0, 1.5, -3.0, 100.0)
_STDS = (1.0, 0.5, 3.0, 1e-2)


def _mean_std(draw, shapes=None, dtypes=None):
    return {"mean": draw(st.sampled_from(_MEANS)), "std": draw(st.sampled_from(_STDS))}


def _normal_size_args(draw, shapes, dtypes):
    return {**_mean_std(draw), "size": _size(draw)}


_RANGES = ((0.0, 1.0), (-1.0, 1.0), (-3.0, 5.0), (2.0, 2.5), (-100.0, 100.0), (1e-3, 2e-3))


def _uniform_args(draw, shapes, dtypes):
    low, high = draw(st.sampled_from(_RANGES))
    return {"from": low, "to": high}


def _p_arg(draw, shapes, dtypes):
    return {"p": draw(st.sampled_from((0.5, 0.1, 0.9, 0.0, 1.0, 0.01)))}


def _lambd_arg(draw, shapes, dtypes):
    return {"lambd": draw(st.sampled_from((1.0, 0.5, 4.0, 0.1)))}


def _geometric_arg(draw, shapes, dtypes):
    # p in (0, 1) (eager CPU refuses 1); 0.05 gives values past 127, so not for 8-bit
    return {"p": draw(st.sampled_from((0.5, 0.2, 0.9, 0.05)))}


def _log_normal_args(draw, shapes, dtypes):
    return {"mean": draw(st.sampled_from((0.0, 1.0, -1.0))), "std": draw(st.sampled_from((1.0, 0.5, 2.0)))}


def _cauchy_args(draw, shapes, dtypes):
    return {"median": draw(st.sampled_from((0.0, 2.0, -5.0))), "sigma": draw(st.sampled_from((1.0, 0.5, 3.0)))}


def _random_args(draw, shapes, dtypes):
    how = draw(st.sampled_from(("range", "range", "to", "default")))
    if how == "default":
        return {}
    if dtypes[0] == "bool":
        return {"from": 0, "to": 2} if how == "range" else {"to": 2}
    low, high = _int_range(draw, dtypes[0])
    if how == "to":
        return {"to": max(1, high)}
    return {"from": low, "to": high}


def _multinomial_shapes(draw, budget: ShapeBudget):
    k = draw(st.integers(3, 40))
    if draw(st.booleans()):
        return ((k,),)
    rows = draw(st.integers(0, 12)) if budget.allow_empty else draw(st.integers(1, 12))
    return ((rows, k),)


def _multinomial_args(draw, shapes, dtypes):
    k = shapes[0][-1]
    if draw(st.booleans()):
        return {"num_samples": draw(st.one_of(st.integers(1, 8), st.integers(9, 400))), "replacement": True}
    return {"num_samples": draw(st.integers(1, max(1, k // 2))), "replacement": False}


def _bernoulli_tensor_shapes(draw, budget: ShapeBudget):
    (shape,) = any_shape(1)(draw, budget)
    return (shape, broadcastable_to(draw, shape))


# -- values of tensor inputs ------------------------------------------------------------------

PROBS = {"distribution": "uniform", "low": 0.0, "high": 1.0, "allow_specials": False}
WEIGHTS = {"distribution": "int_range", "low": 0, "high": 4, "allow_specials": False}
RATES = {"distribution": "uniform", "low": 0.0, "high": 10.0, "allow_specials": False}
STDS = {"distribution": "positive", "low": 0.125, "high": 4.0, "allow_specials": False}


def _const(options: dict):
    return lambda shapes, kwargs: dict(options)


# -- fns ----------------------------------------------------------------------------------------

def _writable(x: torch.Tensor) -> torch.Tensor:
    """``x`` with stride-0 dims narrowed to one element: in-place samplers refuse an
    overlapping self, and writing the one element fills every alias (the judge keeps
    index 0 of those dims, the only independent samples)."""
    for d in range(x.dim()):
        if x.stride(d) == 0 and x.size(d) > 1:
            x = x.narrow(d, 0, 1)
    return x


def _in_place(method: str):
    def call(x, **kw):
        getattr(_writable(x), method)(**kw)
        return x
    call.__name__ = method
    return call


def _sized(factory):
    def call(x, **kw):
        size = tuple(kw.pop("size"))
        return factory(size, device=x.device, dtype=x.dtype, **kw)
    call.__name__ = factory.__name__
    return call


def _bernoulli_tensor_inplace(x, p):
    """x.bernoulli_(p) with p broadcast to x; an expanded x is written through its
    first element along stride-0 dims (p narrowed alike)."""
    index = tuple(slice(0, 1) if x.stride(d) == 0 and x.size(d) > 1 else slice(None) for d in range(x.dim()))
    _writable(x).bernoulli_(p.expand(x.shape)[index])
    return x


def _randint_fn(x, low, high, size, **kw):
    return torch.randint(low, high, tuple(size), device=x.device, dtype=x.dtype, **kw)


def _randperm_fn(x, n, **kw):
    return torch.randperm(n, device=x.device, dtype=x.dtype, **kw)


def _normal_size_fn(x, mean, std, size, **kw):
    return torch.normal(mean, std, tuple(size), device=x.device, dtype=x.dtype, **kw)


# -- judges -------------------------------------------------------------------------------------

def _dtype_name(t: torch.Tensor) -> str:
    return dt.name_of(t.dtype)


def _judge_rand(out, inputs, kwargs, *, like=False):
    x = inputs[0]
    shape = x.shape if like else tuple(kwargs["size"])
    return _first(_meta(out, shape, x.dtype), lambda: _rand_values(out))


def _rand_values(out):
    name = _dtype_name(out)
    values = _real_parts(out)
    strict = name in ("float32", "float64", "complex64", "complex128")
    return _first(_nan(values), lambda: _uniform_checks("U[0,1)", values, 0.0, 1.0, name, strict_top=strict),
                  lambda: _variety(values))


def _judge_randn(out, inputs, kwargs, *, like=False):
    x = inputs[0]
    shape = x.shape if like else tuple(kwargs["size"])
    return _first(_meta(out, shape, x.dtype), lambda: _randn_values(out))


def _randn_values(out):
    name = _dtype_name(out)
    values = _real_parts(out)
    std = math.sqrt(0.5) if out.is_complex() else 1.0   # complex: variance 1 in total
    return _first(_nan(values), lambda: _normal_checks("N(0,1)", values / std, name, 1.0 / std),
                  lambda: _variety(values))


def _int_checks(name: str, values: torch.Tensor, low: int, high: int) -> str | None:
    """Uniform integers in [low, high): support, integrality, chi-square."""
    if values.numel() == 0:
        return None
    if values.is_floating_point() and not _is_integral(values.to(torch.float64)):
        return "support: non-integral sample(s)"
    values = values.to(torch.float64) if values.is_floating_point() else values.to(torch.int64)
    lo, hi = int(values.min()), int(values.max())
    if lo < low or hi >= high:
        return f"support: samples span [{lo}, {hi}] outside [{low}, {high})"
    wide = values.to(torch.float64) if high - low < 2**53 else values
    return _integer_chi2(name, wide, low, high)


def _judge_randint(out, inputs, kwargs, *, like=False):
    x = inputs[0]
    shape = x.shape if like else tuple(kwargs["size"])
    low, high = kwargs["low"], kwargs["high"]
    return _first(_meta(out, shape, x.dtype),
                  lambda: _int_checks(f"uniform integers in [{low}, {high})", out.reshape(-1), low, high))


def _judge_randperm(out, inputs, kwargs):
    n = kwargs["n"]
    problem = _meta(out, (n,), inputs[0].dtype)
    if problem:
        return problem
    values = out.to(torch.int64) if not out.is_floating_point() else out.to(torch.float64)
    if n and not torch.equal(torch.sort(values.to(torch.float64)).values,
                             torch.arange(n, dtype=torch.float64)):
        return f"support: randperm({n}) is not a permutation of 0..{n - 1}"
    if n >= 20 and torch.equal(values.to(torch.float64), torch.arange(n, dtype=torch.float64)):
        return f"distribution: randperm({n}) returned the identity (probability 1/{n}!)"
    return None


def _judge_normal_size(out, inputs, kwargs):
    mean, std = kwargs["mean"], kwargs["std"]
    problem = _meta(out, tuple(kwargs["size"]), inputs[0].dtype)
    if problem:
        return problem
    values = _real_parts(out)
    return _first(_nan(values), lambda: _normal_checks(f"N({mean},{std})", (values - mean) / std,
                                                       _dtype_name(out), (abs(mean) + std) / std),
                  lambda: _variety(values) if _resolvable(mean, std, _dtype_name(out)) else None)


def _judge_normal_tensors(out, inputs, kwargs, *, form: str):
    """normal(mean_t, std_t), normal(mean_t, std=s), normal(mean=m, std_t)."""
    if form == "both":
        mean, std = inputs[0].to(torch.float64), inputs[1].to(torch.float64)
        like = inputs[0]
    elif form == "mean":
        mean, std, like = inputs[0].to(torch.float64), float(kwargs["std"]), inputs[0]
    else:
        mean, std, like = float(kwargs["mean"]), inputs[0].to(torch.float64), inputs[0]
    shape = torch.broadcast_shapes(*(t.shape for t in inputs)) if form == "both" else like.shape
    problem = _meta(out, shape, like.dtype)
    if problem:
        return problem
    values = out.to(torch.float64)
    mean_b = torch.as_tensor(mean, dtype=torch.float64).expand(shape) if isinstance(mean, torch.Tensor) \
        else torch.full(shape, mean, dtype=torch.float64)
    std_b = torch.as_tensor(std, dtype=torch.float64).expand(shape) if isinstance(std, torch.Tensor) \
        else torch.full(shape, std, dtype=torch.float64)
    z = ((values - mean_b) / std_b).reshape(-1)
    scale = float(((mean_b.abs() + std_b) / std_b).max()) if values.numel() else 1.0
    return _first(_nan(values.reshape(-1)),
                  lambda: _normal_checks("standardised normal(mean, std)", z, _dtype_name(out), scale),
                  lambda: _variety(z))


def _judge_inplace(kind: str):
    """Judges for the in-place samplers: out is self after the call."""
    def judge(out, inputs, kwargs):
        x = inputs[0]
        problem = _meta(out, x.shape, x.dtype)
        if problem:
            return problem
        name = _dtype_name(out)
        got = _dedupe(out, x)
        initial = _dedupe(x, x)
        values = _real_parts(got)
        continuous = kind in ("normal_", "uniform_", "exponential_", "log_normal_", "cauchy_")
        checks = []
        if continuous:
            checks += [lambda: _nan(values), lambda: _unchanged(got, initial, name)]
        if kind == "normal_":
            mean, std = kwargs.get("mean", 0.0), kwargs.get("std", 1.0)
            checks.append(lambda: _normal_checks(f"N({mean},{std})", (values - mean) / std, name,
                                                 (abs(mean) + std) / std))
        elif kind == "uniform_":
            low, high = kwargs.get("from", 0.0), kwargs.get("to", 1.0)
            checks.append(lambda: _uniform_checks(f"U[{low},{high})", values, low, high, name, strict_top=False))
        elif kind == "exponential_":
            lambd = kwargs.get("lambd", 1.0)

            def exp_checks():
                if bool((values < 0).any()):
                    return f"support: negative sample {float(values.min())!r} from exponential_"
                return ks_test(f"Exp({lambd})", values, lambda v: 1.0 - torch.exp(-lambd * v.clamp(min=0.0)),
                               1.0 / lambd, name)
            checks.append(exp_checks)
        elif kind == "log_normal_":
            mean, std = kwargs.get("mean", 1.0), kwargs.get("std", 2.0)

            def log_normal_checks():
                if bool((values < 0).any()):
                    return f"support: negative sample {float(values.min())!r} from log_normal_"
                # log(x) ~ N(mean, std): KS on x with the exact CDF Phi((ln x - mean)/std)
                return ks_test(f"LogNormal({mean},{std})", values,
                               lambda v: _normal_cdf((torch.log(v.clamp(min=0.0)) - mean) / std),
                               0.0, name)
            checks.append(log_normal_checks)
        elif kind == "cauchy_":
            median, sigma = kwargs.get("median", 0.0), kwargs.get("sigma", 1.0)
            checks.append(lambda: ks_test(f"Cauchy({median},{sigma})", values,
                                          lambda v: 0.5 + torch.atan((v - median) / sigma) / math.pi,
                                          sigma, name))
        elif kind == "bernoulli_":
            p = float(kwargs.get("p", 0.5))
            checks.append(lambda: _bernoulli_const(values, p))
        elif kind == "geometric_":
            checks.append(lambda: _geometric(values, float(kwargs["p"])))
        elif kind == "random_":
            checks.append(lambda: _random_checks(values, kwargs, name))
        resolvable = kind != "normal_" or _resolvable(kwargs.get("mean", 0.0), kwargs.get("std", 1.0), name)
        if continuous and resolvable:
            checks.append(lambda: _variety(values))
        return _first(*checks)
    return judge


def _bernoulli_const(values: torch.Tensor, p: float) -> str | None:
    bad = int(((values != 0) & (values != 1)).sum())
    if bad:
        return f"support: {bad} sample(s) outside {{0, 1}}"
    ones = float(values.sum())
    n = values.numel()
    if p in (0.0, 1.0):
        if ones != p * n:
            return f"support: bernoulli with p={p} gave {int(ones)} ones of {n}"
        return None
    return chi2_test(f"Bernoulli({p})", [n - ones, ones], [n * (1 - p), n * p])


def _geometric(values: torch.Tensor, p: float) -> str | None:
    if values.numel() == 0:
        return None
    if not _is_integral(values) or bool((values < 1).any()):
        return f"support: geometric samples must be integers >= 1, got min {float(values.min())!r}"
    if p == 1.0:
        return None if bool((values == 1).all()) else "support: geometric with p=1 gave values above 1"
    n = values.numel()
    k_max = int(values.max())
    top = max(2, min(200, k_max))
    observed = [float((values == k).sum()) for k in range(1, top)] + [float((values >= top).sum())]
    expected = [n * p * (1 - p) ** (k - 1) for k in range(1, top)] + [n * (1 - p) ** (top - 1)]
    return chi2_test(f"Geometric({p})", observed, expected)


def _random_bounds(kwargs: dict, name: str) -> tuple[int, int]:
    """[low, high) of random_ as torch defines it."""
    low = int(kwargs.get("from", 0))
    if "to" in kwargs and kwargs["to"] is not None:
        return low, int(kwargs["to"])
    if name == "bool":
        return 0, 2
    if name in FLOAT:
        bits = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[name]
        return 0, 2 ** bits + 1
    return 0, _INT_LIMITS[name][1] + 1


def _random_checks(values: torch.Tensor, kwargs: dict, name: str) -> str | None:
    low, high = _random_bounds(kwargs, name)
    return _int_checks(f"random_ in [{low}, {high})", values, low, high)


def _judge_bernoulli_tensor(out, inputs, kwargs):
    p = inputs[0].to(torch.float64)
    problem = _meta(out, p.shape, inputs[0].dtype)
    return problem or _bernoulli_p_tensor(out.to(torch.float64).reshape(-1), p.reshape(-1))


def _bernoulli_p_tensor(values: torch.Tensor, p: torch.Tensor) -> str | None:
    """Samples with per-element probabilities p: support, p=0 -> 0 and p=1 -> 1, and
    the count of ones overall and where p > 1/2 (Bernstein, alpha/2 each)."""
    bad = int(((values != 0) & (values != 1)).sum())
    if bad:
        return f"support: {bad} sample(s) outside {{0, 1}}"
    if bool((values[p == 0] != 0).any()) or bool((values[p == 1] != 1).any()):
        return "support: a sample contradicts p = 0 or p = 1 at its position"
    if values.numel() < MIN_SAMPLES:
        return None
    for label, mask in (("all positions", torch.ones_like(p, dtype=torch.bool)), ("positions with p > 1/2", p > 0.5)):
        v, q = values[mask], p[mask]
        if v.numel() < MIN_SAMPLES:
            continue
        problem = bernstein_sum_test(f"number of ones at {label}", float(v.sum()), float(q.sum()),
                                     float((q * (1 - q)).sum()), 1.0, ALPHA / 2)
        if problem:
            return problem
    return None


def _judge_bernoulli_inplace_tensor(out, inputs, kwargs):
    x, p = inputs
    problem = _meta(out, x.shape, x.dtype)
    if problem:
        return problem
    got = _dedupe(out, x)
    pb = _dedupe(p.to(torch.float64).expand(x.shape), x)
    return _bernoulli_p_tensor(got.to(torch.float64).reshape(-1), pb.reshape(-1))


def _judge_bernoulli_p(out, inputs, kwargs):
    x = inputs[0]
    return _meta(out, x.shape, x.dtype) or _bernoulli_const(out.to(torch.float64).reshape(-1), float(kwargs["p"]))


def _judge_multinomial(out, inputs, kwargs):
    probs = inputs[0].to(torch.float64)
    n, replacement = kwargs["num_samples"], kwargs.get("replacement", False)
    shape = (n,) if probs.dim() == 1 else (probs.shape[0], n)
    problem = _meta(out, shape, torch.int64)
    if problem or out.numel() == 0:
        return problem
    rows_p = probs.reshape(-1, probs.shape[-1])
    rows = out.reshape(-1, n)
    k = rows_p.shape[1]
    if int(rows.min()) < 0 or int(rows.max()) >= k:
        return f"support: index outside [0, {k})"
    hit = rows_p.gather(1, rows)
    # Without replacement, torch requires num_samples <= the row's non-zero count and
    # leaves the rest undefined (eager CPU then samples zero-probability indices).
    defined = (rows_p > 0).sum(1, keepdim=True) >= n if not replacement else torch.ones_like(hit[:, :1], dtype=torch.bool)
    hit = torch.where(defined, hit, torch.ones_like(hit))
    if bool((hit <= 0).any()):
        r, c = [int(v) for v in torch.nonzero(hit <= 0)[0]]
        return f"support: row {r} sampled index {int(rows[r, c])}, whose probability is 0"
    if not replacement:
        s = torch.sort(rows, dim=1).values
        if n > 1 and bool((s[:, 1:] == s[:, :-1]).any()):
            return "support: an index repeats within a row of sampling without replacement"
        return None
    stat, df = 0.0, 0
    for r in range(rows.shape[0]):
        w = rows_p[r] / rows_p[r].sum()
        observed = torch.bincount(rows[r], minlength=k).tolist()
        s, d = chi2_statistic(observed, (n * w).tolist())
        stat, df = stat + s, df + d
    if rows.numel() >= MIN_SAMPLES and df:
        p = chi2_sf(stat, df)
        if p < ALPHA:
            return (f"distribution: multinomial frequencies: chi-square {stat:.1f} with {df} degrees "
                    f"of freedom (p ~ {p:.2g} < {ALPHA:g})")
    return None


def _judge_poisson(out, inputs, kwargs):
    rates = inputs[0].to(torch.float64)
    problem = _meta(out, rates.shape, inputs[0].dtype)
    if problem or out.numel() == 0:
        return problem
    values, lam = out.to(torch.float64).reshape(-1), rates.reshape(-1)
    if not _is_integral(values) or bool((values < 0).any()):
        return "support: poisson samples must be non-negative integers"
    if bool((values[lam == 0] != 0).any()):
        return "support: a non-zero sample where the rate is 0"
    if values.numel() < MIN_SAMPLES:
        return None
    for label, mask in (("all positions", torch.ones_like(lam, dtype=torch.bool)),
                        ("positions with rate > 5", lam > 5)):
        if int(mask.sum()) < MIN_SAMPLES:
            continue
        problem = poisson_sum_test(f"sum of samples at {label}", float(values[mask].sum()),
                                   float(lam[mask].sum()), ALPHA / 2)
        if problem:
            return problem
    return None


# -- specs ----------------------------------------------------------------------------------------

def random_op(name: str, fn, shapes, dtypes, doc: str, judge, **kw) -> OpSpec:
    kw.setdefault("allow_specials", False)
    kw.setdefault("allow_nonfinite", False)
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=tuple(dtypes), doc=doc,
                  semantics=RANDOM, statistical=judge, **kw)


def _like(judge):
    return lambda out, inputs, kwargs: judge(out, inputs, kwargs, like=True)


ANY_SHAPE = any_shape(1)
UNIFORM_DTYPES = FLOAT + ("complex32",) + WIDE_COMPLEX
RANDINT_DTYPES = INTS + ("uint16", "uint32") + FLOAT
PERM_DTYPES = ("int64", "int32", "int16", "int8", "uint8") + FLOAT

register(
    random_op("rand", _sized(torch.rand), _dummy_shapes, UNIFORM_DTYPES,
              "uniform [0,1) of a drawn size (0-d, empty, >4-D, up to 4096 elements)",
              lambda o, i, k: _judge_rand(o, i, k), args=_size_args, out=True),
    random_op("randn", _sized(torch.randn), _dummy_shapes, UNIFORM_DTYPES,
              "standard normal of a drawn size (complex: variance 1/2 per part)",
              lambda o, i, k: _judge_randn(o, i, k), args=_size_args, out=True),
    random_op("randint", _randint_fn, _dummy_shapes, RANDINT_DTYPES,
              "uniform integers in [low, high) up to the dtype's whole range",
              lambda o, i, k: _judge_randint(o, i, k), args=_randint_args, out=True),
    random_op("randperm", _randperm_fn, _dummy_shapes, PERM_DTYPES,
              "random permutation of 0..n-1 (n up to 4096, within the dtype's exact range)",
              _judge_randperm, args=_randperm_args, out=True),
    random_op("normal_size", _normal_size_fn, _dummy_shapes, FLOAT,
              "normal(mean, std, size) with float parameters", _judge_normal_size,
              args=_normal_size_args, out=True),
    random_op("rand_like", lambda x: torch.rand_like(x), ANY_SHAPE, UNIFORM_DTYPES,
              "uniform [0,1) shaped like a (strided) input", _like(_judge_rand)),
    random_op("randn_like", lambda x: torch.randn_like(x), ANY_SHAPE, UNIFORM_DTYPES,
              "standard normal shaped like a (strided) input", _like(_judge_randn)),
    random_op("randint_like", lambda x, low, high: torch.randint_like(x, low, high), ANY_SHAPE,
              RANDINT_DTYPES, "uniform integers in [low, high) shaped like the input",
              _like(_judge_randint), args=_randint_like_args),
)

register(
    random_op("normal", lambda m, s, **kw: torch.normal(m, s, **kw), same_shapes(2), FLOAT,
              "normal(mean tensor, std tensor), per-element parameters",
              lambda o, i, k: _judge_normal_tensors(o, i, k, form="both"),
              input_dtypes=(None, None), input_values=(None, _const(STDS)), out=True),
    random_op("normal_mean_tensor", lambda m, std, **kw: torch.normal(m, std=std, **kw), ANY_SHAPE, FLOAT,
              "normal(mean tensor, std float)", lambda o, i, k: _judge_normal_tensors(o, i, k, form="mean"),
              args=lambda draw, s, d: {"std": draw(st.sampled_from(_STDS))}, out=True),
    random_op("normal_std_tensor", lambda s, mean, **kw: torch.normal(mean=mean, std=s, **kw), ANY_SHAPE, FLOAT,
              "normal(mean float, std tensor)", lambda o, i, k: _judge_normal_tensors(o, i, k, form="std"),
              input_values=(_const(STDS),), args=lambda draw, s, d: {"mean": draw(st.sampled_from(_MEANS))},
              out=True),
    random_op("bernoulli", lambda p, **kw: torch.bernoulli(p, **kw), ANY_SHAPE, FLOAT,
              "bernoulli with per-element probabilities (p=0/1 exact)", _judge_bernoulli_tensor,
              input_values=(_const(PROBS),), method="bernoulli", out=True),
    random_op("bernoulli_p", lambda x, p: torch.bernoulli(x, p=p), ANY_SHAPE, FLOAT,
              "bernoulli(input, p float): samples shaped like input", _judge_bernoulli_p, args=_p_arg),
    random_op("multinomial", lambda w, **kw: torch.multinomial(w, **kw), _multinomial_shapes, FLOAT,
              "multinomial over 1-D/2-D weights with zeros, with and without replacement",
              _judge_multinomial, input_values=(_const(WEIGHTS),), args=_multinomial_args,
              method="multinomial", out=True),
    random_op("poisson", lambda r: torch.poisson(r), ANY_SHAPE, FLOAT,
              "poisson with per-element rates in [0, 10]", _judge_poisson, input_values=(_const(RATES),)),
)

register(
    random_op("normal_", _in_place("normal_"), ANY_SHAPE, FLOAT,
              "in-place normal(mean, std) on a strided self", _judge_inplace("normal_"), args=_mean_std),
    random_op("uniform_", _in_place("uniform_"), ANY_SHAPE, FLOAT,
              "in-place uniform [from, to) on a strided self (to itself allowed: rounding)",
              _judge_inplace("uniform_"), args=_uniform_args),
    random_op("bernoulli_", _in_place("bernoulli_"), ANY_SHAPE, FLOAT + INTS + ("bool",),
              "in-place bernoulli(p float) on a strided self", _judge_inplace("bernoulli_"), args=_p_arg),
    random_op("bernoulli_tensor_", _bernoulli_tensor_inplace,
              _bernoulli_tensor_shapes, FLOAT, "in-place bernoulli with a broadcast probability tensor",
              _judge_bernoulli_inplace_tensor, input_dtypes=(None, None), input_values=(None, _const(PROBS))),
    random_op("exponential_", _in_place("exponential_"), ANY_SHAPE, FLOAT,
              "in-place exponential(lambd) on a strided self", _judge_inplace("exponential_"), args=_lambd_arg),
    random_op("geometric_", _in_place("geometric_"), ANY_SHAPE, FLOAT + ("int32", "int64"),
              "in-place geometric(p): integers >= 1", _judge_inplace("geometric_"), args=_geometric_arg),
    random_op("log_normal_", _in_place("log_normal_"), ANY_SHAPE, FLOAT,
              "in-place log-normal(mean, std)", _judge_inplace("log_normal_"), args=_log_normal_args),
    random_op("cauchy_", _in_place("cauchy_"), ANY_SHAPE, FLOAT,
              "in-place Cauchy(median, sigma)", _judge_inplace("cauchy_"), args=_cauchy_args),
    random_op("random_", _in_place("random_"), ANY_SHAPE, FLOAT + INTS + ("bool",),
              "in-place uniform integers: [from, to), [0, to) or the dtype's default range",
              _judge_inplace("random_"), args=_random_args),
)
