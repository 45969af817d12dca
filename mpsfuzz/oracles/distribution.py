"""``distribution``: random ops are judged statistically on the DUT, never against CPU
values: the two sides' generators differ.

A random op declares what its output should follow (``OpSpec.distribution``: a
:class:`~mpsfuzz.generation.opspec.Distribution` whose ``kind`` names a law below;
its parameters are the case's keyword arguments and inputs). This module owns the table
from kind to judge (:data:`JUDGES`). An op may instead carry a judge of its own
(``OpSpec.statistical``: the dropouts). A judge looks at the DUT's output alone:

- metadata: the shape and dtype asked for;
- support: [low, high) for uniform integers, {0, 1} for Bernoulli, >= 0 for exponential,
  a permutation for randperm, no zero-probability index (and no repeat without
  replacement) for multinomial, ...; always checked, whatever the size;
- distribution (only from 64 samples on): Kolmogorov-Smirnov against the exact CDF for
  continuous laws, chi-square on frequencies for discrete ones, Bernstein bounds on
  sums for samplers with per-element parameters (bernoulli(p), poisson(rates)); the
  tests and their false-alarm rates: :mod:`mpsfuzz.oracles.statistics`;
- variety: a continuous sample of 16 or more values is not constant, and the slices of
  a ``rand``/``randn`` output along a dim do not all repeat the first (where chance
  could not explain it);
- in-place samplers: the whole output is judged, and positions that still hold the
  case's initial value are counted, so a kernel that fills only part of a strided
  ``self`` is caught.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from ..execution.observation import Observation, Raised
from ..generation import dtypes as dt
from ..generation.huge_samples import rng_windows
from . import Failure, oracle
from .statistics import (ALPHA, MIN_SAMPLES, bernstein_sum_test, chi2_sf, chi2_statistic, chi2_test, ks_test,
                         normal_cdf, poisson_sum_test)

MIN_VARIETY = 16          # "not all equal" from this many continuous samples on
FLOAT = dt.FLOAT
LOW_BITS = ("float16", "bfloat16", "complex32")


def judge_output(spec, out, inputs: list, kwargs: dict) -> str | None:
    """What is wrong with a random op's output (one line), or None: the checks of its
    declared distribution, or its own ``statistical`` judge. ``out``: the DUT's outputs
    (on the CPU); ``inputs``: the case's inputs, materialised on the CPU."""
    law = getattr(spec, "distribution", None)
    if law is not None:
        return JUDGES[law.kind](out, inputs, kwargs, law)
    own = getattr(spec, "statistical", None)
    return own(out, inputs, kwargs) if own is not None else None


@oracle("distribution", stage="case", doc="random ops' outputs pass their statistical checks")
def check_distribution(obs: Observation) -> Failure | None:
    if (getattr(obs.spec, "distribution", None) is None and getattr(obs.spec, "statistical", None) is None) \
            or isinstance(obs.dut, Raised):
        return None
    problem = judge_output(obs.spec, obs.dut, obs.case.materialize("cpu"), obs.case.kwargs_dict())
    if not problem:
        return None
    return Failure(oracle="distribution", kind="wrong-distribution", severity="high",
                   title=f"`{obs.spec.name}` produces values that fail a statistical check on {obs.target_name}",
                   # Which statistic fails depends on the sample (its size, its shape), not
                   # on the bug: the key is the symptom alone; ablation tells causes apart.
                   message=problem, dedup_key=("wrong-distribution",))


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


def _repeated_slices(out: torch.Tensor) -> str | None:
    """For the fixed laws of ``rand`` and ``randn``: no dim's slices all repeat the first
    (pytorch#147667: MPS random ops repeated values for 5-D outputs). One value of these
    laws takes a mass of at most q (2^-20 for float32 and float64, 1/16 for the 16-bit
    floats, as :func:`_unchanged` bounds it), so k samples all equal to given others
    happen with probability at most q^k: a dim is judged where q^k is below ALPHA shared
    by the dims tested, k = (slice size) x (slices - 1)."""
    if out.is_complex() or out.numel() < 2:
        return None
    q = 1.0 / 16 if _dtype_name(out) in LOW_BITS else 2.0 ** -20
    dims = [d for d, size in enumerate(out.shape) if size > 1]
    needed = math.ceil(math.log(ALPHA / max(1, len(dims))) / math.log(q))
    for d in dims:
        size = out.shape[d]
        if (out.numel() // size) * (size - 1) >= needed and bool((out == out.narrow(d, 0, 1)).all()):
            return (f"variety: the {size} slices along dim {d} of a {tuple(out.shape)} sample all repeat the "
                    f"first ({out.numel() // size} value(s) each)")
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

def _in_dtype(bound: float, dtype_name: str) -> float:
    return float(torch.tensor(bound, dtype=torch.float64).to(dt.to_torch(dtype_name)))


def _uniform_checks(name, values, low, high, dtype_name, *, strict_top: bool) -> str | None:
    if dt.to_torch(dtype_name).itemsize <= 2 and dt.to_torch(dtype_name).is_floating_point:
        # A 16-bit sample is a float32 draw rounded to the nearest 16-bit value: a draw just
        # above `from` rounds to `from`'s own 16-bit rounding, which may lie below it
        # (uniform_(0.001, 0.002) in bfloat16 gives 0.00099945...), and one just below
        # `to` may round up onto it. The support is the bounds' roundings, both included.
        low, high, strict_top = _in_dtype(low, dtype_name), _in_dtype(high, dtype_name), False
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
    return ks_test(name, z, normal_cdf, scale, dtype_name)


# -- judges, one per law (JUDGES below) -----------------------------------------------------

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
                  lambda: _variety(values), lambda: _repeated_slices(out))


def _judge_randn(out, inputs, kwargs, *, like=False):
    x = inputs[0]
    shape = x.shape if like else tuple(kwargs["size"])
    return _first(_meta(out, shape, x.dtype), lambda: _randn_values(out))


def _randn_values(out):
    name = _dtype_name(out)
    values = _real_parts(out)
    std = math.sqrt(0.5) if out.is_complex() else 1.0   # complex: variance 1 in total
    return _first(_nan(values), lambda: _normal_checks("N(0,1)", values / std, name, 1.0 / std),
                  lambda: _variety(values), lambda: _repeated_slices(out))


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
                               lambda v: normal_cdf((torch.log(v.clamp(min=0.0)) - mean) / std),
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
    return 0, dt.EXACT_INTEGERS[name][1] + 1


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


# -- a draw past 2^31 elements, judged on windows (generation/huge_samples.py) --------------

def _judge_rand_windows(out, inputs, kwargs):
    """``rand@huge``: the windows of a draw of input 0's shape, one after the other. Each
    check's false-alarm rate is at most ALPHA for the whole case, whatever the number of
    windows: support is exact (a value outside [0, 1) never happens); a window of 16 or
    more values all equal has probability at most q^15 (q: the most mass one value takes,
    1/16 for the 16-bit floats, 2^-20 wider); each window's KS test runs at ALPHA over the
    number of windows (Bonferroni); the mean of all samples is held to Hoeffding's bound
    at ALPHA, widened by one eps of the dtype (rounding a draw to 16 bits moves it by at
    most that); and a run of ``k`` values repeats another run anywhere in the windows
    with probability at most pairs x q^k, k chosen so that this is below ALPHA."""
    x = inputs[0]
    windows = rng_windows(x.numel(), x.shape[0] if x.dim() else 1)
    problem = _meta(out, (sum(b - a for a, b in windows),), x.dtype)
    if problem:
        return problem
    name = _dtype_name(out)
    values = out.to(torch.float64)
    parts, at = [], 0
    for a, b in windows:
        parts.append((a, values[at:at + b - a]))
        at += b - a
    strict = name in ("float32", "float64")
    high = 1.0 if strict else _in_dtype(1.0, name)
    bad = (values < 0) | ((values >= high) if strict else (values > high)) | torch.isnan(values)
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        where = _flat_position(windows, i)
        return (f"support: {int(bad.sum())} sample(s) outside [0, 1) in the windows judged, e.g. "
                f"{float(values[i])!r} at flat position {where:,}")
    for start, part in parts:
        if part.numel() >= MIN_VARIETY and bool((part == part[0]).all()):
            return (f"variety: the {part.numel()} samples from flat position {start:,} all equal "
                    f"{float(part[0])!r}")
    for start, part in parts:
        problem = ks_test(f"U[0,1) from flat position {start:,}", part, lambda v: v.clamp(0.0, 1.0), 1.0, name,
                          alpha=ALPHA / len(parts))
        if problem:
            return problem
    n = values.numel()
    if n >= MIN_SAMPLES:
        eps = float(torch.finfo(out.dtype).eps)
        allowed = math.sqrt(math.log(2.0 / ALPHA) / (2.0 * n)) + eps
        mean = float(values.mean())
        if abs(mean - 0.5) > allowed:
            return (f"distribution: the mean of {n} samples is {mean:.4f}, more than {allowed:.4f} from 1/2 "
                    f"(Hoeffding at alpha {ALPHA:g})")
    return _repeated_run(out, windows, name)


def _flat_position(windows, i: int) -> int:
    """The flat position in the draw of sample ``i`` of the windows laid one after the other."""
    for a, b in windows:
        if i < b - a:
            return a + i
        i -= b - a
    return -1


def _repeated_run(out: torch.Tensor, windows, name: str) -> str | None:
    """A run of ``k`` consecutive values of a window that equals another run anywhere in
    the windows (the same window at another shift too): a stream restarted where a counter
    wrapped (past 2^31: the window across 2^31 repeats the first), slices that repeat the
    first (pytorch#147667), a period. Chance gives one with probability at most
    (pairs of runs) x q^k; k is the least for which that is below ALPHA."""
    q = 1.0 / 16 if name in LOW_BITS else 2.0 ** -20
    n = out.numel()
    k = max(2, math.ceil(math.log(ALPHA / max(1.0, n * n / 2.0)) / math.log(q)))
    bits = out.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[out.element_size()]).to(torch.int64)
    runs, starts, at = [], [], 0
    for a, b in windows:
        if b - a >= k:
            runs.append(bits[at:at + b - a].unfold(0, k, 1))
            starts += range(a, b - k + 1)
        at += b - a
    if not runs:
        return None
    every = torch.cat(runs)
    _, inverse, counts = torch.unique(every, dim=0, return_inverse=True, return_counts=True)
    repeated = (counts[inverse] > 1).nonzero().view(-1)
    if not repeated.numel():
        return None
    first = int(repeated[0])
    second = int(((inverse == inverse[first]).nonzero().view(-1))[1])
    return (f"variety: the {k} values from flat position {starts[second]:,} repeat those from flat position "
            f"{starts[first]:,} (chance: below {ALPHA:g})")


# -- the table: a declared distribution's kind -> its judge(out, inputs, kwargs, law) -------

def _in_place(method: str):
    judge = _judge_inplace(method)
    return lambda out, inputs, kwargs, law: judge(out, inputs, kwargs)


JUDGES: dict[str, Callable] = {
    # size-creating generators (``like``: shaped like input 0 instead of by ``size``)
    "unit-uniform": lambda out, inputs, kwargs, law: _judge_rand(out, inputs, kwargs, like=law.option("like", False)),
    "standard-normal": lambda out, inputs, kwargs, law: _judge_randn(out, inputs, kwargs,
                                                                     like=law.option("like", False)),
    "uniform-integers": lambda out, inputs, kwargs, law: _judge_randint(out, inputs, kwargs,
                                                                       like=law.option("like", False)),
    "permutation": lambda out, inputs, kwargs, law: _judge_randperm(out, inputs, kwargs),
    # a draw past 2^31 elements shaped like input 0, judged on windows (rand@huge)
    "unit-uniform-windows": lambda out, inputs, kwargs, law: _judge_rand_windows(out, inputs, kwargs),
    "normal": lambda out, inputs, kwargs, law: _judge_normal_size(out, inputs, kwargs),
    # samplers with tensor parameters (``form``: which of mean and std are tensors)
    "normal-per-element": lambda out, inputs, kwargs, law: _judge_normal_tensors(out, inputs, kwargs,
                                                                                 form=law.option("form")),
    "bernoulli-per-element": lambda out, inputs, kwargs, law: _judge_bernoulli_tensor(out, inputs, kwargs),
    "bernoulli": lambda out, inputs, kwargs, law: _judge_bernoulli_p(out, inputs, kwargs),
    "multinomial": lambda out, inputs, kwargs, law: _judge_multinomial(out, inputs, kwargs),
    "poisson-per-element": lambda out, inputs, kwargs, law: _judge_poisson(out, inputs, kwargs),
    # in-place samplers: the law fills ``self`` (input 0)
    "normal-in-place": _in_place("normal_"),
    "uniform-in-place": _in_place("uniform_"),
    "bernoulli-in-place": _in_place("bernoulli_"),
    "bernoulli-per-element-in-place": lambda out, inputs, kwargs, law: _judge_bernoulli_inplace_tensor(
        out, inputs, kwargs),
    "exponential-in-place": _in_place("exponential_"),
    "geometric-in-place": _in_place("geometric_"),
    "log-normal-in-place": _in_place("log_normal_"),
    "cauchy-in-place": _in_place("cauchy_"),
    "random-integers-in-place": _in_place("random_"),
}
