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
import sys

from torch.utils._python_dispatch import TorchDispatchMode


def outside_modes():
    """A context without the dispatch modes on the stack (a no-op where none is there:
    every real device)."""
    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:  # pragma: no cover - a torch without it
        return contextlib.nullcontext()
    return _disable_current_modes()


# -- higher-order ops under mpsfuzz's own dispatch modes -----------------------------------
# A higher-order op (flex_attention and its backward) dispatches to a dispatch mode only
# if the mode's class has a rule for it ("There was no rule registered for
# HigherOrderOperator ..."), and flex_attention's eager call compiles the op first, which
# a dispatch mode stops. Under mpsfuzz's modes (the fault target, the arbiter's moved
# intermediates, localisation's tracing, ...) such an op runs its own eager dense path
# with the mode pushed back, so that its aten ops are seen like every other op's.

_FLEX_MODULE = "torch.nn.attention.flex_attention"
_FLEX_SWITCH = "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG"


def _dense_kernel(hop):
    try:
        from torch._C import DispatchKey
    except ImportError:  # pragma: no cover
        return None
    return getattr(hop, "py_kernels", {}).get(DispatchKey.CompositeExplicitAutograd)


def _give_hops_a_rule(mode_class) -> None:
    """Register, for ``mode_class``, every loaded higher-order op that has an eager dense
    kernel: run that kernel with the mode pushed back. Idempotent; ops loaded later are
    registered at the next entry."""
    try:
        from torch._ops import _higher_order_ops
    except ImportError:  # pragma: no cover - a torch without higher-order ops
        return
    for hop in list(_higher_order_ops.values()):
        table = getattr(hop, "python_key_table", None)
        dense = _dense_kernel(hop)
        if table is None or dense is None or mode_class in table:
            continue

        def rule(mode, *args, _dense=dense, **kwargs):
            with mode:
                return _dense(*args, **kwargs)
        hop.py_impl(mode_class)(rule)


class DenseHigherOrderOps(TorchDispatchMode):
    """A dispatch mode under which higher-order ops run their eager dense path, the
    mode seeing its aten ops, and flex_attention's eager call does not compile (its own
    switch, set while the mode is on the stack; restored on exit)."""

    def __enter__(self):
        _give_hops_a_rule(type(self))
        flex = sys.modules.get(_FLEX_MODULE)
        saved = getattr(flex, _FLEX_SWITCH, None)
        self.__dict__.setdefault("_flex_switches", []).append((flex, saved))
        if saved is not None:
            setattr(flex, _FLEX_SWITCH, True)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            flex, saved = self._flex_switches.pop()
            if saved is not None:
                setattr(flex, _FLEX_SWITCH, saved)
