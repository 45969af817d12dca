"""`mpsfuzz report DIR`: the triage views of a corpus. The terminal view lives here; the
other formats each have a module (markdown.py, html.py, json_report.py), all laying out
the one model (model.py).

Finding text (titles, messages, explanations, paths) comes from arbitrary error
messages: it goes into rich as :class:`rich.text.Text`, never as markup.
"""
from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .corpus_views import STATUS_STYLES, ByWidth, narrow_rows, short_why
from .html import html_page
from .json_report import json_text
from .markdown import markdown
from .model import Report, bug_kernel_words, build, family_heading, runs_line, summary_line

FORMATS = ("terminal", "markdown", "html", "json")


def _status_cell(entry) -> Text:
    text = Text(entry.label, style=STATUS_STYLES.get(entry.status, ""))
    if entry.finding.regression:
        text.append(" (regression)", style="bold red")
    if entry.known_link:
        text.append("\n" + entry.known_link, style="dim")
    return text


def family_table(family: str, entries) -> ByWidth:
    title = Text(family_heading(family, entries))
    table = Table(title=title, title_justify="left")
    for column in ("op", "oracle", "status", "seen", "explanation", "path"):
        table.add_column(column, overflow="fold", justify="right" if column == "seen" else "left",
                         no_wrap=column == "status")
    for e in entries:
        table.add_row(Text(e.finding.op), Text(e.finding.oracle), _status_cell(e), Text(str(e.finding.times_seen)),
                      Text(e.why), Text(str(e.path)))
    narrow = [(Text(e.label, style=STATUS_STYLES.get(e.status, "")), (e.finding.op, e.finding.case.variant,
                                                                      e.finding.oracle),
               short_why(e.why), (e.why, e.known_link or "", f"seen {e.finding.times_seen}: {e.path}"))
              for e in entries]
    return ByWidth(table, narrow_rows(title, narrow))


def bugs_table(report: Report) -> ByWidth:
    """One row per bug: status, the kernel, the public ops and variants it affects,
    oracles, its findings' files."""
    table = Table(title=Text(f"bugs: {len(report.bugs)} (findings localised to one kernel with matching "
                             "conditions are one bug)"), title_justify="left")
    for column in ("status", "kernel", "affects", "oracles", "explanation", "findings"):
        table.add_column(column, overflow="fold", no_wrap=column == "status")
    narrow = []
    for b in report.bugs:
        status = Text(b.status, style=STATUS_STYLES.get(b.status, ""))
        table.add_row(status, Text(bug_kernel_words(b)), Text("\n".join(b.affects())), Text(", ".join(b.oracles)),
                      Text(b.explanation), Text("\n".join(str(p) for p, _ in b.findings)))
        narrow.append((status, (", ".join(b.ops), ", ".join(b.oracles)), short_why(b.explanation),
                       (b.explanation, bug_kernel_words(b), "affects " + "; ".join(b.affects()),
                        *(str(p) for p, _ in b.findings))))
    return ByWidth(table, narrow_rows(table.title, narrow))


def terminal_view(report: Report) -> Group:
    parts: list = [Text(summary_line(report), style="bold"), Text(runs_line(report.runs))]
    for path, why in report.runs.unreadable:
        parts.append(Text(f"skipping run log {path}: {why}", style="yellow"))
    if report.bugs:
        parts.append(bugs_table(report))
    for family, entries in report.families.items():
        parts.append(family_table(family, entries))
    for note in report.notes:
        parts.append(layout_note_table(note))
    return Group(*parts)


def layout_note_table(note: dict) -> Table:
    """A target's layout-propagation note: right values in another memory format."""
    table = Table(title=Text(f"layout propagation on {note.get('target', '')}: right values in another memory "
                             "format than eager CPU's (not bugs)"), title_justify="left")
    for column in ("op", "input layouts", "dtypes", "target", "eager CPU", "seen"):
        table.add_column(column, overflow="fold", justify="right" if column == "seen" else "left")
    for e in note["entries"]:
        table.add_row(Text(str(e.get("op", ""))), Text(", ".join(e.get("layouts", []))),
                      Text(", ".join(e.get("dtypes", []))), Text(str(e.get("target_format", ""))),
                      Text(str(e.get("cpu_format", ""))), Text(str(e.get("times_seen", 0))))
    return table


def print_terminal(console: Console, found, roots) -> None:
    console.print(terminal_view(build(found, roots)), highlight=False)


def _terminal_text(report: Report) -> str:
    out = io.StringIO()
    Console(file=out, width=160, color_system=None, highlight=False).print(terminal_view(report))
    return out.getvalue()


def render(fmt: str, found, roots) -> str:
    """The report as text in one of FORMATS."""
    layouts = {"terminal": _terminal_text, "markdown": markdown, "html": html_page, "json": json_text}
    if fmt not in layouts:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return layouts[fmt](build(found, roots))
