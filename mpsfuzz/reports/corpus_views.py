"""Rich views for `mpsfuzz corpus list` and `mpsfuzz corpus show`.

Everything that comes from a finding file (titles, messages, explanations, paths) is
wrapped in :class:`rich.text.Text`, never passed as a string: a string would be read as
rich markup, and a message such as ``tensor([nan, 1.])`` or ``[/x]`` would be garbled or
raise.
"""
from __future__ import annotations

import json
from pathlib import Path

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

STATUS_STYLES = {"new": "red", "known-bug": "yellow", "both": "dark_orange", "unverified": "bright_black",
                 "unconfirmed": "bright_black", "undecided": "bright_black", "cpu-bug": "cyan",
                 "capability": "blue", "layout-propagation": "bright_black", "flaky": "magenta", "fixed": "green"}
_RESULT_STYLES = {"still-fails": "red", "fixed": "green", "changed": "yellow", "flaky": "magenta"}


def _t(value, style: str = "") -> Text:
    return Text(str(value), style=style)


# From this many columns the full tables read (no cell wrapped to a word per line);
# narrower terminals get one line per row with its details indented below.
WIDE_COLUMNS = 120


class ByWidth:
    """A table where the console is wide enough for it, else its narrow layout: chosen
    when rendered, from the width the console (or the enclosing renderable) offers."""

    def __init__(self, wide, narrow, *, min_width: int = WIDE_COLUMNS):
        self.wide, self.narrow, self.min_width = wide, narrow, min_width

    def __rich_console__(self, console, options):
        yield self.wide if options.max_width >= self.min_width else self.narrow


def narrow_rows(title, rows) -> Group:
    """The narrow layout: per row one line that never wraps (``heads``: the columns that
    identify it, then a short why; cut with an ellipsis where too long) and, indented
    below, its details (an explanation, a file) wrapped to the width."""
    parts: list = [title if isinstance(title, Text) else Text(str(title), style="italic")]
    for status, heads, short, details in rows:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append_text(status if isinstance(status, Text) else Text(str(status)))
        for head in heads:
            line.append("  " + str(head))
        if short:
            line.append("  " + short, style="dim")
        parts.append(line)
        below = [d for d in details if d]
        if below:
            parts.append(Padding(Text("\n".join(below)), (0, 0, 0, 4), expand=False))
    return Group(*parts)


def short_why(text: str) -> str:
    """The symptom of an explanation, without its conditions: "wrong values" of "wrong
    values only when `input` is ...; all float dtypes"."""
    head = text.split(";", 1)[0]
    for cut in (" only when ", " whatever ", " when "):
        if cut in head:
            return head.split(cut, 1)[0]
    return head


def reproducibility_words(finding) -> str:
    """'failed 2 of 4 re-runs' (plus a note when it never failed in a fresh process)."""
    r = finding.reproducibility if isinstance(finding.reproducibility, dict) else {}
    if not r:
        return ""
    words = f"failed {r.get('failed', '?')} of {r.get('runs', '?')} re-runs"
    if r.get("state_dependent"):
        words += " (only because two calls on the same contiguous inputs differ: it depends on earlier calls)"
    elif not r.get("cold_failed", True):
        words += " (not in a fresh process: it depends on earlier calls)"
    return words


def why(finding) -> str:
    """The one-line explanation: the ablation's text, for a flaky finding its rate, else
    the first line of the failure message."""
    if finding.flaky:
        rate = reproducibility_words(finding)
        return f"flaky: {rate}" if rate else "flaky"
    first = (finding.failure.message.strip().splitlines() or [""])[0]
    return finding.explanation_text or first[:100]


def status_text(finding) -> Text:
    text = Text(finding.status, style=STATUS_STYLES.get(finding.status, ""))
    if finding.regression:
        text.append(" (regression)", style="bold red")
    return text


def findings_list(rows: list[tuple[Path, object]], title: str) -> Table:
    """One row per finding: status, op, variant, oracle, times seen, torch versions,
    why, file name."""
    table = Table(title=_t(title))
    for column in ("status", "op", "variant", "oracle", "seen", "torch", "why", "file"):
        table.add_column(column, overflow="fold", justify="right" if column == "seen" else "left")
    for path, f in rows:
        table.add_row(status_text(f), _t(f.op), _t(f.case.variant), _t(f.oracle), _t(f.times_seen),
                      _t(", ".join(f.torch_versions)), _t(why(f)), _t(Path(path).name))
    narrow = narrow_rows(_t(title, "italic"), [
        (status_text(f), (f.op, f.case.variant, f.oracle), short_why(why(f)),
         (why(f), f"seen {f.times_seen}, torch {', '.join(f.torch_versions)}: {Path(path).name}"))
        for path, f in rows])
    return ByWidth(table, narrow)


def bug_status_text(bug) -> Text:
    text = Text(bug.status, style=STATUS_STYLES.get(bug.status, ""))
    if bug.regression:
        text.append(" (regression)", style="bold red")
    return text


def bugs_list(bugs, title: str) -> Table:
    """`corpus list --by bug`: one row per bug: status, kernel (or why it is not
    localised), the public ops and variants it affects, oracles, findings, explanation."""
    table = Table(title=_t(title))
    for column in ("status", "kernel", "affects", "oracles", "findings", "explanation", "bug"):
        table.add_column(column, overflow="fold", justify="right" if column == "findings" else "left")
    for b in bugs:
        kernel = _t("\n".join(b.kernels)) if b.kernel else _t(f"- ({b.reason})", "dim")
        table.add_row(bug_status_text(b), kernel, _t("\n".join(b.affects())), _t(", ".join(b.oracles)),
                      _t(len(b.findings)), _t(b.explanation), _t(b.id))
    narrow = narrow_rows(_t(title, "italic"), [
        (bug_status_text(b), (", ".join(b.ops), ", ".join(b.oracles), ", ".join(b.kernels) if b.kernel else "-"),
         short_why(b.explanation),
         (b.explanation, f"affects {'; '.join(b.affects())}",
          f"{len(b.findings)} finding(s), bug {b.id}" + ("" if b.kernel else f" ({b.reason})")))
        for b in bugs])
    return ByWidth(table, narrow)


def call_words(call: dict | None) -> str:
    """A recorded aten call's arguments in one line: ``float32[2, 2] stride (1, 2), 0, True``."""
    if not isinstance(call, dict) or call.get("args") is None:
        return "-"

    def one(d) -> str:
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind == "tensor":
            words = f"{d.get('dtype')}{list(d.get('shape', []))} stride {tuple(d.get('stride', []))}"
            return words + (f" offset {d['offset']}" if d.get("offset") else "")
        if kind in ("list", "tuple"):
            if d.get("items") is None:          # too long to record: its length alone
                return f"[{d.get('length')} items]"
            return "[" + ", ".join(one(x) for x in d["items"]) + "]"
        if kind == "value":
            return repr(d.get("value"))
        if kind in ("dtype", "layout", "memory_format"):
            return str(d.get("name"))
        if kind == "device":
            return str(d.get("type"))
        return str(d.get("repr", "?"))
    parts = [one(a) for a in call.get("args") or []]
    parts += [f"{k}={one(v)}" for k, v in (call.get("kwargs") or {}).items()]
    return ", ".join(parts)


def localisation_words(loc: dict | None) -> str:
    """The localisation in one line: 'aten::mm.default: wrong-values (confirmed ...)'."""
    if not isinstance(loc, dict):
        return "-"
    status = loc.get("status")
    if status == "kernel":
        how = ("confirmed: with this call's result replaced by CPU's, the failure goes away"
               if loc.get("confirmed") else str(loc.get("note") or "not confirmed"))
        return f"{loc.get('kernel')}: {', '.join(loc.get('kinds') or [loc.get('divergence', '?')])} ({how})"
    if status == "composite":
        return f"composite: {loc.get('reason', '')}"
    if status == "not-localised":
        return f"not localised: {loc.get('reason', '')}"
    return f"localisation failed: {loc.get('error', '')}"


def _probes_table(finding) -> Table | None:
    probes = [p for p in (finding.explanation or {}).get("probes") or () if isinstance(p, dict)]
    if not probes:
        return None
    table = Table(title="ablation: each feature taken away in turn")
    for column in ("feature", "taken away", "verdict", "necessary"):
        table.add_column(column, overflow="fold")
    for p in probes:
        necessary = bool(p.get("necessary"))
        table.add_row(_t(p.get("feature", "")), _t(p.get("question", "")), _t(p.get("verdict", "")),
                      _t("yes", "bold") if necessary else _t("no", "dim"))
    return table


def _history_table(finding) -> Table | None:
    if not finding.history:
        return None
    table = Table(title="replay history")
    for column in ("date", "torch", "target", "result", "detail"):
        table.add_column(column, overflow="fold")
    for h in finding.history:
        result = str(h.get("result", ""))
        table.add_row(_t(h.get("date", "")), _t(h.get("torch_version", "")), _t(h.get("target", "")),
                      _t(result, _RESULT_STYLES.get(result, "")), _t(str(h.get("detail", ""))[:200]))
    return table


def finding_detail(path: Path, f) -> Group:
    """`mpsfuzz corpus show`: one finding in full."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    rows: list[tuple[str, object]] = [
        ("title", f.title),
        ("file", path),
        ("status", status_text(f)),
        ("blame", "the CPU reference" if f.blame == "cpu" else "the target"),
        ("signature", f.signature),
        ("signature key", json.dumps(f.signature_key)),
        ("explanation", f.explanation_text or "-"),
        ("conditions", ", ".join(f.conditions) if f.conditions else ("-" if f.conditions is None else "none")),
    ]
    if f.known:
        rows.append(("known upstream", f"{f.known.get('id', '')} {f.known.get('status', '')} "
                                       f"{f.known.get('link', '')}".strip()))
    rows.append(("reproducibility", reproducibility_words(f) or "-"))
    loc = f.localisation if isinstance(f.localisation, dict) else None
    rows.append(("localisation", localisation_words(loc)))
    if loc and loc.get("status") == "kernel":
        rows.append(("kernel call", f"{loc.get('kernel')}({call_words(loc.get('call'))})"))
        rows.append(("divergence", str(loc.get("detail", ""))[:500]))
    m = f.minimisation if isinstance(f.minimisation, dict) else None
    if m:
        rows.append(("minimisation", f"{m.get('elements_before', '?')} -> {m.get('elements_after', '?')} elements, "
                                     f"{m.get('attempts', '?')} attempts, {m.get('seconds', '?')}s"))
    else:
        rows.append(("minimisation", "-"))
    rows += [
        ("case", f.case.describe()),
        ("found", f"on {f.target_name} ({f.target_spec}, device {f.device}), torch {f.torch_version}, {f.platform}"),
        ("first seen", f.first_seen),
        ("last seen", f.last_seen),
        ("times seen", f"{f.times_seen}" + (f" ({', '.join(f'{w}: {n}' for w, n in sorted(f.sightings.items()))})"
                                            if f.sightings else "")),
        ("torch versions", ", ".join(f.torch_versions) or "-"),
        ("fixed since", f.fixed_since or "-"),
        ("regression", "yes: replayed as fixed, failing again since" if f.regression else "no"),
    ]
    for special in f.special_cases:
        rows.append(("special case", f"{special.get('signature', '?')} ({', '.join(special.get('conditions', []))}; "
                                     f"seen {special.get('times_seen', '?')}) folded in; kept as "
                                     f"{special.get('file', '?')}"))
    for key, value in rows:
        head.add_row(key, value if isinstance(value, Text) else _t(value))
    parts: list = [head, Text("message", style="bold"), _t(f.failure.message)]
    for table in (_probes_table(f), _history_table(f)):
        if table is not None:
            parts.append(table)
    repro = (loc or {}).get("repro") if loc else None
    if isinstance(repro, dict) and repro.get("script"):
        parts += [Text("kernel-level repro (the one aten call)", style="bold"), _t(repro["script"].rstrip())]
    parts += [Text("case JSON", style="bold"), _t(json.dumps(f.case.to_json()), "dim")]
    return Group(*parts)
