"""Observe one case on the target and on eager CPU: what each side returned or raised.

This runs inside a worker process, called by the function the worker is handed
(:func:`mpsfuzz.oracles.judge.judge_case` runs :func:`observe`, then the oracles). The
executor only observes; it never judges. The two sides never share a tensor: each
materialises its own inputs from the recipe, even when the target's device is the CPU.
Both sides call the op the same way (the case's variant); the DUT additionally runs the
functional form (for the ``variants`` oracle) and the op on ``.contiguous()`` copies
(for the ``layout`` oracle; inputs that share a storage get storages of their own
there, so aliasing counts as an awkward layout) when those oracles are enabled and the
case calls for it.
"""
from __future__ import annotations

import functools
import gc
import os
import re
import warnings

import psutil
import torch

from ..generation import catalogue
from ..generation import dtypes as dt
from ..generation.catalogue import LARGE_FAMILY
from ..generation.opspec import LARGE_REAL_NUMEL, aliased_out_input, written_input
from ..generation.preparation import preparation
from ..generation.recipes import (ALWAYS_MATERIALISABLE, Case, case_bytes, check_materialisable, host_max_bytes,
                                  main_input, out_cast_dtype_of, without_bit)
from . import cpu_kernels, harness_clock
from .dispatch_modes import outside_modes
from .error_kinds import is_device_fault, is_unsupported
from .observation import LeakMeasurement, Observation, Raised, SideResult, output_meta
from .targets import forget_compilations

# Filler of freshly allocated ``out=`` tensors: a kernel that leaves part of ``out``
# unwritten shows up as wrong values (same on every device, so CPU agrees on it).
OUT_FILLER = 77


def as_raised(exc: BaseException) -> Raised:
    """An exception as an observation (the op raised it, or a device fault surfaced)."""
    return Raised(type=type(exc).__name__, message=str(exc).strip()[:2000], unsupported=is_unsupported(exc))


def _to_cpu(out):
    if isinstance(out, torch.Tensor):
        # The host copies no more than it builds (a reduction that keeps billions of
        # elements of a stride-0 input): such a case judges nothing here.
        check_materialisable(out.numel(), dt.name_of(out.dtype), what="an output")
        return out.detach().to("cpu", copy=True)
    if isinstance(out, (tuple, list)):
        return type(out)(_to_cpu(o) for o in out) if not hasattr(out, "_fields") else tuple(_to_cpu(o) for o in out)
    return out


def _input_to_cpu(t):
    """An input as the call left it, on the CPU, its conj or neg bit (issue 38) carried
    over the storage's own bits: a device resolves a neg view with its own negation,
    whose zeros and NaNs may come back with other sign bits than CPU's (CUDA: an
    unmodified complex input filed as modified), so the bit is resolved on the CPU, as
    the input it is compared with is."""
    if not isinstance(t, torch.Tensor) or not (t.is_conj() or t.is_neg()):
        return _to_cpu(t)
    back = _to_cpu(without_bit(t))
    back = back.conj() if t.is_conj() else back
    return back._neg_view() if t.is_neg() else back


def _cast_like(out, dtypes: list):
    """Cast each tensor leaf of ``out`` (depth first) to the matching dtype in ``dtypes``."""
    wanted = iter(dtypes)

    def cast(o):
        if isinstance(o, torch.Tensor):
            want = next(wanted, None)
            return o.to(want) if want is not None and o.dtype != want else o
        if isinstance(o, (tuple, list)):
            return tuple(cast(x) for x in o)
        return o
    return cast(out)


def _leaf_dtypes(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out.dtype]
    if isinstance(out, (tuple, list)):
        return [d for o in out for d in _leaf_dtypes(o)]
    return []


def leaves(out) -> list:
    """The tensors of a (nested) result, depth first."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in leaves(o)]
    return []


# -- calling an op in each variant --------------------------------------------------------

def _seed_rng(case: Case, device="cpu") -> None:
    """Random ops draw from a generator seeded from the case, so a finding replays. The
    seed is scrambled: seeded like the recipe's values, an in-place sampler would
    redraw exactly the input's own values (looking as if it wrote nothing). The CPU side
    seeds the CPU generator alone: it must not touch a device whose context a faulting
    kernel may have left unusable."""
    seed = case.inputs[0].values.seed if case.inputs else 0
    seed = (seed * 6364136223846793005 + 1442695040888963407) & 0xFFFF_FFFF_FFFF
    if torch.device(device).type == "cpu":
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


# The variant wrappers are made once per op function and take every tensor as an
# argument: a target that keeps state per function (a compiled target caches one
# torch.compile wrapper per function) would otherwise keep one wrapper per call, and
# with it the call's tensors (each ``out=`` tensor captured in a fresh closure was
# kept alive: an "out= leaks" finding for every op on cuda-compiled, mpsfuzz's own).

@functools.lru_cache(maxsize=None)
def _method_caller(name: str):
    def call(*inputs, **kwargs):
        return getattr(inputs[0], name)(*inputs[1:], **kwargs)
    call.__name__ = name
    return call


@functools.lru_cache(maxsize=None)
def _into_self_caller(fn):
    def into_self(*a, **k):
        fn(*a, **k, out=a[0])
        return a[0]
    return into_self


@functools.lru_cache(maxsize=None)
def _out_caller(fn):
    def with_out(*a, out, **k):
        fn(*a, **k, out=out)
        return out
    return with_out


def _strided_out(like: torch.Tensor, how: str) -> torch.Tensor:
    """An ``out=`` tensor for a result like ``like``: dense ("out"), non-contiguous with
    the right shape ("out-strided": last two dims transposed, or every other element, or
    a storage offset for 0-d), or of the wrong size ("out-resized": torch resizes it)."""
    device, dtype, shape = like.device, like.dtype, tuple(like.shape)
    fill = True if dtype == torch.bool else OUT_FILLER
    if how == "out-resized":
        return torch.full((0,), fill, dtype=dtype, device=device)
    if how == "out" or like.numel() <= 1 and len(shape) > 0:
        return torch.full(shape, fill, dtype=dtype, device=device)
    if len(shape) == 0:
        return torch.full((2,), fill, dtype=dtype, device=device)[1]
    if len(shape) >= 2:
        swapped = shape[:-2] + (shape[-1], shape[-2])
        return torch.full(swapped, fill, dtype=dtype, device=device).transpose(-1, -2)
    return torch.full((2 * shape[0],), fill, dtype=dtype, device=device)[::2]


def _cast_out(like: torch.Tensor, case: Case) -> torch.Tensor:
    """A dense ``out=`` of ``like``'s shape in the dtype ``out-cast`` writes into: the
    main input's dtypes.OUT_CASTS (one dtype for the case on every device, whatever
    dtype a widened reference computes in)."""
    name = out_cast_dtype_of(case)
    if name is None:
        raise VariantNotApplicable("no out= dtype to cast into for this input dtype")
    dtype = dt.to_torch(name)
    return torch.full(tuple(like.shape), True if dtype == torch.bool else OUT_FILLER, dtype=dtype, device=like.device)


class VariantNotApplicable(Exception):
    """The variant cannot be formed for this case (e.g. a non-tensor result for out=)."""


def call_variant(spec, case: Case, inputs: list, kwargs: dict, runner=None, functional=None):
    """Call the op as ``case.variant`` says; returns the raw (uncanonicalised) result.
    ``functional`` is the functional result on the same device when already known
    (``out=`` needs its shapes and dtypes)."""
    variant = case.variant
    run = runner or (lambda fn, *a, **k: fn(*a, **k))
    if variant == "functional":
        return run(spec.fn, *inputs, **kwargs)
    if variant == "grad":
        raise ValueError("the grad variant is run by forward_backward")
    if variant == "autocast":
        device_type = next((t.device.type for t in inputs if isinstance(t, torch.Tensor)), "cpu")
        with torch.autocast(device_type=device_type, dtype=autocast_dtype(device_type)):
            return run(spec.fn, *inputs, **kwargs)
    if variant == "method":
        return run(_method_caller(spec.method), *inputs, **kwargs)
    if variant == "inplace":
        run(_method_caller(spec.inplace), *inputs, **kwargs)
        return inputs[0]
    aliased = aliased_out_input(variant)
    if aliased is not None:
        if functional is None:
            functional = run(spec.fn, *inputs, **kwargs)
        into = inputs[aliased] if aliased < len(inputs) else None
        if not (isinstance(functional, torch.Tensor) and isinstance(into, torch.Tensor)
                and functional.shape == into.shape and functional.dtype == into.dtype):
            raise VariantNotApplicable(f"out= aliasing input {aliased} needs a result of its shape and dtype")
        if aliased == 0:
            return run(_into_self_caller(spec.fn), *inputs, **kwargs)
        return run(_out_caller(spec.fn), *inputs, out=into, **kwargs)
    if variant.startswith("out"):
        if functional is None:
            functional = run(spec.fn, *inputs, **kwargs)
        results = leaves(functional)
        if not results or (not isinstance(functional, torch.Tensor) and len(results) != len(functional)):
            raise VariantNotApplicable("out= needs a tensor or a flat tuple of tensors")
        outs = [_strided_out(leaf, variant) if variant != "out-cast" else _cast_out(leaf, case) for leaf in results]
        target = outs[0] if isinstance(functional, torch.Tensor) else tuple(outs)
        return run(_out_caller(spec.fn), *inputs, out=target, **kwargs)
    raise ValueError(f"unknown variant {variant!r}")


def autocast_dtype(device_type: str) -> torch.dtype:
    """The dtype ``torch.autocast(device_type)`` lowers to by default (float16 on CUDA and
    MPS, bfloat16 on CPU)."""
    try:
        return torch.get_autocast_dtype(device_type)
    except (AttributeError, RuntimeError):
        return torch.bfloat16 if device_type == "cpu" else torch.float16


def grad_inputs(spec, inputs: list) -> list[int]:
    """The inputs the grad variant differentiates: those the spec lists (default: all) of a
    differentiable dtype."""
    chosen = spec.grad_inputs if spec.grad_inputs is not None else range(len(inputs))
    return [i for i in chosen if i < len(inputs) and inputs[i].dtype in dt.GRAD_TORCH_DTYPES]


def upstream_gradient(leaf_shape, dtype, index: int, seed: int) -> torch.Tensor:
    """The same upstream gradient on both sides: seeded, on the CPU, then moved."""
    gen = torch.Generator().manual_seed((seed + 7919 * (index + 1)) & 0xFFFF_FFFF)
    return torch.randn(tuple(leaf_shape), generator=gen, dtype=torch.float64).to(dtype)


@preparation
def _backward(case: Case, inputs: list, out, wrt: list[int], upstream=None):
    """Gradients of ``out`` w.r.t. ``inputs[wrt]`` with seeded upstream gradients (passed
    through ``upstream`` where given: the arbiter's absolute values); None for an input
    that does not influence the output. Never compiled (issue 37): on a compiled target
    the forward's graph is compiled with its backward, which autograd runs from here."""
    diff = [o for o in leaves(out) if o.requires_grad and (o.is_floating_point() or o.is_complex())]
    if not diff or not wrt:
        return [None] * len(wrt)
    seed = case.inputs[0].values.seed if case.inputs else 0
    with outside_modes():   # made on the host, as on every device: not the target's kernels
        grads_out = [upstream_gradient(o.shape, o.dtype, i, seed).to(o.device) for i, o in enumerate(diff)]
        if upstream is not None:
            grads_out = [upstream(g) for g in grads_out]
    return list(torch.autograd.grad(diff, [inputs[i] for i in wrt], grads_out, allow_unused=True))


def run_side(spec, case: Case, kwargs: dict, device, runner=None, synchronize=None,
             inputs=None, functional=None, keep_inputs: bool = False, upstream=None) -> SideResult:
    """One side's run: outputs (CPU copies, canonicalised), their metadata, gradients
    for the grad variant, and with ``keep_inputs`` the inputs as the call left them (and
    an in-place call's whole base buffer): what the ``variants`` oracle reads of the
    DUT's call. Copying them back for every other side too cost a fifth of a small
    op's judging."""
    if inputs is None:
        inputs = case.materialize(device)
    wrt: list[int] = []
    if case.variant == "grad":
        wrt = grad_inputs(spec, inputs)
        for i in wrt:
            inputs[i].requires_grad_(True)
    if "random" in spec.semantics:
        _seed_rng(case, device)
    # The canonical form reads the inputs as the op got them. An op that overwrites an
    # input (CUDA's eig of a transposed matrix) is the variants oracle's finding; read
    # after the call, the overwritten input also made the op's values look wrong, one bug
    # filed twice with a repro that could not show the second.
    given = inputs if spec.canonicalise is None and not spec.nan_propagates else [_snapshot(t) for t in inputs]
    try:
        grads = None
        if case.variant == "grad":
            # Forward and backward both run inside the target (a fault-injecting or
            # compiling target sees the backward kernels too).
            def forward_backward(*a, **k):
                out = spec.fn(*a, **k)
                return out, _backward(case, list(a), out, wrt, upstream)
            raw, grads = (runner or (lambda fn, *a, **k: fn(*a, **k)))(forward_backward, *inputs, **kwargs)
            if spec.judged_grads is not None:
                # cut where they are made (the @huge class: a few rows of billions of
                # elements), before the copy to the host below
                grads = spec.judged_grads(case, inputs, grads, wrt)
        else:
            raw = call_variant(spec, case, inputs, kwargs, runner, functional)
        if synchronize:
            synchronize()
    except VariantNotApplicable:
        raise
    except Exception as exc:  # any error of the op is an observation, not ours
        return SideResult(outputs=as_raised(exc))
    meta = output_meta(raw)
    if spec.private_outputs_from is not None and isinstance(meta, list):
        meta = meta[:spec.private_outputs_from]
    base_after = None
    written = written_input(case.variant)
    if keep_inputs and written is not None and written < len(inputs) and isinstance(inputs[written], torch.Tensor) \
            and inputs[written]._base is not None:
        base_after = _to_cpu(inputs[written]._base)
    with torch.no_grad():
        detached = _detach(raw)
        out = spec.canonical(given, detached, kwargs)
        return SideResult(outputs=_to_cpu(out), meta=meta,
                          grads=None if grads is None else [None if g is None else _to_cpu(g) for g in grads],
                          inputs_after=[_input_to_cpu(t) if _small(t) else None for t in inputs] if keep_inputs else None,
                          raw=raw,
                          base_after=base_after)


# Inputs of more elements than this (the ``large`` family's stride-0 views of billions
# of elements) are not copied back to the CPU after the call: the copy would be dense.
INPUTS_AFTER_MAX_NUMEL = 1 << 24


def _small(t) -> bool:
    if not isinstance(t, torch.Tensor):
        return True
    size = t.numel() * t.element_size()
    return t.numel() <= INPUTS_AFTER_MAX_NUMEL and (size <= ALWAYS_MATERIALISABLE or size <= host_max_bytes())


def _snapshot(t):
    """A copy of a small input tensor, kept through the call (a large one, a stride-0
    view of billions of elements, is the tensor itself: a copy would be dense)."""
    return t.detach().clone() if isinstance(t, torch.Tensor) and _small(t) else t


def _detach(out):
    if isinstance(out, torch.Tensor):
        return out.detach()
    if isinstance(out, (tuple, list)):
        return tuple(_detach(o) for o in out)
    return out


# -- the CPU reference ----------------------------------------------------------------------

# Output dtypes by (op function, argument kinds, input dtypes, 0-dim inputs). Running an op on
# the meta device goes through Python decompositions: half a millisecond a case, a tenth
# of all judging on elementwise and reduction (where CPU lacks many half and unsigned
# kernels). Dtypes follow from the input dtypes, the arguments, which inputs are 0-dim
# (they promote as scalars) and the kinds of scalar arguments (bool, int, float,
# complex promote by kind, not by value), not from sizes or values: keyed on those,
# most fresh cases hit the cache (keyed on shapes and values, nearly all missed it). A
# case the meta run rejects (no dtypes) is remembered for its shapes and values alone.
# Bounded.
_EXPECTED: dict = {}
_EXPECTED_MAX = 4096


def _scalar_kind(value):
    return type(value) if isinstance(value, (bool, int, float, complex)) else value


def _expected_dtypes(spec, case: Case, kwargs) -> list:
    """The output dtypes the op has at the original dtypes, from the meta device (no
    kernels run); where meta cannot run the op, widened dtypes map back by name."""
    by_kind = (spec.fn, spec.canonicalise, tuple((k, _scalar_kind(v)) for k, v in case.kwargs),
               tuple((r.dtype, r.rank == 0) for r in case.inputs))
    by_shape = (spec.fn, spec.canonicalise, case.kwargs, tuple((r.dtype, r.shape) for r in case.inputs))
    try:
        known = _EXPECTED.get(by_kind) or _EXPECTED.get(by_shape)
    except TypeError:   # an argument that cannot be hashed: worked out every time
        return list(_meta_dtypes(spec, case, kwargs))
    if known is None:
        known = _meta_dtypes(spec, case, kwargs)
        if len(_EXPECTED) >= _EXPECTED_MAX:
            _EXPECTED.clear()
        _EXPECTED[by_kind if known else by_shape] = known
    return list(known)


def _meta_dtypes(spec, case: Case, kwargs) -> tuple:
    try:
        meta = [r.materialize("cpu").to("meta") for r in case.inputs]
        out = spec.fn(*meta, **kwargs)
        out = spec.canonical(meta, out, kwargs)
        return tuple(_leaf_dtypes(out))
    except Exception:
        return ()


def _cast_back_by_name(out, widen: set, dut_dtypes: list | None = None):
    """Widened leaves in the narrow dtype again. An int64 leaf is left alone (it is
    usually indices: nonzero, argmax), unless the DUT's own leaf there is the narrow
    dtype that was widened to int64: a difference that is exactly mpsfuzz's own widening
    says nothing about the op (an H200 run, docs/real-findings.md: uint32 ``repeat_interleave``, where meta cannot
    run the op, was filed as CUDA returning the wrong dtype)."""
    back = {dt.to_torch(dt.WIDER[name]): dt.to_torch(name) for name in widen
            if dt.WIDER[name] != "int64"}
    leaves = _leaf_dtypes(out)
    if dut_dtypes is not None and len(dut_dtypes) == len(leaves):
        ours = {(dt.to_torch(dt.WIDER[name]), dt.to_torch(name)) for name in widen}
        return _cast_like(out, [d if (w, d) in ours else back.get(w, w) for w, d in zip(leaves, dut_dtypes)])
    return _cast_like(out, [back.get(w, w) for w in leaves])


def run_reference(case: Case, spec, kwargs, *, dut_outputs=None, dut_device="cpu") -> tuple[SideResult, bool]:
    """CPU eager result in the case's variant; where CPU has no kernel for the dtype,
    recompute in the next wider dtype and cast back (returns widened=True so the oracle
    can say so). A user's kernel is judged against its declared reference, not itself
    (``OpSpec.as_reference``). The autocast variant's reference is the functional
    form in float32 on inputs rounded as autocast on ``dut_device`` rounds them, cast to
    the dtypes of ``dut_outputs`` (those the device's autocast chose), also widened."""
    if case.variant == "autocast":
        return _autocast_reference(case, spec, kwargs, dut_outputs, torch.device(dut_device).type), True
    spec = spec.as_reference()
    inputs = spec.reference_inputs(case) if spec.reference_inputs is not None else None
    first = run_side(spec, case, kwargs, "cpu", inputs=inputs)
    widen = {r.dtype for r in case.inputs if r.dtype in dt.WIDER}
    if not (isinstance(first.outputs, Raised) and first.outputs.unsupported and widen):
        return first, False
    if "uint64" in widen and _past_int64(case):
        # int64 cannot hold uint64's top half: a reference computed through it is no
        # witness (cuda-compiled's correct fmax of 2^64 - 1 was filed against one that
        # read it as -1). CPU has no kernel: the case is not judged here.
        return first, False
    # (the rows the reference sees, where it sees only those: never the whole input)
    base = [t.detach() for t in inputs] if inputs is not None else case.materialize("cpu")
    wide_inputs = [t.to(dt.to_torch(dt.WIDER[r.dtype])) if r.dtype in widen else t
                   for r, t in zip(case.inputs, base)]
    wide = run_side(spec, case, kwargs, "cpu", inputs=wide_inputs)
    if isinstance(wide.outputs, Raised):
        return first, False
    expected = _expected_dtypes(spec, case, kwargs)
    if expected and len(expected) == len(_leaf_dtypes(wide.outputs)):
        outputs = _cast_like(wide.outputs, expected)
    else:
        dut_dtypes = None if dut_outputs is None or isinstance(dut_outputs, Raised) else _leaf_dtypes(dut_outputs)
        outputs = _cast_back_by_name(wide.outputs, widen, dut_dtypes)
    grads = wide.grads
    if grads is not None:
        wrt = grad_inputs(spec, base)
        grads = [None if g is None else g.to(dt.to_torch(case.inputs[i].dtype)) for g, i in zip(grads, wrt)]
    # Metadata of a widened run says nothing about the narrow dtype's memory format.
    return SideResult(outputs=outputs, meta=None, grads=grads, inputs_after=None), True


def judged_inputs(spec, case: Case) -> tuple:
    """(the spec, the CPU inputs) the reference ran on: where the op's reference sees
    only some rows of the inputs (``reference_inputs``: the @huge class), those rows and
    the reference function, so that a check that reruns the op on the CPU (the grads
    oracle's kink checks) builds a few rows, not billions of elements, and meets the
    gradients' positions where the reference's were; else the case's own."""
    if spec.reference_inputs is not None:
        rows = spec.reference_inputs(case)
        if rows is not None:
            return spec.as_reference(), rows
    return spec, case.materialize("cpu")


def _past_int64(case: Case) -> bool:
    """Whether a uint64 input holds a value of 2^63 or more."""
    return any(t.dtype == torch.uint64 and t.numel() and bool((t.contiguous().view(torch.int64) < 0).any())
               for t in case.materialize("cpu"))


def _autocast_reference(case: Case, spec, kwargs, dut_outputs, device_type: str) -> SideResult:
    # Autocast hands the kernel each float32 or half input rounded to its dtype: a
    # float32 extreme is inf in float16 on both sides, and the reference computes on what
    # the kernel got, in float32. A float64 input autocast leaves as it is, on every
    # device (mm of a float32 and a float64 operand then refuses the mixed dtypes on CPU
    # too, where a reference of both rounded had returned a result).
    low = autocast_dtype(device_type)
    functional = Case(case.op, case.inputs, case.kwargs)
    inputs = [t.to(low).to(torch.float32) if t.is_floating_point() and t.dtype != torch.float64 else t
              for t in case.materialize("cpu")]
    side = run_side(spec.as_reference(), functional, kwargs, "cpu", inputs=inputs)
    outputs = side.outputs
    if not isinstance(outputs, Raised) and dut_outputs is not None and not isinstance(dut_outputs, Raised):
        want = _leaf_dtypes(dut_outputs)
        if len(want) == len(_leaf_dtypes(outputs)):
            outputs = _cast_like(outputs, want)
    return SideResult(outputs=outputs, meta=None, grads=None, inputs_after=None)


def reference_rejection(case: Case, spec) -> str | None:
    """Why the CPU reference rejects ``case`` (its error, one line), or None where it
    accepts it (``mpsfuzz ops --stats``: generation/validity.py)."""
    try:
        side, _ = run_reference(case, spec, case.kwargs_dict())
    except VariantNotApplicable as exc:
        return f"variant not applicable: {exc}"
    if not isinstance(side.outputs, Raised):
        return None
    message = side.outputs.message.strip()
    return f"{side.outputs.type}: {message.splitlines()[0][:160] if message else ''}"


# -- the case ---------------------------------------------------------------------------------

def _wants_functional(case: Case, enabled) -> bool:
    # (autocast computes in another precision: no variant of the functional result)
    return case.variant not in ("functional", "grad", "autocast") and "variants" in enabled


def _wants_contiguous(spec, case: Case, enabled) -> bool:
    return (case.variant == "functional" and "layout" in enabled
            and any(not r.is_plain() for r in case.inputs)
            and not ({"random", "undefined-values"} & set(spec.semantics))
            # the large family's views of billions of elements have no contiguous copy to
            # run on; a user's kernel that also takes large inputs keeps the oracle on the rest
            and not ("large" in spec.semantics and (spec.family == LARGE_FAMILY
                                                    or any(r.numel > LARGE_REAL_NUMEL for r in case.inputs))))


def contiguous_copies(case: Case, device) -> list:
    """The case's inputs on ``device`` as contiguous tensors of their own: inputs that
    share a storage or sit at an offset get fresh copies (``Case.copied_inputs``)."""
    fresh = case.copied_inputs()
    resolved = [t.resolve_conj().resolve_neg() for t in case.materialize(device)]
    return [t.clone(memory_format=torch.contiguous_format) if i in fresh else t.contiguous()
            for i, t in enumerate(resolved)]


def _run_dut(case: Case, spec, kwargs, target, enabled):
    """The DUT's part of a case: (the call, the functional form or None, the call on
    contiguous copies or None). Raw device outputs are dropped before returning, so that
    nothing of the case stays allocated on the device (the leak oracle measures that)."""
    functional = contiguous = None
    dut_inputs = case.materialize(target.device)
    dut_functional = None
    if case.variant.startswith("out") or _wants_functional(case, enabled):
        functional_case = Case(case.op, case.inputs, case.kwargs)
        functional = run_side(spec, functional_case, kwargs, target.device, runner=target.run,
                              synchronize=target.synchronize)
        if not isinstance(functional.outputs, Raised):
            dut_functional = functional.raw
    dut = run_side(spec, case, kwargs, target.device, runner=target.run,
                   synchronize=target.synchronize, inputs=dut_inputs, functional=dut_functional, keep_inputs=True)
    if _wants_contiguous(spec, case, enabled) and not isinstance(dut.outputs, Raised):
        contiguous = run_side(spec, case, kwargs, target.device, runner=target.run,
                              synchronize=target.synchronize, inputs=contiguous_copies(case, target.device))
    for side in (dut, functional, contiguous):
        if side is not None:
            side.raw = None
    return dut, functional, contiguous


# The leak measurement (judged by the ``leak`` oracle, oracles/leak.py): growth per call
# that counts (after the first call: caches are built once). On the device allocator:
# the bytes of the case's outputs, capped at DEVICE_BYTES_PER_CALL; process memory (RSS):
# RSS_BYTES_PER_CALL; confirmed over REPEATS more calls.
DEVICE_BYTES_PER_CALL = 64 * 1024
RSS_BYTES_PER_CALL = 4 * 1024 * 1024
REPEATS = 3

_RSS = None             # (pid, reader): the reader of the process that made it
_CALLED: set = set()   # (op, variant, dtypes) already called in this process


def _rss_reader():
    """A function giving this process's RSS in bytes. On Linux it reads /proc/self/statm
    through a descriptor kept open (a case reads RSS twice, and psutil opens the file
    each time: a tenth of a small op's cost); elsewhere (macOS) psutil."""
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        page = os.sysconf("SC_PAGE_SIZE")
        int(os.pread(fd, 128, 0).split()[1])
    except (OSError, ValueError, IndexError, AttributeError):
        process = psutil.Process()
        return lambda: process.memory_info().rss
    return lambda: int(os.pread(fd, 128, 0).split()[1]) * page


@functools.lru_cache(maxsize=1)
def _heap_release():
    """The C allocator's call that hands its free pages back to the OS (glibc's
    ``malloc_trim``, macOS's ``malloc_zone_pressure_relief``), or None."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
    except OSError:
        return None
    if hasattr(libc, "malloc_trim"):
        return lambda: libc.malloc_trim(0)
    if hasattr(libc, "malloc_zone_pressure_relief"):
        libc.malloc_zone_pressure_relief.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        return lambda: libc.malloc_zone_pressure_relief(None, 0)
    return None


def _memory(target, *, collect: bool = False) -> tuple[int, int]:
    """(target allocator bytes, process RSS bytes). Reference counting frees a case's
    tensors at once; a full garbage collection only when the numbers look like a leak
    (cheap in a worker, which froze what it loaded at start: worker.py), and then the
    allocator's free pages go back to the OS, so that RSS counts live memory: a call that
    allocates and frees tens of MiB in small blocks (cat_many's 131,073 slices) leaves the
    heap a few MiB larger now and then, which repeated calls would read as a leak."""
    global _RSS
    if collect:
        gc.collect()
        release = _heap_release()
        if release is not None:
            release()
    target.synchronize()
    try:
        device = int(target.memory_allocated())
    except Exception:  # a target without an allocator to ask
        device = 0
    if _RSS is None or _RSS[0] != os.getpid():   # made before a fork: /proc/self was the parent
        _RSS = (os.getpid(), _rss_reader())
    return device, _RSS[1]()


def _output_bytes(outputs) -> int:
    return sum(t.numel() * t.element_size() for t in leaves(outputs) if isinstance(t, torch.Tensor))


def _compilations() -> int:
    """How many times torch.compile has compiled in this process (frames and lazy
    backward graphs); 0 where it was never imported."""
    import sys
    if "torch._dynamo" not in sys.modules:
        return 0
    try:
        from torch._dynamo.utils import counters
    except Exception:  # pragma: no cover - a torch without the counters
        return 0
    return sum(counters["frames"].values()) + sum(counters["aot_autograd"].values())


def _leak_measure(case: Case, spec, kwargs, target, before: tuple[int, int],
                  output_bytes: int) -> LeakMeasurement | None:
    """Memory the case kept; when past the leak thresholds, confirmed over repeated calls
    (a first call may build caches once): what each repeated call kept.

    The device threshold follows the case: a call that keeps as little as one
    output-sized tensor each time is a leak (capped at DEVICE_BYTES_PER_CALL for large
    outputs), because the allocator counts exact live bytes; the repeats, each of
    which must keep at least that much again, tell a leak from a cache built once."""
    device_threshold = max(1, min(DEVICE_BYTES_PER_CALL, output_bytes))
    # Process memory is the host allocator's, which keeps freed blocks of a case's size
    # (a large-class case of 16 MiB grew RSS by 5-16 MiB a call on CPU, and each was a
    # "leak" in the findings' budget): a leak there must keep more than the case makes.
    rss_threshold = max(RSS_BYTES_PER_CALL, case_bytes(case) + output_bytes)
    # The first call of an op in a process loads its kernels and libraries (CUDA's lazy
    # module loading alone adds megabytes of RSS): process memory counts from the second
    # call on. The device allocator counts at once (a leaking fault shows on any call).
    key = (case.op, case.variant, tuple(r.dtype for r in case.inputs))
    warm = key in _CALLED
    _CALLED.add(key)

    def past(now, then, rss_counts: bool) -> bool:
        return (now[0] - then[0] >= device_threshold
                or (rss_counts and now[1] - then[1] >= rss_threshold))
    if not past(_memory(target), before, warm):
        return None
    after = _memory(target, collect=True)
    if not past(after, before, warm):
        return None
    kept = []
    previous = after
    compiled_before = _compilations()
    for _ in range(REPEATS):
        side = run_side(spec, case, kwargs, target.device, runner=target.run, synchronize=target.synchronize)
        side.raw = None
        if isinstance(side.outputs, Raised):
            return None
        del side
        now = _memory(target)  # reference counting has freed the call's tensors already
        kept.append((now[0] - previous[0], now[1] - previous[1]))
        previous = now
    end = _memory(target, collect=True)
    if _compilations() != compiled_before:
        # The repeated calls compiled (a torch.compile'd target compiles each new call
        # site): what they kept is the compiler's caches, not a leak of the op.
        return None
    mean = ((end[0] - after[0]) / REPEATS, (end[1] - after[1]) / REPEATS)
    return LeakMeasurement(device_first=after[0] - before[0], rss_first=after[1] - before[1], repeats=REPEATS,
                           device_threshold=device_threshold, rss_threshold=rss_threshold,
                           # A leak keeps memory on every call: the least any repeated call
                           # kept (and no more than the mean once garbage is collected).
                           device_per_call=min(min(d for d, _ in kept), mean[0]),
                           rss_per_call=min(min(r for _, r in kept), mean[1]))


_LACKS_KERNEL = re.compile(r"not implemented for '|no kernel|could not run 'aten::", re.IGNORECASE)


def lacks_kernel(exc: BaseException, dtype_names=()) -> bool:
    """An error that says a kernel is missing for a dtype (or a backend), or a bare
    NotImplementedError where the probe found this CPU lacking kernels for one of
    ``dtype_names``."""
    if _LACKS_KERNEL.search(str(exc)):
        return True
    return isinstance(exc, NotImplementedError) and bool(cpu_kernels.lacking_for(dtype_names))


def unsupported_here(case: Case, exc: BaseException) -> str | None:
    """Why this torch cannot judge ``case``, when ``exc`` (raised by mpsfuzz's *own*
    processing of the case: comparing, canonicalising, the float64 arbiter, all on the
    CPU or the device) says a kernel is missing; None for any other error."""
    dtypes = cpu_kernels.case_dtypes(case)
    if not lacks_kernel(exc, dtypes):
        return None
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    lacking = cpu_kernels.describe(dtypes)
    return f"{first} (eager CPU of torch {torch.__version__} lacks: {lacking})" if lacking else first


def functional_reference(obs: Observation) -> SideResult | None:
    """The functional form on CPU (the ``variants`` oracle's), or None where the case ran
    no functional form on the DUT. Run on first use and kept in ``obs.cache``: only a
    variant that disagrees with the DUT's functional form needs it (it tells whether the
    functional form is the wrong one), and running it for every case cost a CPU call and
    its inputs in a fifth of the cases."""
    if "ref_functional" not in obs.cache:
        side = None
        if obs.dut_functional is not None and _wants_functional(obs.case, obs.enabled):
            case = obs.case
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                side, _ = run_reference(Case(case.op, case.inputs, case.kwargs), obs.spec, case.kwargs_dict())
        obs.cache["ref_functional"] = side
    return obs.cache["ref_functional"]


def cpu_side(obs: Observation) -> SideResult | None:
    """Eager CPU's run of the case's own call with the inputs as the call left them
    (and an in-place call's whole base buffer): what the ``variants`` oracle reads of
    the DUT's call, read of CPU's, to tell a bug of the target from one of PyTorch
    itself (CPU does the same). Run on first use and kept in ``obs.cache``; None where
    CPU's reference was not CPU's own call (a widened dtype, a user's reference)."""
    if "cpu_side" not in obs.cache:
        side = None
        if not obs.ref_widened and obs.spec.reference_fn is None and obs.case.variant != "autocast":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    side = run_side(obs.spec, obs.case, obs.case.kwargs_dict(), "cpu", keep_inputs=True)
                except VariantNotApplicable:
                    side = None
            if side is not None:
                side.raw = None
        obs.cache["cpu_side"] = side
    return obs.cache["cpu_side"]


def _compile_first(case: Case, spec, kwargs, target, enabled) -> None:
    """The DUT's calls of ``case`` once, on inputs of their own, and then the target's
    compilations forgotten: the case's calls that follow are their second compilation
    (what they return here is not judged)."""
    try:
        _run_dut(case, spec, kwargs, target, enabled)
    except Exception:  # the first compilation's own outcome is not the case's
        pass
    forget_compilations(target)


def observe(case: Case, target, enabled, *, compile_twice: bool = False) -> Observation | None:
    """Run ``case`` on both sides: the DUT (plus its functional form and contiguous
    copies where the ``variants`` and ``layout`` oracles, named in ``enabled``, need
    them, and the leak measurement where ``leak`` is enabled) and the CPU reference.
    The op's own errors are observations; a sticky device error marks the observation
    ``poisoned``. None where the case's variant cannot be formed on the DUT (an
    ``out=`` for a non-tensor result). ``compile_twice``: a compiled target's calls are
    observed on their second compilation (``_compile_first``), as a worker meets them
    after a reset."""
    spec = catalogue.get(case.op)
    kwargs = case.kwargs_dict()
    enabled = tuple(enabled)
    leak = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if compile_twice:
            _compile_first(case, spec, kwargs, target, enabled)
        before = _memory(target) if "leak" in enabled else None
        try:
            dut, functional, contiguous = _run_dut(case, spec, kwargs, target, enabled)
        except VariantNotApplicable:
            return None
        faulted = any(isinstance(side, SideResult) and isinstance(side.outputs, Raised)
                      and is_device_fault(side.outputs.message) for side in (dut, functional, contiguous))
        if before is not None and not isinstance(dut.outputs, Raised) and not faulted:
            leak = _leak_measure(case, spec, kwargs, target, before, _output_bytes(dut.outputs))
        try:
            # Where the DUT raised before the variant could be formed (no kernel for
            # the dtype), CPU's result may show that it cannot be (out= aliasing an
            # input of another shape): the case is no case, as on the DUT's side.
            with harness_clock.on_reference():
                ref, widened = run_reference(case, spec, kwargs, dut_outputs=dut.outputs, dut_device=target.device)
        except VariantNotApplicable:
            return None
    obs = Observation(case=case, spec=spec, target_name=target.name, dut=dut.outputs, ref=ref.outputs,
                      ref_widened=widened, enabled=enabled, dut_side=dut, ref_side=ref,
                      dut_functional=functional, dut_contiguous=contiguous, poisoned=faulted, target=target)
    if leak is not None:
        obs.cache["leak"] = leak
    return obs
