"""``scalar``: an elementwise op recomputed at each disputed element alone, from the
inputs' numbers at that position, with Python's ``math``/``cmath``, mpmath at high
precision or exact integers (``scalar_refs.py``): no kernel of torch's at all.

Also what the CPU's own scalar path needs (``self_checks.cpu_scalar``): the inputs'
values at each disputed position of a broadcast elementwise result.
"""
from __future__ import annotations

import math

import torch

from . import Vote, juror
from .ballots import sampled_values, tally
from .references import NotApplicable

# Disputed elements recomputed per output leaf (mpmath at 200 bits is slow; a few
# dozen positions say as much as thousands).
MAX_ELEMENTS = 64


def element_inputs(obs, ballot: dict, limit: int = MAX_ELEMENTS):
    """[(flat position, the inputs' Python numbers there)] for the first ``limit``
    disputed positions of an elementwise result, or None where the leaf is not the
    broadcast of the inputs (not elementwise)."""
    inputs = [t for t in obs.case.materialize("cpu") if isinstance(t, torch.Tensor)]
    if not inputs:
        return None
    try:
        shape = torch.broadcast_shapes(*(t.shape for t in inputs))
    except RuntimeError:
        return None
    if tuple(shape) != tuple(ballot["dut"].shape):
        return None
    flat = [t.expand(shape).reshape(-1) if t.numel() else t.reshape(-1) for t in inputs]
    out = []
    for pos in torch.nonzero(ballot["judged"]).reshape(-1)[:limit].tolist():
        out.append((pos, tuple(t[pos].item() for t in flat)))
    return out


def wrapped(value: int, dtype: torch.dtype) -> int:
    """An exact integer as ``dtype``'s two's-complement arithmetic leaves it, stored
    as int64 bits (uint64 too: the jury compares integers by their int64 bits)."""
    if dtype == torch.bool:
        return int(bool(value))
    bits = torch.iinfo(dtype).bits
    value %= 1 << bits
    signed = torch.iinfo(dtype).min < 0
    if (signed or dtype == torch.uint64) and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def leaf_tensor(values: dict[int, object], like: torch.Tensor) -> torch.Tensor:
    """A tensor shaped like ``like`` holding ``values`` at their flat positions (the
    others are never read: the jury judges the positions it was given)."""
    n = like.numel()
    if like.is_complex():
        out = torch.full((n,), complex("nan"), dtype=torch.complex128)
    elif like.is_floating_point():
        out = torch.full((n,), math.nan, dtype=torch.float64)
    else:
        out = torch.zeros((n,), dtype=torch.int64)
    for pos, v in values.items():
        out[pos] = wrapped(int(v), like.dtype) if not (like.is_floating_point() or like.is_complex()) else v
    return out.reshape(like.shape)


def restricted(ballots: list[dict], computed: dict[int, set]) -> list[dict]:
    """The ballots judged only where a value was computed (``computed``: leaf -> flat
    positions)."""
    out = []
    for b in ballots:
        positions = computed.get(b["index"])
        if not positions:
            continue
        mask = torch.zeros_like(b["judged"])
        mask[list(positions)] = True
        out.append(dict(b, judged=b["judged"] & mask))
    return out


def per_element(obs, ballots: list[dict], compute) -> tuple[list[dict], dict[int, torch.Tensor]] | str:
    """Run ``compute(numbers) -> value or tuple of values (one per output leaf)`` at each
    disputed element: (the ballots cut to what was computed, leaf -> reference tensor),
    or why nothing could be."""
    values: dict[int, dict[int, object]] = {}
    skipped = ""
    for b in ballots:
        positions = element_inputs(obs, b)
        if positions is None:
            return "not an elementwise result of its inputs"
        for pos, numbers in positions:
            try:
                result = compute(numbers)
            except NotApplicable as exc:
                skipped = str(exc) or "not applicable"
                continue
            except (ArithmeticError, ValueError, TypeError) as exc:
                skipped = f"{type(exc).__name__}"
                continue
            leaves = result if isinstance(result, tuple) else (result,)
            if b["index"] >= len(leaves):
                return "its result has another structure"
            values.setdefault(b["index"], {})[pos] = leaves[b["index"]]
    if not values:
        return f"no disputed element computed ({skipped})" if skipped else "no disputed element computed"
    computed = {i: set(v) for i, v in values.items()}
    refs = {b["index"]: leaf_tensor(values[b["index"]], b["dut"]) for b in ballots if b["index"] in values}
    return restricted(ballots, computed), refs


@juror("scalar", witness="independent",
       doc="each disputed element alone with math/cmath, mpmath at high precision or exact integers")
def scalar_vote(obs, failure, ballots):
    from .scalar_refs import SCALAR
    fn = SCALAR.get(obs.spec.base_name)
    if fn is None or failure.oracle == "grads" or obs.case.variant == "autocast":
        return None
    kwargs = obs.case.kwargs_dict()
    got = per_element(obs, ballots, lambda numbers: fn(numbers, kwargs))
    if isinstance(got, str):
        return got
    cut, refs = got
    says = tally(cut, refs)
    if says is None:
        return "its values do not line up with the disputed outputs"
    return Vote("scalar", "independent", says, "each element alone, in exact or 200-bit arithmetic",
                sampled_values(cut, refs))
