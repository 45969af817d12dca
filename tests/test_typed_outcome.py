"""A judged case crosses the process boundary typed (execution/outcome.py, issue 39): a
CaseOutcome of every kind round-trips through to_json/from_json, JSON text and pickle
(the pipe); the pool makes the outcome of mpsfuzz's own error in the worker, answers a
raising ``call`` with RaisedInWorker, and replaces a worker whose answer is poisoned."""
from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpsfuzz.execution.outcome import CaseOutcome, CaseSeconds, RaisedInWorker, poisons_worker
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import Failure
from mpsfuzz.triage.localise import Localised

WRONG = Failure("values", "wrong-values", "`neg` returns wrong values", "Mismatched elements: 1 / 3", "high",
                ("wrong-values",), details={"max_abs_diff": 2.0, "positions": [[0], [2]]}).to_json()
FAULT = Failure("errors", "device-fault", "`neg` faults", "device-side assert", "critical",
                ("device-fault", "neg")).to_json()
TRACE = 'Traceback (most recent call last):\n  File "executor.py", line 1\nValueError: the executor broke\n'

EVERY_KIND = {
    "judged": CaseOutcome(valid=True, ref_widened=True, grad_undefined="input 0 sits on a kink (at 0)",
                          failures=(WRONG,), seconds=CaseSeconds(run=0.5, check=0.125, jury=0.25)),
    "unsupported by the target": CaseOutcome(valid=True, unsupported=True, unsupported_message="no MPS kernel",
                                             seconds=CaseSeconds(run=0.5, check=0.0, jury=0.0)),
    "no case formed": CaseOutcome.no_case(CaseSeconds(run=0.25)),
    "input too large": CaseOutcome.no_case(),
    "out of memory": CaseOutcome.out_of_memory("CUDA out of memory. Tried to allocate 2.00 GiB\nmore lines"),
    "unsupported here": CaseOutcome.not_judgeable_here('"lt_cpu" not implemented for \'UInt32\''),
    "poisoned by a device fault": CaseOutcome.device_fault([FAULT]),
    "internal error": CaseOutcome.harness_error(TRACE),
}


@pytest.mark.parametrize("kind", sorted(EVERY_KIND))
def test_every_kind_of_outcome_round_trips_through_json_and_the_pipe(kind):
    outcome = EVERY_KIND[kind]
    assert CaseOutcome.from_json(outcome.to_json()) == outcome
    assert CaseOutcome.from_json(json.loads(json.dumps(outcome.to_json()))) == outcome
    assert pickle.loads(pickle.dumps(outcome)) == outcome


def test_the_special_outcomes_say_what_they_are():
    oom = EVERY_KIND["out of memory"]
    assert (oom.valid, oom.unsupported, oom.unsupported_message) == (
        False, True, "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert len(CaseOutcome.out_of_memory("x" * 500).unsupported_message) == len("out of memory: ") + 160
    here = EVERY_KIND["unsupported here"]
    assert not here.valid and not here.unsupported and here.unsupported_here.startswith('"lt_cpu"')
    fault = EVERY_KIND["poisoned by a device fault"]
    assert fault.poisoned and fault.valid and fault.failures == (FAULT,) and poisons_worker(fault)
    internal = EVERY_KIND["internal error"]
    assert internal.internal_error == TRACE and not internal.valid and not internal.failures
    assert not any(poisons_worker(o) for k, o in EVERY_KIND.items() if k != "poisoned by a device fault")
    assert EVERY_KIND["no case formed"].seconds.measured() == {"run": 0.25}
    assert EVERY_KIND["input too large"].seconds.measured() == {}


def test_the_stages_a_case_did_not_reach_are_left_out_of_its_seconds():
    assert CaseSeconds(run=1.0, jury=0.5).measured() == {"run": 1.0, "jury": 0.5}
    assert CaseSeconds.from_json({"run": 1, "check": None}) == CaseSeconds(run=1.0)
    assert EVERY_KIND["no case formed"].to_json()["seconds"] == {"run": 0.25}


_text = st.text(max_size=20)
_json_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _text)
_failures = st.builds(
    Failure, oracle=st.sampled_from(["values", "errors", "grads", "leak"]), kind=_text, title=_text,
    message=_text, severity=st.sampled_from(["critical", "high", "medium", "note"]),
    dedup_key=st.lists(_text, max_size=3).map(tuple),
    details=st.dictionaries(_text, st.one_of(_json_values, st.lists(_json_values, max_size=3)), max_size=3),
    blame=st.sampled_from(["target", "cpu", "both", "undecided"])).map(Failure.to_json)
_seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False)
_outcomes = st.builds(
    CaseOutcome, valid=st.booleans(), unsupported=st.booleans(), unsupported_message=_text,
    unsupported_here=st.none() | _text, poisoned=st.booleans(), ref_widened=st.booleans(),
    grad_undefined=st.none() | _text, failures=st.lists(_failures, max_size=3).map(tuple),
    seconds=st.builds(CaseSeconds, run=st.none() | _seconds, check=st.none() | _seconds, jury=st.none() | _seconds),
    internal_error=st.none() | _text)


@settings(max_examples=200, deadline=None)
@given(_outcomes)
def test_any_outcome_round_trips_through_json_text_and_pickle(outcome):
    assert CaseOutcome.from_json(json.loads(json.dumps(outcome.to_json()))) == outcome
    assert pickle.loads(pickle.dumps(outcome)) == outcome


# -- the pool --------------------------------------------------------------------------------

def raise_in_the_executor(case, target, oracle_names):
    raise ValueError("the executor broke")


def poison_a_case_of_three(case, target, oracle_names):
    """A case of three elements reports a lost device context; any other passes."""
    return CaseOutcome.device_fault([FAULT]) if case.inputs[0].shape == (3,) else CaseOutcome(valid=True)


def localised_on_a_poisoned_device(case, target):
    return Localised({"status": "kernel", "poisoned": True}, poisoned=True)


def _case(n: int = 2):
    return Case("neg", (TensorRecipe((n,), "float32", Layout(), ValueRecipe()),)).to_json()


def test_an_error_inside_the_worker_comes_back_as_the_harness_error_outcome(tmp_path):
    with WorkerPool("cpu", timeout_s=60, inflight_dir=tmp_path, execute=raise_in_the_executor) as pool:
        outcomes = pool.collect(pool.submit([_case(), _case()], (), ["neg", "neg"]))
        assert pool.restarts == 0          # mpsfuzz's error is not the worker's death
    assert [type(o) for o in outcomes] == [CaseOutcome, CaseOutcome]
    for outcome in outcomes:
        assert not outcome.valid and not outcome.failures and not outcome.poisoned
        assert outcome.internal_error.strip().endswith("ValueError: the executor broke"), outcome.internal_error
        assert "raise_in_the_executor" in outcome.internal_error


def test_a_call_that_raises_in_the_worker_comes_back_as_raised_in_worker(tmp_path):
    with WorkerPool("cpu", timeout_s=60, inflight_dir=tmp_path) as pool:
        answer = pool.call(raise_in_the_executor, _case(), [()], op="neg", timeout_s=60)
    assert isinstance(answer, RaisedInWorker)
    assert answer.traceback.strip().endswith("ValueError: the executor broke")


def test_a_poisoned_answer_replaces_the_worker(tmp_path):
    with WorkerPool("cpu", timeout_s=60, inflight_dir=tmp_path, execute=poison_a_case_of_three) as pool:
        outcomes = pool.collect(pool.submit([_case(3), _case(), _case()], (), ["neg"] * 3))
        # the poisoned worker exits after answering: the rest of the batch ran in a new one
        assert [(type(o), o.poisoned) for o in outcomes] == [(CaseOutcome, True), (CaseOutcome, False),
                                                             (CaseOutcome, False)]
        assert pool.restarts == 1
        assert isinstance(pool.call(localised_on_a_poisoned_device, _case(), op="neg", timeout_s=60), Localised)
        assert pool.restarts == 2
        assert pool.run(_case(), (), "neg") == CaseOutcome(valid=True) and pool.restarts == 2
