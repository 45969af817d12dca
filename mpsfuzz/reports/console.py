"""Terminal output for `mpsfuzz run`: live progress and the closing summary (rich)."""
from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..events import (CampaignFinished, CampaignStarted, CaseFinished, FindingRecorded, HarnessError,
                      Notice, Stats, untried_ops)
from .corpus_views import ByWidth, narrow_rows, reproducibility_words, short_why

NON_TTY_EVERY_S = 30.0
# Ops never tried named in the summary (the run record lists every one).
UNTRIED_SHOWN = 12
# Harness errors are noted on the console the first time each (stage, op, error type)
# shows, up to this many notes; all of them go to the errors log.
HARNESS_NOTES = 12


def repro_words(repro: dict) -> str:
    """A finding's repro script in a few words: verified, not verified (why), or none."""
    if not repro.get("script"):
        return str(repro.get("detail", "none"))
    lines = f"{repro.get('lines', '?')} lines"
    if repro.get("verified") is True:
        return f"verified script ({lines}); `mpsfuzz repro FILE` prints it"
    if repro.get("verified") is False:
        return f"script does NOT reproduce ({repro.get('detail', '')}); not a repro"
    if str(repro.get("detail", "")).startswith("not verified here"):
        return f"script ({lines}) {repro['detail']}"
    return f"script not verified yet ({lines})"


class ConsoleReporter:
    """Consumes engine events. On a terminal a live status line; elsewhere (CI logs) a
    plain progress line every few seconds."""

    def __init__(self, console: Console | None = None, *, live: bool | None = None,
                 errors_log: Path | None = None):
        self.console = console or Console()
        self.errors_log = errors_log          # where this run's harness errors are logged
        self._harness = 0
        self._harness_seen: set = set()
        self.live_enabled = self.console.is_terminal if live is None else live
        self._live: Live | None = None
        self._start = time.monotonic()
        self._last_print = 0.0
        self._cases = self._valid = self._unsupported = self._findings = 0
        self._op = ""
        self._ops: tuple[str, ...] = ()       # the campaign's selection (CampaignStarted)
        self._shrinking = False

    def __call__(self, event) -> None:
        if isinstance(event, CampaignStarted):
            self._start = time.monotonic()
            self._ops = tuple(event.ops)
            bounds = []
            if event.budget_s is not None:
                bounds.append(f"budget {event.budget_s:g}s")
            if event.max_cases is not None:
                bounds.append(f"max {event.max_cases} cases")
            self.console.print(f"  {len(event.ops)} op(s), oracles {', '.join(event.oracles)}, "
                               f"seed {event.seed}{', ' + ', '.join(bounds) if bounds else ''}",
                               highlight=False)
            if self.live_enabled:
                self._live = Live(self._status(), console=self.console, refresh_per_second=4, transient=True)
                self._live.start()
        elif isinstance(event, CaseFinished):
            self._cases += 1
            self._valid += event.valid
            self._unsupported += event.unsupported
            self._op, self._shrinking = event.op, event.shrinking
            self._refresh()
        elif isinstance(event, FindingRecorded):
            f = event.finding
            self._findings += event.new and f.status == "new"
            label = (f.status if f.status != "new" else "new") if event.new else "seen before"
            head = Text.assemble(("  finding ", "bold red" if event.new else "yellow"),
                                 (f"[{label}] ", ""), (f.title, ""), (f"  -> {event.path}", "dim"))
            why = f.explanation_text or _flaky_words(f)
            repro = f"repro: {repro_words(f.repro)}" if event.new and isinstance(f.repro, dict) else ""
            if self.live_enabled:
                self._print(head)
                for line in (why, repro):
                    if line:
                        self._print(Text(f"      {line}", style="dim"))
            else:  # a log: one line per event, never wrapped
                self._print(Text(" | ").join([head] + [Text(x) for x in (why, repro) if x]), soft_wrap=True)
        elif isinstance(event, Notice):
            self._print(Text(f"  note: {event.message}", style="dim"), soft_wrap=not self.live_enabled)
        elif isinstance(event, HarnessError):
            self._harness += 1
            key = (event.stage, event.op, event.error.split(":", 1)[0])
            if key not in self._harness_seen and len(self._harness_seen) < HARNESS_NOTES:
                self._harness_seen.add(key)
                last = len(self._harness_seen) == HARNESS_NOTES
                self._print(Text(f"  harness error ({event.stage}) on {event.op or 'the run'}: {event.error}"
                                 + (" (further ones: errors log only)" if last else ""), style="yellow"))
            self._refresh()
        elif isinstance(event, CampaignFinished):
            self.close()
            self.summary(event)

    def close(self) -> None:
        """Stop the live status line (the run ended, or was stopped by an error)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _print(self, renderable, *, soft_wrap: bool = False) -> None:
        (self._live.console if self._live else self.console).print(renderable, highlight=False,
                                                                   soft_wrap=soft_wrap)

    def _status(self) -> Text:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        valid = 100.0 * self._valid / self._cases if self._cases else 0.0
        harness = (f"harness errors {self._harness} ({self.errors_log or 'errors log'}) | "
                   if self._harness else "")
        return Text(f"cases {self._cases} | {self._cases / elapsed:.1f}/s | valid {valid:.0f}% | "
                    f"unsupported {self._unsupported} | findings {self._findings} | {harness}"
                    f"{self._op}{' (shrinking)' if self._shrinking else ''}")

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._status())
        elif time.monotonic() - self._last_print >= NON_TTY_EVERY_S:
            self._last_print = time.monotonic()
            self.console.print(self._status(), highlight=False, soft_wrap=True)

    def summary(self, event: CampaignFinished) -> None:
        s: Stats = event.stats
        # New findings always; every other kind of finding where there is one.
        others = ", ".join(f"{words} {n}" for words, n in (
            ("known upstream", s.known_bugs), ("flaky", s.flaky), ("CPU-reference bugs", s.cpu_bugs),
            ("bugs of both backends", s.both), ("undecided (no independent reference)", s.undecided),
            ("capabilities (device accepts what CPU rejects)", s.capabilities),
            ("unconfirmed (repro did not reproduce)", s.unconfirmed),
            ("unverified (repro not run to the end)", s.unverified),
            ("suppressed as undefined/unimplemented", s.suppressed),
            ("sightings of known findings", s.sightings)) if n)
        self.console.print(
            f"done ({event.stopped_because}): {s.cases} cases in {s.elapsed_s:.1f}s "
            f"({s.cases_per_s:.1f}/s), valid {100 * s.valid_ratio:.0f}%, unsupported {s.unsupported}, "
            f"worker restarts {s.restarts}, harness errors {s.harness_errors}, new findings {s.new_findings}, "
            + (others + ", " if others else "") + f"minimising {s.minimise_s:.1f}s", highlight=False)
        reported = [(p, f) for f, p, is_new in event.findings if is_new]
        if reported:
            # Grouped with every finding the run reported, as `corpus list --by bug` groups
            # the corpus: two new findings joined through a third of another status are
            # one bug here too (issue 30, H200: the summary said 17 new bugs where the list showed 16).
            from ..corpus.bugs import group
            bugs = group(reported)
            for status in ("new", "unverified"):
                mine = [b for b in bugs if b.status == status]
                chosen = sum(1 for b in mine for _, f in b.findings if f.status == status)
                if mine:
                    self.console.print(f"{len(mine)} {status} bug(s) ({chosen} finding(s)): findings localised to "
                                       "one kernel with matching conditions are one bug (mpsfuzz corpus list --by bug)",
                                       highlight=False)
        if s.layout_notes:
            self.console.print(f"layout propagation: {s.layout_notes} case(s) gave the right values in another "
                               "memory format than eager CPU (not bugs): listed in the corpus's notes/",
                               highlight=False)
        untried = untried_ops(self._ops, s)
        if untried:
            shown = ", ".join(untried[:UNTRIED_SHOWN]) + (", ..." if len(untried) > UNTRIED_SHOWN else "")
            self.console.print(Text(f"{len(untried)} of {len(self._ops)} op(s) never tried (the budget ran out "
                                    f"first; the run record lists them): {shown}", style="yellow"), highlight=False)
        if s.left_pending:
            self.console.print(Text(f"{s.left_pending} failure(s) not triaged in time: kept in the corpus's "
                                    "triage-pending/, the next run or daemon start on it triages them first",
                                    style="yellow"), highlight=False)
        if s.reverified:
            r = s.reverified
            self.console.print(f"repro scripts of earlier unverified findings run again: {r.get('verified', 0)} "
                               f"verified, {r.get('unconfirmed', 0)} did not reproduce, {r.get('unverified', 0)} "
                               f"still unverified, {r.get('left', 0)} left for the next run", highlight=False)
        if s.harness_errors:
            stages = ", ".join(f"{stage} {n}" for stage, n in sorted(s.harness_by_stage.items()))
            where = f"each with its case and traceback in {self.errors_log}" if self.errors_log else "see the notes above"
            self.console.print(Text(f"harness errors (mpsfuzz failed, not the target): {s.harness_errors} ({stages}); "
                                    f"{s.cases_lost} of {s.attempted} cases could not be generated, run or judged; "
                                    f"{where}", style="yellow"), highlight=False)
        for op, why in s.set_aside.items():
            self.console.print(Text(f"set aside: {op} ({why})", style="yellow"), highlight=False)
        if s.slow_compiles:
            self.console.print(f"{s.slow_compiles} case(s) skipped: compiling took longer than the compile timeout "
                               "(slow compilation, not hangs; --compile-timeout sets it)", highlight=False)
        if s.reference_hangs:
            self.console.print(f"{s.reference_hangs} case(s) skipped: the eager CPU reference did not return "
                               "(a hang of the reference, not of the target)", highlight=False)
        if s.unsupported_here:
            self.console.print(f"{s.unsupported_here} case(s) unsupported here: this torch's eager CPU lacks "
                               "kernels needed to judge them (not bugs); for example:", highlight=False)
            for (op, msg), n in sorted(s.unsupported_here_messages.items(), key=lambda kv: -kv[1])[:5]:
                self.console.print(f"  {op} ({n}x): {msg}", highlight=False, markup=False)
        if s.unsupported_messages:
            table = Table(title="unsupported on the target (not bugs)", show_lines=False)
            table.add_column("op")
            table.add_column("count", justify="right")
            table.add_column("message")
            for (op, msg), n in sorted(s.unsupported_messages.items(), key=lambda kv: -kv[1])[:10]:
                table.add_row(op, str(n), msg)
            self.console.print(table)
        def having(*statuses):
            return [(f, p, new) for f, p, new in event.findings if f.status in statuses]
        for rows, title in (
                (having("new", "known-bug", "flaky", "fixed"), "findings"),
                (having("both"), "bugs of the target and eager CPU alike: PyTorch's own (not the target's)"),
                (having("cpu-bug"), "CPU reference is wrong (the jury's independent references side with the "
                                    "target; not target bugs)"),
                (having("undecided"), "undecided: no independent reference says who is wrong (not counted as new)"),
                (having("unconfirmed"), "unconfirmed: the repro script did not reproduce them in a fresh "
                                        "interpreter (not counted as new)"),
                (having("unverified"), "unverified: the repro script has not been run to the end (retried by the "
                                       "next run on this corpus; not counted as new)"),
                (having("capability"), "capabilities: the target accepts what CPU rejects, and its result checks "
                                       "out (not bugs)")):
            if rows:
                self.console.print(findings_table(rows) if title == "findings" else findings_table(rows, title=title))
        if not event.findings:
            self.console.print("no findings")


def _flaky_words(finding) -> str:
    words = reproducibility_words(finding) if finding.flaky else ""
    return f"flaky: {words}" if words else ""


def findings_table(rows, title: str = "findings") -> ByWidth:
    """The run's findings: a table on a wide terminal, one line per finding (and its
    explanation and file indented below) on a narrow one."""
    table = Table(title=Text(title))
    for column in ("op", "variant", "oracle", "status", "dtype", "layout", "why", "corpus file"):
        table.add_column(column, overflow="fold")
    narrow = []
    for finding, path, new in rows:
        trig = finding.to_json()["trigger"]
        first = (finding.failure.message.strip().splitlines() or [""])
        line = next((ln for ln in first if ln.startswith(("Mismatched", "worker", "The values"))), first[0])
        status = finding.status + ("" if new else ", seen before")
        if finding.known:
            status += f" {finding.known.get('link', '')}"
        why = finding.explanation_text or _flaky_words(finding) or line[:100]
        table.add_row(*(Text(str(x)) for x in (finding.op, finding.case.variant, finding.oracle, status,
                                                ",".join(trig["dtypes"]), ",".join(trig["layouts"]), why,
                                                Path(path).name)))
        narrow.append((Text(status), (finding.op, finding.case.variant, finding.oracle), short_why(why),
                       (why, f"{','.join(trig['dtypes'])}; {','.join(trig['layouts'])}: {Path(path).name}")))
    return ByWidth(table, narrow_rows(Text(title, style="italic"), narrow))


def replay_table(results) -> Table:
    import torch
    table = Table(title=f"replay (torch {torch.__version__})")
    for column in ("status", "op", "oracle", "found with", "fixed since", "finding", "detail"):
        table.add_column(column, overflow="fold")
    styles = {"still-fails": "red", "fixed": "green", "changed": "yellow", "flaky": "magenta"}
    for r in sorted(results, key=lambda r: (r.result, r.finding.op)):
        f = r.finding
        table.add_row(Text(r.status, style=("bold red" if r.regression else styles.get(r.result, "dim"))),
                      f.op, f.oracle, f"torch {f.torch_version}", f.fixed_since or "", str(r.path), r.detail[:120])
    counts = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    table.caption = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return table
