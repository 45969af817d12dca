"""Who is wrong when the target and CPU return different shapes: the meta kernel says.

Float64 cannot settle a shape: CPU's float64 kernel shares its shape logic with CPU's
float32 one. The ``meta`` device runs an op's shape function alone (its meta kernel or
Python reference), a third implementation on tensors of the same shapes and strides. Where
it agrees with the target and not with CPU, CPU is the one in the wrong: eager CPU's
``pixel_unshuffle`` of an empty ``(0, 2, 2)`` tensor returns ``(0, 2, 2)`` where meta and
CUDA give ``(0, 1, 1)`` (torch 2.11 to 2.13), which an H100 run filed as a CUDA bug. Where
meta cannot run the op (a shape that depends on the values, an op without a meta kernel)
or agrees with neither side, nothing changes.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from ..execution.observation import Observation
from .values import flatten_outputs


def _meta_shapes(obs: Observation) -> list | None:
    """The shapes of the op's outputs on the meta device (the forward, for the grad
    variant), or None where meta cannot run it."""
    from ..execution.executor import call_variant

    case = obs.case if obs.case.variant != "grad" else replace(obs.case, variant="functional")
    if "random" in obs.spec.semantics:
        return None
    try:
        inputs = case.materialize("meta")
        raw = call_variant(obs.spec, case, inputs, case.kwargs_dict())
    except Exception:
        return None
    leaves = flatten_outputs(raw)
    if not all(isinstance(t, torch.Tensor) for t in leaves):
        return None
    return [tuple(t.shape) for t in leaves]


def shape_verdict(obs: Observation) -> tuple[str, dict]:
    """'dut-wrong' (meta agrees with CPU), 'cpu-wrong' (meta agrees with the target) or
    'undecided', with the shapes."""
    dut = [tuple(m.shape) for m in (obs.dut_side.meta or [])] if obs.dut_side else []
    cpu = [tuple(m.shape) for m in (obs.ref_side.meta or [])] if obs.ref_side else []
    meta = _meta_shapes(obs)
    if meta is None:
        return "undecided", {"reason": "the meta device cannot run this call"}
    numbers = {"meta_shapes": [list(s) for s in meta]}
    if len(meta) != len(dut) or len(meta) != len(cpu):
        return "undecided", dict(numbers, reason="the meta call returns another number of outputs")
    if meta == dut and meta != cpu:
        return "cpu-wrong", numbers
    if meta == cpu and meta != dut:
        return "dut-wrong", numbers
    return "undecided", numbers


def shape_note(result: str, numbers: dict, target_name: str) -> str:
    """The line the finding's message gets."""
    shapes = ", ".join(str(tuple(s)) for s in numbers.get("meta_shapes", []))
    if result == "cpu-wrong":
        return f"\nmeta kernel: cpu-wrong (meta gives {shapes}, as {target_name} does)"
    if result == "dut-wrong":
        return f"\nmeta kernel: dut-wrong (meta gives {shapes}, as CPU does)"
    return f"\nmeta kernel: undecided ({numbers.get('reason') or 'meta gives ' + shapes})"
