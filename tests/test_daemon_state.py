"""corpus/daemon_state.py: the daemon's state file (round trip, a corrupt file moved aside
with a warning, atomic writes, liveness) and merging shards (sums, idempotent), also
through `mpsfuzz corpus merge`."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from mpsfuzz.atomic import CorpusWriteError
from mpsfuzz.campaign.scheduler import YieldScheduler
from mpsfuzz.cli import main
from mpsfuzz.corpus.daemon_state import (MAX_BEHAVIOURS, DaemonState, StateError, liveness, load_state,
                                         merge_states, read_state, save_state, state_path)
from mpsfuzz.corpus.store import Corpus

from test_corpus_commands import make


def a_state(**changes) -> DaemonState:
    s = DaemonState(started_at="2025-01-01T00:00:00Z", runs=2, uptime_s=3600.5, cases=1000, findings_new=3,
                    restarts=4, harness_errors=1, workers=2, torch_version_replayed="2.5.0",
                    heartbeat_at="2025-01-02T00:00:00Z", pid=os.getpid(), status="running")
    s.add_family("elementwise", cases=800, findings=2)
    s.add_family("linalg", cases=200, findings=1)
    s.add_behaviour(("neg", "float", "contiguous", "small", "pass"))
    s.add_finding(signature="abcd" * 4, op="neg", oracle="values", status="new", when="2025-01-01T12:00:00Z")
    sched = YieldScheduler(["neg", "mm"], seed=3)
    sched.record("neg", cases=800, seconds=100.0, new_findings=2, new_behaviours=5)
    s.scheduler = sched.to_json()
    for name, value in changes.items():
        setattr(s, name, value)
    return s


def test_a_missing_state_is_a_fresh_one(tmp_path):
    state = load_state(tmp_path)
    assert state.runs == 0 and state.status == "stopped" and state.load_warning is None
    assert read_state(tmp_path) is None


def test_round_trip(tmp_path):
    state = a_state()
    path = save_state(tmp_path, state)
    assert path == tmp_path / "daemon" / "state.json"
    back = load_state(tmp_path)
    assert back == state and back.load_warning is None
    assert back.to_json() == state.to_json()
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["behaviours"] == sorted(state.behaviours)
    assert "load_warning" not in data


def test_behaviours_count_once_and_the_kept_set_is_capped(monkeypatch):
    import mpsfuzz.corpus.daemon_state as ds
    state = DaemonState()
    assert state.add_behaviour(("a",)) and not state.add_behaviour(("a",))
    monkeypatch.setattr(ds, "MAX_BEHAVIOURS", 3)
    for k in "bcde":
        assert state.add_behaviour((k,))
    assert state.seen_behaviours == 5 and len(state.behaviours) == 3
    assert len(next(iter(state.behaviours))) == 16 and MAX_BEHAVIOURS == 200_000


def test_last_findings_keep_the_latest_twenty():
    state = DaemonState()
    for i in range(25):
        state.add_finding(signature=f"{i:016x}", op="neg", oracle="values", status="new")
    assert len(state.last_findings) == 20 and state.last_findings[-1]["signature"] == f"{24:016x}"


@pytest.mark.parametrize("content", [
    "{not json",
    "[1, 2]",
    json.dumps({"version": 99}),
    json.dumps({"version": 1, "cases": "many"}),
    json.dumps({"version": 1, "status": "dancing"}),
    "\xff\xfe garbage",
])
def test_a_corrupt_state_is_moved_aside_with_a_one_line_warning(tmp_path, content):
    path = state_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(content, errors="surrogateescape") if content.startswith("\xff") else path.write_text(content)
    with pytest.raises(StateError):
        read_state(tmp_path)          # readers only report it
    assert path.exists()
    state = load_state(tmp_path)      # the daemon goes on with a fresh state
    assert state.cases == 0
    assert state.load_warning and "\n" not in state.load_warning
    assert "starting afresh" in state.load_warning and "moved aside to state.json.corrupt-" in state.load_warning
    assert not path.exists()
    aside = list(path.parent.glob("state.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == content.encode("utf-8", "surrogateescape")
    path.write_text("{again")         # a second bad file within the second: both kept
    load_state(tmp_path)
    assert len(list(path.parent.glob("state.json.corrupt-*"))) == 2


def test_a_failed_write_leaves_the_old_state_whole(tmp_path, monkeypatch):
    save_state(tmp_path, a_state(cases=1))
    before = state_path(tmp_path).read_text()

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(CorpusWriteError, match="No space left"):
        save_state(tmp_path, a_state(cases=2))
    assert state_path(tmp_path).read_text() == before
    assert sorted(p.name for p in state_path(tmp_path).parent.iterdir()) == ["state.json"]  # no temp file


def test_a_corpus_that_cannot_hold_the_state_is_a_corpus_write_error(tmp_path):
    (tmp_path / "daemon").write_text("a file where the folder should be")
    with pytest.raises(CorpusWriteError):
        save_state(tmp_path, a_state())
    assert (tmp_path / "daemon").read_text().startswith("a file")


def test_liveness_running_died_stopped():
    assert liveness(a_state(pid=os.getpid())) == "running"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert liveness(a_state(pid=dead.pid)) == "died"
    assert liveness(a_state(status="stopped", pid=dead.pid)) == "stopped"
    assert liveness(a_state(status="killed")) == "killed"
    assert liveness(a_state(host="some-other-host")) == "elsewhere"


def test_a_daemons_life_start_heartbeats_stop():
    state = DaemonState()
    state.mark_started(workers=3)
    assert (state.runs, state.pid, state.status, state.workers) == (1, os.getpid(), "running", 3)
    first = state.started_at
    assert liveness(state) == "running"
    state.mark_alive(uptime_s=30.0)
    state.mark_alive(uptime_s=12.5)
    state.mark_stopped()
    assert (state.uptime_s, state.status, state.workers, liveness(state)) == (42.5, "stopped", 0, "stopped")
    state.mark_started()
    assert state.runs == 2 and state.started_at == first
    state.mark_stopped("killed")
    assert liveness(state) == "killed"
    with pytest.raises(ValueError, match="status='running'"):
        state.mark_stopped("running")
    with pytest.raises(ValueError, match="uptime_s=-1"):
        state.mark_alive(uptime_s=-1)


def test_merge_sums_counters_families_and_scheduler_ops():
    a, b = a_state(), a_state(started_at="2024-12-01T00:00:00Z", heartbeat_at="2025-02-01T00:00:00Z")
    b.add_behaviour(("mm", "float", "strided", "large", "pass"))
    b.add_finding(signature="ef" * 8, op="mm", oracle="errors", status="new", when="2025-01-03T00:00:00Z")
    m = merge_states([a, b])
    assert m.id == a.id and m.status == "stopped"
    assert (m.runs, m.uptime_s, m.cases, m.findings_new, m.restarts, m.harness_errors) == (4, 7201.0, 2000, 6, 8, 2)
    assert m.per_family == {"elementwise": {"cases": 1600, "findings": 4}, "linalg": {"cases": 400, "findings": 2}}
    assert m.scheduler["ops"]["neg"] == {"cases": 1600, "seconds": 200.0, "findings": 4, "behaviours": 10}
    assert m.scheduler["kind"] == "yield"
    assert YieldScheduler.from_json(m.scheduler, ["neg", "mm"]).stats()["neg"]["cases"] == 1600
    assert m.seen_behaviours == 2 and len(m.behaviours) == 2       # one shared, one b's own
    assert m.started_at == "2024-12-01T00:00:00Z" and m.heartbeat_at == "2025-02-01T00:00:00Z"
    assert [f["op"] for f in m.last_findings] == ["neg", "mm"]     # the same finding once, by time


def test_merging_a_shard_again_does_not_count_it_twice():
    dest, shard = a_state(cases=10, uptime_s=10.0), a_state(cases=100, uptime_s=100.0)
    once = merge_states([dest, shard])
    twice = merge_states([once, shard])
    assert once.cases == twice.cases == 110
    assert twice.per_family == once.per_family
    # the shard ran on: its newer counters replace its earlier contribution
    shard.cases, shard.uptime_s = 150, 150.0
    later = merge_states([twice, shard])
    assert later.cases == 160 and later.uptime_s == 160.0
    # the destination's daemon ran on after the merge: its own part grows, the shard's stays
    later.cases += 5
    assert merge_states([later, shard]).cases == 165


def test_merge_needs_states():
    with pytest.raises(ValueError, match=r"states=\[\]"):
        merge_states([])


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_corpus_merge_merges_daemon_states(tmp_path, capsys):
    a, b, dest = tmp_path / "a", tmp_path / "b", tmp_path / "dest"
    Corpus(a).record(make())
    Corpus(b).record(make("neg", ("layout:0",)))
    save_state(a, a_state(cases=100, uptime_s=100.0))
    save_state(b, a_state(cases=200, uptime_s=200.0))
    save_state(dest, a_state(cases=5, uptime_s=5.0))
    code, out, err = cli(capsys, "corpus", "merge", a, b, "--into", dest)
    assert code == 0, err
    assert "merged the daemon state of 2 source(s)" in out
    assert "state.json" not in err                       # never read as a finding
    assert read_state(dest).cases == 305
    code, _, _ = cli(capsys, "corpus", "merge", a, b, "--into", dest)   # again: no double count
    assert code == 0 and read_state(dest).cases == 305
    assert len(list(dest.glob("*.json"))) == 2


def test_corpus_merge_without_daemon_states_writes_none(tmp_path, capsys):
    a = tmp_path / "a"
    Corpus(a).record(make())
    code, out, _ = cli(capsys, "corpus", "merge", a, "--into", tmp_path / "dest")
    assert code == 0 and "daemon state" not in out
    assert not (tmp_path / "dest" / "daemon").exists()


def test_corpus_merge_skips_an_unreadable_source_state(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    Corpus(a).record(make())
    save_state(a, a_state(cases=7))
    state_path(b).parent.mkdir(parents=True)
    state_path(b).write_text("{bad")
    code, out, err = cli(capsys, "corpus", "merge", a, b, "--into", tmp_path / "dest")
    assert code == 0
    assert "skipping the daemon state" in out + err and "Traceback" not in out + err
    assert read_state(tmp_path / "dest").cases == 7
    assert state_path(b).exists()                         # a source is never moved


def test_a_daemon_corpus_without_findings_is_a_corpus(tmp_path, capsys):
    """Its daemon/ folder is not taken for a corpus of its own (state.json is no finding)."""
    a = tmp_path / "a"
    save_state(a, a_state(cases=9))
    code, _, err = cli(capsys, "corpus", "merge", a, "--into", tmp_path / "dest")
    assert code == 0 and "skipping" not in err
    assert read_state(tmp_path / "dest").cases == 9
