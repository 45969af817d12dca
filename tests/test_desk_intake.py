"""What goes to the triage desk, on its own (campaign/intake.py, issue 39): a slice's new
failures one job per (op, oracle, kind), each with the batch's verdicts to be shrunk and
its other cases held meanwhile; each job's failure kept in triage-pending/ first; what a
replay met besides its own failure handed over unless a finding covers it; an earlier
run's pending failures taken up (sightings at once); without a desk, or on the desk's
own thread, a failure recorded now, what that raises a harness error. A fake desk and
recorder, no thread or worker."""
from __future__ import annotations

import pytest

from mpsfuzz.campaign.batches import Slice
from mpsfuzz.campaign.finding_errors import error_type
from mpsfuzz.campaign.intake import DeskIntake
from mpsfuzz.campaign.known_findings import NEW, FoundBug, KnownFindings
from mpsfuzz.campaign.pending import PendingFailures
from mpsfuzz.corpus.store import CorpusWriteError
from mpsfuzz.events import Notice
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure, symptom_key

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
RAISES = Failure("errors", "dut-raises", "raises", "RuntimeError: x", "high", ("dut-raises", "RuntimeError"))


def case(op: str = "neg", shape=(3,)) -> Case:
    return Case.from_json({"format": 3, "op": op, "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": list(shape), "dtype": "float32", "alias": None,
         "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


def err(failing: Case, failure: Failure = WRONG, signature: str = "0123456789abcdef"):
    return error_type(failing.op, failure.oracle, failure.kind)(failing, failure, signature)


def settled(failing: Case, failure: Failure = WRONG, signature: str = "filed") -> FoundBug:
    return FoundBug(symptom_key(failing, failure), None, signature, flaky=True, case=failing)


class Desk:
    """The run's TriageDesks, as the intake sees them."""

    def __init__(self, on_desk=False):
        self.jobs, self.here = [], on_desk

    def submit(self, job):
        self.jobs.append(job)

    def on_desk(self):
        return self.here

    @property
    def pending(self):
        return len(self.jobs)


class Campaign:
    """The campaign's side of the intake: what it is told and asked."""

    def __init__(self, tmp_path, desk=None, record=None):
        self.known = KnownFindings()
        self.events, self.errors, self.recorded = [], [], []
        self.intake = DeskIntake(self.known, PendingFailures(tmp_path), record=record or self.record,
                                 emit=self.events.append,
                                 harness_error=lambda stage, op, c, exc: self.errors.append((stage, op)))
        self.intake.desk = desk

    def record(self, error, pool, *, flaky, triage_it=True):
        self.recorded.append((error.case, triage_it))
        return f"recorded-{len(self.recorded)}"


def test_a_slices_new_failures_go_to_the_desk_one_job_each_the_rest_held_meanwhile(tmp_path):
    desk = Desk()
    campaign = Campaign(tmp_path, desk)
    first, second, raising = case(shape=(3,)), case(shape=(4,)), case(shape=(5,))
    failed = [(first, (NEW, WRONG, "a")), (second, (NEW, WRONG, "b")), (raising, (NEW, RAISES, "c"))]
    memo = {c: [v] for c, v in failed}
    prepared = Slice("neg", 1, [first, second, raising])
    campaign.intake.hand_to_shrink(prepared, failed, memo, pool=None)
    assert [(job.err.case, job.err.to_shrink[0]) for job in desk.jobs] == [(first, prepared), (raising, prepared)]
    assert desk.jobs[0].err.to_shrink[1] == memo and desk.jobs[0].err.to_shrink[1] is not memo
    assert all(job.pending.exists() and not job.flaky for job in desk.jobs)
    # the second wrong-values case waits for the first's triage, held by its placeholder
    # (with the first's own: one case per trigger shape, counted)
    held = campaign.known.held[desk.jobs[0].holder.signature]
    assert [(c, n) for c, _, n in held.values()] == [(first, 2)]
    assert not campaign.recorded and campaign.intake.in_triage() == 2


def test_failing_cases_not_shrunk_are_recorded_or_sightings_of_what_covers_them(tmp_path):
    campaign = Campaign(tmp_path)
    filed, fresh = case("abs"), case("neg")
    campaign.known.found.append(settled(filed))
    campaign.intake.record_unshrunk([(filed, (NEW, WRONG, "a")), (fresh, (NEW, WRONG, "b"))], pool=None)
    assert campaign.recorded == [(fresh, True)]          # no desk: recorded now, triaged


def test_without_a_desk_or_on_its_thread_a_failure_is_recorded_now_and_what_that_raises_is_a_harness_error(
        tmp_path):
    campaign = Campaign(tmp_path, Desk(on_desk=True))
    assert campaign.intake.record_safely(err(case()), None, flaky=False) == "recorded-1"
    assert not campaign.intake.desk.jobs

    def broken(error, pool, *, flaky, triage_it=True):
        raise RuntimeError("triage broke")
    campaign = Campaign(tmp_path, record=broken)
    assert campaign.intake.record_safely(err(case()), None, flaky=False) is None
    assert campaign.errors == [("record", "neg")]

    def unwritable(error, pool, *, flaky, triage_it=True):
        raise CorpusWriteError(tmp_path / "x.json", "disk full")
    with pytest.raises(CorpusWriteError):
        Campaign(tmp_path, record=unwritable).intake.record_safely(err(case()), None, flaky=False)


def test_what_a_replay_met_is_handed_over_unless_a_finding_covers_it(tmp_path):
    desk = Desk()
    campaign = Campaign(tmp_path, desk)
    covered, uncovered = case("abs"), case("neg")
    campaign.known.found.append(settled(covered))
    campaign.intake.hand_over_met({("abs", "values", "wrong-values"): (covered, WRONG, "a"),
                                   ("neg", "values", "wrong-values"): (uncovered, WRONG, "b")})
    assert [job.err.case for job in desk.jobs] == [uncovered] and desk.jobs[0].pending.exists()
    assert desk.jobs[0].err.to_shrink is None


def test_an_earlier_runs_pending_failures_are_taken_up_those_a_finding_covers_as_sightings(tmp_path):
    desk = Desk()
    campaign = Campaign(tmp_path, desk)
    covered, uncovered = case("abs"), case("neg")
    for left in (covered, uncovered):
        campaign.intake.keep_pending(err(left), True)
    campaign.known.found.append(settled(covered))
    campaign.intake.resume_pending(before=float("inf"))
    assert [(job.err.case, job.flaky) for job in desk.jobs] == [(uncovered, True)]
    assert [p for p in (tmp_path / "triage-pending").glob("*.json")] == [desk.jobs[0].pending]
    assert campaign.known.sightings == {"filed": 1}
    assert [e.message for e in campaign.events if isinstance(e, Notice)] == [
        f"an earlier run left 2 failure(s) in {tmp_path / 'triage-pending'}: 1 sighting(s) of findings, 1 to triage"]


def test_an_op_with_a_finding_is_not_of_the_first_rank(tmp_path):
    campaign = Campaign(tmp_path, Desk())
    job = (err(case("neg")), False, None, None)
    assert campaign.intake.first_rank(job)
    campaign.known.found.append(settled(case("neg"), signature="neg-filed"))
    assert not campaign.intake.first_rank(job)
