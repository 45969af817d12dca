"""What counts as a *new behaviour*: the coverage signal of the daemon's scheduler.

mpsfuzz cannot see the device's code coverage, so a behaviour is the coarse shape of a
case and what the oracles made of it: (op, dtype class, layout class, size class,
outcome). A slice of cases that produces keys never seen before is exploring; one that
only repeats known keys is not (scheduler.py turns that into a yield per second).

The key is coarse on purpose: each part has a handful of values, so an op has at most a
few hundred behaviours and "new" stays meaningful for days of fuzzing, instead of every
case being new (as it would be with shapes or seeds in the key).
"""
from __future__ import annotations

from ..corpus.finding import trigger_class
from ..execution.outcome import CaseOutcome

SIZE_CLASSES = ("none", "empty", "scalar", "small", "medium", "large")
SMALL, MEDIUM = 64, 4096     # largest input numel of a small and of a medium case


def size_class(case) -> str:
    """``empty`` if any input has no elements (its own code paths), ``scalar`` if every
    input is 0-d, else by the largest input's numel: ``small`` (<= 64), ``medium``
    (<= 4096), ``large``; ``none`` for a case without tensor inputs."""
    if not case.inputs:
        return "none"
    if any(r.numel == 0 for r in case.inputs):
        return "empty"
    if all(r.rank == 0 for r in case.inputs):
        return "scalar"
    largest = max(r.numel for r in case.inputs)
    return "small" if largest <= SMALL else "medium" if largest <= MEDIUM else "large"


def outcome_class(result) -> str:
    """What the worker's result says, in one word.

    ``result`` is :func:`mpsfuzz.oracles.judge.judge_case`'s ``CaseOutcome`` (as
    ``WorkerPool.run`` returns it), or a ``ProcessEvent`` where the worker died or hung:
    ``internal`` (mpsfuzz raised in the worker), ``process:<died|timeout|slow-compile>``,
    ``fail:<oracle>:<kind>`` (every failure, sorted, joined by ``+``), ``unsupported``
    (the device rejects what CPU accepts), ``unsupported-here`` (this torch's CPU lacks
    a kernel mpsfuzz needs), ``invalid`` (CPU rejects the case too) or ``pass``."""
    if not isinstance(result, CaseOutcome):
        kind = getattr(result, "kind", None)
        if kind is None:
            raise TypeError(f"result={result!r}: expected judge_case's CaseOutcome or a ProcessEvent")
        return f"process:{kind}"
    if result.internal_error:
        return "internal"
    if result.failures:
        return "fail:" + "+".join(sorted({f"{f.get('oracle')}:{f.get('kind')}" for f in result.failures}))
    if result.unsupported:
        return "unsupported"
    if result.unsupported_here:
        return "unsupported-here"
    if not result.valid:
        return "invalid"
    return "pass"


def behaviour_of(case, result) -> tuple:
    """The hashable behaviour key of one case and its result: (op, dtype class, layout
    class, size class, outcome). Dtype and layout classes are the corpus's own
    (``corpus.finding.trigger_class``: a dtype class or ``mixed``; ``contiguous``,
    ``strided`` or ``aliased``)."""
    trigger = trigger_class(case) if case.inputs else {"dtype_class": "none", "layout_class": "none"}
    return (case.op, trigger["dtype_class"], trigger["layout_class"], size_class(case), outcome_class(result))
