"""The autocast variant and the dynamic-shape compiled targets (two bug classes of the
release notes that fixed-dtype eager cases and static compilation never reach: autocast
rules and dtype mismatches of conv3d, ConvTranspose3d and attention; a symbolic attention
scale under ``torch.compile(dynamic=True)``).

The fault target's ``conv3d_autocast_bias`` (found by test_fault_campaigns_depth.py) is
the detection proof; here: no false alarm from autocast's own rounding, and the dynamic
targets compile once for several sizes."""
from __future__ import annotations

import pytest
import torch

from mpsfuzz.execution.targets import load_target
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, worker_oracles
from mpsfuzz.oracles.judge import judge_case

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz

AUTOCAST_OPS = ("linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "scaled_dot_product_attention")


def t(shape, dtype="float32", seed=1, specials=()):
    return TensorRecipe(tuple(shape), dtype, Layout(), ValueRecipe(seed=seed, specials=tuple(specials)))


def test_the_ops_autocast_lowers_have_the_variant_and_others_do_not():
    for op in AUTOCAST_OPS + ("conv3d", "conv_transpose3d", "scaled_dot_product_attention_wide_heads"):
        assert "autocast" in catalogue.get(op).variants(), op
    for op in ("add", "sum", "softmax", "linalg.inv"):
        assert "autocast" not in catalogue.get(op).variants(), op


def test_an_extreme_that_autocast_rounds_to_inf_is_no_finding():
    # float32's lowest is -inf in bfloat16 (CPU's autocast dtype): the kernel got -inf,
    # and the reference computes on what the kernel got
    case = Case("linear", (t((2, 3), specials=((0, "lowest"),)), t((4, 3), seed=2), t((4,), seed=3)),
                variant="autocast")
    target = load_target(FAULT_TARGET)
    result = judge_case(case, target, worker_oracles(DEFAULT))
    assert result.valid and result.failures == (), result.failures
    # a mixed case (a float16 weight, as a model under autocast hands it on) is judged too
    mixed = Case("linear", (t((2, 3)), t((4, 3), "float16", seed=2), t((4,), seed=3)), variant="autocast")
    result = judge_case(mixed, target, worker_oracles(DEFAULT))
    assert result.valid and result.failures == (), result.failures



def test_a_float64_operand_keeps_its_dtype_under_autocast_in_the_reference_too():
    """Autocast rounds float32 and half inputs, never float64: mm of a float32 and a
    float64 operand refuses the mixed dtypes on CPU as on the target (a reference that
    rounded both had returned a result, and the target's refusal was filed); two float64
    operands are computed in float64."""
    from mpsfuzz.testing.faults import FaultTarget
    target = FaultTarget([])    # no fault on: the fault target's mm of mixed dtypes dies (pytorch#143948)
    mixed = Case("mm", (t((1, 1)), t((1, 1), "float64", seed=2)), variant="autocast")
    result = judge_case(mixed, target, worker_oracles(DEFAULT))
    assert result.failures == (), result.failures
    wide = Case("mm", (t((2, 3), "float64"), t((3, 2), "float64", seed=2)), variant="autocast")
    result = judge_case(wide, target, worker_oracles(DEFAULT))
    assert result.valid and result.failures == (), result.failures


@pytest.mark.slow
def test_a_clean_target_under_autocast_gives_no_finding(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", ",".join(AUTOCAST_OPS), "--target", FAULT_TARGET, "--max-cases", "1200",
                  "--seed", "5", "--corpus", str(corpus), "--no-progress", faults="none", cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert findings_in(corpus) == []


@pytest.mark.parametrize("name, graphs", [("cpu-compiled", 3), ("cpu-dynamic-compiled", 1)])
def test_the_dynamic_target_compiles_once_for_several_sizes(name, graphs):
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    target = load_target(name)
    for n in (3, 5, 7):
        assert torch.equal(target.run(lambda x: x * 2, torch.ones(n)), torch.full((n,), 2.0))
    assert counters["stats"]["unique_graphs"] == graphs
    assert getattr(target, "dynamic", False) is (graphs == 1)
