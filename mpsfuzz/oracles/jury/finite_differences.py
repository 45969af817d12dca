"""``finite-differences``: a gradient from an independent forward reference (numpy's, or
each element alone for an elementwise op), by central differences in float64.

The grad variant's gradient of input x is the derivative of L(x) = Re(sum_k <g_k,
out_k(x)>) with the executor's upstream gradients g_k (for a real x and a complex
output, torch's convention: Re(conj(g) * dy/dx)). A table reference without autograd
(numpy has none) still gives it: each element of each real input differentiated is
moved by +-h and L evaluated again. Central differences are accurate to about 1e-9
relative in float64 for smooth functions, far inside any low-precision tolerance; where
the gradient is not defined (kinks, ties) the grads oracle gave no verdict before.
Inputs of more than :data:`MAX_ELEMENTS` elements to differentiate are left alone (2n
forward runs each).
"""
from __future__ import annotations

import torch

from ...execution.observation import Raised
from ..values import flatten_outputs
from . import juror
from .float64 import dense_wide_inputs, wide_kwargs
from .reference_vote import called_as_the_op, vote_with
from .references import NotApplicable

MAX_ELEMENTS = 256


def _step(x: float) -> float:
    return 1e-6 * max(1.0, abs(x))


def _loss(reference, inputs: list, kwargs: dict, upstream: list[torch.Tensor]) -> float:
    """Re(sum <g_k, out_k>) over the reference's floating outputs, as the executor pairs
    its upstream gradients with the differentiable outputs."""
    outs = [o for o in flatten_outputs(reference(*inputs, **kwargs))
            if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex())]
    if len(outs) != len(upstream):
        raise NotApplicable("its outputs do not pair with the upstream gradients")
    total = 0.0
    for out, g in zip(outs, upstream):
        if out.shape != g.shape:
            raise NotApplicable("an output of another shape")
        out = out.to(torch.complex128 if out.is_complex() else torch.float64)
        g = g.to(out.dtype)
        total += float((g.conj() * out).real.sum()) if out.is_complex() else float((g * out).sum())
    return total


def numeric_gradients(obs, reference) -> list | str:
    """Per differentiated input (the executor's order), its gradient by central
    differences of ``reference`` (called as the op is), or why there is none."""
    from ...execution.executor import grad_inputs, upstream_gradient
    case, spec = obs.case, obs.spec
    inputs = dense_wide_inputs(case)
    kwargs = wide_kwargs(case)
    wrt = grad_inputs(spec, inputs)
    if not wrt:
        return "no input is differentiated"
    if any(inputs[i].is_complex() for i in wrt):
        return "a complex input (its gradient's convention is not a real derivative)"
    if sum(inputs[i].numel() for i in wrt) > MAX_ELEMENTS:
        return f"more than {MAX_ELEMENTS} elements to differentiate"
    with torch.no_grad():
        outs = [o for o in flatten_outputs(reference(*inputs, **kwargs))
                if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex())]
    seed = case.inputs[0].values.seed if case.inputs else 0
    upstream = [upstream_gradient(o.shape, torch.complex128 if o.is_complex() else torch.float64, k, seed)
                for k, o in enumerate(outs)]
    grads = []
    with torch.no_grad():
        for i in wrt:
            flat = inputs[i].reshape(-1)
            grad = torch.zeros_like(flat)
            for j in range(flat.numel()):
                x = float(flat[j])
                h = _step(x)
                moved = [t.clone() for t in inputs]
                moved[i].reshape(-1)[j] = x + h
                up = _loss(reference, moved, kwargs, upstream)
                moved[i].reshape(-1)[j] = x - h
                down = _loss(reference, moved, kwargs, upstream)
                grad[j] = (up - down) / (2 * h)
            grads.append(grad.reshape(inputs[i].shape))
    return grads


@juror("finite-differences", witness="independent", costly=True,
       doc="a gradient by central differences of an independent forward reference (numpy's, or the formula's)")
def finite_difference_vote(obs, failure, ballots):
    from .numpy_refs import NUMPY
    if failure.oracle != "grads" or obs.case.variant != "grad":
        return None
    table = NUMPY.get(obs.spec.base_name)
    if table is None:
        return None
    try:
        leaves = numeric_gradients(obs, called_as_the_op(table))
    except NotApplicable as exc:
        return f"not applicable: {exc}"
    if isinstance(leaves, str):
        return leaves
    if any(isinstance(g, Raised) for g in leaves):
        return "the reference raised"
    return vote_with("finite-differences", "independent", "central differences of numpy's forward in float64",
                     leaves, ballots)
