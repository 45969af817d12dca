"""A failure whose signature matches a filed bug is a sighting at once, never a queued
job (issue 37, point 1): exactly covered, or having the trigger a settled finding's
conditions name and missing only their restrictions (the dtypes and sizes ablation found
failing among the few it tried). A finding whose conditions are restrictions alone, or
one still in triage, covers no further; a held failure of another trigger becomes a job
in the desk's order, not triaged ahead of it."""
from __future__ import annotations

from mpsfuzz.campaign.engine import Campaign, CampaignConfig, FoundBug
from mpsfuzz.corpus.finding import Finding
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure, symptom_key

FAULT_TARGET = "mpsfuzz.testing.faults:target"
WRONG = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))


def _input(dtype: str, gaps=(), rank: int = 1) -> dict:
    return {"shape": [3] * rank, "dtype": dtype,
            "layout": {"offset": 0, "gaps": list(gaps), "permutation": [], "expanded": []},
            "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []},
            "alias": None}


def case(op: str, *inputs: dict) -> Case:
    return Case.from_json({"format": 3, "op": op, "variant": "functional", "inputs": list(inputs), "kwargs": {}})


def filed(conditions, op="bitwise_and", *inputs) -> FoundBug:
    inputs = inputs or (_input("int64", gaps=[2]), _input("int64"))
    return FoundBug.of(Finding.create(case(op, *inputs), WRONG, target_name="faulty-cpu", target_spec=FAULT_TARGET,
                                      device="cpu", conditions=tuple(conditions)))


def beyond(found: FoundBug, failing: Case) -> bool:
    return found.covers_beyond_restrictions(failing, WRONG, symptom_key(failing, WRONG))


def test_the_trigger_without_the_restriction_is_the_same_bug():
    found = filed(("layout:0", "dtypes:int64+int32"))
    gapped_int16 = case("bitwise_and", _input("int16", gaps=[2]), _input("int16"))
    other_gapped = case("bitwise_and", _input("int16"), _input("int16", gaps=[2]))   # layout:1, not 0
    contiguous = case("bitwise_and", _input("int16"), _input("int16"))
    assert not found.covers(gapped_int16, WRONG, symptom_key(gapped_int16, WRONG))     # not exactly
    assert beyond(found, gapped_int16) and beyond(found, other_gapped)
    assert not beyond(found, contiguous)                                               # no trigger: a job


def test_restrictions_alone_name_no_trigger_and_provisional_findings_cover_no_further():
    half = filed(("dtypes:float16",), "sigmoid", _input("float16"))
    gapped_float32 = case("sigmoid", _input("float32", gaps=[2]))
    assert not beyond(half, gapped_float32)        # sigmoid wrong for float16 and wrong when gapped: two bugs
    other_op = case("bitwise_or", _input("int16", gaps=[2]), _input("int16"))
    assert not beyond(filed(("layout:0",)), other_op)   # another symptom
    holder = FoundBug(symptom_key(other_op, WRONG), None, "in-triage-1", flaky=True, case=other_op,
                      provisional=True)
    assert not beyond(holder, other_op)


def test_a_campaign_counts_it_a_sighting_at_once(tmp_path):
    found = filed(("layout:0", "dtypes:int64+int32"))
    Corpus(tmp_path).record(Finding.create(found.case, WRONG, target_name="faulty-cpu", target_spec=FAULT_TARGET,
                                           device="cpu", conditions=found.conditions))
    campaign = Campaign(CampaignConfig(ops=["bitwise_and"], target_spec=FAULT_TARGET, corpus_dir=tmp_path))

    class Pool:
        device = "cpu"
    gapped_int8 = case("bitwise_and", _input("int8", gaps=[2]), _input("int8"))
    contiguous = case("bitwise_and", _input("int8"), _input("int8"))
    assert [v[0] for v in campaign._verdicts.of(gapped_int8, [WRONG], Pool())] == ["sighting"]
    assert [v[0] for v in campaign._verdicts.of(contiguous, [WRONG], Pool())] == ["new"]


def test_a_held_failure_of_another_trigger_is_a_job_in_the_desks_order(tmp_path):
    campaign = Campaign(CampaignConfig(ops=["bitwise_and"], target_spec=FAULT_TARGET, corpus_dir=tmp_path))
    campaign.found.append(filed(("layout:0",)))
    submitted = []

    class Desks:
        def submit(self, job):
            submitted.append(job)
    campaign._intake.desk = Desks()
    gapped = case("bitwise_and", _input("int8", gaps=[2]), _input("int8"))
    contiguous = case("bitwise_and", _input("int8"), _input("int8"))
    held = {1: [gapped, WRONG, 3], 2: [contiguous, WRONG, 2]}
    campaign._intake.record_safely = lambda *a, **k: (_ for _ in ()).throw(AssertionError("triaged ahead of the desk"))
    campaign._handler.judge_held(held, None, pool=None, triage_it=True)
    assert [job[0].case for job in submitted] == [contiguous]
    assert (tmp_path / "triage-pending").is_dir() and len(list((tmp_path / "triage-pending").glob("*.json"))) == 1
    assert sum(campaign._sightings.values()) == 3
