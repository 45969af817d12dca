"""When a campaign stops: its time budget, --max-cases, --max-findings, a stop, a Ctrl-C.

A budget is a hard bound (issue 37, point 2): a run ends within OVERRUN_SHARE of its
budget, or OVERRUN_MIN_S where that is more (a CI job's time limit is set by it). At
the budget's end the cases still running are given up at once, and the triage of
failures handed to the desk goes on for at most the *stop grace*; what it has not
finished stays in DIR/triage-pending/ (the job in hand given up, its worker killed),
which the next run or daemon start on the corpus triages first. The grace is what the
overrun allows less TEARDOWN_S (the desk's thread and workers closed, the summary and
run record written, what the campaign started killed; lanes report within it), at
most STOP_GRACE_MAX_S: 7 s for a 90 s run, 16 s for 240 s, 30 s for 8 hours. (Told to
stop, by SIGTERM, a campaign gives triage 1 s; without a budget, --max-cases and
--max-findings runs finish their triage.)
"""
from __future__ import annotations

import time
from typing import Callable

OVERRUN_SHARE = 0.1
OVERRUN_MIN_S = 15.0
TEARDOWN_S = 8.0
STOP_GRACE_MAX_S = 30.0

# The share of a budget at its end that the desk may take from the fuzzing
# (Budget.in_reserve: a first failure waiting on the desk is filed, not left pending).
TRIAGE_RESERVE = 0.1


def overrun_s(budget_s: float | None) -> float | None:
    """How long past ``budget_s`` a run may end (None: no budget, no bound)."""
    return None if budget_s is None else max(OVERRUN_SHARE * budget_s, OVERRUN_MIN_S)


def stop_grace_s(budget_s: float | None) -> float | None:
    """How long past ``budget_s`` the desk may go on triaging (None: no budget, no bound)."""
    return None if budget_s is None else min(STOP_GRACE_MAX_S, max(2.0, overrun_s(budget_s) - TEARDOWN_S))


class BudgetExhausted(BaseException):
    """Stops a Hypothesis run from inside the test body (BaseException passes through);
    its message is why the fuzzing stopped ("budget", "max-cases", ...)."""


class Budget:
    """A campaign's bounds, counted from ``start`` (time.monotonic(); the campaign sets
    it when it runs, lanes from their coordinator's start): ``budget_s`` (None: no time
    bound), ``max_cases`` and ``max_findings`` (None: none); ``stop`` (an Event: end now,
    SIGTERM), ``enough`` (an Event: end as a budget does, lanes' --max-findings), and
    ``interrupts`` (an InterruptLatch: a Ctrl-C, also one Python dropped)."""

    def __init__(self, budget_s: float | None = None, *, max_cases: int | None = None,
                 max_findings: int | None = None, stop=None, enough=None, interrupts=None,
                 clock: Callable[[], float] = time.monotonic):
        self.budget_s, self.max_cases, self.max_findings = budget_s, max_cases, max_findings
        self.stop, self.enough, self.interrupts = stop, enough, interrupts
        self.clock = clock
        self.start = 0.0

    def end(self) -> float | None:
        """When the budget ends (None: no budget)."""
        return None if self.budget_s is None else self.start + self.budget_s

    def past(self) -> bool:
        """Whether cases still running are to be given up: told to stop, interrupted, or
        past the budget's end (a batch of hangs is not waited out, case after case)."""
        if (self.stop is not None and self.stop.is_set()) or (self.interrupts is not None and self.interrupts.pending):
            return True
        end = self.end()
        return end is not None and self.clock() >= end

    def grace_left(self) -> float | None:
        """Seconds left of the stop grace (None: no budget, no bound)."""
        end = self.end()
        if end is None:
            return None
        return max(0.0, end + stop_grace_s(self.budget_s) - self.clock())

    def in_reserve(self) -> bool:
        """Whether the budget is in its last TRIAGE_RESERVE, where the desk may take the
        rest of it from the fuzzing."""
        return self.budget_s is not None and self.clock() - self.start >= (1 - TRIAGE_RESERVE) * self.budget_s

    def reaches_max_findings(self, findings: int) -> bool:
        """Whether ``findings`` (those failing the run, with those on their way) reach
        --max-findings."""
        return self.max_findings is not None and findings >= self.max_findings

    def enough_findings(self, failing: int) -> bool:
        """--max-findings reached (by this campaign, ``failing``, or by the lanes together)."""
        return (self.enough is not None and self.enough.is_set()) or self.reaches_max_findings(failing)

    def out(self, *, cases: int, failing: int, in_triage: Callable[[], int] = lambda: 0,
            triage_due: Callable[[], bool] = lambda: False) -> str | None:
        """Why the fuzzing stops now, if it must: "stopped", "max-findings", "max-cases"
        or "budget" (also once ``triage_due()``: the rest of the budget is the desk's).
        ``cases``: run so far; ``failing``: findings failing the run; ``in_triage()``:
        failures in triage, which count towards --max-findings (most become findings, and
        the desk finishes them). A Ctrl-C that Python dropped where it was raised is
        raised here again."""
        if self.interrupts is not None:
            self.interrupts.check()
        if self.stop is not None and self.stop.is_set():
            return "stopped"
        if self.enough is not None and self.enough.is_set():
            return "max-findings"
        if self.max_cases is not None and cases >= self.max_cases:
            return "max-cases"
        if self.budget_s is not None and self.clock() - self.start >= self.budget_s:
            return "budget"
        if triage_due():
            return "budget"
        if self.max_findings is not None and failing + in_triage() >= self.max_findings:
            return "max-findings"
        return None
