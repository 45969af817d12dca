"""The campaign's known-finding bookkeeping on its own (campaign/known_findings.py, issue
39): whether a failing case is new, a sighting of a filed finding, or held by a finding
still in triage; what a holder holds and where its sightings go once triage settles; a
special case folded into its general finding. No campaign, worker or thread."""
from __future__ import annotations

import pytest

from mpsfuzz.campaign.known_findings import (FAILING_STATUSES, HELD, MAX_HELD, NEW, SIGHTING, FoundBug,
                                             KnownFindings, fails_the_run, held_key)
from mpsfuzz.corpus.finding import Finding, signature_of
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure, symptom_key

WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))
RAISES = Failure("errors", "raises", "raises", "detail", "high", ("RuntimeError",))


def _input(dtype: str, gaps=(), shape=(3,)) -> dict:
    return {"shape": list(shape), "dtype": dtype,
            "layout": {"offset": 0, "gaps": list(gaps), "permutation": [], "expanded": []},
            "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []},
            "alias": None}


def case(op: str, *inputs: dict, **kwargs) -> Case:
    return Case.from_json({"format": 3, "op": op, "variant": "functional", "inputs": list(inputs),
                           "kwargs": kwargs})


def finding(failing: Case, conditions=None, failure: Failure = WRONG, *, flaky: bool = False) -> Finding:
    return Finding.create(failing, failure, target_name="faulty-cpu", target_spec="mpsfuzz.testing.faults:target",
                          device="cpu", conditions=conditions, flaky=flaky)


GAPPED = case("sigmoid", _input("float32", gaps=[2]))
GAPPED_HALF = case("sigmoid", _input("float16", gaps=[2]))
CONTIGUOUS = case("sigmoid", _input("float32"))
HALF = case("sigmoid", _input("float16"))


def test_a_failure_no_finding_covers_is_new_with_its_own_signature():
    known = KnownFindings()
    assert known.classify(GAPPED, WRONG) == (NEW, signature_of(GAPPED, WRONG))
    assert not known.sightings and not known.held


def test_a_failure_a_settled_finding_covers_is_a_sighting_counted_by_the_caller():
    filed = finding(GAPPED, ("layout:0",))
    known = KnownFindings([FoundBug.of(filed)])
    assert known.classify(case("sigmoid", _input("float32", gaps=[2], shape=(5,))), WRONG) == \
        (SIGHTING, filed.signature)
    assert known.classify(CONTIGUOUS, WRONG)[0] == NEW            # the trigger missing: another bug
    assert known.classify(GAPPED, RAISES)[0] == NEW               # another symptom
    assert not known.sightings                                    # classify counts nothing
    known.sight(filed.signature)
    known.sight(filed.signature, 2)
    assert known.sightings == {filed.signature: 3}


def test_beyond_its_restrictions_a_settled_finding_still_covers_its_trigger():
    """A gapped float16 finding (``layout:0`` and ``dtypes:float16``) covers a gapped
    float32 failure (issue 37): the dtype was a restriction ablation drew too narrow."""
    filed = finding(GAPPED_HALF, ("dtypes:float16", "layout:0"))
    known = KnownFindings([FoundBug.of(filed)])
    assert known.classify(GAPPED, WRONG) == (SIGHTING, filed.signature)
    assert known.classify(CONTIGUOUS, WRONG)[0] == NEW


def test_a_finding_recorded_before_ablation_covers_its_own_signature_only():
    filed = finding(GAPPED)     # conditions None
    known = KnownFindings([FoundBug.of(filed)])
    assert known.classify(GAPPED, WRONG) == (SIGHTING, filed.signature)
    assert known.classify(CONTIGUOUS, WRONG) == (NEW, signature_of(CONTIGUOUS, WRONG)) != (NEW, filed.signature)


def test_a_flaky_finding_covers_every_case_of_its_symptom():
    known = KnownFindings([FoundBug.of(finding(GAPPED, flaky=True))])
    assert known.classify(CONTIGUOUS, WRONG)[0] == SIGHTING
    assert known.classify(CONTIGUOUS, RAISES)[0] == NEW


def test_a_holder_holds_its_symptom_once_per_trigger_shape_and_not_its_own_replay():
    known = KnownFindings()
    holder = known.open_holder(HALF, WRONG)
    assert holder.provisional and holder.signature == "in-triage-1" and holder in known.found
    assert known.classify(GAPPED, WRONG) == (HELD, holder.signature)
    assert known.classify(GAPPED, WRONG) == (HELD, holder.signature)     # the same trigger shape
    assert known.classify(HALF, WRONG) == (HELD, holder.signature)
    shapes = known.held[holder.signature]
    assert sorted(n for _, _, n in shapes.values()) == [1, 2] and held_key(GAPPED) in shapes
    # On the desk's thread, shrinking the holder's own failure, the holder does not cover it.
    assert known.classify(HALF, WRONG, besides=holder)[0] == NEW
    assert known.open_holder(HALF, WRONG).signature == "in-triage-2"


def test_past_max_held_shapes_a_holder_counts_sightings_instead():
    known = KnownFindings()
    holder = known.open_holder(HALF, WRONG)
    for n in range(MAX_HELD + 3):     # a trigger shape each (their arguments differ)
        assert known.classify(case("sigmoid", _input("float32"), n=n), WRONG) == (HELD, holder.signature)
    assert len(known.held[holder.signature]) == MAX_HELD
    assert known.sightings == {holder.signature: 3}     # of what the holder becomes


def test_settled_lookups_see_no_holder():
    known = KnownFindings()
    known.open_holder(HALF, WRONG)
    assert known.covering(HALF, WRONG).provisional
    assert known.covering(HALF, WRONG, settled=True) is None
    assert known.sighting(HALF, WRONG) is None and not known.sightings
    filed = finding(HALF, ("dtypes:float16",))
    known.add(filed)
    assert known.covering(HALF, WRONG).provisional                     # the holder came first
    assert known.covering(HALF, WRONG, settled=True).signature == filed.signature
    assert known.sighting(HALF, WRONG) == filed.signature
    assert known.sightings == {filed.signature: 1}


def test_a_holder_retired_hands_its_sightings_to_what_it_became_and_its_held_failures_back():
    known = KnownFindings()
    holder = known.open_holder(HALF, WRONG)
    known.classify(GAPPED, WRONG)
    known.sight(holder.signature, 4)
    held = known.retire(holder, "became")
    assert [c for c, _, _ in held.values()] == [GAPPED]
    assert holder not in known.found and not known.held
    assert known.sightings == {"became": 4}
    # Nothing recorded: its sightings go nowhere.
    other = known.open_holder(HALF, WRONG)
    known.sight(other.signature)
    known.retire(other, None)
    assert known.sightings == {"became": 4}


def test_held_failures_are_taken_whole():
    known = KnownFindings()
    first, second = known.open_holder(HALF, WRONG), known.open_holder(GAPPED, RAISES)
    known.classify(GAPPED_HALF, WRONG)
    known.classify(GAPPED, RAISES)
    taken = known.take_held()
    assert set(taken) == {first.signature, second.signature} and not known.held


def test_matching_that_raises_is_reported_and_covers_nothing():
    class Broken(FoundBug):
        def covers(self, *args):
            raise ValueError("broken conditions")
    errors = []
    known = KnownFindings([Broken(symptom_key(HALF, WRONG), ("x",), "sig")],
                          on_error=lambda failing, exc: errors.append((failing, str(exc))))
    with pytest.raises(ValueError):
        known.classify(HALF, WRONG)         # the campaign drops the failure as a harness error
    assert known.covering_or_none(HALF, WRONG) is None
    assert known.sighting(HALF, WRONG) is None
    assert errors == [(HALF, "broken conditions")] * 2 and not known.sightings


def test_an_op_with_a_settled_finding_is_known_a_holder_is_not():
    known = KnownFindings()
    known.open_holder(HALF, WRONG)
    assert not known.has_finding_of("sigmoid")
    known.add(finding(HALF, ("dtypes:float16",)))
    assert known.has_finding_of("sigmoid") and not known.has_finding_of("tanh")


def test_findings_read_again_are_added_unless_known_by_signature():
    filed = finding(HALF, ("dtypes:float16",))
    known = KnownFindings([FoundBug.of(filed)])
    other = finding(GAPPED, ("layout:0",))
    known.add_new([filed, other])
    assert [f.signature for f in known.found] == [filed.signature, other.signature]


def test_a_special_case_folds_into_its_general_finding_with_its_sightings():
    """The 2-D gapped finding, once a 1-D one shows the rank does not matter, is part of
    it: one bug, one finding."""
    two_d = finding(case("sigmoid", _input("float32", gaps=[1, 2], shape=(2, 2))), ("layout:0", "rank>=2"))
    general = finding(GAPPED, ("layout:0",))
    known = KnownFindings([FoundBug.of(two_d), FoundBug.of(finding(HALF, ("dtypes:float16",)))])
    known.sight(two_d.signature, 3)
    specials = known.special_cases_of(general)
    assert [f.signature for f in specials] == [two_d.signature]
    known.add(general)
    known.fold(specials[0], general.signature)
    assert two_d.signature not in {f.signature for f in known.found}
    assert known.sightings == {general.signature: 3}
    assert not known.special_cases_of(general)


def test_only_new_and_unverified_findings_fail_the_run():
    assert FAILING_STATUSES == ("new", "unverified")
    assert fails_the_run("new") and fails_the_run("unverified")
    assert not any(fails_the_run(s) for s in ("known-bug", "both", "unconfirmed", "undecided", "flaky", "cpu-bug",
                                              "capability", "layout-propagation", "fixed"))
