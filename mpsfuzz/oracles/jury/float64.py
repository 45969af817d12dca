"""The float64 juror: the op in float64/complex128 on the CPU, on dense copies of the
inputs, and the rules that say whether a disagreement between the DUT and CPU is one at
all. It runs eager CPU's own kernels, so it is no independent witness (an eager CPU bug
is there in float64 too): it dismisses what rounding explains and gives its opinion;
who is wrong is the jury's to decide (``jury/__init__.py``).

The rule is the one torch.compile's accuracy checks use: a result is acceptable when its
error against the float64 result is within ``MULTIPLIER`` times the other side's error
(plus a tenth of the dtype's atol). Errors are root-mean-square over positions finite on
all three; a side whose non-finite positions (NaN, inf, and their signs) disagree with
float64's at more positions than the other side's is the worse one. The float64 result is
first rounded to the output dtype, so overflow to inf in that dtype counts as correct.
Two bounds from :mod:`..accuracy` come first: a half-precision result within what
accumulating its summands may cost is not wrong (``within-bound``), nor is one within
the dtype's tolerance of float64 where CPU is merely closer (``within-tolerance``); where the inputs
hold non-finite values or extremes, differences that overflowing intermediates explain
are not held against either side (``overflow``); a finite wrong value where float64 and
CPU agree still is. These rules judge one output leaf at a time: ``leaf.py``
(:class:`~.leaf.DisputedLeaf`, built here with the evidence gathered for it).

Opinions: the DUT is wrong (``dut-wrong``), the CPU is (``cpu-wrong``), or the
disagreement is dismissed (:data:`DISMISSED`). For the DUT-alone oracles (``layout``,
``variants``) the "CPU" side is the other form on the DUT: either one being worse is the
target's bug, and float64 decides only whether the difference is one. Each disputed
output leaf leaves a *ballot* in ``obs.cache["ballots"]`` (the positions still in
dispute and their tolerance) for the jury's independent references.
"""
from __future__ import annotations

import math

import torch

from ...execution.dispatch_modes import DenseHigherOrderOps
from .. import Failure
from ...execution.observation import Observation, Raised
from ...generation import dtypes as dt
from ...generation.dtypes import name_of
from ...generation.recipes import NONFINITE_SPECIALS, Case
from ..conversions import excuse_undefined
from ..accuracy import LOW_PRECISION, OVERFLOWING_SPECIALS, overflow_possible, summands
from ..grads import BACKWARD_SCALE
from ..intermediate_moves import moved_intermediates, moving_mode
# (judge_leaf and near: re-exported, the ballots and tests read them here)
from .leaf import STAND_INS, DisputedLeaf, judge_leaf, near  # noqa: F401
from ..values import (compare_outputs, compare_tensors, dut_alone_scale, excuse_multiplied_zero_taps,
                      excuse_skipped_zero_taps, excuse_zero_taps_either_way, flatten_outputs, leaf_tolerance)

ARBITRATED = {("values", "wrong-values"), ("grads", "wrong-values"), ("layout", "layout-wrong-values"),
              ("variants", "variant-wrong-values")}


def _wide(dtype: torch.dtype) -> torch.dtype:
    if dtype.is_complex:
        return torch.complex128
    if dtype.is_floating_point:
        return torch.float64
    return dtype


def dense_wide_inputs(case, perturb: int = 0, keep: tuple = (), absolute: tuple = ()) -> list[torch.Tensor]:
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


def wide_kwargs(case) -> dict:
    """The case's keyword arguments with any dtype among them widened (float64 runs)."""
    return {k: (_wide(v) if isinstance(v, torch.dtype) else v) for k, v in case.kwargs_dict().items()}


def wide_run(obs: Observation, inputs, runner=None, fn=None) -> object:
    """The case's call (functional, or the grad variant) in float64 on ``inputs``, on the
    CPU: the op's own function, or ``fn`` in its place (an independent reference called
    the same way, its gradients taken the same way)."""
    from dataclasses import replace

    from ...execution.executor import run_side
    case = obs.case
    kwargs = wide_kwargs(case)
    variant = "grad" if case.variant == "grad" else "functional"
    if case.variant == "autocast":
        inputs = _autocast_rounded(obs, inputs)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # int -> float results come out in float64
    try:
        # A user's kernel: float64 is its reference's answer, never the kernel's own.
        spec = obs.spec.as_reference() if fn is None else replace(obs.spec, fn=fn, reference_fn=None)
        side = run_side(spec, Case(case.op, case.inputs, case.kwargs, variant), kwargs, "cpu",
                        inputs=inputs, runner=runner)
    finally:
        torch.set_default_dtype(previous)
    side.raw = None
    return side


def float64_side(obs: Observation):
    """The op on dense float64/complex128 copies of the inputs on the CPU (cached)."""
    if "float64" not in obs.cache:
        obs.cache["float64"] = wide_run(obs, dense_wide_inputs(obs.case))
    return obs.cache["float64"]


PERTURBATIONS = 4  # two antithetic pairs


def perturbed_sides(obs: Observation) -> list:
    """The float64 op on inputs moved by one unit of roundoff (two seeded directions),
    cached; a run that raises is left out. Where these disagree with the float64 result
    by more than the tolerance, the result is not determined by the inputs to within
    the tolerance (a rounding discontinuity, a tie, a rank-deficient decomposition)."""
    absolute = (0,) if "shifted-argument" in obs.spec.semantics else ()
    return _cached_sides(obs, "float64_perturbed", [
        lambda k=k: wide_run(obs, dense_wide_inputs(obs.case, perturb=k, keep=obs.spec.discrete_inputs,
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


def intermediate_leaves(obs: Observation, grads: bool) -> list:
    """The float64 op's leaves (outputs, or gradients) with every kernel's fresh floating
    result moved by up to one roundoff of the case's dtype (``intermediate_moves.py``),
    two seeds, cached. The decomposed op where torch can trace it, so that a fused
    kernel's own intermediates move too (issue 30, H200: float16 group_norm 3 ulps off
    float64 on groups of two, the rounding of a mean and a variance that
    ``native_group_norm`` keeps inside); else eager CPU's kernels. A run that raises is
    left out."""
    from .tracing import decomposed_leaves
    key = ("float64_intermediates", grads)
    if key not in obs.cache:
        unit = _roundoff_of_case(obs.case)
        out = []
        # The decomposition moves by rounding alone measured against itself unmoved, and
        # laid on float64's result: the decomposition and eager CPU's kernel may differ
        # by more (a CPU kernel bug), which is no sensitivity to rounding.
        base = decomposed_leaves(obs, grads) if unit else "no unit"
        side = float64_side(obs)
        truth = None if isinstance(side.outputs, Raised) else (
            (side.grads or []) if grads else flatten_outputs(side.outputs))
        for seed in (range(1, INTERMEDIATE_MOVES + 1) if unit else ()):
            leaves = decomposed_leaves(obs, grads, moving_mode(unit, seed)) if not isinstance(base, str) else base
            if not isinstance(leaves, str) and truth is not None:
                # (A leaf without a gradient, a running mean's, is None on every side; a
                # bool or integer leaf, a mask or an index, does not move by rounding.)
                leaves = [_laid_on(t, m, b) if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
                          and all(isinstance(v, torch.Tensor) and v.shape == t.shape for v in (m, b))
                          else m for t, m, b in zip(truth, leaves, base)]
            if isinstance(leaves, str):
                try:
                    side = wide_run(obs, dense_wide_inputs(obs.case), runner=moved_intermediates(unit, seed))
                except Exception:
                    continue
                if isinstance(side.outputs, Raised):
                    continue
                leaves = (side.grads or []) if grads else flatten_outputs(side.outputs)
            out.append(leaves)
        obs.cache[key] = out
    return obs.cache[key]


def _laid_on(truth: torch.Tensor, moved: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    """``truth`` moved as the decomposition moved from ``base`` to ``moved``; where it did
    not move, ``truth`` itself (an infinite element unmoved is no -inf - -inf = NaN: a
    max pooling window of -inf was called ill-conditioned, issue 37)."""
    return torch.where(moved == base, truth, truth + (moved - base))


def limit_sides(obs: Observation) -> list:
    """The float64 op with every infinite input element replaced by a finite stand-in of
    its sign, one side per :data:`STAND_INS` (cached; empty where a run raises)."""
    if "float64_limits" not in obs.cache:
        sides = []
        for m in STAND_INS:
            inputs = [torch.where(torch.isinf(t), torch.sign(t) * m, t) if t.is_floating_point() else t
                      for t in dense_wide_inputs(obs.case)]
            try:
                side = wide_run(obs, inputs)
            except Exception:
                sides = []
                break
            if isinstance(side.outputs, Raised):
                sides = []
                break
            sides.append(side)
        obs.cache["float64_limits"] = sides
    return obs.cache["float64_limits"]


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
    from ...execution.executor import run_side
    result = None
    case = obs.case
    try:
        inputs = [t.to(_wide(t.dtype)).abs() if (t.is_floating_point() or t.is_complex()) else t
                  for t in case.materialize("cpu")]
        if floor is not None:
            inputs = [t.clamp(min=floor) if t.is_floating_point() else t for t in inputs]
        if all(t.dtype == _wide(t.dtype) or not (t.is_floating_point() or t.is_complex()) for t in inputs):
            kwargs = wide_kwargs(case)
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
    from ...execution.executor import grad_inputs, upstream_gradient
    case = obs.case
    try:
        wide = dense_wide_inputs(case)
        wrt = grad_inputs(obs.spec, wide)
        kwargs = wide_kwargs(case)
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


# Roundoffs a computed weight may carry (a cubic filter evaluated near its root in its
# working precision: terms of about 4 cancel), times the largest input.
WEIGHT_ROUNDOFFS = 64


def computed_weights_slack(obs: Observation, dtype: torch.dtype) -> float:
    """The absolute error any output of a ``computed-weights`` op may carry where the
    inputs hold the dtype's extremes: WEIGHT_ROUNDOFFS roundoffs of the weights'
    working precision (float32's for half and float32 inputs, float64's for float64)
    times the largest finite input magnitude; 0 elsewhere (ordinary values keep the
    dtype's tolerance)."""
    case = obs.case
    if "computed-weights" not in obs.spec.semantics or not any(
            name in OVERFLOWING_SPECIALS for r in case.inputs for _, name in r.values.specials):
        return 0.0
    top = 0.0
    for t in case.materialize("cpu"):
        if (t.is_floating_point() or t.is_complex()) and t.numel():
            a = t.detach().abs().to(torch.float64)
            finite = a[torch.isfinite(a)]
            if finite.numel():
                top = max(top, float(finite.max()))
    working = torch.float64 if dtype in (torch.float64, torch.complex128) else torch.float32
    return WEIGHT_ROUNDOFFS * float(torch.finfo(working).eps) * top


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


class _RangeRecorder(DenseHigherOrderOps):
    """The largest finite magnitude any kernel's floating result reaches, and whether
    one came out non-finite."""

    def __init__(self):
        super().__init__()
        self.top = 0.0
        self.nonfinite = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in flatten_outputs(out):
            if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) and t.numel():
                a = t.detach().abs()
                finite = torch.isfinite(a)
                if bool(finite.any()):
                    self.top = max(self.top, float(a[finite].max()))
                self.nonfinite |= not bool(finite.all())
        return out


def _watched_run(obs: Observation, grads: bool):
    """The op's forward (with ``grads``, its backward too) in float64 with every kernel's
    result watched (a :class:`_RangeRecorder`), decomposed where torch can (a fused
    kernel such as ``native_batch_norm`` keeps its variance to itself), else as eager CPU
    runs it; None where neither runs."""
    from .tracing import decomposed_leaves
    recorder = _RangeRecorder()
    if not isinstance(decomposed_leaves(obs, grads, recorder), str):
        return recorder
    recorder = _RangeRecorder()
    try:
        wide_run(obs, dense_wide_inputs(obs.case), runner=_under(recorder))
    except Exception:  # best effort: no rule
        return None
    return recorder


def _under(mode):
    """A runner (``run_side``'s) that runs the call inside ``mode``."""
    def run(fn, *args, **kwargs):
        with mode:
            return fn(*args, **kwargs)
    return run


# Input values that can take an intermediate past the dtype's range: its extremes, and a
# subnormal, whose reciprocal overflows (issue 30, H200: CUDA's addcdiv(4, 4, 2.9e-39,
# value=0) divides first, 4 / 2.9e-39 is inf in float32 and 0 x inf NaN; CPU multiplies
# by value first and returns 4), the smallest normal and eps, whose reciprocal's square
# does (issue 37, H200: the backward of a float16 vector_norm(dtype=float32, ord=3) of eps
# scales by g / |x|^2 = 8.2e5, a float32 factor CUDA casts to float16, inf). A
# flush-to-zero bug still shows: flushing changes a result whose intermediates all fit
# the dtype.
_OVERFLOW_SOURCES = OVERFLOWING_SPECIALS + ("subnormal", "tiny", "eps")


def intermediates_overflow(obs: Observation, grads: bool = False) -> str:
    """Why the op's intermediates (with ``grads``, its backward's too) leave the case's
    dtype, or "" (cached). Where the inputs hold the dtype's extremes (max, lowest, or
    max^0.75, whose square overflows) or a small value (whose reciprocal, or its square,
    overflows), the op
    in float64 is run with every kernel's result watched: one past the dtype's largest
    value (or non-finite from finite inputs) is an intermediate the case's own dtype
    cannot hold, and which finite value or infinity comes out then hangs on the order
    of evaluation. An H200 run (docs/real-findings.md): batch_norm in training of a
    float32 [max, -4], whose variance overflows float32 on CUDA and on CPU's contiguous
    kernel (0) but not on CPU's strided one (±1, float64's answer)."""
    key = ("intermediates_overflow", grads)
    if key in obs.cache:
        return obs.cache[key]
    why = ""
    case = obs.case
    if any(name in _OVERFLOW_SOURCES for r in case.inputs for _, name in r.values.specials):
        reals = [{torch.complex32: torch.float16, torch.complex64: torch.float32,
                  torch.complex128: torch.float64}.get(dt.to_torch(r.dtype), dt.to_torch(r.dtype))
                 for r in case.inputs]
        reals = [d for d in reals if d.is_floating_point]
        if reals:
            top = min(float(torch.finfo(d).max) for d in reals)
            recorder = _watched_run(obs, grads)
            if recorder is not None and recorder.top > top:
                why = f"an intermediate reaches {recorder.top:.3g}, past the dtype's largest value {top:.3g}"
            elif recorder is not None and recorder.nonfinite and not _held_nonfinite(case):
                why = "an intermediate overflows to a non-finite value from finite inputs"
            elif obs.spec.evaluation_steps is not None:
                reached = _formula_steps_top(obs)
                if reached > top:
                    why = (f"an intermediate of the formula in another order of evaluation reaches "
                           f"{reached:.3g}, past the dtype's largest value {top:.3g}")
    obs.cache[key] = why
    return why


def _formula_steps_top(obs: Observation) -> float:
    """The largest finite magnitude the op's declared evaluation steps (OpSpec.
    evaluation_steps) reach on its inputs in float64, watched as the op's own run is
    (:class:`_RangeRecorder`); 0 where they do not run."""
    recorder = _RangeRecorder()
    try:
        inputs = dense_wide_inputs(obs.case)
        with recorder:
            obs.spec.evaluation_steps(inputs, dict(obs.case.kwargs))
    except Exception:  # best effort: no rule
        return 0.0
    return recorder.top


def as_int64(t: torch.Tensor) -> torch.Tensor:
    """The same integers as int64 (uint64: the same bits): eager CPU lacks comparison
    kernels for the wide unsigned dtypes."""
    return t.contiguous().view(torch.int64) if t.dtype == torch.uint64 else t.to(torch.int64)


def exact_ballot(ballots: list, index: int, dut: torch.Tensor, cpu: torch.Tensor) -> None:
    """A ballot for an integer or bool leaf (float64 has no opinion there): every
    position where the two differ is in dispute, with no tolerance."""
    if dut.dtype != cpu.dtype or dut.shape != cpu.shape or not dut.numel():
        return
    judged = as_int64(dut).reshape(-1) != as_int64(cpu).reshape(-1)
    if bool(judged.any()):
        ballots.append({"index": index, "dut": dut, "cpu": cpu, "judged": judged,
                        "tol": torch.zeros(judged.shape, dtype=torch.float64)})


def _rounding_bound(obs: Observation, grads: bool, leaf: int, d: torch.Tensor, c: torch.Tensor,
                    atol: float, rtol: float) -> torch.Tensor | None:
    """The first-order rounding bound of the op's decomposition in the leaf's dtype at
    the positions where the two sides differ (rounding_bound.py), flat; None where it
    cannot be measured."""
    from .rounding_bound import rounding_bounds
    wide = torch.complex128 if c.is_complex() else torch.float64
    dw, cw = d.to(wide).reshape(-1), c.to(wide).reshape(-1)
    differ = ~near(dw, cw, atol + rtol * cw.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0))
    positions = torch.nonzero(differ).reshape(-1).tolist()
    if not positions:
        return None
    real = {torch.complex32: torch.float16, torch.complex64: torch.float32,
            torch.complex128: torch.float64}.get(c.dtype, c.dtype)
    bounds = rounding_bounds(obs, grads, {leaf: positions}, float(torch.finfo(real).eps) / 2)
    return None if bounds is None else bounds.get(leaf)


def verdict(obs: Observation, failure: Failure) -> tuple[str, dict]:
    """Arbitrate every mismatching floating output of the failure's comparison."""
    side = float64_side(obs)
    if isinstance(side.outputs, Raised):
        return "undecided", {"reason": f"float64 run raised {side.outputs.type}"}
    scale = 1.0
    grads = failure.oracle == "grads"
    # A zero tap the DUT skipped (0 x NaN) is excused here as the oracles excused it: it
    # was no disagreement there, and must not be one here (issue 30, H200: conv3d under
    # autocast, a NaN weight beside padding, CPU NaN and cuDNN finite, was filed as
    # the oracle's finite rounding difference with these positions arbitrated).
    if grads:
        dut, cpu, exact = obs.dut_side.grads, obs.ref_side.grads, side.grads
        if dut is not None and cpu is not None and len(dut) == len(cpu):
            cpu = list(excuse_skipped_zero_taps(obs.case, obs.spec, tuple(dut), tuple(cpu)))
            if exact is not None and len(exact) == len(dut):
                cpu = list(excuse_multiplied_zero_taps(obs.case, obs.spec, tuple(dut), tuple(cpu), tuple(exact)))
        scale = BACKWARD_SCALE
    elif failure.oracle == "layout":  # awkward vs contiguous, both on the DUT
        dut, cpu, exact = obs.dut, obs.dut_contiguous.outputs, side.outputs
        cpu = excuse_zero_taps_either_way(obs.case, obs.spec, dut, cpu)
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
        if not isinstance(cpu, Raised) and not isinstance(dut, Raised):
            cpu = excuse_skipped_zero_taps(obs.case, obs.spec, dut, cpu)
            if exact is not None and not isinstance(exact, Raised):
                cpu = excuse_multiplied_zero_taps(obs.case, obs.spec, dut, cpu, exact)
    if failure.oracle in ("values", "layout") and dut is not None and cpu is not None \
            and not isinstance(dut, Raised) and not isinstance(cpu, Raised):
        # no ballot where a conversion is undefined, as the oracles gave none
        # (oracles/conversions.py; pytorch#160744)
        dut = excuse_undefined(obs.case, obs.spec, dut, cpu)
    if dut is None or cpu is None or exact is None:
        return "undecided", {"reason": "no float64 result to compare with"}
    overflowed = intermediates_overflow(obs, grads)
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
    agreed = 0
    ballots = obs.cache.setdefault(("ballots", failure.oracle), [])
    ballots.clear()
    for i, (d, c, e) in enumerate(zip(dut, cpu, exact)):
        if d is None or c is None or e is None or d.shape != c.shape or d.shape != e.shape:
            continue
        if not (c.is_floating_point() or c.is_complex()):
            exact_ballot(ballots, i, d, c)
            continue
        rtol, atol = leaf_tolerance(obs.spec, name_of(c.dtype), scale=scale,
                                    widened=obs.ref_widened and failure.oracle == "values")
        if compare_tensors(d, c, rtol, atol) is None:
            agreed += 1
            continue
        ballot = {"index": i, "dut": d, "cpu": c}
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
            intermediates = intermediate_leaves(obs, grads)
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
        leaf = DisputedLeaf(d, c, e, atol, rtol=rtol, rounding=_rounding_bound(obs, grads, i, d, c, atol, rtol),
                            overflow=specials or _terms_overflow(grown, c.dtype), magnitude=magnitude, summands=n,
                            perturbed=leaf_perturbed, explicit_nan=explicit_nan, extremes=extremes, whole=whole,
                            terms=terms, measured=measured, limits=leaf_limits, intermediates=bool(overflowed),
                            weights_slack=computed_weights_slack(obs, c.dtype))
        verdicts.append(leaf.judge(ballot))
        if "judged" in ballot:
            ballots.append(ballot)
    if not verdicts:
        if agreed:
            # every floating leaf agrees once the conventions above (zero taps) are excused
            return "both-close", {"reason": "the two sides agree where a zero tap's convention is excused"}
        return "undecided", {"reason": "no floating output to arbitrate"}
    for wanted in ("dut-wrong", "cpu-wrong"):
        for v, numbers in verdicts:
            if v == wanted:
                return v, numbers
    return verdicts[0]


def numbers_line(numbers: dict) -> str:
    if "reason" in numbers:
        return numbers["reason"]
    line = (f"RMS error vs float64: target {numbers['target_error']:.3g}, CPU {numbers['cpu_error']:.3g}; "
            f"non-finite disagreements: target {numbers['target_nonfinite_wrong']}, CPU {numbers['cpu_nonfinite_wrong']}")
    if numbers.get("overflow_rule"):
        line += (f"; inputs hold non-finite values or extremes: {numbers['target_wrong_positions']} position(s) "
                 f"wrong beyond overflow, {numbers['excused_positions']} excused as intermediate overflow")
    if "summands" in numbers:
        line += f"; accumulation bound for {numbers['summands']} summand(s)"
    if numbers.get("intermediate_overflow_positions"):
        line += (f"; {numbers['intermediate_overflow_positions']} position(s) excused: an intermediate leaves the "
                 "dtype's range where the result does not")
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


