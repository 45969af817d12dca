"""campaign/behaviour.py: the behaviour key of a case and its result, on real cases
judged in this process (the fault-injecting CPU target as the device)."""
from __future__ import annotations

import pytest

from mpsfuzz.campaign.behaviour import behaviour_of, outcome_class, size_class
from mpsfuzz.execution.observation import ProcessEvent
from mpsfuzz.execution.outcome import CaseOutcome
from mpsfuzz.generation.recipes import Alias, Case, Layout, TensorRecipe
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import Fault, FaultTarget

ORACLES = ("values", "metadata", "errors")


def t(shape, dtype="float32", layout=Layout(), alias=None) -> TensorRecipe:
    return TensorRecipe(tuple(shape), dtype, layout, alias=alias)


def corrupt(op: str) -> Fault:
    return Fault(f"corrupt-{op}", "test", (f"aten::{op}",), lambda f, a, k: True, "corrupt")


@pytest.mark.parametrize("shapes, expected", [
    ([(0, 3)], "empty"),
    ([(4,), (0,)], "empty"),
    ([()], "scalar"),
    ([(), ()], "scalar"),
    ([(), (8, 8)], "small"),            # 64 elements: the largest input decides
    ([(8, 9)], "medium"),
    ([(64, 64)], "medium"),
    ([(65, 64)], "large"),
])
def test_size_class(shapes, expected):
    assert size_class(Case("add" if len(shapes) == 2 else "neg", tuple(t(s) for s in shapes))) == expected


def test_a_passing_case_and_the_same_case_failing_are_two_behaviours():
    case = Case("neg", (t((3, 4)),))
    passed = judge_case(case, FaultTarget([]), ORACLES)
    failed = judge_case(case, FaultTarget([corrupt("neg")]), ORACLES)
    assert behaviour_of(case, passed) == ("neg", "float", "contiguous", "small", "pass")
    assert behaviour_of(case, failed) == ("neg", "float", "contiguous", "small", "fail:values:wrong-values")


def test_the_key_is_coarse_shapes_and_seeds_of_one_class_are_one_behaviour():
    clean = FaultTarget([])
    a, b = Case("neg", (t((3, 4)),)), Case("neg", (t((7,)),))
    assert behaviour_of(a, judge_case(a, clean, ORACLES)) == behaviour_of(b, judge_case(b, clean, ORACLES))
    hash(behaviour_of(a, judge_case(a, clean, ORACLES)))


def test_dtype_layout_and_size_classes_tell_cases_apart():
    clean = FaultTarget([])
    cases = [Case("neg", (t((3, 4)),)),
             Case("neg", (t((3, 4), "int32"),)),
             Case("neg", (t((3, 4), layout=Layout(permutation=(1, 0))),)),
             Case("neg", (t((100, 100)),)),
             Case("add", (t((3, 4)), t((3, 4), "int64"))),
             Case("add", (t((4,)), t((4,), alias=Alias(of=0)))),
             Case("neg", (t((0, 4)),))]
    keys = [behaviour_of(c, judge_case(c, clean, ORACLES)) for c in cases]
    assert len(set(keys)) == len(keys), keys
    assert [k[1:4] for k in keys] == [("float", "contiguous", "small"), ("integral", "contiguous", "small"),
                                      ("float", "strided", "small"), ("float", "contiguous", "large"),
                                      ("mixed", "contiguous", "small"), ("float", "aliased", "small"),
                                      ("float", "contiguous", "empty")]


def test_a_case_cpu_rejects_is_invalid():
    case = Case("mm", (t((2, 3)), t((4, 5))))
    result = judge_case(case, FaultTarget([]), ORACLES)
    assert result.valid is False
    assert behaviour_of(case, result)[-1] == "invalid"


@pytest.mark.parametrize("result, expected", [
    (CaseOutcome(valid=True), "pass"),
    (CaseOutcome.no_case(), "invalid"),
    (CaseOutcome(valid=True, unsupported=True), "unsupported"),
    (CaseOutcome.out_of_memory("CUDA out of memory. Tried to allocate 2.00 GiB"), "unsupported"),
    (CaseOutcome.not_judgeable_here("no CPU kernel"), "unsupported-here"),
    (CaseOutcome.harness_error("Traceback ..."), "internal"),
    (CaseOutcome(valid=True, failures=({"oracle": "values", "kind": "wrong-values"},
                                       {"oracle": "errors", "kind": "dut-raises"},
                                       {"oracle": "values", "kind": "wrong-values"})),
     "fail:errors:dut-raises+values:wrong-values"),
    (CaseOutcome.device_fault([{"oracle": "errors", "kind": "device-fault"}]), "fail:errors:device-fault"),
    (ProcessEvent(op="neg", target_name="mps", kind="died", returncode=-11), "process:died"),
    (ProcessEvent(op="neg", target_name="mps", kind="timeout", timeout_s=20.0), "process:timeout"),
])
def test_outcome_class(result, expected):
    assert outcome_class(result) == expected


@pytest.mark.parametrize("result", [42, {"valid": True, "unsupported": False, "failures": []}])
def test_a_result_of_another_kind_is_refused_by_name(result):
    """A dict (the worker's result before it was typed, issue 39) is no outcome either."""
    with pytest.raises(TypeError, match=r"result=(42|\{'valid')"):
        outcome_class(result)
