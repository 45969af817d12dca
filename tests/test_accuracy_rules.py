"""False-positive classes fixed as rules (issue 12, point 3): overflow of intermediate
values where the inputs hold non-finite values or extremes, and half-precision
accumulation judged against float64 with a bound that grows with the number of summands
instead of stacked tolerance scales. Each rule is proved both ways: what it excuses is
not reported, and a real error of the same shape is still found."""
from __future__ import annotations

import math

import json
import os
import subprocess
import sys

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.accuracy import accumulation_bound, overflow_possible, summands
from mpsfuzz.oracles.jury.float64 import judge_leaf
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.oracles.values import ORDER_DEPENDENT_SCALE, leaf_tolerance
from mpsfuzz.testing.faults import FaultTarget
from mpsfuzz.execution.executor import observe
from mpsfuzz.execution.targets import DeviceTarget

INF, NAN = float("inf"), float("nan")


def _t(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


# -- the overflow rule, element by element -------------------------------------------------

@pytest.mark.parametrize("dut, cpu, exact, verdict", [
    # both sides overflow where float64 is finite: not a finding
    ((INF, 1.0), (NAN, 1.0), (2.0, 1.0), "overflow"),
    # the DUT alone overflows an intermediate (hypot computed naively): not a finding
    ((INF, 1.0), (3.0e38, 1.0), (3.0e38, 1.0), "overflow"),
    # NaN where float64 and CPU say inf (inf - inf in another order): not a finding
    ((NAN,), (INF,), (INF,), "overflow"),
    # a finite wrong value where float64 and CPU agree: a finding
    ((5.0, 1.0), (2.0, 1.0), (2.0, 1.0), "dut-wrong"),
    # a finite value where float64 and CPU both say inf: a finding
    ((1.0,), (INF,), (INF,), "dut-wrong"),
    # the infinity of the other sign: a finding
    ((-INF,), (INF,), (INF,), "dut-wrong"),
    # a NaN dropped that float64 and CPU both keep: a finding
    ((0.0,), (NAN,), (NAN,), "dut-wrong"),
    # both far from float64, as far as each other: neither is worse, not a finding
    ((7.0,), (-3.0,), (2.0,), "both-close"),
])
def test_overflow_rule(dut, cpu, exact, verdict):
    got, numbers = judge_leaf(_t(*dut), _t(*cpu), _t(*exact, dtype=torch.float64), 1e-5, rtol=1.3e-6,
                              overflow=True)
    assert got == verdict, numbers


def test_without_overflowing_inputs_a_nonfinite_result_is_still_wrong():
    got, _ = judge_leaf(_t(INF), _t(3.0e38), _t(3.0e38, dtype=torch.float64), 1e-5, rtol=1.3e-6)
    assert got == "dut-wrong"


class _CpuTarget:
    """A test device on the CPU: subclasses give ``name`` and ``run``."""
    device = "cpu"

    def synchronize(self):
        pass

    def memory_allocated(self):
        return 0


class SumsInHalf(_CpuTarget):
    """A device whose row sums accumulate in float16 with a rounding per term; ``wrong``
    negates the first sum as well (off by twice the result)."""
    name = "sums-in-half"

    def __init__(self, wrong=False):
        self.wrong = wrong

    def run(self, fn, x):
        acc = torch.zeros(x.shape[:-1], dtype=torch.float16)
        for k in range(x.shape[-1]):
            acc = (acc + x[..., k]).to(torch.float16)
        if self.wrong:
            acc = acc.clone()
            acc.view(-1)[0] *= -1
        return acc


def _recipe(shape, dtype="float32", *, specials=(), layout=Layout(), distribution="normal", seed=3, low=None,
            high=None):
    return TensorRecipe(tuple(shape), dtype, layout,
                        ValueRecipe(distribution, seed, low=low, high=high, specials=tuple(specials)))


def test_which_inputs_make_overflow_possible():
    plain = Case("hypot", (_recipe((3,)), _recipe((3,))))
    assert not overflow_possible(plain)
    for name in ("nan", "inf", "-inf", "max", "lowest", "big"):
        assert overflow_possible(Case("hypot", (_recipe((3,), specials=[(0, name)]), _recipe((3,)))))
    assert not overflow_possible(Case("hypot", (_recipe((3,), specials=[(0, "subnormal")]), _recipe((3,)))))


# -- the rules through the executor, on the fault-injecting target ------------------------

def _failures(case, faults):
    return list(judge_case(case, FaultTarget(faults), DEFAULT).failures)


def test_an_intermediate_overflow_is_not_reported():
    # hypot(max, y) computed naively is inf; float64 and CPU say max.
    case = Case("hypot", (_recipe((4,), specials=[(0, "max"), (2, "big")]), _recipe((4,))))
    assert _failures(case, ["hypot_overflows_naively"]) == []
    # The comparison without the fault agrees, and the fault did fire (it changed results).
    target = FaultTarget(["hypot_overflows_naively"])
    x, y = case.materialize("cpu")
    assert torch.isinf(target.run(torch.hypot, x, y)).any() and not torch.isinf(torch.hypot(x, y)).any()


def test_a_wrong_finite_value_under_inf_inputs_is_still_found():
    # where() with an inf operand: the fault changes the first (finite) element.
    cond = TensorRecipe((4,), "bool", Layout(), ValueRecipe("bool", 1))
    case = Case("where", (cond, _recipe((4,), specials=[(3, "inf")]), _recipe((4,), seed=4)))
    found = _failures(case, ["where_inf"])
    assert [f["oracle"] for f in found] == ["values"], found
    assert found[0]["details"]["verdict"] == "dut-wrong"
    assert found[0]["details"]["arbiter"]["overflow_rule"] is True


# -- half-precision accumulation --------------------------------------------------------------

def test_the_accumulation_bound_grows_with_the_number_of_summands():
    truth = torch.tensor([1.0], dtype=torch.float64)
    small = accumulation_bound(truth, None, 4, torch.bfloat16, 1e-5)
    large = accumulation_bound(truth, None, 64, torch.bfloat16, 1e-5)
    assert float(large) > 10 * float(small)
    # and it is measured in the magnitude of the terms, not of the (cancelled) result
    cancelled = accumulation_bound(torch.tensor([0.5], dtype=torch.float64),
                                   torch.tensor([2000.5], dtype=torch.float64), 3, torch.bfloat16, 1e-5)
    assert float(cancelled) > 30
    assert summands([(4, 64)], 4) == 64 and summands([(8, 8), (8, 8)], 64) == 8 and summands([(5,)], 5) == 5


def test_low_precision_tolerances_are_not_multiplied_by_scales():
    var = catalogue.get("var")
    assert var.rtol_scale > 1
    # float32 keeps the op's declared scale; bfloat16 gets the table entry alone (the
    # arbiter's bound decides from there), however the oracles scale.
    assert leaf_tolerance(var, "float32", scale=ORDER_DEPENDENT_SCALE)[0] == pytest.approx(1.3e-6 * var.rtol_scale * 4)
    assert leaf_tolerance(var, "bfloat16", scale=ORDER_DEPENDENT_SCALE) == (1.6e-2, 1e-5)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_sum_accumulated_in_half_precision_is_not_reported(dtype):
    # Terms of mixed sign and size: one by one in half precision loses what a float32
    # accumulator keeps.
    x = _recipe((3, 48), dtype, high=100.0, seed=11)
    target = FaultTarget(["sum_half_accumulates_in_dtype"])
    t = x.materialize("cpu")
    assert not torch.equal(target.run(torch.sum, t, dim=1), torch.sum(t, dim=1)), "the fault changes nothing"
    for kwargs in ((("dim", 1),), ()):
        assert _failures(Case("sum", (x,), kwargs), ["sum_half_accumulates_in_dtype"]) == []


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_real_half_precision_error_is_found_once_scales_are_gone(dtype):
    # 25% too large: hidden by rtol 1.6e-2 * 32 (values) and * 32 * 4 * 4 (layout) before.
    gapped = Layout(gaps=(2, 1))
    case = Case("var", (_recipe((4, 3), dtype, layout=gapped),), (("dim", 1),))
    found = _failures(case, ["var_half_noncontig_inflated"])
    assert [f["oracle"] for f in found] == ["values"], found
    assert found[0]["details"]["verdict"] == "dut-wrong"


# -- end to end -----------------------------------------------------------------------------

FAULT_TARGET = "mpsfuzz.testing.faults:target"


def _run(tmp_path, ops, faults, *extra):
    corpus = tmp_path / "corpus"
    env = dict(os.environ, MPSFUZZ_FAULTS=faults)
    done = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", ops, "--target", FAULT_TARGET,
                           "--corpus", str(corpus), "--timeout", "5", "--no-progress", *extra],
                          cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    return done, [json.loads(p.read_text()) for p in sorted(corpus.glob("*.json"))]


@pytest.mark.slow
def test_campaign_reports_nothing_for_legitimate_overflow_and_accumulation(tmp_path):
    done, found = _run(tmp_path, "hypot,sum", "hypot_overflows_naively,sum_half_accumulates_in_dtype",
                       "--max-cases", "700", "--seed", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(f["op"], f["oracle"], f["title"]) for f in found if f["status"] == "new"] == []


@pytest.mark.slow
def test_campaign_finds_a_half_precision_layout_error(tmp_path):
    done, found = _run(tmp_path, "var", "var_half_noncontig_inflated", "--max-cases", "1500", "--seed", "2",
                       "--max-findings", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    (finding,) = [f for f in found if f["status"] == "new"]
    assert finding["case"]["inputs"][0]["dtype"] in ("float16", "bfloat16")


# -- rules from the first real-hardware run (H100, torch 2.11) --------------------------------

def test_a_difference_only_at_a_rounding_tie_is_ill_conditioned_not_a_bug():
    # round(5, decimals=-1) is 0 (half to even) but 10 for 5 * (1 + eps): both are right.
    tie = Case("round_decimals", (_recipe((4,), "float16", distribution="int_range", high=5.0),),
               (("decimals", -1),))
    tie = Case(tie.op, (TensorRecipe((4,), "float16", Layout(), ValueRecipe("int_range", 1, low=5, high=5)),),
               tie.kwargs)
    target = FaultTarget(["round_nudged"])
    x, = tie.materialize("cpu")
    assert not torch.equal(target.run(torch.round, x, decimals=-1), torch.round(x, decimals=-1))
    assert _failures(tie, ["round_nudged"]) == []
    # A wrong result where rounding is well conditioned (3 rounds to 0 either way) is found.
    clear = Case(tie.op, (TensorRecipe((4,), "float16", Layout(), ValueRecipe("int_range", 1, low=3, high=3)),),
                 tie.kwargs)
    found = _failures(clear, ["round_decimals_corrupt"] if False else [_corrupt_round()])
    assert [f["oracle"] for f in found] == ["values"] and found[0]["details"]["verdict"] == "dut-wrong"


def test_the_nudging_fault_moves_its_input_by_exactly_one_unit():
    """round_nudged emulates a kernel whose intermediate rounds the other way: one unit of
    roundoff. x * (1 + eps) moved a bfloat16 1.539 by two units, to 1.555, past
    round(decimals=1)'s tie at 1.55, 1.4 units away, which no kernel's rounding does: the
    1.6 it gave was rightly reported, against a fault meant to be no bug."""
    case = Case("round_decimals", (TensorRecipe((2,), "bfloat16", Layout(), ValueRecipe("normal", 0)),),
                (("decimals", 1),))
    x, = case.materialize("cpu")
    assert float(x[0]) == 1.5390625
    got = FaultTarget(["round_nudged"]).run(torch.round, x, decimals=1)
    assert float(got[0]) == 1.5 and _failures(case, ["round_nudged"]) == []


def test_the_nudging_fault_moves_by_a_unit_of_the_kernels_precision_and_keeps_infinities():
    """A kernel's intermediate rounds in its compute precision (float32 for bfloat16), so
    round_nudged moves a bfloat16 input by a float32 unit, not a bfloat16 one: one
    bfloat16 unit moved x * 1000 by a quarter (0.0303955 * 1000 = 30.396 went to 30.64, past the tie),
    and a unit up from -inf is -3.4e38. Neither is a rounding of any kernel, and both
    were filed against a fault meant to be no bug."""
    x = torch.tensor([0.0303955078125, -math.inf, math.inf, 2.5], dtype=torch.bfloat16)
    one_bf16_unit_up = torch.round(torch.nextafter(x, torch.full_like(x, math.inf)), decimals=3)
    got = FaultTarget(["round_nudged"]).run(torch.round, x, decimals=3)
    assert float(one_bf16_unit_up[0]) != float(torch.round(x, decimals=3)[0])   # the old nudge's change
    assert torch.equal(got, torch.round(x, decimals=3))
    # An exact tie in float32 still rounds the other way, as the fault means it to.
    tie = torch.tensor([0.25], dtype=torch.bfloat16)
    assert float(FaultTarget(["round_nudged"]).run(torch.round, tie, decimals=1)[0]) == 0.30078125


def test_sensitivity_of_a_few_roundoffs_does_not_excuse_a_wrong_element():
    """A half-precision product moves by two units of roundoff when its two factors move
    by one: more than the bound for one summand, but no excuse for an element off by 1."""
    exact = torch.tensor([0.2593, -0.0596], dtype=torch.float64)
    wrong = torch.tensor([1.2598, -0.0596], dtype=torch.float16)
    cpu = exact.to(torch.float16)
    moved = [exact * (1 + 2 * 2.0 ** -10), exact * (1 - 2 * 2.0 ** -10)]
    got, numbers = judge_leaf(wrong, cpu, exact, 1e-5, perturbed=moved)
    assert got == "dut-wrong" and numbers["ill_conditioned_positions"] == 0
    # the same sensitivity does explain a target that is off by about as much
    close = (exact * (1 + 2 * 2.0 ** -10)).to(torch.float16)
    assert judge_leaf(close, cpu, exact, 1e-5, perturbed=moved)[0] in ("ill-conditioned", "within-bound")
    # and the fault target's wrong float16 product is found through the campaign path
    case = Case("mul", (_recipe((3,), "float16"), _recipe((3,), "float16")))
    assert [f["details"]["verdict"] for f in _failures(case, [_corrupt_mul()])] == ["dut-wrong"]


def _corrupt_mul():
    from mpsfuzz.testing.faults import Fault, _always
    return Fault("mul_corrupt", "test", ("aten::mul.Tensor",), _always, "corrupt")


def _corrupt_round():
    from mpsfuzz.testing.faults import Fault, _always
    return Fault("round_corrupt", "test", ("aten::round.decimals",), _always, "corrupt")


def test_without_a_wider_reference_float64_nonfinite_differences_need_an_input_nan():
    # float64 outputs: "float64" is CPU's own computation, not an independent truth.
    f64 = dict(dtype=torch.float64)
    got, _ = judge_leaf(_t(-INF, **f64), _t(NAN, **f64), _t(NAN, **f64), 1e-7, rtol=1e-7, overflow=True)
    assert got == "overflow"
    got, _ = judge_leaf(_t(1.0, **f64), _t(NAN, **f64), _t(NAN, **f64), 1e-7, rtol=1e-7, overflow=True,
                        explicit_nan=True)
    assert got == "dut-wrong"


def test_a_nonfinite_input_dropped_beside_the_dtypes_extremes_is_excused():
    """An H100's float16 multi_margin_loss of inputs at 65504 and a NaN (or inf) weight
    returned 0 where CPU (in float32) and float64 return NaN (inf): its hinge
    1 - 65504 + 65504 rounds to 0 in float16, so the weight is skipped. Where the inputs
    hold a non-finite value beside the dtype's extremes, a dropped NaN or infinity is
    rounding's doing; without the extremes it is still the target's bug."""
    f16, f64 = dict(dtype=torch.float16), dict(dtype=torch.float64)
    near_max = dict(overflow=True, explicit_nan=True, extremes=True)
    for lost in (NAN, INF):
        assert judge_leaf(_t(0.0, **f16), _t(lost, **f16), _t(lost, **f64), 4e-5, rtol=4e-3,
                          **near_max)[0] == "overflow"
        got, numbers = judge_leaf(_t(0.0, **f16), _t(lost, **f16), _t(lost, **f64), 4e-5, rtol=4e-3,
                                  overflow=True, explicit_nan=True)
        assert got == "dut-wrong" and numbers["target_wrong_positions"] == 1
    # Only the dropped value is excused: a finite value off where both agree is still
    # wrong, and so is the other infinity where no order of evaluation reaches it.
    assert judge_leaf(_t(3.0, 0.0, **f16), _t(NAN, 1.0, **f16), _t(NAN, 1.0, **f64), 4e-5, rtol=4e-3,
                      **near_max)[0] == "dut-wrong"
    assert judge_leaf(_t(-INF, **f16), _t(INF, **f16), _t(INF, **f64), 4e-5, rtol=4e-3, **near_max)[0] == "dut-wrong"


def test_the_arbiter_reads_which_nonfinite_values_the_inputs_hold_from_the_tensors():
    """An H100 bilinear in float64 whose drawn "nan" sat under a "max" (both at one
    position) returned inf where CPU's sum of inf and -inf gave NaN: with no NaN in the
    inputs, float64 (CPU itself) decides nothing, and it is overflow."""
    from mpsfuzz.oracles.jury.float64 import _held_nonfinite
    under = TensorRecipe((2, 1, 2), "float64", Layout(), ValueRecipe("normal", 3, specials=((0, "nan"), (0, "max"))))
    plain = TensorRecipe((2, 1, 2), "float64", Layout(), ValueRecipe("normal", 4))
    assert _held_nonfinite(Case("add", (under, plain))) == set()
    held = TensorRecipe((2, 1, 2), "float64", Layout(), ValueRecipe("normal", 3, specials=((1, "inf"), (0, "max"))))
    assert _held_nonfinite(Case("add", (held, plain))) == {"inf"}
    f64 = dict(dtype=torch.float64)
    # float64 outputs: what CPU's NaN is held against the target for depends on it
    assert judge_leaf(_t(INF, **f64), _t(NAN, **f64), _t(NAN, **f64), 1e-7, rtol=1e-7, overflow=True)[0] == "overflow"
    # and a NaN the inputs do hold, beside float64's max (an H100 SDPA gradient: -inf
    # where CPU's inf - inf gave NaN), is excused as for half precision
    assert judge_leaf(_t(-INF, **f64), _t(NAN, **f64), _t(NAN, **f64), 1e-7, rtol=1e-7, overflow=True,
                      explicit_nan=True, extremes=True)[0] == "overflow"
    assert judge_leaf(_t(-INF, **f64), _t(NAN, **f64), _t(NAN, **f64), 1e-7, rtol=1e-7, overflow=True,
                      explicit_nan=True)[0] == "dut-wrong"


def test_terms_beyond_the_dtype_make_overflow_possible_without_special_inputs():
    from mpsfuzz.oracles.jury.float64 import _terms_overflow
    assert _terms_overflow(torch.tensor([1e60], dtype=torch.float64), torch.complex64)
    assert not _terms_overflow(torch.tensor([1e30], dtype=torch.float64), torch.float32)
    assert _terms_overflow(torch.tensor([70000.0], dtype=torch.float64), torch.float16)
    # 160 complex factors, the first 0: sequentially the product is 0 from the start;
    # pairwise, the other half overflows and 0 * inf is nan
    x = TensorRecipe((4, 8, 5), "complex64", Layout(), ValueRecipe("int_range", 0, low=3, high=4,
                                                                    specials=((0, "0"),)))
    case = Case("prod", (x,))
    target = FaultTarget(["prod_pairwise"])
    t, = case.materialize("cpu")
    assert torch.isnan(target.run(torch.prod, t)).any() and not torch.isnan(torch.prod(t)).any()
    assert _failures(case, ["prod_pairwise"]) == []


def test_undefined_float_to_integer_conversions_are_not_compared(registered):
    from mpsfuzz.generation.opspec import OpSpec, any_shape

    class NanToZero:
        """A device that converts NaN and inf to 0 (CPU gives INT_MIN): undefined in C++."""
        name, device = "nan-to-zero", "cpu"

        def __init__(self, off_by_one=False):
            self.off_by_one = off_by_one

        def run(self, fn, *args, **kwargs):
            out = fn(*args, **kwargs)
            out = torch.where(torch.isfinite(args[0].real), out, torch.zeros((), dtype=out.dtype))
            return out + 1 if self.off_by_one else out

        def synchronize(self):
            pass

        def memory_allocated(self):
            return 0

    registered(OpSpec(name="test.int", family="test", fn=lambda x: x.int(), shapes=any_shape(1),
                      dtypes=("float32", "complex64"), doc="conversion"))
    # complex converts through its real part: the same rule holds for it
    for dtype in ("float32", "complex64"):
        case = Case("test.int", (_recipe((4,), dtype, specials=[(1, "nan"), (2, "inf")]),))
        assert judge_case(case, NanToZero(), DEFAULT).failures == (), dtype
        # a wrong conversion of a finite value is still found
        wrong = judge_case(case, NanToZero(off_by_one=True), DEFAULT).failures
        assert [f["oracle"] for f in wrong] == ["values"], dtype



class _Converting:
    """A target whose conversions to an integer dtype give ``value`` wherever the input
    (the conversion's source) is below ``below`` or at least ``at_least``."""
    name, device = "converting", "cpu"

    def __init__(self, value, *, below=None, at_least=None):
        self.value, self.below, self.at_least = value, below, at_least

    def run(self, fn, *args, **kwargs):
        out, x = fn(*args, **kwargs), args[0]
        where = torch.zeros(x.shape, dtype=torch.bool)
        if self.below is not None:
            where |= x < self.below
        if self.at_least is not None:
            where |= x >= self.at_least
        return torch.where(where, torch.full((), self.value, dtype=out.dtype), out)

    def synchronize(self):
        pass

    def memory_allocated(self):
        return 0


def test_conversions_of_ops_declaring_no_source_follow_the_one_rule(registered):
    """An op that declares no ``converts`` is masked by the same rule as the cast family
    (oracles/conversions.py): the truncation is what must fit, so -0.7 into uint8 is
    defined (0) and judged; 2^64 into uint64 is past the max, though float64 rounds
    uint64's max up to 2^64 (CUDA gave 2^64 - 1, eager CPU 0: no verdict)."""
    from mpsfuzz.generation.opspec import OpSpec, any_shape

    registered(OpSpec(name="test.uint8", family="test", fn=lambda x: x.to(torch.uint8), shapes=any_shape(1),
                      dtypes=("float32",), doc="conversion"))
    registered(OpSpec(name="test.uint64", family="test", fn=lambda x: x.to(torch.uint64), shapes=any_shape(1),
                      dtypes=("float32",), doc="conversion"))
    fractions = Case("test.uint8", (_recipe((4,), distribution="uniform", low=-0.9, high=-0.1),))
    wrapped = judge_case(fractions, _Converting(255, below=0.0), DEFAULT).failures
    assert [f["oracle"] for f in wrapped] == ["values"]
    huge = Case("test.uint64", (_recipe((4,), distribution="uniform", low=2.0**64, high=2.0**64),))
    assert judge_case(huge, _Converting(2**64 - 1, at_least=2.0**64), DEFAULT).failures == ()


class _NanPositionsOff:
    """A target whose integer results are off by one where the input is NaN."""
    name, device = "nan-positions-off", "cpu"

    def run(self, fn, *args, **kwargs):
        out = fn(*args, **kwargs)
        return out + torch.isnan(args[0]).to(out.dtype)

    def synchronize(self):
        pass

    def memory_allocated(self):
        return 0


def test_an_integer_result_beside_a_float_input_of_its_shape_is_no_conversion_unless_it_agrees(registered):
    """Integer results of an input's shape that are not its conversion (indices, counts:
    ``searchsorted`` of NaN values) are judged at NaN positions too."""
    from mpsfuzz.generation.opspec import OpSpec, any_shape

    registered(OpSpec(name="test.positions", family="test", shapes=any_shape(1), dtypes=("float32",),
                      fn=lambda x: torch.arange(x.numel()).reshape(x.shape) + 7 * torch.isnan(x), doc="indices"))
    case = Case("test.positions", (_recipe((4,), specials=[(1, "nan")]),))
    assert [f["oracle"] for f in judge_case(case, _NanPositionsOff(), DEFAULT).failures] == ["values"]
    registered(OpSpec(name="test.int64", family="test", fn=lambda x: x.long(), shapes=any_shape(1),
                      dtypes=("float32",), doc="conversion"))
    conversion = Case("test.int64", (_recipe((4,), specials=[(1, "nan")]),))
    assert judge_case(conversion, _NanPositionsOff(), DEFAULT).failures == ()

def test_complex_logarithms_compare_modulo_two_pi():
    spec = catalogue.get("logcumsumexp")
    a = torch.tensor([1.8164300 + 4.1415925j], dtype=torch.complex64)   # CPU's (not principal)
    b = torch.tensor([1.8164300 - 2.1415927j], dtype=torch.complex64)   # CUDA's (principal)
    ca, cb = spec.canonicalise([a], a), spec.canonicalise([b], b)
    assert torch.allclose(ca, cb, atol=1e-5)
    assert not torch.allclose(spec.canonicalise([a], a + 0.5), cb, atol=1e-5)


def test_a_device_fault_that_surfaces_in_mpsfuzz_code_poisons_the_worker_not_the_campaign():
    from mpsfuzz.testing import faults as F
    weights = TensorRecipe((3, 4), "float32", Layout(expanded=(0,)), ValueRecipe("positive", 2))
    case = Case("multinomial", (weights,), (("num_samples", 2), ("replacement", True)))
    try:
        result = judge_case(case, FaultTarget(["multinomial_async_assert"]), DEFAULT)
    finally:
        F._POISONED.clear()
        F._FAULT_AT_NEXT_SYNC.clear()
    assert result.poisoned is True
    assert [(f["oracle"], f["kind"]) for f in result.failures] == [("errors", "device-fault")]


def test_half_precision_gradients_are_held_to_the_bound_of_their_accumulation():
    """A gradient element sums one term per output element it feeds: a (2,) input that
    fed 64 outputs sums 32 terms, each up to the leaf's largest magnitude."""
    from mpsfuzz.oracles.jury.float64 import _terms_up_to_leaf_max
    exact = torch.tensor([8.0, -0.25], dtype=torch.float64)
    magnitude, n = _terms_up_to_leaf_max(exact, 1, 64)
    assert n == 32 and magnitude.tolist() == [8.0, 8.0]
    u = 2.0 ** -11
    cpu = exact.to(torch.float16)
    accumulated = torch.tensor([8.0, -0.25 + 20 * u * 8], dtype=torch.float64).to(torch.float16)
    assert judge_leaf(accumulated, cpu, exact, 1e-5, magnitude=magnitude, summands=n)[0] in ("within-bound", "both-close")
    # with one summand (the old bound) the same error was a finding; a wrong element still is
    assert judge_leaf(accumulated, cpu, exact, 1e-5)[0] == "dut-wrong"
    wrong = torch.tensor([8.0, 2.0], dtype=torch.float16)
    assert judge_leaf(wrong, cpu, exact, 1e-5, magnitude=magnitude, summands=n)[0] == "dut-wrong"


def test_an_op_of_unknown_structure_gets_the_accumulation_bound_of_its_result(registered):
    """OpInfo entries that are not reductions may still accumulate (a matrix product in
    float16 that sums in float16): their half-precision results are held to the bound for
    the estimated number of terms, scaled by the result itself; a wrong element is found."""
    from mpsfuzz.generation import opinfo
    from mpsfuzz.generation.opspec import OpSpec, any_shape


    for structure in ((), ("structure-unknown",)):
        registered(OpSpec(name="test.rowsum", family="test", fn=lambda x: x.sum(-1), shapes=any_shape(2),
                          dtypes=("float16",), semantics=frozenset(structure), doc="row sums"))
        case = Case("test.rowsum", (_recipe((4, 256), "float16", distribution="positive", seed=5),))
        found = [f["oracle"] for f in judge_case(case, SumsInHalf(), DEFAULT).failures]
        assert found == ([] if structure else ["values"]), (structure, found)
        assert [f["oracle"] for f in judge_case(case, SumsInHalf(wrong=True), DEFAULT).failures] == ["values"]
    assert opinfo.FAMILY and "structure-unknown" in catalogue_semantics()


def catalogue_semantics():
    from mpsfuzz.generation.opspec import SEMANTICS
    return SEMANTICS


def test_a_float32_sum_that_cancels_extremes_is_held_to_the_terms_magnitude():
    """mean([max, lowest, -2]) in float32 is -2/3 summed left to right and 0 summed as
    (lowest + -2) + max: both correct to u * sum|terms| (H100, torch 2.11: CUDA gave 0)."""
    exact = torch.tensor([-2.0 / 3.0], dtype=torch.float64)
    cpu = exact.to(torch.float32)
    cuda = torch.tensor([0.0])
    terms = torch.tensor([(2 * 3.4028234663852886e38 + 2) / 3], dtype=torch.float64)  # mean(|x|)
    got, _ = judge_leaf(cuda, cpu, exact, 1e-5, rtol=1.3e-6, overflow=True, magnitude=terms, summands=3)
    assert got in ("within-bound", "overflow")
    # without the terms' magnitude (an op that does not accumulate) it is a finding, and
    # with it a value off by more than the bound still is
    assert judge_leaf(cuda, cpu, exact, 1e-5, rtol=1.3e-6, overflow=True)[0] == "dut-wrong"
    small = torch.tensor([2.0], dtype=torch.float64)
    assert judge_leaf(torch.tensor([3.0]), torch.tensor([2.0]), small, 1e-5, rtol=1.3e-6, magnitude=small,
                      summands=3)[0] == "dut-wrong"


def test_a_result_not_determined_to_its_leading_digit_gets_no_verdict():
    """pinverse of a rank-1 (expanded) matrix: float64 jumps from 0.3 to 1e8 when the
    inputs move by one roundoff; whatever the target returns there is no verdict. An
    exact tie (LU's pivot among equal entries) is broken both ways by the antithetic
    perturbations."""
    exact = torch.tensor([0.313, -0.0596], dtype=torch.float64)
    moved = [torch.tensor([-8.5e7, -4.4e8], dtype=torch.float64), torch.tensor([8.5e7, 4.4e8], dtype=torch.float64)]
    cuda, cpu = torch.tensor([-4.4e7, 1.7e8]), torch.tensor([-1.03e7, 3.9e7])
    assert judge_leaf(cuda, cpu, exact, 1e-5, rtol=1.3e-6, perturbed=moved)[0] == "ill-conditioned"
    from mpsfuzz.oracles.jury.float64 import dense_wide_inputs
    tie = Case("add", (TensorRecipe((2, 2), "float32", Layout(expanded=(1,)), ValueRecipe("normal", 0)),
                       _recipe((2, 2))))
    up, down = (dense_wide_inputs(tie, perturb=k)[0] for k in (1, 2))
    assert bool((up[:, 0] != up[:, 1]).all())  # the tie is broken...
    assert torch.equal(up[:, 0] > up[:, 1], down[:, 0] < down[:, 1])  # ...one way, then the other


def test_a_result_where_cpu_raises_is_held_to_the_arbiters_bounds(registered):
    """The device accepts what CPU rejects and sums in float16: within the accumulation
    bound that is a capability, not accepts-wrong; a wrong element still is."""
    from mpsfuzz.generation.opspec import OpSpec, any_shape

    def rowsum(x):
        if x.dtype == torch.float16:
            raise RuntimeError("rowsum: an internal assert this CPU trips on float16")
        return x.sum(-1)


    registered(OpSpec(name="test.rowsum_rejects", family="test", fn=rowsum, shapes=any_shape(2),
                      dtypes=("float16",), semantics=frozenset({"accumulates"}), doc="row sums"))
    case = Case("test.rowsum_rejects", (_recipe((4, 256), "float16", distribution="positive", seed=5),))
    kinds = [f["kind"] for f in judge_case(case, SumsInHalf(), DEFAULT).failures]
    assert kinds == ["capability"], kinds
    assert [f["kind"] for f in judge_case(case, SumsInHalf(wrong=True), DEFAULT).failures] == ["accepts-wrong"]


def test_outputs_an_op_keeps_for_its_backward_are_not_compared(registered):
    """native_layer_norm's mean and rstd are float32 for float16 input on CUDA and
    float16 on CPU: each backend's own, not the op's contract (OpInfo internal ops)."""
    from mpsfuzz.generation import catalogue, opinfo
    from mpsfuzz.generation.opspec import OpSpec, any_shape

    def norm(x):
        return x * 2, x.float().mean(-1, keepdim=True).to(x.dtype)

    class SavesInFloat32(_CpuTarget):
        name = "saves-in-float32"

        def run(self, fn, x):
            out, saved = fn(x)
            return out, saved.float()

    first = lambda inputs, out: out[0]  # noqa: E731
    for private in (None, 1):
        registered(OpSpec(name="test.norm", family="test", fn=norm, shapes=any_shape(2), dtypes=("float16",),
                          canonicalise=first, private_outputs_from=private, doc="norm"))
        case = Case("test.norm", (_recipe((3, 4), "float16"),))
        kinds = [f["kind"] for f in judge_case(case, SavesInFloat32(), DEFAULT).failures]
        assert kinds == ([] if private else ["wrong-dtype"]), (private, kinds)
    if opinfo.available()[0]:
        spec = catalogue.get(opinfo.PREFIX + "native_layer_norm")
        assert spec.private_outputs_from == 1 and catalogue.get(opinfo.PREFIX + "add").private_outputs_from is None


def test_a_complex_input_moves_in_phase_too():
    """geqrf of a rank-1 complex matrix: tau of the zero column is any point of a circle,
    chosen by the phase of roundoff noise; a perturbation that only scales each value
    keeps that phase and would miss it (H100, torch 2.11: CUDA and LAPACK chose
    different points)."""
    from mpsfuzz.oracles.jury.float64 import dense_wide_inputs
    case = Case("add", (_recipe((6,), "complex64"), _recipe((6,), "complex64")))
    x = case.materialize("cpu")[0].to(torch.complex128)
    moved = dense_wide_inputs(case, perturb=1)[0]
    assert bool(((moved / x).angle().abs() > 0).all())
    u = float(torch.finfo(torch.float32).eps)
    assert bool(((moved - x).abs() <= u * x.abs() * (1 + 1e-9)).all())


def test_terms_of_an_op_of_unknown_structure_are_as_large_as_its_largest_element(registered):
    """OpInfo's _softmax_backward_data in bfloat16 on CUDA: an element 4 roundoffs of the
    largest element off (intermediates rounded to bfloat16) is not a finding; an element
    off by its own size is."""
    from mpsfuzz.generation.opspec import OpSpec, any_shape

    class Nudges(_CpuTarget):
        name = "nudges"

        def __init__(self, by):
            self.by = by

        def run(self, fn, x):
            out = fn(x).clone()
            top = out.abs().max()
            small = out.abs().argmin()
            out.view(-1)[small] += self.by * float(top) * 2.0 ** -8
            return out

    registered(OpSpec(name="test.halve", family="test", fn=lambda x: x * 0.5, shapes=any_shape(1),
                      dtypes=("bfloat16",), semantics=frozenset({"structure-unknown"}), doc="unknown"))
    case = Case("test.halve", (_recipe((5,), "bfloat16", seed=7),))
    assert judge_case(case, Nudges(4), DEFAULT).failures == ()
    assert [f["oracle"] for f in judge_case(case, Nudges(256), DEFAULT).failures] == ["values"]


# -- gradients at non-finite input elements --------------------------------------------------

class EluBackwardBranchesOnNan(_CpuTarget):
    """CUDA's elu backward: ``x <= 0 ? ... : grad * scale``, so a NaN input takes the
    positive branch and gets the upstream gradient (eager CPU's vectorised loop gives NaN,
    its scalar tail the upstream gradient: pytorch/pytorch#195075). ``also_finite``
    corrupts a finite position too: a real bug the rule must not excuse."""

    name = "elu-branches-on-nan"

    def __init__(self, also_finite: bool = False):
        self.also_finite = also_finite

    def run(self, fn, *args, **kwargs):
        from torch.utils._python_dispatch import TorchDispatchMode
        target = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, a=(), k=None):
                out = func(*a, **(k or {}))
                if func is torch.ops.aten.elu_backward.default:
                    grad_output, x = a[0], a[-1]
                    out = torch.where(torch.isnan(x), grad_output, out)
                    if target.also_finite:
                        out = out.clone()
                        out.view(-1)[-1] += 1.0
                return out
        with Mode():
            return fn(*args, **kwargs)


def _celu_grad_case():
    values = ValueRecipe("normal", 5, specials=((0, "nan"),))
    return Case("celu", (TensorRecipe((7, 5), "float32", values=values),), variant="grad")


def test_a_gradient_that_differs_only_at_a_nan_input_element_is_no_finding():
    summary = judge_case(_celu_grad_case(), EluBackwardBranchesOnNan(), ("values", "grads", "arbiter"))
    assert summary.failures == () and "no convention" in (summary.grad_undefined or ""), summary


def test_a_gradient_also_wrong_at_a_finite_element_is_still_found():
    summary = judge_case(_celu_grad_case(), EluBackwardBranchesOnNan(also_finite=True), ("values", "grads", "arbiter"))
    assert [f["oracle"] for f in summary.failures] == ["grads"], summary


# -- decompositions: a factor is determined only as a whole ----------------------------------

def test_a_factor_with_an_undetermined_element_gets_no_verdict_as_a_whole():
    """Run 7: OpInfo's lu of a stride-0 expanded (rank-1) complex64 matrix. CPU's second
    column is exact zeros, CUDA's rounding noise picked a pivot: both factor A; float64
    moved by as much as the element itself under roundoff-sized moves there, and every
    element that depends on that free direction differs."""
    truth = _t(1.0, 0.5, 0.0, dtype=torch.float64)
    dut, cpu = _t(1.0, 0.9, 0.3), _t(1.0, 0.5, 0.0)
    moved = [_t(1.0, 0.5, 0.2, dtype=torch.float64)]
    assert judge_leaf(dut, cpu, truth, 1e-5, rtol=1.3e-6, perturbed=moved)[0] == "dut-wrong"
    got, numbers = judge_leaf(dut, cpu, truth, 1e-5, rtol=1.3e-6, perturbed=moved, whole=True)
    assert got == "ill-conditioned" and numbers["undetermined_factor"]


def test_a_wrong_element_of_a_determined_factor_is_still_wrong_as_a_whole():
    truth = _t(1.0, 0.5, 0.25, dtype=torch.float64)
    moved = [_t(1.0, 0.5 + 1e-9, 0.25, dtype=torch.float64)]
    got, _ = judge_leaf(_t(1.0, 0.9, 0.25), _t(1.0, 0.5, 0.25), truth, 1e-5, rtol=1.3e-6, perturbed=moved,
                        whole=True)
    assert got == "dut-wrong"


@pytest.mark.slow
def test_opinfo_decompositions_are_judged_as_a_whole():
    from mpsfuzz.generation import opinfo
    ok, why = opinfo.available()
    if not ok:
        if os.environ.get("MPSFUZZ_REQUIRE_OPINFO"):
            raise AssertionError(why)
        pytest.skip(why)
    specs = {s.name: s for s in opinfo.specs(set(catalogue.all_ops()))}
    assert "determined-as-a-whole" in specs["opinfo:lu"].semantics
    assert "determined-as-a-whole" not in specs["opinfo:cdist"].semantics


# -- an in-place op CPU broadcasts self for ---------------------------------------------------

class RefusesInPlace(_CpuTarget):
    """A target that refuses every in-place call (as Inductor refused ``addbmm_`` into a
    0-d self: "expand: the requested shape has too few dimensions")."""

    name = "refuses-in-place"

    def run(self, fn, *args, **kwargs):
        if getattr(fn, "__name__", "").endswith("_"):
            raise RuntimeError("expand: the requested shape has too few dimensions!")
        return fn(*args, **kwargs)


def test_cpu_resizing_self_in_place_is_cpus_bug_not_the_targets():
    """Run 9 (cuda-compiled): eager ``addbmm_`` turns a 0-d self into the (1, 2) result,
    where ``add_`` raises "output with shape [] doesn't match the broadcast shape"."""
    small = dict(dtype="int64", values=ValueRecipe("small_int", 1))
    case = Case("addbmm", (TensorRecipe((), **small), TensorRecipe((2, 1, 1), **small),
                           TensorRecipe((2, 1, 2), **small)), variant="inplace")
    failures = judge_case(case, RefusesInPlace(), ("errors",)).failures
    assert [(f["kind"], f["blame"]) for f in failures] == [("ref-resizes-self", "cpu")], failures
    same_shape = Case("addbmm", (TensorRecipe((1, 2), **small), TensorRecipe((2, 1, 1), **small),
                                 TensorRecipe((2, 1, 2), **small)), variant="inplace")
    failures = judge_case(same_shape, RefusesInPlace(), ("errors",)).failures
    assert [(f["kind"], f["blame"]) for f in failures] == [("dut-raises", "target")], failures


def test_the_other_infinity_is_excused_only_where_the_terms_of_its_sign_overflow():
    """conv3d in bfloat16 on an H100 (torch 2.11), a weight of bfloat16's max over six
    inputs: the exact sum is -3.8e38 (-inf in bfloat16, as CPU says), but the positive
    products alone reach 3.6e38, past bfloat16's max, and cuDNN returned +inf. Some order
    of evaluation gets there: not a finding. Where the positive terms cannot overflow,
    +inf is still wrong."""
    big = float(torch.finfo(torch.bfloat16).max)
    plus_inf = torch.tensor([INF], dtype=torch.bfloat16)

    def judged(inputs, **given):
        exact = torch.tensor([big * sum(inputs) + 4.0], dtype=torch.float64)
        terms = torch.tensor([big * sum(abs(v) for v in inputs) + 4.0], dtype=torch.float64)
        cpu = exact.to(torch.bfloat16)
        assert cpu.item() == -INF
        return judge_leaf(plus_inf, cpu, exact, 1e-5, rtol=0.016, overflow=True, magnitude=terms, summands=7,
                          **{k: terms for k in given})

    inputs = [0.061767578125, 0.62109375, 0.380859375, -1.03125, -0.1953125, -0.96484375]
    assert judged(inputs, terms=True)[0] == "overflow"
    # a magnitude that is only a floor (a gradient's: the leaf's largest element) excuses nothing
    assert judged(inputs)[0] == "dut-wrong"
    # the same sum with positive terms of a quarter of that: they cannot overflow
    quiet = [v / 4 if v > 0 else v for v in inputs]
    assert judged(quiet, terms=True)[0] == "dut-wrong"


class _SetsGradientPositions(_CpuTarget):
    """Eager CPU whose first gradient takes ``values`` where ``where`` holds."""
    name = "order-cpu"

    def __init__(self, where: torch.Tensor, values: torch.Tensor):
        self.where, self.values = where, values

    def run(self, fn, *args, **kwargs):
        out = fn(*args, **kwargs)
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], list) and out[1][0] is not None:
            raw, grads = out
            return raw, [torch.where(self.where, self.values.to(grads[0].dtype), grads[0])] + grads[1:]
        return out


def _masses_of_each_sign(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """The positive and the negative terms of the first input's gradient summed apart in
    float64: the gradient is bilinear in (upstream, weight), so the positive products
    are those of equal signs, the negative ones those of opposite signs."""
    from mpsfuzz.execution.executor import upstream_gradient
    x, w, b = (r.materialize().double() for r in case.inputs)
    kwargs = case.kwargs_dict()
    out_shape = torch.nn.functional.conv_transpose2d(x, w, b, **kwargs).shape
    up = upstream_gradient(out_shape, torch.bfloat16, 0, case.inputs[0].values.seed).double()

    def grad_x(u, weight):
        xx = x.clone().requires_grad_()
        return torch.autograd.grad(torch.nn.functional.conv_transpose2d(xx, weight, None, **kwargs), xx, u)[0]
    pos, neg = up.clamp(min=0), (-up).clamp(min=0)
    wpos, wneg = w.clamp(min=0), (-w).clamp(min=0)
    return grad_x(pos, wpos) + grad_x(neg, wneg), grad_x(pos, wneg) + grad_x(neg, wpos)


def test_a_gradients_other_infinity_is_judged_on_its_measured_terms():
    """The gradient of conv_transpose2d in bfloat16 (an H100: a weight of bfloat16's max,
    CPU -inf, cuDNN +inf for an element of x's gradient whose positive terms alone pass
    bfloat16's max). The terms are measured by a backward on |inputs| against the absolute
    upstream gradient: the other infinity where the terms of its sign alone overflow is
    no finding; a finite value there is one, and so is the other infinity where they do
    not overflow. Which infinity CPU reaches hangs on its order of evaluation (its vector
    width), so the positions are read from CPU's result and the float64 sums of each sign."""
    def small_ints(shape, seed, *, layout=Layout(), specials=()):
        return TensorRecipe(shape, "bfloat16", layout, ValueRecipe("small_int", seed=seed, specials=specials))
    case = Case("conv_transpose2d", (small_ints((1, 1, 3), 1),
                                     small_ints((1, 3, 1, 2), 0, layout=Layout(expanded=(1,)), specials=((0, "max"),)),
                                     small_ints((3,), 0)),
                kwargs=(("output_padding", (0, 1)), ("stride", (1, 2))), variant="grad")
    x, w, b = (r.materialize().requires_grad_() for r in case.inputs)
    from mpsfuzz.execution.executor import upstream_gradient
    out = torch.nn.functional.conv_transpose2d(x, w, b, **case.kwargs_dict())
    cpu = torch.autograd.grad(out, x, upstream_gradient(out.shape, out.dtype, 0, case.inputs[0].values.seed))[0]
    positive, negative = _masses_of_each_sign(case)
    big = float(torch.finfo(torch.bfloat16).max)
    # where CPU has no infinity of a sign whose terms alone overflow, another order of
    # evaluation reaches that infinity (CPU's own gives the other one, or inf - inf)
    reach_plus = positive.gt(big) & ~torch.isfinite(cpu) & (cpu != INF)
    reach_minus = negative.gt(big) & ~torch.isfinite(cpu) & (cpu != -INF) & ~reach_plus
    reachable = reach_plus | reach_minus
    assert reachable.any(), (cpu, positive, negative)   # the premise: terms of both signs overflow
    other_infinity = torch.where(reach_plus, INF, -INF)
    # CPU's infinities whose other sign's terms stay below bfloat16's max: no order flips them
    unreachable = torch.isinf(cpu) & ~torch.where(cpu > 0, negative, positive).gt(big)

    def oracles_of(where, values):
        return [f["oracle"] for f in judge_case(case, _SetsGradientPositions(where, values), DEFAULT).failures]
    assert oracles_of(reachable, other_infinity) == []
    assert "grads" in oracles_of(reachable, torch.zeros(()))
    if unreachable.any():
        assert "grads" in oracles_of(unreachable, -cpu.double())


def test_a_target_within_the_tolerance_of_float64_is_not_wrong_because_cpu_was_luckier():
    """An H200's float32 shifted Chebyshev V_8 at x = 0.032: CUDA 9.1e-6 off the exact
    value (1.05e-5 allowed), CPU 1.8e-6, so the two differ by 1.09e-5. The target met the
    tolerance against the exact result; only a CPU far worse than it makes a finding (of
    CPU's), and a target outside the tolerance is still wrong."""
    exact = torch.tensor([0.4143702944150031], dtype=torch.float64)
    cuda_like = torch.tensor([0.41437938809394836])
    lucky_cpu = torch.tensor([0.41436851024627686])
    assert judge_leaf(cuda_like, lucky_cpu, exact, 1e-5, rtol=1.3e-6)[0] == "within-tolerance"
    far_cpu = torch.tensor([0.41439])          # 2e-5 off: worse than the target by more than 2x
    near_cuda = torch.tensor([0.4143712])      # 9e-7 off
    assert judge_leaf(near_cuda, far_cpu, exact, 1e-5, rtol=1.3e-6)[0] == "cpu-wrong"
    wrong = torch.tensor([0.41441])            # 4e-5 off: outside the tolerance
    assert judge_leaf(wrong, lucky_cpu, exact, 1e-5, rtol=1.3e-6)[0] == "dut-wrong"


def _polynomial_case():
    """special.shifted_chebyshev_polynomial_v of degree 8 (a float32 tensor) near x = 0."""
    return Case("special.shifted_chebyshev_polynomial_v", (
        TensorRecipe((64,), "float32", Layout(), ValueRecipe(distribution="uniform", low=0.0, high=0.05, seed=3)),
        TensorRecipe((1,), "float32", Layout(), ValueRecipe(distribution="int_range", low=8, high=8, seed=0))))


def test_a_degree_is_not_moved_by_the_conditioning_check():
    """Moved by a roundoff, a degree of 8.0 truncates to 7: every wrong value of the
    orthogonal polynomials read as ill-conditioned, and a target 1e-4 off everywhere
    was dismissed. Inputs drawn as integers in a range stay as they are."""
    from mpsfuzz.testing.faults import Fault
    off = FaultTarget([Fault("poly_off", "test", ("aten::special_shifted_chebyshev_polynomial_v",),
                             lambda f, a, k: True, "rewrite", rewrite=lambda f, a, k, r: r * (1 + 1e-4))])
    found = judge_case(_polynomial_case(), off, DEFAULT).failures
    assert [(f["oracle"], f["kind"]) for f in found] == [("values", "wrong-values")], found
    assert "float64 arbiter: dut-wrong" in found[0]["message"]


# The H200's case (a 60 s campaign on the polynomials, once their degrees stayed put):
# CUDA's float32 V_8 at x = 0.032 was 1.28e-5 off float64, where 1.05e-5 is allowed.
_SHIFTED_V = {"format": 3, "op": "special.shifted_chebyshev_polynomial_v", "variant": "functional", "kwargs": {},
              "inputs": [{"shape": [2, 2, 2, 3, 3, 3, 3, 2], "dtype": "float32",
                          "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
                          "values": {"distribution": "uniform", "seed": 1988193, "low": None, "high": None,
                                     "specials": []}, "alias": None},
                         {"shape": [2, 2, 2, 3, 3, 3, 3, 2], "dtype": "float32",
                          "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
                          "values": {"distribution": "int_range", "seed": 673450, "low": -1, "high": 8,
                                     "specials": []}, "alias": None}]}


def test_a_shifted_polynomial_is_judged_on_the_rounding_of_2x_minus_1():
    """A shifted polynomial evaluates at 2x - 1, which float32 rounds to the grid of 1
    however small x is: near 2x - 1 = -1 its V_8 amplifies that rounding 47 times. CUDA's
    value there is no finding; the same polynomial 1e-4 off everywhere still is."""
    from mpsfuzz.testing.faults import Fault
    index = (1, 1, 1, 2, 2, 1, 0, 1)

    def like_cuda(func, args, kwargs, result):
        result = result.clone()
        result[index] = 0.41418400406837463
        return result
    case = Case.from_json(_SHIFTED_V)
    cuda = FaultTarget([Fault("v_like_cuda", "test", ("aten::special_shifted_chebyshev_polynomial_v",),
                              lambda f, a, k: True, "rewrite", rewrite=like_cuda)])
    x, n = case.materialize("cpu")
    assert abs(float(torch.special.shifted_chebyshev_polynomial_v(x, n)[index]) - 0.41418400406837463) > 1e-5
    assert judge_case(case, cuda, DEFAULT).failures == ()
    off = FaultTarget([Fault("poly_off", "test", ("aten::special_shifted_chebyshev_polynomial_v",),
                             lambda f, a, k: True, "rewrite", rewrite=lambda f, a, k, r: r * (1 + 1e-4))])
    assert [f["oracle"] for f in judge_case(_polynomial_case(), off, DEFAULT).failures] == ["values"]


def test_cpu_is_not_blamed_where_the_conditioning_explains_its_error():
    """The same campaign, another seed: CPU's float32 V_8 1.1e-5 off float64 where the
    formula amplifies a roundoff 47 times, CUDA's 8e-7 off; CPU was filed as wrong."""
    from mpsfuzz.testing.faults import Fault
    case = Case.from_json({"format": 3, "op": "special.shifted_chebyshev_polynomial_v", "variant": "functional",
                           "kwargs": {}, "inputs": [
                               {"shape": [2, 5, 8], "dtype": "float32",
                                "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
                                "values": {"distribution": "uniform", "seed": 166638, "low": None, "high": None,
                                           "specials": []}, "alias": None},
                               {"shape": [], "dtype": "float32",
                                "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": []},
                                "values": {"distribution": "int_range", "seed": 26, "low": -1, "high": 8,
                                           "specials": []}, "alias": None}]})

    def like_cuda(func, args, kwargs, result):
        result = result.clone()
        result[1, 4, 0] = 0.028801115229725838
        return result
    cuda = FaultTarget([Fault("v_like_cuda", "test", ("aten::special_shifted_chebyshev_polynomial_v",),
                              lambda f, a, k: True, "rewrite", rewrite=like_cuda)])
    x, n = case.materialize("cpu")
    assert abs(float(torch.special.shifted_chebyshev_polynomial_v(x, n)[1, 4, 0]) - 0.028801115229725838) > 1e-5
    assert judge_case(case, cuda, DEFAULT).failures == ()
    # CPU off by far more than any conditioning: still CPU's finding
    exact = torch.tensor([0.5, 0.25], dtype=torch.float64)
    moved = [exact * (1 + 2.0 ** -23), exact * (1 - 2.0 ** -23)]
    got, _ = judge_leaf(exact.float(), torch.tensor([0.5, 0.26]), exact, 1e-5, rtol=1.3e-6, perturbed=moved)
    assert got == "cpu-wrong"


def _direct_group_norm(func, args, kwargs, out):
    # (x - mean) * rstd * w + b, as CUDA computes it (CPU folds w into scale and shift,
    # and inf - inf comes out where an input weight is infinite)
    x, w, b, n, c, hw, groups = args[:7]
    _, mean, rstd = out
    shape = (n, groups, -1)
    y = ((x.reshape(shape) - mean.reshape(n, groups, 1)) * rstd.reshape(n, groups, 1)).reshape(x.shape)
    view = (1, c) + (1,) * (x.dim() - 2)
    return (y * w.reshape(view) + b.reshape(view), mean, rstd)


def _inf_stays_inf(func, args, kwargs, out):
    # a sub kernel that returns +inf for inf - inf (a real bug: no limit exists there)
    return torch.where(torch.isnan(out) & torch.isinf(args[0]), torch.full_like(out, float("inf")), out)


def test_an_infinity_that_is_the_ops_limit_is_not_wrong_where_cpu_reaches_nan_by_its_order_of_evaluation():
    """An H200 run (docs/real-findings.md): group_norm of x = [-4, -3] with weight [inf, -4] is -inf on CUDA
    ((x - mean) * rstd * w + b) and NaN on CPU and in float64 (x * (w * rstd) + (b -
    mean * rstd * w), inf - inf); with the weight a growing finite stand-in the result
    tends to -inf. inf - inf itself has no limit, and a kernel that says inf there is
    still wrong."""
    from mpsfuzz.testing.faults import Fault, _always
    x = TensorRecipe((1, 2), "float32", values=ValueRecipe("small_int", 450440144))
    w = TensorRecipe((2,), "float32", values=ValueRecipe("small_int", 0, specials=((0, "inf"),)))
    b = TensorRecipe((2,), "float32", values=ValueRecipe("small_int", 0))
    case = Case("group_norm", (x, w, b), (("num_groups", 1),))
    direct = FaultTarget([Fault("group_norm_direct", "group_norm computed directly", ("aten::native_group_norm",),
                                _always, "rewrite", rewrite=_direct_group_norm)])
    obs = observe(case, direct, DEFAULT)
    assert torch.isinf(obs.dut[0, 0]) and torch.isnan(obs.ref[0, 0])    # the run-33 disagreement
    assert judge_case(case, direct, DEFAULT).failures == ()
    wrong = FaultTarget([Fault("sub_inf", "inf - inf is inf", ("aten::sub",), _always, "rewrite",
                               rewrite=_inf_stays_inf)])
    infs = TensorRecipe((2,), "float32", values=ValueRecipe("small_int", 0, specials=((0, "inf"), (1, "inf"))))
    found = judge_case(Case("sub", (infs, infs)), wrong, DEFAULT).failures
    assert [(f["oracle"], f["kind"]) for f in found] == [("values", "wrong-values")], found


class _HalfPooling(DeviceTarget):
    """A device with a half avg_pool3d kernel (eager CPU has none): it pools in float32
    and rounds the result to half; ``inflate`` makes the kernel 25% off (a real bug)."""

    def __init__(self, inflate: bool = False):
        super().__init__("half-pooling", "cpu")
        self.inflate = inflate

    def run(self, fn, *args, **kwargs):
        from torch.utils._python_dispatch import TorchDispatchMode
        inflate = self.inflate

        class Pooling(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, a=(), k=None):
                k = k or {}
                pools = (torch.ops.aten.avg_pool3d, torch.ops.aten.avg_pool3d_backward)
                if func.overloadpacket in pools and a[0].dtype == torch.float16:
                    out = func(*[t.float() if isinstance(t, torch.Tensor) else t for t in a], **k)
                    return (out * (1.25 if inflate else 1.0)).half()
                return func(*a, **k)
        with Pooling():
            return fn(*args, **kwargs)


def test_a_half_composite_the_target_runs_kernel_by_kernel_is_judged_by_the_same_half_arithmetic():
    """Three H200 runs (docs/real-findings.md): float16 local_response_norm of 65504 is 0 on CUDA (the
    op's own decomposition squares 65504: inf in half) and 3.9 in the reference, which
    eager CPU (no half avg_pool3d) computed in float32. Run kernel by kernel in half,
    the decomposition gives 0 too. A pooling kernel 25% off is still found."""
    x = TensorRecipe((1, 1, 1, 1), "float16", values=ValueRecipe("small_int", 0, specials=((0, "max"),)))
    case = Case("local_response_norm", (x,), (("size", 1),))
    obs = observe(case, _HalfPooling(), DEFAULT)
    assert obs.ref_widened and float(obs.dut.flatten()[0]) == 0.0 and float(obs.ref.flatten()[0]) > 3
    assert judge_case(case, _HalfPooling(), DEFAULT).failures == ()
    # and in the grad variant (another H200 run), forward and backward in half, kernel by kernel
    grad = Case("local_response_norm", (x,), (("size", 1),), variant="grad")
    assert judge_case(grad, _HalfPooling(), DEFAULT).failures == ()
    y = TensorRecipe((1, 3, 2, 2), "float16", values=ValueRecipe("normal", 5))
    found = judge_case(Case("local_response_norm", (y,), (("alpha", 1.0), ("size", 2))), _HalfPooling(inflate=True),
                       DEFAULT)
    assert ("values", "wrong-values") in [(f["oracle"], f["kind"]) for f in found.failures], found.failures


def _tanh_rounded_away(func, args, kwargs, out):
    # tanh in bfloat16 rounded away from zero: one ulp off nearest where it is inexact,
    # as another backend's tanh may be
    x = args[0]
    bits = torch.tanh(x.float()).view(torch.int32)
    away = torch.where((bits & 0xFFFF) != 0, (bits & ~0xFFFF) + 0x10000, bits)
    return away.view(torch.float32).to(x.dtype)


def test_a_difference_that_one_roundoff_of_an_intermediate_explains_is_not_wrong():
    """An H200 run (docs/real-findings.md): tanhshrink's bfloat16 gradient, g - g (1 - tanh^2 x), and its
    forward, x - tanh x, cancel: an ulp of tanh x or of g (1 - tanh^2 x) is the whole
    result's error. CUDA's and CPU's were each about that far off float64. The op in
    float64 with each kernel's result moved by a roundoff of bfloat16 spreads that far;
    a tanh 25% off is still found."""
    from mpsfuzz.testing.faults import Fault, _always
    x = TensorRecipe((4, 7, 7), "bfloat16", values=ValueRecipe("normal", 2))
    away = FaultTarget([Fault("tanh_away", "tanh rounded away from zero", ("aten::tanh",), _always, "rewrite",
                              rewrite=_tanh_rounded_away)])
    for variant in ("functional", "grad"):
        case = Case("tanhshrink", (x,), variant=variant)
        obs = observe(case, away, DEFAULT)
        assert not torch.equal(obs.dut, obs.ref)
        assert judge_case(case, away, DEFAULT).failures == (), variant
    off = FaultTarget([Fault("tanh_off", "tanh 25% off", ("aten::tanh",), _always, "rewrite",
                             rewrite=lambda func, args, kwargs, out: out * 1.25)])
    found = judge_case(Case("tanhshrink", (x,)), off, DEFAULT).failures
    assert [(f["oracle"], f["kind"]) for f in found] == [("values", "wrong-values")], found


def test_a_quotient_that_overflows_from_a_subnormal_divisor_is_not_reported():
    """Issue 30 (H200, torch 2.11): CUDA's addcdiv(4, 4, 2.9e-39, value=0) divides first: the float32
    quotient is inf and 0 x inf NaN, where CPU multiplies by value first (4). An
    intermediate past the dtype's range, not a bug."""
    case = Case("addcdiv", (_recipe((), distribution="small_int", seed=0), _recipe((), distribution="small_int", seed=0),
                            _recipe((), specials=[(0, "subnormal")])), (("value", 0.0),))
    target = FaultTarget(["addcdiv_divides_first"])
    x, a, b = case.materialize("cpu")
    assert torch.isnan(target.run(torch.addcdiv, x, a, b, value=0.0)).all()      # the fault fires
    assert _failures(case, ["addcdiv_divides_first"]) == []


def test_a_subnormal_flushed_to_zero_is_still_found():
    """The rule needs an intermediate past the range: a target that flushes a subnormal
    result to zero (MPS's fast math) is still wrong."""
    from mpsfuzz.testing.faults import Fault

    def flushed(func, args, kwargs, result):
        x, a, b = args[:3]
        b = torch.where(b.abs() < torch.finfo(b.dtype).tiny, torch.zeros_like(b), b)
        return result.copy_(x + a / b)

    ftz = Fault("addcdiv_flushes_subnormals", "test: the divisor flushed to zero", ("aten::addcdiv.default",),
                lambda func, args, kwargs: True, "rewrite", rewrite=flushed)
    # 1e-3 / 2.9e-39 fits float32; flushed, the quotient is inf
    case = Case("addcdiv", (_recipe(()), _recipe((), distribution="uniform", high=1e-3),
                            _recipe((), specials=[(0, "subnormal")])))
    found = _failures(case, [ftz])
    assert [f["oracle"] for f in found] == ["values"], found


def _bicubic_aa_off_by(delta):
    from mpsfuzz.testing.faults import Fault

    def moved(func, args, kwargs, result):
        r = result.clone()
        r[1, 2, 0, 0] += delta
        return result.copy_(r)
    return Fault("bicubic_aa_moved", f"test: one output moved by {delta}", ("aten::_upsample_bicubic2d_aa",),
                 lambda func, args, kwargs: True, "rewrite", rewrite=moved)


# Issue 30 (H200, torch 2.11): float16 antialiased bicubic of an expanded input, 2x3 to 1x6; CUDA's
# first output -0.005703, float64 -0.005779: cancelled from terms near 1.5 by weights of
# both signs.
_BICUBIC_AA = Case("interpolate_bicubic", (
    TensorRecipe((2, 3, 2, 3), "float16", Layout(expanded=(2,)), ValueRecipe("normal", 3563997446)),),
    (("antialias", True), ("mode", "bicubic"), ("scale_factor", (0.5, 2.0))))


def test_a_half_precision_resample_within_a_rounding_of_its_terms_is_not_reported():
    assert _failures(_BICUBIC_AA, [_bicubic_aa_off_by(7.6e-5)]) == []


def test_a_half_precision_resample_off_by_more_than_its_terms_rounding_is_found():
    found = _failures(_BICUBIC_AA, [_bicubic_aa_off_by(0.02)])
    assert [f["oracle"] for f in found] == ["values"], found


def test_a_renorm_whose_float32_accumulator_overflows_at_the_dtypes_max_is_not_reported():
    """Issue 37 (H200): embedding(max_norm=1) of a float32 row holding float32's max:
    CUDA's renorm sums x * x in float32, inf, and scales the row by 1 / inf = 0, where the
    documented renorm (and a float64 accumulator) gives a row of norm 1. An intermediate
    past the dtype's range: neither answer is reported, whichever eager CPU gives (its
    accumulator differs by build). A renorm wrong without the extremes (the signed norm
    of norm_type=3) still is."""
    from mpsfuzz.execution.executor import observe
    from mpsfuzz.testing.faults import Fault, renorm_accumulated_in
    weight = TensorRecipe((3, 2), "float32", Layout(), ValueRecipe("small_int", seed=1, specials=((4, "max"),)))
    indices = TensorRecipe((2,), "int64", Layout(), ValueRecipe("int_range", seed=0, low=0, high=2))
    case = Case("embedding", (indices, weight), (("max_norm", 1.0),))
    wide = Fault("renorm_in_float64", "renorm with a float64 accumulator", ("aten::embedding_renorm_",),
                 lambda func, args, kwargs: True, "reimplement", instead=renorm_accumulated_in(torch.float64))
    disagreed = 0
    for faults in (["embedding_renorm_accumulates_in_float32"], [wide]):
        obs = observe(case, FaultTarget(faults), DEFAULT)
        disagreed += not torch.equal(obs.dut, obs.ref)
        assert judge_case(case, FaultTarget(faults), DEFAULT).failures == (), faults
    assert disagreed == 1          # one of the two accumulators is eager CPU's, the other is not
    negative = TensorRecipe((3, 2), "float32", Layout(), ValueRecipe("small_int", seed=1, low=-4, high=-2))
    signed = Case("embedding", (indices, negative), (("max_norm", 1.0), ("norm_type", 3.0)))
    assert [f["oracle"] for f in _failures(signed, ["embedding_renorm_signed_norm"])] == ["values"]


# conv_transpose3d's input gradient: a NaN weight whose only way to a position is a tap of
# the cropped padding (padding=(0, 1, 0), output_padding (0, 1, 0)); issue 37 (H200).
_PADDED_TRANSPOSED_CONV = Case("conv_transpose3d", (
    TensorRecipe((2, 1, 1, 2, 1), "float32", Layout(), ValueRecipe("uniform", 1449629529)),
    TensorRecipe((1, 1, 1, 2, 1), "float32", Layout(), ValueRecipe("positive", 1124886647, specials=((0, "nan"),))),
    TensorRecipe((1,), "float32", Layout(), ValueRecipe("positive", 3417798046)),
), (("bias", False), ("dilation", (1, 1, 2)), ("output_padding", (0, 1, 0)), ("padding", (0, 1, 0)),
    ("stride", (1, 2, 1))), variant="grad")


def _nan_at_the_first_input_grad(func, args, kwargs, out):
    grad_input = out[0].clone()
    grad_input.view(-1)[-1] = float("nan")
    return (grad_input,) + tuple(out[1:])


def test_a_zero_tap_multiplied_as_cpus_own_float64_kernel_multiplies_it_is_not_reported():
    """Issue 37 (H200): CUDA's float32 input gradient of conv_transpose3d is NaN where a
    NaN weight meets the cropped padding's zeros (0 x NaN); eager CPU's float32 kernel
    skips those taps and is finite, its float64 kernel multiplies them, as CUDA's float64
    does. Multiplying a zero tap is a convention, not a bug. A NaN where no kernel of
    the reference has one is still found."""
    from mpsfuzz.testing.faults import Fault
    conv = catalogue.get("conv_transpose3d").fn
    grads = {}
    for dtype in (torch.float32, torch.float64):
        xs = [t.to(dtype).requires_grad_() for t in _PADDED_TRANSPOSED_CONV.materialize("cpu")]
        out = conv(*xs, **_PADDED_TRANSPOSED_CONV.kwargs_dict())
        grads[dtype] = torch.autograd.grad(out, xs[0], torch.ones_like(out))[0]
    # the premise: the two kernels of eager CPU take the two conventions at some position
    assert bool((torch.isnan(grads[torch.float64]) & torch.isfinite(grads[torch.float32])).any())
    assert _failures(_PADDED_TRANSPOSED_CONV, ["convolution_backward_multiplies_padding_taps"]) == []
    stray = Fault("stray_nan", "a NaN in the last element of the input gradient", ("aten::convolution_backward",),
                  lambda func, args, kwargs: True, "rewrite", rewrite=_nan_at_the_first_input_grad)
    finite = Case("conv_transpose3d", (_PADDED_TRANSPOSED_CONV.inputs[0], _recipe((1, 1, 1, 2, 1), seed=5),
                                       _PADDED_TRANSPOSED_CONV.inputs[2]), _PADDED_TRANSPOSED_CONV.kwargs, variant="grad")
    assert [f["oracle"] for f in judge_case(finite, FaultTarget([stray]), DEFAULT).failures] == ["grads"]


# The backward of a float16 vector_norm computed in float32 (dtype=float32, ord=3) of small
# values: it scales x|x| (float16) by the float32 0-d factor g / ||x||^2 past float16's max.
_NORM_OF_EPS = Case("linalg.vector_norm", (
    TensorRecipe((1, 1, 1), "float16", Layout(), ValueRecipe("small_int", 2567101416, specials=((0, "eps"),))),),
    (("dtype", torch.float32), ("ord", 3)), variant="grad")


def _scaled_mul(func, args, kwargs):
    a, b = args[0], args[1]
    return a * b.to(a.dtype) * 1.5 if a.dtype == torch.float16 else func(*args, **kwargs)


def test_a_backward_factor_cast_to_the_half_result_dtype_past_its_range_is_not_reported():
    """Issue 37 (H200): CUDA's mul of a float16 tensor by a float32 0-d factor (8.2e5 here)
    casts the factor to float16 first, inf, where eager CPU multiplies at the factor's
    precision, 0.78. The result's dtype is float16 by type promotion: the backward's
    intermediate past float16's range is an order of evaluation, not a bug. A backward
    wrong by 50% on the same input is still found."""
    from mpsfuzz.testing.faults import Fault
    target = FaultTarget(["mul_casts_a_wider_0d_operand"])
    obs = observe(_NORM_OF_EPS, target, DEFAULT)
    assert bool(torch.isinf(obs.dut_side.grads[0]).all()) and bool(torch.isfinite(obs.ref_side.grads[0]).all())
    assert judge_case(_NORM_OF_EPS, target, DEFAULT).failures == ()
    off = Fault("mul_off_by_half", "mul of a float16 tensor by a 0-d factor 50% too large", ("aten::mul.Tensor",),
                lambda func, args, kwargs: isinstance(args[1], torch.Tensor) and args[1].dim() == 0
                and args[0].dim() > 0, "reimplement", instead=_scaled_mul)
    small = Case("linalg.vector_norm", (_recipe((1, 1, 3), "float16", distribution="small_int", seed=1),),
                 _NORM_OF_EPS.kwargs, variant="grad")
    assert [f["oracle"] for f in judge_case(small, FaultTarget([off]), DEFAULT).failures] == ["grads"]


# complex64 z ** w with |w| up to 11 and |z| up to 5: |w log z| reaches 20, and a rounding
# of w log z costs that many roundoffs of the result; the gapped exponent takes eager
# CPU's scalar path (std::pow), the contiguous one its vectorised path.
_COMPLEX_POWERS = Case("pow", (
    TensorRecipe((512,), "complex64", Layout(), ValueRecipe("small_int", 14)),
    TensorRecipe((512,), "complex64", Layout(gaps=(2,)), ValueRecipe("positive", 1014))))


def _pow_off_by(relative):
    def instead(func, args, kwargs):
        return torch.exp(args[1] * torch.log(args[0])) * (1 + relative)
    return instead


def test_a_complex_power_within_the_rounding_of_its_exp_log_form_is_not_reported():
    """Issue 37 (H200): complex64 pow on CUDA (exp(w log z) in complex64) and eager CPU's
    scalar path were each 1-2.7e-6 off float64, within the |w log z| roundoffs that
    rounding the intermediate w log z costs, and one of them was filed as wrong. The
    rounding bound is measured on the op's declared textbook form (OpSpec.rounding_form),
    since torch has no decomposition of pow. A result 1e-4 off is still found, as the
    target's bug."""
    from mpsfuzz.testing.faults import Fault
    assert _failures(_COMPLEX_POWERS, ["complex_pow_through_exp_log"]) == []
    off = Fault("pow_off", "complex pow 1e-4 too large", ("aten::pow.Tensor_Tensor",),
                lambda func, args, kwargs: True, "reimplement", instead=_pow_off_by(1e-4))
    found = judge_case(_COMPLEX_POWERS, FaultTarget([off]), DEFAULT).failures
    assert [(f["oracle"], f["blame"]) for f in found] == [("values", "target")], found
