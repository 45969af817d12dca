"""What judging one slice keeps, one per thread (:class:`SliceState`): the campaign, its
verdicts (verdicts.py), the desk's replay (replay.py) and the desk's handler share one."""
from __future__ import annotations

import threading


class SliceState(threading.local):
    """What judging one slice keeps, one per thread: the campaign's thread judges its
    batches while the triage desk's thread replays and shrinks an earlier slice."""

    def __init__(self):
        self.memo: dict = {}                 # case -> verdicts, for the rest of the slice
        self.pending: dict = {}              # (op, oracle, kind) -> the smallest failure so far
        self.shrink_started: dict = {}       # (op, oracle, kind) -> when its shrinking began
        self.replaying = False               # the second pass: its cases were counted by the first
        self.only: tuple | None = None       # the desk's replay shrinks this (op, oracle, kind) only
        self.holder = None                   # ... and its own placeholder does not cover it
        self.met: dict = {}                  # other new failures met in that replay: their own jobs
        self.pressed = False                 # the desk's job in hand: first-rank failures wait behind it

    def clear(self) -> None:
        """Forget the slice judged last (its verdicts, its failures and their shrinking)."""
        self.shrink_started.clear()
        self.pending = {}
        self.memo = {}
