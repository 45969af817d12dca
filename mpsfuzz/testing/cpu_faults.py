"""A target that runs clean while eager CPU, the reference, is the one that misbehaves.

Eager CPU has bugs of its own (its vectorised ``fmod`` of a float64 vector by 2^-1024
is NaN; its antialiased bilinear resize of only the height is wrong), and the float64
run of its kernels shares them. This target proves that the jury blames CPU there: on
loading, it puts a :class:`~mpsfuzz.testing.faults.FaultMode` with the faults of
``MPSFUZZ_CPU_FAULTS`` under every op of the process (the reference side, the float64
juror's runs of CPU's kernels), while its own ``run`` (the device under test: eager CPU
too) steps out of that mode and computes cleanly. The fuzzer knows nothing of this; the
independent references (a formula, numpy, each element alone, a decomposition) must
show that CPU is the one that is wrong.

Load it with ``--target mpsfuzz.testing.cpu_faults:target``; ``MPSFUZZ_CPU_FAULTS``
names faults of :data:`CPU_FAULTS` (comma separated; unset or empty: none), and
``MPSFUZZ_CPU_TARGET_FAULTS`` faults of :data:`TARGET_FAULTS` that the target's own run
has as well (a bug of both backends, each wrong its own way), so that a repro script run
in a fresh interpreter meets the same faults.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .faults import Fault, FaultMode


def _vector(func, args, kwargs) -> bool:
    first = args[0] if args else None
    return isinstance(first, torch.Tensor) and first.numel() > 1


def _always(func, args, kwargs) -> bool:
    return True


def _float_vector(func, args, kwargs) -> bool:
    first = args[0] if args else None
    return isinstance(first, torch.Tensor) and first.is_floating_point() and first.numel() > 1


# CPU bugs to emulate: each corrupts the first element of CPU's result, well past any
# tolerance, so only a reference that does not run CPU's kernel can tell.
CPU_FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault("cpu_fmod_vector", "eager CPU's vectorised fmod (a float64 vector by 2^-1024 gives NaN; a 0-d call is right)",
          ("aten::fmod",), _vector, "corrupt"),
    Fault("cpu_bilinear_aa", "eager CPU's antialiased bilinear resize wrong (only the height shrinks: [4, -4, -2] "
          "to 2 rows gives [1, 1] where the triangle filter gives [1, -2.75])",
          ("aten::_upsample_bilinear2d_aa",), _always, "corrupt"),
    Fault("cpu_cumsum", "eager CPU's cumsum wrong", ("aten::cumsum",), _vector, "corrupt"),
    Fault("cpu_gelu", "eager CPU's gelu wrong (forward)", ("aten::gelu",), _float_vector, "corrupt"),
)}


# The target's side of a bug both backends have: wrong another way than eager CPU's
# fault of the same kernel, so that the two still disagree and the jury sees both wrong.
TARGET_FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault("target_cumsum_inflated", "the target's cumsum 25% too large (with cpu_cumsum: both backends wrong)",
          ("aten::cumsum",), _vector, "inflate"),
    # Not a bug: a target whose lcm refuses a result past int64 cleanly, where eager CPU's
    # own lcm dies (torch 2.13: lcm(-2**63, -7) is SIGFPE), for a crash of eager CPU's alone.
    Fault("target_lcm_refuses_overflow", "the target's lcm raises on a result past int64", ("aten::lcm",), _always,
          "raise", message="lcm: the result does not fit in int64"),
)}


class CpuFaultTarget:
    """Eager CPU computing cleanly (or with ``target_faults``: a bug both backends share),
    while CPU as the reference runs under ``faults``."""

    device = "cpu"

    def __init__(self, faults: tuple[Fault, ...], target_faults: tuple[Fault, ...] = ()):
        self.faults, self.target_faults = tuple(faults), tuple(target_faults)
        self.name = "clean-cpu-vs-faulty-cpu" if faults else "clean-cpu"
        self.fired: Counter = Counter()
        self._mode = None
        if faults:
            # Entered for the life of the process (a worker's): every op outside ``run``
            # goes through it. A test in a shared process calls close().
            self._mode = FaultMode(self.faults, self.fired)
            self._mode.__enter__()

    def close(self) -> None:
        """Leave the reference's fault mode (eager CPU is clean again)."""
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None

    def is_available(self) -> bool:
        return True

    def run(self, fn: Callable, *args, **kwargs) -> Any:
        with _disable_current_modes():
            if not self.target_faults:
                return fn(*args, **kwargs)
            with FaultMode(self.target_faults, self.fired):
                return fn(*args, **kwargs)

    def synchronize(self) -> None:
        return None

    def memory_allocated(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"<target {self.name}: faults of the CPU reference {', '.join(f.name for f in self.faults) or 'none'}>"


def faults_from_env(value: str | None, known: dict[str, Fault] = CPU_FAULTS) -> tuple[Fault, ...]:
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown fault(s): {', '.join(unknown)}; known: {', '.join(known)}")
    return tuple(known[n] for n in names)


def target() -> CpuFaultTarget:
    """Zero-argument factory for ``--target mpsfuzz.testing.cpu_faults:target``."""
    return CpuFaultTarget(faults_from_env(os.environ.get("MPSFUZZ_CPU_FAULTS")),
                          faults_from_env(os.environ.get("MPSFUZZ_CPU_TARGET_FAULTS"), TARGET_FAULTS))
