"""A slice's batch on its own (campaign/batches.py, issue 39): sent to the pool, and
collected as one outcome per case, fewer where the cases still to run were given up, the
pool's own failure standing for each case it could not run. A pool stand-in; no worker."""
from __future__ import annotations

import pytest

from mpsfuzz.atomic import CorpusWriteError
from mpsfuzz.campaign.batches import InWorker, Slice, collect, submit
from mpsfuzz.execution.outcome import CaseOutcome
from mpsfuzz.execution.worker import WorkerStartAbandoned
from mpsfuzz.generation.recipes import Case


def case(n: int) -> Case:
    return Case.from_json({"format": 3, "op": "neg", "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": [n], "dtype": "float32", "alias": None,
         "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


SLICE = Slice("neg", 7, [case(1), case(2), case(3)])
PASSED = CaseOutcome(valid=True)


class Batch:
    def __init__(self, outcomes=()):
        self.outcomes = list(outcomes)


class Pool:
    def __init__(self, *, refuse=None, replies=None, breaks=None):
        self.refuse, self.replies, self.breaks = refuse, replies, breaks
        self.sent, self.asked = [], []

    def submit(self, cases, oracles, ops):
        if self.refuse is not None:
            raise self.refuse
        self.sent.append((cases, oracles, ops))
        return Batch(self.replies[:1] if self.breaks else ())

    def collect(self, batch, give_up=None, stop_at_hang=False):
        self.asked.append((give_up(), stop_at_hang))
        if self.breaks is not None:
            raise self.breaks
        return list(self.replies)


def test_a_slice_goes_to_the_pool_as_one_batch():
    pool = Pool(replies=[PASSED] * 3)
    sent = submit(SLICE, pool, ("values",))
    assert isinstance(sent, InWorker) and sent.slice is SLICE and isinstance(sent.batch, Batch)
    assert pool.sent == [([c.to_json() for c in SLICE.cases], ("values",), ["neg"] * 3)]
    assert collect(sent, pool, give_up=lambda: False) == [PASSED] * 3
    assert pool.asked == [(False, True)]                   # a hang ends the batch
    assert collect(sent, pool, give_up=lambda: True) == [PASSED] * 3
    assert len(pool.asked) == 1                            # collected once, kept


def test_a_batch_the_pool_refused_is_each_cases_harness_error_and_a_full_disk_ends_the_run():
    refused = RuntimeError("no worker")
    sent = submit(SLICE, Pool(refuse=refused), ())
    assert collect(sent, Pool(), give_up=lambda: False) == [refused] * 3
    with pytest.raises(CorpusWriteError):
        submit(SLICE, Pool(refuse=CorpusWriteError("/corpus", "No space left on device")), ())


def test_a_pool_that_breaks_midway_keeps_the_outcomes_it_had():
    broken = OSError("worker gone")
    pool = Pool(replies=[PASSED], breaks=broken)
    assert collect(submit(SLICE, pool, ()), pool, give_up=lambda: False) == [PASSED, broken, broken]
    started_late = Pool(replies=[PASSED], breaks=WorkerStartAbandoned("budget"))
    assert collect(submit(SLICE, started_late, ()), started_late, give_up=lambda: True) == [PASSED]


def test_a_batch_given_up_before_its_worker_started_has_no_outcomes():
    assert collect(InWorker(SLICE, WorkerStartAbandoned("budget")), Pool(), give_up=lambda: True) == []
    assert collect(InWorker(SLICE, None), Pool(), give_up=lambda: True) == []
