"""``leak``: memory that a call to the op keeps after everything it returned is freed.

The executor measures, around the DUT's part of the case, the target's allocator
(``memory_allocated()``: MPS, CUDA) and the worker's resident memory (psutil). Growth past
a threshold is not yet a leak (a first call may build caches, plans or a workspace): the
executor then calls the op :data:`~mpsfuzz.execution.executor.REPEATS` more times on
fresh inputs and only memory that keeps growing on every call counts. Its
:class:`~mpsfuzz.execution.observation.LeakMeasurement` carries the thresholds the case
was measured against (they live with the measurement: the executor measures, this oracle
judges). Leaks key on the target and op (ClusterFuzz style): the signature is the op and
target, whatever the inputs.
"""
from __future__ import annotations

from . import Failure, oracle


def _mib(n: float) -> str:
    if abs(n) < 2**20:
        return f"{n / 2**10:.2f} KiB" if abs(n) >= 2**10 else f"{n:.0f} bytes"
    return f"{n / 2**20:.2f} MiB"


@oracle("leak", stage="case", doc="memory kept after each call (target allocator and process RSS, confirmed by repeats)")
def check_leak(obs) -> Failure | None:
    m = obs.cache.get("leak")   # the executor's LeakMeasurement, where it measured one
    if m is None:
        return None
    device, rss, threshold = m.device_per_call, m.rss_per_call, m.device_threshold
    if device < threshold and rss < m.rss_threshold:
        return None
    where = "the device allocator" if device >= threshold else "process memory (RSS)"
    amount = device if device >= threshold else rss
    return Failure(
        oracle="leak", kind="leak", severity="high",
        title=f"`{obs.spec.name}` leaks memory on {obs.target_name} ({_mib(amount)} per call)",
        message=(f"{where} grows by {_mib(amount)} per call over {m.repeats} repeated calls "
                 f"(device allocator {_mib(device)}/call, RSS {_mib(rss)}/call; "
                 f"first call: device {_mib(m.device_first)}, RSS {_mib(m.rss_first)})"),
        dedup_key=("leak", obs.target_name), details=m.to_json())
