"""mpsfuzz's own work around an op's call runs eagerly, never inside a compiled region
(issue 37, point 7).

A compiled target (``cuda-compiled``, ``cpu-compiled``: ``execution/targets.py``) wraps a
case's call in torch.compile. Many of the catalogue's op functions prepare their inputs
before the op: a copy that makes a stride-0 (expanded) input writable, the Hermitian fix
of a complex-to-real FFT's input, a generator, divisors made nonzero, a sequence sorted on
the CPU. Traced by Dynamo, that preparation became part of the compiled program, and the
compiled target was blamed for it: ``fft.hfft`` of an expanded input raised "more than
one element of the written-to tensor refers to a single memory location" on
cuda-compiled, from the preparation's write into a stride-0 view, with no FFT in the
program.

A function marked :func:`preparation` is ``torch._dynamo.disable``'d: where Dynamo traces
a call of it, the graph breaks, it runs eagerly (and whatever it calls, uncompiled), and
what follows it (the op) is compiled on its own. Dynamo is not imported for it: a process
that has loaded Dynamo when the catalogue is imported (a worker: ``preload.py`` loads it
first) gets the disabled function itself; any other process gets a wrapper that calls
the function directly until Dynamo is loaded, and its disabled form after.
"""
from __future__ import annotations

import functools
import sys

# preparation function -> its torch._dynamo.disable'd form
_EAGER: dict = {}


def _dynamo_loaded() -> bool:
    return "torch._dynamo" in sys.modules


def preparation(fn):
    """Mark ``fn`` as mpsfuzz's preparation of an op's inputs: never compiled."""
    if _dynamo_loaded():
        return _never_compiled(fn)

    @functools.wraps(fn)
    def prepare(*args, **kwargs):
        if _dynamo_loaded():   # loaded since: a compiled call may be tracing this one
            return _never_compiled(fn)(*args, **kwargs)
        return fn(*args, **kwargs)
    prepare.prepares = fn
    return prepare


def _never_compiled(fn):
    eager = _EAGER.get(fn)
    if eager is None:
        import torch._dynamo
        eager = _EAGER[fn] = torch._dynamo.disable(fn)
        eager.prepares = fn
    return eager


def prepared_function(fn):
    """The function a :func:`preparation` marks (``fn`` itself for any other callable):
    what a repro script copies."""
    return getattr(fn, "prepares", fn)


def is_preparation(fn) -> bool:
    return callable(getattr(fn, "prepares", None))
