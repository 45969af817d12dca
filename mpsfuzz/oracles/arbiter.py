"""``arbiter``: when the DUT and CPU disagree in a floating dtype, decide who is wrong
by computing the op in float64/complex128 on the CPU.

The rule is the one torch.compile's accuracy checks use: a result is acceptable when its
error against the float64 result is within ``MULTIPLIER`` times the other side's error
(plus a tenth of the dtype's atol). Errors are root-mean-square over positions finite on
all three; a side whose non-finite positions (NaN, inf, and their signs) disagree with
float64's at more positions than the other side's is the worse one. The float64 result is
first rounded to the output dtype, so overflow to inf in that dtype counts as correct.

Verdicts: the DUT is wrong (the finding stands, with the errors attached); the CPU is
wrong (re-attributed: a finding of the ``arbiter`` oracle that blames CPU, kept apart
from target bugs); both are as close (dismissed: the tolerance was too tight for the
op). Low-precision ops are judged this way rather than by widening tolerances.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from ..fuzzer.dtypes import name_of
from ..fuzzer.recipes import Case, DtypeArg
from . import Failure, oracle
from .observation import Observation, Raised
from .tolerances import tolerance
from .values import compare_tensors, flatten_outputs

MULTIPLIER = 2.0
ARBITRATED = {("values", "wrong-values"), ("grads", "wrong-values"), ("layout", "layout-wrong-values")}


def _wide(dtype: torch.dtype) -> torch.dtype:
    if dtype.is_complex:
        return torch.complex128
    if dtype.is_floating_point:
        return torch.float64
    return dtype


def float64_side(obs: Observation):
    """The op on float64/complex128 copies of the inputs on the CPU (cached)."""
    if "float64" in obs.cache:
        return obs.cache["float64"]
    from ..fuzzer.executor import run_side
    case = obs.case
    inputs = [t.to(_wide(t.dtype)) for t in case.materialize("cpu")]
    kwargs = {k: (_wide(v) if isinstance(v, torch.dtype) else v) for k, v in case.kwargs_dict().items()}
    variant = "grad" if case.variant == "grad" else "functional"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # int -> float results come out in float64
    try:
        side = run_side(obs.spec, Case(case.op, case.inputs, case.kwargs, variant), kwargs, "cpu", inputs=inputs)
    finally:
        torch.set_default_dtype(previous)
    side.raw = None
    obs.cache["float64"] = side
    return side


def _errors(x: torch.Tensor, truth: torch.Tensor, finite_all: torch.Tensor) -> tuple[int, float]:
    """(positions whose non-finiteness disagrees with truth, RMS error where all finite)."""
    if x.is_complex():
        bad_nonfinite = torch.isfinite(x) != torch.isfinite(truth)
    else:
        same = (torch.isnan(x) & torch.isnan(truth)) | (torch.isinf(x) & (x == truth)) | (torch.isfinite(x) & torch.isfinite(truth))
        bad_nonfinite = ~same
    diff = torch.where(finite_all, (x - truth).abs(), torch.zeros((), dtype=torch.float64))
    n = int(finite_all.sum())
    rms = math.sqrt(float((diff ** 2).sum()) / n) if n else 0.0
    return int(bad_nonfinite.sum()), rms


def judge_leaf(dut: torch.Tensor, cpu: torch.Tensor, exact: torch.Tensor, atol: float) -> tuple[str, dict]:
    """'dut-wrong', 'cpu-wrong' or 'both-close' for one output, with the numbers."""
    wide = torch.complex128 if cpu.is_complex() else torch.float64
    truth = exact.to(cpu.dtype).to(wide).reshape(-1)  # rounded to the output dtype
    d, c = dut.to(wide).reshape(-1), cpu.to(wide).reshape(-1)
    finite_all = torch.isfinite(d) & torch.isfinite(c) & torch.isfinite(truth)
    nf_d, err_d = _errors(d, truth, finite_all)
    nf_c, err_c = _errors(c, truth, finite_all)
    numbers = {"target_error": err_d, "cpu_error": err_c, "target_nonfinite_wrong": nf_d,
               "cpu_nonfinite_wrong": nf_c}
    slack = atol / 10.0
    if nf_d > nf_c or (nf_d and nf_d == nf_c):
        return "dut-wrong", numbers
    if err_d > MULTIPLIER * err_c + slack:
        return "dut-wrong", numbers
    if nf_c > nf_d or err_c > MULTIPLIER * err_d + slack:
        return "cpu-wrong", numbers
    return "both-close", numbers


def verdict(obs: Observation, failure: Failure) -> tuple[str, dict]:
    """Arbitrate every mismatching floating output of the failure's comparison."""
    side = float64_side(obs)
    if isinstance(side.outputs, Raised):
        return "undecided", {"reason": f"float64 run raised {side.outputs.type}"}
    if failure.oracle == "grads":
        dut, cpu, exact = obs.dut_side.grads, obs.ref_side.grads, side.grads
    elif failure.oracle == "layout":  # awkward vs contiguous, both on the DUT
        dut, cpu, exact = obs.dut, obs.dut_contiguous.outputs, side.outputs
    else:
        dut, cpu, exact = obs.dut, obs.ref, side.outputs
    if dut is None or cpu is None or exact is None:
        return "undecided", {"reason": "no float64 result to compare with"}
    dut, cpu, exact = flatten_outputs(dut), flatten_outputs(cpu), flatten_outputs(exact)
    if not (len(dut) == len(cpu) == len(exact)):
        return "undecided", {"reason": "float64 result has a different structure"}
    verdicts = []
    for d, c, e in zip(dut, cpu, exact):
        if d is None or c is None or e is None or d.shape != c.shape or d.shape != e.shape:
            continue
        if not (c.is_floating_point() or c.is_complex()):
            continue
        rtol, atol = tolerance(name_of(c.dtype), rtol_scale=obs.spec.rtol_scale, atol_scale=obs.spec.atol_scale)
        if compare_tensors(d, c, rtol, atol) is None:
            continue
        verdicts.append(judge_leaf(d, c, e, atol))
    if not verdicts:
        return "undecided", {"reason": "no floating output to arbitrate"}
    for wanted in ("dut-wrong", "cpu-wrong"):
        for v, numbers in verdicts:
            if v == wanted:
                return v, numbers
    return "both-close", verdicts[0][1]


def _numbers_line(numbers: dict) -> str:
    if "reason" in numbers:
        return numbers["reason"]
    return (f"RMS error vs float64: target {numbers['target_error']:.3g}, CPU {numbers['cpu_error']:.3g}; "
            f"non-finite disagreements: target {numbers['target_nonfinite_wrong']}, CPU {numbers['cpu_nonfinite_wrong']}")


@oracle("arbiter", stage="verdict",
        doc="float64 decides numeric mismatches: target wrong, CPU wrong (own category), or both close")
def arbitrate(obs: Observation, failure: Failure) -> Failure | None:
    if (failure.oracle, failure.kind) not in ARBITRATED:
        return failure
    try:
        result, numbers = verdict(obs, failure)
    except Exception as exc:  # the float64 run is best effort: keep the finding as it is
        result, numbers = "undecided", {"reason": f"arbiter failed: {type(exc).__name__}"}
    note = f"\nfloat64 arbiter: {result} ({_numbers_line(numbers)})"
    details = dict(failure.details, verdict=result, arbiter=numbers)
    if result == "both-close":
        return None
    if failure.oracle == "layout":
        # Either layout being the less accurate one is a layout bug of the target.
        return replace(failure, message=failure.message + note.replace("dut-wrong", "non-contiguous worse")
                       .replace("cpu-wrong", "contiguous worse"), details=details)
    if result == "cpu-wrong":
        return Failure(oracle="arbiter", kind="cpu-wrong", severity="low", blame="cpu",
                       title=f"CPU `{obs.spec.name}` is less accurate than {obs.target_name} (float64 arbiter)",
                       message=failure.message + note, dedup_key=("cpu-wrong", failure.oracle),
                       details=details)
    return replace(failure, message=failure.message + note, details=details)
