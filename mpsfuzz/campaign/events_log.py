"""The daemon's event log and its disk cap.

:class:`EventsLog` is an engine listener that appends one JSON line per event to
``<corpus>/daemon/events.jsonl`` (``mpsfuzz status`` reads its tail), rotated by size so
that a daemon running for weeks uses bounded disk. Cases are not logged one by one (a
daemon runs millions): they are counted, and a ``progress`` line says how many at most
every ``progress_every_s``.

:func:`enforce_disk_cap` deletes what a corpus can lose, oldest first (run logs, rotated
event logs, worker logs), until the corpus fits a cap. Findings, repro scripts and the
daemon's state are never deleted: a corpus whose findings alone exceed the cap stays
over it.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import os
import time
from pathlib import Path

from ..atomic import corpus_write
from ..corpus.daemon_state import LOGS_DIR, STATE_FILE, daemon_dir, events_path, now_iso
from ..corpus.store import RUNS
from ..events import CampaignFinished, CaseFinished, FindingRecorded, HarnessError

KEEP_ROTATED = 3                 # events.jsonl.1 .. .3 (the .1 newest)
PROGRESS_EVERY_S = 30.0
MAX_FIELD_CHARS = 2000           # a generic event's string fields are cut to this


def _check_positive(name: str, value) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name}={value!r}: expected a number > 0")


def jsonable(value, depth: int = 0):
    """``value`` as JSON: objects with ``to_json`` through it, dataclasses field by
    field, paths and anything else as (cut) strings; never raises."""
    if depth > 6:
        return _cut(repr(value))
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in value]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        try:
            return jsonable(to_json(), depth + 1)
        except Exception:  # a broken to_json must not lose the event
            return _cut(repr(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    return _cut(repr(value))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_FIELD_CHARS else text[:MAX_FIELD_CHARS - 3] + "..."


def event_record(event) -> dict:
    """One event as its log line's object (``type``: the event's class name)."""
    if isinstance(event, FindingRecorded):
        f = event.finding
        body = {"signature": f.signature, "op": f.op, "oracle": f.oracle, "status": f.status,
                "new": event.new, "path": str(event.path)}
    elif isinstance(event, HarnessError):
        # The traceback and case are in the run's errors log (reports/error_log.py).
        body = {"stage": event.stage, "op": event.op, "error": _cut(event.error)}
    elif isinstance(event, CampaignFinished):
        s = event.stats
        body = {"stopped_because": event.stopped_because, "cases": s.cases, "valid": s.valid,
                "new_findings": s.new_findings, "known_bugs": s.known_bugs, "flaky": s.flaky,
                "sightings": s.sightings, "harness_errors": s.harness_errors, "restarts": s.restarts,
                "elapsed_s": round(s.elapsed_s, 3), "cases_per_s": round(s.cases_per_s, 3),
                "findings": len(event.findings), "set_aside": jsonable(s.set_aside)}
    else:
        body = jsonable(event)
        if not isinstance(body, dict):
            body = {"value": body}
    return {"type": type(event).__name__, "time": now_iso(), **body}


class EventsLog:
    """Engine listener: one JSON line per event in ``<corpus>/daemon/events.jsonl``;
    ``CaseFinished`` counted into ``progress`` lines. Past ``max_bytes`` the file is
    rotated (``.1`` the newest of ``keep`` old ones), so it takes at most
    ``(keep + 1) * max_bytes`` (plus one line) of disk. Raises CorpusWriteError where
    the corpus cannot be written, like every corpus write."""

    def __init__(self, corpus_dir, max_bytes: int, *, keep: int = KEEP_ROTATED,
                 progress_every_s: float = PROGRESS_EVERY_S, clock=time.monotonic):
        _check_positive("max_bytes", max_bytes)
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            raise ValueError(f"keep={keep!r}: expected an integer >= 1")
        _check_positive("progress_every_s", progress_every_s)
        self.path = events_path(corpus_dir)
        self.max_bytes, self.keep, self.progress_every_s = max_bytes, keep, progress_every_s
        self.clock = clock
        self.cases = 0                    # cases seen by this listener
        self._cases_at_last = 0
        self._last_progress = clock()

    def __call__(self, event) -> None:
        if isinstance(event, CaseFinished):
            self.cases += 1
            if self.clock() - self._last_progress >= self.progress_every_s:
                self.progress()
            return
        if isinstance(event, CampaignFinished) and self.cases > self._cases_at_last:
            self.progress()  # the cases since the last progress line, before the summary
        self.write(event_record(event))

    def progress(self) -> None:
        """Write a ``progress`` line now: the cases so far and the rate since the last."""
        now = self.clock()
        elapsed = now - self._last_progress
        new = self.cases - self._cases_at_last
        self.write({"type": "progress", "time": now_iso(), "cases": self.cases, "new_cases": new,
                    "interval_s": round(elapsed, 3), "cases_per_s": round(new / elapsed, 3) if elapsed > 0 else 0.0})
        self._last_progress, self._cases_at_last = now, self.cases

    def write(self, record: dict) -> None:
        line = (json.dumps(record, default=repr) + "\n").encode("utf-8", "replace")
        with corpus_write(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(line) > self.max_bytes:
                self.rotate()
            # One write of a whole line on an O_APPEND descriptor: a killed daemon
            # leaves whole lines behind.
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                if os.write(fd, line) != len(line):  # a short write: the disk is full
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            finally:
                os.close(fd)

    def rotate(self) -> None:
        """events.jsonl -> .1 -> .2 ... -> .keep (the oldest beyond ``keep`` deleted)."""
        oldest = self.path.with_name(f"{self.path.name}.{self.keep}")
        if oldest.exists():
            oldest.unlink()
        for n in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))


# -- the disk cap ----------------------------------------------------------------------
def deletable(corpus_dir) -> list[Path]:
    """What the disk cap may delete, oldest first: the run and harness-error logs in
    ``runs/``, the rotated event logs (``daemon/events.jsonl.N``; the live one is kept)
    and the worker and daemon logs under ``daemon/logs/``. Never a finding (they are
    top-level JSON, or in ``merged/`` and ``pruned/``), a repro script or the state."""
    root = Path(corpus_dir)
    daemon = daemon_dir(root)
    candidates = [p for p in (root / RUNS).rglob("*") if p.is_file()]
    candidates += [p for p in daemon.glob(f"{events_path(root).name}.*") if p.suffix.lstrip(".").isdigit()]
    candidates += [p for p in (daemon / LOGS_DIR).rglob("*") if p.is_file()]
    dated = []
    for p in candidates:
        if p.name == STATE_FILE or p.suffix == ".py" or p.is_symlink():
            continue
        try:
            dated.append((p.stat().st_mtime, str(p), p))
        except FileNotFoundError:  # gone meanwhile
            continue
    return [p for _, _, p in sorted(dated)]


def corpus_bytes(corpus_dir) -> int:
    total = 0
    for p in Path(corpus_dir).rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def enforce_disk_cap(corpus_dir, max_bytes: int) -> list[Path]:
    """Delete what :func:`deletable` lists, oldest first, until everything under
    ``corpus_dir`` takes at most ``max_bytes``; the paths deleted. Findings, repro
    scripts and the state are never deleted, so the corpus may stay over the cap."""
    _check_positive("max_bytes", max_bytes)
    total = corpus_bytes(corpus_dir)
    deleted: list[Path] = []
    for path in deletable(corpus_dir):
        if total <= max_bytes:
            break
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        total -= size
        deleted.append(path)
    return deleted
