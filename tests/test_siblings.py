"""Where a campaign draws in its own process, each Hypothesis example of a slice runs as
a family: the drawn case and its value siblings (the same recipe with fresh value seeds,
drafts.family). A sibling is drawn at no Hypothesis cost, replays with its slice and,
failing, is shrunk and recorded as a drawn case is."""
from __future__ import annotations

from dataclasses import replace

from test_harness import CLEAN, _spec, campaign, notices, scripted, wrong_values  # noqa: F401 (fixture)

from mpsfuzz.campaign import drafts, engine
from mpsfuzz.campaign.drafts import Limits, draw_slice, family
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.strategies import example_cases, value_siblings

# A value no drawn recipe has: marks the cases that are siblings.
MARK = -7.0


def test_siblings_differ_from_their_case_in_value_seeds_alone_and_are_the_same_every_time():
    spec = catalogue.get("add")
    for case in example_cases(spec, 20, seed=4):
        sibling, = value_siblings(case, 123, 1)
        assert value_siblings(case, 123, 1) == [sibling]
        assert value_siblings(case, 124, 1) != [sibling]   # another slice: other values
        assert (sibling.op, sibling.kwargs, sibling.variant) == (case.op, case.kwargs, case.variant)
        for mine, theirs in zip(case.inputs, sibling.inputs):
            assert mine.values.seed != theirs.values.seed
            assert replace(theirs, values=replace(theirs.values, seed=mine.values.seed)) == mine


def test_a_slice_holds_each_draw_followed_by_its_siblings():
    limits = Limits(max_rank=8, max_side=8, max_numel=4096, allow_variants=True, examples=20, siblings=1)
    draft = draw_slice("add", 2, 9, limits)
    assert len(draft.cases) >= 12
    # the slice's cases are families, in order (duplicates left out)
    drawn = draft.cases[0::2]
    assert draft.cases[1::2] == [family(c, draft.seed, 1)[1] for c in drawn][:len(draft.cases[1::2])]
    assert drafts.draws_for(20, 1) == 10 and drafts.draws_for(1, 1) == 1 and drafts.draws_for(20, 0) == 20
    # drafters drawing ahead: every case is a draw of its own
    assert drafts.siblings_for(0) == drafts.VALUE_SIBLINGS and drafts.siblings_for(2) == 0
    assert family(drawn[0], draft.seed, 0) == [drawn[0]]


def test_a_failure_only_a_sibling_shows_is_replayed_shrunk_and_recorded(tmp_path, scripted, registered, monkeypatch):
    """A bug of some values: only siblings (marked) of 2+ elements fail. The replay of
    the slice runs each draw's family, so Hypothesis shrinks the draw and the sibling
    follows it, to 2 elements."""
    def marked(case, salt, count):
        return [replace(s, inputs=(replace(s.inputs[0], values=replace(s.inputs[0].values, low=MARK)),
                                   *s.inputs[1:]))
                for s in value_siblings(case, salt, count)]
    monkeypatch.setattr(drafts, "value_siblings", marked)
    monkeypatch.setattr(drafts, "VALUE_SIBLINGS", 1)   # (off by default)
    registered(_spec("test.fails_some_values"))

    def fails_when_marked(case_json):
        first = case_json["inputs"][0]
        size = 1
        for side in first["shape"]:
            size *= side
        if first["values"]["low"] == MARK and size >= 2:
            return dict(CLEAN, failures=[wrong_values("test.fails_some_values").to_json()])
        return CLEAN
    scripted.behaviour["test.fails_some_values"] = fails_when_marked

    def no_triage(*args, **kwargs):   # the finding is stored as Hypothesis shrank it
        raise RuntimeError("triage left out")
    monkeypatch.setattr(engine, "triage", no_triage)
    c, events = campaign(tmp_path, ["test.fails_some_values"], max_cases=200, max_findings=1)
    result = c.run()
    found = [f for f, _, new in result.findings if new]
    assert [f.op for f in found] == ["test.fails_some_values"], notices(events)
    case = found[0].case
    assert case.inputs[0].values.low == MARK
    # shrunk by Hypothesis (triage, which would reduce it too, is left out)
    first = case.inputs[0]
    assert first.numel == 2 and first.layout == type(first.layout)() and not first.values.specials, case
