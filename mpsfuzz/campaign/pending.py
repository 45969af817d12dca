"""DIR/triage-pending/: failures handed to triage and not yet recorded, one JSON each.

A campaign killed meanwhile loses none of them, and one past its stop grace leaves the
ones it did not finish there: the next campaign on the corpus triages them first (issue
37, point 2). Lanes (``run --jobs``) share what an earlier run left by a hash of each
file's name (``takes_share``); a file written since this run started is another lane's,
in triage now, and is left where it is.
"""
from __future__ import annotations

import json
import os
import threading
import time
import zlib
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from ..atomic import CorpusWriteError, atomic_write_json
from ..generation.recipes import Case
from ..oracles import Failure

PENDING_DIR = "triage-pending"
PENDING_FORMAT = 1


def takes_share(share: tuple[int, int] | None, name: str) -> bool:
    """Whether the leftover file ``name`` is in this campaign's part of what an earlier
    run left (``share``: (k, n), the k-th of n parts; None: nothing)."""
    return share is not None and zlib.crc32(name.encode()) % share[1] == share[0]


class Leftover(NamedTuple):
    """A failure an earlier run left pending."""
    path: Path
    case: Case
    failure: Failure
    signature: str
    flaky: bool


def remove(path: Path | None) -> None:
    """Remove a pending file (its failure recorded, or a sighting); gone already is fine."""
    if path is None:
        return
    try:
        os.unlink(path)
    except OSError:
        pass


class PendingFailures:
    """The triage-pending/ folder of ``corpus_dir``; ``share``: this campaign's part of
    what an earlier run left (CampaignConfig.leftovers)."""

    def __init__(self, corpus_dir, share: tuple[int, int] | None = (0, 1)):
        self.dir = Path(corpus_dir) / PENDING_DIR
        self.share = share
        self._written = 0
        self._lock = threading.Lock()   # the desk's thread keeps failures pending too

    def keep(self, err, flaky: bool) -> Path | None:
        """Write the failure (``err``: its .case, .failure and .signature) here until it
        is recorded; None where that cannot be written (the failure is still triaged,
        only not kept across a kill)."""
        with self._lock:
            self._written += 1
            number = self._written
        path = self.dir / f"{os.getpid()}-{number}-{err.signature[:12]}.json"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {"format": PENDING_FORMAT, "case": err.case.to_json(),
                                     "failure": err.failure.to_json(), "signature": err.signature, "flaky": flaky,
                                     "written": time.time()})
            return path
        except (OSError, CorpusWriteError):
            return None

    def earlier(self, before: float, on_error: Callable[[BaseException], None]) -> Iterator[Leftover]:
        """This campaign's part of the failures written before ``before`` (time.time()),
        in the order of their names. A file that cannot be read is told ``on_error`` and
        moved aside (``.corrupt``), never lost; one gone meanwhile (recorded by the
        campaign that wrote it) is skipped."""
        if self.share is None or not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.json")):
            if not takes_share(self.share, path.name):
                continue
            try:
                data = json.loads(path.read_text())
                if float(data.get("written", 0.0)) >= before:
                    continue    # another lane's, handed to its desk since this run started
                leftover = Leftover(path, Case.from_json(data["case"]), Failure.from_json(data["failure"]),
                                    str(data["signature"]), bool(data.get("flaky")))
            except FileNotFoundError:
                continue
            except Exception as exc:
                on_error(exc)
                try:
                    os.replace(path, path.with_suffix(".corrupt"))
                except OSError:
                    pass
                continue
            yield leftover
