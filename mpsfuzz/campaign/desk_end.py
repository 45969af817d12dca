"""What becomes of the desk's jobs when a run ends.

Without a budget the desk finishes the failures handed to it (they are findings). With
one it has the stop grace (``budget.py``); what it has not finished then is given up and
left in DIR/triage-pending/ for the next campaign on the corpus (:meth:`DeskEnd.defer`):
the jobs not started, the one in hand (its worker killed; from then on the desk's thread
stores and counts nothing) and the failures their holders held, in memory until then. A
job given up that a finding filed meanwhile covers is a sighting, not left pending (issue
37). Told to stop (the daemon's SIGTERM), the desk gets a second for the job in hand; a
Ctrl-C records the jobs not started as they are. The scripts of earlier findings to run
again wait for the next run.
"""
from __future__ import annotations

import threading
from typing import Callable, NamedTuple

from ..corpus.finding import signature_of
from ..events import Notice, Stats
from .desk_jobs import Reverification
from .known_findings import KnownFindings
from .pending import PendingFailures, remove


class Held(NamedTuple):
    """A failure a holder held, kept pending as a job's failure is."""
    case: object
    failure: object
    signature: str


class DeskEnd:
    """Ends the desk's work for a campaign: ``known`` (sightings, what holders held),
    ``pending`` (triage-pending/), ``stats`` under ``lock``; ``abandoned``: set once the
    desk's jobs were given up. ``record_untriaged(job)``: records a job's failure as it is
    (no file could be written, or a Ctrl-C); ``reverify_left(n)``: scripts not run;
    ``emit(event)``."""

    def __init__(self, *, known: KnownFindings, pending: PendingFailures, stats: Stats, abandoned: threading.Event,
                 emit: Callable, record_untriaged: Callable, reverify_left: Callable, lock=None):
        self.known, self.pending, self.stats, self.abandoned = known, pending, stats, abandoned
        self.emit, self.record_untriaged, self.reverify_left = emit, record_untriaged, reverify_left
        self._lock = lock if lock is not None else threading.RLock()

    def close(self, desk, stopped: str, *, budgeted: bool, defer_on_stop: bool, grace_left: Callable) -> str:
        """Let ``desk`` finish the failures handed to it: to the end without a budget
        (``budgeted``), within the stop grace with one (``grace_left()``: seconds, None
        for no bound; the rest stay pending: :meth:`defer`); told to stop (``stopped`` is
        "stopped"), a second for the job in hand, deferring the rest with
        ``defer_on_stop``. A Ctrl-C, before or while it does, records the ones not
        started as they are. Why the run stopped (a Ctrl-C meanwhile: "interrupted")."""
        if budgeted or stopped in ("interrupted", "stopped"):
            # Scripts of earlier findings wait for the next run rather than the end.
            self.reverify_left(len(desk.withdraw(lambda job: isinstance(job, Reverification))))
        try:
            if stopped == "stopped" and defer_on_stop:
                if not desk.drain(timeout=1.0):   # the daemon must be gone within seconds
                    self.defer(desk)
                return stopped
            if stopped not in ("interrupted", "stopped"):
                try:
                    grace = grace_left()
                    if desk.pending:
                        bound = f" (at most {grace:.0f}s more)" if grace is not None else ""
                        self.emit(Notice(f"triaging the last {desk.pending} failure(s) before stopping{bound}"))
                    if not desk.drain(timeout=grace):
                        self.defer(desk)
                    return stopped
                except KeyboardInterrupt:
                    stopped = "interrupted"
            # Interrupted (or stopped, not deferring): the ones not started are recorded
            # as they are; the job in hand gets a moment to finish.
            for job in desk.abandon():
                self.record_untriaged(job)
            desk.drain(timeout=1.0 if stopped == "stopped" else 5.0)
            return stopped
        finally:
            quick = stopped in ("interrupted", "stopped") or self.abandoned.is_set()
            desk.close(timeout=1.0 if quick else 10.0)

    def defer(self, desk) -> None:
        """Give up ``desk``'s jobs and leave them in triage-pending/ for the next campaign
        on the corpus: those not started, the one in hand (its worker killed; from now on
        the desk's thread stores and counts nothing) and the failures their holders held
        (in memory only until now). Nothing is lost."""
        jobs = 0
        cases = set()   # (a holder also holds its own case: written once)
        for job in desk.abandon():            # not started: pending already, as a rule
            if isinstance(job, Reverification):
                self.reverify_left(1)
                continue
            cases.add(job[0].case)
            if self.sighted_now(job):
                continue
            if self.kept_pending(job):
                jobs += 1
            else:                             # no file could be written: recorded as it is
                self.record_untriaged(job)
        with self._lock:
            self.abandoned.set()
        in_hand = desk.in_hand
        desk.cancel()
        for job in in_hand:
            if isinstance(job, Reverification):
                self.reverify_left(1)
            else:
                cases.add(job[0].case)
                jobs += self.kept_pending(job)
        held = self.known.take_held()
        kept = 0
        for shapes in held.values():
            for case, failure, _count in shapes.values():
                if case in cases:
                    continue
                cases.add(case)
                kept += self.pending.keep(Held(case, failure, signature_of(case, failure)), False) is not None
        if jobs or kept:
            with self._lock:
                self.stats.left_pending += jobs + kept
            self.emit(Notice(f"out of time to triage {jobs} failure(s) (and {kept} held while they were): left in "
                             f"{self.pending.dir}, the next run on this corpus triages them"))

    def sighted_now(self, job) -> bool:
        """Whether a job given up is a sighting of a finding recorded since it was handed
        to the desk (counted as one, its pending file removed): left pending, the next run
        would only find that out (issue 37, H200: a cuda-compiled run left 57 failures,
        among them five of an FFT assertion and two of an index_add_ lowering it had
        filed while they waited)."""
        err = job[0]
        if self.known.sighting(err.case, err.failure) is None:
            return False
        remove(job[3])
        return True

    def kept_pending(self, job) -> bool:
        """Whether the job's failure is in triage-pending/ (written now if it was not)."""
        err, flaky, _holder, pending = job
        if pending is not None:
            return pending.exists()   # (recorded meanwhile: its file was removed)
        return self.pending.keep(err, flaky) is not None
