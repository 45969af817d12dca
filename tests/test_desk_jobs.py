"""The desk's jobs on their own (campaign/desk_jobs.py and pending.py, issue 39): which
desk a job goes to, the order the desks take jobs in, and the failures waiting in
triage-pending/ (kept, shared among lanes, taken up by the next run, an unreadable one
moved aside). No campaign, desk thread or worker."""
from __future__ import annotations

import json
import os
import time

from mpsfuzz.campaign.desk_jobs import LAST, Job, Reverification, desk_order, first_rank, is_slow, slow_to_triage
from mpsfuzz.campaign.pending import PENDING_DIR, PendingFailures, remove, takes_share
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
FAULT = Failure("errors", "device-fault", "raises", "CUDA error", "critical", ("device-fault",))
CRASH = Failure("crash", "signal", "crash", "SIGSEGV", "critical", ("SIGSEGV",))
CPU_WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",), blame="cpu")


def case(op: str, shape=(3,)) -> Case:
    return Case.from_json({"format": 3, "op": op, "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": list(shape), "dtype": "float32", "alias": None,
         "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


class Err:
    """What a job's finding exception carries."""

    def __init__(self, op: str, failure: Failure, signature: str = "0123456789abcdef", shape=(3,)):
        self.case, self.failure, self.signature = case(op, shape), failure, signature


def job(op: str, failure: Failure) -> Job:
    return Job(Err(op, failure), False, None, None)


def test_crashes_hangs_and_device_faults_go_to_the_slow_desk():
    assert slow_to_triage(CRASH) and slow_to_triage(FAULT) and not slow_to_triage(WRONG)
    assert is_slow(job("neg", FAULT)) and not is_slow(job("neg", WRONG))
    assert not is_slow(Reverification("x.json"))
    assert is_slow((Err("neg", CRASH), False, None, None))      # a plain tuple is a job too


def test_the_desks_take_the_targets_failures_of_ops_without_a_finding_first():
    filed = {"tanh"}
    order = {name: desk_order(j, filed.__contains__) for name, j in {
        "first": job("neg", WRONG), "op-filed": job("tanh", WRONG), "cpu": job("neg", CPU_WRONG),
        "script": Reverification("x.json")}.items()}
    assert sorted(order, key=order.get) == ["first", "op-filed", "cpu", "script"]
    assert first_rank(order["first"]) and not any(first_rank(order[n]) for n in ("op-filed", "cpu", "script"))


def test_a_job_whose_order_cannot_be_told_goes_last_and_is_not_lost():
    def broken(op):
        raise RuntimeError("no lock")
    assert desk_order(job("neg", WRONG), broken) == LAST
    assert desk_order((None,), lambda op: False) == LAST


def test_a_failure_kept_pending_is_read_back_by_a_later_run(tmp_path):
    writer = PendingFailures(tmp_path)
    before = time.time()
    first = writer.keep(Err("neg", WRONG, "a" * 16), False)
    second = writer.keep(Err("tanh", WRONG, "b" * 16, shape=(2, 2)), True)
    assert first.parent == tmp_path / PENDING_DIR and first != second
    assert first.name.startswith(f"{os.getpid()}-1-aaaaaaaaaaaa")
    # this run's own files are not an earlier run's
    assert list(PendingFailures(tmp_path).earlier(before, on_error=None)) == []
    later = list(PendingFailures(tmp_path).earlier(time.time() + 1, on_error=None))
    assert [(left.path, left.case.op, left.signature, left.flaky) for left in later] == \
        [(first, "neg", "a" * 16, False), (second, "tanh", "b" * 16, True)]
    assert later[1].case.inputs[0].shape == (2, 2) and later[0].failure == WRONG
    remove(first)
    remove(first)          # gone already: fine
    remove(None)
    assert not first.exists()


def test_lanes_share_what_an_earlier_run_left_by_the_names(tmp_path):
    writer = PendingFailures(tmp_path)
    for i in range(12):
        writer.keep(Err("neg", WRONG, f"{i:016x}"), False)
    names = sorted(p.name for p in (tmp_path / PENDING_DIR).glob("*.json"))
    parts = [[left.path.name for left in PendingFailures(tmp_path, (k, 3)).earlier(time.time() + 1, None)]
             for k in range(3)]
    assert sorted(sum(parts, [])) == names
    assert all(takes_share((k, 3), n) for k, part in enumerate(parts) for n in part)
    assert list(PendingFailures(tmp_path, None).earlier(time.time() + 1, None)) == []   # nothing taken
    assert not takes_share(None, names[0])


def test_an_unreadable_pending_file_is_moved_aside_never_lost(tmp_path):
    pending = PendingFailures(tmp_path)
    kept = pending.keep(Err("neg", WRONG), False)
    broken = tmp_path / PENDING_DIR / "0-0-broken.json"
    broken.write_text("{not json")
    errors = []
    later = list(pending.earlier(time.time() + 1, errors.append))
    assert [left.path for left in later] == [kept]
    assert len(errors) == 1 and not broken.exists() and broken.with_suffix(".corrupt").exists()


def test_a_failure_that_cannot_be_written_is_still_triaged(tmp_path):
    (tmp_path / PENDING_DIR).write_text("a file where the folder goes")
    assert PendingFailures(tmp_path).keep(Err("neg", WRONG), False) is None


def test_a_pending_file_says_what_it_holds(tmp_path):
    path = PendingFailures(tmp_path).keep(Err("neg", WRONG, "c" * 16), True)
    data = json.loads(path.read_text())
    assert data["format"] == 1 and data["signature"] == "c" * 16 and data["flaky"] is True
    assert Case.from_json(data["case"]) == case("neg") and Failure.from_json(data["failure"]) == WRONG
