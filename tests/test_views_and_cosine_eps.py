"""Component views of complex inputs, and cosine_similarity's eps (issue 38).

pytorch#184379 (MPS): `.imag` of a conjugate view returned the stored imaginary part,
not its negation. `real` and `imag` join the catalogue with complex dtypes, so the conj
and neg bits (Layout.bit) are drawn for them by their dtype; `imag` of a conj view is a
view with the negative bit, whose values the oracles compare.

pytorch#153209 (CUDA): `cosine_similarity` of a float64 0-d operand beside float16 ones,
`eps=-9.7e23`. `cosine_similarity` joins with broadcast operands (0-d ones), two dtypes
sometimes, and an `eps` the argument-extremes class moves; eager CPU refuses a negative
eps, so a target that computes with one is a capability note, never a new bug.
"""
from __future__ import annotations

import warnings

import pytest
import torch

from mpsfuzz.generation import catalogue, coverage
from mpsfuzz.generation.arg_extremes import extreme_arguments
from mpsfuzz.generation.input_classes import ARGUMENT_EXTREME, CONJ_VIEW, MIXED_DTYPES, NEG_VIEW
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import boundary_sibling, example_cases
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import NOT_BUGS, FaultTarget
from mpsfuzz.triage.ablation import MIXED_DTYPES as MIXED_CONDITION, holds

from test_fault_campaigns import (FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz,
                                  one_fault_campaign)

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")

IMAG_FAULT = "imag_of_conj_view_drops_the_bit"
NARROWS_FAULT = "cosine_similarity_narrows_a_0d_operand"
EPS_FAULT = "cosine_similarity_eps_held_in_float32"
NEGATIVE_EPS = "cosine_similarity_accepts_a_negative_eps"


def _t(shape, dtype, bit="", seed=3) -> TensorRecipe:
    return TensorRecipe(tuple(shape), dtype, Layout(bit=bit), ValueRecipe("small_int", seed))


def _boundary_siblings(op: str, n: int = 300) -> list[Case]:
    spec = catalogue.get(op)
    out = [boundary_sibling(spec, c, c.inputs[0].values.seed) for c in example_cases(spec, n, seed=1)]
    return [s for s in out if s is not None]


def _0d_beside(case: Case, zero_d: str, other: str) -> bool:
    a, b = case.inputs
    return any(x.rank == 0 and y.rank > 0 and (x.dtype, y.dtype) == (zero_d, other) for x, y in ((a, b), (b, a)))


# -- real and imag -------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["real", "imag"])
def test_the_component_views_draw_both_view_bits_by_their_complex_dtype(op):
    spec = catalogue.get(op)
    assert set(spec.dtypes) == {"complex32", "complex64", "complex128"}
    (row,) = coverage.survey([op], cases_per_op=100, seed=1).classes
    assert {CONJ_VIEW, NEG_VIEW} <= set(row.drawn), row      # what `mpsfuzz coverage` counts
    bits = [r.layout.bit for c in example_cases(spec, 300, seed=1) for r in c.inputs]
    assert bits.count("conj") >= 3 and bits.count("neg") >= 3, bits


def test_imag_of_a_conj_view_is_a_negated_view_and_a_clean_target_agrees():
    """The result carries the neg bit on both sides; its values are compared (no
    metadata or layout failure for a view with the bit)."""
    x = _t((2, 3), "complex64", bit="conj").materialize("cpu")
    assert torch.imag(x).is_neg() and torch.equal(torch.imag(x), -torch.imag(x.conj()))
    for bit in ("conj", "neg", ""):
        case = Case("imag", (TensorRecipe((2, 3), "complex64", Layout(offset=1, gaps=(1, 2), bit=bit),
                                          ValueRecipe("normal", 5)),))
        assert judge_case(case, FaultTarget([]), DEFAULT).failures == (), bit


def test_the_imag_fault_drops_the_conj_bit_only():
    target = FaultTarget([IMAG_FAULT])
    x = torch.tensor([1 + 2j, 3 - 4j])
    assert torch.equal(target.run(torch.imag, x), torch.imag(x))
    assert torch.equal(target.run(torch.imag, x._neg_view()), torch.imag(x._neg_view()))
    assert torch.equal(target.run(torch.real, x.conj()), torch.real(x.conj()))
    assert not target.fired
    assert torch.equal(target.run(torch.imag, x.conj()), torch.tensor([2.0, -4.0]))   # the report's symptom
    case = Case("imag", (_t((3,), "complex128", bit="conj"),))
    (failure,) = judge_case(case, target, DEFAULT).failures
    assert failure["oracle"] == "values"


# -- cosine_similarity ---------------------------------------------------------------------

def test_cosine_similarity_draws_0d_operands_and_its_boundaries_reach_the_reports_class():
    """Draws: a 0-d operand broadcast beside one of dims. Boundary siblings: the other
    operand in another dtype (a float64 0-d beside float16), eps at an extreme (negative
    ones included)."""
    drawn = example_cases(catalogue.get("cosine_similarity"), 300, seed=1)
    assert sum(1 for c in drawn if {r.rank == 0 for r in c.inputs} == {True, False}) >= 30
    assert all("eps" in dict(c.kwargs) and "dim" in dict(c.kwargs) for c in drawn)
    siblings = _boundary_siblings("cosine_similarity")
    assert sum(1 for s in siblings if _0d_beside(s, "float64", "float16")) >= 5
    assert sum(1 for s in siblings if "eps" in extreme_arguments(s)) >= 60
    assert any(dict(s.kwargs)["eps"] < 0 for s in siblings)
    (row,) = coverage.survey(["cosine_similarity"], cases_per_op=60, seed=1).classes
    assert {MIXED_DTYPES, ARGUMENT_EXTREME} <= set(row.drawn), row


def test_a_clean_target_agrees_with_cpu_on_the_boundaries_negative_eps_included():
    target = FaultTarget([])
    siblings = _boundary_siblings("cosine_similarity", 120)
    assert any(dict(s.kwargs)["eps"] < 0 for s in siblings)
    assert [s for s in siblings if judge_case(s, target, DEFAULT).failures] == []


def test_the_cosine_faults_fire_on_their_class_only():
    cos = catalogue.get("cosine_similarity").fn
    half = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float16)
    wide = torch.tensor(2.0, dtype=torch.float64)
    narrows = FaultTarget([NARROWS_FAULT])
    for x1, x2 in ((wide.to(torch.float16), half), (half.double(), wide), (wide, wide.reshape(1)),
                   (wide.to(torch.float16), half.double())):
        assert narrows.run(cos, x1, x2, dim=0, eps=1e-8).dtype == cos(x1, x2, dim=0, eps=1e-8).dtype
    assert not narrows.fired
    assert narrows.run(cos, wide, half, dim=0, eps=1e-8).dtype == torch.float16   # torch: float64
    assert narrows.run(cos, half, wide, dim=0, eps=1e-8).dtype == torch.float16
    held = FaultTarget([EPS_FAULT])
    zero = torch.zeros(3, dtype=torch.float64)
    assert held.run(cos, zero, zero, dim=0, eps=1e-40).item() == 0.0   # a float32 subnormal: held
    assert held.run(cos, zero, zero, dim=0, eps=2.2250738585072014e-308).isnan()   # float32 holds 0
    assert cos(zero, zero, dim=0, eps=2.2250738585072014e-308).item() == 0.0


def test_a_negative_eps_the_target_computes_with_is_a_capability_not_a_bug():
    """pytorch#153209's CUDA returned NaN where eager CPU refuses the eps: the errors
    oracle files it as a capability (nothing to check it against: CPU in float64 refuses
    it too), blamed on no one."""
    assert NEGATIVE_EPS in NOT_BUGS
    case = Case("cosine_similarity", (_t((), "float64"), _t((3, 2), "float16")),
                kwargs=(("dim", 0), ("eps", -9.74982e23)))
    (failure,) = judge_case(case, FaultTarget([NEGATIVE_EPS]), DEFAULT).failures
    assert (failure["oracle"], failure["kind"], failure["blame"]) == ("errors", "capability", "capability")
    assert "eps must be non-negative" in failure["message"]


def test_the_mixed_dtypes_condition_counts_free_inputs_only():
    assert holds(MIXED_CONDITION, Case("cosine_similarity", (_t((), "float64"), _t((3,), "float16"))))
    assert not holds(MIXED_CONDITION, Case("cosine_similarity", (_t((), "float16"), _t((3,), "float16"))))
    # index_select's index has dtypes of its own: an int64 index beside float data is not a mix
    assert not holds(MIXED_CONDITION, Case("index_select", (_t((4,), "float32"), _t((2,), "int64"))))


# -- campaigns -----------------------------------------------------------------------------

@pytest.mark.slow
def test_an_imag_campaign_finds_the_dropped_conj_bit_and_keeps_it_when_minimising(tmp_path):
    finding = one_fault_campaign(tmp_path, "imag", IMAG_FAULT, 400)
    assert "conjugate view" in finding["explanation"], finding["explanation"]
    assert [r["layout"].get("bit", "") for r in finding["case"]["inputs"]] == ["conj"], finding["case"]
    assert_repro_proves_the_fault(finding, IMAG_FAULT, tmp_path)


@pytest.mark.slow
def test_a_cosine_campaign_finds_the_narrowed_0d_operand_explained_by_the_dtype_mix(tmp_path):
    finding = one_fault_campaign(tmp_path, "cosine_similarity", NARROWS_FAULT, 400, oracle="metadata")
    assert "different dtypes" in finding["explanation"] and "is 0-d" in finding["explanation"], \
        finding["explanation"]
    assert MIXED_CONDITION in finding["conditions"], finding["conditions"]
    (zero_d,) = [r for r in finding["case"]["inputs"] if r["shape"] == []]       # minimised, kept
    (other,) = [r for r in finding["case"]["inputs"] if r["shape"] != []]
    # the 0-d operand widens the result (float64 beside float16; bfloat16 beside float16: float32)
    narrow = getattr(torch, other["dtype"])
    assert torch.promote_types(getattr(torch, zero_d["dtype"]), narrow) != narrow, (zero_d, other)
    assert_repro_proves_the_fault(finding, NARROWS_FAULT, tmp_path)


@pytest.mark.slow
def test_a_cosine_campaign_finds_eps_held_in_float32_explained_by_the_extreme(tmp_path):
    corpus = tmp_path / "corpus"
    # (boundary siblings move eps to its extremes: a budget, not --max-cases, which draws none)
    done = mpsfuzz("run", "--ops", "cosine_similarity", "--target", FAULT_TARGET, "--budget", "3m", "--seed", "1",
                   "--corpus", str(corpus), "--max-findings", "1", "--no-progress", faults=EPS_FAULT, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (finding,) = findings_in(corpus)
    assert (finding["oracle"], finding["status"]) == ("values", "new")
    assert "`eps` is at an extreme" in finding["explanation"], finding["explanation"]
    eps = finding["case"]["kwargs"]["eps"]
    assert 0 < eps and float(torch.tensor(eps, dtype=torch.float32)) == 0, eps
    assert_repro_proves_the_fault(finding, EPS_FAULT, tmp_path)


@pytest.mark.slow
def test_a_cosine_campaign_files_a_negative_eps_as_a_capability_and_reports_no_bug(tmp_path):
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "cosine_similarity", "--target", FAULT_TARGET, "--max-cases", "300",
                   "--siblings", "2", "--seed", "1", "--corpus", str(corpus), "--no-progress",
                   faults=NEGATIVE_EPS, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "new findings 0" in done.stdout
    found = findings_in(corpus)
    assert found and all(f["status"] == "capability" for f in found), [f["title"] for f in found]
