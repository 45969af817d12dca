"""What a case the worker ran comes to: its failures, its counts, its events.

An outcome is the worker's :class:`CaseOutcome` for the case, a :class:`ProcessEvent`
(the worker died or hung: the process oracles judge it; or a slow compilation, a
reference that did not return, a verdict that outlasted its budget: none of them the
target's), or the exception that kept the pool from running it (a harness error). :class:`CaseOutcomes`
counts the case into the campaign's Stats (where it is the fuzzing's: the desk's replays
are triage's), reports it to the listeners (CaseFinished, Notices, harness errors) and
returns its failures. It runs nothing.
"""
from __future__ import annotations

import threading
from typing import Callable

from ..atomic import CorpusWriteError
from ..events import CaseFinished, Notice, Stats
from ..execution.observation import ProcessEvent
from ..oracles import Failure, all_oracles

# Distinct (op, message) rows a message table keeps: a message may quote sizes, and a
# daemon runs for days; past the cap, new messages count under OTHER_MESSAGES.
MAX_MESSAGES = 2000
OTHER_MESSAGES = "(other messages)"


def count_message(table: dict, op: str, message: str, cap: int | None = None) -> None:
    """Count ``message`` of ``op`` in ``table`` ({(op, message): n}), at most ``cap``
    (MAX_MESSAGES) rows."""
    key = (op, message)
    if key not in table and len(table) >= (MAX_MESSAGES if cap is None else cap):
        key = (op, OTHER_MESSAGES)
    table[key] = table.get(key, 0) + 1


def add_time(stats: Stats, stage: str, seconds: float) -> None:
    """Add ``seconds`` to the time split's ``stage`` (Stats.time_split)."""
    split = stats.time_split
    split[stage] = split.get(stage, 0.0) + max(0.0, float(seconds))


class CaseOutcomes:
    """Counts into ``stats`` (under ``lock``), reports through ``emit(event)`` and
    ``harness_error(stage, op, case, exc=None, *, error="", trace="")``, and judges a
    worker's death or hang with ``process_oracles`` (names in the oracle registry)."""

    def __init__(self, stats: Stats, *, emit: Callable, harness_error: Callable, process_oracles=(), lock=None):
        self.stats, self.emit, self.harness_error = stats, emit, harness_error
        self.process_oracles = tuple(process_oracles)
        self._lock = lock if lock is not None else threading.RLock()

    def _spent(self, stage: str, seconds: float) -> None:
        with self._lock:
            add_time(self.stats, stage, seconds)

    def failures(self, case, outcome, *, fuzzing: bool, shrinking: bool) -> list[Failure]:
        """The failures of a case the worker ran; counts it where it is the fuzzing's
        (``fuzzing``; --max-cases bounds the fuzzing, not the shrinking of what it found)
        and tells the listeners whether it was met while ``shrinking``. Only a
        CorpusWriteError is raised; every other failure of the harness is reported and the
        case has no failures."""
        per_op = [0, 0]
        if fuzzing:
            with self._lock:
                self.stats.cases += 1
                per_op = self.stats.per_op.setdefault(case.op, [0, 0])
                per_op[0] += 1
        if isinstance(outcome, CorpusWriteError):
            raise outcome
        if isinstance(outcome, BaseException):
            self.harness_error("execute", case.op, case, outcome)
            self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
            return []
        if isinstance(outcome, ProcessEvent):
            return self._process_event(case, outcome, fuzzing=fuzzing, shrinking=shrinking)
        if outcome.internal_error:
            # The executor or an oracle raised inside the worker: its traceback came back.
            trace = str(outcome.internal_error)
            lines = [ln for ln in trace.strip().splitlines() if ln.strip()]
            self.harness_error("execute", case.op, case, error=lines[-1].strip() if lines else "internal error",
                               trace=trace)
        if fuzzing:
            for stage, seconds in outcome.seconds.measured().items():
                self._spent(stage, seconds)
            with self._lock:
                if outcome.valid:
                    self.stats.valid += 1
                    per_op[1] += 1
                if outcome.unsupported:
                    self.stats.unsupported += 1
                    count_message(self.stats.unsupported_messages, case.op, outcome.unsupported_message)
                if outcome.unsupported_here:
                    self.stats.unsupported_here += 1
                    count_message(self.stats.unsupported_here_messages, case.op, outcome.unsupported_here)
        self.emit(CaseFinished(case.op, valid=outcome.valid, unsupported=outcome.unsupported,
                               shrinking=shrinking, case=case))
        try:
            return [Failure.from_json(f) for f in outcome.failures]
        except Exception as exc:
            self.harness_error("judge", case.op, case, exc)
            return []

    def _process_event(self, case, outcome: ProcessEvent, *, fuzzing: bool, shrinking: bool) -> list[Failure]:
        """A worker that died, hung, or outlasted a budget of its own on the case (it was
        restarted)."""
        if fuzzing and outcome.kind == "timeout":
            self._spent("run", outcome.timeout_s)   # a hang costs its whole timeout
        with self._lock:
            self.stats.restarts += fuzzing
        if outcome.kind == "slow-compile":
            # Compilation outlasted its own budget: reported, never a hang finding.
            self.stats.slow_compiles += 1
            self.emit(Notice(f"{case.op}: compiling took more than {outcome.timeout_s:g}s on "
                             f"{outcome.target_name} (slow compilation, not a hang); case skipped"))
            self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
            return []
        if outcome.kind == "slow-reference":
            # Eager CPU's reference did not return; the target's call ran first and
            # returned: a hang of the witness, not of the target (issue 38: CPU
            # loops on max_pool1d with a kernel of 2^63 - 1). Reported, never filed.
            self.stats.reference_hangs += 1
            self.emit(Notice(f"{case.op}: the eager CPU reference did not return within "
                             f"{outcome.timeout_s:g}s (a hang of the reference, not of {outcome.target_name}); "
                             f"case skipped"))
            self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
            return []
        if outcome.kind == "slow-judge":
            # mpsfuzz's own verdict outlasted its budget: the harness failed, the
            # target did not hang (issue 31: cumprod@large).
            self.harness_error("judge", case.op, case, TimeoutError(
                f"the verdict on this case took more than {outcome.timeout_s:g}s (the worker was restarted)"))
            self.emit(CaseFinished(case.op, valid=False, unsupported=False, shrinking=shrinking, case=case))
            return []
        oracles = all_oracles()
        failures = []
        for name in self.process_oracles:
            try:
                failure = oracles[name].check(outcome)
            except Exception as exc:
                self.harness_error("judge", case.op, case, exc)
                continue
            if failure:
                failures.append(failure)
        self.emit(Notice(f"worker {outcome.kind} on {case.op}; restarted"))
        self.emit(CaseFinished(case.op, valid=True, unsupported=False, shrinking=shrinking, case=case))
        return failures
