"""What a slice's test body raises, and what the campaign makes of Hypothesis' report.

A new failure raises a :class:`FindingError` whose *type* is unique to (op, oracle, kind)
(:func:`error_type`), so Hypothesis shrinks each bug separately. The other exceptions here
are BaseExceptions on purpose: Hypothesis would take an Exception for a failure of the case
and shrink it, case after case.
"""
from __future__ import annotations

from ..atomic import CorpusWriteError
from ..oracles import Failure
from .drafts import leaves


class SetAside(BaseException):
    """Ends the slice of an op that has just been set aside (harness errors)."""


class Abandoned(BaseException):
    """Raised on the desk's thread once its job was given up (the stop grace ran out):
    nothing of the job is stored or counted; it stays in triage-pending/."""


class CorpusUnwritable(BaseException):
    """Carries a CorpusWriteError out of the test body: Hypothesis would take an
    Exception for a failure of the case and shrink it, case after case."""

    def __init__(self, error: CorpusWriteError):
        super().__init__(str(error))
        self.error = error


class FindingError(Exception):
    def __init__(self, case, failure: Failure, signature: str):
        super().__init__(failure.title)
        self.case, self.failure, self.signature = case, failure, signature
        # (the slice, its batch's verdicts) where the failure is still to be shrunk: the
        # triage desk replays the slice's test on its own worker (SliceReplay.shrunk)
        self.to_shrink: tuple | None = None


_ERROR_TYPES: dict[tuple, type] = {}


def error_type(op: str, oracle: str, kind: str) -> type:
    """One exception class per (op, oracle, kind): Hypothesis tells bugs apart by type."""
    key = (op, oracle, kind)
    if key not in _ERROR_TYPES:
        _ERROR_TYPES[key] = type(f"Finding_{abs(hash(key)):x}", (FindingError,), {})
    return _ERROR_TYPES[key]


def _iter_findings(exc: BaseException):
    if isinstance(exc, FindingError):
        yield exc
    for inner in getattr(exc, "exceptions", ()) or ():
        yield from _iter_findings(inner)
    if exc.__cause__ is not None and exc.__cause__ is not exc:
        yield from _iter_findings(exc.__cause__)


def split_report(exc: BaseException) -> tuple[list[FindingError], list[BaseException]]:
    """(our findings, the other exceptions) in what Hypothesis raised at the end of a slice."""
    found: list[FindingError] = []
    others: list[BaseException] = []
    for leaf in leaves(exc):
        inside = list(_iter_findings(leaf))
        if inside:
            found += [f for f in inside if all(f is not g for g in found)]
        else:
            others.append(leaf)
    return found, others
