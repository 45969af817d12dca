"""Large sizes (issue 14, point 1): inputs past 2^31 and 2^32 elements as stride-0 views
of one element, dims of 65,536 and more, an analytic CPU reference, bounded host memory,
and size conditions that triage names."""
from __future__ import annotations

import math
import os
import resource
import subprocess
import sys

import pytest
import torch

from mpsfuzz.execution.targets import load_target
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.recipes import Case, InputTooLarge, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.triage.probe import PASSES, SAME, Outcome

from test_fault_campaigns import FAULT_TARGET, findings_in

LARGE_OPS = catalogue.families()["large"]


def test_large_is_off_unless_asked_for():
    assert not set(LARGE_OPS) & set(catalogue.select("all"))
    assert catalogue.select("large") == LARGE_OPS
    assert "sum_large" in catalogue.select("linalg,sum_large")


@pytest.mark.parametrize("op", ["sum_large", "argmax_large"])
def test_draws_reach_past_2_31_and_2_32_elements_and_65536_long_dims_in_a_few_bytes(op, with_settings):
    with_settings(max_bytes=64 << 30)   # a device with the memory to spare
    drawn = example_cases(catalogue.get(op), 200, seed=2)
    numels = [c.inputs[0].numel for c in drawn]
    assert any(2**31 <= n < 2**32 for n in numels) and any(n >= 2**32 for n in numels)
    assert any(max(c.inputs[0].shape) >= 65536 and c.inputs[0].numel < 2**31 for c in drawn)
    for case in drawn:
        recipe = case.inputs[0]
        # every input past a million elements is one element in memory
        assert recipe.numel <= 1 << 20 or recipe.base_numel == 1, recipe.describe()


def test_sizes_past_max_bytes_are_not_drawn():
    """By default (1 GiB) only batches of 32,768 to 131,073 rows in real allocations: a kernel may copy a
    stride-0 input densely (eager CPU's int32 sum of 2^32 elements takes 32 GiB)."""
    drawn = example_cases(catalogue.get("sum_large"), 100, seed=2)
    assert all(c.inputs[0].numel * 8 <= 1 << 30 for c in drawn)
    assert all(max(c.inputs[0].shape) >= 32768 for c in drawn)
    assert any(max(c.inputs[0].shape) >= 65536 for c in drawn)


def _constant(shape, dtype, value) -> list:
    base = torch.tensor(value, dtype=getattr(torch, dtype)).reshape((1,) * len(shape))
    return [base.expand(*shape)]


CONSTANTS = [("float32", 0.75), ("float32", -0.0), ("float32", math.nan), ("float16", -2.5),
             ("int32", -3), ("uint8", 5), ("bool", True), ("bool", False),
             ("int64", -3711235831533098450),    # n times it wraps around, as torch's sum does
             # n copies of a dtype's max overflow the accumulator (a sum, a mean and a norm
             # are inf on every backend, not n*max, max and sqrt(n)*max), squares of 1e20
             # overflow and of 1e-30 underflow in float32
             ("float32", 3.4028234663852886e38), ("bfloat16", 3.3895313892515355e38), ("float16", 65504.0),
             ("float32", 1e20), ("float32", 1e-30), ("float32", -math.inf)]


CONSTANT_OPS = [op for op in LARGE_OPS if hasattr(catalogue.get(op).reference_fn, "analytic")]
REFERENCE_CASES = [(op, dtype, value, shape, kwargs) for op in CONSTANT_OPS for dtype, value in CONSTANTS
                   for shape, kwargs in (((3, 5, 4), {}), ((3, 5, 4), {"dim": 1}),
                                         ((3, 5, 4), {"dim": -1, "keepdim": True}), ((1,), {"dim": -1}))
                   if dtype in catalogue.get(op).dtypes and not ("keepdim" in kwargs and op == "count_nonzero_large")]


@pytest.mark.parametrize("op,dtype,value,shape,kwargs", REFERENCE_CASES)
def test_the_analytic_reference_is_what_cpu_computes(op, dtype, value, shape, kwargs):
    """On small constant tensors both can be computed: the formula is the op, shape, dtype,
    overflow and all."""
    spec = catalogue.get(op)
    inputs = _constant(shape, dtype, value)
    expected = spec.fn(*inputs, **kwargs)
    got = spec.reference_fn.analytic(*inputs, **kwargs)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("op", ["vector_norm_large", "mean_large"])
def test_a_constant_small_enough_for_cpu_is_judged_by_cpu_not_the_formula(op, monkeypatch):
    """What shrinking and triage's probes make of a large case (a 1- or 2-element
    constant) runs the op on CPU; only a constant past REAL_NUMEL elements takes the
    formula."""
    spec = catalogue.get(op)
    calls = []
    monkeypatch.setattr(spec.reference_fn, "analytic", lambda *a, **k: calls.append(a) or None)
    small = _constant((2,), "float32", 3.0e38)
    assert spec.reference_fn(*small).isinf() and not calls   # CPU: the squares overflow
    import mpsfuzz.generation.ops.large as large
    assert large.reduced_shape((2**31 + 1,), {"dim": -1}) == ()
    assert large.reduced_shape((65537, 3), {"dim": 0, "keepdim": True}) == (1, 3)


def test_a_dense_input_past_max_bytes_is_no_case_and_allocates_nothing(with_settings):
    """A triage edit that made a stride-0 view of 2^31 elements dense would take 8 GiB:
    the storage is never built, the case is not valid."""
    with_settings(max_bytes=1 << 28)
    dense = TensorRecipe((2**31 + 1,), "float32", Layout(), ValueRecipe())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputTooLarge, match="max_bytes=268435456"):
        dense.materialize("cpu")
    result = judge_case(Case("sum_large", (dense,)), load_target(FAULT_TARGET), ("values",))
    assert result.valid is False and not result.failures
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000   # KiB: nothing built
    stride0 = TensorRecipe((2**31 + 1,), "float32", Layout(expanded=(0,)), ValueRecipe())
    assert stride0.materialize("cpu").shape == (2**31 + 1,)


# Runs the campaign in a fresh interpreter that reports the largest resident set of
# the processes it waited for: this test process's own RUSAGE_CHILDREN would count every
# earlier test's subprocesses on the same xdist worker (CI once read 2.3 GiB there).
_MAX_CHILD_RSS = """
import resource, subprocess, sys
code = subprocess.run([sys.executable, "-m", "mpsfuzz", *sys.argv[1:]]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def _run_large(fault: str, tmp_path, cases: int):
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", "sum_large", "--target", FAULT_TARGET, "--max-cases", str(cases),
                           "--seed", "1", "--corpus", str(corpus), "--timeout", "20", "--minimise-budget", "60",
                           "--max-findings", "1", "--no-progress", faults=fault, cwd=tmp_path)
    children_rss_kib = int(run.stderr.strip().splitlines()[-1])
    return run, findings_in(corpus), children_rss_kib


def mpsfuzz_measured(*args: str, faults: str, cwd, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPSFUZZ_FAULTS=faults)
    return subprocess.run([sys.executable, "-c", _MAX_CHILD_RSS, *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


@pytest.mark.slow
def test_a_fault_on_dims_of_65536_is_found_and_the_size_named(tmp_path):
    run, found, rss_kib = _run_large("sum_dim_65536", tmp_path, 60)
    assert run.returncode == 1, run.stdout + run.stderr
    # (a full suite on two cores once added a flaky `leak` of 4 MiB of RSS a call: kept
    # apart as flaky, as it should be, and not this test's business)
    (finding,) = [f for f in found if f["status"] != "flaky"]
    assert "side>=65536" in finding["conditions"], finding["explanation"]
    assert "has a dim of 65,536 or more (dim " in finding["explanation"], finding["explanation"]
    assert max(finding["case"]["inputs"][0]["shape"]) >= 65536
    # bounded host memory: no process held more than 2 GiB (a dense 2^31 float input is 8 GiB)
    assert rss_kib < 2 * 1024 * 1024, rss_kib


class _SizeProber:
    """Stands in for a worker: the case fails (same symptom) while ``fails(case)``."""

    def __init__(self, fails):
        self.fails = fails

    def classify(self, case, symptom):
        return Outcome(SAME if self.fails(case) else PASSES, [])


@pytest.mark.parametrize("threshold,condition,phrase", [
    (lambda r: r.numel >= 2**31, "numel>=2147483648", "an input has 2^31 or more elements (4,295,098,369 here)"),
    (lambda r: max(r.shape) >= 65536, "side>=65536", "`input` has a dim of 65,536 or more (dim 0: 65,537 here)"),
])
@pytest.mark.slow
def test_triage_names_the_size_a_failure_needs(threshold, condition, phrase):
    """A failure past 2^31 elements, or only with a dim of 65,536+ (the trigger of each
    size fault, without running billions of elements on this CPU): the ablation's size
    probes make it a condition, and the explanation says it with the size."""
    from mpsfuzz.oracles import Failure
    from mpsfuzz.triage.ablation import explain, holds
    recipe = TensorRecipe((65537, 65537), "float32", Layout(expanded=(0, 1)), ValueRecipe())
    case = Case("sum_large", (recipe,))
    failure = Failure("values", "wrong-values", "t", "m", "high", ("wrong-values",))
    explanation = explain(case, failure, ("sum_large", "values", "wrong-values"),
                          _SizeProber(lambda c: threshold(c.inputs[0])))
    assert condition in explanation.conditions, explanation.text
    assert phrase in explanation.text
    assert not any(c.startswith("rank>=") for c in explanation.conditions)   # the size, not the rank
    assert holds(condition, case)
    smaller = Case("sum_large", (TensorRecipe((65535, 3), "float32"),))
    assert not holds("numel>=2147483648", smaller) and not holds("side>=65536", smaller)


# -- real allocations: row-wise ops over inputs made on the device -------------------------

from mpsfuzz.generation.ops import large_rows  # noqa: E402
from mpsfuzz.generation.recipes import index_hash_values  # noqa: E402
from mpsfuzz.testing import faults  # noqa: E402

ROW_OPS = [op for op in LARGE_OPS if catalogue.get(op).reference_inputs is not None]


def test_boundary_blocks_hold_the_elements_either_side_of_2_31_and_2_32_and_both_ends():
    shape = (2**32 // 1000 + 1, 1000)
    blocks = large_rows.boundary_blocks(shape)
    rows = {r for a, b in blocks for r in range(a, b)}
    for offset in (0, 2**31 - 1, 2**31, 2**32 - 1, 2**32, shape[0] * 1000 - 1):
        assert offset // 1000 in rows
    assert len(rows) <= 18 and blocks == sorted(blocks)
    assert large_rows.boundary_blocks((4, 3)) == [(0, 4)]


def test_an_index_hash_input_is_the_same_built_whole_in_any_layout_or_by_rows():
    recipe = TensorRecipe((3001, 7), "int8", Layout(offset=5, gaps=(2, 1), permutation=(1, 0)),
                          ValueRecipe("index_hash", seed=11))
    whole = recipe.materialize("cpu")
    assert not whole.is_contiguous()
    blocks = [(0, 2), (1500, 1503), (2999, 3001)]
    expected = torch.cat([whole[a:b] for a, b in blocks])
    assert torch.equal(recipe.rows_values(blocks), expected)
    assert torch.equal(whole.reshape(-1), index_hash_values(11, 0, 3001 * 7, torch.int8, "cpu"))
    assert torch.equal(whole, recipe.cpu_values())


@pytest.mark.parametrize("op", ROW_OPS)
def test_row_ops_draw_past_2_31_within_max_bytes_and_about_2_22_by_default(op, with_settings):
    spec = catalogue.get(op)
    for case in example_cases(spec, 20, seed=3):
        assert 2**21 < case.inputs[0].numel <= 2**23 and not case.inputs[0].layout.expanded
    with_settings(max_bytes=40 << 30)
    numels = [c.inputs[0].numel for c in example_cases(spec, 30, seed=3)]
    assert any(n >= 2**31 for n in numels) and any(n < 2**31 for n in numels)
    assert all(n * large_rows.BYTES_PER_ELEMENT <= 40 << 30 for n in numels)


def test_a_copy_that_wraps_past_the_32_bit_limit_is_found_on_the_boundary_rows(monkeypatch):
    """The fault copy_past_int32 (elements past the limit written where the index
    wrapped), with the limit and the boundary lowered to 2^20 so that it runs here: the
    CPU reference builds only the boundary rows (a few KB), the target the whole input."""
    monkeypatch.setattr(faults, "INT32_LIMIT", 2**20)
    monkeypatch.setattr(large_rows, "_BOUNDARIES", (2**20,))
    monkeypatch.setenv("MPSFUZZ_FAULTS", "copy_past_int32")
    target = load_target(FAULT_TARGET)
    recipe = TensorRecipe((2**20 // 1000 + 2, 1000), "int8", Layout(), ValueRecipe("index_hash", seed=5))
    built = []
    real_rows = TensorRecipe.rows_values
    monkeypatch.setattr(TensorRecipe, "rows_values", lambda self, blocks: built.append(blocks) or real_rows(self, blocks))
    result = judge_case(Case("clone_large", (recipe,)), target, ("values", "metadata", "errors"))
    assert result.valid and [f["oracle"] for f in result.failures] == ["values"]
    assert sum(b - a for a, b in built[0]) * 1000 <= 18 * 1000     # the reference's rows alone
    below = TensorRecipe((2**20 // 1000 - 2, 1000), "int8", Layout(), ValueRecipe("index_hash", seed=5))
    assert not judge_case(Case("clone_large", (below,)), target, ("values",)).failures
    untouched = judge_case(Case("add_large", (recipe,)), target, ("values",))
    assert not untouched.failures


@pytest.mark.slow
def test_a_copy_past_2_31_elements_is_found_at_the_real_size(monkeypatch, with_settings):
    """The same fault at its real limit: 2^31 + 1,024 int8 elements made and copied on
    the CPU target (4 GB), compared on the boundary rows."""
    with_settings(max_bytes=40 << 30)
    with_settings(host_max_bytes=8 << 30)   # the CPU target is the device here
    monkeypatch.setenv("MPSFUZZ_FAULTS", "copy_past_int32")
    recipe = TensorRecipe((2**31 // 1024 + 1, 1024), "int8", Layout(), ValueRecipe("index_hash", seed=5))
    result = judge_case(Case("clone_large", (recipe,)), load_target(FAULT_TARGET), ("values",))
    assert [f["oracle"] for f in result.failures] == ["values"]


@pytest.mark.parametrize("op", ["sum_large", "argmax_large", "count_nonzero_large"])
def test_a_drawn_reduction_keeps_a_result_the_host_can_copy(op, with_settings):
    """Over the small last dim of (65,537, 65,537, 3) a reduction keeps 4 billion elements
    (on an H100 that filled 55 GB of host memory): no drawn dim does that."""
    import mpsfuzz.generation.ops.large as large
    with_settings(max_bytes=64 << 30)
    drawn = example_cases(catalogue.get(op), 300, seed=4)
    assert any(len(c.inputs[0].shape) == 3 for c in drawn)
    for case in drawn:
        kept = large.reduced_shape(case.inputs[0].shape, case.kwargs_dict())
        assert math.prod(kept) <= 1 << 20, (case.describe(), kept)


def test_an_output_past_the_host_bound_is_no_case_and_never_copied(with_settings):
    with_settings(max_bytes=1 << 20)
    stride0 = TensorRecipe((2**20, 3), "float32", Layout(expanded=(0, 1)), ValueRecipe())
    result = judge_case(Case("sum_large", (stride0,), (("dim", 1),)), load_target(FAULT_TARGET), ("values",))
    assert result.valid is False and not result.failures


def test_a_case_past_the_host_bound_is_judged_on_the_device_and_never_built_on_the_host(monkeypatch, with_settings):
    """With every oracle on, a row-wise case whose input the host may not hold is judged
    (its input made where it is used: here a CPU 'device', the first materialisation) and
    no oracle builds the input on the host again: the variants oracle once did, for every
    case (31 GB of host memory and worker timeouts on an H100)."""
    from mpsfuzz.oracles import DEFAULT
    with_settings(host_max_bytes=1 << 20)
    recipe = TensorRecipe((2**21 // 1000 + 1, 1000), "int8", Layout(), ValueRecipe("index_hash", seed=5))
    with pytest.raises(InputTooLarge):
        recipe.materialize("cpu")
    calls = []

    def generated_on(self, device):   # the DUT's materialisation once, then nothing more
        calls.append(device)
        if len(calls) > 1:
            raise AssertionError(f"built again on {device}")
        return torch.zeros(self.shape, dtype=torch.int8)
    monkeypatch.setattr(TensorRecipe, "_generated_on", generated_on)
    result = judge_case(Case("clone_large", (recipe,)), load_target(FAULT_TARGET), DEFAULT)
    assert result.valid and calls == ["cpu"], result


# -- sizing from the device's free memory (campaign/sizing.py) ----------------------------------

def test_the_bound_per_case_is_half_the_free_memory_over_the_lanes():
    from mpsfuzz.campaign.sizing import AUTO_MIN_FREE, plan
    gib = 2**30
    # two lanes of 40 GB each filled an 80 GB GPU: the bound is lowered, and says so
    lowered = plan(asked=True, auto=False, refused=False, free=79 * gib, jobs=2, max_bytes=40 * gib)
    assert lowered.enabled and lowered.max_bytes == 79 * gib // 4 and "--max-bytes lowered" in lowered.note
    kept = plan(asked=True, auto=False, refused=False, free=79 * gib, jobs=1, max_bytes=8 * gib)
    assert kept.max_bytes == 8 * gib and "lowered" not in kept.note
    # the daemon turns the family on by itself where the device has the memory, not elsewhere
    assert plan(asked=False, auto=True, refused=False, free=AUTO_MIN_FREE, jobs=1, max_bytes=None).enabled
    for free, refused in ((AUTO_MIN_FREE - 1, False), (None, False), (79 * gib, True)):
        off = plan(asked=False, auto=True, refused=refused, free=free, jobs=1, max_bytes=None)
        assert not off.enabled and off.note.startswith("large sizes off"), off
    # `run` never does without --large
    assert not plan(asked=False, auto=False, refused=False, free=79 * gib, jobs=1, max_bytes=None).enabled


def test_a_cpu_device_has_no_free_memory_figure():
    from mpsfuzz.campaign.sizing import free_device_memory
    assert free_device_memory("cpu") is None
