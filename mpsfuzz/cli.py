"""The `mpsfuzz` command line. Exit codes are decided in one place, :func:`exit_code`:
0 clean, 1 findings (new ones for `run`, or failures left untriaged in triage-pending/
when time ran out; still failing for `replay`), 2 usage or
internal error, a corpus that cannot be written, or a run most of whose cases could not
be executed. Bad input is a one-line error, never a traceback."""
from __future__ import annotations

import argparse
import faulthandler
import json
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path

from . import __version__
from .atomic import CorpusWriteError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130   # 128 + SIGINT, as shells report a Ctrl-C
EXIT_TERMINATED = 143    # 128 + SIGTERM, as shells report a `kill` or CI's `timeout`
DEFAULT_BUDGET = "10m"


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit 2."""


# A run whose harness errors lost more than half of its cases (and at least this many)
# tested little: it fails (exit 2) whatever it found.
MIN_LOST_CASES = 5


def mostly_lost(cases_lost: int, attempted: int) -> bool:
    """Whether most cases of a run could not be generated, executed or judged."""
    return cases_lost >= MIN_LOST_CASES and 2 * cases_lost > attempted


def exit_code(*, findings: int = 0, error: bool = False, cases_lost: int = 0, attempted: int = 0,
              interrupted: bool = False, terminated: bool = False) -> int:
    if error or mostly_lost(cases_lost, attempted):
        return EXIT_ERROR
    if interrupted:
        return EXIT_INTERRUPTED
    if terminated:
        return EXIT_TERMINATED
    return EXIT_FINDINGS if findings else EXIT_CLEAN


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise UsageError(message)


def parse_duration(text: str) -> float:
    """'90s', '10m', '2h', '1h30m' or a number of seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    if not text or not parts or not any(parts.groups()):
        raise UsageError(f"--budget={text!r}: expected a duration such as 90s, 10m, 2h or 1h30m")
    h, m, s = (float(g) if g else 0.0 for g in parts.groups())
    return h * 3600 + m * 60 + s


def _positive_int(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"{name}={text!r}: expected an integer") from None
        if value < 0:
            raise UsageError(f"{name}={text!r}: must be >= 0")
        return value
    return parse


def _seconds(name, *, zero_ok: bool = False):
    """A number of seconds: finite and > 0 (or >= 0 where ``zero_ok``)."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{name}={text}: expected a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            raise UsageError(f"{name}={text}: must be {'>= 0' if zero_ok else '> 0'} seconds")
        return value
    return parse


REPORT_FORMATS = ("terminal", "markdown", "html", "json", "issue")


# The groups of `run --help` and `daemon --help`, in the order they are shown.
CAMPAIGN_GROUPS = {
    "selection": "what to fuzz and where",
    "budget": "how long, how many cases, how many lanes",
    "oracles": "how cases are judged",
    "output": "where findings and reports go, what is shown",
    "advanced": "generation, drawing and sizing (the defaults suit most runs)",
}


def _campaign_arguments(p, *, budget_help: str) -> dict:
    """The options of `run` and `daemon`: what to fuzz, where, and how, in the groups of
    CAMPAIGN_GROUPS (returned by title, for the daemon's own options)."""
    groups = {title: p.add_argument_group(title, description) for title, description in CAMPAIGN_GROUPS.items()}
    selection, budget, oracles, output, advanced = groups.values()

    selection.add_argument("--ops", type=_selection("--ops"), default=None,
                           help="family, op name, comma list of these, or 'all' (default; with --kernels: the files' "
                                "kernels); 'mpsfuzz ops' lists them")
    selection.add_argument("--target", default=None, help="built-in target (mps, mps-compiled, cuda, cuda-compiled, "
                           "cpu-compiled, cpu) or package.module:attr; default: the best available")
    selection.add_argument("--kernels", action="append", default=[], metavar="FILE",
                           help="a Python file of @mpsfuzz.kernel declarations (your own kernels and their "
                                "references); repeatable; without --ops, only its kernels are fuzzed")
    selection.add_argument("--large", action="store_true",
                           help="add the large sizes: each selected op's large class (its dims of 65,536+, as "
                                "<op>@large) and, for 'all' or a whole family, the large family (reductions and copies "
                                "past 2^31 and 2^32 elements within --max-bytes)")
    selection.add_argument("--shard", type=_shard, default=None, metavar="K/N",
                           help="run only the K-th of N parts of the selected ops (split by a stable hash of each "
                                "op's name: the same on every machine), e.g. one CI matrix job per shard")
    selection.add_argument("--no-variants", action="store_true",
                           help="call ops in their functional form only (no method, in-place, out= or grad variants)")

    budget.add_argument("--budget", metavar="DURATION", type=_budget("--budget"), default=None, help=budget_help)
    budget.add_argument("--max-cases", metavar="N", type=_int_at_least("--max-cases", 1), default=None,
                        help="stop after this many cases (without --budget: no time limit)")
    budget.add_argument("--max-findings", metavar="N", type=_int_at_least("--max-findings", 1), default=None,
                        help="stop after this many new findings")
    budget.add_argument("--jobs", "-j", metavar="N", type=_int_at_least("--jobs", 1), default=None,
                        help="fuzzing lanes in parallel, each a process with its own worker and triage "
                             "(default: one per two cores, at least 1)")
    budget.add_argument("--devices", type=_devices, default=(), metavar="I,J",
                        help="CUDA devices the lanes take in turn, e.g. 0,1,2,3 (each lane's workers see one GPU "
                             "as cuda:0); default: every lane on the one device the target names")
    budget.add_argument("--timeout", metavar="SECONDS", type=_seconds("--timeout"), default=20.0,
                        help="per-case timeout in seconds (hang oracle); compilation does not count (default 20)")
    budget.add_argument("--compile-timeout", metavar="SECONDS", type=_seconds("--compile-timeout"), default=180.0,
                        dest="compile_timeout",
                        help="seconds one torch.compile compilation may take before the case is given up as slow "
                             "compilation (compiled targets; default 180)")
    budget.add_argument("--shrink-budget", metavar="SECONDS", type=_seconds("--shrink-budget", zero_ok=True),
                        default=60.0,
                        help="seconds of Hypothesis shrinking per finding (default 60)")
    budget.add_argument("--minimise-budget", metavar="SECONDS", type=_seconds("--minimise-budget", zero_ok=True),
                        default=30.0,
                        help="seconds per finding for the deterministic reducer and the ablation after shrinking "
                             "(default 30)")
    budget.add_argument("--slice", metavar="N", type=_int_at_least("--slice", 1), default=None, dest="slice_examples",
                        help="cases per op before the next op's turn (default: with a budget, sized from the time "
                             "left, the case rate and the ops still to have their turn, so that the budget covers "
                             "every selected op, 1 to 30; without one, 30)")

    oracles.add_argument("--oracles", metavar="LIST", default=None,
                         help="comma list of oracles (default: all; 'mpsfuzz oracles' lists them)")
    oracles.add_argument("--known", action="append", default=[], metavar="FILE",
                         help="extra known-failure table (JSON, the format of mpsfuzz/data/known_failures.json); "
                              "repeatable")
    oracles.add_argument("--reruns", metavar="N", type=_int_at_least("--reruns", 1), default=4,
                         help="re-runs of each failure before it is recorded; one that fails fewer times is flaky "
                              "(default 4)")

    output.add_argument("--corpus", metavar="DIR", default="mpsfuzz-corpus",
                        help="corpus folder (default ./mpsfuzz-corpus)")
    output.add_argument("--no-progress", action="store_true", help="no live status line")
    output.add_argument("--no-verify-repros", action="store_true",
                        help="write each new finding's repro script without running it to check that it reproduces")

    advanced.add_argument("--seed", metavar="N", type=_positive_int("--seed"), default=None,
                          help="seed of the case generation (default: a random one); the same seed and options "
                               "draw the same cases")
    advanced.add_argument("--max-rank", metavar="N", type=_int_at_least("--max-rank", 0), default=8,
                          help="the most dims of a generated shape (default 8)")
    advanced.add_argument("--max-side", metavar="N", type=_int_at_least("--max-side", 1), default=8,
                          help="the longest side of a generated shape (default 8; the large sizes grow past it)")
    advanced.add_argument("--max-bytes", metavar="SIZE", type=_size("--max-bytes"), default=None, dest="max_bytes",
                          help="the most memory one input may take, and what the large family assumes a kernel may "
                               "allocate for it (default 1GB; e.g. 40GB on an 80 GB GPU draws 2^31 and 2^32 "
                               "elements)")
    advanced.add_argument("--draw-jobs", metavar="N", type=_int_at_least("--draw-jobs", 0), default=None,
                          dest="draw_jobs",
                          help="processes per lane drawing the next slices' cases while the worker runs "
                               "(default: the cores a lane has beyond its driver and worker, at most 2, or 4 on a "
                               "machine of 8 cores or more, where a lane of 2 cores gets 2; 0: none, the lane draws)")
    advanced.add_argument("--siblings", type=_int_at_least("--siblings", 0), default=None, metavar="K",
                          help="K more cases per drawn case, with its shapes, dtypes, arguments and variant but "
                               "layouts, values and aliasing drawn again (30-40x cheaper than a draw; default: as many "
                               "as keep a lane's worker busy where drawing cannot, at most 3; 0 with --max-cases and "
                               "no --budget)")
    return groups


def _budget(name):
    """A duration option, checked as it is parsed (parse_duration) and kept as written:
    the handlers parse it again (and name it as the user wrote it); an empty text is
    no budget given, as it always was."""
    def parse(text: str) -> str:
        if text and parse_duration(text) <= 0:
            raise UsageError(f"{name}={text}: must be more than 0 seconds")
        return text
    return parse


def _selection(name):
    """``--ops``'s syntax, checked as it is parsed (no torch): a comma list whose items
    the catalogue resolves in the handler (an unknown name is the handler's one-line
    error). Kept as written; an empty or blank text is left to the handler (for `run`, ''
    is the default selection)."""
    def parse(text: str) -> str:
        if text.strip() and not any(item.strip() for item in text.split(",")):
            raise UsageError(f"{name}: the selection is empty")
        return text
    return parse


def _size(name):
    """A size option: a number of bytes with an optional unit (500MB, 2GB, 1.5G)."""
    units = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30,
             "t": 2**40, "tb": 2**40}

    def parse(text: str) -> int:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
        if not match or match.group(2).lower() not in units:
            raise UsageError(f"{name}={text!r}: expected a size such as 500MB or 2GB")
        value = int(float(match.group(1)) * units[match.group(2).lower()])
        if value <= 0:
            raise UsageError(f"{name}={text!r}: must be more than 0 bytes")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mpsfuzz", description="Differential fuzzer for PyTorch's MPS backend (and other devices).")
    parser.add_argument("--version", action="version", version=f"mpsfuzz {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    run = sub.add_parser("run", help="fuzz ops on a target against eager CPU")
    _campaign_arguments(run, budget_help=f"time budget, e.g. 90s, 10m, 2h (default {DEFAULT_BUDGET} "
                        "unless --max-cases is given)")

    daemon = sub.add_parser("daemon", help="fuzz unattended until stopped: ops scheduled by yield, state, reports "
                            "and the event stream kept under the corpus, resumed after a restart")
    groups = _campaign_arguments(daemon, budget_help="stop after this long, e.g. 8h (default: run until stopped)")
    groups["selection"].add_argument("--no-large", action="store_true", dest="no_large",
                                     help="never add the large-size family (by default the daemon adds it where the "
                                          "device has 8 GiB or more free)")
    groups["output"].add_argument("--report-every", metavar="SECONDS", type=_seconds("--report-every"), default=300.0,
                                  dest="report_every",
                                  help="seconds between rewrites of DIR/report.md and DIR/report.html (default 300)")
    groups["output"].add_argument("--max-disk", metavar="SIZE", type=_size("--max-disk"),
                                  default=_size("--max-disk")("2GB"),
                                  dest="max_disk", help="disk cap for the corpus folder, e.g. 500MB, 2GB (default "
                                  "2GB): the oldest run logs are deleted to stay under it; findings never are")
    groups["advanced"].add_argument("--recycle-after", metavar="N", type=_int_at_least("--recycle-after", 1),
                                    default=5000,
                                    dest="recycle_after",
                                    help="start a fresh worker after this many cases (default 5000)")
    groups["advanced"].add_argument("--max-worker-rss", metavar="SIZE", type=_size("--max-worker-rss"),
                                    default=_size("--max-worker-rss")("8GB"), dest="max_worker_rss",
                                    help="start a fresh worker once one uses more memory (default 8GB)")
    groups["advanced"].add_argument("--no-replay", action="store_true",
                                    help="do not replay the corpus at start after a torch upgrade")

    ops = sub.add_parser("ops", help="list op families and ops; --stats: share of valid generated cases per op")
    ops.add_argument("--family", default=None,
                     help="only this family (default: every family); with --stats and no --ops, its ops")
    ops.add_argument("--stats", action="store_true",
                     help="generate cases for each op and print the share the CPU reference accepts (valid)")
    ops.add_argument("--ops", type=_selection("--ops"), default=None, dest="selection",
                     help="with --stats: the ops to measure (as for run --ops; default: the catalogue)")
    ops.add_argument("--cases", type=_positive_int("--cases"), default=100, help="with --stats: cases per op")
    ops.add_argument("--seed", type=_positive_int("--seed"), default=0, help="with --stats: the seed")

    coverage = sub.add_parser("coverage", help="per op, the parameters of its public function (and their values) "
                              "and the input classes (issue 38) that generated cases never draw; and the shares "
                              "drawn")
    coverage.add_argument("--ops", type=_selection("--ops"), default="all", dest="selection",
                          help="the ops to measure (as for run --ops; default: all)")
    coverage.add_argument("--cases", type=_int_at_least("--cases", 1), default=None,
                          help="cases per op, drawn as a campaign draws them (default: what a 10-minute "
                               "campaign of all ops draws per op)")
    coverage.add_argument("--seed", type=_positive_int("--seed"), default=0,
                          help="the seed the cases are drawn with (default 0)")
    coverage.add_argument("--large", action="store_true",
                          help="add each selected op's large size class (<op>@large, <op>@huge, as run --large "
                               "adds them) to measure the large input classes")
    coverage.add_argument("--json", default=None, dest="json_path", metavar="FILE",
                          help="also write the report (parameters and input classes, per op and in total) as JSON")
    sub.add_parser("oracles", help="list the oracles (all are enabled by default)")
    doctor = sub.add_parser("doctor", help="what this machine can test: torch, targets, devices, dtypes, corpus")
    doctor.add_argument("--corpus", default="mpsfuzz-corpus", help="corpus folder to count (default ./mpsfuzz-corpus)")

    replay = sub.add_parser("replay", help="re-run findings and say which still fail")
    replay.add_argument("paths", nargs="+", help="finding files or corpus folders")
    replay.add_argument("--target", default=None, help="run on this target instead of the one that found them")
    replay.add_argument("--timeout", type=_seconds("--timeout"), default=20.0,
                        help="per-case timeout in seconds (hang oracle; default 20)")
    replay.add_argument("--runs", type=_int_at_least("--runs", 1), default=2,
                        help="runs per finding (the first in a fresh worker); mixed results are flaky")
    replay.add_argument("--no-record", action="store_true",
                        help="do not add the result to each finding's history")
    corpus = sub.add_parser("corpus", help="list, show, merge or prune a corpus of findings")
    corpus_sub = corpus.add_subparsers(dest="corpus_command", parser_class=_Parser)
    listing = corpus_sub.add_parser("list", help="one row per finding, flaky ones apart")
    listing.add_argument("dir", nargs="?", default="mpsfuzz-corpus", help="corpus folder (default ./mpsfuzz-corpus)")
    listing.add_argument("--op", default=None, help="only this op (exact name)")
    listing.add_argument("--oracle", default=None, help="only this oracle")
    listing.add_argument("--status", default=None, help=f"only this status: {', '.join(STATUSES)}")
    listing.add_argument("--format", choices=("table", "json"), default="table",
                         help="json: a list of findings (each with its 'path') for machines; with --by bug, "
                         "a list of bugs (each with its 'kernel' and its 'findings' paths)")
    listing.add_argument("--by", choices=("finding", "bug"), default="finding",
                         help="bug: one row per bug (findings localised to one kernel with matching "
                         "conditions are one bug; docs/corpus.md)")
    show = corpus_sub.add_parser("show", help="one finding in full")
    show.add_argument("finding", help="a finding file, or a signature (prefix of 4+ hex digits) in --corpus")
    show.add_argument("--corpus", default="mpsfuzz-corpus", help="where to look a signature up (default ./mpsfuzz-corpus)")
    show.add_argument("--format", choices=("text", "json"), default="text",
                      help="text (default) or json (the finding, with its 'path')")
    merge = corpus_sub.add_parser("merge", help="merge corpora (machines, shards) into one, deduplicated")
    merge.add_argument("sources", nargs="+", metavar="SRC", help="corpus folders or finding files")
    merge.add_argument("--into", required=True, metavar="DST", help="the corpus folder to merge into (created if missing)")
    prune = corpus_sub.add_parser("prune", help="move findings fixed for N torch versions to DIR/pruned/")
    prune.add_argument("dir", help="the corpus folder to prune")
    prune.add_argument("--fixed-for", type=_int_at_least("--fixed-for", 1), required=True, dest="fixed_for",
                       metavar="N", help="prune findings whose latest replays passed on N or more torch versions")
    prune.add_argument("--dry-run", action="store_true", help="say what would move; move nothing")

    report = sub.add_parser("report", help="triage views of a corpus (terminal, markdown, html, json) or "
                            "upstream issue drafts (--format issue)")
    report.add_argument("paths", nargs="+", metavar="DIR|FILE", help="corpus folders or finding files")
    report.add_argument("--format", choices=REPORT_FORMATS, default="terminal",
                        help="terminal (default), markdown (CI job summary), html (one self-contained file), "
                        "json (docs/report.md has the schema) or issue (drafts to file upstream)")
    report.add_argument("--output", "-o", default=None, metavar="FILE", help="write here instead of stdout")
    report.add_argument("--target", default=None,
                        help="--format issue: verify repros on this target instead of the one that found them")
    report.add_argument("--no-verify", action="store_true",
                        help="--format issue: do not run repro scripts now (use the stored verification)")
    report.add_argument("--timeout", type=_seconds("--timeout"), default=60.0, help="seconds per repro verification")
    report.add_argument("--kernels", action="append", default=[], metavar="FILE",
                        help="the kernel file of findings of your own kernels (run --kernels FILE); repeatable")
    report.add_argument("--templates", default=None, metavar="DIR",
                        help="--format issue: a folder of your own issue templates (same file names as "
                        "mpsfuzz/reports/templates/), used instead of the shipped ones")

    repro = sub.add_parser("repro", help="print a finding's standalone repro script, verified on the target first")
    repro.add_argument("finding", help="a finding file")
    repro.add_argument("--target", default=None, help="verify on this target instead of the one that found it")
    repro.add_argument("--no-verify", action="store_true",
                       help="do not run the script now (say whether it was verified before)")
    repro.add_argument("--timeout", type=_seconds("--timeout"), default=60.0,
                       help="seconds the verification may run")
    repro.add_argument("--output", "-o", default=None, metavar="FILE", help="write the script here")
    repro.add_argument("--kernels", action="append", default=[], metavar="FILE",
                       help="the kernel file of a finding of your own kernel (run --kernels FILE); repeatable")

    status = sub.add_parser("status", help="what the daemon in a corpus is doing (or did before it stopped)")
    status.add_argument("dir", metavar="DIR", help="the daemon's corpus folder")
    status.add_argument("--format", choices=("table", "json"), default="table",
                        help="table (default) or json (the status model, for machines)")
    return parser


def _int_at_least(name, low):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"{name}={text!r}: expected an integer") from None
        if value < low:
            raise UsageError(f"{name}={value}: must be >= {low}")
        return value
    return parse


def _devices(text: str) -> tuple[str, ...]:
    """``--devices 0,1``: GPU indices (CUDA_VISIBLE_DEVICES entries), one per lane in turn."""
    parts = tuple(p.strip() for p in str(text).split(","))
    if not parts or not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise UsageError(f"--devices={text!r}: expected distinct GPU indices, e.g. 0,1,2,3")
    return parts


def _shard(text: str) -> tuple[int, int]:
    """``--shard K/N``: run the K-th of N deterministic parts of the selected ops
    (``catalogue.shard``; the same split on every machine)."""
    parts = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not parts:
        raise UsageError(f"--shard={text!r}: expected K/N, e.g. 1/4 (the K-th of N shards of the selected ops)")
    index, count = int(parts.group(1)), int(parts.group(2))
    if not 1 <= index <= count:
        raise UsageError(f"--shard={index}/{count}: expected K/N with 1 <= K <= N")
    return index, count


# Finding.status values, plus "regression" (replayed as fixed, failing again since).
# corpus.finding.STATUSES and "regression", written out: the parser is built before torch
# (which corpus.finding imports) is (tests/test_corpus_commands.py checks they agree).
STATUSES = ("new", "known-bug", "both", "unverified", "unconfirmed", "undecided", "flaky", "cpu-bug",
            "capability", "layout-propagation", "fixed", "regression")


def cmd_corpus(args, console) -> int:
    if args.corpus_command is None:
        raise UsageError("corpus needs a command: list, show, merge or prune")
    _check_corpus_arguments(args)
    from rich.console import Console
    from rich.text import Text

    from .corpus.store import Corpus, load_findings
    from .reports.corpus_views import finding_detail, findings_list

    as_json = getattr(args, "format", None) == "json"
    # With --format json, stdout carries the JSON alone: warnings go to stderr.
    warn = Console(stderr=True) if as_json else console

    def load(paths):
        return _load_findings_or_warn(paths, warn)

    def print_json(data) -> None:
        console.out(json.dumps(data, indent=2), highlight=False)

    if args.corpus_command == "list":
        every = load([args.dir])
        if args.by == "bug":
            return _list_bugs(args, every, console, print_json)
        found = [(p, f) for p, f in every
                 if args.op in (None, f.op) and args.oracle in (None, f.oracle)
                 and (args.status is None or f.status == args.status
                      or (args.status == "regression" and f.regression))]
        if as_json:
            print_json([{**f.to_json(), "path": str(p)} for p, f in found])
            return EXIT_CLEAN
        reliable = [(p, f) for p, f in found if not f.flaky]
        flaky = [(p, f) for p, f in found if f.flaky]
        console.print(findings_list(reliable, f"{args.dir}: {len(reliable)} finding(s)"))
        if flaky:
            console.print(findings_list(flaky, f"flaky (did not reproduce every time): {len(flaky)}"))
        return EXIT_CLEAN

    if args.corpus_command == "show":
        target = Path(args.finding)
        if target.is_file():
            found, problems = load_findings([target])
            if problems:
                raise UsageError(f"{target}: not a readable finding: {problems[0][1]}")
        else:
            prefix = args.finding.lower()
            found = [(p, f) for p, f in load([args.corpus]) if f.signature.startswith(prefix)]
            if len(found) != 1:
                raise UsageError(f"signature {args.finding!r} matches {len(found)} findings in {args.corpus}"
                                 + (": " + ", ".join(f.signature for _, f in found) + " (give more digits)"
                                    if found else ""))
        path, finding = found[0]
        if as_json:
            print_json({**finding.to_json(), "path": str(path)})
        else:
            console.print(finding_detail(path, finding))
        return EXIT_CLEAN

    if args.corpus_command == "merge":
        found = load(args.sources)
        if Path(args.into).exists() and not Path(args.into).is_dir():
            raise UsageError(f"--into={args.into!r}: not a folder")
        try:
            added, merged = Corpus(args.into).merge(found)
        except OSError as exc:
            raise UsageError(f"--into={args.into!r}: {exc.strerror or exc}") from None
        console.print(Text(f"merged {len(found)} findings from {len(args.sources)} source(s) into {args.into}: "
                           f"{added} new, {merged} merged into existing"), highlight=False)
        _merge_daemon_states(args.sources, args.into, console, warn)
        return EXIT_CLEAN

    # prune
    load([args.dir])  # only to report unreadable files; prune skips them
    moved = Corpus(args.dir).prune(lambda f: len(f.fixed_versions) < args.fixed_for, dry_run=args.dry_run)
    for path in moved:
        console.print(Text(f"{'would prune' if args.dry_run else 'pruned'} {path}"), highlight=False)
    where = " (dry run: nothing moved)" if args.dry_run else f" moved to {Path(args.dir) / 'pruned'}"
    console.print(Text(f"{len(moved)} finding(s) fixed for {args.fixed_for}+ torch version(s){where}"),
                  highlight=False)
    return EXIT_CLEAN


def _check_corpus_arguments(args) -> None:
    """`corpus`'s checks that need no finding read (and so no torch): a one-line error."""
    if args.corpus_command == "list":
        if args.status is not None and args.status not in STATUSES:
            raise UsageError(f"--status={args.status!r}: expected one of {', '.join(STATUSES)}")
        if not Path(args.dir).exists():
            raise UsageError(f"no such corpus folder: {args.dir}")
    elif args.corpus_command == "show" and not Path(args.finding).is_file():
        if not re.fullmatch(r"[0-9a-f]{4,40}", args.finding.lower()):
            raise UsageError(f"{args.finding!r} is neither a finding file nor a signature (4+ hex digits)")
        if not Path(args.corpus).is_dir():
            raise UsageError(f"no such corpus folder: {args.corpus} (to look signature {args.finding!r} up)")
    elif args.corpus_command == "prune":
        if args.fixed_for < 1:
            raise UsageError(f"--fixed-for={args.fixed_for}: must be >= 1")
        if not Path(args.dir).is_dir():
            raise UsageError(f"no such corpus folder: {args.dir}")


def _merge_daemon_states(sources, into, console, warn) -> None:
    """`corpus merge`: where sources hold a daemon state, the destination's becomes the
    merge of theirs and its own (idempotent: merging a shard again does not count it
    twice). An unreadable source state is skipped with a warning."""
    from rich.text import Text

    from .corpus.daemon_state import StateError, merge_states, read_state, save_state
    from .corpus.store import corpus_folders
    states = []
    for folder in corpus_folders(sources):
        try:
            state = read_state(folder) if Path(folder).is_dir() else None
        except StateError as exc:
            warn.print(Text(f"skipping the daemon state: {exc}", style="yellow"), highlight=False, soft_wrap=True)
            continue
        if state is not None:
            states.append(state)
    if not states:
        return
    try:
        own = read_state(into)
    except StateError as exc:
        raise UsageError(f"--into={into!r}: {exc} (move it aside to merge daemon states)") from None
    save_state(into, merge_states(([own] if own is not None else []) + states))
    console.print(Text(f"merged the daemon state of {len(states)} source(s) into {into}"), highlight=False)


def _list_bugs(args, found, console, print_json) -> int:
    """`corpus list --by bug`: the bugs of the whole folder; --op/--oracle/--status keep
    the bugs that have such a finding (or that status)."""
    from .corpus.bugs import group, summary_words
    from .reports.corpus_views import bugs_list
    bugs = [b for b in group(found)
            if args.op in (None, *b.ops) and args.oracle in (None, *b.oracles)
            and (args.status is None or b.status == args.status or (args.status == "regression" and b.regression))]
    if args.format == "json":
        print_json([b.to_json() for b in bugs])
        return EXIT_CLEAN
    console.print(bugs_list(bugs, f"{args.dir}: {summary_words(bugs)}"))
    return EXIT_CLEAN


def cmd_ops(args, console) -> int:
    # What needs no catalogue (and so no torch) is checked first.
    if args.selection is not None and not args.stats:
        raise UsageError("--ops is for --stats (to list ops, use --family)")
    if args.stats and args.cases < 1:
        raise UsageError(f"--cases={args.cases}: must be >= 1")
    from rich.table import Table

    from .generation import catalogue
    fams = catalogue.families()
    if args.family and args.family not in fams:
        raise UsageError(f"--family={args.family!r}: unknown family; families are {', '.join(fams)}")
    if args.stats:
        return _ops_stats(args, console, fams)
    ops = catalogue.all_ops()
    table = Table(title="mpsfuzz op catalogue")
    table.add_column("family")
    table.add_column("ops", justify="right")
    table.add_column("variants (method/in-place/out=/grad)", justify="right")
    # ops that declare where their gradient is undefined (kinks, ties, repeated spectra)
    table.add_column("grad undefined at", justify="right")
    table.add_column("names", overflow="fold")
    for fam, names in fams.items():
        if args.family in (None, fam):
            counts = [sum(bool(getattr(ops[n], a)) for n in names) for a in ("method", "inplace", "out", "grad")]
            undefined = sum(ops[n].grad_undefined is not None for n in names)
            table.add_row(fam, str(len(names)), "/".join(map(str, counts)), str(undefined), ", ".join(names))
    console.print(table)
    sized = sorted(n for n, spec in ops.items() if spec.size_class and (args.family in (None, spec.family)))
    if sized:
        console.print(f"large size class ({len(sized)}, added by `run --large`): {', '.join(sized)}",
                      highlight=False, soft_wrap=True)
    return EXIT_CLEAN


def _ops_stats(args, console, fams) -> int:
    from rich.table import Table

    from .execution.executor import reference_rejection
    from .generation import catalogue, validity
    if args.selection is not None:
        try:
            chosen = catalogue.select(args.selection)
        except catalogue.UnknownOpError as exc:
            raise UsageError(str(exc)) from None
    else:
        chosen = [n for fam, names in fams.items() if args.family in (None, fam) for n in names]
    results = validity.measure(chosen, rejection=reference_rejection, cases_per_op=args.cases, seed=args.seed)

    def pct(share: float) -> str:
        colour = "red" if share < validity.FLOOR_SHARE else "yellow" if share < validity.TARGET_SHARE else "green"
        return f"[{colour}]{100 * share:.0f}%[/]"

    per_op = Table(title=f"valid share of generated cases ({args.cases} per op, seed {args.seed})")
    for column, justify in (("family", "left"), ("op", "left"), ("cases", "right"), ("valid", "right"),
                            ("first CPU rejection", "left")):
        per_op.add_column(column, justify=justify, overflow="fold")
    for r in sorted(results, key=lambda r: (r.family, r.share, r.op)):
        per_op.add_row(r.family, r.op, str(r.cases), pct(r.share), r.first_rejection)
    console.print(per_op)
    summary = Table(title="per family")
    for column in ("family", "ops", "cases", "valid", "median op", "worst op", f"ops < {validity.TARGET_SHARE:.0%}"):
        summary.add_column(column, justify="left" if column in ("family", "worst op") else "right")
    for fam in validity.by_family(results):
        below = sum(r.share < validity.TARGET_SHARE for r in results if r.family == fam.family)
        summary.add_row(fam.family, str(fam.ops), str(fam.cases), pct(fam.share), pct(fam.median_share),
                        f"{fam.worst.op} {100 * fam.worst.share:.0f}%", str(below))
    console.print(summary)
    floor = [r.op for r in results if r.share < validity.FLOOR_SHARE]
    total = sum(r.cases for r in results)
    console.print(f"{len(results)} ops, {total} cases, valid {100 * sum(r.valid for r in results) / max(total, 1):.1f}%; "
                  f"below {validity.TARGET_SHARE:.0%}: {sum(r.share < validity.TARGET_SHARE for r in results)}, "
                  f"below {validity.FLOOR_SHARE:.0%}: {len(floor)}{' (' + ', '.join(floor) + ')' if floor else ''}",
                  highlight=False)
    return EXIT_CLEAN


def cmd_coverage(args, console) -> int:
    """``mpsfuzz coverage``: per op, the parameters of its public function and the values
    of their documented range that its generated cases never draw, the input classes
    (issue 38) it admits and draws, and the shares drawn."""
    from .atomic import atomic_write_json
    from .generation import catalogue, coverage
    try:
        chosen = coverage.measurable_ops(catalogue.select(args.selection))
    except catalogue.UnknownOpError as exc:
        raise UsageError(str(exc)) from None
    if not chosen:
        raise UsageError(f"--ops={args.selection!r}: nothing to measure (the large family and OpInfo entries "
                         "are not measured)")
    if args.large:
        chosen += [op for op in catalogue.large_class(chosen) if op not in chosen]
    cases = args.cases or coverage.default_cases_per_op()
    results = coverage.survey(chosen, cases_per_op=cases, seed=args.seed)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    _say_parameter_coverage(say, results.parameters, cases, args.seed)
    _say_class_coverage(say, results.classes, large=args.large)
    if args.json_path:
        atomic_write_json(Path(args.json_path), coverage.report_json(results.parameters, results.classes))
    return EXIT_CLEAN


def _say_parameter_coverage(say, results, cases: int, seed: int) -> None:
    """The parameters never drawn, per op, and the share drawn."""
    from .generation import coverage
    say(f"parameters drawn by {cases} case(s) per op (seed {seed}), drawn as a campaign draws them")
    for r in results:
        if coverage.gaps(r):
            say(f"{r.op} ({r.function}): " + "; ".join(coverage.gaps(r)))
    total = coverage.summarise(results)
    left_out = (f"; {total.excluded} left out (layout, pin_memory, a factory's requires_grad, sparse gradients, "
                "deprecated and CUDA-only options...: mpsfuzz/generation/public_api.py)") if total.excluded else ""
    say(f"{total.ops} op{'s' if total.ops != 1 else ''}, {total.parameters} parameters: {total.drawn} drawn over their documented range "
        f"({100 * total.share:.1f}%), {total.never_drawn} never drawn{left_out}")


def _say_class_coverage(say, results, *, large: bool) -> None:
    """Per op, the input classes drawn and those admissible but never drawn; per class,
    the ops admitting and drawing it; and the share of admissible (op, class) pairs drawn."""
    from .generation import coverage
    say(f"input classes (issue 38) drawn by these cases and the {coverage.CAMPAIGN_SIBLINGS} siblings a campaign "
        "makes of each" + ("" if large else " (the large classes: --large)"))
    for r in results:
        if r.admissible:
            say(f"{r.op}: {coverage.class_gaps(r)}")
    total = coverage.summarise_classes(results)
    for name, admitting, drawing in total.by_class:
        say(f"  {name}: drawn for {drawing} of the {admitting} ops that admit it")
    say(f"{total.ops} op{'s' if total.ops != 1 else ''} with input classes, {total.admissible} admissible (op, class) "
        f"pairs: {total.drawn} drawn ({100 * total.share:.1f}%), {total.admissible - total.drawn} never drawn")


def cmd_doctor(args, console) -> int:
    from rich.table import Table
    from rich.text import Text

    from .reports.doctor import rows
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows(Path(args.corpus)):
        table.add_row(Text(label), Text(value))
    console.print(table)
    return EXIT_CLEAN


def cmd_oracles(args, console) -> int:
    from rich.table import Table

    from .oracles import DEFAULT, all_oracles
    table = Table(title="mpsfuzz oracles")
    for column in ("oracle", "stage", "default", "what it checks"):
        table.add_column(column, overflow="fold")
    for name, o in all_oracles().items():
        table.add_row(name, o.stage, "yes" if name in DEFAULT else "no", o.doc)
    console.print(table)
    return EXIT_CLEAN


def _install_kernel_files(paths) -> None:
    """``report``/``repro --kernels FILE...``: import each file (its kernels register) and
    install GenerationSettings naming them, which the processes these commands start (a
    repro check's child) are handed."""
    from .generation import kernels
    from .generation.settings import from_environment, install
    for path in paths:
        try:
            kernels.load_file(path)
        except kernels.KernelFileError as exc:
            raise UsageError(str(exc)) from None
    if paths:
        install(from_environment().with_kernel_files(paths))


def _budget_s(args, default_budget: str | None) -> float | None:
    """``--budget`` in seconds; without one, ``default_budget`` unless --max-cases bounds
    the run (None: no time limit)."""
    if args.budget:
        return parse_duration(args.budget)
    return None if args.max_cases is not None or default_budget is None else parse_duration(default_budget)


def _campaign_request(args, *, default_budget: str | None, started_at: float | None = None,
                      daemon: bool = False):
    """What `run` or `daemon` was asked (campaign/plan.py's CampaignRequest)."""
    from .campaign.plan import CampaignRequest
    return CampaignRequest(
        corpus_dir=Path(args.corpus), ops=args.ops, kernels=tuple(args.kernels), large=bool(args.large),
        auto_large=daemon, no_large=bool(getattr(args, "no_large", False)), shard=args.shard, target=args.target,
        oracles=args.oracles, budget_s=_budget_s(args, default_budget), max_cases=args.max_cases,
        max_findings=args.max_findings, jobs=args.jobs, devices=tuple(args.devices), timeout_s=args.timeout,
        compile_timeout_s=args.compile_timeout, shrink_budget_s=args.shrink_budget,
        minimise_budget_s=args.minimise_budget, slice_examples=args.slice_examples, known=tuple(args.known),
        reruns=args.reruns, variants=not args.no_variants, verify_repros=not args.no_verify_repros, seed=args.seed,
        max_rank=args.max_rank, max_side=args.max_side, max_bytes=args.max_bytes, draw_jobs=args.draw_jobs,
        siblings=args.siblings, recycle_after=args.recycle_after if daemon else None,
        max_worker_rss_mb=args.max_worker_rss / 2**20 if daemon else None, started_at=started_at)


def _campaign_plan(request, console):
    """The campaign's plan (campaign/plan.py), its notes shown as they come; its
    GenerationSettings installed in this process, which draws and shrinks cases too."""
    from .campaign.plan import PlanError, plan_campaign
    from .execution.worker import limit_threads
    from .generation.settings import install

    # The campaign's own process runs only small tensor ops (triage's looks at values):
    # a pool of a thread per core would spin on the cores its workers need.
    limit_threads()
    try:
        plan = plan_campaign(request, say=lambda note: console.print(note.text, style=note.style, highlight=False,
                                                                     markup=False))
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    install(plan.settings)
    return plan


def _campaign_exit(result, errors_path, *, terminated: bool = False) -> int:
    from rich.console import Console
    stats = result.stats
    if mostly_lost(stats.cases_lost, stats.attempted):
        Console(stderr=True).print(
            f"mpsfuzz: error: {stats.cases_lost} of {stats.attempted} cases could not be generated, run or "
            f"judged (harness errors, not findings); each with its case and traceback in {errors_path}",
            highlight=False, markup=False, soft_wrap=True)
    # A failure left untriaged (out of time) is a failure of the target until triage
    # says otherwise: a run that found one does not pass.
    # Unverified target findings count: their script could not be run here (or --no-verify-repros),
    # which hides nothing; they are retried by the next run on the corpus.
    return exit_code(findings=stats.new_findings + stats.unverified + stats.left_pending, cases_lost=stats.cases_lost,
                     attempted=stats.attempted, interrupted=result.stopped_because == "interrupted",
                     terminated=terminated)


def cmd_run(args, console) -> int:
    from .campaign.interrupts import Termination

    # The budget counts from the process's start: what the run does before its first case
    # (importing torch, loading the target, the kernels' contiguity checks) is inside
    # --budget too, as a CI job's time limit sees it (issue 37, point 2).
    global _exit_by
    started = _process_started()
    budget = _budget_s(args, DEFAULT_BUDGET)
    if budget is not None and budget > 0:
        from .campaign.engine import overrun_s
        _exit_by = started + budget + overrun_s(budget)
    with Termination() as termination:
        result, errors_path = _run_campaign(args, console, started, termination)
    return _campaign_exit(result, errors_path, terminated=termination.received)


def _process_started() -> float:
    """When this process started, on the time.monotonic() clock."""
    import psutil
    try:
        age = max(0.0, time.time() - psutil.Process().create_time())
    except psutil.Error:
        age = 0.0
    return time.monotonic() - age


def _run_campaign(args, console, started: float, termination):
    """`run`'s campaign, one lane or several, stopped early by ``termination`` (SIGTERM):
    (CampaignFinished, the errors log's path)."""
    from .campaign.daemon import clear_stale_inflight
    from .campaign.engine import Campaign
    from .campaign.lanes import ParallelCampaign
    from .corpus.upstream import UpstreamTableError
    from .execution.targets import TargetError
    from .execution.worker import WorkerStartError
    from .reports.console import ConsoleReporter
    from .reports.error_log import ErrorLog
    from .reports.repro_writer import ReproWriter
    from .reports.run_log import RunLog

    plan = _campaign_plan(_campaign_request(args, default_budget=DEFAULT_BUDGET, started_at=started), console)
    config, corpus_dir = plan.config, plan.config.corpus_dir
    errors = ErrorLog(corpus_dir)
    reporter = ConsoleReporter(console, live=False if args.no_progress else None, errors_log=errors.path)
    try:
        # The errors log first: a harness error is on disk before anything reports it.
        writer = ReproWriter(corpus_dir, verify=plan.verify, timeout_s=plan.verify_timeout_s)
        listeners = [errors, writer, reporter, RunLog(corpus_dir, errors_log=errors.path)]
        if plan.jobs > 1:
            campaign = ParallelCampaign(config, listeners, jobs=plan.jobs, verify=plan.verify,
                                        verify_timeout_s=plan.verify_timeout_s, target_name=plan.target_name,
                                        device=plan.device, devices=plan.devices)
            termination.relay(campaign.stop_soon)
        else:
            # The writer verifies each new finding's repro before the engine counts it.
            campaign = Campaign(config, listeners, confirm=writer.confirm, stop=termination.stop)
        clear_stale_inflight(corpus_dir)
        result = campaign.run()
        # A desk job given up at the budget may write its in-flight file after its pool
        # closed (issue 37, H200: two left in a corpus after a run ended on its budget).
        clear_stale_inflight(corpus_dir, finished=os.getpid())
    except (TargetError, UpstreamTableError, WorkerStartError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        reporter.close()
    return result, errors.path


def cmd_daemon(args, console) -> int:
    from .campaign.daemon import Daemon, DaemonConfig
    from .corpus.upstream import UpstreamTableError
    from .execution.targets import TargetError
    from .execution.worker import WorkerStartError
    from .reports.console import ConsoleReporter
    from .reports.error_log import ErrorLog
    from .reports.repro_writer import ReproWriter
    from .reports.run_log import RunLog

    plan = _campaign_plan(_campaign_request(args, default_budget=None, daemon=True), console)
    corpus_dir = plan.config.corpus_dir
    errors = ErrorLog(corpus_dir)
    reporter = ConsoleReporter(console, live=False if args.no_progress else None, errors_log=errors.path)
    daemon_config = DaemonConfig(campaign=plan.config, jobs=plan.jobs, report_every_s=args.report_every,
                                 max_disk_bytes=args.max_disk, replay=not args.no_replay,
                                 verify=plan.verify, verify_timeout_s=plan.verify_timeout_s,
                                 target_name=plan.target_name, device=plan.device, devices=plan.devices)
    console.print(f"  daemon: {plan.jobs} lane(s); state, events and reports under {corpus_dir} "
                  f"(`mpsfuzz status {corpus_dir}`); SIGTERM or Ctrl-C stops it", highlight=False)
    try:
        writer = ReproWriter(corpus_dir, verify=plan.verify, timeout_s=plan.verify_timeout_s)
        listeners = [errors, writer, reporter, RunLog(corpus_dir, errors_log=errors.path)]
        result = Daemon(daemon_config, listeners).run()
    except (TargetError, UpstreamTableError, WorkerStartError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        reporter.close()
    return _campaign_exit(result, errors.path)


def cmd_replay(args, console) -> int:
    from .corpus.replay import replay_findings
    from .corpus.store import load_findings
    from .reports.console import replay_table

    found, problems = load_findings(args.paths)
    for path, why in problems:
        console.print(f"[yellow]skipping {path}: {why}[/]", highlight=False)
    if not found:
        raise UsageError(f"no readable findings in {', '.join(args.paths)}")
    results = replay_findings(found, target_override=args.target, timeout_s=args.timeout,
                              runs=args.runs, record=not args.no_record)
    console.print(replay_table(results))
    still = sum(r.result == "still-fails" for r in results)
    return exit_code(findings=still)


def _write_or_print(text: str, output: str | None, console) -> None:
    if output is None:
        console.out(text, highlight=False)
        return
    try:
        Path(output).write_text(text)
    except OSError as exc:
        raise UsageError(f"--output={output!r}: {exc.strerror}") from None


def _load_findings_or_warn(paths, warn):
    from rich.text import Text

    from .corpus.store import corpus_folders, load_findings
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"no such corpus file or folder: {', '.join(missing)}")
    found, problems = load_findings(corpus_folders(paths))
    for path, why in problems:
        warn.print(Text(f"skipping {path}: {why}", style="yellow"), highlight=False, soft_wrap=True)
    return found


def cmd_report(args, console) -> int:
    from rich.console import Console

    from .reports import views
    # Machine formats and files keep stdout clean: warnings go to stderr.
    warn = console if args.format == "terminal" and args.output is None else Console(stderr=True)
    _install_kernel_files(args.kernels)
    found = _load_findings_or_warn(args.paths, warn)
    if args.format == "issue":
        from .reports.issue import TemplateError, drafts
        if not found:
            raise UsageError(f"no readable findings in {', '.join(args.paths)}")
        if args.templates is not None and not Path(args.templates).is_dir():
            raise UsageError(f"--templates={args.templates!r}: no such folder")
        try:
            text = drafts(found, verify=not args.no_verify, target_override=args.target, timeout_s=args.timeout,
                          templates_dir=Path(args.templates) if args.templates else None)
        except TemplateError as exc:
            raise UsageError(str(exc)) from None
        _write_or_print(text, args.output, console)
        return exit_code()
    from .corpus.store import corpus_folders
    roots = [p for p in corpus_folders(args.paths) if p.is_dir()]
    if args.format == "terminal" and args.output is None:
        views.print_terminal(console, found, roots)
        return exit_code()
    _write_or_print(views.render(args.format, found, roots), args.output, console)
    return exit_code()


def cmd_repro(args, console) -> int:
    path = Path(args.finding)
    if path.is_dir():
        raise UsageError(f"{args.finding}: a folder; repro takes one finding file (report --format issue takes a folder)")
    from rich.console import Console

    from .corpus.store import Corpus
    from .reports.repro import ReproError, repro_for
    err = Console(stderr=True)
    _install_kernel_files(args.kernels)
    found = _load_findings_or_warn([path], err)
    if not found:
        raise UsageError(f"{args.finding}: not a readable finding")
    _, finding = found[0]
    try:
        repro = repro_for(finding, verify=not args.no_verify, target_override=args.target, timeout_s=args.timeout)
    except ReproError as exc:
        raise UsageError(f"{args.finding}: {exc}") from None
    if not args.no_verify:
        Corpus(path.parent).update(path, lambda f: setattr(f, "repro", repro))
    status = repro.get("verified")
    if status is True:
        err.print(f"verified: the script reproduces the finding on {repro.get('target')} ({repro.get('detail', '')})",
                  highlight=False, markup=False)
    elif status is False:
        err.print(f"NOT A REPRO: the script did not reproduce the finding on {repro.get('target')}: "
                  f"{repro.get('detail', '')}", style="bold red", highlight=False, markup=False)
    elif str(repro.get("detail", "")).startswith("not verified here"):
        err.print(f"{repro['detail']} (the script could not run on this machine; this says nothing of the finding)",
                  highlight=False, markup=False)
    else:
        err.print("not verified (run without --no-verify to check it on the target)", highlight=False, markup=False)
    _write_or_print(repro["script"], args.output, console)
    return exit_code(findings=0 if status is not False else 1)


def cmd_status(args, console) -> int:
    from .reports.status import StatusError, status_model, status_view
    try:
        model = status_model(args.dir)
    except StatusError as exc:
        raise UsageError(str(exc)) from None
    if args.format == "json":
        console.out(json.dumps(model, indent=2), highlight=False)
    else:
        console.print(status_view(model))
    return EXIT_CLEAN


def main(argv: list[str] | None = None) -> int:
    # Parsing (--help, --version, a bad argument) imports neither torch nor rich: each
    # command imports what it needs in its handler, so these answer at once (issue 39).
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            raise UsageError("a command is required: run, ops, coverage, oracles, replay, corpus, report, repro, "
                             "doctor or status (see mpsfuzz --help)")
        handler = {"run": cmd_run, "daemon": cmd_daemon, "ops": cmd_ops, "coverage": cmd_coverage,
                   "oracles": cmd_oracles, "replay": cmd_replay,
                   "corpus": cmd_corpus, "report": cmd_report, "repro": cmd_repro,
                   "doctor": cmd_doctor, "status": cmd_status}[args.command]
        return handler(args, _stdout_console())
    except (UsageError, CorpusWriteError) as exc:
        # CorpusWriteError: a full disk or an unwritable corpus; what is on disk is kept.
        _say(f"mpsfuzz: error: {exc}")
        return exit_code(error=True)
    except KeyboardInterrupt:
        _say("mpsfuzz: interrupted")
        return exit_code(interrupted=True)
    except Exception as exc:  # an mpsfuzz bug: one line on stderr, details in a file
        log = Path("mpsfuzz-internal-error.log")
        log.write_text(traceback.format_exc())
        _say(f"mpsfuzz: internal error: {type(exc).__name__}: {exc} (traceback in {log})")
        return exit_code(error=True)


def _stdout_console():
    """A terminal's width is its own (or COLUMNS); a log (no terminal) is 160 columns wide
    whatever COLUMNS says (pytest-xdist sets 80). rich honours NO_COLOR, and writes no
    colour codes or redraws where it is no terminal."""
    from rich.console import Console
    return Console() if sys.stdout.isatty() else Console(width=160)


def _say(line: str) -> None:
    """One line on stderr, as it is (no rich: a usage error is said without importing it)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


# Once a command is done (its summary printed, every finding written), the process is
# gone within this long: what it started and left running is killed first
# (campaign/reaper.py), and an exit still held up after it (a thread, an atexit handler
# joining a process) is cut short with the exit code already decided.
EXIT_WATCHDOG_S = 10.0
# A run with a budget must be gone by its end plus the overrun it is allowed (issue 37,
# point 2): cmd_run sets this (time.monotonic()), and the exit's watchdog fires by then.
_exit_by: float | None = None


def _exit_promptly(code: int) -> None:
    import threading
    import time

    if _may_have_children():
        from .campaign.reaper import descendants, kill_all
        kill_all(descendants(), timeout=2.0)

    def watchdog():
        wait = EXIT_WATCHDOG_S if _exit_by is None else min(EXIT_WATCHDOG_S, max(1.0, _exit_by - time.monotonic()))
        time.sleep(wait)
        try:
            sys.stderr.write(f"mpsfuzz: exiting took more than {wait:g}s; exiting now (code {code})\n")
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    threading.Thread(target=watchdog, name="mpsfuzz-exit-watchdog", daemon=True).start()


def _may_have_children() -> bool:
    """Whether this process may have started one: mpsfuzz starts every process it starts
    (lanes, worker pools, drafters, repro checks) through subprocess or multiprocessing,
    so with neither imported (a usage error) there is nothing to reap, nor psutil to import."""
    return any(name in sys.modules for name in ("subprocess", "multiprocessing"))


def entry() -> None:
    # A campaign's own process dying of a signal must leave its stack in its log (a
    # daemon died of SIGSEGV once, with nothing said).
    faulthandler.enable()
    code = main()
    _exit_promptly(code)
    sys.exit(code)
