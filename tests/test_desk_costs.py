"""What a failure costs the desks, bounded (issue 37, point 1): a triage re-run of a case
judged already gets the verdict it got (the jury's float64 runs and traces are
deterministic in the outputs), and a repro script is verified in a process forked from
the workers' zygote, judged as a fresh interpreter's run would be."""
from __future__ import annotations

import dataclasses
import textwrap

import pytest

import mpsfuzz.oracles as oracles_package
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import DEFAULT, all_oracles, worker_oracles
from mpsfuzz.oracles import judge as judge_module
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports.repro import Script
from mpsfuzz.reports.verify import run_and_judge
from mpsfuzz.testing.faults import FaultTarget

FAULT_TARGET = "mpsfuzz.testing.faults:target"


def _case(shape, seed=0) -> Case:
    return Case.from_json({"format": 3, "op": "sigmoid", "variant": "functional", "inputs": [
        {"shape": list(shape), "dtype": "float32", "layout": {"offset": 0, "gaps": [1, 2], "permutation": [],
                                                              "expanded": []},
         "values": {"distribution": "normal", "seed": seed, "low": None, "high": None, "specials": []},
         "alias": None}], "kwargs": {}})


def test_a_case_judged_again_with_the_same_outputs_gets_its_verdict_without_the_jury(monkeypatch):
    arbiter = all_oracles()["arbiter"]
    calls = []

    def counted(obs, failure):
        calls.append(obs.case)
        return arbiter.check(obs, failure)
    monkeypatch.setitem(oracles_package.ORACLES, "arbiter", dataclasses.replace(arbiter, check=counted))
    monkeypatch.setattr(judge_module, "_VERDICTS", type(judge_module._VERDICTS)())
    target = FaultTarget(["sigmoid_noncontig"])
    oracles = worker_oracles(DEFAULT)
    first = judge_case(_case((4, 3)), target, oracles)
    again = judge_case(_case((4, 3)), target, oracles)
    assert first.failures and [f["blame"] for f in again.failures] == [f["blame"] for f in first.failures]
    assert len(calls) == len(first.failures)          # the second run asked the jury nothing
    judge_case(_case((4, 3), seed=1), target, oracles)   # other values: other outputs, judged
    assert len(calls) == 2 * len(first.failures)


SCRIPTS = {
    "assertion": ("print('before')\nassert 1 == 2, 'the bug'\n", {"outcome": "assertion"}, True),
    "signal": ("import os\nprint('before', flush=True)\nos.abort()\n", {"outcome": "signal", "signal": "SIGABRT"},
               True),
    "clean": ("import torch\nprint(torch.ones(2).sum().item())\n", {"outcome": "assertion"}, False),
    "raises": ("import torch\ntorch.ones(2) @ torch.ones(3)\n",
               {"outcome": "raises", "type": "RuntimeError", "message": ""}, True),
}


@pytest.mark.parametrize("kind", sorted(SCRIPTS))
def test_a_forked_verification_judges_a_script_as_a_fresh_interpreter_does(kind):
    text, expect, reproduced = SCRIPTS[kind]
    script = Script(text=textwrap.dedent(text), expect=expect, body_lines=text.count("\n"))
    fresh = run_and_judge(script, target_spec="cpu", timeout_s=60)
    forked = run_and_judge(script, target_spec="cpu", timeout_s=60, warm=True)
    assert fresh.reproduced is forked.reproduced is reproduced, (fresh, forked)
    assert fresh.detail == forked.detail
    if kind == "assertion":
        assert "AssertionError: the bug" in forked.output and "before" in forked.output
        assert "runpy" not in forked.output and "verify.py" not in forked.output   # the script's frames only


def test_a_forked_verification_is_killed_at_its_time_limit():
    script = Script(text="import time\ntime.sleep(60)\n", expect={"outcome": "timeout"}, body_lines=2)
    verdict = run_and_judge(script, target_spec="cpu", timeout_s=2, warm=True)
    assert verdict.reproduced is True and "did not return" in verdict.detail
