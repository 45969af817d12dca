"""mpsfuzz's own verdict time is not the target's (execution/harness_clock.py): issue 31
on an H200 filed cumprod@large and cumsum@large as hangs where the worker was still
tracing the jury's decomposition. A case that judges longer than its timeout is no hang;
one whose judging outlasts the judge's own limit is given up as "slow-judge" (a harness
error in the campaign), and a case that really runs long is still a hang."""
from __future__ import annotations

import time

from mpsfuzz.execution import worker as worker_module
from mpsfuzz.execution.harness_clock import judging, on_reference, on_target
from mpsfuzz.execution.observation import ProcessEvent
from mpsfuzz.execution.outcome import CaseOutcome
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe


def judge_slowly(case, target, oracle_names):
    with judging():
        with judging():          # nested: counted once
            time.sleep(2.5)
    return CaseOutcome(valid=True)


def judge_by_running_the_target_slowly(case, target, oracle_names):
    with judging():
        time.sleep(0.2)
        with on_target():        # a juror calling the target again: its time counts
            time.sleep(2.5)
    return CaseOutcome(valid=True)


def run_slowly(case, target, oracle_names):
    time.sleep(2.5)
    return CaseOutcome(valid=True)


def run_the_reference_slowly(case, target, oracle_names):
    time.sleep(0.2)              # the target's call returned
    with on_reference():
        time.sleep(2.5)
    return CaseOutcome(valid=True)


def _case():
    return Case("neg", (TensorRecipe((2,), "float32", Layout(), ValueRecipe()),)).to_json()


def test_judging_does_not_count_against_the_case_timeout(tmp_path):
    with WorkerPool("cpu", timeout_s=1.0, inflight_dir=tmp_path, execute=judge_slowly) as pool:
        outcomes = pool.collect(pool.submit([_case(), _case()], (), ["neg", "neg"]))
    assert all(isinstance(o, CaseOutcome) and o.valid for o in outcomes), outcomes


def test_a_case_that_runs_long_is_still_a_hang(tmp_path):
    with WorkerPool("cpu", timeout_s=1.0, inflight_dir=tmp_path, execute=run_slowly) as pool:
        outcome = pool.run(_case(), (), "neg")
    assert isinstance(outcome, ProcessEvent) and outcome.kind == "timeout"


def test_judging_past_its_own_limit_is_given_up_as_slow_judge(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_module, "JUDGE_TIMEOUT_S", 1.0)
    with WorkerPool("cpu", timeout_s=30.0, inflight_dir=tmp_path, execute=judge_slowly) as pool:
        outcome = pool.run(_case(), (), "neg")
    assert isinstance(outcome, ProcessEvent) and outcome.kind == "slow-judge"
    assert outcome.timeout_s == 1.0


def test_a_target_call_inside_the_verdict_still_counts_as_running(tmp_path):
    with WorkerPool("cpu", timeout_s=1.0, inflight_dir=tmp_path, execute=judge_by_running_the_target_slowly) as pool:
        outcome = pool.run(_case(), (), "neg")
    assert isinstance(outcome, ProcessEvent) and outcome.kind == "timeout"


def test_a_timeout_inside_the_cpu_reference_is_no_hang_of_the_target(tmp_path):
    """Eager CPU loops on some argument extremes (issue 38): the worker is given up as
    "slow-reference", which the campaign skips with a notice instead of filing a hang."""
    with WorkerPool("cpu", timeout_s=1.0, inflight_dir=tmp_path, execute=run_the_reference_slowly) as pool:
        outcome = pool.run(_case(), (), "neg")
        assert isinstance(outcome, ProcessEvent) and outcome.kind == "slow-reference"
        again = pool.run(_case(), (), "neg")     # the clock was reset with the new worker
    assert isinstance(again, ProcessEvent) and again.kind == "slow-reference"
