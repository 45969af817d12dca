"""The float64 juror's judgement of one disputed output leaf (issue 39: an object, not
19 parameters).

A :class:`DisputedLeaf` is what the juror knows of one floating output (or gradient)
where the target and eager CPU disagree: the two sides' values and float64's result, the
leaf's tolerance, and the evidence the rules below weigh (the terms' magnitudes, the
results for inputs moved by a roundoff, whether the inputs hold non-finite values or
extremes, an intermediate past the dtype's range, ...). :meth:`DisputedLeaf.judge` gives
the opinion: 'dut-wrong', 'cpu-wrong', or one of the dismissals ('both-close',
'within-bound', 'within-tolerance', 'overflow', 'ill-conditioned'), with the numbers,
and leaves a *ballot* of the positions still in dispute for the jury. It runs nothing:
the float64 juror (``float64.py``) gathers the evidence and builds the leaf.

The rule is the one torch.compile's accuracy checks use: a result is acceptable when its
error against the float64 result is within ``MULTIPLIER`` times the other side's error
(plus a tenth of the dtype's atol).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..accuracy import LOW_PRECISION, accumulation_bound, unit_roundoff

MULTIPLIER = 2.0

# Finite stand-ins for the inputs' infinities: results that grow with them (by more than
# half the ratio of the two) have the stand-in's sign as their limit.
STAND_INS = (1e100, 1e120)


def _limit_infinity(d: torch.Tensor, limits: list) -> torch.Tensor:
    """Positions where the DUT's infinity is the op's limit as the infinite inputs grow:
    the stand-in results have its sign and grow with the stand-ins. An H200 run
    (docs/real-findings.md): ``group_norm`` and ``instance_norm`` with an infinite weight are -inf on CUDA, which
    computes (x - mean) * rstd * w + b, and NaN on CPU and in float64, which compute
    x * (w * rstd) + (b - mean * rstd * w): inf - inf, an order of evaluation, where
    the limit is -inf. ``sub(inf, inf)`` has no such limit (the stand-ins cancel)."""
    small, large = (t.to(torch.float64).reshape(-1) for t in limits)
    ratio = STAND_INS[1] / STAND_INS[0]
    grows = (large.abs() > 0.5 * ratio * small.abs()) & (small.abs() > 0) & torch.isfinite(large)
    return torch.isinf(d) & grows & (torch.sign(small) == torch.sign(d)) & (torch.sign(large) == torch.sign(d))


def _errors(x: torch.Tensor, truth: torch.Tensor, finite_all: torch.Tensor) -> tuple[int, float]:
    """(positions whose non-finiteness disagrees with truth, RMS error where all finite)."""
    if x.is_complex():
        bad_nonfinite = torch.isfinite(x) != torch.isfinite(truth)
    else:
        same = (torch.isnan(x) & torch.isnan(truth)) | (torch.isinf(x) & (x == truth)) | (torch.isfinite(x) & torch.isfinite(truth))
        bad_nonfinite = ~same
    diff = torch.where(finite_all, (x - truth).abs(), torch.zeros((), dtype=torch.float64))
    n = int(finite_all.sum())
    rms = math.sqrt(float((diff ** 2).sum()) / n) if n else 0.0
    return int(bad_nonfinite.sum()), rms


def near(x: torch.Tensor, truth: torch.Tensor, tol: torch.Tensor) -> torch.Tensor:
    """Per element: x equals truth within ``tol`` (NaN matches NaN, inf matches itself)."""
    nan_x, nan_t = torch.isnan(x), torch.isnan(truth)
    finite = torch.isfinite(x) & torch.isfinite(truth)
    diff = torch.where(finite, (x - truth).abs(), torch.zeros((), dtype=torch.float64))
    return (nan_x & nan_t) | (~nan_x & ~nan_t & (x == truth)) | (finite & (diff <= tol))


def _deviation(x: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Per element |x - truth|: 0 where both are the same NaN or infinity, inf where their
    non-finiteness disagrees."""
    both_nan = torch.isnan(x) & torch.isnan(truth)
    finite = torch.isfinite(x) & torch.isfinite(truth)
    diff = torch.where(finite, (x - truth).abs(), torch.full((), math.inf, dtype=torch.float64))
    return torch.where(both_nan | (~finite & (x == truth)), torch.zeros((), dtype=torch.float64), diff)


def _undetermined(truth: torch.Tensor, tol: torch.Tensor, perturbed: list) -> torch.Tensor:
    """Positions where float64 moves past ``tol``, and by as much as the result itself,
    when the inputs move by one unit of roundoff: not even the leading digit is set."""
    sensitivity = torch.zeros_like(truth, dtype=torch.float64)
    for p in perturbed:
        if p.shape == truth.shape:
            sensitivity = torch.maximum(sensitivity, _deviation(p, truth))
    return (sensitivity > tol) & (sensitivity >= truth.abs().nan_to_num(0.0, posinf=math.inf, neginf=math.inf))


def _ill_conditioned(d: torch.Tensor, truth: torch.Tensor, tol: torch.Tensor, perturbed: list, *,
                     factor: float = MULTIPLIER) -> torch.Tensor:
    """Positions where the result is not determined by the inputs to within the
    tolerance *and* that explains the target's deviation: float64 moves past ``tol``
    when the inputs move by one unit of roundoff, and either moves by as much as the
    result itself (not even its leading digit is determined: a tie, a rank-deficient
    pseudo-inverse) or by at least 1/``factor`` of how far the target is off (a stable
    algorithm's backward error is a few roundoffs per term, ``factor`` is
    MULTIPLIER * (2 + summands)). A wrong element of a well-determined result (a
    product off by its own size) is not excused by a sensitivity of a few roundoffs."""
    sensitivity = torch.zeros_like(truth, dtype=torch.float64)
    for p in perturbed:
        if p.shape == truth.shape:
            sensitivity = torch.maximum(sensitivity, _deviation(p, truth))
    undetermined = sensitivity >= truth.abs().nan_to_num(0.0, posinf=math.inf, neginf=math.inf)
    explained = _deviation(d, truth) <= factor * sensitivity + tol
    return (sensitivity > tol) & (undetermined | explained)


def _other_infinity_reachable(d, exact, magnitude, dtype) -> torch.Tensor:
    """Where the DUT returns an infinity that some order of evaluation reaches: the terms
    of that sign alone sum past the output dtype's largest value. With ``S`` the exact
    sum and ``M`` the sum of the terms' magnitudes, the positive terms sum to (M + S)/2
    and the negative ones to (M - S)/2; an accumulator no wider than the output overflows
    on them before the terms of the other sign arrive. (conv3d in bfloat16 on an H100,
    a weight of bfloat16's max: exact -3.8e38, so -inf rounded, but the positive products
    alone reach 3.6e38, and cuDNN returned +inf.)"""
    if magnitude is None or d.is_complex() or not dtype.is_floating_point:
        return torch.zeros_like(d, dtype=torch.bool)
    s, m = exact.to(torch.float64).reshape(-1), magnitude.to(torch.float64).reshape(-1)
    if s.shape != d.shape or m.shape != d.shape:
        return torch.zeros_like(d, dtype=torch.bool)
    mass_of_its_sign = (m + torch.sign(d).nan_to_num(0.0) * s) / 2
    return torch.isinf(d) & torch.isfinite(s) & torch.isfinite(m) & (mass_of_its_sign > torch.finfo(dtype).max)


def _finite_far_from_overflow(d, c, truth, exact, terms, dtype, summands: int) -> torch.Tensor:
    """Where the DUT returns a finite value though float64's result rounds to an
    infinity and CPU's own order of evaluation met one too (inf - inf: NaN, or the other
    infinity), and the DUT's value is farther from the exact sum than accumulating its
    measured terms in the dtype may cost: no order of evaluation gives it. (Where CPU
    agrees with float64's infinity, :func:`_nonfinite_verdicts` judges.)"""
    if terms is None or d.is_complex() or not dtype.is_floating_point:
        return torch.zeros_like(d, dtype=torch.bool)
    s, m = exact.to(torch.float64).reshape(-1), terms.to(torch.float64).reshape(-1)
    if s.shape != d.shape or m.shape != d.shape:
        return torch.zeros_like(d, dtype=torch.bool)
    slack = unit_roundoff(dtype) * (2 + summands) * m
    return (torch.isfinite(d) & torch.isinf(truth) & ~torch.isfinite(c) & (c != truth) & torch.isfinite(s)
            & torch.isfinite(m) & ((d - s).abs() > slack))


def _nonfinite_verdicts(d, c, truth, d_ok, *, independent: bool, explicit_nan: bool, reachable=None,
                        extremes: bool = False, limit=None):
    """Under overflow (inputs with non-finite values or extremes, or terms whose
    magnitudes exceed the dtype): (positions where the DUT is wrong whatever the order of
    evaluation, positions excused as overflow of intermediates). The DUT is wrong where
    it drops a NaN that float64 and CPU keep, or returns a finite value (or the other
    infinity, unless ``reachable`` says some order of evaluation gets there) where both
    say inf. A float64 output has no wider reference: float64 is CPU itself, so only a
    NaN the inputs hold and CPU keeps is held against the DUT.

    ``extremes``: the inputs hold a NaN or an infinity *and* the dtype's largest values.
    Then a NaN or infinity the DUT drops (a finite value where float64 and CPU have it) is
    excused: whether a non-finite input reaches the result can hang on a branch that
    rounding at those magnitudes decides (an H100's float16 ``multi_margin_loss`` of
    inputs at 65504 and a NaN or inf weight: the hinge ``1 - 65504 + 65504`` is 0 in
    float16, 1 in CPU's float32, so the weight is skipped on one side only). A kernel
    that drops NaNs drops them without extremes too, and one that saturates where the
    result overflows does so without non-finite inputs: there the rule still holds. The
    same holds for a float64 output (an H100's float64 SDPA gradient with a NaN query
    and a value at float64's max: -inf where CPU's inf - inf gave NaN).

    ``limit``: positions where the DUT's infinity is the op's limit as the infinite
    inputs grow (:func:`_limit_infinity`); a NaN CPU and float64 reach there by an order
    of evaluation (inf - inf) is not held against it."""
    finite_d = torch.isfinite(d)
    if independent:
        lost_nan = torch.isnan(truth) & ~torch.isnan(d) & torch.isnan(c)
        wrong_for_inf = torch.isinf(truth) & ~torch.isnan(d) & (d != truth) & (c == truth)
        if extremes:
            lost_nan = torch.zeros_like(lost_nan)
            wrong_for_inf &= ~finite_d     # the other infinity is still judged (``reachable``)
        if reachable is not None:
            wrong_for_inf &= ~reachable
        if limit is not None:
            lost_nan &= ~limit
        wrong = lost_nan | wrong_for_inf
    else:
        wrong = ((torch.isnan(c) & ~torch.isnan(d)) if explicit_nan and not extremes
                 else torch.zeros_like(finite_d))
    nonfinite_any = ~finite_d | ~torch.isfinite(c) | ~torch.isfinite(truth)
    # The DUT's non-finite value is float64's own, where CPU's order of evaluation stayed
    # finite: the terms overflow, and which order meets the overflow before a zero or a
    # cancellation decides the result (a float64 prod of 0 and 1.8e308 among 18 factors:
    # -0.0 in CPU's sequential order on a gapped input, NaN in CUDA's parallel one and in
    # CPU's own vectorised one on the contiguous copy). Neither side is held to the other;
    # a NaN the inputs hold is not an overflow's.
    same_as_float64 = d_ok & ~finite_d & torch.isfinite(c) & ~torch.isfinite(truth)
    if explicit_nan:
        same_as_float64 &= ~torch.isnan(d)
    return wrong, (~d_ok & nonfinite_any & ~wrong) | same_as_float64


@dataclass(frozen=True, eq=False)
class DisputedLeaf:
    """One output leaf in dispute and the evidence on it; :meth:`judge` gives the
    float64 juror's opinion with the numbers.

    ``dut``, ``cpu``: the two sides' values; ``exact``: float64's result (rounded to the
    output dtype before it is compared). ``atol``, ``rtol``: the leaf's tolerance;
    ``weights_slack``: an absolute error every output may carry
    (:func:`~.float64.computed_weights_slack`); ``rounding``: per position, the
    first-order rounding error bound of the op's decomposition in the dtype
    (``rounding_bound.py``): a result within MULTIPLIER times it is not wrong.

    Accumulation: low-precision outputs are held to the accumulation bound for
    ``summands`` terms of ``magnitude``; ``measured``: ``magnitude`` is the op's own
    measure of the terms (OpSpec.grad_terms), so the bound holds for every dtype, float64
    included. ``terms``: the sum of the terms' magnitudes of each element, measured (the
    op in float64 on the inputs' absolute values), never a floor such as ``magnitude``
    may be: where the terms of one sign alone overflow, the infinity of that sign is
    excused (see :func:`_other_infinity_reachable`).

    Overflow: ``overflow``: the inputs hold non-finite values or extremes, or the terms'
    magnitudes exceed the dtype (see :mod:`..accuracy`): non-finite differences that
    overflowing intermediates explain are excused. ``explicit_nan``: the inputs hold a
    NaN. ``extremes``: the inputs hold the dtype's largest values and a NaN or an
    infinity (see :func:`_nonfinite_verdicts`). ``limits``: the float64 results with the
    infinite inputs replaced by growing finite stand-ins (see :func:`_limit_infinity`).
    ``intermediates``: an intermediate of the op leaves the dtype's range
    (:func:`~.float64.intermediates_overflow`): where the exact result is finite in the
    dtype, whatever the backends return is excused (an order of evaluation decides it);
    where it is not, the rules above judge.

    Conditioning: ``perturbed``: the float64 result for inputs moved by one unit of
    roundoff; positions where it differs from float64's by more than the tolerance are
    ill-conditioned (no verdict there). ``whole``: the output is determined only as a
    whole (a factor of a decomposition): where float64 leaves any of its elements
    undetermined (a rank-deficient input), none gets a verdict."""
    dut: torch.Tensor
    cpu: torch.Tensor
    exact: torch.Tensor
    atol: float
    rtol: float = 0.0
    weights_slack: float = 0.0
    rounding: torch.Tensor | None = None
    # accumulation
    magnitude: torch.Tensor | None = None
    summands: int = 1
    measured: bool = False
    terms: torch.Tensor | None = None
    # overflow
    overflow: bool = False
    explicit_nan: bool = False
    extremes: bool = False
    limits: list | None = None
    intermediates: bool = False
    # conditioning
    perturbed: list | None = None
    whole: bool = False

    @property
    def wide(self) -> torch.dtype:
        """The dtype the three are compared in."""
        return torch.complex128 if self.cpu.is_complex() else torch.float64

    @property
    def independent(self) -> bool:
        """Whether float64 is another computation than CPU's (not for a float64 output:
        there float64 is CPU itself)."""
        return self.cpu.dtype not in (torch.float64, torch.complex128)

    @property
    def low_precision(self) -> bool:
        return self.cpu.dtype in LOW_PRECISION

    @property
    def bounded(self) -> bool:
        """Whether the terms' magnitudes bound the error: any dtype's accumulation (a
        float32 sum of [max, lowest, -2] is 0 or -2 depending on the order, both correct
        to u * sum|terms|)."""
        return self.low_precision or (self.magnitude is not None and (self.independent or self.measured))

    def tolerance(self, truth: torch.Tensor) -> torch.Tensor:
        """Per position of the flattened leaf, how far a side may be from ``truth``
        (float64's result rounded to the dtype, flattened)."""
        wide, low = self.wide, self.low_precision
        tol = self.atol + self.rtol * truth.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0) + self.weights_slack
        if self.bounded:
            mag = None if self.magnitude is None else self.magnitude.to(wide).reshape(-1)
            accumulated = accumulation_bound(truth, mag, self.summands, self.cpu.dtype, self.atol)
            tol = (accumulated if low else torch.maximum(tol, accumulated)) + self.weights_slack
        if self.rounding is not None and self.rounding.shape == tol.shape:
            # (a non-finite bound, from a NaN or an infinity in the inputs, says nothing)
            tol = torch.maximum(tol, MULTIPLIER * self.rounding.nan_to_num(0.0, posinf=0.0, neginf=0.0))
        return tol

    def judge(self, ballot: dict | None = None) -> tuple[str, dict]:
        """'dut-wrong', 'cpu-wrong', 'both-close', 'within-bound', 'within-tolerance',
        'overflow' or 'ill-conditioned' for the leaf, with the numbers. ``ballot``:
        filled with the positions still in dispute once every rule has excused what it
        explains (``judged``, over the flattened leaf) and their tolerance (``tol``), for
        the jury."""
        wide, cpu, exact = self.wide, self.cpu, self.exact
        summands, atol, rtol = self.summands, self.atol, self.rtol
        truth = exact.to(cpu.dtype).to(wide).reshape(-1)  # rounded to the output dtype
        d, c = self.dut.to(wide).reshape(-1), cpu.to(wide).reshape(-1)
        independent, low, bounded = self.independent, self.low_precision, self.bounded
        tol = self.tolerance(truth)
        d_ok = near(d, truth, tol)
        mismatch = ~near(d, c, tol)
        numbers: dict = {"summands": summands} if bounded else {}
        excused = torch.zeros_like(mismatch)
        # the float64 results for the moved inputs, rounded to the output dtype
        moved = [p.to(cpu.dtype).to(wide).reshape(-1) for p in self.perturbed] if self.perturbed else []
        factor = MULTIPLIER * (2 + summands)
        if self.intermediates:
            by_intermediates = mismatch & torch.isfinite(truth)
            excused |= by_intermediates
            numbers["intermediate_overflow_positions"] = int(by_intermediates.sum())
        if moved:
            ill = _ill_conditioned(d, truth, tol, moved, factor=factor)
            if self.whole and bool(_undetermined(truth, tol, moved).any()):
                # One free direction (a second column of an LU or QR of a rank-1 matrix)
                # makes every element that depends on it arbitrary, determined or not.
                ill = torch.ones_like(mismatch)
                numbers["undetermined_factor"] = True
            excused |= mismatch & ill & ~d_ok
            numbers["ill_conditioned_positions"] = int((mismatch & ill & ~d_ok).sum())
        wrong_nf = torch.zeros_like(mismatch)
        if self.overflow:
            wrong_nf, overflowed = _nonfinite_verdicts(
                d, c, truth, d_ok, independent=independent, explicit_nan=self.explicit_nan,
                reachable=_other_infinity_reachable(d, exact, self.terms, cpu.dtype), extremes=self.extremes,
                limit=_limit_infinity(d, self.limits) if self.limits else None)
            if independent and not self.extremes:
                wrong_nf |= _finite_far_from_overflow(d, c, truth, exact, self.terms, cpu.dtype, summands)
            wrong_nf &= mismatch & ~excused
            excused |= mismatch & overflowed & ~wrong_nf
            numbers.update(overflow_rule=True, target_wrong_positions=int(wrong_nf.sum()),
                           excused_positions=int((mismatch & overflowed & ~wrong_nf).sum()))
        judged = mismatch & ~excused
        if ballot is not None:
            # (the relative part again, for a juror's value: the tolerance above scales with
            # float64's result, which is CPU's kernel and may be the wrong one)
            ballot.update(judged=judged, tol=tol, atol=atol,
                          rel=unit_roundoff(cpu.dtype) * (2 + summands) if low else rtol)
        finite_all = torch.isfinite(d) & torch.isfinite(c) & torch.isfinite(truth) & judged
        nf_d, err_d = _errors(d[judged], truth[judged], finite_all[judged])
        nf_c, err_c = _errors(c[judged], truth[judged], finite_all[judged])
        numbers.update({"target_error": err_d, "cpu_error": err_c, "target_nonfinite_wrong": nf_d,
                        "cpu_nonfinite_wrong": nf_c})
        if bool(wrong_nf.any()):
            return "dut-wrong", numbers
        if not bool(judged.any()):
            if bool(mismatch.any()) and numbers.get("ill_conditioned_positions"):
                return "ill-conditioned", numbers
            return ("overflow" if self.overflow or self.intermediates else "both-close"), numbers
        if bounded and bool(d_ok[judged].all()):
            # Within what accumulating this many terms in half precision may cost: not a
            # bug of the target, whatever CPU's error.
            return "within-bound", numbers
        slack = atol / 10.0
        # CPU is blamed only where it is off float64 by more than the tolerance, and not by
        # what the conditioning explains (the same H200 campaign, another seed: CPU's float32
        # shifted V_8 1.1e-5 off at a point where the formula amplifies a roundoff 47 times,
        # CUDA's 8e-7, and CPU was filed as wrong).
        cpu_worse = nf_c > nf_d or err_c > MULTIPLIER * err_d + slack
        if cpu_worse:
            c_misses = judged & ~near(c, truth, tol)
            if moved:
                c_misses &= ~_ill_conditioned(c, truth, tol, moved, factor=factor)
            cpu_worse = bool(c_misses.any())
        if bool(d_ok[judged].all()) and not cpu_worse:
            # The target is within the tolerance of float64 everywhere it differs from CPU:
            # the two differ by more only because CPU's own error adds to it (an H200's
            # float32 shifted Chebyshev V_8 at x = 0.032: the formula amplifies one roundoff
            # of acos by 47, CUDA's error 9.1e-6 against 1.05e-5 allowed, CPU's a lucky
            # 1.8e-6). Not a bug of the target; where CPU is far worse, still CPU's (below).
            return "within-tolerance", numbers
        if nf_d > nf_c or (nf_d and nf_d == nf_c):
            return "dut-wrong", numbers
        if err_d > MULTIPLIER * err_c + slack:
            return "dut-wrong", numbers
        if cpu_worse:
            return "cpu-wrong", numbers
        return "both-close", numbers


def judge_leaf(dut: torch.Tensor, cpu: torch.Tensor, exact: torch.Tensor, atol: float, *,
               ballot: dict | None = None, **evidence) -> tuple[str, dict]:
    """``DisputedLeaf(dut, cpu, exact, atol, **evidence).judge(ballot)``."""
    return DisputedLeaf(dut, cpu, exact, atol, **evidence).judge(ballot)
