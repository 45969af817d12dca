"""Errors that say a dtype or a feature is unsupported are `unsupported` (counted, never
a bug), told from errors about the input and from device faults. The messages are real
ones from torch 2.6-2.13 on CPU, CUDA and MPS."""
from __future__ import annotations

import pytest

from mpsfuzz.execution.error_kinds import is_device_fault, is_unsupported, is_unsupported_message

UNSUPPORTED = [
    # eager CPU
    "\"addmm_impl_cpu_\" not implemented for 'Half'",
    "\"lt_cpu\" not implemented for 'UInt32'",                       # torch 2.11-2.13
    "\"where_cpu\" not implemented for 'UInt16'",                    # torch 2.11
    "\"bitwise_and_cpu\" not implemented for 'Half'",
    "\"sum_cpu\" not implemented for 'ComplexHalf'",
    "\"histogram_cpu\" not implemented for 'Half'",
    "Sort does not support complex dtypes on CPU",
    "MKL FFT doesn't support tensors of type: Half",
    # CUDA
    "HalfTensor is not supported",                                     # histc float16, torch 2.11
    "torch.linalg.ldl_solve: complex tensors with hermitian=True flag are not supported on CUDA.",
    "\"baddbmm_cuda\" not implemented for 'ComplexHalf'",
    "cuFFT only supports dimensions whose sizes are powers of two when computing in half precision, "
    "but got a signal size of[3]",
    "Could not run 'aten::_fft_c2c' with arguments from the 'CUDA' backend. This could be because the operator "
    "doesn't exist for this backend, or was omitted during the selective/custom build process.",
    "nonzero is not supported for tensors with more than INT_MAX elements, See "
    "https://github.com/pytorch/pytorch/issues/51871",
    "CUDA error: no kernel image is available for execution on the device",
    # out of memory (a large-size case whose kernel copies a stride-0 input densely)
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
    "allocate 34359738344 bytes. Error code 12 (Cannot allocate memory)",
    "CUDA out of memory. Tried to allocate 32.00 GiB. GPU 0 has a total capacity of 79.19 GiB",
    "MPS backend out of memory (MPS allocated: 1.2 GB, other allocations: 0 bytes, max allowed: 18.13 GB).",
    "cudnn RNN backward can only be called in training mode",           # gru grads in eval mode, torch 2.11
    # MPS
    "The operator 'aten::_linalg_eigh.eigenvalues' is not currently implemented for the MPS device. If you want "
    "this op to be added in priority during the prototype phase of this feature, please comment on "
    "https://github.com/pytorch/pytorch/issues/77764.",
    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
    "Please use float32 instead.",
    "Trying to convert ComplexHalf to the MPS backend but it does not have support for that dtype.",
    "MPS does not support cumsum op with int64 input. Support has been added in macOS 13.3",
    "Unsupported Border padding mode",
    "isin_Tensor_Tensor_out only works on floating types on MPS for pre MacOS_14_0. Received dtype: Int",
    "MPSGraph does not support tensor dims larger than INT_MAX",
    "\"bitwise_left_shift_mps\" not implemented for 'Bool'",
]

NOT_UNSUPPORTED = [
    # A layout precondition the target states where CPU accepts the same input is the
    # target's finding (users hit it; issue 30), not a missing kernel.
    "rnn: hx is not contiguous",                                       # torch.gru, non-contiguous hx, 2.11
    "rnn: cx is not contiguous",                                       # torch.lstm, non-contiguous cx, 2.11
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
    "memory location. Please clone() the tensor before performing the operation.",
    "Placeholder storage has not been allocated on MPS device!",
    "expected scalar type Float but found Half",
    "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
    "index 5 is out of bounds for dimension 0 with size 3",
    "MPSGraph: placeholder tensor is empty",
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
    "shape '[2, 3]' is invalid for input of size 5",
    "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
    "contiguous subspaces). Use .reshape(...) instead.",
    "selected index k out of range",
    "CUDA error: an illegal memory access was encountered",
    "linalg.cholesky: The factorization could not be completed because the input is not positive-definite "
    "(the leading minor of order 2 is not positive-definite).",
]

DEVICE_FAULTS = [
    "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported",
    "CUDA error: an illegal memory access was encountered",
    "CUDA error: unspecified launch failure",
    "Command buffer exited with error status. The Metal Performance Shaders operations encoded on it may not "
    "have completed.",
]


@pytest.mark.parametrize("message", UNSUPPORTED)
def test_unsupported_messages(message):
    assert is_unsupported_message(message)
    assert is_unsupported(RuntimeError(message))


@pytest.mark.parametrize("message", NOT_UNSUPPORTED)
def test_errors_about_the_input_are_not_unsupported(message):
    assert not is_unsupported(RuntimeError(message))


def test_not_implemented_errors_are_unsupported_whatever_they_say():
    assert is_unsupported(NotImplementedError("the derivative for 'aten::foo' is not implemented."))


def test_a_compilers_failure_is_judged_by_its_backends_error():
    """Inductor lowers logspace through torch._refs.logspace, which raises a bare
    NotImplementedError for a negative base (torch 2.13): Dynamo wraps it in
    BackendCompilerFailed, whose message matches no pattern."""
    import torch

    compiled = torch.compile(lambda: torch.logspace(0.0, 3.0, 4, base=-2.0))
    with pytest.raises(Exception) as raised:
        compiled()
    assert type(raised.value).__name__ == "BackendCompilerFailed"
    assert is_unsupported(raised.value)
    # an ordinary error inside the compiler is not
    wrapped = RuntimeError("backend='inductor' raised:\nAssertionError: n=copy_, n.args[0]=empty")
    wrapped.inner_exception = AssertionError("n=copy_, n.args[0]=empty")
    assert not is_unsupported(wrapped)


@pytest.mark.parametrize("message", DEVICE_FAULTS)
def test_device_faults(message):
    assert is_device_fault(message)


@pytest.mark.parametrize("message", UNSUPPORTED[:5] + NOT_UNSUPPORTED[:3])
def test_ordinary_errors_are_not_device_faults(message):
    assert not is_device_fault(message)


# -- the device accepting what CPU rejects ------------------------------------------------------

from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe  # noqa: E402
from mpsfuzz.oracles import DEFAULT  # noqa: E402
from mpsfuzz.oracles.judge import judge_case  # noqa: E402
from mpsfuzz.testing.faults import FaultTarget  # noqa: E402


def _fftn_8d():
    return Case("fft.fftn", (TensorRecipe((2,) * 8, "complex64", Layout(), ValueRecipe("normal", 1)),))


def _failures(case, faults):
    return list(judge_case(case, FaultTarget(faults), DEFAULT).failures)


def test_a_device_that_can_do_what_cpu_cannot_is_a_capability():
    assert _failures(_fftn_8d(), []) == []
    (failure,) = _failures(_fftn_8d(), ["fftn_splits_dims"])
    assert (failure["oracle"], failure["kind"], failure["blame"]) == ("errors", "capability", "capability")
    assert "agrees with a smaller equivalent call" in failure["message"]


def test_a_wrong_result_for_an_input_cpu_rejects_is_a_bug():
    (failure,) = _failures(_fftn_8d(), ["fftn_splits_dims_badly"])
    assert (failure["oracle"], failure["kind"], failure["blame"]) == ("errors", "accepts-wrong", "target")
    assert "wrong against a smaller equivalent call" in failure["message"]


def test_accepting_an_out_of_range_index_is_a_missing_check_not_a_capability():
    x = TensorRecipe((4,), "float32", Layout(), ValueRecipe("normal", 1))
    index = TensorRecipe((2,), "int64", Layout(), ValueRecipe("int_range", 1, low=7, high=9))
    (failure,) = _failures(Case("index_select", (x, index), (("dim", 0),)), ["index_select_no_bounds_check"])
    assert (failure["kind"], failure["blame"]) == ("ref-raises", "target")
    assert "out of bounds" in failure["title"]


@pytest.mark.slow
def test_campaign_lists_a_capability_apart_and_exits_clean(tmp_path):
    import json
    import os
    import subprocess
    import sys
    corpus = tmp_path / "corpus"
    done = subprocess.run([sys.executable, "-m", "mpsfuzz", "run", "--ops", "fft.fftn", "--target",
                           "mpsfuzz.testing.faults:target", "--max-cases", "400", "--seed", "1", "--corpus", str(corpus),
                           "--no-progress"], cwd=tmp_path, text=True, capture_output=True, timeout=300,
                          env=dict(os.environ, MPSFUZZ_FAULTS="fftn_splits_dims"))
    assert done.returncode == 0, done.stdout + done.stderr
    found = [json.loads(p.read_text()) for p in corpus.glob("*.json")]
    assert found and {f["status"] for f in found} == {"capability"}, [f["title"] for f in found]
    assert "capabilities (device accepts what CPU rejects) 1" in " ".join(done.stdout.split())


def test_a_device_side_assert_on_input_eager_cpu_rejects_is_the_devices_designed_check():
    """CUDA checks an input's values with a device-side assert where CPU rejects them with
    a clean error: both reject it (multinomial of a row that sums to 0, issue 37; take_along_dim of an index
    out of bounds). An illegal access is a missing check, and an assert on an input CPU
    only lacks a kernel for is no rejection: those stay device faults."""
    from mpsfuzz.execution.observation import Observation, Raised
    from mpsfuzz.generation import catalogue
    from mpsfuzz.oracles.errors import check_errors
    case = Case("multinomial", (TensorRecipe((2, 3), "float16", Layout(), ValueRecipe("normal", 1)),))
    invalid = Raised("RuntimeError", "invalid multinomial distribution (sum of probabilities <= 0)")

    def judged(dut: Raised, ref: Raised):
        return check_errors(Observation(case, catalogue.get("multinomial"), "cuda", dut, ref))
    assert judged(Raised("AcceleratorError", "CUDA error: device-side assert triggered"), invalid) is None
    fault = judged(Raised("AcceleratorError", "CUDA error: an illegal memory access was encountered"), invalid)
    assert fault is not None and fault.kind == "device-fault"
    lacking = Raised("NotImplementedError", '"multinomial" not implemented for \'Half\'', unsupported=True)
    assert judged(Raised("AcceleratorError", "CUDA error: device-side assert triggered"), lacking) is not None
    # a malformed input the host checks (its shape) is no value a device checks by design
    malformed = Raised("IndexError", "index_select(): Index is supposed to be a vector")
    assert judged(Raised("AcceleratorError", "CUDA error: device-side assert triggered"), malformed) is not None
    # bag offsets past the indices they bound: CPU's check in other words, CUDA's assert
    bag = Case("embedding_bag", (TensorRecipe((9,), "int64"), TensorRecipe((6, 6), "float32"),
                                 TensorRecipe((9,), "float32")), (("mode", "max"), ("offsets", (0, 2**32 + 1))))
    past = Raised("RuntimeError", "offsets[-1] can not be greater than input's length 9 but got offsets[-1] of "
                                  "4294967297")
    assert check_errors(Observation(bag, catalogue.get("embedding_bag"), "cuda",
                                    Raised("AcceleratorError", "CUDA error: device-side assert triggered"),
                                    past)) is None


def test_a_device_side_assert_on_indices_into_an_empty_dim_is_the_devices_designed_check():
    """Issue 37 (H200): an index into an empty dim is out of bounds whatever its value.
    CUDA's bounds assert fires where eager CPU's host check says so in other words
    (index_select: "self indexing axis dim should be positive"), fails another way
    (take_along_dim: ZeroDivisionError), or returns the empty result without looking
    (index_add into 0 rows): no finding. The same assert with no empty input, or an
    illegal access on an empty one, stays a device fault."""
    import torch
    from mpsfuzz.execution.observation import Observation, Raised
    from mpsfuzz.generation import catalogue
    from mpsfuzz.oracles.errors import check_errors
    empty = Case("index_add", (TensorRecipe((0, 6), "float32"), TensorRecipe((8,), "int64"),
                               TensorRecipe((8, 6), "float32")), (("dim", 0),))
    full = Case("index_add", (TensorRecipe((2, 6), "float32"), TensorRecipe((8,), "int64"),
                              TensorRecipe((8, 6), "float32")), (("dim", 0),))
    asserted = Raised("AcceleratorError", "CUDA error: device-side assert triggered")
    illegal = Raised("AcceleratorError", "CUDA error: an illegal memory access was encountered")

    def judged(case, dut, ref):
        return check_errors(Observation(case, catalogue.get("index_add"), "cuda", dut, ref))
    assert judged(empty, asserted, torch.zeros(0, 6)) is None
    assert judged(empty, asserted, Raised("RuntimeError", "self indexing axis dim should be positive")) is None
    assert judged(full, asserted, torch.zeros(2, 6)).kind == "device-fault"
    assert judged(empty, illegal, torch.zeros(0, 6)).kind == "device-fault"
    assert judged(empty, asserted, torch.zeros(1, 6)).kind == "device-fault"   # CPU computed something


def test_accepting_a_call_with_no_index_values_is_a_capability_not_a_missing_bounds_check():
    """A bounds check refuses an index value; with every index input empty there is none,
    so CPU's IndexError is about the call's form (index_copy of a 0-d self: "When source
    is scalar, index should have one element (got 0)"). The same acceptance of an index
    that holds a value stays a missing check."""
    import torch
    from mpsfuzz.execution.observation import Observation, Raised
    from mpsfuzz.generation import catalogue
    from mpsfuzz.oracles.errors import check_errors
    scalar = TensorRecipe((), "float32", Layout(), ValueRecipe("small_int", 0))

    def judged(index_shape):
        index = TensorRecipe(index_shape, "int64", Layout(), ValueRecipe("int_range", 0, low=0, high=0))
        case = Case("index_copy", (scalar, index, scalar), (("dim", 0),))
        ref = Raised("IndexError", f"index_copy_(): When source is scalar, index should have one element "
                                   f"(got {index.numel})")
        return check_errors(Observation(case, catalogue.get("index_copy"), "cuda-compiled", torch.tensor(0.0), ref))
    assert judged((0,)).kind == "capability"
    assert judged((2,)).kind == "ref-raises"


class _RefusesTheConversion:
    """Eager CPU, except that every call raises torch's checked-conversion error, as
    CUDA's lp_pool2d did for 1 / norm_type of float32's smallest subnormal."""

    device = "cpu"
    name = "refuses-conversion"

    def is_available(self):
        return True

    def run(self, fn, *args, **kwargs):
        raise RuntimeError("value cannot be converted to type float without overflow")

    def synchronize(self):
        pass

    def memory_allocated(self):
        return 0


def _lp_pool2d(norm_type):
    x = TensorRecipe((1, 2, 1), "float32", Layout(), ValueRecipe("small_int", 0))
    return Case("lp_pool2d", (x,), (("kernel_size", (2, 1)), ("norm_type", norm_type)))


def test_refusing_a_number_derived_from_an_extreme_argument_is_an_undefined_conversion_not_a_bug():
    """CUDA refused lp_pool2d(norm_type=1.4e-45) (float32's smallest subnormal, which
    float32 holds): the kernel's exponent 1 / norm_type = 7e44 is what float32 cannot
    hold, and CPU computed it in float64. Which backend refuses is no bug; the same
    refusal of an ordinary norm_type is the target's."""
    (failure,) = judge_case(_lp_pool2d(1.401298464324817e-45), _RefusesTheConversion(), DEFAULT).failures
    assert (failure["kind"], failure["blame"]) == ("capability", "capability"), failure
    assert "undefined conversion" in failure["title"]
    (failure,) = judge_case(_lp_pool2d(2.0), _RefusesTheConversion(), DEFAULT).failures
    assert (failure["kind"], failure["blame"]) == ("dut-raises", "target"), failure
