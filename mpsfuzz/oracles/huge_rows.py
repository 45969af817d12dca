"""A disagreement of the ``@huge`` class, judged on the rows its reference ran on.

A ``@huge`` case (generation/large_sizes.py) runs the op on billions of elements on the
device and compares a few blocks of rows with eager CPU's call on those rows alone. The
float64 arbiter and the jury cannot copy the whole input to the host, but they need not:
row i of the result (and of the sliced inputs' gradients) depends on row i of the inputs
alone, so the dispute is the same as one of the base op on the rows. That case is made
here, its inputs the rows themselves, and the arbiter judges it as any small case of the
base op, with the rounding allowances of the op's own arithmetic: a softmax's
backward, whose row dot product a device may round in the half dtype, is no exact
computation (issue 38: the class grew past the ops whose hashed values stay exact).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from ..execution.observation import Observation
from ..generation import catalogue
from ..generation.recipes import Case, Layout


@dataclass(frozen=True)
class RowsCase(Case):
    """A case whose inputs are given CPU tensors (the boundary rows of a @huge case),
    with recipes that describe their shapes and dtypes; ``materialize`` returns copies
    of the tensors on the device asked for."""

    rows: tuple = field(default=(), compare=False, repr=False)

    def materialize(self, device="cpu") -> list[torch.Tensor]:
        return [t.detach().to(device).clone() for t in self.rows]


def rows_observation(obs: Observation) -> Observation | None:
    """``obs`` as a dispute of the base op on the rows the reference ran on; None where the
    op's reference sees the whole case (the large family's analytic references)."""
    spec = obs.spec
    if spec.reference_inputs is None or not spec.base:
        return None
    rows = spec.reference_inputs(obs.case)
    if rows is None:
        return None
    case = obs.case
    recipes = tuple(replace(r, shape=tuple(t.shape), layout=Layout(), alias=None)
                    for r, t in zip(case.inputs, rows))
    rows_case = RowsCase(spec.base, recipes, case.kwargs, case.variant, rows=tuple(t.detach() for t in rows))
    return replace(obs, case=rows_case, spec=catalogue.get(spec.base), cache={})
