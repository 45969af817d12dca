"""Each campaign's statistics, kept next to the corpus it wrote: an engine listener that
writes ``<corpus>/runs/<UTC timestamp>-<pid>.json`` when the campaign finishes.

`mpsfuzz report` sums these files (cases, valid share, speed, time, targets). They live
in a subfolder because the corpus loader reads top-level ``*.json`` files only, so the
corpus commands never take a run log for a finding. Format: docs/report.md.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from .. import __version__
from ..corpus.store import RUNS, atomic_write_json, corpus_write
from ..events import CampaignFinished, CampaignStarted, Stats, untried_ops

RUNS_DIR = RUNS
RUN_LOG_SCHEMA = "mpsfuzz-run"
RUN_LOG_VERSION = 1


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def run_record(started: CampaignStarted | None, finished: CampaignFinished, *, started_at: float,
               finished_at: float, errors_log: Path | None = None) -> dict:
    s: Stats = finished.stats
    return {
        "schema": RUN_LOG_SCHEMA,
        "version": RUN_LOG_VERSION,
        "target": {"name": started.target_name if started else None,
                   "spec": started.target_spec if started else None,
                   "device": started.device if started else None},
        "ops": list(started.ops) if started else [],
        "oracles": list(started.oracles) if started else [],
        "seed": started.seed if started else None,
        "budget_s": started.budget_s if started else None,
        "max_cases": started.max_cases if started else None,
        "started": _iso(started_at),
        "finished": _iso(finished_at),
        "elapsed_s": round(s.elapsed_s, 3),
        "stopped_because": finished.stopped_because,
        "cases": s.cases,
        "valid": s.valid,
        "unsupported": s.unsupported,
        "unsupported_here": s.unsupported_here,
        "slow_compiles": s.slow_compiles,
        "reference_hangs": s.reference_hangs,
        "restarts": s.restarts,
        "internal_errors": s.harness_errors,     # (the name of version 1): harness errors
        "harness_errors": {"total": s.harness_errors, "by_stage": dict(sorted(s.harness_by_stage.items())),
                           "cases_lost": s.cases_lost, "attempted": s.attempted,
                           "log": str(errors_log) if errors_log is not None and s.harness_errors else None},
        "set_aside": dict(s.set_aside),
        "cases_per_s": round(s.cases_per_s, 3),
        "findings": {"new": s.new_findings, "known": s.known_bugs, "cpu": s.cpu_bugs, "flaky": s.flaky},
        "suppressed": s.suppressed,
        "known_sightings": s.sightings,
        "left_pending": s.left_pending,
        "minimise_s": round(s.minimise_s, 3),
        "time_split": {stage: round(seconds, 3) for stage, seconds in sorted(s.time_split.items())},
        "reverified": dict(sorted(s.reverified.items())),
        "failing_cases": dict(sorted(s.failing_cases.items())),
        "per_op": {op: {"cases": int(c), "valid": int(v)} for op, (c, v) in sorted(s.per_op.items())},
        "untried_ops": untried_ops(started.ops, s) if started else [],
        "torch_version": torch.__version__,
        "mpsfuzz_version": __version__,
    }


class RunLog:
    """Engine listener: remembers how the campaign started, writes the record at the end."""

    def __init__(self, corpus_dir, *, errors_log: Path | None = None):
        self.corpus_dir = Path(corpus_dir)
        self.errors_log = errors_log      # where reports/error_log.py writes this run's errors
        self._started: CampaignStarted | None = None
        self._started_at = time.time()
        self.path: Path | None = None

    def __call__(self, event) -> None:
        if isinstance(event, CampaignStarted):
            self._started, self._started_at = event, time.time()
        elif isinstance(event, CampaignFinished):
            now = time.time()
            record = run_record(self._started, event, started_at=self._started_at, finished_at=now,
                                errors_log=self.errors_log)
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
            path = self.corpus_dir / RUNS_DIR / f"{stamp}-{os.getpid()}.json"
            n = 1
            while path.exists():  # a second campaign of this process within the second
                path = path.with_name(f"{stamp}-{os.getpid()}-{n}.json")
                n += 1
            # A corpus that cannot be written raises CorpusWriteError (the run ends with
            # exit 2, its findings kept); any other failure is a harness error.
            with corpus_write(path):
                path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, record)
            self.path = path
