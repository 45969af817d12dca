"""Rich views for `mpsfuzz corpus list` and `mpsfuzz corpus show`."""
from __future__ import annotations

import json
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

_STYLES = {"new": "red", "known-bug": "yellow", "cpu-bug": "cyan", "flaky": "magenta", "fixed": "green"}


def _why(finding) -> str:
    if finding.flaky:
        r = finding.reproducibility or {}
        return f"flaky: failed {r.get('failed', '?')} of {r.get('runs', '?')} re-runs" + (
            "" if r.get("cold_failed", True) else " (not in a fresh process)")
    return finding.explanation_text or (finding.failure.message.strip().splitlines() or [""])[0][:100]


def _status(finding) -> Text:
    words = finding.status + (" (regression)" if finding.regression else "")
    return Text(words, style=_STYLES.get(finding.status, ""))


def findings_list(rows: list[tuple[Path, object]], title: str) -> Table:
    table = Table(title=title)
    for column in ("status", "op", "variant", "oracle", "seen", "torch", "why", "file"):
        table.add_column(column, overflow="fold", justify="right" if column == "seen" else "left")
    for path, f in rows:
        table.add_row(_status(f), f.op, f.case.variant, f.oracle, str(f.times_seen), ", ".join(f.torch_versions),
                      _why(f), Path(path).name)
    return table


def finding_detail(path: Path, f) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    rows = [("title", f.title), ("file", str(path)), ("status", _status(f)),
            ("signature", f"{f.signature}  {json.dumps(f.signature_key)}"),
            ("explanation", _why(f)), ("conditions", ", ".join(f.conditions or ()) or "-"),
            ("case", f.case.describe()),
            ("found", f"{f.first_seen} on {f.target_name} ({f.device}), torch {f.torch_version}, {f.platform}"),
            ("seen", f"{f.times_seen} times, last {f.last_seen}; torch {', '.join(f.torch_versions)}"),
            ("fixed since", f.fixed_since or "-")]
    if f.known:
        rows.append(("known upstream", f"{f.known.get('id', '')} {f.known.get('link', '')}"))
    if f.reproducibility:
        r = f.reproducibility
        rows.append(("reproducibility", f"failed {r.get('failed')} of {r.get('runs')} re-runs"
                                        f"{'' if r.get('cold_failed', True) else ', not in a fresh process'}"))
    if f.minimisation:
        m = f.minimisation
        rows.append(("minimisation", f"{m.get('elements_before')} -> {m.get('elements_after')} elements, "
                                     f"{m.get('attempts')} attempts, {m.get('seconds')}s"))
    for key, value in rows:
        head.add_row(key, value)
    parts = [head, Text(f.failure.message)]
    probes = (f.explanation or {}).get("probes") or []
    if probes:
        table = Table(title="ablation: what the failure needs")
        for column in ("without", "result", "necessary"):
            table.add_column(column)
        for p in probes:
            table.add_row(str(p.get("question")), str(p.get("verdict")), "yes" if p.get("necessary") else "")
        parts.append(table)
    if f.history:
        table = Table(title="replay history")
        for column in ("date", "torch", "target", "result", "detail"):
            table.add_column(column, overflow="fold")
        for h in f.history:
            table.add_row(str(h.get("date", "")), str(h.get("torch_version", "")), str(h.get("target", "")),
                          str(h.get("result", "")), str(h.get("detail", ""))[:100])
        parts.append(table)
    parts.append(Text(json.dumps(f.case.to_json(), indent=1), style="dim"))
    return Group(*parts)
