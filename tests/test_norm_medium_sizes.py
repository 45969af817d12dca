"""The medium size class of layer_norm and rms_norm (issue 38: Inductor's layer_norm wrong
for a normalized dim of 512, pytorch/pytorch#191976; compiled rms_norm for a reduction of
2,048, #150454): every boundary size drawn, over a few rows, in every run of the nn
family."""
from __future__ import annotations

import math

import pytest

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.ops.nn import MEDIUM_MAX_ROWS, MEDIUM_NORMALIZED
from mpsfuzz.generation.strategies import example_cases


@pytest.mark.parametrize("op", ["layer_norm_medium", "rms_norm_medium"])
def test_every_boundary_size_is_drawn_over_a_few_rows(op):
    cases = example_cases(catalogue.get(op), 300, seed=1)
    x_shapes = [c.inputs[0].shape for c in cases]
    assert {s[-1] for s in x_shapes} == set(MEDIUM_NORMALIZED)
    assert all(1 <= math.prod(s[:-1]) <= MEDIUM_MAX_ROWS for s in x_shapes)
    assert {len(s) for s in x_shapes} == {1, 2, 3}
    assert all(dict(c.kwargs)["normalized_shape"] == (c.inputs[0].shape[-1],) for c in cases)
    assert max(math.prod(s) for s in x_shapes) <= MEDIUM_MAX_ROWS * max(MEDIUM_NORMALIZED) < 2 ** 16
    assert {"functional", "grad"} <= {c.variant for c in cases}
    assert {"float16", "bfloat16", "float32"} <= {c.inputs[0].dtype for c in cases}


@pytest.mark.parametrize("op", ["layer_norm_medium", "rms_norm_medium"])
def test_the_medium_class_is_an_op_of_the_nn_family_as_its_base(op):
    spec, base = catalogue.get(op), catalogue.get(op.removesuffix("_medium"))
    assert op in catalogue.families()["nn"]
    assert (spec.family, spec.fn, spec.args, spec.grad, spec.semantics) == \
        (base.family, base.fn, base.args, base.grad, base.semantics)
