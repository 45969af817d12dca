"""What a daemon's campaign keeps for its whole life is bounded: message tables past
their cap count under one row per op, behaviours are kept as capped hashes."""
from __future__ import annotations

from mpsfuzz.campaign import engine
from mpsfuzz.campaign.finding_errors import error_type


def test_a_message_table_keeps_at_most_its_cap_of_rows(monkeypatch):
    monkeypatch.setattr(engine, "MAX_MESSAGES", 3)
    table: dict = {}
    for n in range(10):
        engine._count_message(table, "add", f"size {n} not supported")
    engine._count_message(table, "add", "size 0 not supported")      # a row it has
    assert len(table) == 4                                            # 3 rows and the overflow
    assert table[("add", "size 0 not supported")] == 2
    assert table[("add", engine.OTHER_MESSAGES)] == 7
    assert sum(table.values()) == 11                                  # nothing uncounted


def test_a_failure_waiting_for_triage_keeps_no_traceback(tmp_path):
    """Failures can wait for triage by the dozen: each must not keep alive the frames
    (and the drawn data) of the Hypothesis run that raised it."""
    from mpsfuzz.generation.recipes import Case
    from mpsfuzz.oracles import Failure

    campaign = engine.Campaign(engine.CampaignConfig(ops=["neg"], target_spec="mpsfuzz.testing.faults:target",
                                                     corpus_dir=tmp_path))
    jobs = []

    class Desk:
        submit = staticmethod(jobs.append)

    campaign._intake.desk = Desk()
    case = Case.from_json({"format": 3, "op": "neg", "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": [2], "dtype": "float32", "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []},
         "alias": None}]})
    failure = Failure("values", "wrong-values", "wrong", "detail", "high", ("wrong-values",))

    def shrinking(drawn_data):   # a frame that would be kept alive with the error
        try:
            raise error_type("neg", "values", "wrong-values")(case, failure, "sig")
        except engine.FindingError as err:
            return err
    err = shrinking(bytearray(1 << 20))
    assert err.__traceback__ is not None
    campaign._intake.hand_to_desk(err, False, None)
    handed = jobs[0][0]
    assert handed.__traceback__ is None and handed.__context__ is None
    assert (handed.case, handed.failure, handed.signature) == (case, failure, "sig")
