"""Filing a triaged failure on its own (campaign/filing.py, issue 39): the finding
stored with its upstream status, its repro script's verdict, its count by status, the
event the listeners see, a special case folded into its general finding, and nothing
counted once the desk's job was given up. A corpus on disk, no worker or triage."""
from __future__ import annotations

import pytest

from mpsfuzz.campaign.filing import Filing, count_finding
from mpsfuzz.campaign.known_findings import FoundBug, KnownFindings
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.events import FindingRecorded, Notice, Stats
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))


def case(shape=(3,), gaps=()) -> Case:
    return Case.from_json({"format": 3, "op": "neg", "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": list(shape), "dtype": "float32", "alias": None,
         "layout": {"offset": 0, "gaps": list(gaps), "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


class Explanation:
    def __init__(self, *conditions):
        self.conditions = tuple(conditions)

    def to_json(self):
        return {"conditions": list(self.conditions)}


class Given(Exception):
    pass


class Desk:
    """The campaign's side of the filing: what it is told and asked."""

    def __init__(self, tmp_path, confirm=None, entry=None):
        self.corpus, self.stats = Corpus(tmp_path), Stats()
        self.known = KnownFindings()
        self.events, self.errors, self.credited, self.split = [], [], [], {}
        self.abandoned = False
        self.filing = Filing(self.corpus, self.known, self.stats, emit=self.events.append,
                             harness_error=lambda stage, op, c, exc: self.errors.append((stage, str(exc))),
                             spent=lambda stage, s: self.split.__setitem__(stage, s), credit=self.credited.append,
                             check_abandoned=self.check_abandoned, upstream_entry=lambda c, f, device: entry,
                             confirm=confirm)
        self.filing.identify("faulty-cpu", "mpsfuzz.testing.faults:target", "cpu")

    def check_abandoned(self):
        if self.abandoned:
            raise Given()

    def file(self, failing: Case, *conditions):
        path, new, finding = self.filing.store(failing, WRONG, None, Explanation(*conditions) if conditions else None,
                                               False)
        return path, new, finding, self.filing.confirmed(finding, path, new, None)


def test_count_finding_counts_by_status():
    stats = Stats()
    for status in ("new", "unverified", "known-bug", "cpu-bug", "capability", "both", "undecided"):
        count_finding(stats, status)
    count_finding(stats, "new", -1)
    assert (stats.new_findings, stats.unverified, stats.known_bugs, stats.cpu_bugs, stats.capabilities,
            stats.both, stats.undecided) == (0, 1, 1, 1, 1, 1, 1)


def test_a_finding_filed_is_stored_verified_counted_credited_and_reported(tmp_path):
    desk = Desk(tmp_path, confirm=lambda finding: {"verified": True})
    path, new, finding, signature = desk.file(case(), "layout:0")
    assert new and path.exists() and signature == finding.signature
    assert finding.status == "new" and desk.corpus.load()[0][0][1].repro == {"verified": True}
    assert desk.stats.new_findings == 1 and desk.credited == ["neg"] and "verify" in desk.split
    assert [type(e) for e in desk.events] == [FindingRecorded] and desk.events[0].new
    assert [f.signature for f in desk.known.found] == [signature]
    assert [(r[0].signature, r[1], r[2]) for r in desk.filing.recorded] == [(signature, path, True)]
    assert path.name in desk.filing.seen_files


def test_a_script_that_breaks_leaves_the_finding_unverified_and_a_harness_error(tmp_path):
    def broken(finding):
        raise OSError("no interpreter")
    desk = Desk(tmp_path, confirm=broken)
    _, _, finding, _ = desk.file(case())
    assert finding.status == "unverified" and desk.stats.unverified == 1 and desk.credited == ["neg"]
    assert desk.errors == [("report", "no interpreter")]


def test_an_upstream_bug_is_known_and_fails_nothing(tmp_path):
    class Entry:
        def to_json(self):
            return {"issue": "https://github.com/pytorch/pytorch/issues/1", "status": "open"}
    desk = Desk(tmp_path, confirm=lambda finding: {"verified": True}, entry=Entry())
    _, _, finding, _ = desk.file(case())
    assert finding.status == "known-bug" and desk.stats.known_bugs == 1 and not desk.credited


def test_the_same_signature_again_is_not_new_and_not_counted(tmp_path):
    desk = Desk(tmp_path)
    desk.file(case(), "layout:0")
    _, new, _, _ = desk.file(case(), "layout:0")
    assert not new and desk.stats.unverified == 1 and len(desk.filing.recorded) == 2


def test_a_special_case_filed_first_is_folded_into_the_general_finding(tmp_path):
    desk = Desk(tmp_path)
    special_path, _, special, _ = desk.file(case((2, 2), gaps=(1, 2)), "layout:0", "rank>=2")
    _, _, general, _ = desk.file(case((4,), gaps=(2,)), "layout:0")
    assert desk.stats.unverified == 1                                 # one bug, one finding
    assert [r[0].signature for r in desk.filing.recorded] == [general.signature]
    assert [f.signature for f in desk.known.found] == [general.signature]
    assert not special_path.exists() and (tmp_path / "merged" / special_path.name).exists()
    assert any(isinstance(e, Notice) and "special case" in e.message for e in desk.events)


def test_nothing_is_counted_once_the_desks_job_was_given_up(tmp_path):
    def given_up_meanwhile(finding):
        desk.abandoned = True
        return {"verified": True}
    desk = Desk(tmp_path, confirm=given_up_meanwhile)
    path, new, finding = desk.filing.store(case(), WRONG, None, None, False)
    with pytest.raises(Given):
        desk.filing.confirmed(finding, path, new, None)
    assert desk.stats.new_findings == desk.stats.unverified == 0 and not desk.events and not desk.filing.recorded


def test_findings_other_campaigns_filed_are_read_once(tmp_path):
    desk = Desk(tmp_path)
    other = Desk(tmp_path)
    _, _, finding, _ = other.file(case(), "layout:0")
    desk.filing.refresh()
    desk.filing.refresh()
    assert [f.signature for f in desk.known.found] == [finding.signature]
    assert isinstance(desk.known.found[0], FoundBug) and desk.filing.refreshed > 0
