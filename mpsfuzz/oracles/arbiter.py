"""``arbiter``: the verdict on a disagreement between the target and eager CPU.

Three steps, in this order:

1. **Is it a disagreement at all?** The float64 juror (``jury/float64.py``) runs the op
   in float64 on dense copies and dismisses what rounding, half-precision accumulation,
   overflow of intermediates and ill-conditioning explain; where CPU lacked a half
   kernel, a target that agrees with the op in half arithmetic kernel by kernel
   (``narrow_reference.py``) is not wrong either.
2. **Who is wrong?** For values and gradients, the jury (``jury/__init__.py``) decides
   with references that share no kernel with eager CPU: the target is wrong
   (``target-wrong``: the finding stands), CPU is (``cpu-wrong``: a ``cpu-bug``, kept
   apart), both are (``both-wrong``: a bug of PyTorch itself, ``both``), neither
   (dismissed), or no independent evidence exists (``undecided``: listed apart, never
   new). The float64 juror's opinion is recorded, never decisive: it is CPU's kernel.
3. For the DUT-alone oracles (``layout``, ``variants``: the target against itself)
   float64 says only whether the difference is one; either form being the worse one is
   the target's bug.

A shape mismatch goes to the meta kernel (``meta_shapes.py``), which runs no kernel of
either backend.
"""
from __future__ import annotations

from dataclasses import replace

from . import Failure, oracle
from ..execution.observation import Observation, Raised
from ..generation.opspec import LARGE_REAL_NUMEL
from .grads import BACKWARD_SCALE
from .huge_rows import rows_observation
from .jury import deliberate
from .jury.float64 import ARBITRATED, DISMISSED, numbers_line, verdict
from .meta_shapes import shape_note, shape_verdict
from .narrow_reference import narrow_per_kernel
from .values import compare_outputs

# The jury decides these: the target and eager CPU disagree on values.
JUDGED_BY_JURY = {("values", "wrong-values"), ("grads", "wrong-values")}


@oracle("arbiter", stage="verdict",
        doc="float64 dismisses what rounding explains; a jury of independent references decides who is wrong "
            "(target, CPU, both, or undecided); the meta kernel decides shape mismatches")
def arbitrate(obs: Observation, failure: Failure) -> Failure | None:
    if (failure.oracle, failure.kind) == ("metadata", "wrong-shape"):
        return _arbitrate_shape(obs, failure)
    if (failure.oracle, failure.kind) not in ARBITRATED:
        return failure
    if "large" in obs.spec.semantics and any(r.numel > LARGE_REAL_NUMEL for r in obs.case.inputs):
        rows = rows_observation(obs)
        if rows is None:
            # The reference of a stride-0 input of billions of elements is its analytic
            # value (exact, independent of CPU's kernels), and a float64 copy would be dense.
            return replace(failure, message=failure.message + "\nfloat64 arbiter: not needed (the reference is exact)",
                           details=dict(failure.details, verdict="reference-exact"))
        # The @huge class: the same dispute, of the base op on the rows compared.
        obs = rows
    try:
        result, numbers = verdict(obs, failure)
    except Exception as exc:
        # A bug of ours, not a verdict: without the float64 run's dismissals the jury
        # would file what rounding explains as new (issue 30, H200: eight gradients of
        # ops with a leaf that has no gradient, an AttributeError here, all filed new).
        # The finding is undecided, listed apart and never new, and says where it broke.
        reason = f"arbiter failed: {type(exc).__name__}: {str(exc)[:120]} ({_where(exc)})"
        details = dict(failure.details, verdict="undecided", arbiter={"reason": reason})
        return replace(failure, blame="undecided", severity="low", message=failure.message + f"\n{reason}",
                       dedup_key=failure.dedup_key + ("undecided",), details=details)
    note = f"\nfloat64 arbiter: {result} ({numbers_line(numbers)})"
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
    if (failure.oracle, failure.kind) not in JUDGED_BY_JURY:
        return replace(failure, message=failure.message + note, details=details)
    if _half_per_kernel_agrees(obs, failure):
        return None
    return _by_the_jury(obs, failure, note, details)


def _where(exc: Exception) -> str:
    """The innermost frame of ``exc``'s traceback: ``float64.py:217 in intermediate_leaves``."""
    import os
    import traceback
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "no traceback"
    last = frames[-1]
    return f"{os.path.basename(last.filename)}:{last.lineno} in {last.name}"


def _by_the_jury(obs: Observation, failure: Failure, note: str, details: dict) -> Failure | None:
    jury = deliberate(obs, failure)
    details = dict(details, jury=jury.to_json())
    message = failure.message + note + "\n" + "\n".join(jury.lines())
    op, target = obs.spec.name, obs.target_name
    if jury.verdict == "both-right":
        return None   # every independent reference has both sides within tolerance
    if jury.verdict == "cpu-wrong":
        kind = "cpu-layout" if "cpu-contiguous" in jury.decided_by else "cpu-wrong"
        title = (f"CPU `{op}` gives another result for non-contiguous inputs than for contiguous copies "
                 f"({target} agrees with the copies)" if kind == "cpu-layout"
                 else f"CPU `{op}` returns wrong values ({target} agrees with {', '.join(jury.decided_by)})")
        return Failure(oracle="arbiter", kind=kind, severity="low", blame="cpu", title=title, message=message,
                       dedup_key=(kind, failure.oracle), details=dict(details, verdict=kind))
    if jury.verdict == "both-wrong":
        what = "gradients" if failure.oracle == "grads" else "values"
        return replace(failure, blame="both", severity="medium", message=message,
                       title=f"`{op}` returns wrong {what} on {target} and on eager CPU alike "
                             f"(by {', '.join(jury.decided_by)})",
                       dedup_key=failure.dedup_key + ("both",), details=details)
    if jury.verdict == "undecided":
        return replace(failure, blame="undecided", severity="low", message=message,
                       dedup_key=failure.dedup_key + ("undecided",), details=details)
    return replace(failure, message=message, details=details)


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


def _arbitrate_shape(obs: Observation, failure: Failure) -> Failure:
    """A shape mismatch, decided by the meta kernel (meta_shapes.py): where it sides with
    the target, the finding is CPU's, kept apart from target bugs."""
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
