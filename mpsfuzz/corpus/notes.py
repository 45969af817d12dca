"""Notes: what a target does differently from eager CPU that is no bug to file.

**Layout propagation.** A result with the right values in another memory format than
eager CPU's (CUDA keeps or drops channels_last where CPU does the other: pixel_shuffle,
pads, convolutions, norms, elementwise ops) is one question about a propagation rule
upstream, not one bug per op (an H200 run filed 13 such findings). Each target gets one
note, ``DIR/notes/layout-propagation-<target>.json``, listing the ops and input layouts
that do this, with how often and one example case each. It is never a finding, never
new, and sets no exit code.

Writes are read-modify-write under the corpus lock and atomic, like findings: lanes
sharing a corpus add to one note, and a killed writer leaves the old file or the new.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..atomic import atomic_write_json, corpus_write
from .finding import now_iso

NOTES_DIR = "notes"
NOTE_FORMAT = 1
LAYOUT_PROPAGATION = "layout-propagation"


def note_path(root: Path, target_name: str) -> Path:
    return Path(root) / NOTES_DIR / f"{LAYOUT_PROPAGATION}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', target_name)}.json"


def entry_key(entry: dict) -> str:
    """What makes two sightings one entry: the op, its inputs' layouts and dtypes, and
    the two memory formats."""
    return json.dumps([entry["op"], entry["layouts"], entry["dtypes"], entry["target_format"],
                       entry["cpu_format"]])


def read_note(path: Path) -> dict | None:
    """A note file's contents, or None where it is missing or unreadable (a bad note
    costs nothing found: it is rewritten from what the next run sees)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        return None
    return data


def record_layout_propagation(corpus, target_name: str, device: str, entries: list[dict]) -> int:
    """Add ``entries`` ({op, layouts, dtypes, target_format, cpu_format, times_seen,
    example}) to the target's note under the corpus lock; returns how many were new."""
    if not entries:
        return 0
    path = note_path(corpus.root, target_name)
    with corpus.locked():
        data = read_note(path) or {"format": NOTE_FORMAT, "kind": LAYOUT_PROPAGATION, "target": target_name,
                                   "device": device, "entries": []}
        by_key = {entry_key(e): e for e in data["entries"] if isinstance(e, dict) and "op" in e}
        new = 0
        for entry in entries:
            key = entry_key(entry)
            old = by_key.get(key)
            if old is None:
                by_key[key] = dict(entry, first_seen=entry.get("first_seen", now_iso()), last_seen=now_iso())
                new += 1
            else:
                old["times_seen"] = int(old.get("times_seen", 0)) + int(entry.get("times_seen", 1))
                old["last_seen"] = now_iso()
        data["entries"] = sorted(by_key.values(), key=lambda e: (e["op"], e["layouts"], e["dtypes"]))
        data["updated"] = now_iso()
        with corpus_write(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, data)
    return new


def layout_notes(roots) -> list[dict]:
    """Every layout-propagation note under the corpus folders ``roots``."""
    out = []
    for root in map(Path, roots):
        for path in sorted((root / NOTES_DIR).glob(f"{LAYOUT_PROPAGATION}-*.json")):
            data = read_note(path)
            if data is not None:
                out.append(dict(data, path=str(path)))
    return out
