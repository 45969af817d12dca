"""What the campaign hands its triage desk, and where a failure goes meanwhile.

A slice's new failures go to the desk one job per (op, oracle, kind), to be shrunk there
(replay.py); their other cases are held by the job's placeholder, sightings of a finding
that covers them, or recorded as they failed. Every job's failure is written to
triage-pending/ first (pending.py) and an earlier run's pending failures are taken up at
the start. Without a desk (or on the desk's own thread) a failure is recorded at once
(``record``: recorder.py), anything that raises a harness error.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..corpus.store import CorpusWriteError
from ..events import Notice
from .batches import Slice
from .desk_jobs import Job, desk_order, first_rank
from .finding_errors import FindingError, error_type
from .known_findings import KnownFindings
from .pending import PendingFailures, remove


class DeskIntake:
    """Hands failures to ``desk`` (the run's TriageDesks, set by the campaign; None: no
    desk) against ``known``, keeping them in ``pending``. What it asks and tells:
    ``record(err, pool, *, flaky, triage_it)`` (a failure triaged and filed now: its
    signature or None), ``emit(event)`` and ``harness_error(stage, op, case, exc)``."""

    def __init__(self, known: KnownFindings, pending: PendingFailures, *, record: Callable, emit: Callable,
                 harness_error: Callable):
        self.known, self.pending = known, pending
        self.record, self.emit, self.harness_error = record, emit, harness_error
        self.desk = None

    def on_desk(self) -> bool:
        """Whether the calling thread is a desk's."""
        return self.desk is not None and self.desk.on_desk()

    def in_triage(self) -> int:
        """The desk's jobs not finished."""
        return self.desk.pending if self.desk is not None else 0

    def priority(self, job) -> tuple:
        """A desk's order (desk_jobs.desk_order): the target's failures of an op with no
        finding first."""
        return desk_order(job, self.known.has_finding_of)

    def first_rank(self, job) -> bool:
        """The desk's first rank, quick or slow: a target failure of an op with no finding."""
        return first_rank(self.priority(job))

    def hand_to_shrink(self, prepared: Slice, failed: list, memo: dict, pool) -> None:
        """Hand the slice's new failures to the desk, one job per (op, oracle, kind) (the
        first case of each, as Hypothesis meets them), each to be shrunk there by a replay
        of the slice with the batch's verdicts, ``memo`` (SliceReplay.shrunk); the other
        cases of each are held by its placeholder meanwhile."""
        memo = dict(memo)
        first: dict[tuple, tuple] = {}
        for case, (_, failure, signature) in failed:
            first.setdefault((case.op, failure.oracle, failure.kind), (case, failure, signature))
        for key, (case, failure, signature) in first.items():
            err = error_type(*key)(case, failure, signature)
            err.to_shrink = (prepared, memo)
            self.record_safely(err, pool, flaky=False)
        self.record_unshrunk(failed, pool)

    def hand_over_met(self, met: dict) -> None:
        """The failures a desk replay met besides the one it shrank, each handed to the
        desk as a job of its own unless a finding (or one in triage) covers it."""
        for (op, oracle, kind), (case, failure, signature) in met.items():
            if self.known.covering_or_none(case, failure) is not None:
                continue
            err = error_type(op, oracle, kind)(case, failure, signature)
            if self.desk is not None:
                self.hand_to_desk(err, False, self.keep_pending(err, False))

    def record_unshrunk(self, failed: list, pool) -> None:
        """The slice's failing cases not handed over to be shrunk (the budget ran out,
        or another case of their failure was handed over): held by the placeholder of
        their symptom, a sighting of a finding that covers them, or recorded as they
        failed (triage reduces them)."""
        for case, (_, failure, signature) in failed:
            covering = self.known.covering_or_none(case, failure)
            if covering is None:
                self.record_safely(error_type(case.op, failure.oracle, failure.kind)(case, failure, signature),
                                   pool, flaky=False)
            elif covering.provisional:   # the replay handed a failure of this symptom to triage
                self.known.hold(covering, case, failure)

    def record_safely(self, err: FindingError, pool, *, flaky: bool, triage_it: bool = True) -> str | None:
        """Hand the shrunk failure to the triage desk (the campaign goes on meanwhile),
        or, on the desk's thread or without a desk, ``record`` it now, anything it raises a
        harness error (stage ``record``). The signature it ended up as, if recorded now."""
        if self.desk is not None and not self.desk.on_desk():
            self.hand_to_desk(err, flaky, self.keep_pending(err, flaky))
            return None
        try:
            return self.record(err, pool, flaky=flaky, triage_it=triage_it)
        except CorpusWriteError:
            raise
        except Exception as exc:
            self.harness_error("record", err.case.op, err.case, exc)
            return None

    def hand_to_desk(self, err: FindingError, flaky: bool, pending: Path | None) -> None:
        # The job needs the case, failure and signature only. Its traceback holds the
        # frames of the Hypothesis run that raised it, with all its drawn data: with
        # every fault on, failures wait for triage by the dozen, each keeping a run alive.
        err.__traceback__ = err.__context__ = err.__cause__ = None
        holder = self.known.open_holder(err.case, err.failure)
        self.desk.submit(Job(err, flaky, holder, pending))

    def keep_pending(self, err: FindingError, flaky: bool) -> Path | None:
        return self.pending.keep(err, flaky)

    def resume_pending(self, before: float) -> None:
        """Hand to triage the failures an earlier campaign left pending (killed, or
        stopped before triaging them, written before ``before``), this campaign's part of
        them; one that a finding covers now is a sighting at once, not a job (issue 37: a
        run spent its budget triaging repeats of bugs it had filed). An unreadable file is
        moved aside, never lost."""
        taken = seen = 0
        for left in self.pending.earlier(before, lambda exc: self.harness_error("record", None, None, exc)):
            if self.known.sighting(left.case, left.failure) is not None:
                seen += 1
                remove(left.path)
                continue
            err = error_type(left.case.op, left.failure.oracle, left.failure.kind)(left.case, left.failure,
                                                                                  left.signature)
            self.hand_to_desk(err, left.flaky, left.path)
            taken += 1
        if taken or seen:
            self.emit(Notice(f"an earlier run left {taken + seen} failure(s) in {self.pending.dir}: "
                             f"{seen} sighting(s) of findings, {taken} to triage"))
