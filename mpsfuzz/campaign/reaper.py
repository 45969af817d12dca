"""Processes a campaign started, ended with it.

A campaign starts processes below processes: lanes, each lane its workers' forkserver,
the workers forked from it, drafters, repro scripts. A process that outlives its parent
is re-parented and forgotten: a worker hung in a kernel then runs on, and holds the
write end of multiprocessing's resource-tracker pipe, so the tracker cannot exit, and a
Python that waits for its tracker at exit (newer ones do) waits for that worker too. So
the ends of a campaign (a lane's, the coordinator's, the command's) kill what they
started, and the coordinator remembers each lane's processes while the lane lives, to
kill them even after the lane died and they were re-parented.
"""
from __future__ import annotations

import os
import time

import psutil


def _is_resource_tracker(proc: psutil.Process) -> bool:
    """multiprocessing's resource tracker: it must outlive the others to unlink their
    semaphores, and exits by itself once every process holding its pipe is gone."""
    try:
        return any("resource_tracker" in part for part in proc.cmdline())
    except psutil.Error:
        return False


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Every process below ``pid`` (this process by default), the resource tracker
    excepted; [] when ``pid`` is gone."""
    try:
        procs = psutil.Process(os.getpid() if pid is None else pid).children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in procs if not _is_resource_tracker(p)]


def _gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def kill_all(procs, timeout: float = 5.0) -> list[psutil.Process]:
    """SIGKILL each of ``procs`` still running (psutil checks that a pid is still the
    same process) and wait up to ``timeout`` for them to die; those still alive (a
    process in the kernel's uninterruptible sleep, a GPU driver's teardown). Nothing is
    reaped here: a child's parent (multiprocessing, subprocess) still collects its status."""
    killed = []
    for proc in procs:
        if _gone(proc):
            continue
        try:
            proc.kill()
            killed.append(proc)
        except psutil.Error:
            pass
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in killed if not _gone(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def kill_tree(pid: int | None, also=(), timeout: float = 5.0) -> list[psutil.Process]:
    """Kill ``pid`` (None: a process already gone and reaped, whose pid may be another's
    now), everything below it now, and ``also`` (processes known to have been below it:
    re-parented once it died); those still alive after ``timeout``."""
    root = []
    if pid is not None:
        try:
            root = [psutil.Process(pid)]
        except psutil.Error:
            pass
    family = {*(descendants(pid) if root else ()), *also}
    return kill_all([*root, *family], timeout)   # the root first: it starts no more
