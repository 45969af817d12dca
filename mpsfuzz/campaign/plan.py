"""A campaign's plan: what the user asked for (a :class:`CampaignRequest`, parsed by the
CLI) turned into what runs (a :class:`CampaignPlan`), below the command line (issue 39,
point 2).

:func:`plan_campaign` is the one place that decides, for `run` and `daemon` alike: the
ops (``--ops``, users' kernels, the large class and family, ``--shard``), the target
(loaded here first, for a one-line error), the oracles, a writable corpus, the lanes and
their drawing (drafters, siblings), the large family's bound per case from the device's
free memory (sizing.py), and the :class:`~mpsfuzz.generation.settings.GenerationSettings`
every process of the campaign is handed. Bad input is a :class:`PlanError` (one line);
what the user should read comes out as :class:`Note`\\ s, in order.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from .. import __version__
from ..corpus.store import Corpus
from ..generation.settings import GenerationSettings, from_environment
from . import sizing
from .engine import CampaignConfig


class PlanError(ValueError):
    """What the user asked for cannot run (an unknown op, an empty shard, a target that
    does not load...): one line, said as it is."""


@dataclass(frozen=True)
class CampaignRequest:
    """What `run` or `daemon` was asked, as parsed (None: not given, the default)."""
    corpus_dir: Path
    ops: str | None = None                  # --ops as written
    kernels: tuple[str, ...] = ()           # --kernels files
    large: bool = False                     # --large
    auto_large: bool = False                # the daemon: on by itself where the device has the memory
    no_large: bool = False                  # the daemon's --no-large
    shard: tuple[int, int] | None = None    # --shard K/N
    target: str | None = None               # None: the best available
    oracles: str | None = None
    budget_s: float | None = None
    max_cases: int | None = None
    max_findings: int | None = None
    jobs: int | None = None
    devices: tuple[str, ...] = ()
    timeout_s: float = 20.0
    compile_timeout_s: float = 180.0
    shrink_budget_s: float = 60.0
    minimise_budget_s: float = 30.0
    slice_examples: int | None = None
    known: tuple[str, ...] = ()             # --known tables
    reruns: int = 4
    variants: bool = True
    verify_repros: bool = True
    seed: int | None = None
    max_rank: int = 8
    max_side: int = 8
    max_bytes: int | None = None            # --max-bytes
    draw_jobs: int | None = None
    siblings: int | None = None
    recycle_after: int | None = None        # the daemon's worker recycling
    max_worker_rss_mb: float | None = None
    started_at: float | None = None         # when the budget started (run: the process's start)


@dataclass(frozen=True)
class Note:
    """A line for the user; ``style`` "yellow" for a warning."""
    text: str
    style: str | None = None


@dataclass(frozen=True)
class CampaignPlan:
    config: CampaignConfig                  # ops, target, oracles, settings, drawing, budget
    target_name: str
    device: str
    jobs: int
    devices: tuple[str, ...]
    verify: bool                            # repro scripts run before a finding counts
    verify_timeout_s: float
    notes: tuple[Note, ...]
    large: sizing.LargeSizing | None = None  # the large family's sizing, where it was asked

    @property
    def settings(self) -> GenerationSettings:
        return self.config.settings

    @property
    def ops(self) -> list[str]:
        return list(self.config.ops)


def plan_campaign(request: CampaignRequest, *, say: Callable[[Note], None] | None = None,
                  free_memory: Callable[[str], int | None] = sizing.free_device_memory,
                  environ: Mapping[str, str] | None = None) -> CampaignPlan:
    """The plan of ``request``. Each note goes to ``say`` as it is made (the kernels'
    contiguity checks take seconds after the target's line) and into ``notes``.
    ``free_memory(device)``: bytes free on the device (sizing.free_device_memory);
    ``environ``: the user's environment (os.environ), read for the settings' defaults
    (generation/settings.py). Raises PlanError; CorpusWriteError where the corpus cannot
    be written."""
    notes: list[Note] = []

    def note(text: str, style: str | None = None) -> None:
        notes.append(Note(text, style))
        if say is not None:
            say(notes[-1])

    kernel_ops = _load_kernels(request.kernels)
    settings = _settings(request, environ)
    ops, selected = _selected_ops(request, kernel_ops)
    spec, target, automatic = _target(request)
    oracles = _oracles(request)
    from ..execution.targets import BUILTIN
    shard = "" if request.shard is None else \
        f", shard {request.shard[0]}/{request.shard[1]}: {len(ops)} of {selected} ops"
    note(describe_target(target.name, str(target.device), automatic and spec in BUILTIN, shard))
    _check_kernel_contracts(ops, spec, request.timeout_s, settings, note)
    _check_corpus(request.corpus_dir, note)
    jobs = request.jobs if request.jobs is not None else _default_jobs()
    if request.devices and jobs < len(request.devices):
        jobs = len(request.devices)   # at least one lane per device named
    ops, settings, large = _size_large_cases(request, ops, settings, str(target.device), jobs, free_memory, note)
    draw_jobs, siblings = _drawing(request, jobs)
    config = CampaignConfig(ops=ops, target_spec=spec, corpus_dir=request.corpus_dir, oracles=oracles,
                            seed=request.seed, budget_s=request.budget_s, max_cases=request.max_cases,
                            max_findings=request.max_findings, timeout_s=request.timeout_s,
                            shrink_budget_s=request.shrink_budget_s, max_rank=request.max_rank,
                            max_side=request.max_side, slice_examples=request.slice_examples,
                            upstream_tables=tuple(request.known), allow_variants=request.variants,
                            reruns=request.reruns, minimise_budget_s=request.minimise_budget_s,
                            compile_timeout_s=request.compile_timeout_s, started_at=request.started_at,
                            # stopped (SIGTERM), failures not yet triaged stay pending: a run
                            # has seconds to write its summary and run record, as the daemon
                            defer_on_stop=True,
                            # earlier findings whose scripts were not run to the end are run again
                            reverify=request.verify_repros,
                            draw_jobs=draw_jobs, siblings=siblings, recycle_after=request.recycle_after,
                            max_worker_rss_mb=request.max_worker_rss_mb, settings=settings)
    return CampaignPlan(config=config, target_name=target.name, device=str(target.device), jobs=jobs,
                        devices=tuple(request.devices), verify=request.verify_repros,
                        verify_timeout_s=max(request.timeout_s * 3, 60.0), notes=tuple(notes), large=large)


def describe_target(name: str, device: str, chosen_automatically: bool, shard: str = "") -> str:
    """The campaign's first line: what is tested against eager CPU, and why that target."""
    what = {"cpu-compiled": "torch.compile (Inductor) on CPU"}.get(name, f"device {device}")
    line = f"mpsfuzz {__version__}: testing target '{name}' ({what}) against eager CPU{shard}"
    if chosen_automatically and name == "cpu-compiled":
        line += " - no MPS or CUDA device on this machine"
    elif chosen_automatically and name == "cuda":
        line += " - no MPS device on this machine"
    return line


def _load_kernels(paths) -> list[str]:
    """``--kernels FILE...``: import each file here (its kernels register); the files'
    kernels, in order."""
    from ..generation import kernels
    names: list[str] = []
    for path in paths:
        try:
            names += [n for n in kernels.load_file(path) if n not in names]
        except kernels.KernelFileError as exc:
            raise PlanError(str(exc)) from None
    return names


def _settings(request: CampaignRequest, environ: Mapping[str, str] | None) -> GenerationSettings:
    """The settings the user asked for, over those their environment gives."""
    base = from_environment(environ)
    return replace(base, max_bytes=request.max_bytes or base.max_bytes,
                   # users' kernels that declare large=True inputs draw them
                   large_inputs=base.large_inputs or request.large).with_kernel_files(request.kernels)


def _selected_ops(request: CampaignRequest, kernel_ops: list[str]) -> tuple[list[str], int]:
    """The ops to fuzz (``--ops``, or the kernel files' kernels alone; with ``--large``
    their large class and, for 'all' or a whole family, the large family), then this
    shard's of them; and how many were selected before the shard."""
    from ..generation import catalogue
    try:
        ops = catalogue.select(request.ops or "all") if request.ops or not kernel_ops else list(kernel_ops)
        if request.large and not set(ops) <= set(kernel_ops):
            # (a selection of users' kernels alone gets their large inputs, not the family)
            ops += [op for op in catalogue.large_class(ops) + large_family_for(request.ops) if op not in ops]
    except catalogue.UnknownOpError as exc:
        raise PlanError(str(exc)) from None
    selected = len(ops)
    if request.shard is not None:
        ops = catalogue.shard(ops, *request.shard)
        if not ops:
            raise PlanError(f"--shard={request.shard[0]}/{request.shard[1]}: no ops in this shard of the "
                            f"{selected} selected")
    return ops, selected


def large_family_for(selection: str | None) -> list[str]:
    """The large family's ops (reductions and copies past 2^31 elements) where ``--ops``
    names ``all`` or a whole family; ops named one by one get their large class alone."""
    from ..generation import catalogue
    items = {item.strip() for item in (selection or "all").split(",")}
    if items & ({"all"} | set(catalogue.families())):
        return catalogue.select(catalogue.LARGE_FAMILY)
    return []


def _target(request: CampaignRequest):
    """(spec, the target loaded in this process, chosen automatically): a target that
    does not load fails here, in one line, before any worker starts."""
    from ..execution.targets import TargetError, best_available, load_target
    automatic = request.target is None
    spec = best_available() if automatic else request.target
    try:
        return spec, load_target(spec), automatic
    except TargetError as exc:
        raise PlanError(str(exc)) from None


def _oracles(request: CampaignRequest) -> tuple[str, ...]:
    # after the target: a target module may register oracles of its own
    from ..oracles import select
    try:
        return select(request.oracles)
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def _check_kernel_contracts(ops, target_spec: str, timeout_s: float, settings: GenerationSettings, note) -> None:
    """Users' kernels that require contiguous inputs: one call each with a non-contiguous
    one, to say whether they reject it (a note per kernel; not a finding: the contract
    allows anything there). In a worker, as every case: this process forks drafters and
    must never touch the device with a user's kernel."""
    from ..execution.kernel_checks import SILENTLY_WRONG, ContiguityCheckError, check_contiguity_in
    from ..execution.targets import TargetError
    from ..execution.worker import WorkerPool, WorkerStartError
    from ..generation import catalogue
    from ..oracles.judge import judge_case
    specs = [spec for spec in (catalogue.get(name) for name in ops) if spec.contiguous_inputs]
    if not specs:
        return
    # execute=judge_case only for the zygote's preload: this process has one forkserver,
    # started by the first pool, and the campaign's pools then find it warm for theirs.
    try:
        pool = WorkerPool(target_spec, timeout_s=timeout_s, execute=judge_case, role="contracts", settings=settings)
    except (TargetError, WorkerStartError) as exc:   # the campaign's workers would not start either
        raise PlanError(str(exc)) from None
    with pool:
        for spec in specs:
            try:
                checks = check_contiguity_in(pool, spec, timeout_s=max(3 * timeout_s, 60.0))
            except Exception as exc:  # the check is best effort: the campaign still runs
                why = str(exc) if isinstance(exc, ContiguityCheckError) else f"{type(exc).__name__}: {exc}"
                note(f"  note: kernel `{spec.name}`: contiguity check failed: {why}")
                continue
            for check in checks:
                note(f"  note: {check.line()}", "yellow" if check.outcome == SILENTLY_WRONG else None)


def _check_corpus(corpus_dir: Path, note) -> None:
    """CorpusWriteError (exit 2) before any case runs; a note per unreadable file."""
    corpus = Corpus(corpus_dir)
    corpus.check_writable()
    _, problems = corpus.load()
    for path, why in problems:
        note(f"skipping unreadable corpus file {path}: {why}", "yellow")


def _default_jobs() -> int:
    from .lanes import default_jobs
    return default_jobs()


def _drawing(request: CampaignRequest, jobs: int) -> tuple[int, int]:
    """Drafters and siblings per drawn case, as asked or by default for ``jobs`` lanes
    on this machine's cores."""
    from .lanes import default_draw_jobs, default_siblings
    draw_jobs = request.draw_jobs if request.draw_jobs is not None else default_draw_jobs(jobs)
    siblings = request.siblings if request.siblings is not None else default_siblings(
        jobs, draw_jobs, budget_s=request.budget_s, max_cases=request.max_cases)
    return draw_jobs, siblings


def _size_large_cases(request: CampaignRequest, ops: list[str], settings: GenerationSettings, device: str,
                      jobs: int, free_memory, note):
    """The large family's bound per case from the device's free memory over the lanes
    (sizing.py), where ``--large`` asked for it or the daemon (``auto_large``) may turn it
    on by itself: (ops, with the large class and family where the daemon turned it on;
    settings, with the bound and large inputs; the sizing, or None where not asked)."""
    from ..generation import catalogue, kernels
    if not request.large and not request.auto_large:
        return ops, settings, None
    large = sizing.plan(asked=request.large, auto=request.auto_large, refused=request.no_large,
                        free=free_memory(device), jobs=jobs, max_bytes=request.max_bytes)
    if large.note:
        note(f"  {large.note}")
    if not large.enabled:
        return ops, settings, large
    if large.max_bytes is not None:
        settings = replace(settings, max_bytes=large.max_bytes)
    if request.large:
        return ops, settings, large     # the family (or the kernels' large inputs) already chosen
    settings = replace(settings, large_inputs=True)
    if all(catalogue.get(op).family == kernels.FAMILY for op in ops):
        return ops, settings, large     # users' kernels alone: their large inputs, not the family
    added = catalogue.large_class(list(ops)) + large_family_for(request.ops)
    if request.shard is not None:
        added = catalogue.shard(added, *request.shard)
    return list(ops) + [op for op in added if op not in ops], settings, large
