"""Chaos for the harness: a target, a CPU reference and oracles that fail in the ways
mpsfuzz itself must survive (a campaign never dies of one case; tests/test_harness.py).
The fuzzer never imports it.

``--target mpsfuzz.testing.chaos:target`` is eager CPU whose ``run`` misbehaves for a
share of its calls; importing the module (the driver does in ``load_target``, and so does
every worker) also registers the ``chaos`` oracles and, if asked, makes this process's CPU
lack kernels. The environment configures it:

``MPSFUZZ_CHAOS_RATE`` (default 0.2)
    the share of ``run`` calls that raise an assorted exception (some whose ``str()``
    raises) or return junk: None, a string, a dict, a list of non-tensors, a tensor of the
    wrong shape or dtype, an object whose ``==``, ``bool()`` and ``len()`` raise. The
    choice is a hash of the call (the function, its tensors' shapes, dtypes and strides,
    its other arguments), so a case misbehaves the same way every time it runs.
``MPSFUZZ_CHAOS_ORACLE_RATE`` (default 0.1)
    the share of cases on which the ``chaos`` oracle (case stage, in the worker) raises,
    and of failures on which ``chaos-verdict`` (verdict stage) raises; ``chaos-process``
    (process stage, in the driver) raises on every crash or hang. Select them with
    ``--oracles values,errors,chaos,chaos-verdict,chaos-process``.
``MPSFUZZ_CHAOS_BROKEN_OPS``
    ops (catalogue names, comma separated) on which the ``chaos`` oracle always raises:
    an op that the harness can never judge.
``MPSFUZZ_CHAOS_OLD_CPU=1``
    on import, push a process-wide dispatch mode under which comparisons, ``where``,
    ``abs``, ``sub``, ``clamp``, ``sort``... raise ``NotImplementedError('"lt_cpu" not
    implemented for 'UInt32'')`` for uint16/32/64 CPU tensors, as torch 2.11's CPU does
    (2.13 has those kernels). It reaches mpsfuzz's own code too (oracles, canonicalisers,
    the driver's ablation checks), which is the point.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _push_mode
from torch.utils._pytree import tree_flatten

from ..oracles import oracle

RATE_ENV, ORACLE_RATE_ENV = "MPSFUZZ_CHAOS_RATE", "MPSFUZZ_CHAOS_ORACLE_RATE"
BROKEN_OPS_ENV, OLD_CPU_ENV = "MPSFUZZ_CHAOS_BROKEN_OPS", "MPSFUZZ_CHAOS_OLD_CPU"


def _rate(name: str, default: float) -> float:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a share between 0 and 1") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}={text!r}: expected a share between 0 and 1")
    return value


def _draw(*parts) -> tuple[float, int]:
    """(a share in [0, 1), a choice) derived from ``parts``: deterministic across processes."""
    digest = hashlib.sha1("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64, int.from_bytes(digest[8:12], "big")


# -- what a misbehaving call does -----------------------------------------------------------

class ChaosError(RuntimeError):
    pass


class UnprintableError(RuntimeError):
    """An exception whose message cannot be read."""

    def __str__(self) -> str:
        raise ValueError("chaos: this exception's str() raises")


class Nasty:
    """A result that breaks whoever compares, tests or measures it."""

    def __eq__(self, other):
        raise ChaosError("chaos: Nasty.__eq__")

    __ne__ = __lt__ = __gt__ = __eq__
    __hash__ = object.__hash__

    def __bool__(self):
        raise ChaosError("chaos: Nasty.__bool__")

    def __len__(self):
        raise ChaosError("chaos: Nasty.__len__")

    def __iter__(self):
        raise ChaosError("chaos: Nasty.__iter__")

    def __getitem__(self, item):
        raise ChaosError("chaos: Nasty.__getitem__")

    def __repr__(self) -> str:
        return "<Nasty>"


def _raise_runtime(real):
    raise ChaosError("chaos: the device under test raised")


def _raise_type(real):
    raise TypeError("chaos: unsupported operand type(s)")


def _raise_unprintable(real):
    raise UnprintableError()


def _raise_value(real):
    raise ValueError("chaos: " + "a very long message " * 2000)


def _wrong_shape(real):
    return torch.zeros(3, 5, dtype=torch.float64)


def _wrong_dtype(real):
    if isinstance(real, torch.Tensor):
        return real.to(torch.float64 if real.is_complex() else torch.complex64)
    return torch.zeros(2, dtype=torch.complex64)


MISBEHAVIOURS: tuple[tuple[str, Callable], ...] = (
    ("raise RuntimeError", _raise_runtime),
    ("raise TypeError", _raise_type),
    ("raise an exception whose str() raises", _raise_unprintable),
    ("raise ValueError with a huge message", _raise_value),
    ("return None", lambda real: None),
    ("return a string", lambda real: "junk"),
    ("return a dict", lambda real: {"out": real}),
    ("return a list of non-tensors", lambda real: [1, "two", None]),
    ("return a tensor of the wrong shape", _wrong_shape),
    ("return a tensor of the wrong dtype", _wrong_dtype),
    ("return an object whose ==, bool() and len() raise", lambda real: Nasty()),
)


def _describe_call(fn, args, kwargs) -> list:
    parts = [getattr(fn, "__qualname__", type(fn).__name__)]
    leaves, _ = tree_flatten((args, kwargs))
    for x in leaves:
        if isinstance(x, torch.Tensor):
            parts.append((tuple(x.shape), str(x.dtype), tuple(x.stride()), x.storage_offset()))
        else:
            parts.append(repr(x)[:60])
    return parts


class ChaosTarget:
    """Eager CPU that misbehaves on a deterministic share of its calls (the target
    interface of :mod:`mpsfuzz.targets`)."""

    name = "chaos-cpu"
    device = "cpu"

    def __init__(self, rate: float = 0.2):
        self.rate = rate
        self.misbehaved: dict[str, int] = {}

    def is_available(self) -> bool:
        return True

    def run(self, fn: Callable, *args, **kwargs) -> Any:
        share, choice = _draw(*_describe_call(fn, args, kwargs))
        if share >= self.rate:
            return fn(*args, **kwargs)
        what, misbehave = MISBEHAVIOURS[choice % len(MISBEHAVIOURS)]
        self.misbehaved[what] = self.misbehaved.get(what, 0) + 1
        # A raising misbehaviour does not need the real result (its kernel may be the one
        # that is missing); the others are built from it.
        real = None if what.startswith("raise") else fn(*args, **kwargs)
        return misbehave(real)

    def synchronize(self) -> None:
        pass

    def memory_allocated(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"<target {self.name}, chaos rate {self.rate:g}>"


def target() -> ChaosTarget:
    """Zero-argument factory for ``--target mpsfuzz.testing.chaos:target``."""
    return ChaosTarget(_rate(RATE_ENV, 0.2))


# -- oracles that raise ------------------------------------------------------------------------

def _broken_ops() -> set[str]:
    return {name.strip() for name in os.environ.get(BROKEN_OPS_ENV, "").split(",") if name.strip()}


def _case_key(case) -> str:
    try:
        return repr(sorted(case.to_json().items()))
    except Exception:
        return repr(case)


def check_chaos(obs):
    if obs.case.op in _broken_ops():
        raise ChaosError(f"chaos: the chaos oracle cannot judge {obs.case.op}")
    share, _ = _draw("oracle", _case_key(obs.case))
    if share < _rate(ORACLE_RATE_ENV, 0.1):
        raise ChaosError("chaos: the chaos oracle raised")
    return None


def check_chaos_verdict(obs, failure):
    share, _ = _draw("verdict", _case_key(obs.case), failure.oracle, failure.kind)
    if share < _rate(ORACLE_RATE_ENV, 0.1):
        raise ChaosError("chaos: the chaos verdict raised")
    return failure


def check_chaos_process(event):
    raise ChaosError(f"chaos: the process oracle raised on a {event.kind}")


ORACLE_NAMES = ("chaos", "chaos-verdict", "chaos-process")


def register_oracles() -> None:
    """Put the chaos oracles in mpsfuzz's registry (done on import; again after a test
    has taken them out)."""
    oracle("chaos", stage="case", doc="(test oracle, mpsfuzz.testing.chaos) raises on a share of cases")(check_chaos)
    oracle("chaos-verdict", stage="verdict",
           doc="(test oracle, mpsfuzz.testing.chaos) raises on a share of failures")(check_chaos_verdict)
    oracle("chaos-process", stage="process",
           doc="(test oracle, mpsfuzz.testing.chaos) raises on every crash or hang")(check_chaos_process)


register_oracles()


# -- a CPU that lacks kernels -------------------------------------------------------------

UNSIGNED = {torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64"}
# Ops torch 2.11's CPU has no uint16/32/64 kernel for (2.13 has them).
MISSING_KERNELS = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "where", "abs", "sub", "rsub", "clamp",
                             "clamp_min", "clamp_max", "sort", "maximum", "minimum"})


class OldCpuMode(TorchDispatchMode):
    """Raises torch's own "not implemented" error where an old CPU lacks a kernel."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name.split("::", 1)[-1]
        base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
        if base in MISSING_KERNELS:
            leaves, _ = tree_flatten((args, kwargs))
            for x in leaves:
                if isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.dtype in UNSIGNED:
                    raise NotImplementedError(f'"{base}_cpu" not implemented for \'{UNSIGNED[x.dtype]}\'')
        return func(*args, **kwargs)


_OLD_CPU: list[OldCpuMode] = []


def lack_kernels() -> None:
    """Make this process's CPU lack the kernels of :data:`MISSING_KERNELS` for unsigned
    dtypes, for good (once per process)."""
    if not _OLD_CPU:
        mode = OldCpuMode()
        _push_mode(mode)
        _OLD_CPU.append(mode)


if os.environ.get(OLD_CPU_ENV, "").strip() not in ("", "0"):
    lack_kernels()
