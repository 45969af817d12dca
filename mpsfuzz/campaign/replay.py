"""Shrinking a new failure: the desk's replay of the slice it failed in.

The campaign judges a slice's batch without Hypothesis (verdicts.py). A case that failed
in a new way is handed to the triage desk, whose thread runs the slice's Hypothesis test
again with the same seed (:meth:`SliceReplay.shrunk`): it draws the same cases (their
verdicts remembered, nothing runs twice), fails where the batch did and shrinks from
there, within --shrink-budget, on the desk's own worker. Only the job's (op, oracle,
kind) raises in that replay; the other new failures it meets are handed over as jobs of
their own once it ends.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from hypothesis import Phase
from hypothesis.errors import Unsatisfiable

from ..corpus.store import CorpusWriteError
from ..events import Stats
from .batches import Slice
from .budget import BudgetExhausted
from .desk_jobs import PRESSED_SHARE
from .drafts import GenerationFailed, error_line, family, slice_test, strategy_for
from .finding_errors import CorpusUnwritable, FindingError, SetAside, error_type, split_report
from .known_findings import NEW
from .slice_state import SliceState
from .verdicts import CaseVerdicts


class SliceReplay:
    """Replays a slice on the calling (desk's) thread, judging its cases with
    ``verdicts`` in ``state``; ``stats.set_aside`` ends the slice of an op set aside.
    What it asks and tells: ``failures_of(case, pool)`` (a case run in the worker),
    ``stop_reason()`` (why no further case may run, or None), ``generation_failed(op,
    failed)``, ``harness_error(stage, op, case, exc)``, ``case_outcome(op, ok, last_error)``
    and ``hand_over(met)`` (the other new failures the replay met: jobs of their own)."""

    def __init__(self, verdicts: CaseVerdicts, state: SliceState, stats: Stats, *, shrink_budget_s: float,
                 timeout_s: float, failures_of: Callable, stop_reason: Callable, generation_failed: Callable,
                 harness_error: Callable, case_outcome: Callable, hand_over: Callable, lock=None):
        self.verdicts, self.state, self.stats = verdicts, state, stats
        self.shrink_budget_s, self.timeout_s = shrink_budget_s, timeout_s
        self.failures_of, self.stop_reason, self.generation_failed = failures_of, stop_reason, generation_failed
        self.harness_error, self.case_outcome, self.hand_over = harness_error, case_outcome, hand_over
        self._lock = lock if lock is not None else threading.RLock()

    def shrunk(self, err: FindingError, holder, pool) -> tuple[FindingError, bool]:
        """On the desk's thread: replay the slice ``err`` failed in with its seed (the
        batch's verdicts remembered, nothing runs twice) and let Hypothesis shrink the
        failure there, within --shrink-budget; (the smallest failure, Hypothesis' flaky
        hint). Only ``err``'s (op, oracle, kind) raises in this replay, and ``holder``,
        its own placeholder, does not cover it."""
        prepared, memo = err.to_shrink
        err.to_shrink = None
        key = (err.case.op, err.failure.oracle, err.failure.kind)
        state = self.state
        state.memo, state.pending, state.shrink_started, state.met = dict(memo), {}, {}, {}
        state.only, state.holder, state.replaying = key, holder, True
        flaky = False
        try:
            self.hypothesis(prepared, self.test_body(pool, prepared),
                            phases=(Phase.generate, Phase.shrink))()
        except (BudgetExhausted, SetAside):
            pass   # what it shrank so far stands
        except CorpusUnwritable as exc:
            raise exc.error from None
        except Exception as exc:  # Hypothesis' report: the failure shrunk, and any errors of its own
            flaky = "Flaky" in type(exc).__name__
            found, others = split_report(exc)
            for other in others:
                self.harness_error("generate" if isinstance(other, Unsatisfiable) else "hypothesis",
                                   prepared.op, None, other)
                with self._lock:
                    self.case_outcome(prepared.op, False, error_line(other))
            reported = next((f for f in found if (f.case.op, f.failure.oracle, f.failure.kind) == key), None)
            if reported is not None:
                state.pending[key] = reported
        finally:
            smallest = state.pending.get(key)
            met, state.met = state.met, {}
            state.memo, state.pending, state.shrink_started = {}, {}, {}
            state.only = state.holder = None
            state.replaying = False
        self.hand_over(met)
        if smallest is None:
            return err, flaky
        smallest.__traceback__ = smallest.__context__ = smallest.__cause__ = None
        return smallest, flaky

    def hypothesis(self, prepared: Slice, body, *, phases):
        limits = prepared.limits
        return slice_test(strategy_for(prepared.op, limits), prepared.seed, limits.examples,
                          body, phases=phases, siblings=limits.siblings)

    def test_body(self, pool, prepared: Slice):
        def body(drawn):
            try:
                self.judge(drawn, pool, prepared.op, prepared.seed, prepared.limits.siblings)
            except CorpusWriteError as exc:
                raise CorpusUnwritable(exc) from None
        return body

    def judge(self, drawn, pool, op: str, seed: int, siblings: int) -> None:
        """The test body: run each case of the drawn example's family (drafts.family:
        the case and its siblings, as the slice's batch ran them), or recall their
        verdicts, and raise the finding exception of the first failure that is neither
        suppressed nor a sighting."""
        if isinstance(drawn, GenerationFailed):
            if op in self.stats.set_aside and not self.state.shrink_started:
                raise SetAside()
            if not self.state.replaying:  # a replay's failed draws were counted by the first pass
                # Not memoised: draws that fail alike are still separate attempts.
                self.generation_failed(op, drawn)
            return
        for case in family(drawn, seed, siblings):
            self.judge_one(case, pool, op)

    def judge_one(self, case, pool, op: str) -> None:
        state = self.state
        verdicts = state.memo.get(case)
        if verdicts is None:
            # Only a case still to run costs budget: a replay of the batch's cases does not.
            reason = self.stop_reason()
            if reason:
                raise BudgetExhausted(reason)
            if op in self.stats.set_aside:
                if state.shrink_started:
                    return  # let Hypothesis finish shrinking the failures it has
                raise SetAside()
            if self.shrink_budget_spent():
                return  # shrink budget spent: smaller variants are no longer tried
            verdicts = self.verdicts.judged(case, op, lambda: self.failures_of(case, pool), pool)
        for verdict, failure, signature in verdicts:
            if verdict == NEW:
                key = (case.op, failure.oracle, failure.kind)
                if state.only is not None and key != state.only:
                    # The desk shrinks one failure a job: another is its own job, once,
                    # handed over when this replay ends (issue 30, two H200 runs: SDPA's
                    # SIGFPE over zero key heads, met only while shrinking another SDPA
                    # failure, was dropped here ten times).
                    state.met.setdefault(key, (case, failure, signature))
                    continue
                state.shrink_started.setdefault(key, time.monotonic())
                error = error_type(*key)(case, failure, signature)
                state.pending[key] = error   # the smallest so far: Hypothesis shrinks towards it
                raise error

    def shrink_budget_spent(self) -> bool:
        """Whether running one more case would take a shrink past --shrink-budget. A
        smaller variant of a hang that still hangs costs a whole timeout: it is tried
        only if that still fits."""
        now = time.monotonic()
        budget = self.shrink_budget_s * (PRESSED_SHARE if self.state.pressed else 1.0)
        return any(now - started + (self.timeout_s if oracle == "hang" else 0.0) > budget
                   for (_op, oracle, _kind), started in self.state.shrink_started.items())
