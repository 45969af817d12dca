"""The ``zero-taps`` rule (opspec.SEMANTICS): a convolution's implicit zeros (padding,
the holes of stride and dilation) times nan/inf are NaN on CPU and skipped by cuDNN and
MPSGraph. An H100 run filed six findings of that one choice (conv1d/2d/3d, transposed,
their gradients, under autocast too): the rule excuses a non-finite reference where the
device is finite, for convolutions whose inputs hold nan/inf; a NaN the device invents
stays a finding, and other ops are judged as before."""
from __future__ import annotations

import torch

from mpsfuzz.execution.targets import DeviceTarget
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT, worker_oracles
from mpsfuzz.oracles.judge import judge_case


class Rewriting(DeviceTarget):
    """Eager CPU whose float results go through ``change`` (a backend's other choice)."""

    def __init__(self, change):
        super().__init__("rewriting-cpu", "cpu")
        self.change = change

    def run(self, fn, *args, **kwargs):
        out = fn(*args, **kwargs)
        return self.change(out) if isinstance(out, torch.Tensor) and out.is_floating_point() else out


def t(shape, seed=1, specials=()):
    return TensorRecipe(tuple(shape), "float32", Layout(), ValueRecipe(seed=seed, specials=tuple(specials)))


def failures(case, change):
    result = judge_case(case, Rewriting(change), worker_oracles(DEFAULT))
    return [(f["oracle"], f["kind"]) for f in result.failures]


NAN_WEIGHT_PADDED = Case("conv2d", (t((1, 1, 3, 3)), t((1, 1, 2, 2), 2, ((0, "nan"),)), t((1,), 3)),
                         kwargs=(("padding", (1, 1)),))


def test_a_device_that_skips_the_zero_taps_of_a_nan_weight_is_not_a_finding():
    # where CPU's 0 x NaN made NaN, the device's finite value stands
    assert failures(NAN_WEIGHT_PADDED, lambda out: out.nan_to_num(0.0)) == []


def test_an_infinity_from_the_other_taps_where_cpu_says_nan_is_not_a_finding():
    # an inf input beside the padded NaN weight: skipping the 0 x NaN taps leaves inf
    # (conv3d under autocast, H100: -inf where CPU said NaN)
    inf_input = Case("conv2d", (t((1, 1, 3, 3), 1, ((4, "-inf"),)), t((1, 1, 2, 2), 2, ((0, "nan"),)),
                                t((1,), 3)), kwargs=(("padding", (1, 1)),))
    skipped = lambda out: torch.where(torch.isnan(out), -torch.inf, out)
    assert failures(inf_input, skipped) == []
    # where CPU is finite, the device's values are still compared
    inf_only = Case("conv2d", (t((1, 1, 3, 3), 1, ((4, "-inf"),)), t((1, 1, 2, 2), 2), t((1,), 3)),
                    kwargs=(("padding", (1, 1)),))
    assert failures(inf_only, skipped) == []
    assert ("values", "wrong-values") in failures(inf_only, lambda out: torch.where(
        torch.isfinite(out), out + 1, out))


def test_a_nan_the_device_invents_is_still_a_finding():
    finite = Case("conv2d", (t((1, 1, 3, 3)), t((1, 1, 2, 2), 2), t((1,), 3)), kwargs=(("padding", (1, 1)),))
    invent = lambda out: torch.where(torch.arange(out.numel()).view(out.shape) == 0, torch.nan, out)
    assert ("values", "wrong-values") in failures(finite, invent)
    # (the price: where CPU is NaN, any finite value of the device passes; where it is
    # finite, every value is still compared)
    nan_input = Case("conv2d", (t((1, 1, 3, 3), 1, ((4, "nan"),)), t((1, 1, 1, 1), 2), t((1,), 3)))
    assert ("values", "wrong-values") in failures(nan_input, lambda out: out.nan_to_num(0.0) + 1)


def test_other_ops_get_no_such_excuse():
    nan_input = Case("exp", (t((4,), 1, ((0, "nan"),)),))
    assert ("values", "wrong-values") in failures(nan_input, lambda out: out.nan_to_num(0.0))


def test_an_interpolation_tap_of_weight_zero_is_a_zero_tap():
    # bilinear from 2x2 to 3x3 with aligned corners: output (0, 0) is 1 x x[0, 0] + 0 x inf,
    # NaN on CPU; CUDA skips the tap (H100: inf where CPU said NaN, bilinear)
    inf_input = Case("interpolate_linear", (t((1, 1, 2, 2), 1, ((1, "inf"),)),),
                     kwargs=(("align_corners", True), ("mode", "bilinear"), ("size", (3, 3))))
    skipped = lambda out: torch.where(torch.isnan(out), torch.zeros_like(out), out)
    assert failures(inf_input, skipped) == []
    # finite where CPU is finite: still compared
    assert ("values", "wrong-values") in failures(inf_input, lambda out: torch.where(
        torch.isfinite(out), out + 1, out))


def test_under_autocast_an_extreme_rounded_to_inf_counts_as_non_finite():
    # conv1d with padding under autocast on an H100: float32's max is inf once rounded to
    # float16, CPU's 0 x inf over the padding is NaN, cuDNN skipped the padding
    extreme = Case("conv1d", (t((1, 1, 3), 1), t((1, 1, 2), 2, ((0, "max"),)), t((1,), 3)),
                   kwargs=(("padding", (1,)),), variant="autocast")
    skipped = lambda out: torch.where(torch.isnan(out), torch.zeros_like(out), out)
    assert failures(extreme, skipped) == []
    # without autocast the same inputs are finite: a NaN-free device is judged as before
    plain = Case("conv1d", (t((1, 1, 3), 1), t((1, 1, 2), 2), t((1,), 3)), kwargs=(("padding", (1,)),),
                 variant="autocast")
    assert ("values", "wrong-values") in failures(plain, lambda out: out + 1)
