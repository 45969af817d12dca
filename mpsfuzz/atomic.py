"""Writing the corpus safely: atomic JSON files and one error for a corpus that cannot be written.

Layer 0 (imports nothing of mpsfuzz): the corpus store, the worker's in-flight file and
the run logs all write through these. A write that fails because the corpus cannot be
written at all (a full disk, a read-only or unwritable folder) raises
:class:`CorpusWriteError`, which ends a campaign at once; other OSErrors are one case's.
"""
from __future__ import annotations

import errno
import json
import os
from contextlib import contextmanager
from pathlib import Path


# OSErrors that say the corpus cannot be written at all (full disk or quota, file size
# limit, read-only or forbidden, an I/O error, the folder gone or not a folder): every
# later write would fail as well. Other OSErrors (a name too long, ...) are one case's.
UNWRITABLE_ERRNOS = frozenset(getattr(errno, name) for name in (
    "ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EACCES", "EPERM", "EIO", "ENOENT", "ENOTDIR")
    if hasattr(errno, name))


class CorpusWriteError(Exception):
    """The corpus (a finding, the in-flight case file, a run log) cannot be written."""

    def __init__(self, path, reason: str):
        super().__init__(f"cannot write the corpus {path}: {reason}")
        self.path, self.reason = Path(path), reason


def is_unwritable(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in UNWRITABLE_ERRNOS


@contextmanager
def corpus_write(path):
    """Turns an OSError that says the corpus cannot be written into CorpusWriteError."""
    try:
        yield
    except OSError as exc:
        if is_unwritable(exc):
            raise CorpusWriteError(path, exc.strerror or str(exc)) from exc
        raise


def atomic_write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def atomic_write_text(path: Path, text: str) -> None:
    """``text`` to ``path`` whole or not at all: a reader (a report viewer, a restarted
    daemon) sees the old file or the new one; a full disk leaves no half-written temp
    file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with corpus_write(path):
        try:
            with open(tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
