"""campaign/events_log.py: one JSON line per engine event (cases counted into progress
lines), rotation by size, and the disk cap that never deletes a finding."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from mpsfuzz.campaign.events_log import EventsLog, deletable, enforce_disk_cap, event_record
from mpsfuzz.corpus.daemon_state import DaemonState, save_state
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.events import (CampaignFinished, CampaignStarted, CaseFinished, FindingRecorded, HarnessError,
                            Notice, Stats)

from test_corpus_commands import make


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


STARTED = CampaignStarted(target_name="mps", target_spec="mps", device="mps", ops=("neg", "mm"),
                          oracles=("values",), seed=3, budget_s=None, max_cases=None)


def test_each_event_is_one_json_line(tmp_path):
    log = EventsLog(tmp_path, 1_000_000)
    finding = make()
    path = Corpus(tmp_path).record(finding)[0]
    log(STARTED)
    log(FindingRecorded(finding, path, True))
    log(HarnessError(stage="execute", op="neg", case_json={"op": "neg"}, error="TypeError: bad", traceback="T" * 10))
    log(Notice("worker died on neg; restarted"))
    stats = Stats(cases=12, valid=10, new_findings=1, elapsed_s=6.0, harness_errors=1)
    log(CampaignFinished(stats, ((finding, path, True),), "budget"))
    records = lines(tmp_path / "daemon" / "events.jsonl")
    assert [r["type"] for r in records] == ["CampaignStarted", "FindingRecorded", "HarnessError", "Notice",
                                            "CampaignFinished"]
    assert all(r["time"].endswith("Z") for r in records)
    assert records[0]["ops"] == ["neg", "mm"] and records[0]["seed"] == 3
    assert {k: records[1][k] for k in ("signature", "op", "oracle", "status", "path", "new")} == \
        {"signature": finding.signature, "op": "triu", "oracle": "values", "status": finding.status,
         "path": str(path), "new": True}
    assert records[2] == {"type": "HarnessError", "time": records[2]["time"], "stage": "execute", "op": "neg",
                          "error": "TypeError: bad"}
    assert records[3]["message"].startswith("worker died")
    assert records[4]["cases"] == 12 and records[4]["cases_per_s"] == 2.0 and records[4]["findings"] == 1


def test_an_unknown_event_is_written_from_its_fields():
    @dataclass(frozen=True)
    class WorkerRestarted:
        worker: int
        why: str
        where: Path
        case: object

    class HasJson:
        def to_json(self):
            return {"op": "neg"}
    record = event_record(WorkerRestarted(2, "died", Path("/x"), HasJson()))
    assert record["type"] == "WorkerRestarted"
    assert (record["worker"], record["why"], record["where"], record["case"]) == (2, "died", "/x", {"op": "neg"})
    json.dumps(record)


def test_cases_are_counted_into_progress_lines_at_most_every_30_s(tmp_path):
    clock = Clock()
    log = EventsLog(tmp_path, 1_000_000, clock=clock)
    for _ in range(100):
        clock.now += 0.1                # 100 cases in 10 s: no line yet
        log(CaseFinished("neg", valid=True, unsupported=False, shrinking=False))
    path = tmp_path / "daemon" / "events.jsonl"
    assert not path.exists()
    for _ in range(300):
        clock.now += 0.1
        log(CaseFinished("neg", valid=True, unsupported=False, shrinking=False))
    progress = lines(path)
    assert len(progress) == 1                   # at 30 s
    assert progress[0]["type"] == "progress" and progress[0]["cases"] == 300
    assert progress[0]["cases_per_s"] == pytest.approx(10.0)
    log(CampaignFinished(Stats(cases=400), (), "budget"))  # the rest before the summary
    tail = lines(path)
    assert [r["type"] for r in tail] == ["progress", "progress", "CampaignFinished"]
    assert tail[1]["cases"] == 400 and tail[1]["new_cases"] == 100


def test_the_log_rotates_by_size_and_keeps_three(tmp_path):
    log = EventsLog(tmp_path, 500)
    for i in range(200):
        log(Notice(f"notice number {i:04d} " + "x" * 40))
    folder = tmp_path / "daemon"
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["events.jsonl", "events.jsonl.1", "events.jsonl.2", "events.jsonl.3"]
    assert all(p.stat().st_size <= 500 for p in folder.iterdir())
    newest = lines(folder / "events.jsonl")[-1]["message"]
    assert newest.startswith("notice number 0199")
    # .1 holds what came just before the live file, .3 the oldest kept
    assert lines(folder / "events.jsonl.1")[-1]["message"] < lines(folder / "events.jsonl")[0]["message"]
    assert lines(folder / "events.jsonl.3")[-1]["message"] < lines(folder / "events.jsonl.2")[0]["message"]


@pytest.mark.parametrize("kwargs, words", [
    ({"max_bytes": 0}, "max_bytes=0"),
    ({"max_bytes": 100, "keep": 0}, "keep=0"),
    ({"max_bytes": 100, "progress_every_s": -1}, "progress_every_s=-1"),
])
def test_bad_options_are_refused_by_name(tmp_path, kwargs, words):
    with pytest.raises(ValueError, match=words):
        EventsLog(tmp_path, **kwargs)


def corpus_with_logs(root: Path) -> dict[str, Path]:
    """A daemon's corpus: findings, a merged finding, state, live and rotated events,
    run logs, worker logs, a repro script; mtimes oldest first in this order."""
    store = Corpus(root)
    finding = store.record(make())[0]
    other = store.record(make("neg", ("layout:0",)))[0]
    (root / "merged").mkdir()
    merged = root / "merged" / "old-values-0000.json"
    merged.write_text("{}" + " " * 5000)
    save_state(root, DaemonState(cases=5))
    files = {"finding": finding, "other": other, "merged": merged, "state": root / "daemon" / "state.json"}
    made = {
        "run_old": root / "runs" / "20250101T000000Z-1.json",
        "errors_old": root / "runs" / "20250101T000000Z-1.errors.jsonl",
        "events_3": root / "daemon" / "events.jsonl.3",
        "worker_log": root / "daemon" / "logs" / "worker-1.log",
        "events_1": root / "daemon" / "events.jsonl.1",
        "run_new": root / "runs" / "20250301T000000Z-2.json",
        "events": root / "daemon" / "events.jsonl",
        "repro": root / "runs" / "repro-neg.py",
    }
    for n, (name, path) in enumerate(made.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x" * 10_000)
        os.utime(path, (1_700_000_000 + n * 100, 1_700_000_000 + n * 100))
    return {**files, **made}


def test_only_logs_are_deletable_oldest_first(tmp_path):
    files = corpus_with_logs(tmp_path)
    assert deletable(tmp_path) == [files[k] for k in ("run_old", "errors_old", "events_3", "worker_log",
                                                       "events_1", "run_new")]


def test_the_disk_cap_deletes_oldest_logs_until_under_it(tmp_path):
    files = corpus_with_logs(tmp_path)
    total = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    deleted = enforce_disk_cap(tmp_path, total - 15_000)
    assert deleted == [files["run_old"], files["errors_old"]]
    assert not files["run_old"].exists() and files["events_3"].exists()
    assert enforce_disk_cap(tmp_path, total) == []


def test_the_disk_cap_never_deletes_findings_repros_or_state(tmp_path):
    files = corpus_with_logs(tmp_path)
    deleted = enforce_disk_cap(tmp_path, 1)   # far below what the findings take
    assert len(deleted) == 6
    for name in ("finding", "other", "merged", "state", "events", "repro"):
        assert files[name].exists(), name
    assert len(list(tmp_path.glob("*.json"))) == 2
    with pytest.raises(ValueError, match="max_bytes=0"):
        enforce_disk_cap(tmp_path, 0)
