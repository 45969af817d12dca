"""Every torch from 2.6 to the newest (issue 12, point 2): kernels the installed eager CPU
lacks are probed once per process and make a case `unsupported here`, never an internal
error; torch's own test modules freezing the cuDNN flags does not stop a CUDA target."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mpsfuzz.execution import cpu_kernels
from mpsfuzz.generation.opspec import OpSpec, any_shape
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.oracles.values import compare_tensors


class CleanTarget:
    name, device = "test-cpu", "cpu"

    def run(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def synchronize(self):
        pass

    def memory_allocated(self):
        return 0


class OldCpu(TorchDispatchMode):
    """Eager CPU as older torch has it: no ``where`` or ``lt`` (torch 2.11), nor ``eq``/``ne``
    (earlier) for uint16/32/64."""

    MISSING = {torch.ops.aten.where.self: "where_cpu", torch.ops.aten.lt.Tensor: "lt_cpu",
               torch.ops.aten.lt.Scalar: "lt_cpu", torch.ops.aten.ne.Tensor: "ne_cpu",
               torch.ops.aten.eq.Tensor: "eq_cpu"}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.MISSING:
            for a in args:
                if isinstance(a, torch.Tensor) and a.dtype in (torch.uint16, torch.uint32, torch.uint64):
                    name = str(a.dtype).replace("torch.uint", "UInt")
                    raise NotImplementedError(f'"{self.MISSING[func]}" not implemented for \'{name}\'')
        return func(*args, **kwargs)


def test_the_probe_names_what_this_cpu_lacks():
    assert cpu_kernels.lacking("float32") == frozenset()
    # torch 2.11-2.13 have no lt for uint32 on the CPU; the probe finds it, whatever the version.
    with OldCpu():
        cpu_kernels.lacking.cache_clear()
        missing = cpu_kernels.lacking("uint32")
    cpu_kernels.lacking.cache_clear()
    assert {"lt", "where"} <= missing
    assert "uint32 (" in cpu_kernels.describe(["uint32", "float32"])


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_values_compare_without_the_kernels_old_cpus_lack(dtype):
    a = torch.tensor([1, 2, 3]).to(dtype)
    b = torch.tensor([1, 5, 3]).to(dtype)
    with OldCpu():
        assert compare_tensors(a, a.clone(), 0.0, 0.0) is None
        problem = compare_tensors(b, a, 0.0, 0.0)
    assert problem is not None and "Mismatched elements: 1 / 3" in problem


def test_complex32_compares_though_cpu_has_no_equal_for_it():
    """compare_tensors tries torch.equal first (equal results need nothing more); eager
    CPU has no equal kernel for complex32, which takes the tolerance path instead."""
    a = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64).to(torch.complex32)
    assert compare_tensors(a, a.clone(), 1e-3, 1e-5) is None
    off = torch.tensor([1 + 2j, 3 + 1j], dtype=torch.complex64).to(torch.complex32)
    problem = compare_tensors(off, a, 1e-3, 1e-5)
    assert problem is not None and "Mismatched elements: 1 / 2" in problem
    # equal floats with a NaN are not torch.equal: NaN against NaN still agrees
    nan = torch.tensor([float("nan"), 1.0])
    assert compare_tensors(nan, nan.clone(), 0.0, 0.0) is None


def _uint_case(op, dtype="uint32"):
    return Case(op, (TensorRecipe((3,), dtype, Layout(), ValueRecipe("int_range", 7)),))


def test_a_case_old_cpu_cannot_judge_is_unsupported_here(registered):
    # Its canonicaliser needs lt on uint32, which torch 2.11's (and 2.13's) CPU lacks.
    registered(OpSpec(name="test_clone_lt", family="test", fn=torch.clone, shapes=any_shape(1),
                      dtypes=("uint32",), canonicalise=lambda inputs, out: (out, out < 3), doc="test op"))
    result = judge_case(_uint_case("test_clone_lt"), CleanTarget(), DEFAULT)
    assert result.failures == () and not result.valid
    assert "lt_cpu" in result.unsupported_here and "uint32 (" in result.unsupported_here


def test_an_old_cpu_still_judges_what_it_can(registered):
    registered(OpSpec(name="test_clone", family="test", fn=torch.clone, shapes=any_shape(1),
                      dtypes=("uint32",), doc="test op"))
    with OldCpu():
        result = judge_case(_uint_case("test_clone"), CleanTarget(), DEFAULT)
    assert result.valid and result.unsupported_here is None and result.failures == ()


def test_an_internal_bug_is_not_disguised_as_unsupported(registered):
    def broken(inputs, out):
        raise NotImplementedError("a canonicaliser nobody finished")
    registered(OpSpec(name="test_clone_broken", family="test", fn=torch.clone, shapes=any_shape(1),
                      dtypes=("float32",), canonicalise=broken, doc="test op"))
    with pytest.raises(NotImplementedError):
        judge_case(_uint_case("test_clone_broken", "float32"), CleanTarget(), DEFAULT)


def test_cuda_flags_can_be_set_after_torch_test_modules_froze_them():
    pytest.importorskip("expecttest")
    import torch.testing._internal.common_utils  # noqa: F401  (freezes the cuDNN flags)
    from mpsfuzz.execution.targets import _cuda_full_precision
    assert torch.backends.flags_frozen()
    with pytest.raises(RuntimeError, match="disable_global_flags"):
        torch.backends.cudnn.allow_tf32 = False
    _cuda_full_precision()
    assert torch.backends.cudnn.allow_tf32 is False and torch.backends.flags_frozen()


def test_a_cuda_target_syncs_and_reads_its_allocator_through_the_raw_calls_where_torch_has_them(monkeypatch):
    """The public wrappers cost device lookups three times a case; a torch without the raw
    calls (a build without CUDA here) gets the public ones."""
    from mpsfuzz.execution.targets import DeviceTarget
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("public sync"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: calls.append("public allocated") or 7)
    target = DeviceTarget("cuda", "cuda")
    for name in ("_cuda_synchronize", "_cuda_getDevice", "_cuda_memoryStats"):
        monkeypatch.delattr(torch._C, name, raising=False)
    target.synchronize()
    assert target.memory_allocated() == 7
    assert calls == ["public sync", "public allocated"]
    calls.clear()
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.setattr(torch._C, "_cuda_synchronize", lambda: calls.append("raw sync"), raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 3, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_memoryStats",
                        lambda device: {"allocated_bytes": {"all": {"current": 100 + device}}}, raising=False)
    # Before CUDA is initialised the public calls run (they initialise it as torch does).
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    target.synchronize()
    assert target.memory_allocated() == 103
    assert calls == ["public sync"]
    calls.clear()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 5)   # not asked once initialised
    target.synchronize()
    assert target.memory_allocated() == 103
    assert calls == ["raw sync"]
