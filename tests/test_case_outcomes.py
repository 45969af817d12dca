"""What a case the worker ran comes to, on its own (campaign/outcomes.py, issue 39): its
counts where it is the fuzzing's (not the desk's replays), the events its listeners see,
its failures, and the harness errors that lose it. Outcomes are made here, as the worker
would return them; no worker runs."""
from __future__ import annotations

import pytest

from mpsfuzz.atomic import CorpusWriteError
from mpsfuzz.campaign.outcomes import OTHER_MESSAGES, CaseOutcomes, add_time, count_message
from mpsfuzz.events import CaseFinished, Notice, Stats
from mpsfuzz.execution.observation import ProcessEvent
from mpsfuzz.execution.outcome import CaseOutcome, CaseSeconds
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
CASE = Case.from_json({"format": 3, "op": "neg", "variant": "functional", "kwargs": {}, "inputs": [
    {"shape": [3], "dtype": "float32", "alias": None,
     "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
     "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


class Listening:
    def __init__(self):
        self.stats, self.events, self.errors = Stats(), [], []
        self.outcomes = CaseOutcomes(self.stats, emit=self.events.append, harness_error=self.harness_error,
                                     process_oracles=("crash", "hang"))

    def harness_error(self, stage, op, case, exc=None, *, error="", trace=""):
        self.errors.append((stage, op, str(exc) if exc is not None else error))

    def finished(self) -> list[CaseFinished]:
        return [e for e in self.events if isinstance(e, CaseFinished)]

    def notices(self) -> list[str]:
        return [e.message for e in self.events if isinstance(e, Notice)]


def result(valid=True, unsupported=False, failures=(), **more) -> CaseOutcome:
    return CaseOutcome(valid=valid, unsupported=unsupported, failures=tuple(f.to_json() for f in failures), **more)


def test_a_fuzzing_case_is_counted_timed_and_its_failures_returned():
    seen = Listening()
    got = seen.outcomes.failures(CASE, result(failures=[WRONG], seconds=CaseSeconds(run=0.5, check=0.25)),
                                 fuzzing=True, shrinking=False)
    assert got == [WRONG]
    assert (seen.stats.cases, seen.stats.valid, seen.stats.per_op) == (1, 1, {"neg": [1, 1]})
    assert seen.stats.time_split == {"run": 0.5, "check": 0.25}
    assert seen.finished() == [CaseFinished("neg", valid=True, unsupported=False, shrinking=False, case=CASE)]


def test_a_replay_on_the_desk_counts_nothing_and_is_seen_as_shrinking():
    seen = Listening()
    seen.outcomes.failures(CASE, result(seconds=CaseSeconds(run=1.0)), fuzzing=False, shrinking=True)
    assert seen.stats.cases == 0 and not seen.stats.per_op and not seen.stats.time_split
    assert seen.finished()[0].shrinking


def test_unsupported_messages_are_counted_per_op():
    seen = Listening()
    seen.outcomes.failures(CASE, result(valid=False, unsupported=True, unsupported_message="no kernel",
                                        unsupported_here="too large here"), fuzzing=True, shrinking=False)
    assert seen.stats.unsupported == 1 and seen.stats.unsupported_here == 1 and seen.stats.valid == 0
    assert seen.stats.unsupported_messages == {("neg", "no kernel"): 1}
    assert seen.stats.unsupported_here_messages == {("neg", "too large here"): 1}


def test_a_table_of_messages_is_capped():
    table: dict = {}
    for n in range(5):
        count_message(table, "add", f"size {n}", cap=3)
    count_message(table, "add", "size 0", cap=3)
    assert table == {("add", "size 0"): 2, ("add", "size 1"): 1, ("add", "size 2"): 1, ("add", OTHER_MESSAGES): 2}


def test_the_time_split_adds_up_and_never_goes_back():
    stats = Stats()
    add_time(stats, "draw", 1.5)
    add_time(stats, "draw", -3.0)
    add_time(stats, "run", 2)
    assert stats.time_split == {"draw": 1.5, "run": 2.0}


def test_a_case_the_pool_could_not_run_is_a_harness_error_and_a_full_disk_ends_the_run():
    seen = Listening()
    assert seen.outcomes.failures(CASE, RuntimeError("no worker"), fuzzing=True, shrinking=False) == []
    assert seen.errors == [("execute", "neg", "no worker")] and not seen.finished()[0].valid
    assert seen.stats.cases == 1
    with pytest.raises(CorpusWriteError):
        seen.outcomes.failures(CASE, CorpusWriteError("/corpus", "No space left on device"), fuzzing=True,
                               shrinking=False)


def test_an_error_inside_the_worker_and_failures_that_cannot_be_read_are_harness_errors():
    seen = Listening()
    trace = "Traceback (most recent call last):\n  ...\nValueError: the executor broke\n"
    assert seen.outcomes.failures(CASE, CaseOutcome.harness_error(trace), fuzzing=True, shrinking=False) == []
    assert seen.errors == [("execute", "neg", "ValueError: the executor broke")]
    assert seen.stats.cases == 1 and seen.stats.valid == 0 and not seen.finished()[0].valid
    assert seen.outcomes.failures(CASE, CaseOutcome(valid=True, failures=({"oracle": "values"},)),
                                  fuzzing=True, shrinking=False) == []
    assert seen.errors[-1][0] == "judge"


def test_a_hang_is_judged_by_the_process_oracles_and_costs_its_timeout():
    seen = Listening()
    got = seen.outcomes.failures(CASE, ProcessEvent("neg", "faulty-cpu", "timeout", timeout_s=3.0), fuzzing=True,
                                 shrinking=False)
    assert [f.oracle for f in got] == ["hang"]
    assert seen.stats.restarts == 1 and seen.stats.time_split == {"run": 3.0}
    assert seen.notices() == ["worker timeout on neg; restarted"] and seen.finished()[0].valid


def test_a_death_on_the_desk_is_judged_but_restarts_no_fuzzing_worker():
    seen = Listening()
    got = seen.outcomes.failures(CASE, ProcessEvent("neg", "faulty-cpu", "died", returncode=-11), fuzzing=False,
                                 shrinking=True)
    assert [f.oracle for f in got] == ["crash"] and seen.stats.restarts == 0


@pytest.mark.parametrize("kind, counted, said", [
    ("slow-compile", "slow_compiles", "slow compilation, not a hang"),
    ("slow-reference", "reference_hangs", "a hang of the reference, not of faulty-cpu"),
])
def test_what_is_not_the_targets_hang_is_reported_never_filed(kind, counted, said):
    seen = Listening()
    assert seen.outcomes.failures(CASE, ProcessEvent("neg", "faulty-cpu", kind, timeout_s=9.0), fuzzing=True,
                                  shrinking=False) == []
    assert getattr(seen.stats, counted) == 1 and said in seen.notices()[0] and not seen.errors
    assert not seen.finished()[0].valid


def test_a_verdict_that_outlasted_its_budget_is_the_harnesss_failure():
    seen = Listening()
    assert seen.outcomes.failures(CASE, ProcessEvent("neg", "faulty-cpu", "slow-judge", timeout_s=180.0),
                                  fuzzing=True, shrinking=False) == []
    assert seen.errors == [("judge", "neg", "the verdict on this case took more than 180s (the worker was "
                                           "restarted)")]
