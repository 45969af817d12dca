"""Judge one case: observe it (the executor), then run the case oracles and the verdicts.

:func:`judge_case` is what a worker runs for each case: the campaign, triage, replay and
the pytest plugin hand it to :class:`~mpsfuzz.execution.worker.WorkerPool`
(``execute=judge_case``), which imports it by name in the worker. Its
:class:`~mpsfuzz.execution.outcome.CaseOutcome` is what the supervisor sees.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import OrderedDict

import torch

from ..execution.error_kinds import is_device_fault, is_memory_exhausted
from ..execution.executor import as_raised, observe, unsupported_here
from ..execution.harness_clock import judging
from ..execution.observation import Observation, Raised
from ..execution.outcome import CaseOutcome, CaseSeconds
from ..execution.targets import release_cached_memory
from ..generation import catalogue
from ..generation.recipes import InputTooLarge, case_bytes
from . import all_oracles
from .errors import device_fault_failure
from .values import flatten_outputs

# Cases whose inputs take this much are followed by releasing the device's cached memory.
RELEASE_AFTER_BYTES = 1 << 28


def judge_case(case, target, oracle_names, *, compile_twice: bool = False) -> CaseOutcome:
    """Run ``case`` on both sides and the enabled case oracles: its outcome.

    The op's own errors are observations (the oracles judge them). An error that says a
    kernel is missing, raised by mpsfuzz's *own* processing of the case (comparing,
    canonicalising, the float64 arbiter, all on the CPU or the device), means this
    torch cannot judge the case: ``unsupported here``, not a harness failure.
    ``compile_twice``: a compiled target's calls are judged on their second compilation
    (executor.observe)."""
    try:
        return _judge(case, target, oracle_names, compile_twice)
    except InputTooLarge:
        # A storage past --max-bytes (a triage edit that made a stride-0 view dense): no case.
        return CaseOutcome.no_case()
    except Exception as exc:
        if is_memory_exhausted(exc):
            # Making the inputs (or our own float64 copies) ran out of memory: a limit of
            # this machine at this moment, like the op's own out-of-memory error, never a
            # harness error (issue 31's large class, H200: 28 of them set two ops aside).
            return CaseOutcome.out_of_memory(str(exc))
        if is_device_fault(str(exc)):
            # A kernel of this case faulted asynchronously and the error surfaced in a
            # later call: the device context is unusable, so the worker is replaced.
            return _faulted(case, target, exc, oracle_names)
        why = unsupported_here(case, exc)
        if why is None:
            raise
        return CaseOutcome.not_judgeable_here(why)


def _faulted(case, target, exc: BaseException, oracle_names) -> CaseOutcome:
    failures = [device_fault_failure(catalogue.get(case.op).name, target.name, as_raised(exc))] \
        if "errors" in oracle_names else []
    return CaseOutcome.device_fault(f.to_json() for f in failures)


def _judge(case, target, oracle_names, compile_twice: bool = False) -> CaseOutcome:
    try:
        return _judged(case, target, oracle_names, compile_twice)
    finally:
        if case_bytes(case) >= RELEASE_AFTER_BYTES:
            # The allocator keeps a large case's blocks cached: released now, a worker holds
            # one case's memory at a time, as the --max-bytes bound per lane assumes (run
            # 38, H200: two lanes of --max-bytes 40GB held 71 and 50 GiB, and cases of the
            # other lanes ran out of memory).
            release_cached_memory(target)


def _judged(case, target, oracle_names, compile_twice: bool = False) -> CaseOutcome:
    enabled = tuple(oracle_names)
    started = time.perf_counter()
    obs = observe(case, target, enabled, compile_twice=compile_twice)
    if obs is None:  # the variant cannot be formed for this case
        return CaseOutcome.no_case(CaseSeconds(run=time.perf_counter() - started))
    seconds = {"run": time.perf_counter() - started}
    failures = run_case_oracles(obs, enabled, seconds)
    dut_raised, ref_raised = isinstance(obs.dut, Raised), isinstance(obs.ref, Raised)
    return CaseOutcome(
        poisoned=obs.poisoned,
        valid=not ref_raised,
        unsupported=dut_raised and obs.dut.unsupported and not ref_raised,
        unsupported_message=obs.dut.message.splitlines()[0][:200] if dut_raised and obs.dut.unsupported else "",
        ref_widened=obs.ref_widened,
        # why the gradients got no verdict (the point has no derivative), if so
        grad_undefined=obs.cache.get("grad_undefined"),
        failures=tuple(f.to_json() for f in failures),
        # where the worker's time on this case went (the campaign's time split, issue 37)
        seconds=CaseSeconds(**seconds),
    )


def run_case_oracles(obs: Observation, enabled, seconds: dict | None = None) -> list:
    """Case checks in order, then each verdict check (the float64 arbiter) on every
    failure: it may confirm, re-attribute (the CPU is the one that is wrong) or
    dismiss it. ``seconds``, if given, gets the time of each: ``check`` and ``jury``."""
    oracles = all_oracles()
    seconds = {} if seconds is None else seconds
    started = time.perf_counter()
    failures = []
    for name in enabled:
        o = oracles[name]
        if o.stage == "case":
            failure = o.check(obs)
            if failure is not None:
                failures.append(failure)
    if any(f.oracle == "values" for f in failures):
        # The DUT-alone comparisons would report the same wrong result again, and
        # gradients computed from a wrong forward result are wrong as a consequence: one
        # bug, one finding (a backward bug of its own shows once the forward is right).
        failures = [f for f in failures
                    if not (f.oracle in ("layout", "grads") or f.kind.startswith("variant-"))]
    # The verdicts (the float64 arbiter, the jury) are mpsfuzz's time, not the target's:
    # the pool does not count it against the case's timeout (execution/harness_clock.py).
    checked = time.perf_counter()
    seconds["check"] = checked - started
    if failures and any(oracles[name].stage == "verdict" for name in enabled):
        key = _verdict_key(obs, failures, enabled)
        if key is not None and key in _VERDICTS and _VERDICTS[key][0] is obs.spec:
            _VERDICTS.move_to_end(key)
            failures = list(_VERDICTS[key][1])
        else:
            with judging():
                for name in enabled:
                    o = oracles[name]
                    if o.stage == "verdict":
                        failures = [f for f in (o.check(obs, f) for f in failures) if f is not None]
            if key is not None:
                _VERDICTS[key] = (obs.spec, tuple(failures))
                while len(_VERDICTS) > VERDICTS_KEPT:
                    _VERDICTS.popitem(last=False)
    seconds["jury"] = time.perf_counter() - checked
    return failures


# The verdicts of the last cases this process judged, by what they were judged on: the
# case, both sides' outputs and gradients, and the case oracles' failures. The jury's
# float64 runs and traced decompositions (seconds for a convolution's gradient) are
# deterministic in these, and triage re-runs one case four times in one worker to see
# whether it fails every time (issue 37: the jury's cost bounded per failure). A verdict
# is kept with the op spec it was judged by and used only for that very spec (held, so its
# identity cannot be reused): the spec's semantics and references decide it too.
_VERDICTS: OrderedDict = OrderedDict()
VERDICTS_KEPT = 16


def forget_verdicts() -> None:
    """Forget the remembered verdicts: for whoever changes the jury's references in a
    running process (a test registering a formula); a campaign never does."""
    _VERDICTS.clear()


def _verdict_key(obs: Observation, failures: list, enabled) -> bytes | None:
    """What a verdict was judged on, digested; None where some of it cannot be read
    (then nothing is remembered)."""
    try:
        return _digest_of(obs, failures, enabled)
    except Exception:
        return None


def _digest_of(obs: Observation, failures: list, enabled) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(json.dumps([obs.case.to_json(), list(enabled)], sort_keys=True, default=str).encode())
    for f in failures:
        digest.update(repr((f.oracle, f.kind, f.dedup_key, f.blame, f.message)).encode())
    sides = [obs.dut, obs.ref]
    for side in (obs.dut_side, obs.ref_side, obs.dut_functional, obs.dut_contiguous):
        sides += [getattr(side, "outputs", None), getattr(side, "grads", None)]
    for side in sides:
        for leaf in flatten_outputs(side) if side is not None and not isinstance(side, Raised) else [side]:
            if isinstance(leaf, torch.Tensor):
                data = leaf.detach().cpu().resolve_conj().resolve_neg().contiguous()
                digest.update(repr((tuple(data.shape), str(data.dtype))).encode())
                digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b"")
            else:
                digest.update(repr(leaf).encode())
    return digest.digest()


# A worker zygote that imports this module (the pool preloads the module of the function
# it is handed) forks workers with every oracle loaded.
all_oracles()


def _main() -> None:  # pragma: no cover - debugging aid: judge one case file in-process
    from ..execution.targets import load_target
    from ..generation.recipes import Case
    case = Case.from_json(json.load(open(sys.argv[1])))
    print(json.dumps(judge_case(case, load_target(sys.argv[2]), ("values", "errors")).to_json(), indent=2))


if __name__ == "__main__":  # pragma: no cover
    _main()
