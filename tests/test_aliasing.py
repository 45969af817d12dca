"""Aliasing as a layout class: inputs carved from one storage (adjacent or overlapping) and
``out=`` that is an input. Recipes build and round-trip it, strategies draw it and shrink
it away, the reducer removes it, the ablation names it, the oracles judge aliased inputs
right, repro scripts rebuild it, and campaigns on the fault target find and explain the
emulated CUDA GRU bug (weights that are adjacent views of one storage) and an out=-alias
bug by their real trigger."""
from __future__ import annotations

import copy
import json
import re
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, find, settings

from mpsfuzz.generation import catalogue, strategies
from mpsfuzz.generation.recipes import Alias, Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import Failure, all_oracles
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports.repro import input_lines
from mpsfuzz.testing.faults import FaultTarget
from mpsfuzz.triage import ablation, edits
from mpsfuzz.triage.probe import PASSES, SAME, Outcome
from mpsfuzz.triage.reduce import cost, reduce_case

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
WORKER_ORACLES = tuple(n for n, o in all_oracles().items() if o.stage in ("case", "verdict"))


def t(shape, seed=1, *, layout=Layout(), alias=None, dtype="float32", distribution="normal"):
    return TensorRecipe(tuple(shape), dtype, layout, ValueRecipe(distribution, seed=seed), alias)


def ptr(x: torch.Tensor) -> int:
    return x.untyped_storage().data_ptr()


def gru_case(*, alias=True, has_biases=False, h=2, i=3) -> Case:
    inputs = (t((4, 1, i), 1), t((1, 1, h), 2), t((3 * h, i), 3),
              t((3 * h, h), 4, alias=Alias(2) if alias else None), t((3 * h,), 5), t((3 * h,), 6))
    return Case("gru", inputs, (("batch_first", False), ("has_biases", has_biases)))


# -- recipes ----------------------------------------------------------------------------------

def test_adjacent_input_starts_where_the_earlier_one_ends_in_one_storage():
    case = gru_case()
    x, h0, w_ih, w_hh, b_ih, b_hh = case.materialize("cpu")
    assert ptr(w_ih) == ptr(w_hh) and len({ptr(x), ptr(h0), ptr(w_ih), ptr(b_ih), ptr(b_hh)}) == 5
    assert w_hh.storage_offset() == w_ih.storage_offset() + w_ih.numel()
    assert w_hh.untyped_storage().nbytes() == (w_ih.numel() + w_hh.numel()) * 4
    # disjoint memory: each holds its own recipe's values
    for recipe, tensor in zip(case.inputs, (x, h0, w_ih, w_hh, b_ih, b_hh)):
        assert torch.equal(tensor, recipe.materialize("cpu"))


def test_overlap_is_the_same_memory_seen_twice_and_the_later_input_wins():
    x = t((3, 3), 1)
    x_t = t((3, 3), 2, layout=Layout(permutation=(1, 0)), alias=Alias(0, "overlap", 0))
    a, b = Case("add", (x, x_t)).materialize("cpu")
    assert ptr(a) == ptr(b) and torch.equal(b, a.T)
    assert torch.equal(b, x_t.materialize("cpu"))  # the later input's values, where they overlap
    shifted = t((4,), 3, alias=Alias(0, "overlap", 2))
    a, s = Case("add", (t((4,), 1), shifted)).materialize("cpu")
    assert s.storage_offset() == 2 and torch.equal(a[2:], s[:2])
    assert torch.equal(a[:2], t((4,), 1).materialize("cpu")[:2])
    # ``at`` is clamped into the earlier base: still an overlap once the reducer shrinks it
    a, s = Case("add", (t((2,), 1), t((2,), 3, alias=Alias(0, "overlap", 3)))).materialize("cpu")
    assert s.storage_offset() == 1 and a[1] == s[0]


def test_views_are_built_after_the_whole_storage_is_moved():
    """On another device (meta here) the views have the CPU's strides and offsets: the
    storage moved whole, and only then were the views taken."""
    case = Case("add", (t((3, 4), 1, layout=Layout(offset=2, gaps=(2, 1))),
                        t((4, 3), 2, layout=Layout(permutation=(1, 0)), alias=Alias(0)),
                        t((2, 3), 3, layout=Layout(expanded=(0,)), alias=Alias(1, "overlap", 1))))
    cpu, meta = case.materialize("cpu"), case.materialize("meta")
    for a, b in zip(cpu, meta):
        assert (a.shape, a.stride(), a.storage_offset()) == (b.shape, b.stride(), b.storage_offset())
    assert meta[0].untyped_storage().nbytes() == cpu[0].untyped_storage().nbytes() == case.storage_sizes()[0] * 4
    again = case.materialize("cpu")
    assert all(torch.equal(a, b) for a, b in zip(cpu, again))


def test_aliased_case_round_trips_and_old_formats_read_unaliased():
    case = gru_case()
    data = json.loads(json.dumps(case.to_json()))
    assert data["format"] == 3 and data["inputs"][3]["alias"] == {"of": 2, "how": "adjacent", "at": 0}
    assert Case.from_json(data) == case
    old = copy.deepcopy(data)
    old["format"] = 2
    for r in old["inputs"]:
        del r["alias"]
    assert not Case.from_json(old).is_aliased()


def _with_alias(alias, dtype=None) -> dict:
    data = gru_case().to_json()
    data["inputs"][3]["alias"] = alias
    if dtype:
        data["inputs"][3]["dtype"] = dtype
    return data


@pytest.mark.parametrize("alias,dtype,echo", [
    ({"of": 3}, None, "of=3"),
    ({"of": 5}, None, "of=5"),
    ({"of": -1}, None, "of=-1"),
    ({"of": 2, "how": "inside"}, None, "how='inside'"),
    ({"of": 2, "how": "overlap", "at": -2}, None, "at=-2"),
    ({"of": 2, "at": 1}, None, "at=1"),
    ({"of": 2}, "float64", "dtype=float64"),
    ({"of": "2"}, None, "of='2'"),
    (3, None, "alias=3"),
    ({"to": 2}, None, "alias={'to': 2}"),
])
def test_bad_aliasing_is_a_value_error_echoing_it(alias, dtype, echo):
    with pytest.raises(ValueError, match=re.escape(echo)):
        Case.from_json(_with_alias(alias, dtype))


def test_edits_never_leave_a_broken_alias():
    case = gru_case()
    swapped = list(case.inputs)
    swapped[1], swapped[3] = swapped[3], swapped[1]     # w_hh now comes before w_ih
    assert edits.with_inputs(case, swapped).inputs[1].alias is None
    other = edits.with_input(case, 3, edits.with_dtype(case.inputs[3], "float64"))
    assert other.inputs[3].alias is None
    assert not edits.without_aliasing(case).is_aliased()
    assert edits.without_aliasing(Case("mul", (t((2,)), t((2,))), variant="out-alias")).variant == "out"


def test_two_inputs_adjacent_to_one_source_are_disjoint_and_keep_their_values():
    # binary_cross_entropy's target and weight both adjacent to the input: both were put
    # right after it, so the weight's positive values overwrote the target (CI, 2026-11-26)
    case = Case("binary_cross_entropy", (t((3,), 1), t((3,), 2, alias=Alias(0), distribution="uniform"),
                                         t((2,), 3, alias=Alias(0), distribution="positive")))
    assert case.storage_plan() == [(0, 0), (0, 3), (0, 6)]
    footprints = [elements for _, elements in case.footprints()]
    assert not footprints[1] & footprints[2] and not footprints[0] & footprints[1]
    for recipe, tensor in zip(case.inputs, case.materialize("cpu")):
        assert torch.equal(tensor, recipe.materialize("cpu"))
    # an overlap still starts inside its source, and an adjacent input after it goes past both
    spread = Case("add", (t((4,), 1), t((6,), 2, alias=Alias(0, "overlap", 2)), t((2,), 3, alias=Alias(0))))
    assert spread.storage_plan() == [(0, 0), (0, 2), (0, 8)]


# -- strategies --------------------------------------------------------------------------------

ALIAS_OPS = ("add", "mm", "where", "gru", "lstm_cell", "index_add", "matmul", "linalg.solve")


@pytest.mark.slow
def test_strategies_draw_aliasing_in_about_a_tenth_of_the_cases_that_can_have_it():
    eligible = aliased = 0
    for op in ALIAS_OPS:
        spec = catalogue.get(op)
        for case in strategies.example_cases(spec, 150, seed=3):
            same_dtype = any(case.inputs[k].dtype == case.inputs[j].dtype
                             for j in range(1, len(case.inputs)) for k in range(j))
            eligible += same_dtype
            aliased += case.is_aliased()
            assert same_dtype or not case.is_aliased()
            written = strategies._written_inputs(spec, case.variant)
            for j, r in enumerate(case.inputs):
                if r.alias is not None:
                    assert r.alias.of < j and case.inputs[r.alias.of].dtype == r.dtype
                    if r.alias.how == "overlap":  # never under what the call writes
                        assert j not in written and r.alias.of not in written
            assert_memory_is_shared_only_where_allowed(case, written)
    share = aliased / eligible
    assert 0.05 <= share <= 0.2, f"aliased: {share:.1%} of {eligible}"


def assert_memory_is_shared_only_where_allowed(case: Case, written: set[int]) -> None:
    """Inputs that share memory are never written by the call and hold values of one kind
    (whatever chain of adjacent and overlapping inputs put them there)."""
    footprints = case.footprints()
    for j, (storage, elements) in enumerate(footprints):
        for i in range(j):
            if footprints[i][0] == storage and footprints[i][1] & elements:
                assert i not in written and j not in written, case.describe()
                assert strategies._may_overlap(case.inputs[i], case.inputs[j]), case.describe()


def test_inputs_drawn_for_losses_and_rnns_share_memory_only_where_allowed():
    # several aliased inputs per case: where two adjacent inputs met, a target took a
    # weight's values; where an overlap ran past its source, it met what came after it
    for op in ("binary_cross_entropy", "gru", "lstm", "addcmul", "index_add", "where"):
        spec = catalogue.get(op)
        for case in strategies.example_cases(spec, 200, seed=5, alias_ratio=1.0):
            assert_memory_is_shared_only_where_allowed(case, strategies._written_inputs(spec, case.variant))


def test_aliasing_shrinks_to_one_adjacent_input_and_away():
    spec = catalogue.get("gru")
    quiet = settings(database=None, max_examples=2000, suppress_health_check=list(HealthCheck))
    minimal = find(strategies.cases(spec), lambda c: c.is_aliased(), settings=quiet)
    aliased = [(j, r.alias) for j, r in enumerate(minimal.inputs) if r.alias is not None]
    assert aliased == [(1, Alias(0))], minimal.describe()
    plain = find(strategies.cases(spec), lambda c: c.inputs[2].numel > 1, settings=quiet)
    assert not plain.is_aliased()


def test_alias_ratio_is_validated():
    with pytest.raises(ValueError, match=re.escape("alias_ratio=1.5")):
        strategies.cases(catalogue.get("add"), alias_ratio=1.5)


# -- reducer and ablation ----------------------------------------------------------------------

class FakeProber:
    """Fails the same way while ``fails(case)``; passes otherwise."""

    def __init__(self, fails):
        self.fails, self.seen = fails, []

    def classify(self, case, symptom):
        self.seen.append(case)
        return Outcome(SAME if self.fails(case) else PASSES, [], object())


def test_cost_counts_aliasing_and_the_reducer_removes_what_is_not_needed():
    case = gru_case()
    overlap = edits.with_input(case, 4, t((6,), 5, alias=Alias(3, "overlap", 2)))
    assert cost(case) < cost(overlap) and cost(edits.without_aliasing(case)) < cost(case)
    # only w_hh right after w_ih matters: the overlapping bias goes
    needs = FakeProber(lambda c: c.inputs[3].alias == Alias(2))
    reduced = reduce_case(overlap, None, (), needs, budget_s=30).case
    assert [r.alias for r in reduced.inputs] == [None, None, None, Alias(2), None, None]
    # nothing needs it: all of it goes
    reduced = reduce_case(overlap, None, (), FakeProber(lambda c: True), budget_s=30).case
    assert not reduced.is_aliased()


def test_ablation_names_the_shared_storage_of_the_weights():
    case = gru_case()
    prober = FakeProber(lambda c: c.inputs[3].alias is not None and dict(c.kwargs).get("has_biases") is False)
    explanation = ablation.explain(case, _failure(), (), prober)
    assert "alias:3" in explanation.conditions and "kwarg:has_biases" in explanation.conditions
    assert "`w_hh` and `w_ih` are views of one storage (adjacent)" in explanation.text
    assert "separate storages pass" in explanation.text and "negative" not in explanation.text
    probe = next(p for p in explanation.probes if p.feature == "alias:3")
    ablated = next(c for c in prober.seen if c.inputs[3].alias is None)
    # separate storages, same values
    assert all(torch.equal(a, b) for a, b in zip(case.materialize("cpu"), ablated.materialize("cpu")))
    assert probe.necessary and probe.question == "`w_hh` in a storage of its own"
    assert ablation.holds("alias:3", case) and not ablation.holds("alias:3", edits.without_aliasing(case))
    assert not ablation.holds("alias:2", case)


def test_ablation_names_out_that_is_an_input():
    case = Case("mul", (t((2,)), t((2,), 2)), variant="out-alias")
    explanation = ablation.explain(case, _failure(), (), FakeProber(lambda c: c.variant == "out-alias"))
    assert explanation.conditions == ("alias:out",)
    assert "`out=` is `input` itself" in explanation.text and "a separate `out=` passes" in explanation.text
    assert ablation.holds("alias:out", case) and not ablation.holds("alias:out", Case("mul", case.inputs, variant="out"))


def _failure():
    return Failure(oracle="values", kind="wrong-values", severity="high", title="t", message="m",
                   dedup_key=("wrong-values",))


def test_trigger_class_says_aliased():
    from mpsfuzz.corpus.finding import trigger_class
    trig = trigger_class(gru_case())
    assert trig["layout_class"] == "aliased" and trig["layouts"] == ["aliased"]
    assert trigger_class(gru_case(alias=False))["layout_class"] == "contiguous"


# -- oracles on aliased inputs ------------------------------------------------------------------

def _failures(case, faults=(), oracles=WORKER_ORACLES):
    result = judge_case(case, FaultTarget(list(faults)), oracles)
    assert result.valid, case.describe()
    return [(f["oracle"], f["kind"]) for f in result.failures]


def test_the_gru_fault_fires_only_on_adjacent_weights_without_biases():
    assert _failures(gru_case(), ["gru_adjacent_weights"]) == [("values", "wrong-values")]
    assert _failures(gru_case(has_biases=True), ["gru_adjacent_weights"]) == []
    assert _failures(gru_case(alias=False), ["gru_adjacent_weights"]) == []
    overlapping = edits.with_input(gru_case(), 3, replace(gru_case().inputs[3], alias=Alias(2, "overlap", 1)))
    assert _failures(overlapping, ["gru_adjacent_weights"]) == []


def test_layout_oracle_compares_aliased_inputs_with_copies_of_their_own():
    """The weights are contiguous: only separate storages tell the layout oracle's two
    runs apart (``.contiguous()`` would hand over the same views)."""
    assert _failures(gru_case(), ["gru_adjacent_weights"], oracles=("layout",)) == [("layout", "layout-wrong-values")]


@pytest.mark.parametrize("variant", ["functional", "inplace", "out", "out-alias", "method"])
def test_clean_target_passes_every_variant_with_aliased_inputs(variant):
    """Adjacent and overlapping inputs that the call only reads, and in place / out=
    writes into an input with another input right after it: nothing to report (the
    variants oracle lets memory an output shares change, and nothing else)."""
    adjacent = Case("add", (t((2, 3), 1), t((2, 3), 2, alias=Alias(0))), variant=variant)
    assert _failures(adjacent) == []
    if variant in ("functional", "method", "out"):
        overlap = Case("add", (t((3, 3), 1), t((3, 3), 2, layout=Layout(permutation=(1, 0)),
                                                 alias=Alias(0, "overlap", 0))), variant=variant)
        assert _failures(overlap) == []
    # the same memory as self (torch allows full overlap): it changes with the output
    same = Case("add", (t((2, 3), 1), t((2, 3), 2, alias=Alias(0, "overlap", 0))), variant=variant)
    assert _failures(same) == []


def test_variants_oracle_still_sees_an_input_written_that_is_no_output():
    """A write into the storage an input shares, outside any output, is still reported."""
    from mpsfuzz.testing.faults import FAULTS
    case = Case("sub", (t((2, 3), 1, layout=Layout(gaps=(1, 2))), t((2, 3), 2, alias=Alias(0))), variant="inplace")
    assert "sub_inplace_spill" in FAULTS
    kinds = _failures(case, ["sub_inplace_spill"])
    assert ("variants", "writes-outside-view") in kinds or ("variants", "input-modified") in kinds, kinds


# -- repro scripts --------------------------------------------------------------------------------

def test_repro_lines_rebuild_one_storage_exactly():
    case = Case("add", (t((2, 3), 1, layout=Layout(offset=1, gaps=(1, 2))),
                        t((3, 2), 2, layout=Layout(permutation=(1, 0)), alias=Alias(0)),
                        t((4,), 3, alias=Alias(1, "overlap", 2)), t((2,), 4)))
    names = ["a", "b", "c", "d"]
    scope = {"torch": torch, "device": "cpu"}
    exec("\n".join(input_lines(case, names)), scope)
    built = [scope[n] for n in names]
    assert len({ptr(x) for x in built[:3]}) == 1 and ptr(built[3]) != ptr(built[0])
    for got, want in zip(built, case.materialize("cpu")):
        assert (got.shape, got.stride(), got.storage_offset()) == (want.shape, want.stride(), want.storage_offset())
        assert torch.equal(got, want)


# -- campaigns ------------------------------------------------------------------------------------

def _campaign(tmp_path, op: str, fault: str) -> dict:
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", op, "--target", FAULT_TARGET, "--max-cases", "1500", "--seed", "1",
                  "--corpus", str(corpus), "--timeout", "3", "--shrink-budget", "30",
                  "--max-findings", "1", "--no-progress", faults=fault, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = findings_in(corpus)
    return finding


@pytest.mark.slow
def test_campaign_finds_the_gru_bug_and_names_the_shared_storage_of_its_weights(tmp_path):
    finding = _campaign(tmp_path, "gru", "gru_adjacent_weights")
    assert finding["op"] == "gru" and finding["oracle"] == "values"
    # The fault needs has_biases=False too; the ablation can show it only where the
    # minimised biases still have the shape has_biases=True needs (otherwise that probe
    # is invalid, and the condition is not claimed).
    conditions = set(finding["conditions"])
    assert "alias:3" in conditions and conditions <= {"alias:3", "kwarg:has_biases"}
    probe = {p["feature"]: p["verdict"] for p in finding["ablation"]["probes"]}.get("kwarg:has_biases")
    assert ("kwarg:has_biases" in conditions) == (probe == "passes"), probe
    text = finding["explanation"]
    assert "`w_hh` and `w_ih` are views of one storage (adjacent)" in text and "separate storages pass" in text
    assert "negative" not in text
    inputs = finding["case"]["inputs"]
    assert [r["alias"] for r in inputs] == [None, None, None, {"of": 2, "how": "adjacent", "at": 0}, None, None]
    assert finding["trigger"]["layout_class"] == "aliased"
    assert "w_ih and w_hh are views of it" in finding["repro"]["script"]
    assert_repro_proves_the_fault(finding, "gru_adjacent_weights", tmp_path)


@pytest.mark.slow
def test_campaign_finds_an_out_alias_bug_and_says_out_is_the_input(tmp_path):
    finding = _campaign(tmp_path, "mul", "mul_out_alias")
    assert finding["op"] == "mul" and finding["case"]["variant"] == "out-alias"
    assert finding["conditions"] == ["alias:out"]
    assert "`out=` is `input` itself" in finding["explanation"]
    assert "out=x)" in finding["repro"]["script"]
    assert_repro_proves_the_fault(finding, "mul_out_alias", tmp_path)


@pytest.mark.slow
def test_layout_repro_gives_aliased_inputs_copies_of_their_own(monkeypatch):
    """A layout finding on aliased inputs: the script's 'contiguous copies' are clones
    (``.contiguous()`` of a contiguous view is the view itself), and it reproduces."""
    from mpsfuzz.corpus.finding import Finding
    from mpsfuzz.triage.probe import Prober
    from mpsfuzz.execution.worker import WorkerPool
    from mpsfuzz.reports.repro import repro_for
    monkeypatch.setenv("MPSFUZZ_FAULTS", "gru_adjacent_weights")
    pool = WorkerPool(FAULT_TARGET, timeout_s=10, execute=judge_case)
    try:
        (failure,), _, _ = Prober(pool, ("layout",)).failures(gru_case())
    finally:
        pool.close()
    finding = Finding.create(gru_case(), failure, target_name="faulty-cpu", target_spec=FAULT_TARGET, device="cpu")
    record = repro_for(finding)
    assert "w_hh.clone(memory_format=torch.contiguous_format)" in record["script"]
    assert record["verified"] is True, (record["detail"], record["script"])


def test_out_alias_that_cpu_cannot_form_is_no_case_when_the_device_raised_first():
    """Run 6 on an H100: CUDA has no int8 ``addbmm``, so the DUT raised before the
    out=-aliasing variant could be formed; CPU computed a (7, 7) result for a (7, 1)
    input 0 and could not form it either. That is an invalid case, not a harness error."""
    class NoInt8:
        name, device = "no-int8", "cpu"

        def run(self, fn, *args, **kwargs):
            if any(isinstance(a, torch.Tensor) and a.dtype == torch.int8 for a in args):
                raise RuntimeError('"addbmm_cuda" not implemented for \'Char\'')
            return fn(*args, **kwargs)

        def synchronize(self):
            pass

        def memory_allocated(self):
            return 0

    case = Case("addbmm", (t((7, 1), 1, dtype="int8", distribution="small_int"),
                           t((2, 7, 7), 2, dtype="int8", distribution="small_int"),
                           t((2, 7, 7), 3, dtype="int8", distribution="small_int")), variant="out-alias")
    summary = judge_case(case, NoInt8(), ("values", "errors", "variants"))
    assert summary.valid is False and summary.failures == ()
