"""`mpsfuzz report --format json`: the report model for machines. The schema is
``mpsfuzz/data/report.schema.json`` (JSON Schema, draft 2020-12), documented field by
field in docs/report.md; bump REPORT_VERSION on any incompatible change."""
from __future__ import annotations

import json
import math
from functools import lru_cache

from .model import Entry, Matrix, Report
from .schema_check import errors, load_schema

REPORT_SCHEMA = "mpsfuzz-report"
REPORT_VERSION = 1


def _plain(value):
    """JSON without NaN/Infinity (which strict parsers reject): a finding file read by
    Python's json may hold them; they become text, as the oracles write them."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@lru_cache(maxsize=1)
def schema() -> dict:
    return load_schema("report.schema.json")


def _profile(x: Entry) -> dict | None:
    """The finding's error profile, or None when the file's one is malformed: the report
    passes it on, so it must meet the schema like everything else."""
    profile = _plain(x.error_profile)
    if profile is None or errors(profile, schema()["$defs"]["error_profile"], schema()):
        return None
    return profile


def _localisation(f) -> dict | None:
    loc = f.localisation if isinstance(f.localisation, dict) else None
    if loc is None:
        return None
    return {"status": str(loc.get("status", "error")), "kernel": loc.get("kernel") if loc.get("kernel") else None,
            "divergence": loc.get("divergence") if loc.get("divergence") else None,
            "confirmed": bool(loc.get("confirmed", False))}


def _bug(report: Report, b) -> dict:
    repro = b.kernel_repro or {}
    return {
        "id": b.id,
        "kernel": b.kernel,
        "kernels": list(b.kernels),
        "device": b.device,
        "divergence": b.divergence,
        "status": b.status,
        "regression": b.regression,
        "title": b.title,
        "explanation": b.explanation,
        "conditions": sorted(b.conditions),
        "reason": b.reason or None,
        "ops": [{"op": op, "variants": list(variants)} for op, variants in b.ops.items()],
        "oracles": list(b.oracles),
        "findings": [f.signature for _, f in b.findings],
        "paths": [str(p) for p, _ in b.findings],
        "kernel_repro": str(repro["script"]) if repro.get("script") else None,
    }


def _finding(x: Entry, report: Report) -> dict:
    f = x.finding
    bug = report.bug_of(x)
    repro = x.repro or {}
    known = f.known if isinstance(f.known, dict) else None
    return {
        "signature": f.signature,
        "path": str(x.path),
        "op": f.op,
        "family": x.family,
        "variant": f.case.variant,
        "oracle": f.oracle,
        "kind": f.failure.kind,
        "severity": f.failure.severity,
        "blame": f.blame,
        "status": f.status,
        "regression": f.regression,
        "known_id": str(known["id"]) if known and known.get("id") else None,
        "known_link": x.known_link,
        "title": f.title,
        "explanation": x.why,
        "conditions": list(f.conditions) if f.conditions is not None else None,
        "message": f.failure.message,
        "times_seen": f.times_seen,
        "first_seen": f.first_seen,
        "last_seen": f.last_seen,
        "torch_versions": list(f.torch_versions),
        "target": f.target_name,
        "device": f.device,
        "dtypes": list(x.dtypes),
        "layouts": list(x.layouts),
        "repro_verified": repro.get("verified") if repro.get("verified") in (True, False) else None,
        "repro_detail": str(repro.get("detail", "")) if repro else None,
        "error_profile": _profile(x),
        "jury": f.failure.details.get("jury") if isinstance(f.failure.details, dict)
        and isinstance(f.failure.details.get("jury"), dict) else None,
        "bug": bug.id if bug is not None else None,
        "localisation": _localisation(f),
    }


def _matrix(matrix: Matrix) -> dict:
    def cell(op, column):
        return {"worst": matrix.worst(op, column), "signatures": [x.finding.signature for x in matrix.at(op, column)]}
    return {"columns": list(matrix.columns),
            "rows": {op: {c: cell(op, c) for c in matrix.columns if matrix.at(op, c)} for op in matrix.ops}}


def report_json(report: Report) -> dict:
    runs = report.runs
    families: dict[str, int] = {family: len(entries) for family, entries in report.families.items()}
    return {
        "schema": REPORT_SCHEMA,
        "version": REPORT_VERSION,
        "generated": report.generated,
        "summary": {"findings": len(report.entries), "bugs": len(report.bugs), "by_status": report.counts,
                    "by_family": families,
                    "by_oracle": report.oracles, "corpora": [str(r) for r in report.roots]},
        "runs": {"runs": runs.runs, "cases": runs.cases, "valid": runs.valid,
                 "valid_share": round(runs.valid_share, 4), "unsupported": runs.unsupported,
                 "restarts": runs.restarts, "internal_errors": runs.internal_errors,
                 "elapsed_s": round(runs.elapsed_s, 3), "cases_per_s": round(runs.cases_per_s, 3),
                 "minimise_s": round(runs.minimise_s, 3), "findings": dict(runs.findings),
                 "targets": list(runs.targets), "torch_versions": list(runs.torch_versions),
                 "first_started": runs.first_started, "last_finished": runs.last_finished,
                 "per_op": runs.per_op,
                 "unreadable": [{"path": str(p), "why": w} for p, w in runs.unreadable]},
        "matrix": {"dtypes": _matrix(report.dtype_matrix), "layouts": _matrix(report.layout_matrix)},
        "bugs": [_bug(report, b) for b in report.bugs],
        "findings": [_finding(x, report) for x in report.entries],
        "layout_propagation": [{"target": n.get("target", ""), "entries": [
            {k: e.get(k) for k in ("op", "layouts", "dtypes", "target_format", "cpu_format", "times_seen")}
            for e in n["entries"]]} for n in report.notes],
    }


def json_text(report: Report) -> str:
    return json.dumps(report_json(report), indent=2, allow_nan=False) + "\n"

