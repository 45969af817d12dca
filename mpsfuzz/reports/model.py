"""What every `mpsfuzz report` format shows, built once from the findings and the run
logs: the bugs (findings grouped by the kernel they localise to: corpus/bugs.py),
findings grouped by family, counts per status and oracle, the failure matrices
(ops x dtypes, ops x layout classes) and the run statistics summed over the run logs.
The formats (views.py, markdown.py, html.py, json_report.py) only lay this out."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..corpus.bugs import Bug, group
from ..corpus.finding import STATUSES as FINDING_STATUSES
from ..corpus.finding import Finding, now_iso
from ..corpus.notes import layout_notes
from ..generation.dtypes import ALL_DTYPE_NAMES
from ..generation.opspec import aliased_out_input
from .corpus_views import why
from .run_log import RUN_LOG_SCHEMA, RUNS_DIR

# Worst first: a matrix cell takes the colour of the first of these among its findings.
STATUSES = FINDING_STATUSES
STATUS_LABELS = {"new": "new", "known-bug": "known upstream", "both": "both backends",
                 "unverified": "unverified", "undecided": "undecided", "unconfirmed": "unconfirmed", "flaky": "flaky",
                 "layout-propagation": "layout propagation",
                 "cpu-bug": "cpu-bug", "capability": "capability", "fixed": "fixed"}
LAYOUT_CLASSES = ("contiguous", "transposed", "permuted", "channels_last", "gapped", "offset",
                  "expanded", "conj", "neg", "aliased", "empty", "0-d", ">4-D")
OTHER_FAMILY = "other"
NO_DTYPE = "none"


def family_of(op: str) -> str:
    from ..generation import catalogue
    spec = catalogue.all_ops().get(op)
    if spec is not None:
        return spec.family
    # OpInfo ops are built on request only (importing torch's test database costs
    # seconds), so they are named by their prefix rather than looked up.
    return "opinfo" if op.startswith("opinfo:") else OTHER_FAMILY


def _main(case):
    from ..generation.recipes import main_input
    return case.inputs[main_input(case)] if case.inputs else None


def layout_classes(case) -> tuple[str, ...]:
    """The layout features any input has (contiguous when none has one), plus the shape
    class (empty, 0-d, >4-D) of the main input: the reducer leaves a non-contiguous
    layout only where the bug needs one, but shrinks every other operand to a 0-d
    scalar, which would mark most binary ops 0-d."""
    kinds = {k for r in case.inputs for k in r.kinds()}
    if aliased_out_input(case.variant) is not None:
        kinds.add("aliased")
    if case.inputs and not kinds:
        kinds.add("contiguous")
    main = _main(case)
    if main is not None:
        kinds |= {name for name, has in (("empty", main.numel == 0), ("0-d", main.rank == 0),
                                         (">4-D", main.rank > 4)) if has}
    return tuple(c for c in LAYOUT_CLASSES if c in kinds)


def input_dtypes(case) -> tuple[str, ...]:
    """The main input's dtype (the first floating or complex input, else the first):
    index tensors and masks would otherwise put every indexing op under int64/bool."""
    main = _main(case)
    return (main.dtype,) if main is not None else (NO_DTYPE,)


def _dtype_order(name: str):
    return (ALL_DTYPE_NAMES.index(name), name) if name in ALL_DTYPE_NAMES else (len(ALL_DTYPE_NAMES), name)


@dataclass(frozen=True)
class Entry:
    """One finding as the report shows it."""
    path: Path
    finding: Finding
    family: str
    dtypes: tuple[str, ...]
    layouts: tuple[str, ...]
    anchor: str

    @property
    def status(self) -> str:
        return self.finding.status

    @property
    def label(self) -> str:
        return STATUS_LABELS.get(self.status, self.status)

    @property
    def why(self) -> str:
        return why(self.finding)

    @property
    def known_link(self) -> str | None:
        known = self.finding.known if isinstance(self.finding.known, dict) else {}
        return str(known["link"]) if known.get("link") else None

    @property
    def repro(self) -> dict | None:
        return self.finding.repro if isinstance(self.finding.repro, dict) else None

    @property
    def error_profile(self) -> dict | None:
        details = self.finding.failure.details
        profile = details.get("error_profile") if isinstance(details, dict) else None
        return profile if isinstance(profile, dict) else None


@dataclass
class Matrix:
    """Failing findings per op (rows, by family then name) and column (a dtype or a
    layout class)."""
    columns: tuple[str, ...]
    cells: dict[str, dict[str, list[Entry]]]
    families: dict[str, str]     # op -> family

    @property
    def ops(self) -> list[str]:
        return sorted(self.cells, key=lambda op: (self.families[op], op))

    def at(self, op: str, column: str) -> list[Entry]:
        return self.cells.get(op, {}).get(column, [])

    def worst(self, op: str, column: str) -> str | None:
        return worst_status(self.at(op, column))


def worst_status(entries) -> str | None:
    present = {e.status for e in entries}
    return next((s for s in STATUSES if s in present), None)


def _matrix(entries: list[Entry], axis: str, all_columns: tuple[str, ...] | None) -> Matrix:
    cells: dict[str, dict[str, list[Entry]]] = {}
    for e in entries:
        for column in getattr(e, axis):
            cells.setdefault(e.finding.op, {}).setdefault(column, []).append(e)
    present = {c for row in cells.values() for c in row}
    columns = all_columns if all_columns is not None else tuple(sorted(present, key=_dtype_order))
    return Matrix(columns, cells, {e.finding.op: e.family for e in entries})


@dataclass
class RunTotals:
    """The run logs under the corpus folders, summed."""
    runs: int = 0
    cases: int = 0
    valid: int = 0
    unsupported: int = 0
    restarts: int = 0
    internal_errors: int = 0
    elapsed_s: float = 0.0
    minimise_s: float = 0.0
    findings: dict[str, int] = field(default_factory=lambda: {"new": 0, "known": 0, "cpu": 0, "flaky": 0})
    targets: list[str] = field(default_factory=list)
    torch_versions: list[str] = field(default_factory=list)
    first_started: str | None = None
    last_finished: str | None = None
    per_op: dict[str, dict[str, int]] = field(default_factory=dict)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def valid_share(self) -> float:
        return self.valid / self.cases if self.cases else 0.0

    @property
    def cases_per_s(self) -> float:
        return self.cases / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def add(self, log: dict) -> None:
        for key in ("cases", "valid", "unsupported", "restarts", "internal_errors"):
            setattr(self, key, getattr(self, key) + _count(log, key))
        self.elapsed_s += _number(log, "elapsed_s")
        self.minimise_s += _number(log, "minimise_s")
        found = log.get("findings") if isinstance(log.get("findings"), dict) else {}
        for key in self.findings:
            self.findings[key] += _count(found, key)
        target = log.get("target") if isinstance(log.get("target"), dict) else {}
        if target.get("name"):
            self.targets = sorted({*self.targets, f"{target['name']} ({target.get('device')})"})
        if log.get("torch_version"):
            self.torch_versions = sorted({*self.torch_versions, str(log["torch_version"])})
        started, finished = str(log.get("started", "")), str(log.get("finished", ""))
        self.first_started = min(filter(None, (self.first_started, started)), default=None)
        self.last_finished = max(filter(None, (self.last_finished, finished)), default=None)
        per_op = log.get("per_op") if isinstance(log.get("per_op"), dict) else {}
        for op, counts in per_op.items():
            if isinstance(counts, dict):
                mine = self.per_op.setdefault(str(op), {"cases": 0, "valid": 0})
                mine["cases"] += _count(counts, "cases")
                mine["valid"] += _count(counts, "valid")
        self.runs += 1


def _number(d: dict, key: str) -> float:
    value = d.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key!r} is not a number")
    return float(value)


def _count(d: dict, key: str) -> int:
    return int(_number(d, key))


def run_logs(roots) -> list[Path]:
    seen, out = set(), []
    for root in roots:
        for path in sorted((Path(root) / RUNS_DIR).glob("*.json")):
            if path.name.startswith(".") or path.resolve() in seen:
                continue
            seen.add(path.resolve())
            out.append(path)
    return out


def load_runs(roots) -> RunTotals:
    totals = RunTotals()
    for path in run_logs(roots):
        try:
            log = json.loads(path.read_text())
            if not isinstance(log, dict) or log.get("schema") != RUN_LOG_SCHEMA:
                raise ValueError("not an mpsfuzz run log")
            trial = RunTotals()
            trial.add(log)  # all or nothing: a half-read log would skew the sums
            totals.add(log)
        except (ValueError, OSError, UnicodeDecodeError, TypeError) as exc:
            totals.unreadable.append((path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    return totals


@dataclass
class Report:
    entries: list[Entry]          # worst status first, then family, op, oracle
    roots: list[Path]
    runs: RunTotals
    generated: str

    # Each computed once, on first use, for all the formats.
    @cached_property
    def families(self) -> dict[str, list[Entry]]:
        out: dict[str, list[Entry]] = {}
        for e in sorted(self.entries, key=lambda e: e.family):
            out.setdefault(e.family, []).append(e)
        return out

    @cached_property
    def notes(self) -> list[dict]:
        """The corpora's layout-propagation notes, one per target (corpus/notes.py)."""
        return layout_notes(self.roots)

    @cached_property
    def counts(self) -> dict[str, int]:
        return {s: sum(e.status == s for e in self.entries) for s in STATUSES}

    @cached_property
    def oracles(self) -> dict[str, int]:
        return oracle_counts(self.entries)

    @cached_property
    def bugs(self) -> list[Bug]:
        """Most urgent first; each lists its findings, the most general first."""
        return group([(e.path, e.finding) for e in self.entries])

    @cached_property
    def bug_by_entry(self) -> dict[int, Bug]:
        """id(entry's finding) -> its bug."""
        return {id(f): b for b in self.bugs for _, f in b.findings}

    def bug_of(self, entry: Entry) -> Bug | None:
        return self.bug_by_entry.get(id(entry.finding))

    def entry_of(self, finding: Finding) -> Entry | None:
        return next((e for e in self.entries if e.finding is finding), None)

    @cached_property
    def dtype_matrix(self) -> Matrix:
        return _matrix(self.entries, "dtypes", None)

    @cached_property
    def layout_matrix(self) -> Matrix:
        return _matrix(self.entries, "layouts", LAYOUT_CLASSES)


def oracle_counts(entries) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in entries:
        out[e.finding.oracle] = out.get(e.finding.oracle, 0) + 1
    return dict(sorted(out.items()))


def family_heading(family: str, entries) -> str:
    """'elementwise: 2 finding(s) (values 1, crash 1)'"""
    oracles = ", ".join(f"{o} {n}" for o, n in oracle_counts(entries).items())
    return f"{family}: {len(entries)} finding(s) ({oracles})"


def summary_line(report: Report) -> str:
    """'3 finding(s) in 1 corpus folder(s): 1 new, 1 known upstream, 1 fixed' (new always
    said, other statuses where they have findings)."""
    counts = report.counts
    words = ", ".join(f"{counts[s]} {STATUS_LABELS[s]}" for s in counts if counts[s] or s == "new")
    where = f"{len(report.roots)} corpus folder(s)" if report.roots else "the files given"
    return f"{len(report.entries)} finding(s) in {where}: {words}"


def bug_anchor(bug: Bug) -> str:
    return f"bug-{bug.id}"


def bug_kernel_words(bug: Bug) -> str:
    """The kernel, or why the bug is not one kernel's."""
    return ", ".join(bug.kernels) if bug.kernel else f"- ({bug.reason})"


def runs_line(runs: RunTotals) -> str:
    if not runs.runs:
        return "runs: no run logs (runs/*.json) in these folders"
    return (f"runs: {runs.runs}, {runs.cases} cases ({100 * runs.valid_share:.0f}% valid), "
            f"{runs.cases_per_s:.1f} cases/s, {runs.elapsed_s:.0f}s fuzzing, targets {', '.join(runs.targets)}, "
            f"torch {', '.join(runs.torch_versions)}")


def _anchor(signature: str, taken: set[str]) -> str:
    base = "f-" + (re.sub(r"[^A-Za-z0-9_-]", "_", signature) or "finding")
    anchor, n = base, 2
    while anchor in taken:  # the same signature from two corpora: two sections
        anchor, n = f"{base}-{n}", n + 1
    taken.add(anchor)
    return anchor


def _rank(e: Entry) -> tuple:
    status = STATUSES.index(e.status) if e.status in STATUSES else len(STATUSES)
    return status, e.family, e.finding.op, e.finding.oracle, str(e.path)


def build(found, roots) -> Report:
    taken: set[str] = set()
    entries = [Entry(Path(path), f, family_of(f.op), input_dtypes(f.case), layout_classes(f.case),
                     _anchor(f.signature, taken)) for path, f in found]
    return Report(sorted(entries, key=_rank), [Path(r) for r in roots], load_runs(roots), now_iso())
