"""A slice is drawn by short Hypothesis runs (drafts.runs_of): past ten valid examples a
run also mutates earlier ones, a quarter more drawing per case. The slice's cases are
the same in every process, and a failure that only a later run draws is replayed and
shrunk like one of the first run."""
from __future__ import annotations

from test_harness import CLEAN, _spec, campaign, failing, notices, scripted, wrong_values  # noqa: F401 (fixture)

from mpsfuzz.campaign import drafts, recorder
from mpsfuzz.campaign.drafts import Limits, draw_slice, runs_of, slice_seed


def test_a_slice_is_split_into_runs_of_at_most_run_examples_seeded_from_its_seed():
    runs = runs_of(77, 25, 0)
    assert [n for _, n in runs] == [10, 10, 5] and drafts.RUN_EXAMPLES == 10
    assert runs[0][0] == 77 and len({seed for seed, _ in runs}) == 3
    assert runs_of(77, 25, 0) == runs                          # the same everywhere
    assert [n for _, n in runs_of(77, 20, 1)] == [10]           # siblings: fewer draws
    assert [n for _, n in runs_of(77, 1, 0)] == [1]


def test_the_runs_draw_distinct_cases_the_same_every_time():
    limits = Limits(max_rank=8, max_side=8, max_numel=4096, allow_variants=True, examples=30)
    first, again = draw_slice("add", 4, 3, limits), draw_slice("add", 4, 3, limits)
    assert [c.to_json() for c in first.cases] == [c.to_json() for c in again.cases]
    assert len(first.cases) >= 20   # three runs, each starting from the simplest case: one kept


def test_a_failure_only_a_later_run_draws_is_replayed_and_shrunk(tmp_path, scripted, registered, monkeypatch):
    """Runs of three examples; the op fails on 2+ elements, but never on a case of the
    slice's first run. The replay reaches the later run and Hypothesis shrinks the
    failure there to 2 elements (recorded unshrunk, it would keep its drawn size)."""
    monkeypatch.setattr(drafts, "RUN_EXAMPLES", 3)
    op = "test.fails_past_the_first_run"
    registered(_spec(op))
    c, _ = campaign(tmp_path, [op])
    limits = Limits(c.config.max_rank, c.config.max_side, c.config.max_numel, c.config.allow_variants, 3, 0)
    first_run = {case.to_json()["inputs"][0]["values"]["seed"] for case in draw_slice(op, 0, c.seed, limits).cases}
    assert runs_of(slice_seed(c.seed, op, 0), 10, 0)[0] == (slice_seed(c.seed, op, 0), 3)

    def fails_past_the_first_run(case_json):
        first = case_json["inputs"][0]
        size = 1
        for side in first["shape"]:
            size *= side
        if size >= 2 and first["values"]["seed"] not in first_run:
            return failing(wrong_values(op))
        return CLEAN
    scripted.behaviour[op] = fails_past_the_first_run

    def no_triage(*args, **kwargs):   # the finding is stored as Hypothesis shrank it
        raise RuntimeError("triage left out")
    monkeypatch.setattr(recorder, "triage", no_triage)
    c, events = campaign(tmp_path, [op], max_cases=200, max_findings=1)
    found = [f for f, _, new in c.run().findings if new]
    assert [f.op for f in found] == [op], notices(events)
    first = found[0].case.inputs[0]
    assert first.numel == 2 and first.layout == type(first.layout)(), found[0].case
