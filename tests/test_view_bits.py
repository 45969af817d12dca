"""Conjugate and negative views as a layout class (issue 38): a complex input may carry
the conj or the neg bit, built on the device with the recipe's logical values; the
layout oracle runs the op on the resolved copy; a kernel that reads the storage and
forgets the bit is found, explained by the bit and minimised without losing it."""
from __future__ import annotations

import json
import warnings
from dataclasses import replace

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, mpsfuzz, the_one_new_finding

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")


def _recipe(bit: str, dtype: str = "complex64", **layout) -> TensorRecipe:
    return TensorRecipe((3, 4), dtype, Layout(bit=bit, **layout), ValueRecipe("normal", 7))


@pytest.mark.parametrize("bit", ["conj", "neg"])
@pytest.mark.parametrize("layout", [{}, {"offset": 2, "gaps": (1, 2)}, {"permutation": (1, 0)}, {"expanded": (0,)}])
def test_a_view_bit_keeps_the_recipes_values(bit, layout):
    recipe = _recipe(bit, **layout)
    t = recipe.materialize("cpu")
    assert (t.is_conj(), t.is_neg()) == (bit == "conj", bit == "neg")
    plain = replace(recipe, layout=replace(recipe.layout, bit="")).materialize("cpu")
    assert torch.equal(t.resolve_conj().resolve_neg(), plain)
    assert t.stride() == plain.stride() and t.storage_offset() == plain.storage_offset()
    assert recipe.kinds()[-1] == bit and not recipe.is_plain()


def test_a_view_bit_round_trips_and_old_cases_read_without_one():
    case = Case("mm", (_recipe("conj"), _recipe("neg", permutation=(1, 0))))
    data = json.loads(json.dumps(case.to_json()))
    assert Case.from_json(data) == case
    plain = Case("mm", (_recipe(""),))
    assert "bit" not in plain.to_json()["inputs"][0]["layout"]    # unchanged JSON, unchanged signatures


def test_a_view_bit_the_dtype_cannot_carry_is_refused_or_dropped():
    with pytest.raises(ValueError, match="bit='conj' needs a dtype"):
        _recipe("conj", dtype="float32")
    with pytest.raises(ValueError, match="bit='sign'"):
        _recipe("sign")
    assert _recipe("conj").retyped("float32").layout.bit == ""
    assert _recipe("neg").retyped("float64").layout.bit == "neg"


def test_complex_inputs_of_a_campaigns_draws_carry_both_bits():
    bits = {r.layout.bit for c in example_cases(catalogue.get("add"), 300, seed=1) for r in c.inputs
            if r.dtype.startswith("complex")}
    assert {"conj", "neg", ""} <= bits
    real = {r.layout.bit for c in example_cases(catalogue.get("relu"), 200, seed=1) for r in c.inputs}
    assert real == {""}


def test_the_layout_oracles_copies_resolve_the_bit():
    from mpsfuzz.execution.executor import contiguous_copies
    case = Case("mm", (_recipe("conj"), _recipe("neg")))
    copies = contiguous_copies(case, "cpu")
    assert not any(t.is_conj() or t.is_neg() for t in copies)
    assert all(torch.equal(c, t.resolve_conj().resolve_neg()) for c, t in zip(copies, case.materialize("cpu")))


def test_a_repro_script_builds_the_view_with_its_bit():
    from mpsfuzz.reports.repro import tensor_lines
    lines = "\n".join(tensor_lines(_recipe("conj", permutation=(1, 0)), "x"))
    assert ".t().conj()" in lines
    scope = {"torch": torch, "device": "cpu"}
    exec(lines, scope)
    assert scope["x"].is_conj() and torch.equal(scope["x"], _recipe("conj", permutation=(1, 0)).materialize("cpu"))


@pytest.mark.slow
def test_campaign_finds_mm_ignoring_the_conj_bit_and_keeps_the_bit_when_minimising(tmp_path):
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "mm", "--target", FAULT_TARGET, "--max-cases", "400", "--seed", "1",
                   "--corpus", str(corpus), "--no-progress", faults="mm_ignores_conj_bit", cwd=tmp_path)
    finding = the_one_new_finding(done, corpus, "values")
    bits = [r["layout"].get("bit", "") for r in finding["case"]["inputs"]]
    assert "conj" in bits, finding["case"]
    assert "conjugate view" in finding["explanation"], finding["explanation"]
    assert all(n == 1 for r in finding["case"]["inputs"] for n in r["shape"]), finding["case"]
    assert_repro_proves_the_fault(finding, "mm_ignores_conj_bit", tmp_path)


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_an_in_place_write_through_a_view_bit_stays_inside_the_view(bit):
    """The storage under a conj or neg self holds its values with the bit undone: the
    write-outside-the-view check rebuilds it through the bit (on a clean target, an
    in-place baddbmm on a neg self was filed as a write outside the view)."""
    from mpsfuzz.oracles import DEFAULT
    from mpsfuzz.oracles.judge import judge_case
    from mpsfuzz.testing.faults import FaultTarget
    c = TensorRecipe((2, 3, 4), "complex64", Layout(offset=1, gaps=(1, 2, 1), bit=bit), ValueRecipe("normal", 1))
    a = TensorRecipe((2, 3, 5), "complex64", Layout(), ValueRecipe("normal", 2))
    b = TensorRecipe((2, 5, 4), "complex64", Layout(), ValueRecipe("normal", 3))
    case = Case("baddbmm", (c, a, b), variant="inplace")
    assert judge_case(case, FaultTarget([]), DEFAULT).failures == ()


def test_an_input_read_back_keeps_its_bit_over_the_storages_own_bits():
    """The variants oracle compares an input after the call with the recipe's, bit for
    bit: the read-back carries the bit over the stored bits, never a device's own
    resolution (CUDA's negation gave zeros and NaNs other sign bits: complex inputs of
    functional calls filed as modified)."""
    from mpsfuzz.execution.executor import _input_to_cpu
    from mpsfuzz.oracles.variants import bitwise_equal
    recipe = TensorRecipe((6,), "complex128", Layout(bit="neg"),
                          ValueRecipe("small_int", 2, specials=((0, "nan"), (1, "-0.0"), (2, "0"))))
    t = recipe.materialize("cpu")
    back = _input_to_cpu(t)
    assert back.is_neg() and not back.is_conj()
    assert torch.equal(torch.view_as_real(back._neg_view()).view(torch.int64),
                       torch.view_as_real(t._neg_view()).view(torch.int64))     # the stored bits
    assert bitwise_equal(back, recipe.materialize("cpu"))


def test_an_expanded_neg_view_is_compared_by_its_stored_bits():
    """CPU resolves a stride-0 neg view to -0.0 or +0.0 by its vectorisation (a last dim
    of 2 and of 4 differ): two reads of one unchanged input compare by the bits their
    storage holds, and a real change still shows."""
    from mpsfuzz.execution.executor import _input_to_cpu
    from mpsfuzz.oracles.variants import bitwise_equal
    recipe = TensorRecipe((3, 3, 2), "complex64", Layout(expanded=(2,), bit="neg"), ValueRecipe("small_int", 707))
    t = recipe.materialize("cpu")
    assert bitwise_equal(_input_to_cpu(t), recipe.materialize("cpu"))
    changed = recipe.materialize("cpu")
    changed._neg_view()._base.view(-1)[0] += 1      # (the storage under the view)
    assert not bitwise_equal(changed, t)
