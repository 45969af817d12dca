"""What happens to a failure between Hypothesis' shrinker and the corpus.

1. **Reproducibility.** The shrunk case is re-run ``reruns`` times: the first run in a
   fresh worker (cold: nothing called before it), the rest in that same worker (crash
   and hang findings: every run in a fresh worker). A failure that does not come back
   every time is *flaky*, recorded with its rate and not reduced: a fault that depends
   on earlier calls must not be presented as a deterministic repro. So is a layout
   failure that reduces to contiguous inputs: two calls on the same inputs differ.
2. **Reduction** (:mod:`.reduce`) until nothing simpler fails the same way, within a
   time budget; the result is run once more in a fresh worker so that the repro stands
   on its own (if it does not, the shrunk case is kept).
3. **Explanation** (:mod:`.ablation`): which features are necessary.
4. **Localisation** (:mod:`.localise`, in a fresh worker): the aten kernel where the
   failure starts, its call and a kernel-level repro (or: composite, not localised). It
   groups findings into bugs (corpus/bugs.py); a failure of it is recorded, never raised.

On a compiled target (issue 37, point 7), a failure that the fresh worker's first
compilation does not show is tried with every call compiled twice (once, a Dynamo reset,
again: what a worker meets after its periodic reset); if it fails so every time, triage
goes on so and the repro script compiles twice too. And the minimal case runs once on the
target's eager counterpart (cuda for cuda-compiled) in a fresh worker: a failure that
shows there the same way is the eager kernel's, which the compiled graph only calls, and
is filed as the eager target's (``Triage.filed_as``); for cpu-compiled the counterpart is
eager CPU, the reference itself, so such a failure is eager CPU's bug (``cpu-bug``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ..execution.targets import compiles
from ..generation import catalogue
from ..generation.recipes import Case
from ..generation.strategies import OVERFLOWING_SPECIALS
from ..oracles import HEAP_CORRUPTION, Failure, heap_corruption, symptom_key
from .ablation import Explanation, explain
from .localise import localise
from .probe import SAME, Prober
from .reduce import Reduction, reduce_case

DEFAULT_RERUNS = 4
# A hang's re-runs each wait out the timeout (20 s by default) in a fresh process: two
# that hang at the same case say it reproduces, and the other two would cost 40 s of the
# slow desk that the next crash or hang waits for (issue 37).
HANG_RERUNS = 2


@dataclass
class Reproducibility:
    runs: int
    failed: int
    cold_failed: bool                 # the run in a fresh worker failed
    # It fails every time, but only because two calls with the same contiguous inputs
    # differ within one process (the layout oracle's second call): state carried over.
    state_dependent: bool = False
    # A compiled target's calls failed only on their second compilation (the runs
    # compiled each call twice): the repro script compiles twice too.
    second_compilation: bool = False

    @property
    def reliable(self) -> bool:
        return self.failed == self.runs and not self.state_dependent

    def to_json(self) -> dict:
        out = {"runs": self.runs, "failed": self.failed, "cold_failed": self.cold_failed,
               "rate": round(self.failed / self.runs, 3) if self.runs else 0.0}
        if self.state_dependent:
            out["state_dependent"] = True
        if self.second_compilation:
            out["second_compilation"] = True
        return out


@dataclass
class Triage:
    case: Case
    failure: object
    reproducibility: Reproducibility
    explanation: Explanation | None
    reduction: Reduction | None
    shrunk_case: Case                  # what Hypothesis handed over
    seconds: float
    localisation: dict | None = None   # triage/localise.py's record (reliable findings only)
    # (target name, target spec) the finding is filed as, where not the campaign's own:
    # the eager counterpart of a compiled target that fails the same way
    filed_as: tuple[str, str] | None = None
    # seconds of each step (reruns, reduce, explain, localise, cpu-alone): the campaign's
    # time split (issue 37)
    steps: dict = field(default_factory=dict)

    @property
    def flaky(self) -> bool:
        return not self.reproducibility.reliable

    def minimisation_json(self) -> dict:
        r = self.reduction
        return {"hypothesis_case": self.shrunk_case.to_json(),
                "elements_before": sum(x.numel for x in self.shrunk_case.inputs),
                "elements_after": sum(x.numel for x in self.case.inputs),
                "attempts": r.attempts if r else 0, "accepted": r.accepted if r else 0,
                "budget_exhausted": r.exhausted if r else False,
                "seconds": round(self.seconds, 3)}


def _contiguous_already(case: Case) -> bool:
    """Whether every input is contiguous as torch sees it (a storage offset or a size-1
    dim's stride does not count) in a storage of its own, without a conjugate or negative
    bit (the layout oracle's copies resolve it: eager CPU's copy_ of float32 into a
    float16 negative view ignores the bit where its resolved copy cannot), so that the
    layout oracle's copies are the inputs."""
    if case.is_aliased() or any(r.layout.bit for r in case.inputs):
        return False
    try:
        return all(t.is_contiguous() for t in case.materialize("cpu"))
    except Exception:
        return False


def _process_kind(failure) -> bool:
    return failure.oracle in ("crash", "hang")


def reproduce(case: Case, symptom: tuple, prober: Prober, runs: int) -> Reproducibility:
    failed, cold = 0, False
    each_fresh = prober.fresh
    for k in range(runs):
        prober.fresh = each_fresh or k == 0
        verdict = prober.classify(case, symptom).verdict
        if verdict == SAME:
            failed += 1
            cold = cold or k == 0
    prober.fresh = each_fresh
    return Reproducibility(runs, failed, cold)


def reproduce_compiled_twice(case: Case, symptom: tuple, prober: Prober, runs: int,
                             first: Reproducibility) -> Reproducibility:
    """``first`` (the runs as they come), or, where one run with every call compiled
    twice fails the same way, ``runs`` such runs; if they all fail, the prober keeps
    compiling twice for the rest of triage. For a compiled target whose failure a fresh
    worker's first compilation did not show."""
    was = prober.fresh
    prober.compile_twice, prober.fresh = True, True
    shows = prober.classify(case, symptom).verdict == SAME
    prober.fresh = was
    if shows:
        again = reproduce(case, symptom, prober, runs)
        if again.reliable:
            again.second_compilation = True
            return again
    prober.compile_twice = False
    return first


EDGE_REFUSAL = ("the target refuses the call only when an input holds the dtype's largest values, where the "
                "op's documented arithmetic leaves the dtype (histc of float32's max: max + 1 == max, no range "
                "to bin); no independent reference says the call is in the op's domain")


def refused_at_the_dtypes_edge(case: Case, failure, explanation: Explanation | None) -> bool:
    """Whether the target's clean refusal (a RuntimeError, not a device fault) needs the
    dtype's extremes in the inputs, and nothing else of them: then it is undecided, not
    the target's bug (issue 30, H200: CUDA's histc of a float32 max raised "max must be
    larger than min" where CPU binned it in its last bin)."""
    if failure.kind != "dut-raises" or failure.blame != "target" or explanation is None:
        return False
    if "specials" not in explanation.conditions:
        return False
    names = {name for r in case.inputs for _, name in r.values.specials}
    return bool(names) and names <= set(OVERFLOWING_SPECIALS)


def on_cpu_alone(case: Case, pool, oracles, timeout_s: float | None):
    """The outcome of ``case`` run with eager CPU as the target (both sides eager CPU) in
    a fresh worker: a CaseOutcome, a ProcessEvent, or None where it could not be run."""
    from ..execution.worker import WorkerPool
    cpu = None
    try:
        cpu = WorkerPool("cpu", timeout_s=timeout_s or getattr(pool, "timeout_s", 20.0), execute=pool.execute,
                         role="cpu-alone", settings=getattr(pool, "settings", None))
        return cpu.run(case.to_json(), tuple(oracles), case.op, timeout_s=timeout_s)
    except Exception:
        return None   # best effort: the finding stays as it was
    finally:
        if cpu is not None:
            cpu.close()


def dies_on_cpu_too(case: Case, failure, pool, oracles, timeout_s: float | None) -> bool:
    """Whether eager CPU alone, the case run with CPU as the target in a fresh worker,
    dies with the same signal: then the crash is PyTorch's, not the target's (issue 30,
    point 3; runs 5-36: SDPA with ``enable_gqa`` over zero key heads divides by their
    number, SIGFPE, on CUDA and on CPU alike)."""
    from ..oracles.process import signal_name
    outcome = on_cpu_alone(case, pool, oracles, timeout_s)
    return getattr(outcome, "kind", None) == "died" \
        and signal_name(outcome.returncode) == failure.details.get("signal")


def is_heap_corruption(failure) -> bool:
    return failure.oracle == "crash" and tuple(failure.dedup_key[:2]) == ("crash", HEAP_CORRUPTION)


def heap_corruption_blame(case: Case, failure, pool, oracles, timeout_s: float | None) -> Failure:
    """``failure`` (a heap corruption, reproduced in fresh workers) with its side decided
    by eager CPU alone in a fresh worker, not by the frames of the abort, which lands at
    the heap's next use (the reference may be running when the target did the damage):
    eager CPU alone corrupts its heap too, eager CPU's bug ("cpu": the target's own call
    is not cleared, its abort would land in either side); it runs clean, the target's
    call did it ("target"). Unchanged where eager CPU alone could not run or ended some
    other way (a crash of another kind, a hang, mpsfuzz's own error)."""
    from ..execution.observation import ProcessEvent
    outcome = on_cpu_alone(case, pool, oracles, timeout_s)
    if outcome is None:
        return failure
    if isinstance(outcome, ProcessEvent):
        if outcome.kind == "died" and heap_corruption(outcome.stderr_tail):
            return replace(failure, blame="cpu",
                           title=f"`{case.op}` corrupts the heap on eager CPU ({failure.details.get('heap', '')})",
                           message=failure.message + "\neager CPU alone corrupts its heap on this case, in a fresh "
                           "worker: eager CPU's bug (whether the target's call does too is not decided: the "
                           "abort lands in whichever side next uses the heap)")
        return failure
    if getattr(outcome, "internal_error", None):
        return failure   # mpsfuzz's own error: the case did not run to its end
    return replace(failure, blame="target",
                   message=failure.message + "\neager CPU alone runs this case in a fresh worker without "
                   "corrupting its heap: the target's call did")


def eager_cpus_crash(case: Case, failure, pool, oracles, timeout_s: float | None) -> Failure | None:
    """``failure`` as eager CPU's bug where it is a crash with the reference on the stack
    (blame ``cpu``) and eager CPU alone (a fresh worker, both sides eager CPU) dies the
    same way on ``case`` (dies_on_cpu_too's rule, the same signal), else None (triage
    goes on: the target's call may be the cause). Asked before reduction, so that a
    crash of the reference does not spend the target's reduction and ablation budget.
    A heap corruption is decided by heap_corruption_blame instead (its abort lands at
    the heap's next use, so either side may have damaged it)."""
    if failure.oracle == "crash" and failure.blame == "cpu" \
            and dies_on_cpu_too(case, failure, pool, oracles, timeout_s):
        return replace(failure, message=failure.message + "\neager CPU alone dies the same way on this case, "
                       "in a fresh worker: eager CPU's bug")
    return None


class _Steps:
    """The seconds of each step of one triage, in order."""

    def __init__(self, start: float):
        self.seconds: dict = {}
        self._last = start

    def done(self, step: str) -> None:
        now = time.monotonic()
        self.seconds[step] = self.seconds.get(step, 0.0) + now - self._last
        self._last = now


@dataclass(frozen=True)
class EagerFailure:
    """A compiled target's failure as its eager counterpart shows it."""
    failure: Failure
    target_name: str
    target_spec: str

    def on_reference(self, case: Case) -> bool:
        """The counterpart is eager CPU (cpu-compiled's) and eager CPU's kernel is the
        case's reference: not so for a user's kernel or an op with a reference of its
        own, whose eager run is the kernel under test."""
        try:
            return self.target_spec == "cpu" and catalogue.get(case.op).reference_fn is None
        except KeyError:
            return False


def shown_eagerly(case: Case, failure, pool, oracles, timeout_s: float | None) -> EagerFailure | None:
    """The eager counterpart's failure where ``case``, run once on the eager counterpart
    of ``pool``'s compiled target in a fresh worker, fails the same way there (the same
    symptom, the target's name aside); None where it does not, or the target compiles
    nothing or names no counterpart."""
    from ..execution.worker import WorkerPool
    spec, compiled = getattr(pool, "eager_counterpart", None), getattr(pool, "target_name", "")
    if not spec or not compiles(compiled):
        return None
    eager = None
    try:
        eager = WorkerPool(spec, timeout_s=timeout_s or getattr(pool, "timeout_s", 20.0), execute=pool.execute,
                           role="eager-counterpart", settings=getattr(pool, "settings", None))
        failures, _, _ = Prober(eager, tuple(oracles), timeout_s=timeout_s).failures(case)
    except Exception:
        return None   # best effort: the finding stays the compiled target's
    finally:
        if eager is not None:
            eager.close()
    wanted = symptom_key(case, failure)
    for shown in failures:
        if tuple(compiled if part == eager.target_name else part for part in symptom_key(case, shown)) == wanted:
            return EagerFailure(shown, eager.target_name, spec)
    return None


def filed_as_eager(shown: Failure, eager_name: str, compiled_name: str, *, reference: bool) -> Failure:
    """The eager counterpart's failure as the finding records it. ``reference``: the
    counterpart is eager CPU, the reference (cpu-compiled): eager CPU's bug, not the
    compilation's."""
    if reference:
        note = (f"eager CPU alone (the reference) fails the same way, in a fresh worker: not a bug of "
                f"{compiled_name}'s compilation but of eager CPU's kernel, which its graph calls")
        blame = "cpu" if shown.blame == "target" else shown.blame
    else:
        note = (f"{eager_name} alone (eager) fails the same way, in a fresh worker: {compiled_name}'s graph "
                f"calls {eager_name}'s kernel; filed as {eager_name}'s")
        blame = shown.blame
    return replace(shown, blame=blame, title=f"{shown.title} (and on {compiled_name}, whose graph calls it)",
                   message=f"{shown.message}\n{note}", details=dict(shown.details, compiled_target=compiled_name))


def triage(case: Case, failure, pool, oracles, *, reruns: int = DEFAULT_RERUNS, budget_s: float = 30.0,
           timeout_s: float | None = None, localise_it: bool = True) -> Triage:
    """Re-run, reduce and explain one failure. ``pool`` is the campaign's worker pool
    (``fresh()`` gives a new worker); ``oracles`` the campaign's oracle names."""
    start = time.monotonic()
    steps = _Steps(start)
    symptom = symptom_key(case, failure)
    prober = Prober(pool, tuple(oracles), fresh=_process_kind(failure), timeout_s=timeout_s)
    if failure.oracle == "hang":
        prober.probe_cost_s = timeout_s if timeout_s is not None else getattr(pool, "timeout_s", 0.0)
    runs = max(1, min(reruns, HANG_RERUNS) if failure.oracle == "hang" else reruns)
    repro = reproduce(case, symptom, prober, runs)
    if not repro.cold_failed and compiles(getattr(pool, "target_name", "")):
        repro = reproduce_compiled_twice(case, symptom, prober, runs, repro)
    steps.done("reruns")
    if not repro.reliable:
        return Triage(case, failure, repro, None, None, case, time.monotonic() - start, steps=steps.seconds)
    heap_before = None
    if is_heap_corruption(failure):
        heap_before = heap_corruption_blame(case, failure, pool, oracles, timeout_s)
        eager_cpus = heap_before if heap_before.blame == "cpu" else None
    else:
        eager_cpus = eager_cpus_crash(case, failure, pool, oracles, timeout_s)
    steps.done("cpu-alone")
    if eager_cpus is not None:
        # The reference's own crash: filed as eager CPU's bug without the reduction and
        # ablation that are the target's budget (a slow desk's crash re-runs each take a
        # fresh worker: a CPU heap corruption reduced for 20 s kept the target's crashes
        # waiting, and was left pending at a budget's end). Localised, as every finding.
        localisation = (localise(case, eager_cpus, pool, oracles, timeout_s=timeout_s)
                        if localise_it else None)
        steps.done("localise")
        return Triage(case, eager_cpus, repro, None, None, case, time.monotonic() - start, localisation,
                      steps=steps.seconds)
    reduction = reduce_case(case, failure, symptom, prober, budget_s=budget_s * 0.6)
    minimal, minimal_failure = reduction.case, reduction.failure
    if minimal != case:
        was = prober.fresh
        prober.fresh = True
        check = prober.classify(minimal, symptom)
        prober.fresh = was
        if check.verdict != SAME:
            minimal, minimal_failure = case, failure
        else:
            minimal_failure = check.same
    steps.done("reduce")
    if failure.oracle == "layout" and _contiguous_already(minimal):
        # ``.contiguous()`` handed the op the very same tensors, and the two calls still
        # differ: not a layout bug but a result that depends on earlier calls. Flaky.
        repro.state_dependent = True
        return Triage(minimal, minimal_failure, repro, None, reduction, case, time.monotonic() - start,
                      steps=steps.seconds)
    remaining = max(0.4 * budget_s, budget_s - (time.monotonic() - start))
    explanation = explain(minimal, minimal_failure, symptom, prober, budget_s=remaining)
    steps.done("explain")
    localisation = (localise(minimal, minimal_failure, pool, oracles, timeout_s=timeout_s)
                    if localise_it else None)
    steps.done("localise")
    filed_as = None
    if minimal_failure.blame == "target":
        shown = shown_eagerly(minimal, minimal_failure, pool, oracles, timeout_s)
        if shown is not None:
            minimal_failure = filed_as_eager(shown.failure, shown.target_name, pool.target_name,
                                             reference=shown.on_reference(minimal))
            filed_as = (shown.target_name, shown.target_spec)
    if refused_at_the_dtypes_edge(minimal, minimal_failure, explanation):
        minimal_failure = replace(
            minimal_failure, blame="undecided", severity="low",
            message=minimal_failure.message + "\n" + EDGE_REFUSAL,
            details=dict(minimal_failure.details, verdict="undecided", reason=EDGE_REFUSAL))
    if is_heap_corruption(minimal_failure):
        # (eager CPU alone ran this very case before reduction: its answer stands)
        minimal_failure = heap_before if minimal == case and heap_before is not None \
            else heap_corruption_blame(minimal, minimal_failure, pool, oracles, timeout_s)
    elif minimal_failure.oracle == "crash" and minimal_failure.blame == "target" \
            and dies_on_cpu_too(minimal, minimal_failure, pool, oracles, timeout_s):
        minimal_failure = replace(
            minimal_failure, blame="both", severity="high",
            title=f"`{minimal.op}` crashes the process on the target and on eager CPU alike "
                  f"({minimal_failure.details.get('signal', '')})",
            message=minimal_failure.message + "\neager CPU dies the same way on this case, alone in a fresh process")
    steps.done("cpu-alone")
    return Triage(minimal, minimal_failure, repro, explanation, reduction, case, time.monotonic() - start,
                  localisation, filed_as, steps=steps.seconds)
