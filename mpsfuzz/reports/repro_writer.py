"""Gives every new finding of a campaign its repro script, verified on the target, and
the environment it was found in. An engine listener: it runs when the engine reports a
finding, before the campaign goes on."""
from __future__ import annotations

from pathlib import Path

from ..corpus.store import Corpus
from ..events import CampaignFinished, CampaignStarted, FindingRecorded
from .environment import EnvironmentCapture
from .repro import ReproError, repro_for


def repro_record(finding, *, verify: bool, timeout_s: float) -> dict:
    """What a finding keeps as ``repro``: the script and its verification, or why
    there is none. A flaky finding is never verified (it is not a deterministic repro).
    ``verified`` is True (it reproduces), False (it ran and did not: the finding is
    unconfirmed) or None (no script, or it could not run here)."""
    if finding.flaky:
        verify = False
    try:
        record = repro_for(finding, verify=verify, timeout_s=timeout_s)
    except ReproError as exc:
        return {"script": None, "verified": None, "detail": f"no standalone script: {exc}"}
    if finding.flaky:
        record.update(verified=False, detail="flaky: it does not fail on every run, so no script is a "
                                             "deterministic repro")
    return record


class ReproWriter:
    """Verifies each new finding's script before the engine counts it (:meth:`confirm`,
    given to the campaign: a finding whose script does not reproduce is unconfirmed,
    never new) and attaches the machine's ``collect_env`` output once it is recorded."""

    def __init__(self, corpus_dir: Path, *, verify: bool = True, timeout_s: float = 60.0):
        self.corpus = Corpus(corpus_dir)
        self.verify = verify
        self.timeout_s = timeout_s
        self.environment: EnvironmentCapture | None = None

    def confirm(self, finding) -> dict:
        """The repro record of a new finding (its script, run in a fresh interpreter)."""
        return repro_record(finding, verify=self.verify, timeout_s=self.timeout_s)

    def __call__(self, event) -> None:
        if isinstance(event, CampaignStarted):
            self.environment = EnvironmentCapture()
        elif isinstance(event, FindingRecorded) and event.new:
            record = event.finding.repro or self.confirm(event.finding)
            environment = self.environment.text() if self.environment is not None else None

            def attach(finding):
                finding.repro = record
                finding.environment = finding.environment or environment
            updated = self.corpus.update(Path(event.path), attach)
            if updated is not None:
                event.finding.repro, event.finding.environment = updated.repro, updated.environment
        elif isinstance(event, CampaignFinished) and self.environment is not None:
            self.environment.close()
