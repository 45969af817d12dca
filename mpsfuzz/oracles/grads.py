"""``grads``: backward on both sides with the same upstream gradient; the gradients of
the differentiated inputs are compared like values (with twice the forward tolerance:
backward kernels accumulate more)."""
from __future__ import annotations

from . import Failure, oracle
from .observation import Observation, Raised
from .values import compare_outputs

BACKWARD_SCALE = 2.0


@oracle("grads", stage="case", doc="gradients (grad variant) equal CPU's for the same upstream gradient")
def check_grads(obs: Observation) -> Failure | None:
    if obs.case.variant != "grad" or isinstance(obs.dut, Raised) or isinstance(obs.ref, Raised):
        return None
    dut, ref = obs.dut_side.grads, obs.ref_side.grads
    if dut is None or ref is None:
        return None
    if len(dut) != len(ref):
        return None
    mismatch = compare_outputs(tuple(dut), tuple(ref), obs.spec, widened=obs.ref_widened,
                               scale=BACKWARD_SCALE)
    if mismatch is None:
        return None
    kind, message = mismatch
    message = message.replace("output ", "gradient of input ", 1) if message.startswith("output ") else message
    return Failure(oracle="grads", kind=kind, severity="high",
                   title=f"`{obs.spec.name}` backward returns wrong gradients on {obs.target_name}",
                   message=message, dedup_key=(kind,))
