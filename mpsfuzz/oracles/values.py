"""``values``: the DUT's outputs against the CPU reference.

Attributes first (structure, shape, dtype), then values with tolerances from the one
table in :mod:`.tolerances`; NaN positions must agree and infinities must agree in
sign. Mismatch messages follow ``torch.testing.assert_close``'s familiar layout.
"""
from __future__ import annotations

import math

import torch

from . import Failure, oracle
from .conversions import excuse_undefined
from ..execution.observation import Observation, Raised
from ..generation.dtypes import name_of
from ..generation.opspec import aliased_out_input
from ..generation.recipes import NONFINITE_SPECIALS
from .outputs import flatten_outputs
from .tolerances import tolerance


def _index(flat_index: int, shape) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat_index % size if size else 0)
        flat_index = flat_index // size if size else 0
    return tuple(reversed(out))


_WIDE_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def _as_int64(t: torch.Tensor) -> torch.Tensor:
    """The same integers as int64 (uint64: the same bits), for comparison kernels."""
    if t.dtype == torch.uint64:
        return t.view(torch.int64)
    return t.to(torch.int64)


def compare_tensors(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> str | None:
    """None when close, else an assert_close-style description of the mismatch."""
    if actual.shape != expected.shape:
        return f"The values for attribute 'shape' do not match: {tuple(actual.shape)} != {tuple(expected.shape)}."
    if actual.dtype != expected.dtype:
        return f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}."
    if actual.numel() == 0:
        return None
    exact = not (expected.is_floating_point() or expected.is_complex())
    wide = torch.complex128 if expected.is_complex() else (torch.float64 if not exact else None)
    if expected.dtype in _WIDE_UNSIGNED:
        # Eager CPU lacks comparison kernels for uint16/32/64 (torch 2.11 also lacks
        # ``where``): compare their exact values as int64 (uint64 bit patterns).
        actual, expected = _as_int64(actual), _as_int64(expected)
    # The common case first, in a few kernels: every element agrees (the checks below
    # find no bad element whenever these pass: same rule, same specials).
    # torch.equal alone settles results equal bit for bit (integers, and floats without
    # NaN: most results of many ops on any device), with no widened copies. (Eager CPU
    # has no equal for complex32.)
    if expected.dtype != torch.complex32 and torch.equal(actual, expected):
        return None
    if not exact and bool(torch.isclose(actual.to(wide), expected.to(wide), rtol=rtol, atol=atol,
                                        equal_nan=True).all()):
        return None
    if exact:
        bad = (actual != expected).reshape(-1)
        a64, e64 = actual.reshape(-1).to(torch.float64), expected.reshape(-1).to(torch.float64)
        abs_diff = (a64 - e64).abs()
        rel_diff = torch.where(abs_diff == 0, 0.0, abs_diff / e64.abs())
    else:
        a, e = actual.to(wide).reshape(-1), expected.to(wide).reshape(-1)
        nan_a, nan_e = torch.isnan(a), torch.isnan(e)
        inf_a, inf_e = torch.isinf(a), torch.isinf(e)
        finite = ~(nan_a | nan_e | inf_a | inf_e)
        abs_diff = torch.where(finite, (a - e).abs(), torch.zeros((), dtype=torch.float64))
        rel_diff = torch.where(abs_diff == 0, 0.0, abs_diff / e.abs())
        close = abs_diff <= atol + rtol * e.abs()
        same_special = (nan_a & nan_e) | ((inf_a | inf_e) & (a == e))
        if expected.is_complex():
            # C99 Annex G leaves the other part of a complex infinity (inf+nanj vs
            # inf+0j) to the implementation: non-finite on both sides agrees.
            same_special = same_special | (~torch.isfinite(a) & ~torch.isfinite(e))
        bad = torch.where(finite, ~close, ~same_special)
        # A NaN or inf on one side only counts as an infinitely large difference.
        abs_diff = torch.where(finite, abs_diff, bad.to(torch.float64) * math.inf)
        rel_diff = torch.where(finite, rel_diff, bad.to(torch.float64) * math.inf)
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    total = expected.numel()
    i_abs = int(torch.argmax(torch.where(bad, abs_diff, torch.zeros_like(abs_diff))))
    i_rel = int(torch.argmax(torch.where(bad, rel_diff, torch.zeros_like(rel_diff))))
    head = "Tensor-likes are not equal!" if exact else "Tensor-likes are not close!"
    lines = [head, "", f"Mismatched elements: {n_bad} / {total} ({100.0 * n_bad / total:.1f}%)",
             f"Greatest absolute difference: {float(abs_diff[i_abs]):.6g} at index {_index(i_abs, expected.shape)} (up to {atol:g} allowed)",
             f"Greatest relative difference: {float(rel_diff[i_rel]):.6g} at index {_index(i_rel, expected.shape)} (up to {rtol:g} allowed)"]
    if not exact:
        nan_only = int((torch.isnan(actual.to(wide).reshape(-1)) != torch.isnan(expected.to(wide).reshape(-1))).sum())
        if nan_only:
            lines.append(f"NaN on one side only at {nan_only} position(s).")
    flat_a, flat_e = actual.reshape(-1), expected.reshape(-1)
    lines.append(f"First mismatch at index {_index(int(torch.nonzero(bad)[0]), expected.shape)}: "
                 f"actual {flat_a[int(torch.nonzero(bad)[0])].item()!r}, expected {flat_e[int(torch.nonzero(bad)[0])].item()!r}")
    return "\n".join(lines)


def leaf_tolerance(spec, dtype_name: str, *, scale: float = 1.0, widened: bool = False) -> tuple[float, float]:
    """The one place a comparison's (rtol, atol) is decided: the dtype's entry in the
    table, times the op's declared scales and the caller's (backward, order-dependent).
    Low-precision dtypes (float16, bfloat16, complex32) get the table entry alone: how
    far they may legitimately drift (accumulation in half precision, atomics) is decided
    against float64 by the arbiter, with a bound that grows with the number of summands
    (:mod:`.accuracy`), never by multiplying scales (bf16 var once passed anything:
    rtol 1.6e-2 * 32 * 4 * 4)."""
    if dtype_name in LOW_PRECISION_NAMES:
        return tolerance(dtype_name, widened=widened)
    return tolerance(dtype_name, rtol_scale=spec.rtol_scale * scale, atol_scale=spec.atol_scale * scale,
                     widened=widened)


LOW_PRECISION_NAMES = ("float16", "bfloat16", "complex32")


def compare_outputs(actual, expected, spec, *, widened: bool = False, scale: float = 1.0,
                    check_attributes: bool = True) -> tuple[str, str] | None:
    """Compare two op results leaf by leaf: None when they agree, else ``(kind,
    message)`` with kind one of wrong-structure, wrong-shape, wrong-dtype, wrong-values.
    With ``check_attributes=False`` leaves of differing shape or dtype are skipped (the
    ``metadata`` oracle reports them)."""
    actual, expected = flatten_outputs(actual), flatten_outputs(expected)
    if len(actual) != len(expected):
        return "wrong-structure", f"{len(actual)} outputs vs {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a is None or e is None:
            if (a is None) != (e is None):
                return "wrong-structure", f"output {i}: {a!r} vs {e!r}"
            continue
        if not check_attributes and (a.shape != e.shape or a.dtype != e.dtype):
            continue
        rtol, atol = leaf_tolerance(spec, name_of(e.dtype), scale=scale, widened=widened)
        problem = compare_tensors(a, e, rtol, atol)
        if problem is None:
            continue
        prefix = f"output {i}: " if len(expected) > 1 else ""
        if "attribute 'shape'" in problem:
            return "wrong-shape", prefix + problem
        if "attribute 'dtype'" in problem:
            return "wrong-dtype", prefix + problem
        return "wrong-values", prefix + problem
    return None


# Elements kept in a finding's error profile (the report's error-distribution plot).
PROFILE_LIMIT = 256


def _plain(x) -> float | str:
    """A JSON-safe number: floats as they are, non-finite ones and complex as text."""
    if isinstance(x, complex):
        return repr(x)
    x = float(x)
    return x if math.isfinite(x) else repr(x)


def error_profile(actual, expected, spec, *, widened: bool = False, scale: float = 1.0) -> dict | None:
    """Where and by how much the first mismatching output leaf is off: its shape, element
    count, the number of mismatched elements and up to PROFILE_LIMIT of them as
    ``[flat index, expected, actual, |difference|]`` (JSON-safe). The report plots it."""
    for i, (a, e) in enumerate(zip(flatten_outputs(actual), flatten_outputs(expected))):
        if not isinstance(a, torch.Tensor) or not isinstance(e, torch.Tensor):
            continue
        if a.shape != e.shape or a.dtype != e.dtype or e.numel() == 0:
            continue
        rtol, atol = leaf_tolerance(spec, name_of(e.dtype), scale=scale, widened=widened)
        if compare_tensors(a, e, rtol, atol) is None:
            continue
        wide = torch.complex128 if e.is_complex() else torch.float64
        fa, fe = a.detach().to(wide).reshape(-1), e.detach().to(wide).reshape(-1)
        diff = (fa - fe).abs()
        both_nan = torch.isnan(fa) & torch.isnan(fe)
        same = (fa == fe) | both_nan
        bad = ~same & ~(diff <= atol + rtol * fe.abs())
        where = torch.nonzero(bad).reshape(-1)[:PROFILE_LIMIT].tolist()
        elements = [[j, _plain(fe[j].item()), _plain(fa[j].item()), _plain(diff[j].item())] for j in where]
        return {"output": i, "shape": list(e.shape), "dtype": name_of(e.dtype), "numel": e.numel(),
                "mismatched": int(bad.sum()), "rtol": rtol, "atol": atol, "elements": elements}
    return None


# Order-dependent ops (long reductions, atomics) may round differently from one layout
# or variant to another on the same device: the DUT-alone oracles allow this much more.
ORDER_DEPENDENT_SCALE = 4.0


def dut_alone_scale(spec, outputs=None) -> float:
    """The scale the DUT-alone oracles (layout, variants) apply on top of the op's own.
    Low-precision outputs get none: see :func:`leaf_tolerance`."""
    return ORDER_DEPENDENT_SCALE if "order-dependent" in spec.semantics else 1.0


# Ops whose output values are not comparable with another run's.
UNCOMPARABLE = frozenset({"random", "undefined-values"})

_WHAT = {"wrong-structure": "a different output structure", "wrong-shape": "a wrongly shaped result",
         "wrong-dtype": "a result of the wrong dtype", "wrong-values": "wrong values"}


def variant_phrase(case) -> str:
    return {"functional": "", "method": " (method form)", "inplace": " (in-place form)",
            "out": " (out= form)", "out-strided": " (out= form, non-contiguous out)",
            "out-resized": " (out= form, out resized)",
            "out-alias": " (out= form, out is input 0)", "grad": "",
            "autocast": " (under torch.autocast)", "out-cast": " (out= form, out of another dtype)"}.get(
        case.variant, f" (out= form, out is input {aliased_out_input(case.variant)})"
        if aliased_out_input(case.variant) is not None else f" ({case.variant})")


def excuse_skipped_zero_taps(case, spec, dut, ref):
    """``ref`` taking the DUT's value where ``ref`` is non-finite and the DUT's is finite,
    or ``ref`` is NaN and the DUT's an infinity, for a ``zero-taps`` op whose inputs hold
    nan/inf (see opspec.SEMANTICS); ``ref`` itself otherwise. (Skipping a 0 x NaN tap
    leaves what the other taps sum to, an infinity where they hold one: conv3d under
    autocast on an H100 returned -inf where CPU said NaN.) The reverse, a NaN the
    reference has not, stays a finding."""
    return _zero_taps_excused(case, spec, dut, ref, either_way=False)


def excuse_zero_taps_either_way(case, spec, a, b):
    """``b`` taking ``a``'s value where either of the two skipped a zero tap the other
    multiplied, for the DUT-alone oracles: two runs of the target (a non-contiguous
    weight and its contiguous copy, two cuDNN algorithms) may each skip or multiply the
    zero taps (issue 30, H200: conv1d with a transposed weight holding NaN and padding
    'same' gave -18 where the contiguous weight gave NaN)."""
    return _zero_taps_excused(case, spec, a, b, either_way=True)


def excuse_multiplied_zero_taps(case, spec, dut, ref, wide):
    """``ref`` taking the DUT's value where the DUT multiplied a zero tap the reference
    skipped, as eager CPU's own kernel does in float64 (``wide``): the DUT non-finite,
    ``ref`` finite, and ``wide`` non-finite alike there, for a ``zero-taps`` op whose
    inputs hold nan/inf. Whether the cropped padding's zeros are multiplied is a kernel's
    convention, and PyTorch's backends use both, by dtype (issue 37, H200: the float32
    input gradient of conv_transpose3d with a NaN weight and padding, NaN on CUDA as in
    CPU's float64 kernel, finite in CPU's float32 one). A NaN no kernel of the reference
    gives stays a finding."""
    if "zero-taps" not in spec.semantics or not _kernel_got_nonfinite(case, dut):
        return ref
    out = []
    for d, r, w in zip(flatten_outputs(dut), flatten_outputs(ref), flatten_outputs(wide)):
        if (isinstance(d, torch.Tensor) and isinstance(r, torch.Tensor) and isinstance(w, torch.Tensor)
                and d.shape == r.shape == w.shape and d.dtype == r.dtype and d.is_floating_point()
                and w.is_floating_point()):
            w = w.to(d.device)
            alike = (torch.isnan(d) & torch.isnan(w)) | (torch.isinf(d) & torch.isinf(w) & (d.sign() == w.sign()))
            r = torch.where(alike & torch.isfinite(r), d, r)
        out.append(r)
    return tuple(out)


def _skipped(d: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Where ``d`` skipped a tap ``r`` multiplied: r non-finite and d finite, or r NaN
    and d an infinity."""
    return (~torch.isfinite(r) & torch.isfinite(d)) | (torch.isnan(r) & torch.isinf(d))


def _zero_taps_excused(case, spec, dut, ref, *, either_way: bool):
    if "zero-taps" not in spec.semantics or not _kernel_got_nonfinite(case, dut):
        return ref
    out = []
    for d, r in zip(flatten_outputs(dut), flatten_outputs(ref)):
        if (isinstance(d, torch.Tensor) and isinstance(r, torch.Tensor) and d.shape == r.shape
                and d.dtype == r.dtype and d.is_floating_point()):
            excused = _skipped(d, r) | (_skipped(r, d) if either_way else torch.zeros_like(d, dtype=torch.bool))
            r = torch.where(excused, d, r)
        out.append(r)
    return tuple(out)


def _kernel_got_nonfinite(case, dut) -> bool:
    """Whether the inputs the kernel got hold nan/inf: a special of the recipes, or under
    autocast a float32 extreme that rounding to the autocast dtype (the dtype of the
    DUT's half-precision outputs) made inf (conv1d with padding on an H100: float32's
    max is inf in float16, CPU's 0 x inf is NaN, cuDNN skipped the padding)."""
    if any(n in NONFINITE_SPECIALS for r in case.inputs for _, n in r.values.specials):
        return True
    if case.variant != "autocast":
        return False
    low = next((t.dtype for t in flatten_outputs(dut) if isinstance(t, torch.Tensor)
                and t.dtype in (torch.float16, torch.bfloat16)), None)
    return low is not None and any(bool((~torch.isfinite(t.to(low))).any())
                                   for t in case.materialize("cpu") if t.is_floating_point())


@oracle("values", stage="case", doc="DUT outputs equal the CPU reference within the dtype's tolerance")
def check_values(obs: Observation) -> Failure | None:
    if isinstance(obs.dut, Raised) or isinstance(obs.ref, Raised):
        return None
    if UNCOMPARABLE & set(obs.spec.semantics):
        return None
    ref = excuse_skipped_zero_taps(obs.case, obs.spec, obs.dut, obs.ref)
    mismatch = compare_outputs(obs.dut, ref, obs.spec, widened=obs.ref_widened,
                               check_attributes="metadata" not in obs.enabled)
    if mismatch is not None and mismatch[0] == "wrong-values":
        # No verdict where C++ leaves a conversion of an input undefined (NaN, inf, a
        # float past an integer's range: oracles/conversions.py; pytorch#160744)
        mismatch = compare_outputs(excuse_undefined(obs.case, obs.spec, obs.dut, ref), ref, obs.spec,
                                   widened=obs.ref_widened, check_attributes="metadata" not in obs.enabled)
    if mismatch is None:
        return None
    kind, message = mismatch
    if kind == "wrong-structure":
        message = f"{obs.target_name} vs CPU: {message}"
    if obs.case.variant == "autocast":
        message += ("\n(under torch.autocast: the CPU reference is float32 on the inputs as autocast rounds them, "
                    "cast to the dtypes the device chose; tolerance widened)")
    elif obs.ref_widened:
        message += "\n(the CPU reference was computed in a wider dtype and cast back; tolerance widened)"
    details = {}
    if kind == "wrong-values":
        profile = error_profile(obs.dut, ref, obs.spec, widened=obs.ref_widened)
        if profile is not None:
            details["error_profile"] = profile
    return Failure(oracle="values", kind=kind, severity="high",
                   title=f"`{obs.spec.name}`{variant_phrase(obs.case)} returns {_WHAT[kind]} on {obs.target_name}",
                   message=message, dedup_key=(kind,), details=details)
