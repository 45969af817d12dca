"""The large size class of every family (issue 31): ops declare which dims may grow past
65,536, their ``@large`` variants draw them within a bounded host memory, triage names
the size, and repro scripts build the input on the device from its seed."""
from __future__ import annotations

import math
import warnings

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.large_sizes import MAX_ELEMENTS, SIDES, Grows, grows, grown, large_variant, long_dim_phrase
from mpsfuzz.generation.opspec import REGISTRY, declare_grows
from mpsfuzz.generation.recipes import Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases

LARGE_CLASS = sorted(n for n, s in catalogue.all_ops().items() if s.size_class == "large")

# What the issue asks the class to reach, family by family.
ASKED = ["mm", "addmm", "linear", "bmm", "baddbmm", "matmul", "pad_constant", "pad_reflect", "pad_replicate",
         "pad_circular", "conv1d", "conv2d", "max_pool1d", "avg_pool2d", "softmax", "log_softmax", "layer_norm",
         "group_norm", "cumsum", "cat", "stack", "index_select", "gather", "scatter", "embedding", "sort", "topk",
         "add", "mul", "exp"]


def test_every_family_the_issue_names_has_its_large_class():
    assert set(catalogue.large_class(ASKED)) == {op + "@large" for op in ASKED}
    families = {catalogue.get(op).family for op in LARGE_CLASS}
    assert {"linalg", "nn", "reduction", "indexing", "elementwise"} <= families   # (losses are nn ops)


def test_the_large_class_is_off_unless_asked_for():
    assert not any(op.endswith("@large") for op in catalogue.select("all"))
    assert not any(op.endswith("@large") for op in catalogue.select("nn"))
    assert "conv1d@large" in catalogue.large_class(catalogue.select("nn"))
    assert catalogue.select("bmm@large") == ["bmm@large"]
    assert not any(op.endswith("@large") for family in catalogue.families().values() for op in family)


@pytest.mark.parametrize("op", LARGE_CLASS)
def test_drawn_cases_have_a_dim_past_65535_within_the_host_bound(op):
    """Most cases of every variant have a declared dim of 65,535+; none has an input of
    more than MAX_ELEMENTS (the CPU reference runs on the whole of it); most are valid
    for the op on CPU (what is not: a dtype CPU lacks, as for the op itself)."""
    spec = catalogue.get(op)
    drawn = example_cases(spec, 12, seed=5)
    assert sum(max(max(r.shape, default=0) for r in c.inputs) >= min(SIDES) for c in drawn) >= 0.5 * len(drawn)
    assert all(r.numel <= MAX_ELEMENTS for c in drawn for r in c.inputs)
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
    ("conv1d@large", ((2, 3, 65536), (4, 3, 2), (4,)), "has a width of 65,536 or more (dim 2: 65,536 here)"),
    ("sum_large", ((65537, 3),), "`input` has a dim of 65,536 or more (dim 0: 65,537 here)"),
])
def test_the_explanation_names_the_input_the_kind_and_the_size(op, shapes, phrase):
    names = ["input", "other", "bias"][:len(shapes)]
    assert phrase in long_dim_phrase(catalogue.get(op), shapes, names, 65536)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8", "complex64"])
def test_a_repro_builds_a_large_small_integer_input_from_its_seed(dtype):
    """A repro script makes a 65,537-element input on the device from its seed (no
    literal of 65,537 values, no host copy), exactly the values the campaign judged."""
    from mpsfuzz.reports.repro import tensor_lines
    recipe = TensorRecipe((65537, 2), dtype, Layout(gaps=(1, 2)), ValueRecipe("small_int", seed=99))
    lines = tensor_lines(recipe, "x")
    assert len(lines) < 8 and not any(len(line) > 400 for line in lines)
    scope = {"torch": torch, "device": "cpu"}
    exec("\n".join(lines), scope)
    assert torch.equal(scope["x"], recipe.materialize("cpu"))
    assert math.prod(scope["x"].shape) == 65537 * 2


SIZE_FAULTS = {"bmm_batch_65536": ("bmm@large", "a batch of 65,536 or more"),
               "conv1d_width_65536": ("conv1d@large", "a width of 65,536 or more"),
               "softmax_dim_65536": ("softmax@large", "a dim of 65,536 or more elements")}


def test_faults_past_65536_in_bmm_conv1d_and_softmax_are_found_minimised_and_explained(tmp_path):
    """A default-length campaign (no --budget: it stops at its third finding) with
    --large finds each fault, keeps the size it needs through minimisation, says so,
    verifies a repro script that builds the input on the device, and no process of it
    holds more than the README's bound of host memory."""
    import json

    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--large", "--ops", "bmm,conv1d,softmax", "--target", FAULT_TARGET, "--seed", "2",
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
        assert "torch.randint(" in finding["repro"]["script"] and len(finding["repro"]["script"]) < 4000
    rss_kib = int(run.stderr.strip().splitlines()[-1])
    assert rss_kib < 2 * 1024 * 1024, rss_kib
