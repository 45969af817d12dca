"""What the jury votes on: the output positions where the target and eager CPU still
disagree once the float64 rules have excused what rounding explains, and how a
reference's value there is read.

A *ballot* is one output leaf in dispute: ``{"index": leaf, "dut": tensor, "cpu":
tensor, "judged": bool mask over the flattened leaf, "tol": float64 tolerance per
position}``. The float64 juror leaves its ballots in ``obs.cache`` (its tolerance
includes the accumulation bound of half-precision results); where it gave none (its run
raised, the leaf is an integer one), :func:`plain_ballots` compares the two sides with
the dtype's tolerance.
"""
from __future__ import annotations

import math

import torch

from ...execution.observation import Raised
from ...generation.dtypes import name_of
from ..conversions import excuse_undefined
from ..values import flatten_outputs, leaf_tolerance
from .float64 import as_int64, near

# Disputed positions a vote records (the finding keeps them, the repro script prints them).
SAMPLES = 4


def ballots_of(obs, failure) -> list[dict]:
    """The float64 juror's ballots for ``failure``, else the plain comparison's."""
    cached = obs.cache.get(("ballots", failure.oracle))
    return list(cached) if cached else plain_ballots(obs, failure)


def sides_of(obs, failure) -> tuple[list, list]:
    """(the target's leaves, CPU's leaves) that ``failure`` compared."""
    if failure.oracle == "grads":
        dut = obs.dut_side.grads if obs.dut_side is not None else None
        cpu = obs.ref_side.grads if obs.ref_side is not None else None
        return list(dut or []), list(cpu or [])
    dut = obs.dut
    if failure.oracle == "values" and not isinstance(dut, Raised) and not isinstance(obs.ref, Raised):
        # no ballot where a conversion is undefined (oracles/conversions.py; pytorch#160744)
        dut = excuse_undefined(obs.case, obs.spec, dut, obs.ref)
    return flatten_outputs(dut), flatten_outputs(obs.ref)


def plain_ballots(obs, failure) -> list[dict]:
    """Ballots from the two sides alone: every position outside the dtype's tolerance."""
    from ..grads import BACKWARD_SCALE
    dut, cpu = sides_of(obs, failure)
    out = []
    for i, (d, c) in enumerate(zip(dut, cpu)):
        if not (isinstance(d, torch.Tensor) and isinstance(c, torch.Tensor)) or d.shape != c.shape \
                or d.dtype != c.dtype or not d.numel():
            continue
        if not (c.is_floating_point() or c.is_complex()):
            judged = as_int64(d).reshape(-1) != as_int64(c).reshape(-1)
            tol = torch.zeros(judged.shape, dtype=torch.float64)
        else:
            rtol, atol = leaf_tolerance(obs.spec, name_of(c.dtype),
                                        scale=BACKWARD_SCALE if failure.oracle == "grads" else 1.0,
                                        widened=obs.ref_widened and failure.oracle == "values")
            wide = torch.complex128 if c.is_complex() else torch.float64
            cw = c.to(wide).reshape(-1)
            tol = atol + rtol * cw.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0)
            judged = ~near(d.to(wide).reshape(-1), cw, tol)
        if bool(judged.any()):
            out.append({"index": i, "dut": d, "cpu": c, "judged": judged, "tol": tol})
    return out


def _rounded(reference: torch.Tensor, like: torch.Tensor) -> torch.Tensor | None:
    """``reference`` in ``like``'s dtype (what a correct backend returns), flattened; for
    floating leaves widened again for comparison. None where it cannot stand for it."""
    if not isinstance(reference, torch.Tensor) or reference.numel() != like.numel():
        return None
    reference = reference.detach().reshape(-1)
    if like.is_floating_point() or like.is_complex():
        if reference.is_complex() and not like.is_complex():
            return None
        wide = torch.complex128 if like.is_complex() else torch.float64
        return reference.to(like.dtype).to(wide)
    if reference.is_floating_point() or reference.is_complex():
        # an integer result from a floating reference: only an exact integer stands
        if reference.is_complex() or not bool((reference == reference.round()).all()):
            return None
        reference = reference.to(torch.int64)
    return as_int64(reference.to(like.dtype))


def read_leaf(ballot: dict, reference: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(target is off the reference, CPU is off it) over the ballot's disputed positions,
    or None where the reference cannot be compared (another shape, a complex value for a
    real leaf, a fraction for an integer leaf)."""
    d, c = ballot["dut"], ballot["cpu"]
    r = _rounded(reference, d)
    if r is None:
        return None
    judged, tol = ballot["judged"], ballot["tol"].nan_to_num(0.0, posinf=float("inf"), neginf=0.0)
    if "rel" in ballot:
        # the dtype's tolerance around the juror's own value: where eager CPU is the wrong
        # one, float64's result (CPU's kernel) is far from the truth and so is its scale
        # (issue 30, H200: a float16 antialiased resize 1 ulp off the formula's 5.03 was called
        # wrong with the tolerance of CPU's 0.159)
        tol = torch.maximum(tol, ballot["atol"] + ballot["rel"] * r.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0))
    if d.is_floating_point() or d.is_complex():
        wide = torch.complex128 if d.is_complex() else torch.float64
        dw, cw = d.to(wide).reshape(-1), c.to(wide).reshape(-1)
        return (judged & ~near(dw, r, tol) & ~_overflow_within(dw, r, tol, d.dtype),
                judged & ~near(cw, r, tol) & ~_overflow_within(cw, r, tol, c.dtype))
    di, ci = as_int64(d).reshape(-1), as_int64(c).reshape(-1)
    return judged & (di != r), judged & (ci != r)


def _overflow_within(x: torch.Tensor, r: torch.Tensor, tol: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where ``x`` is the infinity of the reference's sign and the reference is within
    ``tol`` of the dtype's largest value: one rounding the tolerance allows takes it past
    the range (a float64 attention over a value of float64's lowest: softmax weights
    summing to 1 + u give -inf, which a float64 decomposition leaves at -1.8e308; H200,
    docs/real-findings.md). Not for complex leaves."""
    if x.is_complex() or not dtype.is_floating_point:
        return torch.zeros(x.shape, dtype=torch.bool)
    top = float(torch.finfo(dtype).max)
    return torch.isinf(x) & torch.isfinite(r) & (torch.sign(x) == torch.sign(r)) & (r.abs() + tol >= top)


def what_it_says(target_off: bool, cpu_off: bool) -> str:
    if target_off and cpu_off:
        return "both-wrong"
    if target_off:
        return "target-wrong"
    if cpu_off:
        return "cpu-wrong"
    return "both-right"


def _number(x) -> float | str | list:
    """A JSON-able number: non-finite floats as text, complex as [re, im]."""
    if isinstance(x, complex):
        return [_number(x.real), _number(x.imag)]
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    return x


def _position(flat: int, shape) -> list[int]:
    out = []
    for size in reversed(tuple(shape)):
        out.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return list(reversed(out))


def disputed_positions(ballots: list[dict], limit: int = SAMPLES) -> list[dict]:
    """The first disputed positions, with the two sides' values and the ballot's
    tolerance there: what a finding shows, and what a repro script of eager CPU's (or
    both backends') bug checks each side against the references with (issue 37)."""
    out = []
    for b in ballots:
        tol = b["tol"].reshape(-1).nan_to_num(0.0, posinf=math.inf, neginf=0.0)
        for flat in torch.nonzero(b["judged"]).reshape(-1)[:limit].tolist():
            out.append({"leaf": b["index"], "index": _position(flat, b["dut"].shape),
                        "target": _number(b["dut"].reshape(-1)[flat].item()),
                        "cpu": _number(b["cpu"].reshape(-1)[flat].item()),
                        "tol": _number(float(tol[flat].item()) if tol.numel() > flat else 0.0)})
            if len(out) >= limit:
                return out
    return out


def sampled_values(ballots: list[dict], references: dict[int, torch.Tensor], limit: int = SAMPLES) -> list:
    """A reference's values at :func:`disputed_positions` (rounded to the output dtype)."""
    out = []
    for b in ballots:
        ref = references.get(b["index"])
        if ref is None:
            continue
        r = ref.detach().reshape(-1)
        if r.numel() != b["dut"].numel():
            continue
        if b["dut"].is_floating_point() or b["dut"].is_complex():
            r = r.to(b["dut"].dtype)
        for flat in torch.nonzero(b["judged"]).reshape(-1)[:limit].tolist():
            out.append(_number(r[flat].item()))
            if len(out) >= limit:
                return out
    return out


def tally(ballots: list[dict], references: dict[int, torch.Tensor]) -> str | None:
    """What a two-sided reference says over all disputed leaves (``references``: leaf
    index -> its value), or None where it could not be compared on any leaf."""
    target_off = cpu_off = False
    compared = False
    for b in ballots:
        ref = references.get(b["index"])
        if ref is None:
            continue
        read = read_leaf(b, ref)
        if read is None:
            continue
        compared = True
        target_off |= bool(read[0].any())
        cpu_off |= bool(read[1].any())
    return what_it_says(target_off, cpu_off) if compared else None


def dtype_label(ballots: list[dict]) -> str:
    return ", ".join(sorted({name_of(b["dut"].dtype) for b in ballots}))
