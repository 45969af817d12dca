"""campaign/scheduler.py: picks by yield without starving any op, deterministic, and
saved and restored across catalogue changes; round-robin for `mpsfuzz run`."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from mpsfuzz.campaign.scheduler import RoundRobin, YieldScheduler

OPS = ["add", "neg", "mm", "sum", "abs"]


def picks(scheduler, n: int) -> Counter:
    return Counter(scheduler.next_op() for _ in range(n))


def test_no_op_starves_beside_one_with_a_huge_yield():
    explore = 0.2
    s = YieldScheduler(OPS, explore=explore, seed=1)
    s.record("mm", cases=10, seconds=1.0, new_findings=1000, new_behaviours=10_000)
    for op in OPS:
        if op != "mm":
            s.record(op, cases=100, seconds=100.0, new_findings=0, new_behaviours=0)
    counts = picks(s, 10_000)
    floor = 10_000 * explore / len(OPS) / 2
    assert all(counts[op] >= floor for op in OPS), (counts, floor)
    assert counts["mm"] > 10_000 * (1 - explore)   # nearly every exploiting pick


def test_the_productive_op_gets_more_picks_than_an_unproductive_one():
    s = YieldScheduler(OPS, seed=2)
    for _ in range(20):
        s.record("neg", cases=50, seconds=10.0, new_findings=0, new_behaviours=5)
        s.record("add", cases=50, seconds=10.0, new_findings=0, new_behaviours=0)
    assert s.yield_of("neg") > s.yield_of("add")
    counts = picks(s, 5000)
    assert counts["neg"] > 3 * counts["add"], counts


def test_findings_weigh_more_than_behaviours():
    s = YieldScheduler(["a", "b"], seed=0, finding_weight=10)
    s.record("a", cases=10, seconds=10.0, new_findings=1, new_behaviours=0)
    s.record("b", cases=10, seconds=10.0, new_findings=0, new_behaviours=5)
    assert s.yield_of("a") > s.yield_of("b")


def test_an_untried_op_looks_promising_until_tried():
    s = YieldScheduler(["old", "new"], seed=0)
    s.record("old", cases=1000, seconds=600.0, new_findings=0, new_behaviours=3)
    assert s.yield_of("new") > s.yield_of("old")


def test_a_dried_up_op_loses_its_picks():
    """Productive once, then nothing for many half-lives: its yield decays."""
    s = YieldScheduler(["a", "b"], seed=0, half_life_s=60.0)
    s.record("a", cases=10, seconds=10.0, new_findings=2, new_behaviours=20)
    s.record("b", cases=10, seconds=10.0, new_findings=0, new_behaviours=2)
    assert s.yield_of("a") > s.yield_of("b")
    for _ in range(30):
        s.record("a", cases=10, seconds=60.0, new_findings=0, new_behaviours=0)
    assert s.yield_of("a") < s.yield_of("b")
    assert s.stats()["a"]["findings"] == 2   # the totals stay


def test_the_same_seed_and_history_give_the_same_picks():
    def run(seed):
        s = YieldScheduler(OPS, seed=seed)
        out = []
        for i in range(200):
            op = s.next_op()
            out.append(op)
            s.record(op, cases=5, seconds=1.0, new_findings=0, new_behaviours=i % 3)
        return out
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_round_trip_goes_on_where_it_left_off():
    a = YieldScheduler(OPS, explore=0.3, seed=5, half_life_s=120.0)
    for op in ("mm", "neg", "mm"):
        a.next_op()
        a.record(op, cases=10, seconds=2.5, new_findings=1 if op == "mm" else 0, new_behaviours=4)
    data = json.loads(json.dumps(a.to_json()))
    b = YieldScheduler.from_json(data, OPS)
    assert b.to_json() == a.to_json()
    assert b.stats() == a.stats()
    assert (b.explore, b.half_life_s) == (0.3, 120.0)
    assert [b.next_op() for _ in range(50)] == [a.next_op() for _ in range(50)]


def test_restoring_adds_new_ops_and_drops_gone_ones():
    a = YieldScheduler(["add", "neg", "gone"], seed=0)
    a.record("gone", cases=3, seconds=1.0, new_findings=0, new_behaviours=1)
    a.record("neg", cases=4, seconds=2.0, new_findings=1, new_behaviours=1)
    b = YieldScheduler.from_json(a.to_json(), ["add", "neg", "fresh"])
    stats = b.stats()
    assert set(stats) == {"add", "neg", "fresh"}
    assert stats["neg"]["cases"] == 4 and stats["fresh"]["cases"] == 0
    assert "fresh" in {b.next_op() for _ in range(200)}


def test_merged_counters_without_smoothed_statistics_are_rebuilt():
    """A merged state (corpus/daemon_state.py) keeps only the summed counters."""
    data = YieldScheduler(["a", "b"]).to_json()
    data["ops"] = {"a": {"cases": 10, "seconds": 5.0, "findings": 1, "behaviours": 2}}
    s = YieldScheduler.from_json(data, ["a", "b"])
    assert s.stats()["a"]["cases"] == 10
    assert s.yield_of("a") == pytest.approx((1 * 10 + 2 + 1) / (5.0 + 1))


def test_stats_for_status_display():
    s = YieldScheduler(["a"], seed=0)
    s.record("a", cases=7, seconds=3.0, new_findings=1, new_behaviours=2)
    assert s.stats() == {"a": {"cases": 7, "seconds": 3.0, "findings": 1, "behaviours": 2,
                               "yield": pytest.approx(s.yield_of("a"))}}


def test_excluded_ops_are_never_picked():
    s = YieldScheduler(OPS, seed=0)
    assert "mm" not in {s.next_op(exclude={"mm"}) for _ in range(500)}
    with pytest.raises(ValueError, match="every op is excluded"):
        s.next_op(exclude=set(OPS))


@pytest.mark.parametrize("kwargs, words", [
    ({"explore": 0}, "explore=0"),
    ({"explore": 1.5}, "explore=1.5"),
    ({"seed": "x"}, "seed='x'"),
    ({"half_life_s": 0}, "half_life_s=0"),
    ({"finding_weight": -1}, "finding_weight=-1"),
])
def test_bad_options_are_refused_by_name(kwargs, words):
    with pytest.raises(ValueError, match=words.replace(".", r"\.")):
        YieldScheduler(OPS, **kwargs)


@pytest.mark.parametrize("kwargs, words", [
    ({"cases": -1}, "cases=-1"),
    ({"seconds": float("nan")}, "seconds=nan"),
    ({"new_findings": 1.5}, "new_findings=1.5"),
])
def test_bad_records_are_refused_by_name(kwargs, words):
    s = YieldScheduler(OPS)
    args = {"cases": 1, "seconds": 1.0, "new_findings": 0, "new_behaviours": 0, **kwargs}
    with pytest.raises(ValueError, match=words.replace(".", r"\.")):
        s.record("add", **args)
    with pytest.raises(ValueError, match="op='nope'"):
        s.record("nope", cases=1, seconds=1.0, new_findings=0, new_behaviours=0)


def test_from_json_refuses_another_schedulers_state():
    with pytest.raises(ValueError, match="kind='round-robin'"):
        YieldScheduler.from_json(RoundRobin(OPS).to_json(), OPS)
    with pytest.raises(ValueError, match="version"):
        YieldScheduler.from_json({**YieldScheduler(OPS).to_json(), "version": 99}, OPS)


def test_round_robin_takes_each_op_in_turn_and_keeps_totals():
    r = RoundRobin(["a", "b", "c"])
    assert [r.next_op() for _ in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]
    assert r.next_op(exclude={"b"}) == "c"
    r.record("a", cases=3, seconds=1.5, new_findings=1, new_behaviours=0)
    assert r.stats()["a"]["cases"] == 3 and r.stats()["b"]["cases"] == 0
    back = RoundRobin.from_json(json.loads(json.dumps(r.to_json())), ["a", "b", "c", "d"])
    assert back.stats()["a"]["findings"] == 1 and "d" in back.stats()
    assert [back.next_op() for _ in range(3)] == ["d", "a", "b"]   # after "c", the last one given
    assert [RoundRobin.from_json(r.to_json(), ["a", "b"]).next_op() for _ in range(1)] == ["a"]
