"""Scratch folders under the system's temporary directory, named by the process that
made them, and the ones dead processes left behind removed.

Layer 0 (imports nothing of mpsfuzz). A worker pool's folder (its workers' logs) and a
repro verification's folder are removed when they close, but not when their process is
killed: a lane killed past its stop grace, a daemon killed with SIGKILL, the OOM killer.
On a CI machine that keeps /tmp, an unattended daemon would leave one for each; the next
folder made with the same prefix removes those whose process is gone.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import psutil

# A folder this young is left alone even if its process looks gone: it may belong to a
# process of another PID namespace (a container sharing /tmp) that has only just made it.
MIN_AGE_S = 60.0


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory:
    """``TemporaryDirectory`` named ``{prefix}{pid}-...``, after removing the folders of
    that prefix whose process no longer runs."""
    remove_orphans(prefix)
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-")


def remove_orphans(prefix: str, root: Path | None = None) -> int:
    """Remove ``{prefix}{pid}-*`` folders of this user under ``root`` (the temporary
    directory) whose process is gone, older than MIN_AGE_S; how many went."""
    root = Path(root or tempfile.gettempdir())
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    removed = 0
    try:
        entries = list(os.scandir(root))
    except OSError:
        return 0
    now = time.time()
    for entry in entries:
        match = pattern.match(entry.name)
        if not match:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_dir(follow_symlinks=False) or now - st.st_mtime < MIN_AGE_S:
                continue
            if hasattr(os, "getuid") and st.st_uid != os.getuid():
                continue
            if psutil.pid_exists(int(match.group(1))):
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += not os.path.exists(entry.path)
    return removed
