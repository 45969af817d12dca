"""What the campaign hands its triage desks, and in which order and to which desk.

A job is a failure to shrink, triage and record (:class:`Job`: the finding exception, with
its case, failure and signature; Hypothesis' flaky hint; the placeholder that holds its
symptom meanwhile; its file in triage-pending/), or, at the lowest rank, an earlier
run's unverified finding whose repro script is to run again (:class:`Reverification`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

# The rank of a job whose order cannot be told, and of a Reverification: after every
# failure (an order is a preference: never a reason to lose a job).
LAST = (True, True, True)

# While other failures of the first rank (the target's, of an op with no finding) wait
# for the desk, a job shrinks and minimises within this share of --shrink-budget and
# --minimise-budget: finding comes first (issue 37; on 2 cores with every fault on, the
# desk's queue outgrew what it triaged in a 10-minute budget).
PRESSED_SHARE = 0.25


class Job(NamedTuple):
    """A failure for the desk. (A plain 4-tuple in this order is one too.)"""
    err: object                  # the FindingError: .case, .failure, .signature, .to_shrink
    flaky: bool                  # Hypothesis' Flaky verdict: a hint, the re-runs decide
    holder: object               # the FoundBug placeholder holding its symptom, or None
    pending: Path | None         # its file in triage-pending/, None where none was written


@dataclass(frozen=True)
class Reverification:
    """A desk job of the lowest rank: run again the repro script of a finding an earlier
    run left ``unverified`` (its script did not run to the end). Inside the budget like
    every job of the desk (issue 37, point 2); one not run stays unverified for the next."""
    path: Path


def slow_to_triage(failure) -> bool:
    """Whether each re-run of this failure needs a process of its own (a crash, a hang,
    a device fault that poisons the context)."""
    return failure.oracle in ("crash", "hang") or failure.kind == "device-fault"


def is_slow(job) -> bool:
    """Whether a desk job goes to the slow desk (TriageDesks): a crash, hang or device
    fault, each of whose re-runs needs a fresh process."""
    return not isinstance(job, Reverification) and slow_to_triage(job[0].failure)


def desk_order(job, has_finding_of: Callable[[str], bool]) -> tuple:
    """A desk's sort key, smallest first: failures blamed on the target first, those of
    an op with no finding yet (``has_finding_of(op)`` false) before the rest; eager CPU's,
    both backends' and undecided ones after (issue 30, two H200 runs: 373 and 48 failures
    left untriaged at the budget's end, nearest-exact's real gradient bug among them,
    behind CPU's own); the scripts of findings an earlier run left unverified last.
    (Crashes, hangs and device faults have a desk of their own: TriageDesks.)"""
    try:
        if isinstance(job, Reverification):
            return LAST   # after every failure: no bug waits on it
        err = job[0]
        return (err.failure.blame != "target", has_finding_of(err.case.op), False)
    except Exception:   # an order is a preference: never a reason to lose a job
        return LAST


def first_rank(order: tuple) -> bool:
    """Whether a job of this order is of the desk's first rank: a target failure of an op
    with no finding."""
    return not any(order[:2])
