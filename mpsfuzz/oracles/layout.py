"""``layout``: on the DUT alone, the op on awkward inputs (gapped, offset, transposed,
expanded, aliased: sharing a storage) equals the op on ``.contiguous()`` copies of them
(storages of their own).

This needs no CPU reference, so it catches layout bugs even where CPU cannot judge:
ops CPU does not implement for the dtype, or results CPU gets wrong itself.
"""
from __future__ import annotations

from dataclasses import replace

from . import Failure, oracle
from ..execution.observation import Observation, Raised
from .conversions import excuse_undefined
from .values import compare_outputs, dut_alone_scale, error_profile, excuse_zero_taps_either_way

OVERFLOWING = ("max", "lowest", "big")


@oracle("layout", stage="case", doc="the DUT gives the same result on non-contiguous inputs and on contiguous copies")
def check_layout(obs: Observation) -> Failure | None:
    other = obs.dut_contiguous
    if other is None or isinstance(obs.dut, Raised):
        return None
    if any(name in OVERFLOWING for r in obs.case.inputs for _, name in r.values.specials):
        # With values near the dtype's max, whether a sum overflows to inf (or inf - inf
        # gives NaN) depends on the order of accumulation, which a layout may change.
        return None
    awkward = ", ".join(f"input {i}: {r.describe_layout()}" for i, r in enumerate(obs.case.inputs)
                        if not r.is_plain())
    if isinstance(other.outputs, Raised):
        if other.outputs.unsupported:
            return None  # no kernel for the contiguous form: nothing to compare with
        cpu = _cpu_on_copies(obs)
        failure = Failure(oracle="layout", kind="contiguous-raises", severity="medium",
                          title=f"`{obs.spec.name}` raises on contiguous copies of inputs it accepts non-contiguous on {obs.target_name}",
                          message=f"{other.outputs.type}: {other.outputs.message}\n({awkward})",
                          dedup_key=("contiguous-raises", other.outputs.type))
        if cpu is not None and isinstance(cpu.outputs, Raised) and not isinstance(obs.ref, Raised):
            return both_backends(failure, "eager CPU raises on the contiguous copies too")
        return failure
    scale = dut_alone_scale(obs.spec, obs.dut)
    contiguous = excuse_zero_taps_either_way(obs.case, obs.spec, obs.dut, other.outputs)
    mismatch = compare_outputs(obs.dut, contiguous, obs.spec, scale=scale)
    if mismatch is not None:
        # Undefined conversions need not agree, not even with the target's own other
        # kernel (oracles/conversions.py; pytorch#160744)
        mismatch = compare_outputs(excuse_undefined(obs.case, obs.spec, obs.dut, contiguous), contiguous,
                                   obs.spec, scale=scale)
    if mismatch is None:
        return None
    kind, message = mismatch
    profile = error_profile(obs.dut, contiguous, obs.spec, scale=scale)
    failure = Failure(oracle="layout", kind=f"layout-{kind}", severity="high",
                      title=f"`{obs.spec.name}` returns different results for non-contiguous inputs on {obs.target_name}",
                      message=f"non-contiguous ({awkward}) vs contiguous copies:\n{message}",
                      dedup_key=(f"layout-{kind}",), details={"error_profile": profile} if profile else {})
    cpu = _cpu_on_copies(obs)
    if cpu is not None and not isinstance(cpu.outputs, Raised) and not isinstance(obs.ref, Raised) \
            and not obs.ref_widened and compare_outputs(obs.ref, cpu.outputs, obs.spec, scale=scale) is not None:
        return both_backends(failure, "eager CPU also gives another result for the contiguous copies")
    return failure


def both_backends(failure: Failure, why: str) -> Failure:
    """``failure`` as a bug of PyTorch itself: eager CPU shows the same symptom."""
    return replace(failure, blame="both", severity="medium", title=failure.title + " and on eager CPU alike",
                   message=failure.message + f"\n{why}", dedup_key=failure.dedup_key + ("both",))


def _cpu_on_copies(obs: Observation):
    """Eager CPU's call on contiguous copies of the inputs (cached), or None where CPU's
    reference is not its own call (a user's reference)."""
    if "cpu_contiguous" not in obs.cache:
        from ..execution.executor import contiguous_copies, run_side
        side = None
        if obs.spec.reference_fn is None:
            side = run_side(obs.spec, obs.case, obs.case.kwargs_dict(), "cpu", inputs=contiguous_copies(obs.case, "cpu"))
            side.raw = None
        obs.cache["cpu_contiguous"] = side
    return obs.cache["cpu_contiguous"]
