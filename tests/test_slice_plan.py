"""Which op's slice runs next and how large, on its own (campaign/slice_plan.py, issue
39): the scheduler's pick among the ops not set aside, each op's rounds, slices sized
from the budget left and the case rate, and --max-cases. A clock is handed in; no
campaign or worker."""
from __future__ import annotations

import pytest

from mpsfuzz.campaign.budget import Budget, BudgetExhausted
from mpsfuzz.campaign.drafts import Limits
from mpsfuzz.campaign.scheduler import RoundRobin, YieldScheduler
from mpsfuzz.campaign.slice_plan import SlicePlan, make_scheduler
from mpsfuzz.campaign.slicing import SliceSizer
from mpsfuzz.events import Stats

LIMITS = Limits(max_rank=4, max_side=8, max_numel=4096, allow_variants=True, examples=30, siblings=3)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def plan(ops, *, budget_s=None, fixed=None, max_cases=None, clock=None):
    clock = clock or Clock()
    budget = Budget(budget_s, max_cases=max_cases, clock=clock)
    budget.start = clock.now
    stats = Stats()
    return SlicePlan(ops, RoundRobin(ops), SliceSizer(fixed=fixed, budget_s=budget_s), LIMITS, stats=stats,
                     budget=budget, clock=clock), stats, clock


def test_the_schedule_is_named_by_the_config():
    assert isinstance(make_scheduler("round-robin", ["neg"], seed=1), RoundRobin)
    assert isinstance(make_scheduler("yield", ["neg"], seed=1), YieldScheduler)
    with pytest.raises(ValueError):
        make_scheduler("random", ["neg"], seed=1)


def test_ops_take_turns_their_rounds_counted_and_the_configured_limits_kept():
    slices, _, _ = plan(["neg", "abs"])
    taken = [next(s) for s in [slices.slices()] * 1 for _ in range(4)]
    assert [(op, round_no) for op, round_no, _ in taken] == [("neg", 0), ("abs", 0), ("neg", 1), ("abs", 1)]
    assert all(limits is LIMITS for _, _, limits in taken)


def test_an_op_set_aside_gets_no_turn_and_with_every_op_aside_the_fuzzing_ends():
    slices, stats, _ = plan(["neg", "abs"])
    stats.set_aside["neg"] = "8 harness errors in a row"
    it = slices.slices()
    assert [next(it)[0] for _ in range(2)] == ["abs", "abs"]
    stats.set_aside["abs"] = "8 harness errors in a row"
    with pytest.raises(BudgetExhausted, match="every op set aside"):
        next(it)


def test_with_a_budget_a_slice_is_sized_from_the_time_left_and_the_case_rate():
    slices, stats, clock = plan(["neg", "abs"], budget_s=100)
    it = slices.slices()
    op, _, first = next(it)
    assert first.examples == 1 and first.siblings == 0     # no rate yet: one drawn case, no siblings
    clock.now += 10
    stats.cases = 20                                        # 2 cases a second, 90 s left, one op behind
    _, _, second = next(it)
    assert second.examples == LIMITS.examples and second.siblings == LIMITS.siblings
    clock.now += 85
    stats.cases = 190                                       # 2 a second, 5 s left: 2 * 0.6 * 5 / 2 ops
    _, _, late = next(it)
    assert late.examples == 3 and late.siblings == 2
    assert late.max_rank == LIMITS.max_rank


def test_a_fixed_slice_size_is_kept_whatever_the_budget():
    slices, _, _ = plan(["neg"], budget_s=100, fixed=5)
    assert next(slices.slices())[2] is LIMITS


def test_max_cases_counts_the_cases_in_the_worker():
    slices, stats, _ = plan(["neg"], max_cases=50)
    stats.cases = 20
    assert slices.cases_left(in_worker=0) == 30 and slices.cases_left(in_worker=25) == 5
    assert slices.cases_left(in_worker=40) == 0
    assert plan(["neg"])[0].cases_left(in_worker=10) is None
