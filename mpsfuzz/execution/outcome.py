"""What comes back from a worker: a judged case's :class:`CaseOutcome`, or a
:class:`RaisedInWorker` where a function run by ``WorkerPool.call`` raised.

The worker (this layer) runs whatever function it is handed; for a case that is
:func:`mpsfuzz.oracles.judge.judge_case`, which returns a :class:`CaseOutcome`. The pool
sends it back through the pipe as the object (pickled) and makes one itself where the
function raised (:meth:`CaseOutcome.harness_error`), so the type lives here, below the
oracles, where both may import it (issue 39: typed values at the process boundary).

Failures travel in their JSON form (``Failure.to_json()``): ``oracles.Failure`` is a
layer above this one, and its ``from_json`` is where keys written by an older mpsfuzz
are read as they are written now; the campaign and triage read them with it.

No outcome is stored on disk (the in-flight file holds the case, a finding the failure):
``to_json``/``from_json`` are for reading one (``python -m mpsfuzz.oracles.judge``) and
carry no format number.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

STAGES = ("run", "check", "jury")


@dataclass(frozen=True)
class CaseSeconds:
    """Where the worker's time on one case went (the campaign's time split, issue 37):
    running it on both sides, the case checks, the verdicts (the float64 arbiter, the
    jury). A stage the case did not reach is None, and is not counted."""
    run: float | None = None
    check: float | None = None
    jury: float | None = None

    def measured(self) -> dict[str, float]:
        """{stage: seconds} of the stages reached, in STAGES order."""
        return {stage: seconds for stage in STAGES if (seconds := getattr(self, stage)) is not None}

    @classmethod
    def from_json(cls, d: dict) -> "CaseSeconds":
        return cls(**{stage: float(d[stage]) for stage in STAGES if d.get(stage) is not None})


@dataclass(frozen=True)
class CaseOutcome:
    """One case judged in a worker.

    ``valid``: CPU accepted the case (its reference did not raise). ``unsupported``: the
    target rejected what CPU accepted (no kernel for the dtype, or the machine ran out of
    memory), with ``unsupported_message``'s first line. ``unsupported_here``: why this
    torch cannot judge the case at all (a CPU kernel mpsfuzz's own comparison needs is
    missing), else None. ``poisoned``: a device fault left the worker's device context
    unusable (the pool replaces the worker). ``ref_widened``: CPU's reference ran in a
    wider dtype. ``grad_undefined``: why the gradients got no verdict, if so.
    ``failures``: each ``Failure.to_json()``. ``internal_error``: the traceback where
    mpsfuzz itself raised in the worker (a harness error, not a finding)."""
    valid: bool
    unsupported: bool = False
    unsupported_message: str = ""
    unsupported_here: str | None = None
    poisoned: bool = False
    ref_widened: bool = False
    grad_undefined: str | None = None
    failures: tuple[dict, ...] = ()
    seconds: CaseSeconds = field(default_factory=CaseSeconds)
    internal_error: str | None = None

    # -- the outcomes that are not a judged observation --
    @classmethod
    def no_case(cls, seconds: CaseSeconds | None = None) -> "CaseOutcome":
        """No case to judge: its variant cannot be formed (an ``out=`` for a non-tensor
        result), or an input's storage is past ``--max-bytes``."""
        return cls(valid=False, seconds=seconds or CaseSeconds())

    @classmethod
    def out_of_memory(cls, error: str) -> "CaseOutcome":
        """Making the inputs (or mpsfuzz's own float64 copies) ran out of memory: a limit
        of this machine at this moment, counted as unsupported (``error``: the error's
        text; its first line is kept)."""
        first = (error.splitlines() or [""])[0]
        return cls(valid=False, unsupported=True, unsupported_message=f"out of memory: {first[:160]}")

    @classmethod
    def not_judgeable_here(cls, why: str) -> "CaseOutcome":
        """This torch lacks a kernel mpsfuzz's own processing of the case needs."""
        return cls(valid=False, unsupported_here=why)

    @classmethod
    def device_fault(cls, failures=()) -> "CaseOutcome":
        """A kernel faulted asynchronously and the error surfaced later: the device
        context is unusable (``failures``: the ``errors`` oracle's, as JSON, if enabled)."""
        return cls(valid=True, poisoned=True, failures=tuple(failures))

    @classmethod
    def harness_error(cls, traceback: str) -> "CaseOutcome":
        """mpsfuzz's own code (the executor, an oracle) raised in the worker: made by the
        pool from the worker's traceback."""
        return cls(valid=False, internal_error=traceback)

    # -- JSON --
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["failures"] = [dict(f) for f in self.failures]
        out["seconds"] = self.seconds.measured()
        return out

    @classmethod
    def from_json(cls, d: dict) -> "CaseOutcome":
        return cls(valid=bool(d["valid"]), unsupported=bool(d.get("unsupported", False)),
                   unsupported_message=str(d.get("unsupported_message", "")),
                   unsupported_here=_text_or_none(d.get("unsupported_here")),
                   poisoned=bool(d.get("poisoned", False)), ref_widened=bool(d.get("ref_widened", False)),
                   grad_undefined=_text_or_none(d.get("grad_undefined")),
                   failures=tuple(dict(f) for f in d.get("failures", ())),
                   seconds=CaseSeconds.from_json(d.get("seconds") or {}),
                   internal_error=_text_or_none(d.get("internal_error")))


def _text_or_none(value) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class RaisedInWorker:
    """``WorkerPool.call``'s answer where the function it ran raised: the traceback."""
    traceback: str


def poisons_worker(result) -> bool:
    """Whether ``result``, a worker's answer, says its device context is unusable (a
    CaseOutcome, or the localiser's reply, with ``poisoned`` set): the worker exits and
    the pool starts a fresh one."""
    return bool(getattr(result, "poisoned", False))
