"""The second half of the ``nn`` family: loss functions, scaled dot-product attention and
recurrent cells/layers (``torch.nn.functional`` and the functional RNN entry points).

Losses take realistic values so that most cases are valid on the CPU: class targets are
int64 in range of the input's class dim (``ignore_index`` sometimes names a class),
probabilities lie in (0, 1), variances are positive, CTC lengths are drawn so that they
fit the tensors. Optional tensor arguments (``weight``, ``pos_weight``, biases, attention
masks) are always inputs of the case, and a keyword says whether the wrapper passes them
or None: a case has a fixed number of tensor inputs.

Gradients are compared w.r.t. the inputs torch differentiates (never class weights,
which ``nll_loss``, ``binary_cross_entropy`` and ``multi_margin_loss`` refuse).

RNN layers come two ways. ``lstm`` and ``gru`` are one layer, one direction, with each
weight a tensor input of its own (x, h0 [, c0], w_ih, w_hh, b_ih, b_hh; ``has_biases``
says whether the biases are passed), so that whether weights share a storage is the
recipe's choice (aliasing) that the reducer and the ablation can take away: cuDNN takes
weights that are adjacent views of one buffer for its own flat weight buffer. A fixed
number of inputs per op cannot also hold a second layer (its w_ih has another shape) or
direction, so ``lstm_stacked`` and ``gru_stacked`` (1-2 layers, bidirectional) slice
their weights from one ``(num_layers, directions, K)`` input, the layer count and
direction following from its shape, and copy each weight into a storage of its own:
a storage shared behind the recipe's back would be a trigger no ablation could name.

Eager CPU bugs (torch 2.13) that the reference must not run into, avoided here:
``ctc_loss`` ignores the stride of 1-D (concatenated) targets (wrong losses when gapped,
an out-of-bounds read and a crash when expanded), so the wrapper makes them contiguous;
``multi_margin_loss`` and ``multilabel_margin_loss`` return uninitialised memory for
mean/sum over an empty batch, so their batches are never empty. ``nll_loss`` backward on
some non-contiguous 4-D inputs raises "grad_input must be contiguous" (an invalid case,
a few percent of nll/cross_entropy grad cases).
"""
from __future__ import annotations

import inspect
import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from ..grad_points import equal_operands, is_zero, kinks, near, slack, vector_norm_reason, when, wide, zero_crossings
from ..large_sizes import BOUNDARIES, MAX_ELEMENTS, grows, huge_variant, without_reduction
from ..opspec import declare_grows
from ..opspec import (OpSpec, ShapeBudget, broadcast_shapes, broadcastable_to, draw_side, expand, fit,
                      integers_once, register, same_shapes, sampled_once)
from ..preparation import preparation
from ..recipes import Layout, max_bytes

FAMILY = "nn"
FLOAT = expand("float")
INDEX = ("int64",)
REDUCTIONS = ("mean", "none", "sum")


def _supports_gqa() -> bool:
    try:
        return "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: ask the docstring
        return "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")


HAS_GQA = _supports_gqa()


def nn_op(name: str, fn, shapes, doc: str, *, dtypes=FLOAT, grad: bool = True, **kw) -> OpSpec:
    kw.setdefault("rtol_scale", 4)
    kw.setdefault("atol_scale", 4)
    # Losses reduce, attention and recurrent cells multiply matrices: each output element
    # sums many terms (the arbiter's accumulation bound; a float16 LSTM on CUDA is off
    # from CPU's by a few roundoffs of its gates' terms)
    kw.setdefault("semantics", frozenset({"accumulates"}))
    return OpSpec(name=name, family=FAMILY, fn=fn, shapes=shapes, dtypes=expand(dtypes),
                  doc=doc, grad=grad, **kw)


# -- value builders ---------------------------------------------------------------------

def _values(distribution: str, low=None, high=None, *, specials: bool = True):
    """A fixed distribution (with a range) that can turn specials off."""
    def build(shapes, kwargs):
        out = {"distribution": distribution}
        if low is not None:
            out["low"] = low
        if high is not None:
            out["high"] = high
        if not specials:
            out["allow_specials"] = False
        return out
    return build


def num_classes(shape: tuple) -> int:
    """The class dim of a classification input: dim 1 when batched, else dim 0."""
    return shape[1] if len(shape) >= 2 else shape[0]


def class_targets(input_index: int = 0, *, low: int = 0, last_dim: bool = False):
    """int64 targets in [low, C-1], C the class count of input ``input_index``."""
    def build(shapes, kwargs):
        shape = shapes[input_index]
        c = shape[-1] if last_dim else num_classes(shape)
        return {"distribution": "int_range", "low": low, "high": max(low, c - 1),
                "allow_specials": False}
    return build


LOG_PROBS = _values("uniform", -5.0, 0.0)
PROBS = _values("uniform", 0.0, 1.0)
STRICT_PROBS = _values("uniform", 0.0, 1.0, specials=False)  # binary_cross_entropy checks
OPEN_PROBS = _values("uniform", 0.01, 0.99, specials=False)
SIGNS = _values("int_range", -1, 1, specials=False)  # +-1 targets (0 sometimes: allowed)
BINARY = _values("bool")
POSITIVE = _values("positive", specials=False)
WEIGHTS = _values("positive")


def _kl_target(shapes, kwargs):
    return ({"distribution": "uniform", "low": -5.0, "high": 0.0} if kwargs.get("log_target")
            else {"distribution": "uniform", "low": 0.0, "high": 1.0})


def _poisson_input(shapes, kwargs):
    # log_input=False takes rates (log(input + eps) of a negative rate is NaN: avoid it)
    return {"distribution": "normal"} if kwargs.get("log_input", True) else {"distribution": "positive"}


# -- shape builders ---------------------------------------------------------------------

def pair_shapes(n: int = 2, *, same_rank: bool = False):
    """Same shapes mostly; broadcasting shapes a quarter of the time (the elementwise
    losses broadcast with a warning). ``same_rank``: broadcast only through sides of 1
    (margin_ranking_loss wants one rank)."""
    same, bcast = same_shapes(n), broadcast_shapes(n)

    def build(draw, budget: ShapeBudget):
        if draw(st.integers(0, 3)) < 3:
            return same(draw, budget)
        if not same_rank:
            return bcast(draw, budget)
        (full,) = same_shapes(1)(draw, budget)
        out = [tuple(1 if draw(st.integers(0, 2)) == 0 else s for s in full) for _ in range(n)]
        out[draw(st.integers(0, n - 1))] = full
        return tuple(out)
    return build


def classification_shapes(*, target: str = "index", weight: bool = True, spatial: bool = True,
                          min_batch: int = 0):
    """input (N, C), (C,) unbatched or (N, C, d1..dk) with k in 1..3 (4-D and 5-D
    inputs); target (N,), () or (N, d1..dk) of class indices, or the input's shape for
    ``target="probs"``; a (C,) class weight when ``weight``. C >= 1, N >= ``min_batch``."""
    def build(draw, budget: ShapeBudget):
        form = draw(st.integers(0, 2 if spatial else 1))
        c = draw_side(draw, budget, min_side=1)
        if form == 1:
            x = (c,)
        else:
            n = draw_side(draw, budget, min_side=min_batch)
            extra = []
            if form == 2:
                most = max(1, min(3, budget.max_rank - 2))
                extra = [draw_side(draw, budget) for _ in range(draw(st.integers(1, most)))]
            x = fit([n, c] + extra, budget)
        t = x if target == "probs" else (x[:1] + x[2:] if len(x) >= 2 else ())
        return (x, t, (num_classes(x),)) if weight else (x, t)
    return build


def _vector_pairs(n_vectors: int, *, target: bool):
    """``n_vectors`` inputs of (N, D) or (D,) plus an (N,)/() target when ``target``."""
    def build(draw, budget: ShapeBudget):
        d = draw_side(draw, budget)
        if draw(st.integers(0, 3)) == 3:
            x = (d,)
        else:
            x = fit([draw_side(draw, budget), d], budget)
        out = (x,) * n_vectors
        return out + (x[:1] if len(x) == 2 else (),) if target else out
    return build


def takes(fn, name: str) -> bool:
    """Whether this torch's ``fn`` has parameter ``name`` (mse_loss's ``weight`` is new)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def weighted_pairs(fn):
    """pair_shapes() plus a per-element weight of the input's shape, where this torch's
    ``fn`` takes one (an older torch's cases keep two inputs)."""
    pairs = pair_shapes()
    if not takes(fn, "weight"):
        return pairs

    def build(draw, budget: ShapeBudget):
        x, y = pairs(draw, budget)
        return (x, y, x)
    return build


def weighted(fn):
    """``fn(x, y)``, given the third input as ``weight`` where the case says so."""
    def call(x, y, w=None, *, use_weight=False, **kw):
        return fn(x, y, weight=w, **kw) if use_weight else fn(x, y, **kw)
    call.__name__ = fn.__name__
    return call


def weight_flag(fn, build):
    """``build``'s arguments plus ``use_weight`` where this torch's ``fn`` takes a weight."""
    if not takes(fn, "weight"):
        return build

    def wrapped(draw, shapes, dtypes):
        return {**build(draw, shapes, dtypes), "use_weight": draw(st.booleans())}
    return wrapped


def _gaussian_shapes(draw, budget: ShapeBudget):
    """input, target of one shape; var of that shape, or with its last side 1
    (heteroscedastic per row), or without the last dim (homoscedastic)."""
    (x,) = same_shapes(1)(draw, budget)
    how = draw(st.integers(0, 2)) if x else 0
    var = x if how == 0 else x[:-1] + (1,) if how == 1 else x[:-1]
    return (x, x, var)


def _bce_shapes(n_weights: int):
    def build(draw, budget: ShapeBudget):
        (x,) = same_shapes(1)(draw, budget)
        return (x, x) + tuple(broadcastable_to(draw, x) for _ in range(n_weights))
    return build


# multi_margin_loss and multilabel_margin_loss on an empty batch (N = 0) return
# uninitialised memory for mean/sum on eager CPU (torch 2.13): the reference would be
# garbage, so their batches are never empty, not on an `empty` boundary either
# (semantics undefined-when-empty).

def _multi_margin_shapes(draw, budget: ShapeBudget):
    return classification_shapes(spatial=False, min_batch=1)(draw, budget)


def _multilabel_margin_shapes(draw, budget: ShapeBudget):
    c = draw_side(draw, budget, min_side=1)
    x = (c,) if draw(st.integers(0, 3)) == 3 else fit([draw_side(draw, budget, min_side=1), c], budget)
    return (x, x)


def _multilabel_soft_margin_shapes(draw, budget: ShapeBudget):
    x = fit([draw_side(draw, budget), draw_side(draw, budget)], budget)
    return (x, x, (x[1],))


# -- argument builders ------------------------------------------------------------------

def reduction_arg(*choices):
    choices = choices or REDUCTIONS

    def build(draw, shapes, dtypes):
        return {"reduction": draw(st.sampled_from(choices))}
    return build


def with_reduction(extra=None, *, choices=REDUCTIONS):
    """reduction plus whatever ``extra(draw, shapes, dtypes)`` adds."""
    def build(draw, shapes, dtypes):
        out = {"reduction": draw(st.sampled_from(choices))}
        if extra is not None:
            out.update(extra(draw, shapes, dtypes))
        return out
    return build


def _pick(**options):
    """Keyword arguments each drawn from its own tuple (the first value shrinks first)."""
    def build(draw, shapes, dtypes):
        return {k: draw(st.sampled_from(v)) for k, v in options.items()}
    return build


def _ignore_index(draw, c: int) -> dict:
    """No ignore_index (the default -100), a class in range (so that some targets are
    ignored), or a value no target takes."""
    how = draw(st.integers(0, 3))
    if how == 0:
        return {}
    if how == 3:
        return {"ignore_index": -100}
    return {"ignore_index": draw(st.integers(0, max(0, c - 1)))}


def _nll_args(draw, shapes, dtypes):
    out = {"reduction": draw(st.sampled_from(REDUCTIONS)), "use_weight": draw(st.booleans())}
    out.update(_ignore_index(draw, num_classes(shapes[0])))
    return out


def _cross_entropy_args(draw, shapes, dtypes):
    out = _nll_args(draw, shapes, dtypes)
    out["label_smoothing"] = draw(st.sampled_from((0.0, 0.1, 0.5, 1.0)))
    return out


def _cross_entropy_probs_args(draw, shapes, dtypes):
    return {"reduction": draw(st.sampled_from(REDUCTIONS)), "use_weight": draw(st.booleans()),
            "label_smoothing": draw(st.sampled_from((0.0, 0.1, 0.5, 1.0)))}


# -- wrappers -----------------------------------------------------------------------------

def _nll(x, t, w, *, use_weight=False, **kw):
    return F.nll_loss(x, t, weight=w if use_weight else None, **kw)


def _cross_entropy(x, t, w, *, use_weight=False, **kw):
    return F.cross_entropy(x, t, weight=w if use_weight else None, **kw)


def _bce(x, t, w, *, use_weight=False, **kw):
    return F.binary_cross_entropy(x, t, weight=w if use_weight else None, **kw)


def _bce_logits(x, t, w, pw, *, use_weight=False, use_pos_weight=False, **kw):
    return F.binary_cross_entropy_with_logits(x, t, weight=w if use_weight else None,
                                              pos_weight=pw if use_pos_weight else None, **kw)


def _multi_margin(x, t, w, *, use_weight=False, **kw):
    return F.multi_margin_loss(x, t, weight=w if use_weight else None, **kw)


def _multilabel_soft_margin(x, t, w, *, use_weight=False, **kw):
    return F.multilabel_soft_margin_loss(x, t, weight=w if use_weight else None, **kw)


# -- where gradients are undefined: the hinges and absolute values of the losses ----------

def _ranking_hinge(inputs, kwargs):
    """margin_ranking_loss: max(0, -y (a - b) + margin)."""
    margin = kwargs.get("margin", 0.0)
    try:
        a, b, y = torch.broadcast_tensors(*(wide(t) for t in inputs[:3]))
    except RuntimeError:
        return []
    return [(-y * (a - b) + margin, y.abs() * (a.abs() + b.abs()) + abs(margin))]


def _embedding_hinge(inputs, kwargs):
    """hinge_embedding_loss: max(0, margin - x) where y != 1."""
    margin = kwargs.get("margin", 1.0)
    x, y = wide(inputs[0]), wide(inputs[1])
    if x.shape != y.shape:
        return []
    return [(torch.where(y != 1, margin - x, torch.ones_like(x)), x.abs() + abs(margin))]


def _cosine_hinge(inputs, kwargs):
    """cosine_embedding_loss: max(0, cos(a, b) - margin) where y == -1 (cosine along the
    last dim, with torch's 1e-12 added to each squared magnitude)."""
    margin = kwargs.get("margin", 0.0)
    a, b, y = (wide(t) for t in inputs[:3])
    if a.shape != b.shape or a.numel() == 0:
        return []
    mag = (((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12)).sqrt()
    cos = (a * b).sum(-1) / mag
    if cos.shape != y.shape:
        return []
    return [(torch.where(y == -1, cos - margin, torch.ones_like(cos)), (a * b).abs().sum(-1) / mag + abs(margin))]


def _multi_margin_hinges(inputs, kwargs):
    """multi_margin_loss with p = 1: max(0, margin - x[y] + x[j]) for j != y (p = 2
    squares the hinge: no kink)."""
    if kwargs.get("p", 1) != 1:
        return []
    x, t = wide(inputs[0]), inputs[1].to(torch.int64)
    if x.numel() == 0:
        return []
    if x.dim() == 1:
        x, t = x.unsqueeze(0), t.reshape(1)
    c = x.shape[1]
    margin = kwargs.get("margin", 1.0)
    own = x.gather(1, t.clamp(0, c - 1).unsqueeze(1))
    other = torch.arange(c).unsqueeze(0) != t.unsqueeze(1)
    return [(torch.where(other, margin - own + x, torch.ones_like(x)), abs(margin) + own.abs() + x.abs())]


def _multilabel_hinges(inputs, kwargs):
    """multilabel_margin_loss: max(0, 1 - (x[j] - x[i])) for targets j (up to the first
    -1) and non-targets i."""
    x, t = wide(inputs[0]), inputs[1].to(torch.int64)
    if x.numel() == 0:
        return []
    if x.dim() == 1:
        x, t = x.unsqueeze(0), t.unsqueeze(0)
    out = []
    for row, targets in zip(x, t.tolist()):
        chosen = []
        for c in targets:
            if c < 0:
                break
            chosen.append(c)
        if not chosen:
            continue
        is_target = torch.zeros(row.shape[0], dtype=torch.bool)
        is_target[chosen] = True
        xj, xi = row[is_target].unsqueeze(1), row[~is_target].unsqueeze(0)
        out.append((1 - (xj - xi), 1 + xj.abs() + xi.abs()))
    return out


def _triplet_undefined(inputs, kwargs, rtol=1e-5):
    """triplet_margin_loss: max(0, margin + d(a, p) - d(a, n)) with d(u, v) = |u - v + eps|_p
    over the last dim, and with swap d(a, n) = min(d(a, n), d(p, n)): the hinge at 0, a
    tie of the swap's min, and the kinks of each p-norm."""
    a, pos, neg = (wide(t) for t in inputs[:3])
    if not (a.shape == pos.shape == neg.shape) or a.numel() == 0:
        return None
    rel, tiny = slack(inputs[0])
    p, eps, margin = kwargs.get("p", 2.0), kwargs.get("eps", 1e-6), kwargs.get("margin", 1.0)

    def distance(u, v):
        diff = (u - v + eps).reshape(-1, u.shape[-1]) if u.dim() else (u - v + eps).reshape(1, 1)
        scale = (u.abs() + v.abs() + eps).reshape(diff.shape)
        return torch.linalg.vector_norm(diff, p, dim=-1), vector_norm_reason(diff, p, rel, tiny, zero_scale=scale)

    (d_ap, w_ap), (d_an, w_an) = distance(a, pos), distance(a, neg)
    whys = [w_ap, w_an]
    if kwargs.get("swap", False):
        d_pn, w_pn = distance(pos, neg)
        whys.append(w_pn)
        if bool(near(d_an, d_pn, rel, tiny).any()):
            return "swap: the distances of the negative to the anchor and to the positive tie"
        d_an = torch.minimum(d_an, d_pn)
    for why in whys:
        if why:
            return f"a pairwise distance: {why}"
    if bool(is_zero(margin + d_ap - d_an, rel, tiny, abs(margin) + d_ap + d_an).any()):
        return "margin + d(anchor, positive) - d(anchor, negative) is 0 (the hinge's kink)"
    return None


# -- specs: elementwise and embedding losses ---------------------------------------------

register(
    nn_op("mse_loss", weighted(F.mse_loss), weighted_pairs(F.mse_loss),
          "mean squared error (broadcast targets sometimes), per-element weight optional",
          input_dtypes=(None, None, None), input_values=(None, None, WEIGHTS),
          args=weight_flag(F.mse_loss, reduction_arg())),
    nn_op("l1_loss", weighted(F.l1_loss), weighted_pairs(F.l1_loss),
          "mean absolute error (broadcast targets sometimes), per-element weight optional",
          input_dtypes=(None, None, None), input_values=(None, None, WEIGHTS),
          args=weight_flag(F.l1_loss, reduction_arg()), grad_undefined=equal_operands((0, 1))),
    # (beta > 0 is C1: the quadratic piece meets the linear one with the same slope)
    nn_op("smooth_l1_loss", lambda x, y, **kw: F.smooth_l1_loss(x, y, **kw), pair_shapes(),
          "smooth L1 with beta (beta 0 is plain L1)", input_dtypes=(None, None),
          args=with_reduction(_pick(beta=(1.0, 0.5, 0.0, 2.0))),
          grad_undefined=when(lambda kw: kw.get("beta", 1.0) == 0, equal_operands((0, 1)))),
    nn_op("huber_loss", weighted(F.huber_loss), weighted_pairs(F.huber_loss),
          "Huber loss with delta, per-element weight optional",
          input_dtypes=(None, None, None), input_values=(None, None, WEIGHTS),
          args=weight_flag(F.huber_loss, with_reduction(_pick(delta=(1.0, 0.5, 2.0))))),
    nn_op("soft_margin_loss", lambda x, y, **kw: F.soft_margin_loss(x, y, **kw), same_shapes(2),
          "log(1 + exp(-y x)) with +-1 targets", input_dtypes=(None, None),
          input_values=(None, SIGNS), discrete_inputs=(1,), args=reduction_arg(), grad_inputs=(0,)),
    nn_op("multilabel_soft_margin_loss", _multilabel_soft_margin, _multilabel_soft_margin_shapes,
          "multi-label one-vs-all logistic loss on (N, C), class weight optional",
          input_dtypes=(None, None, None), input_values=(None, BINARY, WEIGHTS),
          args=with_reduction(_pick(use_weight=(False, True)))),
    nn_op("margin_ranking_loss", lambda a, b, y, **kw: F.margin_ranking_loss(a, b, y, **kw),
          pair_shapes(3, same_rank=True), "max(0, -y (a - b) + margin) with +-1 targets",
          input_dtypes=(None, None, None), input_values=(None, None, SIGNS), discrete_inputs=(2,),
          args=with_reduction(_pick(margin=(0.0, 0.5, 1.0, -0.5))),
          grad_undefined=zero_crossings(_ranking_hinge, "-y (a - b) + margin")),
    nn_op("hinge_embedding_loss", lambda x, y, **kw: F.hinge_embedding_loss(x, y, **kw),
          same_shapes(2), "x where y is 1, max(0, margin - x) where y is -1",
          input_dtypes=(None, None), input_values=(None, SIGNS), discrete_inputs=(1,),
          args=with_reduction(_pick(margin=(1.0, 0.5, 2.0, 0.0))),
          grad_undefined=zero_crossings(_embedding_hinge, "margin - x (where y != 1)")),
    nn_op("cosine_embedding_loss", lambda a, b, y, **kw: F.cosine_embedding_loss(a, b, y, **kw),
          _vector_pairs(2, target=True), "cosine similarity loss of (N, D) or (D,) pairs",
          input_dtypes=(None, None, None), input_values=(None, None, SIGNS), discrete_inputs=(2,),
          args=with_reduction(_pick(margin=(0.0, 0.5, -0.5, 1.0))), grad_inputs=(0, 1),
          grad_undefined=zero_crossings(_cosine_hinge, "cos(a, b) - margin (where y == -1)")),
    nn_op("triplet_margin_loss", lambda anchor, pos, neg, **kw: F.triplet_margin_loss(anchor, pos, neg, **kw),
          _vector_pairs(3, target=False), "triplet loss with p-norm distances, swap, eps",
          input_dtypes=(None, None, None),
          args=with_reduction(_pick(margin=(1.0, 0.5, 2.0), p=(2.0, 1.0, 3.0),
                                    eps=(1e-6, 0.0, 1e-3), swap=(False, True))),
          grad_undefined=_triplet_undefined),
    nn_op("poisson_nll_loss", lambda x, y, **kw: F.poisson_nll_loss(x, y, **kw),
          same_shapes(2), "Poisson NLL (log or rate input, Stirling term with full)",
          input_dtypes=(None, None), input_values=(_poisson_input, POSITIVE),
          args=with_reduction(_pick(log_input=(True, False), full=(False, True),
                                    eps=(1e-8, 1e-3))),
          # (full=True adds Stirling's term only where target > 1: it jumps there)
          grad_undefined=when(lambda kw: kw.get("full", False), kinks((1.0,), inputs=(1,)))),
    nn_op("gaussian_nll_loss", lambda x, y, v, **kw: F.gaussian_nll_loss(x, y, v, **kw),
          _gaussian_shapes, "Gaussian NLL with positive variance of full, row or scalar shape",
          input_dtypes=(None, None, None), input_values=(None, None, POSITIVE),
          args=with_reduction(_pick(full=(False, True), eps=(1e-6, 1e-2)))),
    nn_op("kl_div", lambda x, y, **kw: F.kl_div(x, y, **kw), pair_shapes(),
          "KL divergence of log-probabilities (target as probabilities or log_target)",
          input_dtypes=(None, None), input_values=(LOG_PROBS, _kl_target),
          args=with_reduction(_pick(log_target=(False, True)),
                              choices=("mean", "none", "sum", "batchmean"))),
)

# -- specs: binary and multi-class classification ----------------------------------------

register(
    nn_op("binary_cross_entropy", _bce, _bce_shapes(1),
          "BCE of probabilities in (0, 1), broadcast weight optional",
          input_dtypes=(None, None, None), input_values=(OPEN_PROBS, STRICT_PROBS, WEIGHTS),
          args=with_reduction(_pick(use_weight=(False, True))), grad_inputs=(0, 1)),
    nn_op("binary_cross_entropy_with_logits", _bce_logits, _bce_shapes(2),
          "BCE of logits, broadcast weight and pos_weight optional",
          input_dtypes=(None, None, None, None), input_values=(None, PROBS, WEIGHTS, POSITIVE),
          args=with_reduction(_pick(use_weight=(False, True), use_pos_weight=(False, True))),
          grad_inputs=(0, 1)),
    nn_op("nll_loss", _nll, classification_shapes(),
          "NLL of log-probabilities, (N, C[, d...]) or (C,), ignore_index, weight",
          input_dtypes=(None, INDEX, None), input_values=(LOG_PROBS, class_targets(), WEIGHTS),
          args=_nll_args, grad_inputs=(0,),
          # a weight of another float dtype sometimes (half input, float weight: pytorch#144170)
          semantics=frozenset({"accumulates", "mixed_dtypes_sometimes"})),
    nn_op("cross_entropy", _cross_entropy, classification_shapes(),
          "cross entropy with class indices, ignore_index, weight, label smoothing",
          input_dtypes=(None, INDEX, None), input_values=(None, class_targets(), WEIGHTS),
          args=_cross_entropy_args, grad_inputs=(0,)),
    nn_op("cross_entropy_probs", _cross_entropy, classification_shapes(target="probs"),
          "cross entropy with class-probability targets, weight, label smoothing",
          input_dtypes=(None, None, None), input_values=(None, PROBS, WEIGHTS),
          args=_cross_entropy_probs_args, grad_inputs=(0, 1)),
    nn_op("multi_margin_loss", _multi_margin, _multi_margin_shapes,
          "multi-class hinge loss, p 1 or 2, margin, weight",
          input_dtypes=(None, INDEX, None), input_values=(None, class_targets(), WEIGHTS),
          args=with_reduction(_pick(p=(1, 2), margin=(1.0, 0.5, 2.0), use_weight=(False, True))),
          grad_inputs=(0,), grad_undefined=zero_crossings(_multi_margin_hinges, "margin - x[y] + x[j]"),
          semantics=frozenset({"accumulates", "undefined-when-empty"})),
    nn_op("multilabel_margin_loss", lambda x, t, **kw: F.multilabel_margin_loss(x, t, **kw),
          _multilabel_margin_shapes, "multi-label hinge loss, targets end at the first -1",
          input_dtypes=(None, INDEX), input_values=(None, class_targets(low=-1, last_dim=True)),
          args=reduction_arg(), grad_inputs=(0,),
          grad_undefined=zero_crossings(_multilabel_hinges, "1 - (x[target] - x[other])"),
          semantics=frozenset({"accumulates", "undefined-when-empty"})),
)


# -- CTC -------------------------------------------------------------------------------------

def _ctc_shapes(draw, budget: ShapeBudget):
    """log_probs (T, N, C) with targets padded (N, S) or concatenated (total,), or
    unbatched (T, C) with (S,). C >= 2 (class 0 is the blank)."""
    form = draw(st.integers(0, 2))
    t = draw_side(draw, budget, min_side=1)  # empty log_probs are refused
    c = draw(st.integers(2, max(2, budget.max_side)))
    s = draw_side(draw, budget)
    if form == 2:
        return ((t, c), (s,))
    n = draw_side(draw, budget, min_side=1)  # so are empty batches
    lp = fit([t, n, c], budget)
    while lp[2] < 2:  # fit may shrink C: give the sides back from T
        lp = (max(1, lp[0] // 2), lp[1], 2)
    if form == 0:
        return (lp, (lp[1], s))
    return (lp, (draw(st.integers(0, lp[1] * s)),))


def _ctc_args(draw, shapes, dtypes):
    """Valid lengths: input lengths in [0, T] (mostly close to T), target lengths that
    fit the targets (padded: <= S, mostly short enough for a finite loss; concatenated:
    adding up to their length)."""
    lp, tg = shapes
    t = lp[0]
    batched = len(lp) == 3
    n = lp[1] if batched else 1
    input_lengths = []
    for _ in range(n):
        low = 0 if draw(st.integers(0, 4)) == 0 else max(0, t - 2)
        input_lengths.append(draw(st.integers(low, t)))
    target_lengths = []
    if batched and len(tg) == 1:  # concatenated: split the targets between the samples
        left = tg[0]
        for i in range(n):  # they must add up to the targets' length exactly
            target_lengths.append(left if i == n - 1 else draw(st.integers(0, left)))
            left -= target_lengths[-1]
    elif not batched:  # unbatched targets count as concatenated: all of them
        target_lengths.append(tg[0])
    else:
        s = tg[-1]
        for il in input_lengths:
            cap = s if draw(st.integers(0, 4)) == 0 else min(s, max(0, il // 2))
            target_lengths.append(draw(st.integers(0, cap)))
    out = {"input_lengths": tuple(input_lengths), "target_lengths": tuple(target_lengths),
           "lengths_as": draw(st.sampled_from(("tensor", "list"))),
           "reduction": draw(st.sampled_from(REDUCTIONS)),
           "zero_infinity": draw(st.booleans())}
    if lp[-1] >= 3 and draw(st.booleans()):
        # the blank: the first class (the default) or the last; targets take neither
        out["blank"] = draw(st.sampled_from((0, lp[-1] - 1)))
    return out


def _ctc_targets(shapes, kwargs):
    """Target classes in [1, C-1], or [1, C-2] where the blank is the last class (C >= 3
    then): never the blank, and never class 0 (whatever the blank, so a case's targets
    stay valid when the reducer takes its blank away)."""
    c = shapes[0][-1]
    high = c - 2 if kwargs.get("blank", 0) == c - 1 else c - 1
    return {"distribution": "int_range", "low": 1, "high": max(1, high), "allow_specials": False}


def _ctc(log_probs, targets, *, input_lengths, target_lengths, lengths_as="tensor", **kw):
    """CTC of log_softmax(log_probs) (blank 0, or the last class where the case says);
    lengths from the kwargs, as tensors on the input's device or as lists.

    1-D (concatenated) targets are made contiguous: eager CPU (torch 2.13) steps through
    them as if their stride were 1, so a gapped view gives wrong losses and an expanded
    (stride 0) one reads out of bounds and crashes; the reference must not."""
    targets, il, tl = _ctc_inputs(log_probs, targets, input_lengths, target_lengths, lengths_as)
    return F.ctc_loss(log_probs.log_softmax(-1), targets, il, tl, **kw)


@preparation
def _ctc_inputs(log_probs, targets, input_lengths, target_lengths, lengths_as):
    """(targets, input lengths, target lengths) as ``_ctc`` passes them."""
    if targets.dim() == 1:
        targets = targets.contiguous()
    if lengths_as != "tensor":
        return targets, list(input_lengths), list(target_lengths)  # one-element lists when unbatched
    il = torch.tensor(input_lengths, dtype=torch.int64, device=log_probs.device)
    tl = torch.tensor(target_lengths, dtype=torch.int64, device=log_probs.device)
    if log_probs.dim() != 3:
        il, tl = il.reshape(()), tl.reshape(())
    return targets, il, tl


register(
    nn_op("ctc_loss", _ctc, _ctc_shapes,
          "CTC loss of log_softmax'd (T, N, C) or (T, C), padded or concatenated targets",
          input_dtypes=(None, ("int64", "int32")), input_values=(None, _ctc_targets),
          args=_ctc_args, grad_inputs=(0,), rtol_scale=16, atol_scale=16),
)


# -- scaled dot-product attention --------------------------------------------------------------

def _sdpa_shapes(draw, budget: ShapeBudget):
    """q (B..., Hq, L, E), k (B..., Hkv, S, E), v (B..., Hkv, S, Ev) with 1..3 batch dims
    (the last one the heads; Hq a multiple of Hkv for GQA when torch has it) and a mask
    broadcastable to (B..., Hq, L, S)."""
    nb = draw(st.integers(1, max(1, min(3, budget.max_rank - 2))))
    batch = [draw_side(draw, budget) for _ in range(nb)]
    L, S = draw_side(draw, budget), draw_side(draw, budget)
    E = draw_side(draw, budget, min_side=1)
    # Fused attention kernels (CPU flash, CUDA flash/efficient, MPS's fast path) take
    # only value heads as wide as the query's: mostly keep them equal, or cases would
    # almost always fall back to the composite (math) path.
    Ev = E if draw(st.integers(0, 3)) else draw_side(draw, budget, min_side=1)
    heads_kv = batch[-1]
    if HAS_GQA and heads_kv >= 1 and draw(st.integers(0, 3)) == 3:
        batch[-1] = heads_kv * draw(st.integers(2, 3))
    heads_q = batch[-1]
    # the heads stay as drawn (GQA needs the multiple); the other sides shrink to fit
    fitted = list(fit(batch[:-1] + [L, S, E, Ev],
                       ShapeBudget(max_numel=max(1, budget.max_numel // max(1, 2 * heads_q)))))
    outer, (L, S, E, Ev) = fitted[:-4], fitted[-4:]
    q = tuple(outer) + (heads_q, L, E)
    k = tuple(outer) + (heads_kv, S, E)
    v = tuple(outer) + (heads_kv, S, Ev)
    mask = broadcastable_to(draw, tuple(outer) + (heads_q, L, S))
    if len(mask) < 2:  # the mask needs its (L, S) dims, either of them may broadcast
        mask = tuple(1 if draw(st.integers(0, 3)) == 0 else n for n in (L, S))
    return (q, k, v, mask)


def _sdpa_wide_head_shapes(draw, budget: ShapeBudget):
    """q (B, H, L, E) with heads 64, 96 or 128 wide and a short query (L <= 8): the fused
    vector paths (MPS's fast SDPA for q_len <= 8: pytorch#163598 broke it for a
    non-contiguous query) that the budgeted shapes, with sides up to 8, never reach."""
    E = draw(sampled_once((64, 96, 128)))
    B, H = draw(integers_once(1, 2)), draw(integers_once(1, 2))
    L, S = draw(integers_once(1, 8)), draw(integers_once(1, 12))
    mask = (L, S) if draw(integers_once(0, 1)) else (1, S)
    return ((B, H, L, E), (B, H, S, E), (B, H, S, E), mask)


def _sdpa_args(draw, shapes, dtypes):
    q, k = shapes[0], shapes[1]
    out = {"mask": draw(st.sampled_from(("mask", "none", "causal"))),
           "scale": draw(st.sampled_from((None, 0.5, 1.0, 0.125)))}
    if q[-3] != k[-3]:
        out["enable_gqa"] = True
    elif HAS_GQA and draw(st.booleans()):
        # GQA over zero key heads too: torch 2.11 divides by their number, SIGFPE, on
        # CUDA and on eager CPU alike (docs/real-findings.md). The target runs first and dies; triage
        # runs the case on eager CPU alone, and a shared crash is filed as both.
        out["enable_gqa"] = draw(st.booleans())
    return out


def _sdpa(q, k, v, m, *, mask="mask", **kw):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m if mask == "mask" else None,
                                          dropout_p=0.0, is_causal=mask == "causal", **kw)


def _sdpa_grad_terms(inputs, kwargs, upstream):
    """The magnitudes of SDPA's gradient terms (OpSpec.grad_terms), for q, k, v and a
    float mask. With P = softmax(S), S = scale q k^T + mask, and G the upstream gradient,
    the backward computes dP = G v^T, D = rowsum(P * dP), dS = P * (dP - D), then
    dq = scale dS k, dk = scale dS^T q, dv = P^T G and dmask = dS. Where the softmax
    saturates (a key of 2^31 or 6e28 in a row: P one-hot), dP - D cancels exactly in
    float64 and to a few roundoffs of |G| |v| elsewhere, which k then multiplies: an H200's
    float64 dq was 6e-6 off where the terms were 2e10 (roundoff 2e-6), its bfloat16 dq
    2e21 where they were 5e29. Measured here with |dP| + |D| for dP - D."""
    q, k, v, m = inputs
    mask = kwargs.get("mask", "mask")
    scale = kwargs.get("scale") or 1.0 / math.sqrt(max(1, q.shape[-1]))
    group = 1
    if kwargs.get("enable_gqa") and min(q.dim(), k.dim(), v.dim()) >= 3 and k.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
    kk = k.repeat_interleave(group, dim=-3) if group > 1 else k
    vv = v.repeat_interleave(group, dim=-3) if group > 1 else v
    s = scale * (q @ kk.transpose(-2, -1))            # the batch dims broadcast
    if mask == "mask" and m is not None:
        s = s.masked_fill(~m, -math.inf) if m.dtype == torch.bool else s + m
    elif mask == "causal":
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)          # a fully masked row has no terms
    g = upstream.abs()
    dp = g @ vv.abs().transpose(-2, -1)
    ds = p * (dp + (p * dp).sum(-1, keepdim=True))
    dq = scale * (ds @ kk.abs())
    dk = scale * (ds.transpose(-2, -1) @ q.abs())
    dv = p.transpose(-2, -1) @ g
    if group > 1:
        dk = dk.unflatten(-3, (k.shape[-3], group)).sum(-3)
        dv = dv.unflatten(-3, (v.shape[-3], group)).sum(-3)
    dq, dk, dv = dq.sum_to_size(q.shape), dk.sum_to_size(k.shape), dv.sum_to_size(v.shape)
    dm = ds.sum_to_size(m.shape) if mask == "mask" and m is not None and m.is_floating_point() else None
    return [dq, dk, dv, dm]


register(
    nn_op("scaled_dot_product_attention", _sdpa, _sdpa_shapes,
          "SDPA with a float additive mask, causal or no mask, scale, GQA, 3-D..5-D",
          input_dtypes=(None, None, None, None), args=_sdpa_args, grad_inputs=(0, 1, 2, 3),
          rtol_scale=16, atol_scale=16, autocast=True, grad_terms=_sdpa_grad_terms),
    nn_op("scaled_dot_product_attention_wide_heads", _sdpa, _sdpa_wide_head_shapes,
          "SDPA with heads of 64-128 and a query of 1-8 rows (the fused vector paths), any layout",
          input_dtypes=(None, None, None, None), args=_sdpa_args, grad_inputs=(0, 1, 2, 3),
          rtol_scale=16, atol_scale=16, autocast=True, grad_terms=_sdpa_grad_terms),
    nn_op("scaled_dot_product_attention_boolmask", _sdpa, _sdpa_shapes,
          "SDPA with a broadcast boolean mask (fully masked rows kept), causal, GQA",
          input_dtypes=(None, None, None, ("bool",)), input_values=(None, None, None, "bool"),
          args=_sdpa_args, grad_inputs=(0, 1, 2), rtol_scale=16, atol_scale=16, grad_terms=_sdpa_grad_terms),
)



# -- flex attention ---------------------------------------------------------------------------
# torch.nn.attention.flex_attention (pytorch/pytorch#190857: its compiled backward wrong
# once a K/V address passes INT32_MAX). Eager CPU runs a dense math path (a warning says
# so); on the compiled targets the call reaches the fused kernel. The score_mod and the
# block mask are chosen by name from small tables, so that a case stores a string and a
# repro script copies the functions.

def _flex_available() -> bool:
    """Whether this torch has flex_attention with block masks, and Dynamo, which its eager
    path needs (it compiles the call with the eager backend: "flex_attention requires
    dynamo support"). torch 2.6 has the API used here (score_mod, block_mask, scale,
    enable_gqa; create_block_mask with an explicit device)."""
    try:
        import torch.nn.attention.flex_attention as flex
        import torch._dynamo
    except ImportError:
        return False
    return (all(hasattr(flex, name) for name in ("flex_attention", "create_block_mask"))
            and torch._dynamo.is_dynamo_supported())


HAS_FLEX = _flex_available()
# The fused Triton kernel takes head dims of at least 16 ("NYI: embedding dimension of the
# query, key, and value must be at least 16"; tl.dot's smallest tile); torch 2.13 pads
# other sizes to a power of two, older releases refused them: powers of two only.
FLEX_HEAD_DIMS = (16, 32, 64)
# Sequence lengths around the kernels' tiles (16..128 rows) and small ones.
FLEX_LENGTHS = (15, 16, 17, 31, 32, 33, 47, 63, 64)
FLEX_SCORE_MODS = ("none", "relative_bias", "soft_cap", "alibi")
FLEX_MASKS = ("none", "causal", "sliding_window", "strict_causal", "documents")
SOFT_CAP = 2.0          # scores ~ N(0, 1) at the default scale: tanh bends them
SLIDING_WINDOW = 8
DOCUMENT_LENGTH = 16


def flex_identity(score, b, h, q_idx, kv_idx):
    return score


def flex_relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx)


def flex_soft_cap(score, b, h, q_idx, kv_idx):
    return SOFT_CAP * torch.tanh(score / SOFT_CAP)


def flex_alibi(score, b, h, q_idx, kv_idx):
    """ALiBi: a distance penalty whose slope grows with the query head (so GQA's head
    mapping matters)."""
    return score - (h + 1) * (q_idx - kv_idx).abs() / 8


def flex_score_mod(name: str):
    """The score_mod function named ``name`` (None: no score_mod)."""
    if name == "relative_bias":
        return flex_relative_bias
    if name == "soft_cap":
        return flex_soft_cap
    if name == "alibi":
        return flex_alibi
    return None


def flex_everything(b, h, q_idx, kv_idx):
    return q_idx >= 0


def flex_causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def flex_sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx <= SLIDING_WINDOW)


def flex_strict_causal(b, h, q_idx, kv_idx):
    """Row 0 attends to nothing: a fully masked row, whose output flex_attention makes 0."""
    return q_idx > kv_idx


def flex_documents(b, h, q_idx, kv_idx):
    return q_idx // DOCUMENT_LENGTH == kv_idx // DOCUMENT_LENGTH


def flex_mask_mod(name: str):
    """The mask_mod named ``name`` (None: no block mask)."""
    if name == "causal":
        return flex_causal
    if name == "sliding_window":
        return flex_sliding_window
    if name == "strict_causal":
        return flex_strict_causal
    if name == "documents":
        return flex_documents
    return None


@preparation
def flex_block_mask(mask: str, q, k, *, always: bool = False):
    """The BlockMask of the mask named ``mask`` for q's and k's lengths on their device
    (None for no mask, or with ``always`` one that masks nothing), made eagerly, as a user
    makes it outside the compiled call. Imports flex_attention's module, which ``import
    torch`` does not."""
    import torch.nn.attention.flex_attention
    mod = flex_mask_mod(mask) or (flex_everything if always else None)
    if mod is None:
        return None
    return torch.nn.attention.flex_attention.create_block_mask(mod, None, None, q.shape[-2], k.shape[-2],
                                                               device=q.device)


def _flex_attention(q, k, v, *, score_mod="none", mask="none", scale=None, enable_gqa=False):
    block_mask = flex_block_mask(mask, q, k)
    return torch.nn.attention.flex_attention.flex_attention(q, k, v, score_mod=flex_score_mod(score_mod),
                                                            block_mask=block_mask, scale=scale, enable_gqa=enable_gqa)


def flex_checks(q, k, v, enable_gqa: bool) -> None:
    """The public call's checks of what a case can get wrong (torch 2.13's messages): three
    4-D tensors of one dtype and batch, q and k of one head dim, heads GQA can map."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError("Expected query, key, and value to have the same dtype")
    if q.size(-1) != k.size(-1):
        raise ValueError("Expect query and key/value to have the same embedding dimension")
    if not enable_gqa and q.size(-3) != k.size(-3):
        raise ValueError("Expect query and key/value to have the same number of heads")
    if enable_gqa and q.size(1) % k.size(1) != 0:   # (no kv heads: ZeroDivisionError, as there)
        raise ValueError("Expect number of query heads to be a multiple of kv heads for GQA")
    if q.size(0) != k.size(0):
        raise ValueError("Expect query and key/value to have the same batch size")


def _flex_attention_cpu(q, k, v, *, score_mod="none", mask="none", scale=None, enable_gqa=False):
    """Eager CPU's flex_attention, the reference. Its public call refuses a backward on
    CPU ("FlexAttention does not support backward on CPU", torch 2.13); for the grad
    variant the same dense math path is taken through the higher-order op, which has
    autograd on every device, after the public call's checks."""
    if not (q.requires_grad or k.requires_grad or v.requires_grad):
        return _flex_attention(q, k, v, score_mod=score_mod, mask=mask, scale=scale, enable_gqa=enable_gqa)
    flex_checks(q, k, v, enable_gqa)
    block_mask = flex_block_mask(mask, q, k, always=True)
    return torch._higher_order_ops.flex_attention(
        q, k, v, flex_score_mod(score_mod) or flex_identity, block_mask.as_tuple(),
        q.shape[-1] ** -0.5 if scale is None else scale, {})[0]


def flex_scores_undetermined(inputs, kwargs, rtol=1e-5):
    """No gradient verdict where the attention scores are too large for their dtype to
    round to within 1: a score s = scale * q.k is rounded in the inputs' dtype (the dense
    path multiplies in it, a fused kernel at best in float32), so where |scale| sum |q||k|
    times that dtype's roundoff reaches 1, exp(s - logsumexp) is not determined to within
    a factor e, and the backward, which recomputes the scores and subtracts the forward's
    log-sum-exp, can overflow where another order of evaluation gives 0 (inputs holding
    2^24 + 1 in float32). The tanh soft-cap bounds the scores and damps their rounding:
    not there."""
    q, k = inputs[0], inputs[1]
    if kwargs.get("score_mod") == "soft_cap" or q.numel() == 0 or k.numel() == 0 or q.dim() != 4:
        return None
    group = q.shape[1] // k.shape[1] if k.shape[1] and q.shape[1] % k.shape[1] == 0 else 1
    qa = q.detach().to(torch.float64).abs()
    ka = k.detach().to(torch.float64).abs().repeat_interleave(group, dim=1)
    scale = kwargs.get("scale")
    scale = abs(scale) if scale is not None else q.shape[-1] ** -0.5
    if qa.shape[:2] != ka.shape[:2] or qa.shape[-1] != ka.shape[-1]:
        return None
    bound = float((qa @ ka.transpose(-1, -2)).amax()) * scale
    roundoff = torch.finfo(q.dtype).eps if q.dtype.is_floating_point else 0.0
    if bound * roundoff >= 1:
        return (f"attention scores up to {bound:.3g} in magnitude: their rounding in {str(q.dtype)[6:]} "
                f"exceeds 1, so the probabilities the backward recomputes are not determined")
    return None


def _flex_shapes(draw, budget: ShapeBudget):
    """q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev): Hq a multiple of Hkv in a
    third of the cases (GQA), L and S small or around the kernels' tiles (up to 64), E and
    Ev from FLEX_HEAD_DIMS (Ev mostly E's). Each tensor within 8x the element budget."""
    b = draw(integers_once(1, 2))
    heads_kv = draw(integers_once(1, 3))
    group = draw(sampled_once((1, 1, 1, 1, 2, 2, 3, 4)))
    e = draw(sampled_once(FLEX_HEAD_DIMS))
    ev = e if draw(integers_once(0, 3)) else draw(sampled_once(FLEX_HEAD_DIMS))
    lengths = []
    for _ in range(2):
        lengths.append(draw(integers_once(1, 8)) if draw(integers_once(0, 2)) == 0
                       else draw(sampled_once(FLEX_LENGTHS)))
    length, source = lengths
    limit = 8 * budget.max_numel
    while b * heads_kv * group * max(length, source) * max(e, ev) > limit and max(length, source) > 1:
        length, source = max(1, length // 2), max(1, source // 2)
    heads_q = heads_kv * group
    return ((b, heads_q, length, e), (b, heads_kv, source, e), (b, heads_kv, source, ev))


def _flex_args(draw, shapes, dtypes):
    out = {"score_mod": draw(sampled_once(FLEX_SCORE_MODS)), "mask": draw(sampled_once(FLEX_MASKS)),
           "scale": draw(sampled_once((None, None, 0.5, 0.125)))}
    if shapes[0][1] != shapes[1][1] or draw(st.booleans()):
        out["enable_gqa"] = True
    return out


FLEX_ATTENTION = nn_op(
    "flex_attention", _flex_attention, _flex_shapes,
    "flex_attention with a named score_mod (relative bias, tanh soft-cap, ALiBi) and block mask "
    "(causal, sliding window, a fully masked row, documents), scale, GQA; compiled: the fused kernel",
    dtypes=("float16", "bfloat16", "float32"), input_dtypes=(None, None, None), args=_flex_args,
    reference_fn=_flex_attention_cpu, allow_nonfinite=False, rtol_scale=16, atol_scale=16,
    semantics=frozenset({"accumulates"}), grad_undefined=flex_scores_undetermined)


# -- flex attention past 2^31 K/V elements (flex_attention@huge) ------------------------------
# pytorch/pytorch#190857: CUDA (Inductor) flex_attention's backward kernel computes a K/V
# element's offset from its (batch, head) base, key * stride along the keys + column, in
# 32 bits; with K and V stored sequence-major ([KV_LEN, B, D] viewed as [B, 1, KV_LEN, D]:
# the stride along the keys is B * H * D), the last keys' offsets pass INT32_MAX once K
# holds about 2^31 elements (B = 700, KV_LEN = 24,000, D = 128 there), and the backward
# reads the wrong memory. The class: K and V past 2^31 and 2^32 elements along the batch,
# sequence-major in five sixths of the cases, the last key's offset (keys - 1) * B * H * D
# just below, at and past the boundary; a few queries (so that the scores, the output
# and q's gradient stay small) and no mask or position-dependent score_mod (a causal mask
# or a bias growing with the distance leaves the far keys out or weighs them ~0, which
# would hide a wrong read there).
#
# Row b of the output and of each gradient (dQ, dK, dV) depends on batch b of q, k, v
# and of the upstream gradient alone, so the @huge class's row judging applies exactly:
# the boundary batches' rows, made from the hash on the host, give the reference (eager
# CPU's dense path), whole, in float64 for the arbiter; no sample is approximate. A batch
# holds at most FLEX_HUGE_ROW elements of K (the host's reference: ~18 judged batches of
# up to 2^22 elements, a few GB in float64 with the gradients), and there are at most
# FLEX_GRID_BATCHES batches: the compiled backward's grid puts the batch on its y
# dimension, which CUDA limits to 65,535 (a batch past it fails to launch, whatever the
# offsets: another limit, not this class).
#
# Two regimes reach the boundary: long sequences over few batches (pytorch#190857's 700
# batches of 24,000 keys: the upstream trigger, where a key's own offset is large) and
# short ones over many batches (thousands of 1,024 keys: the batch's base offset is
# large, where Inductor's flex template has its own 32-bit index paths). Keys are drawn
# from both lists, so that each regime gets about half of the cases where the size allows.

# float32 first: the float64 arbiter allows a half-precision gradient over thousands of
# keys an error of several times its largest element (half-precision accumulation of that
# many terms), so only float32 gradients are judged to within a wrong read; the half
# dtypes (the upstream report's bfloat16) are drawn too: a read out of bounds crashes in
# any dtype (pytorch#190857's symptom), which the errors oracle reports.
FLEX_HUGE_DTYPES = ("float32", "bfloat16", "float16")
# Device memory per element of K (V as large), float32: K and V (4 + 4 bytes), their
# gradients (4 + 4), the dense path's repeated K and V (eager CUDA; 4 + 4), and 16 to
# spare; and per score (B Hq L S of them: L Hq / (E Hkv) an element of K), the dense
# path's float32 scores, their softmax and gradients (4 x 4). Measured on an H200 (torch
# 2.11), peaks per element of K: eager CUDA's forward 17 (one query), compiled forward and
# backward 9 (half precision, 128 queries). 140 GB holds 2^31 and a few batches more, not
# 2^32; 128 GB (56 bytes, the flex-attention forward's) just 2^31.
FLEX_HUGE_BYTES_PER_ELEMENT = 40
FLEX_HUGE_BYTES_PER_SCORE = 16
FLEX_HUGE_ROW = 1 << 22
FLEX_GRID_BATCHES = 65535
# Inductor compiles flex_attention with fewer than 128 queries to its flex-decoding
# kernel, with 128 or more to its flex-attention kernel, whose backward pytorch#190857's
# report hit (128 queries, head dim 128): half the cases take each forward. The decoding
# cases draw head dims (16 first: where shrinking goes), and queries whose query heads'
# rows stay within half the head dim and a quarter of the keys (scores within half of
# K's size); the attention cases have the report's 128 queries over head dim 128 and no
# GQA group (scores as many as K's elements). Keys per (batch, head): below.
FLEX_HUGE_HEAD_DIMS = (16, 64, 128, 32)
FLEX_HUGE_QUERIES = (1, 8, 16, 3)
FLEX_ATTENTION_QUERIES = 128
FLEX_ATTENTION_HEAD_DIM = 128
FLEX_HUGE_KEYS = (1024, 128, 2048, 4096, 8192, 16384, 1000, 513)
FLEX_HUGE_LONG_KEYS = (24000, 32768, 65536, 131072, 262144, 40000, 12000)
SEQUENCE_MAJOR = (1, 2, 0, 3)       # a (keys, batch, heads, dim) storage viewed as (batch, heads, keys, dim)


def _flex_huge_keys(draw, target: int, per_key: int, min_keys: int) -> int:
    """Keys per (batch, head): short (FLEX_HUGE_KEYS) or long (FLEX_HUGE_LONG_KEYS), each
    list drawn half the time where it has a length that fits: at least ``min_keys``, a
    batch of K within FLEX_HUGE_ROW elements and an eighth of ``target`` (so that even at
    CI's size the boundary needs several batches, drawn one below to two past it), and
    the batch count that puts the last key's sequence-major offset at ``target`` within
    FLEX_GRID_BATCHES; else the fewest keys that keep the batch count there."""
    row = min(FLEX_HUGE_ROW, target // 8)

    def fitting(keys):
        return tuple(s for s in keys if s >= min_keys and per_key * s <= row
                     and target // (per_key * (s - 1)) + 2 <= FLEX_GRID_BATCHES)
    short, long = fitting(FLEX_HUGE_KEYS), fitting(FLEX_HUGE_LONG_KEYS)
    if short and long:
        return draw(sampled_once(long if draw(st.booleans()) else short))
    fits = short or long
    return draw(sampled_once(fits)) if fits else max(min_keys, target // (per_key * (FLEX_GRID_BATCHES - 2)) + 2)


def flex_huge_shapes(draw, budget: ShapeBudget) -> tuple:
    """q (B, Hq, L, E), k and v (B, Hkv, S, E): the last key's sequence-major offset
    (S - 1) * B * Hkv * E just below, at or past 2^31 or 2^32 (B drawn one below to two
    past the batch count that reaches it), so K and V hold that many elements and a few
    batches more, where --max-bytes allows FLEX_HUGE_BYTES_PER_ELEMENT an element and
    FLEX_HUGE_BYTES_PER_SCORE a score; else around MAX_ELEMENTS (CI's size: more than any
    @large case holds, the 2^31 that the fault target scales, so that CI draws both sides
    of the boundary too); L a few queries (flex-decoding) or 128 (flex-attention), Hq =
    Hkv or twice it (GQA, decoding)."""
    attention = draw(st.booleans())
    e = FLEX_ATTENTION_HEAD_DIM if attention else draw(sampled_once(FLEX_HUGE_HEAD_DIMS))
    heads_kv = draw(sampled_once((1, 2, 4)))
    group = 1 if attention else draw(sampled_once((1, 1, 2)))
    scores_per_element = FLEX_ATTENTION_QUERIES / e if attention else 0.5
    limit = max(1, int(max_bytes() // (FLEX_HUGE_BYTES_PER_ELEMENT + FLEX_HUGE_BYTES_PER_SCORE * scores_per_element)))
    targets = tuple(t for t in BOUNDARIES if t + 4 * FLEX_HUGE_ROW <= limit) or (min(MAX_ELEMENTS, limit),)
    target = draw(sampled_once(targets))
    per_key = heads_kv * e
    if attention:
        source = _flex_huge_keys(draw, target, per_key, 4 * FLEX_ATTENTION_QUERIES)
        length = FLEX_ATTENTION_QUERIES
    else:
        source = _flex_huge_keys(draw, target, per_key, 1)
        length = draw(sampled_once(tuple(n for n in FLEX_HUGE_QUERIES
                                         if 2 * n * group <= e and 4 * n * group <= source) or (1,)))
    batch = max(1, target // (per_key * (source - 1)) + draw(integers_once(-1, 2)))
    return ((batch, heads_kv * group, length, e), (batch, heads_kv, source, e), (batch, heads_kv, source, e))


def flex_huge_layouts(choose, shapes, kwargs) -> dict:
    """K, V or both stored sequence-major (pytorch#190857's storage: both) in five sixths
    of the cases, K alone first (where shrinking goes after the generic layouts); else
    the generic draw's layouts."""
    which = choose.integer(0, 5)
    seq_major = Layout(permutation=SEQUENCE_MAJOR)
    return {i: seq_major for i in ((), (1,), (2,), (1, 2), (1, 2), (1, 2))[which]}


def flex_huge_args(draw, shapes, dtypes) -> dict:
    """No block mask; no score_mod or the tanh soft-cap (a bias by distance would weigh
    the far keys ~0); the default scale or 1/8 (scores within what the half dtypes
    determine, _flex_huge_scores_values); GQA where the heads differ."""
    out = {"score_mod": draw(sampled_once(("none", "soft_cap"))),
           "scale": draw(sampled_once((None, None, 0.125)))}
    if shapes[0][1] != shapes[1][1]:
        out["enable_gqa"] = True
    return out


def _flex_huge_scores_values(shapes, kwargs) -> dict:
    """q and k: -2..2 from the hash. The scores, at most 4 E scale in magnitude, stay
    determined in the half dtypes (flex_scores_undetermined: under 128 in bfloat16 with
    the scales drawn), and spread by about 2 at the default scale: over thousands of keys
    the softmax weighs each far key unevenly, so a key read wrong moves the gradients of
    its row by more than their tolerance. (v: quarters in [-30, 30], the unbounded hash.)"""
    return {"distribution": "index_hash", "low": -2, "high": 2}


def _flex_huge() -> OpSpec:
    """flex_attention@huge: the @huge class of the batch (K first: its boundaries are
    the judged batches), with its own sizes, layouts, arguments and values."""
    spec = huge_variant(replace(FLEX_ATTENTION, dtypes=FLEX_HUGE_DTYPES,
                                grows=(grows("batch", (1, 0), (2, 0), (0, 0), sliced=True),)))
    return replace(spec, dtypes=FLEX_HUGE_DTYPES, shapes=flex_huge_shapes, args=flex_huge_args,
                   input_layouts=flex_huge_layouts,
                   input_values=(_flex_huge_scores_values, _flex_huge_scores_values, "index_hash"),
                   reference_fn=_flex_attention_cpu,
                   doc="flex_attention with K and V past 2^31 elements (2^32 where --max-bytes allows), stored "
                       "sequence-major (the last key's offset past 2^31) or not, a few queries, no mask; the grad "
                       "variant: dQ, dK and dV (compared on the boundary batches)")


if HAS_FLEX:
    register(FLEX_ATTENTION, _flex_huge())

# -- recurrent cells and layers -------------------------------------------------------------

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _cell_shapes(kind: str):
    """input (N, I), hx (N, H) [, cx (N, H)], w_ih (G H, I), w_hh (G H, H), b_ih, b_hh."""
    g = GATES[kind]

    def build(draw, budget: ShapeBudget):
        side = ShapeBudget(max_side=min(budget.max_side, 8), allow_empty=budget.allow_empty)
        n, i = draw_side(draw, side), draw_side(draw, side)
        h = draw_side(draw, side, min_side=1)
        states = ((n, h), (n, h)) if kind == "lstm" else ((n, h),)
        return ((n, i),) + states + ((g * h, i), (g * h, h), (g * h,), (g * h,))
    return build


def _cell(kind: str):
    if kind == "lstm":
        def fn(x, hx, cx, w_ih, w_hh, b_ih, b_hh, *, bias=True):
            return torch.lstm_cell(x, (hx, cx), w_ih, w_hh, b_ih if bias else None, b_hh if bias else None)
        return fn
    cell = getattr(torch, f"{kind}_cell")

    def fn(x, hx, w_ih, w_hh, b_ih, b_hh, *, bias=True):
        return cell(x, hx, w_ih, w_hh, b_ih if bias else None, b_hh if bias else None)
    return fn


def _rnn_per_direction(gates: int, inputs: int, hidden: int) -> int:
    """Parameters of one layer and direction: w_ih, w_hh, b_ih, b_hh."""
    return gates * hidden * (inputs + hidden + 2)


def _rnn_layer_shapes(kind: str):
    """x (T, N, I) or (N, T, I), h0 (1, N, H) [, c0], w_ih (G H, I), w_hh (G H, H),
    b_ih (G H,), b_hh (G H,)."""
    g = GATES[kind]

    def build(draw, budget: ShapeBudget):
        side = ShapeBudget(max_side=min(budget.max_side, 6), allow_empty=budget.allow_empty)
        t, n = draw_side(draw, side, min_side=1), draw_side(draw, side)
        i, h = draw_side(draw, side), draw_side(draw, side, min_side=1)
        x = (n, t, i) if draw(st.booleans()) else (t, n, i)
        states = ((1, n, h), (1, n, h)) if kind == "lstm" else ((1, n, h),)
        return (x,) + states + ((g * h, i), (g * h, h), (g * h,), (g * h,))
    return build


def rnn_batch_mismatch(x, hx, batch_first: bool, layers_dirs: int) -> str | None:
    """Why ``hx`` does not fit ``x`` as torch's RNNs document them (x (T, N, I), or
    (N, T, I) batch first; every state (L*D, N, H)), or None. Eager CPU broadcasts a
    state of another batch silently, so a reduction shrinking x's batch alone kept CUDA's
    "rnn: hx is not contiguous" on a call outside the op's contract (issue 37, H200: six
    gru/lstm findings of it)."""
    states = hx if isinstance(hx, tuple) else (hx,)
    if x.dim() != 3 or any(h.dim() != 3 for h in states):
        return "x and every state must be 3-D"
    batch = x.shape[0] if batch_first else x.shape[1]
    if any(h.shape[0] != layers_dirs or h.shape[1] != batch for h in states):
        return f"every state must be ({layers_dirs}, {batch}, H) for this x"
    return None


def _gru_layer(x, h0, w_ih, w_hh, b_ih, b_hh, *, batch_first=False, has_biases=True, train=False):
    # torch.gru's documented shapes: eager CPU broadcasts others silently (the reducer
    # would otherwise wander outside the op's contract), so the wrapper refuses them.
    gh, h = 3 * h0.shape[-1], h0.shape[-1]
    if (x.dim() != 3 or h0.dim() != 3 or w_ih.shape != (gh, x.shape[-1]) or w_hh.shape != (gh, h)
            or has_biases and (b_ih.shape != (gh,) or b_hh.shape != (gh,))
            or rnn_batch_mismatch(x, h0, batch_first, 1)):
        raise ValueError("gru: expected x and h0 3-D of one batch, w_ih (3H, I), w_hh (3H, H), biases (3H,)")
    return torch.gru(x, h0, [w_ih, w_hh, b_ih, b_hh] if has_biases else [w_ih, w_hh], has_biases, 1, 0.0,
                     train, False, batch_first)


def _lstm_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, *, batch_first=False, has_biases=True, train=False):
    # torch.lstm's documented shapes (see _gru_layer)
    gh, h = 4 * h0.shape[-1], h0.shape[-1]
    if (x.dim() != 3 or h0.dim() != 3 or c0.shape != h0.shape or w_ih.shape != (gh, x.shape[-1])
            or w_hh.shape != (gh, h) or has_biases and (b_ih.shape != (gh,) or b_hh.shape != (gh,))
            or rnn_batch_mismatch(x, (h0, c0), batch_first, 1)):
        raise ValueError("lstm: expected x, h0, c0 3-D of one batch, w_ih (4H, I), w_hh (4H, H), biases (4H,)")
    return torch.lstm(x, (h0, c0), [w_ih, w_hh, b_ih, b_hh] if has_biases else [w_ih, w_hh], has_biases, 1, 0.0,
                      train, False, batch_first)


def _rnn_shapes(kind: str):
    """x (T, N, I) or (N, T, I), h0 (L D, N, H) [, c0], params (L, D, K) holding each
    layer's and direction's flat weights (K fits the largest)."""
    g = GATES[kind]

    def build(draw, budget: ShapeBudget):
        side = ShapeBudget(max_side=min(budget.max_side, 6), allow_empty=budget.allow_empty)
        t, n = draw_side(draw, side, min_side=1), draw_side(draw, side)
        i, h = draw_side(draw, side), draw_side(draw, side, min_side=1)
        layers, dirs = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        k = _rnn_per_direction(g, max(i, dirs * h if layers > 1 else 0), h)
        x = (n, t, i) if draw(st.booleans()) else (t, n, i)
        state = (layers * dirs, n, h)
        states = (state, state) if kind == "lstm" else (state,)
        return (x,) + states + ((layers, dirs, k),)
    return build


def _rnn_args(draw, shapes, dtypes):
    x, h0 = shapes[0], shapes[1]
    n = h0[1]
    options = [bf for bf, batch in ((False, x[1]), (True, x[0])) if batch == n]
    out = {"batch_first": draw(st.sampled_from(options)), "has_biases": draw(st.booleans())}
    if draw(st.integers(0, 2)) == 2:
        # training mode without dropout: the same result, another path (cuDNN keeps
        # what backward needs)
        out["train"] = True
    return out


@preparation
def _flat_weights(params, gates: int, inputs: int, hidden: int, has_biases: bool) -> list:
    layers, dirs = params.shape[0], params.shape[1]
    gh = gates * hidden
    out = []
    for layer in range(layers):
        size_in = inputs if layer == 0 else dirs * hidden
        for d in range(dirs):
            flat = params[layer, d]
            w_ih = flat[:gh * size_in].reshape(gh, size_in)
            at = gh * size_in
            w_hh = flat[at:at + gh * hidden].reshape(gh, hidden)
            at += gh * hidden
            out += [w_ih, w_hh]
            if has_biases:
                out += [flat[at:at + gh], flat[at + gh:at + 2 * gh]]
    # Each weight in a storage of its own (see the module docstring).
    return [w.clone(memory_format=torch.contiguous_format) for w in out]


def _rnn(kind: str):
    g = GATES[kind]
    layer = getattr(torch, kind)

    def run(x, hx, params, batch_first, has_biases, train):
        if params.dim() != 3:
            raise ValueError(f"{kind}: params must be (layers, directions, K)")
        wrong = rnn_batch_mismatch(x, hx, batch_first, params.shape[0] * params.shape[1])
        if wrong:
            raise ValueError(f"{kind}: {wrong}")
        hidden = (hx[0] if isinstance(hx, tuple) else hx).shape[-1]
        weights = _flat_weights(params, g, x.shape[-1], hidden, has_biases)
        return layer(x, hx, weights, has_biases, params.shape[0], 0.0, train,
                     params.shape[1] == 2, batch_first)

    if kind == "lstm":
        def fn(x, h0, c0, params, *, batch_first=False, has_biases=True, train=False):
            return run(x, (h0, c0), params, batch_first, has_biases, train)
        return fn

    def fn(x, h0, params, *, batch_first=False, has_biases=True, train=False):
        return run(x, h0, params, batch_first, has_biases, train)
    return fn


def _bias_arg(draw, shapes, dtypes):
    return {"bias": draw(st.sampled_from((True, False)))}


RNN_KW = dict(rtol_scale=16, atol_scale=16, semantics=frozenset({"accumulates", "structural-later-sizes"}))


def _relu_preactivation(inputs, kwargs):
    """rnn_relu_cell: relu(x W_ih^T + b_ih + h W_hh^T + b_hh)."""
    x, hx, w_ih, w_hh, b_ih, b_hh = (wide(t) for t in inputs[:6])
    pre = x @ w_ih.T + hx @ w_hh.T
    scale = x.abs() @ w_ih.abs().T + hx.abs() @ w_hh.abs().T
    if kwargs.get("bias", True):
        pre, scale = pre + b_ih + b_hh, scale + b_ih.abs() + b_hh.abs()
    return [(pre, scale)]

register(
    nn_op("lstm_cell", _cell("lstm"), _cell_shapes("lstm"), "one LSTM step (hy, cy), bias optional",
          input_dtypes=(None,) * 7, args=_bias_arg, **RNN_KW),
    nn_op("gru_cell", _cell("gru"), _cell_shapes("gru"), "one GRU step, bias optional",
          input_dtypes=(None,) * 6, args=_bias_arg, **RNN_KW),
    nn_op("rnn_tanh_cell", _cell("rnn_tanh"), _cell_shapes("rnn_tanh"), "one tanh RNN step",
          input_dtypes=(None,) * 6, args=_bias_arg, **RNN_KW),
    nn_op("rnn_relu_cell", _cell("rnn_relu"), _cell_shapes("rnn_relu"), "one ReLU RNN step",
          input_dtypes=(None,) * 6, args=_bias_arg,
          grad_undefined=zero_crossings(_relu_preactivation, "the ReLU's pre-activation"), **RNN_KW),
    nn_op("lstm", _lstm_layer, _rnn_layer_shapes("lstm"),
          "torch.lstm, one layer, batch_first, biases optional, each weight an input",
          input_dtypes=(None,) * 7, args=_rnn_args, **RNN_KW),
    nn_op("gru", _gru_layer, _rnn_layer_shapes("gru"),
          "torch.gru, one layer, batch_first, biases optional, each weight an input",
          input_dtypes=(None,) * 6, args=_rnn_args, **RNN_KW),
    nn_op("lstm_stacked", _rnn("lstm"), _rnn_shapes("lstm"),
          "torch.lstm, 1-2 layers, bidirectional, batch_first, weights sliced from one input",
          input_dtypes=(None,) * 4, args=_rnn_args, **RNN_KW),
    nn_op("gru_stacked", _rnn("gru"), _rnn_shapes("gru"),
          "torch.gru, 1-2 layers, bidirectional, batch_first, weights sliced from one input",
          input_dtypes=(None,) * 3, args=_rnn_args, **RNN_KW),
)

# Dims that may grow past 65,536 (the large size class, generation/large_sizes.py).
declare_grows({
    # (the @huge class: losses per element, past 2^31 elements of input: pytorch#190139,
    # nll_loss's backward of a 4-D input)
    "cross_entropy": (grows("batch", (0, 0), (1, 0), min_rank=2, sliced=True, rows_args=without_reduction),
                      grows("channels", (0, 1), (2, 0))),
    "nll_loss": (grows("batch", (0, 0), (1, 0), min_rank=2, sliced=True, rows_args=without_reduction),
                 grows("channels", (0, 1), (2, 0))),
    # (trailing dims: the target broadcasts, and its dim 0 may be the input's last)
    "mse_loss": (grows("length", (0, -1), (1, -1), (2, -1)), grows("rows", (0, -2), (1, -2), (2, -2))),
    # (the mask, input 3, broadcasts to (..., L, S): its L and S grow with the query's and
    # the keys'; a batch dim is left alone, the mask's rank may not reach it)
    "scaled_dot_product_attention": (grows("length", (1, -2), (2, -2), (3, -1)), grows("rows", (0, -2), (3, -2))),
})
