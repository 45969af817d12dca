"""The set-aside rule on its own (campaign/health.py, issue 39): an op whose cases keep
failing the harness is set aside after SET_ASIDE_STREAK harness errors in a row, or once
more than SET_ASIDE_SHARE of at least SET_ASIDE_MIN cases failed so; a case that runs
breaks a streak. No campaign or worker."""
from __future__ import annotations

from mpsfuzz.campaign.health import SET_ASIDE_MIN, SET_ASIDE_SHARE, SET_ASIDE_STREAK, OpHealth, count_harness
from mpsfuzz.events import Stats


def test_a_streak_of_harness_errors_sets_an_op_aside():
    health = OpHealth()
    assert [health.outcome("neg", False) for _ in range(SET_ASIDE_STREAK - 1)] == [None] * (SET_ASIDE_STREAK - 1)
    assert health.outcome("neg", False) == f"{SET_ASIDE_STREAK} harness errors in a row"
    assert health.outcome("abs", False) is None      # per op


def test_a_case_that_runs_breaks_the_streak():
    health = OpHealth()
    for _ in range(SET_ASIDE_STREAK - 1):
        assert health.outcome("neg", False) is None
    assert health.outcome("neg", True) is None
    assert health.outcome("neg", False) is None


def test_most_of_many_cases_lost_sets_an_op_aside():
    health = OpHealth()
    why = None
    n = 0
    while why is None:   # alternate: never a streak
        n += 1
        why = health.outcome("neg", n % 3 == 0)
    errors = n - n // 3
    assert errors >= SET_ASIDE_MIN and errors > SET_ASIDE_SHARE * n
    assert why == f"harness errors on {errors} of its {n} cases"


def test_an_op_set_aside_already_is_not_set_aside_again():
    health = OpHealth()
    assert all(health.outcome("neg", False, set_aside=True) is None for _ in range(3 * SET_ASIDE_STREAK))


def test_harness_errors_are_counted_by_stage():
    stats = Stats()
    for stage in ("execute", "execute", "judge"):
        count_harness(stats, stage)
    assert stats.harness_errors == 3 and stats.harness_by_stage == {"execute": 2, "judge": 1}
