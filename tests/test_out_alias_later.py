"""``out=`` aliasing a later input (issue 38, pytorch#178379: CUDA's
``linalg.solve_triangular(A, B, out=B)`` with B a negative view): an op whose result has
a later input's shape and dtype declares it (``OpSpec.out_aliases``) and draws the
``out-alias-N`` variant; with the negative bit on a real input (a boundary sibling), the
report's call is drawn."""
from __future__ import annotations

import pytest

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.opspec import aliased_out_input
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases, siblings
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import assert_repro_proves_the_fault, one_fault_campaign

FAULT = "lu_solve_into_its_negative_b_flips_sign"
SOLVES = ("linalg.solve", "linalg.solve_triangular", "linalg.lu_solve", "linalg.ldl_solve")


def test_the_solves_declare_b_as_an_out_they_may_be_written_into():
    for name in SOLVES:
        assert "out-alias-1" in catalogue.get(name).variants(), name
    # an op that declares nothing keeps input 0's form only (where it works in place)
    assert not any(v.startswith("out-alias-") for v in catalogue.get("add").variants())
    assert [aliased_out_input(v) for v in ("out-alias", "out-alias-1", "out-alias-12", "out", "out-alias-x")] \
        == [0, 1, 12, None, None]


def _system(op: str, variant: str, bit: str = "", b_shape=(3, 2)) -> Case:
    a = TensorRecipe((3, 3), "float64", Layout(), ValueRecipe("spd" if op == "linalg.ldl_solve" else "diag_dominant", 1))
    b = TensorRecipe(b_shape, "float64", Layout(bit=bit), ValueRecipe("normal", 2))
    return Case(op, (a, b), (("upper", True),) if op == "linalg.solve_triangular" else (), variant=variant)


@pytest.mark.parametrize("op", SOLVES)
def test_a_right_solve_into_b_itself_passes_every_oracle(op):
    """B written as out= is an output: the variants oracle does not take it for an input
    the call modified, and the result equals the functional form's."""
    outcome = judge_case(_system(op, "out-alias-1"), FaultTarget([]), DEFAULT)
    assert outcome.valid and outcome.failures == (), outcome.failures


def test_a_result_not_of_bs_shape_is_no_case():
    """A vector right-hand side broadcast against a batch: the result is not B's shape,
    so out= cannot be B (not a failure of either side)."""
    a = TensorRecipe((2, 3, 3), "float64", Layout(), ValueRecipe("diag_dominant", 1))
    b = TensorRecipe((3, 1), "float64", Layout(), ValueRecipe("normal", 2))
    outcome = judge_case(Case("linalg.solve", (a, b), (), variant="out-alias-1"), FaultTarget([]), DEFAULT)
    assert outcome.failures == () and not outcome.valid


def test_the_fault_fires_only_into_a_negative_b_itself():
    fired = {}
    for variant in ("functional", "out", "out-alias-1"):
        for bit in ("", "neg"):
            target = FaultTarget([FAULT])
            outcome = judge_case(_system("linalg.lu_solve", variant, bit), target, DEFAULT)
            fired[variant, bit] = ([f["oracle"] for f in outcome.failures], target.fired[FAULT])
    assert fired.pop(("out-alias-1", "neg")) == (["values"], 1)
    assert all(v == ([], 0) for v in fired.values()), fired


def _is_the_reports_call(case: Case) -> bool:
    """B (input 1) a real negative view, passed as B and as out= (left=True: B itself)."""
    return case.variant == "out-alias-1" and case.inputs[1].layout.bit == "neg" \
        and case.inputs[1].dtype in ("float32", "float64") and dict(case.kwargs).get("left", True)


def test_the_reports_call_is_drawn_for_solve_triangular():
    """As a campaign draws it: a drawn case's boundary sibling (the dressing's salts 1-3
    of 300 cases, seed 2: 9 such siblings; seed 1's real ones all have left=False, where
    the op gets b.mT and out=b cannot be B) writes into the negative view of B it solves
    for."""
    spec = catalogue.get("linalg.solve_triangular")
    drawn = example_cases(spec, 300, seed=2)
    hits = [s for c in drawn for salt in (1, 2, 3) for s in siblings(spec, c, salt, 1, boundaries=True)
            if _is_the_reports_call(s)]
    assert hits
    made = hits[0].materialize("cpu")
    assert made[1].is_neg()


@pytest.mark.slow
def test_campaign_finds_a_solve_into_its_negative_b_and_keeps_both_conditions(tmp_path):
    finding = one_fault_campaign(tmp_path, "linalg.lu_solve", FAULT, budget="60s")
    case = finding["case"]
    assert case["variant"] == "out-alias-1" and case["inputs"][1]["layout"].get("bit") == "neg", case
    explanation = finding["explanation"]
    assert "`out=` is" in explanation and "negative view" in explanation, explanation
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)
