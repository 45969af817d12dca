"""A finding: one failure of one (minimised) case, with its deduplication signature.

The signature is built from the op, the oracle, the oracle's own dedup key (error type
and normalised message, signal and cleaned frames, ...) and, for case oracles, the
class of the trigger: the dtype class and whether any input is non-contiguous. Crashes
key on the signal and top frames; hangs on the target and op (ClusterFuzz style).
"""
from __future__ import annotations

import hashlib
import json
import platform
import time
from dataclasses import dataclass, field

import torch

from .. import __version__
from ..fuzzer.dtypes import dtype_class
from ..fuzzer.recipes import Case
from ..oracles import Failure

FINDING_FORMAT = 2
# Format 1 (before variants, blame and known-failure links) reads as format 2.
READABLE_FINDING_FORMATS = (1, 2)
# Oracles that compare the forward result: a grad-variant case calls the op exactly as
# the functional form does, so it keys as functional (one bug, one finding).
_FORWARD_ORACLES = ("values", "metadata", "errors", "layout", "arbiter", "distribution")


def trigger_class(case: Case) -> dict:
    classes = {dtype_class(r.dtype) for r in case.inputs}
    dtypes = sorted({r.dtype for r in case.inputs})
    strided = [r.layout.describe() for r in case.inputs if not r.layout.is_plain()]
    return {
        "dtype_class": classes.pop() if len(classes) == 1 else "mixed",
        "dtypes": dtypes,
        "layout_class": "strided" if strided else "contiguous",
        "layouts": sorted(set(strided)) or ["contiguous"],
        "max_rank": max((r.rank for r in case.inputs), default=0),
        "empty": any(r.numel == 0 for r in case.inputs),
    }


def variant_key(case: Case, failure: Failure) -> str:
    if case.variant == "grad" and failure.oracle in _FORWARD_ORACLES:
        return "functional"
    return case.variant


def signature_key(case: Case, failure: Failure) -> list[str]:
    key = [case.op, failure.oracle, *failure.dedup_key]
    if failure.oracle in ("crash", "hang"):
        return key
    variant = variant_key(case, failure)
    if variant != "functional":
        key.insert(1, variant)
    trig = trigger_class(case)
    return key + [trig["dtype_class"], trig["layout_class"]]


def signature_of(case: Case, failure: Failure) -> str:
    return hashlib.sha1(json.dumps(signature_key(case, failure)).encode()).hexdigest()[:16]


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
    times_seen: int = 1
    flaky: bool = False
    # The known-failure table entry it matches ({id, status, reason, link}), or None.
    known: dict | None = None

    @classmethod
    def create(cls, case: Case, failure: Failure, *, target_name: str, target_spec: str, device: str,
               flaky: bool = False, known: dict | None = None) -> "Finding":
        return cls(signature=signature_of(case, failure), signature_key=signature_key(case, failure),
                   case=case, failure=failure, target_name=target_name, target_spec=target_spec,
                   device=device, flaky=flaky, known=known)

    @property
    def blame(self) -> str:
        """"target" (a bug of the device under test) or "cpu" (the reference is wrong)."""
        return self.failure.blame

    @property
    def status(self) -> str:
        """new, known-bug (matches an upstream issue), or cpu-bug (the reference is wrong)."""
        if self.blame == "cpu":
            return "cpu-bug"
        return "known-bug" if self.known else "new"

    @property
    def op(self) -> str:
        return self.case.op

    @property
    def oracle(self) -> str:
        return self.failure.oracle

    @property
    def title(self) -> str:
        trig = trigger_class(self.case)
        if self.failure.oracle in ("crash", "hang"):
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
            "known": self.known,
            "title": self.title,
            "message": self.failure.message,
            "failure": self.failure.to_json(),
            "trigger": trigger_class(self.case),
            "target": {"name": self.target_name, "spec": self.target_spec, "device": self.device},
            "torch_version": self.torch_version,
            "platform": self.platform,
            "mpsfuzz_version": __version__,
            "case": self.case.to_json(),
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "times_seen": self.times_seen,
            "flaky": self.flaky,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Finding":
        if not isinstance(d, dict) or "format" not in d:
            raise ValueError("not an mpsfuzz finding (no 'format' field)")
        if d["format"] not in READABLE_FINDING_FORMATS:
            raise ValueError(f"finding format {d['format']!r} is not supported "
                             f"(this mpsfuzz reads formats {', '.join(map(str, READABLE_FINDING_FORMATS))})")
        try:
            return cls(signature=d["signature"], signature_key=list(d["signature_key"]),
                       case=Case.from_json(d["case"]), failure=Failure.from_json(d["failure"]),
                       target_name=d["target"]["name"], target_spec=d["target"]["spec"],
                       device=d["target"]["device"], torch_version=d["torch_version"],
                       platform=d["platform"], first_seen=d["first_seen"], last_seen=d["last_seen"],
                       times_seen=int(d["times_seen"]), flaky=bool(d.get("flaky", False)),
                       known=d.get("known") if isinstance(d.get("known"), dict) else None)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed finding: missing or bad field {exc}") from None
