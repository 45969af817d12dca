"""Persistent worker processes: cases never run in the process that drives Hypothesis.

Workers are forked from a multiprocessing *forkserver* that has torch and mpsfuzz
imported once (a zygote), so a replacement after a crash starts in milliseconds instead
of re-importing torch. The device is first touched in the child, after the fork, and so
is users' kernel code (``run --kernels``: the child imports their files, the zygote never).
Each worker is handed the pool's GenerationSettings (generation/settings.py) as an
argument and installs them first.
Each worker's stdout/stderr go to a log file so that a crash finding can quote the last
lines (faulthandler writes the Python stack there on a fatal signal).

Before a case is sent, it is written to an in-flight file on disk, so a crash of the
worker, or of anything else, loses nothing.

The worker runs what it is handed: each request names a function
(``module:qualname``, imported in the worker once) that takes the case and the target.
The pool's callers (higher layers) hand it :func:`mpsfuzz.oracles.judge.judge_case` for
``run`` and the localiser for ``call``; this module imports neither. What comes back is
typed (outcome.py): a :class:`~mpsfuzz.execution.outcome.CaseOutcome` per case, sent
through the pipe as the object, or the pool's own where mpsfuzz raised in the worker.
"""
from __future__ import annotations

import faulthandler
import gc
import importlib
import json
import multiprocessing
import os
import signal
import threading
import time
import traceback
from pathlib import Path

from ..atomic import corpus_write
from ..generation.settings import GenerationSettings
from ..generation.settings import install as install_settings
from ..generation.settings import installed as installed_settings
from ..scratch import scratch_dir
from . import harness_clock
from .exit_status import guard_exit_status
from .observation import ProcessEvent
from .outcome import CaseOutcome, RaisedInWorker, poisons_worker

STARTUP_TIMEOUT_S = 180.0
# How long one compilation (torch.compile'd targets) may take before the case is given
# up as slow compilation; compilation does not count against the per-case timeout.
COMPILE_TIMEOUT_S = 180.0
# How long mpsfuzz's own verdict on one case may take (harness_clock.py) before the case
# is given up as a harness error; judging does not count against the per-case timeout.
JUDGE_TIMEOUT_S = 180.0
# How often the pool looks at a running case (a reply wakes it at once).
_POLL_S = 0.25
_NO_CLOCK = (0.0,) * harness_clock.SLOTS
# The variables a worker takes from the driver as they are when it starts: a target's own
# settings (MPSFUZZ_FAULTS of the fault-injecting target), torch's and CUDA's. None of
# them is mpsfuzz's configuration: that is the GenerationSettings handed to the worker.
_ENV_PREFIXES = ("MPSFUZZ_", "PYTORCH_", "TORCH", "CUDA_")


def _watch_compilation(state) -> None:
    """In the worker: keep ``state`` = [wall time the current compilation started (0:
    none), seconds spent compiling so far] up to date from torch.compile's own
    callbacks (Dynamo's frame compiles and AOTAutograd's lazy backward compiles), so
    the pool tells a slow compilation from a hang. Without the callbacks (an old torch)
    compilation counts as running time, as before."""
    try:
        from torch._dynamo.callback import callback_handler
    except Exception:  # pragma: no cover - torch without compile callbacks
        return

    def started(*_args):
        state[0] = time.time()

    def ended(*_args):
        if state[0]:
            state[1] += time.time() - state[0]
        state[0] = 0.0

    def register():
        callback_handler.register_start_callback(started)
        callback_handler.register_end_callback(ended)
    register()
    # torch._dynamo.reset() clears every callback (compiled targets reset to bound their
    # memory): ours are put back each time.
    clear = callback_handler.clear

    def clear_and_keep_ours():
        clear()
        register()
    callback_handler.clear = clear_and_keep_ours


def zygote_context(warm=()):
    """The multiprocessing context; with a forkserver, its zygote imports torch, the
    execution layer (preload.py) and the modules in ``warm`` (those of the functions the
    pool is handed) once, so that forked workers start warm."""
    method = os.environ.get("MPSFUZZ_START_METHOD") or (
        "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["torch", "mpsfuzz.execution.preload", *warm])
    return ctx


def function_name(fn) -> str:
    """``module:qualname`` of a module-level function: how a request names what to run."""
    return f"{fn.__module__}:{fn.__qualname__}"


_FUNCTIONS: dict = {}


def _resolve(name: str):
    """The function ``module:qualname`` names (imported once per worker)."""
    fn = _FUNCTIONS.get(name)
    if fn is None:
        module, _, qualname = name.partition(":")
        fn = importlib.import_module(module)
        for part in qualname.split("."):
            fn = getattr(fn, part)
        _FUNCTIONS[name] = fn
    return fn


THREADS_ENV = "MPSFUZZ_WORKER_THREADS"


def limit_threads() -> None:
    """One intra-op thread per worker (MPSFUZZ_WORKER_THREADS sets another count). A
    case's tensors are small: torch's thread pool costs more than it saves on them, and
    with a worker per lane every worker's pool wanted every core. On a 16-core H100
    host, 8 lanes of reductions ran 710 cases/s with the default (each worker 16
    threads) and 6,228/s with one thread each (scaling 0.12 -> 0.82 of 8x one lane).
    Lanes and drafters call it too: their few small tensor ops (a triage probe's look
    at the values) woke a pool of a thread per core in each, whose threads then spin
    waiting for more work (8 lanes: 3,850 cases/s with workers limited alone)."""
    import torch
    try:
        threads = int(os.environ.get(THREADS_ENV, "") or 1)
    except ValueError:
        threads = 1
    torch.set_num_threads(max(1, threads))


def _worker_main(conn, target_spec: str, log_path: str, env: dict, settings: GenerationSettings,
                 compile_state=None) -> None:
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    faulthandler.enable()
    # A Ctrl-C at the terminal reaches the whole process group: the campaign decides
    # what an interrupt means (summary, findings kept), never a worker dying of it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The worker sees the driver's variables as they were when it was started, not the
    # zygote's: a forkserver started earlier (under other MPSFUZZ_FAULTS, say) would
    # otherwise hand every worker its stale variables, which update() leaves in place.
    for stale in [k for k in os.environ if k.startswith(_ENV_PREFIXES) and k not in env]:
        del os.environ[stale]
    os.environ.update(env)
    install_settings(settings)   # before anything draws, makes or looks an op up
    limit_threads()
    if compile_state is not None:
        _watch_compilation(compile_state)
        harness_clock.install(compile_state)
    from ..generation import catalogue, kernels
    from ..generation.recipes import Case
    from .targets import TargetError, load_target
    kernels.resume_loading()   # the zygote imported no kernel file: this process does (after the fork)
    try:
        target = load_target(target_spec)
    except TargetError as exc:
        conn.send(("target-error", str(exc)))
        return
    except Exception as exc:  # a third-party target failing to construct
        conn.send(("target-error", f"--target {target_spec!r}: {type(exc).__name__}: {exc}"))
        return
    try:
        # Users' kernel files now, not inside the first case's timeout (importing Triton
        # takes seconds).
        catalogue.all_ops()
    except kernels.KernelFileError as exc:
        conn.send(("start-error", str(exc)))
        return
    # What is loaded by now (torch, the target, the catalogue: some 180,000 objects) lives
    # as long as the worker: out of the collector's sight, a full collection (the leak
    # oracle's, or Python's own now and then) takes microseconds instead of 90-180 ms,
    # which a 2-core run of elementwise cases paid about once in a thousand cases
    # (0.84 -> 0.63 ms a case judged).
    gc.freeze()
    eager = getattr(target, "eager_counterpart", None)
    conn.send(("ready", target.name, str(target.device), eager if isinstance(eager, str) and eager else None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        if message[0] == "batch":
            _, function, case_jsons, args, kwargs = message
            for index, case_json in enumerate(case_jsons):
                # Each reply carries its index and when it finished: the pool times the
                # next case from there (a driver busy generating reads replies late) and
                # knows, if this process dies, that the first case without a reply did it.
                if not _answer(conn, function, case_json, target, args, kwargs, index, Case):
                    return
            continue
        _, function, case_json, args, kwargs = message
        if not _answer(conn, function, case_json, target, args, kwargs, None, Case):
            return


def _answer(conn, function: str, case_json, target, args, kwargs, index, case_type) -> bool:
    """Run one request and send its reply (tagged with ``index`` and the finish time
    inside a batch); False when the worker must exit (a poisoned device context)."""
    try:
        result = _resolve(function)(case_type.from_json(case_json), target, *args, **kwargs)
        reply = ("result", result)
    except Exception:
        # mpsfuzz's own failure (the executor or an oracle raised): a harness error in
        # the driver, logged with this whole traceback.
        result, reply = None, ("internal", traceback.format_exc())
    conn.send(reply if index is None else (*reply, index, time.monotonic()))
    # A poisoned device context is unusable: the pool starts a fresh worker.
    return not poisons_worker(result)


# The allocator's own message comes just before faulthandler's dump of the abort it
# causes (glibc: "free(): invalid pointer"; macOS: two "malloc: ***" lines): cut at
# the dump, a heap corruption read as a plain SIGABRT and was keyed by its random frames.
LINES_BEFORE_DUMP = 3


def dump_with_its_cause(text: str, max_lines: int = 40) -> str:
    """faulthandler's last dump in ``text`` (a worker's stderr) with the
    :data:`LINES_BEFORE_DUMP` lines before it; the last ``max_lines`` lines where there
    is no dump."""
    start = text.rfind("Fatal Python error")
    if start < 0:
        return "\n".join(text.splitlines()[-max_lines:])
    before = [ln for ln in text[:start].splitlines() if ln.strip()][-LINES_BEFORE_DUMP:]
    return "\n".join(before + text[start:].splitlines()[:max_lines])


class WorkerStartError(RuntimeError):
    pass


class WorkerStartAbandoned(WorkerStartError):
    """The pool's ``give_up`` said stop while a worker was starting (a budget's end)."""


class Worker:
    """One worker process with a target loaded; restarted by :class:`WorkerPool`."""

    def __init__(self, target_spec: str, workdir: Path, index: int = 0, warm=(),
                 settings: GenerationSettings | None = None):
        ctx = zygote_context(warm)
        self.log_path = workdir / f"worker-{os.getpid()}-{index}.log"
        env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
        self.conn, child = ctx.Pipe()
        # [start of the compilation in progress (wall time, 0: none), seconds compiled so far,
        #  the same two for mpsfuzz's judging, when the CPU reference started (harness_clock.py)]
        try:
            self.compile_state = ctx.Array("d", harness_clock.SLOTS, lock=False)
        except OSError:  # no shared memory to be had (a full disk): compiling counts as running
            self.compile_state = None
        self.process = ctx.Process(target=_worker_main,
                                   args=(child, target_spec, str(self.log_path), env,
                                         settings if settings is not None else installed_settings(),
                                         self.compile_state),
                                   daemon=True)
        self.process.start()
        guard_exit_status(self.process)   # read as SIGABRT, not 255, whatever other threads start
        child.close()
        if not self.conn.poll(STARTUP_TIMEOUT_S):
            self.kill()
            raise WorkerStartError(f"worker for target {target_spec!r} did not start within {STARTUP_TIMEOUT_S:g}s")
        try:
            reply = self.conn.recv()
        except EOFError:
            self.process.join(5)
            raise WorkerStartError(f"worker for target {target_spec!r} died while starting "
                                   f"({self.process.exitcode}): {self.stderr_tail().strip()[-300:]}") from None
        if reply[0] == "target-error":
            self.kill()
            from .targets import TargetError
            raise TargetError(reply[1])
        if reply[0] == "start-error":
            self.kill()
            raise WorkerStartError(reply[1])
        # eager_counterpart: the eager target whose kernels a compiled target's graphs call
        _, self.target_name, self.device, self.eager_counterpart = reply
        self.cases = 0      # cases this process ran (the pool recycles it after so many)

    def stderr_tail(self, max_lines: int = 40) -> str:
        """The worker's last words: faulthandler's dump if it wrote one, with the lines
        just before it (:data:`LINES_BEFORE_DUMP`), else the last lines."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 256_000))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return dump_with_its_cause(text, max_lines)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(("stop",))
        except (OSError, BrokenPipeError):
            pass
        self.process.join(2)
        if self.process.is_alive():
            self.kill()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass


class Batch:
    """Cases sent to a worker in one message (:meth:`WorkerPool.submit`)."""

    def __init__(self, case_jsons: list, args: list, ops: list[str], kwargs: dict | None = None):
        self.case_jsons, self.args, self.ops = case_jsons, args, ops
        self.kwargs = dict(kwargs or {})
        self.outcomes: list = []
        self.done = 0                 # cases with an outcome
        self.worker: Worker | None = None
        self.started = 0.0            # when the current case started (monotonic)
        self.compiled_before = 0.0
        self.judged_before = 0.0
        self.given_up = False         # collect() gave up the cases without an outcome

    @property
    def open(self) -> bool:
        """Cases still to answer (none given up)."""
        return self.done < len(self.case_jsons) and not self.given_up


class WorkerPool:
    """Runs cases in a persistent worker, replacing it when it dies or hangs.

    ``execute(case, target, oracle_names) -> CaseOutcome``: what :meth:`run` runs in the
    worker for each case (a module-level function, imported there by name; its module is
    preloaded into the zygote). ``settings``: the GenerationSettings each worker installs
    (default: this process's installed ones)."""

    def __init__(self, target_spec: str, *, timeout_s: float = 20.0, inflight_dir: Path | None = None,
                 compile_timeout_s: float = COMPILE_TIMEOUT_S, execute=None, role: str = "",
                 recycle_after: int | None = None, max_rss_mb: float | None = None, give_up=None,
                 settings: GenerationSettings | None = None):
        self.target_spec = target_spec
        self.settings = settings if settings is not None else installed_settings()
        # ``give_up()``: stop waiting for a worker that is starting (WorkerStartAbandoned):
        # a campaign's budget bounds its worker's start too (issue 37, point 2).
        self.give_up = give_up
        self.execute = execute
        self._warm = (execute.__module__,) if execute is not None else ()
        self.timeout_s = timeout_s
        self.compile_timeout_s = compile_timeout_s
        self._tmp = scratch_dir("mpsfuzz-workers-")
        self.workdir = Path(self._tmp.name)
        # ``role`` tells apart the in-flight files of two pools of one process (a
        # campaign's fuzzing worker and its triage worker).
        name = f"inflight-{os.getpid()}{'-' + role if role else ''}.json"
        self.inflight_path = (Path(inflight_dir) / name) if inflight_dir else None
        self.restarts = 0
        # A long-running campaign (the daemon) starts a fresh worker after this many
        # cases, or once the worker's memory passes max_rss_mb: whatever a torch build
        # or a leaky kernel accumulates is given back.
        self.recycle_after, self.max_rss_mb = recycle_after, max_rss_mb
        self.recycled = 0
        self.abandoned = False   # set: close() kills the worker rather than waiting for it
        # Set by abandon(): no worker is started again (a campaign past its stop grace
        # takes the pool from under a thread still using it).
        self._closed = False
        self._worker: Worker | None = None
        # Batches sent and not yet collected, oldest first: the worker runs them in
        # this order, so a second batch queued behind the first starts the moment the
        # first ends (no round trip to the driver in between).
        self._queue: list[Batch] = []
        self._started = 0
        self._ensure()
        self.target_name = self._worker.target_name
        self.device = self._worker.device
        self.eager_counterpart = self._worker.eager_counterpart

    def _ensure(self) -> Worker:
        if self._closed:
            raise WorkerStartError("the pool was abandoned: no more cases run in it")
        if self._worker is None:
            self._worker = self._start_worker()
            self._started += 1
        return self._worker

    def _start_worker(self) -> Worker:
        """A new worker; with ``give_up``, started on a thread and waited for only while
        ``give_up()`` is false (the first start also starts the zygote, which imports
        torch: tens of seconds on a loaded machine, and not interruptible where it runs)."""
        if self.give_up is None:
            return Worker(self.target_spec, self.workdir, self._started, self._warm, self.settings)
        lock, box, done = threading.Lock(), {}, threading.Event()

        def start():
            try:
                worker = Worker(self.target_spec, self.workdir, self._started, self._warm, self.settings)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = exc
            else:
                with lock:
                    box["worker"] = worker
                    if box.get("abandoned"):
                        worker.kill()
            finally:
                done.set()
        threading.Thread(target=start, name="mpsfuzz-worker-start", daemon=True).start()
        while not done.wait(0.1):
            if self.give_up():
                with lock:
                    box["abandoned"] = True
                    if "worker" in box:
                        box["worker"].kill()
                raise WorkerStartAbandoned(f"worker for target {self.target_spec!r} given up while it started")
        if "error" in box:
            raise box["error"]
        return box["worker"]

    def _write_queue_inflight(self) -> None:
        """The in-flight file for every case sent and not yet answered, in the order the
        worker runs them (answers not read yet are counted as unanswered: it may list
        a case that has finished, never miss one that has not)."""
        rest = [c for b in self._queue for c in b.case_jsons[b.done:]]
        if rest:
            self._write_inflight(rest[0], more=rest[1:])

    def _write_inflight(self, case_json: dict, more=()) -> None:
        """Raises CorpusWriteError where the corpus cannot be written (a full disk): not
        a case's failure, and no case runs without its in-flight file."""
        if self.inflight_path is None:
            return
        tmp = self.inflight_path.with_suffix(".tmp")
        with corpus_write(self.inflight_path):
            self.inflight_path.parent.mkdir(parents=True, exist_ok=True)
            try:
                # ``case`` runs first; ``then``: the rest of its batch, in order.
                record = {"case": case_json, "target": self.target_spec, "started": time.time()}
                if more:
                    record["then"] = list(more)
                tmp.write_text(json.dumps(record))
                os.replace(tmp, self.inflight_path)
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise

    def run(self, case_json: dict, oracle_names, op: str, timeout_s: float | None = None,
            kwargs: dict | None = None):
        """The pool's ``execute`` of the case in the worker (``kwargs`` passed to it): its
        :class:`CaseOutcome`, or a :class:`ProcessEvent` if the worker died or hung (a
        batch of one). The in-flight file is written before the exchange: failing to
        write it is never taken for the worker dying."""
        return self.collect(self.submit([case_json], oracle_names, [op], kwargs), timeout_s)[0]

    def _exchange(self, worker: Worker, request: tuple, op: str, timeout: float, wait, internal):
        """Send ``request`` and take the reply: the payload (a poisoned worker replaced
        after answering), ``internal(traceback)`` where the function raised, or a
        :class:`ProcessEvent` where the worker hung (``wait`` says "timeout" or
        "slow-compile") or died; a lost worker is replaced."""
        try:
            worker.conn.send(request)
            late = wait()
            if late is None:
                kind, payload = worker.conn.recv()
                if kind == "internal":
                    return internal(payload)
                if poisons_worker(payload):
                    self._replace(worker)
                return payload
            if late == "slow-compile":
                event = ProcessEvent(op=op, target_name=self.target_name, kind="slow-compile",
                                     timeout_s=self.compile_timeout_s)
            else:
                event = ProcessEvent(op=op, target_name=self.target_name, kind="timeout", timeout_s=timeout)
        except (EOFError, OSError, BrokenPipeError):
            worker.process.join(5)
            event = ProcessEvent(op=op, target_name=self.target_name, kind="died",
                                 returncode=worker.process.exitcode, stderr_tail=worker.stderr_tail())
        self._replace(worker)
        return event

    def _replace(self, worker: Worker) -> None:
        worker.kill()
        self._worker = None
        self.restarts += 1

    # -- batches: several cases per round trip, run while the driver does other work --
    def submit(self, case_jsons: list[dict], oracle_names, ops: list[str], kwargs: dict | None = None) -> "Batch":
        """Send ``case_jsons`` to the worker as one batch and return at once; the worker
        runs them in order while the caller (the campaign generating its next cases) goes
        on. :meth:`collect` takes the outcomes. A batch submitted while another is in
        flight queues behind it in the worker (it starts as soon as that one ends);
        batches are collected oldest first (collecting a later one collects the earlier
        ones and keeps their outcomes for their own :meth:`collect`). ``kwargs``: passed to
        the execute function with each case."""
        if self.execute is None:
            raise TypeError("WorkerPool.submit needs the pool's execute function (WorkerPool(..., execute=...))")
        batch = Batch(list(case_jsons), [list(oracle_names)], list(ops), kwargs)
        if not self._queue:
            self._recycle_if_due()   # never under a batch still running
        self._queue.append(batch)
        try:
            self._send_rest(batch)
        except BaseException:
            # Not sent (no worker could start, the in-flight file could not be written):
            # the caller gets the error, and the pool does not wait for the batch.
            self._queue.remove(batch)
            raise
        return batch

    def _drain(self) -> None:
        """Collect every batch in flight (their outcomes kept for their own collect()):
        a request outside the batches (:meth:`call`) must not read a batch's replies."""
        while self._queue:
            self.collect(self._queue[-1])

    def _recycle_if_due(self) -> None:
        worker = self._worker
        if worker is None:
            return
        due = self.recycle_after is not None and worker.cases >= self.recycle_after
        if not due and self.max_rss_mb is not None:
            try:
                import psutil
                due = psutil.Process(worker.process.pid).memory_info().rss > self.max_rss_mb * 2**20
            except Exception:  # gone, or no psutil: it will be replaced when it fails
                due = False
        if due:
            self.fresh()
            self.recycled += 1

    def _send_rest(self, batch: "Batch") -> None:
        """(Re)send the cases of ``batch`` without an outcome yet, to the current worker
        (a fresh one after a death or hang), with their in-flight file written first.
        The worker runs what it is sent in order: an earlier batch in flight that lost
        its worker (queued behind a batch whose worker died) is sent again first, or
        its replies would be read as this batch's."""
        worker = self._ensure()
        if self.inflight_path is not None:
            self._write_queue_inflight()
        earlier = self._queue[:self._queue.index(batch)] if batch in self._queue else []
        for other in earlier:
            if other.open and other.worker is not worker:
                self._send(other, worker)
        self._send(batch, worker)

    def _send(self, batch: "Batch", worker: Worker) -> None:
        batch.worker = worker
        batch.started = time.monotonic()
        batch.compiled_before = (worker.compile_state or _NO_CLOCK)[1]
        batch.judged_before = (worker.compile_state or _NO_CLOCK)[harness_clock.JUDGED]
        try:
            worker.conn.send(("batch", function_name(self.execute), batch.case_jsons[batch.done:], batch.args,
                              batch.kwargs))
        except (OSError, BrokenPipeError):
            pass  # the worker is gone: collect() finds it dead and attributes the case

    def collect(self, batch: "Batch", timeout_s: float | None = None, give_up=None,
                stop_at_hang: bool = False) -> list:
        """The outcome of each case of ``batch``, in order: its :class:`CaseOutcome`
        (:meth:`CaseOutcome.harness_error` where the executor raised) or a
        :class:`ProcessEvent`. A death or hang is the first case without a reply (the
        worker runs them one after the other), and the cases after it run again in a
        fresh worker.

        ``give_up()``, asked while no reply is waiting: once true, the cases still
        running or queued are given up (the worker is killed, the next batch starts a
        fresh one) and only the outcomes so far are returned (``batch.given_up``). A
        campaign past its budget, or told to stop, does not wait out a batch of hangs.

        ``stop_at_hang``: the cases after a hang are given up too (``batch.given_up``)
        rather than run in a fresh worker. A campaign's batch is one op's cases, and an
        op that hangs once mostly hangs again: each such case would cost a whole timeout
        for what is one finding (a hang keys on the target and the op)."""
        # The worker answers in the order it was sent: earlier batches first.
        while self._queue and self._queue[0] is not batch and batch in self._queue:
            self.collect(self._queue[0], timeout_s, give_up, stop_at_hang)
        try:
            return self._collect(batch, timeout_s, give_up, stop_at_hang)
        finally:
            if batch in self._queue and not batch.open:
                self._queue.remove(batch)

    def _collect(self, batch: "Batch", timeout_s, give_up, stop_at_hang) -> list:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        if batch.open and (batch.worker is None or batch.worker is not self._worker):
            # Queued behind a batch whose worker died, hung or was given up: its
            # message went with that worker. Sent again, unless the caller gives up.
            if give_up is not None and give_up():
                batch.given_up = True
                return batch.outcomes
            self._send_rest(batch)
        while batch.open:
            worker = batch.worker
            op = batch.ops[batch.done]
            try:
                late = self._wait_from(worker, timeout, batch, give_up)
                if late == "given-up":
                    batch.given_up = True
                    worker.kill()   # not a crash or hang: no restart counted
                    self._worker = None
                    break
                if late is None:
                    kind, payload, index, finished = worker.conn.recv()
                    if kind == "internal":
                        payload = CaseOutcome.harness_error(payload)
                    batch.outcomes.append(payload)
                    batch.done += 1
                    worker.cases += 1
                    # The next case started when this one finished, however late we read
                    # it: this batch's next case, or the first of the batch queued behind.
                    following = self._following(batch) if batch.done == len(batch.case_jsons) else batch
                    if following is not None and following.worker is worker:
                        following.started = finished
                        following.compiled_before = (worker.compile_state or _NO_CLOCK)[1]
                        following.judged_before = (worker.compile_state or _NO_CLOCK)[harness_clock.JUDGED]
                    if poisons_worker(payload):
                        self._replace(worker)
                        if batch.done < len(batch.case_jsons):
                            self._send_rest(batch)
                    continue
                event = ProcessEvent(op=op, target_name=self.target_name, kind=late,
                                     timeout_s={"slow-compile": self.compile_timeout_s,
                                                "slow-judge": JUDGE_TIMEOUT_S}.get(late, timeout))
            except (EOFError, OSError, BrokenPipeError):
                worker.process.join(5)
                event = ProcessEvent(op=op, target_name=self.target_name, kind="died",
                                     returncode=worker.process.exitcode, stderr_tail=worker.stderr_tail())
            batch.outcomes.append(event)
            batch.done += 1
            self._replace(worker)
            if batch.done < len(batch.case_jsons):
                if stop_at_hang and event.kind == "timeout":
                    batch.given_up = True
                    break
                self._send_rest(batch)
        return batch.outcomes

    def _following(self, batch: "Batch") -> "Batch | None":
        try:
            index = self._queue.index(batch)
        except ValueError:
            return None
        return self._queue[index + 1] if index + 1 < len(self._queue) else None

    def _wait_from(self, worker: Worker, timeout: float, batch: "Batch", give_up=None) -> str | None:
        """Wait for the reply to the current case of ``batch``: None once it is there,
        "timeout" when the case ran (compilation aside) longer than ``timeout``,
        "slow-compile" when one compilation took longer than ``compile_timeout_s``,
        "slow-judge" when mpsfuzz's verdict took longer than ``JUDGE_TIMEOUT_S``,
        "slow-reference" when the case timed out inside the eager CPU reference. Time
        spent compiling or judging does not count as running: a torch.compile'd target compiles
        almost every case anew, and a grad case's compilation alone can outlast a timeout
        meant for kernels. The case is timed from when the one before it finished, by the
        worker's clock (time.monotonic is system-wide), however late the driver reads.
        "given-up" once ``give_up()`` is true (see :meth:`collect`)."""
        state = worker.compile_state or _NO_CLOCK
        while not worker.conn.poll(_POLL_S):
            if give_up is not None and give_up():
                return "given-up"
            now = time.time()
            compiling = now - state[0] if state[0] else 0.0
            judging_since = state[harness_clock.JUDGE_START]
            judging = now - judging_since if judging_since else 0.0
            running = (time.monotonic() - batch.started - (state[1] - batch.compiled_before) - compiling
                       - (state[harness_clock.JUDGED] - batch.judged_before) - judging)
            if compiling > self.compile_timeout_s:
                return "slow-compile"
            if judging > JUDGE_TIMEOUT_S:
                return "slow-judge"
            if running > timeout:
                in_reference = len(state) > harness_clock.REFERENCE_START and state[harness_clock.REFERENCE_START]
                return "slow-reference" if in_reference else "timeout"
        return None

    def call(self, fn, case_json: dict, args=(), kwargs=None, *, op: str, timeout_s: float):
        """``fn(case, target, *args, **kwargs)`` in the worker (a module-level function,
        imported there by name: the localiser, say): its result (a worker whose result is
        ``poisoned`` is replaced), a :class:`RaisedInWorker` (the traceback) if it raised,
        or a :class:`ProcessEvent` if the worker died or did not answer within
        ``timeout_s`` (compilation counts)."""
        self._drain()
        worker = self._ensure()
        self._write_inflight(case_json)
        return self._exchange(worker, ("call", function_name(fn), case_json, list(args), dict(kwargs or {})),
                              op, timeout_s, lambda: None if worker.conn.poll(timeout_s) else "timeout",
                              internal=RaisedInWorker)

    def fresh(self) -> None:
        """Make the next case run in a new worker process (no state from earlier calls).
        Batches still in flight run again in it when collected."""
        if self._worker is not None:
            if self._queue:
                self._worker.kill()
            else:
                self._worker.stop()
            self._worker = None

    def abandon(self) -> None:
        """Kill the worker now and start none again, from any thread: a thread still
        using the pool (a triage job past its campaign's stop grace) gets a dead worker,
        then :class:`WorkerStartError`, instead of waiting out its case."""
        self._closed = True
        self.abandoned = True
        worker = self._worker
        if worker is not None and worker.process.is_alive():
            worker.process.kill()
        # The case given up is no crash: its in-flight file would outlive the campaign
        # (the next start clears any a racing write leaves).
        self._unlink_inflight()

    def close(self) -> None:
        if self._worker is not None:
            if self.abandoned:
                self._worker.kill()   # told to stop now: the case it runs is given up
            else:
                self._worker.stop()
            self._worker = None
        self._unlink_inflight()
        self._tmp.cleanup()

    def _unlink_inflight(self) -> None:
        if self.inflight_path is not None:
            try:
                os.unlink(self.inflight_path)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
