"""What execution produces: an :class:`Observation` of a case (the case, the op spec, each
side's outputs or error), or a :class:`ProcessEvent` when the worker running it died or hung.

The oracles (:mod:`mpsfuzz.oracles`) judge these; execution never judges."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class Raised:
    type: str
    message: str
    unsupported: bool = False   # "not implemented for this device/dtype", not a bug


@dataclass(frozen=True)
class LeafMeta:
    """An output tensor's attributes as the op returned it (before any copy)."""

    shape: tuple[int, ...]
    dtype: str
    memory_format: str          # contiguous, channels_last, channels_last_3d, strided


def memory_format_of(t: torch.Tensor) -> str:
    if t.is_contiguous():
        return "contiguous"
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
        return "channels_last_3d"
    return "strided"


def output_meta(out) -> list:
    if isinstance(out, torch.Tensor):
        return [LeafMeta(tuple(out.shape), str(out.dtype).replace("torch.", ""), memory_format_of(out))]
    if isinstance(out, (tuple, list)):
        return [m for o in out for m in output_meta(o)]
    return []


@dataclass(frozen=True)
class LeakMeasurement:
    """Memory one case's call kept (executor._leak_measure), judged by the ``leak``
    oracle: bytes kept by the first call on the device allocator and in process memory
    (RSS), the thresholds the case was measured against, and the least each of
    ``repeats`` further calls kept (a leak keeps memory on every call)."""
    device_first: int
    rss_first: int
    repeats: int
    device_threshold: int
    rss_threshold: int
    device_per_call: float
    rss_per_call: float

    def to_json(self) -> dict:
        """As a leak failure's details record it."""
        return {"device_first": self.device_first, "rss_first": self.rss_first, "repeats": self.repeats,
                "device_threshold": self.device_threshold, "rss_threshold": self.rss_threshold,
                "device_per_call": self.device_per_call, "rss_per_call": self.rss_per_call}


@dataclass
class SideResult:
    """One side's run of a case."""

    outputs: Any                          # CPU copies (canonicalised), or Raised
    meta: list | None = None              # LeafMeta per raw output leaf
    grads: list | None = None             # grad variant: per differentiated input (or None)
    inputs_after: list | None = None      # the inputs as the call left them (CPU copies)
    raw: Any = None                       # raw outputs on the device (dropped after use)
    base_after: Any = None                # in-place or out= an input: its whole base buffer after the call


@dataclass
class Observation:
    case: Any                   # recipes.Case
    spec: Any                   # opspec.OpSpec
    target_name: str
    dut: Any                    # outputs moved to CPU, or Raised
    ref: Any                    # CPU outputs, or Raised
    ref_widened: bool = False   # reference computed in a wider dtype and cast back
    enabled: tuple = ()         # names of the enabled oracles
    dut_side: SideResult | None = None
    ref_side: SideResult | None = None
    dut_functional: SideResult | None = None   # the functional form on the DUT (variants)
    dut_contiguous: SideResult | None = None   # the DUT on .contiguous() inputs (layout)
    # extras: the LeakMeasurement ("leak", by the executor), computed on demand: the
    # float64 result ("float64"), the functional form on CPU ("ref_functional",
    # executor.functional_reference), why the gradients got no verdict ("grad_undefined")
    cache: dict = field(default_factory=dict)
    # a side raised a sticky device error: the device context is unusable (the worker is
    # replaced after this case)
    poisoned: bool = False
    # the target the DUT side ran on (the jury's self checks run the op on it again:
    # on contiguous copies, in a wider dtype)
    target: Any = None


@dataclass(frozen=True)
class ProcessEvent:
    """What the supervisor sees instead of an observation: the worker running a case
    died or did not answer (the ``crash`` and ``hang`` oracles judge it)."""

    op: str
    target_name: str
    kind: str                # "died", "timeout", "slow-compile" (torch.compile took too long), "slow-judge"
                             # (mpsfuzz's verdict took too long) or "slow-reference" (eager CPU's
                             # reference did not return): the last three are not hangs of the target
    returncode: int | None = None
    stderr_tail: str = ""
    timeout_s: float = 0.0
