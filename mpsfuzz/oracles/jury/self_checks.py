"""Self checks: a backend read against itself. They speak only where no independent
juror applies, and each can accuse only its own backend: a backend that agrees with
itself may still be wrong everywhere, but one that gives two answers for one question,
one of them the other backend's, is wrong in the other.

- ``target-contiguous``: the target on contiguous copies of non-contiguous (or aliased)
  inputs returns CPU's result: the layout is what the target gets wrong. Returning CPU's
  result at some disputed positions is enough where it agrees with neither side at the
  others (a second bug of the target's; issue 37): a backend whose two answers differ,
  one of them the other backend's, is wrong. Only the target's checks read so: CPU's
  keep the whole reading, since accusing CPU takes a finding from the target.
- ``target-wider``: the target on the same values in a wider dtype (float16 and
  bfloat16 in float32, complex32 in complex64), rounded back, returns CPU's result.
- ``cpu-contiguous``: eager CPU on contiguous copies returns the target's result (run
  32: CPU's strided batch_norm kernel and its contiguous one differ).
- ``cpu-scalar``: eager CPU on each disputed element alone, as a 0-d call, returns the
  target's result (CPU's vectorised fmod of a float64 vector by 2^-1024 is NaN; its 0-d
  fmod is 0, the target's answer).
"""
from __future__ import annotations

import torch

from ...execution.error_kinds import is_device_fault
from ...execution.observation import Raised
from ..values import flatten_outputs
from . import Vote, juror
from .ballots import read_leaf, sampled_values, tally
from .scalar import per_element

_WIDER = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.complex32: torch.complex64}


def _leaves(side, failure) -> list | None:
    if side is None or isinstance(side.outputs, Raised):
        return None
    if failure.oracle == "grads":
        return list(side.grads) if side.grads is not None else None
    return flatten_outputs(side.outputs)


def _accuse(name: str, witness: str, accused: str, words: str, leaves, ballots) -> Vote | str:
    """A vote only where the reading accuses this juror's own backend."""
    references = {b["index"]: leaves[b["index"]] for b in ballots
                  if b["index"] < len(leaves) and isinstance(leaves[b["index"]], torch.Tensor)}
    says = tally(ballots, references)
    if says is None:
        return "its result does not line up with the disputed outputs"
    if says == "both-wrong" and accused == "target-wrong" and _gives_cpus_value_somewhere(ballots, references):
        # The target contradicts itself with CPU's value where it also has a second bug
        # (issue 37: CUDA's renorm of a transposed weight touched one element, and its
        # contiguous renorm was wrong too for rows with negative values): wrong either way.
        says, words = "target-wrong", words + ", which gives CPU's value at some disputed positions"
    if says != accused:
        return {"both-right": "both sides agree with it", "both-wrong": "it agrees with neither side"}.get(
            says, "the backend agrees with itself")
    return Vote(name, witness, says, words, sampled_values(ballots, references))


def _gives_cpus_value_somewhere(ballots, references) -> bool:
    """Whether the reading agrees with CPU and not with the target at some disputed
    position: there the target's two answers differ and one of them is CPU's."""
    for b in ballots:
        read = read_leaf(b, references[b["index"]]) if b["index"] in references else None
        if read is not None and bool((read[0] & ~read[1]).any()):
            return True
    return False


def _on_target(obs, inputs):
    """The case's call on the target on ``inputs``; a device fault marks the
    observation poisoned (the worker is replaced after this case)."""
    from ...execution.executor import run_side
    from ...execution.harness_clock import on_target
    target = obs.target
    with on_target():   # the target's time, not the verdict's: a hang here is a hang
        side = run_side(obs.spec, obs.case, obs.case.kwargs_dict(), target.device, runner=target.run,
                        synchronize=target.synchronize, inputs=inputs)
    side.raw = None
    if isinstance(side.outputs, Raised) and is_device_fault(side.outputs.message):
        obs.poisoned = True
    return side


def _awkward(case) -> bool:
    return any(not r.is_plain() for r in case.inputs) or case.is_aliased()


@juror("target-contiguous", witness="target",
       doc="the target on contiguous copies of its non-contiguous inputs agrees with CPU")
def target_contiguous(obs, failure, ballots):
    if not _awkward(obs.case) or "random" in obs.spec.semantics:
        return None
    side = obs.dut_contiguous if failure.oracle == "values" and obs.case.variant == "functional" else None
    if side is None:
        if obs.target is None:
            return "the target is not at hand"
        from ...execution.executor import contiguous_copies
        side = _on_target(obs, contiguous_copies(obs.case, obs.target.device))
    leaves = _leaves(side, failure)
    if leaves is None:
        return "the target raised on contiguous copies"
    return _accuse("target-contiguous", "target", "target-wrong",
                   f"{obs.target_name} on contiguous copies of the inputs", leaves, ballots)


@juror("target-wider", witness="target",
       doc="the target on the same values in a wider dtype, rounded back, agrees with CPU")
def target_wider(obs, failure, ballots):
    if obs.target is None or "random" in obs.spec.semantics or obs.case.variant == "autocast":
        return None
    inputs = obs.case.materialize(obs.target.device)
    if not any(isinstance(t, torch.Tensor) and t.dtype in _WIDER for t in inputs):
        return None
    wider = [t.to(_WIDER[t.dtype]) if isinstance(t, torch.Tensor) and t.dtype in _WIDER else t for t in inputs]
    leaves = _leaves(_on_target(obs, wider), failure)
    if leaves is None:
        return "the target raised in the wider dtype"
    return _accuse("target-wider", "target", "target-wrong",
                   f"{obs.target_name} on the same values in float32/complex64, rounded back", leaves, ballots)


@juror("cpu-contiguous", witness="cpu", doc="eager CPU on contiguous copies of the inputs agrees with the target")
def cpu_contiguous(obs, failure, ballots):
    from ...execution.executor import contiguous_copies, run_side
    case = obs.case
    if not _awkward(case) or case.variant not in ("functional", "out", "grad") or "random" in obs.spec.semantics:
        return None
    side = run_side(obs.spec.as_reference(), case, case.kwargs_dict(), "cpu", inputs=contiguous_copies(case, "cpu"))
    leaves = _leaves(side, failure)
    if leaves is None:
        return "eager CPU raised on contiguous copies"
    if obs.ref_widened:
        return "eager CPU lacks this dtype's kernel (its reference was widened)"
    return _accuse("cpu-contiguous", "cpu", "cpu-wrong", "eager CPU on contiguous copies of the inputs",
                   leaves, ballots)


@juror("cpu-scalar", witness="cpu", doc="eager CPU on each disputed element alone (a 0-d call) agrees with the target")
def cpu_scalar(obs, failure, ballots):
    spec, case = obs.spec, obs.case
    if spec.family != "elementwise" or failure.oracle == "grads" or case.variant == "autocast" \
            or obs.ref_widened or "random" in spec.semantics:
        return None
    dtypes = [t.dtype for t in case.materialize("cpu") if isinstance(t, torch.Tensor)]
    kwargs = case.kwargs_dict()

    def zero_d(numbers):
        with torch.no_grad():
            out = spec.fn(*[torch.tensor(v, dtype=d) for v, d in zip(numbers, dtypes)], **kwargs)
        leaves = [o.item() if isinstance(o, torch.Tensor) else o for o in flatten_outputs(out)]
        return tuple(leaves) if len(leaves) > 1 else leaves[0]
    got = per_element(obs, ballots, zero_d)
    if isinstance(got, str):
        return got
    cut, refs = got
    return _accuse("cpu-scalar", "cpu", "cpu-wrong", "eager CPU on each disputed element alone (0-d)",
                   [refs.get(i) for i in range(max(refs) + 1)], cut)
