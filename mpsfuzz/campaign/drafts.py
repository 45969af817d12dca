"""Drawing a slice's cases: in the campaign's process, or ahead in processes of their own.

Hypothesis is Python: drawing a case costs a few milliseconds, often more than running
it. A slice is drawn by a seeded, generate-only run of its Hypothesis test, so any
process that builds the same test with the same seed draws the same cases: drafter
processes (``run --draw-jobs N``) draw the next slices while the campaign judges the
last one, and the campaign itself replays a slice with that seed to shrink a failure
(replay.py). Drafter processes are forked on Linux (they inherit the op registry as it
is, test ops included) and spawned elsewhere (fork is unsafe on macOS once frameworks
are loaded). A drafter only draws: it never touches the device, so the fork is safe even
where the driver's process has (a user's kernel file that asks ``torch.cuda.is_available()``
at import); kernels run in workers only.
"""
from __future__ import annotations

import hashlib
import multiprocessing
import sys
import time
import traceback
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException, Unsatisfiable

from ..execution.worker import limit_threads
from ..generation import catalogue
from ..generation.settings import GenerationSettings
from ..generation.settings import install as install_settings
from ..generation.strategies import cases, siblings as dressed_siblings


def _drafter_started(settings: GenerationSettings) -> None:
    die_with_parent()
    install_settings(settings)   # a spawned drafter (not Linux) would otherwise have none
    limit_threads()


def die_with_parent() -> None:
    """In a drafter: exit when the campaign's process dies, however it dies (Linux: the
    kernel's parent-death signal; elsewhere the pool's own shutdown must do)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
    except Exception:
        pass


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message``, even for an exception whose str() raises."""
    try:
        text = str(exc).strip()
    except Exception:
        text = "<str() of the exception raised>"
    first = text.splitlines()[0][:300] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def traceback_of(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        return f"{type(exc).__name__} (its traceback could not be formatted)"


@dataclass(frozen=True)
class GenerationFailed:
    """What the guarded strategy hands the test body when drawing a case raised."""
    error: str
    traceback: str


@st.composite
def guarded(draw, strategy):
    """``strategy``, but a draw that raises (a shape or argument builder's bug) gives a
    GenerationFailed for the test body to count, instead of failing the whole slice."""
    try:
        return draw(strategy)
    except HypothesisException:  # its own control flow (assume, filters): not ours
        raise
    except Exception as exc:
        return GenerationFailed(error_line(exc), traceback_of(exc))


def leaves(exc: BaseException):
    """The exceptions in Hypothesis' report, groups opened."""
    inner = getattr(exc, "exceptions", None)
    if inner:
        for e in inner:
            yield from leaves(e)
    else:
        yield exc


@dataclass(frozen=True)
class Limits:
    """What shapes a slice's strategy (CampaignConfig's generation options)."""
    max_rank: int
    max_side: int
    max_numel: int
    allow_variants: bool
    examples: int
    siblings: int = 0                 # siblings per drawn case (CampaignConfig.siblings)


# A slice of ``examples`` cases with ``siblings`` per drawn case (strategies.siblings: the
# drawn skeleton dressed again) asks Hypothesis for ``draws_for(examples, siblings)``
# examples. How many siblings a campaign wants is lanes.default_siblings' to say.
def draws_for(cases: int, siblings: int) -> int:
    """Hypothesis examples for a slice of ``cases`` cases."""
    return max(1, -(-cases // (1 + siblings)))


# A slice is drawn by Hypothesis runs of at most RUN_EXAMPLES examples each (seeded from
# the slice's seed: the first run by it, the others by run_seed). Once a run has ten
# valid examples behind it, Hypothesis also tries mutations of them (one span copied
# over another of the same label): at 30 examples a run, 0.7 more test calls per case
# drawn and 23% more drawing time per case (1.68 against 1.36 ms on a 2-core machine,
# elementwise ops), a cost the campaign pays wherever drawing bounds it (a lane).
RUN_EXAMPLES = 10


def run_seed(seed: int, k: int) -> int:
    """The seed of run ``k`` of the slice seeded ``seed`` (run 0: the slice's own)."""
    if k == 0:
        return seed
    return int(hashlib.sha1(f"{seed}/{k}".encode()).hexdigest()[:12], 16)


def runs_of(seed: int, examples: int, siblings: int) -> list[tuple[int, int]]:
    """(seed, examples) of each Hypothesis run drawing a slice of ``examples`` cases."""
    draws = draws_for(examples, siblings)
    return [(run_seed(seed, k), min(RUN_EXAMPLES, draws - k * RUN_EXAMPLES))
            for k in range(-(-draws // RUN_EXAMPLES))]


def family(case, seed: int, siblings: int) -> list:
    """The cases one example of the slice seeded ``seed`` stands for, in the order they
    run: the drawn case, then its siblings. A replay that shrinks a sibling's failure
    shrinks the draw and dresses each smaller draw again (the same dressing as long as
    the input values' seeds stand: they seed the PRNG); triage then reduces the case
    that failed, not the draw."""
    if not siblings:
        return [case]
    return [case, *dressed_siblings(catalogue.get(case.op), case, seed, siblings, boundaries=True)]


def slice_seed(seed: int, op: str, round_no: int) -> int:
    return int(hashlib.sha1(f"{seed}:{op}:{round_no}".encode()).hexdigest()[:12], 16)


def strategy_for(op: str, limits: Limits):
    return cases(catalogue.get(op), max_rank=limits.max_rank, max_side=limits.max_side,
                 max_numel=limits.max_numel, allow_variants=limits.allow_variants)


def slice_test(strategy, seed: int, examples: int, body, *, phases, siblings: int = 0):
    """The slice's Hypothesis test: the same in every process, so the same seed draws
    the same cases (the drafter's generate-only run, the campaign's replay). ``body``
    gets each drawn case (its :func:`family` is what runs) and ``examples`` is the
    slice's size in cases, ``siblings`` per drawn case. It runs the slice's
    :func:`runs_of` one after the other; the first to raise (a failure found, and
    shrunk in a replay) ends it: failures of later runs are the replay's to record
    unshrunk (replay.py)."""
    tests = [_run_test(strategy, run, n, body, phases) for run, n in runs_of(seed, examples, siblings)]

    def every_run():
        for test in tests:
            test()
    return every_run


def _run_test(strategy, seed: int, examples: int, body, phases):
    test = given(guarded(strategy))(body)
    test = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                    suppress_health_check=list(HealthCheck), phases=phases, verbosity=Verbosity.quiet,
                    report_multiple_bugs=True, print_blob=False)(test)
    return hypothesis_seed(seed)(test)


@dataclass
class Draft:
    """A slice drawn: its cases (distinct, in drawing order), the draws that raised,
    Hypothesis' own errors (unsatisfiable: True where it could draw nothing), and the
    seconds it took; ``broken``: the strategy itself could not be built."""
    op: str
    round_no: int
    seed: int
    cases: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    errors: list = field(default_factory=list)       # (unsatisfiable, error line, traceback)
    seconds: float = 0.0
    broken: tuple | None = None                      # (error line, traceback)
    limits: Limits | None = None                     # what it was drawn with (its size, siblings)


def draw_slice(op: str, round_no: int, seed: int, limits: Limits) -> Draft:
    """Draw slice ``round_no`` of ``op`` (a module-level function: it runs in drafters)."""
    started = time.monotonic()
    draft = Draft(op, round_no, slice_seed(seed, op, round_no), limits=limits)
    try:
        strategy = strategy_for(op, limits)
    except Exception as exc:
        draft.broken = (error_line(exc), traceback_of(exc))
        return draft
    seen = set()

    def collect(case):
        if isinstance(case, GenerationFailed):
            draft.failed.append(case)
            return
        for one in family(case, draft.seed, limits.siblings):
            if one not in seen:
                seen.add(one)
                draft.cases.append(one)
    try:
        slice_test(strategy, draft.seed, limits.examples, collect, phases=(Phase.generate,),
                   siblings=limits.siblings)()
    except Exception as exc:
        draft.errors = [(isinstance(e, Unsatisfiable), error_line(e), traceback_of(e)) for e in leaves(exc)]
    draft.seconds = time.monotonic() - started
    return draft


class Drafter:
    """``processes`` drafter processes drawing slices ahead: :meth:`ahead` asks for a
    slice, :meth:`take` returns the oldest one asked for (in order). Each installs
    ``settings`` (the campaign's GenerationSettings) as it starts."""

    def __init__(self, processes: int, seed: int, settings: GenerationSettings):
        method = "fork" if sys.platform.startswith("linux") else "spawn"
        self._pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context(method),
                                         initializer=_drafter_started, initargs=(settings,))
        self.seed = seed
        self._queue: deque = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def ahead(self, op: str, round_no: int, limits: Limits) -> None:
        """Draw slice ``round_no`` of ``op`` with ``limits`` (its size and siblings)."""
        self._queue.append(self._pool.submit(draw_slice, op, round_no, self.seed, limits))

    def take(self) -> Draft:
        return self._queue.popleft().result()

    def close(self) -> None:
        for future in self._queue:
            future.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
