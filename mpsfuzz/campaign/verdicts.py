"""What each failure of a case comes to, and the case's verdicts remembered for its slice.

A failure is ``noted`` (layout propagation: right values in another memory format, a
line of the target's note), ``suppressed`` (the upstream tables call it unimplemented or
undefined) or what the known findings make of it (``KnownFindings.classify``: held,
a sighting or new). The campaign's thread judges a batch's outcomes here, the desk's
replay the cases Hypothesis asks for again (replay.py): both remember a case's verdicts
for the rest of the slice (``SliceState.memo``) and count them once.
"""
from __future__ import annotations

import threading
from typing import Callable

from ..corpus import upstream
from ..corpus.finding import trigger_class
from ..corpus.store import CorpusWriteError
from ..events import Notice, Stats
from ..oracles import Failure
from .known_findings import SIGHTING, KnownFindings
from .layout_notes import LayoutNotes
from .slice_state import SliceState


class CaseVerdicts:
    """Judges failures against ``known``, ``upstream_table`` (for ``torch_version``) and
    the target's layout ``notes``, counting in ``stats`` under ``lock``; remembers them in
    the calling thread's ``state``. What it tells and asks: ``emit(event)``,
    ``harness_error(stage, op, case, exc)``, ``case_outcome(op, ok)`` (the op's health),
    ``on_desk()`` (whether the caller is a triage desk's thread: its cases are triage's,
    not counted as the campaign's failing cases). The target is named by :meth:`identify`
    once its worker started."""

    def __init__(self, known: KnownFindings, state: SliceState, stats: Stats, notes: LayoutNotes, upstream_table, *,
                 torch_version: str, emit: Callable, harness_error: Callable, case_outcome: Callable,
                 on_desk: Callable, lock=None):
        self.known, self.state, self.stats, self.notes = known, state, stats, notes
        self.upstream_table, self.torch_version = upstream_table, torch_version
        self.emit, self.harness_error, self.case_outcome, self.on_desk = emit, harness_error, case_outcome, on_desk
        self._lock = lock if lock is not None else threading.RLock()
        self.target_name = self.device = ""

    def identify(self, target_name: str, device: str) -> None:
        self.target_name, self.device = target_name, device

    def judged(self, case, op: str, failures_of, pool) -> list[tuple]:
        """The verdicts of a case that ``failures_of()`` runs (or takes from its batch's
        outcome), memoised for the rest of the slice; its sightings and suppressed
        failures are counted here, once per case, however often Hypothesis asks again."""
        lost_before = self.stats.cases_lost
        verdicts = self.state.memo[case] = self.of(case, failures_of(), pool)
        with self._lock:
            self.case_outcome(op, self.stats.cases_lost == lost_before)
            for verdict, _failure, signature in verdicts:
                if not self.on_desk():
                    failing = self.stats.failing_cases
                    failing[verdict] = failing.get(verdict, 0) + 1
                if verdict == "suppressed":
                    self.stats.suppressed += 1
                elif verdict == SIGHTING:
                    self.known.sight(signature)
        return verdicts

    def of(self, case, failures: list[Failure], pool) -> list[tuple]:
        """(verdict, failure, signature) for each failure: "noted" (layout propagation),
        "suppressed" (the upstream tables call it unimplemented or undefined), or what the
        known findings make of it (KnownFindings.classify: "held", "sighting" or "new"). A
        failure the driver cannot judge (matching it raised) is a harness error and
        dropped."""
        verdicts = []
        for failure in failures:
            try:
                if failure.blame == "note":
                    # No bug to file (right values in another memory format): a line of
                    # the target's layout-propagation note, counted once per case.
                    if not self.state.replaying:
                        self.note(case, failure)
                    verdicts.append(("noted", failure, None))
                    continue
                if self.suppressed(case, failure, pool):
                    verdicts.append(("suppressed", failure, None))
                    continue
                verdict, signature = self.known.classify(case, failure, besides=self.state.holder)
                verdicts.append((verdict, failure, signature))
            except CorpusWriteError:
                raise
            except Exception as exc:
                self.harness_error("judge", case.op, case, exc)
        return verdicts

    def note(self, case, failure: Failure) -> None:
        """Count a layout-propagation sighting (LayoutNotes); one line on the console per op."""
        with self._lock:
            self.stats.layout_notes += 1
        entry = self.notes.note(case, failure, self.target_name, self.device)
        if entry is not None:
            self.emit(Notice(f"{case.op}: {entry['target_format']} where eager CPU returns {entry['cpu_format']} "
                             f"({', '.join(entry['layouts'])} input): layout propagation, noted, not a bug"))

    def upstream_entry(self, case, failure: Failure, device: str):
        """The upstream table's entry this failure matches, or None."""
        trig = trigger_class(case)
        return upstream.match(self.upstream_table, device=device, op=case.op, dtypes=trig["dtypes"],
                              oracle=failure.oracle, kind=failure.kind, variant=case.variant,
                              layout_class=trig["layout_class"], torch_version=self.torch_version,
                              bits={r.layout.bit for r in case.inputs if r.layout.bit},
                              compiled=self.target_name.endswith("-compiled"))

    def suppressed(self, case, failure: Failure, pool) -> bool:
        """Failures the upstream tables call unimplemented or undefined: not bugs."""
        entry = self.upstream_entry(case, failure, pool.device)
        return entry is not None and entry.status in upstream.SUPPRESSED
