"""The float64 juror's judgement of one leaf as an object (oracles/jury/leaf.py, issue
39): what the leaf is (the two sides, float64's result, the tolerance, the evidence on
it) and its verdict, built and judged directly, without an observation or a worker.
The rules themselves are proved both ways in test_accuracy_rules.py."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from mpsfuzz.oracles.accuracy import accumulation_bound, unit_roundoff
from mpsfuzz.oracles.jury.float64 import judge_leaf as judge_leaf_there
from mpsfuzz.oracles.jury.leaf import MULTIPLIER, DisputedLeaf, judge_leaf

INF, NAN = float("inf"), float("nan")


def _t(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def _f64(*values):
    return _t(*values, dtype=torch.float64)


def test_a_leaf_is_frozen_and_the_float64_jurors_name_for_it_is_the_same_judgement():
    leaf = DisputedLeaf(_t(5.0), _t(2.0), _f64(2.0), 1e-5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        leaf.atol = 1.0
    assert judge_leaf_there is judge_leaf
    assert judge_leaf(_t(5.0), _t(2.0), _f64(2.0), 1e-5) == leaf.judge() == ("dut-wrong", leaf.judge()[1])
    with pytest.raises(TypeError):
        judge_leaf(_t(5.0), _t(2.0), _f64(2.0), 1e-5, no_such_evidence=True)


def test_what_the_leaf_is_follows_from_its_dtype_and_evidence():
    half = DisputedLeaf(_t(1.0, dtype=torch.float16), _t(1.0, dtype=torch.float16), _f64(1.0), 1e-3)
    assert half.low_precision and half.bounded and half.independent and half.wide == torch.float64
    single = DisputedLeaf(_t(1.0), _t(1.0), _f64(1.0), 1e-5)
    assert not single.low_precision and not single.bounded
    assert DisputedLeaf(_t(1.0), _t(1.0), _f64(1.0), 1e-5, magnitude=_f64(3.0)).bounded
    double = DisputedLeaf(_f64(1.0), _f64(1.0), _f64(1.0), 1e-7, magnitude=_f64(3.0))
    assert not double.independent and not double.bounded          # float64 is CPU itself
    assert DisputedLeaf(_f64(1.0), _f64(1.0), _f64(1.0), 1e-7, magnitude=_f64(3.0), measured=True).bounded
    complex_leaf = DisputedLeaf(_t(1j, dtype=torch.complex64), _t(1j, dtype=torch.complex64),
                                _t(1j, dtype=torch.complex128), 1e-5)
    assert complex_leaf.wide == torch.complex128


def test_the_tolerance_adds_its_parts_as_the_rules_say():
    truth = _f64(2.0, -4.0)
    plain = DisputedLeaf(_t(2.0, -4.0), _t(2.0, -4.0), truth, 1e-5, rtol=1e-3, weights_slack=1e-4)
    assert torch.allclose(plain.tolerance(truth), _f64(1e-5 + 2e-3 + 1e-4, 1e-5 + 4e-3 + 1e-4))
    rounding = _f64(1.0, INF)        # a non-finite bound says nothing
    bounded = DisputedLeaf(_t(2.0, -4.0), _t(2.0, -4.0), truth, 1e-5, rounding=rounding)
    assert torch.equal(bounded.tolerance(truth), _f64(MULTIPLIER * 1.0, 1e-5))
    half = DisputedLeaf(_t(2.0, -4.0, dtype=torch.float16), _t(2.0, -4.0, dtype=torch.float16), truth, 1e-3,
                        rtol=0.5, magnitude=_f64(8.0, 8.0), summands=4)
    # a low-precision leaf is held to the accumulation bound alone (its rtol set aside)
    assert torch.equal(half.tolerance(truth), accumulation_bound(truth, _f64(8.0, 8.0), 4, torch.float16, 1e-3))


def test_its_verdicts_each_way():
    exact = _f64(0.4143702944150031)
    lucky_cpu, cuda_like = _t(0.41436851024627686), _t(0.41437938809394836)
    assert DisputedLeaf(cuda_like, lucky_cpu, exact, 1e-5, rtol=1.3e-6).judge()[0] == "within-tolerance"
    assert DisputedLeaf(_t(0.4143712), _t(0.41439), exact, 1e-5, rtol=1.3e-6).judge()[0] == "cpu-wrong"
    assert DisputedLeaf(_t(0.41441), lucky_cpu, exact, 1e-5, rtol=1.3e-6).judge()[0] == "dut-wrong"
    assert DisputedLeaf(_t(7.0), _t(-3.0), _f64(2.0), 1e-5).judge()[0] == "both-close"
    # the overflow rule: both sides overflow where float64 is finite
    assert DisputedLeaf(_t(INF), _t(NAN), _f64(2.0), 1e-5, overflow=True).judge()[0] == "overflow"
    assert DisputedLeaf(_t(INF), _t(NAN), _f64(2.0), 1e-5).judge()[0] != "overflow"
    # an intermediate past the dtype's range excuses what is finite in float64
    verdict, numbers = DisputedLeaf(_t(INF, 1.0), _t(5.0, 1.0), _f64(5.0, 1.0), 1e-5, intermediates=True).judge()
    assert verdict == "overflow" and numbers["intermediate_overflow_positions"] == 1


def test_an_ill_conditioned_position_gets_no_verdict():
    exact = _f64(1.0)
    moved = [_f64(1.5), _f64(0.5)]       # float64 moves by half the result for a roundoff
    leaf = DisputedLeaf(_t(1.4), _t(1.0), exact, 1e-5, perturbed=moved)
    verdict, numbers = leaf.judge()
    assert verdict == "ill-conditioned" and numbers["ill_conditioned_positions"] == 1
    assert DisputedLeaf(_t(1.4), _t(1.0), exact, 1e-5).judge()[0] == "dut-wrong"


def test_the_ballot_holds_the_positions_still_in_dispute_and_their_tolerance():
    ballot = {"index": 0}
    leaf = DisputedLeaf(_t(5.0, 1.0, INF), _t(2.0, 1.0, NAN), _f64(2.0, 1.0, 3.0), 1e-5, rtol=1e-3, overflow=True)
    verdict, numbers = leaf.judge(ballot)
    assert verdict == "dut-wrong" and numbers["overflow_rule"] and numbers["excused_positions"] == 1
    assert ballot["judged"].tolist() == [True, False, False]          # the overflow excused, the agreement no dispute
    assert ballot["atol"] == 1e-5 and ballot["rel"] == 1e-3 and ballot["tol"].shape == (3,)
    half_ballot = {}
    DisputedLeaf(_t(5.0, dtype=torch.float16), _t(2.0, dtype=torch.float16), _f64(2.0), 1e-3, summands=3) \
        .judge(half_ballot)
    assert half_ballot["rel"] == unit_roundoff(torch.float16) * (2 + 3)
