"""What becomes of a desk's job, on its own (campaign/desk_handler.py, issue 39): shrunk by
the replay unless a finding filed since covers it, recorded, its pending file removed and
its placeholder retired (the sightings it collected going to the finding it became); the
failures it held judged again: sightings, jobs of their own, or kept pending where
triage was given up or --max-findings reached; a corpus that cannot be written kept for
the campaign to end with; an earlier finding's script run again. A fake desk, replay and
recorder, no thread or worker."""
from __future__ import annotations

import threading

from mpsfuzz.campaign.budget import Budget
from mpsfuzz.campaign.desk_handler import DeskHandler
from mpsfuzz.campaign.desk_jobs import Job, Reverification
from mpsfuzz.campaign.finding_errors import error_type
from mpsfuzz.campaign.intake import DeskIntake
from mpsfuzz.campaign.known_findings import FoundBug, KnownFindings
from mpsfuzz.campaign.pending import PendingFailures
from mpsfuzz.campaign.slice_state import SliceState
from mpsfuzz.corpus.store import CorpusWriteError
from mpsfuzz.events import Notice, Stats
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure, symptom_key

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))


def case(op: str = "neg", shape=(3,), dtype="float32") -> Case:
    return Case.from_json({"format": 3, "op": op, "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": list(shape), "dtype": dtype, "alias": None,
         "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


class Desk:
    def __init__(self):
        self.jobs = []

    def submit(self, job):
        self.jobs.append(job)

    def queued(self, wanted):
        return sum(1 for job in self.jobs if wanted(job))

    def on_desk(self):
        return True   # the handler runs on the desk's thread


class Replay:
    def __init__(self, smaller: Case | None = None):
        self.smaller, self.asked = smaller, []

    def shrunk(self, err, holder, pool):
        self.asked.append((err.case, holder))
        err.to_shrink = None
        return error_type("neg", "values", "wrong-values")(self.smaller, WRONG, "smaller"), True


class Scripts:
    def __init__(self):
        self.ran = []

    def run(self, job):
        self.ran.append(job.path)


class Campaign:
    """The campaign's side of the handler: what it is told and asked."""

    def __init__(self, tmp_path, *, desk=None, max_findings=None, smaller=None, record=None):
        self.known, self.stats, self.state = KnownFindings(), Stats(), SliceState()
        self.events, self.split, self.recorded = [], {}, []
        self.abandoned = threading.Event()
        self.intake = DeskIntake(self.known, PendingFailures(tmp_path), record=record or self.record,
                                 emit=self.events.append, harness_error=lambda *a: None)
        self.intake.desk = desk
        self.replay, self.scripts = Replay(smaller), Scripts()
        self.handler = DeskHandler(self.intake, self.replay, self.known, self.state, self.scripts, self.stats,
                                   Budget(max_findings=max_findings), abandoned=self.abandoned,
                                   spent=self.split.__setitem__, emit=self.events.append)

    def record(self, err, pool, *, flaky, triage_it=True):
        """Triage as it would conclude: a new finding of the case's dtype."""
        self.recorded.append((err.case, flaky, triage_it))
        self.stats.new_findings += 1
        self.known.found.append(FoundBug(symptom_key(err.case, err.failure), (f"dtypes:{err.case.inputs[0].dtype}",),
                                         f"sig-{len(self.recorded)}", case=err.case))
        return f"sig-{len(self.recorded)}"

    def job(self, failing: Case, to_shrink=None) -> Job:
        err = error_type(failing.op, "values", "wrong-values")(failing, WRONG, "s")
        err.to_shrink = to_shrink
        return Job(err, False, self.known.open_holder(failing, WRONG), self.intake.keep_pending(err, False))

    def notices(self):
        return [e.message for e in self.events if isinstance(e, Notice)]


def test_a_job_is_shrunk_recorded_and_its_holder_retired_into_the_finding(tmp_path):
    smaller = case(shape=(2,))
    campaign = Campaign(tmp_path, smaller=smaller)
    job = campaign.job(case(shape=(6,)), to_shrink=("slice", {}))
    campaign.known.sight(job.holder.signature, 3)          # sightings collected while in triage
    campaign.handler.triaged(job, pool=object())
    assert campaign.replay.asked == [(job.err.case, job.holder)]
    assert campaign.recorded == [(smaller, True, True)] and "shrink" in campaign.split
    assert not job.pending.exists() and job.holder not in campaign.known.found
    assert campaign.known.sightings == {"sig-1": 3}


def test_a_job_a_finding_filed_since_covers_is_not_shrunk(tmp_path):
    campaign = Campaign(tmp_path)
    failing = case()
    job = campaign.job(failing, to_shrink=("slice", {}))
    campaign.known.found.append(FoundBug(symptom_key(failing, WRONG), None, "filed", flaky=True, case=failing))
    campaign.handler.triaged(job, pool=object())
    assert campaign.replay.asked == [] and job.err.to_shrink is None and campaign.recorded == [(failing, False, True)]


def test_a_corpus_that_cannot_be_written_is_kept_for_the_campaign_and_the_job_stays_pending(tmp_path):
    def unwritable(err, pool, *, flaky, triage_it=True):
        raise CorpusWriteError(tmp_path / "x.json", "disk full")
    campaign = Campaign(tmp_path, record=unwritable)
    job = campaign.job(case())
    campaign.handler.triaged(job, pool=object())
    assert isinstance(campaign.handler.error, CorpusWriteError)
    assert job.pending.exists() and job.holder in campaign.known.found


def test_held_failures_of_the_finding_are_sightings_and_the_others_jobs_of_their_own(tmp_path):
    desk = Desk()
    campaign = Campaign(tmp_path, desk=desk)
    half, single = case(dtype="float16"), case(dtype="float32")
    job = campaign.job(half)
    campaign.known.hold(job.holder, half, WRONG)
    campaign.known.hold(job.holder, half, WRONG)
    campaign.known.hold(job.holder, single, WRONG)
    campaign.handler.triaged(job, pool=object())
    assert [c for c, _, _ in campaign.recorded] == [half]      # float16: the finding needs float16
    assert campaign.known.sightings == {"sig-1": 2}
    assert [j.err.case for j in desk.jobs] == [single] and desk.jobs[0].pending.exists()


def test_without_a_desk_a_held_failure_is_recorded_at_once(tmp_path):
    campaign = Campaign(tmp_path)
    half, single = case(dtype="float16"), case(dtype="float32")
    job = campaign.job(half)
    for _ in range(3):
        campaign.known.hold(job.holder, single, WRONG)
    campaign.handler.triaged(job, pool=object())
    assert [c for c, _, _ in campaign.recorded] == [half, single]
    assert campaign.known.sightings == {"sig-2": 2}           # the other two cases of the one recorded


def test_held_failures_are_kept_pending_at_max_findings_and_once_triage_was_given_up(tmp_path):
    campaign = Campaign(tmp_path, desk=Desk(), max_findings=1)
    half, single = case(dtype="float16"), case(dtype="float32")
    job = campaign.job(half)
    campaign.known.hold(job.holder, single, WRONG)
    campaign.handler.triaged(job, pool=object())
    assert [c for c, _, _ in campaign.recorded] == [half] and campaign.stats.left_pending == 1
    assert len(list((tmp_path / "triage-pending").glob("*.json"))) == 1
    assert [n for n in campaign.notices() if "left for triage" in n]

    campaign = Campaign(tmp_path / "abandoned", desk=Desk())
    held = {"shape": [single, WRONG, 1]}
    campaign.abandoned.set()
    campaign.handler.judge_held(held, None, None, triage_it=True)
    assert campaign.recorded == [] and campaign.stats.left_pending == 1 and not campaign.notices()
    assert len(list((tmp_path / "abandoned" / "triage-pending").glob("*.json"))) == 1


def test_the_desk_is_pressed_while_a_first_rank_job_waits(tmp_path):
    desk = Desk()
    campaign = Campaign(tmp_path, desk=desk)
    campaign.handler.triaged(campaign.job(case("abs")), pool=object())
    assert not campaign.state.pressed
    desk.jobs.append(campaign.job(case("tanh")))            # a failure of an op with no finding waits
    campaign.handler.triaged(campaign.job(case("neg")), pool=object())
    assert campaign.state.pressed


def test_an_earlier_findings_script_is_run_again_unless_the_job_was_given_up(tmp_path):
    campaign = Campaign(tmp_path)
    campaign.handler.triaged(Reverification(tmp_path / "a.json"), pool=object())
    campaign.handler.recorded_untriaged(Reverification(tmp_path / "b.json"))
    assert campaign.scripts.ran == [tmp_path / "a.json"] and campaign.recorded == []
