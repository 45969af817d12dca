"""``mpsfuzz daemon``: fuzz unattended until stopped, and survive being stopped.

The daemon is a campaign (engine.py, or lanes.py for --jobs N) run with the yield
scheduler, plus a keeper that holds what must outlive the process, under the corpus:

- ``daemon/state.json`` (corpus/daemon_state.py): counters, per-family statistics, the
  scheduler's statistics, behaviours seen, the last findings, a heartbeat. Written
  atomically every few seconds, so a SIGKILL loses at most those seconds of counting;
  findings are files of their own and failures waiting for triage wait in
  ``triage-pending/`` (engine.py): neither is ever lost.
- ``daemon/events.jsonl``: the event stream (events_log.py), rotated under a size cap.
- ``report.md`` and ``report.html``: rewritten (atomically) every few minutes, in a
  child process: rendering reads every finding and builds pages that grow with the
  corpus, and the daemon's own memory must stay flat for weeks (freed heap is handed
  back to the system after each round too, where glibc can).

At start it replays the corpus when torch changed since the last replay (regressions and
fixes are tracked per finding). SIGTERM or SIGINT ends it within seconds: the cases in
flight are abandoned, failures not yet triaged stay pending for the next start, the state
is flushed. Old logs are deleted to stay under the disk cap; findings never are.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..atomic import atomic_write_text
from ..corpus.daemon_state import load_state, pid_alive, save_state
from ..corpus.replay import replay_findings
from ..corpus.store import Corpus, load_findings
from ..events import CampaignFinished, CaseFinished, FindingRecorded, HarnessError, Notice, SliceFinished
from ..execution.exit_status import guard_exit_status
from ..generation import catalogue
from .engine import Campaign, CampaignConfig
from .events_log import EventsLog, enforce_disk_cap
from .lanes import ParallelCampaign
from .scheduler import YieldScheduler

STATE_EVERY_S = 10.0
EVENTS_MAX_BYTES = 20 * 2**20


@dataclass
class DaemonConfig:
    campaign: CampaignConfig
    jobs: int = 1
    report_every_s: float = 300.0
    state_every_s: float = STATE_EVERY_S
    max_disk_bytes: int | None = None     # logs are deleted (oldest first) to stay below
    replay: bool = True                   # replay the corpus when torch changed
    verify: bool = True
    verify_timeout_s: float = 60.0
    target_name: str = ""
    device: str = ""
    devices: tuple = ()                   # CUDA devices the lanes take in turn (--devices)


class Keeper:
    """The daemon's listener: keeps the state, the reports and the disk cap up to date
    from the campaign's events (all of them come through here, lanes' included)."""

    def __init__(self, config: DaemonConfig, state, scheduler: YieldScheduler):
        self.config, self.state, self.scheduler = config, state, scheduler
        self.corpus_dir = Path(config.campaign.corpus_dir)
        self._saved = self._reported = self._beat = time.monotonic()
        self._reporter = None    # the process writing the reports, if a round is under way
        self.new_findings = 0
        self._lock = threading.RLock()
        self._families: dict[str, str] = {}

    def _family(self, op: str) -> str:
        if op not in self._families:
            self._families[op] = _family(op)
        return self._families[op]

    def __call__(self, event) -> None:
        with self._lock:
            if isinstance(event, CaseFinished):
                # Every case counts, the shrinker's included (a campaign's own statistics
                # count its fuzzing's: the shrinking runs on its triage desk).
                self.state.cases += 1
                self.state.add_family(self._family(event.op), cases=1)
                if self.state.cases % 64 == 0:
                    self.tick()
                return
            if isinstance(event, SliceFinished):
                fresh = sum(self.state.add_behaviour(key) for key in event.behaviours)
                self._record(event.op, cases=event.cases, seconds=event.seconds, new_behaviours=fresh)
            elif isinstance(event, FindingRecorded) and event.new:
                f = event.finding
                self.state.add_finding(signature=f.signature, op=f.op, oracle=f.oracle, status=f.status)
                if f.status == "new":
                    self.new_findings += 1
                    self.state.findings_new += 1
                    self.state.add_family(self._family(f.op), findings=1)
                    self._record(f.op, new_findings=1)
            elif isinstance(event, HarnessError):
                self.state.harness_errors += 1
            elif isinstance(event, CampaignFinished):
                self.state.restarts += event.stats.restarts
                return
            self.tick()

    def _record(self, op: str, *, cases: int = 0, seconds: float = 0.0, new_findings: int = 0,
                new_behaviours: int = 0) -> None:
        try:
            self.scheduler.record(op, cases=cases, seconds=seconds, new_findings=new_findings,
                                  new_behaviours=new_behaviours)
        except ValueError:
            pass  # an op outside this daemon's selection (a pending failure from another run)

    def tick(self, *, force: bool = False) -> None:
        """Save the state and write the reports when they are due (or now)."""
        now = time.monotonic()
        if force or now - self._saved >= self.config.state_every_s:
            self.save(now)
        if force or now - self._reported >= self.config.report_every_s:
            self._reported = now
            self.write_reports()
            if self.config.max_disk_bytes is not None:
                enforce_disk_cap(self.corpus_dir, self.config.max_disk_bytes)

    def save(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.state.mark_alive(uptime_s=now - self._beat)
        self._beat = self._saved = now
        self.state.scheduler = self.scheduler.to_json()
        save_state(self.corpus_dir, self.state)

    def write_reports(self, *, wait: bool = False) -> None:
        """Write the reports in a child process (see the module docstring); a round still
        writing when the next is due is left to finish. ``wait``: block until written
        (the last round, at the end of a budget); a child that fails raises here then."""
        if self._reporter is not None and self._reporter.is_alive():
            if not wait:
                return
            self._reporter.join(REPORT_TIMEOUT_S)
        self._reporter = _report_context().Process(target=write_reports, args=(str(self.corpus_dir),),
                                                   name="mpsfuzz-reports", daemon=True)
        self._reporter.start()
        guard_exit_status(self._reporter)
        if wait:
            self._reporter.join(REPORT_TIMEOUT_S)
            if self._reporter.exitcode != 0:
                raise RuntimeError(f"the report writer exited with {self._reporter.exitcode}")
        release_freed_memory()


REPORT_TIMEOUT_S = 120.0


def write_reports(corpus_dir: str) -> None:
    """The daemon's markdown and HTML reports of ``corpus_dir`` (atomically)."""
    from ..reports import views
    corpus = Path(corpus_dir)
    found, _ = load_findings([corpus])
    for fmt, name in (("markdown", "report.md"), ("html", "report.html")):
        atomic_write_text(corpus / name, views.render(fmt, found, [corpus]))


def _report_context():
    # forkserver where there is one (the worker pool's: torch already imported), so a
    # round starts in milliseconds; never a plain fork of this threaded process
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def release_freed_memory() -> None:
    """Collect cycles and hand the heap's free pages back to the system (glibc's
    malloc_trim; elsewhere nothing): a long-running process otherwise keeps every peak."""
    import gc
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


def _family(op: str) -> str:
    try:
        return catalogue.get(op).family
    except Exception:
        return "other"


def clear_stale_inflight(corpus_dir: Path, *, finished: int | None = None) -> None:
    """In-flight files of processes that are gone (a killed daemon's), and of process
    ``finished`` (a campaign that has closed its pools): the case it was running is not
    a finding (the process was killed from outside, or its pool given up at the budget
    by a desk thread that wrote the file after), and a stale file would otherwise stay
    forever. Their ``.tmp`` halves too: a SIGKILL between writing one and renaming it
    left ``inflight-PID-triage.tmp`` behind (CI, 2026-11-26)."""
    for path in corpus_dir.glob("inflight-*"):
        if path.suffix not in (".json", ".tmp"):
            continue
        pid = path.name[len("inflight-"):].split(".")[0].split("-")[0]
        if pid.isdigit() and (int(pid) == finished or not pid_alive(int(pid))):
            try:
                path.unlink()
            except OSError:
                pass


class Daemon:
    """Runs the campaign under the keeper; ``run()`` returns its CampaignFinished.
    ``listeners``: the console reporter and logs of the CLI."""

    def __init__(self, config: DaemonConfig, listeners=()):
        self.config = config
        self.listeners = list(listeners)
        self.stop = threading.Event()
        self._campaign = None
        self.signal_name: str | None = None

    def emit(self, event) -> None:
        for listener in self.listeners:
            listener(event)

    def _on_signal(self, signum, _frame) -> None:
        self.signal_name = signal.Signals(signum).name
        self.stop.set()
        campaign = self._campaign
        if isinstance(campaign, ParallelCampaign):
            campaign.stop_soon()   # (its Event's lock may be held by the code interrupted)

    def run(self) -> CampaignFinished:
        cfg = self.config
        corpus_dir = Path(cfg.campaign.corpus_dir)
        Corpus(corpus_dir).check_writable()
        state = load_state(corpus_dir)
        if state.load_warning:
            self.emit(Notice(state.load_warning))
        ops = list(cfg.campaign.ops)
        scheduler_state = state.scheduler if (state.scheduler or {}).get("kind") == "yield" else None
        scheduler = YieldScheduler(ops, seed=cfg.campaign.seed or 0, state=scheduler_state)
        clear_stale_inflight(corpus_dir)
        state.mark_started(workers=cfg.jobs)
        save_state(corpus_dir, state)
        keeper = Keeper(cfg, state, scheduler)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        stopped_status = "stopped"
        try:
            if cfg.replay:
                self._replay_if_torch_changed(state, corpus_dir)
            # (unverified findings' scripts are run again by the campaign's desk, inside
            # its budget: CampaignConfig.reverify)
            campaign_config = replace(cfg.campaign, schedule="yield", scheduler_state=scheduler.to_json(),
                                      defer_on_stop=True, reverify=cfg.verify)
            listeners = [EventsLog(corpus_dir, EVENTS_MAX_BYTES), keeper, *self.listeners]
            if cfg.jobs > 1:
                campaign = ParallelCampaign(campaign_config, listeners, jobs=cfg.jobs, verify=cfg.verify,
                                            verify_timeout_s=cfg.verify_timeout_s, target_name=cfg.target_name,
                                            device=cfg.device, devices=cfg.devices)
            else:
                from ..reports.repro_writer import ReproWriter
                writer = ReproWriter(corpus_dir, verify=cfg.verify, timeout_s=cfg.verify_timeout_s)
                campaign = Campaign(campaign_config, listeners, confirm=writer.confirm, stop=self.stop)
            self._campaign = campaign
            if self.stop.is_set() and isinstance(campaign, ParallelCampaign):
                campaign.stop.set()
            result = campaign.run()
            if self.signal_name == "SIGKILL":  # pragma: no cover - never delivered
                stopped_status = "killed"
            return result
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            state.mark_stopped(stopped_status)
            keeper.save()   # the state first: it is what a restart needs
            # Stopped by a signal, it has seconds to go: the reports written minutes ago
            # stand. (At the end of a --budget, the last ones are written.)
            if self.signal_name is None:
                try:
                    keeper.write_reports(wait=True)
                except Exception as exc:
                    self.emit(Notice(f"could not write the reports: {type(exc).__name__}: {exc}"))

    def _replay_if_torch_changed(self, state, corpus_dir: Path) -> None:
        """Replay every finding once per torch version: after an upgrade, which bugs are
        fixed and which came back (the findings' histories record it)."""
        import torch
        if state.torch_version_replayed == torch.__version__:
            return
        found, _ = load_findings([corpus_dir])
        if found:
            self.emit(Notice(f"torch {torch.__version__} (corpus last replayed on "
                             f"{state.torch_version_replayed or 'none'}): replaying {len(found)} finding(s)"))
            results = replay_findings(found, timeout_s=self.config.campaign.timeout_s,
                                      settings=self.config.campaign.settings)
            counts: dict[str, int] = {}
            for r in results:
                counts[r.status] = counts.get(r.status, 0) + 1
            self.emit(Notice("replay: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))))
        state.torch_version_replayed = torch.__version__
        save_state(corpus_dir, state)
