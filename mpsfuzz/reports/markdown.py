"""`mpsfuzz report --format markdown`: GitHub-flavoured markdown for a CI job summary
(headline counts, one table row per bug and per finding, the run statistics)."""
from __future__ import annotations

from .model import STATUS_LABELS, Report, bug_kernel_words, runs_line

_ICONS = {"new": "🔴", "known-bug": "🟡", "both": "🟠", "unverified": "⚪", "unconfirmed": "⚪", "undecided": "⚪",
          "flaky": "🟣", "cpu-bug": "🔵", "capability": "🟤", "layout-propagation": "⚪", "fixed": "🟢"}


def cell(text) -> str:
    """Table-cell safe: one line, no column breaks, no raw HTML (GitHub renders HTML in
    markdown, and finding text comes from arbitrary error messages)."""
    text = " ".join(str(text).split())
    for raw, safe in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        text = text.replace(raw, safe)
    return text


def _link(url: str | None) -> str:
    if not url:
        return ""
    if url.startswith(("https://", "http://")) and not any(c in url for c in " ()<>|"):
        return f"[upstream]({url})"
    return cell(url)


def markdown(report: Report) -> str:
    counts = report.counts
    lines = ["## mpsfuzz report", "",
             f"**{len(report.entries)} finding(s)**: " + ", ".join(
                 f"{_ICONS[s]} {counts[s]} {STATUS_LABELS[s]}" for s in counts), ""]
    if report.bugs:
        lines += [f"### Bugs ({len(report.bugs)})", "",
                  "| status | kernel | affects (op: variants) | oracles | findings | explanation |",
                  "| --- | --- | --- | --- | ---: | --- |"]
        for b in report.bugs:
            status = f"{_ICONS.get(b.status, '')} {STATUS_LABELS.get(b.status, b.status)}"
            affects = "; ".join(cell(a) for a in b.affects())
            kernel = f"`{cell(b.kernel)}`" if b.kernel else cell(bug_kernel_words(b))
            lines.append(f"| {cell(status)} | {kernel} | {affects} | {cell(', '.join(b.oracles))} "
                         f"| {len(b.findings)} | {cell(b.explanation)} |")
        lines += ["", "### Findings", ""]
    if report.entries:
        lines += ["| status | op | oracle | explanation | upstream | file |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for e in report.entries:
            status = f"{_ICONS.get(e.status, '')} {e.label}" + (" (regression)" if e.finding.regression else "")
            lines.append(f"| {cell(status)} | `{cell(e.finding.op)}` | {cell(e.finding.oracle)} | {cell(e.why)} "
                         f"| {_link(e.known_link)} | {cell(e.path.name)} |")
        lines.append("")
    else:
        lines += ["No findings.", ""]
    for note in report.notes:
        lines += [f"### Layout propagation on {cell(note.get('target', ''))} (not bugs)", "",
                  "Right values in another memory format than eager CPU's: one question about a propagation "
                  "rule, not a bug per op.", "",
                  "| op | input layouts | dtypes | target | eager CPU | seen |", "| --- | --- | --- | --- | --- | ---: |"]
        for e in note["entries"]:
            lines.append(f"| `{cell(e.get('op', ''))}` | {cell(', '.join(e.get('layouts', [])))} "
                         f"| {cell(', '.join(e.get('dtypes', [])))} | {cell(e.get('target_format', ''))} "
                         f"| {cell(e.get('cpu_format', ''))} | {int(e.get('times_seen', 0))} |")
        lines.append("")
    runs = report.runs
    lines += ["### Runs", ""]
    if runs.runs:
        lines += ["| runs | cases | valid | cases/s | fuzzing time | targets | torch |",
                  "| ---: | ---: | ---: | ---: | ---: | --- | --- |",
                  f"| {runs.runs} | {runs.cases} | {100 * runs.valid_share:.0f}% | {runs.cases_per_s:.1f} "
                  f"| {runs.elapsed_s:.0f}s | {cell(', '.join(runs.targets))} "
                  f"| {cell(', '.join(runs.torch_versions))} |"]
    else:
        lines.append(cell(runs_line(runs)))
    for path, why in runs.unreadable:
        lines += ["", f"skipped run log {cell(path)}: {cell(why)}"]
    return "\n".join(lines) + "\n"
