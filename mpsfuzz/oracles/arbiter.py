"""``arbiter``: when the DUT and CPU disagree in a floating dtype, decide who is wrong
by computing the op in float64/complex128 on the CPU.

The rule is the one torch.compile's accuracy checks use: a result is acceptable when its
error against the float64 result is within ``MULTIPLIER`` times the other side's error
(plus a tenth of the dtype's atol). Errors are root-mean-square over positions finite on
all three; a side whose non-finite positions (NaN, inf, and their signs) disagree with
float64's at more positions than the other side's is the worse one. The float64 result is
first rounded to the output dtype, so overflow to inf in that dtype counts as correct.
Two bounds from :mod:`.accuracy` come first: a half-precision result within what
accumulating its summands may cost is not wrong (``within-bound``), nor is one within
the dtype's tolerance of float64 where CPU is merely closer (``within-tolerance``); where the inputs
hold non-finite values or extremes, differences that overflowing intermediates explain
are not held against either side (``overflow``); a finite wrong value where float64 and
CPU agree still is.

Verdicts: the DUT is wrong (the finding stands, with the errors attached); the CPU is
wrong (re-attributed: a finding of the ``arbiter`` oracle that blames CPU, kept apart
from target bugs); both are as close, within the bound, or overflow (dismissed). For the
DUT-alone oracles (``layout``, ``variants``) the "CPU" side is the other form on the DUT:
either one being worse is the target's bug.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from . import Failure, oracle
from ..execution.observation import Observation, Raised
from ..generation import dtypes as dt
from ..generation.dtypes import name_of
from ..generation.opspec import LARGE_REAL_NUMEL
from ..generation.recipes import NONFINITE_SPECIALS, Case, DtypeArg
from .accuracy import LOW_PRECISION, OVERFLOWING_SPECIALS, accumulation_bound, overflow_possible, summands
from .grads import BACKWARD_SCALE
from .meta_shapes import shape_note, shape_verdict
from .intermediate_moves import moved_intermediates
from .narrow_reference import narrow_per_kernel
from .values import compare_outputs, compare_tensors, dut_alone_scale, flatten_outputs, leaf_tolerance

MULTIPLIER = 2.0
ARBITRATED = {("values", "wrong-values"), ("grads", "wrong-values"), ("layout", "layout-wrong-values"),
              ("variants", "variant-wrong-values")}


def _wide(dtype: torch.dtype) -> torch.dtype:
    if dtype.is_complex:
        return torch.complex128
    if dtype.is_floating_point:
        return torch.float64
    return dtype


def _dense_wide_inputs(case, perturb: int = 0, keep: tuple = (), absolute: tuple = ()) -> list[torch.Tensor]:
    """float64/complex128 copies of the case's inputs on CPU, dense and each in a storage
    of its own, so that the float64 result does not share a layout bug with CPU's (a
    float64 case would otherwise recompute CPU's own call). ``perturb`` > 0: every
    floating element moved by one unit of roundoff of its dtype, in a direction drawn
    from that seed (the conditioning check); the inputs ``keep`` names are not moved, and
    those ``absolute`` names move by a roundoff of max(|x|, 1) (``shifted-argument``)."""
    out = []
    for r, t in zip(case.inputs, case.materialize("cpu")):
        wide = t.to(_wide(t.dtype)).clone(memory_format=torch.contiguous_format)
        # A discrete input (OpSpec.discrete_inputs: a polynomial's degree, a +-1 target)
        # stays as it is: moved by a roundoff, 8.0 truncates to 7 and 1.0 is no target
        # at all, so every wrong value of these ops read as ill-conditioned (the
        # Chebyshev polynomials 1e-4 off everywhere were dismissed).
        if perturb and (t.is_floating_point() or t.is_complex()) and wide.numel() \
                and len(out) not in keep:
            # Each element moves by between half and one roundoff (continuous, so exact ties
            # (expanded inputs) are always broken), and perturbations come in antithetic
            # pairs (2k is 2k-1 reversed): a tie or a rounding step is crossed both ways.
            gen = torch.Generator().manual_seed(7919 * ((perturb + 1) // 2) + len(out))
            signs = torch.randint(0, 2, wide.shape, generator=gen, dtype=torch.int64).to(torch.float64) * 2 - 1
            signs = signs * (0.5 + 0.5 * torch.rand(wide.shape, generator=gen, dtype=torch.float64))
            if wide.is_complex():
                # a roundoff of a complex value is a disk: its phase moves too
                turn = torch.rand(wide.shape, generator=gen, dtype=torch.float64) * (2 * math.pi)
                signs = signs * torch.polar(torch.ones_like(turn), turn)
            if perturb % 2 == 0:
                signs = -signs
            real = {torch.complex32: torch.float16, torch.complex64: torch.float32}.get(t.dtype, t.dtype)
            u = float(torch.finfo(real).eps)
            if real == torch.float64:
                # computed in float64 itself: a move under one ulp would round away
                u *= 2
            if len(out) in absolute:
                wide = wide + u * signs * wide.abs().clamp(min=1.0)
            else:
                wide = wide * (1 + u * signs)
        out.append(wide)
    return out


def _autocast_rounded(obs: Observation, inputs: list) -> list:
    """The autocast variant's kernel got its floating inputs rounded to the autocast
    dtype (the one its floating outputs came back in): float64 judges that call."""
    low = next((t.dtype for t in flatten_outputs(obs.dut) if isinstance(t, torch.Tensor)
                and t.dtype in (torch.float16, torch.bfloat16)), None)
    if low is None:
        return inputs
    return [t.to(low).to(t.dtype) if t.is_floating_point() else t for t in inputs]


def _wide_kwargs(case) -> dict:
    """The case's keyword arguments with any dtype among them widened (float64 runs)."""
    return {k: (_wide(v) if isinstance(v, torch.dtype) else v) for k, v in case.kwargs_dict().items()}


def _wide_run(obs: Observation, inputs, runner=None) -> object:
    from ..execution.executor import run_side
    case = obs.case
    kwargs = _wide_kwargs(case)
    variant = "grad" if case.variant == "grad" else "functional"
    if case.variant == "autocast":
        inputs = _autocast_rounded(obs, inputs)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # int -> float results come out in float64
    try:
        # A user's kernel: float64 is its reference's answer, never the kernel's own.
        side = run_side(obs.spec.as_reference(), Case(case.op, case.inputs, case.kwargs, variant), kwargs, "cpu",
                        inputs=inputs, runner=runner)
    finally:
        torch.set_default_dtype(previous)
    side.raw = None
    return side


def float64_side(obs: Observation):
    """The op on dense float64/complex128 copies of the inputs on the CPU (cached)."""
    if "float64" not in obs.cache:
        obs.cache["float64"] = _wide_run(obs, _dense_wide_inputs(obs.case))
    return obs.cache["float64"]


PERTURBATIONS = 4  # two antithetic pairs


def perturbed_sides(obs: Observation) -> list:
    """The float64 op on inputs moved by one unit of roundoff (two seeded directions),
    cached; a run that raises is left out. Where these disagree with the float64 result
    by more than the tolerance, the result is not determined by the inputs to within
    the tolerance (a rounding discontinuity, a tie, a rank-deficient decomposition)."""
    absolute = (0,) if "shifted-argument" in obs.spec.semantics else ()
    return _cached_sides(obs, "float64_perturbed", [
        lambda k=k: _wide_run(obs, _dense_wide_inputs(obs.case, perturb=k, keep=obs.spec.discrete_inputs,
                                                      absolute=absolute))
        for k in range(1, PERTURBATIONS + 1)])


def _cached_sides(obs: Observation, key: str, runs: list) -> list:
    """The sides ``runs`` (calls) give, cached in ``obs`` under ``key``; a run that
    raises is left out."""
    if key not in obs.cache:
        sides = []
        for run in runs:
            try:
                side = run()
            except Exception:
                continue
            if not isinstance(side.outputs, Raised):
                sides.append(side)
        obs.cache[key] = sides
    return obs.cache[key]


INTERMEDIATE_MOVES = 2


def _roundoff_of_case(case) -> float | None:
    """One unit of roundoff of the case's least precise floating input (float64's
    doubled, as the input check does: a move under one ulp would round away)."""
    units = []
    for r in case.inputs:
        dtype = dt.to_torch(r.dtype)
        real = {torch.complex32: torch.float16, torch.complex64: torch.float32,
                torch.complex128: torch.float64}.get(dtype, dtype)
        if real.is_floating_point:
            units.append(torch.finfo(real).eps * (2 if real == torch.float64 else 1))
    return max(units) if units else None


def intermediate_sides(obs: Observation) -> list:
    """The float64 op with every kernel's fresh floating result moved by up to one
    roundoff of the case's dtype (``intermediate_moves.py``), two seeds, cached; a run
    that raises is left out."""
    unit = _roundoff_of_case(obs.case)
    return _cached_sides(obs, "float64_intermediates", [
        lambda seed=seed: _wide_run(obs, _dense_wide_inputs(obs.case), runner=moved_intermediates(unit, seed))
        for seed in (range(1, INTERMEDIATE_MOVES + 1) if unit else ())])


# Finite stand-ins for the inputs' infinities: results that grow with them (by more than
# half the ratio of the two) have the stand-in's sign as their limit.
STAND_INS = (1e100, 1e120)


def limit_sides(obs: Observation) -> list:
    """The float64 op with every infinite input element replaced by a finite stand-in of
    its sign, one side per :data:`STAND_INS` (cached; empty where a run raises)."""
    if "float64_limits" not in obs.cache:
        sides = []
        for m in STAND_INS:
            inputs = [torch.where(torch.isinf(t), torch.sign(t) * m, t) if t.is_floating_point() else t
                      for t in _dense_wide_inputs(obs.case)]
            try:
                side = _wide_run(obs, inputs)
            except Exception:
                sides = []
                break
            if isinstance(side.outputs, Raised):
                sides = []
                break
            sides.append(side)
        obs.cache["float64_limits"] = sides
    return obs.cache["float64_limits"]


def _limit_infinity(d: torch.Tensor, limits: list) -> torch.Tensor:
    """Positions where the DUT's infinity is the op's limit as the infinite inputs grow:
    the stand-in results have its sign and grow with the stand-ins. Run 33 (H200):
    ``group_norm`` and ``instance_norm`` with an infinite weight are -inf on CUDA, which
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


def _near(x: torch.Tensor, truth: torch.Tensor, tol: torch.Tensor) -> torch.Tensor:
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
    return wrong, ~d_ok & nonfinite_any & ~wrong


def judge_leaf(dut: torch.Tensor, cpu: torch.Tensor, exact: torch.Tensor, atol: float, *, rtol: float = 0.0,
               overflow: bool = False, magnitude: torch.Tensor | None = None, summands: int = 1,
               perturbed: list | None = None, explicit_nan: bool = False, extremes: bool = False,
               whole: bool = False, terms: torch.Tensor | None = None,
               measured: bool = False, limits: list | None = None) -> tuple[str, dict]:
    """'dut-wrong', 'cpu-wrong', 'both-close', 'within-bound', 'within-tolerance',
    'overflow' or 'ill-conditioned' for one output, with the numbers.

    ``overflow``: the inputs hold non-finite values or extremes, or the terms' magnitudes
    exceed the dtype (see :mod:`.accuracy`): non-finite differences that overflowing
    intermediates explain are excused. ``perturbed``: the float64 result for inputs
    moved by one unit of roundoff; positions where it differs from float64's by more
    than the tolerance are ill-conditioned (no verdict there). Low-precision outputs are
    held to the accumulation bound for ``summands`` terms of ``magnitude``. ``whole``: the
    output is determined only as a whole (a factor of a decomposition): where float64
    leaves any of its elements undetermined (a rank-deficient input), none gets a verdict.
    ``terms``: the sum of the terms' magnitudes of each element, measured (the op in
    float64 on the inputs' absolute values), never a floor such as ``magnitude`` may be:
    where the terms of one sign alone overflow, the infinity of that sign is excused
    (see :func:`_other_infinity_reachable`). ``extremes``: the inputs hold the dtype's
    largest values and a NaN or an infinity (see :func:`_nonfinite_verdicts`).
    ``measured``: ``magnitude`` is the op's own measure of the terms (OpSpec.grad_terms),
    so the accumulation bound holds for every dtype, float64 included. ``limits``: the
    float64 results with the infinite inputs replaced by growing finite stand-ins (see
    :func:`_limit_infinity`)."""
    wide = torch.complex128 if cpu.is_complex() else torch.float64
    truth = exact.to(cpu.dtype).to(wide).reshape(-1)  # rounded to the output dtype
    d, c = dut.to(wide).reshape(-1), cpu.to(wide).reshape(-1)
    independent = cpu.dtype not in (torch.float64, torch.complex128)
    low = cpu.dtype in LOW_PRECISION
    # The terms' magnitudes bound any dtype's accumulation: a float32 sum of [max, lowest,
    # -2] is 0 or -2 depending on the order, both correct to u * sum|terms|.
    bounded = low or (magnitude is not None and (independent or measured))
    tol = atol + rtol * truth.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0)
    if bounded:
        mag = None if magnitude is None else magnitude.to(wide).reshape(-1)
        accumulated = accumulation_bound(truth, mag, summands, cpu.dtype, atol)
        tol = accumulated if low else torch.maximum(tol, accumulated)
    d_ok = _near(d, truth, tol)
    mismatch = ~_near(d, c, tol)
    numbers: dict = {"summands": summands} if bounded else {}
    excused = torch.zeros_like(mismatch)
    # the float64 results for the moved inputs, rounded to the output dtype
    moved = [p.to(cpu.dtype).to(wide).reshape(-1) for p in perturbed] if perturbed else []
    factor = MULTIPLIER * (2 + summands)
    if moved:
        ill = _ill_conditioned(d, truth, tol, moved, factor=factor)
        if whole and bool(_undetermined(truth, tol, moved).any()):
            # One free direction (a second column of an LU or QR of a rank-1 matrix)
            # makes every element that depends on it arbitrary, determined or not.
            ill = torch.ones_like(mismatch)
            numbers["undetermined_factor"] = True
        excused |= mismatch & ill & ~d_ok
        numbers["ill_conditioned_positions"] = int((mismatch & ill & ~d_ok).sum())
    wrong_nf = torch.zeros_like(mismatch)
    if overflow:
        wrong_nf, overflowed = _nonfinite_verdicts(
            d, c, truth, d_ok, independent=independent, explicit_nan=explicit_nan,
            reachable=_other_infinity_reachable(d, exact, terms, cpu.dtype), extremes=extremes,
            limit=_limit_infinity(d, limits) if limits else None)
        wrong_nf &= mismatch & ~excused
        excused |= mismatch & overflowed & ~wrong_nf
        numbers.update(overflow_rule=True, target_wrong_positions=int(wrong_nf.sum()),
                       excused_positions=int((mismatch & overflowed & ~wrong_nf).sum()))
    judged = mismatch & ~excused
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
        return ("overflow" if overflow else "both-close"), numbers
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
        c_misses = judged & ~_near(c, truth, tol)
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


def _abs_float64_outputs(obs: Observation, *, floor: float | None = None, grads: bool = False):
    """The op in float64 on the inputs' absolute values (cached): the magnitude of the
    terms a sum-like op accumulates. With ``floor``, magnitudes below it are raised to it
    (1: a product's partial products, whatever zeros it meets later). With ``grads``, the
    gradients of that call against the absolute upstream gradient: for an op linear in
    each input (a convolution, a matmul), each element is the sum of its terms'
    magnitudes. None where that call fails or is meaningless."""
    key = ("float64_abs_grads" if grads else "float64_abs") + ("" if floor is None else f"_floor{floor:g}")
    if key in obs.cache:
        return obs.cache[key]
    if grads and obs.spec.grad_terms is not None:
        obs.cache[key] = _measured_grad_terms(obs)
        return obs.cache[key]
    from ..execution.executor import run_side
    result = None
    case = obs.case
    try:
        inputs = [t.to(_wide(t.dtype)).abs() if (t.is_floating_point() or t.is_complex()) else t
                  for t in case.materialize("cpu")]
        if floor is not None:
            inputs = [t.clamp(min=floor) if t.is_floating_point() else t for t in inputs]
        if all(t.dtype == _wide(t.dtype) or not (t.is_floating_point() or t.is_complex()) for t in inputs):
            kwargs = _wide_kwargs(case)
            variant = "grad" if grads else "functional"
            side = run_side(obs.spec.as_reference(), Case(case.op, case.inputs, case.kwargs, variant), kwargs, "cpu",
                            inputs=inputs, upstream=torch.abs if grads else None)
            side.raw = None
            if not isinstance(side.outputs, Raised):
                result = side.grads if grads else flatten_outputs(side.outputs)
    except Exception:  # best effort: the result's own magnitude is the floor
        result = None
    obs.cache[key] = result
    return result


def _measured_grad_terms(obs: Observation) -> list | None:
    """The op's own measure of its gradient terms (OpSpec.grad_terms) in float64, per
    differentiated input; None where it fails."""
    from ..execution.executor import grad_inputs, upstream_gradient
    case = obs.case
    try:
        wide = _dense_wide_inputs(case)
        wrt = grad_inputs(obs.spec, wide)
        kwargs = _wide_kwargs(case)
        with torch.no_grad():
            out = [o for o in flatten_outputs(obs.spec.fn(*wide, **kwargs))
                   if isinstance(o, torch.Tensor) and o.is_floating_point()]
            if not out:
                return None
            seed = case.inputs[0].values.seed if case.inputs else 0
            terms = obs.spec.grad_terms(wide, kwargs, upstream_gradient(out[0].shape, torch.float64, 0, seed))
        return [terms[i] if i < len(terms) else None for i in wrt]
    except Exception:  # best effort: the leaf's own magnitude stays the floor
        return None


def _terms_overflow(magnitude: torch.Tensor | None, dtype: torch.dtype) -> bool:
    """Whether the terms a sum- or product-like op combines exceed ``dtype`` (the op in
    float64 on the inputs' absolute values is beyond its range): intermediates may overflow."""
    if magnitude is None or not (dtype.is_floating_point or dtype.is_complex):
        return False
    real = {torch.complex32: torch.float16, torch.complex64: torch.float32,
            torch.complex128: torch.float64}.get(dtype, dtype)
    m = magnitude.abs().to(torch.float64)
    return bool((~torch.isfinite(m) | (m > float(torch.finfo(real).max))).any())


def _terms_up_to_leaf_max(exact: torch.Tensor, n: int, forward_numel: int) -> tuple[torch.Tensor, int]:
    """(magnitude, summands) of a half-precision leaf whose terms are not known (a
    gradient; an op of unknown structure, with ``forward_numel`` 0). A gradient element sums a term
    from every output element it feeds (backward kernels accumulate, often with atomics),
    so at least ceil(outputs / leaf elements) terms, each up to the leaf's largest
    magnitude (a floor: the terms' own magnitudes are not known)."""
    wide = exact.to(torch.complex128 if exact.is_complex() else torch.float64).abs()
    finite = wide[torch.isfinite(wide)]
    top = float(finite.max()) if finite.numel() else 0.0
    n = max(n, -(-forward_numel // max(1, exact.numel())))
    return torch.full(exact.shape, top, dtype=torch.float64), max(1, n)


def _held_nonfinite(case) -> set[str]:
    """Which of "nan" and "inf" the case's inputs (as materialised) hold."""
    held = set()
    if not any(name in NONFINITE_SPECIALS for r in case.inputs for _, name in r.values.specials):
        return held
    for t in case.materialize("cpu"):
        if not (t.is_floating_point() or t.is_complex()) or not t.numel():
            continue
        if bool(torch.isnan(t).any()):
            held.add("nan")
        if bool(torch.isinf(t).any()):
            held.add("inf")
    return held


def verdict(obs: Observation, failure: Failure) -> tuple[str, dict]:
    """Arbitrate every mismatching floating output of the failure's comparison."""
    side = float64_side(obs)
    if isinstance(side.outputs, Raised):
        return "undecided", {"reason": f"float64 run raised {side.outputs.type}"}
    scale = 1.0
    grads = failure.oracle == "grads"
    if grads:
        dut, cpu, exact = obs.dut_side.grads, obs.ref_side.grads, side.grads
        scale = BACKWARD_SCALE
    elif failure.oracle == "layout":  # awkward vs contiguous, both on the DUT
        dut, cpu, exact = obs.dut, obs.dut_contiguous.outputs, side.outputs
        scale = dut_alone_scale(obs.spec)
    elif failure.oracle == "variants":  # the variant vs the functional form, both on the DUT
        dut, cpu, exact = obs.dut, obs.dut_functional.outputs, side.outputs
        scale = dut_alone_scale(obs.spec)
    elif failure.oracle == "errors":  # CPU raised: float64, rounded, stands in for it
        dut, exact = obs.dut, side.outputs
        cpu = tuple(e.to(d.dtype) if isinstance(e, torch.Tensor) and isinstance(d, torch.Tensor) else e
                    for e, d in zip(flatten_outputs(exact), flatten_outputs(dut)))
    else:
        dut, cpu, exact = obs.dut, obs.ref, side.outputs
    if dut is None or cpu is None or exact is None:
        return "undecided", {"reason": "no float64 result to compare with"}
    dut, cpu, exact = flatten_outputs(dut), flatten_outputs(cpu), flatten_outputs(exact)
    if not (len(dut) == len(cpu) == len(exact)):
        return "undecided", {"reason": "float64 result has a different structure"}
    specials = overflow_possible(obs.case)
    # What the inputs hold, read from their values: a special drawn into a gap, or under
    # another special, is not in the tensor (an H100 bilinear whose "nan" was nowhere in
    # its inputs was held to CPU's NaN from inf - inf).
    held = _held_nonfinite(obs.case)
    explicit_nan = "nan" in held
    extremes = bool(held) and any(name in OVERFLOWING_SPECIALS for r in obs.case.inputs
                                  for _, name in r.values.specials)
    shapes = [r.shape for r in obs.case.inputs]
    # Only where each output element combines several terms do their number and
    # magnitudes matter (exp(|x|) says nothing about exp(x)).
    accumulates = bool({"accumulates", "order-dependent"} & set(obs.spec.semantics))
    # An op of unknown structure may accumulate: the estimated number of terms, with the
    # result's own magnitude (no run on |inputs|: for a non-linear op it means nothing).
    unknown_structure = "structure-unknown" in obs.spec.semantics
    whole = "determined-as-a-whole" in obs.spec.semantics
    magnitudes = (_abs_float64_outputs(obs) or []) if accumulates and not grads else None
    # How large the partial sums and products may grow: magnitudes floored at 1, so that a
    # zero met late does not hide the overflow before it.
    growth = (_abs_float64_outputs(obs, floor=1.0) or []) if accumulates and not grads else None
    # The terms' magnitudes of a gradient, measured: the backward on |inputs| against the
    # absolute upstream gradient (the leaf bound below is only a floor).
    grad_terms = (_abs_float64_outputs(obs, grads=True) or []) if accumulates and grads else None
    forward_numel = sum(o.numel() for o in flatten_outputs(obs.ref)
                        if isinstance(o, torch.Tensor)) if grads and not isinstance(obs.ref, Raised) else 0
    perturbed = None
    intermediates: list = []
    verdicts = []
    for i, (d, c, e) in enumerate(zip(dut, cpu, exact)):
        if d is None or c is None or e is None or d.shape != c.shape or d.shape != e.shape:
            continue
        if not (c.is_floating_point() or c.is_complex()):
            continue
        rtol, atol = leaf_tolerance(obs.spec, name_of(c.dtype), scale=scale,
                                    widened=obs.ref_widened and failure.oracle == "values")
        if compare_tensors(d, c, rtol, atol) is None:
            continue
        magnitude = None
        if magnitudes and i < len(magnitudes) and isinstance(magnitudes[i], torch.Tensor) \
                and magnitudes[i].shape == c.shape:
            magnitude = magnitudes[i]
        terms = magnitude
        if grad_terms and i < len(grad_terms) and isinstance(grad_terms[i], torch.Tensor) \
                and grad_terms[i].shape == c.shape:
            terms = grad_terms[i]
        n = summands(shapes, c.numel()) if accumulates or unknown_structure else 1
        # The op measures its gradient's terms itself (attention): a bound for every dtype,
        # float64 too (its result is CPU's own, but a backward that cancels terms of 2e10
        # is only good to their roundoff on any backend).
        measured = grads and obs.spec.grad_terms is not None and terms is not None
        if grads and c.dtype in LOW_PRECISION:
            magnitude, n = _terms_up_to_leaf_max(e, n, forward_numel)
            if measured:
                magnitude = torch.maximum(magnitude, terms.to(torch.float64).abs())
        elif measured:
            magnitude = terms
        elif unknown_structure and magnitude is None and c.dtype in LOW_PRECISION:
            # terms of unknown size: as large as the leaf's largest element (a floor)
            magnitude, _ = _terms_up_to_leaf_max(e, n, 0)
        if perturbed is None:
            perturbed = [flatten_outputs(p.grads if grads else p.outputs) for p in perturbed_sides(obs)]
            intermediates = [flatten_outputs(p.grads if grads else p.outputs) for p in intermediate_sides(obs)]
        leaf_perturbed = [p[i] for p in perturbed if i < len(p) and isinstance(p[i], torch.Tensor)]
        # An intermediate moved off a domain's edge (acos of 1 + u) is NaN: no information.
        leaf_perturbed += [torch.where(torch.isfinite(p[i]) | ~torch.isfinite(e), p[i], e) for p in intermediates
                           if i < len(p) and isinstance(p[i], torch.Tensor) and p[i].shape == e.shape]
        grown = growth[i] if growth and i < len(growth) and isinstance(growth[i], torch.Tensor) else None
        leaf_limits = None
        if "inf" in held and not explicit_nan and not d.is_complex() \
                and bool((torch.isinf(d) & torch.isnan(e.to(d.dtype))).any()):
            sides = [flatten_outputs(p.grads if grads else p.outputs) for p in limit_sides(obs)]
            leaf_limits = [p[i] for p in sides if i < len(p) and isinstance(p[i], torch.Tensor)
                           and p[i].shape == c.shape] or None
            if leaf_limits is not None and len(leaf_limits) != len(STAND_INS):
                leaf_limits = None
        verdicts.append(judge_leaf(d, c, e, atol, rtol=rtol,
                                   overflow=specials or _terms_overflow(grown, c.dtype),
                                   magnitude=magnitude,
                                   summands=n,
                                   perturbed=leaf_perturbed,
                                   explicit_nan=explicit_nan, extremes=extremes, whole=whole, terms=terms,
                                   measured=measured, limits=leaf_limits))
    if not verdicts:
        return "undecided", {"reason": "no floating output to arbitrate"}
    for wanted in ("dut-wrong", "cpu-wrong"):
        for v, numbers in verdicts:
            if v == wanted:
                return v, numbers
    return verdicts[0]


def _numbers_line(numbers: dict) -> str:
    if "reason" in numbers:
        return numbers["reason"]
    line = (f"RMS error vs float64: target {numbers['target_error']:.3g}, CPU {numbers['cpu_error']:.3g}; "
            f"non-finite disagreements: target {numbers['target_nonfinite_wrong']}, CPU {numbers['cpu_nonfinite_wrong']}")
    if numbers.get("overflow_rule"):
        line += (f"; inputs hold non-finite values or extremes: {numbers['target_wrong_positions']} position(s) "
                 f"wrong beyond overflow, {numbers['excused_positions']} excused as intermediate overflow")
    if "summands" in numbers:
        line += f"; accumulation bound for {numbers['summands']} summand(s)"
    if numbers.get("ill_conditioned_positions"):
        line += (f"; {numbers['ill_conditioned_positions']} position(s) ill-conditioned (float64 moves past "
                 "the tolerance when the inputs move by one unit of roundoff)")
    return line


# Verdicts that dismiss a failure: neither side is worse than the other (both-close), the
# target is within what half-precision accumulation may cost (within-bound) or within
# the tolerance of float64 (within-tolerance), the only differences come from
# overflowing intermediates (overflow), or the result is not determined by the inputs to
# within the tolerance where they differ (ill-conditioned).
DISMISSED = ("both-close", "within-bound", "within-tolerance", "overflow", "ill-conditioned")


@oracle("arbiter", stage="verdict",
        doc="float64 decides numeric mismatches (the meta kernel, shape mismatches): target wrong, "
            "CPU wrong (own category), or both close")
def arbitrate(obs: Observation, failure: Failure) -> Failure | None:
    if (failure.oracle, failure.kind) == ("metadata", "wrong-shape"):
        return _arbitrate_shape(obs, failure)
    if (failure.oracle, failure.kind) not in ARBITRATED:
        return failure
    if "large" in obs.spec.semantics and any(r.numel > LARGE_REAL_NUMEL for r in obs.case.inputs):
        # The reference of a stride-0 input of billions of elements is its analytic value
        # (exact), and a float64 copy of the input would be dense. (A real batch of at
        # most LARGE_REAL_NUMEL elements is arbitrated as any reduction is.)
        return replace(failure, message=failure.message + "\nfloat64 arbiter: not needed (the reference is exact)",
                       details=dict(failure.details, verdict="reference-exact"))
    try:
        result, numbers = verdict(obs, failure)
    except Exception as exc:  # the float64 run is best effort: keep the finding as it is
        result, numbers = "undecided", {"reason": f"arbiter failed: {type(exc).__name__}"}
    note = f"\nfloat64 arbiter: {result} ({_numbers_line(numbers)})"
    details = dict(failure.details, verdict=result, arbiter=numbers)
    if result in DISMISSED:
        return None
    if failure.oracle == "layout":
        # Either layout being the less accurate one is a layout bug of the target.
        return replace(failure, message=failure.message + note.replace("dut-wrong", "non-contiguous worse")
                       .replace("cpu-wrong", "contiguous worse"), details=details)
    if failure.oracle == "variants":
        # Either form being the less accurate one is a bug of the target.
        return replace(failure, message=failure.message + note.replace("dut-wrong", f"{obs.case.variant} worse")
                       .replace("cpu-wrong", "functional worse"), details=details)
    if result == "cpu-wrong":
        return Failure(oracle="arbiter", kind="cpu-wrong", severity="low", blame="cpu",
                       title=f"CPU `{obs.spec.name}` is less accurate than {obs.target_name} (float64 arbiter)",
                       message=failure.message + note, dedup_key=("cpu-wrong", failure.oracle),
                       details=details)
    if result == "dut-wrong" and failure.oracle in ("values", "grads") and _half_per_kernel_agrees(obs, failure):
        return None
    if result == "dut-wrong" and failure.oracle == "values" and _cpu_copies_agree(obs):
        return Failure(oracle="arbiter", kind="cpu-layout", severity="low", blame="cpu",
                       title=f"CPU `{obs.spec.name}` gives another result for non-contiguous inputs than for "
                             f"contiguous copies ({obs.target_name} agrees with the copies)",
                       message=failure.message + note + "\neager CPU on contiguous copies of the inputs gives "
                               f"{obs.target_name}'s result: the difference is CPU's layout-dependence",
                       dedup_key=("cpu-layout", failure.oracle), details=dict(details, verdict="cpu-layout"))
    return replace(failure, message=failure.message + note, details=details)


def _half_per_kernel_agrees(obs: Observation, failure: Failure) -> bool:
    """Where CPU lacked a half kernel (the reference ran in float32), the target agrees
    with the op in half arithmetic kernel by kernel (narrow_reference.py): it does what
    the op's own decomposition does in that dtype."""
    from ..execution.executor import run_side
    if not obs.ref_widened or obs.case.variant not in ("functional", "method", "grad") \
            or not any(r.dtype in ("float16", "bfloat16") for r in obs.case.inputs):
        return False
    try:
        side = run_side(obs.spec.as_reference(), obs.case, obs.case.kwargs_dict(), "cpu", runner=narrow_per_kernel)
    except Exception:
        return False
    if isinstance(side.outputs, Raised):
        return False
    if failure.oracle == "grads":
        dut = obs.dut_side.grads
        return dut is not None and side.grads is not None and len(dut) == len(side.grads) and compare_outputs(
            tuple(dut), tuple(side.grads), obs.spec, widened=True, scale=BACKWARD_SCALE) is None
    return compare_outputs(obs.dut, side.outputs, obs.spec, widened=True) is None


def _cpu_copies_agree(obs: Observation) -> bool:
    """Eager CPU on contiguous copies of non-contiguous inputs returns the target's
    result. Run 32 (H200): ``batch_norm`` in training of a gapped [max, -4] is 0 on
    CUDA and on CPU's contiguous kernel (the float32 variance overflows) and ±1 on CPU's
    strided one; the repro, whose ``x.cpu()`` is dense, could not show a bug. The target
    then agrees with CPU's own kernel on the same values: CPU's two paths differ, and
    that is CPU's to answer for."""
    from ..execution.executor import contiguous_copies, run_side
    case = obs.case
    if case.variant not in ("functional", "out") or all(r.layout.is_plain() for r in case.inputs):
        return False
    side = run_side(obs.spec.as_reference(), case, case.kwargs_dict(), "cpu", inputs=contiguous_copies(case, "cpu"))
    if isinstance(side.outputs, Raised):
        return False
    return compare_outputs(obs.dut, side.outputs, obs.spec, widened=obs.ref_widened) is None


def _arbitrate_shape(obs: Observation, failure: Failure) -> Failure:
    """A shape mismatch, decided by the meta kernel (meta_shapes.py): where it sides with
    the target, the finding is CPU's, kept apart from target bugs as the float64 arbiter's are."""
    try:
        result, numbers = shape_verdict(obs)
    except Exception as exc:  # best effort: keep the finding as it is
        result, numbers = "undecided", {"reason": f"meta check failed: {type(exc).__name__}"}
    note = shape_note(result, numbers, obs.target_name)
    details = dict(failure.details, verdict=result, arbiter=numbers)
    if result == "cpu-wrong":
        return Failure(oracle="arbiter", kind="cpu-wrong", severity="low", blame="cpu",
                       title=f"CPU `{obs.spec.name}` returns a wrongly shaped result (the meta kernel sides with "
                             f"{obs.target_name})",
                       message=failure.message + note, dedup_key=("cpu-wrong", failure.oracle), details=details)
    return replace(failure, message=failure.message + note, details=details)
