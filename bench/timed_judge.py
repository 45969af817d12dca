"""judge_case, timed: what bench/lane_profile.py hands a campaign's worker pool (a worker
imports the function it runs by module and name, so it lives in a module of its own)."""
from __future__ import annotations

import time

from mpsfuzz.oracles.judge import judge_case


def timed_judge(case, target, oracle_names) -> dict:
    """judge_case's summary, with the seconds it took under ``judge_s`` and when it
    started (``judge_at``, time.monotonic: system-wide, comparable with the driver's)."""
    at, started = time.monotonic(), time.perf_counter()
    summary = dict(judge_case(case, target, oracle_names))
    summary["judge_s"] = time.perf_counter() - started
    summary["judge_at"] = at
    summary["judged"] = f"{case.op} {case.variant} {','.join(r.dtype for r in case.inputs)}"
    return summary
