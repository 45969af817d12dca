"""A campaign's bounds on their own (campaign/budget.py, issue 39): the budget and its
stop grace, --max-cases, --max-findings, a stop, a Ctrl-C Python dropped, and the
budget's last tenth that a first failure waiting on the desk takes. A clock is handed
in: no campaign, no worker, no waiting."""
from __future__ import annotations

import threading

import pytest

from mpsfuzz.campaign.budget import STOP_GRACE_MAX_S, TRIAGE_RESERVE, Budget, overrun_s, stop_grace_s
from mpsfuzz.campaign.interrupts import InterruptLatch


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def budget(seconds=100.0, **kwargs) -> tuple[Budget, Clock]:
    clock = Clock()
    b = Budget(seconds, clock=clock, **kwargs)
    b.start = clock.now
    return b, clock


def test_the_overrun_and_the_stop_grace_fit_the_teardown():
    assert overrun_s(None) is None and stop_grace_s(None) is None
    assert overrun_s(20) == 15 and overrun_s(600) == 60
    assert stop_grace_s(20) == 7 and stop_grace_s(240) == 16 and stop_grace_s(8 * 3600) == STOP_GRACE_MAX_S


def test_the_budget_ends_the_fuzzing_and_gives_up_cases_at_its_end():
    b, clock = budget(100)
    assert b.end() == clock.now + 100
    assert b.out(cases=0, failing=0) is None and not b.past()
    clock.now += 100
    assert b.out(cases=0, failing=0) == "budget" and b.past()


def test_the_stop_grace_counts_from_the_budgets_end():
    b, clock = budget(240)
    assert b.grace_left() == 240 + stop_grace_s(240)
    clock.now += 240 + 10
    assert b.grace_left() == pytest.approx(stop_grace_s(240) - 10)
    clock.now += 100
    assert b.grace_left() == 0.0
    assert Budget(None).grace_left() is None and Budget(None).end() is None


def test_without_a_budget_only_the_counts_and_events_stop_it():
    b = Budget(None, max_cases=10, max_findings=2)
    assert not b.past() and not b.in_reserve()
    assert b.out(cases=9, failing=0) is None
    assert b.out(cases=10, failing=0) == "max-cases"
    assert b.out(cases=0, failing=1, in_triage=lambda: 1) == "max-findings"   # failures in triage count
    assert b.out(cases=0, failing=1, in_triage=lambda: 0) is None


def test_a_stop_comes_first_then_enough_then_the_counts():
    stop, enough = threading.Event(), threading.Event()
    b, _ = budget(100, max_cases=1, stop=stop, enough=enough)
    enough.set()
    assert b.out(cases=5, failing=0) == "max-findings" and not b.past()
    stop.set()
    assert b.out(cases=5, failing=0) == "stopped" and b.past()


def test_the_last_tenth_goes_to_the_desk_only_when_it_is_due():
    b, clock = budget(100)
    asked = []

    def due():
        asked.append(clock.now)
        return True
    clock.now += 50
    assert not b.in_reserve()
    clock.now += (1 - TRIAGE_RESERVE) * 100 - 50
    assert b.in_reserve()
    assert b.out(cases=0, failing=0, triage_due=lambda: False) is None
    assert b.out(cases=0, failing=0, triage_due=due) == "budget" and asked


def test_max_findings_reached_by_this_campaign_or_the_lanes_together():
    enough = threading.Event()
    b = Budget(None, max_findings=3, enough=enough)
    assert not b.enough_findings(2) and b.enough_findings(3)
    assert not b.reaches_max_findings(2) and b.reaches_max_findings(4)
    enough.set()
    assert b.enough_findings(0)
    assert not Budget(None).reaches_max_findings(10**6)


def test_a_ctrl_c_python_dropped_is_raised_again_and_gives_cases_up():
    latch = InterruptLatch()
    b, _ = budget(100, interrupts=latch)
    latch.pending = True
    assert b.past()
    with pytest.raises(KeyboardInterrupt):
        b.out(cases=0, failing=0)
    assert not latch.pending and not b.past()
