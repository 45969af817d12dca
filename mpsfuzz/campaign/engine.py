"""The campaign engine: Hypothesis generates and shrinks, workers execute, oracles judge.

Ops are scheduled round-robin in slices of a few dozen examples, so a time budget is
spread over all selected ops. Each failure raises an exception whose *type* is unique to
(op, oracle, kind), so Hypothesis shrinks each bug separately; once shrunk the finding
is recorded, and from then on its signature counts as passing, so one bug never hides
the next. Crashes and hangs are failures like any other: the worker is replaced and the
campaign goes on.

A campaign never dies of one case: an exception of mpsfuzz itself in generating,
executing, judging, triaging or recording a case (or in a listener) is a *harness
error*: counted by stage, emitted as a :class:`~mpsfuzz.events.HarnessError` (the
reporters log it with the case and traceback) and the campaign goes on; an op that keeps
failing that way is set aside for the rest of the run. Only a corpus that cannot be
written (:class:`~mpsfuzz.corpus.store.CorpusWriteError`) ends a campaign early.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from hypothesis import Phase
from hypothesis.errors import Unsatisfiable

from ..atomic import atomic_write_json
from ..corpus import upstream
from ..corpus.daemon_state import MAX_BEHAVIOURS, behaviour_hash
from ..corpus.finding import Finding, signature_of, symptom_key, trigger_class
from ..corpus.notes import entry_key, record_layout_propagation
from ..corpus.store import Corpus, CorpusWriteError, load_findings
from ..reports.repro_writer import awaits_verification, reverified
from ..events import (CampaignFinished, CampaignStarted, CaseFinished, FindingRecorded, HarnessError, Notice,
                      SliceFinished, Stats)
from ..execution.observation import ProcessEvent
from ..execution.worker import WorkerPool, WorkerStartAbandoned
from ..generation.recipes import Case
from ..oracles import DEFAULT as ORACLES_DEFAULT
from ..oracles import Failure, all_oracles, worker_oracles
from ..oracles.judge import judge_case
from ..triage.ablation import holds_all, holds_on_any_input, is_restriction
from ..triage.pipeline import DEFAULT_RERUNS, triage
from .behaviour import behaviour_of
from .drafts import (Draft, Drafter, GenerationFailed, Limits, draw_slice, error_line, family, leaves,
                     slice_test, strategy_for, traceback_of)
from .interrupts import InterruptLatch
from .scheduler import RoundRobin, YieldScheduler
from .slicing import SliceSizer
from .triage_desk import TriageDesks

# The share of a budget at its end that the desk may take from the fuzzing (_triage_due).
TRIAGE_RESERVE = 0.1
# While other failures of the first rank (the target's, of an op with no finding) wait
# for the desk, a job shrinks and minimises within this share of --shrink-budget and
# --minimise-budget: finding comes first (issue 37; on 2 cores with every fault on, the
# desk's queue outgrew what it triaged in a 10-minute budget).
PRESSED_SHARE = 0.25


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
    # Cases per slice: fixed (--slice), or None: sized from the budget so that it covers
    # every op (slicing.SliceSizer; slicing.MOST without a budget)
    slice_examples: int | None = None
    shrink_budget_s: float = 60.0
    max_rank: int = 8
    max_side: int = 8
    max_numel: int = 4096
    upstream_tables: tuple = ()       # extra known-upstream-failure table files (--known)
    allow_variants: bool = True
    reruns: int = DEFAULT_RERUNS      # re-runs of a shrunk failure before it is recorded
    minimise_budget_s: float = 30.0   # reduction + ablation time per finding
    compile_timeout_s: float = 180.0  # one torch.compile compilation (not counted in timeout_s)
    shared_corpus: bool = False       # other campaigns record into the corpus too (run --jobs)
    # Which op runs next: "round-robin" (run), or "yield" (the daemon: new findings and
    # behaviours per second, with a share kept for exploration); its saved state.
    schedule: str = "round-robin"
    scheduler_state: dict | None = None
    # What an earlier run left for this one: the failures it kept in DIR/triage-pending/
    # and, with ``reverify``, the findings whose repro scripts it did not run to the end.
    # (k, n): this campaign takes the k-th of n parts (run --jobs: each lane its part, by
    # a hash of the file's name); None: nothing.
    leftovers: tuple[int, int] | None = (0, 1)
    reverify: bool = False
    # Stopped (the stop event: SIGTERM to the daemon), failures not yet triaged stay
    # pending for the next start instead of being recorded untriaged.
    defer_on_stop: bool = False
    draw_jobs: int = 0                # drafter processes drawing slices ahead (0: draw here)
    siblings: int = 0                 # cases dressed again per drawn case (strategies.siblings)
    recycle_after: int | None = None  # a fresh worker after this many cases
    max_worker_rss_mb: float | None = None   # ... or once the worker's RSS passes this
    # When the budget started (time.monotonic(), system-wide): lanes count from their
    # coordinator's start, not their own (None: from run()).
    started_at: float | None = None
    # When this run started (time.time(): files carry it). A triage-pending/ file written
    # since is another lane's, in triage now, not an earlier run's: the lane that takes
    # up pending failures leaves it (None: from run()).
    pending_before: float | None = None


@dataclass(frozen=True)
class FoundBug:
    """A finding the campaign already has (in its corpus, or recorded in this run): a
    failing case with this symptom that meets the conditions is a sighting of
    ``signature``, not a new bug. (Failures known *upstream* are another matter:
    corpus/upstream.py.)"""
    symptom: tuple
    conditions: tuple | None          # None: a finding recorded before ablation
    signature: str
    flaky: bool = False               # any case with the symptom (it cannot be ablated)
    case: Case | None = field(default=None, compare=False)   # its minimal case
    # A failure handed to triage and not yet recorded: it *holds* the failures of its
    # symptom meanwhile, so the campaign does not shrink the same bug again while triage
    # works on it; once triage has settled its conditions, the held failures are judged
    # again (a second cause of the same symptom is a finding of its own, not a sighting).
    provisional: bool = False

    @classmethod
    def of(cls, finding: Finding) -> "FoundBug":
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

    def covers_beyond_restrictions(self, case, failure: Failure, symptom: tuple) -> bool:
        """Whether a failure of this settled finding's symptom that has the trigger its
        conditions name (layouts, emptiness, values, arguments: on any input) and misses
        only their restrictions (the dtypes and sizes ablation found failing) is this bug
        met outside what ablation tried: a sighting, not a job (issue 37: a fault filed as
        two bugs, the second triaged at length only to be merged). A finding whose
        conditions are restrictions alone (``only float16``) names no trigger beyond them:
        covered exactly or not at all."""
        if symptom != self.symptom or self.flaky or self.provisional or not self.conditions:
            return False
        named = [c for c in self.conditions if not is_restriction(c)]
        return bool(named) and all(holds_on_any_input(c, case) for c in named)


@dataclass(frozen=True)
class Reverification:
    """A desk job of the lowest rank: run again the repro script of a finding an earlier
    run left ``unverified`` (its script did not run to the end). Inside the budget like
    every job of the desk (issue 37, point 2); one not run stays unverified for the next."""
    path: Path


# Trigger shapes one provisional holder keeps (see Campaign._hold).
MAX_HELD = 64


def _held_key(case) -> tuple:
    """What a failure's triage conditions are made of (variant, dtypes, layouts, ranks,
    emptiness, value kinds, arguments), coarse enough that a holder keeps few cases and
    fine enough that a case of another cause is kept apart from the holder's own."""
    return (case.variant, repr(case.kwargs)[:200],
            tuple((r.dtype, r.describe_layout(), r.rank, r.numel == 0, r.values.distribution,
                   tuple(sorted({kind for _, kind in r.values.specials}))) for r in case.inputs))


class BudgetExhausted(BaseException):
    """Stops a Hypothesis run from inside the test body (BaseException passes through)."""


class _SetAside(BaseException):
    """Ends the slice of an op that has just been set aside (harness errors)."""


class _Abandoned(BaseException):
    """Raised on the desk's thread once its job was given up (the stop grace ran out):
    nothing of the job is stored or counted; it stays in triage-pending/."""


class _CorpusUnwritable(BaseException):
    """Carries a CorpusWriteError out of the test body: Hypothesis would take an
    Exception for a failure of the case and shrink it, case after case."""

    def __init__(self, error: CorpusWriteError):
        super().__init__(str(error))
        self.error = error


# Where failures wait for triage (one JSON each) until recorded: a campaign killed
# meanwhile loses none of them; the next campaign on the corpus triages them.
PENDING_DIR = "triage-pending"

# A budget is a hard bound (issue 37, point 2): a run ends within OVERRUN_SHARE of its
# budget, or OVERRUN_MIN_S where that is more (a CI job's time limit is set by it). At
# the budget's end the cases still running are given up at once, and the triage of
# failures handed to the desk goes on for at most the *stop grace*; what it has not
# finished stays in DIR/triage-pending/ (the job in hand given up, its worker killed),
# which the next run or daemon start on the corpus triages first. The grace is what the
# overrun allows less TEARDOWN_S (the desk's thread and workers closed, the summary and
# run record written, what the campaign started killed; lanes report within it), at
# most STOP_GRACE_MAX_S: 7 s for a 90 s run, 16 s for 240 s, 30 s for 8 hours. (Told to
# stop, by SIGTERM, a campaign gives triage 1 s; without a budget, --max-cases and
# --max-findings runs finish their triage.)
OVERRUN_SHARE = 0.1
OVERRUN_MIN_S = 15.0
TEARDOWN_S = 8.0
STOP_GRACE_MAX_S = 30.0


def _slow_to_triage(failure) -> bool:
    """Whether each re-run of this failure needs a process of its own (a crash, a hang,
    a device fault that poisons the context)."""
    return failure.oracle in ("crash", "hang") or failure.kind == "device-fault"


def overrun_s(budget_s: float | None) -> float | None:
    """How long past ``budget_s`` a run may end (None: no budget, no bound)."""
    return None if budget_s is None else max(OVERRUN_SHARE * budget_s, OVERRUN_MIN_S)


def stop_grace_s(budget_s: float | None) -> float | None:
    """How long past ``budget_s`` the desk may go on triaging (None: no budget, no bound)."""
    return None if budget_s is None else min(STOP_GRACE_MAX_S, max(2.0, overrun_s(budget_s) - TEARDOWN_S))


# How often a campaign sharing its corpus with others (run --jobs) looks for their findings.
REFRESH_S = 5.0

# An op is set aside for the rest of the run after this many harness errors in a row on
# its cases, or once more than SET_ASIDE_SHARE of at least SET_ASIDE_MIN cases failed so.
SET_ASIDE_STREAK = 8
SET_ASIDE_MIN = 20
SET_ASIDE_SHARE = 0.5


@dataclass
class _Slice:
    """One op's slice of a round: its seed, the cases drawn ahead, and the limits they
    were drawn with (the slice's size and siblings: a replay draws the same cases)."""
    op: str
    seed: int
    cases: list
    seconds: float = 0.0      # spent drawing them
    limits: Limits | None = None


@dataclass
class _InWorker:
    """A slice sent to the worker: its batch (or the exception that kept the pool from
    taking it), and its outcomes once collected (before they are judged)."""
    slice: _Slice
    batch: object
    outcomes: list | None = None


class FindingError(Exception):
    def __init__(self, case, failure: Failure, signature: str):
        super().__init__(failure.title)
        self.case, self.failure, self.signature = case, failure, signature
        # (the slice, its batch's verdicts) where the failure is still to be shrunk: the
        # triage desk replays the slice's test on its own worker (_shrunk_on_desk)
        self.to_shrink: tuple | None = None


class _SliceState(threading.local):
    """What judging one slice keeps, one per thread: the campaign's thread judges its
    batches while the triage desk's thread replays and shrinks an earlier slice."""

    def __init__(self):
        self.memo: dict = {}                 # case -> verdicts, for the rest of the slice
        self.pending: dict = {}              # (op, oracle, kind) -> the smallest failure so far
        self.shrink_started: dict = {}       # (op, oracle, kind) -> when its shrinking began
        self.replaying = False               # the second pass: its cases were counted by the first
        self.only: tuple | None = None       # the desk's replay shrinks this (op, oracle, kind) only
        self.holder = None                   # ... and its own placeholder does not cover it
        self.met: dict = {}                  # other new failures met in that replay: their own jobs
        self.pressed = False                 # the desk's job in hand: first-rank failures wait behind it


def _per_thread(name: str) -> property:
    """A Campaign attribute kept in the calling thread's _SliceState."""
    return property(lambda self: getattr(self._slice, name), lambda self, value: setattr(self._slice, name, value))


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


def split_report(exc: BaseException) -> tuple[list[FindingError], list[BaseException]]:
    """(our findings, the other exceptions) in what Hypothesis raised at the end of a slice."""
    found: list[FindingError] = []
    others: list[BaseException] = []
    for leaf in leaves(exc):
        inside = list(_iter_findings(leaf))
        if inside:
            found += [f for f in inside if all(f is not g for g in found)]
        else:
            others.append(leaf)
    return found, others


def count_finding(stats: Stats, status: str, delta: int = 1) -> None:
    """Count a finding recorded new in ``stats`` by its status (also the coordinator of
    lanes, for a lane that never reported its own statistics)."""
    name = {"new": "new_findings", "known-bug": "known_bugs", "flaky": "flaky", "capability": "capabilities",
            "unconfirmed": "unconfirmed", "unverified": "unverified", "both": "both",
            "undecided": "undecided"}.get(status, "cpu_bugs")
    setattr(stats, name, getattr(stats, name) + delta)


# Distinct (op, message) rows a message table keeps: a message may quote sizes, and a
# daemon runs for days; past the cap, new messages count under OTHER_MESSAGES.
MAX_MESSAGES = 2000
OTHER_MESSAGES = "(other messages)"


def _count_message(table: dict, op: str, message: str) -> None:
    key = (op, message)
    if key not in table and len(table) >= MAX_MESSAGES:
        key = (op, OTHER_MESSAGES)
    table[key] = table.get(key, 0) + 1


def _case_json(case):
    if case is None or isinstance(case, dict):
        return case
    try:
        return case.to_json()
    except Exception:
        return {"repr": repr(case)[:2000]}


def _event_subject(event) -> tuple:
    """(op, case) an event is about, for a listener's harness error."""
    if isinstance(event, CaseFinished):
        return event.op, event.case
    if isinstance(event, FindingRecorded):
        return getattr(event.finding, "op", None), getattr(event.finding, "case", None)
    return None, None


class Campaign:
    """``confirm(finding) -> repro record``: runs a new finding's standalone script before
    it is counted (the CLI passes the repro writer's); a finding whose script does not
    reproduce it is ``unconfirmed``, never new."""

    def __init__(self, config: CampaignConfig, listeners: list[Callable] = (),
                 confirm: Callable | None = None, stop=None, enough=None):
        self.config = config
        # Events (threading or multiprocessing). ``stop``: end now (SIGTERM), failures
        # in triage abandoned; ``enough``: end as a budget does (lanes' --max-findings).
        self.stop, self.enough = stop, enough
        self._interrupts = InterruptLatch()
        self.target_name = self.device = ""
        self.listeners = list(listeners)
        self.confirm = confirm
        self.stats = Stats()
        self._pending_before = config.pending_before   # (run() sets it where None)
        self.corpus = Corpus(config.corpus_dir)
        loaded = self.corpus.load()[0]
        self.found: list[FoundBug] = [FoundBug.of(f) for _, f in loaded]
        self._seen_files = {path.name for path, _ in loaded}   # corpus files in self.found
        self._refreshed = 0.0
        self.recorded: list[tuple[Finding, Path, bool]] = []
        self._sightings: dict[str, int] = {}
        self._notes: dict[str, dict] = {}   # layout-propagation lines of this run, by entry_key
        self._slice = _SliceState()
        # The triage desk's thread records findings while this one fuzzes: what both
        # change (stats, found, recorded, sightings) and the listeners are used under it.
        self._lock = threading.RLock()
        self._desk: TriageDesks | None = None
        self._desk_error: CorpusWriteError | None = None
        self._provisional = 0
        # Per provisional holder: failures it held, one per trigger shape (_held_key), with
        # how many cases of that shape it held: {holder signature: {key: [case, failure, n]}}.
        self._held: dict[str, dict] = {}
        self._device = self._target_name = ""
        # behaviour_hash()es of the behaviour keys seen by this campaign, at most
        # MAX_BEHAVIOURS (a daemon runs for days: hashes, not key tuples, and a cap)
        self._behaviours: set = set()
        self._pending_dir = Path(config.corpus_dir) / PENDING_DIR
        self._pending_files = 0
        self._drafter: Drafter | None = None
        self._sizer = SliceSizer(fixed=config.slice_examples, budget_s=config.budget_s)
        self._limits = Limits(config.max_rank, config.max_side, config.max_numel, config.allow_variants,
                              config.slice_examples or self._sizer.most, config.siblings)
        self._fuzz_started: float | None = None   # when the first slice was drawn (the case rate's clock)
        self._start = 0.0
        # Set once the desk's jobs were given up past the stop grace (_defer_triage): its
        # thread then stores and counts nothing more (see _Abandoned).
        self._abandoned = threading.Event()
        # per op: [cases attempted, harness errors, harness errors in a row] (set-aside rule)
        self._op_health: dict[str, list[int]] = {}
        self.upstream_table = upstream.load_tables(list(config.upstream_tables))
        self._case_oracles = worker_oracles(config.oracles)
        self._process_oracles = tuple(o for o in config.oracles if all_oracles()[o].stage == "process")
        import torch  # the version keys upstream table entries (fixed_in)
        self._torch_version = torch.__version__
        self.seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**31)
        self.scheduler = self._make_scheduler()

    # The slice state of the calling thread (_SliceState).
    _memo = _per_thread("memo")
    _pending = _per_thread("pending")
    _shrink_started = _per_thread("shrink_started")
    _replaying = _per_thread("replaying")

    def emit(self, event) -> None:
        """Hand ``event`` to every listener; one that raises is a harness error (stage
        ``report``), except for a corpus that cannot be written, which ends the run."""
        with self._lock:
            self._emit(event)

    def _emit(self, event) -> None:
        for listener in self.listeners:
            try:
                listener(event)
            except CorpusWriteError:
                raise
            except Exception as exc:
                if isinstance(event, HarnessError):
                    # Reporting this failure as another harness error would loop: count it.
                    self._count_harness("report")
                    continue
                op, case = _event_subject(event)
                self.harness_error("report", op, case, exc)

    # -- harness errors -------------------------------------------------------------------
    def _count_harness(self, stage: str) -> None:
        with self._lock:
            self.stats.harness_errors += 1
            self.stats.harness_by_stage[stage] = self.stats.harness_by_stage.get(stage, 0) + 1

    def _spent(self, stage: str, seconds: float) -> None:
        """Add ``seconds`` to the time split's ``stage`` (Stats.time_split)."""
        with self._lock:
            split = self.stats.time_split
            split[stage] = split.get(stage, 0.0) + max(0.0, float(seconds))

    def harness_error(self, stage: str, op: str | None, case, exc: BaseException | None = None, *,
                      error: str = "", trace: str = "") -> None:
        """Count and report a failure of mpsfuzz itself on one case (``exc``, or its
        ``error`` line and ``trace`` when it happened in a worker); the campaign goes on."""
        if exc is not None:
            error, trace = error_line(exc), traceback_of(exc)
        self._count_harness(stage)
        self.emit(HarnessError(stage, op, _case_json(case), error, trace))

    def _case_outcome(self, op: str, ok: bool, last_error: str = "") -> None:
        """One case of ``op`` attempted: ``ok`` unless it was lost to a harness error.
        An op that keeps failing is set aside for the rest of the run."""
        health = self._op_health.setdefault(op, [0, 0, 0])
        health[0] += 1
        if ok:
            health[2] = 0
            return
        health[1] += 1
        health[2] += 1
        attempts, errors, streak = health
        if op in self.stats.set_aside:
            return
        if streak >= SET_ASIDE_STREAK:
            self._set_aside(op, f"{streak} harness errors in a row", last_error)
        elif errors >= SET_ASIDE_MIN and errors > SET_ASIDE_SHARE * attempts:
            self._set_aside(op, f"harness errors on {errors} of its {attempts} cases", last_error)

    def _set_aside(self, op: str, why: str, last_error: str = "") -> None:
        self.stats.set_aside[op] = why
        self.emit(Notice(f"{op}: set aside for the rest of the run: {why}"
                         f"{' (last: ' + last_error + ')' if last_error else ''}; "
                         "each case and traceback is in the errors log"))

    # -- budget ---------------------------------------------------------------------------
    def _budget_end(self) -> float | None:
        return None if self.config.budget_s is None else self._start + self.config.budget_s

    def _past_budget(self) -> bool:
        """Whether cases still running are to be given up: told to stop, interrupted, or
        past the budget's end (a batch of hangs is not waited out, case after case)."""
        if (self.stop is not None and self.stop.is_set()) or self._interrupts.pending:
            return True
        end = self._budget_end()
        return end is not None and time.monotonic() >= end

    def _grace_left(self) -> float | None:
        """Seconds left of the stop grace (None: no budget, no bound)."""
        end = self._budget_end()
        if end is None:
            return None
        return max(0.0, end + stop_grace_s(self.config.budget_s) - time.monotonic())

    def _out_of_budget(self) -> str | None:
        self._interrupts.check()   # a Ctrl-C that Python dropped where it was raised
        if self.stop is not None and self.stop.is_set():
            return "stopped"
        if self.enough is not None and self.enough.is_set():
            return "max-findings"
        if self.config.max_cases is not None and self.stats.cases >= self.config.max_cases:
            return "max-cases"
        if self.config.budget_s is not None and time.monotonic() - self._start >= self.config.budget_s:
            return "budget"
        if self._triage_due():
            return "budget"
        # Failures in triage count: most become findings, and the desk finishes them.
        in_triage = self._desk.pending if self._desk is not None else 0
        if self.config.max_findings is not None and self.stats.failing + in_triage >= self.config.max_findings:
            return "max-findings"
        return None

    def _triage_due(self) -> bool:
        """Whether the rest of the budget goes to the desk: in its last tenth, while the
        desk holds a failure of the target's in an op with no finding yet. A bug met late
        is then filed rather than left pending (run 42, H200: nearest-exact's real
        gradient bug, met at 369 s of 420, was still waiting at the end)."""
        budget = self.config.budget_s
        if budget is None or self._desk is None or time.monotonic() - self._start < (1 - TRIAGE_RESERVE) * budget:
            return False
        return self._desk.holds(self._first_rank)

    def _first_rank(self, job) -> bool:
        """The desk's first rank, quick or slow: a target failure of an op with no finding."""
        return not any(self._triage_priority(job)[:2])

    def _out_of_time_to_shrink(self) -> str | None:
        """Why the desk's replay stops shrinking, if it must: told to stop, interrupted,
        or past the budget's end (the stop grace is for triaging what was shrunk), and
        given up (_Abandoned). --max-cases and --max-findings bound the fuzzing, not the
        shrinking of what it found (--shrink-budget does)."""
        self._check_abandoned()
        return "budget" if self._past_budget() else None

    def _stop_reason(self) -> str | None:
        """Why no further case may run on the calling thread: the desk's replay's reasons
        on the desk, the campaign's budget elsewhere."""
        return self._out_of_time_to_shrink() if self._on_desk() else self._out_of_budget()

    def _on_desk(self) -> bool:
        return self._desk is not None and self._desk.on_desk()

    # -- one case -------------------------------------------------------------------------
    def _failures_of(self, case, pool: WorkerPool) -> list[Failure]:
        """Run the case in a worker; its failures. Harness errors are counted here and
        the case then has no failures (only CorpusWriteError is raised)."""
        try:
            outcomes = pool.collect(pool.submit([case.to_json()], self._case_oracles, [case.op]),
                                    give_up=self._past_budget)
        except CorpusWriteError:
            raise
        except Exception as exc:  # the pool could not run it (a worker that cannot start...)
            outcomes = [exc]
        if not outcomes:   # given up: the budget ran out (or a stop came) while it ran
            raise BudgetExhausted(self._stop_reason() or "budget")
        return self._outcome_failures(case, outcomes[0])

    def _outcome_failures(self, case, outcome) -> list[Failure]:
        """The failures of a case the worker ran (``outcome``: its result dict, a
        ProcessEvent, or the exception that kept the pool from running it); counts it."""
        self._check_abandoned()   # the desk's replay, its worker killed past the stop grace: no case
        # The cases the desk's replay runs are triage's, as the reducer's are: they are
        # not the campaign's (--max-cases bounds the fuzzing, not the shrinking of what
        # it found), and its listeners see them as shrinking.
        fuzzing = not self._on_desk()
        per_op = [0, 0]
        if fuzzing:
            with self._lock:
                self.stats.cases += 1
                per_op = self.stats.per_op.setdefault(case.op, [0, 0])
                per_op[0] += 1
        shrinking = bool(self._shrink_started) or not fuzzing
        if isinstance(outcome, CorpusWriteError):
            raise outcome
        if isinstance(outcome, BaseException):
            self.harness_error("execute", case.op, case, outcome)
            self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
            return []
        if isinstance(outcome, ProcessEvent):
            if fuzzing and outcome.kind == "timeout":
                self._spent("run", outcome.timeout_s)   # a hang costs its whole timeout
            with self._lock:
                self.stats.restarts += fuzzing
            if outcome.kind == "slow-compile":
                # Compilation outlasted its own budget: reported, never a hang finding.
                self.stats.slow_compiles += 1
                self.emit(Notice(f"{case.op}: compiling took more than {outcome.timeout_s:g}s on "
                                 f"{outcome.target_name} (slow compilation, not a hang); case skipped"))
                self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
                return []
            if outcome.kind == "slow-reference":
                # Eager CPU's reference did not return; the target's call ran first and
                # returned: a hang of the witness, not of the target (issue 38: CPU
                # loops on max_pool1d with a kernel of 2^63 - 1). Reported, never filed.
                self.stats.reference_hangs += 1
                self.emit(Notice(f"{case.op}: the eager CPU reference did not return within "
                                 f"{outcome.timeout_s:g}s (a hang of the reference, not of {outcome.target_name}); "
                                 f"case skipped"))
                self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
                return []
            if outcome.kind == "slow-judge":
                # mpsfuzz's own verdict outlasted its budget: the harness failed, the
                # target did not hang (run 41L's cumprod@large).
                self.harness_error("judge", case.op, case, TimeoutError(
                    f"the verdict on this case took more than {outcome.timeout_s:g}s (the worker was restarted)"))
                self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
                return []
            oracles = all_oracles()
            failures = []
            for name in self._process_oracles:
                try:
                    failure = oracles[name].check(outcome)
                except Exception as exc:
                    self.harness_error("judge", case.op, case, exc)
                    continue
                if failure:
                    failures.append(failure)
            self.emit(Notice(f"worker {outcome.kind} on {case.op}; restarted"))
            self.emit(CaseFinished(case.op, valid=True, unsupported=False, shrinking=shrinking, case=case))
            return failures
        if outcome.get("internal_error"):
            # The executor or an oracle raised inside the worker: its traceback came back.
            trace = str(outcome["internal_error"])
            lines = [ln for ln in trace.strip().splitlines() if ln.strip()]
            self.harness_error("execute", case.op, case, error=lines[-1].strip() if lines else "internal error",
                               trace=trace)
        if fuzzing:
            for stage, seconds in (outcome.get("seconds") or {}).items():
                self._spent(stage, seconds)
            with self._lock:
                if outcome["valid"]:
                    self.stats.valid += 1
                    per_op[1] += 1
                if outcome["unsupported"]:
                    self.stats.unsupported += 1
                    _count_message(self.stats.unsupported_messages, case.op, outcome.get("unsupported_message", ""))
                if outcome.get("unsupported_here"):
                    self.stats.unsupported_here += 1
                    _count_message(self.stats.unsupported_here_messages, case.op, outcome["unsupported_here"])
        self.emit(CaseFinished(case.op, valid=outcome["valid"], unsupported=outcome["unsupported"],
                               shrinking=shrinking, case=case))
        try:
            return [Failure.from_json(f) for f in outcome["failures"]]
        except Exception as exc:
            self.harness_error("judge", case.op, case, exc)
            return []

    def _test_body(self, pool: WorkerPool, prepared: "_Slice"):
        def body(drawn):
            try:
                self._judge(drawn, pool, prepared.op, prepared.seed, prepared.limits.siblings)
            except CorpusWriteError as exc:
                raise _CorpusUnwritable(exc) from None
        return body

    def _judge(self, drawn, pool: WorkerPool, op: str, seed: int, siblings: int) -> None:
        """The test body: run each case of the drawn example's family (drafts.family:
        the case and its siblings, as the slice's batch ran them), or recall their
        verdicts, and raise the finding exception of the first failure that is neither
        suppressed nor a sighting."""
        if isinstance(drawn, GenerationFailed):
            if op in self.stats.set_aside and not self._shrink_started:
                raise _SetAside()
            if not self._replaying:  # a replay's failed draws were counted by the first pass
                # Not memoised: draws that fail alike are still separate attempts.
                self._generation_failed(op, drawn)
            return
        for case in family(drawn, seed, siblings):
            self._judge_one(case, pool, op)

    def _judge_one(self, case, pool: WorkerPool, op: str) -> None:
        verdicts = self._memo.get(case)
        if verdicts is None:
            # Only a case still to run costs budget: a replay of the batch's cases does not.
            reason = self._stop_reason()
            if reason:
                raise BudgetExhausted(reason)
            if op in self.stats.set_aside:
                if self._shrink_started:
                    return  # let Hypothesis finish shrinking the failures it has
                raise _SetAside()
            if self._shrink_budget_spent():
                return  # shrink budget spent: smaller variants are no longer tried
            verdicts = self._judged(case, op, lambda: self._failures_of(case, pool), pool)
        for verdict, failure, signature in verdicts:
            if verdict == "new":
                key = (case.op, failure.oracle, failure.kind)
                if self._slice.only is not None and key != self._slice.only:
                    # The desk shrinks one failure a job: another is its own job, once,
                    # handed over when this replay ends (runs 38 and 39, H200: SDPA's
                    # SIGFPE over zero key heads, met only while shrinking another SDPA
                    # failure, was dropped here ten times).
                    self._slice.met.setdefault(key, (case, failure, signature))
                    continue
                self._shrink_started.setdefault(key, time.monotonic())
                error = _error_type(*key)(case, failure, signature)
                self._pending[key] = error   # the smallest so far: Hypothesis shrinks towards it
                raise error

    def _shrink_budget_spent(self) -> bool:
        """Whether running one more case would take a shrink past --shrink-budget. A
        smaller variant of a hang that still hangs costs a whole timeout: it is tried
        only if that still fits."""
        now = time.monotonic()
        budget = self.config.shrink_budget_s * (PRESSED_SHARE if self._slice.pressed else 1.0)
        return any(now - started + (self.config.timeout_s if oracle == "hang" else 0.0) > budget
                   for (_op, oracle, _kind), started in self._shrink_started.items())

    def _generation_failed(self, op: str, failed: GenerationFailed) -> None:
        self.harness_error("generate", op, None, error=failed.error, trace=failed.traceback)
        self._case_outcome(op, False, failed.error)

    def _judged(self, case, op: str, failures_of, pool: WorkerPool) -> list[tuple]:
        """The verdicts of a case that ``failures_of()`` runs (or takes from its batch's
        outcome), memoised for the rest of the slice; its sightings and suppressed
        failures are counted here, once per case, however often Hypothesis asks again."""
        lost_before = self.stats.cases_lost
        verdicts = self._memo[case] = self._verdicts(case, failures_of(), pool)
        with self._lock:
            self._case_outcome(op, self.stats.cases_lost == lost_before)
            for verdict, _failure, signature in verdicts:
                if not self._on_desk():
                    failing = self.stats.failing_cases
                    failing[verdict] = failing.get(verdict, 0) + 1
                if verdict == "suppressed":
                    self.stats.suppressed += 1
                elif verdict == "sighting":
                    self._sightings[signature] = self._sightings.get(signature, 0) + 1
        return verdicts

    def _verdicts(self, case, failures: list[Failure], pool: WorkerPool) -> list[tuple]:
        """(verdict, failure, signature) for each failure: "suppressed" (the upstream
        tables call it unimplemented or undefined), "sighting" (of the finding already
        found with that signature) or "new". A failure the driver cannot judge (matching it
        raised) is a harness error and dropped."""
        verdicts = []
        for failure in failures:
            try:
                if failure.blame == "note":
                    # No bug to file (right values in another memory format): a line of
                    # the target's layout-propagation note, counted once per case.
                    if not self._replaying:
                        self._note(case, failure)
                    verdicts.append(("noted", failure, None))
                    continue
                if self._suppressed(case, failure, pool):
                    verdicts.append(("suppressed", failure, None))
                    continue
                found = self._covering_finding(case, failure)
                if found is not None and found.provisional:
                    self._hold(found, case, failure)
                    verdicts.append(("held", failure, found.signature))
                elif found is not None:
                    verdicts.append(("sighting", failure, found.signature))
                else:
                    verdicts.append(("new", failure, signature_of(case, failure)))
            except CorpusWriteError:
                raise
            except Exception as exc:
                self.harness_error("judge", case.op, case, exc)
        return verdicts

    def _note(self, case, failure: Failure) -> None:
        """Count a layout-propagation sighting; a new line of the note is written at once
        (a killed run keeps it), the counts of known lines at the end."""
        entry = {"op": case.op, "layouts": sorted({r.describe_layout() for r in case.inputs if not r.is_plain()})
                 or ["contiguous"], "dtypes": sorted({r.dtype for r in case.inputs}),
                 "target_format": failure.details.get("target_format", ""),
                 "cpu_format": failure.details.get("cpu_format", ""), "times_seen": 1,
                 "example": case.to_json()}
        key = entry_key(entry)
        with self._lock:
            self.stats.layout_notes += 1
            if key in self._notes:
                self._notes[key]["times_seen"] += 1
                return
            self._notes[key] = dict(entry, times_seen=0)
            # One line per op on the console (run 39, H200: 95 lines of notes); the note
            # file lists every layout.
            first_of_op = sum(e["op"] == case.op for e in self._notes.values()) == 1
        if record_layout_propagation(self.corpus, self._target_name or self.target_name, self._device, [entry]) \
                and first_of_op:
            self.emit(Notice(f"{case.op}: {entry['target_format']} where eager CPU returns {entry['cpu_format']} "
                             f"({', '.join(entry['layouts'])} input): layout propagation, noted, not a bug"))

    def _flush_notes(self) -> None:
        """The counts of note lines seen again in this run, added to the note."""
        again = [e for e in self._notes.values() if e["times_seen"]]
        self._notes = {}
        record_layout_propagation(self.corpus, self._target_name or self.target_name, self._device, again)

    def _covering_finding(self, case, failure: Failure) -> FoundBug | None:
        """The finding already found whose symptom and conditions this failure meets (on
        the desk's thread, shrinking a failure, not that failure's own placeholder); else
        a settled one it meets beyond its restrictions (FoundBug.covers_beyond_restrictions)."""
        symptom = symptom_key(case, failure)
        own = self._slice.holder
        found = [f for f in list(self.found) if f is not own]
        return next((f for f in found if f.covers(case, failure, symptom)), None) or \
            next((f for f in found if f.covers_beyond_restrictions(case, failure, symptom)), None)

    def _upstream_entry(self, case, failure: Failure, device: str):
        """The upstream table's entry this failure matches, or None."""
        trig = trigger_class(case)
        return upstream.match(self.upstream_table, device=device, op=case.op, dtypes=trig["dtypes"],
                                    oracle=failure.oracle, kind=failure.kind, variant=case.variant,
                                    layout_class=trig["layout_class"], torch_version=self._torch_version)

    def _suppressed(self, case, failure: Failure, pool: WorkerPool) -> bool:
        """Failures the upstream tables call unimplemented or undefined: not bugs."""
        entry = self._upstream_entry(case, failure, pool.device)
        return entry is not None and entry.status in upstream.SUPPRESSED

    # -- one slice: drawn ahead, run as a batch, replayed and shrunk only if it failed --
    def _prepare(self, draft: Draft) -> "_Slice | None":
        """Take in a slice drawn ahead (here or by a drafter process: drafts.py), counting
        the draws that raised and Hypothesis' own errors. None when the op is set aside."""
        op = draft.op
        if draft.broken is not None:  # its strategy cannot even be built: it never will be
            self.harness_error("generate", op, None, error=draft.broken[0], trace=draft.broken[1])
            self._set_aside(op, "its cases cannot be generated", draft.broken[0])
            return None
        for failed in draft.failed:
            if op in self.stats.set_aside:
                break
            self._generation_failed(op, failed)
        for unsatisfiable, line, trace in draft.errors:
            self.harness_error("generate" if unsatisfiable else "hypothesis", op, None, error=line, trace=trace)
            self._case_outcome(op, False, line)
        self._spent("draw", draft.seconds)
        if op in self.stats.set_aside:
            return None
        return _Slice(op, draft.seed, list(draft.cases), draft.seconds, draft.limits or self._limits)

    def _next_draft(self, slices) -> Draft:
        """The next slice's draft: drawn now, or the oldest a drafter drew ahead (it is
        then asked for the ones after, so that it keeps drawing while we judge)."""
        if self._drafter is None:
            op, round_no, limits = next(slices)
            return draw_slice(op, round_no, self.seed, limits)
        while len(self._drafter) <= self.config.draw_jobs:
            self._drafter.ahead(*next(slices))
        return self._drafter.take()

    def _hypothesis(self, prepared: "_Slice", body, *, phases):
        limits = prepared.limits
        return slice_test(strategy_for(prepared.op, limits), prepared.seed, limits.examples,
                          body, phases=phases, siblings=limits.siblings)

    def _finish(self, sent: _InWorker, pool: WorkerPool, *, shrink: bool = True,
                in_flight: _InWorker | None = None) -> None:
        """Judge the outcomes of ``sent``'s batch; if a case failed in a new way, the
        slice's Hypothesis test runs again with the same seed: it draws the same cases
        (their verdicts remembered, nothing runs twice), fails where the batch did and
        shrinks from there. That replay is the triage desk's (_hand_to_shrink), on its
        own thread and worker. Without ``shrink`` (the budget ran out) a new failure is
        recorded as it is, reduced by triage. ``in_flight``: the next slice, already in
        the worker (it runs while this one is judged); given up if these failures end
        the campaign."""
        self._shrink_started.clear()
        self._pending = {}
        self._memo = {}
        prepared = sent.slice
        op = prepared.op
        finishing = time.monotonic()
        try:
            outcomes = self._collect(sent, pool)
            for case, outcome in zip(prepared.cases, outcomes):
                self._judged(case, op, lambda c=case, o=outcome: self._outcome_failures(c, o), pool)
            self._slice_done(prepared, outcomes, prepared.seconds + time.monotonic() - finishing)
            failed = [(case, v) for case, vs in self._memo.items() for v in vs if v[0] == "new"]
            if not failed:
                return
            # A campaign these failures end (--max-findings) gives up the batch in the
            # worker rather than wait for cases that would run past its end (a hanging
            # op's batch of hangs, 3 s each).
            if in_flight is not None and self._ends_with(failed):
                self._collect(in_flight, pool, give_up=True)
            # Shrinking is triage: the desk replays the slice on its own worker while this
            # thread goes on fuzzing.
            if shrink:
                self._hand_to_shrink(prepared, failed, pool)
            else:
                self._record_unshrunk(failed, pool)
        finally:
            self._shrink_started.clear()
            self._pending = {}
            self._memo = {}

    def _hand_to_shrink(self, prepared: "_Slice", failed: list, pool: WorkerPool) -> None:
        """Hand the slice's new failures to the desk, one job per (op, oracle, kind) (the
        first case of each, as Hypothesis meets them), each to be shrunk there by a replay
        of the slice with the batch's verdicts (_shrunk_on_desk); the other cases of each
        are held by its placeholder meanwhile."""
        memo = dict(self._memo)
        first: dict[tuple, tuple] = {}
        for case, (_, failure, signature) in failed:
            first.setdefault((case.op, failure.oracle, failure.kind), (case, failure, signature))
        for key, (case, failure, signature) in first.items():
            err = _error_type(*key)(case, failure, signature)
            err.to_shrink = (prepared, memo)
            self._record_safely(err, pool, flaky=False)
        self._record_unshrunk(failed, pool)

    def _shrunk_on_desk(self, err: FindingError, holder, pool: WorkerPool) -> tuple[FindingError, bool]:
        """On the desk's thread: replay the slice ``err`` failed in with its seed (the
        batch's verdicts remembered, nothing runs twice) and let Hypothesis shrink the
        failure there, within --shrink-budget; (the smallest failure, Hypothesis' flaky
        hint). Only ``err``'s (op, oracle, kind) raises in this replay, and ``holder``,
        its own placeholder, does not cover it."""
        prepared, memo = err.to_shrink
        err.to_shrink = None
        key = (err.case.op, err.failure.oracle, err.failure.kind)
        state = self._slice
        state.memo, state.pending, state.shrink_started, state.met = dict(memo), {}, {}, {}
        state.only, state.holder, state.replaying = key, holder, True
        flaky = False
        try:
            self._hypothesis(prepared, self._test_body(pool, prepared),
                             phases=(Phase.generate, Phase.shrink))()
        except (BudgetExhausted, _SetAside):
            pass   # what it shrank so far stands
        except _CorpusUnwritable as exc:
            raise exc.error from None
        except Exception as exc:  # Hypothesis' report: the failure shrunk, and any errors of its own
            flaky = "Flaky" in type(exc).__name__
            found, others = split_report(exc)
            for other in others:
                self.harness_error("generate" if isinstance(other, Unsatisfiable) else "hypothesis",
                                   prepared.op, None, other)
                with self._lock:
                    self._case_outcome(prepared.op, False, error_line(other))
            reported = next((f for f in found if (f.case.op, f.failure.oracle, f.failure.kind) == key), None)
            if reported is not None:
                state.pending[key] = reported
        finally:
            smallest = state.pending.get(key)
            met, state.met = state.met, {}
            state.memo, state.pending, state.shrink_started = {}, {}, {}
            state.only = state.holder = None
            state.replaying = False
        self._hand_over_met(met)
        if smallest is None:
            return err, flaky
        smallest.__traceback__ = smallest.__context__ = smallest.__cause__ = None
        return smallest, flaky

    def _triage_priority(self, job) -> tuple:
        """A desk's order: failures blamed on the target first, those of an op with no
        finding yet before the rest; eager CPU's, both backends' and undecided ones after
        (runs 38 and 39, H200: 373 and 48 failures left untriaged at the budget's end,
        nearest-exact's real gradient bug among them, behind CPU's own); the scripts of
        findings an earlier run left unverified last. (Crashes, hangs and device faults
        have a desk of their own: TriageDesks.)"""
        try:
            if isinstance(job, Reverification):
                return (True, True, True)   # after every failure: no bug waits on it
            err = job[0]
            with self._lock:
                found_op = any(not f.provisional and f.symptom[:1] == (err.case.op,) for f in self.found)
            return (err.failure.blame != "target", found_op, False)
        except Exception:   # an order is a preference: never a reason to lose a job
            return (True, True, True)

    def _hand_over_met(self, met: dict) -> None:
        """The failures a desk replay met besides the one it shrank, each handed to the
        desk as a job of its own unless a finding (or one in triage) covers it."""
        for (op, oracle, kind), (case, failure, signature) in met.items():
            if self._covering_finding_or_none(case, failure) is not None:
                continue
            err = _error_type(op, oracle, kind)(case, failure, signature)
            if self._desk is not None:
                self._hand_to_desk(err, False, self._keep_pending(err, False))

    def _record_unshrunk(self, failed: list, pool: WorkerPool) -> None:
        """The slice's failing cases not handed over to be shrunk (the budget ran out,
        or another case of their failure was handed over): held by the placeholder of
        their symptom, a sighting of a finding that covers them, or recorded as they
        failed (triage reduces them)."""
        for case, (_, failure, signature) in failed:
            covering = self._covering_finding_or_none(case, failure)
            if covering is None:
                self._record_safely(_error_type(case.op, failure.oracle, failure.kind)(case, failure, signature),
                                    pool, flaky=False)
            elif covering.provisional:   # the replay handed a failure of this symptom to triage
                self._hold(covering, case, failure)

    def _slice_done(self, prepared: "_Slice", outcomes: list, seconds: float) -> None:
        """Tell the scheduler what the slice cost and showed (behaviours new to this
        campaign), and the listeners (the daemon keeps the behaviours of all runs)."""
        fresh = []
        for case, outcome in zip(prepared.cases, outcomes):
            if isinstance(outcome, BaseException):
                continue
            try:
                key = behaviour_of(case, outcome)
            except Exception as exc:
                self.harness_error("judge", case.op, case, exc)
                continue
            seen = behaviour_hash(key)
            if seen not in self._behaviours and len(self._behaviours) < MAX_BEHAVIOURS:
                self._behaviours.add(seen)
                fresh.append(key)
        with self._lock:
            self.scheduler.record(prepared.op, cases=len(outcomes), seconds=seconds, new_findings=0,
                                  new_behaviours=len(fresh))
        self.emit(SliceFinished(prepared.op, len(outcomes), seconds, tuple(fresh)))

    def _ends_with(self, failed: list) -> bool:
        """Whether recording ``failed`` (new failures, one finding per signature) reaches
        --max-findings. (A failure the replay merges into another finding leaves the
        campaign going, short of a batch it gave up: cases, nothing found.)"""
        if self.config.max_findings is None:
            return False
        in_triage = self._desk.pending if self._desk is not None else 0
        signatures = {signature for _, (_, _, signature) in failed}
        return self.stats.failing + in_triage + len(signatures) >= self.config.max_findings

    def _collect(self, sent: _InWorker, pool: WorkerPool, *, give_up: bool = False) -> list:
        """One outcome per case of ``sent`` (collected once, kept on it): ``sent.batch``
        is what submitting it gave (a Batch, or the exception that kept the pool from
        taking it). ``give_up``: the cases without a reply yet are given up now."""
        if sent.outcomes is not None:
            return sent.outcomes
        n, batch = len(sent.slice.cases), sent.batch
        if isinstance(batch, WorkerStartAbandoned):
            sent.outcomes = []    # given up with the budget, as cases past it are
        elif isinstance(batch, BaseException):
            sent.outcomes = [batch] * n
        elif batch is None:
            sent.outcomes = []
        else:
            try:
                # Past the budget, the cases still to run are given up (fewer outcomes);
                # so are those after a hang (the op's other cases would mostly hang too,
                # a timeout each, for the one finding). Hypothesis' replay stops drawing at
                # the hang, before them.
                sent.outcomes = pool.collect(batch, give_up=(lambda: True) if give_up else self._past_budget,
                                             stop_at_hang=True)
            except CorpusWriteError:
                raise
            except WorkerStartAbandoned:   # past the budget while a fresh worker started
                sent.outcomes = list(batch.outcomes)
            except Exception as exc:  # the pool could not run them (a worker that cannot start...)
                sent.outcomes = batch.outcomes + [exc] * (n - len(batch.outcomes))
        return sent.outcomes

    def _record_safely(self, err: FindingError, pool: WorkerPool | None, *, flaky: bool,
                       triage_it: bool = True) -> str | None:
        """Hand the shrunk failure to the triage desk (the campaign goes on meanwhile),
        or, on the desk's thread or without a desk, _record it now, anything it raises a
        harness error (stage ``record``). The signature it ended up as, if recorded now."""
        if self._desk is not None and not self._desk.on_desk():
            self._hand_to_desk(err, flaky, self._keep_pending(err, flaky))
            return None
        try:
            return self._record(err, pool, flaky=flaky, triage_it=triage_it)
        except CorpusWriteError:
            raise
        except Exception as exc:
            self.harness_error("record", err.case.op, err.case, exc)
            return None

    def _hand_to_desk(self, err: FindingError, flaky: bool, pending: Path | None) -> None:
        # The job needs the case, failure and signature only. Its traceback holds the
        # frames of the Hypothesis run that raised it, with all its drawn data: with
        # every fault on, failures wait for triage by the dozen, each keeping a run alive.
        err.__traceback__ = err.__context__ = err.__cause__ = None
        with self._lock:
            self._provisional += 1
            holder = FoundBug(symptom_key(err.case, err.failure), None, f"in-triage-{self._provisional}",
                              flaky=True, case=err.case, provisional=True)
            self.found.append(holder)
        self._desk.submit((err, flaky, holder, pending))

    def _keep_pending(self, err: FindingError, flaky: bool) -> Path | None:
        """Write the failure to DIR/triage-pending/ until it is recorded (None where that
        cannot be written: the failure is still triaged, only not kept across a kill)."""
        with self._lock:   # the desk's thread keeps failures pending too
            self._pending_files += 1
            number = self._pending_files
        path = self._pending_dir / f"{os.getpid()}-{number}-{err.signature[:12]}.json"
        try:
            self._pending_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {"format": 1, "case": err.case.to_json(), "failure": err.failure.to_json(),
                                     "signature": err.signature, "flaky": flaky, "written": time.time()})
            return path
        except (OSError, CorpusWriteError):
            return None

    def _takes(self, name: str) -> bool:
        """Whether the leftover file ``name`` is this campaign's part of what an earlier
        run left (CampaignConfig.leftovers): lanes share them by a hash of the name."""
        share = self.config.leftovers
        return share is not None and zlib.crc32(name.encode()) % share[1] == share[0]

    def _resume_pending(self) -> None:
        """Hand to triage the failures an earlier campaign left pending (killed, or
        stopped before triaging them), this campaign's part of them; one that a finding
        covers now is a sighting at once, not a job (issue 37: a run spent its budget
        triaging repeats of bugs it had filed). An unreadable file is moved aside, never
        lost."""
        if self.config.leftovers is None or not self._pending_dir.is_dir():
            return
        taken = seen = 0
        for path in sorted(self._pending_dir.glob("*.json")):
            if not self._takes(path.name):
                continue
            try:
                data = json.loads(path.read_text())
                if float(data.get("written", 0.0)) >= self._pending_before:
                    continue    # another lane's, handed to its desk since this run started
                case, failure = Case.from_json(data["case"]), Failure.from_json(data["failure"])
                err = _error_type(case.op, failure.oracle, failure.kind)(case, failure, str(data["signature"]))
            except FileNotFoundError:
                continue        # recorded meanwhile by the campaign that wrote it
            except Exception as exc:
                self.harness_error("record", None, None, exc)
                try:
                    os.replace(path, path.with_suffix(".corrupt"))
                except OSError:
                    pass
                continue
            covering = self._covering_finding_or_none(case, failure, settled=True)
            if covering is not None:
                with self._lock:
                    self._sightings[covering.signature] = self._sightings.get(covering.signature, 0) + 1
                seen += 1
                try:
                    os.unlink(path)
                except OSError:
                    pass
                continue
            self._hand_to_desk(err, bool(data.get("flaky")), path)
            taken += 1
        if taken or seen:
            self.emit(Notice(f"an earlier run left {taken + seen} failure(s) in {self._pending_dir}: "
                             f"{seen} sighting(s) of findings, {taken} to triage"))

    def _queue_reverifications(self) -> None:
        """Hand the desk, at its lowest rank, this campaign's part of the findings on this
        target whose repro scripts an earlier run left unverified."""
        if not self.config.reverify or self.confirm is None:
            return
        for path, finding in self.corpus.load()[0]:
            if awaits_verification(finding) and finding.target_spec == self.config.target_spec \
                    and self._takes(path.name):
                self._desk.submit(Reverification(path))

    def _reverify(self, job: Reverification) -> None:
        """Run an unverified finding's script again; a verdict is written back to it."""
        started = time.monotonic()
        try:
            found = load_findings([job.path])[0]
            if not found or not awaits_verification(found[0][1]):
                return   # gone, or settled meanwhile (another lane)
            key = reverified(self.corpus, job.path, found[0][1], self._confirm_unless_abandoned)
        except CorpusWriteError:
            raise
        except _Abandoned:
            raise
        except Exception as exc:   # it stays unverified, for the next run
            self.harness_error("report", None, None, exc)
            return
        finally:
            self._spent("reverify", time.monotonic() - started)
        with self._lock:
            self.stats.reverified[key] = self.stats.reverified.get(key, 0) + 1

    def _triaged(self, job, pool: WorkerPool, *, triage_it: bool = True) -> None:
        """The desk's handler: record the job's failure, then retire its placeholder
        (the sightings it collected meanwhile go to the finding it became); or run an
        unverified finding's script again."""
        if isinstance(job, Reverification):
            if triage_it:
                self._reverify(job)
            return
        err, flaky, holder, pending = job
        self._slice.pressed = self._desk is not None and self._desk.queued(self._first_rank) > 0
        try:
            if err.to_shrink is not None and self._covering_finding_or_none(err.case, err.failure,
                                                                           settled=True) is not None:
                err.to_shrink = None   # filed since it was handed over: a sighting, nothing to shrink
            if err.to_shrink is not None and triage_it and pool is not None:
                shrinking = time.monotonic()
                try:
                    err, flaky = self._shrunk_on_desk(err, holder, pool)
                finally:
                    self._spent("shrink", time.monotonic() - shrinking)
            signature = self._record_safely(err, pool, flaky=flaky, triage_it=triage_it)
        except CorpusWriteError as exc:
            self._desk_error = exc
            return  # still pending: the next campaign on the corpus records it
        if pending is not None:
            try:
                os.unlink(pending)
            except OSError:
                pass
        with self._lock:
            if holder in self.found:
                self.found.remove(holder)
            seen = self._sightings.pop(holder.signature, 0)
            if seen and signature is not None:
                self._sightings[signature] = self._sightings.get(signature, 0) + seen
            held = self._held.pop(holder.signature, {})
        self._judge_held(held, signature, pool, triage_it=triage_it)

    def _hold(self, holder: FoundBug, case, failure: Failure) -> None:
        """Keep a failure of ``holder``'s symptom until its triage settles what it covers.
        Bounded: one case per trigger shape, and at most MAX_HELD shapes per holder (the
        rest count as sightings of what the holder becomes)."""
        key = _held_key(case)
        with self._lock:
            held = self._held.setdefault(holder.signature, {})
            if key in held:
                held[key][2] += 1
            elif len(held) < MAX_HELD:
                held[key] = [case, failure, 1]
            else:
                self._sightings[holder.signature] = self._sightings.get(holder.signature, 0) + 1

    def _judge_held(self, held: dict, signature: str | None, pool: WorkerPool | None, *, triage_it: bool) -> None:
        """Judge the failures a holder held against the findings as they are now: a
        sighting of the finding that covers it, else a failure of its own, recorded (on
        the desk's thread: triaged now) or, where triage was abandoned or --max-findings
        reached, kept pending for the next campaign on the corpus rather than stored
        unexplained."""
        kept = 0
        for case, failure, count in held.values():
            covering = self._covering_finding_or_none(case, failure, settled=True)
            err = None if covering is not None else \
                _error_type(case.op, failure.oracle, failure.kind)(case, failure, signature_of(case, failure))
            if err is not None and self._abandoned.is_set():
                kept += self._keep_pending(err, False) is not None   # past the stop grace
                continue
            if err is not None and (not triage_it or self._enough_findings()):
                # Not triaged now (abandoned, or --max-findings reached): the next
                # campaign on the corpus triages it.
                kept += 1
                if self._keep_pending(err, False) is None:
                    self._record_safely(err, pool, flaky=False, triage_it=False)
                continue
            if err is not None and self._desk is not None:
                # A job of its own, in the desk's order (an op with a finding waits behind
                # the ops with none), not triaged here ahead of them.
                self._hand_to_desk(err, False, self._keep_pending(err, False))
                continue
            if err is not None:
                try:
                    became = self._record_safely(err, pool, flaky=False)
                except _Abandoned:   # given up while it was triaged: pending, as the rest
                    kept += self._keep_pending(err, False) is not None
                    continue
                count -= 1   # the case itself was counted by _record (a finding or a sighting)
            else:
                became = covering.signature
            if became is not None and count > 0:
                with self._lock:
                    self._sightings[became] = self._sightings.get(became, 0) + count
        if kept:
            with self._lock:
                self.stats.left_pending += kept
            if self._abandoned.is_set():
                return   # (past the stop grace: the summary may be out; the files say it)
            self.emit(Notice(f"{kept} failure(s) of another trigger than the finding that held them "
                             f"left for triage in {self._pending_dir}: the next run on this corpus triages them"))

    def _enough_findings(self) -> bool:
        """--max-findings reached (by this campaign, or by the lanes together)."""
        return (self.enough is not None and self.enough.is_set()) or (
            self.config.max_findings is not None and self.stats.failing >= self.config.max_findings)

    def _recorded_untriaged(self, job) -> None:
        """An abandoned or failed triage job: its shrunk case is recorded as it is."""
        self._triaged(job, None, triage_it=False)

    def _covering_finding_or_none(self, case, failure: Failure, *, settled: bool = False) -> FoundBug | None:
        """_covering_finding (``settled``: recorded findings only, not those in triage);
        None (and a harness error) where matching raises: better a finding recorded twice
        than a finding lost."""
        try:
            found = self._covering_finding(case, failure)
            if found is not None and found.provisional and settled:
                symptom = symptom_key(case, failure)
                settled_ones = [f for f in list(self.found) if not f.provisional]
                found = next((f for f in settled_ones if f.covers(case, failure, symptom)), None) or \
                    next((f for f in settled_ones if f.covers_beyond_restrictions(case, failure, symptom)), None)
            return found
        except CorpusWriteError:
            raise
        except Exception as exc:
            self.harness_error("judge", case.op, case, exc)
            return None

    def _record(self, err: FindingError, pool: WorkerPool | None, *, flaky: bool, triage_it: bool = True) -> str | None:
        """Re-run, reduce and explain the shrunk failure (triage/pipeline.py), then store it.
        (Hypothesis' own Flaky verdict, ``flaky``, is only a hint: the re-runs decide.)
        If triage raises, the shrunk case is stored as it is (unexplained): nothing found
        is lost to a harness error."""
        earlier = self._covering_finding_or_none(err.case, err.failure, settled=True)
        if earlier is not None:
            with self._lock:  # an earlier finding covers it
                self._sightings[earlier.signature] = self._sightings.get(earlier.signature, 0) + 1
            return earlier.signature
        result = None
        if triage_it and pool is not None:
            self.emit(Notice(f"{err.case.op}: minimising {err.failure.oracle} failure"))
            triaging = time.monotonic()
            try:
                result = triage(err.case, err.failure, pool, self.config.oracles, reruns=self.config.reruns,
                                budget_s=self.config.minimise_budget_s * (PRESSED_SHARE if self._slice.pressed else 1.0),
                                timeout_s=self.config.timeout_s)
                for step, seconds in result.steps.items():
                    self._spent(f"triage:{step}", seconds)
            except CorpusWriteError:
                raise
            except Exception as exc:
                self._check_abandoned()   # its worker was killed under it: not a harness error
                self.harness_error("triage", err.case.op, err.case, exc)
            finally:
                self._spent("triage", time.monotonic() - triaging)
        self._check_abandoned()   # given up while it was triaged: it stays pending
        if result is None:
            case, failure, explanation, result_flaky = err.case, err.failure, None, False
        else:
            case, failure, explanation, result_flaky = result.case, result.failure, result.explanation, result.flaky
        with self.corpus.recording():
            self._refresh_found()   # what other campaigns on this corpus recorded meanwhile
            covering = None if result_flaky else self._covering_finding_or_none(case, failure, settled=True)
            if covering is not None:
                # Reduced, it meets an earlier finding's conditions (the reducer moved it
                # to that finding's dtype, say): a sighting of that bug.
                with self._lock:
                    self._sightings[covering.signature] = self._sightings.get(covering.signature, 0) + 1
                return covering.signature
            path, new, finding = self._store(case, failure, result, explanation, result_flaky)
        return self._confirmed(finding, path, new, result)

    def _refresh_found(self) -> None:
        """Add the findings that other campaigns sharing the corpus recorded since."""
        self._refreshed = time.monotonic()
        fresh = self.corpus.load_new(self._seen_files)
        with self._lock:
            known = {f.signature for f in self.found}
            self.found += [FoundBug.of(f) for _, f in fresh if f.signature not in known]

    def _store(self, case, failure: Failure, result, explanation, result_flaky: bool):
        """Write the finding (its status from the upstream tables): (path, new, finding)."""
        try:
            entry = self._upstream_entry(case, failure, self._device)
        except Exception as exc:
            self.harness_error("judge", case.op, case, exc)
            entry = None
        # triage files a compiled target's failure that its eager counterpart shows too as
        # the eager target's (issue 37)
        target_name, target_spec = getattr(result, "filed_as", None) or (self._target_name, self.config.target_spec)
        finding = Finding.create(
            case, failure, target_name=target_name, target_spec=target_spec,
            device=self._device, flaky=result_flaky,
            known=entry.to_json() if entry is not None else None,
            conditions=explanation.conditions if explanation is not None else None,
            explanation=explanation.to_json() if explanation is not None else None,
            reproducibility=result.reproducibility.to_json() if result is not None else None,
            minimisation=result.minimisation_json() if result is not None else None,
            localisation=result.localisation if result is not None else None)
        with self._lock:
            path, new = self.corpus.record(finding)
            self.found.append(FoundBug.of(finding))
            self._seen_files.add(path.name)
        return path, new, finding

    def _confirmed(self, finding: Finding, path: Path, new: bool, result) -> str:
        """Verify a new finding's repro script (``confirm``), count and report it."""
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
                    self._spent("verify", time.monotonic() - verifying)
                if record is not None:
                    self._check_abandoned()   # its script was killed with the desk's work
                    finding.repro = record
                    self.corpus.update(path, lambda f: setattr(f, "repro", record))
        finally:
            # Also when a Ctrl-C stops the verification: the finding is on disk, so the
            # run's summary and counts must show it (its repro stays unverified). Unless
            # the job was given up (the summary may be out): it stays pending, and the
            # next run counts it as a sighting of the finding on disk.
            with self._lock:
                self._check_abandoned()
                if new:
                    self._count(finding.status, +1)
                    if finding.status in ("new", "unverified"):   # (Stats.failing)
                        self._credit_finding(finding.op)
                self.stats.minimise_s += result.seconds if result is not None else 0.0
                self.recorded.append((finding.without_bulk(), path, new))
                self.emit(FindingRecorded(finding, path, new))
        if new:
            with self._lock:
                self._fold_special_cases(finding, path)
        return finding.signature

    def _credit_finding(self, op: str) -> None:
        try:
            self.scheduler.record(op, cases=0, seconds=0.0, new_findings=1, new_behaviours=0)
        except (KeyError, ValueError):
            pass  # a pending failure of an op this campaign does not schedule

    def _count(self, status: str, delta: int) -> None:
        with self._lock:
            count_finding(self.stats, status, delta)

    def _fold_special_cases(self, general: Finding, path: Path) -> None:
        """Earlier findings that are special cases of ``general`` become part of it: one
        bug, one finding, whichever case of it the campaign met first."""
        for found in [f for f in self.found if f.special_case_of(general)]:
            op, oracle = found.symptom[:2]
            if not self.corpus.fold(path, self.corpus.path_of(op, oracle, found.signature)):
                continue
            special = next((f for f, _, new in self.recorded if f.signature == found.signature and new), None)
            self.recorded = [r for r in self.recorded if r[0].signature != found.signature]
            self.found.remove(found)
            pending = self._sightings.pop(found.signature, 0)   # not yet written to its file
            if pending:
                self._sightings[general.signature] = self._sightings.get(general.signature, 0) + pending
            if special is not None:
                self._count(special.status, -1)
            self.emit(Notice(f"{general.op}: finding {found.signature[:8]} ({', '.join(found.conditions)}) "
                             f"is a special case of {general.signature[:8]} "
                             f"({', '.join(general.conditions) or 'no conditions'}): merged into it"))

    # -- the campaign ---------------------------------------------------------------------
    def run(self) -> CampaignFinished:
        """Run to the budget. Raises CorpusWriteError, at once, if the corpus cannot be
        written (what is on disk stays); every other failure of one case is a harness
        error and the campaign goes on."""
        self._start = self.config.started_at if self.config.started_at is not None else time.monotonic()
        if self._pending_before is None:
            self._pending_before = time.time()
        stopped = "completed"
        unwritable: CorpusWriteError | None = None
        try:
            pool = WorkerPool(self.config.target_spec, timeout_s=self.config.timeout_s,
                              inflight_dir=self.config.corpus_dir, compile_timeout_s=self.config.compile_timeout_s,
                              execute=judge_case, recycle_after=self.config.recycle_after,
                              max_rss_mb=self.config.max_worker_rss_mb, give_up=self._past_budget)
        except WorkerStartAbandoned:
            return self._ended_before_its_worker_started()
        with pool, self._interrupts:
            self._device, self._target_name = pool.device, pool.target_name
            self.device, self.target_name = pool.device, pool.target_name
            self._desk = TriageDesks(self._triaged, self._triage_pool, fallback=self._recorded_untriaged,
                                     priority=self._triage_priority, slow=self._slow_job)
            try:
                self.emit(CampaignStarted(pool.target_name, self.config.target_spec, pool.device,
                                          tuple(self.config.ops), self.config.oracles, self.seed,
                                          self.config.budget_s, self.config.max_cases))
                self._resume_pending()
                self._queue_reverifications()
                self._fuzz(pool)
            except BudgetExhausted as stop:
                stopped = str(stop) or "budget"
            except KeyboardInterrupt:
                self._interrupts.acknowledge()
                stopped = "interrupted"
            except _CorpusUnwritable as stop:
                unwritable = stop.error
            except CorpusWriteError as exc:
                unwritable = exc
            finally:
                self.stats.recycled = pool.recycled
                if unwritable is None:
                    stopped = self._close_desk(stopped)
                    unwritable = self._desk_error
                self.stats.elapsed_s = time.monotonic() - self._start
                if unwritable is None:
                    self._flush_sightings()
                    self._flush_notes()
        if unwritable is not None:
            raise unwritable
        result = CampaignFinished(self.stats, tuple(self.recorded), stopped)
        self.emit(result)
        return result

    def _ended_before_its_worker_started(self) -> CampaignFinished:
        """The budget ran out (or a stop came) while the worker started (a loaded
        machine): no case ran, what an earlier run left stays for the next."""
        self.emit(CampaignStarted("", self.config.target_spec, "", tuple(self.config.ops), self.config.oracles,
                                  self.seed, self.config.budget_s, self.config.max_cases))
        self.stats.elapsed_s = time.monotonic() - self._start
        self.emit(Notice("the budget ran out while the worker started: no case ran"))
        result = CampaignFinished(self.stats, (), self._stop_reason() or "budget")
        self.emit(result)
        return result

    def _triage_pool(self, role: str) -> WorkerPool:
        """A desk's worker: the campaign's target, a process of its own."""
        return WorkerPool(self.config.target_spec, timeout_s=self.config.timeout_s,
                          inflight_dir=self.config.corpus_dir, compile_timeout_s=self.config.compile_timeout_s,
                          execute=judge_case, role=role)

    @staticmethod
    def _slow_job(job) -> bool:
        """Whether a desk job goes to the slow desk (TriageDesks): a crash, hang or device
        fault, each of whose re-runs needs a fresh process."""
        return not isinstance(job, Reverification) and _slow_to_triage(job[0].failure)

    def _close_desk(self, stopped: str) -> str:
        """Let the desk finish the failures handed to it: to the end without a budget
        (they are findings), within the stop grace with one (the rest stay pending:
        _defer_triage); told to stop (the daemon's SIGTERM), a second for the job in
        hand. A Ctrl-C, before or while it does, records the ones not started as they are."""
        desk = self._desk
        if self.config.budget_s is not None or stopped in ("interrupted", "stopped"):
            # Scripts of earlier findings wait for the next run rather than the end.
            self._reverify_left(len(desk.withdraw(lambda job: isinstance(job, Reverification))))
        try:
            if stopped == "stopped" and self.config.defer_on_stop:
                if not desk.drain(timeout=1.0):   # the daemon must be gone within seconds
                    self._defer_triage()
                return stopped
            if stopped not in ("interrupted", "stopped"):
                try:
                    grace = self._grace_left()
                    if desk.pending:
                        bound = f" (at most {grace:.0f}s more)" if grace is not None else ""
                        self.emit(Notice(f"triaging the last {desk.pending} failure(s) before stopping{bound}"))
                    if not desk.drain(timeout=grace):
                        self._defer_triage()
                    return stopped
                except KeyboardInterrupt:
                    stopped = "interrupted"
            # Interrupted (or stopped, not deferring): the ones not started are recorded
            # as they are; the job in hand gets a moment to finish.
            for job in desk.abandon():
                self._recorded_untriaged(job)
            desk.drain(timeout=1.0 if stopped == "stopped" else 5.0)
            return stopped
        finally:
            quick = stopped in ("interrupted", "stopped") or self._abandoned.is_set()
            desk.close(timeout=1.0 if quick else 10.0)
            self._desk = None

    def _defer_triage(self) -> None:
        """Give up the desk's jobs and leave them in DIR/triage-pending/ for the next
        campaign on the corpus: those not started, the one in hand (its worker killed;
        from now on the desk's thread stores and counts nothing: _Abandoned) and the
        failures their holders held (in memory only until now). Nothing is lost."""
        desk = self._desk
        jobs = 0
        cases = set()   # (a holder also holds its own case: written once)
        for job in desk.abandon():            # not started: pending already, as a rule
            if isinstance(job, Reverification):
                self._reverify_left(1)
                continue
            cases.add(job[0].case)
            if self._sighted_now(job):
                continue
            if self._kept_pending(job):
                jobs += 1
            else:                             # no file could be written: recorded as it is
                self._recorded_untriaged(job)
        with self._lock:
            self._abandoned.set()
        in_hand = desk.in_hand
        desk.cancel()
        for job in in_hand:
            if isinstance(job, Reverification):
                self._reverify_left(1)
            else:
                cases.add(job[0].case)
                jobs += self._kept_pending(job)
        with self._lock:
            held, self._held = self._held, {}
        kept = 0
        for shapes in held.values():
            for case, failure, _count in shapes.values():
                if case in cases:
                    continue
                cases.add(case)
                err = _error_type(case.op, failure.oracle, failure.kind)(case, failure, signature_of(case, failure))
                kept += self._keep_pending(err, False) is not None
        if jobs or kept:
            with self._lock:
                self.stats.left_pending += jobs + kept
            self.emit(Notice(f"out of time to triage {jobs} failure(s) (and {kept} held while they were): left in "
                             f"{self._pending_dir}, the next run on this corpus triages them"))

    def _confirm_unless_abandoned(self, finding) -> dict:
        """``confirm``, whose verdict is not written once the desk's job was given up."""
        record = self.confirm(finding)
        self._check_abandoned()
        return record

    def _reverify_left(self, n: int) -> None:
        if n:
            with self._lock:
                self.stats.reverified["left"] = self.stats.reverified.get("left", 0) + n

    def _sighted_now(self, job) -> bool:
        """Whether a job given up is a sighting of a finding recorded since it was handed
        to the desk (counted as one, its pending file removed): left pending, the next run
        would only find that out (issue 37, H200: a cuda-compiled run left 57 failures,
        among them five of an FFT assertion and two of an index_add_ lowering it had
        filed while they waited)."""
        err = job[0]
        covering = self._covering_finding_or_none(err.case, err.failure, settled=True)
        if covering is None:
            return False
        with self._lock:
            self._sightings[covering.signature] = self._sightings.get(covering.signature, 0) + 1
        pending = job[3]
        if pending is not None:
            try:
                os.unlink(pending)
            except OSError:
                pass
        return True

    def _kept_pending(self, job) -> bool:
        """Whether the job's failure is in triage-pending/ (written now if it was not)."""
        err, flaky, _holder, pending = job
        if pending is not None:
            return pending.exists()   # (recorded meanwhile: its file was removed)
        return self._keep_pending(err, flaky) is not None

    def _check_abandoned(self) -> None:
        if self._abandoned.is_set():
            raise _Abandoned()

    def _make_scheduler(self):
        if self.config.schedule == "yield":
            return YieldScheduler(self.config.ops, seed=self.seed, state=self.config.scheduler_state)
        if self.config.schedule == "round-robin":
            return RoundRobin(self.config.ops)
        raise ValueError(f"schedule={self.config.schedule!r}: expected 'round-robin' or 'yield'")

    def _slices(self):
        """(op, round, limits) of each slice to run, as the scheduler picks among the ops
        not set aside (round: how often this op ran in this campaign, which seeds its
        slice; limits: its size, from the budget left, the ops still to have their turn
        in this round and the case rate so far, and its siblings)."""
        rounds: dict[str, int] = {}
        while True:
            if all(op in self.stats.set_aside for op in self.config.ops):
                raise BudgetExhausted("every op set aside")
            op = self.scheduler.next_op(exclude=tuple(self.stats.set_aside))
            rounds[op] = rounds.get(op, -1) + 1
            yield op, rounds[op], self._slice_limits(rounds, op)

    def _slice_limits(self, rounds: dict, op: str) -> Limits:
        """The Limits of ``op``'s next slice: as configured, or sized (SliceSizer) where
        the budget decides; a slice of fewer cases than a drawn case's family has fewer
        siblings, so that a slice of one case is one case."""
        if not self._sizer.adaptive:
            return self._limits
        now = time.monotonic()
        if self._fuzz_started is None:
            self._fuzz_started = now
        ops = [o for o in self.config.ops if o not in self.stats.set_aside]
        behind = sum(1 for o in ops if rounds.get(o, -1) < rounds[op]) + 1
        elapsed = now - self._fuzz_started
        rate = self.stats.cases / elapsed if self.stats.cases and elapsed > 0 else None
        left = (self._budget_end() or now) - now
        cases = self._sizer.cases(ops_left_in_round=behind, seconds_left=left, cases_per_s=rate)
        return replace(self._limits, examples=cases, siblings=min(self._limits.siblings, cases - 1))

    def _fuzz(self, pool: WorkerPool) -> None:
        """Run slices until the budget says stop, in a pipeline: the next slice's cases
        are drawn while the worker runs the previous slice's batch, sent to queue behind
        it, and a slice's outcomes are judged while the worker runs the next one (the
        worker never waits for the driver while the drawing keeps up)."""
        running = None          # the _InWorker in the worker
        finishing = None        # collected, not yet judged
        slices = self._slices()
        self._drafter = Drafter(self.config.draw_jobs, self.seed) if self.config.draw_jobs else None
        try:
            while True:
                op = None
                if self._desk_error is not None:
                    raise self._desk_error
                if self.config.shared_corpus and time.monotonic() - self._refreshed > REFRESH_S:
                    self._refresh_found()   # stop shrinking what another lane found
                if (reason := self._out_of_budget()):
                    raise BudgetExhausted(reason)
                try:
                    draft = self._next_draft(slices)
                    op = draft.op
                    prepared = self._prepare(draft)
                    if prepared is not None:
                        prepared.cases = prepared.cases[:self._cases_left(running)]
                    finishing, running = running, None
                    # Sent before the last batch is collected: it queues behind that
                    # one in the worker, which goes from one to the next without
                    # waiting for the driver to read, write the in-flight file and send.
                    if prepared is not None and prepared.cases:
                        running = _InWorker(prepared, self._submit(prepared, pool))
                    if finishing is not None:
                        self._collect(finishing, pool)
                        judging, finishing = finishing, None
                        self._finish(judging, pool, in_flight=running)
                except CorpusWriteError:
                    raise
                except (_CorpusUnwritable, BudgetExhausted, KeyboardInterrupt):
                    raise
                except Exception as exc:  # whatever else escaped the slice: not fatal
                    self.harness_error("hypothesis", op, None, exc)
                    self._case_outcome(op, False, error_line(exc))
        except (BudgetExhausted, KeyboardInterrupt) as stop:
            if str(stop) == "stopped":
                pool.abandoned = True   # the daemon must be gone within seconds
            if str(stop) != "stopped":
                # Their cases ran (or are running): count and judge them; a new failure
                # is recorded unshrunk rather than lost. (Told to stop now, the daemon
                # abandons them: they are only cases, and it must exit within seconds.)
                if finishing is not None:
                    self._finish(finishing, pool, shrink=False, in_flight=running)
                if running is not None:
                    self._finish(running, pool, shrink=False)
            raise
        finally:
            if self._drafter is not None:
                self._drafter.close()
                self._drafter = None

    def _cases_left(self, running) -> int | None:
        """How many more cases --max-cases allows, counting those in the worker now
        (None: no limit; a slice is drawn at its size)."""
        if self.config.max_cases is None:
            return None
        in_flight = len(running.slice.cases) if running is not None else 0
        return max(0, self.config.max_cases - self.stats.cases - in_flight)

    def _submit(self, prepared: _Slice, pool: WorkerPool):
        try:
            return pool.submit([c.to_json() for c in prepared.cases], self._case_oracles,
                               [c.op for c in prepared.cases])
        except CorpusWriteError:
            raise
        except Exception as exc:  # judged as each case's harness error when finished
            return exc

    def _flush_sightings(self) -> None:
        self.stats.sightings = sum(self._sightings.values())
        try:
            self.corpus.add_sightings(self._sightings)
        except CorpusWriteError:
            raise
        except Exception as exc:
            self.harness_error("record", None, None, exc)
