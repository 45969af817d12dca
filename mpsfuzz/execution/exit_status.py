"""A child process's exit status, read by one thread at a time.

A forkserver child's exit status comes down a pipe the forkserver writes once. Every
``Process.start()``, in any thread, polls every other live child (multiprocessing's
``_cleanup``), so two threads can read that pipe at once: one gets the status, the
other end-of-file, which multiprocessing records as 255, possibly over the real status.
A campaign starts processes on two threads (its fuzzing worker's replacements, its
triage worker's, drafters), so a worker that died of SIGABRT was read as "exit 255":
another symptom, and triage, re-running the case and seeing SIGABRT each time, called
a real crash flaky (fresh-clone CI, test_fault_campaigns[add_alpha_abort]).
:func:`guard_exit_status` serialises the reads of one process's status.
"""
from __future__ import annotations

import os
import threading
from multiprocessing.connection import wait


def guard_exit_status(process) -> None:
    """Make every poll of the started ``process`` (``exitcode``, ``is_alive()``,
    ``join()``, other threads' ``start()``) read its status under one lock, so the
    second reader finds the status the first one read instead of 255. A blocking poll
    (``join()`` without a timeout) waits for the death outside the lock: a thread
    starting a process never waits for another's child to die."""
    popen = getattr(process, "_popen", None)   # None: not started (or a Process look-alike)
    if popen is None or getattr(popen, "_status_guarded", False):
        return
    lock = threading.Lock()
    poll = popen.poll
    sentinel = getattr(popen, "sentinel", None)

    def poll_one_at_a_time(flag=os.WNOHANG):
        if flag != os.WNOHANG and sentinel is not None and popen.returncode is None:
            wait([sentinel])
        with lock:
            return poll(flag)

    popen.poll = poll_one_at_a_time
    popen._status_guarded = True
