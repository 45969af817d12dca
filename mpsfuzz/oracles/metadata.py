"""``metadata``: output shape, dtype and (where the op defines it) memory format agree
with CPU.

Memory format is compared for ops that follow their input's suggested memory format
(elementwise ops and the nn family: convolutions, pooling, normalisation, activations),
for 4-D and 5-D outputs only, and never against a widened reference (whose run says
nothing about the narrow dtype's kernels). A difference there is a *note*, not a bug
(blame ``note``): the campaign lists it in the target's layout-propagation note.
"""
from __future__ import annotations

from . import Failure, oracle
from ..execution.observation import Observation, Raised
from .values import variant_phrase

MEMORY_FORMAT_FAMILIES = ("elementwise", "nn")
_CHANNELS_LAST = ("channels_last", "channels_last_3d")


def _problem(dut, ref, check_format: bool) -> tuple | None:
    """(kind, message) of the first attribute that differs; a memory format also gives
    (the target's, CPU's)."""
    if len(dut) != len(ref):
        return None  # the values oracle reports a different structure
    for i, (a, e) in enumerate(zip(dut, ref)):
        prefix = f"output {i}: " if len(ref) > 1 else ""
        if a.shape != e.shape:
            return "wrong-shape", f"{prefix}The values for attribute 'shape' do not match: {a.shape} != {e.shape}."
        if a.dtype != e.dtype:
            return "wrong-dtype", f"{prefix}The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}."
        if check_format and len(e.shape) in (4, 5) and (a.memory_format in _CHANNELS_LAST) != (e.memory_format in _CHANNELS_LAST):
            return ("wrong-memory-format", f"{prefix}The values for attribute 'memory_format' do not match: "
                    f"{a.memory_format} != {e.memory_format}.", a.memory_format, e.memory_format)
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
    kind, message = found[:2]
    what = {"wrong-shape": "a wrongly shaped result", "wrong-dtype": "a result of the wrong dtype",
            "wrong-memory-format": "a result in the wrong memory format"}[kind]
    if kind == "wrong-memory-format":
        # Right values in another memory format are no bug to file: one question about a
        # propagation rule per target (13 of 53 new findings of an H200 run were this). The
        # campaign adds it to the target's layout-propagation note (corpus/notes.py).
        return Failure(oracle="metadata", kind=kind, severity="note", blame="note",
                       title=f"`{obs.spec.name}`{variant_phrase(obs.case)} returns {what} on {obs.target_name} "
                             "(layout propagation)", message=message, dedup_key=(kind,),
                       details={"target_format": found[2], "cpu_format": found[3]})
    return Failure(oracle="metadata", kind=kind, severity="high",
                   title=f"`{obs.spec.name}`{variant_phrase(obs.case)} returns {what} on {obs.target_name}",
                   message=message, dedup_key=(kind,))
