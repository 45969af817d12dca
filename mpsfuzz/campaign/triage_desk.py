"""Triage off the fuzzing path: a thread with a worker of its own.

Re-running, reducing, explaining and localising a finding, then verifying its repro
script, takes seconds to a minute; done inline it stops the campaign for that long. The
desk takes shrunk failures from the campaign and handles them one after the other on its
own thread and worker process, while the campaign's worker goes on running cases. (The
thread costs no fuzzing time: it spends its life waiting for its worker or for the repro
script's interpreter.)
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Callable


class TriageDesk:
    """``handle(job, pool)`` runs on the desk's thread for each submitted job, with the
    pool that ``make_pool()`` builds on first use (closed by :meth:`close`). ``handle``
    must not raise (the campaign's handler turns its own failures into harness errors);
    if it does, the job is handed to ``fallback`` on the same thread so nothing is lost."""

    def __init__(self, handle: Callable, make_pool: Callable, fallback: Callable | None = None,
                 priority: Callable | None = None):
        self._handle, self._make_pool, self._fallback = handle, make_pool, fallback
        # ``priority(job)``: a sort key, smallest first (submission order among equals),
        # asked when a job is taken, not when it is handed in: an op's first finding
        # sends its other failures behind the ops that have none (issue 37, H200: a real
        # gradient bug queued at 369 s of 420 was still waiting when the budget ran out).
        # The stop sentinel comes after every job.
        self._priority = priority or (lambda job: ())
        self._jobs: list = []              # [(submission number, job)]
        self._stop_requested = False
        self._wakeup = threading.Condition()
        self._submitted = itertools.count()
        self._pool = None
        self._busy = 0                 # jobs submitted and not finished
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._cancelled = False        # cancel(): the job in hand is given up, not recorded
        self._current = None           # the job in hand

    @property
    def pending(self) -> int:
        """Jobs submitted and not finished (the one in hand included)."""
        with self._lock:
            return self._busy

    def holds(self, wanted: Callable) -> bool:
        """Whether a job queued or in hand satisfies ``wanted(job)``."""
        with self._wakeup:
            jobs = [job for _, job in self._jobs]
        current = self._current
        return any(wanted(job) for job in jobs + ([current] if current is not None else []))

    @property
    def in_hand(self):
        """The job being handled now, or None."""
        return self._current

    def queued(self, wanted: Callable) -> int:
        """How many jobs waiting (not the one in hand) satisfy ``wanted(job)``."""
        with self._wakeup:
            jobs = [job for _, job in self._jobs]
        return sum(1 for job in jobs if wanted(job))

    def submit(self, job) -> None:
        with self._lock:
            self._busy += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="mpsfuzz-triage", daemon=True)
                self._thread.start()
        with self._wakeup:
            self._jobs.append((next(self._submitted), job))
            self._wakeup.notify()

    def _take(self):
        """The next job by its priority now (None: stop). The priorities are asked
        outside the queue's lock: they may take the campaign's own lock, which a thread
        handing in a job may hold."""
        while True:
            with self._wakeup:
                self._wakeup.wait_for(lambda: self._jobs or self._stop_requested)
                if not self._jobs:
                    return None
                snapshot = list(self._jobs)
            number, job = min(snapshot, key=lambda item: (self._key(item[1]), item[0]))
            with self._wakeup:
                for i, (n, _) in enumerate(self._jobs):
                    if n == number:          # not taken back meanwhile (abandon)
                        del self._jobs[i]
                        return job

    def _key(self, job):
        try:
            return self._priority(job)
        except Exception:   # an order is a preference: never a reason to lose a job
            return ()

    def _serve(self) -> None:
        while True:
            job = self._take()
            if job is None:
                return
            self._current = job
            try:
                if self._stopping:
                    raise RuntimeError("triage abandoned")
                if self._pool is None:
                    self._pool = self._make_pool()
                    if self._cancelled:   # cancelled while the worker was starting
                        self._pool.abandon()
                self._handle(job, self._pool)
            except BaseException:  # noqa: BLE001 - a job is never lost to the desk itself
                # (A cancelled job is not lost either: its owner kept it for later.)
                if self._fallback is not None and not self._cancelled:
                    try:
                        self._fallback(job)
                    except BaseException:  # noqa: BLE001
                        pass
            finally:
                self._current = None
                with self._lock:
                    self._busy -= 1
                    self._idle.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted job is handled; False if ``timeout`` passed first."""
        with self._lock:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def abandon(self) -> list:
        """Take back the jobs not yet started (an interrupted campaign records them as
        they are); the one in hand finishes."""
        self._stopping = True
        with self._wakeup:
            taken = [job for _, job in self._jobs]
            self._jobs.clear()
        with self._lock:
            self._busy -= len(taken)
            self._idle.notify_all()
        return taken

    def withdraw(self, wanted: Callable) -> list:
        """Take back the jobs not yet started that satisfy ``wanted(job)``; the rest stay."""
        with self._wakeup:
            taken = [job for _, job in self._jobs if wanted(job)]
            self._jobs = [(n, job) for n, job in self._jobs if not any(job is t for t in taken)]
        with self._lock:
            self._busy -= len(taken)
            self._idle.notify_all()
        return taken

    def cancel(self) -> list:
        """Stop now: take back the jobs not yet started (as :meth:`abandon`) and give up
        the one in hand, its worker killed (the handler then fails on it, and no
        fallback runs). The caller keeps what it takes back, and the job in hand, for
        later: a campaign past its stop grace leaves them pending."""
        self._cancelled = True
        taken = self.abandon()
        pool = self._pool
        if pool is not None:
            pool.abandon()
        return taken

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (after the job in hand) and close the desk's worker."""
        if self._thread is not None:
            with self._wakeup:
                self._stop_requested = True     # after the jobs still queued
                self._wakeup.notify()
            self._thread.join(timeout)
        if self._pool is not None and (self._thread is None or not self._thread.is_alive()):
            self._pool.close()
            self._pool = None
        elif self._pool is not None and self._cancelled:
            # The thread is still on its cancelled job (a repro script running, say): its
            # worker is killed already; the thread is a daemon and dies with the process.
            self._pool.abandon()


class TriageDesks:
    """Two desks, each a thread with a worker of its own: the quick one for failures
    that re-run in the worker (wrong values, errors), the slow one for those whose every
    re-run needs a process of its own (crashes, hangs, device faults: ``slow(job)``). A
    crash never waits behind the value failures queued before it, nor they behind a hang's
    timeouts (issue 37: with every fault on, a 2-core campaign met its abort and hang
    faults and left them queued behind hundreds of value failures). The interface is one
    desk's: jobs are routed by ``slow``, and what is asked of the desks is asked of both.
    ``make_pool(role)`` builds a desk's worker pool (roles "triage" and "triage-slow"),
    with its first job."""

    def __init__(self, handle: Callable, make_pool: Callable, fallback: Callable | None = None,
                 priority: Callable | None = None, slow: Callable | None = None):
        self._slow = slow or (lambda job: False)
        self.quick = TriageDesk(handle, lambda: make_pool("triage"), fallback, priority)
        self.slow = TriageDesk(handle, lambda: make_pool("triage-slow"), fallback, priority)
        self._both = (self.quick, self.slow)

    def submit(self, job) -> None:
        try:
            slow = bool(self._slow(job))
        except Exception:   # a route is a preference: never a reason to lose a job
            slow = False
        (self.slow if slow else self.quick).submit(job)

    @property
    def pending(self) -> int:
        return sum(desk.pending for desk in self._both)

    def holds(self, wanted: Callable) -> bool:
        return any(desk.holds(wanted) for desk in self._both)

    @property
    def in_hand(self) -> list:
        """The jobs being handled now (none, one or two)."""
        return [job for job in (desk.in_hand for desk in self._both) if job is not None]

    def queued(self, wanted: Callable) -> int:
        return sum(desk.queued(wanted) for desk in self._both)

    def on_desk(self) -> bool:
        """Whether the calling thread is one of the desks'."""
        current = threading.current_thread()
        return any(desk._thread is current for desk in self._both)

    def drain(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        return all(desk.drain(None if deadline is None else max(0.0, deadline - time.monotonic()))
                   for desk in self._both)

    def withdraw(self, wanted: Callable) -> list:
        return [job for desk in self._both for job in desk.withdraw(wanted)]

    def abandon(self) -> list:
        return [job for desk in self._both for job in desk.abandon()]

    def cancel(self) -> list:
        return [job for desk in self._both for job in desk.cancel()]

    def close(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        for desk in self._both:
            desk.close(timeout=max(0.0, deadline - time.monotonic()))
