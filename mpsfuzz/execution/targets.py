"""Targets: the device under test (DUT) that a case runs on, compared with eager CPU.

A target is any object with ``name``, ``device``, ``is_available()``,
``run(fn, *args, **kwargs)``, ``synchronize()`` and ``memory_allocated()``. The
built-in ones cover ``mps``, ``cuda`` and their torch.compile'd variants, plus
``cpu-compiled`` so that a machine with neither accelerator still tests a real backend
(Inductor's generated C++) against eager CPU, and plain ``cpu`` for users' kernels
(``run --kernels``: a torch.library op's CPU kernel against its declared reference). ``--target package.module:attr`` loads a
third-party target (an instance, or a zero-argument factory) in every worker.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable

import torch


def _cuda_allocated() -> int:
    """torch.cuda.memory_allocated(), without flattening every allocator statistic into
    a dict first (half a millisecond, twice per case: a fifth of a worker's time on an
    H100); the public call where the raw statistics are not there."""
    try:
        raw = getattr(torch._C, "_cuda_getDevice", None)
        device = raw() if raw is not None and torch.cuda.is_initialized() else torch.cuda.current_device()
        return int(torch._C._cuda_memoryStats(device)["allocated_bytes"]["all"]["current"])
    except Exception:
        return int(torch.cuda.memory_allocated())


def _cuda_synchronize() -> None:
    """torch.cuda.synchronize() of the current device, without its Python wrapper's
    device lookups (three of them a case, a tenth of a small op's judging on an H100);
    the public call where the raw one is not there, and before CUDA is initialised (the
    public call initialises it as torch does, the raw one would not)."""
    raw = getattr(torch._C, "_cuda_synchronize", None)
    if raw is None or not torch.cuda.is_initialized():
        torch.cuda.synchronize()
    else:
        raw()


def release_cached_memory(target) -> None:
    """Return the caching allocator's unused blocks to the device (a target of ours, or
    any object whose ``device`` names one; nothing to do on CPU)."""
    try:
        kind = torch.device(getattr(target, "device", "cpu")).type
        if kind == "cuda" and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
        elif kind == "mps":
            torch.mps.empty_cache()
    except Exception:  # best effort: a custom target's device string we cannot read
        pass


class TargetError(ValueError):
    """A target that cannot be loaded or is not available here (a usage error)."""


def _cuda_full_precision() -> None:
    """CUDA trades precision for speed by default in some kernels (TF32 convolutions,
    reduced-precision fp16/bf16 GEMM accumulation): documented choices, not bugs, which
    would drown real findings. Turn them off in the worker so float32 means float32.

    Importing torch's own test modules (the ``opinfo`` family) freezes the cuDNN flags
    (``torch.backends.disable_global_flags``): setting one afterwards raises. torch's
    own escape hatch for that is used, so the order of imports does not matter."""
    unfreeze = getattr(torch.backends, "__allow_nonbracketed_mutation", None)
    if unfreeze is not None:
        with unfreeze():
            torch.backends.cudnn.allow_tf32 = False
    else:  # pragma: no cover - torch without the hatch never freezes either
        torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(torch.backends.cuda.matmul, flag):
            setattr(torch.backends.cuda.matmul, flag, False)


class DeviceTarget:
    """Eager execution on a torch device."""

    def __init__(self, name: str, device: str):
        self.name = name
        self.device = device
        if self._device_type() == "cuda":
            _cuda_full_precision()

    def _device_type(self) -> str:
        """The device type ("cuda", "mps", "cpu"), parsed once per device string (a
        subclass may set ``device`` itself)."""
        cached = self.__dict__.get("_kind")
        if cached is None or cached[0] != self.device:
            cached = self.__dict__["_kind"] = (self.device, torch.device(self.device).type)
        return cached[1]

    def is_available(self) -> bool:
        kind = self._device_type()
        if kind == "cpu":
            return True
        if kind == "mps":
            return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
        if kind == "cuda":
            return torch.cuda.is_available()
        return False

    def run(self, fn: Callable, *args, **kwargs) -> Any:
        return fn(*args, **kwargs)

    def synchronize(self) -> None:
        if self._device_type() == "cuda":
            _cuda_synchronize()
        elif self._device_type() == "mps":
            torch.mps.synchronize()

    def memory_allocated(self) -> int:
        if self._device_type() == "cuda":
            return _cuda_allocated()
        if self._device_type() == "mps":
            return int(torch.mps.current_allocated_memory())
        return 0

    def __repr__(self) -> str:
        return f"<target {self.name} on {self.device}>"


class CompiledTarget(DeviceTarget):
    """torch.compile (Inductor) on a device. One compiled wrapper per op function;
    Dynamo's recompile limits are raised because every fuzz case is a new shape or
    dtype, and hitting the limit would silently fall back to eager and test nothing.

    How a worker compiles (issue 37, point 7): the executor hands ``run`` the variant's
    call alone (what makes the inputs runs before it, eagerly); Dynamo keeps compiled
    code per code object, so a case whose sizes, strides, dtypes or op (a closure of
    the shared variant wrappers) differ from every earlier call recompiles, statically
    (``dynamic=False``: no automatic dynamic shapes), and one the worker has compiled
    before runs from Dynamo's cache. Every ``_RESET_EVERY`` calls, and nowhere else
    between cases, Dynamo is reset: the next calls compile again, Inductor's own caches
    (kept across a reset) serving what they hold. A failure may therefore show only on
    a call's second compilation; triage then runs cases compiled twice
    (``forget_compilations`` between), and the repro script does the same.

    ``eager_counterpart``: the built-in eager target whose kernels the compiled graphs
    call (a failure it shows too is its kernel's, triage/pipeline.py). ``backend``:
    torch.compile's backend (tests hand one that records the graphs)."""

    _RESET_EVERY = 256

    def __init__(self, name: str, device: str, *, dynamic: bool = False, backend: Any = "inductor"):
        super().__init__(name, device)
        self._compiled: dict[int, Callable] = {}
        self._calls = 0
        # dynamic=True: sizes are symbolic from the first call (SymInts, and SymFloats
        # derived from them such as attention's default scale): the code paths that
        # dynamic-shape compilation takes, which static compilation never reaches.
        self.dynamic = dynamic
        self.backend = backend
        self.eager_counterpart = self._device_type()

    def run(self, fn: Callable, *args, **kwargs) -> Any:
        import torch._dynamo as dynamo

        for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(dynamo.config, knob):
                setattr(dynamo.config, knob, max(getattr(dynamo.config, knob), 100_000))
        self._calls += 1
        if self._calls % self._RESET_EVERY == 0:
            # Bound the memory held by compiled graphs in a long campaign.
            self.forget_compilations()
        compiled = self._compiled.get(id(fn))
        if compiled is None:
            compiled = self._compiled[id(fn)] = torch.compile(fn, fullgraph=False, dynamic=self.dynamic,
                                                              backend=self.backend)
        return compiled(*args, **kwargs)

    def forget_compilations(self) -> None:
        """Reset Dynamo: every call compiles again."""
        import torch._dynamo as dynamo
        dynamo.reset()
        self._compiled.clear()


def forget_compilations(target) -> None:
    """Make ``target``'s next calls compile again, as a worker's do after a reset: its
    own ``forget_compilations`` where it has one, else a Dynamo reset where Dynamo is
    loaded (a third-party compiled target); nothing for an eager target."""
    forget = getattr(target, "forget_compilations", None)
    if callable(forget):
        forget()
    elif "torch._dynamo" in sys.modules:
        import torch._dynamo as dynamo
        dynamo.reset()


def compiles(target_name: str) -> bool:
    """Whether the target of this name compiles the op's call (torch.compile): the
    built-in ``*-compiled`` targets, and a third-party target named so."""
    return target_name.endswith("-compiled")


BUILTIN: dict[str, Callable[[], Any]] = {
    "mps": lambda: DeviceTarget("mps", "mps"),
    "mps-compiled": lambda: CompiledTarget("mps-compiled", "mps"),
    "cuda": lambda: DeviceTarget("cuda", "cuda"),
    "cuda-compiled": lambda: CompiledTarget("cuda-compiled", "cuda"),
    "cpu-compiled": lambda: CompiledTarget("cpu-compiled", "cpu"),
    "mps-dynamic-compiled": lambda: CompiledTarget("mps-dynamic-compiled", "mps", dynamic=True),
    "cuda-dynamic-compiled": lambda: CompiledTarget("cuda-dynamic-compiled", "cuda", dynamic=True),
    "cpu-dynamic-compiled": lambda: CompiledTarget("cpu-dynamic-compiled", "cpu", dynamic=True),
    # Eager CPU against eager CPU says nothing of torch's own ops; it is there for users'
    # kernels (``run --kernels``), whose CPU implementation (a torch.library op) is judged
    # against their declared reference, in CI without a GPU.
    "cpu": lambda: DeviceTarget("cpu", "cpu"),
}

# Best first: what `mpsfuzz run` uses without --target.
PREFERENCE = ("mps", "cuda", "cpu-compiled")


def _import_target(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise TargetError(f"--target {spec!r}: expected a built-in name "
                          f"({', '.join(BUILTIN)}) or 'package.module:attr'")
    # The user's current directory is importable in every worker, as for `python -m`.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure is the user's target's problem
        raise TargetError(f"--target {spec!r}: cannot import {module_name!r}: "
                          f"{type(exc).__name__}: {exc}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise TargetError(f"--target {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not hasattr(obj, "run"):
        try:
            obj = obj()
        except Exception as exc:  # the user's factory rejected its configuration
            raise TargetError(f"--target {spec!r}: {type(exc).__name__}: {exc}") from None
    missing = [a for a in ("name", "device", "is_available", "run", "synchronize", "memory_allocated")
               if not hasattr(obj, a)]
    if missing:
        raise TargetError(f"--target {spec!r}: object lacks {', '.join(missing)}")
    return obj


def load_target(spec: str) -> Any:
    """A target from a built-in name or ``module:attr``; raises TargetError if unavailable."""
    if spec in BUILTIN:
        target = BUILTIN[spec]()
    elif ":" in spec:
        target = _import_target(spec)
    else:
        raise TargetError(f"--target {spec!r} is not a known target; built-in targets are "
                          f"{', '.join(BUILTIN)}, or give 'package.module:attr'")
    if not target.is_available():
        raise TargetError(f"target {spec!r} (device {target.device!r}) is not available on this machine")
    return target


def best_available() -> str:
    """The name of the best built-in target available here."""
    for name in PREFERENCE:
        if BUILTIN[name]().is_available():
            return name
    return "cpu-compiled"
