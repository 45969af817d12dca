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
or held), ``verdicts.py`` (what each failure of a case comes to, remembered for its slice
in the calling thread's ``slice_state.py``), ``budget.py`` (when it stops), ``health.py``
(the set-aside rule), ``listeners.py`` (events and harness errors), ``slice_plan.py`` and
``batches.py`` (which slice runs next, sent and collected), ``outcomes.py`` (what a case
came to), ``layout_notes.py``, ``intake.py`` and ``pending.py`` (what goes to the triage
desk, and triage-pending/), ``desk_jobs.py`` (its jobs and their order),
``desk_handler.py`` (what becomes of a job on the desk's thread), ``replay.py`` (a
slice replayed by Hypothesis to shrink its new failure), ``recorder.py`` and
``filing.py`` (a failure triaged, then filed), ``reverification.py`` and ``desk_end.py``
(the desk's jobs at the run's end); ``finding_errors.py`` holds what a slice's test
body raises.
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..corpus import upstream
from ..corpus.daemon_state import MAX_BEHAVIOURS, behaviour_hash
from ..corpus.store import Corpus, CorpusWriteError
from ..events import CampaignFinished, CampaignStarted, Notice, SliceFinished, Stats
from ..execution.worker import WorkerPool, WorkerStartAbandoned
from ..generation.settings import GenerationSettings
from ..generation.settings import install as install_settings
from ..generation.settings import installed as installed_settings
from ..oracles import DEFAULT as ORACLES_DEFAULT
from ..oracles import Failure, all_oracles, worker_oracles
from ..oracles.judge import judge_case
from ..triage.pipeline import DEFAULT_RERUNS
from .batches import InWorker, Slice, collect, submit
from .behaviour import behaviour_of
from .budget import Budget, BudgetExhausted
from .desk_end import DeskEnd
from .desk_handler import DeskHandler
from .desk_jobs import is_slow
from .drafts import Draft, Drafter, GenerationFailed, Limits, draw_slice, error_line
from .filing import Filing
from .finding_errors import Abandoned, CorpusUnwritable
from .health import OpHealth
from .intake import DeskIntake
from .interrupts import InterruptLatch
from .known_findings import NEW, FoundBug, KnownFindings
from .layout_notes import LayoutNotes
from .listeners import Listeners
from .outcomes import CaseOutcomes, add_time, count_message
from .pending import PendingFailures
from .recorder import Recorder
from .replay import SliceReplay
from .reverification import Reverifications
from .slice_plan import SlicePlan, make_scheduler
from .slice_state import SliceState
from .slicing import SliceSizer
from .triage_desk import TriageDesks
from .verdicts import CaseVerdicts
# Re-exported: the CLI, lanes and tests read these here.
from .budget import STOP_GRACE_MAX_S, overrun_s, stop_grace_s  # noqa: F401
from .filing import count_finding  # noqa: F401
from .finding_errors import FindingError, split_report  # noqa: F401
from .health import SET_ASIDE_STREAK  # noqa: F401
from .outcomes import MAX_MESSAGES, OTHER_MESSAGES  # noqa: F401


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


# How often a campaign sharing its corpus with others (run --jobs) looks for their findings.
REFRESH_S = 5.0


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
        # What judging a slice keeps, the calling thread's (the campaign's, each desk's).
        self._slice = SliceState()
        self._drafter: Drafter | None = None
        # Set once the desk's jobs were given up past the stop grace (_defer_triage): its
        # thread then stores and counts nothing more (see finding_errors.Abandoned).
        self._abandoned = threading.Event()
        # behaviour_hash()es of the behaviour keys seen by this campaign, at most
        # MAX_BEHAVIOURS (a daemon runs for days: hashes, not key tuples, and a cap)
        self._behaviours: set = set()
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
        # What each failure of a case comes to (noted, suppressed, held, a sighting, new).
        import torch  # the version keys upstream table entries (fixed_in)
        self._verdicts = CaseVerdicts(self.known, self._slice, self.stats, self._notes,
                                      upstream.load_tables(list(config.upstream_tables)),
                                      torch_version=torch.__version__, emit=self.emit,
                                      harness_error=self.harness_error, case_outcome=self._case_outcome,
                                      on_desk=self._on_desk, lock=self._lock)
        # Failures handed to triage, on disk until recorded; what an earlier run left.
        self._pending_failures = PendingFailures(config.corpus_dir, config.leftovers)
        # Triaged failures filed: stored, their scripts run, counted and reported.
        self._filing = Filing(self.corpus, self.known, self.stats, seen_files=(path.name for path, _ in loaded),
                              lock=self._lock, emit=self.emit, harness_error=self.harness_error, spent=self._spent,
                              credit=self._credit_finding, check_abandoned=self._check_abandoned,
                              upstream_entry=self._verdicts.upstream_entry, confirm=confirm)
        # A failure triaged and filed; what goes to the desk (or is recorded at once).
        self._recorder = Recorder(self.corpus, self.known, self._filing, self._slice, oracles=config.oracles,
                                  reruns=config.reruns, minimise_budget_s=config.minimise_budget_s,
                                  timeout_s=config.timeout_s, emit=self.emit, spent=self._spent,
                                  harness_error=self.harness_error, check_abandoned=self._check_abandoned)
        self._intake = DeskIntake(self.known, self._pending_failures, record=self._recorder.record, emit=self.emit,
                                  harness_error=self.harness_error)
        # The desk's replay of a slice, shrinking its new failure.
        self._replay = SliceReplay(self._verdicts, self._slice, self.stats, shrink_budget_s=config.shrink_budget_s,
                                   timeout_s=config.timeout_s, failures_of=self._failures_of,
                                   stop_reason=self._stop_reason, generation_failed=self._generation_failed,
                                   harness_error=self.harness_error, case_outcome=self._case_outcome,
                                   hand_over=self._intake.hand_over_met, lock=self._lock)
        # Earlier findings' scripts run again, and the desk's jobs at the run's end.
        self._reverifications = Reverifications(
            self.corpus, self.stats, target_spec=config.target_spec, share=config.leftovers, confirm=confirm,
            spent=self._spent, harness_error=self.harness_error, check_abandoned=self._check_abandoned, lock=self._lock)
        # What becomes of each job on the desk's thread.
        self._handler = DeskHandler(self._intake, self._replay, self.known, self._slice, self._reverifications,
                                    self.stats, self.budget, abandoned=self._abandoned, spent=self._spent,
                                    emit=self.emit, lock=self._lock)
        self._desk_end = DeskEnd(known=self.known, pending=self._pending_failures, stats=self.stats,
                                 abandoned=self._abandoned, emit=self.emit,
                                 record_untriaged=self._handler.recorded_untriaged,
                                 reverify_left=self._reverifications.left, lock=self._lock)

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
                               in_triage=self._intake.in_triage)

    def _triage_due(self) -> bool:
        """Whether the rest of the budget goes to the desk: in its last tenth, while the
        desk holds a failure of the target's in an op with no finding yet. A bug met late
        is then filed rather than left pending (issue 30, H200: nearest-exact's real
        gradient bug, met at 369 s of 420, was still waiting at the end)."""
        desk = self._intake.desk
        return desk is not None and self.budget.in_reserve() and desk.holds(self._intake.first_rank)

    def _out_of_time_to_shrink(self) -> str | None:
        """Why the desk's replay stops shrinking, if it must: told to stop, interrupted,
        or past the budget's end (the stop grace is for triaging what was shrunk), and
        given up (finding_errors.Abandoned). --max-cases and --max-findings bound the
        fuzzing, not the shrinking of what it found (--shrink-budget does)."""
        self._check_abandoned()
        return "budget" if self._past_budget() else None

    def _stop_reason(self) -> str | None:
        """Why no further case may run on the calling thread: the desk's replay's reasons
        on the desk, the campaign's budget elsewhere."""
        return self._out_of_time_to_shrink() if self._on_desk() else self._out_of_budget()

    def _on_desk(self) -> bool:
        return self._intake.on_desk()

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
        """The failures of a case the worker ran (``outcome``: its CaseOutcome, a
        ProcessEvent, or the exception that kept the pool from running it); counts it."""
        self._check_abandoned()   # the desk's replay, its worker killed past the stop grace: no case
        # The cases the desk's replay runs are triage's, as the reducer's are: they are
        # not the campaign's (--max-cases bounds the fuzzing, not the shrinking of what
        # it found), and its listeners see them as shrinking.
        fuzzing = not self._on_desk()
        return self._outcomes.failures(case, outcome, fuzzing=fuzzing,
                                       shrinking=bool(self._slice.shrink_started) or not fuzzing)

    def _generation_failed(self, op: str, failed: GenerationFailed) -> None:
        self.harness_error("generate", op, None, error=failed.error, trace=failed.traceback)
        self._case_outcome(op, False, failed.error)

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

    def _finish(self, sent: InWorker, pool: WorkerPool, *, shrink: bool = True,
                in_flight: InWorker | None = None) -> None:
        """Judge the outcomes of ``sent``'s batch; if a case failed in a new way, the
        slice's Hypothesis test runs again with the same seed: it draws the same cases
        (their verdicts remembered, nothing runs twice), fails where the batch did and
        shrinks from there. That replay is the triage desk's (DeskIntake.hand_to_shrink,
        SliceReplay), on its own thread and worker. Without ``shrink`` (the budget ran
        out) a new failure is recorded as it is, reduced by triage. ``in_flight``: the
        next slice, already in the worker (it runs while this one is judged); given up
        if these failures end the campaign."""
        self._slice.clear()
        prepared = sent.slice
        op = prepared.op
        finishing = time.monotonic()
        try:
            outcomes = self._collect(sent, pool)
            for case, outcome in zip(prepared.cases, outcomes):
                self._verdicts.judged(case, op, lambda c=case, o=outcome: self._outcome_failures(c, o), pool)
            self._slice_done(prepared, outcomes, prepared.seconds + time.monotonic() - finishing)
            failed = [(case, v) for case, vs in self._slice.memo.items() for v in vs if v[0] == NEW]
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
                self._intake.hand_to_shrink(prepared, failed, self._slice.memo, pool)
            else:
                self._intake.record_unshrunk(failed, pool)
        finally:
            self._slice.clear()

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
        in_triage = self._intake.in_triage()
        signatures = {signature for _, (_, _, signature) in failed}
        return self.budget.reaches_max_findings(self.stats.failing + in_triage + len(signatures))

    def _collect(self, sent: InWorker, pool: WorkerPool, *, give_up: bool = False) -> list:
        """One outcome per case of ``sent`` (batches.collect): fewer once past the budget,
        or at once where ``give_up``."""
        return collect(sent, pool, give_up=(lambda: True) if give_up else self._past_budget)

    def _queue_reverifications(self) -> None:
        """Hand the desk, at its lowest rank, this campaign's part of the findings on this
        target whose repro scripts an earlier run left unverified (Reverifications)."""
        if self.config.reverify and self.confirm is not None:
            self._reverifications.queue(self._intake.desk.submit)

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
            self._filing.identify(pool.target_name, self.config.target_spec, pool.device)
            self._verdicts.identify(pool.target_name, pool.device)
            self.device, self.target_name = pool.device, pool.target_name
            self._intake.desk = TriageDesks(self._handler.triaged, self._triage_pool,
                                            fallback=self._handler.recorded_untriaged, priority=self._intake.priority,
                                            slow=is_slow)
            try:
                self.emit(CampaignStarted(pool.target_name, self.config.target_spec, pool.device,
                                          tuple(self.config.ops), self.config.oracles, self.seed,
                                          self.config.budget_s, self.config.max_cases))
                self._intake.resume_pending(self._pending_before)
                self._queue_reverifications()
                self._fuzz(pool)
            except BudgetExhausted as stop:
                stopped = str(stop) or "budget"
            except KeyboardInterrupt:
                self._interrupts.acknowledge()
                stopped = "interrupted"
            except CorpusUnwritable as stop:
                unwritable = stop.error
            except CorpusWriteError as exc:
                unwritable = exc
            finally:
                self.stats.recycled = pool.recycled
                if unwritable is None:
                    stopped = self._close_desk(stopped)
                    unwritable = self._handler.error
                self.stats.elapsed_s = time.monotonic() - self._start
                if unwritable is None:
                    self._flush_sightings()
                    self._notes.flush(self.target_name, self.device)
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

    def _close_desk(self, stopped: str) -> str:
        """Let the desk finish the failures handed to it, or leave them pending (DeskEnd)."""
        try:
            return self._desk_end.close(self._intake.desk, stopped, budgeted=self.config.budget_s is not None,
                                        defer_on_stop=self.config.defer_on_stop, grace_left=self.budget.grace_left)
        finally:
            self._intake.desk = None

    def _defer_triage(self) -> None:
        """Give up the desk's jobs, left in triage-pending/ (DeskEnd.defer)."""
        self._desk_end.defer(self._intake.desk)

    def _check_abandoned(self) -> None:
        if self._abandoned.is_set():
            raise Abandoned()

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
                if self._handler.error is not None:
                    raise self._handler.error
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
                except (CorpusUnwritable, BudgetExhausted, KeyboardInterrupt):
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
