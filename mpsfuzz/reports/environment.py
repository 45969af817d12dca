"""``python -m torch.utils.collect_env``, captured on the machine that finds a bug (the
versions block of an upstream issue). Started in the background when a campaign starts,
so waiting for it costs nothing by the time a finding needs it.

The output is kept for a day in a cache (``$MPSFUZZ_CACHE_DIR``, else
``$XDG_CACHE_HOME/mpsfuzz``, else ``~/.cache/mpsfuzz``), keyed by the machine, the
interpreter and the torch install it describes: collect_env imports torch in a process of
its own (3-4 s of CPU), and a daemon, a CI matrix or a test suite starts many campaigns
on one install. A new torch, another venv or another host is another key.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from ..atomic import CorpusWriteError, atomic_write_text

COLLECT_ENV_TIMEOUT_S = 120.0
CACHE_MAX_AGE_S = 24 * 3600.0
COLLECT_ENV = (sys.executable, "-W", "ignore", "-m", "torch.utils.collect_env")


def cache_dir() -> Path:
    explicit = os.environ.get("MPSFUZZ_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mpsfuzz"


def install_key() -> str:
    """What collect_env's output depends on: the host, this interpreter, and the torch
    install (its location and when it was written), found without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
        origin = spec.origin if spec is not None and spec.origin else ""
        stamp = os.stat(origin).st_mtime_ns if origin else 0
    except (ImportError, ValueError, OSError):
        origin, stamp = "", 0
    parts = (platform.node(), sys.executable, os.path.realpath(sys.executable), sys.version, origin, str(stamp))
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


class EnvironmentCapture:
    """collect_env's output for this install: from the cache when it is there and less
    than ``max_age_s`` old, else from a background run (whose output is then cached)."""

    def __init__(self, *, command=COLLECT_ENV, cache: Path | None = None, max_age_s: float = CACHE_MAX_AGE_S):
        self._text: str | None = None
        self._process = None
        self._cached = (cache if cache is not None else cache_dir()) / f"collect_env-{install_key()}.txt"
        try:
            if time.time() - self._cached.stat().st_mtime < max_age_s:
                self._text = self._cached.read_text()
                return
        except (OSError, UnicodeDecodeError):
            pass
        try:
            self._process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                             stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        except OSError as exc:
            self._text = f"(collect_env could not run: {exc})"

    @property
    def from_cache(self) -> bool:
        return self._process is None and self._text is not None and not self._text.startswith("(")

    def text(self) -> str:
        if self._text is None and self._process is not None:
            try:
                out, _ = self._process.communicate(timeout=COLLECT_ENV_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                out = ""
            lines = [ln for ln in (out or "").splitlines() if ln.strip() != "Collecting environment information..."]
            self._text = "\n".join(lines).strip()
            if self._text and self._process.returncode == 0:
                self._store(self._text)
            self._text = self._text or "(collect_env printed nothing)"
        return self._text or ""

    def _store(self, text: str) -> None:
        """Best effort: an unwritable cache only means the next campaign runs collect_env."""
        try:
            self._cached.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self._cached, text)
        except (OSError, CorpusWriteError):
            pass

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
