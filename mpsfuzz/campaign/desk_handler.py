"""The triage desk's handler: what becomes of a job, on the desk's thread.

A failure's job is shrunk by a replay of its slice (replay.py) unless a finding filed
since it was handed over covers it, then triaged and filed (``DeskIntake.record_safely``:
recorder.py); its pending file is removed and its placeholder retired, and the failures
the placeholder held meanwhile are judged again against the findings as they are now: a
sighting, a job of their own in the desk's order, or kept pending for the next run where
triage was given up or --max-findings reached. A Reverification job runs an earlier
finding's script again (reverification.py).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from ..corpus.finding import signature_of
from ..corpus.store import CorpusWriteError
from ..events import Notice, Stats
from .budget import Budget
from .desk_jobs import Reverification
from .finding_errors import Abandoned, error_type
from .intake import DeskIntake
from .known_findings import KnownFindings
from .pending import remove
from .replay import SliceReplay
from .reverification import Reverifications
from .slice_state import SliceState


class DeskHandler:
    """Handles the desk's jobs handed in through ``intake``: shrunk by ``replay`` in the
    desk thread's ``state``, judged against ``known``, scripts run again by
    ``reverifications``; ``stats`` counted under ``lock``, ``budget`` says whether
    --max-findings is reached; ``abandoned``: set once the desk's jobs were given up.
    ``spent(stage, seconds)``, ``emit(event)``. :attr:`error`: a CorpusWriteError met on
    the desk's thread (the campaign ends with it)."""

    def __init__(self, intake: DeskIntake, replay: SliceReplay, known: KnownFindings, state: SliceState,
                 reverifications: Reverifications, stats: Stats, budget: Budget, *, abandoned: threading.Event,
                 spent: Callable, emit: Callable, lock=None):
        self.intake, self.replay, self.known, self.state = intake, replay, known, state
        self.reverifications, self.stats, self.budget, self.abandoned = reverifications, stats, budget, abandoned
        self.spent, self.emit = spent, emit
        self._lock = lock if lock is not None else threading.RLock()
        self.error: CorpusWriteError | None = None

    def triaged(self, job, pool, *, triage_it: bool = True) -> None:
        """The desk's handler: record the job's failure, then retire its placeholder
        (the sightings it collected meanwhile go to the finding it became); or run an
        unverified finding's script again."""
        if isinstance(job, Reverification):
            if triage_it:
                self.reverifications.run(job)
            return
        err, flaky, holder, pending = job
        desk = self.intake.desk
        self.state.pressed = desk is not None and desk.queued(self.intake.first_rank) > 0
        try:
            if err.to_shrink is not None and self.known.covering_or_none(err.case, err.failure,
                                                                         settled=True) is not None:
                err.to_shrink = None   # filed since it was handed over: a sighting, nothing to shrink
            if err.to_shrink is not None and triage_it and pool is not None:
                shrinking = time.monotonic()
                try:
                    err, flaky = self.replay.shrunk(err, holder, pool)
                finally:
                    self.spent("shrink", time.monotonic() - shrinking)
            signature = self.intake.record_safely(err, pool, flaky=flaky, triage_it=triage_it)
        except CorpusWriteError as exc:
            self.error = exc
            return  # still pending: the next campaign on the corpus records it
        remove(pending)
        held = self.known.retire(holder, signature)
        self.judge_held(held, signature, pool, triage_it=triage_it)

    def recorded_untriaged(self, job) -> None:
        """An abandoned or failed triage job: its shrunk case is recorded as it is."""
        self.triaged(job, None, triage_it=False)

    def judge_held(self, held: dict, signature: str | None, pool, *, triage_it: bool) -> None:
        """Judge the failures a holder held against the findings as they are now: a
        sighting of the finding that covers it, else a failure of its own, recorded (on
        the desk's thread: triaged now) or, where triage was abandoned or --max-findings
        reached, kept pending for the next campaign on the corpus rather than stored
        unexplained."""
        intake = self.intake
        kept = 0
        for case, failure, count in held.values():
            covering = self.known.covering_or_none(case, failure, settled=True)
            err = None if covering is not None else \
                error_type(case.op, failure.oracle, failure.kind)(case, failure, signature_of(case, failure))
            if err is not None and self.abandoned.is_set():
                kept += intake.keep_pending(err, False) is not None   # past the stop grace
                continue
            if err is not None and (not triage_it or self.budget.enough_findings(self.stats.failing)):
                # Not triaged now (abandoned, or --max-findings reached): the next
                # campaign on the corpus triages it.
                kept += 1
                if intake.keep_pending(err, False) is None:
                    intake.record_safely(err, pool, flaky=False, triage_it=False)
                continue
            if err is not None and intake.desk is not None:
                # A job of its own, in the desk's order (an op with a finding waits behind
                # the ops with none), not triaged here ahead of them.
                intake.hand_to_desk(err, False, intake.keep_pending(err, False))
                continue
            if err is not None:
                try:
                    became = intake.record_safely(err, pool, flaky=False)
                except Abandoned:   # given up while it was triaged: pending, as the rest
                    kept += intake.keep_pending(err, False) is not None
                    continue
                count -= 1   # the case itself was counted by record (a finding or a sighting)
            else:
                became = covering.signature
            if became is not None and count > 0:
                self.known.sight(became, count)
        if kept:
            with self._lock:
                self.stats.left_pending += kept
            if self.abandoned.is_set():
                return   # (past the stop grace: the summary may be out; the files say it)
            self.emit(Notice(f"{kept} failure(s) of another trigger than the finding that held them "
                             f"left for triage in {intake.pending.dir}: the next run on this corpus "
                             "triages them"))
