"""``variants``: on the DUT alone, every way of calling an op agrees with its functional
form, and a call writes only what it should.

- The method, in-place and ``out=`` forms (including a non-contiguous or wrongly sized
  ``out``) give the functional form's result on the same device (checked where CPU
  cannot judge the variant; elsewhere ``values`` compares the variant with CPU's).
- Inputs that are not outputs are left unchanged, bit for bit, in every variant (unless
  they share memory with an output: an aliased input changes with it).
- An in-place op on a gapped or offset ``self`` writes only inside the view: the rest
  of the base buffer keeps its filler.
"""
from __future__ import annotations

import torch

from . import Failure, form_keyed, oracle
from ..execution.executor import cpu_side, functional_reference
from ..generation.opspec import written_input
from ..execution.observation import Observation, Raised
from ..generation.recipes import with_bit, without_bit
from .values import UNCOMPARABLE, compare_outputs, dut_alone_scale, variant_phrase


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if (a.is_conj(), a.is_neg()) == (b.is_conj(), b.is_neg()):
        # two views with the same bit: their stored bits, read through no negation (CPU
        # resolves a stride-0 neg view to -0.0 or +0.0 by its vectorisation)
        a, b = without_bit(a), without_bit(b)
    a, b = a.resolve_conj().resolve_neg().contiguous(), b.resolve_conj().resolve_neg().contiguous()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.is_floating_point():
        ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.view(ints), b.view(ints))
    return torch.equal(a, b)


def _mutated_input(obs: Observation, side=None) -> int | None:
    """The index of an input that changed although it is not an output, or None. An
    input that shares memory with an output (an aliased input) changes with it.
    ``side``: whose call (default the DUT's; eager CPU's to tell whether it does the same)."""
    after = (side or obs.dut_side).inputs_after
    if after is None or not any(isinstance(t, torch.Tensor) for t in after):
        return None   # nothing was copied back (inputs too large to copy): nothing to compare
    case = obs.case
    written = written_input(case.variant)
    outputs = {written} if written is not None else set()
    outputs |= set(obs.spec.mutates)
    if "random" in obs.spec.semantics:
        outputs.add(0)  # in-place-only RNG ops (uniform_, normal_) are written as fn(self)
    written: list = []
    if case.is_aliased():
        footprints = case.footprints()
        written = [footprints[i] for i in outputs if i < len(footprints)]
    before = _inputs_as_built(case, after)
    for i, (now, was) in enumerate(zip(after, before)):
        if i in outputs or not isinstance(now, torch.Tensor):
            continue
        if written and any(footprints[i][0] == storage and footprints[i][1] & cells for storage, cells in written):
            continue
        if not bitwise_equal(now, was):
            return i
    return None


def _inputs_as_built(case, after) -> list:
    """The case's inputs on the host, those the call copied back alone (an input too
    large to copy, a K of 2^31 elements, is None after the call and not built here,
    which would take it whole on the host: no case at all); every input where inputs
    share a storage (built together)."""
    if case.is_aliased():
        return case.materialize("cpu")
    return [r.materialize("cpu") if isinstance(t, torch.Tensor) else None for r, t in zip(case.inputs, after)]


def _writes_outside_view(obs: Observation, side=None) -> bool:
    try:
        return _base_changed_outside_view(obs, side or obs.dut_side)
    except (RuntimeError, ValueError, IndexError):  # a view this check cannot rebuild
        return False


def _base_changed_outside_view(obs: Observation, side) -> bool:
    base_after, written = side.base_after, written_input(obs.case.variant)
    if base_after is None or written is None:
        return False
    if obs.case.inputs[written].layout.expanded:
        return False
    # The storage under self (or the input out= is) as the case built it (the filler,
    # and any inputs that share it), with the DUT's own result inside its view.
    view = obs.case.materialize("cpu")[written]
    base = view._base if view._base is not None else view
    if base.shape != base_after.shape:
        return False
    expected = base.clone()
    # (through self's conj or neg bit: the storage holds the values with the bit undone)
    with_bit(expected.as_strided(view.shape, view.stride(), view.storage_offset()),
             obs.case.inputs[written].layout.bit).copy_(side.inputs_after[written])
    return not bitwise_equal(base_after, expected)


@oracle("variants", stage="case",
        doc="method/in-place/out= forms equal the functional form on the DUT; non-outputs unchanged")
def check_variants(obs: Observation) -> Failure | None:
    if isinstance(obs.dut, Raised) or obs.dut_side is None:
        return None
    op, target, via = obs.spec.name, obs.target_name, variant_phrase(obs.case)

    def failure(kind, what, message, cpu_too: bool = False):
        key = form_keyed("variants", kind, (kind, obs.case.variant))
        if cpu_too:
            # Eager CPU does the same: a bug of PyTorch itself, filed once as such.
            return Failure(oracle="variants", kind=kind, severity="medium", blame="both",
                           title=f"`{op}`{via} {what} on {target} and on eager CPU alike",
                           message=message + "\neager CPU's call does the same", dedup_key=key + ("both",))
        return Failure(oracle="variants", kind=kind, severity="high",
                       title=f"`{op}`{via} {what} on {target}", message=message, dedup_key=key)

    # A write outside self's view comes first: where another input shares self's storage
    # (aliased), the spill is what changed it, and one bug is one finding (a fault
    # campaign's spill was also filed as "modifies input 1" of an adjacent input).
    if _writes_outside_view(obs):
        cpu = cpu_side(obs)
        written = written_input(obs.case.variant)
        whose = "self" if written == 0 else f"input {written} (out=)"
        return failure("writes-outside-view", f"writes outside the view of a non-contiguous {whose}",
                       f"the base buffer of {whose} ({obs.case.inputs[written].describe()}) changed outside the view",
                       cpu_too=cpu is not None and not isinstance(cpu.outputs, Raised) and _writes_outside_view(obs, cpu))
    changed = _mutated_input(obs)
    if changed is not None:
        cpu = cpu_side(obs)
        return failure("input-modified", f"modifies input {changed}, which is not an output",
                       f"input {changed} ({obs.case.inputs[changed].describe()}) differs after the call",
                       cpu_too=cpu is not None and not isinstance(cpu.outputs, Raised)
                       and _mutated_input(obs, cpu) == changed)
    functional = obs.dut_functional
    if functional is None or isinstance(functional.outputs, Raised):
        return None
    if UNCOMPARABLE & set(obs.spec.semantics):
        return None
    if obs.case.variant == "out-cast" and obs.spec.out_cast != "cast":
        return None   # out='s dtype is the one it computes in: compared with CPU's call only
    expected = _like(functional.outputs, obs.dut, obs.case.variant)
    mismatch = compare_outputs(obs.dut, expected, obs.spec, scale=dut_alone_scale(obs.spec, obs.dut))
    if mismatch is None:
        return None
    reference = functional_reference(obs)
    if reference is not None and not isinstance(reference.outputs, Raised):
        if compare_outputs(functional.outputs, reference.outputs, obs.spec, widened=obs.ref_widened) is not None:
            # The DUT's functional form is the wrong one (it disagrees with CPU's): a
            # functional case reports that; this variant is not to blame.
            return None
    kind, message = mismatch
    # Eager CPU's form against its own functional form: the same difference there is
    # PyTorch's (the out= or in-place path shared by every backend), not the target's.
    cpu_too = (reference is not None and not isinstance(reference.outputs, Raised) and not obs.ref_widened
               and not isinstance(obs.ref, Raised)
               and compare_outputs(obs.ref, _like(reference.outputs, obs.ref, obs.case.variant), obs.spec,
                                   scale=dut_alone_scale(obs.spec, obs.ref)) is not None)
    return failure(f"variant-{kind}", "differs from the functional form",
                   f"{obs.case.variant} vs functional on {target}:\n{message}", cpu_too=cpu_too)


def _like(expected, actual, variant: str):
    """The functional result as the form stores it: an in-place result keeps self's
    dtype (eq_, logical_not_), an ``out-cast`` result takes the out= tensors' dtypes (the
    result computed in its own dtype, then cast)."""
    if variant not in ("inplace", "out-cast"):
        return expected
    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
        return expected.to(actual.dtype)
    if variant == "out-cast" and isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)) \
            and len(expected) == len(actual):
        return type(expected)(e.to(a.dtype) if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) else e
                              for e, a in zip(expected, actual))
    return expected
