"""The jury (issue 30, point 1): who is wrong when the target and eager CPU disagree is
decided by references that share no kernel with eager CPU.

Faults are injected on the CPU side (``testing/cpu_faults.py``: a dispatch mode under
every op but the target's own run corrupts one of eager CPU's kernels, as a kernel bug
would) while the target computes cleanly: each kind of reference must file CPU as the
one that is wrong. A fault of the target is still the target's with the jury on; where
no independent reference exists the disagreement is undecided, never the target's; and
where the target and CPU share a wrong kernel, the finding is both's."""
from __future__ import annotations

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.opspec import OpSpec, any_shape
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.jury import Vote, decide
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.cpu_faults import CPU_FAULTS, CpuFaultTarget
from mpsfuzz.testing.faults import Fault, FaultTarget


def tensor(shape, dtype="float64", *, layout=Layout(), seed=3, distribution="normal", specials=()):
    return TensorRecipe(tuple(shape), dtype, layout, ValueRecipe(distribution, seed=seed, specials=specials))


def judged(case, target) -> list[Failure]:
    return [Failure.from_json(f) for f in judge_case(case, target, worker_oracles(DEFAULT)).failures]


@pytest.fixture
def cpu_faulty():
    """CpuFaultTarget(faults by name, target faults): eager CPU faulty, left clean after."""
    made = []

    def make(*names, target_faults=()):
        t = CpuFaultTarget(tuple(CPU_FAULTS[n] if isinstance(n, str) else n for n in names), tuple(target_faults))
        made.append(t)
        return t
    yield make
    for t in reversed(made):
        t.close()


def only(failures: list[Failure]) -> Failure:
    assert len(failures) == 1, failures
    return failures[0]


def assert_cpu_blamed_by(failures, juror: str):
    f = only(failures)
    assert (f.oracle, f.blame) == ("arbiter", "cpu"), f.message
    assert f.details["jury"]["verdict"] == "cpu-wrong" and juror in f.details["jury"]["decided_by"], f.message
    vote = next(v for v in f.details["jury"]["votes"] if v["juror"] == juror)
    position = f.details["jury"]["positions"][0]
    # the reference's value at the disputed position is the target's, not CPU's
    assert vote["values"][0] == pytest.approx(position["target"], rel=1e-6, abs=1e-9)
    assert vote["values"][0] != pytest.approx(position["cpu"], rel=1e-3)
    return f


# -- each kind of reference blames a faulty eager CPU ------------------------------------

def test_the_decomposition_blames_a_faulty_cpu_kernel(cpu_faulty):
    """gelu decomposes into erf, mul and add: none is CPU's gelu kernel."""
    target = cpu_faulty("cpu_gelu")
    f = assert_cpu_blamed_by(judged(Case("gelu", (tensor((5,)),)), target), "decomposition")
    assert "erf" in next(v for v in f.details["jury"]["votes"] if v["juror"] == "decomposition")["reference"]
    # the gradient too: the decomposition is traced with its backward
    f = assert_cpu_blamed_by(judged(Case("gelu", (tensor((5,), "float32"),), variant="grad"), target),
                             "decomposition")


def test_the_formula_blames_cpus_antialiased_resize(cpu_faulty):
    """Issue 30: [4, -4, -2] (1x1x3x1) to 2 rows, antialiased bilinear: the documented
    triangle filter gives [1, -2.75]."""
    x = TensorRecipe((1, 1, 3, 1), "float64", values=ValueRecipe("normal", seed=0))
    case = Case("interpolate_linear", (x,), (("antialias", True), ("mode", "bilinear"), ("size", (2, 1))))
    assert_cpu_blamed_by(judged(case, cpu_faulty("cpu_bilinear_aa")), "formula")


def test_numpy_blames_a_faulty_cpu_cumsum(cpu_faulty):
    case = Case("cumsum", (tensor((6,)),), (("dim", 0),))
    assert_cpu_blamed_by(judged(case, cpu_faulty("cpu_cumsum")), "numpy")


def test_each_element_alone_blames_cpus_vectorised_fmod(cpu_faulty):
    """Issue 30: fmod of a float64 vector by 2^-1024 is NaN on CPU's vectorised path;
    the exact answer (math.fmod) is 0."""
    case = Case("fmod", (tensor((4,)), tensor((4,), seed=4)))
    assert_cpu_blamed_by(judged(case, cpu_faulty("cpu_fmod_vector")), "scalar")


# -- self checks, where no independent reference exists -----------------------------------

def _plain_op(registered, name, fn, family="nn"):
    """An op no table covers and no decomposition reaches past its own kernel."""
    return registered(OpSpec(name=name, family=family, fn=fn, shapes=any_shape(1),
                             dtypes=("float16", "float32", "float64"), grad=False))


def _mul3(x):
    return torch.mul(x, 3)


def _lgamma(x):
    return torch.lgamma(x)


def test_cpu_against_itself_blames_cpu_where_nothing_independent_applies(registered, cpu_faulty):
    """lgamma under another name: no table has it, and its decomposition is its own
    kernel (prims.lgamma). (A kernel the jury's own arithmetic uses, such as mul, made
    faulty for the whole process would corrupt the float64 runs too.)"""
    _plain_op(registered, "test.lgamma", _lgamma, family="elementwise")
    strided = Fault("cpu_lgamma_strided", "CPU lgamma wrong on non-contiguous input", ("aten::lgamma",),
                    lambda f, a, k: not a[0].is_contiguous(), "corrupt")
    gapped = tensor((3, 4), "float32", layout=Layout(gaps=(1, 2)), distribution="uniform")
    f = only(judged(Case("test.lgamma", (gapped,)), cpu_faulty(strided)))
    assert (f.blame, f.details["jury"]["decided_by"][0]) == ("cpu", "cpu-contiguous"), f.message
    assert f.kind == "cpu-layout"


def test_cpu_on_one_element_at_a_time_blames_cpus_vector_path(registered, cpu_faulty):
    _plain_op(registered, "test.lgamma", _lgamma, family="elementwise")
    vector = Fault("cpu_lgamma_vector", "CPU lgamma wrong past one element", ("aten::lgamma",),
                   lambda f, a, k: a[0].numel() > 1, "corrupt")
    f = only(judged(Case("test.lgamma", (tensor((4,), "float32", distribution="uniform"),)), cpu_faulty(vector)))
    assert (f.blame, f.details["jury"]["decided_by"]) == ("cpu", ["cpu-scalar"]), f.message


def test_the_target_against_itself_blames_the_target(registered):
    _plain_op(registered, "test.mul3", _mul3)
    strided = Fault("mul_strided", "target mul wrong on non-contiguous input", ("aten::mul",),
                    lambda f, a, k: not a[0].is_contiguous(), "corrupt")
    gapped = tensor((3, 4), "float32", layout=Layout(gaps=(1, 2)))
    f = next(f for f in judged(Case("test.mul3", (gapped,)), FaultTarget([strided])) if f.oracle == "values")
    assert (f.blame, f.details["jury"]["decided_by"]) == ("target", ["target-contiguous"]), f.message
    half = Fault("mul_half", "target mul wrong in float16", ("aten::mul",),
                 lambda f, a, k: a[0].dtype == torch.float16, "corrupt")
    f = only(judged(Case("test.mul3", (tensor((4,), "float16"),)), FaultTarget([half])))
    assert (f.blame, f.details["jury"]["decided_by"]) == ("target", ["target-wider"]), f.message


def test_without_independent_evidence_a_disagreement_is_undecided_never_the_targets(registered):
    _plain_op(registered, "test.mul3", _mul3)
    always = Fault("mul_wrong", "target mul wrong", ("aten::mul",), lambda f, a, k: True, "corrupt")
    f = only(judged(Case("test.mul3", (tensor((4,), "float32"),)), FaultTarget([always])))
    assert f.blame == "undecided" and f.details["jury"]["reason"] == "no independent reference for this call"
    assert f.dedup_key[-1] == "undecided"   # a verdict of its own: shrinking keeps it


# -- the target's bugs are still found ----------------------------------------------------

@pytest.mark.parametrize("fault, case, juror", [
    ("gelu_tanh_backward", Case("gelu", (tensor((5,), "float32"),), (("approximate", "tanh"),), variant="grad"),
     "decomposition"),
    ("lgamma_negative", Case("lgamma", (tensor((4,)),)), "scalar"),
    ("var_5d", Case("var", (tensor((1, 1, 1, 2, 3)),)), "numpy"),
    ("avg_pool2d_half", Case("avg_pool2d", (tensor((1, 1, 4, 4), "float16"),), (("kernel_size", 2),)), "formula"),
])
def test_a_fault_of_the_target_is_still_the_targets_with_the_jury_on(fault, case, juror):
    failures = judged(case, FaultTarget([fault]))
    f = next(f for f in failures if f.oracle in ("values", "grads"))
    assert f.blame == "target", f.message
    assert juror in f.details["jury"]["decided_by"], f.message


# -- both backends --------------------------------------------------------------------------

def test_a_wrong_value_both_backends_share_is_both(cpu_faulty):
    """The target's fault and eager CPU's corrupt the same element differently: the
    independent reference (numpy) has both wrong."""
    skew = Fault("cumsum_skewed", "cumsum wrong, another way", ("aten::cumsum",),
                 lambda f, a, k: a[0].numel() > 1, "inflate")
    target = cpu_faulty("cpu_cumsum", target_faults=(skew,))
    f = only(judged(Case("cumsum", (tensor((6,)),), (("dim", 0),)), target))
    assert (f.oracle, f.blame, f.details["jury"]["verdict"]) == ("values", "both", "both-wrong"), f.message
    assert f.dedup_key[-1] == "both" and "eager CPU alike" in f.title


# -- the verdict rule ---------------------------------------------------------------------

def test_independent_references_decide_only_together():
    t = Vote("a", "independent", "target-wrong", "")
    c = Vote("b", "independent", "cpu-wrong", "")
    right = Vote("c", "independent", "both-right", "")
    own = Vote("d", "target", "target-wrong", "")
    assert decide([t, right]) == ("target-wrong", ("a",), "")
    assert decide([t, c])[0] == "undecided" and "disagree" in decide([t, c])[2]
    assert decide([right]) == ("both-right", ("c",), "")
    assert decide([own]) == ("target-wrong", ("d",), "")
    assert decide([own, Vote("e", "cpu", "cpu-wrong", "")])[0] == "undecided"
    assert decide([]) == ("undecided", (), "no independent reference for this call")


def test_every_catalogue_op_name_in_the_tables_exists():
    """A reference keyed by a name the catalogue does not have would never be consulted."""
    from mpsfuzz.oracles.jury.formulas import FORMULAS
    from mpsfuzz.oracles.jury.numpy_refs import NUMPY
    from mpsfuzz.oracles.jury.scalar_refs import SCALAR
    ops = set(catalogue.all_ops())
    for table in (FORMULAS, NUMPY, SCALAR):
        assert set(table) <= ops, sorted(set(table) - ops)


def test_a_campaign_files_eager_cpus_bug_apart_from_the_targets(tmp_path):
    """End to end: `mpsfuzz run` against a clean target while eager CPU's vectorised
    fmod is wrong: one finding, CPU's (status cpu-bug), no new bug, exit 0."""
    import json
    import os
    import subprocess
    import sys
    corpus = tmp_path / "corpus"
    env = dict(os.environ, MPSFUZZ_CPU_FAULTS="cpu_fmod_vector")
    run = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", "fmod", "--target",
                          "mpsfuzz.testing.cpu_faults:target", "--max-cases", "300", "--seed", "1",
                          "--corpus", str(corpus), "--max-findings", "1", "--no-progress", "--timeout", "5"],
                         cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    found = [json.loads(p.read_text()) for p in corpus.glob("*.json")]
    assert found and {f["status"] for f in found} == {"cpu-bug"}, run.stdout
    jury = found[0]["failure"]["details"]["jury"]
    assert jury["verdict"] == "cpu-wrong" and {"scalar", "numpy"} & set(jury["decided_by"]), jury
    assert "new findings 0" in " ".join(run.stdout.split())
    # issue 37: its script, verified during the run, fails on eager CPU's value
    assert found[0]["repro"]["verified"] is True, found[0]["repro"]
    assert "eager CPU is off the reference" in found[0]["repro"]["detail"]


def test_central_differences_of_numpys_forward_judge_a_gradient():
    """A wrong backward kernel (cumsum's gradient, corrupted by the broad fault), judged
    by the finite-differences juror alone: numpy's forward has no autograd."""
    from mpsfuzz.execution.executor import observe
    from mpsfuzz.oracles.grads import check_grads
    from mpsfuzz.oracles.jury import deliberate
    target = FaultTarget(["every_backward_kernel_corrupt"])
    case = Case("cumsum", (tensor((5,), "float32"),), (("dim", 0),), variant="grad")
    obs = observe(case, target, worker_oracles(DEFAULT))
    failure = check_grads(obs)
    assert failure is not None
    jury = deliberate(obs, failure, only={"finite-differences"})
    assert (jury.verdict, jury.decided_by) == ("target-wrong", ("finite-differences",)), jury.lines()


def test_a_nan_in_the_inputs_leaves_the_tolerance_a_number():
    """silu of a gapped [nan, -4, 2] read as if dense (the target's fault): the rounding
    bound's derivatives are NaN beside the NaN input, and a NaN tolerance made CPU's
    correct values "off" the reference too: both, where the target alone is wrong."""
    gapped = TensorRecipe((3,), "float32", Layout(gaps=(2,)),
                          ValueRecipe("small_int", seed=1197, specials=((0, "nan"),)))
    f = next(f for f in judged(Case("silu", (gapped,)), FaultTarget(["silu_noncontig"])) if f.oracle == "values")
    assert f.blame == "target", f.message


def _all_neg_inf_windows_from_zero(func, args, kwargs, out):
    """CUDA's max_pool1d of this transposed input: a window that holds only -inf returns
    the index 0, and the value there (torch 2.11 on an H200)."""
    values, indices = out
    empty = torch.isneginf(values)
    first = args[0].narrow(-1, 0, 1).expand_as(values)
    return torch.where(empty, first, values), torch.where(empty, torch.zeros_like(indices), indices)


def test_a_failure_whose_result_holds_a_mask_or_index_is_arbitrated_not_left_undecided():
    """The float64 juror moves the decomposition's intermediates and lays the change on
    the result: a bool or integer leaf of the canonical form (max pooling's indices read
    as a mask) broke it ("subtraction with two bool tensors"), and CUDA's max_pool1d of
    an all -inf window, a real bug, was filed undecided (issue 37's device runs)."""
    fault = Fault("max_pool1d_neg_inf_window", "an all -inf window's index taken as 0",
                  ("aten::max_pool2d_with_indices",), lambda func, args, kwargs: True,
                  "rewrite", rewrite=_all_neg_inf_windows_from_zero)
    x = TensorRecipe((1, 1, 2), "float32", Layout(permutation=(0, 2, 1)),
                     ValueRecipe("small_int", 0, specials=((65107, "-inf"),)))
    case = Case("max_pool1d_with_indices", (x,), (("kernel_size", (1,)),))
    failures = [Failure.from_json(f) for f in judge_case(case, FaultTarget([fault]), worker_oracles(DEFAULT)).failures]
    values = [f for f in failures if f.oracle == "values"]
    assert values and all("arbiter failed" not in f.message for f in values), failures
    assert values[0].blame == "target"


def test_the_rounding_bound_is_measured_at_every_disputed_position_not_the_first_few(registered):
    """x * -3 + 1 in float16 cancels near x = 1/3: there rounding x * -3 costs about
    float16's roundoff of 1, far more than of the result. Each disputed position gets that
    bound, the 17th and the 72nd as the first (a position left unmeasured got no slack,
    and a CPU rounding its intermediates there was read as off a declared reference)."""
    from mpsfuzz.execution.executor import observe
    from mpsfuzz.oracles.jury.rounding_bound import MAX_POSITIONS, rounding_bounds
    from mpsfuzz.execution.targets import load_target
    _plain_op(registered, "test.scale_shift", lambda x: x * -3.0 + 1)
    case = Case("test.scale_shift", (tensor((72,), "float16", seed=4),))
    obs = observe(case, load_target("cpu"), DEFAULT)
    unit = float(torch.finfo(torch.float16).eps) / 2
    positions = list(range(72))
    bound = rounding_bounds(obs, False, {0: positions}, unit)[0]
    x = case.inputs[0].materialize().double()
    # the two roundings: of x * -3 (|3x|) and of the sum (|3x - 1|, to first order)
    expected = unit * ((3 * x).abs() + (1 - 3 * x).abs())
    assert len(positions) > MAX_POSITIONS
    assert torch.allclose(bound, expected, rtol=1e-6), (bound, expected)


def test_an_infinity_one_rounding_past_a_reference_at_the_dtypes_edge_is_no_juror_verdict():
    """A float64 attention over a value of float64's lowest: -inf on the target where the
    float64 decomposition says -1.8e308 (softmax weights summing to 1 + u overflow it).
    An infinity of the reference's sign, where the reference lies within the tolerance
    of the dtype's largest value, is within rounding of it; the other infinity, or one
    beside a reference far from the edge, is still off."""
    from mpsfuzz.oracles.jury.ballots import read_leaf
    lowest = torch.finfo(torch.float64).min

    def off(target: float, reference: float) -> bool:
        d = torch.tensor([target], dtype=torch.float64)
        ballot = {"dut": d, "cpu": torch.tensor([reference], dtype=torch.float64),
                  "judged": torch.tensor([True]), "tol": torch.tensor([1e-6], dtype=torch.float64)}
        return bool(read_leaf(ballot, torch.tensor([reference], dtype=torch.float64))[0].any())
    assert not off(float("-inf"), lowest)
    assert off(float("inf"), lowest)
    assert off(float("-inf"), -1e300)
    assert off(5.0, lowest)
