"""The corpus folder: one JSON file per distinct signature, written atomically.

Writers take an exclusive lock on ``.lock`` for each read-modify-write, so two runs
sharing a folder never lose a sighting; each write is a temp file, fsync and rename, so
a writer killed mid-write leaves the old file or the new one, never half of one. A
corrupt or unreadable file is reported with its path and skipped (and moved aside to
``*.corrupt`` rather than overwritten); files are never loaded with pickle.

A corpus that cannot be written (a full disk, a read-only or unwritable folder) raises
:class:`CorpusWriteError`: it ends a campaign at once (exit 2, one line), since every
later finding would be lost too; whatever is already on disk stays as it was.
"""
from __future__ import annotations

import json
import os
import re
import socket
import uuid
from contextlib import contextmanager
from pathlib import Path

# The write primitives live in layer 0 (the worker's in-flight file uses them too);
# re-exported here, where the corpus's users look for them.
from ..atomic import CorpusWriteError, atomic_write_json, corpus_write  # noqa: F401
from .daemon_state import DAEMON_DIR
from .finding import Finding, now_iso

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


CORPUS_META = ".corpus-id"   # JSON {"format": 1, "id": ...}: names this folder as a writer


class Corpus:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self._id: str | None = None

    def path_for(self, finding: Finding) -> Path:
        # A flaky finding keys on its op alone, whichever oracle saw it: so does its name.
        return self.path_of(finding.op, "flaky" if finding.flaky else finding.oracle, finding.signature)

    def path_of(self, op: str, oracle: str, signature: str) -> Path:
        return self.root / f"{_safe(op)}-{oracle}-{signature}.json"

    @property
    def writer_id(self) -> str:
        """This folder's id: sightings recorded here count under it (see Finding.sightings)."""
        if self._id is None:
            meta = self.root / CORPUS_META
            with self._locked():
                try:
                    self._id = str(json.loads(meta.read_text())["id"])
                except (OSError, ValueError, KeyError, TypeError):
                    self._id = f"{socket.gethostname()}-{uuid.uuid4().hex[:12]}"
                    atomic_write_json(meta, {"format": 1, "id": self._id})
        return self._id

    def check_writable(self) -> None:
        """Create the folder and write a file in it (at the start of a run): an
        unwritable corpus stops the run before any case, with CorpusWriteError."""
        probe = self.root / f".write-check-{os.getpid()}"
        if self.root.exists() and not self.root.is_dir():
            raise CorpusWriteError(self.root, "not a folder")
        with corpus_write(self.root):
            self.root.mkdir(parents=True, exist_ok=True)
            with open(probe, "w") as f:
                f.write("ok\n")
                f.flush()
                os.fsync(f.fileno())
            os.unlink(probe)

    @contextmanager
    def _locked(self):
        with self._flocked(".lock"):
            yield

    def locked(self):
        """The corpus lock that every read-modify-write of its files holds (notes.py's too)."""
        return self._locked()

    @contextmanager
    def recording(self):
        """Held by a campaign while it decides whether a failure is a new finding and
        records it: campaigns sharing a corpus (``run --jobs``) then never record one bug
        twice. Its own lock file, since the writes inside take ``.lock``."""
        with self._flocked(".record-lock"):
            yield

    @contextmanager
    def _flocked(self, name: str):
        """An exclusive lock on ``name`` in the corpus folder (fcntl; none where absent)."""
        with corpus_write(self.root):
            self.root.mkdir(parents=True, exist_ok=True)
            lock = open(self.root / name, "a")
        with lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def load_new(self, seen: set[str]) -> list[tuple[Path, Finding]]:
        """The readable findings whose file names are not in ``seen`` (added to it): what
        other campaigns on this corpus recorded since."""
        fresh = []
        for path in self._finding_files():
            if path.name in seen:
                continue
            try:
                fresh.append((path, Finding.from_json(json.loads(path.read_text()))))
                seen.add(path.name)
            except (ValueError, OSError, UnicodeDecodeError):
                continue  # being written, or corrupt: load() reports those
        return fresh

    def _read(self, path: Path) -> Finding | None:
        """The finding at ``path``; an unreadable file is moved aside to ``*.corrupt``
        (never overwritten) and None returned."""
        try:
            return Finding.from_json(json.loads(path.read_text()))
        except (ValueError, OSError, UnicodeDecodeError):
            os.replace(path, _aside(path))
            return None

    def record(self, finding: Finding, extra_sightings: int = 0) -> tuple[Path, bool]:
        """Store a finding; if its signature is already here, count the sighting instead.
        Returns (path, is_new). The earliest (first recorded) minimal case is kept; a
        finding replayed as fixed that is found again gets a history entry saying so."""
        writer = self.writer_id
        path = self.path_for(finding)
        with self._locked():
            existing = self._read(path) if path.exists() else None
            if existing is not None:
                existing.add_sightings(writer, 1 + extra_sightings, finding.torch_version)
                existing.flaky = existing.flaky and finding.flaky
                if existing.fixed:
                    existing.record_replay("still-fails", target=finding.target_spec, device=finding.device,
                                           detail="found again by mpsfuzz run")
                atomic_write_json(path, existing.to_json())
                return path, False
            finding.sightings = {writer: 1 + extra_sightings}
            atomic_write_json(path, finding.to_json())
            return path, True

    def add_sightings(self, counts: dict[str, int]) -> None:
        """Count sightings of signatures already here ({signature: count}) in one pass."""
        if not counts:
            return
        writer = self.writer_id
        with self._locked():
            for path in self._finding_files():
                try:
                    data = json.loads(path.read_text())
                except (ValueError, OSError, UnicodeDecodeError):
                    continue
                if not isinstance(data, dict) or data.get("signature") not in counts:
                    continue
                finding = self._read(path)
                if finding is not None:
                    finding.add_sightings(writer, counts[finding.signature])
                    atomic_write_json(path, finding.to_json())

    def update(self, path: Path, change) -> Finding | None:
        """Read-modify-write one finding under the lock: ``change(finding)`` edits it."""
        with self._locked():
            finding = self._read(path) if path.exists() else None
            if finding is None:
                return None
            change(finding)
            atomic_write_json(path, finding.to_json())
            return finding

    def merge(self, found: list[tuple[Path, Finding]]) -> tuple[int, int]:
        """Merge findings from other corpora: new signatures are copied, ones already
        here absorbed (sightings per writer, versions, history). Returns (added, merged)."""
        added = merged = 0
        with self._locked():
            for _, other in found:
                path = self.path_for(other)
                existing = self._read(path) if path.exists() else None
                if existing is None:
                    atomic_write_json(path, other.to_json())
                    added += 1
                else:
                    existing.absorb(other)
                    atomic_write_json(path, existing.to_json())
                    merged += 1
        return added, merged

    def fold(self, general: Path, special: Path) -> bool:
        """Fold the finding at ``special`` into the one at ``general`` (same bug: the
        special one's minimal case meets the general one's conditions). The special file
        moves to ``merged/`` (nothing is deleted). False if either is gone or unreadable."""
        with self._locked():
            into = self._read(general) if general.exists() else None
            other = self._read(special) if special.exists() else None
            if into is None or other is None:
                return False
            dest = _free_name(self.root / MERGED / special.name)
            into.absorb_special_case(other, f"{MERGED}/{dest.name}")
            atomic_write_json(general, into.to_json())
            with corpus_write(dest):
                dest.parent.mkdir(exist_ok=True)
                os.replace(special, dest)
            return True

    def prune(self, keep, *, dry_run: bool = False) -> list[Path]:
        """Move every finding for which ``keep(finding)`` is false to ``pruned/``
        (nothing is deleted). Returns the paths moved (or that would be)."""
        moved: list[Path] = []
        with self._locked():
            for path, finding in self.load()[0]:
                if keep(finding):
                    continue
                moved.append(path)
                if not dry_run:
                    (self.root / PRUNED).mkdir(exist_ok=True)
                    # pruned before, found again: keep both
                    os.replace(path, _free_name(self.root / PRUNED / path.name))
        return moved

    def _finding_files(self) -> list[Path]:
        return _finding_files(self.root)

    def load(self) -> tuple[list[tuple[Path, Finding]], list[tuple[Path, str]]]:
        """(findings, problems): every readable finding, and each bad file with why."""
        return load_findings([self.root])


PRUNED = "pruned"
MERGED = "merged"
RUNS = "runs"  # run logs and harness-error logs (reports/run_log.py writes them)


def _free_name(path: Path) -> Path:
    """``path``, or ``stem.N.suffix`` with the first N that is free."""
    n = 1
    dest = path
    while dest.exists():
        dest = path.with_name(f"{path.stem}.{n}{path.suffix}")
        n += 1
    return dest


def _aside(path: Path) -> Path:
    target = path.with_suffix(".corrupt")
    n = 1
    while target.exists():
        target = path.with_suffix(f".corrupt{n}")
        n += 1
    return target


def _finding_files(root: Path) -> list[Path]:
    return sorted(q for q in root.glob("*.json") if not q.name.startswith((".", "inflight")))


def corpus_folders(paths) -> list[Path]:
    """``paths`` with each folder that holds no finding of its own replaced by its
    subfolders that do: a folder of corpora (``bench/families.py`` writes one corpus per
    family under ``DIR/<target>/``) reads as all of them. A corpus's own ``runs/``,
    ``merged/``, ``pruned/`` and ``daemon/`` (its ``state.json`` is no finding) are never
    corpora; a folder with a ``daemon/`` is one, findings or not."""
    def is_corpus(d: Path) -> bool:
        return bool(_finding_files(d)) or (d / RUNS).is_dir() or (d / DAEMON_DIR).is_dir()

    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir() and not is_corpus(p):
            subs = [d for d in sorted(p.iterdir())
                    if d.is_dir() and d.name not in (PRUNED, MERGED, RUNS, DAEMON_DIR) and is_corpus(d)]
            out += subs or [p]
        else:
            out.append(p)
    return out


def load_findings(paths) -> tuple[list[tuple[Path, Finding]], list[tuple[Path, str]]]:
    files: list[Path] = []
    problems: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += _finding_files(p)
        elif p.is_file():
            files.append(p)
        else:
            problems.append((p, "no such file or folder"))
    found = []
    for f in files:
        try:
            found.append((f, Finding.from_json(json.loads(f.read_text()))))
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            problems.append((f, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    return found, problems
