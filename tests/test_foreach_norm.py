"""The foreach norm (issue 38, pytorch/pytorch#169930: CUDA's ``_foreach_norm``, which
``clip_grad_norm_`` calls, wrong across the tensors of its list): a list of 1 to 5 tensors
of unrelated shapes is drawn, empty and 0-d ones included; numpy judges it; a fault that
shifts the norms past an empty tensor is found, explained and minimised by a campaign."""
from __future__ import annotations

import math

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.oracles.jury.numpy_refs import NUMPY
from mpsfuzz.testing.faults import FaultTarget

from test_fault_campaigns import assert_repro_proves_the_fault, one_fault_campaign

FAULT = "foreach_norm_shifted_past_an_empty_tensor"


def _empty_before_a_nonempty(case) -> bool:
    sizes = [r.numel for r in case.inputs]
    return 0 in sizes and any(sizes[sizes.index(0) + 1:])


def test_lists_of_one_to_five_tensors_are_drawn_with_every_order_and_empty_ones():
    spec = catalogue.get("foreach_norm")
    drawn = example_cases(spec, 300, seed=1)
    assert {len(c.inputs) for c in drawn} == {1, 2, 3, 4, 5}
    assert len({tuple(r.shape for r in c.inputs) for c in drawn}) > 50   # unrelated shapes
    assert any(r.rank == 0 for c in drawn for r in c.inputs)
    assert sum(_empty_before_a_nonempty(c) for c in drawn) >= 5
    ords = {c.kwargs_dict().get("ord", "default") for c in drawn}
    assert ords == {2, 1, math.inf, -math.inf, 0, 3.5, "default"}
    assert any("dtype" in c.kwargs_dict() for c in drawn) and "grad" in {c.variant for c in drawn}
    # (an infinity norm of an empty tensor has no identity: every backend raises)
    assert not any(math.isinf(c.kwargs_dict().get("ord", 2)) and any(r.numel == 0 for r in c.inputs)
                   for c in drawn)


def test_numpy_reference_gives_each_tensors_norm():
    xs = [torch.tensor([3.0, -4.0], dtype=torch.float64), torch.zeros(0, 2, dtype=torch.float64),
          torch.tensor(-2.0, dtype=torch.float64)]
    for ord_ in (2, 1, 0, 3.5):
        got = NUMPY["foreach_norm"](xs, {"ord": ord_})
        want = torch._foreach_norm(xs, ord_)
        assert len(got) == 3 and all(torch.allclose(g, w) for g, w in zip(got, want)), (ord_, got, want)


def test_gradient_is_undefined_at_a_kink_of_any_tensors_norm():
    undefined = catalogue.get("foreach_norm").grad_undefined
    ones, zeros = torch.ones(3), torch.zeros(2)
    assert undefined([ones, ones], {}) is None
    assert "input 1" in undefined([ones, zeros], {})              # a 2-norm at 0
    assert "input 0" in undefined([torch.tensor([1.0, 0.0])], {"ord": 1})


def test_fault_shifts_the_norms_only_past_an_empty_tensor_followed_by_one_with_elements():
    target = FaultTarget([FAULT])
    norms = lambda *ts: torch._foreach_norm(ts)  # noqa: E731
    a, empty, b = torch.ones(2), torch.ones(0, 3), torch.full((4,), 2.0)
    for ts in ((a, b), (a, b, empty), (empty,), (empty, torch.zeros(0))):
        assert all(torch.equal(g, w) for g, w in zip(target.run(norms, *ts), norms(*ts)))
    assert not target.fired
    got = target.run(norms, a, empty, b)
    assert [float(g) for g in got] == [float(torch.tensor(2.0).sqrt()), 4.0, 0.0]
    assert target.fired[FAULT] == 1


@pytest.mark.slow
def test_campaign_finds_explains_and_minimises_the_norms_shifted_past_an_empty_tensor(tmp_path):
    finding = one_fault_campaign(tmp_path, "foreach_norm", FAULT, 600)
    assert "empty" in finding["conditions"], finding["conditions"]
    assert "only when an input is empty" in finding["explanation"], finding["explanation"]
    # minimised without losing the condition: an empty tensor before one with elements
    sizes = [math.prod(r["shape"]) for r in finding["case"]["inputs"]]
    assert 0 in sizes and any(sizes[sizes.index(0) + 1:]) and len(sizes) <= 3, finding["case"]
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)
