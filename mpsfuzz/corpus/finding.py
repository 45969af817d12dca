"""A finding: one failure of one minimised case, with its deduplication signature,
explanation, reproducibility, sightings and replay history.

The signature is the failure's *symptom* (op, variant, oracle, the oracle's own dedup
key such as the error type and normalised message, the dtype class) plus, for case
oracles, the *necessary* trigger features that ablation found (``conditions``).
Crashes key on the signal and cleaned top frames; hangs and leaks on the target and op
(ClusterFuzz style).
"""
from __future__ import annotations

import hashlib
import json
import platform
import time
from dataclasses import dataclass, field, replace

import torch

from .. import __version__
from ..generation.dtypes import dtype_class
from ..generation.opspec import aliased_out_input
from ..generation.recipes import Case, main_input
from ..oracles import Failure, symptom_key

FINDING_FORMAT = 3
# Format 1 (before variants) and 2 (before reduction, ablation, reproducibility and
# replay history) read as format 3 with those fields empty.
READABLE_FINDING_FORMATS = (1, 2, 3)
# Oracles that compare the forward result: a grad-variant case calls the op exactly as
# the functional form does, so it keys as functional (one bug, one finding).
_FORWARD_ORACLES = ("values", "metadata", "errors", "layout", "arbiter", "distribution")
PROCESS_ORACLES = ("crash", "hang", "leak")
# Replay results kept in a finding's history.
STILL_FAILS, FIXED, CHANGED, FLAKY, CANNOT_RUN = "still-fails", "fixed", "changed", "flaky", "cannot-run"
# Sightings carried over from a format 1/2 file (one total, no writer).
LEGACY_WRITER = "before-format-3"
# Every status a finding can have (``Finding.status``), the most urgent first: reports
# sort and colour by this order, and a bug takes the first of its findings'.
STATUSES = ("new", "known-bug", "both", "unverified", "unconfirmed", "undecided", "flaky", "cpu-bug",
            "capability", "layout-propagation", "fixed")


def trigger_class(case: Case) -> dict:
    classes = {dtype_class(r.dtype) for r in case.inputs}
    dtypes = sorted({r.dtype for r in case.inputs})
    awkward = [r.describe_layout() for r in case.inputs if not r.is_plain()]
    strided = any(not r.layout.is_plain() for r in case.inputs)
    # ``aliased``: inputs share a storage (or out= is an input), all else contiguous.
    aliased = case.is_aliased() or aliased_out_input(case.variant) is not None
    return {
        "dtype_class": classes.pop() if len(classes) == 1 else "mixed",
        "dtypes": dtypes,
        "layout_class": "strided" if strided else "aliased" if aliased else "contiguous",
        "layouts": sorted(set(awkward) | ({"out=input"} if aliased_out_input(case.variant) is not None else set()))
        or ["contiguous"],
        "max_rank": max((r.rank for r in case.inputs), default=0),
        "empty": any(r.numel == 0 for r in case.inputs),
    }


def variant_key(case: Case, failure: Failure) -> str:
    if case.variant == "grad" and failure.oracle in _FORWARD_ORACLES:
        return "functional"
    return case.variant


def main_dtype_class(case: Case) -> str:
    return dtype_class(case.inputs[main_input(case)].dtype) if case.inputs else "none"


def _legacy_key(case: Case, failure: Failure) -> list[str]:
    key = [case.op, failure.oracle, *failure.dedup_key]
    variant = variant_key(case, failure)
    if variant != "functional" and failure.oracle not in PROCESS_ORACLES:
        key.insert(1, variant)
    return key


def signature_key(case: Case, failure: Failure, conditions=None, *, flaky: bool = False) -> list[str]:
    """The symptom plus the *necessary* trigger features found by ablation (values,
    errors and other case oracles), which include the dtype classes and dtypes the
    failure is limited to: one root cause across dtypes and shapes is one finding, two
    causes on one op are two. Crashes, hangs and leaks key on their symptom alone. A
    flaky finding cannot be ablated: it keys on the op alone (one per op).
    Without an ablation (a finding from before format 3) the dtype class and layout
    class stand in."""
    key = list(symptom_key(case, failure))
    if failure.oracle in PROCESS_ORACLES:
        return key
    if flaky:
        # One flaky finding per op: what it looks like depends on which earlier calls
        # left the state behind, so its symptom does not tell two causes apart.
        return [case.op, "flaky"]
    if conditions is None:
        return _legacy_key(case, failure) + [main_dtype_class(case), trigger_class(case)["layout_class"]]
    return key + sorted(conditions)


def signature_of(case: Case, failure: Failure, conditions=None, *, flaky: bool = False) -> str:
    return hashlib.sha1(json.dumps(signature_key(case, failure, conditions, flaky=flaky)).encode()).hexdigest()[:16]


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Finding:
    signature: str
    signature_key: list[str]
    case: Case
    failure: Failure
    target_name: str
    target_spec: str
    device: str
    torch_version: str = field(default_factory=lambda: torch.__version__)
    platform: str = field(default_factory=lambda: f"{platform.system()} {platform.release()} {platform.machine()}")
    first_seen: str = field(default_factory=now_iso)
    last_seen: str = field(default_factory=now_iso)
    # Sightings per writer (a corpus folder's id): merging takes the larger count per
    # writer, so merging the same shard twice does not count its sightings twice.
    sightings: dict[str, int] = field(default_factory=dict)
    flaky: bool = False
    # The upstream table entry it matches ({id, status, reason, link}: corpus/upstream.py),
    # or None (the format's key is "known"; status known-bug).
    known: dict | None = None
    # The necessary trigger features (ablation); None when not explained (flaky, or
    # recorded before format 3).
    conditions: tuple[str, ...] | None = None
    explanation: dict | None = None          # ablation.Explanation.to_json()
    reproducibility: dict | None = None      # triage.Reproducibility.to_json()
    minimisation: dict | None = None         # triage.Triage.minimisation_json()
    torch_versions: list[str] = field(default_factory=list)
    # Replay results, oldest first: {date, torch_version, mpsfuzz_version, target,
    # device, result, detail}; result is one of still-fails/fixed/changed/flaky/cannot-run.
    history: list[dict] = field(default_factory=list)
    # The standalone repro script and whether it was verified to reproduce (see
    # reports/repro.py): {script, lines, expect, verified, outcome, detail, target,
    # torch_version, date}; None until one is generated.
    repro: dict | None = None
    # ``python -m torch.utils.collect_env`` as captured on the machine that found it.
    environment: str | None = None
    # Findings folded into this one because their minimal case meets this one's
    # conditions (a special case of the same bug): {signature, conditions, explanation,
    # times_seen, file}; their files are kept in the corpus's ``merged/`` folder.
    special_cases: list[dict] = field(default_factory=list)
    # Where the failure starts (triage/localise.py): {status: kernel|composite|
    # not-localised|error, kernel, divergence, call, repro, ...}; None before localisation
    # existed or for flaky findings. corpus/bugs.py groups findings into bugs by it.
    localisation: dict | None = None

    def without_bulk(self) -> "Finding":
        """A copy for what a campaign keeps of every finding until its summary: the
        script texts, the environment dump, the error profile, the localised call and the
        replay history left out (its file has them). A daemon keeps this for every finding
        of a run that lasts weeks."""
        loc = self.localisation if isinstance(self.localisation, dict) else None
        details = self.failure.details if isinstance(self.failure.details, dict) else {}
        return replace(
            self, environment=None, history=[],
            repro={k: v for k, v in self.repro.items() if k != "script"} if isinstance(self.repro, dict) else None,
            localisation={k: v for k, v in loc.items() if k not in ("call", "repro", "divergent", "with")}
            if loc is not None else None,
            failure=replace(self.failure, details={k: v for k, v in details.items() if k != "error_profile"}))

    def __post_init__(self):
        if self.torch_version and self.torch_version not in self.torch_versions:
            self.torch_versions = sorted({*self.torch_versions, self.torch_version})

    @classmethod
    def create(cls, case: Case, failure: Failure, *, target_name: str, target_spec: str, device: str,
               flaky: bool = False, known: dict | None = None, conditions=None, explanation: dict | None = None,
               reproducibility: dict | None = None, minimisation: dict | None = None,
               localisation: dict | None = None) -> "Finding":
        conditions = tuple(sorted(conditions)) if conditions is not None else None
        return cls(signature=signature_of(case, failure, conditions, flaky=flaky),
                   signature_key=signature_key(case, failure, conditions, flaky=flaky),
                   case=case, failure=failure, target_name=target_name, target_spec=target_spec,
                   device=device, flaky=flaky, known=known, conditions=conditions, explanation=explanation,
                   reproducibility=reproducibility, minimisation=minimisation, localisation=localisation)

    # -- sightings ----------------------------------------------------------------------
    @property
    def times_seen(self) -> int:
        return max(1, sum(self.sightings.values()))

    def add_sightings(self, writer: str, count: int, torch_version: str | None = None) -> None:
        self.sightings[writer] = self.sightings.get(writer, 0) + count
        self.last_seen = now_iso()
        version = torch_version or torch.__version__
        if version not in self.torch_versions:
            self.torch_versions = sorted({*self.torch_versions, version})

    def absorb(self, other: "Finding") -> None:
        """Merge another copy of this finding (same signature) into this one: sightings
        per writer (the larger count), torch versions, the time range and the history;
        the earliest minimal case is kept."""
        for writer, count in other.sightings.items():
            self.sightings[writer] = max(self.sightings.get(writer, 0), count)
        self.torch_versions = sorted({*self.torch_versions, *other.torch_versions})
        if other.first_seen < self.first_seen:
            for name in ("case", "failure", "target_name", "target_spec", "device", "torch_version",
                         "platform", "first_seen", "explanation", "minimisation", "reproducibility",
                         "repro", "environment", "localisation"):
                setattr(self, name, getattr(other, name))
        self.last_seen = max(self.last_seen, other.last_seen)
        seen = {json.dumps(h, sort_keys=True) for h in self.history}
        self.history = sorted(self.history + [h for h in other.history if json.dumps(h, sort_keys=True) not in seen],
                              key=lambda h: str(h.get("date", "")))
        self.flaky = self.flaky and other.flaky
        self.known = self.known or other.known
        self.localisation = self.localisation or other.localisation

    def absorb_special_case(self, other: "Finding", file: str) -> None:
        """Fold ``other`` (a special case of this bug, another signature) into this one:
        its sightings add to these, and it is listed in ``special_cases``."""
        for writer, count in other.sightings.items():
            self.sightings[writer] = self.sightings.get(writer, 0) + count
        self.torch_versions = sorted({*self.torch_versions, *other.torch_versions})
        self.last_seen = max(self.last_seen, other.last_seen)
        self.special_cases.append({"signature": other.signature,
                                   "conditions": list(other.conditions or ()),
                                   "explanation": other.explanation_text, "times_seen": other.times_seen,
                                   "file": file})
        self.special_cases += other.special_cases

    # -- replay history ----------------------------------------------------------------
    def record_replay(self, result: str, *, target: str, device: str, detail: str = "",
                      torch_version: str | None = None, date: str | None = None) -> None:
        version = torch_version or torch.__version__
        self.history.append({"date": date or now_iso(), "torch_version": version,
                             "mpsfuzz_version": __version__, "target": target, "device": device,
                             "result": result, "detail": detail})
        if result == STILL_FAILS and version not in self.torch_versions:
            self.torch_versions = sorted({*self.torch_versions, version})

    def _decisive(self) -> list[dict]:
        return [h for h in self.history if h.get("result") in (STILL_FAILS, FIXED, CHANGED)]

    @property
    def fixed(self) -> bool:
        decisive = self._decisive()
        return bool(decisive) and decisive[-1]["result"] == FIXED

    @property
    def fixed_since(self) -> str | None:
        """The torch version from which the latest run of replays says fixed."""
        since = None
        for h in self._decisive():
            since = (since or h.get("torch_version")) if h["result"] == FIXED else None
        return since

    @property
    def fixed_versions(self) -> list[str]:
        """Distinct torch versions in the trailing run of 'fixed' replays."""
        out: list[str] = []
        for h in self._decisive():
            if h["result"] != FIXED:
                out = []
            elif h.get("torch_version") not in out:
                out.append(h.get("torch_version"))
        return out

    @property
    def regression(self) -> bool:
        """It was replayed as fixed once and fails again since."""
        results = [h["result"] for h in self._decisive()]
        return FIXED in results and results[-1] == STILL_FAILS

    # -- what it is --------------------------------------------------------------------
    @property
    def blame(self) -> str:
        """"target" (a bug of the device under test), "cpu" (the reference is wrong),
        "both" (the target and eager CPU alike), "undecided" (no independent evidence
        says who) or "capability" (not a bug: the device does what CPU cannot)."""
        return self.failure.blame

    @property
    def status(self) -> str:
        """One of :data:`STATUSES`. Only ``new`` is a bug of the target ready to file:
        the jury found it wrong with evidence that does not come from CPU's kernel, and
        its repro script reproduced it in a fresh interpreter. Apart from it: cpu-bug
        (the reference is wrong), capability (the device accepts what CPU rejects, and
        its result checks out), flaky (does not reproduce every time), fixed (the latest
        replay passes), both (the target and eager CPU alike: a bug of PyTorch itself),
        undecided (no independent evidence says who is wrong), known-bug (matches an
        upstream issue), unconfirmed (its repro script ran and did not reproduce it),
        unverified (its repro script has not been run to the end: retried by the next
        run or daemon round)."""
        if self.blame == "cpu":
            return "cpu-bug"
        if self.blame == "capability":
            return "capability"
        if self.blame == "note":
            return "layout-propagation"
        if self.flaky:
            return "flaky"
        if self.fixed:
            return "fixed"
        if self.blame in ("both", "undecided"):
            return self.blame
        if self.known:
            return "known-bug"
        if self.unconfirmed:
            return "unconfirmed"
        return "new" if self.verified else "unverified"

    @property
    def unconfirmed(self) -> bool:
        """Its repro script ran in a fresh interpreter and did not show the bug: the
        failure needs state the script does not rebuild, so it is listed apart."""
        return bool(self.repro) and self.repro.get("verified") is False

    @property
    def verified(self) -> bool:
        """Its repro script ran in a fresh interpreter and showed the bug."""
        return bool(self.repro) and self.repro.get("verified") is True

    @property
    def op(self) -> str:
        return self.case.op

    @property
    def oracle(self) -> str:
        return self.failure.oracle

    @property
    def explanation_text(self) -> str:
        return str((self.explanation or {}).get("text", ""))

    @property
    def title(self) -> str:
        trig = trigger_class(self.case)
        if self.failure.oracle in PROCESS_ORACLES:
            return self.failure.title
        return f"{self.failure.title} ({', '.join(trig['dtypes'])}; {', '.join(trig['layouts'])})"

    def to_json(self) -> dict:
        return {
            "format": FINDING_FORMAT,
            "signature": self.signature,
            "signature_key": self.signature_key,
            "op": self.op,
            "oracle": self.oracle,
            "kind": self.failure.kind,
            "variant": self.case.variant,
            "severity": self.failure.severity,
            "blame": self.blame,
            "status": self.status,
            "regression": self.regression,
            "fixed_since": self.fixed_since,
            "known": self.known,
            "title": self.title,
            "explanation": self.explanation_text,
            "message": self.failure.message,
            "conditions": list(self.conditions) if self.conditions is not None else None,
            "ablation": self.explanation,
            "reproducibility": self.reproducibility,
            "minimisation": self.minimisation,
            "failure": self.failure.to_json(),
            "trigger": trigger_class(self.case),
            "target": {"name": self.target_name, "spec": self.target_spec, "device": self.device},
            "torch_version": self.torch_version,
            "torch_versions": list(self.torch_versions),
            "platform": self.platform,
            "mpsfuzz_version": __version__,
            "case": self.case.to_json(),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "times_seen": self.times_seen,
            "sightings": dict(self.sightings),
            "flaky": self.flaky,
            "history": list(self.history),
            "repro": self.repro,
            "environment": self.environment,
            "special_cases": list(self.special_cases),
            "localisation": self.localisation,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Finding":
        if not isinstance(d, dict) or "format" not in d:
            raise ValueError("not an mpsfuzz finding (no 'format' field)")
        if d["format"] not in READABLE_FINDING_FORMATS:
            raise ValueError(f"finding format {d['format']!r} is not supported "
                             f"(this mpsfuzz reads formats {', '.join(map(str, READABLE_FINDING_FORMATS))})")
        try:
            sightings = d.get("sightings")
            if not isinstance(sightings, dict):
                sightings = {LEGACY_WRITER: int(d["times_seen"])}
            conditions = d.get("conditions")
            history = d.get("history") or []
            if not isinstance(history, list) or not all(isinstance(h, dict) and "result" in h for h in history):
                raise TypeError("'history'")
            return cls(signature=str(d["signature"]), signature_key=list(d["signature_key"]),
                       case=Case.from_json(d["case"]), failure=Failure.from_json(d["failure"]),
                       target_name=d["target"]["name"], target_spec=d["target"]["spec"],
                       device=d["target"]["device"], torch_version=d["torch_version"],
                       platform=d["platform"], first_seen=d["first_seen"], last_seen=d["last_seen"],
                       sightings={str(k): int(v) for k, v in sightings.items()},
                       flaky=bool(d.get("flaky", False)),
                       known=d.get("known") if isinstance(d.get("known"), dict) else None,
                       conditions=tuple(str(c) for c in conditions) if isinstance(conditions, list) else None,
                       explanation=d.get("ablation") if isinstance(d.get("ablation"), dict) else None,
                       reproducibility=d.get("reproducibility") if isinstance(d.get("reproducibility"), dict) else None,
                       minimisation=d.get("minimisation") if isinstance(d.get("minimisation"), dict) else None,
                       torch_versions=[str(v) for v in d.get("torch_versions") or []],
                       history=history,
                       repro=d.get("repro") if isinstance(d.get("repro"), dict) else None,
                       environment=d.get("environment") if isinstance(d.get("environment"), str) else None,
                       special_cases=[c for c in d.get("special_cases") or [] if isinstance(c, dict)],
                       localisation=d.get("localisation") if isinstance(d.get("localisation"), dict) else None)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed finding: missing or bad field {exc}") from None
