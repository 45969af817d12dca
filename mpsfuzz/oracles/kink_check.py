"""Is the op differentiable where the DUT's and CPU's gradients disagree? A numeric check
in float64 on the CPU, the ``grads`` oracle's fallback for kinks and ties that no
``grad_undefined`` declaration names (an op without one, a non-smooth intermediate the
declaration does not model).

It runs only when a gradient mismatch would be reported, at the few positions (elements
of differentiated inputs) where the two gradients differ most. At each, the scalar
``L(x) = sum_k <g_k, out_k(x)>`` (``g_k``: the case's seeded upstream gradients) is
evaluated at ``x`` and ``x +- s e`` for a step ``s`` and for ``s/4``. At a smooth point
the one-sided derivatives ``D+`` and ``D-`` differ by O(s) (curvature): the difference
shrinks with the step. At a kink they differ by the jump in the derivative whatever the
step, and at a discontinuity by more as the step shrinks. A position is a kink when the
difference exceeds ``TAU`` of the derivatives' size and the rounding noise of ``L`` at
both steps, and does not shrink with the step.

The step is ``STEP_ULPS`` units in the last place of the input's dtype, relative to the
element (to the input's mean magnitude at a zero): a kink within the dtype's rounding of
the point counts, one further away does not. (A larger step would also call smooth
functions kinked where their curvature is sharp on the step's scale: log_softmax of
logits of 1e7.) Anything inconclusive (a non-finite ``L``,
an op that refuses the perturbed input, the time budget spent) leaves the mismatch to
be reported.
"""
from __future__ import annotations

import math
import time

import torch

from ..generation.dtypes import to_torch

MAX_POSITIONS = 8
STEP_ULPS = 1
MIN_STEP = 1e-8        # float64 cases: a smaller step drowns D+- in L's rounding
TAU = 1e-2
SHRINK = 0.5           # smooth: the difference drops ~4x for a 4x smaller step
NOISE_ULPS = 64        # L's rounding error, in float64 ulps of the sum of |terms|
DEADLINE_S = 5.0

_EPS64 = float(torch.finfo(torch.float64).eps)


def _wide(t: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        return t.to(torch.complex128)
    return t.to(torch.float64) if t.is_floating_point() else t


def _wide_dtype(d: torch.dtype) -> torch.dtype:
    return torch.complex128 if d.is_complex else torch.float64 if d.is_floating_point else d


def worst_positions(dut: list, ref: list, limit: int = MAX_POSITIONS) -> list[tuple[int, int]]:
    """(gradient index, flat position) of the largest differences, largest first; a NaN
    or infinity on one side only counts as infinitely different."""
    found = []
    for k, (d, r) in enumerate(zip(dut, ref)):
        if d is None or r is None or d.shape != r.shape or d.numel() == 0:
            continue
        d, r = _wide(d).reshape(-1), _wide(r).reshape(-1)
        finite = torch.isfinite(d) & torch.isfinite(r)
        same_special = (torch.isnan(d) & torch.isnan(r)) | (~finite & (d == r))
        diff = torch.where(finite, (d - r).abs(), torch.where(same_special, 0.0, math.inf))
        top = torch.topk(diff, min(limit, diff.numel()))
        found += [(float(v), k, int(p)) for v, p in zip(top.values, top.indices) if float(v) > 0]
    found.sort(key=lambda x: -x[0])
    return [(k, p) for _, k, p in found[:limit]]


class _Objective:
    """L(inputs) in float64 with the case's upstream gradients, and the size of its terms."""

    def __init__(self, spec, kwargs, inputs: list, wrt: list[int], seed: int):
        from ..execution.executor import leaves as output_leaves
        from ..execution.executor import upstream_gradient
        self.spec, self.kwargs, self._leaves = spec, kwargs, output_leaves
        probe = [t.clone().requires_grad_(True) if i in wrt else t.clone() for i, t in enumerate(inputs)]
        leaves = output_leaves(spec.fn(*probe, **kwargs))
        diff = [k for k, o in enumerate(leaves) if o.requires_grad and (o.is_floating_point() or o.is_complex())]
        self.upstream = {k: upstream_gradient(leaves[k].shape, leaves[k].dtype, n, seed) for n, k in enumerate(diff)}

    def __call__(self, inputs: list) -> tuple[float, float]:
        with torch.no_grad():
            leaves = self._leaves(self.spec.fn(*[t.clone() for t in inputs], **self.kwargs))
        total = magnitude = 0.0
        for k, g in self.upstream.items():
            if k >= len(leaves) or leaves[k].shape != g.shape:
                return math.nan, math.nan
            terms = (g.conj() * leaves[k]).real if g.is_complex() else g * leaves[k]
            total += float(terms.sum())
            magnitude += float(terms.abs().sum())
        return total, magnitude


def numeric_kink(obs, dut: list, ref: list) -> str | None:
    """A one-line reason when the op is measurably not differentiable at a position where
    the gradients differ most; None when it is (or the check is inconclusive)."""
    from ..execution.executor import grad_inputs, judged_inputs
    case, spec = obs.case, obs.spec
    if "random" in spec.semantics:
        return None
    positions = worst_positions(dut, ref)
    if not positions:
        return None
    start = time.monotonic()
    # The inputs (and function) the reference ran on, whose gradients' positions these
    # are: for the @huge class the compared rows alone, called by the op itself.
    spec, base = judged_inputs(spec, case)
    wrt = grad_inputs(spec, base)
    if len(wrt) != len(ref):
        return None
    inputs = [_wide(t).contiguous().clone() for t in base]
    kwargs = {k: (_wide_dtype(v) if isinstance(v, torch.dtype) else v) for k, v in case.kwargs_dict().items()}
    seed = case.inputs[0].values.seed if case.inputs else 0
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # int -> float results come out in float64, as the arbiter's
    try:
        objective = _Objective(spec, kwargs, inputs, wrt, seed)
        if not objective.upstream:
            return None
        l0, m0 = objective(inputs)
        if not (math.isfinite(l0) and math.isfinite(m0)):
            return None
        for k, p in positions:
            if time.monotonic() - start > DEADLINE_S:
                return None
            i = wrt[k]
            why = _kink_at(objective, inputs, i, p, l0, m0, case.inputs[i].dtype)
            if why:
                return why
        return None
    except Exception:  # the op refusing a perturbed input, or anything odd: no opinion
        return None
    finally:
        torch.set_default_dtype(previous)


def _kink_at(objective, inputs: list, i: int, p: int, l0: float, m0: float, dtype_name: str) -> str | None:
    x = inputs[i]
    flat = x.reshape(-1)
    value = float(flat[p])
    if not math.isfinite(value):
        return None
    eps = float(torch.finfo(to_torch(dtype_name)).eps) if to_torch(dtype_name).is_floating_point else _EPS64
    h = max(STEP_ULPS * eps, MIN_STEP)
    finite = flat[torch.isfinite(flat)].abs()
    mean = float(finite.mean()) if finite.numel() else 0.0
    step0 = h * (abs(value) if value != 0 else (mean if mean > 0 else 1.0))
    jumps, sizes, noises, sides = [], [], [], []
    for s in (step0, step0 / 4):
        lp = objective(_moved(inputs, i, p, value + s))[0]
        lm = objective(_moved(inputs, i, p, value - s))[0]
        if not (math.isfinite(lp) and math.isfinite(lm)):
            return None
        dp, dm = (lp - l0) / s, (l0 - lm) / s
        jumps.append(abs(dp - dm))
        sizes += [abs(dp), abs(dm)]
        noises.append(2 * NOISE_ULPS * _EPS64 * (m0 + abs(l0)) / s)
        sides.append((dp, dm))
    scale = max(sizes)
    big = all(j > TAU * scale + n for j, n in zip(jumps, noises))
    if big and jumps[1] >= SHRINK * jumps[0]:
        dp, dm = sides[1]
        return (f"not differentiable at element {p} of input {i}: one-sided derivatives "
                f"{dp:.4g} and {dm:.4g} (float64, steps of {step0:.2g} and {step0 / 4:.2g})")
    return None


def _moved(inputs: list, i: int, p: int, value: float) -> list:
    out = list(inputs)
    moved = inputs[i].clone()
    moved.view(-1)[p] = value
    out[i] = moved
    return out
