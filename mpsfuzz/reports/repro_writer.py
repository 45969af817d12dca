"""Gives every new finding of a campaign its repro script, verified on the target, and
the environment it was found in. An engine listener: it runs when the engine reports a
finding, before the campaign goes on."""
from __future__ import annotations

from pathlib import Path

from ..corpus.store import Corpus
from ..events import CampaignFinished, CampaignStarted, FindingRecorded
from .environment import EnvironmentCapture
from .repro import ReproError, repro_for


def repro_record(finding, *, verify: bool, timeout_s: float, warm: bool = False) -> dict:
    """What a finding keeps as ``repro``: the script and its verification, or why
    there is none. A flaky finding is never verified (it is not a deterministic repro).
    ``verified`` is True (it reproduces), False (it ran and did not: the finding is
    unconfirmed) or None (no script, or it could not run here)."""
    if finding.flaky:
        verify = False
    try:
        record = repro_for(finding, verify=verify, timeout_s=timeout_s, warm=warm)
    except ReproError as exc:
        return {"script": None, "verified": None, "detail": f"no standalone script: {exc}"}
    if finding.flaky:
        record.update(verified=False, detail="flaky: it does not fail on every run, so no script is a "
                                             "deterministic repro")
    return record


# What a cpu-bug finding's repro record said before its scripts existed (issue 37).
PRE_ISSUE_37_REFUSAL = "no device repro"


def awaits_verification(finding) -> bool:
    """Whether ``finding``'s repro script has not been run to the end: status
    ``unverified`` (the run stopped first, the script timed out or could not run here, or
    ``--no-verify-repros``), or eager CPU's bug or both backends' with no verdict on its
    script (those statuses do not hang on it; before issue 37 eager CPU's had none)."""
    if finding.status == "unverified":
        return True
    if finding.status not in ("cpu-bug", "both"):
        return False
    repro = finding.repro or {}
    if repro.get("script"):
        return repro.get("verified") is None
    # no script: none was ever made, or the refusal of eager CPU's findings before issue 37
    return not repro or PRE_ISSUE_37_REFUSAL in str(repro.get("detail", ""))


def reverified(corpus: Corpus, path: Path, finding, confirm) -> str:
    """Run again the script of ``finding`` (at ``path``), which awaits verification,
    with ``confirm(finding) -> repro record``; a verdict is written back to it. Which it
    became: "verified", "unconfirmed" (it ran and did not reproduce) or "unverified" (no
    verdict again: it could not run here). The campaign's desk does it for what an earlier
    run left (campaign/reverification.py), inside the run's budget."""
    record = confirm(finding)
    settled = record.get("verified")
    if settled is not None:
        corpus.update(path, lambda f: setattr(f, "repro", record))
    return "unverified" if settled is None else "verified" if settled else "unconfirmed"


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
        """The repro record of a new finding (its script, run in a process forked from
        the workers' zygote: a fresh interpreter without the seconds of imports)."""
        return repro_record(finding, verify=self.verify, timeout_s=self.timeout_s, warm=True)

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
