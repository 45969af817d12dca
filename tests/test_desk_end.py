"""What becomes of the desk's jobs at a run's end, on its own (campaign/desk_end.py and
reverification.py, issue 39): drained within the stop grace, or given up and left in
triage-pending/ with what their holders held (a sighting where a finding filed meanwhile
covers one), recorded as they are after a Ctrl-C; earlier findings' scripts left for the
next run, or run again with their verdict written back. A desk stand-in, no thread or
worker."""
from __future__ import annotations

import json
import threading

from mpsfuzz.campaign.desk_end import DeskEnd
from mpsfuzz.campaign.desk_jobs import Job, Reverification
from mpsfuzz.campaign.known_findings import FoundBug, KnownFindings
from mpsfuzz.campaign.pending import PENDING_DIR, PendingFailures
from mpsfuzz.campaign.reverification import Reverifications
from mpsfuzz.corpus.finding import Finding, signature_of
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.events import Notice, Stats
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure, symptom_key

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
RAISES = Failure("errors", "dut-raises", "raises", "RuntimeError: x", "high", ("dut-raises", "RuntimeError", "x"))
TARGET = "mpsfuzz.testing.faults:target"


def case(*shape) -> Case:
    return Case.from_json({"format": 3, "op": "sigmoid", "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": list(shape), "dtype": "float32", "alias": None,
         "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


class Err:
    def __init__(self, failing: Case, failure: Failure = WRONG):
        self.case, self.failure, self.signature = failing, failure, signature_of(failing, failure)


class Desk:
    """A desk stand-in: ``queued`` jobs not started, ``hand`` the one in hand."""

    def __init__(self, queued=(), hand=(), drains=True):
        self.queued, self.hand, self.drains = list(queued), list(hand), drains
        self.closed = self.cancelled = None
        self.drained: list = []

    @property
    def pending(self):
        return len(self.queued) + len(self.hand)

    @property
    def in_hand(self):
        return list(self.hand)

    def withdraw(self, wanted):
        taken = [j for j in self.queued if wanted(j)]
        self.queued = [j for j in self.queued if not wanted(j)]
        return taken

    def abandon(self):
        taken, self.queued = self.queued, []
        return taken

    def drain(self, timeout=None):
        self.drained.append(timeout)
        if isinstance(self.drains, BaseException):
            raising, self.drains = self.drains, True     # (a Ctrl-C comes once)
            raise raising
        return self.drains

    def cancel(self):
        self.cancelled = True
        return self.abandon()

    def close(self, timeout=10.0):
        self.closed = timeout


class Run:
    def __init__(self, tmp_path):
        self.known, self.stats = KnownFindings(), Stats()
        self.pending = PendingFailures(tmp_path)
        self.abandoned = threading.Event()
        self.events, self.untriaged, self.left = [], [], []
        self.end = DeskEnd(known=self.known, pending=self.pending, stats=self.stats, abandoned=self.abandoned,
                           emit=self.events.append, record_untriaged=self.untriaged.append,
                           reverify_left=self.left.append)

    def job(self, failing: Case, failure: Failure = WRONG, *, written=True) -> Job:
        err = Err(failing, failure)
        holder = self.known.open_holder(failing, failure)
        return Job(err, False, holder, self.pending.keep(err, False) if written else None)

    def pending_shapes(self, tmp_path):
        return sorted(tuple(json.loads(p.read_text())["case"]["inputs"][0]["shape"])
                      for p in (tmp_path / PENDING_DIR).glob("*.json"))


def test_a_desk_drained_within_the_grace_leaves_nothing_and_earlier_scripts_wait(tmp_path):
    run = Run(tmp_path)
    desk = Desk(queued=[run.job(case(3)), Reverification(tmp_path / "x.json")])
    assert run.end.close(desk, "budget", budgeted=True, defer_on_stop=False, grace_left=lambda: 7.0) == "budget"
    assert desk.drained == [7.0] and desk.closed == 10.0 and not desk.cancelled
    assert run.left == [1] and not run.abandoned.is_set()
    assert [e.message for e in run.events] == ["triaging the last 1 failure(s) before stopping (at most 7s more)"]


def test_past_the_grace_the_jobs_and_what_their_holders_held_are_left_pending(tmp_path):
    run = Run(tmp_path)
    first, second = run.job(case(3)), run.job(case(4))
    run.known.classify(case(2, 2), WRONG)           # held by the first holder
    run.known.classify(case(3), WRONG)              # the holder's own case: written once
    desk = Desk(queued=[second], hand=[first], drains=False)
    assert run.end.close(desk, "budget", budgeted=True, defer_on_stop=False, grace_left=lambda: 0.0) == "budget"
    assert desk.cancelled and run.abandoned.is_set() and desk.closed == 1.0
    assert run.pending_shapes(tmp_path) == [(2, 2), (3,), (4,)]
    assert run.stats.left_pending == 3 and not run.untriaged and not run.known.held
    assert "out of time to triage 2 failure(s) (and 1 held while they were)" in run.events[-1].message


def test_a_job_given_up_that_a_finding_filed_meanwhile_covers_is_a_sighting(tmp_path):
    run = Run(tmp_path)
    covered, uncovered = run.job(case(4)), run.job(case(5), RAISES)
    run.known.found.append(FoundBug(symptom_key(case(4), WRONG), None, "filed", flaky=True, case=case(4)))
    run.end.defer(Desk(queued=[covered, uncovered]))
    assert run.pending_shapes(tmp_path) == [(5,)] and run.known.sightings == {"filed": 1}
    assert run.stats.left_pending == 1


def test_a_job_whose_file_cannot_be_written_is_recorded_as_it_is(tmp_path):
    run = Run(tmp_path)
    job = run.job(case(3), written=False)
    run.pending.dir = tmp_path / "no" / "such" / "folder.json"
    (tmp_path / "no").write_text("a file where a folder goes")
    run.end.defer(Desk(queued=[job]))
    assert run.untriaged == [job] and run.stats.left_pending == 0


def test_a_ctrl_c_records_the_jobs_not_started_as_they_are(tmp_path):
    run = Run(tmp_path)
    job = run.job(case(3))
    desk = Desk(queued=[job, Reverification(tmp_path / "x.json")])
    assert run.end.close(desk, "interrupted", budgeted=False, defer_on_stop=False, grace_left=lambda: None) \
        == "interrupted"
    assert run.untriaged == [job] and run.left == [1] and desk.drained == [5.0] and desk.closed == 1.0
    desk = Desk(queued=[run.job(case(4))], drains=KeyboardInterrupt())
    assert run.end.close(desk, "budget", budgeted=False, defer_on_stop=False, grace_left=lambda: None) \
        == "interrupted"


def test_a_stopped_daemon_defers_what_its_desk_has_not_finished_in_a_second(tmp_path):
    run = Run(tmp_path)
    desk = Desk(queued=[run.job(case(3))], drains=False)
    assert run.end.close(desk, "stopped", budgeted=False, defer_on_stop=True, grace_left=lambda: None) == "stopped"
    assert desk.drained == [1.0] and run.abandoned.is_set() and run.pending_shapes(tmp_path) == [(3,)]


def test_an_unverified_findings_script_is_run_again_and_its_verdict_written(tmp_path):
    corpus, stats = Corpus(tmp_path), Stats()
    finding = Finding.create(case(3), WRONG, target_name="faulty-cpu", target_spec=TARGET, device="cpu")
    path, _ = corpus.record(finding)
    other, _ = corpus.record(Finding.create(case(4), RAISES, target_name="other", target_spec="elsewhere:target",
                                            device="cpu"))
    spent, errors = {}, []
    again = Reverifications(corpus, stats, target_spec=TARGET, share=(0, 1),
                            confirm=lambda f: {"verified": True, "script": "repro.py"},
                            spent=spent.__setitem__, harness_error=lambda *a: errors.append(a),
                            check_abandoned=lambda: None)
    queued = []
    again.queue(queued.append)
    assert queued == [Reverification(path)]                 # its own target's only
    again.run(queued[0])
    assert stats.reverified == {"verified": 1} and "reverify" in spent and not errors
    assert corpus.load()[0][[p for p, _ in corpus.load()[0]].index(path)][1].status == "new"
    again.run(queued[0])                                     # settled meanwhile: nothing again
    assert stats.reverified == {"verified": 1}
    again.left(0)
    again.left(2)
    assert stats.reverified == {"verified": 1, "left": 2}
    assert other.exists()


def test_a_script_that_cannot_run_stays_unverified_for_the_next_run(tmp_path):
    corpus, stats = Corpus(tmp_path), Stats()
    path, _ = corpus.record(Finding.create(case(3), WRONG, target_name="faulty-cpu", target_spec=TARGET,
                                           device="cpu"))
    errors = []

    def broken(finding):
        raise OSError("no interpreter")
    again = Reverifications(corpus, stats, target_spec=TARGET, share=(0, 1), confirm=broken,
                            spent=lambda *a: None, harness_error=lambda *a: errors.append(a),
                            check_abandoned=lambda: None)
    again.run(Reverification(path))
    assert len(errors) == 1 and stats.reverified == {} and corpus.load()[0][0][1].status == "unverified"
