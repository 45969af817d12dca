"""`mpsfuzz status DIR` (reports/status.py): a running, a dead and a stopped daemon from
its state file and the tail of its event log; the table, --format json, bad folders."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mpsfuzz.campaign.events_log import EventsLog
from mpsfuzz.cli import main
from mpsfuzz.corpus.daemon_state import DaemonState, save_state, state_path
from mpsfuzz.events import CaseFinished, HarnessError, Notice
from mpsfuzz.reports.status import duration_words, status_model


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def daemon_state(**changes) -> DaemonState:
    s = DaemonState(started_at="2025-01-01T00:00:00Z", runs=3, uptime_s=7200.0, cases=36_000, findings_new=2,
                    restarts=5, harness_errors=2, workers=4, heartbeat_at="2025-01-01T02:00:00Z",
                    pid=os.getpid(), status="running", torch_version_replayed="2.6.0")
    s.add_family("elementwise", cases=30_000, findings=2)
    s.add_family("linalg", cases=6_000, findings=0)
    s.add_finding(signature="0123456789abcdef", op="neg", oracle="values", status="new",
                  when="2025-01-01T01:00:00Z")
    s.add_finding(signature="fedcba9876543210", op="cumsum", oracle="errors", status="known-bug",
                  when="2025-01-01T01:30:00Z")
    for name, value in changes.items():
        setattr(s, name, value)
    return s


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def with_events(root):
    clock = Clock()
    log = EventsLog(root, 1_000_000, clock=clock)
    for _ in range(600):               # 600 cases in 60 s: two progress lines at 10/s
        clock.now += 0.1
        log(CaseFinished("neg", valid=True, unsupported=False, shrinking=False))
    log(Notice("worker died on mm; restarted"))
    for i in range(7):
        log(HarnessError(stage="execute", op=f"op{i}", case_json=None, error=f"ValueError: broken {i}",
                         traceback=""))


def test_a_running_daemon(tmp_path, capsys):
    save_state(tmp_path, daemon_state())
    with_events(tmp_path)
    code, out, err = cli(capsys, "status", tmp_path)
    assert code == 0, err
    assert "running" in out and f"pid {os.getpid()}" in out
    assert "36,000 (10.0/s, recent)" in out
    assert "2h 00m over 3 run(s)" in out
    assert "4 (5 restart(s))" in out
    for words in ("elementwise", "30,000", "linalg", "6,000", "neg", "cumsum", "known-bug", "0123456789abcdef"):
        assert words in out, words
    assert out.index("cumsum") < out.index("0123456789abcdef")    # the newest finding first
    assert "last harness errors" in out
    assert "op6: ValueError: broken 6" in out and "broken 1" not in out   # the last five
    assert "2.6.0" in out


def test_a_running_daemon_without_a_recent_heartbeat_is_flagged(tmp_path, capsys):
    from mpsfuzz.corpus.daemon_state import now_iso, parse_iso
    save_state(tmp_path, daemon_state(heartbeat_at=now_iso()))
    assert status_model(tmp_path)["heartbeat_stale"] is False
    _, out, _ = cli(capsys, "status", tmp_path)
    assert "stuck?" not in out
    late = parse_iso(now_iso()) + 3600
    assert status_model(tmp_path, now=late)["heartbeat_stale"] is True
    save_state(tmp_path, daemon_state())          # heartbeat in 2025: long ago
    _, out, _ = cli(capsys, "status", tmp_path)
    assert "stuck?" in out


def test_a_daemon_whose_pid_is_gone_died(tmp_path, capsys):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    save_state(tmp_path, daemon_state(pid=gone.pid))
    code, out, _ = cli(capsys, "status", tmp_path)
    assert code == 0
    assert "died" in out and f"pid {gone.pid} is gone" in out


def test_a_stopped_daemon_without_events_rates_over_its_uptime(tmp_path, capsys):
    save_state(tmp_path, daemon_state(status="stopped", pid=None))
    code, out, _ = cli(capsys, "status", tmp_path)
    assert code == 0 and "stopped" in out
    assert "36,000 (5.0/s, over the uptime)" in out
    assert "harness errors" in out and "last harness errors" not in out


def test_json_format(tmp_path, capsys):
    save_state(tmp_path, daemon_state())
    with_events(tmp_path)
    code, out, _ = cli(capsys, "status", tmp_path, "--format", "json")
    assert code == 0
    model = json.loads(out)
    assert model["status"] == "running" and model["pid"] == os.getpid()
    assert (model["cases"], model["cases_per_s"], model["cases_per_s_from"]) == (36_000, 10.0, "progress")
    assert model["per_family"] == [{"family": "elementwise", "cases": 30_000, "findings": 2},
                                   {"family": "linalg", "cases": 6_000, "findings": 0}]
    assert model["workers"] == 4 and model["harness_errors"] == 2
    assert [e["op"] for e in model["last_harness_errors"]] == ["op2", "op3", "op4", "op5", "op6"]
    assert [f["op"] for f in model["last_findings"]] == ["neg", "cumsum"]


def test_the_rotated_log_is_read_where_the_live_one_just_started(tmp_path):
    save_state(tmp_path, daemon_state())
    with_events(tmp_path)
    live = tmp_path / "daemon" / "events.jsonl"
    os.replace(live, live.with_name("events.jsonl.1"))
    live.write_text('{"type": "Notice", "message": "fresh"}\nnot json\n')
    model = status_model(tmp_path)
    assert model["cases_per_s_from"] == "progress" and len(model["last_harness_errors"]) == 5


def test_text_from_the_files_is_not_read_as_markup(tmp_path, capsys):
    state = daemon_state()
    state.add_family("[bold]x[/]", cases=1)
    save_state(tmp_path, state)
    code, out, _ = cli(capsys, "status", tmp_path)
    assert code == 0 and "[bold]x[/]" in out


@pytest.mark.parametrize("make, words", [
    (lambda p: p / "missing", "no such corpus folder"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "no such corpus folder"),
    (lambda p: p, "no daemon has run in this corpus"),
    (lambda p: (state_path(p).parent.mkdir(parents=True), state_path(p).write_text("{bad"), p)[-1],
     "cannot read the daemon state"),
])
def test_bad_dir_is_one_line_and_exit_2(tmp_path, capsys, make, words):
    code, out, err = cli(capsys, "status", make(tmp_path))
    assert code == 2
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_status_does_not_move_a_corrupt_state_aside(tmp_path, capsys):
    state_path(tmp_path).parent.mkdir(parents=True)
    state_path(tmp_path).write_text("{bad")
    cli(capsys, "status", tmp_path)
    assert state_path(tmp_path).read_text() == "{bad"


@pytest.mark.parametrize("seconds, words", [(None, "-"), (12, "12s"), (250, "4m 10s"), (7500, "2h 05m"),
                                            (3 * 86400 + 4 * 3600 + 5, "3d 4h")])
def test_duration_words(seconds, words):
    assert duration_words(seconds) == words
