"""A Ctrl-C that is never lost.

Python raises a SIGINT's KeyboardInterrupt wherever the main thread happens to be. Where
that is a garbage-collector callback (Hypothesis registers one), a ``__del__`` or a
weakref callback, Python prints "Exception ignored in ..." and drops it: a
``mpsfuzz run --budget 200s`` interrupted a second after its first finding fuzzed on for
the whole 200 s. The latch raises as Python would and also remembers the signal, so the
campaign's next look at its budget raises it again.
"""
from __future__ import annotations

import os
import signal
import threading


class InterruptLatch:
    """Within ``with``: SIGINT raises KeyboardInterrupt and stays pending until
    :meth:`check` re-raises it or :meth:`acknowledge` says it was handled. Installed only
    in the main thread over Python's default handler: a daemon that turns SIGINT into a
    graceful stop keeps its own."""

    def __init__(self):
        self.pending = False
        self._previous = None

    def __enter__(self) -> InterruptLatch:
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _on_sigint(self, signum, frame) -> None:
        self.pending = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise the Ctrl-C that was swallowed where it was first raised."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def acknowledge(self) -> None:
        """The KeyboardInterrupt reached its handler: nothing is pending."""
        self.pending = False


def relay_to(event):
    """A function that sets ``event`` (a threading or multiprocessing Event) soon, safe to
    call from a signal handler: setting it there could deadlock on its lock, taken by the
    very code the signal interrupted (a loop asking is_set()). A thread sets it instead,
    woken by a byte on a pipe (os.write is safe in a handler)."""
    read, write = os.pipe()

    def relay():
        os.read(read, 1)
        event.set()
    threading.Thread(target=relay, name="mpsfuzz-signal-relay", daemon=True).start()
    return lambda: os.write(write, b"x")


class Termination:
    """Within ``with``: SIGTERM (``kill``, and coreutils' ``timeout``, which CI uses)
    stops the campaign as the daemon's stop does (issue 37, point 3): the cases in flight
    are given up, failures not triaged stay in triage-pending/, and the summary and run
    record are written as after a budget. ``stop`` is the Event a single campaign watches;
    :meth:`relay` adds one more stop to call (a ParallelCampaign's ``stop_soon``)."""

    def __init__(self):
        self.received = False
        self.stop = threading.Event()
        self._relays = [relay_to(self.stop)]
        self._previous = None

    def relay(self, stop_soon) -> None:
        """Call ``stop_soon()`` (signal-safe) on SIGTERM, at once if it came already."""
        self._relays.append(stop_soon)
        if self.received:
            stop_soon()

    def __enter__(self) -> "Termination":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _on_sigterm(self, signum, frame) -> None:
        self.received = True
        for stop_soon in self._relays:
            stop_soon()
