"""A correct target at a compiled target's pace: eager CPU that takes a while per call.

``--target mpsfuzz.testing.slow:target`` runs each op call on eager CPU after a pause of
``SECONDS_PER_CALL``: a case then costs about what one costs on ``cpu-compiled`` (Inductor
compiles the op for each new shape), without Inductor. What proves that a time budget
covers its selection (issue 37, point 4: slices sized from the budget, the ops and the
measured case rate) on a target where a fixed slice reaches only the first few ops.
"""
from __future__ import annotations

import time
from typing import Any, Callable

SECONDS_PER_CALL = 0.1


class SlowTarget:
    name = "slow-cpu"
    device = "cpu"

    def __init__(self, seconds_per_call: float = SECONDS_PER_CALL):
        self.seconds_per_call = seconds_per_call

    def is_available(self) -> bool:
        return True

    def run(self, fn: Callable, *args, **kwargs) -> Any:
        time.sleep(self.seconds_per_call)
        return fn(*args, **kwargs)

    def synchronize(self) -> None:
        pass

    def memory_allocated(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"<target {self.name}, {self.seconds_per_call:g}s a call>"


def target() -> SlowTarget:
    """Zero-argument factory for ``--target mpsfuzz.testing.slow:target``."""
    return SlowTarget()
