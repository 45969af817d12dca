"""foreach_norm@huge (pytorch#169930: CUDA's foreach norm, what clip_grad_norm_ calls, of
a tensor of 2^31 + 1 elements): a dense tensor made on the device, zero but for known
values around 2^31, 2^32, the middle and the ends, so that its norm of any order is known
exactly in float64 from those values (generation/ops/reduction.py)."""
from __future__ import annotations

import json
import math

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.large_sizes import MAX_ELEMENTS
from mpsfuzz.generation.ops.reduction import spike_offsets, spike_values, spiked, spikes_norm
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.testing import faults

OP = "foreach_norm@huge"
FAULT = "foreach_norm_drops_elements_past_int32"


def test_spikes_lie_around_2_31_2_32_the_middle_and_the_ends():
    n = 2**32 + 1
    assert spike_offsets(n) == sorted({0, 2**31 - 1, 2**31, 2**32 - 1, 2**32, n // 2})
    assert spike_offsets(2**31 + 1) == [0, 2**30, 2**31 - 1, 2**31]
    assert spike_offsets(5) == [0, 2, 4] and spike_offsets(1) == [0]
    values = spike_values(2**32 + 1)
    assert abs(values[-1]) == max(abs(v) for v in values)     # the last: the infinity norm's


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 0])
def test_the_analytic_norm_is_eager_cpus_of_the_spiked_tensor(dtype, ord):
    """spikes_norm (float64, from the spikes alone) equals eager CPU's foreach norm of the
    dense spiked tensor wherever the host can make it."""
    for numel in (MAX_ELEMENTS * 2 + 1, 1001, 7, 2):
        carrier = torch.ones((), dtype=dtype).expand(numel)
        dense = spiked(carrier)
        assert int((dense != 0).sum()) == len(spike_offsets(numel))
        (got,) = torch._foreach_norm([dense], ord=ord, dtype=torch.float64)
        assert float(got) == pytest.approx(spikes_norm(numel, ord), rel=1e-12), (numel, ord)


def test_huge_foreach_norms_reach_2_31_plus_1_and_2_32_at_the_docs_max_bytes(with_settings):
    """Measured at --max-bytes 140GB (200 cases, seed 1): 128 past 2^31 elements, 21 of
    them of 2^31 + 1 elements (the report's; 2 of those flat), 29 past 2^32; every
    order drawn."""
    with_settings(max_bytes=140 * 10**9)
    cases = example_cases(catalogue.get(OP), 200, seed=1)
    past = [c for c in cases if c.inputs[0].numel > 2**31]
    assert len(past) >= 100 and sum(c.inputs[0].numel == 2**31 + 1 for c in cases) >= 10
    assert sum(c.inputs[0].numel > 2**32 for c in cases) >= 15
    assert {2, 1, math.inf, 0} <= {dict(c.kwargs).get("ord", 2) for c in past}
    # the host holds a stride-0 view of one element, never the tensor
    assert all(c.inputs[0].base_numel == 1 for c in past)


def test_a_right_target_passes_and_the_reference_builds_nothing_large(monkeypatch):
    from mpsfuzz.execution.targets import load_target
    from mpsfuzz.oracles.judge import judge_case
    monkeypatch.setenv("MPSFUZZ_FAULTS", "none")
    target = load_target("mpsfuzz.testing.faults:target")
    spec = catalogue.get(OP)
    for case in example_cases(spec, 10, seed=1):
        assert case.inputs[0].numel > MAX_ELEMENTS
        result = judge_case(case, target, ("values", "metadata", "errors", "arbiter"))
        assert not result.failures, (case, result.failures)


def test_the_fault_drops_only_the_elements_past_the_limit():
    """foreach_norm_drops_elements_past_int32: a listed tensor of more than MAX_ELEMENTS
    elements loses its elements past that limit (the last spike: the 2-norm, 1-norm,
    inf-norm and 0-norm all change); a list within the limit is right."""
    target = faults.FaultTarget([FAULT])
    x = spiked(torch.ones(()).expand(MAX_ELEMENTS + 1000))
    for ord in (2, 1, math.inf, 0):
        (got,) = target.run(torch._foreach_norm, [x], ord=ord)
        assert float(got) != pytest.approx(spikes_norm(x.numel(), ord)), ord
    small = spiked(torch.ones(()).expand(MAX_ELEMENTS))
    (got,) = target.run(torch._foreach_norm, [small])
    assert float(got) == pytest.approx(spikes_norm(small.numel()))
    assert target.fired[FAULT] == 4


@pytest.mark.slow
def test_a_foreach_norm_that_drops_elements_past_the_limit_is_found_explained_and_minimised(tmp_path):
    """A campaign of foreach_norm@huge finds the fault (about a minute on two busy cores),
    explains it by the long dim, minimises it with more than MAX_ELEMENTS elements kept,
    localises it to the foreach kernel and verifies a script; no process holds more than
    2 GiB of host memory."""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", OP, "--target", FAULT_TARGET, "--seed", "2", "--corpus", str(corpus),
                           "--max-findings", "1", "--no-progress", faults=FAULT, cwd=tmp_path, timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert (finding["op"], finding["oracle"]) == (OP, "values"), finding["title"]
    assert finding["minimisation"] and "side>=65536" in finding["conditions"], finding["explanation"]
    assert "has a dim of 65,536 or more" in finding["explanation"], finding["explanation"]
    assert math.prod(finding["case"]["inputs"][0]["shape"]) > MAX_ELEMENTS
    assert finding["localisation"]["kernel"] == "aten::_foreach_norm.Scalar"
    assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
    rss_kib = int(run.stderr.strip().splitlines()[-1])
    assert rss_kib < 2 * 1024 * 1024, rss_kib
