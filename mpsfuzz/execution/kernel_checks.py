"""Checks of a user's kernel that are not cases: does it reject what it documents it cannot take?

A kernel declared with ``mpsfuzz.tensor(contiguous=True)`` is only fuzzed with contiguous
inputs (that is its contract). Whether it *enforces* the contract is a separate, one-call
question: given a non-contiguous input, a kernel that validates its inputs raises; one
that does not either copes (returns the reference's answer) or silently returns wrong
values, which a caller who missed the documentation will not notice.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from ..generation.opspec import OpSpec
from ..generation.strategies import example_cases

VALIDATES, COPES, SILENTLY_WRONG = "validates", "copes", "silently-wrong"


@dataclass(frozen=True)
class ContiguityCheck:
    op: str
    input_index: int
    outcome: str        # VALIDATES, COPES or SILENTLY_WRONG
    detail: str         # the error it raised, or what came back

    def line(self) -> str:
        what = {VALIDATES: "rejects it (validates its inputs)",
                COPES: "accepts it and returns the reference's answer",
                SILENTLY_WRONG: "accepts it silently and returns WRONG values"}[self.outcome]
        return (f"kernel `{self.op}` requires input {self.input_index} contiguous; given a non-contiguous one "
                f"it {what}: {self.detail}")


def _gapped(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values in a view with a gap after every element (never contiguous when it
    has two or more elements)."""
    return torch.stack([t, torch.zeros_like(t)], dim=-1)[..., 0]


def check_contiguity(spec: OpSpec, target, *, seed: int = 0) -> list[ContiguityCheck]:
    """One call per input the kernel requires contiguous: that input gapped, the others as
    drawn (the first drawn case where it has two or more elements)."""
    out = []
    drawn = example_cases(spec, 50, seed=seed)
    for i in spec.contiguous_inputs:
        case = next((c for c in drawn if c.inputs[i].numel >= 2), None)
        if case is None:
            continue
        kwargs = case.kwargs_dict()
        inputs = case.materialize(target.device)
        inputs[i] = _gapped(inputs[i])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = target.run(spec.fn, *inputs, **kwargs)
                target.synchronize()
            except Exception as exc:  # the kernel's own check: what we hope to see
                message = (str(exc).strip().splitlines() or [""])[0][:160]
                out.append(ContiguityCheck(spec.name, i, VALIDATES, f"{type(exc).__name__}: {message}"))
                continue
            expected = spec.as_reference().fn(*case.materialize("cpu"), **kwargs)
        same = _close(result, expected)
        out.append(ContiguityCheck(spec.name, i, COPES if same else SILENTLY_WRONG,
                                   f"shape {tuple(case.inputs[i].shape)}, {case.inputs[i].dtype}"))
    return out


def _close(result, expected) -> bool:
    if isinstance(result, torch.Tensor) and isinstance(expected, torch.Tensor):
        try:
            torch.testing.assert_close(result.cpu(), expected, equal_nan=True, check_stride=False)
        except AssertionError:
            return False
        return True
    if isinstance(result, (tuple, list)) and isinstance(expected, (tuple, list)):
        return len(result) == len(expected) and all(_close(a, b) for a, b in zip(result, expected))
    return result == expected
