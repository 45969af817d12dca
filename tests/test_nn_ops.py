"""The nn family's first half (mpsfuzz/generation/ops/nn.py): its builders give cases that
eager CPU accepts, its canonicaliser ignores tie-breaking, its dropout judge tells real
dropout from broken dropout."""
from __future__ import annotations

import math
import warnings

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.arg_extremes import extreme_arguments
from mpsfuzz.generation.ops import nn as nn_ops
from mpsfuzz.generation.opspec import ShapeBudget
from mpsfuzz.generation.recipes import Layout
from mpsfuzz.generation.strategies import example_cases

warnings.filterwarnings("ignore")
OPS = catalogue.all_ops()
MINE = [n for n, s in OPS.items() if s.family == "nn" and n in {
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "avg_pool1d",
    "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "lp_pool2d",
    "max_unpool2d", "batch_norm", "layer_norm", "group_norm", "instance_norm",
    "local_response_norm", "normalize", "linear", "bilinear", "embedding", "embedding_bag",
    "relu", "gelu", "glu", "prelu", "softmax", "dropout", "dropout2d", "alpha_dropout",
    "feature_alpha_dropout", "interpolate_linear", "interpolate_bicubic", "grid_sample",
    "affine_grid", "pad_reflect", "pad_circular", "pixel_shuffle", "unfold_im2col",
    "fold_col2im", "channel_shuffle", "one_hot"}]


def _settings(n):
    return settings(max_examples=n, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


def _draw_cases(name, n=50):
    """The builders' own draws: a case with an argument moved to an extreme of its range
    (issue 38) is meant to be refused by argument checks, and is left out here."""
    return [c for c in example_cases(OPS[name], n, seed=0, allow_variants=False) if not extreme_arguments(c)]


def _run(name, case):
    spec = OPS[name]
    inputs = case.materialize("cpu")
    out = spec.fn(*inputs, **case.kwargs_dict())
    if spec.canonicalise is not None:
        out = spec.canonicalise(inputs, out)
    return inputs, out


def _cpu_accepts(name, case) -> bool:
    try:
        _run(name, case)
        return True
    except NotImplementedError:  # no half kernel on CPU: the executor widens, still valid
        return True
    except RuntimeError as exc:
        if "not implemented for" in str(exc):
            return True
        if "Unsupported memory format" in str(exc) and any(not r.is_plain() for r in case.inputs):
            # CPU refuses some layouts of a valid call (max_pool3d of a permuted 4-D
            # input): the layout oracle's finding, not the builder's; the call is valid
            plain = replace(case, inputs=tuple(replace(r, layout=Layout()) for r in case.inputs))
            return _cpu_accepts(name, plain)
        raise


def test_the_family_has_its_ops():
    fam = catalogue.families()["nn"]
    for name in MINE:
        assert name in fam
    assert len(MINE) >= 45
    for name in ("max_pool2d", "avg_pool3d", "interpolate_nearest", "pad_constant", "rms_norm",
                 "softmin", "hardswish", "threshold", "lp_pool1d", "embedding_bag_max"):
        assert OPS[name].family == "nn", name


# -- convolutions ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                  "conv_transpose2d", "conv_transpose3d"])
def test_conv_cases_are_always_valid_on_cpu(name):
    drawn = _draw_cases(name, 50)
    for case in drawn:
        inputs, out = _run(name, case)  # raises if CPU refuses
        x, w, b = (r.shape for r in case.inputs)
        groups = dict(case.kwargs).get("groups", 1)
        if name.startswith("conv_transpose"):
            assert out.shape[-len(w) + 2 - 1] == b[0]  # output channels
            assert x[-len(w) + 1] == w[0]
        else:
            assert x[-len(w) + 1] == w[1] * groups
    kw = [dict(c.kwargs) for c in drawn]
    assert any(k.get("groups", 1) > 1 for k in kw)
    assert any(k["bias"] is False for k in kw) and any(k["bias"] for k in kw)
    if not name.startswith("conv_transpose"):
        assert any(k.get("padding") == "same" for k in kw)


def test_conv_shapes_reach_channels_last_and_empty_batch():
    budget = ShapeBudget()
    seen_empty = seen_4d = 0

    @_settings(200)
    @given(st.data())
    def collect(data):
        nonlocal seen_empty, seen_4d
        x, w, b = OPS["conv2d"].shapes(data.draw, budget)
        seen_4d += len(x) == 4
        seen_empty += len(x) == 4 and x[0] == 0
        assert math.prod(x) <= budget.max_numel
    collect()
    assert seen_4d > 100 and seen_empty >= 1


def test_conv_bias_flag_drops_the_bias():
    x, w, b = torch.randn(1, 2, 5), torch.randn(3, 2, 3), torch.randn(3)
    spec = OPS["conv1d"]
    assert torch.allclose(spec.fn(x, w, b, bias=False), F.conv1d(x, w))
    assert torch.allclose(spec.fn(x, w, b, bias=True), F.conv1d(x, w, b))


# -- pooling ---------------------------------------------------------------------------------

def _as_list(v, nd):
    return list(v) if isinstance(v, tuple) else [v] * nd


@pytest.mark.parametrize("name,nd", [("max_pool1d", 1), ("max_pool2d", 2), ("max_pool3d", 3),
                                     ("avg_pool2d", 2), ("avg_pool3d", 3), ("max_pool2d_with_indices", 2)])
def test_pool_padding_at_most_half_the_kernel_and_cases_valid(name, nd):
    for case in _draw_cases(name, 50):
        kw = dict(case.kwargs)
        ks, ps = _as_list(kw["kernel_size"], nd), _as_list(kw["padding"], nd)
        assert all(0 <= p <= k // 2 for k, p in zip(ks, ps)), kw
        assert _cpu_accepts(name, case)


def test_max_pool_indices_canonicaliser_ignores_tie_breaking():
    canon = nn_ops.pooled_indices(2)
    x = torch.tensor([[[[1.0, 1.0], [0.0, 1.0]]]])        # three tied maxima
    values = torch.tensor([[[[1.0]]]])
    first, last = torch.tensor([[[[0]]]]), torch.tensor([[[[3]]]])
    a, b = canon([x], (values, first)), canon([x], (values, last))
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    wrong = canon([x], (values, torch.tensor([[[[2]]]])))   # points at the 0.0
    assert not torch.equal(wrong[1], a[1])
    outside = canon([x], (values, torch.tensor([[[[7]]]])))
    assert not bool(outside[2].all())


def test_max_pool_with_indices_compares_values_not_raw_indices():
    spec = OPS["max_pool2d_with_indices"]
    assert "ties_unspecified" in spec.semantics and not spec.grad
    x = torch.randn(2, 3, 5, 5)
    out = spec.canonicalise([x], spec.fn(x, kernel_size=2))
    assert torch.equal(out[0], out[1]) and bool(out[2].all())


def test_max_unpool2d_cases_are_valid_and_deterministic():
    for case in _draw_cases("max_unpool2d", 50):
        kw = dict(case.kwargs)
        assert all(s >= k for s, k in zip(kw["stride"], kw["kernel_size"]))  # no overlap
        _, a = _run("max_unpool2d", case)
        _, b = _run("max_unpool2d", case)
        assert torch.equal(a, b) or bool(((a == b) | (a.isnan() & b.isnan())).all())
        assert tuple(a.shape[-2:]) == tuple(kw["output_size"])


# -- normalisation ----------------------------------------------------------------------------

def test_batch_norm_returns_updated_running_stats():
    spec = OPS["batch_norm"]
    x = torch.randn(4, 3, 5)
    rm, rv, w, b = torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3)
    out, new_mean, new_var = spec.fn(x, rm, rv, w, b, training=True, momentum=0.5)
    assert torch.allclose(new_mean, 0.5 * x.mean((0, 2)), atol=1e-6)
    assert not torch.equal(new_var, torch.ones(3))
    # an expanded (stride-0) running stat is made writable instead of refused
    _, m2, _ = spec.fn(x, torch.zeros(1).expand(3), rv.clone(), w, b, training=True)
    assert m2.shape == (3,)


@pytest.mark.parametrize("name", ["batch_norm", "instance_norm", "group_norm", "layer_norm",
                                  "rms_norm", "local_response_norm", "normalize"])
def test_norm_cases_are_valid(name):
    for case in _draw_cases(name, 40):
        assert _cpu_accepts(name, case)


# -- ops with value builders (test_catalogue's small-input check cannot build them) ------------

@pytest.mark.parametrize("name", ["embedding", "embedding_bag", "embedding_bag_max", "one_hot",
                                  "grid_sample"])
def test_value_built_inputs_are_in_range(name):
    for case in _draw_cases(name, 40):
        inputs, _ = _run(name, case)
        if name in ("embedding", "embedding_bag", "embedding_bag_max"):
            idx, weight = inputs[0], inputs[1]
            assert idx.numel() == 0 or (int(idx.min()) >= 0 and int(idx.max()) < weight.shape[0])
        if name == "grid_sample":
            g = inputs[1]
            assert g.numel() == 0 or float(g.abs().max()) <= 1.21


# -- activations, resampling, padding, rearrangements -----------------------------------------

@pytest.mark.parametrize("name", ["glu", "prelu", "softmax", "interpolate_linear",
                                  "interpolate_bicubic", "interpolate_area", "affine_grid",
                                  "pad_reflect", "pad_circular", "pad_replicate", "pad_constant",
                                  "pixel_shuffle", "pixel_unshuffle", "unfold_im2col", "fold_col2im",
                                  "channel_shuffle"])
def test_cases_are_valid(name):
    for case in _draw_cases(name, 40):
        assert _cpu_accepts(name, case)


def test_reflect_padding_stays_below_the_size():
    for case in _draw_cases("pad_reflect", 60):
        shape, pads = case.inputs[0].shape, dict(case.kwargs)["pad"]
        for j in range(len(pads) // 2):
            size = shape[len(shape) - 1 - j]
            assert pads[2 * j] < size and pads[2 * j + 1] < size


@pytest.mark.parametrize("name", sorted(n for n in MINE if OPS[n].grad))
def test_grad_ops_backward_on_cpu(name):
    spec = OPS[name]
    for case in _draw_cases(name, 8):
        if case.inputs[0].dtype != "float32" and not any(r.dtype == "float32" for r in case.inputs):
            continue
        inputs = case.materialize("cpu")
        wrt = [i for i in (spec.grad_inputs or range(len(inputs))) if inputs[i].is_floating_point()]
        for i in wrt:
            inputs[i].requires_grad_(True)
        out = spec.fn(*inputs, **case.kwargs_dict())
        leaves = [o for o in (out if isinstance(out, tuple) else (out,)) if o.requires_grad]
        if leaves:
            torch.autograd.grad([o.sum() for o in leaves], [inputs[i] for i in wrt], allow_unused=True)


# -- dropout judge -------------------------------------------------------------------------

def _judge(name):
    return OPS[name].statistical


def test_dropout_judge_accepts_real_dropout_and_identity():
    torch.manual_seed(0)
    x = torch.randn(64, 64)
    for p in (0.1, 0.5, 0.8):
        assert _judge("dropout")(F.dropout(x, p, True), [x], {"p": p, "training": True}) is None
    assert _judge("dropout")(F.dropout(x, 0.5, False), [x], {"p": 0.5, "training": False}) is None
    assert _judge("dropout")(x.clone(), [x], {"p": 0.0, "training": True}) is None


def test_dropout_judge_flags_corrupted_outputs():
    torch.manual_seed(1)
    x = torch.randn(64, 64)
    judge = _judge("dropout")
    out = F.dropout(x, 0.5, True)
    bad = out.clone()
    bad[3, 4] = x[3, 4] * 3.0 + 1.0          # neither 0 nor x / (1 - p)
    assert "neither kept nor dropped" in judge(bad, [x], {"p": 0.5, "training": True})
    unscaled = torch.where(out == 0, out, x)   # forgot the 1 / (1 - p) scale
    assert judge(unscaled, [x], {"p": 0.5, "training": True}) is not None
    too_many = torch.zeros_like(x)             # everything dropped with p = 0.1
    assert "dropped with p=0.1" in judge(too_many, [x], {"p": 0.1, "training": True})
    assert judge(out, [x], {"p": 0.5, "training": False}) is not None  # eval must be identity
    assert judge(out[:10], [x], {"p": 0.5, "training": True}) is not None


def test_dropout_judge_false_alarm_rate_is_tiny():
    judge = _judge("dropout")
    x = torch.randn(4096)
    for seed in range(200):
        torch.manual_seed(seed)
        assert judge(F.dropout(x, 0.3, True), [x], {"p": 0.3, "training": True}) is None


def test_feature_dropout_judge_wants_whole_channels():
    torch.manual_seed(2)
    x = torch.randn(8, 16, 3, 3)
    judge = _judge("dropout2d")
    out = F.dropout2d(x, 0.5, True)
    assert judge(out, [x], {"p": 0.5, "training": True}) is None
    elementwise = F.dropout(x, 0.5, True)
    assert "partly dropped" in judge(elementwise, [x], {"p": 0.5, "training": True})


@pytest.mark.parametrize("name,fn,shape", [
    ("alpha_dropout", F.alpha_dropout, (64, 64)),
    ("feature_alpha_dropout", F.feature_alpha_dropout, (8, 16, 5)),
])
def test_alpha_dropout_judges(name, fn, shape):
    torch.manual_seed(3)
    x = torch.randn(*shape)
    judge = _judge(name)
    for p in (0.1, 0.5):
        assert judge(fn(x, p, True), [x], {"p": p, "training": True}) is None
    plain = F.dropout(x, 0.5, True)            # zeros are not alpha dropout's constant
    assert judge(plain, [x], {"p": 0.5, "training": True}) is not None


def test_dropout_specs_are_random_and_judged():
    for name in ("dropout", "dropout2d", "alpha_dropout", "feature_alpha_dropout"):
        spec = OPS[name]
        assert "random" in spec.semantics and spec.statistical is not None and not spec.grad


def test_alpha_dropout_judge_allows_half_precision_cancellation():
    # a*x + b nearly cancels (x ~ -0.89, p = 0.5): float16 rounding of the terms is
    # far larger than relative to the small result, and is not a bug
    torch.manual_seed(4)
    x = torch.full((64, 64), -0.89111328125, dtype=torch.float16)
    x[::2] = torch.randn(32, 64, dtype=torch.float16)
    judge = _judge("alpha_dropout")
    for seed in range(20):
        torch.manual_seed(seed)
        assert judge(F.alpha_dropout(x, 0.5, True), [x], {"p": 0.5, "training": True}) is None
    for dtype in (torch.bfloat16, torch.float64):
        y = x.to(dtype)
        assert judge(F.alpha_dropout(y, 0.3, True), [y], {"p": 0.3, "training": True}) is None
