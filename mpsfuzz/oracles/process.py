"""``crash`` and ``hang``: the worker process died, or did not answer in time.

These run in the supervisor, which sees a
:class:`~mpsfuzz.execution.observation.ProcessEvent` instead of outputs.
Crashes key on the signal plus the cleaned last lines of stderr (ClusterFuzz style),
a heap corruption on its kind alone (with the op, as every key: ``symptom_key``); hangs
key on the op alone.
"""
from __future__ import annotations

import re
import signal

from ..execution.observation import ProcessEvent
from . import HEAP_CORRUPTION, Failure, heap_corruption, is_harness_frame, oracle

_NOISE = re.compile(r"0x[0-9a-fA-F]+|\b\d+\b|/[^\s:]+/")


def signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "unknown"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit {returncode}"


_FRAME = re.compile(r'File "(?:.*/)?([^/"]+)", line \d+ in (\S+)')


def clean_frames(stderr_tail: str, keep: int = 3) -> tuple[str, ...]:
    """The top frames of a crash, cleaned: ``file.py:function`` from faulthandler's
    dump (most recent call first), less the harness's own (:data:`HARNESS_FILES`), when
    there is one, else the last stderr lines with addresses, numbers and paths masked."""
    frames = [f"{m.group(1)}:{m.group(2)}" for m in _FRAME.finditer(stderr_tail)]
    if frames:
        return tuple([f for f in frames if not is_harness_frame(f)][:keep] or frames[:keep])
    lines = [ln.strip() for ln in stderr_tail.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("Fatal Python error", "Current thread",
                                                      "Thread 0x", "Extension modules"))]
    return tuple(_NOISE.sub("N", ln)[:120] for ln in lines[-keep:])


# The executor's function that runs the eager CPU reference (execution/executor.py):
# a crash with it on the stack is eager CPU's, not the target's. The DUT runs first, so
# a case whose reference crashed ran on the target without crashing.
REFERENCE_FRAME = "run_reference"


def crashed_in_reference(stderr_tail: str) -> bool:
    """Whether faulthandler's dump of the crash shows the CPU reference running."""
    return any(m.group(2) == REFERENCE_FRAME for m in _FRAME.finditer(stderr_tail))


# What the supervisor can say of a heap corruption's side. The allocator aborts at the
# heap's next use, not at the damage: with no reference frame on the stack the reference
# had not started (the DUT runs first), so the target's call (or an earlier case of the
# worker's batch) did it; with the reference running, either side of the case may have.
# Triage decides by eager CPU alone (triage/pipeline.py: heap_corruption_blame).
HEAP_UNDECIDED = ("the allocator aborts at the heap's next use, not where it was damaged: the target's call "
                  "ran before the reference, and either may have damaged it")


@oracle("crash", stage="process", doc="the worker process died (abort, segfault, ...)")
def check_crash(event: ProcessEvent) -> Failure | None:
    if event.kind != "died":
        return None
    sig = signal_name(event.returncode)
    on_cpu = crashed_in_reference(event.stderr_tail)
    heap = heap_corruption(event.stderr_tail)
    if heap is not None:
        # keyed by the kind, never the frames: they are wherever the heap was next used
        return Failure(
            oracle="crash", kind="crash", severity="critical",
            title=f"`{event.op}` corrupts the heap ({heap}; {sig})",
            message=f"worker died with {sig} after the allocator found its heap corrupted ({heap}); the crash "
                    f"is keyed by the op, not by its frames, which are wherever the heap was next used"
                    f"{' (the CPU reference was running: ' + HEAP_UNDECIDED + ')' if on_cpu else ''}"
                    f"; last stderr lines:\n{event.stderr_tail.strip()}",
            dedup_key=("crash", HEAP_CORRUPTION),
            details={"signal": sig, "returncode": event.returncode, "heap": heap},
            blame="undecided" if on_cpu else "target")
    where = "eager CPU (the reference)" if on_cpu else event.target_name
    return Failure(
        oracle="crash", kind="crash", severity="critical",
        title=f"`{event.op}` crashes the process on {where} ({sig})",
        message=f"worker died with {sig}{' in the CPU reference' if on_cpu else ''}; last stderr lines:\n"
                f"{event.stderr_tail.strip() or '(none)'}",
        dedup_key=("crash", sig, *clean_frames(event.stderr_tail, keep=2)),
        details={"signal": sig, "returncode": event.returncode},
        blame="cpu" if on_cpu else "target")


@oracle("hang", stage="process", doc="the worker did not answer within the per-case timeout (compilation aside)")
def check_hang(event: ProcessEvent) -> Failure | None:
    if event.kind != "timeout":
        return None
    return Failure(
        oracle="hang", kind="hang", severity="critical",
        title=f"`{event.op}` hangs on {event.target_name} (no answer in {event.timeout_s:g}s)",
        message=f"the worker did not answer within {event.timeout_s:g}s and was killed",
        dedup_key=("hang", event.target_name))
