"""The depth oracles (variants, layout, metadata, grads, arbiter, distribution) each catch
the misbehaviour they exist for, and stay quiet on a correct target. Cases run in-process
through the executor on small targets that misbehave in one controlled way."""
from __future__ import annotations

import pytest
import torch

from mpsfuzz.generation.opspec import OpSpec, any_shape, same_shapes
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import forget_verdicts, judge_case
from mpsfuzz.testing.faults import Fault, FaultTarget


class CleanTarget:
    name, device = "test-cpu", "cpu"

    def run(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def synchronize(self):
        pass


class HookTarget(CleanTarget):
    """Calls ``hook(result, args)`` after the op; the hook returns the result to use."""

    def __init__(self, hook):
        self.hook = hook

    def run(self, fn, *args, **kwargs):
        return self.hook(fn(*args, **kwargs), args)


def _spec(name, **kw):
    base = dict(name=name, family="test", fn=torch.add, shapes=same_shapes(2), dtypes=("float32",),
                doc="test op")
    base.update(kw)
    return OpSpec(**base)


def t(shape, dtype="float32", layout=Layout(), seed=1, **values):
    return TensorRecipe(tuple(shape), dtype, layout, ValueRecipe(seed=seed, **values))


def failures(case, target, oracles=DEFAULT):
    return list(judge_case(case, target, oracles).failures)


def oracle_kinds(case, target, oracles=DEFAULT):
    return sorted((f["oracle"], f["kind"]) for f in failures(case, target, oracles))


ADD = dict(fn=lambda a, b, **kw: torch.add(a, b, **kw), method="add", inplace="add_", out=True, grad=True)
GAPPED = Layout(gaps=(1, 2))


@pytest.mark.parametrize("variant", ["functional", "method", "inplace", "out", "out-strided", "out-resized", "grad"])
def test_every_variant_is_clean_on_a_correct_target(registered, variant):
    registered(_spec("test.add", **ADD))
    case = Case("test.add", (t((3, 4), layout=GAPPED), t((3, 4), seed=2, layout=Layout(permutation=(1, 0)))),
                variant=variant)
    assert failures(case, CleanTarget()) == []


def test_out_variant_writing_nothing_is_caught(registered):
    # An out= kernel that returns without writing: out keeps its filler.
    registered(_spec("test.add_out_noop", fn=lambda a, b, out=None: torch.add(a, b) if out is None else out,
                     out=True))
    case = Case("test.add_out_noop", (t((2, 3)), t((2, 3), seed=2)), variant="out-strided")
    found = failures(case, CleanTarget(), ("variants",))
    assert [f["kind"] for f in found] == ["variant-wrong-values"]
    assert "out= form, non-contiguous out" in found[0]["title"]


def test_input_modified_by_a_functional_call_is_caught(registered):
    def clobbering_add(a, b):
        out = a + b
        b.zero_()
        return out
    registered(_spec("test.clobber", fn=clobbering_add))
    case = Case("test.clobber", (t((4,)), t((4,), seed=2)))
    found = failures(case, CleanTarget(), ("variants",))
    assert found and found[0]["kind"] == "input-modified" and "input 1" in found[0]["title"]


def test_inplace_write_outside_a_gapped_view_is_caught(registered):
    def sloppy_add_(a, b):
        a.add_(b)
        a._base.view(-1)[1] = 123.0  # base (2, 3): flat 1 is the gap between columns
        return a
    torch.Tensor.test_sloppy_add_ = sloppy_add_
    try:
        registered(_spec("test.sloppy", inplace="test_sloppy_add_"))
        case = Case("test.sloppy", (t((2, 2), layout=GAPPED), t((2, 2), seed=2)), variant="inplace")
        kinds = [f["kind"] for f in failures(case, CleanTarget(), ("variants",))]
        assert kinds == ["writes-outside-view"]
        plain = Case("test.sloppy", (t((2, 2), layout=GAPPED), t((2, 2), seed=2)), variant="functional")
        assert failures(plain, CleanTarget(), ("variants",)) == []
    finally:
        del torch.Tensor.test_sloppy_add_


def test_a_spill_into_an_input_sharing_selfs_storage_is_the_spill_not_a_modified_input(registered):
    """An in-place write past self's view that lands on another input carved from the
    same storage changes that input: one bug, reported as the write outside the view
    (a fault campaign filed it twice: writes-outside-view and "modifies input 1")."""
    from mpsfuzz.generation.recipes import Alias

    def spilling_add_(a, b):
        result = a.add_(b)
        flat = a._base.view(-1)
        flat[a.numel()] = 99.0   # just past self's buffer: where the adjacent input lives
        return result
    torch.Tensor.test_spilling_add_ = spilling_add_
    try:
        registered(_spec("test.spill", inplace="test_spilling_add_", shapes=any_shape(min_rank=2)))
        self_ = t((2, 2), layout=Layout(permutation=(1, 0)))
        adjacent = TensorRecipe((), "float32", Layout(), ValueRecipe(seed=2), alias=Alias(of=0))
        case = Case("test.spill", (self_, adjacent), variant="inplace")
        kinds = [f["kind"] for f in failures(case, CleanTarget(), ("variants",))]
        assert kinds == ["writes-outside-view"]
    finally:
        del torch.Tensor.test_spilling_add_


def test_layout_oracle_needs_no_cpu_reference(registered):
    # The op is wrong on non-contiguous inputs AND CPU cannot run it (it raises there):
    # only the DUT-alone layout comparison can see the bug.
    def op(a):
        if a.device.type == "cpu" and not getattr(op, "dut", False):
            raise RuntimeError("no reference")
        return a * 2 if a.is_contiguous() else a * 3
    registered(_spec("test.layout", fn=op, shapes=any_shape(1)))

    class Dut(CleanTarget):
        def run(self, fn, *args, **kwargs):
            op.dut = True
            try:
                return fn(*args, **kwargs)
            finally:
                op.dut = False
    awkward = Case("test.layout", (t((3, 4), layout=Layout(permutation=(1, 0))),))
    found = failures(awkward, Dut(), ("values", "layout"))
    assert [(f["oracle"], f["kind"]) for f in found] == [("layout", "layout-wrong-values")]
    assert "transposed" in found[0]["message"]
    assert failures(Case("test.layout", (t((3, 4)),)), Dut(), ("layout",)) == []


def test_metadata_oracle_catches_a_lost_channels_last_format(registered):
    registered(_spec("test.relu", fn=torch.relu, shapes=any_shape(1), family="nn"))
    nhwc = Layout(permutation=(0, 3, 1, 2))
    case = Case("test.relu", (t((2, 3, 4, 5), layout=nhwc),))
    assert failures(case, CleanTarget()) == []
    densify = HookTarget(lambda out, args: out.contiguous())
    found = failures(case, densify, ("values", "metadata"))
    assert [(f["oracle"], f["kind"]) for f in found] == [("metadata", "wrong-memory-format")]
    # right values in another layout: a note of layout propagation, never a bug
    assert found[0]["blame"] == "note" and found[0]["details"] == {"target_format": "contiguous",
                                                                   "cpu_format": "channels_last"}


def test_metadata_oracle_owns_shape_and_dtype_mismatches(registered):
    registered(_spec("test.neg", fn=torch.neg, shapes=any_shape(1)))
    case = Case("test.neg", (t((2, 3)),))
    found = failures(case, HookTarget(lambda out, args: out.double()), ("values", "metadata"))
    assert [(f["oracle"], f["kind"]) for f in found] == [("metadata", "wrong-dtype")]
    found = failures(case, HookTarget(lambda out, args: out.double()), ("values",))
    assert [(f["oracle"], f["kind"]) for f in found] == [("values", "wrong-dtype")]


def test_grads_oracle_catches_a_wrong_backward_kernel(registered):
    registered(_spec("test.sin", fn=torch.sin, shapes=any_shape(1), grad=True))
    # sin's backward multiplies by cos: corrupt cos only (the forward is right).
    cos_fault = Fault("cos", "test", ("aten::cos",), lambda f, a, k: True, "corrupt")
    case = Case("test.sin", (t((3,)),), variant="grad")
    found = failures(case, FaultTarget([cos_fault]), ("values", "grads"))
    assert [(f["oracle"], f["kind"]) for f in found] == [("grads", "wrong-values")]
    assert failures(Case("test.sin", (t((3,)),)), FaultTarget([cos_fault]), ("values", "grads")) == []


def _rounded_f64(out, args):
    """A perfectly accurate DUT: the op computed in float64, rounded to the dtype."""
    return out


def test_arbiter_blames_the_cpu_when_the_reference_is_the_inaccurate_side(registered):
    def inaccurate_on_cpu(a):
        exact = (a.double() * 3).to(a.dtype)
        if a.dtype == torch.float64 or getattr(inaccurate_on_cpu, "dut", False):
            return exact
        return exact * (1 + 1e-3)  # the CPU kernel is off by 0.1%
    registered(_spec("test.arb", fn=inaccurate_on_cpu, shapes=any_shape(1)))

    class Accurate(CleanTarget):
        def run(self, fn, *args, **kwargs):
            inaccurate_on_cpu.dut = True
            try:
                return fn(*args, **kwargs)
            finally:
                inaccurate_on_cpu.dut = False
    case = Case("test.arb", (t((8,)),))
    # float64 runs CPU's own kernel, so it is no witness: with no independent reference
    # the disagreement is undecided, never the target's
    found = failures(case, Accurate())
    assert [(f["oracle"], f["kind"], f["blame"]) for f in found] == [("values", "wrong-values", "undecided")]
    assert found[0]["details"]["verdict"] == "cpu-wrong"   # float64 opinion, recorded
    # a formula for the op (an independent reference) sides with the target: CPU's bug
    from mpsfuzz.oracles.jury import formulas
    formulas.FORMULAS["test.arb"] = lambda inputs, kwargs: inputs[0] * 3
    forget_verdicts()   # the jury changed under the same case and outputs
    try:
        found = failures(case, Accurate())
    finally:
        del formulas.FORMULAS["test.arb"]
        forget_verdicts()
    assert [(f["oracle"], f["kind"], f["blame"]) for f in found] == [("arbiter", "cpu-wrong", "cpu")]
    assert found[0]["details"]["jury"]["decided_by"] == ["formula"]
    without = failures(case, Accurate(), ("values",))
    assert [(f["oracle"], f["blame"]) for f in without] == [("values", "target")]


def test_arbiter_confirms_a_wrong_dut_and_dismisses_equal_errors(registered):
    registered(_spec("test.mul3", fn=lambda a: a * 3, shapes=any_shape(1)))
    case = Case("test.mul3", (t((8,)),))
    corrupt = Fault("mul", "test", ("aten::mul",), lambda f, a, k: True, "corrupt")
    found = failures(case, FaultTarget([corrupt]))
    assert [(f["oracle"], f["details"]["verdict"]) for f in found] == [("values", "dut-wrong")]
    assert "float64 arbiter: dut-wrong" in found[0]["message"]

    # Both sides off from float64 by the same relative amount, in opposite directions:
    # beyond float32's tolerance, but neither is worse: not a finding.
    def both_off(a):
        exact = (a.double() * 3)
        if a.dtype == torch.float64:
            return exact
        sign = -1 if getattr(both_off, "dut", False) else 1
        return (exact * (1 + sign * 2e-5)).to(a.dtype)
    registered(_spec("test.both", fn=both_off, shapes=any_shape(1)))

    class Dut(CleanTarget):
        def run(self, fn, *args, **kwargs):
            both_off.dut = True
            try:
                return fn(*args, **kwargs)
            finally:
                both_off.dut = False
    assert failures(Case("test.both", (t((8,)),)), Dut(), ("values",))  # a mismatch...
    assert failures(Case("test.both", (t((8,)),)), Dut()) == []          # ...that the arbiter dismisses


def _uniform_judge(out, inputs, kwargs):
    if out.numel() and not bool(((out >= 0) & (out < 1)).all()):
        return "support: a value outside [0, 1)"
    if out.numel() >= 16 and bool((out == out.reshape(-1)[0]).all()):
        return "constant: every position holds the same value"
    return None


def test_distribution_oracle_judges_random_ops_without_comparing_values(registered):
    registered(_spec("test.rand", fn=lambda x: torch.rand_like(x), shapes=any_shape(1),
                     semantics=frozenset({"random"}), statistical=_uniform_judge))
    case = Case("test.rand", (t((64,)),))
    assert failures(case, CleanTarget()) == []  # values differ from CPU's: not compared
    constant = HookTarget(lambda out, args: torch.full_like(out, 0.5))
    found = failures(case, constant)
    assert [(f["oracle"], f["kind"]) for f in found] == [("distribution", "wrong-distribution")]
    assert found[0]["message"].startswith("constant")


def test_random_ops_replay_identically_on_the_dut(registered):
    registered(_spec("test.rand2", fn=lambda x: torch.rand_like(x), shapes=any_shape(1),
                     semantics=frozenset({"random"}), statistical=lambda o, i, k: f"value {float(o[0])!r}"))
    case = Case("test.rand2", (t((4,)),))
    first = failures(case, CleanTarget())[0]["message"]
    assert failures(case, CleanTarget())[0]["message"] == first


def test_case_json_keeps_the_variant_and_reads_format_1():
    case = Case("add", (t((2,)), t((2,), seed=3)), variant="out-strided")
    data = case.to_json()
    assert data["format"] == 3 and Case.from_json(data) == case
    old = dict(data, format=1)
    del old["variant"]
    assert Case.from_json(old).variant == "functional"


def test_oracles_command_lists_every_oracle_with_its_stage(capsys):
    from mpsfuzz.cli import main
    from mpsfuzz.oracles import all_oracles
    code = main(["oracles"])   # in this process: no fresh interpreter to start
    out, err = capsys.readouterr()
    assert code == 0, err
    for name, o in all_oracles().items():
        row = [line for line in out.splitlines() if line.split("│")[1:2] and line.split("│")[1].strip() == name]
        assert row and o.stage in row[0], (name, out)


def test_variants_oracle_does_not_blame_a_right_variant_for_a_wrong_functional_form(registered):
    # neg is wrong on the DUT, neg_ is right: the in-place case is not a variant bug
    # (functional cases report neg itself).
    registered(_spec("test.neg2", fn=torch.neg, shapes=any_shape(1), inplace="neg_"))
    neg_fault = Fault("neg", "test", ("aten::neg",), lambda f, a, k: True, "corrupt")
    case = Case("test.neg2", (t((3,)),), variant="inplace")
    assert failures(case, FaultTarget([neg_fault])) == []
    functional = Case("test.neg2", (t((3,)),))
    assert [f["oracle"] for f in failures(functional, FaultTarget([neg_fault]))] == ["values"]


def test_the_cpu_functional_form_runs_only_for_a_variant_that_disagrees_with_the_dut_s(registered):
    """The variants oracle asks CPU's functional form only to tell a wrong functional form
    from a wrong variant: a variant that agrees with the DUT's functional form (almost
    every case) costs no CPU call for it."""
    from mpsfuzz.execution.executor import observe
    from mpsfuzz.oracles.judge import run_case_oracles
    registered(_spec("test.neg3", fn=torch.neg, shapes=any_shape(1), inplace="neg_"))
    case = Case("test.neg3", (t((3,)),), variant="inplace")
    agreeing = observe(case, FaultTarget([]), DEFAULT)
    assert run_case_oracles(agreeing, DEFAULT) == [] and "ref_functional" not in agreeing.cache
    wrong_functional = observe(case, FaultTarget([Fault("neg", "test", ("aten::neg",), lambda f, a, k: True,
                                                        "corrupt")]), DEFAULT)
    assert run_case_oracles(wrong_functional, DEFAULT) == []
    assert wrong_functional.cache["ref_functional"] is not None   # asked, and it cleared the variant


@pytest.mark.parametrize("message, unsupported", [
    # seen on CUDA (torch 2.11): a documented limitation, not a bug
    ("torch.linalg.ldl_solve: complex tensors with hermitian=True flag are not supported on CUDA.", True),
    ("\"addmm_impl_cpu_\" not implemented for 'Half'", True),
    ("The operator 'aten::foo' is not currently implemented for the MPS device.", True),
    ("Expected all tensors to be on the same device", False),
    ("shape '[2, 3]' is invalid for input of size 5", False),
])
def test_unsupported_errors_are_told_from_bugs(message, unsupported):
    from mpsfuzz.execution.executor import is_unsupported
    assert is_unsupported(RuntimeError(message)) is unsupported


def test_an_input_too_large_to_copy_back_is_not_rebuilt_on_the_host_to_check_the_others():
    """The variants check compares the inputs the call copied back with the case's own;
    an input of 2^31 elements is not copied back (None), and building it on the host
    to compare nothing (past the host's bound: InputTooLarge) made every functional
    case of flex_attention@huge no case on the device. The small input is still judged."""
    from types import SimpleNamespace

    from mpsfuzz.oracles.variants import _mutated_input
    small, huge = t((4,)), TensorRecipe((1 << 40,), "float32", Layout(), ValueRecipe("index_hash", 3))
    case = Case("test.huge_pair", (small, huge))
    built = small.materialize("cpu")
    spec = SimpleNamespace(mutates=(), semantics=frozenset())

    def obs(after):
        return SimpleNamespace(case=case, spec=spec, dut_side=SimpleNamespace(inputs_after=after))
    assert _mutated_input(obs([built.clone(), None])) is None
    assert _mutated_input(obs([built + 1, None])) == 0
