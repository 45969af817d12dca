"""Re-run findings, each isolated in a fresh worker of its target, classify the outcome
and record it (with the torch version and date) in the finding's history, so a corpus
shows since which version a bug is fixed and whether it came back."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..execution.targets import TargetError, compiles
from ..execution.worker import WorkerPool, WorkerStartError
from ..generation import catalogue
from ..generation.settings import GenerationSettings
from ..oracles import DEFAULT, all_oracles
from ..oracles.judge import judge_case
from ..triage.probe import DIFFERENT, INVALID, SAME, Prober
from .finding import CANNOT_RUN, CHANGED, FIXED, FLAKY, STILL_FAILS, Finding, symptom_key
from .store import Corpus

# How each result reads in a table.
WORDS = {STILL_FAILS: "still fails", FIXED: "fixed", CHANGED: "changed", FLAKY: "flaky",
         CANNOT_RUN: "cannot run here"}
DEFAULT_REPLAY_RUNS = 2


@dataclass(frozen=True)
class ReplayResult:
    path: Path
    finding: Finding
    result: str                # STILL_FAILS, FIXED, CHANGED, FLAKY or CANNOT_RUN
    detail: str = ""
    regression: bool = False   # replayed as fixed before, failing again now

    @property
    def status(self) -> str:
        return WORDS[self.result] + (" (regression)" if self.regression else "")


def _oracles_for(finding: Finding) -> tuple[str, ...]:
    extra = (finding.oracle,) if finding.oracle in all_oracles() else ()
    return tuple(dict.fromkeys(DEFAULT + extra))


def replay_one(pool: WorkerPool, finding: Finding, *, runs: int = DEFAULT_REPLAY_RUNS,
               timeout_s: float | None = None) -> tuple[str, str]:
    """(result, detail) of re-running one finding ``runs`` times, the first in a fresh
    worker (crash and hang findings: every run in a fresh worker); a compiled target's
    finding that triage met only on a second compilation, with every call compiled twice."""
    try:
        catalogue.get(finding.op)
    except KeyError:
        return CANNOT_RUN, f"op {finding.op!r} is not in this mpsfuzz's catalogue"
    process = finding.oracle in ("crash", "hang")
    twice = compiles(getattr(pool, "target_name", "")) \
        and bool((finding.reproducibility or {}).get("second_compilation"))
    prober = Prober(pool, _oracles_for(finding), fresh=True, timeout_s=timeout_s, compile_twice=twice)
    symptom = symptom_key(finding.case, finding.failure)
    verdicts, other = [], None
    for k in range(max(1, runs)):
        prober.fresh = process or k == 0
        outcome = prober.classify(finding.case, symptom)
        if prober.unsupported_here:
            # This torch cannot judge the case (its CPU lacks a kernel): not "fixed".
            return CANNOT_RUN, f"unsupported here: {prober.unsupported_here}"
        verdicts.append(outcome.verdict)
        if outcome.verdict == SAME:
            same = outcome.same
        elif outcome.verdict == DIFFERENT and other is None:
            other = outcome.failures[0]
    failed = verdicts.count(SAME)
    if failed == len(verdicts):
        return STILL_FAILS, same.title
    if failed:
        return FLAKY, f"failed {failed} of {len(verdicts)} runs"
    if other is not None:
        return CHANGED, f"now: {other.title}"
    if prober.last_grad_undefined:  # a finding from before gradients were judged only where defined
        return FIXED, f"no gradient verdict: {prober.last_grad_undefined}"
    if all(v == INVALID for v in verdicts) and prober.reference_rejected and finding.failure.kind != "ref-raises":
        # This torch's CPU rejects the case now: the bug cannot be observed, which is not
        # the same as fixed. (A target that now says it has no kernel is: the wrong
        # result is gone.)
        return CANNOT_RUN, "the case is not a valid input here: eager CPU rejects it"
    return FIXED, ""


def replay_findings(found: list[tuple[Path, Finding]], *, target_override: str | None = None,
                    timeout_s: float = 20.0, runs: int = DEFAULT_REPLAY_RUNS,
                    record: bool = True, settings: GenerationSettings | None = None) -> list[ReplayResult]:
    """Replay each finding on its target (or ``target_override``) in workers that install
    ``settings`` (default: this process's GenerationSettings)."""
    groups: dict[str, list[tuple[Path, Finding]]] = {}
    for path, finding in found:
        groups.setdefault(target_override or finding.target_spec, []).append((path, finding))
    results: list[ReplayResult] = []
    for spec, items in groups.items():
        try:
            pool = WorkerPool(spec, timeout_s=timeout_s, execute=judge_case, settings=settings)
        except (TargetError, WorkerStartError) as exc:
            results += [_finish(p, f, CANNOT_RUN, str(exc).splitlines()[0], spec, "", record) for p, f in items]
            continue
        with pool:
            for path, finding in items:
                result, detail = replay_one(pool, finding, runs=runs)
                results.append(_finish(path, finding, result, detail, spec, pool.device, record))
    return results


def _finish(path: Path, finding: Finding, result: str, detail: str, target: str, device: str,
            record: bool) -> ReplayResult:
    regression = result == STILL_FAILS and finding.fixed
    if record:
        def note(f: Finding) -> None:
            f.record_replay(result, target=target, device=device, detail=detail)
        updated = Corpus(path.parent).update(path, note)
        if updated is not None:
            finding = updated
    return ReplayResult(path, finding, result, detail, regression)
