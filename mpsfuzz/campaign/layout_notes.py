"""The lines of a target's layout-propagation note a campaign sees (corpus/notes.py).

A case whose right values came in another memory format than eager CPU's is no bug to
file: a line of the target's note (op, layouts, dtypes, the two formats). A new line is
written at once (a killed run keeps it); the counts of lines seen again are added at the
end (:meth:`LayoutNotes.flush`).
"""
from __future__ import annotations

import threading

from ..corpus.notes import entry_key, record_layout_propagation
from ..oracles import Failure


def note_entry(case, failure: Failure) -> dict:
    """The note line of a case whose failure is a layout-propagation note."""
    return {"op": case.op, "layouts": sorted({r.describe_layout() for r in case.inputs if not r.is_plain()})
            or ["contiguous"], "dtypes": sorted({r.dtype for r in case.inputs}),
            "target_format": failure.details.get("target_format", ""),
            "cpu_format": failure.details.get("cpu_format", ""), "times_seen": 1,
            "example": case.to_json()}


class LayoutNotes:
    """The note lines of this run, by entry_key, written to ``corpus``; ``lock``: the
    campaign's (the desk's thread judges cases too)."""

    def __init__(self, corpus, *, lock=None):
        self.corpus = corpus
        self._lock = lock if lock is not None else threading.RLock()
        self._lines: dict[str, dict] = {}

    def note(self, case, failure: Failure, target_name: str, device: str) -> dict | None:
        """Count one case of a note line. Its entry where the line is the first of its op
        in this run and new to the note (the console says each op once: issue 30, H200,
        95 lines of notes; the note file lists every layout); else None."""
        entry = note_entry(case, failure)
        key = entry_key(entry)
        with self._lock:
            if key in self._lines:
                self._lines[key]["times_seen"] += 1
                return None
            self._lines[key] = dict(entry, times_seen=0)
            first_of_op = sum(e["op"] == case.op for e in self._lines.values()) == 1
        if record_layout_propagation(self.corpus, target_name, device, [entry]) and first_of_op:
            return entry
        return None

    def flush(self, target_name: str, device: str) -> None:
        """Add the counts of lines seen again in this run to the note."""
        again = [e for e in self._lines.values() if e["times_seen"]]
        self._lines = {}
        record_layout_propagation(self.corpus, target_name, device, again)
