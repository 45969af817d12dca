"""Operands of different dtypes for every op that promotes them (issue 38, mixed dtypes:
pytorch/pytorch#149951, MPS fmax/fmin of float32 with float16; #145929, compiled bucketize
of a uint8 input with int8 boundaries): a binary or ternary elementwise op declares
``promotes`` by its signature, and a campaign's boundary siblings mix its operands."""
from __future__ import annotations

import pytest

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.input_classes import MIXED_DTYPES, admissible
from mpsfuzz.generation.opspec import mixes_dtypes
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases, siblings
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz

FAULT = "fmax_fmin_of_two_float_dtypes_in_the_narrower"


def _pair(a: str, b: str, op: str = "fmax") -> Case:
    return Case(op, (TensorRecipe((3, 4), a, Layout(), ValueRecipe("normal", 1)),
                     TensorRecipe((3, 4), b, Layout(), ValueRecipe("normal", 2))))


def test_every_elementwise_op_of_several_operands_admits_mixed_dtypes_by_its_signature():
    ops = catalogue.all_ops()
    elementwise = [s for s in ops.values() if s.family == "elementwise" and "promotes" in s.semantics
                   and not s.size_class]
    assert len(elementwise) > 40
    for spec in elementwise:
        assert len(spec.input_dtypes) >= 2, spec.name
        # (an operand with dtypes of its own, ldexp's integer exponent, is not mixed)
        free_later = any(i > 0 and d is None for i, d in enumerate(spec.input_dtypes))
        if len(spec.dtypes) > 1 and free_later:
            assert mixes_dtypes(spec) and MIXED_DTYPES in admissible(spec), spec.name
    for name in ("fmax", "fmin", "maximum", "addcmul", "bucketize"):
        assert mixes_dtypes(catalogue.get(name)), name


@pytest.mark.parametrize("op, pair", [("fmax", {"float16", "float32"}), ("bucketize", {"uint8", "int8"})])
def test_a_campaigns_siblings_mix_the_operands_into_the_reports_pair(op, pair):
    spec = catalogue.get(op)
    mixed = [s for c in example_cases(spec, 200, seed=1) for salt in (1, 2, 3)
             for s in siblings(spec, c, salt, 1, boundaries=True) if len({r.dtype for r in s.inputs}) > 1]
    assert len(mixed) > 100
    assert any({r.dtype for r in s.inputs} == pair for s in mixed)


def test_the_narrowing_fault_fires_on_two_float_dtypes_only():
    bad, clean = FaultTarget([FAULT]), FaultTarget([])
    mixed = _pair("float32", "float16")
    assert judge_case(mixed, clean, DEFAULT).failures == ()
    assert [f["oracle"] for f in judge_case(mixed, bad, DEFAULT).failures] == ["values"]
    for case in (_pair("float32", "float32"), _pair("float16", "int64"), _pair("float64", "float64", "fmin")):
        assert judge_case(case, bad, DEFAULT).failures == (), case


@pytest.mark.slow
def test_an_fmax_campaign_finds_the_narrowed_operand_explained_by_the_dtype_mix(tmp_path):
    corpus = tmp_path / "corpus"
    # (a budget, not --max-cases: a campaign counted in cases alone draws no siblings)
    done = mpsfuzz("run", "--ops", "fmax", "--target", FAULT_TARGET, "--budget", "90s", "--seed", "1",
                   "--max-findings", "1", "--corpus", str(corpus), "--no-progress", faults=FAULT, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert MIXED_DTYPES in finding["conditions"], finding["explanation"]
    assert "different dtypes" in finding["explanation"], finding["explanation"]
    dtypes = {r["dtype"] for r in finding["case"]["inputs"]}
    assert len(dtypes) == 2 and all(d.startswith(("float", "bfloat")) for d in dtypes), finding["case"]
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)
