"""The campaign's listeners and harness errors on their own (campaign/listeners.py,
issue 39): every listener hears every event; one that raises is a harness error of stage
``report`` (counted only where the event was a harness error itself: no loop), a corpus
that cannot be written ends the run. No campaign or worker."""
from __future__ import annotations

import pytest

from mpsfuzz.atomic import CorpusWriteError
from mpsfuzz.campaign.listeners import Listeners, case_json, event_subject
from mpsfuzz.events import CaseFinished, HarnessError, Notice, Stats
from mpsfuzz.generation.recipes import Case

CASE = Case.from_json({"format": 3, "op": "neg", "variant": "functional", "kwargs": {}, "inputs": [
    {"shape": [3], "dtype": "float32", "alias": None,
     "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
     "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


def test_every_listener_hears_every_event_and_one_added_later_too():
    heard, listeners = [], []
    events = Listeners(listeners, Stats())
    listeners.append(heard.append)
    events.emit(Notice("one"))
    listeners.append(lambda e: heard.append(("second", e)))
    events.emit(Notice("two"))
    assert heard == [Notice("one"), Notice("two"), ("second", Notice("two"))]


def test_a_listener_that_raises_is_a_harness_error_about_the_events_case():
    heard, stats = [], Stats()

    def fussy(event):
        if isinstance(event, CaseFinished):
            raise ValueError("cannot print")
    events = Listeners([fussy, heard.append], stats)
    events.emit(CaseFinished("neg", valid=True, unsupported=False, shrinking=False, case=CASE))
    errors = [e for e in heard if isinstance(e, HarnessError)]
    assert len(errors) == 1 and errors[0].stage == "report" and errors[0].op == "neg"
    assert errors[0].case_json == CASE.to_json() and "cannot print" in errors[0].error
    assert stats.harness_errors == 1 and stats.harness_by_stage == {"report": 1}


def test_a_listener_that_raises_on_a_harness_error_is_only_counted():
    stats = Stats()

    def broken(event):
        raise ValueError("broken")
    events = Listeners([broken], stats)
    events.harness_error("execute", "neg", CASE, RuntimeError("worker"))
    assert stats.harness_by_stage == {"execute": 1, "report": 1}


def test_a_corpus_that_cannot_be_written_ends_the_run():
    def full(event):
        raise CorpusWriteError("/corpus", "No space left on device")
    with pytest.raises(CorpusWriteError):
        Listeners([full], Stats()).emit(Notice("x"))


def test_a_harness_error_from_a_worker_carries_its_line_and_traceback():
    heard = []
    Listeners([heard.append], Stats()).harness_error("execute", "neg", None, error="ValueError: x", trace="tb")
    assert heard == [HarnessError("execute", "neg", None, "ValueError: x", "tb")]


def test_what_a_harness_error_says_of_its_case():
    assert case_json(None) is None and case_json({"op": "neg"}) == {"op": "neg"}
    assert case_json(CASE) == CASE.to_json()

    class Unwritable:
        def to_json(self):
            raise TypeError("no")

        def __repr__(self):
            return "Unwritable()"
    assert case_json(Unwritable()) == {"repr": "Unwritable()"}
    assert event_subject(CaseFinished("neg", True, False, False, CASE)) == ("neg", CASE)
    assert event_subject(Notice("x")) == (None, None)
