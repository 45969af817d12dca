"""Checks of a user's kernel that are not cases: does it reject what it documents it cannot take?

A kernel declared with ``mpsfuzz.tensor(contiguous=True)`` is only fuzzed with contiguous
inputs (that is its contract). Whether it *enforces* the contract is a separate, one-call
question: given a non-contiguous input, a kernel that validates its inputs raises; one
that does not either copes (returns the reference's answer) or silently returns wrong
values, which a caller who missed the documentation will not notice. The campaign asks
in a worker (:func:`check_contiguity_in`), as it runs every case: the kernel is the user's
code, and the driver's process must not touch the device.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

from ..generation import catalogue
from ..generation.opspec import OpSpec
from ..generation.recipes import Case
from ..generation.strategies import example_cases
from .observation import ProcessEvent
from .outcome import RaisedInWorker

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


def contiguity_cases(spec: OpSpec, *, seed: int = 0) -> list[tuple[int, Case]]:
    """(input index, case) per input the kernel requires contiguous: the first drawn case
    where that input has two or more elements (drawn here: no device needed)."""
    out = []
    drawn = example_cases(spec, 50, seed=seed)
    for i in spec.contiguous_inputs:
        case = next((c for c in drawn if c.inputs[i].numel >= 2), None)
        if case is not None:
            out.append((i, case))
    return out


def _check_one(spec: OpSpec, case: Case, target, i: int) -> ContiguityCheck:
    """One call of the kernel on ``target`` with input ``i`` of ``case`` gapped."""
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
            return ContiguityCheck(spec.name, i, VALIDATES, f"{type(exc).__name__}: {message}")
        expected = spec.as_reference().fn(*case.materialize("cpu"), **kwargs)
    return ContiguityCheck(spec.name, i, COPES if _close(result, expected) else SILENTLY_WRONG,
                           f"shape {tuple(case.inputs[i].shape)}, {case.inputs[i].dtype}")


def check_contiguity(spec: OpSpec, target, *, seed: int = 0) -> list[ContiguityCheck]:
    """One call per input the kernel requires contiguous, in this process (``target``
    touches its device here: the campaign's driver uses :func:`check_contiguity_in`)."""
    return [_check_one(spec, case, target, i) for i, case in contiguity_cases(spec, seed=seed)]


def contiguity_in_worker(case: Case, target, input_index: int) -> ContiguityCheck:
    """What :func:`check_contiguity_in` runs in the worker (``WorkerPool.call``)."""
    return _check_one(catalogue.get(case.op), case, target, input_index)


class ContiguityCheckError(RuntimeError):
    """The check could not say (the worker died, hung, or mpsfuzz failed): one line."""


def check_contiguity_in(pool, spec: OpSpec, *, timeout_s: float, seed: int = 0) -> list[ContiguityCheck]:
    """:func:`check_contiguity` in ``pool``'s worker, so that the process driving a
    campaign never touches the device with a user's kernel (a device context there
    would not survive the forks after it). ``spec`` must be in the catalogue (the
    worker looks it up by name)."""
    out = []
    for i, case in contiguity_cases(spec, seed=seed):
        reply = pool.call(contiguity_in_worker, case.to_json(), [i], op=spec.name, timeout_s=timeout_s)
        if isinstance(reply, ProcessEvent):
            how = f"exit code {reply.returncode}" if reply.kind == "died" else f"after {reply.timeout_s:g}s"
            raise ContiguityCheckError(f"the worker running it {'died' if reply.kind == 'died' else 'did not answer'} "
                                       f"({how})")
        if isinstance(reply, RaisedInWorker):
            last = (reply.traceback.strip().splitlines() or [""])[-1]
            raise ContiguityCheckError(last)
        out.append(reply)
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
