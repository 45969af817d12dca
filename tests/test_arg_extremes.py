"""Arguments at the ends of their ranges (issue 38): a keyword argument joins the class
by its name; drawn cases and boundary siblings move one to an extreme; a refusal past
32 bits is a limit, not a bug; a kernel that holds an int64 argument in 32 bits is
found, explained by the extreme and minimised without losing it."""
from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

import torch

from mpsfuzz.execution.observation import Observation, Raised
from mpsfuzz.generation import arg_extremes, catalogue
from mpsfuzz.generation.recipes import Case, DtypeArg, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import boundary_sibling, example_cases
from mpsfuzz.oracles.errors import check_errors
from mpsfuzz.triage.ablation import _condition_phrase

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, findings_in, mpsfuzz

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")


def _x(shape=(1, 4, 4)) -> TensorRecipe:
    return TensorRecipe(shape, "float32", Layout(), ValueRecipe("small_int", 0))


def test_an_argument_joins_by_its_name_and_a_tuple_moves_one_element():
    spec = catalogue.get("avg_pool2d")
    kwargs = {"kernel_size": (2, 2), "stride": 1, "ceil_mode": False}
    movable = arg_extremes.candidates(spec, kwargs)
    assert {(name, slot) for name, slot, _ in movable} == {("kernel_size", 0), ("kernel_size", 1), ("stride", None)}
    assert all(min(extremes) > 0 for name, _, extremes in movable)   # a window is positive
    moved = arg_extremes.with_extreme(kwargs, "kernel_size", 1, 2**31)
    assert moved["kernel_size"] == (2, 2**31) and kwargs["kernel_size"] == (2, 2)
    case = Case("avg_pool2d", (_x(),), tuple(sorted(moved.items())))
    assert arg_extremes.extreme_arguments(case) == ("kernel_size",)
    assert arg_extremes.past_32_bits(case) == ("kernel_size=(2, 2147483648)",)
    assert arg_extremes.without_extremes(case).kwargs_dict()["kernel_size"] == (2, 1)


def test_a_transposed_convolutions_stride_and_dilation_size_its_output_and_take_no_extreme():
    """conv_transpose1d's output has (L - 1) * stride + dilation * (k - 1) + ... points: a
    stride of 2^31 - 1 asks the host for billions of elements (eager CPU computes them
    for minutes: a 'hang' of any target), so only conv's window takes extremes."""
    kwargs = {"stride": 2, "dilation": 1, "padding": 1}
    assert arg_extremes.candidates(catalogue.get("conv_transpose1d"), kwargs) == []
    assert {name for name, _, _ in arg_extremes.candidates(catalogue.get("conv1d"), kwargs)} == {"stride", "dilation"}
    for op in ("conv_transpose2d", "conv_transpose3d"):
        assert "window-sizes-output" in catalogue.get(op).semantics


def test_a_float_argument_takes_float_extremes_and_random_ops_and_kernels_none():
    (name, slot, extremes), = arg_extremes.candidates(catalogue.get("leaky_relu"), {"negative_slope": 0.01})
    assert name == "negative_slope" and slot is None and 5e-324 in extremes and 1e300 in extremes
    assert all(isinstance(e, float) for e in extremes)
    assert arg_extremes.candidates(catalogue.get("normal_"), {"mean": 0.0, "std": 1.0}) == []
    assert not arg_extremes.is_extreme(0.0) and not arg_extremes.is_extreme(True) and 0.0 not in extremes
    assert arg_extremes.ordinary(-2**63) == -1 and arg_extremes.ordinary(1e300) == 1.0
    assert arg_extremes.is_extreme(2**32 - 1) and not arg_extremes.is_extreme(2**31 - 2)   # a shrunk extreme stays one


def test_a_number_takes_only_the_extremes_its_dtype_holds_and_that_dtypes_own_ends():
    """A number is converted into the dtype the op computes in: 3.4e38 or 1e300 into
    float16 and 5e-324 into float32 are undefined conversions (a device that refuses
    them where CPU saturates is no bug), so float16 takes 65504 and its subnormal
    instead, float64 keeps 1e300, and an integer dtype keeps what it holds."""
    spec = catalogue.get("threshold")
    def extremes(dtype, value=0.5):
        (_, _, found), = [c for c in arg_extremes.candidates(spec, {"threshold": value}, dtype) if c[0] == "threshold"]
        return found
    half = extremes("float16")
    assert 65504.0 in half and -65504.0 in half and 2.0**-24 in half
    assert all(arg_extremes.holds("float16", e) for e in half)
    assert not {3.4028234663852886e38, 1e300, 5e-324} & set(half)
    assert 1e300 in extremes("float64") and 5e-324 in extremes("float64")
    assert 5e-324 not in extremes("float32") and 3.4028234663852886e38 in extremes("float32")
    assert extremes("int32", 1) == (2**31 - 1, -2**31) and extremes("int64", 1) == arg_extremes.INT_EXTREMES
    # a window is a size, not a number converted into the dtype: its extremes stay
    assert arg_extremes.candidates(catalogue.get("avg_pool2d"), {"kernel_size": 2}, "float16")[0][2] == \
        arg_extremes.POSITIVE_INT_EXTREMES
    # the dtype a number meets: the dtype argument if there is one, else the first float input
    full = Case("full_like", (_x(),), (("dtype", DtypeArg("float16")), ("fill_value", 65504.0)))
    assert arg_extremes.number_dtype(full) == "float16" and arg_extremes.extreme_arguments(full) == ("fill_value",)
    index_first = Case("embedding", (replace(_x(), dtype="int64"), _x()), ())
    assert arg_extremes.number_dtype(index_first) == "float32"


@pytest.mark.parametrize("op", ["threshold", "hinge_embedding_loss", "multi_margin_loss", "local_response_norm",
                                "lp_pool2d", "full_like", "gaussian_nll_loss"])
def test_siblings_of_half_precision_cases_hold_no_number_their_dtype_cannot(op):
    """The ops whose undefined conversions an H200 filed as bugs: every argument-extreme
    sibling of their drawn cases holds numbers its dtype can hold."""
    spec = catalogue.get(op)
    seen = 0
    for case in example_cases(spec, 60, seed=11):
        for salt in range(12):
            sibling = boundary_sibling(spec, case, salt)
            if sibling is None or not arg_extremes.extreme_arguments(sibling):
                continue
            dtype = arg_extremes.number_dtype(sibling)
            for name, value in sibling.kwargs:
                if arg_extremes.EXTREME_CLASSES.get(name) == "number":
                    for v in (value if isinstance(value, tuple) else (value,)):
                        if isinstance(v, (int, float)) and not isinstance(v, bool):
                            assert arg_extremes.holds(dtype, v), (sibling.describe(), dtype)
            seen += 1
    assert seen, f"no argument-extreme sibling of {op} drawn"


def test_boundary_siblings_move_an_argument_to_an_extreme_and_drawn_cases_keep_the_builders():
    spec = catalogue.get("triu")
    drawn = example_cases(spec, 100, seed=4)
    assert not any(arg_extremes.extreme_arguments(c) for c in drawn)
    plain = next(c for c in drawn if all(r.numel for r in c.inputs))
    siblings = [boundary_sibling(spec, plain, salt) for salt in range(40)]
    moved = [s for s in siblings if s is not None and arg_extremes.extreme_arguments(s)]
    assert moved, siblings
    assert all(s.inputs == tuple(replace(r, alias=None) for r in plain.inputs) for s in moved)


def test_a_refusal_of_an_argument_past_32_bits_is_a_limit_and_within_them_a_bug():
    """Eager CPU truncates max_pool1d's kernel_size of 2^32 + 1 to 1 and returns the input:
    a device that refuses the argument is not wrong. Within int32 a refusal stays a bug."""
    def judged(kernel):
        case = Case("max_pool1d", (_x((1, 2, 8)),), (("kernel_size", kernel), ("stride", 1)))
        dut = Raised("RuntimeError", "max_pool1d: kernel_size must fit in 32 bits")
        return check_errors(Observation(case, catalogue.get("max_pool1d"), "cuda", dut, torch.zeros(1, 2, 8)))
    assert (judged(2**32 + 1).kind, judged(2**32 + 1).blame) == ("capability", "capability")
    assert judged(2).kind == "dut-raises"


def test_an_extreme_condition_reads_as_its_power_of_two():
    case = Case("triu", (_x((2, 2)),), (("diagonal", -2**63),))
    assert _condition_phrase("extreme:diagonal", case, ["input"]) == \
        "`diagonal` is at an extreme of its range (`diagonal=-2^63` here)"


@pytest.mark.slow
def test_campaign_finds_a_diagonal_held_in_32_bits_and_keeps_the_extreme_when_minimising(tmp_path):
    corpus = tmp_path / "corpus"
    # (a budget, not --max-cases: a case-counted run makes no siblings, and the extremes
    # are drawn by the boundary siblings)
    done = mpsfuzz("run", "--ops", "triu", "--target", FAULT_TARGET, "--budget", "60s", "--seed", "1",
                   "--corpus", str(corpus), "--no-progress", faults="triangle_diagonal_held_in_int32", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    # (eager CPU's triu may also crash now and then after an extreme diagonal: filed as
    # flaky, a bug of the CPU-based target, not this fault's)
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert finding["oracle"] == "values"
    diagonal = dict(finding["case"]["kwargs"])["diagonal"]
    assert not -2**31 <= diagonal < 2**31, finding["case"]
    assert "`diagonal` is at an extreme of its range" in finding["explanation"], finding["explanation"]
    assert all(n <= 2 for r in finding["case"]["inputs"] for n in r["shape"]), finding["case"]
    assert_repro_proves_the_fault(finding, "triangle_diagonal_held_in_int32", tmp_path)


def test_histc_at_edges_holds_both_edges_and_a_ulp_either_side_of_each():
    """Values at an argument's edges (issue 38, pytorch#195076): the op's input carries
    min and max in its dtype and the values one ulp outside and inside each."""
    from mpsfuzz.generation.ops.reduction import with_edge_values
    x = with_edge_values(torch.zeros(3), -1, 2.5)
    lo, hi = torch.tensor(-1.0), torch.tensor(2.5)
    for edge in (lo, hi):
        for toward in (float("-inf"), float("inf")):
            assert bool((x == torch.nextafter(edge, torch.tensor(toward))).any())
    assert x.numel() == 3 + 6 and x.dtype == torch.float32


@pytest.mark.slow
def test_a_histogram_that_counts_a_ulp_outside_its_range_is_found_by_the_reduction_family(tmp_path):
    from test_fault_campaigns import assert_repro_proves_the_fault, one_fault_campaign
    finding = one_fault_campaign(tmp_path, "histc_at_edges,histc", "histc_counts_one_ulp_outside", 600)
    assert finding["op"] == "histc_at_edges", finding["title"]
    assert_repro_proves_the_fault(finding, "histc_counts_one_ulp_outside", tmp_path)


def test_a_script_for_a_case_with_an_extreme_argument_learns_its_outputs_in_a_child():
    """Eager CPU has died on extreme arguments (conv1d's backward with a stride of 2^31 - 1;
    triu after a diagonal of 2^31 corrupted the heap and aborted a campaign at its exit):
    the script writer, which runs in the campaign's own process, runs such a case on no
    device there, as it does a crash finding's."""
    from types import SimpleNamespace

    from mpsfuzz.reports.repro import _dies_possibly, _inference_devices
    def builder(diagonal):
        case = Case("triu", (_x((2, 2)),), (("diagonal", diagonal),), variant="grad")
        return SimpleNamespace(finding=SimpleNamespace(failure=SimpleNamespace(oracle="grads")), case=case)
    assert _dies_possibly(builder(2**31)) and _inference_devices(builder(2**31)) == ()
    assert not _dies_possibly(builder(1)) and _inference_devices(builder(1)) == ("meta", "cpu")
