"""Execute one case on the target and on eager CPU, then run the case oracles.

This runs inside a worker process. The two sides never share a tensor: each
materialises its own inputs from the recipe, even when the target's device is the CPU.
"""
from __future__ import annotations

import warnings

import torch

from ..oracles import all_oracles
from ..oracles.observation import Observation, Raised
from . import catalogue
from . import dtypes as dt
from .recipes import Case

_UNSUPPORTED_HINTS = ("not implemented for", "not currently implemented", "not supported on mps",
                      "is not supported on", "not supported for", "unsupported dtype",
                      "no kernel", "does not support", "not yet supported",
                      "could not run 'aten::")


def is_unsupported(exc: BaseException) -> bool:
    """'This device/dtype has no kernel for the op': counted, never a bug."""
    text = str(exc).lower()
    return isinstance(exc, NotImplementedError) or any(h in text for h in _UNSUPPORTED_HINTS)


def _raised(exc: BaseException) -> Raised:
    return Raised(type=type(exc).__name__, message=str(exc).strip()[:2000], unsupported=is_unsupported(exc))


def _to_cpu(out):
    if isinstance(out, torch.Tensor):
        return out.detach().to("cpu", copy=True)
    if isinstance(out, (tuple, list)):
        return type(out)(_to_cpu(o) for o in out) if not hasattr(out, "_fields") else tuple(_to_cpu(o) for o in out)
    return out


def _cast_like(out, dtypes: list):
    """Cast each tensor leaf of ``out`` (depth first) to the matching dtype in ``dtypes``."""
    leaves = iter(dtypes)

    def cast(o):
        if isinstance(o, torch.Tensor):
            want = next(leaves, None)
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


def _expected_dtypes(spec, case: Case, kwargs) -> list:
    """The output dtypes the op has at the original dtypes, from the meta device (no
    kernels run); where meta cannot run the op, widened dtypes map back by name."""
    try:
        meta = [r.materialize("cpu").to("meta") for r in case.inputs]
        return _leaf_dtypes(_call(spec, meta, kwargs))
    except Exception:
        return []


def _cast_back_by_name(out, widen: set):
    back = {dt.to_torch(dt.WIDER[name]): dt.to_torch(name) for name in widen}
    if isinstance(out, torch.Tensor):
        return out.to(back[out.dtype]) if out.dtype in back else out
    if isinstance(out, (tuple, list)):
        return tuple(_cast_back_by_name(o, widen) for o in out)
    return out


def _call(spec, inputs, kwargs, runner=None):
    out = runner(spec.fn, *inputs, **kwargs) if runner else spec.fn(*inputs, **kwargs)
    if spec.canonicalise is not None:
        out = spec.canonicalise(inputs, out)
    return out


def run_reference(case: Case, spec, kwargs) -> tuple[object, bool]:
    """CPU eager result; where CPU has no kernel for the dtype, recompute in the next
    wider dtype and cast back (returns widened=True so the oracle can say so)."""
    inputs = case.materialize("cpu")
    try:
        return _call(spec, inputs, kwargs), False
    except Exception as exc:  # any error of the op is an observation, not ours
        first = _raised(exc)
        widen = {r.dtype for r in case.inputs if r.dtype in dt.WIDER}
        if not (first.unsupported and widen):
            return first, False
    wide_inputs = [t.to(dt.to_torch(dt.WIDER[r.dtype])) if r.dtype in widen else t
                   for r, t in zip(case.inputs, inputs)]
    try:
        out = _call(spec, wide_inputs, kwargs)
    except Exception:
        return first, False
    expected = _expected_dtypes(spec, case, kwargs)
    if expected and len(expected) == len(_leaf_dtypes(out)):
        return _cast_like(out, expected), True
    return _cast_back_by_name(out, widen), True


def execute(case: Case, target, oracle_names) -> dict:
    """Run ``case`` on both sides and the enabled case oracles; a JSON-able summary."""
    spec = catalogue.get(case.op)
    kwargs = case.kwargs_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dut_inputs = case.materialize(target.device)
            dut = _to_cpu(_call(spec, dut_inputs, kwargs, runner=target.run))
            target.synchronize()
        except Exception as exc:
            dut = _raised(exc)
        ref, widened = run_reference(case, spec, kwargs)
    obs = Observation(case=case, spec=spec, target_name=target.name, dut=dut, ref=ref, ref_widened=widened)
    oracles = all_oracles()
    failures = []
    for name in oracle_names:
        o = oracles[name]
        if o.stage == "case":
            failure = o.check(obs)
            if failure is not None:
                failures.append(failure.to_json())
    return {
        "valid": not isinstance(ref, Raised),
        "unsupported": isinstance(dut, Raised) and dut.unsupported and not isinstance(ref, Raised),
        "unsupported_message": dut.message.splitlines()[0][:200] if isinstance(dut, Raised) and dut.unsupported else "",
        "ref_widened": widened,
        "failures": failures,
    }
