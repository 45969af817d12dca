"""Unary elementwise ops of the @huge class drawn 5-D and just past 2^32 elements together
(issue 38, pytorch#154828: MPS elementwise ops on a 5-D bfloat16 or float16 tensor of about
2^32 elements), within the class's memory per element; and a fault of that class
(5-D half precision past the class's scaled 2^31) that a campaign of neg@huge finds."""
from __future__ import annotations

import json
import math

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.large_sizes import GRAD_BYTES_PER_ELEMENT, MAX_ELEMENTS, grows
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.testing import faults

HALF = ("float16", "bfloat16")


def test_neg_draws_5d_half_precision_just_past_2_32_in_a_share_of_its_own(with_settings):
    """At --max-bytes 140 GB: 5-D inputs just past 2^32 elements in a tenth of the cases or
    more, in float16 and bfloat16; every case within --max-bytes at the grad variant's
    bytes an element."""
    limit = 140 * 10**9
    with_settings(max_bytes=limit)
    drawn = example_cases(catalogue.get("neg@huge"), 100, seed=1)
    assert all(c.inputs[0].numel * GRAD_BYTES_PER_ELEMENT <= limit for c in drawn)
    joint = [c for c in drawn if c.inputs[0].rank == 5 and c.inputs[0].numel > 2**32 and c.inputs[0].dtype in HALF]
    assert len(joint) >= 10 and {c.inputs[0].dtype for c in joint} == set(HALF)
    assert all(c.inputs[0].numel - 2**32 <= 2 * math.prod(c.inputs[0].shape[1:]) for c in joint)


def test_at_the_default_size_the_share_is_5d_at_the_medium_size():
    drawn = example_cases(catalogue.get("exp@huge"), 30, seed=2)
    assert any(c.inputs[0].rank == 5 for c in drawn)
    assert all(MAX_ELEMENTS < c.inputs[0].numel <= 2 * (1 << 22) for c in drawn)


def test_the_joint_form_is_declared_only_for_a_sliced_group():
    with pytest.raises(ValueError, match="five_d_past_2_32"):
        grows("rows", (0, 0), five_d_past_2_32=True)


def test_the_fault_wraps_only_a_5d_half_precision_input_past_the_limit():
    target = faults.FaultTarget(["neg_half_5d_past_int32"])
    x = (torch.arange(MAX_ELEMENTS + 64) % 241 - 120).to(torch.bfloat16)
    got = target.run(torch.neg, x.view(-1, 1, 1, 1, 1))
    assert torch.equal(got.view(-1)[MAX_ELEMENTS:], -x[:64]) and target.fired["neg_half_5d_past_int32"] == 1
    for other in (x.view(-1, 1, 1, 1), x.float().view(-1, 1, 1, 1, 1), x[:MAX_ELEMENTS].view(-1, 1, 1, 1, 1)):
        assert torch.equal(target.run(torch.neg, other), -other)
    assert target.fired["neg_half_5d_past_int32"] == 1


@pytest.mark.slow
def test_a_campaign_of_neg_finds_it_explains_the_size_and_keeps_5_dims(tmp_path):
    """A campaign of neg@huge finds the fault (about 80 s on two cores), explains it by the
    long dim, minimises it keeping 5 dims, a half dtype and more than MAX_ELEMENTS
    elements, and verifies a script. (Its dtype probes may be cut short by the ablation's
    time budget on a loaded machine: not asserted.)"""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", "neg@huge", "--target", FAULT_TARGET, "--seed", "2", "--corpus",
                           str(corpus), "--max-findings", "1", "--no-progress", faults="neg_half_5d_past_int32",
                           cwd=tmp_path, timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert (finding["op"], finding["oracle"]) == ("neg@huge", "values"), finding["title"]
    assert finding["minimisation"] and "side>=65536" in finding["conditions"], finding["explanation"]
    (x,) = finding["case"]["inputs"]
    assert len(x["shape"]) == 5 and x["dtype"] in HALF and math.prod(x["shape"]) > MAX_ELEMENTS
    assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
