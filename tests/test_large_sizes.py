"""The large size class of every family (issue 31): ops declare which dims may grow past
65,536, their ``@large`` variants draw them within a bounded host memory, triage names
the size, and repro scripts build the input on the device from the hash its values come from."""
from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.ops import nn_losses
from mpsfuzz.generation.large_sizes import MAX_ELEMENTS, SIDES, Grows, grows, grown, large_variant, long_dim_phrase
from mpsfuzz.generation.opspec import declare_grows
from mpsfuzz.generation.recipes import Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases

LARGE_CLASS = sorted(n for n in catalogue.all_ops() if n.endswith("@large"))

# What the issue asks the class to reach, family by family.
ASKED = ["mm", "addmm", "linear", "bmm", "baddbmm", "matmul", "pad_constant", "pad_reflect", "pad_replicate",
         "pad_circular", "conv1d", "conv2d", "max_pool1d", "avg_pool2d", "softmax", "log_softmax", "layer_norm",
         "group_norm", "cumsum", "cat", "stack", "cat_many", "stack_many", "index_select", "gather", "scatter",
         "index_add", "embedding", "sort", "topk", "add", "mul", "exp", "fft.fft", "fft.rfft", "fft.ifft",
         "randn_like", "bernoulli", "multinomial"]
# The variants made for issue 31's point 1 after the first families: many inputs,
# index_add, the 1-D transforms and the samplers.
LATER = ["cat_many@large", "stack_many@large", "hstack_many@large", "vstack_many@large", "index_add@large",
         "fft.fft@large", "fft.ifft@large", "fft.rfft@large", "fft.irfft@large", "rand_like@large",
         "randn_like@large", "bernoulli@large", "normal@large", "multinomial@large", "uniform_@large",
         "normal_@large"]


def test_every_family_the_issue_names_has_its_large_class():
    assert {v for v in catalogue.large_class(ASKED) if v.endswith("@large")} == {op + "@large" for op in ASKED}
    families = {catalogue.get(op).family for op in LARGE_CLASS}
    assert {"linalg", "nn", "reduction", "indexing", "elementwise", "fft", "random"} <= families   # (losses: nn)
    assert set(LATER) <= set(LARGE_CLASS)


def test_the_large_class_is_off_unless_asked_for():
    assert not any(op.endswith("@large") for op in catalogue.select("all"))
    assert not any(op.endswith("@large") for op in catalogue.select("nn"))
    assert "conv1d@large" in catalogue.large_class(catalogue.select("nn"))
    assert catalogue.select("bmm@large") == ["bmm@large"]
    assert not any(op.endswith("@large") for family in catalogue.families().values() for op in family)


@pytest.mark.parametrize("op", LARGE_CLASS)
def test_drawn_cases_have_a_dim_past_65535_within_the_host_bound(op):
    """Most cases of every variant have a declared dim of 65,535+; none has an input of
    more than MAX_ELEMENTS (the CPU reference runs on the whole of it), but for the
    sorts beside a side of SEGMENT_SIDES, within MAX_RESULT_ELEMENTS; most are valid for
    the op on CPU (what is not: a dtype CPU lacks, as for the op itself)."""
    spec = catalogue.get(op)
    drawn = example_cases(spec, 12, seed=5)
    assert sum(max(max(r.shape, default=0) for r in c.inputs) >= min(SIDES) for c in drawn) >= 0.5 * len(drawn)
    segmented = any(g.segments is not None for g in spec.grows)
    assert all(r.numel <= MAX_ELEMENTS or segmented and max(r.shape) in large_sizes.SEGMENT_SIDES
               and r.numel <= large_sizes.MAX_RESULT_ELEMENTS for c in drawn for r in c.inputs)
    valid = 0
    for case in drawn:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                spec.fn(*case.materialize("cpu"), **case.kwargs_dict())
                valid += 1
            except (RuntimeError, ValueError, IndexError, NotImplementedError, TypeError):
                pass
    assert valid >= 0.4 * len(drawn), f"{op}: {valid} of {len(drawn)} cases valid on CPU"


def test_small_integer_values_keep_a_long_inner_product_exact():
    """Values are small integers unless the op says otherwise: mm over an inner dim of
    131,073 in float32 is then exactly what float64 gives."""
    spec = catalogue.get("mm@large")
    long_inner = [c for c in example_cases(spec, 40, seed=1)
                  if c.inputs[0].shape[1] >= 65535 and c.inputs[0].dtype == "float32"
                  and not any(r.values.specials for r in c.inputs)]
    assert long_inner
    for case in long_inner[:3]:
        a, b = case.materialize("cpu")
        assert torch.equal((a @ b).double(), a.double() @ b.double())


def test_a_group_grows_coupled_dims_together_and_leaves_broadcast_ones():
    group = grows("rows", (1, 0), (0, -2))
    assert grown(((3,), (3, 4), (4, 3)), group, 65537) == ((3,), (65537, 4), (4, 3))   # c of addmm broadcast
    assert grown(((1, 3), (3, 4), (4, 3)), group, 65537) == ((1, 3), (65537, 4), (4, 3))
    assert grown(((3, 3), (3, 4), (4, 3)), group, 65537) == ((65537, 3), (65537, 4), (4, 3))


def test_declarations_are_checked_with_the_value_named():
    with pytest.raises(ValueError, match="kind='depth'"):
        grows("depth", (0, 0))
    with pytest.raises(ValueError, match=r"dims=\(\)"):
        Grows("rows", ())
    with pytest.raises(ValueError, match="op 'no_such_op' is not registered"):
        declare_grows({"no_such_op": (grows("rows", (0, 0)),)})


def test_a_new_op_joins_the_class_by_declaration():
    """No code per op: the declaration alone makes the variant, whose calls and
    references are the op's."""
    import dataclasses
    base = catalogue.get("exp")
    spec = dataclasses.replace(base, name="exp_declared_for_test", grows=(grows("rows", (0, 0)),))
    variant = large_variant(spec)
    assert variant.name == "exp_declared_for_test@large" and variant.base_name == "exp_declared_for_test"
    assert variant.fn is base.fn and variant.size_class == "large"
    case = example_cases(variant, 3, seed=0)[0]
    assert case.inputs[0].shape[0] in SIDES


@pytest.mark.parametrize("op,shapes,phrase", [
    ("bmm@large", ((65537, 2, 3), (65537, 3, 2)), "`input` has a batch of 65,536 or more (dim 0: 65,537 here)"),
    ("cat_many@large", ((65537, 2),),
     "`input` has 65,536 or more slices, each passed as its own tensor (dim 0: 65,537 here)"),
    ("conv1d@large", ((2, 3, 65536), (4, 3, 2), (4,)), "has a width of 65,536 or more (dim 2: 65,536 here)"),
    ("sum_large", ((65537, 3),), "`input` has a dim of 65,536 or more (dim 0: 65,537 here)"),
])
def test_the_explanation_names_the_input_the_kind_and_the_size(op, shapes, phrase):
    names = ["input", "other", "bias"][:len(shapes)]
    assert phrase in long_dim_phrase(catalogue.get(op), shapes, names, 65536)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8", "complex64"])
def test_a_repro_builds_a_large_small_integer_input_from_its_seed(dtype):
    """A repro script makes a 65,537-element seeded input (small integers outside the
    large class, which makes them from the hash) from its seed: no literal of 65,537
    values, exactly the values the campaign judged."""
    from mpsfuzz.reports.repro import tensor_lines
    recipe = TensorRecipe((65537, 2), dtype, Layout(gaps=(1, 2)), ValueRecipe("small_int", seed=99))
    lines = tensor_lines(recipe, "x")
    assert len(lines) < 8 and not any(len(line) > 400 for line in lines)
    scope = {"torch": torch, "device": "cpu"}
    exec("\n".join(lines), scope)
    assert torch.equal(scope["x"], recipe.materialize("cpu"))
    assert math.prod(scope["x"].shape) == 65537 * 2


def test_the_large_class_makes_its_integers_from_the_hash_in_the_declared_bounds():
    """Inputs without a declaration get small integers (-4..4), an int_range keeps its
    bounds (indices past 65,536 where the dim is that long), both made from the hash on
    the device; other distributions stay as declared."""
    from mpsfuzz.generation.large_sizes import hashed
    assert hashed({"distribution": "small_int"}) == {"distribution": "index_hash", "low": -4, "high": 4}
    assert hashed({"distribution": "small_int", "high": 2}) == {"distribution": "index_hash", "low": -4, "high": 2}
    assert hashed({"distribution": "int_range", "low": 0, "high": 131072, "allow_specials": False}) == {
        "distribution": "index_hash", "low": 0, "high": 131072, "allow_specials": False}
    for kept in ({"distribution": "positive"}, {"distribution": "int_range", "low": 0}, {"distribution": "bool"}):
        assert hashed(kept) == kept
    cases = example_cases(catalogue.get("index_select@large"), 12, seed=3)
    long = [c for c in cases if c.inputs[0].shape[c.kwargs_dict()["dim"]] > 65536]
    assert long
    for case in long:
        data, index = case.inputs
        n = data.shape[case.kwargs_dict()["dim"]]
        assert (data.values.distribution, data.values.low, data.values.high) == ("index_hash", -4, 4)
        assert index.values.distribution == "index_hash" and index.values.low in (0, -n) and index.values.high == n - 1
    nll = catalogue.get("nll_loss@large").input_values
    assert nll[2](((65537, 3), (65537,), (3,)), {})["distribution"] == "positive"


@pytest.mark.parametrize("layout", [Layout(), Layout(gaps=(2, 1)), Layout(offset=3), Layout(expanded=(1,)),
                                    Layout(permutation=(1, 0)), Layout(offset=1, gaps=(1, 3), permutation=(1, 0))])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "complex64"])
def test_a_repro_makes_a_large_class_input_on_the_device_from_the_hash(dtype, layout):
    """The script defines the hash and fills the input on ``device`` block by block
    (specials last), with no host draw and no literal of its values: exactly what the
    campaign made on the device and what the CPU reference made from the same hash."""
    from mpsfuzz.reports.repro import tensor_lines
    values = ValueRecipe("index_hash", seed=99, low=-4, high=4, specials=((7, "nan"), (9, "-1")))
    recipe = TensorRecipe((65537, 2), dtype, layout, values)
    lines = tensor_lines(recipe, "x")
    text = "\n".join(lines)
    assert "def index_hash_values(" in text and "torch.randint(" not in text and "device=device" in text
    assert len(text) < 3000
    scope = {"torch": torch, "device": "cpu"}
    exec(text, scope)
    made = recipe.materialize("cpu")
    assert (scope["x"].shape, scope["x"].stride()) == (made.shape, made.stride())
    as_real = (lambda t: torch.view_as_real(t)) if made.is_complex() else (lambda t: t)
    assert torch.equal(as_real(scope["x"]).nan_to_num(), as_real(made).nan_to_num())


@pytest.mark.slow
def test_a_large_class_finding_in_a_shared_storage_has_a_script_that_makes_it_on_the_device(monkeypatch):
    """bmm@large's two inputs in one storage (the second right after the first, gapped)
    and a batch of 65,537: the fault is found, and the verified script builds the shared
    storage on the device from the hash, with no host draw."""
    from mpsfuzz.corpus.finding import Finding
    from mpsfuzz.generation.recipes import Alias
    from mpsfuzz.oracles import DEFAULT, Failure
    from mpsfuzz.reports.repro import repro_for
    monkeypatch.setenv("MPSFUZZ_FAULTS", "bmm_batch_65536")
    a = TensorRecipe((65537, 2, 3), "float32", Layout(), ValueRecipe("index_hash", 4, low=-4, high=4))
    b = TensorRecipe((65537, 3, 2), "float32", Layout(gaps=(1, 2, 1)), ValueRecipe("index_hash", 5, low=-4, high=4),
                     alias=Alias(0))
    case = Case("bmm@large", (a, b))
    failures = [Failure.from_json(f) for f in judge_case(case, faults.FaultTarget(["bmm_batch_65536"]), DEFAULT).failures]
    failure = next(f for f in failures if f.oracle == "values")
    finding = Finding.create(case, failure, target_name="faults", target_spec="mpsfuzz.testing.faults:target",
                             device="cpu")
    record = repro_for(finding, verify=True, timeout_s=120)
    script = record["script"]
    assert "one storage: x and y are views of it" in script and "torch.randint(" not in script
    assert script.count("def index_hash_values(") == 1 and len(script) < 4000
    assert record["verified"] is True, record["detail"] + record.get("output", "")


def test_a_non_negative_probe_keeps_a_large_class_input_made_from_the_hash():
    """Triage's "non-negative values" probe moves a bounded hash's range to start at 0
    (still made on the device), as it does an int_range's."""
    from mpsfuzz.triage import edits
    recipe = TensorRecipe((65537,), "float32", values=ValueRecipe("index_hash", 1, low=-4, high=4))
    probed = edits.non_negative(recipe)
    assert (probed.values.distribution, probed.values.low, probed.values.high) == ("index_hash", 0, 4)
    assert float(probed.materialize("cpu").min()) == 0


@pytest.mark.parametrize("op", LATER)
def test_the_later_variants_round_trip_through_json(op):
    """A case of each later variant is the same case, and the same tensors, once written
    to JSON and read back (what a corpus and a repro script hold)."""
    from mpsfuzz.generation.recipes import Case
    for case in example_cases(catalogue.get(op), 4, seed=7):
        back = Case.from_json(json.loads(json.dumps(case.to_json())))
        assert back == case
        for a, b in zip(case.materialize("cpu"), back.materialize("cpu")):
            assert torch.equal(_bytes(a), _bytes(b))
            assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as bytes, in logical order (complex32 has no equal kernel on CPU)."""
    return torch.empty(t.shape, dtype=t.dtype).copy_(t).view(-1).view(torch.uint8)


def _tensors_joined(fn, x, kwargs) -> list[int]:
    """How many tensors each aten.cat/aten.stack call of ``fn(x)`` is given."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        counts: list = []

        def __torch_dispatch__(self, func, types, args=(), kw=None):
            if func.overloadpacket in (torch.ops.aten.cat, torch.ops.aten.stack):
                self.counts.append(len(args[0]))
            return func(*args, **(kw or {}))
    mode = Count()
    mode.counts = []
    with mode:
        fn(x, **kwargs)
    return mode.counts


@pytest.mark.slow
@pytest.mark.parametrize("op", ["cat_many", "stack_many", "hstack_many", "vstack_many"])
def test_many_input_ops_pass_one_tensor_per_slice(op):
    """The op's small cases join a few slices (ordinary cases: valid, slices
    non-contiguous where the layout gaps or transposes the input); its large class hands
    the kernel 65,535 or more tensors from one recipe, within the host bound."""
    small, large = catalogue.get(op), catalogue.get(op + "@large")
    cases = example_cases(small, 30, seed=2)
    assert all(c.inputs[0].shape[0] <= 8 and len(c.inputs) == 1 for c in cases)
    noncontiguous = 0
    for case in cases:
        (x,) = case.materialize("cpu")
        assert _tensors_joined(small.fn, x, case.kwargs_dict()) == [x.shape[0]]
        noncontiguous += any(not s.is_contiguous() for s in x.unbind(0))
    assert noncontiguous >= 3
    for case in example_cases(large, 4, seed=3):
        (x,) = case.materialize("cpu")
        assert x.shape[0] >= 65535 and x.numel() <= MAX_ELEMENTS
        assert _tensors_joined(large.fn, x, case.kwargs_dict()) == [x.shape[0]]


@pytest.mark.parametrize("op", ["cat_many", "stack_many", "hstack_many", "vstack_many"])
def test_a_many_input_ops_call_renders_as_a_script_line(op):
    """A repro script calls the op as written in its table: the rendered line, run on the
    case's input, gives the op's result (``torch.cat(x.unbind(0), ...)``, no helper)."""
    from mpsfuzz.reports.source import Rendering
    spec = catalogue.get(op)
    case = example_cases(spec, 1, seed=4)[0]
    render = Rendering()
    kwargs = {k: repr(v) for k, v in case.kwargs_dict().items()}
    line = render.call(spec.fn, ["x"], kwargs)
    assert "x.unbind(0)" in line and not render.helpers, line
    (x,) = case.materialize("cpu")
    assert torch.equal(eval(line, {"torch": torch, "x": x}), spec.fn(x, **case.kwargs_dict()))


def test_index_add_grows_its_indices_rows_and_slices_and_stays_exact():
    """Every group of index_add's class draws valid cases with indices in range of the
    grown dim; many indices go into as many rows (about one addition each), so the sums
    stay exact in bfloat16 and the result is float64's."""
    spec = catalogue.get("index_add@large")
    kinds, exact = set(), 0
    for case in example_cases(spec, 40, seed=11):
        shapes = [r.shape for r in case.inputs]
        long_dims = {(i, d) for i, s in enumerate(shapes) for d, n in enumerate(s) if n >= 65535}
        if not long_dims:
            continue
        kinds |= {"indices" if (1, 0) in long_dims else "source rows" if (2, 0) in long_dims else "self"}
        x, index, src = case.materialize("cpu")
        kwargs = case.kwargs_dict()
        dim = kwargs["dim"] % max(1, x.dim())
        assert index.numel() == 0 or 0 <= int(index.min()) <= int(index.max()) < x.shape[dim]
        if x.is_floating_point() and case.variant == "functional" and not case.inputs[1].layout.expanded:
            got = spec.fn(x, index, src, **kwargs)
            assert torch.equal(got.double(), spec.fn(x.double(), index, src.double(), **kwargs))
            exact += 1
    assert kinds == {"indices", "source rows", "self"}, kinds
    assert exact >= 3


def test_long_transforms_stay_far_within_their_tolerance():
    """The 1-D transforms over 65,535 to 131,073 points (65,537 and 131,073 are plans of
    their own): float32 against float64 on the class's values (normal, scaled to outputs
    of O(1)) differs by under a tenth of what the values oracle allows, so a backend
    whose algorithm rounds differently is not a finding."""
    from mpsfuzz.oracles.values import leaf_tolerance
    worst = 0.0
    for op in ("fft.fft@large", "fft.ifft@large", "fft.rfft@large", "fft.irfft@large"):
        spec = catalogue.get(op)
        cases = [c for c in example_cases(spec, 16, seed=1) if c.inputs[0].dtype in ("float32", "complex64")
                 and max(c.inputs[0].shape) >= 65535 and c.variant == "functional"]
        assert cases, op
        for case in cases[:3]:
            (x,) = case.materialize("cpu")
            got = spec.fn(x, **case.kwargs_dict())
            want = spec.fn(x.to(torch.complex128 if x.is_complex() else torch.float64), **case.kwargs_dict())
            rtol, atol = leaf_tolerance(spec, case.inputs[0].dtype)
            ratio = ((got.to(want.dtype) - want).abs() / (atol + rtol * want.abs())).max()
            worst = max(worst, float(ratio))
    assert worst < 0.1, worst


@pytest.mark.parametrize("op", ["rand_like@large", "randn_like@large", "bernoulli@large", "normal@large",
                                "multinomial@large", "uniform_@large", "normal_@large"])
def test_samplers_past_65536_pass_their_judge_and_a_skewed_draw_does_not(op):
    """The distribution oracle judges a million samples as it judges a thousand: eager
    CPU's draws pass (its bounds are exact at any size: no false alarm), and the same
    draws moved as a sampler gone wrong would move them fail."""
    from mpsfuzz.oracles.distribution import judge_output
    spec = catalogue.get(op)
    judged = 0
    for case in example_cases(spec, 6, seed=3):
        if max(max(r.shape, default=0) for r in case.inputs) < 65535 or case.variant != "functional":
            continue
        inputs = case.materialize("cpu")
        kwargs = case.kwargs_dict()
        torch.manual_seed(0)
        out = spec.fn(*[t.clone() for t in inputs], **kwargs)
        assert judge_output(spec, out, inputs, kwargs) is None, case
        skewed = out.clone()
        if skewed.dtype == torch.int64:                     # multinomial: an index past the categories
            skewed.view(-1)[0] = inputs[0].shape[-1]
        else:
            skewed.mul_(2).add_(3)
        assert judge_output(spec, skewed, inputs, kwargs) is not None, case
        judged += 1
    assert judged, op


SIZE_FAULTS = {"bmm_batch_65536": ("bmm@large", "a batch of 65,536 or more"),
               "conv1d_width_65536": ("conv1d@large", "a width of 65,536 or more"),
               "softmax_dim_65536": ("softmax@large", "a dim of 65,536 or more elements")}


@pytest.mark.slow
def test_faults_past_65536_in_bmm_conv1d_and_softmax_are_found_minimised_and_explained(tmp_path):
    """A default-length campaign (no --budget: it stops at its third finding) with
    --large finds each fault, keeps the size it needs through minimisation, says so,
    verifies a repro script that builds the input on the device, and no process of it
    holds more than the README's bound of host memory."""
    import json

    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    # (the @large variants named: with --large the @huge ones join, and conv1d@huge's
    # width fault would take one of the three findings)
    run = mpsfuzz_measured("run", "--ops", "bmm@large,conv1d@large,softmax@large", "--target", FAULT_TARGET,
                           "--seed", "2",
                           "--corpus", str(corpus), "--max-findings", "3", "--no-progress",
                           faults=",".join(SIZE_FAULTS), cwd=tmp_path, timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    found = {f["op"]: f for f in findings_in(corpus) if f["status"] == "new"}
    for fault, (op, phrase) in SIZE_FAULTS.items():
        finding = found.get(op)
        assert finding is not None, (fault, sorted(found), run.stdout[-3000:])
        assert "side>=65536" in finding["conditions"], finding["explanation"]
        assert phrase in finding["explanation"], finding["explanation"]
        assert max(max(r["shape"], default=0) for r in finding["case"]["inputs"]) >= 65536
        assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
        # The inputs are made on the device from the hash: no host draw, no literal.
        script = finding["repro"]["script"]
        assert "def index_hash_values(" in script and "torch.randint(" not in script, script
        assert len(script) < 4000, len(script)
    rss_kib = int(run.stderr.strip().splitlines()[-1])
    assert rss_kib < 2 * 1024 * 1024, rss_kib


@pytest.mark.slow
def test_a_cat_of_65536_tensors_is_found_minimised_and_explained(tmp_path):
    """The fault cat_inputs_65536 (a cat wrong when given 65,536 or more tensors, as a
    kernel that batches its inputs into argument buffers on a grid dim would be): `run
    --large --ops cat_many` finds it through cat_many@large, whose one input is unbound
    into that many slices, keeps the count it needs through minimisation, names it
    with the "inputs" phrase, and verifies a script that builds the slices' storage on
    the device from its seed. (--slice 3: the first slice of large cases reaches the
    fault; about 45 s on two cores.)"""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--large", "--ops", "cat_many", "--target", FAULT_TARGET, "--seed", "2",
                           "--slice", "3", "--corpus", str(corpus), "--max-findings", "1", "--no-progress",
                           faults="cat_inputs_65536", cwd=tmp_path, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert finding["op"] == "cat_many@large" and finding["oracle"] == "values"
    assert finding["conditions"] == ["side>=65536"], finding["explanation"]
    assert "65,536 or more slices, each passed as its own tensor" in finding["explanation"]
    (x,) = finding["case"]["inputs"]
    assert x["shape"][0] >= 65536 and len(finding["case"]["inputs"]) == 1
    assert finding["repro"]["verified"] and "torch.cat(x.unbind(0)" in finding["repro"]["script"]
    assert finding["localisation"]["kernel"] == "aten::cat.default"
    assert len(json.dumps(finding)) < 100_000     # the call's 65,536 tensors are recorded by their count
    rss_kib = int(run.stderr.strip().splitlines()[-1])
    assert rss_kib < 2 * 1024 * 1024, rss_kib


def test_the_leak_measure_reads_live_memory_not_the_heap_a_many_input_call_grew():
    """A call of 131,073 slices allocates and frees tens of MiB in small blocks; the heap
    glibc keeps afterwards read as RSS made repeated calls look like a leak of 4 to 8 MiB
    a call (flaky findings in clean campaigns). With a collection, the leak measure hands
    free pages back first: what it reads is what is still alive."""
    from mpsfuzz.execution import executor
    target = load_target("cpu")
    before = executor._memory(target, collect=True)[1]
    blocks = [torch.ones(64) for _ in range(200_000)]
    del blocks
    after = executor._memory(target, collect=True)[1]
    assert after - before < executor.RSS_BYTES_PER_CALL, after - before
    kept = torch.ones(2**21)            # 8 MiB alive (and touched): counted
    assert executor._memory(target, collect=True)[1] - after >= 7 << 20
    del kept


# -- past 2^31 elements: the @huge class, judged on blocks of rows --------------------------

from mpsfuzz.execution.targets import load_target  # noqa: E402
from mpsfuzz.generation import large_sizes  # noqa: E402
from mpsfuzz.generation.recipes import Case  # noqa: E402
from mpsfuzz.oracles.judge import judge_case  # noqa: E402
from mpsfuzz.testing import faults  # noqa: E402

HUGE = sorted(n for n in catalogue.all_ops() if n.endswith("@huge"))
# (rand@huge is judged by its distribution on windows of the draw, with no reference
# rows: tests/test_huge_samples.py)
# (those whose CPU reference runs on a part of the inputs: not arange@huge, whose reference
# is its formula, nor rand@huge, judged by its distribution)
HUGE_WITH_REFERENCE = [n for n in HUGE if catalogue.get(n).distribution is None
                       and catalogue.get(n).reference_inputs is not None]


def test_sliced_groups_give_every_family_that_maps_rows_a_huge_class():
    assert {"bmm@huge", "mm@huge", "conv1d@huge", "conv2d@huge", "max_pool2d@huge", "exp@huge"} <= set(HUGE)
    # rows kept apart by their arguments (issue 38: softmax, scans, cat/stack, losses...)
    assert {"softmax@huge", "log_softmax@huge", "cumsum@huge", "sum@huge", "cat@huge", "stack@huge",
            "index_select@huge", "nll_loss@huge", "adaptive_avg_pool2d@huge", "adaptive_avg_pool3d@huge",
            "group_norm@huge"} <= set(HUGE)
    # a canonicaliser gathers from the whole input, on the host: no such op in the class
    assert "bmm@huge" in catalogue.large_class(["bmm"]) and "argmax@huge" not in catalogue.all_ops()
    assert "argmax@large" in catalogue.all_ops()
    with pytest.raises(ValueError, match=r"sliced=True with dims=\(\(0, -1\),\)"):
        grows("rows", (0, -1), sliced=True)
    with pytest.raises(ValueError, match="rows_args without sliced=True"):
        grows("rows", (0, 0), rows_args=large_sizes.without_reduction)


def test_dim_off_rows_moves_only_a_dim_that_mixes_rows_and_is_idempotent():
    move = large_sizes.dim_off_rows()
    shapes = ((5, 3, 2),)
    assert move(shapes, {"dim": 0}) == {"dim": -1} and move(shapes, {"dim": -3}) == {"dim": -1}
    assert move(shapes, {"dim": 1, "keepdim": True}) == {"dim": 1, "keepdim": True}
    assert move(shapes, {}) == {"dim": -1} and move(shapes, {"dim": None}) == {"dim": -1}
    assert move(shapes, {"dim": (0, 2)}) == {"dim": (2,)} and move(shapes, {"dim": [0, -3]}) == {"dim": [2]}
    stacked = large_sizes.dim_off_rows(new_dim=True)
    assert stacked(shapes, {"dim": -4}) == {"dim": -1} and stacked(shapes, {"dim": 3}) == {"dim": 3}
    for kwargs in ({"dim": 0}, {"dim": (0, 1)}, {}):
        once = move(shapes, kwargs)
        assert move(shapes, once) == once


@pytest.mark.parametrize("op", ["softmax@huge", "cumsum@huge", "sum@huge", "cat@huge", "stack@huge",
                                "index_select@huge", "nll_loss@huge"])
def test_huge_cases_keep_rows_apart_and_an_edit_that_mixes_them_is_outside_the_op(op):
    """Every drawn case of an op whose rows stay apart only under some arguments has
    them (a softmax along a dim other than 0, a loss without reduction); a case a
    shrinker edits to mix them (its ``dim`` dropped, or set to 0) is outside the op's
    declaration, so triage never takes it as the failure's smaller form."""
    import dataclasses
    from mpsfuzz.triage.probe import outside_declaration
    spec = catalogue.get(op)
    cases = [c for c in example_cases(spec, 12, seed=4) if c.inputs[0].rank >= 2]
    assert cases
    for case in cases:
        assert outside_declaration(case) is None, case.describe()
    case = cases[0]
    key = "reduction" if "reduction" in dict(case.kwargs) else "dim"
    mixed = {"reduction": "mean", "dim": -case.inputs[0].rank - (1 if op == "stack@huge" else 0)}[key]
    edited = dataclasses.replace(case, kwargs=tuple((k, mixed if k == key else v) for k, v in case.kwargs))
    assert "mix the rows" in (outside_declaration(edited) or "")


def test_boundary_blocks_hold_the_rows_of_both_shapes_boundaries_and_of_65536():
    blocks = large_sizes.boundary_blocks((2**31 // 6 + 2, 3, 2), (2**31 // 6 + 2, 3, 4))
    rows = {r for a, b in blocks for r in range(a, b)}
    assert {0, 65535, 65536, (2**31 - 1) // 6, 2**31 // 6, (2**31 - 1) // 12, 2**31 // 12} <= rows
    assert len(rows) < 40


@pytest.mark.parametrize("op", HUGE_WITH_REFERENCE)
def test_a_huge_case_is_judged_on_its_rows_and_the_reference_builds_only_those(op, monkeypatch):
    """With the default --max-bytes the class draws about 2^22 elements (the path CI can
    afford; 2^31 and 2^32 where the device has the memory): the op on the whole input,
    cut to the boundary rows, equals the op on those rows alone, which is all the CPU
    reference makes."""
    spec = catalogue.get(op)
    drawn = example_cases(spec, 3, seed=3)
    big = [c for c in drawn if max(r.numel for r in c.inputs) > MAX_ELEMENTS]
    assert big and all(r.values.distribution == "index_hash" and r.alias is None for c in drawn for r in c.inputs)
    for case in big[:2]:
        reference = case.inputs and spec.reference_inputs(case)
        # a few rows, not 2^22 elements (flex_attention@huge: a few batches of K and V, each
        # of FLEX_HUGE_ROW elements at most: a batch of 2^31 elements has 32,768 or more)
        rows = 3 * 12 * nn_losses.FLEX_HUGE_ROW if op == "flex_attention@huge" else 64 * 64 * 40
        assert sum(t.numel() for t in reference) < rows
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = spec.fn(*case.materialize("cpu"), **case.kwargs_dict())
            want = spec.reference_fn(*reference, **case.kwargs_dict())
        torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3, equal_nan=True)


@pytest.mark.parametrize("op, per_element", [("bmm@huge", large_sizes.GRAD_BYTES_PER_ELEMENT),
                                              ("max_pool2d@huge", large_sizes.BYTES_PER_ELEMENT)])
def test_huge_sizes_reach_2_31_and_2_32_elements_where_max_bytes_allows(op, per_element, with_settings):
    """An op with a gradient leaves room for the gradient buffers (its grad variant is
    drawn after the shapes), one without needs only the forward's."""
    limit = 112 << 30
    with_settings(max_bytes=limit)
    numels = [c.inputs[0].numel for c in example_cases(catalogue.get(op), 40, seed=1)]
    assert any(2**31 - 64 <= n < 2**32 for n in numels) and any(n >= 2**32 - 64 for n in numels)
    assert all(n * per_element <= limit for n in numels)
    # at 64 GiB, 2^32 elements leave no room for a gradient's buffers
    with_settings(max_bytes=64 << 30)
    reached = max(c.inputs[0].numel for c in example_cases(catalogue.get(op), 40, seed=1))
    assert (reached >= 2**32 - 64) == (per_element == large_sizes.BYTES_PER_ELEMENT)


def test_a_bmm_that_wraps_past_the_32_bit_limit_is_found_on_the_result_rows(monkeypatch):
    """The fault bmm_past_int32 (the result's elements past the limit written where the
    index wrapped), the limit and the boundaries lowered to 2^20 so it runs here: the
    result's rows around its own 2^20th element (not the input's) are compared, and the
    reference builds those rows alone."""
    monkeypatch.setattr(faults, "INT32_LIMIT", 2**20)
    monkeypatch.setattr(large_sizes, "BOUNDARIES", (2**20,))
    monkeypatch.setenv("MPSFUZZ_FAULTS", "bmm_past_int32")
    target = load_target("mpsfuzz.testing.faults:target")

    def case(batch):
        a = TensorRecipe((batch, 2, 1), "float16", Layout(), ValueRecipe("index_hash", seed=5))
        b = TensorRecipe((batch, 1, 2), "float16", Layout(), ValueRecipe("index_hash", seed=6))
        return Case("bmm@huge", (a, b))
    past = judge_case(case(2**20 // 2 + 8), target, ("values", "metadata", "errors"))
    assert past.valid and [f["oracle"] for f in past.failures] == ["values"]
    assert not judge_case(case(2**20 // 2 - 8), target, ("values",)).failures


def test_ops_lists_the_large_class_apart(capsys):
    from mpsfuzz.cli import main
    code = main(["ops", "--family", "linalg"])   # in this process: no fresh interpreter to start
    out, err = capsys.readouterr()
    assert code == 0, err
    line = [ln for ln in out.splitlines() if ln.startswith("large size class")]
    assert line and "bmm@large" in line[0] and "bmm@huge" in line[0] and "conv1d@large" not in line[0]


def test_a_declaration_that_grows_a_broadcast_dim_draws_no_result_past_the_bound():
    """mse_loss's rows once grew dim 0 of a 1-D target that broadcasts along the input's
    last dim: (65,537, 1) against (65,537,) is a result of 4 billion elements, and a test
    process was killed for its memory. Whatever a declaration says, no tensor a drawn
    case makes (its intermediates too, on the meta device) passes MAX_RESULT_ELEMENTS."""
    import dataclasses
    spec = dataclasses.replace(catalogue.get("mse_loss"), name="mse_loss_misdeclared",
                               grows=(grows("rows", (0, 0), (1, 0), (2, 0)),))
    variant = large_variant(spec)

    def results(cases):
        return [large_sizes.largest_tensor(spec.fn, [r.shape for r in c.inputs], [r.dtype for r in c.inputs],
                                           dict(c.kwargs)) or 0 for c in cases]
    assert max(results(example_cases(variant, 60, seed=1))) <= large_sizes.MAX_RESULT_ELEMENTS
    # the guard sees the hazard inside a loss that returns one number
    hazard = [(65537, 1), (65537,), (65537, 1)]
    assert large_sizes.largest_tensor(spec.fn, hazard, ["float32"] * 3, {"reduction": "mean"}) == 65537 ** 2
    assert large_sizes.largest_tensor(spec.fn, [(65537, 1), (1,), (65537, 1)], ["float32"] * 3, {}) == 65537


# -- the @huge class's gradients (issue 38: backward kernels past 2^31 and 65,535) ---------

def test_huge_ops_with_a_gradient_have_the_grad_variant_and_the_others_none():
    """The grad variant of the @huge class: where the base op has a gradient, of its
    sliced inputs alone (a weight's gradient sums every row: not judged on a few). The
    ops judged on samples instead of rows (generation/huge_samples.py: a selection, a
    draw) have none: a selection's gradient is a scatter into the whole input; but
    embedding_bag_max@huge's weight gradient is judged on sampled rows (pytorch#188467:
    tests/test_huge_bag_max.py)."""
    sampled_grads = {"embedding_bag_max@huge"}
    for op in HUGE:
        if not catalogue.get(op).grows:
            assert ("grad" in catalogue.get(op).variants()) == (op in sampled_grads), op
            assert (catalogue.get(op).judged_grads is not None) == (op in sampled_grads), op
            continue
        spec, base = catalogue.get(op), catalogue.get(catalogue.get(op).base)
        assert ("grad" in spec.variants()) == base.grad, op
        if base.grad:
            assert set(spec.grad_inputs) <= {i for i, _ in spec.grows[0].dims}, op
            assert spec.judged_grads is not None
    assert "grad" not in catalogue.get("max_pool2d@huge").variants()
    assert catalogue.get("conv1d@huge").grad_inputs == (0,) and catalogue.get("bmm@huge").grad_inputs == (0, 1)


def _huge_grad_case(op: str, seed: int = 3) -> Case:
    import dataclasses
    case = next(c for c in example_cases(catalogue.get(op), 24, seed=seed)
                if c.inputs[0].numel > MAX_ELEMENTS and c.inputs[0].dtype in ("float16", "bfloat16"))
    return dataclasses.replace(case, variant="grad")


def test_a_huge_grad_case_keeps_the_host_to_a_few_rows(monkeypatch):
    """The backward of a @huge case runs on the device: the upstream gradient the host
    makes is the cut rows' (the rest is made from a hash where the result is), the
    gradients are cut to the boundary rows before they are copied back, and the
    reference, the grads oracle and its kink checks build those rows alone. Here the
    device is the CPU (the fault target): the one input of the whole size the host
    makes is the device's own, with the gradient found wrong (the oracle's checks run)."""
    from mpsfuzz.execution import executor
    from mpsfuzz.generation import recipes
    monkeypatch.setenv("MPSFUZZ_FAULTS", "gelu_backward_past_int32")
    made, upstream = [], []
    generated, seeded = recipes.TensorRecipe._generated_on, executor.upstream_gradient

    def generated_on(self, device):
        made.append((torch.device(device).type, self.numel))
        return generated(self, device)

    def upstream_gradient(shape, dtype, index, seed):
        upstream.append(math.prod(shape))
        return seeded(shape, dtype, index, seed)
    monkeypatch.setattr(recipes.TensorRecipe, "_generated_on", generated_on)
    monkeypatch.setattr(executor, "upstream_gradient", upstream_gradient)
    case = _huge_grad_case("gelu@huge")
    (whole,) = [r.numel for r in case.inputs]
    result = judge_case(case, load_target("mpsfuzz.testing.faults:target"), ("values", "grads", "errors", "arbiter"))
    assert [f["oracle"] for f in result.failures] == ["grads"], result.failures
    assert made == [("cpu", whole)], made
    assert upstream and max(upstream) < 64, upstream
    # the gradients compared, on both sides: the boundary rows, not the input's size
    obs = executor.observe(case, load_target("cpu"), ("grads",))
    (dut,), (ref,) = obs.dut_side.grads, obs.ref_side.grads
    assert dut.shape == ref.shape and dut.numel() < 64 and torch.equal(dut, ref)


@pytest.mark.parametrize("op", ["bmm@huge", "conv2d@huge", "avg_pool1d@huge", "mm@huge", "softmax@huge",
                                "cumsum@huge", "cat@huge", "nll_loss@huge", "adaptive_avg_pool2d@huge",
                                "index_select@huge", "group_norm@huge"])
def test_huge_gradients_of_the_boundary_rows_equal_the_reference_of_those_rows(op):
    """Row-separability, which the reference relies on: the gradient of a sliced input's
    boundary rows, with a hash as the upstream gradient of every other row, is eager
    CPU's backward of those rows alone."""
    from mpsfuzz.execution import executor
    case = _huge_grad_case(op, seed=5)
    obs = executor.observe(case, load_target("cpu"), ("grads",))
    assert obs.dut_side.grads and len(obs.dut_side.grads) == len(catalogue.get(op).grad_inputs)
    for dut, ref in zip(obs.dut_side.grads, obs.ref_side.grads):
        assert dut.shape == ref.shape and dut.shape[0] < 64
        torch.testing.assert_close(dut, ref, rtol=2e-3, atol=2e-3)


def test_the_backward_fault_fires_past_the_class_threshold_in_backward_only():
    """gelu_backward_past_int32: the gradient of more than MAX_ELEMENTS elements (no
    @large case has as many) wrapped where a 32-bit index would wrap (scaled); the
    forward, and a backward of MAX_ELEMENTS, are right."""
    target = faults.FaultTarget(["gelu_backward_past_int32"])

    def backward(n):
        x = (torch.arange(n) % 241 - 120).div(4).to(torch.float16).requires_grad_()
        out = target.run(torch.nn.functional.gelu, x)
        (got,) = target.run(torch.autograd.grad, out, [x], torch.ones_like(out))
        (want,) = torch.autograd.grad(torch.nn.functional.gelu(x), [x], torch.ones_like(out))
        assert torch.equal(out.detach(), torch.nn.functional.gelu(x.detach()))     # the forward is right
        return got, want
    got, want = backward(MAX_ELEMENTS + 1000)
    assert not torch.equal(got, want) and torch.equal(got[:MAX_ELEMENTS], want[:MAX_ELEMENTS])
    assert target.fired["gelu_backward_past_int32"] == 1
    got, want = backward(MAX_ELEMENTS)
    assert torch.equal(got, want) and target.fired["gelu_backward_past_int32"] == 1


@pytest.mark.slow
def test_a_backward_past_the_limit_is_found_as_a_gradient_finding_minimised_and_explained(tmp_path):
    """The fault gelu_backward_past_int32 (gelu's backward kernel of a @huge case wraps
    its index; its forward is right): a short campaign of gelu@huge finds it as a
    gradient finding, minimises it with the size it needs kept, explains it by the
    large class's long dim and the grad variant, localises it to the backward kernel,
    and verifies a script that cuts the device's gradient to the rows eager CPU
    differentiates alone; no process holds more than the README's bound of host memory."""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", "gelu@huge", "--target", FAULT_TARGET, "--seed", "2",
                           "--corpus", str(corpus), "--max-findings", "1", "--no-progress",
                           faults="gelu_backward_past_int32", cwd=tmp_path, timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert (finding["op"], finding["oracle"], finding["variant"]) == ("gelu@huge", "grads", "grad"), finding["title"]
    assert finding["minimisation"], finding.keys()
    assert {"side>=65536", "variant:grad"} <= set(finding["conditions"]), finding["explanation"]
    assert "65,536 or more rows" in finding["explanation"] and "computing gradients" in finding["explanation"]
    (x,) = finding["case"]["inputs"]
    assert math.prod(x["shape"]) > MAX_ELEMENTS and x["values"]["distribution"] == "index_hash"
    assert finding["localisation"]["kernel"] == "aten::gelu_backward.default"
    assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
    script = finding["repro"]["script"]
    assert "def upstream_past_rows(" in script and "torch.cat([x.detach()[" in script, script
    rss_kib = int(run.stderr.strip().splitlines()[-1])
    assert rss_kib < 2 * 1024 * 1024, rss_kib


def test_a_mixed_dtype_sibling_of_a_huge_case_keeps_its_values_made_on_the_device():
    """cat@huge takes mixed dtypes: the boundary sibling that retypes its last input keeps
    the hash (a value distribution drawn on the host would make the reference's few rows
    unlike the device's, and the host would draw billions of values)."""
    from mpsfuzz.generation.strategies import boundary_sibling
    spec = catalogue.get("cat@huge")
    siblings = [boundary_sibling(spec, c, salt) for c in example_cases(spec, 6, seed=2) for salt in range(4)]
    retyped = [s for s in siblings if s is not None and len({r.dtype for r in s.inputs}) > 1]
    assert retyped
    assert all(r.values.distribution == "index_hash" for s in retyped for r in s.inputs)


def test_a_huge_cat_grows_every_inputs_rows_alike():
    """cat@huge joins along a dim other than its rows: an input drawn with 1 row (cat
    along dim 0 before the growth) is no broadcast and grows with the others, or the
    call is invalid on every backend."""
    for op in ("cat", "stack"):
        (group,) = [g for g in catalogue.get(op).grows if g.sliced]
        assert large_sizes.grown(((2, 3), (1, 3), (3, 3)), group, 65537) == ((65537, 3),) * 3, op
    spec = catalogue.get("cat@huge")
    for case in example_cases(spec, 40, seed=7):
        real = [r.shape for r in case.inputs if r.shape != (0,)]
        if real and len(real[0]) >= 2:
            assert len({s[0] for s in real}) == 1, [r.shape for r in case.inputs]
