"""Jurors that read the float64 run: ``declared``, a user's kernel judged against the
reference its author declared (``@mpsfuzz.kernel(reference=...)``), which run in float64
is what right means for it, whatever eager CPU's kernels do; and ``float64``, the same
run for every other op, eager CPU's own kernels: an opinion the finding records, never
a witness."""
from __future__ import annotations

from ...execution.observation import Raised
from ..values import flatten_outputs
from . import juror
from .float64 import float64_side
from .reference_vote import vote_with


@juror("declared", witness="independent", doc="a user kernel's declared reference, in float64")
def declared_vote(obs, failure, ballots):
    if obs.spec.reference_fn is None:
        return None
    side = float64_side(obs)
    if isinstance(side.outputs, Raised):
        return f"the declared reference raised {side.outputs.type} in float64"
    leaves = list(side.grads or []) if failure.oracle == "grads" else flatten_outputs(side.outputs)
    return vote_with("declared", "independent", "the kernel's declared reference in float64", leaves, ballots)


@juror("float64", witness="opinion", doc="eager CPU's own kernels in float64: an opinion, recorded, never decisive")
def float64_opinion(obs, failure, ballots):
    """What the float64 run of CPU's own kernel says, as a vote that decides nothing: an
    eager CPU bug is there in float64 too (issue 30's antialiased resize: float64 sided
    with CPU's [1, 1] against the triangle filter's [1, -2.75])."""
    from ...execution.observation import Raised
    side = float64_side(obs)
    if isinstance(side.outputs, Raised):
        return f"the float64 run raised {side.outputs.type}"
    leaves = list(side.grads or []) if failure.oracle == "grads" else flatten_outputs(side.outputs)
    return vote_with("float64", "opinion", "eager CPU's kernels in float64 (not independent)", leaves, ballots)
