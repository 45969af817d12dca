"""The harness and the repro script must judge the same thing. Two H200 runs (`cuda`,
docs/real-findings.md) left nine findings `unconfirmed`, each where the two disagreed: the canonical
form read an input the device had overwritten (tests/test_localise.py), a widened
reference kept int64 where the device's uint32 was right (tests/test_indexing_ops.py),
and here: CUDA's designed bounds assert was filed as a device fault, a device fault's
script expected eager CPU to work where CPU rejects the input too, a raise on contiguous
copies had a script that compared values, eager CPU's layout-dependence was blamed on the
target, and scripts gave eager CPU a dense copy of a gapped input. A later one added the
layout oracle's copies that were no copies (an input at an offset)."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest
import torch

from mpsfuzz.corpus.finding import Finding
from mpsfuzz.execution.targets import DeviceTarget
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports.repro import repro_for
from mpsfuzz.testing import faults as F

T = (1, 0)


def tensor(shape, dtype="float32", *, low=None, high=None, permutation=()):
    values = ValueRecipe("int_range", seed=3, low=low, high=high) if low is not None else ValueRecipe("normal", 3)
    return TensorRecipe(tuple(shape), dtype, Layout(permutation=tuple(permutation)), values)


@pytest.fixture
def asserting(tmp_path, monkeypatch):
    """A module of fault targets, importable by the repro's fresh interpreter:
    ``target`` (index_select stops at a CUDA-style device-side assert on any input),
    ``refusing`` (exp raises on contiguous inputs), ``channels_last`` (batch_norm keeps
    channels_last)."""
    (tmp_path / "asserting.py").write_text(textwrap.dedent("""
        from mpsfuzz.testing.faults import Fault, FaultTarget, _always, _input
        ASSERT = Fault("index_select_assert", "index_select stops at a device-side assert",
                       ("aten::index_select",), _always, "poison")
        target = FaultTarget([ASSERT])
        # On an H200 (docs/real-findings.md), SDPA refused contiguous copies of inputs it took non-contiguous.
        REFUSE = Fault("exp_refuses_contiguous", "exp refuses contiguous inputs", ("aten::exp",),
                       lambda func, args, kwargs: _input(func, args, kwargs).is_contiguous(), "raise",
                       message="(*bias): last dimension must be contiguous")
        refusing = FaultTarget([REFUSE])

        import torch

        def _keep_channels_last(func, args, kwargs, out):
            first = out[0] if isinstance(out, tuple) else out
            if first.dim() != 4:
                return out
            first = first.contiguous(memory_format=torch.channels_last)
            return (first, *out[1:]) if isinstance(out, tuple) else first
        # CUDA's batch_norm of a gapped channels_last-like input kept that format, CPU's did not
        KEEP = Fault("batch_norm_channels_last", "batch_norm returns channels_last",
                     ("aten::native_batch_norm", "aten::_native_batch_norm_legit_no_training"), _always,
                     "rewrite", rewrite=_keep_channels_last)
        channels_last = FaultTarget([KEEP])
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    sys.modules.pop("asserting", None)
    import asserting
    yield asserting
    F._POISONED.clear()
    F._FAULT_AT_NEXT_SYNC.clear()


def judged(case, target) -> list[Failure]:
    try:
        return [Failure.from_json(f) for f in judge_case(case, target, DEFAULT).failures]
    finally:
        F._POISONED.clear()


def test_a_device_assert_on_an_index_cpu_rejects_as_out_of_bounds_is_no_finding(asserting):
    asserting = asserting.target
    """An H200 run (docs/real-findings.md): take_along_dim of an empty input with index 0. CPU raises "index 0 is out
    of bounds"; CUDA's gather checks the index with a device-side assert, by design."""
    x = tensor((3, 2))
    out_of_range = Case("index_select", (x, tensor((2,), "int64", low=5, high=7)), (("dim", 0),))
    assert judged(out_of_range, asserting) == []
    # The same assert on an index CPU accepts is the device's bug.
    valid = Case("index_select", (x, tensor((2,), "int64", low=0, high=2)), (("dim", 0),))
    assert [(f.oracle, f.kind) for f in judged(valid, asserting)] == [("errors", "device-fault")]


def test_a_device_fault_where_cpu_raises_a_clean_error_has_a_script_that_shows_both(asserting):
    asserting = asserting.target
    # A 2-D index: CPU rejects it (IndexError: "Index is supposed to be a vector"), not
    # as out of bounds.
    case = Case("index_select", (tensor((3, 2)), tensor((2, 2), "int64", low=0, high=2)), (("dim", 0),))
    (failure,) = judged(case, asserting)
    assert failure.kind == "device-fault" and failure.details["cpu_raised"] == "IndexError"
    assert "CPU rejects the input too" in failure.message
    finding = Finding.create(case, failure, target_name="asserting", target_spec="asserting:target", device="cpu")
    record = repro_for(finding, verify=True, timeout_s=60)
    assert "except IndexError as exc:" in record["script"] and "# eager CPU: works" not in record["script"]
    assert record["verified"] is True, record["detail"] + record.get("output", "")


def test_a_canonicalised_finding_reads_the_inputs_as_given_in_its_script_too(monkeypatch):
    monkeypatch.setenv("MPSFUZZ_FAULTS", "eig_transposed_clobber")
    case = Case("linalg.eigvals", (tensor((3, 3), permutation=T),))
    failure = next(f for f in judged(case, F.FaultTarget(["eig_transposed_clobber"])) if f.oracle == "values")
    finding = Finding.create(case, failure, target_name="faults", target_spec="mpsfuzz.testing.faults:target",
                             device="cpu")
    record = repro_for(finding, verify=True, timeout_s=60)
    script = record["script"]
    assert script.index("before = [x.clone()]") < script.index("actual = torch.linalg.eigvals(x)")
    assert "actual = canonical(before, actual)" in script
    assert record["verified"] is True, record["detail"] + record.get("output", "")


def test_a_call_that_raises_only_on_contiguous_copies_has_a_script_that_shows_it(asserting):
    """An H200 run (docs/real-findings.md): the layout oracle's "raises on contiguous copies" had a script that
    compared values, so the raise it showed read as "failed differently"."""
    case = Case("exp", (tensor((2, 3), permutation=T),))
    (failure,) = judged(case, asserting.refusing)
    assert (failure.oracle, failure.kind) == ("layout", "contiguous-raises")
    finding = Finding.create(case, failure, target_name="refusing", target_spec="asserting:refusing", device="cpu")
    record = repro_for(finding, verify=True, timeout_s=60)
    assert record["expect"]["outcome"] == "raises" and record["expect"]["type"] == "RuntimeError"
    assert record["verified"] is True, record["detail"] + record.get("output", "")


class _DenseInput(DeviceTarget):
    """Runs the op on a contiguous copy of its first input, as a device whose kernel
    reads a dense copy does (CUDA's batch_norm on an H200)."""

    def run(self, fn, *args, **kwargs):
        return fn(args[0].contiguous(), *args[1:], **kwargs)


def test_a_variance_that_overflows_the_dtype_is_no_finding_whoever_is_closer_to_float64():
    """An H200 run (docs/real-findings.md): batch_norm in training of a gapped float32 [max, -4]. CPU's strided
    kernel gives ±1 (float64 agrees), its contiguous kernel and CUDA give 0: the variance
    (2.9e76) overflows float32. It was filed as CPU's layout-dependence; an independent
    reference (the decomposition in float64) gives ±1 too, which would file CUDA's 0 as
    wrong. Neither is a bug: an intermediate leaves the dtype (the float64 juror watches
    the decomposed op's intermediates, which the fused kernel hides)."""
    gapped = TensorRecipe((1, 1, 2), "float32", Layout(gaps=(1, 1, 2)),
                          ValueRecipe("small_int", 0, specials=((0, "max"),)))
    stats = [TensorRecipe((1,), "float32", values=ValueRecipe("small_int", 0))] * 2
    scalars = [TensorRecipe((), "float32", values=ValueRecipe("small_int", 0))] * 2
    case = Case("batch_norm", (gapped, *stats, *scalars), (("affine", False), ("training", True)))
    assert judged(case, _DenseInput("dense-input", "cpu")) == []
    # A target wrong on a non-contiguous input, where CPU's copies are right, is still wrong.
    case = Case("sigmoid", (tensor((2, 3), permutation=T),))
    failures = judged(case, F.FaultTarget(["sigmoid_noncontig"]))
    assert ("values", "wrong-values", "target") in [(f.oracle, f.kind, f.blame) for f in failures], failures


def test_a_gapped_input_reaches_eager_cpu_in_the_script_as_the_campaign_gave_it(asserting):
    """An H200 run (docs/real-findings.md): CUDA's batch_norm of a gapped (1, 2, 2, 1) channels_last-like input
    returned channels_last, eager CPU contiguous; the script's ``x.cpu()`` was a dense
    channels_last copy, on which CPU returned channels_last too, so the script showed
    nothing (`unconfirmed` three times in two H200 runs)."""
    gapped = TensorRecipe((1, 2, 2, 1), "float32", Layout(gaps=(1, 2, 1, 1), permutation=(0, 3, 1, 2)),
                          ValueRecipe("small_int", 0))
    stats = [TensorRecipe((2,), "float32", values=ValueRecipe("positive", 1))] * 2
    scalars = [TensorRecipe((), "float32", values=ValueRecipe("small_int", 0))] * 2
    case = Case("batch_norm", (gapped, *stats, *scalars), (("affine", False), ("training", False)))
    (failure,) = judged(case, asserting.channels_last)
    assert (failure.oracle, failure.kind) == ("metadata", "wrong-memory-format")
    finding = Finding.create(case, failure, target_name="faulty", target_spec="asserting:channels_last",
                             device="cpu")
    record = repro_for(finding, verify=True, timeout_s=60)
    assert "_cpu_view(x)" in record["script"]
    assert record["verified"] is True, record["detail"] + record.get("output", "")


def _all_contiguous_one_at_an_odd_offset(func, args, kwargs) -> bool:
    tensors = [t for t in args if isinstance(t, torch.Tensor)]
    return all(t.is_contiguous() for t in tensors) and any(t.storage_offset() % 2 for t in tensors)


def test_the_layout_oracles_copies_are_fresh_tensors_not_views_at_an_offset():
    """An H200 run (docs/real-findings.md): SDPA's memory-efficient kernel refused a float16 key two bytes into
    its storage; the case's gapped query had sent the call to the math kernel, and
    ``k.contiguous()`` handed back k itself, offset and all, so the finding read "raises
    on contiguous copies". Copies are fresh now; the offset alone is an error finding."""
    from mpsfuzz.testing.faults import Fault
    aligned = F.FaultTarget([Fault("mul_aligned", "a vector kernel that needs aligned pointers", ("aten::mul",),
                                   _all_contiguous_one_at_an_odd_offset, "raise",
                                   message="p.key_ptr is not correctly aligned")])
    gapped = TensorRecipe((2, 3), "float32", Layout(gaps=(1, 2)), ValueRecipe("normal", 1))
    offset = TensorRecipe((2, 3), "float32", Layout(offset=1), ValueRecipe("normal", 2))
    assert judged(Case("mul", (gapped, offset)), aligned) == []
    plain = TensorRecipe((2, 3), "float32", values=ValueRecipe("normal", 1))
    (failure,) = judged(Case("mul", (plain, offset)), aligned)
    assert (failure.oracle, failure.kind) == ("errors", "dut-raises") and "aligned" in failure.message
