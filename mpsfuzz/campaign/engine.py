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

:class:`Campaign` drives the parts, each a module of its own that runs no worker and
starts no thread (issue 39): ``known_findings.py`` (whether a failure is new, a sighting
or held), ``budget.py`` (when it stops), ``health.py`` (the set-aside rule),
``listeners.py`` (events and harness errors), ``slice_plan.py`` and ``batches.py``
(which slice runs next, sent and collected), ``outcomes.py`` (what a case came to),
``layout_notes.py``, ``desk_jobs.py`` and ``pending.py`` (the desk's jobs and
triage-pending/), ``filing.py`` (a triaged failure filed), ``reverification.py`` and
``desk_end.py`` (the desk's jobs at the run's end).
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hypothesis import Phase
from hypothesis.errors import Unsatisfiable

from ..corpus import upstream
from ..corpus.daemon_state import MAX_BEHAVIOURS, behaviour_hash
from ..corpus.finding import signature_of, trigger_class
from ..corpus.store import Corpus, CorpusWriteError
from ..events import CampaignFinished, CampaignStarted, Notice, SliceFinished, Stats
from ..execution.worker import WorkerPool, WorkerStartAbandoned
from ..generation.settings import GenerationSettings
from ..generation.settings import install as install_settings
from ..generation.settings import installed as installed_settings
from ..oracles import DEFAULT as ORACLES_DEFAULT
from ..oracles import Failure, all_oracles, worker_oracles
from ..oracles.judge import judge_case
from ..triage.pipeline import DEFAULT_RERUNS, triage
from .batches import InWorker, Slice, collect, submit
from .behaviour import behaviour_of
from .budget import Budget, BudgetExhausted
from .desk_end import DeskEnd
from .desk_jobs import Job, Reverification, desk_order, first_rank, is_slow
from .drafts import (Draft, Drafter, GenerationFailed, Limits, draw_slice, error_line, family, leaves,
                     slice_test, strategy_for)
from .filing import Filing
from .health import OpHealth
from .interrupts import InterruptLatch
from .known_findings import NEW, SIGHTING, FoundBug, KnownFindings
from .layout_notes import LayoutNotes
from .listeners import Listeners
from .outcomes import CaseOutcomes, add_time, count_message
from .pending import PendingFailures, remove
from .reverification import Reverifications
from .slice_plan import SlicePlan, make_scheduler
from .slicing import SliceSizer
from .triage_desk import TriageDesks
# Re-exported: the CLI, lanes and tests read these here.
from .budget import STOP_GRACE_MAX_S, overrun_s, stop_grace_s  # noqa: F401
from .filing import count_finding  # noqa: F401
from .health import SET_ASIDE_STREAK  # noqa: F401
from .outcomes import MAX_MESSAGES, OTHER_MESSAGES  # noqa: F401

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
    # What generation needs in every process (--max-bytes, --large, --kernels): the
    # campaign installs it here and hands it to each process it starts (lanes, workers,
    # drafters, triage's workers). Default: the settings installed in this process.
    settings: GenerationSettings = field(default_factory=installed_settings)


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


# How often a campaign sharing its corpus with others (run --jobs) looks for their findings.
REFRESH_S = 5.0


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


def _count_message(table: dict, op: str, message: str) -> None:
    """outcomes.count_message, capped at this module's MAX_MESSAGES (tests patch it here)."""
    count_message(table, op, message, cap=MAX_MESSAGES)


class Campaign:
    """``confirm(finding) -> repro record``: runs a new finding's standalone script before
    it is counted (the CLI passes the repro writer's); a finding whose script does not
    reproduce it is ``unconfirmed``, never new."""

    def __init__(self, config: CampaignConfig, listeners: list[Callable] = (),
                 confirm: Callable | None = None, stop=None, enough=None):
        self.config = config
        # This process draws cases too (where no drafter does) and shrinks them: it
        # generates with the settings its workers and drafters are handed.
        self.settings = config.settings
        if installed_settings() != self.settings:
            install_settings(self.settings)
        # Events (threading or multiprocessing). ``stop``: end now (SIGTERM), failures
        # in triage abandoned; ``enough``: end as a budget does (lanes' --max-findings).
        self.stop, self.enough = stop, enough
        self._interrupts = InterruptLatch()
        self.target_name = self.device = ""
        self._device = self._target_name = ""
        self.listeners = list(listeners)
        self.confirm = confirm
        self.stats = Stats()
        self.seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**31)
        self._pending_before = config.pending_before   # (run() sets it where None)
        self.corpus = Corpus(config.corpus_dir)
        loaded = self.corpus.load()[0]
        # The triage desk's thread records findings while this one fuzzes: what both
        # change (stats, the known findings, recorded) and the listeners are used under it.
        self._lock = threading.RLock()
        self._slice = _SliceState()
        self._desk: TriageDesks | None = None
        self._desk_error: CorpusWriteError | None = None
        self._drafter: Drafter | None = None
        # Set once the desk's jobs were given up past the stop grace (_defer_triage): its
        # thread then stores and counts nothing more (see _Abandoned).
        self._abandoned = threading.Event()
        # behaviour_hash()es of the behaviour keys seen by this campaign, at most
        # MAX_BEHAVIOURS (a daemon runs for days: hashes, not key tuples, and a cap)
        self._behaviours: set = set()
        self.upstream_table = upstream.load_tables(list(config.upstream_tables))
        import torch  # the version keys upstream table entries (fixed_in)
        self._torch_version = torch.__version__
        self._case_oracles = worker_oracles(config.oracles)

        # -- what it drives, each part on its own (issue 39) --
        self._listeners = Listeners(self.listeners, self.stats, lock=self._lock)   # events, harness errors
        self._health = OpHealth()   # the set-aside rule
        # When it stops (run() sets its start): the budget, --max-cases, --max-findings.
        self.budget = Budget(config.budget_s, max_cases=config.max_cases, max_findings=config.max_findings,
                             stop=stop, enough=enough, interrupts=self._interrupts)
        # Which op's slice runs next, and how large.
        sizer = SliceSizer(fixed=config.slice_examples, budget_s=config.budget_s)
        self._limits = Limits(config.max_rank, config.max_side, config.max_numel, config.allow_variants,
                              config.slice_examples or sizer.most, config.siblings)
        self.scheduler = make_scheduler(config.schedule, config.ops, seed=self.seed, state=config.scheduler_state)
        self._plan = SlicePlan(config.ops, self.scheduler, sizer, self._limits, stats=self.stats, budget=self.budget)
        # What each case the worker ran comes to (its failures, counts and events).
        process_oracles = [o for o in config.oracles if all_oracles()[o].stage == "process"]
        self._outcomes = CaseOutcomes(self.stats, emit=self.emit, harness_error=self.harness_error, lock=self._lock,
                                      process_oracles=process_oracles)
        # The findings found (the corpus's, this run's, those in triage), their sightings
        # and the failures held meanwhile: what decides whether a failure is new.
        self.known = KnownFindings((FoundBug.of(f) for _, f in loaded), lock=self._lock,
                                   on_error=lambda case, exc: self.harness_error("judge", case.op, case, exc))
        self._notes = LayoutNotes(self.corpus, lock=self._lock)
        # Failures handed to triage, on disk until recorded; what an earlier run left.
        self._pending_failures = PendingFailures(config.corpus_dir, config.leftovers)
        # Triaged failures filed: stored, their scripts run, counted and reported.
        self._filing = Filing(self.corpus, self.known, self.stats, seen_files=(path.name for path, _ in loaded),
                              lock=self._lock, emit=self.emit, harness_error=self.harness_error, spent=self._spent,
                              credit=self._credit_finding, check_abandoned=self._check_abandoned,
                              upstream_entry=self._upstream_entry, confirm=confirm)
        # Earlier findings' scripts run again, and the desk's jobs at the run's end.
        self._reverifications = Reverifications(
            self.corpus, self.stats, target_spec=config.target_spec, share=config.leftovers, confirm=confirm,
            spent=self._spent, harness_error=self.harness_error, check_abandoned=self._check_abandoned, lock=self._lock)
        self._desk_end = DeskEnd(known=self.known, pending=self._pending_failures, stats=self.stats,
                                 abandoned=self._abandoned, emit=self.emit, record_untriaged=self._recorded_untriaged,
                                 reverify_left=self._reverifications.left, lock=self._lock)

    # The slice state of the calling thread (_SliceState).
    _memo = _per_thread("memo")
    _pending = _per_thread("pending")
    _shrink_started = _per_thread("shrink_started")
    _replaying = _per_thread("replaying")

    # The known findings' state, by the names it had here.
    found = property(lambda self: self.known.found)
    _sightings = property(lambda self: self.known.sightings)
    _held = property(lambda self: self.known.held)
    # When the budget started (time.monotonic()).
    _start = property(lambda self: self.budget.start, lambda self, value: setattr(self.budget, "start", value))
    # The findings this campaign filed: (finding without bulk, path, new).
    recorded = property(lambda self: self._filing.recorded)

    def emit(self, event) -> None:
        """Hand ``event`` to every listener (Listeners: one that raises is a harness error)."""
        self._listeners.emit(event)

    def harness_error(self, stage: str, op: str | None, case, exc: BaseException | None = None, *,
                      error: str = "", trace: str = "") -> None:
        """Count and report a failure of mpsfuzz itself on one case; the campaign goes on."""
        self._listeners.harness_error(stage, op, case, exc, error=error, trace=trace)

    def _spent(self, stage: str, seconds: float) -> None:
        """Add ``seconds`` to the time split's ``stage`` (Stats.time_split)."""
        with self._lock:
            add_time(self.stats, stage, seconds)

    def _case_outcome(self, op: str, ok: bool, last_error: str = "") -> None:
        """One case of ``op`` attempted: ``ok`` unless it was lost to a harness error.
        An op that keeps failing is set aside for the rest of the run."""
        why = self._health.outcome(op, ok, set_aside=op in self.stats.set_aside)
        if why is not None:
            self._set_aside(op, why, last_error)

    def _set_aside(self, op: str, why: str, last_error: str = "") -> None:
        self.stats.set_aside[op] = why
        self.emit(Notice(f"{op}: set aside for the rest of the run: {why}"
                         f"{' (last: ' + last_error + ')' if last_error else ''}; "
                         "each case and traceback is in the errors log"))

    # -- budget ---------------------------------------------------------------------------
    def _past_budget(self) -> bool:
        return self.budget.past()

    def _out_of_budget(self) -> str | None:
        return self.budget.out(cases=self.stats.cases, failing=self.stats.failing, triage_due=self._triage_due,
                               in_triage=lambda: self._desk.pending if self._desk is not None else 0)

    def _triage_due(self) -> bool:
        """Whether the rest of the budget goes to the desk: in its last tenth, while the
        desk holds a failure of the target's in an op with no finding yet. A bug met late
        is then filed rather than left pending (issue 30, H200: nearest-exact's real
        gradient bug, met at 369 s of 420, was still waiting at the end)."""
        return self._desk is not None and self.budget.in_reserve() and self._desk.holds(self._first_rank)

    def _first_rank(self, job) -> bool:
        """The desk's first rank, quick or slow: a target failure of an op with no finding."""
        return first_rank(self._triage_priority(job))

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
        return self._outcomes.failures(case, outcome, fuzzing=fuzzing,
                                       shrinking=bool(self._shrink_started) or not fuzzing)

    def _test_body(self, pool: WorkerPool, prepared: Slice):
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
            if verdict == NEW:
                key = (case.op, failure.oracle, failure.kind)
                if self._slice.only is not None and key != self._slice.only:
                    # The desk shrinks one failure a job: another is its own job, once,
                    # handed over when this replay ends (issue 30, two H200 runs: SDPA's
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
                elif verdict == SIGHTING:
                    self.known.sight(signature)
        return verdicts

    def _verdicts(self, case, failures: list[Failure], pool: WorkerPool) -> list[tuple]:
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
                    if not self._replaying:
                        self._note(case, failure)
                    verdicts.append(("noted", failure, None))
                    continue
                if self._suppressed(case, failure, pool):
                    verdicts.append(("suppressed", failure, None))
                    continue
                verdict, signature = self.known.classify(case, failure, besides=self._slice.holder)
                verdicts.append((verdict, failure, signature))
            except CorpusWriteError:
                raise
            except Exception as exc:
                self.harness_error("judge", case.op, case, exc)
        return verdicts

    def _note(self, case, failure: Failure) -> None:
        """Count a layout-propagation sighting (LayoutNotes); one line on the console per op."""
        with self._lock:
            self.stats.layout_notes += 1
        entry = self._notes.note(case, failure, self._target_name or self.target_name, self._device)
        if entry is not None:
            self.emit(Notice(f"{case.op}: {entry['target_format']} where eager CPU returns {entry['cpu_format']} "
                             f"({', '.join(entry['layouts'])} input): layout propagation, noted, not a bug"))

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
    def _prepare(self, draft: Draft) -> Slice | None:
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
        return Slice(op, draft.seed, list(draft.cases), draft.seconds, draft.limits or self._limits)

    def _next_draft(self, slices) -> Draft:
        """The next slice's draft: drawn now, or the oldest a drafter drew ahead (it is
        then asked for the ones after, so that it keeps drawing while we judge)."""
        if self._drafter is None:
            op, round_no, limits = next(slices)
            return draw_slice(op, round_no, self.seed, limits)
        while len(self._drafter) <= self.config.draw_jobs:
            self._drafter.ahead(*next(slices))
        return self._drafter.take()

    def _hypothesis(self, prepared: Slice, body, *, phases):
        limits = prepared.limits
        return slice_test(strategy_for(prepared.op, limits), prepared.seed, limits.examples,
                          body, phases=phases, siblings=limits.siblings)

    def _finish(self, sent: InWorker, pool: WorkerPool, *, shrink: bool = True,
                in_flight: InWorker | None = None) -> None:
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
            failed = [(case, v) for case, vs in self._memo.items() for v in vs if v[0] == NEW]
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

    def _hand_to_shrink(self, prepared: Slice, failed: list, pool: WorkerPool) -> None:
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
        """A desk's order (desk_jobs.desk_order): the target's failures of an op with no
        finding first."""
        return desk_order(job, self.known.has_finding_of)

    def _hand_over_met(self, met: dict) -> None:
        """The failures a desk replay met besides the one it shrank, each handed to the
        desk as a job of its own unless a finding (or one in triage) covers it."""
        for (op, oracle, kind), (case, failure, signature) in met.items():
            if self.known.covering_or_none(case, failure) is not None:
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
            covering = self.known.covering_or_none(case, failure)
            if covering is None:
                self._record_safely(_error_type(case.op, failure.oracle, failure.kind)(case, failure, signature),
                                    pool, flaky=False)
            elif covering.provisional:   # the replay handed a failure of this symptom to triage
                self.known.hold(covering, case, failure)

    def _slice_done(self, prepared: Slice, outcomes: list, seconds: float) -> None:
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
        return self.budget.reaches_max_findings(self.stats.failing + in_triage + len(signatures))

    def _collect(self, sent: InWorker, pool: WorkerPool, *, give_up: bool = False) -> list:
        """One outcome per case of ``sent`` (batches.collect): fewer once past the budget,
        or at once where ``give_up``."""
        return collect(sent, pool, give_up=(lambda: True) if give_up else self._past_budget)

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
        holder = self.known.open_holder(err.case, err.failure)
        self._desk.submit(Job(err, flaky, holder, pending))

    def _keep_pending(self, err: FindingError, flaky: bool) -> Path | None:
        return self._pending_failures.keep(err, flaky)

    def _resume_pending(self) -> None:
        """Hand to triage the failures an earlier campaign left pending (killed, or
        stopped before triaging them), this campaign's part of them; one that a finding
        covers now is a sighting at once, not a job (issue 37: a run spent its budget
        triaging repeats of bugs it had filed). An unreadable file is moved aside, never
        lost."""
        taken = seen = 0
        for left in self._pending_failures.earlier(self._pending_before,
                                                   lambda exc: self.harness_error("record", None, None, exc)):
            if self.known.sighting(left.case, left.failure) is not None:
                seen += 1
                remove(left.path)
                continue
            err = _error_type(left.case.op, left.failure.oracle, left.failure.kind)(left.case, left.failure,
                                                                                   left.signature)
            self._hand_to_desk(err, left.flaky, left.path)
            taken += 1
        if taken or seen:
            self.emit(Notice(f"an earlier run left {taken + seen} failure(s) in {self._pending_failures.dir}: "
                             f"{seen} sighting(s) of findings, {taken} to triage"))

    def _queue_reverifications(self) -> None:
        """Hand the desk, at its lowest rank, this campaign's part of the findings on this
        target whose repro scripts an earlier run left unverified (Reverifications)."""
        if self.config.reverify and self.confirm is not None:
            self._reverifications.queue(self._desk.submit)

    def _triaged(self, job, pool: WorkerPool, *, triage_it: bool = True) -> None:
        """The desk's handler: record the job's failure, then retire its placeholder
        (the sightings it collected meanwhile go to the finding it became); or run an
        unverified finding's script again."""
        if isinstance(job, Reverification):
            if triage_it:
                self._reverifications.run(job)
            return
        err, flaky, holder, pending = job
        self._slice.pressed = self._desk is not None and self._desk.queued(self._first_rank) > 0
        try:
            if err.to_shrink is not None and self.known.covering_or_none(err.case, err.failure,
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
        remove(pending)
        held = self.known.retire(holder, signature)
        self._judge_held(held, signature, pool, triage_it=triage_it)

    def _judge_held(self, held: dict, signature: str | None, pool: WorkerPool | None, *, triage_it: bool) -> None:
        """Judge the failures a holder held against the findings as they are now: a
        sighting of the finding that covers it, else a failure of its own, recorded (on
        the desk's thread: triaged now) or, where triage was abandoned or --max-findings
        reached, kept pending for the next campaign on the corpus rather than stored
        unexplained."""
        kept = 0
        for case, failure, count in held.values():
            covering = self.known.covering_or_none(case, failure, settled=True)
            err = None if covering is not None else \
                _error_type(case.op, failure.oracle, failure.kind)(case, failure, signature_of(case, failure))
            if err is not None and self._abandoned.is_set():
                kept += self._keep_pending(err, False) is not None   # past the stop grace
                continue
            if err is not None and (not triage_it or self.budget.enough_findings(self.stats.failing)):
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
                self.known.sight(became, count)
        if kept:
            with self._lock:
                self.stats.left_pending += kept
            if self._abandoned.is_set():
                return   # (past the stop grace: the summary may be out; the files say it)
            self.emit(Notice(f"{kept} failure(s) of another trigger than the finding that held them "
                             f"left for triage in {self._pending_failures.dir}: the next run on this corpus "
                             "triages them"))

    def _recorded_untriaged(self, job) -> None:
        """An abandoned or failed triage job: its shrunk case is recorded as it is."""
        self._triaged(job, None, triage_it=False)

    def _record(self, err: FindingError, pool: WorkerPool | None, *, flaky: bool, triage_it: bool = True) -> str | None:
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
            self._filing.refresh()   # what other campaigns on this corpus recorded meanwhile
            # Reduced, it may meet an earlier finding's conditions (the reducer moved it
            # to that finding's dtype, say): a sighting of that bug.
            covering = None if result_flaky else self.known.sighting(case, failure)
            if covering is not None:
                return covering
            path, new, finding = self._filing.store(case, failure, result, explanation, result_flaky)
        return self._filing.confirmed(finding, path, new, result)

    def _credit_finding(self, op: str) -> None:
        try:
            self.scheduler.record(op, cases=0, seconds=0.0, new_findings=1, new_behaviours=0)
        except (KeyError, ValueError):
            pass  # a pending failure of an op this campaign does not schedule

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
                              max_rss_mb=self.config.max_worker_rss_mb, give_up=self._past_budget,
                              settings=self.settings)
        except WorkerStartAbandoned:
            return self._ended_before_its_worker_started()
        with pool, self._interrupts:
            self._device, self._target_name = pool.device, pool.target_name
            self._filing.identify(pool.target_name, self.config.target_spec, pool.device)
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
                    self._notes.flush(self._target_name or self.target_name, self._device)
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
                          execute=judge_case, role=role, settings=self.settings)

    _slow_job = staticmethod(is_slow)   # (desk_jobs.is_slow: a crash, hang or device fault)

    def _close_desk(self, stopped: str) -> str:
        """Let the desk finish the failures handed to it, or leave them pending (DeskEnd)."""
        try:
            return self._desk_end.close(self._desk, stopped, budgeted=self.config.budget_s is not None,
                                        defer_on_stop=self.config.defer_on_stop, grace_left=self.budget.grace_left)
        finally:
            self._desk = None

    def _defer_triage(self) -> None:
        """Give up the desk's jobs, left in triage-pending/ (DeskEnd.defer)."""
        self._desk_end.defer(self._desk)

    def _check_abandoned(self) -> None:
        if self._abandoned.is_set():
            raise _Abandoned()

    def _fuzz(self, pool: WorkerPool) -> None:
        """Run slices until the budget says stop, in a pipeline: the next slice's cases
        are drawn while the worker runs the previous slice's batch, sent to queue behind
        it, and a slice's outcomes are judged while the worker runs the next one (the
        worker never waits for the driver while the drawing keeps up)."""
        running = None          # the InWorker in the worker
        finishing = None        # collected, not yet judged
        slices = self._plan.slices()
        self._drafter = Drafter(self.config.draw_jobs, self.seed, self.settings) if self.config.draw_jobs else None
        try:
            while True:
                op = None
                if self._desk_error is not None:
                    raise self._desk_error
                if self.config.shared_corpus and time.monotonic() - self._filing.refreshed > REFRESH_S:
                    self._filing.refresh()   # stop shrinking what another lane found
                if (reason := self._out_of_budget()):
                    raise BudgetExhausted(reason)
                try:
                    draft = self._next_draft(slices)
                    op = draft.op
                    prepared = self._prepare(draft)
                    if prepared is not None:
                        in_worker = len(running.slice.cases) if running is not None else 0
                        prepared.cases = prepared.cases[:self._plan.cases_left(in_worker)]
                    finishing, running = running, None
                    # Sent before the last batch is collected: it queues behind that
                    # one in the worker, which goes from one to the next without
                    # waiting for the driver to read, write the in-flight file and send.
                    if prepared is not None and prepared.cases:
                        running = submit(prepared, pool, self._case_oracles)
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

    def _flush_sightings(self) -> None:
        self.stats.sightings = sum(self.known.sightings.values())
        try:
            self.corpus.add_sightings(self.known.sightings)
        except CorpusWriteError:
            raise
        except Exception as exc:
            self.harness_error("record", None, None, exc)
