"""The statistics the distribution oracle's checks run on: Kolmogorov-Smirnov, chi-square,
Bernstein and Poisson bounds on sums, each at a fixed, tiny false-alarm rate.

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
A judge (oracles/distribution.py) runs at most a handful of tests, so its false-alarm
rate per call is below 1e-5; tests/test_random_ops.py runs each judge on real torch
output over hundreds of seeds and checks it flags corrupted outputs.
"""
from __future__ import annotations

import math

import torch

from ..generation import dtypes as dt

ALPHA = 1e-6
MIN_SAMPLES = 64          # distribution tests from this many samples on
MIN_EXPECTED = 20         # chi-square: pool bins with a smaller expected count

FLOAT = dt.FLOAT


def normal_cdf(x: torch.Tensor) -> torch.Tensor:
    """The standard normal CDF."""
    return 0.5 * torch.erfc(-x / math.sqrt(2.0))


def ks_critical(n: int, alpha: float = ALPHA) -> float:
    """DKW-Massart: P(sup |F_n - F| > c) <= 2 exp(-2 n c^2) = alpha."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def ks_test(name: str, samples: torch.Tensor, cdf, scale: float, dtype_name: str,
            alpha: float = ALPHA) -> str | None:
    samples = samples.to(torch.float64).reshape(-1)
    n = samples.numel()
    if n < MIN_SAMPLES:
        return None
    eps = float(dt.finfo_or_iinfo(dt.real_dtype_name(dtype_name)).eps) if dtype_name in FLOAT + dt.COMPLEX else 0.0
    x, _ = torch.sort(samples)
    slack = 2.0 * eps * torch.maximum(x.abs(), torch.tensor(scale, dtype=torch.float64))
    i = torch.arange(1, n + 1, dtype=torch.float64)
    d = float(torch.maximum((i / n - cdf(x + slack)).max(), (cdf(x - slack) - (i - 1) / n).max()).clamp(min=0))
    crit = ks_critical(n, alpha)
    if d > crit:
        return (f"distribution: {name}: Kolmogorov-Smirnov D = {d:.4f} over {n} samples exceeds "
                f"{crit:.4f} (alpha {alpha:g}); sample mean {float(samples.mean()):.4g}")
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
