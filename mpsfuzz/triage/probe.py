"""Run one case in a worker and say how it relates to a failure already seen.

The reducer, the ablation, the reproducibility check, replay and the pytest plugin all
ask the same question of a case: does it still fail *the same way* (the same symptom:
op, variant, oracle, the oracle's dedup key, dtype class), does it pass, is it not a
valid input any more (CPU rejects it; or, for a gradient symptom, the gradient is not
defined at the case's inputs), or does it fail some other way?
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..execution.observation import ProcessEvent
from ..generation import catalogue
from ..generation.recipes import Case
from ..oracles import Failure, all_oracles, symptom_key, worker_oracles

SAME, PASSES, INVALID, DIFFERENT = "same", "passes", "invalid", "different"


def outside_declaration(case: Case) -> str | None:
    """Why ``case`` lies outside what its op declares it takes (a user's kernel), if it
    does: not a valid input, whatever it would do."""
    try:
        spec = catalogue.get(case.op)
    except KeyError:
        return None
    return spec.outside(case) if spec.outside is not None else None


@dataclass
class Outcome:
    verdict: str                      # SAME, PASSES, INVALID or DIFFERENT
    failures: list[Failure]
    same: Failure | None = None       # the failure with the wanted symptom, if any
    process_event: bool = False       # the worker died or hung


def out_of_time(prober, deadline: float) -> bool:
    """Whether one more probe by ``prober`` could run past ``deadline`` (time.monotonic):
    it may cost ``probe_cost_s`` (a hang's probe, the whole timeout)."""
    return time.monotonic() + getattr(prober, "probe_cost_s", 0.0) > deadline


@dataclass
class Prober:
    """Runs cases in ``pool`` with ``oracles`` and classifies them against a symptom.

    ``fresh``: every case runs in a new worker process (crash and hang findings, and
    the reproducibility check, so that no state from earlier calls leaks in).
    ``timeout_s``: per-case bound (a hang attempt costs this much).
    ``compile_twice``: a compiled target's calls are judged on their second compilation
    (a failure triage met only so, issue 37)."""

    pool: object                      # execution.worker.WorkerPool (execute: oracles.judge.judge_case)
    oracles: tuple[str, ...]
    fresh: bool = False
    timeout_s: float | None = None
    runs: int = 0
    seconds: float = 0.0
    # Why the last case run could not be judged on this machine's torch, if it could not.
    unsupported_here: str | None = None
    # The eager CPU reference rejected the last case (it is not a valid input here).
    reference_rejected: bool = False
    # why the last case's gradients got no verdict (the point has no derivative), if so
    last_grad_undefined: str | None = None
    # What one more probe may cost: a hang's probe that hangs again costs the whole
    # timeout, so a budget starts none that could not end within it (triage sets it).
    probe_cost_s: float = 0.0
    compile_twice: bool = False
    _process_oracles: tuple[str, ...] = field(init=False)
    _worker_oracles: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        known = all_oracles()
        self._worker_oracles = worker_oracles(self.oracles)
        self._process_oracles = tuple(o for o in self.oracles if known[o].stage == "process")

    def failures(self, case: Case) -> tuple[list[Failure], bool, bool]:
        """(failures, valid, died-or-hung) of one run of ``case``. A case the target
        does not support (no kernel for the dtype) counts as not valid: it says nothing
        about the bug."""
        if self.fresh:
            self.pool.fresh()
        start = time.monotonic()
        twice = {"kwargs": {"compile_twice": True}} if self.compile_twice else {}
        outcome = self.pool.run(case.to_json(), self._worker_oracles, case.op, timeout_s=self.timeout_s, **twice)
        self.runs += 1
        self.seconds += time.monotonic() - start
        self.unsupported_here, self.reference_rejected = None, False
        if isinstance(outcome, ProcessEvent):
            oracles = all_oracles()
            return [f for name in self._process_oracles if (f := oracles[name].check(outcome))], True, True
        failures = [Failure.from_json(f) for f in outcome.failures]
        self.unsupported_here = outcome.unsupported_here or None
        self.reference_rejected = not (outcome.valid or outcome.unsupported_here or outcome.internal_error)
        self.last_grad_undefined = outcome.grad_undefined
        return failures, outcome.valid and not outcome.unsupported, False

    def classify(self, case: Case, symptom: tuple) -> Outcome:
        self.last_grad_undefined = None
        if outside_declaration(case):
            return Outcome(INVALID, [], None, False)
        failures, valid, died = self.failures(case)
        for failure in failures:
            if symptom_key(case, failure) == symptom:
                return Outcome(SAME, failures, failure, died)
        if self.last_grad_undefined and symptom[1:2] == ("grads",):
            # gradients that differ where they are not defined say nothing about a
            # gradient bug: neither "passes" (ablation would call the change necessary)
            # nor the same failure
            return Outcome(INVALID, failures, None, died)
        if failures and valid:
            return Outcome(DIFFERENT, failures, None, died)
        if not valid:
            return Outcome(INVALID, failures, None, died)
        return Outcome(PASSES, failures, None, died)
