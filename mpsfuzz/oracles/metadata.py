"""``metadata``: output shape, dtype and (where the op defines it) memory format agree
with CPU.

Memory format is defined for ops that follow their input's suggested memory format
(elementwise ops and the nn family: convolutions, pooling, normalisation, activations):
a channels_last input must give a channels_last output on every backend. It is compared
for 4-D and 5-D outputs only, and never against a widened reference (whose run says
nothing about the narrow dtype's kernels).
"""
from __future__ import annotations

from . import Failure, oracle
from ..execution.observation import Observation, Raised
from .values import variant_phrase

MEMORY_FORMAT_FAMILIES = ("elementwise", "nn")
_CHANNELS_LAST = ("channels_last", "channels_last_3d")


def _problem(dut, ref, check_format: bool) -> tuple[str, str] | None:
    if len(dut) != len(ref):
        return None  # the values oracle reports a different structure
    for i, (a, e) in enumerate(zip(dut, ref)):
        prefix = f"output {i}: " if len(ref) > 1 else ""
        if a.shape != e.shape:
            return "wrong-shape", f"{prefix}The values for attribute 'shape' do not match: {a.shape} != {e.shape}."
        if a.dtype != e.dtype:
            return "wrong-dtype", f"{prefix}The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}."
        if check_format and len(e.shape) in (4, 5) and (a.memory_format in _CHANNELS_LAST) != (e.memory_format in _CHANNELS_LAST):
            return "wrong-memory-format", (f"{prefix}The values for attribute 'memory_format' do not match: "
                                           f"{a.memory_format} != {e.memory_format}.")
    return None


@oracle("metadata", stage="case", doc="output shape, dtype and memory format agree with CPU")
def check_metadata(obs: Observation) -> Failure | None:
    if isinstance(obs.dut, Raised) or isinstance(obs.ref, Raised):
        return None
    dut_meta = obs.dut_side.meta if obs.dut_side else None
    ref_meta = obs.ref_side.meta if obs.ref_side else None
    if dut_meta is None:
        return None
    if ref_meta is None:  # widened reference: shape and dtype come from the cast-back outputs
        from ..execution.observation import output_meta
        ref_meta = output_meta(obs.ref)
        check_format = False
    else:
        check_format = obs.spec.family in MEMORY_FORMAT_FAMILIES
    found = _problem(dut_meta, ref_meta, check_format)
    if found is None:
        return None
    kind, message = found
    what = {"wrong-shape": "a wrongly shaped result", "wrong-dtype": "a result of the wrong dtype",
            "wrong-memory-format": "a result in the wrong memory format"}[kind]
    # Right values in another memory format cost speed and a layout the user counted on,
    # not correctness (nine of 27 new findings of an H100 run were this): low, so a report
    # sorted by severity puts them after wrong shapes and dtypes.
    severity = "low" if kind == "wrong-memory-format" else "high"
    return Failure(oracle="metadata", kind=kind, severity=severity,
                   title=f"`{obs.spec.name}`{variant_phrase(obs.case)} returns {what} on {obs.target_name}",
                   message=message, dedup_key=(kind,))
