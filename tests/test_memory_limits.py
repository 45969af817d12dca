"""A machine's memory is a limit, not a finding and not a harness error (issue 31's large
class on an H200: 28 cases whose inputs could not be made on a full device were harness
errors, and two ops were set aside); and a worker hands a large case's cached device
memory back before the next case."""
from __future__ import annotations

import json

import torch

import mpsfuzz.oracles.judge as judge
from mpsfuzz.execution.targets import load_target
from mpsfuzz.generation.recipes import Case, TensorRecipe
from mpsfuzz.oracles import DEFAULT, worker_oracles

CASE = ('{"format": 3, "op": "exp", "variant": "functional", "inputs": [{"shape": [3, 4], "dtype": "float32", '
        '"layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []}, "values": {"distribution": '
        '"normal", "seed": 1, "low": null, "high": null, "specials": []}, "alias": null}], "kwargs": {}}')


def _case() -> Case:
    return Case.from_json(json.loads(CASE))


def test_inputs_that_do_not_fit_in_memory_are_unsupported_not_an_error(monkeypatch):
    def full(self, device="cpu"):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 18.00 GiB.")
    monkeypatch.setattr(TensorRecipe, "materialize", full)
    outcome = judge.judge_case(_case(), load_target("cpu"), worker_oracles(DEFAULT))
    assert outcome.unsupported and not outcome.valid and outcome.failures == ()
    assert outcome.unsupported_message.startswith("out of memory: CUDA out of memory")


def test_another_error_making_the_inputs_is_still_raised(monkeypatch):
    def broken(self, device="cpu"):
        raise ValueError("a bug of ours")
    monkeypatch.setattr(TensorRecipe, "materialize", broken)
    try:
        judge.judge_case(_case(), load_target("cpu"), worker_oracles(DEFAULT))
    except ValueError as exc:
        assert "a bug of ours" in str(exc)
    else:
        raise AssertionError("a harness bug was swallowed")


def test_a_large_case_hands_its_cached_device_memory_back(monkeypatch):
    released = []
    monkeypatch.setattr(judge, "release_cached_memory", lambda target: released.append(target.name))
    case = _case()
    monkeypatch.setattr(judge, "RELEASE_AFTER_BYTES", 48)       # the case's 12 float32 elements
    judge.judge_case(case, load_target("cpu"), worker_oracles(DEFAULT))
    assert released == ["cpu"]
    monkeypatch.setattr(judge, "RELEASE_AFTER_BYTES", 49)
    judge.judge_case(case, load_target("cpu"), worker_oracles(DEFAULT))
    assert released == ["cpu"]                                  # a smaller case keeps the cache
