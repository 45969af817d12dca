"""A slice's cases, drawn ahead, sent to the worker as one batch and collected.

The next slice's batch is sent before the last one is collected: it queues behind it in
the worker, which goes from one to the next without waiting for the driver. Collecting
a batch gives one outcome per case (the worker's CaseOutcome, a ProcessEvent, or the exception
that kept the pool from running it), fewer where the cases still to run were given up
(past the budget; and after a hang, whose op's other cases would mostly hang too, a
timeout each, for the one finding).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..atomic import CorpusWriteError
from ..execution.worker import WorkerStartAbandoned
from .drafts import Limits


@dataclass
class Slice:
    """One op's slice of a round: its seed, the cases drawn ahead, and the limits they
    were drawn with (the slice's size and siblings: a replay draws the same cases)."""
    op: str
    seed: int
    cases: list
    seconds: float = 0.0      # spent drawing them
    limits: Limits | None = None


@dataclass
class InWorker:
    """A slice sent to the worker: its batch (or the exception that kept the pool from
    taking it), and its outcomes once collected (before they are judged)."""
    slice: Slice
    batch: object
    outcomes: list | None = None


def submit(prepared: Slice, pool, oracles) -> InWorker:
    """Send ``prepared``'s cases to ``pool`` as one batch, judged by ``oracles``; the
    exception that kept the pool from taking it is judged as each case's harness error
    when the batch is collected."""
    try:
        batch = pool.submit([c.to_json() for c in prepared.cases], oracles, [c.op for c in prepared.cases])
    except CorpusWriteError:
        raise
    except Exception as exc:
        batch = exc
    return InWorker(prepared, batch)


def collect(sent: InWorker, pool, *, give_up: Callable[[], bool]) -> list:
    """One outcome per case of ``sent`` (collected once, kept on it); once ``give_up()``
    the cases without a reply yet are given up (fewer outcomes)."""
    if sent.outcomes is not None:
        return sent.outcomes
    n, batch = len(sent.slice.cases), sent.batch
    if isinstance(batch, WorkerStartAbandoned):
        sent.outcomes = []    # given up with the budget, as cases past it are
    elif isinstance(batch, BaseException):
        sent.outcomes = [batch] * n
    elif batch is None:
        sent.outcomes = []
    else:
        try:
            # Past the budget, the cases still to run are given up (fewer outcomes);
            # so are those after a hang (the op's other cases would mostly hang too,
            # a timeout each, for the one finding). Hypothesis' replay stops drawing at
            # the hang, before them.
            sent.outcomes = pool.collect(batch, give_up=give_up, stop_at_hang=True)
        except CorpusWriteError:
            raise
        except WorkerStartAbandoned:   # past the budget while a fresh worker started
            sent.outcomes = list(batch.outcomes)
        except Exception as exc:  # the pool could not run them (a worker that cannot start...)
            sent.outcomes = batch.outcomes + [exc] * (n - len(batch.outcomes))
    return sent.outcomes
