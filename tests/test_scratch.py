"""Scratch folders (mpsfuzz/scratch.py): a killed process's worker logs and repro folder
are removed by the next pool or verification that makes one; a live process's, a young
one, another prefix's and another name's stay."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mpsfuzz import scratch
from mpsfuzz.execution.worker import WorkerPool

FAULT_TARGET = "mpsfuzz.testing.faults:target"


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _folder(root: Path, name: str, age_s: float) -> Path:
    path = root / name
    path.mkdir()
    (path / "worker-1-0.log").write_text("log")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_only_old_folders_of_gone_processes_with_the_prefix_are_removed(tmp_path):
    dead = _dead_pid()
    gone = _folder(tmp_path, f"mpsfuzz-workers-{dead}-abc", 3600)
    young = _folder(tmp_path, f"mpsfuzz-workers-{dead}-def", 0)
    alive = _folder(tmp_path, f"mpsfuzz-workers-{os.getpid()}-ghi", 3600)
    other = _folder(tmp_path, f"mpsfuzz-repro-{dead}-jkl", 3600)
    unnamed = _folder(tmp_path, "mpsfuzz-workers-x1y2", 3600)   # before folders had a pid
    assert scratch.remove_orphans("mpsfuzz-workers-", tmp_path) == 1
    assert not gone.exists() and young.exists() and alive.exists() and other.exists() and unnamed.exists()


def test_a_pool_removes_what_a_killed_pools_process_left(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    left = _folder(tmp_path, f"mpsfuzz-workers-{_dead_pid()}-abc", 3600)
    pool = WorkerPool(FAULT_TARGET)
    try:
        assert not left.exists()
        assert pool.workdir.parent == tmp_path and pool.workdir.name.startswith(f"mpsfuzz-workers-{os.getpid()}-")
    finally:
        pool.close()
    assert not pool.workdir.exists()
