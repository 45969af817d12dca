"""A Ctrl-C that is never lost.

Python raises a SIGINT's KeyboardInterrupt wherever the main thread happens to be. Where
that is a garbage-collector callback (Hypothesis registers one), a ``__del__`` or a
weakref callback, Python prints "Exception ignored in ..." and drops it: a
``mpsfuzz run --budget 200s`` interrupted a second after its first finding fuzzed on for
the whole 200 s. The latch raises as Python would and also remembers the signal, so the
campaign's next look at its budget raises it again.
"""
from __future__ import annotations

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
