"""The loss, attention and RNN half of the nn family (ops/nn_losses.py): its builders
produce valid calls (targets in range, lengths that fit, GQA head counts that divide),
and the RNN wrappers pass weights the way torch.nn's modules hold them."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings

from mpsfuzz.generation import catalogue, strategies
from mpsfuzz.generation.arg_extremes import extreme_arguments
from mpsfuzz.generation.ops import nn_losses

warnings.filterwarnings("ignore", message="Using a target size")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

DRAWS = settings(max_examples=50, deadline=None, database=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))
NATIVE = ("float32", "float64")  # CPU has every loss kernel in these


def _cases(name):
    """The builders' own draws (an argument moved to an extreme of its range, issue 38,
    is meant to be refused by argument checks)."""
    return strategies.cases(catalogue.get(name), allow_variants=False).filter(lambda c: not extreme_arguments(c))


def _call(case):
    spec = catalogue.get(case.op)
    return spec.fn(*case.materialize(), **case.kwargs_dict())


def test_ops_are_registered_in_the_nn_family():
    ops = catalogue.all_ops()
    names = """mse_loss l1_loss smooth_l1_loss huber_loss soft_margin_loss
        multilabel_soft_margin_loss margin_ranking_loss hinge_embedding_loss
        cosine_embedding_loss triplet_margin_loss poisson_nll_loss gaussian_nll_loss kl_div
        binary_cross_entropy binary_cross_entropy_with_logits nll_loss cross_entropy
        cross_entropy_probs multi_margin_loss multilabel_margin_loss ctc_loss
        scaled_dot_product_attention scaled_dot_product_attention_boolmask lstm_cell gru_cell
        rnn_tanh_cell rnn_relu_cell lstm gru lstm_stacked gru_stacked""".split()
    for name in names:
        assert ops[name].family == "nn", name
        assert ops[name].grad and "grad" in ops[name].variants(), name


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy", "multi_margin_loss"])
def test_class_targets_are_in_range_or_ignored(name):
    seen_ignored_class = []

    @DRAWS
    @given(_cases(name))
    def check(case):
        x, t = case.materialize()[:2]
        c = nn_losses.num_classes(tuple(x.shape))
        assert c >= 1 and t.dtype == torch.int64
        assert bool(((t >= 0) & (t < c)).all())
        ignore = case.kwargs_dict().get("ignore_index", -100)
        assert ignore == -100 or 0 <= ignore < c
        if ignore != -100 and bool((t == ignore).any()):
            seen_ignored_class.append(case)
        if case.inputs[0].dtype in NATIVE:
            _call(case)  # CPU accepts it
    check()
    if name != "multi_margin_loss":
        assert seen_ignored_class, "ignore_index never named a class that appears"


def test_multilabel_margin_targets_are_in_minus_one_to_c():
    @DRAWS
    @given(_cases("multilabel_margin_loss"))
    def check(case):
        x, t = case.materialize()
        assert t.shape == x.shape
        assert bool(((t >= -1) & (t < x.shape[-1])).all())
        if case.inputs[0].dtype in NATIVE:
            _call(case)
    check()


@pytest.mark.parametrize("name", ["multi_margin_loss", "multilabel_margin_loss"])
def test_margin_losses_never_get_an_empty_batch(name):
    """Eager CPU returns uninitialised memory for their mean/sum over N = 0."""
    @DRAWS
    @given(_cases(name))
    def check(case):
        x = case.inputs[0].shape
        assert all(n >= 1 for n in x)
    check()


def test_probabilities_and_variances_are_in_range():
    @DRAWS
    @given(_cases("binary_cross_entropy"))
    def bce(case):
        x, t, _ = case.materialize()
        assert bool(((x > 0) & (x < 1)).all()) and bool(((t >= 0) & (t <= 1)).all())
        _call(case)

    @DRAWS
    @given(_cases("gaussian_nll_loss"))
    def gaussian(case):
        assert bool((case.materialize()[2] > 0).all())
        _call(case)
    bce()
    gaussian()


def test_ctc_lengths_are_valid():
    forms = set()

    @DRAWS
    @given(_cases("ctc_loss"))
    def check(case):
        lp, tg = case.materialize()
        kw = case.kwargs_dict()
        il, tl = kw["input_lengths"], kw["target_lengths"]
        t, c = lp.shape[0], lp.shape[-1]
        n = lp.shape[1] if lp.dim() == 3 else 1
        assert len(il) == len(tl) == n
        assert all(0 <= x <= t for x in il)
        if tg.dim() == 2:
            forms.add("padded")
            assert tg.shape[0] == n and all(0 <= x <= tg.shape[1] for x in tl)
        else:
            forms.add("concatenated" if lp.dim() == 3 else "unbatched")
            assert sum(tl) == tg.shape[0] and min(tl) >= 0
        assert bool(((tg >= 1) & (tg < c)).all())  # the blank (0) is never a target
        if case.inputs[0].dtype in NATIVE:
            loss = _call(case)
            assert loss.dtype == lp.dtype
    check()
    assert forms == {"padded", "concatenated", "unbatched"}


def test_ctc_wrapper_makes_strided_1d_targets_safe():
    """Eager CPU ignores the stride of 1-D targets (wrong losses, a crash for stride 0):
    the wrapper must hand it a contiguous copy so the reference stays right."""
    torch.manual_seed(0)
    lp = torch.randn(7, 4, 3, dtype=torch.float64)
    t = torch.randint(1, 3, (13,))
    gapped = torch.zeros(26, dtype=torch.int64)
    gapped[::2] = t
    kw = dict(input_lengths=(7, 6, 6, 7), target_lengths=(2, 3, 3, 5), reduction="none")
    fn = catalogue.get("ctc_loss").fn
    assert torch.equal(fn(lp, t, **kw), fn(lp, gapped[::2], **kw))
    same = torch.tensor([2]).expand(13)
    assert torch.equal(fn(lp, same, **kw), fn(lp, same.contiguous(), **kw))


@pytest.mark.parametrize("name", ["scaled_dot_product_attention", "scaled_dot_product_attention_boolmask"])
def test_sdpa_shapes_are_valid(name):
    ranks, gqa = set(), []

    @DRAWS
    @given(_cases(name))
    def check(case):
        q, k, v, m = (r.shape for r in case.inputs)
        kw = case.kwargs_dict()
        ranks.add(len(q))
        assert len(q) == len(k) == len(v) and 3 <= len(q) <= 5
        assert q[:-3] == k[:-3] == v[:-3] and k[-3] == v[-3] and k[-2] == v[-2]
        assert q[-1] == k[-1] and q[-1] >= 1
        if q[-3] != k[-3]:
            gqa.append(case)
            assert kw["enable_gqa"] is True and k[-3] >= 1 and q[-3] % k[-3] == 0
        assert len(m) >= 2
        torch.broadcast_shapes(m, q[:-1] + (k[-2],))
        if kw["mask"] == "causal":
            assert kw["mask"] != "mask"
        if case.inputs[0].dtype in NATIVE:
            out = _call(case)
            assert out.shape == q[:-1] + (v[-1],)
    check()
    assert {3, 4, 5} <= ranks
    if nn_losses.HAS_GQA:
        assert gqa, "no GQA case (Hq a multiple of Hkv) was drawn"


def test_gqa_is_guarded_on_torch_without_it(monkeypatch):
    def old_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        """scaled_dot_product_attention(query, key, value) -> Tensor"""
    monkeypatch.setattr(F, "scaled_dot_product_attention", old_sdpa)
    assert nn_losses._supports_gqa() is False


@pytest.mark.parametrize("kind,gates", [("lstm", 4), ("gru", 3), ("rnn_tanh", 1), ("rnn_relu", 1)])
def test_cell_shapes_are_consistent(kind, gates):
    @DRAWS
    @given(_cases(f"{kind}_cell"))
    def check(case):
        shapes = [r.shape for r in case.inputs]
        (n, i), (_, h) = shapes[0], shapes[1]
        assert shapes[-4:] == [(gates * h, i), (gates * h, h), (gates * h,), (gates * h,)]
        if case.inputs[0].dtype in NATIVE:
            out = _call(case)
            hy = out[0] if kind == "lstm" else out
            assert hy.shape == (n, h)
    check()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("layers,bidirectional,batch_first,bias",
                         [(1, False, False, True), (2, True, True, True), (2, False, False, False),
                          (1, True, True, False)])
def test_stacked_rnn_wrapper_matches_torch_nn_module(kind, layers, bidirectional, batch_first, bias):
    """The (layers, directions, K) params input is sliced into the module's weights."""
    torch.manual_seed(0)
    inputs, hidden, t, n = 3, 4, 5, 2
    module = getattr(torch.nn, kind.upper())(inputs, hidden, num_layers=layers, bias=bias,
                                             bidirectional=bidirectional, batch_first=batch_first)
    dirs = 2 if bidirectional else 1
    k = nn_losses._rnn_per_direction(nn_losses.GATES[kind], max(inputs, dirs * hidden), hidden)
    params = torch.randn(layers, dirs, k)
    with torch.no_grad():
        weights = nn_losses._flat_weights(params, nn_losses.GATES[kind], inputs, hidden, bias)
        for w, name in zip(weights, module._flat_weights_names):
            getattr(module, name).copy_(w)
    x = torch.randn((n, t, inputs) if batch_first else (t, n, inputs))
    h0 = torch.randn(layers * dirs, n, hidden)
    spec = catalogue.get(f"{kind}_stacked")
    kw = dict(batch_first=batch_first, has_biases=bias)
    if kind == "lstm":
        c0 = torch.randn(layers * dirs, n, hidden)
        got = spec.fn(x, h0, c0, params, **kw)
        want_out, (want_h, want_c) = module(x, (h0, c0))
        torch.testing.assert_close(got[2], want_c)
    else:
        got = spec.fn(x, h0, params, **kw)
        want_out, want_h = module(x, h0)
    torch.testing.assert_close(got[0], want_out)
    torch.testing.assert_close(got[1], want_h)


@pytest.mark.parametrize("name", ["lstm_stacked", "gru_stacked"])
def test_stacked_rnn_cases_are_valid(name):
    @DRAWS
    @given(_cases(name))
    def check(case):
        x, h0 = case.inputs[0].shape, case.inputs[1].shape
        layers, dirs, _ = case.inputs[-1].shape
        assert h0[0] == layers * dirs
        n = x[0] if case.kwargs_dict()["batch_first"] else x[1]
        assert n == h0[1]
        if case.inputs[0].dtype in NATIVE:
            _call(case)
    check()


def test_stacked_rnn_weights_have_storages_of_their_own():
    """Weights sliced from one input would share its storage behind the recipe's back
    (a trigger, on cuDNN, that no ablation could name): the wrapper copies them."""
    params = torch.randn(2, 2, nn_losses._rnn_per_direction(3, 8, 4))
    weights = nn_losses._flat_weights(params, 3, 3, 4, True)
    storages = {w.untyped_storage().data_ptr() for w in weights} | {params.untyped_storage().data_ptr()}
    assert len(storages) == len(weights) + 1


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("batch_first,bias", [(False, True), (True, False)])
def test_rnn_layer_matches_torch_nn_module(kind, batch_first, bias):
    """One layer with each weight an input of the case: the module's own weights."""
    torch.manual_seed(0)
    inputs, hidden, t, n = 3, 4, 5, 2
    module = getattr(torch.nn, kind.upper())(inputs, hidden, bias=bias, batch_first=batch_first)
    weights = [getattr(module, name).detach() for name in module._flat_weights_names]
    if not bias:  # the case always holds bias inputs; has_biases=False leaves them out
        weights += [torch.randn(nn_losses.GATES[kind] * hidden)] * 2
    x = torch.randn((n, t, inputs) if batch_first else (t, n, inputs))
    states = [torch.randn(1, n, hidden) for _ in range(2 if kind == "lstm" else 1)]
    got = catalogue.get(kind).fn(x, *states, *weights, batch_first=batch_first, has_biases=bias)
    want_out, want_h = module(x, tuple(states) if kind == "lstm" else states[0])
    torch.testing.assert_close(got[0], want_out)
    torch.testing.assert_close(got[1], want_h[0] if kind == "lstm" else want_h)
    if kind == "lstm":
        torch.testing.assert_close(got[2], want_h[1])


@pytest.mark.parametrize("name,gates", [("lstm", 4), ("gru", 3)])
def test_rnn_layer_cases_are_valid(name, gates):
    @DRAWS
    @given(_cases(name))
    def check(case):
        shapes = [r.shape for r in case.inputs]
        x, h0 = shapes[0], shapes[1]
        h, i = h0[-1], x[-1]
        assert h0[0] == 1 and shapes[-4:] == [(gates * h, i), (gates * h, h), (gates * h,), (gates * h,)]
        n = x[0] if case.kwargs_dict()["batch_first"] else x[1]
        assert n == h0[1]
        if case.inputs[0].dtype in NATIVE:
            _call(case)
    check()


@pytest.mark.parametrize("name", ["kl_div", "poisson_nll_loss"])
def test_value_builders_follow_the_flags(name):
    @DRAWS
    @given(_cases(name))
    def check(case):
        kw = case.kwargs_dict()
        recipes = case.inputs
        if name == "kl_div":
            target = recipes[1].values
            assert (target.low, target.high) == ((-5.0, 0.0) if kw["log_target"] else (0.0, 1.0))
        else:
            want = "normal" if kw["log_input"] else "positive"
            assert recipes[0].values.distribution == want
    check()


def test_grad_inputs_are_differentiable_on_cpu():
    """Each op's declared grad inputs backpropagate on the CPU (weights of nll_loss and
    friends are not differentiable there, so they must not be declared)."""
    ops = {n: s for n, s in catalogue.all_ops().items() if s.fn.__module__ == nn_losses.__name__}
    for name, spec in sorted(ops.items()):
        @settings(max_examples=5, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(_cases(name))
        def check(case):
            if case.inputs[0].dtype not in NATIVE:
                return
            if "mixed_dtypes_sometimes" in spec.semantics and len(
                    {r.dtype for r in case.inputs if r.dtype.startswith(("float", "bfloat"))}) > 1:
                return   # drawn on purpose (a float16 input, a float32 weight): CPU refuses the call
            inputs = case.materialize()
            grad_at = spec.grad_inputs if spec.grad_inputs is not None else [
                i for i, t in enumerate(inputs) if t.is_floating_point()]
            inputs = [t.detach().clone().requires_grad_(i in grad_at) for i, t in enumerate(inputs)]
            # (the reference's call: flex_attention's public call refuses a CPU backward)
            out = spec.as_reference().fn(*inputs, **case.kwargs_dict())
            outs = out if isinstance(out, (tuple, list)) else (out,)
            total = sum(o.sum() for o in outs)
            try:
                total.backward()
            except RuntimeError as exc:
                # eager CPU's nll_loss2d backward refuses some non-contiguous 4-D inputs:
                # a CPU limitation, not a wrong declaration
                if "grad_input must be contiguous" not in str(exc):
                    raise
        check()
