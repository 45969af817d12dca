"""``errors``: the DUT raises where CPU does not, or the reverse.

"Not implemented on this device/dtype" errors are classified ``unsupported`` by the
executor: counted and listed, never a finding.
"""
from __future__ import annotations

import re

from . import Failure, oracle
from .observation import Observation, Raised

def _device_fault(message: str) -> bool:
    from ..fuzzer.executor import is_device_fault
    return is_device_fault(message)


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(\.\d+)?")


def normalise_message(message: str) -> str:
    """First line of an error with addresses, sizes and numbers masked, for dedup keys."""
    first = (message.strip().splitlines() or [""])[0]
    return _NUMBERS.sub("N", first)[:160]


@oracle("errors", stage="case", doc="the DUT raises where CPU does not, or the reverse")
def check_errors(obs: Observation) -> Failure | None:
    dut_raised, ref_raised = isinstance(obs.dut, Raised), isinstance(obs.ref, Raised)
    if dut_raised and _device_fault(obs.dut.message):
        # Even where CPU rejects the input too: a device fault (a failed assert, an
        # illegal access) kills the context instead of raising a clean error.
        return Failure(
            oracle="errors", kind="device-fault", severity="critical",
            title=f"`{obs.spec.name}` triggers a device fault on {obs.target_name}",
            message=f"{obs.target_name} raised {obs.dut.type}: {obs.dut.message}",
            dedup_key=("device-fault", normalise_message(obs.dut.message)))
    if dut_raised and not ref_raised and not obs.dut.unsupported:
        return Failure(
            oracle="errors", kind="dut-raises", severity="high",
            title=f"`{obs.spec.name}` raises {obs.dut.type} on {obs.target_name} but works on CPU",
            message=f"{obs.target_name} raised {obs.dut.type}: {obs.dut.message}\nCPU returned a result.",
            dedup_key=("dut-raises", obs.dut.type, normalise_message(obs.dut.message)))
    if ref_raised and not dut_raised and not obs.ref.unsupported:
        return Failure(
            oracle="errors", kind="ref-raises", severity="medium",
            title=f"`{obs.spec.name}` accepts input on {obs.target_name} that CPU rejects",
            message=f"CPU raised {obs.ref.type}: {obs.ref.message}\n{obs.target_name} returned a result.",
            dedup_key=("ref-raises", obs.ref.type, normalise_message(obs.ref.message)))
    return None
