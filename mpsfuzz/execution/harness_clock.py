"""The worker's clock for the time mpsfuzz spends judging a case, which is not the target's.

A verdict may trace an op's decomposition and weigh each rounding through autograd: over a
large-class case (cumprod of 65,537 float16 values) that takes longer than a case's
timeout on a loaded machine, and a worker killed then is not a target hang (issue 31 on an
H200: cumprod@large and cumsum@large filed as hangs, "the process hung outside every aten
call", 0 of 8 cases judged). Like compilation (worker.py), judging does not count as the
case running; it has a limit of its own, past which the case is a harness error.

The pool hands each worker a shared array; slots 2 and 3 are this clock's: the wall time
the judging in progress started (0: none) and the seconds judged so far. Slot 4 says
when the eager CPU reference in progress started (0: none): a case whose reference does
not return (max_pool1d with a kernel of 2^63 - 1 loops on CPU; issue 38's argument
extremes) has not hung on the target, whose call ran first and returned.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

JUDGE_START, JUDGED = 2, 3
REFERENCE_START = 4
SLOTS = 5
_state = None


def install(state) -> None:
    """In the worker: keep the pool's shared clock (None: judging counts as running)."""
    global _state
    _state = state


@contextmanager
def judging():
    """Time spent inside is mpsfuzz's, not the target's (nested uses count once)."""
    state = _state
    if state is None or state[JUDGE_START]:
        yield
        return
    state[JUDGE_START] = time.time()
    try:
        yield
    finally:
        state[JUDGED] += time.time() - state[JUDGE_START]
        state[JUDGE_START] = 0.0


@contextmanager
def on_target():
    """Inside ``judging``: time the target runs (a juror calling the target on other
    inputs) counts as the case running again, so a hang there is still a hang."""
    state = _state
    if state is None or not state[JUDGE_START]:
        yield
        return
    started = state[JUDGE_START]
    state[JUDGED] += time.time() - started
    state[JUDGE_START] = 0.0
    try:
        yield
    finally:
        state[JUDGE_START] = time.time()


@contextmanager
def on_reference():
    """Time the eager CPU reference runs: it counts as the case running (a slow reference
    is still the case's time), but a timeout inside it is the reference's, not a hang of
    the target (the worker pool reads the slot: ``slow-reference``)."""
    state = _state
    if state is None or len(state) <= REFERENCE_START:
        yield
        return
    state[REFERENCE_START] = time.time()
    try:
        yield
    finally:
        state[REFERENCE_START] = 0.0
