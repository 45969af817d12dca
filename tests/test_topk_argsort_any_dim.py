"""topk and argsort along any dim (issue 38: pytorch/pytorch#154890, MPS topk of a 5-D
input along dim 0; #183885, MPS argsort of (3, 2^22 + 1) along dim 0): the dims drawn,
and canonical forms that gather along the call's own dim, so that two valid tie-breaks
along dim 0 agree and a wrong result along it is caught."""
from __future__ import annotations

import re

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import FAULT_TARGET, assert_repro_proves_the_fault, mpsfuzz, the_one_new_finding


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a.shape == b.shape and a.dtype == b.dtype and bool((a == b).all())


def _along_dim_0(case) -> bool:
    rank = case.inputs[0].rank
    return rank >= 1 and case.kwargs_dict().get("dim", -1) % rank == 0


@pytest.mark.parametrize("op", ["topk", "argsort"])
def test_cases_are_drawn_along_dim_0_of_3d_and_5d_inputs_in_every_spelling(op):
    drawn = [c for seed in (1, 2, 3) for c in example_cases(catalogue.get(op), 300, seed=seed)]
    dim0 = [c for c in drawn if _along_dim_0(c)]
    assert sum(c.inputs[0].rank == 3 for c in dim0) >= 10
    assert sum(c.inputs[0].rank >= 5 for c in dim0) >= 3
    spelt = {c.kwargs_dict().get("dim", "default") for c in drawn if c.inputs[0].rank == 3}
    assert {"default", -1, 2, 0, -3} <= spelt and spelt & {1, -2}   # the middle dim too


def _ties_along_dim_0(shape):
    """Every column along dim 0 (of 4) holds 1, 3, 3, 2 plus the column's own offset:
    ties along dim 0 only."""
    column = torch.tensor([1.0, 3.0, 3.0, 2.0]).reshape((4,) + (1,) * (len(shape) - 1))
    return column + 10 * torch.arange(torch.Size(shape[1:]).numel(), dtype=torch.float32).reshape((1,) + shape[1:])


def _other_tie_break(x, idx, dim):
    """idx with the positions of tied gathered values swapped pairwise along ``dim``."""
    moved, gathered = idx.movedim(dim, -1).clone(), x.gather(dim, idx).movedim(dim, -1)
    flat, values = moved.reshape(-1, moved.shape[-1]), gathered.reshape(-1, gathered.shape[-1])
    for row, vals in zip(flat, values):
        for j in range(len(row) - 1):
            if vals[j] == vals[j + 1]:
                row[j], row[j + 1] = row[j + 1].item(), row[j].item()
                break
    other = flat.reshape(moved.shape).movedim(-1, dim)
    assert not torch.equal(other, idx)  # the example has ties to break
    return other


@pytest.mark.parametrize("shape", [(4, 2, 3), (4, 1, 2, 1, 3)])
@pytest.mark.parametrize("dim", [0, "-rank"])
def test_argsort_tie_breaks_along_dim_0_agree_and_indices_of_another_dim_do_not(shape, dim):
    spec = catalogue.get("argsort")
    x = _ties_along_dim_0(shape)
    kw = {"dim": -len(shape) if dim == "-rank" else 0, "descending": True}
    ours = spec.fn(x, **kw)
    assert _same(spec.canonical([x], ours, kw), spec.canonical([x], _other_tie_break(x, ours, 0), kw))
    # indices that sort another dim of the same size (a kernel that took the last dim)
    cube = torch.randn(3, 2, 3, generator=torch.Generator().manual_seed(0))
    along = {"dim": -3 if dim == "-rank" else 0, "descending": True}
    wrong = spec.fn(cube, dim=-1, descending=True)
    assert not _same(spec.canonical([cube], spec.fn(cube, **along), along), spec.canonical([cube], wrong, along))


@pytest.mark.parametrize("shape", [(4, 2, 3), (4, 1, 2, 1, 3)])
@pytest.mark.parametrize("sorted_", [True, False])
def test_topk_tie_breaks_along_dim_0_agree_and_a_wrong_result_does_not(shape, sorted_):
    spec = catalogue.get("topk")
    x = _ties_along_dim_0(shape)
    kw = {"dim": 0, "largest": True, "sorted": sorted_}
    values, idx = spec.fn(x, 2, **kw)   # the two 3s of every column: tied
    ours = spec.canonical([x], (values, idx), kw)
    assert _same(ours, spec.canonical([x], (values, _other_tie_break(x, idx, 0)), kw))
    # indices one place off along dim 0, values right
    assert not _same(ours, spec.canonical([x], (values, (idx + 1) % shape[0]), kw))
    # values of the wrong elements (the two smallest)
    low = spec.fn(x, 2, dim=0, largest=False, sorted=sorted_)
    assert not _same(ours, spec.canonical([x], low, kw))
    # an index out of range along dim 0 (in range along the last dim)
    assert not _same(ours, spec.canonical([x], (values, idx.clone().fill_(shape[0])), kw))


def test_topk_unsorted_along_dim_0_compares_as_sorted_values():
    spec = catalogue.get("topk")
    x = torch.randn(5, 3, 2, 1, 2, generator=torch.Generator().manual_seed(0))
    kw = {"dim": -5, "sorted": False}
    values, idx = spec.fn(x, 3, **kw)
    shuffled = torch.tensor([2, 0, 1])
    other = (values.index_select(0, shuffled), idx.index_select(0, shuffled))
    assert _same(spec.canonical([x], (values, idx), kw), spec.canonical([x], other, kw))
    # the same reordering is wrong where the call asked for sorted values
    fixed = dict(kw, sorted=True)
    assert not _same(spec.canonical([x], spec.fn(x, 3, **fixed), fixed), spec.canonical([x], other, fixed))


def test_a_result_of_the_wrong_shape_is_compared_as_it_is():
    spec = catalogue.get("topk")
    x = torch.randn(3, 4, 5)
    right = spec.fn(x, 2, dim=0)
    along_last = spec.fn(x, 2, dim=-1)   # (3, 4, 2): no index tensor of topk along dim 0
    canon = spec.canonical([x], along_last, {"dim": 0})
    assert not _same(spec.canonical([x], right, {"dim": 0}), canon)
    assert not bool(canon[2].any())   # flagged out of range


def test_the_large_class_canonicalises_with_the_calls_arguments():
    spec = catalogue.get("topk")
    assert spec.canonical_kwargs == catalogue.get("topk").canonical_kwargs and "dim" in spec.canonical_kwargs
    for op in ("topk@large", "argsort@large"):
        large = catalogue.get(op)
        base = catalogue.get(large.base_name)
        assert large.canonical_kwargs == base.canonical_kwargs and large.canonicalise is base.canonicalise


def test_fault_moves_topk_indices_along_dim_0_of_3d_inputs_only():
    target = FaultTarget(["topk_wrong_along_dim_0"])
    x = torch.randn(3, 2, 4)
    for dim in (1, -1):
        assert torch.equal(target.run(lambda t: torch.topk(t, 2, dim=dim), x)[1], torch.topk(x, 2, dim=dim)[1])
    assert torch.equal(target.run(lambda t: torch.topk(t, 2, dim=0), x[0])[1], torch.topk(x[0], 2, dim=0)[1])
    assert not target.fired
    for dim in (0, -3):
        got = target.run(lambda t: torch.topk(t, 2, dim=dim), x)
        assert torch.equal(got[0], torch.topk(x, 2, dim=dim)[0])
        assert not torch.equal(got[1], torch.topk(x, 2, dim=dim)[1])
    assert target.fired["topk_wrong_along_dim_0"] == 2


@pytest.mark.slow
def test_campaign_finds_topk_indices_wrong_along_dim_0(tmp_path):
    corpus = tmp_path / "corpus"
    done = mpsfuzz("run", "--ops", "topk", "--target", FAULT_TARGET, "--max-cases", "300", "--seed", "1",
                   "--corpus", str(corpus), "--max-findings", "1", "--no-progress",
                   faults="topk_wrong_along_dim_0", cwd=tmp_path)
    finding = the_one_new_finding(done, corpus, "values")
    rank = len(finding["case"]["inputs"][0]["shape"])
    assert rank >= 3 and dict(finding["case"]["kwargs"]).get("dim", -1) % rank == 0, finding["case"]
    # the script's canonical helper gathers along the call's dim, as the campaign's did
    assert re.search(r"= canonical\(\[.*\], expected, dim=-?\d", finding["repro"]["script"]), finding["repro"]["script"]
    assert_repro_proves_the_fault(finding, "topk_wrong_along_dim_0", tmp_path)


def test_topk_of_nothing_from_a_0d_tensor_compares_shapes_and_dtypes_only():
    """k=0 of a 0-d tensor returns 0-d tensors that hold whatever the kernel left (CPU
    the input, CUDA 0 or out='s filler): two such results read the same; k=1 still
    compares the element."""
    spec = catalogue.get("topk")
    x = torch.tensor(4.0)
    cpu = (torch.tensor(4.0), torch.tensor(0))
    cuda = (torch.tensor(0.0), torch.tensor(77))
    same = [spec.canonical([x], r, {"k": 0}) for r in (cpu, cuda)]
    assert all(torch.equal(a, b) for a, b in zip(*same))
    differ = [spec.canonical([x], r, {"k": 1}) for r in (cpu, (torch.tensor(0.0), torch.tensor(0)))]
    assert not torch.equal(differ[0][0], differ[1][0])
