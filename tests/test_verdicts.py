"""A case's verdicts on their own (campaign/verdicts.py, issue 39): a layout note, a failure
the upstream tables suppress, held, a sighting or new; remembered for the slice and
counted once per case, on the campaign's thread only as its failing cases; a failure the
driver cannot match a harness error, dropped. No campaign, desk thread or worker."""
from __future__ import annotations

from mpsfuzz.campaign.known_findings import FoundBug, KnownFindings
from mpsfuzz.campaign.layout_notes import LayoutNotes
from mpsfuzz.campaign.slice_state import SliceState
from mpsfuzz.campaign.verdicts import CaseVerdicts
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.corpus.upstream import UpstreamEntry
from mpsfuzz.events import Notice, Stats
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure, symptom_key

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
UNSUPPORTED = Failure("errors", "dut-raises", "raises", "RuntimeError: no kernel", "medium",
                      ("dut-raises", "RuntimeError"))
NOTE = Failure("layout", "memory-format", "format", "detail", "low", ("memory-format",), blame="note",
               details={"target_format": "channels_last", "cpu_format": "contiguous"})


def case(op: str = "neg", shape=(3,), gaps=()) -> Case:
    return Case.from_json({"format": 3, "op": op, "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": list(shape), "dtype": "float32", "alias": None,
         "layout": {"offset": 0, "gaps": list(gaps), "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


class Pool:
    device = "cpu"


class Judge:
    """The campaign's side of the verdicts: what it is told and asked."""

    def __init__(self, tmp_path, table=(), on_desk=False):
        self.stats, self.state, self.known = Stats(), SliceState(), KnownFindings()
        self.events, self.errors, self.outcomes = [], [], []
        self.desk = on_desk
        self.verdicts = CaseVerdicts(self.known, self.state, self.stats, LayoutNotes(Corpus(tmp_path)), list(table),
                                     torch_version="2.6.0", emit=self.events.append,
                                     harness_error=lambda stage, op, c, exc: self.errors.append((stage, op)),
                                     case_outcome=lambda op, ok: self.outcomes.append((op, ok)),
                                     on_desk=lambda: self.desk)
        self.verdicts.identify("faulty-cpu", "cpu")


def unimplemented(op: str) -> UpstreamEntry:
    return UpstreamEntry(id="no-kernel", device="*", ops=(op,), dtypes=(), oracle="errors", kind="dut-raises",
                         layout="*", status="unimplemented", reason="no kernel", link="")


def test_a_case_failing_anew_is_new_remembered_and_counted_once_as_a_failing_case(tmp_path):
    judge = Judge(tmp_path)
    ran = []
    failing = case()

    def failures_of():
        ran.append(failing)
        return [WRONG]
    verdicts = judge.verdicts.judged(failing, "neg", failures_of, Pool())
    assert [v[0] for v in verdicts] == ["new"] and verdicts[0][2]
    assert judge.state.memo[failing] == verdicts and ran == [failing]
    assert judge.stats.failing_cases == {"new": 1} and judge.outcomes == [("neg", True)]


def test_a_sighting_is_counted_for_its_finding_and_a_failure_in_triage_is_held(tmp_path):
    judge = Judge(tmp_path)
    filed, in_triage = case("neg"), case("abs")
    judge.known.found.append(FoundBug(symptom_key(filed, WRONG), None, "filed", flaky=True, case=filed))
    holder = judge.known.open_holder(in_triage, WRONG)
    assert [v[:3:2] for v in judge.verdicts.judged(filed, "neg", lambda: [WRONG], Pool())] == [("sighting", "filed")]
    assert [v[:3:2] for v in judge.verdicts.judged(in_triage, "abs", lambda: [WRONG], Pool())] == \
        [("held", holder.signature)]
    assert judge.known.sightings == {"filed": 1} and judge.known.held[holder.signature]
    # on the desk's replay its own placeholder does not cover the failure it shrinks
    judge.state.holder = holder
    assert [v[0] for v in judge.verdicts.of(in_triage, [WRONG], Pool())] == ["new"]


def test_a_failure_the_upstream_tables_call_unimplemented_is_suppressed_and_counted(tmp_path):
    judge = Judge(tmp_path, table=[unimplemented("neg")])
    assert [v[0] for v in judge.verdicts.judged(case(), "neg", lambda: [UNSUPPORTED], Pool())] == ["suppressed"]
    assert judge.stats.suppressed == 1 and judge.stats.failing_cases == {"suppressed": 1}
    assert [v[0] for v in judge.verdicts.of(case("abs"), [UNSUPPORTED], Pool())] == ["new"]   # another op


def test_a_layout_note_is_noted_once_per_op_and_not_again_on_a_replay(tmp_path):
    judge = Judge(tmp_path)
    assert [v[0] for v in judge.verdicts.of(case(), [NOTE], Pool())] == ["noted"]
    assert [v[0] for v in judge.verdicts.of(case(shape=(4,)), [NOTE], Pool())] == ["noted"]
    assert judge.stats.layout_notes == 2
    assert [type(e) for e in judge.events] == [Notice] and "layout propagation" in judge.events[0].message
    judge.state.replaying = True   # the desk's replay: its cases were counted by the first pass
    judge.verdicts.of(case(), [NOTE], Pool())
    assert judge.stats.layout_notes == 2


def test_the_desks_cases_are_not_the_campaigns_failing_cases(tmp_path):
    judge = Judge(tmp_path, on_desk=True)
    judge.verdicts.judged(case(), "neg", lambda: [WRONG], Pool())
    assert judge.stats.failing_cases == {} and judge.outcomes == [("neg", True)]


def test_a_failure_whose_matching_raises_is_a_harness_error_and_dropped(tmp_path):
    judge = Judge(tmp_path)

    class Broken(FoundBug):
        def covers(self, case, failure, symptom):
            raise RuntimeError("matching broke")
    failing = case()
    judge.known.found.append(Broken(symptom_key(failing, WRONG), None, "broken", case=failing))
    assert judge.verdicts.of(failing, [WRONG, NOTE], Pool()) == [("noted", NOTE, None)]
    assert judge.errors == [("judge", "neg")]


def test_a_lost_case_is_an_outcome_that_counts_against_its_op(tmp_path):
    judge = Judge(tmp_path)

    def lost():
        judge.stats.harness_by_stage["execute"] = 1   # a harness error of the case, as outcomes counts it
        return []
    assert judge.verdicts.judged(case(), "neg", lost, Pool()) == []
    assert judge.outcomes == [("neg", False)]
