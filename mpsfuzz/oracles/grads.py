"""``grads``: backward on both sides with the same upstream gradient; the gradients of
the differentiated inputs are compared like values (with twice the forward tolerance:
backward kernels accumulate more).

Gradients are judged only where they are defined. Before a mismatch is reported, the
op's ``grad_undefined`` declaration (kinks, ties, repeated eigen- or singular values at
the case's inputs) and then a numeric check in float64 (:mod:`.kink_check`: one-sided
derivatives that disagree at a position where the gradients differ) may say the point
has no derivative: then there is no verdict, and the reason is kept in
``obs.cache["grad_undefined"]``. The forward result is judged by the other oracles
either way."""
from __future__ import annotations

from . import Failure, oracle
from ..execution.observation import Observation, Raised
from ..generation.dtypes import name_of
from .kink_check import numeric_kink
from .tolerances import tolerance
from .values import compare_outputs, excuse_skipped_zero_taps

BACKWARD_SCALE = 2.0


@oracle("grads", stage="case", doc="gradients (grad variant) equal CPU's for the same upstream gradient, "
                                   "where they are defined")
def check_grads(obs: Observation) -> Failure | None:
    if obs.case.variant != "grad" or isinstance(obs.dut, Raised) or isinstance(obs.ref, Raised):
        return None
    dut, ref = obs.dut_side.grads, obs.ref_side.grads
    if dut is None or ref is None:
        return None
    if len(dut) != len(ref):
        return None
    mismatch = compare_outputs(tuple(dut), excuse_skipped_zero_taps(obs.case, obs.spec, tuple(dut), tuple(ref)),
                               obs.spec, widened=obs.ref_widened, scale=BACKWARD_SCALE)
    if mismatch is None:
        return None
    why = undefined_here(obs, dut, ref)
    if why:
        obs.cache["grad_undefined"] = why
        return None
    kind, message = mismatch
    message = message.replace("output ", "gradient of input ", 1) if message.startswith("output ") else message
    return Failure(oracle="grads", kind=kind, severity="high",
                   title=f"`{obs.spec.name}` backward returns wrong gradients on {obs.target_name}",
                   message=message, dedup_key=(kind,))


def comparison_rtol(obs: Observation, ref: list) -> float:
    """The relative tolerance the gradients are compared with (of the first gradient's dtype)."""
    first = next((g for g in ref if g is not None), None)
    if first is None:
        return 0.0
    return tolerance(name_of(first.dtype), rtol_scale=obs.spec.rtol_scale * BACKWARD_SCALE,
                     widened=obs.ref_widened)[0]


NONFINITE_POINT = ("the gradient at a NaN or inf input element has no convention across backends "
                   "(eager CPU's own answer there depends on the tensor's length: pytorch/pytorch#195075)")


def differs_only_at_nonfinite_inputs(obs: Observation, dut: list, ref: list) -> bool:
    """Whether the gradients agree everywhere but at positions whose own input element is
    NaN or inf. A kernel's branch (``x <= 0``) decides the gradient there, and backends
    (and CPU's vectorised and scalar loops) branch differently on NaN; a gradient wrong at
    a finite position is still reported."""
    import torch

    from ..execution.executor import grad_inputs, judged_inputs
    spec, inputs = judged_inputs(obs.spec, obs.case)
    wrt = grad_inputs(spec, inputs)
    if len(wrt) != len(dut):
        return False
    masked, any_nonfinite = [], False
    for i, d, r in zip(wrt, dut, ref):
        x = inputs[i]
        if (d is None or r is None or not isinstance(x, torch.Tensor) or x.shape != d.shape
                or x.shape != r.shape or not (x.is_floating_point() or x.is_complex())):
            masked.append(d)
            continue
        bad = ~torch.isfinite(x.detach())
        any_nonfinite |= bool(bad.any())
        masked.append(torch.where(bad, r, d))
    if not any_nonfinite:
        return False
    return compare_outputs(tuple(masked), tuple(ref), obs.spec, widened=obs.ref_widened,
                           scale=BACKWARD_SCALE) is None


def undefined_here(obs: Observation, dut: list, ref: list) -> str | None:
    """Why the gradient is not defined at the case's inputs (non-finite input elements,
    the op's declaration, then the numeric check), or None. A declaration that fails says
    nothing (the mismatch is reported); its error is kept in
    ``obs.cache["grad_undefined_error"]``."""
    try:
        if differs_only_at_nonfinite_inputs(obs, dut, ref):
            return NONFINITE_POINT
    except Exception as exc:  # a courtesy, as below: never lose a finding to it
        obs.cache["grad_undefined_error"] = f"{type(exc).__name__}: {exc}"
    from ..execution.executor import judged_inputs
    declared = obs.spec.grad_undefined
    if declared is not None:
        try:
            # (on the inputs the reference ran on: the rows compared, for the @huge class)
            why = declared(judged_inputs(obs.spec, obs.case)[1], obs.case.kwargs_dict(), comparison_rtol(obs, ref))
        except Exception as exc:
            obs.cache["grad_undefined_error"] = f"{type(exc).__name__}: {exc}"
            why = None
        if why:
            return why
    try:
        return numeric_kink(obs, dut, ref)
    except Exception as exc:  # the check is a courtesy: never lose a finding to it
        obs.cache["grad_undefined_error"] = f"{type(exc).__name__}: {exc}"
        return None
