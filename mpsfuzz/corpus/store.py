"""The corpus folder: one JSON file per distinct signature, written atomically.

Writers take an exclusive lock on ``.lock`` for each read-modify-write, so two runs
sharing a folder never lose a sighting. A corrupt or unreadable file is reported with
its path and skipped; files are never loaded with pickle.
"""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

from .finding import Finding, now_iso

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def atomic_write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Corpus:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path_for(self, finding: Finding) -> Path:
        return self.root / f"{_safe(finding.op)}-{finding.oracle}-{finding.signature}.json"

    @contextmanager
    def _locked(self):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def record(self, finding: Finding, extra_sightings: int = 0) -> tuple[Path, bool]:
        """Store a finding; if its signature is known, count the sighting instead.
        Returns (path, is_new). The earliest (first recorded) minimal case is kept."""
        path = self.path_for(finding)
        with self._locked():
            if path.exists():
                try:
                    existing = Finding.from_json(json.loads(path.read_text()))
                except (ValueError, OSError):
                    # Never overwrite a file we cannot read: keep it beside the new one.
                    os.replace(path, path.with_suffix(".corrupt"))
                else:
                    existing.times_seen += finding.times_seen + extra_sightings
                    existing.last_seen = now_iso()
                    existing.flaky = existing.flaky and finding.flaky
                    atomic_write_json(path, existing.to_json())
                    return path, False
            finding.times_seen += extra_sightings
            atomic_write_json(path, finding.to_json())
            return path, True

    def add_sightings(self, signature: str, count: int) -> None:
        for path, finding in self.load()[0]:
            if finding.signature == signature:
                with self._locked():
                    finding.times_seen += count
                    finding.last_seen = now_iso()
                    atomic_write_json(path, finding.to_json())
                return

    def load(self) -> tuple[list[tuple[Path, Finding]], list[tuple[Path, str]]]:
        """(findings, problems): every readable finding, and each bad file with why."""
        return load_findings([self.root])


def load_findings(paths) -> tuple[list[tuple[Path, Finding]], list[tuple[Path, str]]]:
    files: list[Path] = []
    problems: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(q for q in p.glob("*.json") if not q.name.startswith((".", "inflight")))
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
