"""Issue 38, large backward: the @huge class's rows past 2^31 elements that the upstream
reports need and the class did not draw (docs/large-sizes.md).

- An expanded (stride-0) input past 2^31 elements (pytorch#193096: CUDA
  adaptive_avg_pool3d's backward of such an input): an input of a @huge op made from the
  hash keeps its drawn stride-0 dims, and the reference rebuilds the expanded rows.
- An output side times an input side past 2^31 - 1 (pytorch#176784: CUDA
  adaptive_avg_pool2d's START_IND product in 32 bits): the @large class draws it (a
  side near 65,536, the output size drawn after the growth); a fault proves it judged.
"""
from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from mpsfuzz.execution.targets import load_target
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.large_sizes import MAX_ELEMENTS
from mpsfuzz.generation.recipes import Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases, expanded_rows_rebuilt
from mpsfuzz.testing import faults

EXPANDED_FAULT = "adaptive_pool_backward_of_an_expanded_input_past_int32"


def _expanded_past_2_31(cases) -> list:
    return [c for c in cases if any(r.layout.expanded and r.numel > 2**31 for r in c.inputs)]


def test_huge_adaptive_pools_draw_expanded_inputs_past_2_31_with_the_grad_variant(with_settings):
    """pytorch#193096's trigger: the @huge adaptive pools draw an expanded input past
    2^31 elements, a share of them as the grad variant (was 0/200: the class dropped
    every stride-0 dim of an input made from the hash)."""
    with_settings(max_bytes=140 * 10**9)
    for op in ("adaptive_avg_pool3d@huge", "adaptive_avg_pool2d@huge"):
        drawn = _expanded_past_2_31(example_cases(catalogue.get(op), 200, seed=1))
        # (measured: 53 and 43 of 200, 25 and 10 of them the grad variant)
        assert len(drawn) >= 30, op
        assert sum(c.variant == "grad" for c in drawn) >= 5, op
        # a stride-0 dim of the view, a storage far smaller than its elements
        case = drawn[0]
        (x,) = case.inputs
        size, stride, _ = x._geometry()
        assert 0 in [s for s, n in zip(stride, size) if n > 1] and x.base_numel < x.numel


def test_only_the_row_judged_huge_class_keeps_expanded_hashed_inputs():
    """The sample-judged @huge ops (a mask's true rows known in closed form of a mask
    that is not expanded) and the large rows' ops keep their inputs made from the hash
    dense."""
    assert expanded_rows_rebuilt(catalogue.get("adaptive_avg_pool3d@huge"))
    assert expanded_rows_rebuilt(catalogue.get("bmm@huge"))
    for op in ("getitem_mask@huge", "rand@huge"):
        assert not expanded_rows_rebuilt(catalogue.get(op))
        cases = example_cases(catalogue.get(op), 40, seed=1)
        assert not any(r.layout.expanded and r.values.distribution == "index_hash" for c in cases for r in c.inputs)


@pytest.mark.parametrize("expanded", [(1,), (0,), (0, 2), (2, 3)])
def test_the_rows_of_an_expanded_input_are_those_of_the_whole_view(expanded):
    """The reference's rows (TensorRecipe.rows_values) of an expanded input, dim 0 among
    them, equal those rows of the view the device makes."""
    recipe = TensorRecipe((70, 3, 4, 2), "float16", Layout(expanded=expanded, gaps=(1, 2, 1, 1)),
                          ValueRecipe(distribution="index_hash", seed=11))
    whole = recipe.materialize("cpu")
    blocks = [(0, 2), (30, 33), (69, 70)]
    rows = recipe.rows_values(blocks)
    assert rows.is_contiguous() and rows.shape == (6, 3, 4, 2)
    assert torch.equal(rows, torch.cat([whole[a:b] for a, b in blocks]))


@pytest.mark.parametrize("op", ["adaptive_avg_pool3d@huge", "adaptive_avg_pool2d@huge", "bmm@huge",
                                "softmax@huge", "conv2d@huge"])
def test_an_expanded_huge_case_is_judged_clean_on_a_right_target(op, monkeypatch):
    """A right target (the fault target with no fault) passes expanded @huge cases, the
    grad variant among them: the rows the reference rebuilds are the device's."""
    from mpsfuzz.oracles.judge import judge_case
    monkeypatch.setenv("MPSFUZZ_FAULTS", "none")
    target = load_target("mpsfuzz.testing.faults:target")
    cases = [c for c in example_cases(catalogue.get(op), 16, seed=1)
             if any(r.layout.expanded for r in c.inputs) and max(r.numel for r in c.inputs) > MAX_ELEMENTS][:2]
    assert cases, op
    for case in cases:
        for variant in {case.variant, "grad"} & set(catalogue.get(op).variants()):
            result = judge_case(dataclasses.replace(case, variant=variant), target,
                                ("values", "grads", "errors", "arbiter"))
            assert not result.failures, (variant, case, result.failures)


def _pool_grads(target, x, fn, size):
    x = x.detach().requires_grad_()
    out = target.run(fn, x, size)
    upstream = torch.arange(out.numel()).view(out.shape).remainder(7).to(out.dtype)
    (got,) = target.run(torch.autograd.grad, out, [x], upstream)
    (want,) = torch.autograd.grad(fn(x, size), [x], upstream)
    return got, want


def test_the_expanded_pool_fault_fires_only_on_an_expanded_input_past_the_limit():
    """adaptive_pool_backward_of_an_expanded_input_past_int32: the backward of an
    expanded input of more than MAX_ELEMENTS elements is wrong past that limit (in the
    gradient's memory order: channels_last too); a dense input of that size, and an
    expanded one of MAX_ELEMENTS, are right."""
    target = faults.FaultTarget([EXPANDED_FAULT])
    n = MAX_ELEMENTS // 12 + 2
    base = (torch.arange(n * 6).remainder(9) - 4).to(torch.float16).view(n, 3, 1, 2)
    got, want = _pool_grads(target, base.expand(n, 3, 2, 2), F.adaptive_avg_pool2d, (2, 1))
    assert not torch.equal(got, want) and torch.equal(got.reshape(-1)[:MAX_ELEMENTS], want.reshape(-1)[:MAX_ELEMENTS])
    assert target.fired[EXPANDED_FAULT] == 1
    last = base.view(n, 3, 1, 2, 1).expand(n, 3, 2, 2, 1).permute(0, 2, 3, 4, 1)
    got, want = _pool_grads(target, last.permute(0, 4, 1, 2, 3), F.adaptive_avg_pool3d, (2, 1, 1))
    assert not torch.equal(got, want) and target.fired[EXPANDED_FAULT] == 2
    got, want = _pool_grads(target, base.expand(n, 3, 2, 2).contiguous(), F.adaptive_avg_pool2d, (2, 1))
    assert torch.equal(got, want)
    small = base[:MAX_ELEMENTS // 12].expand(MAX_ELEMENTS // 12, 3, 2, 2)
    got, want = _pool_grads(target, small, F.adaptive_avg_pool2d, (2, 1))
    assert torch.equal(got, want) and target.fired[EXPANDED_FAULT] == 2


@pytest.mark.slow
def test_an_expanded_pool_backward_past_the_limit_is_found_explained_and_minimised(tmp_path):
    """A campaign of adaptive_avg_pool3d@huge finds the fault (about 3.5 minutes on two
    busy cores) as a gradient finding, explained by the expanded layout and the long
    batch, minimised with an expanded input of more than MAX_ELEMENTS elements kept,
    localised to the backward kernel, with a verified script; no process holds more than
    2 GiB of host memory."""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", "adaptive_avg_pool3d@huge", "--target", FAULT_TARGET, "--seed", "2",
                           "--corpus", str(corpus), "--max-findings", "1", "--no-progress",
                           faults=EXPANDED_FAULT, cwd=tmp_path, timeout=1200)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert (finding["op"], finding["oracle"], finding["variant"]) == ("adaptive_avg_pool3d@huge", "grads", "grad")
    assert finding["minimisation"] and "side>=65536" in finding["conditions"], finding["explanation"]
    assert "expanded (stride 0)" in finding["explanation"], finding["explanation"]
    (x,) = finding["case"]["inputs"]
    assert x["layout"]["expanded"] and math.prod(x["shape"]) > MAX_ELEMENTS
    assert finding["localisation"]["kernel"] == "aten::_adaptive_avg_pool3d_backward.default"
    assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
    rss_kib = int(run.stderr.strip().splitlines()[-1])
    assert rss_kib < 2 * 1024 * 1024, rss_kib


# -- pytorch#176784: an output side times an input side past 2^31 - 1 -----------------

START_FAULT = "adaptive_pool_start_index_past_int32"


def _start_product_past_int32(case) -> bool:
    """Whether a pooled dim's last output index times its input side passes 2^31 - 1
    (CUDA's START_IND product, pytorch#176784)."""
    x, size = case.inputs[0], dict(case.kwargs)["output_size"]
    nd = 2 if case.op.startswith("adaptive_avg_pool2d") else 3
    sizes = (size,) * nd if isinstance(size, int) else tuple(size)
    return any(((o if o is not None else n) - 1) * n > 2**31 - 1 for o, n in zip(sizes, x.shape[-nd:]))


def test_the_large_adaptive_pools_draw_an_output_side_times_the_input_side_past_int32():
    """pytorch#176784's trigger is drawn by the @large class (a side of 65,537 or 131,073,
    its output size drawn after the growth, up to the side + 1): measured 47/300 for the
    2-D pool and 16/300 for the 3-D one (seed 1)."""
    for op, least in (("adaptive_avg_pool2d@large", 30), ("adaptive_avg_pool3d@large", 8)):
        drawn = [c for c in example_cases(catalogue.get(op), 300, seed=1) if _start_product_past_int32(c)]
        assert len(drawn) >= least, (op, len(drawn))


def test_the_start_index_fault_moves_only_the_windows_whose_product_wraps():
    """adaptive_pool_start_index_past_int32: output columns whose index times the input
    side passes 2^31 - 1 average a wrong window; the columns before, and a pool whose
    products stay within int32, are right."""
    target = faults.FaultTarget([START_FAULT])
    x = (torch.arange(2 * 3 * 65537) % 9 - 4).float().view(2, 1, 3, 65537)
    got, want = target.run(F.adaptive_avg_pool2d, x, (2, 40000)), F.adaptive_avg_pool2d(x, (2, 40000))
    first = (2**31 - 1) // 65537 + 1            # the first column whose product wraps: 32,768
    assert torch.equal(got[..., :first], want[..., :first]) and not torch.allclose(got[..., first:], want[..., first:])
    assert target.fired[START_FAULT] == 1
    x3 = x.view(2, 1, 1, 3, 65537)
    assert not torch.equal(target.run(F.adaptive_avg_pool3d, x3, (1, 3, 40000)), F.adaptive_avg_pool3d(x3, (1, 3, 40000)))
    assert torch.equal(target.run(F.adaptive_avg_pool2d, x, (3, first)), F.adaptive_avg_pool2d(x, (3, first)))
    assert target.fired[START_FAULT] == 2


@pytest.mark.slow
def test_a_start_index_that_wraps_past_int32_is_found_and_minimised_keeping_the_product(tmp_path):
    """A campaign of adaptive_avg_pool2d@large finds the fault as a values finding and
    minimises it with a pooled dim whose output index times its input side still passes
    2^31 - 1; a script is verified. (The explanation cannot name the product: ablation
    drops or caps inputs' sizes and optional arguments, and output_size is required.)
    The jury's first-order rounding bound of such a wrong float64 case (a side of 65,537
    pooled to 56,375) once took 320 s, past a verdict's time: it is held to
    rounding_bound.MAX_DERIVATIVES now, and this campaign to 8 minutes."""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    from mpsfuzz.generation.recipes import Case
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", "adaptive_avg_pool2d@large", "--target", FAULT_TARGET, "--seed", "2",
                           "--corpus", str(corpus), "--max-findings", "1", "--no-progress", "--budget", "8m",
                           faults=START_FAULT, cwd=tmp_path, timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert (finding["op"], finding["oracle"]) == ("adaptive_avg_pool2d@large", "values"), finding["title"]
    assert finding["minimisation"]
    assert _start_product_past_int32(Case.from_json(finding["case"])), finding["case"]
    # (localised to aten::_adaptive_avg_pool2d in one run; another's localisation ran out
    # of time on the wide case, so it is not asserted here)
    assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
