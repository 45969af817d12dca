"""Output memory format is not a correctness bug (issue 30, point 2): a result with the
right values in another memory format than eager CPU's goes into one layout-propagation
note per target, listing the ops and layouts. It is never a finding, never new, and
sets no exit code."""
from __future__ import annotations

import json

import pytest

from mpsfuzz.corpus.finding import Finding
from mpsfuzz.corpus.notes import layout_notes, note_path, record_layout_propagation
from mpsfuzz.corpus.store import Corpus

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz


@pytest.mark.slow
def test_a_dropped_channels_last_is_a_note_not_a_finding(tmp_path):
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "relu", "--target", FAULT_TARGET, "--max-cases", "400", "--seed", "1",
                  "--corpus", str(corpus), "--timeout", "5", "--no-progress",
                  faults="relu_drops_channels_last", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr      # no exit code for a note
    assert findings_in(corpus) == [], run.stdout
    (note,) = layout_notes([corpus])
    assert note["target"] == "faulty-cpu" and note["path"] == str(note_path(corpus, "faulty-cpu"))
    assert {e["op"] for e in note["entries"]} == {"relu"}
    entry = note["entries"][0]
    assert entry["target_format"] == "contiguous" and entry["cpu_format"] == "channels_last"
    assert any("permuted" in layout or "channels_last" in layout for e in note["entries"] for layout in e["layouts"])
    assert sum(e["times_seen"] for e in note["entries"]) >= 1
    assert "layout propagation" in run.stdout
    # the report lists the note apart from the findings, in every format
    shown = mpsfuzz("report", str(corpus), "--format", "markdown", faults="none", cwd=tmp_path)
    assert "Layout propagation on faulty-cpu (not bugs)" in shown.stdout and "`relu`" in shown.stdout
    data = json.loads(mpsfuzz("report", str(corpus), "--format", "json", faults="none", cwd=tmp_path).stdout)
    assert data["layout_propagation"][0]["entries"][0]["op"] == "relu"
    assert data["summary"]["findings"] == 0


def test_notes_accumulate_under_the_lock_and_a_bad_note_loses_nothing(tmp_path):
    corpus = Corpus(tmp_path / "c")
    entry = {"op": "pad_reflect", "layouts": ["channels_last"], "dtypes": ["float32"], "target_format": "contiguous",
             "cpu_format": "channels_last", "times_seen": 2, "example": {}}
    assert record_layout_propagation(corpus, "cuda", "cuda", [entry]) == 1
    assert record_layout_propagation(corpus, "cuda", "cuda", [dict(entry, times_seen=3)]) == 0
    assert record_layout_propagation(corpus, "cuda", "cuda", [dict(entry, op="pixel_shuffle")]) == 1
    (note,) = layout_notes([corpus.root])
    assert [(e["op"], e["times_seen"]) for e in note["entries"]] == [("pad_reflect", 5), ("pixel_shuffle", 2)]
    note_path(corpus.root, "cuda").write_text("{not json")
    assert layout_notes([corpus.root]) == []
    assert record_layout_propagation(corpus, "cuda", "cuda", [entry]) == 1   # rewritten from what is seen now


def test_a_memory_format_finding_of_an_old_corpus_reads_as_a_note():
    from test_corpus import case
    from mpsfuzz.oracles import Failure
    old = Finding.create(case(), Failure(oracle="metadata", kind="wrong-memory-format", title="t", message="m",
                                         severity="low", dedup_key=("wrong-memory-format",)),
                         target_name="cuda", target_spec="cuda", device="cuda")
    again = Finding.from_json(json.loads(json.dumps(old.to_json())))
    assert again.status == "layout-propagation" and again.blame == "note"
