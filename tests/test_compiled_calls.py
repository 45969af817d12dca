"""A compiled target is judged on what it compiles, the way a campaign meets it (issue 37,
point 7).

1. What mpsfuzz does to make an op's inputs runs eagerly: only the op is compiled (a
   backend of the test's own records every graph torch.compile hands Inductor).
2. A compiled failure that the eager counterpart shows too (the compiled graph only
   calls the eager kernel) is the eager target's, filed once as its; for cpu-compiled
   the counterpart is eager CPU, the reference: such a failure is eager CPU's bug.
3. A failure that shows only when the call is compiled a second time is triaged so and
   reproduced so by its script (verified, not unconfirmed).

The compiled targets of the tests' own are in ``compiled_targets.py``.
"""
from __future__ import annotations

import os
import re

import pytest

from mpsfuzz.campaign.engine import FoundBug
from mpsfuzz.corpus.finding import Finding, symptom_key
from mpsfuzz.execution.targets import CompiledTarget
from mpsfuzz.execution.worker import WorkerPool
from mpsfuzz.generation import catalogue, kernels
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, Failure, worker_oracles
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.reports.repro import generate, repro_for
from mpsfuzz.reports.verify import run_and_judge
from mpsfuzz.triage.pipeline import EagerFailure, filed_as_eager, shown_eagerly, triage
from mpsfuzz.triage.probe import Prober

FAULT_TARGET = "mpsfuzz.testing.faults:target"


def tensor(shape, dtype="float32", *, expanded=(), permutation=(), seed=3):
    return TensorRecipe(tuple(shape), dtype, Layout(permutation=tuple(permutation), expanded=tuple(expanded)),
                        ValueRecipe("normal", seed))


# A c2r FFT of an expanded input: its Hermitian fix writes into a copy with a stride-0
# dim (fft._hermitian_safe); compiled with the FFT, Inductor refused the write ("more
# than one element of the written-to tensor refers to a single memory location").
EXPANDED_HFFT = Case("fft.hfft", (tensor((3, 4), "complex64", expanded=(0,)),), (("dim", -1),))
# An in-place activation writes a copy of its expanded input (opspec.writable_copy).
INPLACE_ELU = Case("elu", (tensor((3, 4), expanded=(0,)),), (("inplace", True),))


def _recording_target(graphs: list) -> CompiledTarget:
    """cpu-compiled whose backend records the ops of every graph, then hands it to
    Inductor as torch.compile would."""
    from torch._inductor.compile_fx import compile_fx

    def backend(gm, example_inputs):
        graphs.append([getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes
                       if n.op in ("call_function", "call_method")])
        return compile_fx(gm, example_inputs)
    return CompiledTarget("cpu-compiled", "cpu", backend=backend)


@pytest.mark.parametrize("case, op", [(EXPANDED_HFFT, "fft_hfft"), (INPLACE_ELU, "elu")], ids=["hfft", "elu-inplace"])
def test_only_the_op_is_compiled_and_its_input_preparation_runs_eagerly(case, op):
    graphs: list = []
    summary = judge_case(case, _recording_target(graphs), worker_oracles(DEFAULT))
    assert summary.valid and summary.failures == (), summary.failures
    assert graphs and all(g == [op] for g in graphs), graphs


def _values_finding(case: Case, target_name: str) -> Finding:
    failure = Failure(oracle="values", kind="wrong-values", title=f"`{case.op}` returns wrong values on {target_name}",
                      message=f"{target_name} vs CPU: values differ", severity="high", dedup_key=("wrong-values",))
    return Finding.create(case, failure, target_name=target_name, target_spec=target_name, device="cpu")


@pytest.mark.slow
def test_a_compiled_script_compiles_the_op_alone_and_prepares_its_inputs_eagerly():
    script = generate(_values_finding(EXPANDED_HFFT, "cpu-compiled"))
    text = script.text
    assert "@torch.compiler.disable\ndef _hermitian_safe(" in text, text
    # the op's function itself is compiled, handed the input as the executor hands it
    assert re.search(r"^actual = torch\.compile\((\w+)\)\(x, dim=-1\)  ", text, re.M), text
    eager = generate(_values_finding(EXPANDED_HFFT, "cpu")).text
    assert "torch.compiler.disable" not in eager and "def _hermitian_safe(" in eager
    # the script runs to the end on cpu-compiled: nothing of the preparation compiled
    # raises, and the op itself is right
    verdict = run_and_judge(script, target_spec="cpu-compiled", timeout_s=240)
    assert verdict.reproduced is False and "ran to the end" in verdict.detail, verdict.detail


def test_a_compiled_out_script_compiles_the_executor_s_out_wrapper_around_the_op():
    """An out= call inlined into the compiled lambda is another program than the worker's
    (the executor's wrapper hands out= to the op's function through its ``**kw``): the
    script compiles the same wrapper around the same function."""
    case = Case("linalg.solve", (tensor((1, 1)), tensor((1,))), variant="out-resized")
    text = generate(_values_finding(case, "cpu-compiled")).text
    assert "op = lambda a, b, left=True, **kw: torch.linalg.solve(" in text, text
    assert "def _with_out(*a, out, **k):\n    op(*a, **k, out=out)\n    return out" in text, text
    assert re.search(r"^torch\.compile\(_with_out\)\(a, b, out=out\)  ", text, re.M), text
    eager = generate(_values_finding(case, "cpu")).text
    assert "_with_out" not in eager and "torch.compile" not in eager


# -- the eager counterpart -------------------------------------------------------------------

# lu_factor is not lowered by Inductor: the compiled graph calls the eager kernel, where
# the fault target's fault fires on a transposed input.
TRANSPOSED_LU = Case("linalg.lu_factor", (tensor((3, 3), permutation=(1, 0)),))


@pytest.fixture
def compiled_pool(monkeypatch):
    pools = []

    def make(spec: str) -> WorkerPool:
        monkeypatch.setenv("MPSFUZZ_FAULTS", "lu_factor_noncontig")
        pools.append(WorkerPool(spec, timeout_s=120, execute=judge_case))
        return pools[-1]
    yield make
    for pool in pools:
        pool.close()


def _failure_on(pool, case: Case) -> Failure:
    failures, _, _ = Prober(pool, DEFAULT, timeout_s=120).failures(case)
    assert failures, f"no failure of {case.describe()} on {pool.target_name}"
    return failures[0]


@pytest.mark.parametrize("spec, shown", [("compiled_targets:faulty_compiled", True),
                                         ("compiled_targets:faulty_compiled_clean_eager", False)],
                         ids=["eager-faulty", "eager-clean"])
@pytest.mark.slow
def test_a_compiled_failure_is_the_eager_target_s_where_the_eager_counterpart_shows_it(compiled_pool, spec, shown):
    pool = compiled_pool(spec)
    failure = _failure_on(pool, TRANSPOSED_LU)
    assert pool.target_name == "faulty-cpu-compiled" and failure.blame == "target"
    eager = shown_eagerly(TRANSPOSED_LU, failure, pool, DEFAULT, 120)
    if not shown:
        assert eager is None   # eager CPU's kernel is right: the failure stays the compiled target's
        return
    assert (eager.target_name, eager.target_spec) == ("faulty-cpu", FAULT_TARGET)
    assert not eager.on_reference(TRANSPOSED_LU)
    filed = filed_as_eager(eager.failure, eager.target_name, pool.target_name, reference=False)
    assert filed.blame == "target" and filed.title.startswith("`linalg.lu_factor` returns wrong values on faulty-cpu")
    assert "faulty-cpu-compiled" in filed.title and "filed as faulty-cpu's" in filed.message


def test_a_cpu_compiled_failure_that_eager_cpu_shows_is_eager_cpu_s_bug():
    shown = Failure(oracle="leak", kind="leak", title="`cumsum` leaks memory on cpu (1.0 MiB per call)",
                    message="kept 1 MiB per call", severity="medium", dedup_key=("leak", "cpu"))
    case = Case("cumsum", (tensor((4,)),))
    assert EagerFailure(shown, "cpu", "cpu").on_reference(case)   # eager CPU's own kernel is the reference
    filed = filed_as_eager(shown, "cpu", "cpu-compiled", reference=True)
    finding = Finding.create(case, filed, target_name="cpu", target_spec="cpu", device="cpu")
    assert finding.status == "cpu-bug" and "not a bug of cpu-compiled's compilation" in filed.message
    assert finding.target_name == "cpu" and "(and on cpu-compiled" in finding.failure.title


@pytest.mark.slow
def test_a_compiled_failure_of_the_eager_kernel_is_filed_once_as_the_eager_target_s(compiled_pool):
    eager_pool = compiled_pool(FAULT_TARGET)
    eager = triage(TRANSPOSED_LU, _failure_on(eager_pool, TRANSPOSED_LU), eager_pool, DEFAULT, reruns=1,
                   budget_s=20, localise_it=False)
    assert eager.filed_as is None
    recorded = Finding.create(eager.case, eager.failure, target_name="faulty-cpu", target_spec=FAULT_TARGET,
                              device="cpu", conditions=eager.explanation.conditions)
    pool = compiled_pool("compiled_targets:faulty_compiled")
    result = triage(TRANSPOSED_LU, _failure_on(pool, TRANSPOSED_LU), pool, DEFAULT, reruns=1, budget_s=20,
                    localise_it=False)
    assert result.filed_as == ("faulty-cpu", FAULT_TARGET), result.failure.title
    assert "faulty-cpu-compiled" in result.failure.title
    # What a campaign asks of a triaged failure before it records it (Recorder.record):
    # the eager target's finding in the corpus covers it, so it is a sighting of that one.
    symptom = symptom_key(result.case, result.failure)
    assert symptom == symptom_key(recorded.case, recorded.failure)
    assert FoundBug.of(recorded).covers(result.case, result.failure, symptom)


# -- a failure of the second compilation --------------------------------------------------

# A user's kernel (its file is carried by the repro script) whose body, traced by Dynamo a
# second time in a process, computes x * 3: the first compilation of a call is right, a
# recompilation, or a compilation after Dynamo's reset, is wrong.
SECOND_TRACE_WRONG = '''
import torch

import mpsfuzz

TRACED = [0]


def _doubled(x):
    return x * 2


@mpsfuzz.kernel(reference=_doubled, inputs=[mpsfuzz.tensor(dtypes=["float32"], min_dims=1, max_dims=2)])
def doubled_until_traced_twice(x):
    if torch.compiler.is_compiling():
        TRACED[0] += 1
        if TRACED[0] > 1:
            return x * 3
    return x * 2
'''


@pytest.fixture
def second_trace_kernel(tmp_path, with_settings):
    path = tmp_path / "second_trace.py"
    path.write_text(SECOND_TRACE_WRONG)
    catalogue.all_ops()
    before = dict(catalogue.REGISTRY)   # (before the settings name it: any look-up then loads the file)
    with_settings(kernel_files=(os.path.realpath(path),))   # handed to the workers of the pools below
    kernels.load_file(path)
    yield "doubled_until_traced_twice"
    for name in [n for n in catalogue.REGISTRY if n not in before]:
        catalogue.REGISTRY.pop(name)


@pytest.mark.slow
def test_a_failure_of_the_second_compilation_is_triaged_and_reproduced_so(second_trace_kernel):
    op = second_trace_kernel
    case = Case(op, (tensor((2, 3)),))
    with WorkerPool("cpu-compiled", timeout_s=120, execute=judge_case) as pool:
        prober = Prober(pool, DEFAULT, timeout_s=120)
        assert prober.failures(case)[0] == []          # its first compilation is right
        prober.failures(Case(op, (tensor((5,)),)))      # the campaign's next case compiles it again
        (failure,) = prober.failures(case)[0]
        result = triage(case, failure, pool, DEFAULT, reruns=2, budget_s=10, localise_it=False)
    assert not result.flaky and result.reproducibility.second_compilation, result.reproducibility
    assert result.filed_as is None   # eager CPU runs the kernel right: the compiled target's bug
    finding = Finding.create(result.case, result.failure, target_name="cpu-compiled", target_spec="cpu-compiled",
                             device="cpu", conditions=result.explanation.conditions,
                             reproducibility=result.reproducibility.to_json())
    record = repro_for(finding, verify=True, timeout_s=240)
    assert record["verified"] is True, record["detail"]
    assert "torch._dynamo.reset()" in record["script"] and f"_compiled_again(kernels.{op}, x)" in record["script"]
    # compiled once, as a fresh interpreter does, the script would not show it
    once = repro_for(Finding.create(result.case, result.failure, target_name="cpu-compiled",
                                    target_spec="cpu-compiled", device="cpu"), verify=True, timeout_s=240)
    assert once["verified"] is False, once["detail"]
