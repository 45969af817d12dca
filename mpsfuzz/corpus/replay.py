"""Re-run findings (each in a worker of its target) and classify the outcome."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..oracles import DEFAULT, Failure, all_oracles, worker_oracles
from ..oracles.process import ProcessEvent
from ..targets import TargetError
from ..fuzzer.worker import WorkerPool, WorkerStartError
from .finding import Finding, signature_of

STILL_FAILS, PASSES_NOW, FAILS_DIFFERENTLY, CANNOT_RUN = (
    "still fails", "passes now", "fails differently", "cannot run here")


@dataclass(frozen=True)
class ReplayResult:
    path: Path
    finding: Finding
    status: str
    detail: str = ""


def _failures(outcome, case) -> list[Failure]:
    oracles = all_oracles()
    if isinstance(outcome, ProcessEvent):
        return [f for name in ("crash", "hang") if (f := oracles[name].check(outcome))]
    return [Failure.from_json(f) for f in outcome["failures"]]


def replay_findings(found: list[tuple[Path, Finding]], *, target_override: str | None = None,
                    timeout_s: float = 20.0) -> list[ReplayResult]:
    groups: dict[str, list[tuple[Path, Finding]]] = {}
    for path, finding in found:
        groups.setdefault(target_override or finding.target_spec, []).append((path, finding))
    case_oracles = worker_oracles(DEFAULT)
    results: list[ReplayResult] = []
    for spec, items in groups.items():
        try:
            pool = WorkerPool(spec, timeout_s=timeout_s)
        except (TargetError, WorkerStartError) as exc:
            results += [ReplayResult(p, f, CANNOT_RUN, str(exc)) for p, f in items]
            continue
        with pool:
            for path, finding in items:
                known = (finding.oracle,) if finding.oracle in all_oracles() else ()
                oracles = tuple(dict.fromkeys(case_oracles + worker_oracles(known)))
                outcome = pool.run(finding.case.to_json(), oracles, finding.op)
                failures = _failures(outcome, finding.case)
                signatures = {signature_of(finding.case, f): f for f in failures}
                if finding.signature in signatures:
                    results.append(ReplayResult(path, finding, STILL_FAILS, signatures[finding.signature].title))
                elif failures:
                    results.append(ReplayResult(path, finding, FAILS_DIFFERENTLY, failures[0].title))
                else:
                    results.append(ReplayResult(path, finding, PASSES_NOW, ""))
    return results
