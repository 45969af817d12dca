"""How much device memory a case of the large family may take, asked of the device.

The large family (generation/ops/large.py, large_rows.py) draws within ``--max-bytes``
(GenerationSettings.max_bytes, handed to every process; campaign/plan.py sets it from
:func:`plan`). That bound is per case, and each of N lanes
has a case in flight: two lanes with 40 GB each filled an 80 GB GPU. So the bound is
capped by what the device has free, split over the lanes, halved (the op's own
allocations and outputs need room beside its input). The daemon also turns the family on
by itself where the device has at least ``AUTO_MIN_FREE`` free (``--no-large`` keeps it
off); ``run`` only with ``--large``.

The free memory is asked in a short child process: asking in this one would give the
campaign's own process a CUDA context (hundreds of MB of device and host memory kept for
its lifetime) that it never uses.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

AUTO_MIN_FREE = 8 << 30          # the daemon draws large sizes from 8 GiB free on

_QUERY = {
    "cuda": "import torch; print(torch.cuda.mem_get_info({index})[0])",
    # what Metal recommends this process keep under, less what the driver holds already
    "mps": "import torch; print(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())",
}


def free_device_memory(device: str, timeout_s: float = 60.0) -> int | None:
    """Bytes free on ``device`` ("cuda", "cuda:1", "mps"), or None where it cannot be
    told (a CPU device, a failed query)."""
    kind, _, index = str(device).partition(":")
    query = _QUERY.get(kind)
    if query is None:
        return None
    try:
        done = subprocess.run([sys.executable, "-c", query.format(index=index or "")], capture_output=True,
                              text=True, timeout=timeout_s)
        return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class LargeSizing:
    enabled: bool
    max_bytes: int | None            # the bound to use (None: leave --max-bytes as it is)
    free: int | None
    note: str


def plan(*, asked: bool, auto: bool, refused: bool, free: int | None, jobs: int,
         max_bytes: int | None) -> LargeSizing:
    """Whether the large family runs and within what bound. ``asked``: ``--large``;
    ``auto``: the daemon, which turns it on by itself where ``free`` allows;
    ``refused``: ``--no-large``; ``max_bytes``: ``--max-bytes`` if given."""
    enabled = asked or (auto and not refused and free is not None and free >= AUTO_MIN_FREE)
    if not enabled:
        why = ("--no-large" if refused else "no free device memory figure" if free is None
               else f"{free / 2**30:.1f} GiB free, under {AUTO_MIN_FREE >> 30} GiB")
        return LargeSizing(False, None, free, f"large sizes off ({why})" if auto else "")
    if free is None:
        return LargeSizing(True, None, None, "large sizes on; free device memory unknown: --max-bytes as given")
    share = free // (2 * max(1, jobs))
    bound = share if max_bytes is None else min(max_bytes, share)
    lowered = max_bytes is not None and bound < max_bytes
    note = (f"large sizes on: {free / 2**30:.1f} GiB free on the device, each case within "
            f"{bound / 2**30:.1f} GiB (half the free memory over {jobs} lane(s))")
    if lowered:
        note += f"; --max-bytes lowered from {max_bytes / 2**30:.1f} GiB"
    return LargeSizing(True, bound, free, note)
