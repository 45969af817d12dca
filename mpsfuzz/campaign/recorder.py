"""A shrunk failure triaged and filed, on the desk's thread (or where no desk runs).

Triage (``triage/pipeline.py``) re-runs the failure on the desk's worker, reduces and
explains it; :class:`~.filing.Filing` then stores it. A failure an earlier finding covers,
before triage or once reduced, is a sighting of that finding instead. A triage that
raises is a harness error and the failure is stored as it is (unexplained): nothing found
is lost to a harness error.
"""
from __future__ import annotations

import time
from typing import Callable

from ..corpus.store import CorpusWriteError
from ..events import Notice
from ..triage.pipeline import triage
from .desk_jobs import PRESSED_SHARE
from .filing import Filing
from .known_findings import KnownFindings
from .slice_state import SliceState


class Recorder:
    """Triages failures (``oracles``, ``reruns``, within ``minimise_budget_s``, each case
    within ``timeout_s``) and files them with ``filing`` into ``corpus``, the findings in
    ``known``; ``state.pressed``: the desk's first rank waits (PRESSED_SHARE of the
    budget). What it tells and asks: ``emit(event)``, ``spent(stage, seconds)``,
    ``harness_error(stage, op, case, exc)`` and ``check_abandoned()`` (raises once the
    desk's job was given up: nothing more is stored)."""

    def __init__(self, corpus, known: KnownFindings, filing: Filing, state: SliceState, *, oracles: tuple,
                 reruns: int, minimise_budget_s: float, timeout_s: float, emit: Callable, spent: Callable,
                 harness_error: Callable, check_abandoned: Callable):
        self.corpus, self.known, self.filing, self.state = corpus, known, filing, state
        self.oracles, self.reruns, self.timeout_s = oracles, reruns, timeout_s
        self.minimise_budget_s = minimise_budget_s
        self.emit, self.spent, self.harness_error, self.check_abandoned = emit, spent, harness_error, check_abandoned

    def record(self, err, pool, *, flaky: bool, triage_it: bool = True) -> str | None:
        """Re-run, reduce and explain the shrunk failure (triage/pipeline.py), then store it.
        (Hypothesis' own Flaky verdict, ``flaky``, is only a hint: the re-runs decide.)
        If triage raises, the shrunk case is stored as it is (unexplained): nothing found
        is lost to a harness error."""
        earlier = self.known.sighting(err.case, err.failure)   # an earlier finding covers it
        if earlier is not None:
            return earlier
        result = None
        if triage_it and pool is not None:
            self.emit(Notice(f"{err.case.op}: minimising {err.failure.oracle} failure"))
            triaging = time.monotonic()
            try:
                result = triage(err.case, err.failure, pool, self.oracles, reruns=self.reruns,
                                budget_s=self.minimise_budget_s * (PRESSED_SHARE if self.state.pressed else 1.0),
                                timeout_s=self.timeout_s)
                for step, seconds in result.steps.items():
                    self.spent(f"triage:{step}", seconds)
            except CorpusWriteError:
                raise
            except Exception as exc:
                self.check_abandoned()   # its worker was killed under it: not a harness error
                self.harness_error("triage", err.case.op, err.case, exc)
            finally:
                self.spent("triage", time.monotonic() - triaging)
        self.check_abandoned()   # given up while it was triaged: it stays pending
        if result is None:
            case, failure, explanation, result_flaky = err.case, err.failure, None, False
        else:
            case, failure, explanation, result_flaky = result.case, result.failure, result.explanation, result.flaky
        with self.corpus.recording():
            self.filing.refresh()   # what other campaigns on this corpus recorded meanwhile
            # Reduced, it may meet an earlier finding's conditions (the reducer moved it
            # to that finding's dtype, say): a sighting of that bug.
            covering = None if result_flaky else self.known.sighting(case, failure)
            if covering is not None:
                return covering
            path, new, finding = self.filing.store(case, failure, result, explanation, result_flaky)
        return self.filing.confirmed(finding, path, new, result)
