"""``errors``: the DUT raises where CPU does not, or the reverse.

"Not implemented on this device/dtype" errors are classified ``unsupported`` by the
executor: counted and listed, never a finding.

The device accepting what CPU rejects is usually a capability CPU lacks (its FFT
library plans at most a few dims, its kernels skip a dtype): a ``capability`` note,
listed apart, not a bug, once the device's result has been checked where it can be:
against the op in float64 on CPU, or against a smaller equivalent call the catalogue
declares (``OpSpec.equivalent``). A wrong result there is a bug (``accepts-wrong``). An
input CPU rejects as out of bounds is different: a device that accepts it skips a
bounds check (``ref-raises``, a bug).
"""
from __future__ import annotations

import math
import re

import torch

from . import Failure, collapse_shapes, oracle
from ..execution.observation import Observation, Raised
from ..generation.arg_extremes import extreme_arguments, past_32_bits
from ..generation.dtypes import INTEGRAL
from .values import compare_outputs, flatten_outputs, variant_phrase


def _device_fault(message: str) -> bool:
    from ..execution.error_kinds import is_device_fault
    return is_device_fault(message)


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(\.\d+)?")


def normalise_message(message: str) -> str:
    """First line of an error with addresses, sizes and numbers masked and shape lists
    of any rank collapsed, for dedup keys."""
    first = (message.strip().splitlines() or [""])[0]
    return collapse_shapes(_NUMBERS.sub("N", first))[:160]


@oracle("errors", stage="case", doc="the DUT raises where CPU does not, or the reverse")
def check_errors(obs: Observation) -> Failure | None:
    dut_raised, ref_raised = isinstance(obs.dut, Raised), isinstance(obs.ref, Raised)
    if dut_raised and _device_fault(obs.dut.message):
        if (ref_raised and _designed_assert(obs.dut.message, obs.ref)) or _asserted_on_an_empty_dim(obs):
            # The device's designed check: CUDA kernels check their input with a
            # device-side assert (an index's bounds, multinomial's probabilities), and
            # eager CPU rejects the same input with a clean error. Both reject it
            # (take_along_dim of an empty input with index 0; multinomial of a row that
            # sums to 0, issue 37).
            return None
        # Otherwise even where CPU rejects the input too: a device fault (an illegal
        # access, an assert on valid input) kills the context instead of raising a
        # clean error.
        return device_fault_failure(obs.spec.name, obs.target_name, obs.dut,
                                    obs.ref if ref_raised else None)
    if dut_raised and not ref_raised and not obs.dut.unsupported:
        resized = _inplace_resized_self(obs)
        if resized is not None:
            # CPU is the one in the wrong: an in-place op may not change self's shape
            # (``add_`` refuses: "output with shape [] doesn't match the broadcast
            # shape"). The target refusing it is right; eager CPU's bug is listed apart.
            return Failure(
                oracle="errors", kind="ref-resizes-self", severity="medium", blame="cpu",
                title=f"`{obs.spec.name}` (in-place form) resizes self on CPU instead of raising",
                message=f"CPU's in-place call turned self of shape {resized[0]} into shape {resized[1]}; "
                        f"{obs.target_name} raised {obs.dut.type}: {obs.dut.message}",
                dedup_key=("ref-resizes-self",))
        wide = past_32_bits(obs.case)
        if wide:
            # A kernel that indexes with 32 bits may refuse an argument past them; eager
            # CPU accepting it proves nothing (it truncates max_pool1d's kernel_size of
            # 2^32 + 1 to 1 and returns the input: issue 38, argument extremes). A
            # refusal is a limit, listed apart; a wrong result would be a bug.
            return _refused_argument(obs, "past-32-bits", "an argument past 32 bits that CPU accepts",
                                     f"CPU returned a result for {', '.join(wide)}.")
        derived = _CHECKED_CONVERSION.search(obs.dut.message) and extreme_arguments(obs.case)
        if derived:
            # A number computed from an extreme argument that the dtype cannot hold
            # (lp_pool's 1 / norm_type of float32's smallest subnormal, 7e44, as a float
            # exponent): torch's checked conversion refuses it on one backend, another
            # computes in float64 or saturates. Which is no bug (issue 38, undefined
            # conversions of argument extremes); listed apart as a limit.
            return _refused_argument(obs, "undefined-conversion", "a number derived from an extreme argument "
                                     "that its dtype cannot hold (an undefined conversion)",
                                     f"CPU returned a result for {', '.join(derived)} at an extreme.")
        return Failure(
            oracle="errors", kind="dut-raises", severity="high",
            title=f"`{obs.spec.name}`{variant_phrase(obs.case)} raises {obs.dut.type} on {obs.target_name} "
                  "but works on CPU",
            message=f"{obs.target_name} raised {obs.dut.type}: {obs.dut.message}\nCPU returned a result.",
            dedup_key=("dut-raises", obs.dut.type, normalise_message(obs.dut.message)))
    if ref_raised and not dut_raised and not obs.ref.unsupported:
        return _accepted_where_cpu_rejects(obs)
    if dut_raised and ref_raised and not obs.dut.unsupported and not obs.ref.unsupported:
        return _both_refuse_the_layout(obs)
    return None



def _refused_argument(obs: Observation, key: str, what: str, cpu_line: str) -> Failure:
    """The target refusing an extreme argument that CPU computes with: a limit, listed
    apart as a capability (neither a bug nor silence)."""
    return Failure(
        oracle="errors", kind="capability", severity="low", blame="capability",
        title=f"`{obs.spec.name}` rejects on {obs.target_name} {what} (a limit, not a bug)",
        message=f"{obs.target_name} raised {obs.dut.type}: {obs.dut.message}\n{cpu_line}",
        dedup_key=("capability", key, obs.dut.type, normalise_message(obs.dut.message)))

def _both_refuse_the_layout(obs: Observation) -> Failure | None:
    """Both backends raise on non-contiguous (or aliased) inputs whose contiguous copies
    each of them accepts: a bug of PyTorch itself (gru's cuDNN path and channel_shuffle
    refused gapped inputs on CUDA alone; where CPU refuses too, it is filed once, as
    both's). CPU's copies run first: they settle most cases with no device call."""
    from ..execution.executor import contiguous_copies, run_side
    case = obs.case
    if obs.target is None or obs.spec.reference_fn is not None or case.variant not in ("functional", "method") \
            or not (any(not r.is_plain() for r in case.inputs) or case.is_aliased()) \
            or "random" in obs.spec.semantics:
        return None
    kwargs = case.kwargs_dict()
    cpu = run_side(obs.spec, case, kwargs, "cpu", inputs=contiguous_copies(case, "cpu"))
    if isinstance(cpu.outputs, Raised):
        return None
    target = obs.target
    dut = run_side(obs.spec, case, kwargs, target.device, runner=target.run, synchronize=target.synchronize,
                   inputs=contiguous_copies(case, target.device))
    cpu.raw = dut.raw = None
    if isinstance(dut.outputs, Raised):
        if _device_fault(dut.outputs.message):
            obs.poisoned = True
        return None
    awkward = ", ".join(f"input {i}: {r.describe_layout()}" for i, r in enumerate(case.inputs) if not r.is_plain())
    return Failure(
        oracle="errors", kind="raises-on-noncontiguous", severity="medium", blame="both",
        title=f"`{obs.spec.name}`{variant_phrase(case)} raises {obs.dut.type} on non-contiguous inputs whose "
              f"contiguous copies work, on {obs.target_name} and on eager CPU alike",
        message=f"{obs.target_name} raised {obs.dut.type}: {obs.dut.message}\neager CPU raised {obs.ref.type}: "
                f"{obs.ref.message}\nboth accept contiguous copies of the inputs ({awkward or 'aliased inputs'})",
        dedup_key=("raises-on-noncontiguous", obs.dut.type, normalise_message(obs.dut.message), "both"))


def _inplace_resized_self(obs: Observation) -> tuple[tuple, tuple] | None:
    """(self's shape, CPU's result shape) where CPU's in-place call broadcast self to a
    larger shape (in-place shape ops such as ``unsqueeze_`` keep the element count)."""
    if obs.case.variant != "inplace" or not obs.case.inputs:
        return None
    before = tuple(obs.case.inputs[0].shape)
    after = flatten_outputs(obs.ref)
    if len(after) != 1 or not isinstance(after[0], torch.Tensor):
        return None
    shape = tuple(after[0].shape)
    try:
        broadcast = torch.broadcast_shapes(before, shape) == torch.Size(shape)
    except RuntimeError:
        return None
    return (before, shape) if broadcast and math.prod(shape) > math.prod(before) else None


def device_fault_failure(op: str, target_name: str, raised: Raised, cpu_raised: Raised | None = None) -> Failure:
    """``cpu_raised``: CPU's own error where it rejects the input too (the repro script
    then shows it instead of expecting CPU to work)."""
    message = f"{target_name} raised {raised.type}: {raised.message}"
    details = {}
    if cpu_raised is not None:
        first = (cpu_raised.message.strip().splitlines() or [""])[0][:200]
        message += f"\nCPU rejects the input too, with a clean error: {cpu_raised.type}: {first}"
        details = {"cpu_raised": cpu_raised.type}
    return Failure(
        oracle="errors", kind="device-fault", severity="critical",
        title=f"`{op}` triggers a device fault on {target_name}",
        message=message, dedup_key=("device-fault", normalise_message(raised.message)), details=details)


# CPU's words for an input outside the valid range: a device that accepts it has no check.
_OUT_OF_BOUNDS = re.compile(r"out of (bounds|range)|index \S+ is out|must be in the range|must be in range",
                            re.IGNORECASE)


def _out_of_bounds(raised: Raised) -> bool:
    return raised.type == "IndexError" or bool(_OUT_OF_BOUNDS.search(raised.message))


# What eager CPU says of values a device kernel checks with a device-side assert by
# design, since checking them on the host would take a synchronisation: an index's bounds,
# a distribution's probabilities (multinomial of a row summing to 0: "invalid multinomial
# distribution (sum of probabilities <= 0)"; of a NaN: "probability tensor contains
# either `inf`, `nan` or element < 0"), and offsets past the input they index into
# (embedding_bag's bag offsets of 2^31 - 1 into 9 indices: "offsets[-1] can not be
# greater than input's length 9"; an H200 asserted, docs/real-findings.md).
# torch's checked conversion of a Scalar into the dtype a kernel computes in.
_CHECKED_CONVERSION = re.compile(r"cannot be converted to type \S+ without overflow")
_CHECKED_ON_DEVICE = re.compile(_OUT_OF_BOUNDS.pattern + r"|probabilit|multinomial distribution"
                                r"|can ?not be greater than input's length", re.IGNORECASE)


def _designed_assert(dut_message: str, cpu: Raised) -> bool:
    """The device stopped at an assert (not an illegal access or a launch failure: those
    are missing checks) on values eager CPU rejects in so many words (not any error:
    "Index is supposed to be a vector" is a malformed index, which the host checks)."""
    return "device-side assert" in dut_message.lower() and not cpu.unsupported \
        and bool(_CHECKED_ON_DEVICE.search(cpu.message))


def _asserted_on_an_empty_dim(obs: Observation) -> bool:
    """A device-side assert where an input is empty and eager CPU rejects the call or
    returns nothing: an index into an empty dim is out of bounds whatever its value, and
    a kernel's assert fires only in threads that ran, so on the non-empty input, the
    indices. CPU's host check may catch it first ("index_select(): self indexing axis dim
    should be positive"), fail another way (take_along_dim: ZeroDivisionError), or skip a
    call with nothing to compute (index_add into 0 rows); CUDA's bounds check asserts
    (issue 37, H200: five such cases of boundary siblings filed as device faults)."""
    if "device-side assert" not in obs.dut.message.lower() or not any(r.numel == 0 for r in obs.case.inputs):
        return False
    if isinstance(obs.ref, Raised):
        return not obs.ref.unsupported
    results = [t for t in flatten_outputs(obs.ref) if isinstance(t, torch.Tensor)]
    return bool(results) and all(t.numel() == 0 for t in results)


def _indexes_nothing(obs: Observation) -> bool:
    """Every integer input is empty: there is no index value that a bounds check could
    refuse, so what CPU rejects is the call's form, not a bound (index_copy of a 0-d
    self with no indices: "When source is scalar, index should have one element (got
    0)", an IndexError; issue 37, cuda-compiled, twice). Accepting it is a capability."""
    indices = [r for r in obs.case.inputs if r.dtype in INTEGRAL]
    return bool(indices) and all(r.numel == 0 for r in indices)


def _accepted_where_cpu_rejects(obs: Observation) -> Failure:
    op, target, ref = obs.spec.name, obs.target_name, obs.ref
    rejected = f"CPU raised {ref.type}: {ref.message}"
    key = (ref.type, normalise_message(ref.message))
    if _out_of_bounds(ref) and not _indexes_nothing(obs):
        return Failure(
            oracle="errors", kind="ref-raises", severity="medium",
            title=f"`{op}` accepts input on {target} that CPU rejects as out of bounds",
            message=f"{rejected}\n{target} returned a result (no bounds check).",
            dedup_key=("ref-raises", *key))
    against, mismatch = _check_result(obs)
    if mismatch is not None:
        return Failure(
            oracle="errors", kind="accepts-wrong", severity="high",
            title=f"`{op}` returns wrong values on {target} for an input CPU rejects",
            message=f"{rejected}\n{target} returned a result that is wrong against {against}:\n{mismatch}",
            dedup_key=("accepts-wrong", *key), details={"checked_against": against})
    checked = f"; it agrees with {against}" if against else "; there is nothing to check it against"
    return Failure(
        oracle="errors", kind="capability", severity="low", blame="capability",
        title=f"`{op}` accepts on {target} an input that CPU rejects (a capability, not a bug)",
        message=f"{rejected}\n{target} returned a result{checked}.",
        dedup_key=("capability", *key), details={"checked_against": against})


def _cast_like(expected, actual):
    """``expected``'s tensor leaves in the dtypes of ``actual``'s (leaf by leaf)."""
    exp, act = flatten_outputs(expected), flatten_outputs(actual)
    if len(exp) != len(act):
        return expected
    return tuple(e.to(a.dtype) if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) else e
                 for e, a in zip(exp, act))


def _check_result(obs: Observation) -> tuple[str | None, str | None]:
    """(what the device's result was checked against, the mismatch or None): the op in
    float64 on CPU when that runs, else the spec's smaller equivalent call."""
    from .jury.float64 import float64_side
    dut = flatten_outputs(obs.dut)
    if not any(isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) for t in dut):
        return None, None
    try:
        wide = float64_side(obs).outputs
    except Exception:
        wide = None
    if wide is not None and not isinstance(wide, Raised):
        against = "the op in float64 on CPU"
    elif obs.spec.equivalent is not None:
        against = "a smaller equivalent call on CPU"
        try:
            inputs = [t.to(torch.complex128 if t.is_complex() else torch.float64)
                      if t.is_floating_point() or t.is_complex() else t for t in obs.case.materialize("cpu")]
            with torch.no_grad():
                wide = obs.spec.equivalent(inputs, obs.case.kwargs_dict())
        except Exception as exc:
            return None, None  # the equivalent cannot run here either: nothing to check against
    else:
        return None, None
    problem = compare_outputs(obs.dut, _cast_like(wide, obs.dut), obs.spec)
    if problem is not None and against == "the op in float64 on CPU":
        # The arbiter's bounds hold here too: half-precision accumulation, overflow of
        # intermediates, results the inputs do not determine.
        from .jury.float64 import DISMISSED, verdict
        probe = Failure(oracle="errors", kind="accepts-wrong", severity="high", title="", message="")
        try:
            result, _ = verdict(obs, probe)
        except Exception:
            result = "undecided"
        if result in DISMISSED:
            return against, None
    return against, None if problem is None else problem[1]
