"""A fill cast by torch's rules and consumed in the same function (issue 38, factory ops
under compile: pytorch/pytorch#194062, Inductor's ``full`` of a symbolic fill ignoring
``dtype=bool``, so that ``full((3,), 3, dtype=bool).sum()`` gave 9). The ``full_sum``
program draws fills of another kind than the dtype; under ``*-dynamic-compiled`` an int
fill is symbolic. Its numpy reference casts the fill with Python numbers."""
from __future__ import annotations

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.jury.numpy_refs import NUMPY
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz

FAULT = "full_into_bool_truncates_the_fill"


def _case(dtype: str, fill, shape=(2, 3)) -> Case:
    return Case("full_sum", (TensorRecipe(shape, dtype, Layout(), ValueRecipe("normal" if dtype != "bool" else "bool", 1)),),
                kwargs=(("fill_value", fill),))


@pytest.mark.parametrize("dtype, fill, expected", [
    ("bool", 3, 6), ("bool", -2**62, 6), ("uint8", -1, 6 * 255), ("int8", -128, -6 * 128),
    ("float32", 2**24 + 1, 6 * 2.0**24), ("float16", 0.1, 6 * 0.0999755859375), ("int64", -2**63, 0),
])
def test_the_reference_casts_the_fill_by_torchs_rules_before_the_sum(dtype, fill, expected):
    case = _case(dtype, fill)
    got = NUMPY["full_sum"](case.materialize("cpu"), dict(case.kwargs))
    assert got.item() == pytest.approx(expected, rel=1e-3)
    assert got.dtype == catalogue.get("full_sum").fn(*case.materialize("cpu"), fill_value=fill).dtype


def test_int_fills_into_bool_and_past_a_narrow_ints_range_are_drawn():
    cases = example_cases(catalogue.get("full_sum"), 300, seed=1)
    fills = [(c.inputs[0].dtype, dict(c.kwargs)["fill_value"]) for c in cases]
    assert sum(1 for d, f in fills if d == "bool" and f not in (0, 1)) >= 30
    assert any(d == "uint8" and f < 0 for d, f in fills)


def test_the_fault_fires_on_an_int_fill_into_bool_only():
    bad, clean = FaultTarget([FAULT]), FaultTarget([])
    assert judge_case(_case("bool", 2), clean, DEFAULT).failures == ()
    assert [f["oracle"] for f in judge_case(_case("bool", 2), bad, DEFAULT).failures] == ["values"]
    for case in (_case("bool", 3), _case("uint8", -1), _case("int16", 2)):
        assert judge_case(case, bad, DEFAULT).failures == (), case


@pytest.mark.slow
def test_a_programs_campaign_finds_the_bool_fill_kept_uncast_and_keeps_it_when_minimising(tmp_path):
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "full_sum", "--target", FAULT_TARGET, "--budget", "90s", "--seed", "1",
                   "--corpus", str(corpus), "--no-progress", faults=FAULT, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    case = Case.from_json(finding["case"])
    fill = dict(case.kwargs)["fill_value"]
    assert case.inputs[0].dtype == "bool" and fill % 2 == 0 and fill != 0, finding["case"]
    assert "bool" in finding["explanation"], finding["explanation"]
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)
