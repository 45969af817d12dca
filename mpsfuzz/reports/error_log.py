"""The run's harness errors, one JSON object per line, appended as they happen: an engine
listener that writes ``<corpus>/runs/<UTC timestamp>-<pid>.errors.jsonl``.

A harness error is mpsfuzz failing on one case (events.HarnessError): each line keeps
the stage, the op, the case (its JSON recipe: ``mpsfuzz`` can run it again) and the
traceback, so that nothing is lost if the run is killed. The file is created on the first
error only. A log that cannot be written is a corpus that cannot be written
(CorpusWriteError: the run stops). Format: docs/report.md.
"""
from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

from ..corpus.store import corpus_write
from ..events import HarnessError
from .run_log import RUNS_DIR

ERRORS_SUFFIX = ".errors.jsonl"


def errors_log_path(corpus_dir, when: float | None = None) -> Path:
    """A fresh ``<corpus>/runs/<stamp>-<pid>[-n].errors.jsonl`` for a run starting now."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if when is None else when))
    base = Path(corpus_dir) / RUNS_DIR / f"{stamp}-{os.getpid()}"
    path, n = base.with_name(base.name + ERRORS_SUFFIX), 1
    while path.exists():  # another campaign of this process within the second
        path = base.with_name(f"{base.name}-{n}{ERRORS_SUFFIX}")
        n += 1
    return path


class ErrorLog:
    """Engine listener: appends each HarnessError to :attr:`path` (flushed at once)."""

    def __init__(self, corpus_dir):
        self.path = errors_log_path(corpus_dir)
        self.count = 0

    def __call__(self, event) -> None:
        if not isinstance(event, HarnessError):
            return
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stage": event.stage,
                  "op": event.op, "error": event.error, "case": event.case_json, "traceback": event.traceback}
        line = json.dumps(record, default=repr) + "\n"
        with corpus_write(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One write of a whole line on an O_APPEND descriptor: a killed run leaves
            # whole lines behind.
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                data = line.encode("utf-8", "replace")
                written = os.write(fd, data)
                if written != len(data):  # a short write: the disk is full
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            finally:
                os.close(fd)
        self.count += 1


def read_errors(path) -> list[dict]:
    """The records of an errors log (a line that is not JSON is skipped)."""
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
