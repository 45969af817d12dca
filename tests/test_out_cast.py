"""``out=`` of another dtype (the ``out-cast`` variant, issue 38): drawn where an op's
family gives it a meaning, judged against the functional result cast into out='s dtype
where torch casts (elementwise ops), against CPU's call alone where out='s dtype is the
dtype the op computes in (reductions, scans, factories)."""
from __future__ import annotations

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation import dtypes as dt
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz


def _ints(shape, seed, dtype="int64"):
    return TensorRecipe(shape, dtype, Layout(), ValueRecipe("int_range", seed, low=-300, high=300))


def test_out_cast_is_drawn_where_the_family_gives_it_a_meaning():
    assert "out-cast" in catalogue.get("maximum").variants()
    assert "out-cast" in catalogue.get("cumsum").variants()
    assert "out-cast" not in catalogue.get("mm").variants()       # linalg refuses another out= dtype
    assert "out-cast" not in catalogue.get("normal_mean_tensor").variants()   # draws judged in their own dtype
    assert catalogue.get("maximum").out_cast == "cast" and catalogue.get("cumsum").out_cast == "computes"
    for source, intos in dt.OUT_CASTS.items():
        for into in intos:
            assert source != into and torch.can_cast(dt.to_torch(source), dt.to_torch(into)), (source, into)


@pytest.mark.parametrize("seed, into", [(2, torch.uint8), (1, torch.int16)])
def test_the_out_tensor_takes_the_main_inputs_cast_dtype(seed, into):
    """int64 is written into uint8 or int16 by the main input's value seed (pytorch#173110:
    maximum into uint8; #183391: fmin of int64 into int16), the same on every device."""
    from mpsfuzz.execution.executor import call_variant
    case = Case("maximum", (_ints((3,), seed), _ints((3,), 2)), variant="out-cast")
    inputs = case.materialize("cpu")
    out = call_variant(catalogue.get("maximum"), case, inputs, {})
    assert out.dtype == into
    assert torch.equal(out, torch.maximum(*inputs).to(into))


def test_int64_is_written_into_both_narrower_dtypes_by_the_value_seed():
    assert {dt.out_cast_dtype("int64", seed) for seed in range(4)} == {"uint8", "int16"}
    assert dt.out_cast_dtype("int64", 7) == dt.out_cast_dtype("int64", 7)
    assert dt.out_cast_dtype("float32", 1) is None


def test_an_out_cast_computed_right_is_no_finding_and_one_computed_in_the_out_dtype_is():
    case = Case("maximum", (_ints((6,), 2), _ints((6,), 3)), variant="out-cast")
    assert judge_case(case, FaultTarget([]), DEFAULT).failures == ()
    failures = judge_case(case, FaultTarget(["maximum_computes_in_the_out_dtype"]), DEFAULT).failures
    assert {f["oracle"] for f in failures} >= {"values"}, failures



def test_a_float_input_has_no_out_cast():
    """A float kernel rounds its internal result into out= once where the functional
    result cast rounds twice, which each backend chooses (sigmoid of float16 into
    bfloat16 was filed as a bug of both): out-cast is drawn for integer inputs, whose
    casts are exact."""
    import pytest
    from mpsfuzz.execution.executor import VariantNotApplicable, call_variant
    x = TensorRecipe((4,), "float16", Layout(), ValueRecipe("normal", 1))
    case = Case("sigmoid", (x,), variant="out-cast")
    with pytest.raises(VariantNotApplicable):
        call_variant(catalogue.get("sigmoid"), case, case.materialize("cpu"), {})
    assert set(dt.OUT_CASTS) <= set(dt.INTEGRAL)

@pytest.mark.slow
def test_campaign_finds_maximum_computing_in_the_out_dtype_and_explains_it(tmp_path):
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "maximum", "--target", FAULT_TARGET, "--max-cases", "600", "--seed", "1",
                   "--corpus", str(corpus), "--no-progress", faults="maximum_computes_in_the_out_dtype", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (finding,) = findings_in(corpus)
    assert finding["case"]["variant"] == "out-cast", finding["case"]
    assert "`out=` of another dtype" in finding["explanation"], finding["explanation"]
    assert finding["status"] == "new"
    assert_repro_proves_the_fault(finding, "maximum_computes_in_the_out_dtype", tmp_path)

