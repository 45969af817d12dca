"""`mpsfuzz status DIR`: what the daemon in a corpus is doing, or did before it stopped.

Built from the daemon's state file (corpus/daemon_state.py) and the tail of its event log
(``daemon/events.jsonl``, written by campaign/events_log.py: one JSON object per line
with a ``type``). It only reads: a corrupt state is reported, never moved aside (the
daemon itself does that when it next starts).

:func:`status_model` is the JSON-able model (``--format json`` prints it as it is);
:func:`status_view` lays it out for the terminal. Everything that comes from the files is
wrapped in :class:`rich.text.Text`, never read as markup.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..corpus.daemon_state import StateError, events_path, liveness, parse_iso, read_state

TAIL_BYTES = 256 * 1024          # of the event log read for the last events
PROGRESS_LINES = 10              # the progress lines cases/s is measured over
HARNESS_LINES = 5                # harness errors shown
# A running daemon saves its state (the heartbeat) every few seconds: one silent for
# this long is alive but stuck (or its clock is off), which the user should know.
STALE_HEARTBEAT_S = 600.0
LIVENESS_STYLES = {"running": "green", "stopped": "bright_black", "killed": "yellow", "died": "bold red",
                   "elsewhere": "cyan"}


class StatusError(Exception):
    """No daemon state to show (one line; the CLI exits 2)."""


def tail_lines(path: Path, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The whole lines among the last ``max_bytes`` of ``path`` ([] if there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[1:] if size > max_bytes else lines  # the first may be cut


def recent_events(corpus_dir, max_bytes: int = TAIL_BYTES) -> list[dict]:
    """The last events of the log, oldest first; the rotated ``.1`` too where the live
    file was just rotated. Lines that are not JSON objects are skipped."""
    live = events_path(corpus_dir)
    lines = tail_lines(live, max_bytes)
    if sum(len(ln) for ln in lines) < max_bytes // 2:
        lines = tail_lines(live.with_name(live.name + ".1"), max_bytes // 2) + lines
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _rate(progress: list[dict]) -> float | None:
    cases = sum(p.get("new_cases", 0) for p in progress if isinstance(p.get("new_cases", 0), (int, float)))
    seconds = sum(p.get("interval_s", 0) for p in progress if isinstance(p.get("interval_s", 0), (int, float)))
    return cases / seconds if seconds > 0 else None


def status_model(corpus_dir, *, now: float | None = None) -> dict:
    """The daemon's status as a JSON-able dict. StatusError where ``corpus_dir`` is no
    folder, holds no daemon state, or its state cannot be read."""
    root = Path(corpus_dir)
    if not root.is_dir():
        raise StatusError(f"no such corpus folder: {corpus_dir}")
    try:
        state = read_state(root)
    except StateError as exc:
        raise StatusError(f"cannot read the daemon state: {exc}") from None
    if state is None:
        raise StatusError(f"{corpus_dir}: no daemon has run in this corpus (no daemon/state.json)")
    now = time.time() if now is None else now
    events = recent_events(root)
    progress = [e for e in events if e.get("type") == "progress"][-PROGRESS_LINES:]
    rate = _rate(progress)
    source = "progress"
    if rate is None:
        rate, source = (state.cases / state.uptime_s if state.uptime_s > 0 else 0.0), "uptime"
    beat = parse_iso(state.heartbeat_at)
    return {
        "corpus": str(root),
        "status": liveness(state),
        "pid": state.pid,
        "host": state.host,
        "started_at": state.started_at,
        "heartbeat_at": state.heartbeat_at,
        "heartbeat_age_s": round(now - beat, 1) if beat is not None else None,
        "heartbeat_stale": liveness(state) == "running" and (beat is None or now - beat > STALE_HEARTBEAT_S),
        "runs": state.runs,
        "uptime_s": round(state.uptime_s, 1),
        "cases": state.cases,
        "cases_per_s": round(rate, 3),
        "cases_per_s_from": source,
        "findings_new": state.findings_new,
        "behaviours": state.seen_behaviours,
        "workers": state.workers,
        "restarts": state.restarts,
        "harness_errors": state.harness_errors,
        "torch_version_replayed": state.torch_version_replayed,
        "per_family": [{"family": fam, "cases": row.get("cases", 0), "findings": row.get("findings", 0)}
                       for fam, row in sorted(state.per_family.items()) if isinstance(row, dict)],
        "last_findings": list(state.last_findings),
        "last_harness_errors": [{k: e.get(k) for k in ("time", "stage", "op", "error")}
                                for e in events if e.get("type") == "HarnessError"][-HARNESS_LINES:],
    }


def duration_words(seconds: float | None) -> str:
    """``3d 4h``, ``2h 05m``, ``4m 10s``, ``12s``."""
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    d, h, m = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {s % 60:02d}s"
    return f"{s}s"


def _t(value, style: str = "") -> Text:
    return Text("-" if value is None else str(value), style=style)


def status_view(model: dict) -> Group:
    """The terminal layout of :func:`status_model`'s dict."""
    status = model["status"]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold", no_wrap=True)
    head.add_column(overflow="fold")
    words = Text(status, style=LIVENESS_STYLES.get(status, ""))
    if status == "died":
        words.append(f"  (state says running, but pid {model['pid']} is gone)", style="")
    elif status == "elsewhere":
        words.append(f"  (running on {model['host']}, pid {model['pid']}: not checked from here)", style="")
    elif status == "running":
        words.append(f"  (pid {model['pid']}, heartbeat {duration_words(model['heartbeat_age_s'])} ago)", style="")
        if model["heartbeat_stale"]:
            words.append("  no heartbeat for a while: stuck?", style="bold yellow")
    rows = [
        ("status", words),
        ("corpus", _t(model["corpus"])),
        ("uptime", _t(f"{duration_words(model['uptime_s'])} over {model['runs']} run(s), first started "
                      f"{model['started_at'] or '-'}")),
        ("cases", _t(f"{model['cases']:,} ({model['cases_per_s']:.1f}/s"
                     f"{', recent' if model['cases_per_s_from'] == 'progress' else ', over the uptime'})")),
        ("findings", _t(f"{model['findings_new']} new; {model['behaviours']:,} behaviours seen")),
        ("workers", _t(f"{model['workers']} ({model['restarts']} restart(s))")),
        ("harness errors", _t(model["harness_errors"], "red" if model["harness_errors"] else "")),
        ("replayed on torch", _t(model["torch_version_replayed"])),
    ]
    for label, value in rows:
        head.add_row(Text(label), value)
    parts: list = [head]
    if model["per_family"]:
        families = Table(title="per family", title_justify="left")
        for column in ("family", "cases", "findings"):
            families.add_column(column, justify="left" if column == "family" else "right")
        for row in model["per_family"]:
            families.add_row(_t(row["family"]), _t(f"{row['cases']:,}"),
                             _t(row["findings"], "red" if row["findings"] else ""))
        parts.append(families)
    if model["last_findings"]:
        found = Table(title=f"last {len(model['last_findings'])} finding(s)", title_justify="left")
        for column in ("time", "op", "oracle", "status", "signature"):
            found.add_column(column, overflow="fold")
        for f in reversed(model["last_findings"]):
            found.add_row(*(_t(f.get(k)) for k in ("time", "op", "oracle", "status", "signature")))
        parts.append(found)
    if model["last_harness_errors"]:
        parts.append(Text("last harness errors:", style="bold"))
        for e in model["last_harness_errors"]:
            parts.append(Text(f"  {e.get('time') or '-'}  {e.get('stage')}  {e.get('op') or '-'}: "
                              f"{e.get('error')}", no_wrap=True, overflow="ellipsis"))
    return Group(*parts)
