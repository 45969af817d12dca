"""The campaign's listeners (reporters, the daemon's keeper, lanes' relays) and its
harness errors.

Every event goes to every listener, under the campaign's lock (the triage desk's thread
reports too). A listener that raises is a harness error of stage ``report`` (the
campaign goes on), except for a corpus that cannot be written, which ends the run; one
that raises on a HarnessError is only counted (reporting it would loop). A harness error
(a failure of mpsfuzz itself on one case: ``health.py``) is counted by stage and reported
as a :class:`~mpsfuzz.events.HarnessError` with the case and the traceback.
"""
from __future__ import annotations

import threading

from ..atomic import CorpusWriteError
from ..events import CaseFinished, FindingRecorded, HarnessError, Stats
from .drafts import error_line, traceback_of
from .health import count_harness


def case_json(case):
    """A case as a HarnessError carries it (a recipe's JSON, or its repr where that fails)."""
    if case is None or isinstance(case, dict):
        return case
    try:
        return case.to_json()
    except Exception:
        return {"repr": repr(case)[:2000]}


def event_subject(event) -> tuple:
    """(op, case) an event is about, for a listener's harness error."""
    if isinstance(event, CaseFinished):
        return event.op, event.case
    if isinstance(event, FindingRecorded):
        return getattr(event.finding, "op", None), getattr(event.finding, "case", None)
    return None, None


class Listeners:
    """Hands events to ``listeners`` (the list itself: one appended later hears too) and
    counts harness errors in ``stats``, under ``lock``."""

    def __init__(self, listeners: list, stats: Stats, *, lock=None):
        self.listeners, self.stats = listeners, stats
        self._lock = lock if lock is not None else threading.RLock()

    def emit(self, event) -> None:
        """Hand ``event`` to every listener; one that raises is a harness error (stage
        ``report``), except for a corpus that cannot be written, which ends the run."""
        with self._lock:
            for listener in self.listeners:
                try:
                    listener(event)
                except CorpusWriteError:
                    raise
                except Exception as exc:
                    if isinstance(event, HarnessError):
                        # Reporting this failure as another harness error would loop: count it.
                        self.count_harness("report")
                        continue
                    op, case = event_subject(event)
                    self.harness_error("report", op, case, exc)

    def count_harness(self, stage: str) -> None:
        with self._lock:
            count_harness(self.stats, stage)

    def harness_error(self, stage: str, op: str | None, case, exc: BaseException | None = None, *,
                      error: str = "", trace: str = "") -> None:
        """Count and report a failure of mpsfuzz itself on one case (``exc``, or its
        ``error`` line and ``trace`` when it happened in a worker); the campaign goes on."""
        if exc is not None:
            error, trace = error_line(exc), traceback_of(exc)
        self.count_harness(stage)
        self.emit(HarnessError(stage, op, case_json(case), error, trace))
