"""Running again the repro scripts of findings an earlier run left unverified.

A finding whose script did not run to the end is ``unverified`` (nothing says it is not
the target's: it fails the run). A campaign with ``reverify`` hands the desk, at its
lowest rank, its part of the findings on its target that await a verdict
(:class:`~.desk_jobs.Reverification` jobs, inside the budget like every job of the desk:
issue 37, point 2); a verdict is written back to the finding, and one not run stays
unverified for the next run (``left``).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from ..atomic import CorpusWriteError
from ..corpus.store import load_findings
from ..events import Stats
from ..reports.repro_writer import awaits_verification, reverified
from .desk_jobs import Reverification
from .pending import takes_share


class Reverifications:
    """The unverified findings of ``target_spec`` in ``corpus`` (this campaign's ``share``
    of them: CampaignConfig.leftovers), run again with ``confirm(finding) -> repro
    record``; counted in ``stats.reverified`` under ``lock``. ``spent(stage, seconds)``,
    ``harness_error(stage, op, case, exc)``; ``check_abandoned()`` raises once the desk's
    job was given up (its verdict is then not written)."""

    def __init__(self, corpus, stats: Stats, *, target_spec: str, share, confirm: Callable, spent: Callable,
                 harness_error: Callable, check_abandoned: Callable, lock=None):
        self.corpus, self.stats, self.target_spec, self.share = corpus, stats, target_spec, share
        self.confirm, self.spent, self.harness_error = confirm, spent, harness_error
        self.check_abandoned = check_abandoned
        self._lock = lock if lock is not None else threading.RLock()

    def queue(self, submit: Callable) -> None:
        """``submit`` a Reverification for each finding of this campaign's part that
        awaits a verdict."""
        for path, finding in self.corpus.load()[0]:
            if awaits_verification(finding) and finding.target_spec == self.target_spec \
                    and takes_share(self.share, path.name):
                submit(Reverification(path))

    def run(self, job: Reverification) -> None:
        """Run an unverified finding's script again; a verdict is written back to it."""
        started = time.monotonic()
        try:
            found = load_findings([job.path])[0]
            if not found or not awaits_verification(found[0][1]):
                return   # gone, or settled meanwhile (another lane)
            key = reverified(self.corpus, job.path, found[0][1], self._confirm_unless_abandoned)
        except CorpusWriteError:
            raise
        except Exception as exc:   # it stays unverified, for the next run
            self.harness_error("report", None, None, exc)
            return
        finally:
            self.spent("reverify", time.monotonic() - started)
        with self._lock:
            self.stats.reverified[key] = self.stats.reverified.get(key, 0) + 1

    def left(self, n: int) -> None:
        """``n`` scripts not run (the run ended first): they stay unverified."""
        if n:
            with self._lock:
                self.stats.reverified["left"] = self.stats.reverified.get("left", 0) + n

    def _confirm_unless_abandoned(self, finding) -> dict:
        """``confirm``, whose verdict is not written once the desk's job was given up."""
        record = self.confirm(finding)
        self.check_abandoned()
        return record
