"""`mpsfuzz report --format html`: one self-contained page (inline CSS, two tiny inline
scripts, no external resources) for a maintainer: counts and run statistics, the bugs
(each with its kernel, the public ops and variants it affects, its findings and its
kernel-level repro), the failure matrices (ops x dtypes, ops x layout classes) coloured
by status, and a section per finding with its explanation, message, repro script and
error plot.

All finding text comes from arbitrary error messages and files: it is escaped here,
every time, with :func:`html.escape`.
"""
from __future__ import annotations

from html import escape

from .error_plot import error_figure
from .model import (STATUS_LABELS, STATUSES, Entry, Matrix, Report, bug_anchor, bug_kernel_words, family_heading,
                    summary_line)

# Strong colours for badges, tints for matrix cells (text stays readable on them).
COLOURS = {"new": "#d32f2f", "known-bug": "#f9a825", "both": "#ef6c00", "unverified": "#757575",
           "unconfirmed": "#757575", "undecided": "#9e9e9e", "flaky": "#8e24aa",
           "cpu-bug": "#1e88e5", "capability": "#6d4c41", "layout-propagation": "#9e9e9e", "fixed": "#388e3c"}
TINTS = {"new": "#ef9a9a", "known-bug": "#ffe082", "both": "#ffcc80", "unverified": "#e0e0e0",
         "unconfirmed": "#e0e0e0", "undecided": "#eeeeee", "flaky": "#ce93d8",
         "cpu-bug": "#90caf9", "capability": "#bcaaa4", "layout-propagation": "#eeeeee", "fixed": "#a5d6a7"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#212121;background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{margin:8px 0 4px;font-size:24px}h2{margin:28px 0 8px;border-bottom:2px solid #ddd;padding-bottom:4px}
h3{margin:6px 0}code,pre{font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace}
pre{background:#263238;color:#eceff1;padding:10px 12px;border-radius:6px;overflow:auto;max-height:360px;
white-space:pre-wrap;word-break:break-word}
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#eceff1}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600;
white-space:nowrap}.badge.known-bug{color:#212121}
.counts .badge{font-size:14px;padding:3px 12px;margin-right:6px}.counts .badge.zero{opacity:.35}
.stats td:first-child{color:#555}.muted{color:#757575;font-size:12px}
table.matrix td{min-width:44px;text-align:center;font-size:12px}table.matrix td.empty{background:#f5f5f5}
table.matrix td a{color:#212121;font-weight:600;text-decoration:none;display:block}
table.matrix td a:hover{text-decoration:underline}table.matrix th.op{text-align:left;white-space:nowrap}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:14px;height:14px;
vertical-align:-2px;margin-right:5px;border:1px solid #999}
.family td.fam{background:#eceff1;font-weight:600}
section.finding{background:#fff;border:1px solid #ddd;border-left:6px solid #999;border-radius:6px;
padding:10px 16px;margin:14px 0}section.finding:target{box-shadow:0 0 0 3px #90caf9}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:8px 0}dt{color:#555}dd{margin:0}
.cond{display:inline-block;background:#e3f2fd;border-radius:4px;padding:0 6px;margin-right:4px}
.repro.yes{background:#388e3c}.repro.no{background:#d32f2f}.repro.unknown{background:#757575}
figure.errors{margin:8px 0}.plots{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
svg text{font:11px system-ui,sans-serif}svg text:not([fill]){fill:#424242}figcaption{color:#424242;margin-top:4px}
"""
_CSS += "".join(f".badge.{s}{{background:{c}}}section.finding.{s}{{border-left-color:{c}}}"
                f"td.{s}{{background:{TINTS[s]}}}.legend i.{s}{{background:{TINTS[s]}}}"
                for s, c in COLOURS.items())

# Records script errors on <body> (a headless browser test reads them back).
_ERRORS_JS = ("<script>window.onerror=function(m,s,l){var b=document.body;"
              "b.dataset.errors=(b.dataset.errors||'')+m+' (line '+l+')\\n';};</script>")
_RENDERED_JS = '<script>document.body.dataset.rendered="ok";</script>'


def e(value) -> str:
    return escape(str(value), quote=True)


def _badge(status: str, text: str | None = None, extra: str = "") -> str:
    return f'<span class="badge {e(status)}{extra}">{e(text or STATUS_LABELS.get(status, status))}</span>'


def _href(url: str | None) -> str | None:
    """Only web links become links: a table may hold anything (``javascript:``...)."""
    return url if url and url.startswith(("https://", "http://")) else None


def _upstream(entry: Entry) -> str:
    url = entry.known_link
    if not url:
        return ""
    href = _href(url)
    return f'<a href="{e(href)}">{e(url)}</a>' if href else e(url)


def _header(report: Report) -> str:
    counts = report.counts
    badges = "".join(_badge(s, f"{counts[s]} {STATUS_LABELS[s]}", "" if counts[s] else " zero") for s in STATUSES)
    runs = report.runs
    rows = [("corpora", ", ".join(str(r) for r in report.roots) or "(files given)"),
            ("runs", runs.runs)]
    if runs.runs:
        rows += [("cases", f"{runs.cases} ({100 * runs.valid_share:.0f}% valid, {runs.unsupported} unsupported)"),
                 ("speed", f"{runs.cases_per_s:.1f} cases/s"),
                 ("fuzzing time", f"{runs.elapsed_s:.0f}s (minimising {runs.minimise_s:.0f}s)"),
                 ("targets", ", ".join(runs.targets)), ("torch", ", ".join(runs.torch_versions)),
                 ("worker restarts", runs.restarts), ("internal errors", runs.internal_errors),
                 ("period", f"{runs.first_started} to {runs.last_finished}")]
    stats = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in rows)
    skipped = "".join(f'<p class="muted">skipped run log {e(p)}: {e(w)}</p>' for p, w in runs.unreadable)
    return (f"<header><h1>mpsfuzz report</h1><p class=\"counts\">{badges}</p><p>{e(summary_line(report))}</p>"
            f'<table class="stats">{stats}</table>{skipped}'
            f'<p class="muted">generated {e(report.generated)}</p></header>')


def _legend() -> str:
    return ('<p class="legend">' + "".join(f'<span><i class="{s}"></i>{e(STATUS_LABELS[s])}</span>'
                                           for s in STATUSES) + "</p>")


def _findings_table(report: Report) -> str:
    rows = []
    for family, entries in report.families.items():
        rows.append(f'<tr class="family"><td class="fam" colspan="6">{e(family_heading(family, entries))}</td></tr>')
        for x in entries:
            rows.append(f"<tr><td>{_badge(x.status)}</td><td><code>{e(x.finding.op)}</code></td>"
                        f"<td>{e(x.finding.oracle)}</td><td>{x.finding.times_seen}</td>"
                        f'<td><a href="#{e(x.anchor)}">{e(x.why)}</a></td><td>{e(x.path.name)}</td></tr>')
    head = "".join(f"<th>{c}</th>" for c in ("status", "op", "oracle", "seen", "explanation", "file"))
    return f'<table class="findings" id="findings-table"><tr>{head}</tr>{"".join(rows)}</table>'


def _bugs_table(report: Report) -> str:
    rows = []
    for b in report.bugs:
        links = []
        for path, f in b.findings:
            entry = report.entry_of(f)
            label = f"{f.op} {f.case.variant} ({f.oracle})"
            links.append(f'<a href="#{e(entry.anchor)}">{e(label)}</a>' if entry is not None else e(label))
        kernel = f"<code>{e(b.kernel)}</code>" if b.kernel else f'<span class="muted">{e(bug_kernel_words(b))}</span>'
        affects = "<br>".join(e(a) for a in b.affects())
        repro = b.kernel_repro
        script = (f'<details><summary>kernel-level repro</summary><pre class="kernel-repro">'
                  f'{e(repro["script"])}</pre></details>') if repro and repro.get("script") else ""
        rows.append(f'<tr id="{e(bug_anchor(b))}"><td>{_badge(b.status)}</td><td>{kernel}{script}</td>'
                    f"<td>{affects}</td><td>{e(', '.join(b.oracles))}</td><td>{e(b.explanation)}</td>"
                    f"<td>{'<br>'.join(links)}</td></tr>")
    head = "".join(f"<th>{c}</th>" for c in ("status", "kernel", "affects (op: variants)", "oracles",
                                               "explanation", "findings"))
    return f'<table class="bugs" id="bugs-table"><tr>{head}</tr>{"".join(rows)}</table>'


def _matrix_table(matrix: Matrix, table_id: str) -> str:
    head = "<th>op</th>" + "".join(f"<th>{e(c)}</th>" for c in matrix.columns)
    rows = []
    for op in matrix.ops:
        cells = [f'<th class="op"><code>{e(op)}</code> <span class="muted">{e(matrix.families[op])}</span></th>']
        for column in matrix.columns:
            entries = matrix.at(op, column)
            if not entries:
                cells.append('<td class="empty"></td>')
                continue
            oracles = [x.finding.oracle for x in entries]
            # Two findings of one oracle in a cell (different causes) are told apart by
            # the start of their signatures.
            links = "".join(f'<a href="#{e(x.anchor)}" title="{e(x.label)}: {e(x.why)}">{e(x.finding.oracle)}'
                            f'{" " + e(x.finding.signature[:4]) if oracles.count(x.finding.oracle) > 1 else ""}</a>'
                            for x in entries)
            cells.append(f'<td class="{e(matrix.worst(op, column))}">{links}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="matrix" id="{table_id}"><tr>{head}</tr>{"".join(rows)}</table>'


def _repro(entry: Entry) -> str:
    repro = entry.repro
    if repro is None:
        return ""
    if not repro.get("script"):
        return (f'<h4>repro</h4><p><span class="badge repro unknown">no script</span> '
                f"{e(repro.get('detail', ''))}</p>")
    verified = repro.get("verified")
    if verified is True:
        badge = '<span class="badge repro yes">verified repro</span>'
    elif verified is False:
        badge = f'<span class="badge repro no">NOT verified: {e(repro.get("detail", ""))}</span>'
    else:
        badge = '<span class="badge repro unknown">not yet verified</span>'
    return f"<h4>repro {badge}</h4><pre class=\"repro-script\">{e(repro['script'])}</pre>"


def _conditions(entry: Entry) -> str:
    conditions = entry.finding.conditions
    if conditions is None:
        return '<span class="muted">not explained (flaky, or recorded before ablation)</span>'
    return "".join(f'<span class="cond">{e(c)}</span>' for c in conditions) or "none"


def _localisation(x: Entry, report: Report) -> str:
    loc = x.finding.localisation if isinstance(x.finding.localisation, dict) else None
    bug = report.bug_of(x)
    link = f' <a href="#{e(bug_anchor(bug))}">bug {e(bug.id)}</a>' if bug is not None else ""
    if loc is None:
        return '<span class="muted">not localised</span>' + link
    if loc.get("status") == "kernel":
        how = "confirmed" if loc.get("confirmed") else "not confirmed"
        return (f"<code>{e(loc.get('kernel'))}</code>: {e(', '.join(loc.get('kinds') or []))} ({how})" + link)
    words = loc.get("reason") or loc.get("error") or ""
    return f"{e(loc.get('status'))}: {e(words)}" + link


def _finding_section(x: Entry, report: Report) -> str:
    f = x.finding
    known = f.known if isinstance(f.known, dict) else {}
    rows = [("explanation", e(x.why)), ("conditions", _conditions(x)), ("kernel", _localisation(x, report)),
            ("op", f"<code>{e(f.op)}</code> ({e(x.family)}), {e(f.case.variant)}"),
            ("oracle", f"{e(f.oracle)} / {e(f.failure.kind)} (severity {e(f.failure.severity)})"),
            ("dtypes", e(", ".join(x.dtypes))), ("layouts", e(", ".join(x.layouts))),
            ("case", f"<code>{e(f.case.describe())}</code>"),
            ("seen", f"{f.times_seen} time(s), {e(f.first_seen)} to {e(f.last_seen)}"),
            ("torch", e(", ".join(f.torch_versions))),
            ("found on", e(f"{f.target_name} ({f.target_spec}, device {f.device})"))]
    if known:
        rows.append(("upstream", f"{_upstream(x)} {e(known.get('reason', ''))}"))
    if f.history:
        last = f.history[-1]
        replays = (f"latest: {e(last.get('result', ''))} on torch {e(last.get('torch_version', ''))} "
                   f"({e(last.get('date', ''))})")
        if f.fixed_since:
            replays += f"; fixed since torch {e(f.fixed_since)}"
        if f.regression:
            replays += "; <strong>regression</strong>: replayed as fixed once, failing again since"
        rows.append(("replays", replays))
    rows.append(("file", f"<code>{e(x.path)}</code>"))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return (f'<section class="finding {e(x.status)}" id="{e(x.anchor)}">'
            f"<h3>{_badge(x.status)} {e(f.title)}</h3><dl>{dl}</dl>{error_figure(x.error_profile)}"
            f"<h4>message</h4><pre>{e(f.failure.message)}</pre>{_repro(x)}</section>")


def _layout_note(note: dict) -> str:
    """A target's layout-propagation note: right values in another memory format (not bugs)."""
    rows = "".join(
        f"<tr><td><code>{escape(str(e.get('op', '')))}</code></td><td>{escape(', '.join(e.get('layouts', [])))}</td>"
        f"<td>{escape(', '.join(e.get('dtypes', [])))}</td><td>{escape(str(e.get('target_format', '')))}</td>"
        f"<td>{escape(str(e.get('cpu_format', '')))}</td><td>{int(e.get('times_seen', 0))}</td></tr>"
        for e in note["entries"])
    return (f"<h2>Layout propagation on {escape(str(note.get('target', '')))} (not bugs)</h2>"
            '<p class="muted">Right values in another memory format than eager CPU&#x27;s: one question about a '
            "propagation rule, not a bug per op.</p>"
            "<table><thead><tr><th>op</th><th>input layouts</th><th>dtypes</th><th>target</th><th>eager CPU</th>"
            f"<th>seen</th></tr></thead><tbody>{rows}</tbody></table>")


def html_page(report: Report) -> str:
    body = [_header(report)]
    if report.entries:
        body += [f"<h2>Bugs ({len(report.bugs)})</h2>",
                 '<p class="muted">Findings localised to one aten kernel with matching conditions are one bug.</p>',
                 _bugs_table(report),
                 "<h2>Findings</h2>", _findings_table(report),
                 "<h2>Failure matrix</h2>", _legend(),
                 "<h3>ops &times; dtypes</h3>", _matrix_table(report.dtype_matrix, "matrix-dtypes"),
                 "<h3>ops &times; layout classes</h3>", _matrix_table(report.layout_matrix, "matrix-layouts"),
                 "<h2>Details</h2>", *(_finding_section(x, report) for x in report.entries)]
    else:
        body.append("<h2>No findings</h2>")
    body += [_layout_note(note) for note in report.notes]
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>mpsfuzz report</title><style>{_CSS}</style></head><body>{_ERRORS_JS}<main>"
            + "".join(body) + f"</main>{_RENDERED_JS}</body></html>\n")
