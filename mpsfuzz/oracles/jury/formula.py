"""``formula``: the op computed from its documented formula in float64 (``formulas/``),
in torch's elementary ops, so its gradients come from autograd through them: it shares
no kernel with eager CPU's call (``tests/test_formula_references.py`` checks that)."""
from __future__ import annotations

from . import juror
from .reference_vote import table_vote


@juror("formula", witness="independent",
       doc="the documented formula in float64, written from elementary ops (interpolation, pooling, padding, "
           "normalisations, losses, convolutions, products, embeddings with their max_norm renorm, factories: arange, "
           "linspace, logspace, full, eye, *_like; conversions between dtypes: copy_, to)")
def formula_vote(obs, failure, ballots):
    from .formulas import FORMULAS
    fn = FORMULAS.get(obs.spec.base_name)
    if fn is None:
        return None
    return table_vote("formula", "the documented formula in float64", fn, obs, failure, ballots)
