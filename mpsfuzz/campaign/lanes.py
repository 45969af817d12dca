"""``run --jobs N``: N fuzzing lanes on one corpus, one process each.

A lane is a whole campaign (engine.py): its own Hypothesis, its own worker, its own
triage desk, a seed and an op order of its own, so lanes draw different cases. Hypothesis
generation is Python and needs a core of its own, which is why lanes are processes and
not threads. They share the corpus: a lane decides whether a failure is new under the
corpus's record lock and after reading what the other lanes recorded, so one bug is one
finding whichever lane met it first, and lanes pick up each other's findings every few
seconds so they stop shrinking a bug another lane already has.

The coordinator (this process) relays the lanes' events to the listeners (console, logs,
reports: they live here), stops every lane when --max-cases or --max-findings is reached,
and merges the lanes' statistics into one CampaignFinished. A Ctrl-C reaches the lanes
too (one process group); each records what it has and reports back.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from dataclasses import fields, replace

from ..events import CampaignFinished, CampaignStarted, CaseFinished, FindingRecorded, HarnessError, Notice, Stats
from ..execution.exit_status import guard_exit_status
from ..execution.worker import limit_threads
from ..generation.settings import install as install_settings
from . import reaper
from .engine import Campaign, CampaignConfig, count_finding, stop_grace_s
from .interrupts import InterruptLatch, relay_to
from .known_findings import fails_the_run

# How long the coordinator waits for lanes told to stop now (SIGTERM) before killing
# them: the daemon exits within 10 s. (Lanes told they have enough finish their triage.)
STOP_GRACE_S = 5.0
# With a budget, how long after the lanes' stop grace (engine.stop_grace_s) the
# coordinator waits for their results before killing them: a lane has closed its
# workers and written what it kept pending by then.
LANE_REPORT_S = 5.0
# How often the coordinator notes each lane's processes (reaper.py: to kill them even
# once the lane died and they were re-parented).
FAMILY_EVERY_S = 2.0
# A lane whose coordinator died (SIGKILL, the OOM killer) has this long to stop as told
# before it kills its processes and exits (_watch_parent), with this status.
ORPHAN_GRACE_S = 8.0
EXIT_ORPHANED = 75


def default_jobs() -> int:
    """One lane per two cores, at least one: a lane keeps two busy (its Hypothesis
    process draws the next slice while its worker runs the last one)."""
    return max(1, (os.cpu_count() or 2) // 2)


# Where lanes have two cores each on a machine of at least this many, each still gets two
# drafters, and a lane with more cores up to MAX_DRAFTERS (see default_draw_jobs).
MANY_CORES = 8
MAX_DRAFTERS = 4


def default_draw_jobs(jobs: int) -> int:
    """Drafter processes per lane (drafts.py): the cores each of ``jobs`` lanes has beyond
    its driver and worker, at most 2, or MAX_DRAFTERS on a machine of MANY_CORES.

    On a machine of MANY_CORES or more, a lane of two cores gets two drafters too, more
    processes than cores: drawing a case costs about twice judging it, so a lane drawing
    in its driver leaves its worker idle half the time, and the drafters fill those
    cores. Measured on a 16-core machine, 8 lanes on elementwise ops: 2,700 and 2,910
    cases/s without drafters, 3,530 and 3,894 with two each (runs taking turns). A lane
    with cores to spare there takes up to MAX_DRAFTERS: with two, the worker of one lane
    (elementwise) still waited a fifth of its time for its next slice (0.27 ms a case
    between batches, 0.94 judging). On a 2-core machine one drafter for the one lane
    changed nothing (512 and 518 against 494 and 514 cases/s), so small machines keep
    none."""
    cores = os.cpu_count() or 2
    per_lane = cores // max(1, jobs)
    if cores >= MANY_CORES and per_lane >= 2:
        return max(2, min(MAX_DRAFTERS, per_lane - 2))
    return max(0, min(2, per_lane - 2))


# Drawing a case costs Hypothesis a little over twice what judging it costs the worker
# (1.3-2.2 ms against 0.6-0.9 ms on elementwise ops; on the 16-core GPU host 2 ms
# against 0.9). At 2.0, four lanes there (two drafters each) got no sibling and ran at
# 0.68 of four times one lane on elementwise ops.
DRAW_OVER_JUDGE = 2.2
MAX_SIBLINGS = 3


def default_siblings(jobs: int, draw_jobs: int, *, budget_s: float | None, max_cases: int | None) -> int:
    """Siblings per drawn case (strategies.siblings: the skeleton dressed again by a
    PRNG, 0.03 ms against ~1.3 ms for a draw): as many as it takes for the cores that
    draw a lane's cases to keep its worker busy, so that siblings are mostly cases the
    worker would otherwise not have run rather than cases taken from fresh draws. A lane
    draws with its ``draw_jobs`` drafters (or its driver, where there are none) on the
    cores it has beside its worker. Where cores are short, judging siblings takes some
    CPU from drawing: on a 2-core machine (one lane, elementwise) two siblings took the
    cases run from 643 to 1,207 a second and the skeletons drawn from 608 to 360.

    At least one otherwise, where drawing alone would keep up: boundary siblings
    (strategies.boundary_sibling) come only as a draw's last sibling, and the classes they
    reach (an empty input, mixed dtypes, an argument at an extreme, a NaN entry in a
    matrix) are drawn by nothing else (issue 38: three lanes with drafters to spare on 16
    cores drew 4,376 cases of ``linalg.det`` and no NaN entry among them, where ten lanes
    drew one in 102).

    0 for a campaign bounded by cases alone (``--max-cases``, no budget): its user
    counts effort in cases, and siblings would spend them on fewer skeletons (a fault
    that needs a shape or an argument was found in fewer of its cases)."""
    if max_cases is not None and budget_s is None:
        return 0
    cores = os.cpu_count() or 2
    drawing = max(0.25, min(max(draw_jobs, 1), cores / max(1, jobs) - 1))
    return max(1, min(MAX_SIBLINGS, math.ceil(DRAW_OVER_JUDGE / drawing - 1e-9) - 1))


def _lane_config(config: CampaignConfig, index: int, jobs: int) -> CampaignConfig:
    """Lane ``index``'s share: its own seed, the ops rotated so lanes start apart, and
    its part of --max-cases (--max-findings is counted by the coordinator)."""
    ops = list(config.ops)
    start = (index * len(ops)) // jobs if ops else 0
    max_cases = None
    if config.max_cases is not None:
        max_cases = config.max_cases // jobs + (1 if index < config.max_cases % jobs else 0)
    return replace(config, ops=ops[start:] + ops[:start], seed=config.seed + index, max_cases=max_cases,
                   max_findings=None, shared_corpus=True,
                   # each lane takes up its part of what an earlier run left
                   leftovers=None if config.leftovers is None else (index, jobs),
                   # stopped (SIGTERM, its coordinator gone), a lane leaves its failures
                   # pending for the next run rather than triaging them unwatched
                   defer_on_stop=True)


class _Forward:
    """A lane's listener: its events, as the coordinator needs them, on the queue."""

    def __init__(self, index: int, events, stop):
        self.index, self.events, self.stop = index, events, stop
        self._cases: list = []
        self._sent = time.monotonic()

    def __call__(self, event) -> None:
        if isinstance(event, (CampaignStarted, CampaignFinished)):
            return  # the coordinator reports the campaign as a whole
        if isinstance(event, CaseFinished):
            # Cases go in bundles: one message per case would cost more than the case.
            self._cases.append(event)
            if len(self._cases) >= 32 or time.monotonic() - self._sent > 0.5:
                self.flush()
            return
        self.flush()
        self.events.put(("event", self.index, event))

    def flush(self) -> None:
        if self._cases:
            self.events.put(("cases", self.index, self._cases))
            self._cases = []
        self._sent = time.monotonic()


def _watch_parent(stop) -> None:
    """Stop the lane if the coordinator dies (SIGKILL): a lane never fuzzes on alone.

    It is told to stop as SIGTERM would (what it kept pending goes to disk), and given
    ORPHAN_GRACE_S for it; past that it kills its processes and exits, whatever it was
    doing. A lane still starting (its imports, its worker's) only looks at ``stop`` once
    its campaign runs: under a loaded CI machine one took over 30 s to go. And the
    coordinator may have died holding the stop event's lock, so ``stop.set()`` itself
    could wait for ever: the deadline is armed before it."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def exit_orphaned():
        time.sleep(ORPHAN_GRACE_S)
        reaper.kill_all(reaper.descendants(), timeout=2.0)
        os._exit(EXIT_ORPHANED)

    def watch():
        parent.join()
        threading.Thread(target=exit_orphaned, name="mpsfuzz-orphan-deadline", daemon=True).start()
        stop.set()
    threading.Thread(target=watch, name="mpsfuzz-parent-watch", daemon=True).start()


def lane_environment(index: int, devices: tuple[str, ...]) -> dict[str, str]:
    """The variables lane ``index`` sets before anything touches a device: with
    ``--devices 0,1`` lanes take the GPUs in turn (CUDA_VISIBLE_DEVICES, which its
    workers inherit); without, every lane shares the one device (MPS has only one)."""
    if not devices:
        return {}
    return {"CUDA_VISIBLE_DEVICES": devices[index % len(devices)]}


def _lane_main(index: int, config: CampaignConfig, verify: bool, verify_timeout_s: float, events, stop,
               enough, environment: dict | None = None) -> None:
    """A lane process: one campaign, its events forwarded, its result sent back. It
    installs the campaign's GenerationSettings (``config.settings``) first."""
    os.environ.update(environment or {})   # before any CUDA call: it reads them once
    install_settings(config.settings)
    limit_threads()
    forward = _Forward(index, events, stop)
    _watch_parent(stop)
    # A SIGTERM to the process group (coreutils' timeout sends one) stops the lane as
    # the daemon's stops it: within seconds, its result reported, nothing lost; a lane
    # dying of it would take its statistics along and leave its workers running.
    stop_soon = relay_to(stop)
    signal.signal(signal.SIGTERM, lambda *_: stop_soon())
    try:
        from ..execution.targets import load_target
        from ..reports.repro_writer import ReproWriter
        try:  # a target module may register oracles of its own (as the CLI's load does)
            load_target(config.target_spec)
        except Exception:
            pass
        writer = ReproWriter(config.corpus_dir, verify=verify, timeout_s=verify_timeout_s)
        campaign = Campaign(config, [forward], confirm=writer.confirm, stop=stop, enough=enough)
        result = campaign.run()
        # Its processes (forkserver, a triage job's repro script still running...) go
        # now: the lane exits at once instead of waiting for them at its exit.
        reaper.kill_all(reaper.descendants(), timeout=2.0)
        forward.flush()
        events.put(("finished", index, result.stats, [(f, p, n) for f, p, n in result.findings],
                    result.stopped_because, (campaign.target_name, campaign.device)))
    except BaseException as exc:  # noqa: BLE001 - the coordinator must hear of it
        forward.flush()
        events.put(("failed", index, f"{type(exc).__name__}: {exc}", traceback.format_exc()))


def merge_stats(parts: list[Stats]) -> Stats:
    """The lanes' statistics as one campaign's: counts summed, per-op and per-message
    tables summed, set-aside ops joined, elapsed time the longest lane's."""
    total = Stats()
    for part in parts:
        for f in fields(Stats):
            mine, theirs = getattr(total, f.name), getattr(part, f.name)
            if f.name == "elapsed_s":
                total.elapsed_s = max(mine, theirs)
            elif isinstance(theirs, (int, float)):
                setattr(total, f.name, mine + theirs)
            elif f.name == "per_op":
                for op, (cases, valid) in theirs.items():
                    row = mine.setdefault(op, [0, 0])
                    row[0] += cases
                    row[1] += valid
            elif f.name == "set_aside":
                mine.update(theirs)
            elif isinstance(theirs, dict):
                for key, count in theirs.items():
                    mine[key] = mine.get(key, 0) + count
    return total


class ParallelCampaign:
    """``jobs`` lanes (processes) fuzzing one corpus; ``run()`` returns one
    CampaignFinished as :class:`Campaign` does. ``verify``/``verify_timeout_s``: each
    lane verifies its new findings' repro scripts (a ReproWriter of its own)."""

    def __init__(self, config: CampaignConfig, listeners=(), *, jobs: int, verify: bool = True,
                 verify_timeout_s: float = 60.0, target_name: str = "", device: str = "",
                 devices: tuple[str, ...] = ()):
        if jobs < 1:
            raise ValueError(f"jobs={jobs}: must be at least 1")
        self.devices = tuple(devices)
        self.config, self.listeners, self.jobs = config, list(listeners), jobs
        self.verify, self.verify_timeout_s = verify, verify_timeout_s
        self.target_name, self.device = target_name, device
        self.seed = config.seed if config.seed is not None else int.from_bytes(os.urandom(4), "little") >> 1
        self._ctx = multiprocessing.get_context("spawn")   # a clean interpreter: lanes start their own workers
        # Set (the daemon's SIGTERM), every lane stops now; ``enough``: --max-findings reached.
        self.stop = self._ctx.Event()
        self.enough = self._ctx.Event()
        self.stop_soon = relay_to(self.stop)   # for a signal handler (the daemon's)

    def emit(self, event) -> None:
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                if isinstance(event, HarnessError):
                    continue
                raise

    def run(self) -> CampaignFinished:
        ctx, stop, enough = self._ctx, self.stop, self.enough
        events = ctx.Queue()
        # The lanes' budget counts from here, not from each lane's start (spawning a
        # lane and importing torch take seconds): --budget is the coordinator's.
        started = self.config.started_at if self.config.started_at is not None else time.monotonic()
        config = replace(self.config, seed=self.seed, started_at=started, pending_before=time.time())
        # With a budget, the lanes are done within their stop grace; past it and
        # LANE_REPORT_S more, a lane that has not reported is killed.
        give_up_at = None if config.budget_s is None else (
            started + config.budget_s + stop_grace_s(config.budget_s) + LANE_REPORT_S)
        lanes = [ctx.Process(target=_lane_main, name=f"mpsfuzz-lane-{i}",
                             args=(i, _lane_config(config, i, self.jobs), self.verify, self.verify_timeout_s,
                                   events, stop, enough, lane_environment(i, self.devices)))
                 for i in range(self.jobs)]
        self.emit(CampaignStarted(self.target_name, config.target_spec, self.device, tuple(config.ops),
                                  config.oracles, self.seed, config.budget_s, config.max_cases))
        for lane in lanes:
            lane.start()
            guard_exit_status(lane)
        families: dict[int, set] = {i: set() for i in range(self.jobs)}   # processes seen below each lane
        noted = 0.0
        results: dict[int, tuple] = {}
        relayed: dict[int, Stats] = {}   # per lane, from its events: for a lane that never reported
        relayed_findings: dict[int, list] = {}
        failures: list[str] = []
        new_findings = 0
        interrupted = False
        stop_asked = None
        with InterruptLatch() as latch:
            while len(results) + len(failures) < self.jobs:
                try:
                    latch.check()   # a Ctrl-C that Python dropped where it was raised
                    if time.monotonic() - noted > FAMILY_EVERY_S:
                        noted = time.monotonic()
                        for i, lane in enumerate(lanes):
                            if lane.is_alive():
                                families[i].update(reaper.descendants(lane.pid))
                    try:
                        kind, index, *payload = events.get(timeout=0.5)
                    except queue.Empty:
                        dead = [i for i, lane in enumerate(lanes)
                                if not lane.is_alive() and i not in results and lane.exitcode not in (None,)]
                        for i in dead:
                            if not any(f.startswith(f"lane {i}:") for f in failures):
                                failures.append(f"lane {i}: exited ({lanes[i].exitcode}) without a result")
                                # what it left running (a hung worker) goes with it
                                reaper.kill_all(families[i], timeout=0)
                        if stop.is_set() and stop_asked is None:
                            stop_asked = time.monotonic()
                        if stop.is_set() and time.monotonic() - stop_asked > STOP_GRACE_S:
                            break
                        if give_up_at is not None and time.monotonic() > give_up_at:
                            break
                        continue
                    if kind == "cases":
                        seen = relayed.setdefault(index, Stats())
                        for event in payload[0]:
                            seen.cases += 1
                            seen.valid += event.valid
                            seen.unsupported += event.unsupported
                            self.emit(event)
                    elif kind == "event":
                        event = payload[0]
                        if isinstance(event, FindingRecorded) and event.new:
                            count_finding(relayed.setdefault(index, Stats()), event.finding.status)
                            relayed_findings.setdefault(index, []).append((event.finding, event.path, event.new))
                        if isinstance(event, FindingRecorded) and event.new \
                                and fails_the_run(event.finding.status):   # (Stats.failing)
                            new_findings += 1
                            if config.max_findings is not None and new_findings >= config.max_findings:
                                enough.set()
                        self.emit(event)
                    elif kind == "finished":
                        results[index] = tuple(payload)
                    elif kind == "failed":
                        failures.append(f"lane {index}: {payload[0]}")
                        self.emit(HarnessError("hypothesis", None, None, payload[0], payload[1]))
                except KeyboardInterrupt:
                    # The lanes got the Ctrl-C too: they record what they have and report.
                    latch.acknowledge()
                    interrupted = True
                    stop.set()
        late = [i for i in range(self.jobs) if i not in results and not any(
            f.startswith(f"lane {i}:") for f in failures)]
        failures += self._end_lanes(lanes, families, results)
        for i in late:
            failures.append(f"lane {i}: did not report within its stop grace; killed")
        # A lane killed before it reported (it outlasted the stop grace) still ran its
        # cases and recorded its findings: they count as the coordinator saw them.
        stats = merge_stats([r[0] for r in results.values()] +
                            [seen for i, seen in relayed.items() if i not in results])
        findings = tuple(f for r in results.values() for f in r[1]) + tuple(
            f for i, found in relayed_findings.items() if i not in results for f in found)
        reasons = {r[2] for r in results.values()}
        stopped = ("interrupted" if interrupted or "interrupted" in reasons else
                   "stopped" if stop.is_set() else
                   "max-findings" if enough.is_set() else ", ".join(sorted(reasons)) or "failed")
        for failure in failures:
            self.emit(Notice(f"{failure}"))
        result = CampaignFinished(stats, findings, stopped)
        self.emit(result)
        return result

    @staticmethod
    def _end_lanes(lanes, families: dict, results: dict) -> list[str]:
        """Every lane and what it started, gone before the summary: a lane that reported
        gets a moment to exit by itself; then whatever is left of each (the lane, its
        workers, those re-parented after it died) is killed. Notes on processes that
        would not die (a process in a driver's uninterruptible teardown)."""
        deadline = time.monotonic() + 2.0
        for i, lane in enumerate(lanes):
            if i in results:
                lane.join(max(0.0, deadline - time.monotonic()))
        notes = []
        for i, lane in enumerate(lanes):
            stuck = reaper.kill_tree(lane.pid if lane.is_alive() else None, also=families[i], timeout=5.0)
            lane.join(1)
            if stuck:
                notes.append(f"lane {i}: process(es) {', '.join(str(p.pid) for p in stuck)} did not die "
                             "within 5s of SIGKILL")
        return notes
