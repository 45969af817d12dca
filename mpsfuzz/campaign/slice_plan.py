"""Which op's slice runs next, and with which limits.

The scheduler picks the op among those not set aside (``scheduler.py``: round-robin for
``run``, by yield for the daemon); each op's rounds are counted (the round seeds its
slice); the slice's size is the configured one, or sized from the budget left, the ops
still to have their turn in this round and the case rate so far (``slicing.py``, issue
37, point 4). A slice of fewer cases than a drawn case's family has fewer siblings, so
that a slice of one case is one case.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Iterator

from ..events import Stats
from .budget import Budget, BudgetExhausted
from .drafts import Limits
from .scheduler import RoundRobin, YieldScheduler
from .slicing import SliceSizer


def make_scheduler(schedule: str, ops: list[str], *, seed: int, state: dict | None = None):
    """The scheduler named by CampaignConfig.schedule."""
    if schedule == "yield":
        return YieldScheduler(ops, seed=seed, state=state)
    if schedule == "round-robin":
        return RoundRobin(ops)
    raise ValueError(f"schedule={schedule!r}: expected 'round-robin' or 'yield'")


class SlicePlan:
    """The slices of a campaign over ``ops``: picked by ``scheduler``, sized by
    ``sizer`` within ``limits`` (the configured ones); ``stats``: the campaign's (the ops
    set aside, the cases run so far), ``budget``: when it ends."""

    def __init__(self, ops: list[str], scheduler, sizer: SliceSizer, limits: Limits, *, stats: Stats,
                 budget: Budget, clock: Callable[[], float] = time.monotonic):
        self.ops, self.scheduler, self.sizer, self.limits = list(ops), scheduler, sizer, limits
        self.stats, self.budget, self.clock = stats, budget, clock
        self.started: float | None = None   # when the first slice was sized (the case rate's clock)

    def slices(self) -> Iterator[tuple[str, int, Limits]]:
        """(op, round, limits) of each slice to run, as the scheduler picks among the ops
        not set aside (round: how often this op ran in this campaign, which seeds its
        slice). Raises BudgetExhausted once every op is set aside."""
        rounds: dict[str, int] = {}
        while True:
            if all(op in self.stats.set_aside for op in self.ops):
                raise BudgetExhausted("every op set aside")
            op = self.scheduler.next_op(exclude=tuple(self.stats.set_aside))
            rounds[op] = rounds.get(op, -1) + 1
            yield op, rounds[op], self.limits_of(rounds, op)

    def limits_of(self, rounds: dict, op: str) -> Limits:
        """The Limits of ``op``'s next slice (``rounds``: each op's round so far, this
        one's included): as configured, or sized where the budget decides."""
        if not self.sizer.adaptive:
            return self.limits
        now = self.clock()
        if self.started is None:
            self.started = now
        ops = [o for o in self.ops if o not in self.stats.set_aside]
        behind = sum(1 for o in ops if rounds.get(o, -1) < rounds[op]) + 1
        elapsed = now - self.started
        rate = self.stats.cases / elapsed if self.stats.cases and elapsed > 0 else None
        left = (self.budget.end() or now) - now
        cases = self.sizer.cases(ops_left_in_round=behind, seconds_left=left, cases_per_s=rate)
        return replace(self.limits, examples=cases, siblings=min(self.limits.siblings, cases - 1))

    def cases_left(self, in_worker: int) -> int | None:
        """How many more cases --max-cases allows, counting the ``in_worker`` cases sent
        and not yet counted (None: no limit; a slice is drawn at its size)."""
        if self.budget.max_cases is None:
            return None
        return max(0, self.budget.max_cases - self.stats.cases - in_worker)
