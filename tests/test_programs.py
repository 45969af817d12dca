"""The programs family (issue 38: multi-op compiled programs): several ops in one function,
compiled whole on the compiled targets, drawn with the sizes and values their upstream bugs
need, and a fault of a program's fusion found by a campaign of the family."""
from __future__ import annotations

import math

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.ops.programs import MEDIUM_SIDES, outer_difference_sum
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.testing.faults import FaultTarget
from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, mpsfuzz, the_one_new_finding


def test_the_family_draws_medium_sides_and_int64_products_past_32_bits():
    outer = example_cases(catalogue.get("outer_difference_sum"), 200, seed=1)
    assert sum(1 for c in outer if set(c.inputs[0].shape[-1:] + c.inputs[1].shape[-1:]) & set(MEDIUM_SIDES)) >= 20
    assert all(math.prod(c.inputs[0].shape) * c.inputs[1].shape[-1] <= 1 << 20 for c in outer)
    arange = [c for c in example_cases(catalogue.get("arange_times"), 200, seed=1) if c.inputs[0].dtype == "int64"]
    past = [c for c in arange if abs(dict(c.kwargs).get("start", 0)) >= 2**31]
    assert past, "no int64 arange starts past 2^31"
    for c in arange:   # the exact products stay within int64: a wrap is the target's
        n, start = max(1, c.inputs[0].shape[-1] if c.inputs[0].shape else 1), abs(dict(c.kwargs)["start"])
        assert (start + n) * max(abs(c.inputs[0].values.low), abs(c.inputs[0].values.high)) < 2**63


def test_the_fusion_fault_fires_on_the_program_and_on_neither_op_alone():
    target = FaultTarget(["outer_difference_sum_drops_a_row"])
    a, b = torch.arange(3.0), torch.arange(4.0)
    assert not torch.equal(target.run(outer_difference_sum, a, b), outer_difference_sum(a, b))
    difference = target.run(torch.sub, a.unsqueeze(-1), b.unsqueeze(-2))
    assert torch.equal(difference, a.unsqueeze(-1) - b.unsqueeze(-2))
    assert torch.equal(target.run(torch.sum, torch.ones(3, 4)), torch.tensor(12.0))
    # a difference of one row has no last row to miss
    assert torch.equal(target.run(outer_difference_sum, a[:1], b), outer_difference_sum(a[:1], b))


@pytest.mark.slow
def test_a_campaign_of_the_family_finds_the_fused_programs_fault(tmp_path):
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "programs", "--target", FAULT_TARGET, "--max-cases", "400", "--seed", "1",
                   "--corpus", str(corpus), "--max-findings", "1", "--no-progress",
                   faults="outer_difference_sum_drops_a_row", cwd=tmp_path)
    finding = the_one_new_finding(done, corpus, "values")
    assert finding["op"] == "outer_difference_sum", finding["title"]
    a, b = (tuple(r["shape"]) for r in finding["case"]["inputs"])
    assert a[-1] >= 2 and max(a[-1], b[-1]) <= 4, finding["case"]      # minimised, the rows it needs kept
    assert_repro_proves_the_fault(finding, "outer_difference_sum_drops_a_row", tmp_path)
