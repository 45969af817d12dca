"""Siblings: each Hypothesis example of a slice can stand for a family, the drawn case and
cases with its skeleton (op, shapes, dtypes, arguments, variant) dressed again by a
seeded PRNG (layouts, values, aliasing: strategies.siblings). A sibling costs tens of
microseconds where a draw costs a millisecond or two; it replays with its slice and,
failing, is shrunk, reduced and recorded as a drawn case is. How many a campaign wants
is lanes.default_siblings' to say: enough for drawing to keep the worker busy."""
from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
from test_fault_campaigns import FAULT_TARGET, CASES, assert_repro_proves_the_fault, findings_in, mpsfuzz
from test_harness import CLEAN, _spec, campaign, failing, notices, scripted, wrong_values  # noqa: F401 (fixture)

from mpsfuzz.campaign import drafts, lanes, recorder
from mpsfuzz.campaign.drafts import Limits, draw_slice, family
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.recipes import MATRIX_DISTRIBUTIONS, Layout
from mpsfuzz.generation.strategies import _written_inputs, example_cases, siblings, skeleton

# A value no drawn recipe has: marks the cases that are siblings.
MARK = -7.0


@pytest.mark.parametrize("op", ["add", "sum", "index_select", "linalg.solve", "mul"])
def test_siblings_keep_the_skeleton_and_dress_it_again_the_same_way_every_time(op):
    spec = catalogue.get(op)
    layouts_changed = seeds_changed = 0
    for case in example_cases(spec, 30, seed=4):
        family_ = siblings(spec, case, 123, 2)
        assert siblings(spec, case, 123, 2) == family_              # a replay derives them again
        if any(r.numel for r in case.inputs):
            assert family_ and siblings(spec, case, 124, 2) != family_   # another slice: another dressing
        assert case not in family_ and len(set(family_)) == len(family_)
        written = _written_inputs(spec, case.variant)
        for sib in family_:
            assert skeleton(sib) == skeleton(case)
            for i, (mine, theirs) in enumerate(zip(case.inputs, sib.inputs)):
                # what the op's value options fixed stays: index bounds, matrix kinds
                assert (theirs.values.low, theirs.values.high) == (mine.values.low, mine.values.high)
                if mine.values.distribution in MATRIX_DISTRIBUTIONS:
                    assert theirs.values.distribution == mine.values.distribution
                    assert not set(theirs.layout.expanded) & {len(mine.shape) - 1, len(mine.shape) - 2}
                if i in written:
                    assert not theirs.layout.expanded
                if i in spec.contiguous_inputs:
                    assert theirs.layout == Layout()
                layouts_changed += theirs.layout != mine.layout
                seeds_changed += theirs.values.seed != mine.values.seed
    assert layouts_changed > 10 and seeds_changed > 20


def test_a_users_kernel_input_declared_contiguous_stays_contiguous_in_siblings():
    spec = replace(_spec("test.contiguous_first", shapes=lambda draw, budget: [(3, 4), (3, 4)]),
                   contiguous_inputs=(0,))
    for case in example_cases(spec, 20, seed=2):
        for sib in siblings(spec, case, 9, 3):
            assert sib.inputs[0].layout == Layout()
    assert any(s.inputs[1].layout != Layout() for c in example_cases(spec, 20, seed=2) for s in siblings(spec, c, 9, 3))


def test_a_slice_holds_each_draw_followed_by_its_siblings():
    limits = Limits(max_rank=8, max_side=8, max_numel=4096, allow_variants=True, examples=30, siblings=2)
    draft = draw_slice("add", 2, 9, limits)
    assert len(draft.cases) >= 24
    # the slice's cases are families, in order: each drawn case, then its siblings
    # (duplicates left out)
    groups: list[list] = []
    for case in draft.cases:
        if groups and case in family(groups[-1][0], draft.seed, 2)[1:]:
            groups[-1].append(case)
        else:
            groups.append([case])
    assert len(groups) <= drafts.draws_for(30, 2)
    assert sum(len(g) == 3 for g in groups) >= len(groups) - 2, [len(g) for g in groups]
    assert drafts.draws_for(30, 2) == 10 and drafts.draws_for(1, 1) == 1 and drafts.draws_for(20, 0) == 20
    assert family(groups[0][0], draft.seed, 0) == [groups[0][0]]


def test_siblings_default_to_what_keeps_a_lanes_worker_busy(monkeypatch):
    """Enough siblings that a lane's drawing keeps up with its worker: one (the boundary
    siblings' place) where a lane has drafters on cores of their own, more where lanes
    share few cores, never more than MAX_SIBLINGS; none for a campaign bounded by cases
    alone."""
    def default(cores, jobs, **bounds):
        monkeypatch.setattr(os, "cpu_count", lambda: cores)
        bounds = bounds or dict(budget_s=60.0, max_cases=None)
        return lanes.default_siblings(jobs, lanes.default_draw_jobs(jobs), **bounds)
    assert default(16, 1) == default(16, 2) == default(16, 3) == 1         # drafters to spare
    assert default(16, 8) >= 1 and default(2, 1) >= 1
    assert default(16, 16) == lanes.MAX_SIBLINGS
    assert [default(16, j) for j in (1, 4, 5, 8, 15)] == sorted(default(16, j) for j in (1, 4, 5, 8, 15))
    assert default(2, 1, budget_s=None, max_cases=500) == 0
    assert default(2, 1, budget_s=None, max_cases=None) >= 1               # the daemon: until stopped
    assert default(2, 1, budget_s=30.0, max_cases=500) >= 1


def test_a_failure_only_a_sibling_shows_is_replayed_shrunk_and_recorded(tmp_path, scripted, registered, monkeypatch):
    """A bug of some dressings: only siblings (marked) of 2+ elements fail. The replay of
    the slice runs each draw's family, so Hypothesis shrinks the draw and the sibling
    dressed from it follows, to 2 elements."""
    def marked(spec, case, salt, count, **options):
        return [replace(s, inputs=(replace(s.inputs[0], values=replace(s.inputs[0].values, low=MARK)),
                                   *s.inputs[1:]))
                for s in siblings(spec, case, salt, count, **options)]
    monkeypatch.setattr(drafts, "dressed_siblings", marked)
    registered(_spec("test.fails_some_values"))

    def fails_when_marked(case_json):
        first = case_json["inputs"][0]
        size = 1
        for side in first["shape"]:
            size *= side
        if first["values"]["low"] == MARK and size >= 2:
            return failing(wrong_values("test.fails_some_values"))
        return CLEAN
    scripted.behaviour["test.fails_some_values"] = fails_when_marked

    def no_triage(*args, **kwargs):   # the finding is stored as Hypothesis shrank it
        raise RuntimeError("triage left out")
    monkeypatch.setattr(recorder, "triage", no_triage)
    c, events = campaign(tmp_path, ["test.fails_some_values"], max_cases=200, max_findings=1, siblings=1)
    result = c.run()
    found = [f for f, _, new in result.findings if new]
    assert [f.op for f in found] == ["test.fails_some_values"], notices(events)
    case = found[0].case
    assert case.inputs[0].values.low == MARK
    # shrunk by Hypothesis (triage, which would reduce it too, is left out)
    assert case.inputs[0].numel == 2, case


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["unary_offset", "bitwise_noncontig"])
def test_a_campaign_with_siblings_finds_minimises_and_proves_a_layout_fault(fault, tmp_path):
    """The fuzzer with two siblings per draw, on faults that need a layout feature: found
    by the right oracle, reduced to the minimal case, its repro verified."""
    op, oracle, is_minimal = CASES[fault]
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", op, "--target", FAULT_TARGET, "--max-cases", "900", "--seed", "3",
                  "--siblings", "2", "--corpus", str(corpus), "--timeout", "3", "--shrink-budget", "30",
                  "--max-findings", "1", "--no-progress", faults=fault, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    found = findings_in(corpus)
    assert [f["oracle"] for f in found] == [oracle], run.stdout
    assert is_minimal(found[0]), json.dumps(found[0]["case"], indent=1)
    assert_repro_proves_the_fault(found[0], fault, tmp_path)


def test_run_takes_siblings_and_refuses_a_negative_count(tmp_path):
    bad = mpsfuzz("run", "--ops", "neg", "--siblings", "-1", "--corpus", str(tmp_path / "c"), faults="none",
                  cwd=tmp_path)
    assert bad.returncode == 2 and "--siblings" in bad.stderr and "Traceback" not in bad.stderr


def test_a_boundary_sibling_empties_a_shared_dim_or_mixes_dtypes_and_is_derived_again():
    """Issue 37: a campaign's first cases of an op reach an empty input and mixed dtypes
    (the classes of pytorch#148608 and #143948), which builders draw rarely; issue 38: and
    a size only a later input has (mm's other's columns) made 0, and a real input viewed
    with the negative bit."""
    from mpsfuzz.generation.recipes import Case, TensorRecipe
    from mpsfuzz.generation.strategies import boundary_sibling
    mm = catalogue.get("mm")
    case = Case("mm", (TensorRecipe((3, 4), "float32"), TensorRecipe((4, 5), "float32")))
    seen = {}
    for salt in range(40):
        edge = boundary_sibling(mm, case, salt)
        assert edge == boundary_sibling(mm, case, salt)          # a replay derives it again
        shapes, dtypes = tuple(r.shape for r in edge.inputs), tuple(r.dtype for r in edge.inputs)
        if any(r.layout.bit for r in edge.inputs):
            seen["neg"] = True
            assert shapes == ((3, 4), (4, 5)) and [r.layout.bit for r in edge.inputs].count("neg") == 1
        elif dtypes == ("float32", "float32"):
            seen[shapes] = True
            assert shapes in {((0, 4), (4, 5)), ((3, 0), (0, 5)), ((3, 4), (4, 0))}, shapes
        else:
            seen["mixed"] = True
            assert shapes == ((3, 4), (4, 5)) and dtypes[0] == "float32" and dtypes[1] in mm.dtypes
    assert len(seen) == 5 and ((3, 4), (4, 0)) in seen, seen
    # a loss's two inputs of one shape stay one shape; no kind applies where both are there
    loss = Case("mse_loss", (TensorRecipe((3, 2), "float32"), TensorRecipe((3, 2), "float32")))
    edge = boundary_sibling(catalogue.get("mse_loss"), loss, 1)
    assert edge.inputs[0].shape == edge.inputs[1].shape and 0 in edge.inputs[0].shape
    assert boundary_sibling(catalogue.get("mse_loss"), edge, 1) is None


def test_every_other_draw_of_a_campaign_slice_has_a_boundary_sibling():
    limits = Limits(max_rank=8, max_side=8, max_numel=4096, allow_variants=True, examples=60, siblings=2)
    draft = draw_slice("mm", 0, 3, limits)
    empty = sum(any(r.numel == 0 for r in c.inputs) for c in draft.cases)
    mixed = sum(len({r.dtype for r in c.inputs}) > 1 for c in draft.cases)
    plain = Limits(max_rank=8, max_side=8, max_numel=4096, allow_variants=True, examples=60, siblings=0)
    alone = draw_slice("mm", 0, 3, plain)
    assert empty + mixed >= len(draft.cases) // 8, (empty, mixed, len(draft.cases))
    assert empty + mixed > sum(any(r.numel == 0 for r in c.inputs) or len({r.dtype for r in c.inputs}) > 1
                               for c in alone.cases)


@pytest.mark.slow
def test_campaign_empties_a_weights_columns_and_finds_the_renorm_that_reads_past_them(tmp_path):
    """Issue 38, zero-size dims in every tensor of a call: embedding(max_norm=) of a
    weight with rows and no columns (pytorch#195185) is reached by the ``empty-other``
    boundary (the columns are a size only the weight has), found as a crash and
    minimised with the weight still empty."""
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "embedding", "--target", FAULT_TARGET, "--budget", "60s", "--seed", "1",
                   "--corpus", str(corpus), "--no-progress", faults="embedding_renorm_of_no_columns_segfault",
                   cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert finding["oracle"] == "crash"
    weight = finding["case"]["inputs"][1]["shape"]
    assert len(weight) == 2 and weight[0] > 0 and weight[1] == 0, finding["case"]
    assert "max_norm" in dict(finding["case"]["kwargs"]), finding["case"]


def test_a_recurrent_ops_hidden_size_is_never_emptied_alone():
    """nn.LSTM refuses hidden_size=0 and cuDNN answers BAD_PARAM where CPU's functional
    op returns: the RNN ops declare their later inputs' sizes structural, and the
    ``empty-other`` boundary leaves them (the batch may still be emptied)."""
    from mpsfuzz.generation.strategies import boundary_sibling, example_cases
    for op in ("lstm", "gru_stacked", "lstm_cell"):
        spec = catalogue.get(op)
        for i, case in enumerate(example_cases(spec, 40, seed=2)):
            sibling = boundary_sibling(spec, case, i)
            if sibling is not None and any(r.numel == 0 for r in sibling.inputs):
                assert sibling.inputs[0].numel == 0, (op, sibling.describe())
    mm = catalogue.get("mm")
    assert "structural-later-sizes" not in mm.semantics


@pytest.mark.parametrize("op", ["multi_margin_loss", "multilabel_margin_loss"])
def test_an_op_whose_reference_is_undefined_when_empty_gets_no_empty_boundary(op):
    """Eager CPU returns uninitialised memory for these losses' mean and sum over an
    empty batch (and refuses an empty class dim): a comparison there means nothing, on
    the clean CPU target it is a flaky 'finding' of CPU against itself. Their other
    boundaries (multi_margin_loss's extreme margins) are still drawn."""
    import torch
    import torch.nn.functional as F
    from mpsfuzz.generation.strategies import boundary_sibling, example_cases
    # the premise, on this torch: an empty batch's mean is not the NaN of an empty mean
    # every time (uninitialised memory), and an empty class dim is refused
    with pytest.raises(RuntimeError):
        F.multilabel_margin_loss(torch.empty(3, 0), torch.empty(3, 0, dtype=torch.long))
    spec = catalogue.get(op)
    assert "undefined-when-empty" in spec.semantics
    kinds = set()
    for i, case in enumerate(example_cases(spec, 60, seed=3)):
        sibling = boundary_sibling(spec, case, i)
        if sibling is not None:
            assert all(r.numel > 0 for r in sibling.inputs), sibling.describe()
            kinds.add("extreme" if sibling.kwargs != case.kwargs else "other")
    assert ("extreme" in kinds) == (op == "multi_margin_loss"), kinds
    # the same case of an op without the tag does get its empty boundary
    mse = catalogue.get("mse_loss")
    assert "undefined-when-empty" not in mse.semantics
    assert any(any(r.numel == 0 for r in s.inputs) for i, c in enumerate(example_cases(mse, 20, seed=3))
               if (s := boundary_sibling(mse, c, i)) is not None)
