"""How far arithmetic in the case's dtype may legitimately take a result: the first-order
rounding error bound of the op's decomposition.

A backend that computes an op in its dtype rounds every intermediate result t_k to
t_k (1 + e_k), |e_k| <= u. To first order an output y moves by sum_k (dy/dt_k) t_k e_k,
so |error| <= u * sum_k |dy/dt_k| |t_k|: the bound. It is measured, not guessed: the op
is traced into aten ops that autograd differentiates (torch's decompositions, stopped at
pointwise kernels and reductions, which round once), the traced graph is run with every
fresh floating result multiplied by (1 + e_k) for zero-valued e_k that require a
gradient, and the gradient of each disputed output with respect to the e_k is taken.

This is what a random move of each intermediate (``intermediate_moves.py``) samples,
computed exactly: the moves missed a cancellation that two seeds did not happen to
expose (issue 30, H200: float16 group_norm on groups of two, mean 1.24 and deviation 0.157:
a rounding of the mean costs 7.9 u of an output of 1, and CUDA was 6 u off).

For a gradient the forward and backward are traced together, and the bound covers the
backward's roundings too. An op that weighs its inputs with weights it computes itself
(bicubic and antialiased resampling: signed weights, so the op on |inputs| does not
measure its terms) has each input rounded too: each product of a weight and an input is
a rounding, and its cost u |w x| is what a backend that rounds it in the dtype may be off
(issue 30, H200: float16 antialiased bicubic 7.6e-5 off an output of -0.0058 cancelled
from terms near 1.5, a tenth of a float16 roundoff of them). The bound is that of *an*
implementation, the decomposition's algebraic form; a backend may use another, so the
arbiter allows a few times it.
"""
from __future__ import annotations

import contextlib
import warnings

import torch

# Intermediates whose rounding costs nothing: exact kernels, and views.
_EXACT = frozenset({
    "view", "reshape", "_unsafe_view", "expand", "permute", "transpose", "t", "squeeze", "unsqueeze", "select",
    "slice", "alias", "clone", "_to_copy", "to", "copy", "detach", "lift_fresh", "lift_fresh_copy", "neg", "abs",
    "where", "index", "index_select", "gather", "cat", "stack", "split", "split_with_sizes", "unbind", "narrow",
    "flip", "roll", "constant_pad_nd", "amax", "amin", "max", "min", "maximum", "minimum", "clamp", "clamp_min",
    "clamp_max", "relu", "sign", "sgn", "floor", "ceil", "round", "trunc", "zeros_like", "ones_like", "full_like",
    "empty_like", "zeros", "ones", "full", "scalar_tensor", "arange", "masked_fill", "fill", "diagonal", "tril",
    "triu", "repeat", "expand_copy", "view_copy", "as_strided", "squeeze_copy", "unsqueeze_copy", "permute_copy",
})
# Kernels that round once however many terms they take (the decomposition stops there).
_LEAVES = frozenset({
    "sum", "mean", "var", "std", "var_mean", "std_mean", "prod", "cumsum", "cumprod", "mm", "bmm", "addmm", "dot",
    "mv", "matmul", "logsumexp", "linalg_vector_norm", "norm",
}) | _EXACT

# Disputed positions measured per output leaf: one backward each where the backward
# cannot be batched, else in batches of one-hot upstream gradients, each batch's
# derivatives (batch x intermediates) held to about BATCH_ELEMENTS numbers. A position
# left unmeasured gets no slack, and a CPU rounding its intermediates there was read as
# off a declared reference (a float16 x * -3 + 1 cancelling near 0; issue 37).
MAX_POSITIONS = 16
MAX_BATCHED_POSITIONS = 1024
BATCH_ELEMENTS = 1 << 24
# All batches together compute about positions x intermediates derivatives: held to
# MAX_DERIVATIVES, so that a wide op (an adaptive pool of a side of 65,537 into 56,375,
# millions of intermediates) measures fewer positions rather than taking past a
# verdict's time (320 s measured, a harness error and a worker restart each case).
MAX_DERIVATIVES = 1 << 27


def _differentiable_table() -> dict:
    """torch's decompositions that land on aten ops autograd differentiates: those of
    pointwise kernels, reductions and views are left out (they would end in prims)."""
    from torch._decomp import decomposition_table
    out = {}
    for op, fn in decomposition_table.items():
        if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
            continue
        if torch.Tag.pointwise in op.tags or op.overloadpacket.__name__.strip("_") in _LEAVES:
            continue
        out[op] = fn
    return out


_TABLE: dict | None = None


def _trace(fn, args):
    global _TABLE
    from .tracing import traced
    if _TABLE is None:
        _TABLE = _differentiable_table()
    return traced(fn, args, _TABLE)


# Reductions whose result is a sum of terms: a backend accumulates them one rounding at a
# time, and the textbook bound of a sum of n terms is (n - 1) u sum |terms| (Higham,
# "Accuracy and Stability of Numerical Algorithms", 4.2), not the one rounding u |sum|
# of its result: the mean of 7 equal float32 values is 3 roundoffs off on CUDA, which
# instance_norm's (x - mean) / sqrt(var + eps) then multiplies by 1 / sqrt(eps) = 316
# where the values are equal (docs/real-findings.md). The terms' magnitudes: the same
# kernel on the arguments' absolute values (a sum of |x|, a product of |A| |B|).
_SUMS = frozenset({"sum", "mean", "cumsum", "mm", "bmm", "addmm", "dot", "mv", "matmul"})
# Reductions of non-negative terms (a variance's squared deviations): the result's own
# magnitude is the sum of its terms'.
_SUMS_OF_SQUARES = frozenset({"var", "std", "var_mean", "std_mean", "linalg_vector_norm", "norm"})


def _terms(name: str, args, out) -> int:
    """How many terms each element of ``out`` sums (1 where it cannot be told)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or not isinstance(out, torch.Tensor):
        return 1
    if name in ("mm", "bmm", "dot", "mv", "matmul"):
        return max(1, tensors[0].shape[-1]) if tensors[0].dim() else 1
    if name == "addmm" and len(tensors) >= 2:
        return max(1, tensors[1].shape[-1]) + 1
    if name == "cumsum":
        return max(1, max(tensors[0].shape, default=1))
    return max(1, tensors[0].numel() // max(1, out.numel()))


# A half-precision sum accumulates in float32 on every backend (torch's opmath type): its
# accumulated roundings are float32's, a 2^-13 of float16's unit (and 2^-16 of
# bfloat16's), and it rounds once into its dtype; a sum accumulated in float16 is still
# held to one rounding (tests/test_accuracy_rules.py).
_ACCUMULATOR_UNIT = 2.0 ** -24


class _Rounded(torch.fx.Interpreter):
    """Runs a traced graph with each fresh floating result t_k returned as t_k + e_k m_k:
    m_k is |t_k| (one rounding), or for a sum of n terms at least n times the sum of their
    magnitudes, in the accumulator's roundoff (``accumulation``: its ratio to the
    dtype's)."""

    def __init__(self, graph_module, accumulation: float = 1.0):
        super().__init__(graph_module)
        self.errors: list[torch.Tensor] = []
        self.accumulation = accumulation

    def call_function(self, target, args, kwargs):
        out = super().call_function(target, args, kwargs)
        name = getattr(getattr(target, "overloadpacket", None), "__name__", "").strip("_")
        if not name or name in _EXACT:
            return out
        if isinstance(out, (tuple, list)):   # var_mean: the mean is rounded too
            n = _terms(name, args, out[0]) if name in _SUMS_OF_SQUARES else 1
            return type(out)(self.rounded(o, n=n) for o in out)
        if name in _SUMS:
            return self.rounded(out, n=_terms(name, args, out), magnitude=self._magnitude(target, args, kwargs, out))
        if name in _SUMS_OF_SQUARES:
            return self.rounded(out, n=_terms(name, args, out))
        return self.rounded(out)

    @staticmethod
    def _magnitude(target, args, kwargs, out):
        """The kernel on its arguments' absolute values (the sum of its terms'
        magnitudes), or None where that cannot be run. An integer argument is a sum's
        data too (cumsum of int64 with ``dtype=float32`` sums the converted values: its
        partial sums of +-4.6e18 round by 2^-24 of their own size, which the signed
        result's magnitude, 6.8e15 after cancelling, does not bound); in float64, whose
        absolute value of int64's minimum does not wrap."""
        def absolute_of(a):
            if not isinstance(a, torch.Tensor) or a.dtype == torch.bool:
                return a
            if a.is_floating_point() or a.is_complex():
                return a.detach().abs()
            return a.detach().to(torch.float64).abs()
        try:
            with torch.no_grad():
                absolute = target(*[absolute_of(a) for a in args], **kwargs)
        except Exception:
            return None
        return absolute.abs() if isinstance(absolute, torch.Tensor) and absolute.shape == out.shape else None

    def rounded(self, out, *, n: int = 1, magnitude=None):
        if not isinstance(out, torch.Tensor) or not (out.is_floating_point() or out.is_complex()) or not out.numel():
            return out
        e = torch.zeros(out.shape, dtype=torch.float64, requires_grad=True)
        self.errors.append(e)
        if n <= 1:
            return out * (1 + e)
        terms = out.detach().abs() if magnitude is None else torch.maximum(out.detach().abs(), magnitude)
        return out + e * torch.maximum(out.detach().abs(), (n * self.accumulation) * terms)


def _graph_and_args(obs, grads: bool):
    """(traced graph, its arguments, how many outputs it returns per leaf) for the
    case's call in float64: the forward, or the forward and backward together."""
    from ...execution.executor import grad_inputs, leaves, upstream_gradient
    from .float64 import dense_wide_inputs, wide_kwargs
    spec, case = obs.spec, obs.case
    inputs = dense_wide_inputs(case)
    kwargs = wide_kwargs(case)
    fn = spec.rounding_form or spec.as_reference().fn
    if not grads:
        return _trace(lambda *a: fn(*a, **kwargs), inputs), inputs
    wrt = grad_inputs(spec, inputs)
    if not wrt:
        return None
    with torch.enable_grad():
        probe = [t.detach().requires_grad_(i in wrt) if isinstance(t, torch.Tensor) else t
                 for i, t in enumerate(inputs)]
        diff = [o for o in leaves(fn(*probe, **kwargs)) if o.requires_grad and (o.is_floating_point()
                                                                                 or o.is_complex())]
    seed = case.inputs[0].values.seed if case.inputs else 0
    upstream = [upstream_gradient(o.shape, o.dtype, j, seed) for j, o in enumerate(diff)]
    n = len(inputs)

    def joint(*args):
        xs = [a.detach().requires_grad_(True) if i in wrt else a for i, a in enumerate(args[:n])]
        outs = [o for o in leaves(fn(*xs, **kwargs)) if o.requires_grad and (o.is_floating_point()
                                                                            or o.is_complex())]
        got = torch.autograd.grad(outs, [xs[i] for i in wrt], list(args[n:]), allow_unused=True)
        return tuple(torch.zeros_like(xs[i]) if g is None else g for g, i in zip(got, wrt))
    return _trace(joint, inputs + upstream), inputs + upstream


@contextlib.contextmanager
def _float64_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _bounds_at(flat: torch.Tensor, positions: list[int], errors: list, unit: float) -> torch.Tensor:
    """The bound at each of ``positions`` of ``flat`` (0 elsewhere): ``unit`` times the
    sum of |d flat[pos] / d e_k| over the intermediates' relative errors ``errors``."""
    if flat.is_complex():
        # each part's bound: their sum bounds the modulus of the complex error
        return (_bounds_at(flat.real, positions, errors, unit) + _bounds_at(flat.imag, positions, errors, unit))
    bound = torch.zeros(flat.shape, dtype=torch.float64)
    values = flat
    per_row = max(1, sum(e.numel() for e in errors))
    chunk = max(1, min(256, BATCH_ELEMENTS // per_row))
    try:
        wanted = positions[:max(1, min(MAX_BATCHED_POSITIONS, MAX_DERIVATIVES // per_row))]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*performance drop.*")   # vmap's fallback: slower, right
            for start in range(0, len(wanted), chunk):
                at = torch.tensor(wanted[start:start + chunk], dtype=torch.long)
                picked = values[at]
                parts = torch.autograd.grad(picked, errors, torch.eye(len(at), dtype=picked.dtype),
                                            retain_graph=True, allow_unused=True, is_grads_batched=True)
                # (a NaN partial, from 0 x NaN where another element's derivative is
                # not finite (log 0 in complex pow), says nothing: no slack from it)
                total = sum(_finite(p).abs().reshape(len(at), -1).sum(1) for p in parts if p is not None)
                if isinstance(total, torch.Tensor):
                    bound[at] = unit * total.to(torch.float64)
    except Exception:   # an op whose backward vmap cannot batch: one backward per position
        bound.zero_()
        for pos in positions[:max(1, min(MAX_POSITIONS, MAX_DERIVATIVES // per_row))]:
            parts = torch.autograd.grad(values[pos], errors, retain_graph=True, allow_unused=True)
            bound[pos] = unit * sum(float(_finite(p).abs().sum()) for p in parts if p is not None)
    # a NaN or infinite input makes the derivatives say nothing
    return torch.where(torch.isfinite(bound), bound, torch.zeros_like(bound))


def _finite(t: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(t), t, torch.zeros_like(t))


def rounding_bounds(obs, grads: bool, wanted: dict[int, list[int]], unit: float) -> dict[int, torch.Tensor] | None:
    """Per output leaf in ``wanted`` ({leaf: flat positions}), a float64 tensor of the
    leaf's flattened shape holding, at those positions, the first-order rounding error
    bound for arithmetic of roundoff ``unit`` (0 elsewhere); None where the op cannot be
    traced or differentiated this way (cached per case)."""
    from ..values import flatten_outputs
    from .tracing import not_traced, outside_modes
    if (not grads and obs.spec.canonicalise is not None) or not_traced(obs.spec, obs.case):
        return None   # compared through a canonical form, or not the plain call, or not traced
    key = ("rounding_bounds", grads, unit, tuple(sorted((k, tuple(v)) for k, v in wanted.items())))
    if key in obs.cache:
        return obs.cache[key]
    result = None
    try:
        with _float64_default():
            got = _graph_and_args(obs, grads)
            if got is not None:
                graph, args = got
                runner = _Rounded(graph, accumulation=min(1.0, _ACCUMULATOR_UNIT / unit))
                with outside_modes(), torch.enable_grad():
                    args = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
                    if "computed-weights" in obs.spec.semantics:
                        args = [runner.rounded(a) for a in args]
                    out = runner.run(*args)
                    outs = list(out) if grads else [o for o in flatten_outputs(out)]
                    result = {}
                    for leaf, positions in wanted.items():
                        y = outs[leaf] if leaf < len(outs) else None
                        if not isinstance(y, torch.Tensor) or not y.requires_grad:
                            continue
                        result[leaf] = _bounds_at(y.reshape(-1), positions, runner.errors, unit)
    except Exception:   # best effort: no bound, the other rules stand
        result = None
    obs.cache[key] = result
    return result
