"""Localisation: the first aten kernel that goes wrong in a finding's minimal case.

A public op (``torch.linalg.lu_factor``, ``torch.matmul``) runs as a sequence of aten
calls. In a worker, the minimal case is run again on the target under a
:class:`~torch.utils._python_dispatch.TorchDispatchMode` that, for every aten call, runs
the call on the device as usual and also runs the same overload on CPU copies of its
arguments (same values, and the same sizes, strides and storage offsets over a copy of
each storage, views of one storage sharing one copy: a layout-dependent kernel sees what
the device kernel saw), with every dispatch mode disabled, and compares:

- the outputs (shape, dtype, channels_last-ness of 4-D/5-D results, values with the
  dtype tolerance of :mod:`..oracles.tolerances` and the op's own scale, NaN positions);
- the arguments the schema marks as written (in-place ``self``, ``out=``);
- everything else in the argument storages, which must not change: a kernel that
  overwrites an input its schema does not let it write (``writes-input``, like CUDA
  ``linalg_eig`` on a transposed input) or writes past a view (``writes-outside-view``);
- an error raised on one side only (``raises-on-device``, ``raises-on-cpu``).

The mode is pushed *inside* the function that ``target.run`` calls, so it sits above the
target's own modes (the fault target's ``FaultMode``): faults fire below it and it sees
their results. Calls whose results legitimately differ are not compared: random ones
(``torch.Tag.nondeterministic_seeded``: run on the device only, unless the op is not a
random op and the CPU kernel gives one result for two seeds, as attention with dropout 0
does; the CPU generator's state is restored, it is the device's on a CPU target), ones
that return uninitialised memory (``empty``, ``resize_``...: metadata only), outputs
that differ between two CPU runs of the same call (workspaces), and values of ops
declared ``undefined-values``.

The first divergent call is a candidate, not yet the answer: a kernel may legitimately
differ (an eigenvector's phase, the index of one of several ties). So each divergent
call in turn (at most :data:`MAX_CANDIDATES`) is *fixed*: the case runs again with that
one call replaced by the CPU kernel's effect (its outputs, and its writes to the
arguments); the first whose fix makes the finding's failure go away is the kernel.
Where only fixing several at once cures it (two faulty kernels in one case, or one
kernel called twice: the functional call before an ``out=`` call), the smallest such set
is found and its first call is the kernel (the others are listed as ``with``). Where no
call diverges, or fixing all of them does not cure the failure, the bug is ``composite``
(in how the op combines correct kernels); where no compared call diverges but some calls
could not be compared (random kernels, a CPU without the kernel), it is not localised,
unless such a call raised on the device: the error starts there, and that call is the
kernel (``confirmed: false``: no fix run can replace it with CPU's result).

Crashes and hangs cannot be compared in-process: a trace mode appends each call (kernel
and arguments) to a file before running it and marks it done after it (and after a
device synchronisation, so an asynchronous fault shows at its own call); the call that
started but never finished when the worker died or hung is the kernel.
Compiled targets run Inductor's code, not aten kernels: not localised.

Everything here is best effort: an exception in the localiser itself becomes
``{"status": "error", "error": ...}`` and never touches the finding or the campaign.
"""
from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..execution.dispatch_modes import DenseHigherOrderOps
from ..execution.outcome import CaseOutcome, RaisedInWorker
from ..oracles import HEAP_CORRUPTION
from .kernel_call import (CRASH, HANG, RAISES_ON_CPU, RAISES_ON_DEVICE, WRITES_INPUT, WRITES_OUTSIDE,
                          WRONG_DTYPE, WRONG_FORMAT, WRONG_SHAPE, WRONG_VALUES, Judge, Snapshot, Uncomparable,
                          compare_call, cpu_call, describe_call, deterministic, is_seeded, kernel_form,
                          kernel_name, seed_independent, snapshot, tensor_leaves)

KERNEL, COMPOSITE, NOT_LOCALISED, ERROR = "kernel", "composite", "not-localised", "error"
# The symptom class of a divergence (the bug key keeps classes apart, not kinds: wrong
# values and an overwritten input of one call are one bug).
DIVERGENCE_CLASSES = {WRONG_VALUES: "wrong", WRONG_SHAPE: "wrong", WRONG_DTYPE: "wrong", WRONG_FORMAT: "wrong",
                      WRITES_INPUT: "wrong", WRITES_OUTSIDE: "wrong", RAISES_ON_DEVICE: "raises",
                      RAISES_ON_CPU: "accepts", CRASH: "crash", HANG: "hang"}

MAX_CANDIDATES = 4          # divergent calls tried alone as the kernel, first first
MAX_RECORDED = 16           # divergent calls recorded (and fixed together when none alone cures it)

def divergence_class(kind: str) -> str:
    return DIVERGENCE_CLASSES.get(kind, "wrong")


# -- the modes ------------------------------------------------------------------------------

@dataclass
class Divergence:
    index: int
    kernel: str
    kinds: list[str]
    detail: str
    call: dict
    where: dict = field(default_factory=dict)
    # Why no CPU run can confirm it (a random call, or one without a CPU kernel: cuDNN's
    # RNN): it raised on the device inside this call, and that is where the error starts.
    device_only: str = ""

    def summary(self) -> dict:
        return {"index": self.index, "kernel": self.kernel, "divergence": self.kinds[0], "kinds": list(self.kinds)}


class CompareMode(DenseHigherOrderOps):
    """Runs each aten call on the device and on CPU copies of its arguments and records
    the calls that diverge. The calls whose indices are in ``fix`` are not run on the
    device at all: the CPU kernel's effect replaces them (outputs moved to the device, its
    writes copied into the device arguments)."""

    def __init__(self, judge: Judge, fix=frozenset(), device=None):
        super().__init__()
        self.judge = judge
        self.fix = frozenset(fix)
        self.fixed: dict[int, str] = {}   # index -> kernel of each call replaced
        self.seeded: list[str] = []       # random kernels, run on the device only
        self.device = torch.device(device) if device is not None else None
        self.calls = 0
        self.kernels: list[str] = []
        self.divergences: list[Divergence] = []
        self.problems = 0        # calls that could not be compared
        self.uncompared: list[str] = []   # "kernel: why", the first few

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        index = self.calls
        self.calls += 1
        self.kernels.append(kernel_name(func))
        seeded = is_seeded(func)
        try:
            with _disable_current_modes(), torch.no_grad():
                snap = snapshot(func, args, kwargs)
        except Exception as exc:
            if not seeded:
                self._problem(func, exc)
            snap = None
        if seeded and (snap is None or self.judge.random_op or not seed_independent(func, args, kwargs, snap)):
            # A random call that uses its randomness: on the device only, never compared.
            if kernel_name(func) not in self.seeded:
                self.seeded.append(kernel_name(func))
            return self._device_only(index, func, args, kwargs, snap, "a random call, run on the device alone")
        if snap is None:
            return self._device_only(index, func, args, kwargs, snap, "its arguments could not be copied to CPU")
        if index in self.fix:
            self.fixed[index] = kernel_name(func)
            return self._cpu_in_place_of_device(func, args, kwargs, snap)
        try:
            out, device_error = func(*args, **kwargs), None
        except Exception as exc:
            out, device_error = None, exc
        try:
            self._compare(index, func, args, kwargs, snap, out, device_error)
        except Exception as exc:
            self._problem(func, exc)
        if device_error is not None:
            raise device_error
        return out

    def _compare(self, index, func, args, kwargs, snap, out, device_error) -> None:
        from ..execution.executor import is_unsupported
        if device_error is not None and is_unsupported(device_error):
            return  # the device has no kernel for this: unsupported, never a bug
        cpu_out, cpu_error = cpu_call(func, snap)
        if isinstance(cpu_error, Uncomparable):
            self._problem(func, cpu_error)
            if device_error is not None:
                self._raised_alone(index, func, args, kwargs, snap, device_error, f"no CPU run of it: {cpu_error}")
            return
        if device_error is not None and cpu_error is not None:
            return  # both reject the call (the messages may differ)
        if device_error is not None:
            kinds = [(RAISES_ON_DEVICE, f"{type(device_error).__name__}: {str(device_error).strip()[:500]}", {})]
        elif cpu_error is not None:
            kinds = [(RAISES_ON_CPU, f"CPU raises {type(cpu_error).__name__}: {str(cpu_error).strip()[:500]}; "
                                     "the device returns a result", {})]
        else:
            with _disable_current_modes(), torch.no_grad():
                kinds = compare_call(func, snap, out, cpu_out, self.judge)
            with _disable_current_modes():
                if kinds and "output" in kinds[0][2] and not deterministic(func, args, kwargs, snap, cpu_out,
                                                                            kinds[0][2]["output"]):
                    # CPU itself gives another result for the same call: the output is
                    # not defined there (a workspace left uninitialised), not a bug.
                    self._problem(func, Uncomparable(f"output {kinds[0][2]['output']} differs between two "
                                                      "CPU runs of the same call"))
                    kinds = kinds[1:]
        if kinds and len(self.divergences) < MAX_RECORDED:
            with _disable_current_modes(), torch.no_grad():
                call = describe_call(func, args, kwargs, snap)
                call["tolerance"] = self._tolerances(snap, cpu_out)
            if device_error is not None or cpu_error is not None:
                error = device_error if device_error is not None else cpu_error
                call["error"] = {"type": type(error).__name__, "message": str(error).strip()[:300]}
            self.divergences.append(Divergence(index, kernel_name(func), list(dict.fromkeys(k for k, _, _ in kinds)),
                                               "\n".join(d for _, d, _ in kinds), call, kinds[0][2]))

    def _device_only(self, index, func, args, kwargs, snap, why: str):
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            from ..execution.executor import is_unsupported
            if not is_unsupported(exc):
                self._raised_alone(index, func, args, kwargs, snap, exc, why)
            raise

    def _raised_alone(self, index, func, args, kwargs, snap, exc: Exception, why: str) -> None:
        """A call that raised on the device and that no CPU run can compare: the error
        starts in it all the same (issue 30, H200: cuDNN's RNN, ``rnn: hx is not
        contiguous``, was not localised, so gru, lstm and their stacked forms made
        eight bugs of one kernel's layout checks)."""
        if len(self.divergences) >= MAX_RECORDED:
            return
        try:
            with _disable_current_modes(), torch.no_grad():
                call = describe_call(func, args, kwargs, snap)
        except Exception:  # the arguments cannot be described: the kernel's name still stands
            call = {"kernel": kernel_name(func)}
        call["error"] = {"type": type(exc).__name__, "message": str(exc).strip()[:300]}
        self.divergences.append(Divergence(index, kernel_name(func), [RAISES_ON_DEVICE],
                                           f"{type(exc).__name__}: {str(exc).strip()[:500]}", call,
                                           device_only=why))

    def _problem(self, func, exc: Exception) -> None:
        self.problems += 1
        if len(self.uncompared) < 4:
            self.uncompared.append(f"{kernel_name(func)}: {type(exc).__name__}: {str(exc)[:150]}")

    def _tolerances(self, snap: Snapshot, cpu_out) -> dict:
        leaves = [t for t in tensor_leaves(cpu_out) if isinstance(t, torch.Tensor)]
        leaves += [a.cpu for a in snap.tensors if a.mutated]
        dtype = leaves[0].dtype if leaves else torch.float64
        rtol, atol = self.judge.tolerance(dtype)
        return {"rtol": rtol, "atol": atol}

    def _cpu_in_place_of_device(self, func, args, kwargs, snap: Snapshot):
        cpu_out, cpu_error = cpu_call(func, snap)
        if isinstance(cpu_error, Uncomparable):
            return func(*args, **kwargs)  # cannot fix this call: it runs as it is
        if cpu_error is not None:
            raise cpu_error
        with _disable_current_modes(), torch.no_grad():
            for arg in snap.tensors:
                if not arg.mutated:
                    continue
                d, c = arg.device, arg.cpu
                if tuple(d.shape) != tuple(c.shape) or tuple(d.stride()) != tuple(c.stride()):
                    d.set_(torch.empty_strided(tuple(c.shape), tuple(c.stride()), dtype=c.dtype, device=d.device))
                d.copy_(c)
            by_cpu = {id(a.cpu): a.device for a in snap.tensors}
            leaves, spec = tree_flatten(cpu_out)

            def to_device(x):
                if not isinstance(x, torch.Tensor):
                    return x
                if id(x) in by_cpu:
                    return by_cpu[id(x)]
                device = snap.tensors[0].device.device if snap.tensors else (self.device or x.device)
                try:
                    return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype,
                                               device=device).copy_(x)
                except RuntimeError:
                    return x.to(device)
            return tree_unflatten([to_device(x) for x in leaves], spec)


class TraceMode(DenseHigherOrderOps):
    """Appends each call to a file before running it and marks it done afterwards (after
    synchronising the device): the call left open when the process died or hung is the
    kernel. Lines are written with ``os.write`` (no buffer to lose on an abort)."""

    def __init__(self, path: str, synchronize):
        super().__init__()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.synchronize = synchronize
        self.calls = 0

    def _write(self, record: dict) -> None:
        os.write(self.fd, (json.dumps(record) + "\n").encode())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        index = self.calls
        self.calls += 1
        try:
            with _disable_current_modes(), torch.no_grad():
                snap = snapshot(func, args, kwargs)
                call = describe_call(func, args, kwargs, snap)
        except Exception:
            call = {"kernel": kernel_name(func), "form": kernel_form(func), "args": None}
        self._write({"start": index, "call": call})
        out = func(*args, **kwargs)
        try:
            with _disable_current_modes():
                self.synchronize()
        finally:
            self._write({"end": index})
        return out

    def close(self) -> None:
        os.close(self.fd)


class _WithMode:
    """The target, with ``mode`` pushed inside every function its ``run`` calls (so above
    the target's own modes)."""

    def __init__(self, target, mode: TorchDispatchMode):
        self._target, self.mode = target, mode
        self.name, self.device = target.name, target.device

    def run(self, fn, *args, **kwargs):
        def under_mode(*a, **k):
            with self.mode:
                return fn(*a, **k)
        return self._target.run(under_mode, *args, **kwargs)

    def synchronize(self) -> None:
        self._target.synchronize()

    def memory_allocated(self) -> int:
        return self._target.memory_allocated()

    def is_available(self) -> bool:
        return True


# -- inside the worker ----------------------------------------------------------------------

def is_compiled(target) -> bool:
    from ..execution.targets import CompiledTarget
    return isinstance(target, CompiledTarget) or str(getattr(target, "name", "")).endswith("-compiled")


def _judge_for(case) -> Judge:
    from ..generation import catalogue
    spec = catalogue.get(case.op)
    return Judge(spec.rtol_scale, spec.atol_scale, compare_values="undefined-values" not in spec.semantics,
                 random_op="random" in spec.semantics)


def _has_symptom(case, result: CaseOutcome, symptom: tuple) -> bool:
    from ..oracles import Failure, symptom_key
    return any(tuple(symptom_key(case, Failure.from_json(f))) == symptom for f in result.failures)


def _run(case, target, oracle_names, mode):
    from ..oracles.judge import judge_case
    return judge_case(case, _WithMode(target, mode), oracle_names)


@dataclass(frozen=True)
class Localised:
    """What :func:`localise_case` answers through the worker's pipe: the localisation
    record (kept with the finding as it is) and whether the device context was lost
    while the case ran (``poisoned``: the pool replaces the worker)."""
    record: dict
    poisoned: bool = False


def localise_case(case, target, oracle_names, symptom, *, process_kind: bool = False,
                  trace_path: str | None = None) -> Localised:
    """In the worker: the localisation record of ``case``, whose failure has ``symptom``
    (see the module docstring). Never raises."""
    record = _localisation_record(case, target, oracle_names, symptom, process_kind, trace_path)
    return Localised(record, poisoned=bool(record.get("poisoned")))


def _localisation_record(case, target, oracle_names, symptom, process_kind: bool, trace_path: str | None) -> dict:
    start = time.monotonic()
    try:
        if is_compiled(target):
            return {"status": NOT_LOCALISED, "reason": "compiled target: it runs Inductor's generated code, "
                                                       "not aten kernels"}
        oracle_names = tuple(o for o in oracle_names if o != "leak")
        symptom = tuple(symptom)
        if process_kind:
            mode = TraceMode(trace_path, target.synchronize)
            try:
                _run(case, target, oracle_names, mode)
            finally:
                mode.close()
            return {"status": ERROR, "error": "the worker neither died nor hung under the localiser"}
        record = _localise(case, target, oracle_names, symptom)
    except Exception as exc:
        record = {"status": ERROR, "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=6)[-2000:]}
    record["seconds"] = round(time.monotonic() - start, 3)
    return record


def observe(case, target, oracle_names) -> tuple[CaseOutcome, CompareMode]:
    """Run ``case`` as the executor does, every DUT aten call compared with CPU: the
    executor's result and the mode (its ``divergences``, ``calls``, ``kernels``)."""
    seen = CompareMode(_judge_for(case))
    return _run(case, target, tuple(oracle_names), seen), seen


def _localise(case, target, oracle_names, symptom) -> dict:
    judge = _judge_for(case)
    result, seen = observe(case, target, oracle_names)
    poisoned = result.poisoned
    base = {"calls": seen.calls, "divergent": [d.summary() for d in seen.divergences],
            "uncompared": seen.problems}
    if seen.uncompared:
        base["uncompared_calls"] = list(seen.uncompared)
    if poisoned:
        base["poisoned"] = True
    if not _has_symptom(case, result, symptom):
        return {"status": ERROR, "error": "the failure did not reproduce under the localiser", **base}
    if not seen.divergences:
        if seen.seeded:
            return {"status": NOT_LOCALISED, "reason": "no compared call diverges; its random calls "
                                                       f"({', '.join(seen.seeded)}) cannot be compared with CPU's",
                    **base}
        if seen.problems:
            # Not every call could be compared: the bug may be in one of those.
            return {"status": NOT_LOCALISED, "reason": f"no compared call diverges, but {seen.problems} of its "
                                                       f"{seen.calls} aten calls could not be compared "
                                                       f"({seen.uncompared[0]})", **base}
        return {"status": COMPOSITE, "reason": f"none of its {seen.calls} aten calls diverges from the same "
                                               "call on CPU: the bug is in how they are combined", **base}
    candidates = seen.divergences[:MAX_CANDIDATES]
    state = {"poisoned": poisoned}

    def cures(chosen) -> bool:
        """Whether the failure goes away with the calls ``chosen`` replaced by CPU's."""
        fix = CompareMode(judge, fix={d.index for d in chosen}, device=target.device)
        fixed = _run(case, target, oracle_names, fix)
        state["poisoned"] = state["poisoned"] or fixed.poisoned
        # The first call fixed is the one observed; later ones may differ (a fix changes
        # what follows: the functional call before an out= call no longer raises).
        return (fix.fixed.get(chosen[0].index) == chosen[0].kernel and len(fix.fixed) == len(chosen)
                and not _has_symptom(case, fixed, symptom))

    if poisoned:
        # The device context is gone: no fix run can tell. The first divergence stands.
        return _kernel_record(candidates[0], case, target, confirmed=False, base=base,
                              note="the device context was lost (poisoned): not confirmed by a fix run")
    for d in candidates:
        if d.device_only:
            # No fix run can replace it with CPU's result: the call that raised is the kernel.
            return _kernel_record(d, case, target, confirmed=False, base=base,
                                  note=f"the error was raised on the device inside this call ({d.device_only}): "
                                       "not confirmed by a fix run")
        if cures([d]):
            return _kernel_record(d, case, target, confirmed=True, base=base)
        if state["poisoned"]:
            return _kernel_record(candidates[0], case, target, confirmed=False, base=base,
                                  note="the device context was lost (poisoned) in a fix run: not confirmed")
    tried = ", ".join(dict.fromkeys(d.kernel for d in seen.divergences))
    together = seen.divergences
    if len(together) > 1 and cures(together):
        needed = list(together)
        for d in list(together):
            rest = [x for x in needed if x is not d]
            if rest and cures(rest):
                needed = rest
        first = needed[0]
        return _kernel_record(first, case, target, confirmed=True, base=base, also=needed[1:],
                              note="no single call's fix cures it; with the calls listed in 'with' fixed too, "
                                   "the failure goes away")
    return {"status": COMPOSITE, "reason": f"no divergent call explains it: with {tried} replaced by their CPU "
                                           "results (each alone, and all together), it still fails", **base}


def _kernel_record(d: Divergence, case, target, *, confirmed: bool, base: dict, note: str = "",
                   also=()) -> dict:
    from .kernel_repro import ReproUnavailable, kernel_script
    record = {"status": KERNEL, "kernel": d.kernel, "form": d.call.get("form", "functional"),
              "divergence": d.kinds[0], "kinds": list(d.kinds), "detail": d.detail[:2000], "where": d.where,
              "call": d.call, "index": d.index, "confirmed": confirmed, **base}
    if note:
        record["note"] = note
    if also:
        record["with"] = [x.summary() for x in also]
    try:
        if d.device_only:
            raise ReproUnavailable(f"the call has no CPU run to compare with ({d.device_only})")
        record["repro"] = kernel_script(record, device=str(target.device), target_name=target.name)
    except ReproUnavailable as exc:
        record["repro"] = None
        record["repro_unavailable"] = str(exc)
    return record


# -- in the supervisor ----------------------------------------------------------------------

def read_trace(path: str) -> dict | None:
    """The call that started and never ended in a trace file (None: none)."""
    open_calls: dict[int, dict] = {}
    try:
        with open(path, "rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut by the death
                if "start" in record:
                    open_calls[record["start"]] = record.get("call") or {}
                elif "end" in record:
                    open_calls.pop(record["end"], None)
    except OSError:
        return None
    if not open_calls:
        return None
    index = max(open_calls)
    return {"index": index, "call": open_calls[index]}


def localise(case, failure, pool, oracles, *, timeout_s: float | None = None) -> dict:
    """The localisation record of a reliable finding, computed in a fresh worker of
    ``pool``, bounded in time. Never raises: any failure is ``{"status": "error", ...}``."""
    from ..execution.observation import ProcessEvent
    from ..oracles import symptom_key, worker_oracles
    start = time.monotonic()
    try:
        if failure.oracle == "leak":
            return {"status": NOT_LOCALISED, "reason": "a leak is not a wrong result of one call"}
        if is_users_kernel(case.op):
            return users_kernel_record(case, failure)
        process_kind = failure.oracle in ("crash", "hang")
        base = timeout_s if timeout_s is not None else getattr(pool, "timeout_s", 20.0)
        timeout = base * 1.2 + 1.0 if process_kind else base * 3.0
        trace = str(pool.workdir / f"trace-{os.getpid()}-{time.monotonic_ns()}.jsonl") if process_kind else None
        pool.fresh()
        outcome = pool.call(localise_case, case.to_json(),
                            (worker_oracles(tuple(oracles)), list(symptom_key(case, failure))),
                            {"process_kind": process_kind, "trace_path": trace}, op=case.op, timeout_s=timeout)
        if isinstance(outcome, ProcessEvent) and process_kind:
            record = _from_trace(outcome, trace, failure, pool)
        elif isinstance(outcome, ProcessEvent):
            how = f"after {timeout:g}s" if outcome.kind == "timeout" else f"exit {outcome.returncode}"
            record = {"status": ERROR, "error": f"the localiser's worker {outcome.kind} ({how})"}
        elif isinstance(outcome, RaisedInWorker):  # localise_case never raises: Case.from_json did
            lines = outcome.traceback.strip().splitlines()
            record = {"status": ERROR, "error": lines[-1] if lines else "internal error"}
        else:
            record = outcome.record
        if trace:
            try:
                os.unlink(trace)
            except OSError:
                pass
    except Exception as exc:
        record = {"status": ERROR, "error": f"{type(exc).__name__}: {exc}"}
    record.setdefault("seconds", round(time.monotonic() - start, 3))
    return record


USER_NAMESPACE = "user"
_USER_DIVERGENCE = {"crash": CRASH, "hang": HANG, "dut-raises": RAISES_ON_DEVICE, "device-fault": RAISES_ON_DEVICE,
                    "ref-raises": RAISES_ON_CPU, "accepts-wrong": RAISES_ON_CPU}


def is_users_kernel(op: str) -> bool:
    from ..generation import catalogue, kernels
    try:
        return catalogue.get(op).family == kernels.FAMILY
    except KeyError:
        return False


def users_kernel_record(case, failure) -> dict:
    """A user's kernel is its own unit: it is compared with the user's reference, not
    with aten kernels on CPU, and whatever it calls inside, its author fixes it. Its
    findings are localised to it (``user::NAME``), so that two symptoms of one kernel bug
    (float16 and bfloat16 accumulation) group into one bug as torch's kernels' do."""
    kind = _USER_DIVERGENCE.get(failure.kind, WRONG_VALUES)
    return {"status": KERNEL, "kernel": f"{USER_NAMESPACE}::{case.op}", "form": "functional",
            "divergence": kind, "kinds": [kind], "confirmed": True, "call": None, "repro": None,
            "repro_unavailable": "a user's kernel: the finding's own repro script calls it",
            "note": "a user's kernel, compared with its declared reference"}


def _from_trace(event, trace: str, failure, pool) -> dict:
    from .kernel_repro import ReproUnavailable, kernel_script
    kind = CRASH if event.kind == "died" else HANG
    expected = "died" if failure.oracle == "crash" else "timeout"
    if event.kind != expected:
        return {"status": ERROR, "error": f"the localiser's worker {event.kind}, the finding is a {failure.oracle}"}
    found = read_trace(trace) if trace else None
    if found is None:
        return {"status": NOT_LOCALISED, "reason": "the process " + ("died" if kind == CRASH else "hung")
                + " outside every aten call (no call was running)"}
    call = found["call"]
    if not call.get("kernel"):
        return {"status": ERROR, "error": "the trace names no kernel"}
    from ..oracles.process import signal_name
    signal = signal_name(event.returncode) if kind == CRASH else None
    detail = (f"the process died ({signal}) in this call" if kind == CRASH
              else f"this call did not return within {event.timeout_s:g}s")
    record = {"status": KERNEL, "kernel": call["kernel"], "form": call.get("form", "functional"),
              "divergence": kind, "kinds": [kind], "detail": detail,
              "call": call if call.get("args") is not None else None, "index": found["index"],
              "confirmed": False, "note": "from the trace of aten calls: the one running when it happened"}
    if tuple(failure.dedup_key[:2]) == ("crash", HEAP_CORRUPTION):
        record["note"] += ("; a heap corruption aborts at the heap's next use, so the call that damaged it may "
                           "be an earlier one")
    if signal:
        record["signal"] = signal
    try:
        record["repro"] = kernel_script(record, device=str(pool.device), target_name=pool.target_name)
    except ReproUnavailable as exc:
        record["repro"] = None
        record["repro_unavailable"] = str(exc)
    return record
