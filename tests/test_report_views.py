"""`mpsfuzz report`: the terminal, markdown, html and json views of a corpus of three bugs
of the fault-injecting target (one matches a known-upstream table, one is replayed as
fixed), the run logs they count, the JSON schema, and the HTML page as a real headless
Chromium renders it.

The default run's corpus is written directly (tests/written_findings.py: real failures of
minimal cases, filed as a campaign files them, and a campaign's run log) and `mpsfuzz
report` runs in this process: a campaign and a fresh interpreter per report cost a minute
and a half (issue 39). The slow tests read the corpus a real campaign wrote, with its own
run log (-m slow)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from mpsfuzz.cli import main
from mpsfuzz.corpus.store import atomic_write_json
from mpsfuzz.events import CampaignFinished, CampaignStarted, Stats
from mpsfuzz.reports.error_plot import error_figure
from mpsfuzz.reports.html import TINTS
from mpsfuzz.reports.model import LAYOUT_CLASSES, STATUSES
from mpsfuzz.reports.run_log import RUNS_DIR, RunLog, run_record
from mpsfuzz.reports.schema_check import SchemaError, errors, load_schema
from written_findings import (BITWISE_AND_GAPPED, BITWISE_AND_GAPPED_EXPLAINED, FAULT_TARGET, SQRT_CHALF,
                              SQRT_CHALF_EXPLAINED, TRIU_4D, TRIU_4D_EXPLAINED, written_finding)

FAULTS = "triu_tril_gt3d,bitwise_noncontig,sqrt_chalf"
KNOWN_LINK = "https://github.com/pytorch/pytorch/issues/99999"
KNOWN_ENTRY = {"id": "test-triu-4d", "status": "known-bug", "reason": "triu/tril wrong on inputs of 4 or more dims",
               "link": KNOWN_LINK}
ROOT = Path(__file__).resolve().parent.parent


def mpsfuzz(*args: str, cwd: Path, faults: str = FAULTS, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPSFUZZ_FAULTS=faults)
    return subprocess.run([sys.executable, "-m", "mpsfuzz", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def mpsfuzz_here(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``mpsfuzz ARGS`` from ``cwd``, in this process (what a report reads needs no fresh
    interpreter, which starts torch: seconds per call)."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["mpsfuzz", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """base/corpus, written directly: triu (known upstream), bitwise_and (new) and sqrt
    (fixed: replayed once with its fault switched off), plus the run log of a campaign of
    600 cases over the three ops that finished a minute ago."""
    out = tmp_path_factory.mktemp("report") / "corpus"
    written_finding(out, TRIU_4D, FAULTS, TRIU_4D_EXPLAINED, known=KNOWN_ENTRY)
    written_finding(out, BITWISE_AND_GAPPED, FAULTS, BITWISE_AND_GAPPED_EXPLAINED)
    written_finding(out, SQRT_CHALF, FAULTS, SQRT_CHALF_EXPLAINED, fixed=True)
    ops = ("sqrt", "triu", "bitwise_and")
    started = CampaignStarted("faulty-cpu", FAULT_TARGET, "cpu", ops, ("values",), 1, None, 600)
    stats = Stats(cases=600, valid=580, elapsed_s=30.0, new_findings=2, known_bugs=1,
                  per_op={"sqrt": [200, 195], "triu": [200, 190], "bitwise_and": [200, 195]})
    finished_at = time.time() - 60   # (a file name no RunLog of this process writes now)
    record = run_record(started, CampaignFinished(stats, (), "max-cases"), started_at=finished_at - 30,
                        finished_at=finished_at)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(finished_at))
    (out / RUNS_DIR).mkdir()
    atomic_write_json(out / RUNS_DIR / f"{stamp}-{os.getpid()}.json", record)
    return out


@pytest.fixture(scope="module")
def campaign_corpus(tmp_path_factory) -> Path:
    """base/corpus as a campaign wrote it: triu (known upstream, via a --known table),
    bitwise_and (new) and sqrt (fixed: replayed with its fault switched off), plus the
    campaign's run log."""
    base = tmp_path_factory.mktemp("report")
    known = base / "known.json"
    known.write_text(json.dumps({"format": 1, "entries": [{
        "id": KNOWN_ENTRY["id"], "device": "*", "ops": ["triu"], "oracle": "values", "status": "known-bug",
        "reason": KNOWN_ENTRY["reason"], "link": KNOWN_LINK}]}))
    run = mpsfuzz("run", "--ops", "sqrt,triu,bitwise_and", "--target", FAULT_TARGET, "--max-cases", "600",
                  "--seed", "1", "--corpus", "corpus", "--timeout", "3", "--no-progress", "--known", str(known),
                  cwd=base)
    assert run.returncode == 1, run.stdout + run.stderr
    found = {json.loads(p.read_text())["op"]: p for p in (base / "corpus").glob("*.json")}
    assert set(found) == {"triu", "bitwise_and", "sqrt"}, run.stdout
    replay = mpsfuzz("replay", str(found["sqrt"].relative_to(base)), "--timeout", "3", cwd=base,
                     faults="triu_tril_gt3d,bitwise_noncontig")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    return base / "corpus"


def findings(corpus: Path) -> dict[str, dict]:
    return {d["op"]: d for d in (json.loads(p.read_text()) for p in corpus.glob("*.json"))}


def copy_of(corpus: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "corpus"
    shutil.copytree(corpus, dest)
    return dest


def report_json(path: Path, cwd: Path) -> dict:
    out = mpsfuzz_here("report", str(path), "--format", "json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# -- run logs ---------------------------------------------------------------------------

@pytest.mark.slow
def test_the_campaign_wrote_a_run_log_that_corpus_commands_ignore(campaign_corpus, tmp_path):
    logs = list((campaign_corpus / "runs").glob("*.json"))
    assert len(logs) == 1
    log = json.loads(logs[0].read_text())
    assert log["schema"] == "mpsfuzz-run" and log["target"]["name"] == "faulty-cpu"
    assert log["cases"] == 600 and log["stopped_because"] == "max-cases"
    assert log["findings"] == {"new": 2, "known": 1, "cpu": 0, "flaky": 0}
    assert set(log["per_op"]) == {"sqrt", "triu", "bitwise_and"}
    assert sum(v["cases"] for v in log["per_op"].values()) == 600
    assert 0 < log["valid"] <= log["cases"] and log["cases_per_s"] > 0
    assert log["started"] <= log["finished"]
    assert not list((campaign_corpus / "runs").glob(".*")), "a temp file was left behind"

    listed = mpsfuzz("corpus", "list", str(campaign_corpus), "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert sorted(f["op"] for f in json.loads(listed.stdout)) == ["bitwise_and", "sqrt", "triu"]
    assert "skipping" not in listed.stdout + listed.stderr

    merged = mpsfuzz("corpus", "merge", str(campaign_corpus), "--into", str(tmp_path / "merged"), cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    assert len(list((tmp_path / "merged").glob("*.json"))) == 3
    assert not (tmp_path / "merged" / "runs").exists()

    mine = copy_of(campaign_corpus, tmp_path)
    pruned = mpsfuzz("corpus", "prune", str(mine), "--fixed-for", "1", cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert [p.name.split("-")[0] for p in (mine / "pruned").glob("*.json")] == ["sqrt"]
    assert list((mine / "runs").glob("*.json")) == [mine / "runs" / logs[0].name]


def _campaign_events(cases: int) -> tuple[CampaignStarted, CampaignFinished]:
    started = CampaignStarted("other-target", "mod:attr", "meta", ("sum",), ("values",), 7, 30.0, None)
    stats = Stats(cases=cases, valid=cases - 1, unsupported=1, elapsed_s=2.0, new_findings=1,
                  per_op={"sum": [cases, cases - 1]})
    return started, CampaignFinished(stats, (), "budget")


def test_run_log_listener_writes_a_file_that_report_counts(corpus, tmp_path):
    mine = copy_of(corpus, tmp_path)
    before = report_json(mine, tmp_path)["runs"]
    log = RunLog(mine)
    for event in _campaign_events(40):
        log(event)
    assert log.path is not None and log.path.parent == mine / "runs" and log.path.name.endswith(f"-{os.getpid()}.json")
    after = report_json(mine, tmp_path)["runs"]
    assert after["runs"] == before["runs"] + 1 == 2
    assert after["cases"] == before["cases"] + 40
    assert after["per_op"]["sum"] == {"cases": 40, "valid": 39}
    assert "other-target (meta)" in after["targets"] and "faulty-cpu (cpu)" in after["targets"]
    assert after["findings"]["new"] == before["findings"]["new"] + 1


# -- terminal and markdown --------------------------------------------------------------

def table_rows(text: str) -> list[list[list[str]]]:
    """The body rows of the rich tables in ``text``: each a list of cells, each cell the
    list of its wrapped lines (a new row starts where the first column is not empty)."""
    rows: list[list[list[str]]] = []
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip()[1:-1].split("│")]
        if cells[0] or not rows:
            rows.append([[c] if c else [] for c in cells])
        else:
            for mine, more in zip(rows[-1], cells):
                if more:
                    mine.append(more)
    return rows


def test_terminal_lists_each_finding_with_its_explanation_and_path(corpus):
    out = mpsfuzz_here("report", "corpus", cwd=corpus.parent)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "3 finding(s) in 1 corpus folder(s): 1 new, 1 known upstream, 1 fixed"
    assert lines[1].startswith("runs: 1, 600 cases (")
    assert "elementwise: 2 finding(s) (values 2)" in out.stdout and "linalg: 1 finding(s) (values 1)" in out.stdout
    # The bugs table comes first (one bug per faulty kernel here); the family tables after it.
    assert "bugs: 3 " in out.stdout and out.stdout.index("bugs: 3 ") < out.stdout.index("elementwise:")
    rows = {r[0][0]: r for r in table_rows(out.stdout[out.stdout.index("elementwise:"):])}
    assert set(rows) == {"triu", "bitwise_and", "sqrt"}
    for op, f in findings(corpus).items():
        _, oracle, status, seen, explanation, path = rows[op]
        assert oracle == ["values"]
        assert " ".join(explanation) == " ".join(f["explanation"].split()) != ""
        assert "".join(path) == f"corpus/{op}-values-{f['signature']}.json"
        assert seen == [str(f["times_seen"])]
    assert rows["triu"][2] == ["known upstream", KNOWN_LINK]
    assert rows["bitwise_and"][2] == ["new"] and rows["sqrt"][2] == ["fixed"]


def markdown_rows(text: str) -> list[list[str]]:
    out = []
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = line.replace("\\|", "\x00").strip().strip("|").split("|")
            out.append([c.strip().replace("\x00", "|") for c in cells])
    return out


def test_markdown_has_the_findings_table_and_run_stats(corpus, tmp_path):
    mine = copy_of(corpus, tmp_path)
    # Cell breakers in finding text must be escaped, not end the cell.
    path = next(mine.glob("bitwise_and-*.json"))
    data = json.loads(path.read_text())
    data["ablation"]["text"] = "needs a | b <b>bold</b>\nsecond line"
    path.write_text(json.dumps(data))
    out = mpsfuzz_here("report", str(mine), "--format", "markdown", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "**3 finding(s)**" in out.stdout and "1 new" in out.stdout and "1 known upstream" in out.stdout
    assert out.stdout.index("### Bugs (3)") < out.stdout.index("### Findings")
    rows = markdown_rows(out.stdout[out.stdout.index("### Findings"):])
    findings_header = ["status", "op", "oracle", "explanation", "upstream", "file"]
    assert rows[0] == findings_header
    table = {r[1]: r for r in rows[1:4]}
    assert set(table) == {"`triu`", "`bitwise_and`", "`sqrt`"}
    assert all(len(r) == 6 for r in table.values())
    assert table["`triu`"][0].endswith("known upstream") and table["`triu`"][4] == f"[upstream]({KNOWN_LINK})"
    assert table["`bitwise_and`"][0].endswith("new") and table["`sqrt`"][0].endswith("fixed")
    assert table["`bitwise_and`"][3] == "needs a | b &lt;b&gt;bold&lt;/b&gt; second line"
    assert table["`triu`"][5] == next(mine.glob("triu-*.json")).name
    assert rows[4][:3] == ["runs", "cases", "valid"] and rows[5][:2] == ["1", "600"]


# -- json and its schema -----------------------------------------------------------------

def test_json_report_meets_its_schema_and_counts(corpus):
    report = report_json(corpus, corpus.parent)
    schema = load_schema("report.schema.json")
    assert errors(report, schema) == []
    assert report["summary"]["by_status"] == {"new": 1, "known-bug": 1, "both": 0, "unverified": 0, "unconfirmed": 0,
                                              "undecided": 0, "flaky": 0, "cpu-bug": 0, "capability": 0,
                                              "layout-propagation": 0, "fixed": 1}
    assert report["summary"]["by_family"] == {"elementwise": 2, "linalg": 1}
    assert report["runs"]["runs"] == 1 and report["runs"]["cases"] == 600
    by_op = {f["op"]: f for f in report["findings"]}
    assert [f["status"] for f in report["findings"]] == ["new", "known-bug", "fixed"]  # worst first
    assert by_op["triu"]["known_link"] == KNOWN_LINK and by_op["triu"]["known_id"] == "test-triu-4d"
    assert by_op["bitwise_and"]["known_link"] is None
    assert by_op["bitwise_and"]["layouts"] == ["gapped"] and by_op["bitwise_and"]["dtypes"] == ["int64"]
    assert by_op["sqrt"]["dtypes"] == ["complex32"] and by_op["triu"]["layouts"] == ["contiguous"]
    assert all(f["repro_verified"] is True for f in report["findings"])
    assert all(f["error_profile"]["mismatched"] >= 1 for f in report["findings"])
    cells = report["matrix"]["layouts"]["rows"]
    assert cells["bitwise_and"]["gapped"] == {"worst": "new", "signatures": [by_op["bitwise_and"]["signature"]]}
    assert report["matrix"]["layouts"]["columns"] == list(LAYOUT_CLASSES)
    assert report["matrix"]["dtypes"]["rows"]["sqrt"]["complex32"]["worst"] == "fixed"


def test_a_broken_report_fails_validation(corpus):
    schema = load_schema("report.schema.json")
    good = report_json(corpus, corpus.parent)

    missing = json.loads(json.dumps(good))
    del missing["findings"][0]["status"]
    assert any("missing required key 'status'" in e for e in errors(missing, schema))

    bad_enum = json.loads(json.dumps(good))
    bad_enum["findings"][1]["status"] = "probably-fine"
    assert any(e.startswith("$.findings[1].status:") and "not one of" in e for e in errors(bad_enum, schema))

    bad_nested = json.loads(json.dumps(good))
    bad_nested["matrix"]["dtypes"]["rows"]["sqrt"]["complex32"]["worst"] = "meh"
    bad_nested["runs"]["cases"] = "600"
    bad_nested["summary"]["surprise"] = 1
    found = errors(bad_nested, schema)
    assert any(e.startswith("$.matrix.dtypes.rows.sqrt.complex32.worst:") for e in found)
    assert any(e.startswith("$.runs.cases: expected integer") for e in found)
    assert any(e.startswith("$.summary.surprise: not allowed") for e in found)
    assert errors(True, {"type": "integer"}) and errors(1, {"const": True})  # JSON: bools are no numbers
    with pytest.raises(SchemaError):
        errors({}, {"type": "object", "patternProperties": {}})


def test_every_format_renders_an_empty_report_and_duplicated_corpora(corpus, tmp_path):
    """In process: no findings at all; and the same corpus given twice (two copies, so
    each finding twice) gets one section per copy, each with its own anchor."""
    from mpsfuzz.corpus.store import load_findings
    from mpsfuzz.reports.views import FORMATS, render
    schema = load_schema("report.schema.json")
    for fmt in FORMATS:
        assert render(fmt, [], []).strip()
    empty = json.loads(render("json", [], []))
    assert errors(empty, schema) == [] and empty["findings"] == [] and empty["runs"]["runs"] == 0
    assert "No findings" in render("markdown", [], [])

    twin = copy_of(corpus, tmp_path)
    found, problems = load_findings([corpus, twin])
    assert len(found) == 6 and not problems
    html = render("html", found, [corpus, twin])
    anchors = re.findall(r'<section class="finding [^"]*" id="([^"]+)"', html)
    assert len(anchors) == 6 == len(set(anchors))
    twice = json.loads(render("json", found, [corpus, twin]))
    assert errors(twice, schema) == [] and twice["runs"]["runs"] == 2
    assert twice["summary"]["by_status"]["new"] == 2


def test_capability_and_unconfirmed_findings_are_counted_and_meet_the_schema(corpus, tmp_path):
    """A real run's corpus holds capabilities and unconfirmed findings: they are counted
    under their own status, rank below new and known bugs, and the JSON stays valid."""
    mine = copy_of(corpus, tmp_path)
    for path in mine.glob("*.json"):
        data = json.loads(path.read_text())
        if data["op"] == "bitwise_and":  # its repro script did not reproduce it
            data["repro"]["verified"] = False
        elif data["op"] == "sqrt":  # the target accepted what CPU rejected, rightly
            data["failure"]["blame"] = data["blame"] = "capability"
        path.write_text(json.dumps(data))
    report = report_json(mine, mine.parent)
    assert errors(report, load_schema("report.schema.json")) == []
    counts = report["summary"]["by_status"]
    assert (counts["unconfirmed"], counts["capability"], counts["new"], counts["fixed"]) == (1, 1, 0, 0)
    assert [f["status"] for f in report["findings"]] == ["known-bug", "unconfirmed", "capability"]
    terminal = mpsfuzz_here("report", str(mine), "--format", "terminal", cwd=tmp_path)
    assert "1 unconfirmed" in terminal.stdout and "1 capability" in terminal.stdout, terminal.stdout


def test_schema_enums_and_docs_match_the_code():
    schema = load_schema("report.schema.json")
    assert schema["$defs"]["status"]["enum"] == list(STATUSES)
    assert schema["$defs"]["finding"]["properties"]["layouts"]["items"]["enum"] == list(LAYOUT_CLASSES)
    docs = (ROOT / "docs" / "report.md").read_text()
    for name in schema["$defs"]["finding"]["properties"]:
        assert f"`.{name}`" in docs, name
    for section in ("summary", "runs"):
        for name in schema["properties"][section]["properties"]:
            assert f"{section}.{name}" in docs, f"{section}.{name}"


# -- html in a real browser ----------------------------------------------------------------

def chromium() -> str:
    binary = shutil.which("chromium-headless-shell") or "/usr/bin/chromium-headless-shell"
    if not os.access(binary, os.X_OK):
        pytest.fail("chromium-headless-shell is not installed (apt-get install chromium-headless-shell): "
                    "the HTML report must be checked in a real browser")
    return binary


def browse(page: Path, *args: str, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--no-sandbox", "--headless", "--disable-gpu", f"--user-data-dir={profile}",
                           *args, page.as_uri()], capture_output=True, text=True, timeout=120)


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA PNG as an (height, width, channels) array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], np.frombuffer(raw, np.uint8, stride, start + 1)
        if kind == 0:
            row = line.copy()
        elif kind == 1:  # Sub: a running sum per channel
            row = (np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.int64) % 256).astype(np.uint8).reshape(-1)
        elif kind == 2:  # Up
            row = line + prev
        else:  # Average, Paeth: each byte needs the one just decoded
            row = _sequential(kind, bytearray(line.tobytes()), prev.tobytes(), bpp)
        out[y] = row
        prev = out[y]
    return out.reshape(height, width, bpp)


def _sequential(kind: int, line: bytearray, prev: bytes, bpp: int) -> np.ndarray:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        if kind == 3:
            line[i] = (line[i] + (a + b) // 2) & 255
            continue
        c = prev[i - bpp] if i >= bpp else 0
        pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
        line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return np.frombuffer(bytes(line), np.uint8)


def test_png_decoder_reads_every_filter():
    """The decoder itself, on a PNG built here with each row filter by hand."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    raw, prev = b"", np.zeros(21, np.int64)
    for y, kind in enumerate(range(5)):
        row, filtered = image[y].reshape(-1).astype(np.int64), []
        for i in range(21):
            a = row[i - 3] if i >= 3 else 0
            b, c = prev[i], (prev[i - 3] if i >= 3 else 0)
            p = a + b - c
            paeth = min((abs(p - a), 0, a), (abs(p - b), 1, b), (abs(p - c), 2, c))[2]
            filtered.append((row[i] - [0, a, b, (a + b) // 2, paeth][kind]) % 256)
        raw += bytes([kind]) + bytes(filtered)
        prev = row

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 7, 5, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    assert np.array_equal(decode_png(png), image)


def _hex(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def test_html_report_renders_in_headless_chromium(corpus, tmp_path):
    mine = copy_of(corpus, tmp_path)
    # Finding text is arbitrary: markup in it must show as text, never run.
    path = next(mine.glob("bitwise_and-*.json"))
    data = json.loads(path.read_text())
    data["failure"]["message"] += '\n<script>document.body.dataset.pwned="1"</script>'
    data["ablation"]["text"] = '<img src="x" onerror="document.body.dataset.pwned=2"> gapped'
    path.write_text(json.dumps(data))
    page = tmp_path / "report.html"
    out = mpsfuzz_here("report", str(mine), "--format", "html", "--output", str(page), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    html = page.read_text()
    # Self-contained: no element loads anything. (The injected text is escaped: its quotes
    # are &quot;, so a literal src=" can only be a real attribute.)
    assert not re.search(r'\s(src|srcset|href)="(?!#|https://github\.com/)', html)
    for external in ("<link", "url(", "@import", "@font-face"):
        assert external not in html, external

    dom = browse(page, "--dump-dom", profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = dom.stdout[dom.stdout.index("<body"):].split(">", 1)[0]
    assert 'data-rendered="ok"' in body, body
    assert "data-errors" not in body and "data-pwned" not in body, body
    assert '<table class="matrix" id="matrix-dtypes">' in dom.stdout
    assert '<table class="matrix" id="matrix-layouts">' in dom.stdout
    assert "&lt;script&gt;document.body.dataset.pwned" in dom.stdout
    report = report_json(mine, tmp_path)
    for f in report["findings"]:
        section = dom.stdout.split(f'id="f-{f["signature"]}"', 1)[1].split("</section>", 1)[0]
        assert '<svg class="plot"' in section and "<circle" in section
        assert f"{f['error_profile']['mismatched']} of {f['error_profile']['numel']} elements off" in section
        assert "verified repro" in section
        assert f'href="#f-{f["signature"]}"' in dom.stdout.split('id="matrix-layouts"', 1)[1]
    assert f'<a href="{KNOWN_LINK}">' in dom.stdout

    shot = tmp_path / "report.png"
    run = browse(page, f"--screenshot={shot}", "--window-size=1280,2000", profile=tmp_path / "profile")
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    pixels = decode_png(shot.read_bytes())[..., :3].astype(np.int64)
    assert pixels.shape[:2] == (2000, 1280)
    ink = (pixels.min(axis=2) < 235).mean()
    assert ink > 0.06, f"only {ink:.1%} of the screenshot is not background"
    colours = {tuple(c) for c in pixels.reshape(-1, 3)[::7]}
    assert len(colours) > 50, len(colours)
    # The matrix cells are coloured by status: new, known upstream and fixed are present.
    flat = pixels.reshape(-1, 3)
    for status in ("new", "known-bug", "fixed"):
        count = np.all(flat == _hex(TINTS[status]), axis=1).sum()
        assert count > 500, (status, count)
    assert np.all(flat == _hex(TINTS["flaky"]), axis=1).sum() < 400  # the legend swatch only


def test_error_plot_draws_every_element_and_marks_non_finite_ones():
    elements = [[i * 10, 1.0, 1.0 + 10.0 ** (i % 5 - 3), 10.0 ** (i % 5 - 3)] for i in range(40)]
    elements[3] = [30, 2.0, "nan", "nan"]
    elements[7] = [70, "<b>", "inf", "inf"]
    profile = {"output": 0, "shape": [20, 50], "dtype": "float32", "numel": 1000, "mismatched": 300,
               "rtol": 1.3e-6, "atol": 1e-5, "elements": elements}
    figure = error_figure(profile)
    assert figure.count("<circle") == 38 and figure.count('class="nonfinite"') == 2
    assert "300 of 1000 elements off; worst at index 30 = (0, 30) (expected 2, got nan); the first 40 plotted" in figure
    assert "&lt;b&gt;" in figure and "<b>" not in figure
    assert figure.count("<rect") > 40  # the 20 x 50 grid: background plus the 40 wrong elements
    for broken in (None, {}, {"numel": 0, "elements": elements}, {"numel": 5, "elements": [["x", 1, 2, 3]]},
                   {"numel": "many", "elements": elements}, {"numel": 3, "elements": "nope"}):
        assert error_figure(broken) == ""


# -- bad input ------------------------------------------------------------------------------

def test_report_on_a_missing_folder_is_a_one_line_error(tmp_path):
    out = mpsfuzz_here("report", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "no such corpus file or folder" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_corrupt_files_are_skipped_and_the_report_still_renders(campaign_corpus, tmp_path):
    mine = copy_of(campaign_corpus, tmp_path)
    (mine / "broken-values-0000.json").write_text("{not json")
    (mine / "runs" / "20200101T000000Z-1.json").write_text('{"schema": "mpsfuzz-run", "cases": "many"}')
    for fmt in ("json", "markdown", "html", "terminal"):
        out = mpsfuzz("report", str(mine), "--format", fmt, cwd=tmp_path)
        assert out.returncode == 0, (fmt, out.stderr)
        # (rich wraps the warning at the stream's width: compare it unwrapped)
        warnings = (out.stderr if fmt != "terminal" else out.stdout).replace("\n", "")
        assert "skipping" in warnings and "broken-values-0000.json: Expecting property name" in warnings, fmt
        if fmt == "json":
            assert json.loads(out.stdout)["summary"]["findings"] == 3
    report = report_json(mine, tmp_path)
    assert report["summary"]["findings"] == 3 and report["runs"]["runs"] == 1
    assert [u["path"].endswith("20200101T000000Z-1.json") for u in report["runs"]["unreadable"]] == [True]


@pytest.mark.slow
def test_a_folder_of_corpora_reads_as_all_of_them(campaign_corpus, tmp_path):
    """bench/families.py writes DIR/<target>/<family>/: reporting on DIR/<target> takes
    every family's corpus (their findings and run logs), never runs/ or merged/."""
    parent = tmp_path / "cuda"
    for family in ("linalg", "nn"):
        shutil.copytree(campaign_corpus, parent / family)
    (parent / "empty" / "runs").mkdir(parents=True)  # a corpus whose campaign found nothing
    report = report_json(parent, tmp_path)
    assert report["summary"]["findings"] == 6 and report["runs"]["runs"] == 2
    assert sorted(report["summary"]["corpora"]) == sorted(str(parent / f) for f in ("empty", "linalg", "nn"))
    listed = mpsfuzz("corpus", "list", str(parent), "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 6, listed.stdout[:500]
