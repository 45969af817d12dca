"""Issue 38, pytorch#188467: embedding_bag(mode="max")'s backward with int32 indices once
rows x dim of the weight reaches 2^31 (CUDA computes the row's offset in 32 bits).
``embedding_bag_max@huge`` draws weights past 2^31 and 2^32 elements with bags whose max
lands past row 2^31 / dim, in int32 and int64; the result is compared whole and the
weight's gradient on sampled rows, against max's definition in float64 on those rows
alone, made from the hash (generation/huge_samples.py). A fault past the class's scaled
2^31 is found by a campaign of the op."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from mpsfuzz.execution.targets import load_target
from mpsfuzz.generation import catalogue, huge_samples, input_classes
from mpsfuzz.generation.large_sizes import MAX_ELEMENTS
from mpsfuzz.generation.recipes import Case
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.testing import faults

BAG = "embedding_bag_max@huge"
FAULT = "embedding_bag_max_backward_row_offset_past_int32"


def _bag_maxima(case, bound: int) -> tuple[int, bool]:
    """(how many (bag, column) maxima of ``case`` lie on a weight element at flat offset
    ``bound`` or past it, whether a bag's max is shared by two distinct rows), from the
    rows the reference builds from the hash, the argmax taken in Python."""
    spec = catalogue.get(BAG)
    idx, w, _ = spec.reference_inputs(case)
    judged = huge_samples.bag_judged_rows(case)
    kw = case.kwargs_dict()
    values = w.double().tolist()
    past = 0
    for bag in huge_samples.bag_split(idx.long(), kw.get("offsets"), kw.get("include_last_offset", False)):
        for c in range(w.shape[1]):
            if bag.numel():
                best = max(bag.tolist(), key=lambda k: values[k][c])
                past += judged[best] * w.shape[1] + c >= bound
    return past, bool(spec.grad_undefined([idx, w], kw, 1e-3))


def _judged_past(case, bound: int) -> bool:
    """Whether a bag's max of ``case`` lies at an offset of ``bound`` or past it, and no
    bag's max is shared (the gradient is judged)."""
    past, tie = _bag_maxima(case, bound)
    return past > 0 and not tie


@pytest.mark.parametrize("seed, least_share", [(1, 0.1), (2, 0.1), (3, 0.1)])
def test_the_grad_variant_draws_int32_bags_whose_max_lies_past_2_31(seed, least_share, with_settings):
    """At --max-bytes 140 GB (the docs'): a share of the grad variant's cases has int32
    indices, a weight past 2^31 elements and a bag whose max in some column lies at an
    offset past 2^31, with no tie (so judged); some weights pass 2^32; none passes what
    --max-bytes allows at BAG_BYTES_PER_ELEMENT. (Measured: 15/66, 20/49, 11/49 of the grad
    cases for seeds 1-3, 6, 3 and 6 of them past 2^32; int64 indices drawn alike.)"""
    limit = 140 * 10**9
    with_settings(max_bytes=limit)
    drawn = example_cases(catalogue.get(BAG), 200, seed=seed)
    assert max(c.inputs[1].numel for c in drawn) * huge_samples.BAG_BYTES_PER_ELEMENT <= limit
    grad = [c for c in drawn if c.variant == "grad"]
    judged_past = [c for c in grad if c.inputs[0].dtype == "int32" and c.inputs[1].numel > 2**31
                   and _judged_past(c, 2**31)]
    assert len(judged_past) >= least_share * len(grad) and len(grad) >= 30, (len(judged_past), len(grad))
    assert any(c.inputs[1].numel > 2**32 for c in drawn if c.variant == "grad")
    assert {c.inputs[0].dtype for c in grad if c.inputs[1].numel > 2**31} == {"int32", "int64"}


def test_the_indices_start_a_few_rows_below_the_last_boundary_the_weight_passes():
    rows = 2**31 // 3 + 2
    values = huge_samples.bag_index_values(((8,), (rows, 3), (8,)), {})
    assert (values["low"], values["high"]) == (2**31 // 3 - huge_samples.BAG_ROWS_BELOW, rows - 1)
    rows = 2**32 // 5 + 1
    values = huge_samples.bag_index_values(((8,), (rows, 5), (8,)), {})
    assert values["low"] == 2**32 // 5 - huge_samples.BAG_ROWS_BELOW
    assert huge_samples.bag_index_values(((8,), (2**22 // 3, 3), (8,)), {})["low"] == 0


def test_the_judged_rows_hold_the_rows_looked_up_the_boundaries_and_the_wrapped_offsets(with_settings):
    with_settings(max_bytes=140 * 10**9)
    case = next(c for c in example_cases(catalogue.get(BAG), 60, seed=1) if c.inputs[1].numel > 2**32)
    rows, dim = case.inputs[1].shape
    judged = huge_samples.bag_judged_rows(case)
    looked = set(case.inputs[0].materialize("cpu").long().remainder(rows).view(-1).tolist())
    assert judged == sorted(set(judged)) and looked <= set(judged) and {0, rows - 1} <= set(judged)
    assert {2**31 // dim, 2**32 // dim} <= set(judged)
    r = max(looked)
    assert (r * dim % 2**32) // dim in judged and (r * dim % 2**31) // dim in judged
    assert len(judged) < 200


def _max_gradient_by_definition(idx, w, kw, upstream) -> torch.Tensor:
    """The weight's gradient of max by its definition, in Python floats: at (row r,
    column c) the sum of upstream[bag, c] over the bags whose max in column c is row r."""
    values, up = w.double().tolist(), upstream.double().tolist()
    grad = [[0.0] * w.shape[1] for _ in range(w.shape[0])]
    for b, bag in enumerate(huge_samples.bag_split(idx.long(), kw.get("offsets"), kw.get("include_last_offset", False))):
        for c in range(w.shape[1]):
            if bag.numel():
                row = max(bag.tolist(), key=lambda k: values[k][c])
                grad[row][c] += up[b][c]
    return torch.tensor(grad, dtype=torch.float64)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_whole_weight_cut_to_the_judged_rows_equals_max_by_definition_on_those_rows_alone(seed):
    """With the default --max-bytes (a weight of about 2^22 elements: CI's size), the op on
    the whole weight (eager CPU's embedding_bag and its backward) cut to the judged rows
    equals the float64 definition on those rows alone, made from the hash, forward and
    weight gradient, where no bag's max is shared; the gradient also equals the definition
    computed in Python."""
    spec = catalogue.get(BAG)
    checked = 0
    for case in example_cases(spec, 12, seed=seed):
        idx, w, psw = case.materialize("cpu")
        assert w.numel() > MAX_ELEMENTS and case.inputs[1].values.distribution == "index_hash"
        rows = spec.reference_inputs(case)
        kw = case.kwargs_dict()
        assert rows[1].shape[0] < 200 and rows[0].dtype == idx.dtype
        if spec.grad_undefined(rows, kw, 1e-3):
            continue
        w = w.requires_grad_()
        got = spec.fn(idx, w, psw, **kw)
        upstream = (torch.arange(got.numel()).view(got.shape) % 7 - 3).to(got.dtype)
        (got_grad,) = torch.autograd.grad(got, [w], upstream)
        (got_grad,) = spec.judged_grads(case, [idx, w, psw], [got_grad], [1])
        cut = rows[1].clone().requires_grad_()
        want = spec.reference_fn(rows[0], cut, rows[2], **kw)
        (want_grad,) = torch.autograd.grad(want, [cut], upstream)
        assert torch.equal(got, want) and torch.equal(got_grad, want_grad), case
        by_definition = _max_gradient_by_definition(rows[0], rows[1], kw, upstream)
        assert torch.equal(want_grad.double(), by_definition.to(want_grad.dtype).double())
        checked += 1
    assert checked >= 6


@pytest.mark.parametrize("mode", ["max", "sum", "mean"])
def test_the_reference_follows_the_call_where_triage_drops_the_mode_or_the_offsets(mode):
    """The reference is max's definition, and the other modes' where an ablation drops
    ``mode`` (the call then means): equal to eager CPU's embedding_bag on small bags,
    offsets with empty bags and include_last_offset among them; 1-D indices without
    offsets raise on both sides."""
    w = (torch.arange(40 * 3) * 40503 % 241 - 120).float().div(4).view(40, 3)
    idx = torch.tensor([3, 7, 7, 1, 30, 2], dtype=torch.int32)
    for offsets, last in (((0, 2, 2, 5), False), ((0, 3, 6), True)):
        got = huge_samples.bag_max_formula(idx, w, None, offsets=offsets, include_last_offset=last, mode=mode)
        want = F.embedding_bag(idx, w, torch.tensor(offsets, dtype=torch.int32), mode=mode, include_last_offset=last)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    assert torch.equal(huge_samples.bag_max_formula(idx.view(2, 3), w, None, mode=mode),
                       F.embedding_bag(idx.view(2, 3), w, mode=mode))
    with pytest.raises(ValueError):
        huge_samples.bag_max_formula(idx, w, None, mode=mode)


def test_a_right_target_passes_the_class_and_the_fault_fails_its_int32_gradients(monkeypatch):
    """The fault target with no fault passes forward and grad cases; with the fault, int32
    grad cases whose max lies past MAX_ELEMENTS fail the grads oracle and nothing else."""
    from mpsfuzz.oracles.judge import judge_case
    spec = catalogue.get(BAG)
    cases = example_cases(spec, 10, seed=1)
    monkeypatch.setenv("MPSFUZZ_FAULTS", "none")
    clean = load_target("mpsfuzz.testing.faults:target")
    for case in cases[:4]:
        for variant in ("functional", "grad"):
            result = judge_case(dataclasses.replace(case, variant=variant), clean, ("values", "grads", "errors", "arbiter"))
            assert not result.failures, (variant, case, result.failures)
    monkeypatch.setenv("MPSFUZZ_FAULTS", FAULT)
    faulty = load_target("mpsfuzz.testing.faults:target")
    wrapped = [c for c in cases if c.inputs[0].dtype == "int32" and _judged_past(c, MAX_ELEMENTS)]
    assert wrapped
    for case in wrapped[:2]:
        result = judge_case(dataclasses.replace(case, variant="grad"), faulty, ("values", "grads", "errors", "arbiter"))
        assert [f["oracle"] for f in result.failures] == ["grads"], result.failures
        result = judge_case(dataclasses.replace(case, variant="functional"), faulty, ("values", "errors", "arbiter"))
        assert not result.failures


def test_the_fault_moves_only_the_gradient_past_the_limit_of_int32_indices():
    """embedding_bag_max_backward_row_offset_past_int32: with int32 indices, a weight of
    more than MAX_ELEMENTS elements gets the gradient of a row past that offset where it
    wrapped; int64 indices, a weight of MAX_ELEMENTS elements and sum mode are right."""
    target = faults.FaultTarget([FAULT])
    dim = 4
    rows = MAX_ELEMENTS // dim + 3
    idx = torch.tensor([[1, 5], [rows - 1, 2]], dtype=torch.int32)

    def grads(idx, rows, mode="max"):
        w = torch.zeros(rows, dim, requires_grad=True)
        with torch.no_grad():
            w[1], w[5], w[2], w[rows - 1] = 1.0, 2.0, -1.0, 3.0
        out = target.run(F.embedding_bag, idx, w, mode=mode)
        return target.run(torch.autograd.grad, out, [w], torch.ones_like(out))[0]

    got = grads(idx, rows)
    assert got[rows - 1].abs().sum() == 0 and got[5].sum() == dim
    assert torch.equal(got[((rows - 1) * dim) % MAX_ELEMENTS // dim], torch.ones(dim))
    assert target.fired[FAULT] == 1
    assert grads(idx.long(), rows)[rows - 1].sum() == dim and target.fired[FAULT] == 1
    assert grads(idx.clamp(max=MAX_ELEMENTS // dim - 1), MAX_ELEMENTS // dim)[5].sum() == dim
    assert grads(idx, rows, "sum")[rows - 1].sum() == dim and target.fired[FAULT] == 1


def test_the_large_selection_draws_it_and_coverage_counts_it_as_huge():
    assert BAG in catalogue.large_class(["embedding_bag_max"]) and BAG not in catalogue.select("all")
    spec = catalogue.get(BAG)
    assert {"huge", "huge-grad"} <= set(input_classes.admissible(spec)) and "grad" in spec.variants()
    for case in example_cases(spec, 6, seed=2):
        assert input_classes.drawn(spec, case) == ({"huge", "huge-grad"} if case.variant == "grad" else {"huge"})


@pytest.mark.slow
def test_a_bag_max_backward_past_the_limit_is_found_explained_by_the_size_and_minimised(tmp_path):
    """A campaign of embedding_bag_max@huge finds the fault (2 to 3 minutes on two busy
    cores, 33 s of it minimising) as a gradient finding, explained by the weight's long
    dim, minimised keeping int32 indices, a weight of more than MAX_ELEMENTS elements and
    a looked-up row past that offset, localised to the backward kernel, with a verified
    script; no process holds more than 2 GiB of host memory."""
    from test_huge_samples import found_past_the_limit
    finding = found_past_the_limit(BAG, FAULT, tmp_path)
    assert (finding["op"], finding["oracle"], finding["variant"]) == (BAG, "grads", "grad"), finding["title"]
    case = Case.from_json(finding["case"])
    idx, w = case.inputs[0], case.inputs[1]
    rows, dim = w.shape
    assert idx.dtype == "int32" and w.numel > MAX_ELEMENTS
    looked = idx.materialize("cpu").long().remainder(rows)
    assert bool(((looked + 1) * dim > MAX_ELEMENTS).any())
    assert finding["localisation"]["kernel"] == "aten::_embedding_bag_backward.default"
