"""mpsfuzz's own tensor work where a target's dispatch mode would see it as the target's.

A target may be a ``TorchDispatchMode`` around eager CPU (the fault-injecting target, a
test's faulty CPU): every aten call inside its ``run`` is the target's. Some of what runs
there is mpsfuzz's, not the op's: the seeded upstream gradients of the grad variant are
made on the host before the backward, a decomposition is traced for the jury. A real
device makes them with the host's kernels, never its own; under a mode they would go
through the target and a fault of its ``randn`` would be blamed on the op's backward
(issue 37: a fault of 5-D random outputs was filed as three gradient bugs of other ops).
"""
from __future__ import annotations

import contextlib


def outside_modes():
    """A context without the dispatch modes on the stack (a no-op where none is there:
    every real device)."""
    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:  # pragma: no cover - a torch without it
        return contextlib.nullcontext()
    return _disable_current_modes()
