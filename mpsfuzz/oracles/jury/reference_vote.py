"""How a table juror votes: run an independent reference the way the float64 juror runs
the op (dense float64 copies of the inputs, the same call, gradients by autograd with
the same upstream gradient), and read the target and CPU against its value at each
disputed position."""
from __future__ import annotations

import torch

from ...execution.observation import Raised
from ..values import flatten_outputs
from . import Vote
from .ballots import sampled_values, tally
from .float64 import dense_wide_inputs, wide_run


def reference_leaves(obs, failure, fn, runner=None) -> list | str:
    """The reference's leaves for ``failure`` (its outputs, or its gradients for the
    grads oracle), or why there are none. ``runner``: as ``run_side``'s (the call,
    forward and backward, runs inside it)."""
    side = wide_run(obs, dense_wide_inputs(obs.case), fn=fn, runner=runner)
    if isinstance(side.outputs, Raised):
        first = (side.outputs.message.strip().splitlines() or [""])[0][:160]
        if side.outputs.type == "NotApplicable":
            return f"not applicable: {first}"
        return f"raised {side.outputs.type}: {first}"
    if failure.oracle == "grads":
        if side.grads is None or all(g is None for g in side.grads):
            return "no gradients (the reference is not differentiable)"
        return list(side.grads)
    return flatten_outputs(side.outputs)


def vote_with(name: str, witness: str, words: str, leaves: list, ballots: list[dict]) -> Vote | str:
    """A vote from a reference's ``leaves`` (index-aligned with the compared outputs)."""
    references = {b["index"]: leaves[b["index"]] for b in ballots
                  if b["index"] < len(leaves) and isinstance(leaves[b["index"]], torch.Tensor)}
    says = tally(ballots, references)
    if says is None:
        return "its result does not line up with the disputed outputs"
    return Vote(name, witness, says, words, sampled_values(ballots, references))


def called_as_the_op(reference):
    """A table reference (``ref(inputs, kwargs)``, references.py) called as the op is
    (``fn(*inputs, **kwargs)``): what ``run_side`` calls."""
    def call(*inputs, **kwargs):
        return reference(list(inputs), kwargs)
    return call


def table_vote(name: str, words: str, reference, obs, failure, ballots: list[dict]) -> Vote | str:
    leaves = reference_leaves(obs, failure, called_as_the_op(reference))
    if isinstance(leaves, str):
        return leaves
    return vote_with(name, "independent", words, leaves, ballots)
