"""The meta kernel decides shape mismatches (oracles/meta_shapes.py): where it sides with
the target, the finding is CPU's (an `arbiter` cpu-wrong finding, not a target bug);
where it sides with CPU, the target's finding stands; where it cannot run, nothing changes."""
from __future__ import annotations

import torch

from mpsfuzz.generation.opspec import OpSpec, any_shape
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import Fault, FaultTarget


def _case(op: str, shape=(2, 3)) -> Case:
    return Case(op, (TensorRecipe(shape, "float32", Layout(), ValueRecipe(seed=1)),))


def _flattened(func, args, kwargs, result):
    return result.reshape(-1)


def _failures(case, target):
    return list(judge_case(case, target, DEFAULT).failures)


def test_a_target_shape_the_meta_kernel_refutes_stays_the_targets_finding():
    """`flip` on the target returns a flattened result: meta's shape is CPU's."""
    flattens = FaultTarget([Fault("flip_flat", "test", ("aten::flip",), lambda f, a, k: True, "rewrite",
                                  rewrite=_flattened)])
    found = _failures(Case("flip", (_case("flip").inputs[0],), (("dims", (0,)),)), flattens)
    shape = [f for f in found if f["kind"] == "wrong-shape"]
    assert len(shape) == 1 and shape[0]["oracle"] == "metadata", found
    assert "meta kernel: dut-wrong (meta gives (2, 3), as CPU does)" in shape[0]["message"]


def test_a_cpu_shape_the_meta_kernel_refutes_is_cpus_finding(registered):
    """An op whose eager CPU kernel keeps the input's shape where its meta kernel (and
    the target) flatten it, as eager CPU's pixel_unshuffle does for empty inputs."""
    def op(x):
        return x.reshape(-1) if x.device.type == "meta" else x.clone()
    registered(OpSpec(name="test.flat_on_meta", family="test", fn=op, shapes=any_shape(2),
                      dtypes=("float32",), doc="test op"))
    right = FaultTarget([Fault("clone_flat", "test", ("aten::clone",), lambda f, a, k: True, "rewrite",
                               rewrite=_flattened)])
    found = _failures(_case("test.flat_on_meta"), right)
    assert [(f["oracle"], f["kind"], f["blame"]) for f in found] == [("arbiter", "cpu-wrong", "cpu")], found
    assert "meta kernel: cpu-wrong (meta gives (6,), as" in found[0]["message"]
    assert found[0]["title"].startswith("CPU `test.flat_on_meta` returns a wrongly shaped result")


def test_a_shape_mismatch_meta_cannot_settle_is_left_as_it_was(registered):
    """A shape that depends on the values (`nonzero`) cannot run on meta: undecided."""
    def op(x):
        return torch.nonzero(x)
    registered(OpSpec(name="test.nonzero_like", family="test", fn=op, shapes=any_shape(2),
                      dtypes=("float32",), doc="test op"))
    drops_a_row = FaultTarget([Fault("nonzero_short", "test", ("aten::nonzero",), lambda f, a, k: True,
                                     "rewrite", rewrite=lambda f, a, k, r: r[1:])])
    found = [f for f in _failures(_case("test.nonzero_like"), drops_a_row) if f["kind"] == "wrong-shape"]
    assert len(found) == 1 and found[0]["oracle"] == "metadata", found
    assert "meta kernel: undecided" in found[0]["message"]
