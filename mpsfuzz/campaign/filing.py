"""Filing a triaged failure: the finding stored, its repro script run, counted, reported.

Triage (``triage/pipeline.py``, run by the campaign on the desk's worker) reduces and
explains a failure; :class:`Filing` writes it to the corpus as a finding (its status from
the upstream tables), runs its standalone repro script (``confirm``: a script that does
not reproduce it makes it ``unconfirmed``, never new), counts it by status, tells the
listeners (FindingRecorded), and folds into it the findings already filed that are
special cases of it (one bug, one finding, whichever case of it the campaign met first).
It also reads the findings other campaigns sharing the corpus filed (``run --jobs``).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

from ..atomic import CorpusWriteError
from ..corpus.finding import Finding
from ..events import FindingRecorded, Notice, Stats
from ..oracles import Failure
from .known_findings import KnownFindings, fails_the_run


def count_finding(stats: Stats, status: str, delta: int = 1) -> None:
    """Count a finding recorded new in ``stats`` by its status (also the coordinator of
    lanes, for a lane that never reported its own statistics)."""
    name = {"new": "new_findings", "known-bug": "known_bugs", "flaky": "flaky", "capability": "capabilities",
            "unconfirmed": "unconfirmed", "unverified": "unverified", "both": "both",
            "undecided": "undecided"}.get(status, "cpu_bugs")
    setattr(stats, name, getattr(stats, name) + delta)


class Filing:
    """Files findings into ``corpus`` and ``known``, counting them in ``stats`` (under
    ``lock``). ``seen_files``: the corpus files ``known`` holds already. What it tells and
    asks: ``emit(event)``, ``harness_error(stage, op, case, exc)``, ``spent(stage,
    seconds)`` (the time split), ``credit(op)`` (a finding for the scheduler),
    ``check_abandoned()`` (raises once the desk's job was given up: nothing more is stored
    or counted), ``upstream_entry(case, failure, device)`` (the upstream tables' entry or
    None) and ``confirm(finding) -> repro record`` (None: no script is run). The target is
    named by :meth:`identify` once its worker started."""

    def __init__(self, corpus, known: KnownFindings, stats: Stats, *, seen_files=(), lock=None,
                 emit: Callable, harness_error: Callable, spent: Callable, credit: Callable,
                 check_abandoned: Callable, upstream_entry: Callable, confirm: Callable | None = None):
        self.corpus, self.known, self.stats = corpus, known, stats
        self.seen_files = set(seen_files)
        self._lock = lock if lock is not None else threading.RLock()
        self.emit, self.harness_error, self.spent, self.credit = emit, harness_error, spent, credit
        self.check_abandoned, self.upstream_entry, self.confirm = check_abandoned, upstream_entry, confirm
        self.recorded: list[tuple[Finding, Path, bool]] = []   # (finding without bulk, path, new)
        self.refreshed = 0.0            # when the corpus was last read for others' findings
        self.target_name = self.target_spec = self.device = ""

    def identify(self, target_name: str, target_spec: str, device: str) -> None:
        self.target_name, self.target_spec, self.device = target_name, target_spec, device

    def refresh(self) -> None:
        """Add the findings that other campaigns sharing the corpus recorded since."""
        self.refreshed = time.monotonic()
        fresh = self.corpus.load_new(self.seen_files)
        self.known.add_new(f for _, f in fresh)

    def store(self, case, failure: Failure, result, explanation, flaky: bool) -> tuple[Path, bool, Finding]:
        """Write the finding (its status from the upstream tables): (path, new, finding).
        ``result``: triage's (None: recorded as it failed), ``explanation``: its conditions."""
        try:
            entry = self.upstream_entry(case, failure, self.device)
        except Exception as exc:
            self.harness_error("judge", case.op, case, exc)
            entry = None
        # triage files a compiled target's failure that its eager counterpart shows too as
        # the eager target's (issue 37)
        target_name, target_spec = getattr(result, "filed_as", None) or (self.target_name, self.target_spec)
        finding = Finding.create(
            case, failure, target_name=target_name, target_spec=target_spec,
            device=self.device, flaky=flaky,
            known=entry.to_json() if entry is not None else None,
            conditions=explanation.conditions if explanation is not None else None,
            explanation=explanation.to_json() if explanation is not None else None,
            reproducibility=result.reproducibility.to_json() if result is not None else None,
            minimisation=result.minimisation_json() if result is not None else None,
            localisation=result.localisation if result is not None else None)
        with self._lock:
            path, new = self.corpus.record(finding)
            self.known.add(finding)
            self.seen_files.add(path.name)
        return path, new, finding

    def confirmed(self, finding: Finding, path: Path, new: bool, result) -> str:
        """Verify a new finding's repro script (``confirm``), count and report it; its
        signature."""
        case = finding.case
        try:
            if new and self.confirm is not None and not finding.flaky:
                verifying = time.monotonic()
                try:
                    record = self.confirm(finding)
                except CorpusWriteError:
                    raise
                except Exception as exc:  # the finding stays, unverified
                    self.harness_error("report", case.op, case, exc)
                    record = None
                finally:
                    self.spent("verify", time.monotonic() - verifying)
                if record is not None:
                    self.check_abandoned()   # its script was killed with the desk's work
                    finding.repro = record
                    self.corpus.update(path, lambda f: setattr(f, "repro", record))
        finally:
            # Also when a Ctrl-C stops the verification: the finding is on disk, so the
            # run's summary and counts must show it (its repro stays unverified). Unless
            # the job was given up (the summary may be out): it stays pending, and the
            # next run counts it as a sighting of the finding on disk.
            with self._lock:
                self.check_abandoned()
                if new:
                    self.count(finding.status, +1)
                    if fails_the_run(finding.status):   # (Stats.failing)
                        self.credit(finding.op)
                self.stats.minimise_s += result.seconds if result is not None else 0.0
                self.recorded.append((finding.without_bulk(), path, new))
                self.emit(FindingRecorded(finding, path, new))
        if new:
            with self._lock:
                self.fold_special_cases(finding, path)
        return finding.signature

    def count(self, status: str, delta: int) -> None:
        with self._lock:
            count_finding(self.stats, status, delta)

    def fold_special_cases(self, general: Finding, path: Path) -> None:
        """Earlier findings that are special cases of ``general`` become part of it: one
        bug, one finding, whichever case of it the campaign met first."""
        for found in self.known.special_cases_of(general):
            op, oracle = found.symptom[:2]
            if not self.corpus.fold(path, self.corpus.path_of(op, oracle, found.signature)):
                continue
            special = next((f for f, _, new in self.recorded if f.signature == found.signature and new), None)
            self.recorded = [r for r in self.recorded if r[0].signature != found.signature]
            self.known.fold(found, general.signature)
            if special is not None:
                self.count(special.status, -1)
            self.emit(Notice(f"{general.op}: finding {found.signature[:8]} ({', '.join(found.conditions)}) "
                             f"is a special case of {general.signature[:8]} "
                             f"({', '.join(general.conditions) or 'no conditions'}): merged into it"))
