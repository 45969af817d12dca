"""The localiser (triage/localise.py) on the fault target: a fault inside a composite
public op is found as the kernel it is in, with a kernel-level repro that reproduces (and
does not once the fault is off); a kernel that overwrites an input its schema does not
let it write is `writes-input`; crashes and hangs are found from the call trace; a clean
target shows no divergence at all; what cannot be localised says so, and nothing the
localiser does can raise."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest
import torch

from mpsfuzz.corpus.finding import symptom_key
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports.repro import Script
from mpsfuzz.reports.verify import run_and_judge
from mpsfuzz.testing.faults import Fault, FaultTarget, _input_noncontiguous
from mpsfuzz.triage.localise import localise, localise_case, observe

FAULT_TARGET = "mpsfuzz.testing.faults:target"
ORACLES = worker_oracles(DEFAULT)
T = (1, 0)  # transposed


def tensor(shape, dtype="float32", *, permutation=(), offset=0, gaps=(), seed=7, distribution="normal",
           low=None, high=None):
    return TensorRecipe(tuple(shape), dtype, Layout(offset, tuple(gaps), tuple(permutation), ()),
                        ValueRecipe(distribution=distribution, seed=seed, low=low, high=high))


def failing(case: Case, target) -> Failure:
    result = judge_case(case, target, ORACLES)
    failures = [Failure.from_json(f) for f in result.failures]
    assert failures, f"the fault did not fire on {case.describe()}"
    return failures[0]


def localised(case: Case, faults) -> dict:
    target = FaultTarget(faults)
    failure = failing(case, target)
    return localise_case(case, target, ORACLES, symptom_key(case, failure)).record


def reproduces(repro: dict, faults: str, tmp_path, target: str = FAULT_TARGET) -> bool:
    script = Script(text=repro["script"], expect=repro["expect"], body_lines=repro["lines"])
    return run_and_judge(script, target_spec=target, timeout_s=60,
                         env=dict(os.environ, MPSFUZZ_FAULTS=faults)).reproduced


@pytest.mark.parametrize("fault,case,kernel", [
    # linalg.lu_factor is CompositeImplicit: the fault is in the linalg_lu_factor_ex it calls
    ("lu_factor_noncontig", Case("linalg.lu_factor", (tensor((2, 2), permutation=T),)),
     "aten::linalg_lu_factor_ex.default"),
    # F.softmax reaches the _softmax kernel
    ("softmax_gt4d", Case("softmax", (tensor((1, 1, 1, 1, 2)),), (("dim", 0),)), "aten::_softmax.default"),
])
@pytest.mark.slow
def test_a_fault_inside_a_composite_op_is_found_as_its_kernel(fault, case, kernel, tmp_path):
    record = localised(case, [fault])
    assert record["status"] == "kernel", record
    assert record["kernel"] == kernel and record["divergence"] == "wrong-values"
    assert record["confirmed"] is True  # with the call's result replaced by CPU's, the failure goes away
    call = record["call"]
    assert call["kernel"] == kernel and call["args"][0]["kind"] == "tensor"
    assert call["args"][0]["shape"] == list(case.inputs[0].shape)
    assert call["storages"][0]["values"], "small storages are exact literals"
    repro = record["repro"]
    assert f"torch.ops.aten.{kernel.split('::')[1]}(" in repro["script"]
    assert "# device under test" in repro["script"] and "import mpsfuzz" not in repro["script"]
    compile(repro["script"], "kernel_repro.py", "exec")
    assert reproduces(repro, fault, tmp_path)
    assert not reproduces(repro, "none", tmp_path)


def test_the_call_keeps_its_strides_and_offset(tmp_path):
    # a storage offset: the unary_offset fault fires only when the kernel sees one
    case = Case("neg", (tensor((2,), offset=3),))
    record = localised(case, ["unary_offset"])
    assert record["kernel"] == "aten::neg.default"
    arg = record["call"]["args"][0]
    assert arg["offset"] == 3 and arg["stride"] == [1]
    assert reproduces(record["repro"], "unary_offset", tmp_path)


@pytest.mark.slow
def test_an_overwritten_input_is_writes_input(tmp_path, monkeypatch):
    """Modelled on CUDA linalg_eig overwriting a transposed input: `exp` here writes its
    input (not an output, the schema says read-only) when it is transposed."""
    (tmp_path / "clobbering.py").write_text(textwrap.dedent("""
        from mpsfuzz.testing.faults import Fault, FaultTarget, _input_noncontiguous
        CLOBBER = Fault("exp_clobber", "exp overwrites a transposed input", ("aten::exp",),
                        _input_noncontiguous, "clobber_input")
        target = FaultTarget([CLOBBER])
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("clobbering", None)
    import clobbering
    case = Case("exp", (tensor((2, 2), permutation=T),))
    target = clobbering.target
    failure = failing(case, target)
    assert (failure.oracle, failure.kind) == ("variants", "input-modified")
    record = localise_case(case, target, ORACLES, symptom_key(case, failure)).record
    assert record["status"] == "kernel" and record["kernel"] == "aten::exp.default", record
    assert record["divergence"] == "writes-input" and record["kinds"] == ["writes-input"]
    assert record["where"]["argument"] == "self"
    assert reproduces(record["repro"], "", tmp_path, target="clobbering:target")
    clean = Script(text=record["repro"]["script"], expect=record["repro"]["expect"], body_lines=1)
    assert not run_and_judge(clean, target_spec=FAULT_TARGET, timeout_s=60,
                             env=dict(os.environ, MPSFUZZ_FAULTS="none")).reproduced


def test_wrong_values_and_an_overwritten_input_are_one_call():
    case = Case("linalg.eig", (tensor((2, 2), permutation=T),))
    target = FaultTarget(["eig_transposed_clobber"])
    result = judge_case(case, target, ORACLES)
    failures = [Failure.from_json(f) for f in result.failures]
    assert {(f.oracle, f.kind) for f in failures} == {("values", "wrong-values"), ("variants", "input-modified")}
    records = [localise_case(case, target, ORACLES, symptom_key(case, f)).record for f in failures]
    assert {r["kernel"] for r in records} == {"aten::linalg_eig.default"}
    assert all(set(r["kinds"]) == {"wrong-values", "writes-input"} for r in records)
    assert all(r["form"] == "functional" for r in records)
    # The out= form: the functional call before it diverges too, but fixing it does not
    # cure the out= call's overwritten input; fixing the out= call does.
    out = Case("linalg.eig", (tensor((2, 2), permutation=T),), variant="out")
    failure = next(f for f in (Failure.from_json(x) for x in judge_case(out, target, ORACLES).failures)
                   if f.oracle == "variants")
    record = localise_case(out, target, ORACLES, symptom_key(out, failure)).record
    assert record["kernel"] == "aten::linalg_eig.out" and record["form"] == "out", record
    assert [d["kernel"] for d in record["divergent"]] == ["aten::linalg_eig.default", "aten::linalg_eig.out"]


def test_a_backward_kernel_is_seen_in_the_grad_variant(tmp_path):
    case = Case("gelu", (tensor((2,)),), (("approximate", "tanh"),), variant="grad")
    record = localised(case, ["gelu_tanh_backward"])
    assert record["status"] == "kernel" and record["kernel"] == "aten::gelu_backward.default", record
    assert record["confirmed"] is True
    assert reproduces(record["repro"], "gelu_tanh_backward", tmp_path)


def test_an_error_on_the_device_only_is_raises_on_device(tmp_path):
    record = localised(Case("linalg.cholesky_ex", (tensor((0, 0)),)), ["cholesky_ex_empty"])
    assert record["kernel"] == "aten::linalg_cholesky_ex.default" and record["divergence"] == "raises-on-device"
    assert record["repro"]["expect"]["outcome"] == "raises"
    assert reproduces(record["repro"], "cholesky_ex_empty", tmp_path)
    assert not reproduces(record["repro"], "none", tmp_path)


CLEAN_CASES = [
    Case("linalg.lu_factor", (tensor((3, 3), permutation=T),)),
    Case("linalg.eig", (tensor((2, 2), permutation=T),)),
    Case("matmul", (tensor((2, 3), permutation=T), tensor((2, 4)))),
    Case("softmax", (tensor((1, 1, 1, 1, 2)),), (("dim", 0),)),
    Case("add", (tensor((2, 3)), tensor((2, 3), gaps=(1, 2))), variant="out-strided"),
    Case("mul", (tensor((2, 2), permutation=T), tensor((2, 2))), variant="inplace"),
    Case("gelu", (tensor((3,)),), (("approximate", "tanh"),), variant="grad"),
    Case("sum", (tensor((0, 2)),), (("dim", [0]),)),
    Case("multinomial", (tensor((4,), distribution="positive"),), (("num_samples", 2),)),
    Case("sqrt", (tensor((3,), "complex32"),)),
]


@pytest.mark.parametrize("case", CLEAN_CASES, ids=lambda c: f"{c.op}-{c.variant}")
def test_a_clean_target_shows_no_divergence(case):
    result, seen = observe(case, FaultTarget([]), ORACLES)
    assert result.failures == ()
    assert seen.calls > 0
    assert seen.divergences == [], [(d.kernel, d.detail) for d in seen.divergences]


@pytest.mark.soak   # the families' own localisation tests run by default
def test_the_whole_catalogue_on_a_clean_target_shows_no_divergence():
    """One drawn case per op of every family (awkward layouts, variants, dtypes included):
    a kernel compared with itself on copies must agree, so any divergence here is a
    false one (an uninitialised workspace, a lazy conjugate, grad mode...)."""
    import warnings

    from mpsfuzz.generation import catalogue
    from mpsfuzz.generation.strategies import example_cases
    target, diverged, calls = FaultTarget([]), [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in sorted(catalogue.all_ops()):
            for case in example_cases(catalogue.get(op), 1, seed=3, max_side=4, max_numel=256):
                _, seen = observe(case, target, ORACLES)
                calls += seen.calls
                diverged += [(case.describe(), d.kernel, d.detail[:200]) for d in seen.divergences]
    assert calls > 1000 and diverged == []


def test_two_calls_that_must_both_be_fixed():
    """var's out= form calls var twice (the functional form first, for the shapes); both
    raise, so fixing one alone does not cure it: the first is the kernel, with the other."""
    case = Case("var", (tensor(()),), (("correction", 0),), variant="out")
    record = localised(case, ["var_0d_raise"])
    assert record["status"] == "kernel" and record["kernel"] == "aten::var.correction", record
    assert record["confirmed"] and len(record["with"]) == 1


def test_a_random_kernel_that_uses_no_randomness_is_compared(tmp_path):
    """CPU flash attention is tagged random (it takes dropout_p); with dropout 0 two seeds
    give the same result, so it is compared like any kernel."""
    x = TensorRecipe((1, 1, 1, 1), "float32", Layout(), ValueRecipe("small_int"))
    k = TensorRecipe((1, 1, 2, 1), "float32", Layout(), ValueRecipe("small_int"))
    scalar = TensorRecipe((), "float32", Layout(), ValueRecipe("small_int"))
    case = Case("scaled_dot_product_attention", (x, k, x, scalar), (("mask", "causal"),))
    record = localised(case, ["sdpa_causal_lengths"])
    assert record["status"] == "kernel", record
    assert record["kernel"] == "aten::_scaled_dot_product_flash_attention_for_cpu.default"
    assert reproduces(record["repro"], "sdpa_causal_lengths", tmp_path)


def test_a_random_kernel_is_not_compared():
    case = Case("uniform_", (tensor((2, 2), permutation=T),), (("from", 0.0), ("to", 1.0)))
    record = localised(case, ["uniform_noncontig_noop"])
    assert record["status"] == "not-localised" and "aten::uniform_.default" in record["reason"], record


def test_an_out_argument_is_recorded_as_the_kernel_got_it(tmp_path):
    case = Case("sub", (tensor((2,)), tensor((2,))), variant="out-resized")
    record = localised(case, ["sub_out_resize"])
    assert record["kernel"] == "aten::sub.out" and record["form"] == "out", record
    assert record["call"]["kwargs"]["out"]["shape"] == [0]  # before the kernel resized it
    assert reproduces(record["repro"], "sub_out_resize", tmp_path)


def test_a_bug_outside_every_kernel_is_composite():
    class AddsOneAfterwards:
        """Every kernel is right; the result is spoiled after the last one (outside aten)."""
        name, device = "off-by-one", "cpu"

        def run(self, fn, *args, **kwargs):
            out = fn(*args, **kwargs)
            with torch.no_grad(), torch.utils._python_dispatch._disable_current_modes():
                return out + 1

        def synchronize(self):
            pass

        def memory_allocated(self):
            return 0

    case = Case("neg", (tensor((2,)),))
    target = AddsOneAfterwards()
    failure = failing(case, target)
    record = localise_case(case, target, ORACLES, symptom_key(case, failure)).record
    assert record["status"] == "composite" and "none of its" in record["reason"], record


def test_a_compiled_target_is_not_localised():
    from mpsfuzz.execution.targets import CompiledTarget
    record = localise_case(Case("neg", (tensor((2,)),)), CompiledTarget("cpu-compiled", "cpu"), ORACLES,
                           ("neg",)).record
    assert record["status"] == "not-localised" and "compiled" in record["reason"]


def test_localiser_failures_become_a_record_not_an_exception():
    record = localise_case(Case("no-such-op", (tensor((2,)),)), FaultTarget([]), ORACLES, ("x",)).record
    assert record["status"] == "error" and "no-such-op" in record["error"]

    class BrokenPool:
        def fresh(self):
            raise OSError("no worker can start")
    failure = Failure(oracle="values", kind="wrong-values", severity="high", title="t", message="m",
                      dedup_key=("wrong-values",))
    record = localise(Case("neg", (tensor((2,)),)), failure, BrokenPool(), DEFAULT, timeout_s=1)
    assert record["status"] == "error" and "no worker can start" in record["error"]


@pytest.fixture
def pool_for(monkeypatch):
    from mpsfuzz.execution.worker import WorkerPool
    pools = []

    def make(faults: str, timeout_s: float = 3.0):
        monkeypatch.setenv("MPSFUZZ_FAULTS", faults)
        pool = WorkerPool(FAULT_TARGET, timeout_s=timeout_s, execute=judge_case)
        pools.append(pool)
        return pool
    yield make
    for pool in pools:
        pool.close()


def _process_failure(pool, case):
    from mpsfuzz.triage.probe import Prober
    failures, _, died = Prober(pool, DEFAULT).failures(case)
    assert died and failures
    return failures[0]


def test_a_crash_is_localised_from_the_call_trace(pool_for, tmp_path):
    pool = pool_for("mm_mixed_dtype_segv")
    case = Case("mm", (tensor((2, 2)), tensor((2, 2), "float64")))
    record = localise(case, _process_failure(pool, case), pool, DEFAULT, timeout_s=3)
    assert record["status"] == "kernel" and record["kernel"] == "aten::mm.default", record
    assert record["divergence"] == "crash" and record["signal"] == "SIGSEGV"
    assert record["call"]["args"][1]["dtype"] == "float64"
    assert reproduces(record["repro"], "mm_mixed_dtype_segv", tmp_path)
    # the worker is replaced: the pool goes on
    assert pool.run(Case("neg", (tensor((2,)),)).to_json(), ("values",), "neg").failures == ()


def test_a_hang_is_localised_from_the_call_trace(pool_for):
    pool = pool_for("prod_hang_5d", timeout_s=1.5)
    case = Case("prod", (tensor((1, 1, 1, 1, 1)),))
    record = localise(case, _process_failure(pool, case), pool, DEFAULT, timeout_s=1.5)
    assert record["status"] == "kernel" and record["kernel"] == "aten::prod.default", record
    assert record["divergence"] == "hang" and record["repro"]["expect"] == {"outcome": "timeout"}


def test_localise_in_a_worker_gives_the_same_record(pool_for):
    pool = pool_for("lu_factor_noncontig")
    case = Case("linalg.lu_factor", (tensor((2, 2), permutation=T),))
    from mpsfuzz.triage.probe import Prober
    failure = Prober(pool, DEFAULT).failures(case)[0][0]
    record = localise(case, failure, pool, DEFAULT, timeout_s=5)
    assert record["status"] == "kernel" and record["kernel"] == "aten::linalg_lu_factor_ex.default", record


def test_a_cpu_copy_that_still_refers_to_the_device_is_not_a_divergence():
    """The CPU twin of a call raising a device mismatch means the copy was not faithful
    (something device-bound the snapshot could not move): uncomparable, not raises-on-cpu."""
    from mpsfuzz.triage import kernel_call

    a, b = torch.ones(3), torch.ones(3)
    snap = kernel_call.snapshot(torch.ops.aten.add.Tensor, (a, b), {})

    def mismatched(*args, **kwargs):
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                           "cuda:0 and cpu!")

    result, error = kernel_call._unseeded_cpu_call(mismatched, snap)
    assert result is None and isinstance(error, kernel_call.Uncomparable), error

    def refuses(*args, **kwargs):
        raise RuntimeError("The size of tensor a (3) must match the size of tensor b (4)")

    result, error = kernel_call._unseeded_cpu_call(refuses, snap)
    assert isinstance(error, RuntimeError) and not isinstance(error, kernel_call.Uncomparable)


def test_an_input_modified_is_one_symptom_whatever_the_form_of_the_call():
    """CUDA's eig overwrites a transposed input in every form (an H200 run filed it seven
    times, once per form and op): the form is a trigger feature, not part of the symptom;
    a finding written when the form was part of it reads as it is written now."""
    target = FaultTarget(["eig_transposed_clobber"])
    keys = set()
    for variant in ("functional", "out", "out-strided"):
        case = Case("linalg.eig", (tensor((2, 2), permutation=T),), variant=variant)
        failures = [Failure.from_json(f) for f in judge_case(case, target, ORACLES).failures]
        keys |= {symptom_key(case, f) for f in failures if f.kind == "input-modified"}
    assert keys == {("linalg.eig", "variants", "input-modified")}
    old = Failure("variants", "input-modified", "t", "m", "high", ("input-modified", "out")).to_json()
    assert Failure.from_json(old).dedup_key == ("input-modified",)
    other = Failure("variants", "variant-wrong-values", "t", "m", "high", ("variant-wrong-values", "out"))
    assert Failure.from_json(other.to_json()).dedup_key == ("variant-wrong-values", "out")


def test_an_overwritten_input_does_not_also_read_as_wrong_values():
    """An H200 run (docs/real-findings.md): CUDA's eig overwrote a transposed input, and the canonical form
    (residual and power sums, read against the input) read the overwritten input after
    the call: the values oracle filed the same bug again, with a repro that could not
    show it. The canonical form now reads the input as the op got it."""
    clobber = Fault("eig_clobber", "eig overwrites a transposed input", ("aten::linalg_eig",),
                    _input_noncontiguous, "clobber_input")
    target = FaultTarget([clobber])
    for op in ("linalg.eig", "linalg.eigvals"):
        case = Case(op, (tensor((2, 2), permutation=T),))
        failures = [Failure.from_json(f) for f in judge_case(case, target, ORACLES).failures]
        assert [(f.oracle, f.kind) for f in failures] == [("variants", "input-modified")], (op, failures)
    # A wrong result of a clobbering kernel is still found, and its repro shows it.
    both = FaultTarget(["eig_transposed_clobber"])
    case = Case("linalg.eigvals", (tensor((2, 2), permutation=T),))
    failures = [Failure.from_json(f) for f in judge_case(case, both, ORACLES).failures]
    assert {(f.oracle, f.kind) for f in failures} == {("values", "wrong-values"), ("variants", "input-modified")}
