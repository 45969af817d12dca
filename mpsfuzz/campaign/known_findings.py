"""What the campaign already found, and the one place that says whether a failure is new.

A failing case is judged against the findings the campaign has (its corpus's, those
recorded in this run, and those still in triage, each a :class:`FoundBug`):

* a *sighting* of a settled finding whose symptom and conditions it meets, or whose
  trigger it has beyond the restrictions ablation found (issue 37, point 1: a sighting at
  once, never a queued job);
* *held* by a finding still in triage of its symptom (a provisional holder): kept, one
  case per trigger shape, until triage settles what that finding covers, then judged
  again (issue 37: a second cause of one symptom is a finding of its own);
* else *new*: a job for the triage desk.

:class:`KnownFindings` keeps the findings, the sightings counted for them and the held
failures; it runs nothing (no worker, no thread of its own) and is used under the
campaign's lock, which it is handed. Failures known *upstream* are another matter
(corpus/upstream.py).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..corpus.finding import Finding, signature_of, symptom_key
from ..corpus.store import CorpusWriteError
from ..generation.recipes import Case
from ..oracles import Failure
from ..triage.ablation import holds_all, holds_on_any_input, is_restriction

# The statuses of a recorded finding that fail the run (``Stats.failing``): new ones, and
# unverified ones (their script did not run to the end: nothing says they are not the
# target's). A campaign and the coordinator of lanes count --max-findings by them.
FAILING_STATUSES = ("new", "unverified")

# Trigger shapes one provisional holder keeps (KnownFindings.hold).
MAX_HELD = 64

# The verdicts of KnownFindings.classify.
NEW, SIGHTING, HELD = "new", "sighting", "held"


def fails_the_run(status: str) -> bool:
    """Whether a finding recorded new with ``status`` counts against the run."""
    return status in FAILING_STATUSES


@dataclass(frozen=True)
class FoundBug:
    """A finding the campaign already has (in its corpus, or recorded in this run): a
    failing case with this symptom that meets the conditions is a sighting of
    ``signature``, not a new bug."""
    symptom: tuple
    conditions: tuple | None          # None: a finding recorded before ablation
    signature: str
    flaky: bool = False               # any case with the symptom (it cannot be ablated)
    case: Case | None = field(default=None, compare=False)   # its minimal case
    # A failure handed to triage and not yet recorded: it *holds* the failures of its
    # symptom meanwhile, so the campaign does not shrink the same bug again while triage
    # works on it; once triage has settled its conditions, the held failures are judged
    # again (a second cause of the same symptom is a finding of its own, not a sighting).
    provisional: bool = False

    @classmethod
    def of(cls, finding: Finding) -> "FoundBug":
        return cls(symptom_key(finding.case, finding.failure), finding.conditions, finding.signature,
                   finding.flaky, finding.case)

    def special_case_of(self, general: Finding) -> bool:
        """Whether this finding is a special case of ``general``, another explained
        finding of the same symptom: its minimal case meets ``general``'s conditions (the
        2-D multinomial bug once the 1-D case shows the rank does not matter)."""
        return (self.signature != general.signature and not self.flaky and not general.flaky
                and self.conditions is not None and general.conditions is not None and self.case is not None
                and self.symptom == symptom_key(general.case, general.failure)
                and holds_all(general.conditions, self.case))

    def covers(self, case, failure: Failure, symptom: tuple) -> bool:
        if symptom != self.symptom:
            return False
        if self.flaky:
            return True
        if self.conditions is None:
            return signature_of(case, failure) == self.signature
        return holds_all(self.conditions, case)

    def covers_beyond_restrictions(self, case, failure: Failure, symptom: tuple) -> bool:
        """Whether a failure of this settled finding's symptom that has the trigger its
        conditions name (layouts, emptiness, values, arguments: on any input) and misses
        only their restrictions (the dtypes and sizes ablation found failing) is this bug
        met outside what ablation tried: a sighting, not a job (issue 37: a fault filed as
        two bugs, the second triaged at length only to be merged). A finding whose
        conditions are restrictions alone (``only float16``) names no trigger beyond them:
        covered exactly or not at all."""
        if symptom != self.symptom or self.flaky or self.provisional or not self.conditions:
            return False
        named = [c for c in self.conditions if not is_restriction(c)]
        return bool(named) and all(holds_on_any_input(c, case) for c in named)


def held_key(case) -> tuple:
    """What a failure's triage conditions are made of (variant, dtypes, layouts, ranks,
    emptiness, value kinds, arguments), coarse enough that a holder keeps few cases and
    fine enough that a case of another cause is kept apart from the holder's own."""
    return (case.variant, repr(case.kwargs)[:200],
            tuple((r.dtype, r.describe_layout(), r.rank, r.numel == 0, r.values.distribution,
                   tuple(sorted({kind for _, kind in r.values.specials}))) for r in case.inputs))


class KnownFindings:
    """The findings a campaign has (``found``: settled ones and provisional holders),
    the sightings counted for them in this run and not yet written (``sightings``:
    {signature: n}), and the failures each holder holds (``held``: {holder signature:
    {held_key: [case, failure, n]}}). ``lock``: the campaign's (the desk's thread records
    findings while the campaign's judges cases); ``on_error(case, exc)``: told where
    matching a failure raised in :meth:`covering_or_none`."""

    def __init__(self, found: Iterable[FoundBug] = (), *, lock=None, on_error: Callable | None = None):
        self.found: list[FoundBug] = list(found)
        self.sightings: dict[str, int] = {}
        self.held: dict[str, dict] = {}
        self._lock = lock if lock is not None else threading.RLock()
        self._on_error = on_error
        self._provisional = 0

    # -- is it new ------------------------------------------------------------------------
    def covering(self, case, failure: Failure, *, settled: bool = False,
                 besides: FoundBug | None = None) -> FoundBug | None:
        """The finding whose symptom and conditions this failure meets, else a settled
        one it meets beyond its restrictions (FoundBug.covers_beyond_restrictions), else
        None. ``settled``: recorded findings only, not those in triage; ``besides``: a
        finding left out (on the desk's thread, the placeholder of the failure it
        shrinks). Raises where matching raises."""
        symptom = symptom_key(case, failure)
        found = [f for f in list(self.found) if f is not besides and not (settled and f.provisional)]
        return next((f for f in found if f.covers(case, failure, symptom)), None) or \
            next((f for f in found if f.covers_beyond_restrictions(case, failure, symptom)), None)

    def covering_or_none(self, case, failure: Failure, *, settled: bool = False) -> FoundBug | None:
        """:meth:`covering`; None (and ``on_error``) where matching raises: better a
        finding recorded twice than a finding lost."""
        try:
            return self.covering(case, failure, settled=settled)
        except CorpusWriteError:
            raise
        except Exception as exc:
            if self._on_error is not None:
                self._on_error(case, exc)
            return None

    def classify(self, case, failure: Failure, *, besides: FoundBug | None = None) -> tuple[str, str]:
        """The campaign's one decision on a failing case: (HELD, the holder's signature),
        the failure held by a finding in triage of its symptom; (SIGHTING, the finding's
        signature), to be counted once per case by the caller (:meth:`sight`); or (NEW,
        its own signature). Raises where matching raises (the caller drops the failure
        as a harness error)."""
        found = self.covering(case, failure, besides=besides)
        if found is not None and found.provisional:
            self.hold(found, case, failure)
            return HELD, found.signature
        if found is not None:
            return SIGHTING, found.signature
        return NEW, signature_of(case, failure)

    def sighting(self, case, failure: Failure) -> str | None:
        """At record time: the signature of the settled finding that covers this failure,
        counted a sighting of it; None where none does (or matching raised: on_error)."""
        covering = self.covering_or_none(case, failure, settled=True)
        if covering is None:
            return None
        self.sight(covering.signature)
        return covering.signature

    def sight(self, signature: str, n: int = 1) -> None:
        """Count ``n`` sightings of ``signature``."""
        with self._lock:
            self.sightings[signature] = self.sightings.get(signature, 0) + n

    def has_finding_of(self, op: str) -> bool:
        """Whether ``op`` has a settled finding (the desk's order puts its failures after
        those of ops with none)."""
        with self._lock:
            return any(not f.provisional and f.symptom[:1] == (op,) for f in self.found)

    # -- findings in triage: holders and what they hold ------------------------------------
    def open_holder(self, case, failure: Failure) -> FoundBug:
        """A placeholder for a failure handed to triage: until :meth:`retire`, it holds
        the failures of its symptom (:meth:`classify`)."""
        with self._lock:
            self._provisional += 1
            holder = FoundBug(symptom_key(case, failure), None, f"in-triage-{self._provisional}",
                              flaky=True, case=case, provisional=True)
            self.found.append(holder)
        return holder

    def hold(self, holder: FoundBug, case, failure: Failure) -> None:
        """Keep a failure of ``holder``'s symptom until its triage settles what it covers.
        Bounded: one case per trigger shape, and at most MAX_HELD shapes per holder (the
        rest count as sightings of what the holder becomes)."""
        key = held_key(case)
        with self._lock:
            held = self.held.setdefault(holder.signature, {})
            if key in held:
                held[key][2] += 1
            elif len(held) < MAX_HELD:
                held[key] = [case, failure, 1]
            else:
                self.sight(holder.signature)

    def retire(self, holder: FoundBug, signature: str | None) -> dict:
        """``holder``'s triage ended as ``signature`` (None: nothing recorded): the
        sightings it collected go to that finding; what it held, returned, is for the
        caller to judge again ({held_key: [case, failure, n]})."""
        with self._lock:
            if holder in self.found:
                self.found.remove(holder)
            seen = self.sightings.pop(holder.signature, 0)
            if seen and signature is not None:
                self.sight(signature, seen)
            return self.held.pop(holder.signature, {})

    def take_held(self) -> dict:
        """Every holder's held failures, taken (the desk's jobs given up: kept pending)."""
        with self._lock:
            held, self.held = self.held, {}
        return held

    # -- settled findings -----------------------------------------------------------------
    def add(self, finding: Finding) -> None:
        """A finding recorded (by this campaign)."""
        with self._lock:
            self.found.append(FoundBug.of(finding))

    def add_new(self, findings: Iterable[Finding]) -> None:
        """Findings read from the corpus (other campaigns sharing it recorded them): those
        of a signature not known yet."""
        with self._lock:
            known = {f.signature for f in self.found}
            self.found += [FoundBug.of(f) for f in findings if f.signature not in known]

    def special_cases_of(self, general: Finding) -> list[FoundBug]:
        """The findings that are special cases of ``general`` (FoundBug.special_case_of)."""
        return [f for f in self.found if f.special_case_of(general)]

    def fold(self, special: FoundBug, general_signature: str) -> None:
        """``special`` became part of the finding ``general_signature`` (its file folded
        into that one's): its sightings not yet written go there too."""
        with self._lock:
            self.found.remove(special)
            pending = self.sightings.pop(special.signature, 0)
            if pending:
                self.sight(general_signature, pending)
