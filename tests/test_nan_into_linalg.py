"""Non-finite inputs to linalg (issue 38; pytorch/pytorch#173638: CUDA's slogdet of a
matrix holding a NaN computed it as if the NaN were 0): ops whose every element depends
on every entry of the matrix draw a NaN entry as a boundary sibling, and are compared
there by whether the NaN reached their result."""
from __future__ import annotations

import math

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.nan_propagation import nan_presence
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import boundary_sibling, cases
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz


def _matrices(shape, specials=()):
    return TensorRecipe(shape, "float64", Layout(), ValueRecipe("diag_dominant", 3, specials=specials))


def test_a_nan_matrix_is_compared_by_whether_the_nan_reached_each_declared_leaf():
    a = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
    a[1, 0, 2] = math.nan
    sign, logabs = torch.linalg.slogdet(a)
    # another backend: NaN in the sign too, the log-determinant NaN
    other = (torch.tensor([1.0, math.nan], dtype=torch.float64), logabs.clone())
    mine, theirs = nan_presence([a], (sign, logabs), (1,)), nan_presence([a], other, (1,))
    assert torch.equal(mine[0], theirs[0])                       # the sign is not compared there
    assert torch.isnan(mine[1][1]) and mine[1][0] == logabs[0]   # the clean matrix keeps its value
    # computed as if the NaN were 0: a finite log-determinant is told apart
    zeroed = torch.linalg.slogdet(torch.nan_to_num(a, nan=0.0))
    assert not torch.isnan(nan_presence([a], zeroed, (1,))[1][1])
    # where no matrix holds a NaN the outputs are the outputs
    assert nan_presence([torch.eye(2)], (sign, logabs), (1,)) == (sign, logabs)


def test_an_inverse_with_its_nan_in_some_positions_only_compares_alike():
    a = torch.eye(2, dtype=torch.float64)
    a[0, 1] = math.nan
    everywhere = torch.full((2, 2), math.nan, dtype=torch.float64)
    somewhere = torch.tensor([[1.0, math.nan], [0.0, 1.0]], dtype=torch.float64)
    assert torch.equal(nan_presence([a], everywhere, (0,)).isnan(), nan_presence([a], somewhere, (0,)).isnan())


def test_the_determined_linalg_ops_draw_a_nan_entry_as_a_boundary_sibling():
    from hypothesis import HealthCheck, given, settings
    for name in ("linalg.slogdet", "linalg.det", "linalg.inv", "linalg.solve", "linalg.matrix_exp"):
        spec = catalogue.get(name)
        assert spec.nan_propagates, name
        seen = []

        @settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(cases(spec))
        def draw(case):
            for salt in range(4):
                sibling = boundary_sibling(spec, case, salt)
                if sibling is not None and any(n == "nan" for _, n in sibling.inputs[0].values.specials):
                    assert sibling.variant != "grad"
                    seen.append(sibling)
        draw()
        assert seen, name
        assert torch.isnan(seen[0].materialize("cpu")[0]).any(), name
    # an op without the declaration never gets one
    assert not catalogue.get("linalg.svd").nan_propagates


def test_a_slogdet_that_computes_its_nan_away_is_found_and_one_that_keeps_it_is_not():
    case = Case("linalg.slogdet", (_matrices((3, 4, 4), specials=((21, "nan"),)),))
    assert judge_case(case, FaultTarget([]), DEFAULT).failures == ()
    failures = judge_case(case, FaultTarget(["slogdet_takes_nan_as_zero"]), DEFAULT).failures
    assert [f["oracle"] for f in failures] == ["values"], failures


@pytest.mark.slow
def test_campaign_finds_a_slogdet_that_takes_nan_as_zero_and_explains_it_by_the_nan(tmp_path):
    corpus = tmp_path / "corpus"
    # (a budget, not --max-cases: a campaign counted in cases alone draws no siblings)
    done = mpsfuzz("run", "--ops", "linalg.slogdet", "--target", FAULT_TARGET, "--budget", "40s", "--seed", "1",
                   "--max-findings", "1", "--corpus", str(corpus), "--no-progress",
                   faults="slogdet_takes_nan_as_zero", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert "nan" in finding["explanation"], finding["explanation"]
    assert any(name == "nan" for _, name in finding["case"]["inputs"][0]["values"]["specials"]), finding["case"]
    assert_repro_proves_the_fault(finding, "slogdet_takes_nan_as_zero", tmp_path)
