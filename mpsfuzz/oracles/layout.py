"""``layout``: on the DUT alone, the op on awkward inputs (gapped, offset, transposed,
expanded, aliased: sharing a storage) equals the op on ``.contiguous()`` copies of them
(storages of their own).

This needs no CPU reference, so it catches layout bugs even where CPU cannot judge:
ops CPU does not implement for the dtype, or results CPU gets wrong itself.
"""
from __future__ import annotations

from . import Failure, oracle
from ..execution.observation import Observation, Raised
from .values import compare_outputs, dut_alone_scale, error_profile

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
        return Failure(oracle="layout", kind="contiguous-raises", severity="medium",
                       title=f"`{obs.spec.name}` raises on contiguous copies of inputs it accepts non-contiguous on {obs.target_name}",
                       message=f"{other.outputs.type}: {other.outputs.message}\n({awkward})",
                       dedup_key=("contiguous-raises", other.outputs.type))
    mismatch = compare_outputs(obs.dut, other.outputs, obs.spec, scale=dut_alone_scale(obs.spec, obs.dut))
    if mismatch is None:
        return None
    kind, message = mismatch
    profile = error_profile(obs.dut, other.outputs, obs.spec, scale=dut_alone_scale(obs.spec, obs.dut))
    return Failure(oracle="layout", kind=f"layout-{kind}", severity="high",
                   title=f"`{obs.spec.name}` returns different results for non-contiguous inputs on {obs.target_name}",
                   message=f"non-contiguous ({awkward}) vs contiguous copies:\n{message}",
                   dedup_key=(f"layout-{kind}",), details={"error_profile": profile} if profile else {})
