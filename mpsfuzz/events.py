"""Events the engine emits; the CLI, daemon and report writers consume them."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CampaignStarted:
    target_name: str
    target_spec: str
    device: str
    ops: tuple[str, ...]
    oracles: tuple[str, ...]
    seed: int
    budget_s: float | None
    max_cases: int | None


@dataclass(frozen=True)
class CaseFinished:
    op: str
    valid: bool
    unsupported: bool
    shrinking: bool
    case: Any = None        # recipes.Case that ran


@dataclass(frozen=True)
class FindingRecorded:
    finding: Any            # corpus.finding.Finding
    path: Path
    new: bool


@dataclass(frozen=True)
class SliceFinished:
    """One op's slice ran: its cases, the seconds it took, and the behaviours (dtype x
    layout x size class x outcome keys) it showed that this campaign had not seen."""
    op: str
    cases: int
    seconds: float
    behaviours: tuple = ()


@dataclass(frozen=True)
class Notice:
    message: str


# Where a harness error happened (HarnessError.stage):
#   generate  drawing a case (a strategy, shape or argument builder raised; Hypothesis
#             found no case it could draw)
#   execute   running it (the worker pool raised; the executor or an oracle raised in the
#             worker: its "internal" reply)
#   judge     judging it in the driver (process oracles, upstream table and found-bug matching)
#   triage    re-running, reducing, explaining a failure (triage/pipeline.py)
#   record    storing a finding (other than a corpus that cannot be written)
#   report    a listener (repro writer, console, run log) raised on an event
#   hypothesis  Hypothesis raised something that carries no finding (or anything else
#             escaped an op's slice)
HARNESS_STAGES = ("generate", "execute", "judge", "triage", "record", "report", "hypothesis")
# The stages in which a case is lost: it could not be generated, executed or judged.
CASE_STAGES = ("generate", "execute", "judge")


@dataclass(frozen=True)
class HarnessError:
    """mpsfuzz itself (not the target) failed on one case; the campaign goes on."""
    stage: str                 # one of HARNESS_STAGES
    op: str | None
    case_json: dict | None     # the case, where there is one
    error: str                 # one line: "TypeError: ..."
    traceback: str


@dataclass
class Stats:
    cases: int = 0
    valid: int = 0
    unsupported: int = 0
    # Cases this machine's torch cannot judge: its eager CPU lacks a kernel that the
    # reference or mpsfuzz's own comparison needs (e.g. ``lt`` for uint32).
    unsupported_here: int = 0
    harness_errors: int = 0      # mpsfuzz failed on a case (see HarnessError); counted by stage below
    slow_compiles: int = 0       # cases given up because torch.compile outlasted its budget
    reference_hangs: int = 0     # cases given up because the eager CPU reference did not return
    restarts: int = 0
    recycled: int = 0            # workers replaced after --recycle-after cases or past their RSS cap
    elapsed_s: float = 0.0
    new_findings: int = 0        # target bugs not in the upstream tables
    known_bugs: int = 0          # new files for bugs the upstream tables list (status known-bug)
    cpu_bugs: int = 0            # the jury blamed the CPU reference
    flaky: int = 0               # new findings that did not reproduce on every re-run
    capabilities: int = 0        # the device accepts what CPU rejects, and its result checks out
    unconfirmed: int = 0         # new findings whose repro script did not reproduce them
    unverified: int = 0          # new findings whose repro script has not been run to the end
    both: int = 0                # bugs of the target and eager CPU alike (PyTorch's own)
    undecided: int = 0           # disagreements no independent reference decided
    layout_notes: int = 0        # cases whose right values came in another memory format (notes/)
    minimise_s: float = 0.0      # time spent re-running, reducing and explaining findings
    suppressed: int = 0          # failures the tables call unimplemented or undefined
    sightings: int = 0           # failing cases that were findings already found (run log: known_sightings)
    # Failures not triaged by the end (the stop grace ran out, a stop, --max-findings):
    # kept in triage-pending/ for the next run on the corpus; not findings yet, not lost.
    left_pending: int = 0
    per_op: dict = field(default_factory=dict)          # op -> [cases, valid]
    unsupported_messages: dict = field(default_factory=dict)  # (op, message) -> count
    unsupported_here_messages: dict = field(default_factory=dict)  # (op, message) -> count
    harness_by_stage: dict = field(default_factory=dict)      # stage -> harness errors
    set_aside: dict = field(default_factory=dict)             # op -> why it was set aside
    # Where the campaign's time went, in seconds per stage (issue 37): the fuzzing's
    # ``draw`` (Hypothesis), ``run`` (the worker running target and reference), ``check``
    # (the case oracles) and ``jury`` (the verdicts); the desk's ``shrink``, ``triage``
    # (and its steps, ``triage:<step>``), ``verify`` (new findings' scripts) and
    # ``reverify`` (earlier unverified findings' scripts). Lanes' splits add up.
    time_split: dict = field(default_factory=dict)
    # Repro scripts of earlier runs' unverified findings run again (Reverification):
    # "verified", "unconfirmed", "unverified" (ran, still no verdict) and "left" (not run).
    reverified: dict = field(default_factory=dict)
    # The failures of the fuzzing's cases by what the campaign made of them: "new" (a
    # job for the desk), "held" (of a symptom in triage), "sighting", "suppressed",
    # "noted" (layout propagation).
    failing_cases: dict = field(default_factory=dict)

    @property
    def failing(self) -> int:
        """Findings that fail the run: new ones, and unverified ones (their script did
        not run to the end: nothing says they are not the target's)."""
        return self.new_findings + self.unverified

    @property
    def cases_lost(self) -> int:
        """Cases that could not be generated, executed or judged (harness errors)."""
        return sum(self.harness_by_stage.get(stage, 0) for stage in CASE_STAGES)

    @property
    def attempted(self) -> int:
        """Cases tried: those run in a worker plus those that could not even be drawn."""
        return self.cases + self.harness_by_stage.get("generate", 0)

    @property
    def valid_ratio(self) -> float:
        return self.valid / self.cases if self.cases else 0.0

    @property
    def cases_per_s(self) -> float:
        return self.cases / self.elapsed_s if self.elapsed_s > 0 else 0.0


def untried_ops(ops, stats: Stats) -> list[str]:
    """The ops of ``ops`` that no case of the campaign ran (set-aside ops were tried)."""
    return [op for op in ops if not stats.per_op.get(op, (0,))[0] and op not in stats.set_aside]


@dataclass(frozen=True)
class CampaignFinished:
    stats: Stats
    findings: tuple          # (Finding, Path, new) for every finding of this run
    stopped_because: str
