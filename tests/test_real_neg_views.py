"""A real floating input viewed with the negative bit (issue 38, pytorch#178379: CUDA's
solve_triangular into a negative view of B): drawn as a boundary sibling of every op
with real floating inputs, whose draws give the bit to complex inputs only."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from mpsfuzz.generation import catalogue
from mpsfuzz.generation import input_classes
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import boundary_sibling, cases
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import assert_repro_proves_the_fault, one_fault_campaign

FAULT = "solve_triangular_ignores_neg_bit"


def _neg_siblings(name: str, examples: int = 40) -> list[Case]:
    spec, seen = catalogue.get(name), []

    @settings(max_examples=examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(spec))
    def draw(case):
        for salt in range(6):
            sibling = boundary_sibling(spec, case, salt)
            if sibling is not None and any(r.layout.bit == "neg" and r.dtype in ("float16", "bfloat16", "float32",
                                                                                  "float64") for r in sibling.inputs):
                seen.append(sibling)
    draw()
    return seen


@pytest.mark.parametrize("name", ["linalg.solve_triangular", "add", "cumsum", "conv2d"])
def test_real_floating_inputs_get_the_negative_bit_as_a_boundary_sibling(name):
    siblings = _neg_siblings(name)
    assert siblings, name
    made = siblings[0].materialize("cpu")
    marked = [t for t, r in zip(made, siblings[0].inputs) if r.layout.bit == "neg"]
    assert marked and all(t.is_neg() for t in marked)
    # the view's logical values are the recipe's: the bit changes the storage, not the values
    # (a compound sibling may carry a NaN as well: strategies.NAN_VALUE)
    plain = replace(siblings[0], inputs=tuple(replace(r, layout=replace(r.layout, bit=""))
                                              for r in siblings[0].inputs)).materialize("cpu")
    for a, b in zip(made, plain):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a.resolve_neg(), b, rtol=0, atol=0, equal_nan=True)
    assert input_classes.NEG_VIEW in input_classes.drawn(catalogue.get(name), siblings[0])


def test_random_ops_get_no_negative_bit():
    assert _neg_siblings("rand_like", 20) == []


def test_a_solve_that_reads_the_storage_of_a_negative_view_is_found_and_a_right_one_is_not():
    a = TensorRecipe((3, 3), "float64", Layout(), ValueRecipe("diag_dominant", 1))
    b = TensorRecipe((3, 2), "float64", Layout(bit="neg"), ValueRecipe("normal", 2))
    case = Case("linalg.solve_triangular", (a, b), (("upper", True),))
    assert judge_case(case, FaultTarget([]), DEFAULT).failures == ()
    assert [f["oracle"] for f in judge_case(case, FaultTarget([FAULT]), DEFAULT).failures] == ["values"]


@pytest.mark.slow
def test_campaign_finds_a_solve_that_ignores_the_negative_bit_and_keeps_it(tmp_path):
    finding = one_fault_campaign(tmp_path, "linalg.solve_triangular", FAULT, budget="40s")
    assert any(r["layout"].get("bit") == "neg" for r in finding["case"]["inputs"]), finding["case"]
    assert "negative view" in finding["explanation"], finding["explanation"]
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)
