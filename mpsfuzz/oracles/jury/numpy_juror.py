"""``numpy``: the op computed by numpy (``numpy_refs.py``), another implementation
altogether, in float64 (integer ops in their own dtype). Forward results only: numpy has
no autograd."""
from __future__ import annotations

from . import juror
from .reference_vote import table_vote


@juror("numpy", witness="independent", doc="numpy's implementation (float64; integers in their own dtype)")
def numpy_vote(obs, failure, ballots):
    from .numpy_refs import NUMPY
    fn = NUMPY.get(obs.spec.base_name)
    if fn is None or failure.oracle == "grads":
        return None
    return table_vote("numpy", "numpy in float64", fn, obs, failure, ballots)
