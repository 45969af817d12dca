"""A failure triaged and filed, on its own (campaign/recorder.py, issue 39): one an earlier
finding covers is a sighting without triage, and so is one that triage reduces into an
earlier finding; a triage that raises leaves the failure stored unexplained (a harness
error), unless the desk's job was given up meanwhile (then nothing is stored); a pressed
desk triages within a share of --minimise-budget. Triage is a fake, the filing real, on a
corpus on disk; no worker."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from mpsfuzz.campaign import recorder
from mpsfuzz.campaign.desk_jobs import PRESSED_SHARE
from mpsfuzz.campaign.filing import Filing
from mpsfuzz.campaign.finding_errors import Abandoned, error_type
from mpsfuzz.campaign.known_findings import FoundBug, KnownFindings
from mpsfuzz.campaign.recorder import Recorder
from mpsfuzz.campaign.slice_state import SliceState
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.events import Stats
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure, symptom_key

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))


def case(shape=(3,), dtype="float32") -> Case:
    return Case.from_json({"format": 3, "op": "neg", "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": list(shape), "dtype": dtype, "alias": None,
         "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


def err(failing: Case):
    return error_type("neg", "values", "wrong-values")(failing, WRONG, "0123456789abcdef")


class Desk:
    """The campaign's side of the recorder: what it is told and asked, and triage."""

    def __init__(self, tmp_path, monkeypatch, triage):
        self.corpus, self.known, self.stats, self.state = Corpus(tmp_path), KnownFindings(), Stats(), SliceState()
        self.errors, self.split, self.triaged = [], {}, []
        self.abandoned = threading.Event()

        def triaging(failing, failure, pool, oracles, **options):
            self.triaged.append(options)
            return triage(failing)
        monkeypatch.setattr(recorder, "triage", triaging)
        harness_error = lambda stage, op, c, exc: self.errors.append(stage)   # noqa: E731
        filing = Filing(self.corpus, self.known, self.stats, emit=lambda event: None, harness_error=harness_error,
                        spent=self.split.__setitem__, credit=lambda op: None, check_abandoned=self.check_abandoned,
                        upstream_entry=lambda c, f, device: None)
        filing.identify("faulty-cpu", "mpsfuzz.testing.faults:target", "cpu")
        self.recorder = Recorder(self.corpus, self.known, filing, self.state, oracles=("values",), reruns=1,
                                 minimise_budget_s=20.0, timeout_s=3.0, emit=lambda event: None,
                                 spent=self.split.__setitem__, harness_error=harness_error,
                                 check_abandoned=self.check_abandoned)

    def check_abandoned(self):
        if self.abandoned.is_set():
            raise Abandoned()

    def stored(self):
        return [finding for _, finding in self.corpus.load()[0]]


def broken(failing):
    raise RuntimeError("triage broke")


def test_a_failure_an_earlier_finding_covers_is_a_sighting_without_triage(tmp_path, monkeypatch):
    desk = Desk(tmp_path, monkeypatch, broken)
    failing = case()
    desk.known.found.append(FoundBug(symptom_key(failing, WRONG), None, "filed", flaky=True, case=failing))
    assert desk.recorder.record(err(failing), object(), flaky=False) == "filed"
    assert desk.triaged == [] and desk.known.sightings == {"filed": 1} and not desk.stored()


def test_a_triage_that_raises_leaves_the_failure_stored_unexplained_within_the_pressed_share(tmp_path, monkeypatch):
    desk = Desk(tmp_path, monkeypatch, broken)
    desk.state.pressed = True
    signature = desk.recorder.record(err(case()), object(), flaky=False)
    assert desk.triaged[0]["budget_s"] == 20.0 * PRESSED_SHARE and desk.triaged[0]["reruns"] == 1
    assert desk.errors == ["triage"] and "triage" in desk.split
    [finding] = desk.stored()
    assert finding.signature == signature and finding.conditions is None


def test_a_failure_triage_reduces_into_an_earlier_finding_is_a_sighting_of_it(tmp_path, monkeypatch):
    smaller = case((2,), "float16")   # the reducer moved it to the earlier finding's dtype
    desk = Desk(tmp_path, monkeypatch, lambda failing: SimpleNamespace(
        case=smaller, failure=WRONG, explanation=None, flaky=False, steps={"reduce": 1.5}))
    desk.known.found.append(FoundBug(symptom_key(smaller, WRONG), ("dtypes:float16",), "half", case=smaller))
    assert desk.recorder.record(err(case((8,))), object(), flaky=False) == "half"
    assert desk.triaged[0]["budget_s"] == 20.0 and desk.split["triage:reduce"] == 1.5
    assert desk.known.sightings == {"half": 1} and not desk.stored()


def test_a_job_given_up_while_triaged_stores_nothing_and_is_no_harness_error(tmp_path, monkeypatch):
    def killed(failing):   # its worker killed under it: the desk's jobs were given up
        desk.abandoned.set()
        raise BrokenPipeError("worker gone")
    desk = Desk(tmp_path, monkeypatch, killed)
    with pytest.raises(Abandoned):
        desk.recorder.record(err(case()), object(), flaky=False)
    assert desk.errors == [] and not desk.stored()


def test_untriaged_or_without_a_worker_the_failure_is_stored_as_it_failed(tmp_path, monkeypatch):
    desk = Desk(tmp_path, monkeypatch, broken)
    desk.recorder.record(err(case()), object(), flaky=False, triage_it=False)
    desk.recorder.record(err(case(dtype="int32")), None, flaky=False)
    assert desk.triaged == [] and len(desk.stored()) == 2
