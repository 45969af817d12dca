"""A campaign's layout-propagation lines on their own (campaign/layout_notes.py, issue
39): a new line is written at once, the console is told once per op, and the counts of
lines seen again go to the note at the end. No campaign or worker."""
from __future__ import annotations

from mpsfuzz.campaign.layout_notes import LayoutNotes, note_entry
from mpsfuzz.corpus.notes import layout_notes
from mpsfuzz.corpus.store import Corpus
from mpsfuzz.generation.recipes import Case
from mpsfuzz.oracles import Failure

NOTE = Failure("metadata", "wrong-memory-format", "format", "format", "medium", ("wrong-memory-format",),
               details={"target_format": "contiguous", "cpu_format": "channels_last"}, blame="note")


def case(op: str, permutation=(), dtype="float32") -> Case:
    return Case.from_json({"format": 3, "op": op, "variant": "functional", "kwargs": {}, "inputs": [
        {"shape": [1, 2, 2, 2], "dtype": dtype, "alias": None,
         "layout": {"offset": 0, "gaps": [], "permutation": list(permutation), "expanded": []},
         "values": {"distribution": "small_int", "seed": 0, "low": None, "high": None, "specials": []}}]})


def test_a_note_line_is_what_the_case_and_its_formats_are():
    entry = note_entry(case("relu"), NOTE)
    assert entry["op"] == "relu" and entry["layouts"] == ["contiguous"] and entry["dtypes"] == ["float32"]
    assert (entry["target_format"], entry["cpu_format"], entry["times_seen"]) == ("contiguous", "channels_last", 1)
    assert Case.from_json(entry["example"]) == case("relu")


def test_new_lines_are_written_at_once_told_once_per_op_and_counted_at_the_end(tmp_path):
    corpus = Corpus(tmp_path)
    notes = LayoutNotes(corpus)
    permuted = case("relu", (0, 2, 3, 1))
    assert notes.note(case("relu"), NOTE, "faulty-cpu", "cpu")["op"] == "relu"      # told
    assert notes.note(permuted, NOTE, "faulty-cpu", "cpu") is None                   # a new line, same op
    assert notes.note(case("relu"), NOTE, "faulty-cpu", "cpu") is None               # seen again
    assert notes.note(case("gelu"), NOTE, "faulty-cpu", "cpu")["op"] == "gelu"
    (written,) = layout_notes([tmp_path])
    assert sorted(e["op"] for e in written["entries"]) == ["gelu", "relu", "relu"]
    assert sum(e["times_seen"] for e in written["entries"]) == 3                      # the repeat not yet
    notes.flush("faulty-cpu", "cpu")
    (flushed,) = layout_notes([tmp_path])
    assert sum(e["times_seen"] for e in flushed["entries"]) == 4
    notes.flush("faulty-cpu", "cpu")                                                  # nothing twice
    assert sum(e["times_seen"] for e in layout_notes([tmp_path])[0]["entries"]) == 4


def test_a_line_the_note_has_from_an_earlier_run_is_not_told_again(tmp_path):
    corpus = Corpus(tmp_path)
    assert LayoutNotes(corpus).note(case("relu"), NOTE, "faulty-cpu", "cpu") is not None
    assert LayoutNotes(corpus).note(case("relu"), NOTE, "faulty-cpu", "cpu") is None
