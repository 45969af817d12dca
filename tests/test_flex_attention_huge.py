"""flex_attention@huge (issue 38; pytorch/pytorch#190857: CUDA flex_attention's backward
reads K/V at a 32-bit offset, key * stride along the keys, which passes INT32_MAX once K
and V, stored sequence-major, hold about 2^31 elements): the class draws K and V past
2^31 elements, sequence-major or not, the grad variant among them; its boundary batches
give an exact reference; a backward that reads K/V where such an offset wrapped is
found, explained by the sequence-major layout and minimised keeping it."""
from __future__ import annotations

import json
import math

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.large_sizes import MAX_ELEMENTS
from mpsfuzz.generation.ops.nn_losses import (FLEX_GRID_BATCHES, FLEX_HUGE_ROW, SEQUENCE_MAJOR, _flex_attention,
                                              flex_huge_shapes)
from mpsfuzz.generation.opspec import LARGE_REAL_NUMEL
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing import faults

OP = "flex_attention@huge"
FAULT = "flex_attention_backward_kv_offset_past_int32"


def _sequence_offset(case) -> int:
    """The largest offset of a key from its (batch, head) base in K or V: (keys - 1) *
    the stride along the keys (pytorch#190857's key * stride_kn)."""
    return max((r.shape[2] - 1) * r._geometry()[1][2] for r in case.inputs[1:])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_grad_variant_draws_kv_past_2_31_and_sequence_offsets_past_int32(with_settings, seed):
    """At 140 GB (an H200), of 200 cases: the grad variant with K and V past 2^31
    elements (measured 30, 19, 36 for seeds 1-3 with every module of mpsfuzz loaded, as
    the suite loads them: Hypothesis draws constants of the loaded modules), with a key's
    sequence-major offset past 2^31 - 1, the upstream trigger (17, 13, 16), and of those
    with 128 queries, which Inductor compiles to its flex-attention kernels as in the
    upstream report, not flex-decoding's (11, 7, 7). Every case keeps a batch of K within
    FLEX_HUGE_ROW elements (the host's reference) and at most FLEX_GRID_BATCHES batches
    (the compiled backward's grid); a long sequence (12,000 keys or more: few batches,
    pytorch#190857's form) is drawn with 128 queries."""
    with_settings(max_bytes=140 * 10**9)
    cases = example_cases(catalogue.get(OP), 200, seed=seed)
    grad = [c for c in cases if c.variant == "grad"]
    past = [c for c in grad if min(r.numel for r in c.inputs[1:]) > 2**31]
    assert len(past) >= 12, len(past)
    beyond = [c for c in past if _sequence_offset(c) > 2**31 - 1]
    assert len(beyond) >= 6, len(beyond)
    assert len([c for c in beyond if c.inputs[0].shape[2] == 128]) >= 3
    for c in cases:
        k = c.inputs[1]
        assert k.shape[0] <= FLEX_GRID_BATCHES and k.numel // k.shape[0] <= FLEX_HUGE_ROW, c
        # q and the output stay small beside K
        assert c.inputs[0].numel <= k.numel // 4, c
    assert any(c.inputs[1].layout.permutation == SEQUENCE_MAJOR for c in past)
    assert any(c.inputs[0].shape[2] == 128 and c.inputs[1].shape[2] >= 12000 for c in cases)


def test_the_sizes_put_the_last_keys_offset_around_the_boundary():
    """The batch count is drawn one below to two past the one that puts the last key's
    sequence-major offset at the target: below it stays under, the others pass it."""
    from hypothesis import given, settings as hsettings, strategies as st
    from mpsfuzz.generation.opspec import ShapeBudget
    seen = set()

    @hsettings(max_examples=60, derandomize=True, database=None)
    @given(st.data())
    def check(data):
        q, k, v = flex_huge_shapes(data.draw, ShapeBudget())
        b, h, s, e = k
        assert v == k and q[0] == b and q[1] % h == 0 and q[3] == e
        # 128 queries over head dim 128 (flex-attention's kernel), or a few queries whose
        # query heads' rows stay within half the head dim (flex-decoding's)
        assert (q[2], e, q[1]) == (128, 128, h) or 2 * q[2] * (q[1] // h) <= e
        target = MAX_ELEMENTS                 # the default --max-bytes (CI's size): the scaled 2^31
        base = target // (h * e * (s - 1))
        assert base - 1 <= b <= base + 2
        seen.add((s - 1) * b * h * e >= target)
    check()
    assert seen == {True, False}


def _flex_case(keys_layout: Layout, values_layout: Layout, *, keys: int = 300, batch: int = 6,
               dtype: str = "float32") -> Case:
    def t(shape, seed, bounded=True):
        values = ValueRecipe("index_hash", seed, low=-2 if bounded else None, high=2 if bounded else None)
        return TensorRecipe(shape, dtype, Layout(), values)
    q, k, v = t((batch, 2, 3, 16), 1), t((batch, 1, keys, 16), 2), t((batch, 1, keys, 16), 3, bounded=False)
    k = TensorRecipe(k.shape, dtype, keys_layout, k.values)
    v = TensorRecipe(v.shape, dtype, values_layout, v.values)
    return Case(OP, (q, k, v), (("enable_gqa", True), ("scale", None), ("score_mod", "none")), "grad")


def test_the_fault_reads_wrapped_offsets_only_in_the_backward_of_sequence_major_kv(monkeypatch):
    """flex_attention_backward_kv_offset_past_int32, its limit lowered to 2^14: K stored
    sequence-major whose last key's offset passes it gets wrong gradients (dQ, dK, dV) and
    a right forward; K batch-major of the same size, and a sequence-major K whose offsets
    stay below the limit, get right gradients."""
    monkeypatch.setattr(faults, "HUGE_BACKWARD_LIMIT", 1 << 14)
    seq = Layout(permutation=SEQUENCE_MAJOR)

    def grads(target, case):
        inputs = [x.detach().requires_grad_() for x in case.materialize("cpu")]
        out = target.run(_flex_attention, *inputs, **case.kwargs_dict())
        upstream = torch.arange(out.numel()).remainder(7).view(out.shape).to(out.dtype) - 3
        return out, target.run(torch.autograd.grad, out, inputs, upstream)

    clean = faults.FaultTarget([])
    for case, wrong in ((_flex_case(seq, Layout()), True), (_flex_case(Layout(), Layout()), False),
                        (_flex_case(seq, seq, keys=20), False)):
        bad = faults.FaultTarget([FAULT])
        (out, got), (want_out, want) = grads(bad, case), grads(clean, case)
        assert torch.equal(out, want_out)
        assert all(not torch.equal(g, w) for g, w in zip(got, want)) == wrong, case
        assert bad.fired[FAULT] == (1 if wrong else 0)


@pytest.mark.slow
def test_a_wrapped_read_is_judged_a_gradient_bug_and_a_right_backward_passes(monkeypatch):
    """The grads oracle and the float64 arbiter (on the batches compared, made from the
    hash: K and V past LARGE_REAL_NUMEL elements, as every @huge case) confirm the fault's
    gradients as the target's bug; the clean target passes. (About 30 s alone: the jury's
    float64 references of four batches of 1,100 keys.)"""
    monkeypatch.setattr(faults, "HUGE_BACKWARD_LIMIT", 1 << 14)
    seq = Layout(permutation=SEQUENCE_MAJOR)
    case = _flex_case(seq, seq, keys=1100, batch=64)
    assert case.inputs[1].numel > LARGE_REAL_NUMEL
    oracles = ("values", "grads", "errors", "arbiter")
    assert judge_case(case, faults.FaultTarget([]), oracles).failures == ()
    failures = judge_case(case, faults.FaultTarget([FAULT]), oracles).failures
    assert [(f["oracle"], f["blame"]) for f in failures] == [("grads", "target")], failures


@pytest.mark.slow
def test_a_wrapped_kv_read_in_the_backward_is_found_explained_and_minimised(tmp_path):
    """A default-length campaign of flex_attention@huge on the fault target finds the
    fault as a gradient finding (its first failure in about 2 minutes on two busy cores;
    the run, triage included, about 3), explained by the sequence-major layout of K or V
    (contiguous, it passes; the ablation's further probes, the grad variant's among them,
    as its time budget allows), minimised keeping a sequence-major K or
    V whose last key's offset passes the (scaled) limit (measured: K (129, 1, 1018, 16),
    2,099,088 against 2,097,152), with a verified script."""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", OP, "--target", FAULT_TARGET, "--seed", "1", "--corpus", str(corpus),
                           "--max-findings", "1", "--no-progress", faults=FAULT, cwd=tmp_path, timeout=1500)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert (finding["op"], finding["oracle"], finding["variant"]) == (OP, "grads", "grad")
    assert {"layout:1", "layout:2", "layout:any"} & set(finding["conditions"]), finding["explanation"]
    case = Case.from_json(finding["case"])
    assert finding["minimisation"] and _sequence_offset(case) >= faults.HUGE_BACKWARD_LIMIT, finding["case"]
    assert any(r.layout.permutation == SEQUENCE_MAJOR for r in case.inputs[1:]), finding["case"]
    assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
    assert math.prod(case.inputs[1].shape) > faults.HUGE_BACKWARD_LIMIT
