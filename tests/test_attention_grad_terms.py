"""Attention's gradient terms (OpSpec.grad_terms): where the softmax saturates (a key of
2^31 makes each row one-hot), dP - D cancels exactly in float64 and to a few roundoffs on
another backend's order of evaluation, and k multiplies that residual. CUDA's float64
and bfloat16 SDPA gradients were filed as wrong for it in four runs; the arbiter now holds
them to the roundoff of the measured terms, and still finds a gradient wrong beyond it."""
from __future__ import annotations

import torch

from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import Fault, FaultTarget


def _recipe(shape, seed=0, specials=(), expanded=()):
    return {"shape": list(shape), "dtype": "float64",
            "layout": {"offset": 0, "gaps": [], "permutation": [], "expanded": list(expanded)},
            "values": {"distribution": "small_int", "seed": seed, "low": None, "high": None,
                       "specials": [list(s) for s in specials]}, "alias": None}


# The H200's case (docs/real-findings.md): q (2, 3, 3); a stride-0 expanded k holding 2^31+1; v and the
# mask broadcast.
SATURATED = Case.from_json({"format": 3, "op": "scaled_dot_product_attention", "variant": "grad", "kwargs": {},
                            "inputs": [_recipe((2, 3, 3), seed=3952857999),
                                       _recipe((3, 3), specials=[(0, "2^31+1")], expanded=[0]),
                                       _recipe((3, 1, 3, 1)),
                                       _recipe((3,), seed=1685406342, specials=[(0, "-0.0")])]})


def _softmax_backward_off_by(relative):
    """A target whose softmax backward adds ``relative`` x |P dP| to each dS element: a
    few roundoffs for another order of evaluation, much more for a broken kernel."""
    def rewrite(func, args, kwargs, result):
        grad_output, output = args[0], args[1]
        return result + relative * output * grad_output.abs()
    return FaultTarget([Fault("softmax_backward_off", "test", ("aten::_softmax_backward_data",),
                              lambda f, a, k: True, "rewrite", rewrite=rewrite)])


def _grads_failures(target):
    return [f for f in judge_case(SATURATED, target, DEFAULT).failures if f["oracle"] == "grads"]


def test_a_gradient_off_by_the_roundoff_of_its_cancelled_terms_is_not_a_finding():
    assert _grads_failures(_softmax_backward_off_by(4 * torch.finfo(torch.float64).eps)) == []


def test_a_gradient_off_beyond_that_roundoff_is_still_found():
    found = _grads_failures(_softmax_backward_off_by(1e-9))
    assert len(found) == 1 and found[0]["kind"] == "wrong-values", found
    assert "float64 arbiter: dut-wrong" in found[0]["message"]
