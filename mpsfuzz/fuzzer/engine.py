"""The campaign engine: Hypothesis generates and shrinks, workers execute, oracles judge.

Ops are scheduled round-robin in slices of a few dozen examples, so a time budget is
spread over all selected ops. Each failure raises an exception whose *type* is unique to
(op, oracle, kind), so Hypothesis shrinks each bug separately; once shrunk the finding
is recorded, and from then on its signature counts as passing, so one bug never hides
the next. Crashes and hangs are failures like any other: the worker is replaced and the
campaign goes on.
"""
from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed

from ..corpus import known as known_failures
from ..corpus.finding import Finding, signature_of, symptom_key, trigger_class
from ..corpus.store import Corpus
from ..events import (CampaignFinished, CampaignStarted, CaseFinished, FindingRecorded,
                      Notice, Stats)
from ..oracles import DEFAULT as ORACLES_DEFAULT
from ..oracles import Failure, all_oracles, worker_oracles
from ..oracles.process import ProcessEvent
from . import catalogue
from .ablation import holds_all
from .recipes import Case
from .strategies import cases
from .triage import DEFAULT_RERUNS, triage
from .worker import WorkerPool


@dataclass
class CampaignConfig:
    ops: list[str]
    target_spec: str
    corpus_dir: Path
    oracles: tuple[str, ...] = ORACLES_DEFAULT
    seed: int | None = None
    budget_s: float | None = None
    max_cases: int | None = None
    max_findings: int | None = None
    timeout_s: float = 20.0
    slice_examples: int = 30
    shrink_budget_s: float = 60.0
    max_rank: int = 8
    max_side: int = 8
    max_numel: int = 4096
    known_tables: tuple = ()          # extra known-failure table files (--known)
    allow_variants: bool = True
    reruns: int = DEFAULT_RERUNS      # re-runs of a shrunk failure before it is recorded
    minimise_budget_s: float = 30.0   # reduction + ablation time per finding


@dataclass(frozen=True)
class KnownBug:
    """What the campaign already has: a failing case with this symptom that meets the
    conditions is a sighting of ``signature``, not a new bug."""
    symptom: tuple
    conditions: tuple | None          # None: a finding recorded before ablation
    signature: str
    flaky: bool = False               # any case with the symptom (it cannot be ablated)
    case: Case | None = field(default=None, compare=False)   # its minimal case

    @classmethod
    def of(cls, finding: Finding) -> "KnownBug":
        return cls(symptom_key(finding.case, finding.failure), finding.conditions, finding.signature,
                   finding.flaky, finding.case)

    def special_case_of(self, general: Finding) -> bool:
        """Whether this finding is a special case of ``general``, another explained
        finding of the same symptom: its minimal case meets ``general``'s conditions (the
        2-D multinomial bug once the 1-D case shows the rank does not matter)."""
        return (self.signature != general.signature and not self.flaky and not general.flaky
                and self.conditions is not None and general.conditions is not None and self.case is not None
                and self.symptom == symptom_key(general.case, general.failure)
                and holds_all(general.conditions, self.case))

    def covers(self, case, failure: Failure, symptom: tuple) -> bool:
        if symptom != self.symptom:
            return False
        if self.flaky:
            return True
        if self.conditions is None:
            return signature_of(case, failure) == self.signature
        return holds_all(self.conditions, case)


class BudgetExhausted(BaseException):
    """Stops a Hypothesis run from inside the test body (BaseException passes through)."""


class FindingError(Exception):
    def __init__(self, case, failure: Failure, signature: str):
        super().__init__(failure.title)
        self.case, self.failure, self.signature = case, failure, signature


_ERROR_TYPES: dict[tuple, type] = {}


def _error_type(op: str, oracle: str, kind: str) -> type:
    """One exception class per (op, oracle, kind): Hypothesis tells bugs apart by type."""
    key = (op, oracle, kind)
    if key not in _ERROR_TYPES:
        _ERROR_TYPES[key] = type(f"Finding_{abs(hash(key)):x}", (FindingError,), {})
    return _ERROR_TYPES[key]


def _iter_findings(exc: BaseException):
    if isinstance(exc, FindingError):
        yield exc
    for inner in getattr(exc, "exceptions", ()) or ():
        yield from _iter_findings(inner)
    if exc.__cause__ is not None and exc.__cause__ is not exc:
        yield from _iter_findings(exc.__cause__)


class Campaign:
    def __init__(self, config: CampaignConfig, listeners: list[Callable] = ()):
        self.config = config
        self.listeners = list(listeners)
        self.stats = Stats()
        self.corpus = Corpus(config.corpus_dir)
        self.known: list[KnownBug] = [KnownBug.of(f) for _, f in self.corpus.load()[0]]
        self.recorded: list[tuple[Finding, Path, bool]] = []
        self._sightings: dict[str, int] = {}
        self._shrink_started: dict[tuple, float] = {}
        self._memo: dict = {}
        self._start = 0.0
        self.known_table = known_failures.load_tables(list(config.known_tables))
        self._case_oracles = worker_oracles(config.oracles)
        self._process_oracles = tuple(o for o in config.oracles if all_oracles()[o].stage == "process")
        import torch  # the version keys known-failure entries (fixed_in)
        self._torch_version = torch.__version__
        self.seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**31)

    def emit(self, event) -> None:
        for listener in self.listeners:
            listener(event)

    # -- budget ---------------------------------------------------------------------------
    def _out_of_budget(self) -> str | None:
        if self.config.max_cases is not None and self.stats.cases >= self.config.max_cases:
            return "max-cases"
        if self.config.budget_s is not None and time.monotonic() - self._start >= self.config.budget_s:
            return "budget"
        if self.config.max_findings is not None and self.stats.new_findings >= self.config.max_findings:
            return "max-findings"
        return None

    # -- one case -------------------------------------------------------------------------
    def _failures_of(self, case, pool: WorkerPool) -> list[Failure]:
        outcome = pool.run(case.to_json(), self._case_oracles, case.op)
        self.stats.cases += 1
        per_op = self.stats.per_op.setdefault(case.op, [0, 0])
        per_op[0] += 1
        if isinstance(outcome, ProcessEvent):
            self.stats.restarts += 1
            oracles = all_oracles()
            failures = [f for name in self._process_oracles if (f := oracles[name].check(outcome))]
            self.emit(Notice(f"worker {outcome.kind} on {case.op}; restarted"))
            self.emit(CaseFinished(case.op, valid=True, unsupported=False,
                                   shrinking=bool(self._shrink_started), case=case))
            return failures
        if outcome.get("internal_error"):
            self.stats.internal_errors += 1
            self.emit(Notice(f"internal error on {case.op}: {outcome['internal_error'].strip().splitlines()[-1]}"))
        if outcome["valid"]:
            self.stats.valid += 1
            per_op[1] += 1
        if outcome["unsupported"]:
            self.stats.unsupported += 1
            key = (case.op, outcome.get("unsupported_message", ""))
            self.stats.unsupported_messages[key] = self.stats.unsupported_messages.get(key, 0) + 1
        self.emit(CaseFinished(case.op, valid=outcome["valid"], unsupported=outcome["unsupported"],
                               shrinking=bool(self._shrink_started), case=case))
        return [Failure.from_json(f) for f in outcome["failures"]]

    def _test_body(self, pool: WorkerPool):
        def body(case):
            reason = self._out_of_budget()
            if reason:
                raise BudgetExhausted(reason)
            failures = self._memo.get(case)
            if failures is None:
                if any(time.monotonic() - t > self.config.shrink_budget_s
                       for t in self._shrink_started.values()):
                    return  # shrink budget spent: smaller variants are no longer tried
                failures = self._memo[case] = self._failures_of(case, pool)
            for failure in failures:
                if self._suppressed(case, failure, pool):
                    continue
                known = self._known_bug(case, failure)
                if known is not None:
                    self._sightings[known.signature] = self._sightings.get(known.signature, 0) + 1
                    continue
                key = (case.op, failure.oracle, failure.kind)
                self._shrink_started.setdefault(key, time.monotonic())
                raise _error_type(*key)(case, failure, signature_of(case, failure))
        return body

    def _known_bug(self, case, failure: Failure) -> KnownBug | None:
        symptom = symptom_key(case, failure)
        return next((k for k in self.known if k.covers(case, failure, symptom)), None)

    def _known_entry(self, case, failure: Failure, device: str):
        trig = trigger_class(case)
        return known_failures.match(self.known_table, device=device, op=case.op, dtypes=trig["dtypes"],
                                    oracle=failure.oracle, kind=failure.kind,
                                    layout_class=trig["layout_class"], torch_version=self._torch_version)

    def _suppressed(self, case, failure: Failure, pool: WorkerPool) -> bool:
        """Failures the known-failure tables call unimplemented or undefined: not bugs."""
        entry = self._known_entry(case, failure, pool.device)
        if entry is not None and entry.status in known_failures.SUPPRESSED:
            self.stats.suppressed += 1
            return True
        return False

    def _run_slice(self, op: str, round_no: int, pool: WorkerPool) -> None:
        spec = catalogue.get(op)
        strategy = cases(spec, max_rank=self.config.max_rank, max_side=self.config.max_side,
                         max_numel=self.config.max_numel, allow_variants=self.config.allow_variants)
        slice_seed = int(hashlib.sha1(f"{self.seed}:{op}:{round_no}".encode()).hexdigest()[:12], 16)
        test = given(strategy)(self._test_body(pool))
        test = settings(max_examples=self.config.slice_examples, deadline=None, database=None,
                        derandomize=False, suppress_health_check=list(HealthCheck),
                        phases=(Phase.generate, Phase.shrink), verbosity=Verbosity.quiet,
                        report_multiple_bugs=True, print_blob=False)(test)
        test = hypothesis_seed(slice_seed)(test)
        self._shrink_started.clear()
        # Results of this slice by case: Hypothesis' shrinker and its final replay of the
        # minimal example ask again for cases already run (a hang would cost its timeout).
        self._memo = {}
        try:
            test()
        except BudgetExhausted:
            raise
        except Exception as exc:  # Hypothesis' report of our findings (one or several)
            flaky = "Flaky" in type(exc).__name__
            found = list(_iter_findings(exc))
            if not found:
                self.emit(Notice(f"{op}: hypothesis stopped: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
            for err in found:
                self._record(err, pool, flaky=flaky)
        finally:
            self._shrink_started.clear()
            self._memo = {}

    def _record(self, err: FindingError, pool: WorkerPool, *, flaky: bool) -> None:
        """Re-run, reduce and explain the shrunk failure (fuzzer/triage.py), then store it.
        (Hypothesis' own Flaky verdict, ``flaky``, is only a hint: the re-runs decide.)"""
        if self._known_bug(err.case, err.failure) is not None:
            return  # an earlier finding of this slice covers it
        self.emit(Notice(f"{err.case.op}: minimising {err.failure.oracle} failure"))
        result = triage(err.case, err.failure, pool, self.config.oracles, reruns=self.config.reruns,
                        budget_s=self.config.minimise_budget_s, timeout_s=self.config.timeout_s)
        case, failure = result.case, result.failure
        explanation = result.explanation
        covering = None if result.flaky else self._known_bug(case, failure)
        if covering is not None:
            # Reduced, it meets an earlier finding's conditions (the reducer moved it to
            # that finding's dtype, say): a sighting of that bug.
            self._sightings[covering.signature] = self._sightings.get(covering.signature, 0) + 1
            return
        entry = self._known_entry(case, failure, pool.device)
        finding = Finding.create(
            case, failure, target_name=pool.target_name, target_spec=self.config.target_spec,
            device=pool.device, flaky=result.flaky,
            known=entry.to_json() if entry is not None else None,
            conditions=explanation.conditions if explanation is not None else None,
            explanation=explanation.to_json() if explanation is not None else None,
            reproducibility=result.reproducibility.to_json(), minimisation=result.minimisation_json(),
            localisation=result.localisation)
        path, new = self.corpus.record(finding)
        self.known.append(KnownBug.of(finding))
        if new:
            self._count(finding.status, +1)
        self.stats.minimise_s += result.seconds
        self.recorded.append((finding, path, new))
        self.emit(FindingRecorded(finding, path, new))
        if new:
            self._fold_special_cases(finding, path)

    def _count(self, status: str, delta: int) -> None:
        name = {"new": "new_findings", "known-bug": "known_bugs", "flaky": "flaky"}.get(status, "cpu_bugs")
        setattr(self.stats, name, getattr(self.stats, name) + delta)

    def _fold_special_cases(self, general: Finding, path: Path) -> None:
        """Earlier findings that are special cases of ``general`` become part of it: one
        bug, one finding, whichever case of it the campaign met first."""
        for known in [k for k in self.known if k.special_case_of(general)]:
            op, oracle = known.symptom[:2]
            if not self.corpus.fold(path, self.corpus.path_of(op, oracle, known.signature)):
                continue
            special = next((f for f, _, new in self.recorded if f.signature == known.signature and new), None)
            self.recorded = [r for r in self.recorded if r[0].signature != known.signature]
            self.known.remove(known)
            pending = self._sightings.pop(known.signature, 0)   # not yet written to its file
            if pending:
                self._sightings[general.signature] = self._sightings.get(general.signature, 0) + pending
            if special is not None:
                self._count(special.status, -1)
            self.emit(Notice(f"{general.op}: finding {known.signature[:8]} ({', '.join(known.conditions)}) "
                             f"is a special case of {general.signature[:8]} "
                             f"({', '.join(general.conditions) or 'no conditions'}): merged into it"))

    # -- the campaign ---------------------------------------------------------------------
    def run(self) -> CampaignFinished:
        self._start = time.monotonic()
        stopped = "completed"
        with WorkerPool(self.config.target_spec, timeout_s=self.config.timeout_s,
                        inflight_dir=self.config.corpus_dir) as pool:
            self.emit(CampaignStarted(pool.target_name, self.config.target_spec, pool.device,
                                      tuple(self.config.ops), self.config.oracles, self.seed,
                                      self.config.budget_s, self.config.max_cases))
            round_no = 0
            try:
                while True:
                    for op in self.config.ops:
                        if (reason := self._out_of_budget()):
                            raise BudgetExhausted(reason)
                        self._run_slice(op, round_no, pool)
                    round_no += 1
            except BudgetExhausted as stop:
                stopped = str(stop) or "budget"
            except KeyboardInterrupt:
                stopped = "interrupted"
            finally:
                self.stats.elapsed_s = time.monotonic() - self._start
                self._flush_sightings()
        result = CampaignFinished(self.stats, tuple(self.recorded), stopped)
        self.emit(result)
        return result

    def _flush_sightings(self) -> None:
        self.stats.known_sightings = sum(self._sightings.values())
        self.corpus.add_sightings(self._sightings)
